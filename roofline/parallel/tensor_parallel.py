"""Tensor parallelism: every matmul split over ``tp`` GPUs, two all-reduces per block (chapter 8).

Megatron-LM's layout (Shoeybi et al. 2019): in each block the first matmul is split by columns (q, k and v
by heads; gate and up by the MLP's width) and the second by rows (o_proj, down_proj), so each GPU runs its
slice of the block with no exchange in between and ends with a partial sum of the block's output, which an
all-reduce over the ``tp`` GPUs completes: one after attention, one after the MLP, in the forward pass; in
the backward pass the same two, on the gradients of the blocks' inputs. The embedding and the output head
are split over the vocabulary. Norms and residual adds are not split: every GPU runs them on the whole
hidden state (sequence parallelism, Korthikanti et al. 2023, splits them along the sequence instead and
turns each all-reduce into a reduce-scatter and an all-gather of the same bytes).

The per-GPU work is the unsplit workload of a narrower model (:func:`shard_model`): ``num_heads / tp`` query
heads, ``intermediate_size / tp``, ``vocab_size / tp`` (rounded up: Megatron pads the vocabulary), the same
hidden size, the same norms. :func:`roofline.workloads.inference.decode_step`, :func:`~roofline.workloads.inference.prefill` and
:func:`roofline.workloads.training.training_step` count it unchanged, so every accounting of chapters 1 to 6 carries
over. KV heads: each GPU keeps the KV heads of its query heads, ``num_kv_heads / tp`` of them; with more GPUs
than KV heads each GPU keeps one, and each KV head is stored on ``tp / num_kv_heads`` GPUs (vLLM's
replication); ``tp`` must divide the KV heads or be a multiple of them.

The exchanges are :class:`Exchange` records (a collective, its buffer size, how many per step), priced by
:func:`roofline.core.collectives.collective_cost` when the step is timed (:func:`predict_tp`): hierarchically
(``gpus_per_node``: NVLink inside a node, the network across nodes) unless ``tier=`` names one tier for every
byte. They are not overlapped with the compute: each all-reduce sits between a block's last matmul and the
next norm, which needs its result, so the step time is the per-GPU compute time plus the exchanges' time.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import NamedTuple

import numpy as np

from roofline.core.checks import broadcast, number
from roofline.core.collectives import collective_cost
from roofline.core.cost import Breakdown
from roofline.core.formats import formats as make_formats
from roofline.core.hardware import Hardware, get_hardware
from roofline.workloads.inference import decode_step, prefill, verify_step
from roofline.core.model import Model, NotModelledError, load_model
from roofline.core.network import gpu_count
from roofline.core.policies import recompute_policy
from roofline.core.roof import Prediction, predict
from roofline.workloads.kv_cache import largest_batch
from roofline.workloads.memory import activation_bytes, saved_tensors
from roofline.workloads.training import TrainingPlan, plan_training, training_step
from roofline.core.units import dtype_bytes

__all__ = ["PUBLISHED", "Exchange", "TPStep", "TPPrediction", "check_tp", "shard_model", "kv_heads_per_gpu",
           "tp_verify_step",
           "tp_decode_step", "tp_prefill", "tp_training_step", "predict_tp", "TPTrainingPlan", "tp_training_plan",
           "tp_intensity", "tier_ridge",
           "hiding_width", "layer_times", "linear_shard", "weights_per_gpu", "DegreePoint", "decode_by_degree", "best_degree"]

PUBLISHED = MappingProxyType({
    "megatron_scaling_efficiency": (0.76, "Shoeybi et al. 2019, abstract: 15.1 PFLOP/s on 512 V100s for an 8.3B "
                                          "model, 76% scaling efficiency against one GPU's 39 TFLOP/s"),
    "megatron_single_gpu_flops": (39e12, "Shoeybi et al. 2019, abstract: the single-GPU baseline, 30% of peak"),
    "megatron_gpus": (512, "Shoeybi et al. 2019, abstract"),
    "nvidia_405b_tp_over_pp_min_latency": (5.6, "NVIDIA technical blog, 'Boosting Llama 3.1 405B Throughput by "
                                                "Another 1.5x on NVIDIA H200 Tensor Core GPUs and NVLink Switch' "
                                                "(2024): at minimum latency, TP 8 gives 5.6x the output tokens/s "
                                                "per user of PP 8 on an HGX H200, FP8"),
})
"""Published figures the chapter sets beside its predictions: (value, where it was published)."""


def _tp(tp) -> int:
    t = number("tp", tp, integer=True)
    if np.ndim(t):
        raise TypeError(f"tp (the tensor-parallel degree) must be one whole number, got an array of shape {np.shape(t)}")
    return int(t)


def check_tp(model: Model | str, tp, *, gpus_per_node=None) -> Model:
    """The model, after checking that ``tp`` GPUs can split it Megatron's way; a ``ValueError`` naming ``tp``
    otherwise: ``tp`` must divide the query heads and the MLP's width, and divide the KV heads or be a
    multiple of them; with ``gpus_per_node``, ``tp`` must not exceed it (the all-reduces would leave NVLink).
    Mixture-of-experts and latent-attention models raise :class:`~roofline.core.model.NotModelledError`."""
    m = load_model(model)
    t = _tp(tp)
    if m.moe is not None or m.mla is not None:
        raise NotModelledError(f"tensor parallelism of {m.name}: "
                               f"{'experts' if m.moe is not None else 'latent attention'} are not split here "
                               "(chapter 10 places experts); dense models only")
    if gpus_per_node is not None:
        g = int(number("gpus_per_node", gpus_per_node, integer=True))
        if t > g:
            raise ValueError(f"tp must be at most the {g} GPUs of a node: tensor parallelism all-reduces twice per "
                             f"layer and belongs on NVLink; got tp={t} (for more GPUs, add pipeline or data "
                             "parallelism)")
    if m.num_heads % t:
        divisors = [d for d in range(1, m.num_heads + 1) if m.num_heads % d == 0 and d <= 64]
        raise ValueError(f"tp must divide {m.name}'s {m.num_heads} query heads, got tp={t} "
                         f"(try {', '.join(map(str, divisors[-6:]))})")
    if m.intermediate_size % t:
        raise ValueError(f"tp must divide {m.name}'s MLP width ({m.intermediate_size}), got tp={t}")
    kv = m.num_kv_heads
    if (kv >= t and kv % t) or (kv < t and t % kv):
        raise ValueError(f"tp must divide {m.name}'s {kv} KV heads or be a multiple of them (each KV head then "
                         f"replicated on tp / {kv} GPUs), got tp={t}")
    return m


def kv_heads_per_gpu(model: Model | str, tp) -> int:
    """KV heads each GPU keeps: ``num_kv_heads / tp``, at least one (replicated when ``tp`` exceeds them)."""
    m = check_tp(model, tp)
    return max(m.num_kv_heads // _tp(tp), 1)


_ROW_PARALLEL = ("o_proj", "down_proj")
_REPLICATED = ("q_a_proj", "kv_a_proj_with_mqa")


def linear_shard(lin, tp: int, kv_heads: int) -> tuple[float, float]:
    """A linear's ``(out, in)`` on one GPU of a tensor-parallel group of ``tp``: column-parallel projections
    split their outputs, the attention output and MLP down projections their inputs, keys and values by
    ``min(tp, kv_heads)`` (a KV head is copied past that), the low-rank query and latent inputs replicated."""
    n, k = lin.out_features, lin.in_features
    base = lin.name.split(".")[-1]
    if base in _ROW_PARALLEL:
        return n, k / tp
    if base in _REPLICATED:
        return n, k
    if base in ("k_proj", "v_proj"):
        return n / min(tp, kv_heads), k
    return n / tp, k


def _shard_params(linears, tp: int, kv_heads: int) -> float:
    """Parameters (biases split as their outputs are) of ``linears`` on one GPU of a tensor-parallel group."""
    total = 0.0
    for lin in linears:
        n, k = linear_shard(lin, tp, kv_heads)
        total += lin.params * (n * k) / (lin.out_features * lin.in_features)
    return total


def weights_per_gpu(model: Model | str, *, tp=1, ep=1, pp=1, weights_dtype: str = "bf16",
                    head_dtype: str | None = None, redundant_experts: int = 0) -> float:
    """Weight bytes one GPU holds (chapters 8, 10 and 13), the one count every layout uses: the fullest of ``pp``
    pipeline stages (``ceil(L/pp)`` of the ``L`` layers, the embedding on the first stage and the output head on the
    last, both on a single one), each of a layer's linears split ``tp`` ways as :func:`linear_shard` splits it, the
    routed experts of a mixture spread over ``ep x tp`` GPUs (each holding ``1/(ep tp)`` of them), the norms whole on
    every GPU. The layers' linears are in ``weights_dtype``; the embedding table, the output head and the norms in
    ``head_dtype`` (default: the weights' format). ``tp = ep = pp = 1`` is the whole model,
    :func:`~roofline.workloads.memory.weight_bytes`. ``redundant_experts``: extra copies of busy routed experts
    (DeepSeek's and SGLang's load balancer, chapter 13), held beside the others: ``ep`` then divides the
    experts and their copies together."""
    m = load_model(model)
    tp, ep, pp = (int(number(n, v, integer=True)) for n, v in (("tp", tp), ("ep", ep), ("pp", pp)))
    L = m.num_layers
    slots = (m.moe.num_experts + int(number("redundant_experts", redundant_experts, integer=True, strict=False))
             if m.moe is not None else 0)
    if m.moe is not None and slots % ep:
        extra = f" and {slots - m.moe.num_experts} copies" if slots != m.moe.num_experts else ""
        raise ValueError(f"ep must divide the {m.moe.num_experts} experts{extra} of {m.name}, got {ep!r}")
    if pp > L:
        raise ValueError(f"pp must be at most the {L} layers of {m.name}, got {pp}")
    if m.num_heads % tp:
        raise ValueError(f"tp must divide {m.name}'s {m.num_heads} attention heads, got {tp}")
    moe_layers = m.moe.moe_layers(L) if m.moe is not None else 0
    kv = m.num_kv_heads
    per = _shard_params(m.attention_linears(), tp, kv) * L + _shard_params(m.dense_mlp_linears(), tp, kv) * (L - moe_layers)
    if moe_layers:
        routed = sum(lin.params for lin in m.expert_linears()) * slots / (ep * tp)
        per += (routed + _shard_params(m.shared_expert_linears(), tp, kv) + m.router().params) * moe_layers
    stage = -(-L // pp) / L  # the fullest stage's share of the layers
    ends = m.embedding_params + m.lm_head_params if pp == 1 else max(m.embedding_params, m.lm_head_params)
    return float(per * stage * dtype_bytes(weights_dtype)
                 + (ends / tp + m.norm_params * stage) * dtype_bytes(head_dtype or weights_dtype))


def shard_model(model: Model | str, tp) -> Model:
    """The slice of ``model`` one of ``tp`` tensor-parallel GPUs holds, as a model of its own: a ``tp``-th of
    the query heads, of the MLP's width and of the vocabulary (rounded up), the KV heads of
    :func:`kv_heads_per_gpu`, the same hidden size, layers and norms. ``shard_model(m, 1)`` is ``m``."""
    m = check_tp(model, tp)
    t = _tp(tp)
    if t == 1:
        return m
    return replace(m, name=f"{m.name}-tp{t}", num_heads=m.num_heads // t, num_kv_heads=kv_heads_per_gpu(m, t),
                   intermediate_size=m.intermediate_size // t, vocab_size=-(-m.vocab_size // t))


class Exchange(NamedTuple):
    """One kind of collective in a tensor-parallel step: ``count`` calls of ``collective`` over the ``tp``
    GPUs on a ``size``-byte buffer (each GPU's, as nccl-tests counts it), in ``phase``."""

    name: str
    collective: str
    size: object
    count: int
    phase: str = "forward"


@dataclass(frozen=True)
class TPStep:
    """A step of ``model`` split over ``tp`` GPUs (the field ``t``): ``work``, one GPU's kernels (a
    :class:`~roofline.core.cost.Breakdown` of the shard), ``exchanges``, the collectives among the ``tp``,
    and ``tokens``, the tokens the step runs for the whole group (decode: one per sequence; prefill and
    training: every token of every sequence)."""

    model: Model
    t: int
    work: Breakdown
    exchanges: tuple
    tokens: object = None

    @property
    def collectives(self) -> int:
        """Collective calls per step."""
        return sum(e.count for e in self.exchanges)

    def exchange(self, name: str) -> Exchange:
        for e in self.exchanges:
            if e.name == name:
                return e
        raise KeyError(f"no exchange {name!r}; the exchanges are {', '.join(e.name for e in self.exchanges)}")


def _layer_exchanges(m: Model, size, phase: str, sequence_parallel: bool) -> list:
    """The two collectives of every block (four with sequence parallelism: a reduce-scatter where the
    all-reduce was, and an all-gather before the next block's first matmul)."""
    n = m.num_layers
    if not sequence_parallel:
        return [Exchange("attention all-reduce", "all_reduce", size, n, phase),
                Exchange("mlp all-reduce", "all_reduce", size, n, phase)]
    return [Exchange("attention all-gather", "all_gather", size, n, phase),
            Exchange("attention reduce-scatter", "reduce_scatter", size, n, phase),
            Exchange("mlp all-gather", "all_gather", size, n, phase),
            Exchange("mlp reduce-scatter", "reduce_scatter", size, n, phase)]


def _activation_bytes(kwargs) -> float:
    f = make_formats(kwargs.get("dtype", "bf16"), weights_dtype=kwargs.get("weights_dtype"),
                     kv_dtype=kwargs.get("kv_dtype"), math_dtype=kwargs.get("math_dtype"))
    return f.bytes("activations")


def _inference(kind: str, m: Model, t: int, tokens, out_rows, work: Breakdown, a: float) -> TPStep:
    h, exchanges = m.hidden_size, []
    if t > 1:
        size = tokens * h * a
        exchanges = [Exchange("embedding all-reduce", "all_reduce", size, 1),  # the vocabulary-split lookup
                     *_layer_exchanges(m, size, "forward", False),
                     Exchange("logits all-gather", "all_gather", out_rows * m.vocab_size * a, 1)]
    return TPStep(m, t, replace(work, name=f"{kind} of {m.name}, one of {t} tensor-parallel GPUs"), tuple(exchanges),
                  tokens)


def tp_decode_step(model: Model | str, tp, batch=1, context=0, *, gpus_per_node=None, **options) -> TPStep:
    """One decode step of ``model`` split over ``tp`` GPUs: each GPU's kernels
    (:func:`~roofline.workloads.inference.decode_step` of :func:`shard_model`, same ``options``) and the exchanges:
    one all-reduce of the embedded tokens, two per layer of ``batch x hidden`` activations, and an
    all-gather of the logits (a ``tp``-th of the vocabulary on each GPU). Broadcasts over ``batch`` and
    ``context``."""
    m = check_tp(model, tp, gpus_per_node=gpus_per_node)
    t = _tp(tp)
    work = decode_step(shard_model(m, t), batch, context, **options)
    b = number("batch", batch, integer=True)
    return _inference("decode step", m, t, b, b, work, _activation_bytes(options))


def tp_verify_step(model: Model | str, tp, queries, context=0, batch=1, *, gpus_per_node=None,
                   **options) -> TPStep:
    """Speculative decoding's verify step (:func:`~roofline.workloads.inference.verify_step`: ``queries`` new
    tokens of each of ``batch`` sequences against ``context`` cached ones) split over ``tp`` GPUs, with the
    exchanges of :func:`tp_decode_step` on ``batch x queries`` tokens: one all-reduce of the embedded tokens,
    two per layer, and an all-gather of every query's logits. ``queries=1`` is :func:`tp_decode_step`."""
    m = check_tp(model, tp, gpus_per_node=gpus_per_node)
    t = _tp(tp)
    work = verify_step(shard_model(m, t), queries, context, batch, **options)
    q, b = number("queries", queries, integer=True), number("batch", batch, integer=True)
    return _inference("verify step", m, t, q * b, q * b, work, _activation_bytes(options))


def tp_prefill(model: Model | str, tp, tokens, batch=1, *, gpus_per_node=None, **options) -> TPStep:
    """A prefill of ``batch`` prompts of ``tokens`` tokens split over ``tp`` GPUs (see
    :func:`tp_decode_step`); the logits gathered for every token, or the last with ``lm_head='last'``."""
    m = check_tp(model, tp, gpus_per_node=gpus_per_node)
    t = _tp(tp)
    work = prefill(shard_model(m, t), tokens, batch, **options)
    s, b = number("tokens", tokens, integer=True), number("batch", batch, integer=True)
    rows = b if options.get("lm_head") == "last" else s * b
    return _inference("prefill", m, t, s * b, rows, work, _activation_bytes(options))


def tp_training_step(model: Model | str, tp, seq, micro_batch=1, *, recompute: str = "none",
                     sequence_parallel: bool = False, gpus_per_node=None, **options) -> TPStep:
    """One micro-batch of training split over ``tp`` GPUs: each GPU's kernels
    (:func:`~roofline.workloads.training.training_step` of :func:`shard_model`) and the exchanges: two per layer in
    the forward pass, two in the backward pass (the gradients of the blocks' inputs), two more per layer
    that full recomputation runs again ('full', 'every-K'; 'selective' reruns only the attention core,
    which exchanges nothing), one on the embedded tokens, one on the output head's input gradient, and the
    vocabulary-split cross-entropy's three small all-reduces per token (fp32 maximum, sum and target
    logit). ``sequence_parallel`` turns each block's all-reduce into a reduce-scatter and an all-gather."""
    m = check_tp(model, tp, gpus_per_node=gpus_per_node)
    t = _tp(tp)
    if not isinstance(sequence_parallel, bool):
        raise TypeError(f"sequence_parallel must be True or False, got {sequence_parallel!r}")
    policy = recompute_policy(recompute)
    work = training_step(shard_model(m, t), seq, micro_batch, recompute=policy.name, **options)
    s, b = number("seq", seq, integer=True), number("micro_batch", micro_batch, integer=True)
    broadcast(seq=s, micro_batch=b)
    a = dtype_bytes(options.get("dtype", "bf16"))
    size = s * b * m.hidden_size * a
    exchanges = []
    if t > 1:
        exchanges = [Exchange("embedding all-reduce", "all_reduce", size, 1),
                     *_layer_exchanges(m, size, "forward", sequence_parallel),
                     Exchange("cross-entropy all-reduce", "all_reduce", s * b * 4.0, 3),
                     Exchange("lm_head input-gradient all-reduce", "all_reduce", size, 1, "backward"),
                     *_layer_exchanges(m, size, "backward", sequence_parallel)]
        if policy.every:  # every layer's forward runs again (training_step's count), its exchanges with it
            exchanges += _layer_exchanges(m, size, "recompute", sequence_parallel)
    name = f"training step of {m.title}, one of {t} tensor-parallel GPUs, recompute {policy.name}"
    return TPStep(m, t, replace(work, name=name), tuple(exchanges), s * b)


@dataclass(frozen=True)
class TPPrediction:
    """A :class:`TPStep` timed: ``compute`` (one GPU's kernels under the roof) plus the ``priced`` exchanges
    (``(Exchange, CollectiveCost)`` pairs, each cost for one call), not overlapped."""

    step: TPStep
    compute: Prediction
    priced: tuple

    @property
    def compute_time(self):
        return self.compute.time

    @property
    def comm_time(self):
        """Seconds in the collectives per step: every call's latency and transfer."""
        return sum((e.count * c.time for e, c in self.priced), 0.0)

    @property
    def comm_latency(self):
        """The part of :attr:`comm_time` that is latency (overheads and per-step alphas)."""
        return sum((e.count * c.latency for e, c in self.priced), 0.0)

    @property
    def comm_bytes(self):
        """Bytes each GPU sends per step, over every tier."""
        return sum((e.count * c.bytes for e, c in self.priced), 0.0)

    @property
    def time(self):
        return self.compute_time + self.comm_time

    @property
    def comm_share(self):
        return self.comm_time / self.time

    @property
    def time_per_token(self):
        """Seconds of the step per token it runs (:attr:`TPStep.tokens`): a decode step's time per output
        token divided by the batch."""
        return self.time / self.step.tokens

    @property
    def tokens_per_s_per_gpu(self):
        """Tokens per second per GPU: the step's tokens over its time, shared by the ``tp`` GPUs."""
        return self.step.tokens / self.time / self.step.t


def predict_tp(step: TPStep, hardware: Hardware | str, *, roof=None, timing: str = "step", gpus_per_node=8,
               tier: str | None = None, algorithm: str = "ring") -> TPPrediction:
    """Time a :class:`TPStep` on ``hardware``: one GPU's kernels under ``roof`` (the hardware's datasheet
    when None) by ``timing``, plus every exchange priced by :func:`roofline.core.collectives.collective_cost`
    over the ``tp`` GPUs, hierarchically with ``gpus_per_node`` or on the one ``tier`` given."""
    if not isinstance(step, TPStep):
        raise TypeError(f"step must be a TPStep (from tp_decode_step, tp_prefill or tp_training_step), "
                        f"got {type(step).__name__}")
    hw = get_hardware(hardware)
    compute = predict(step.work, hw if roof is None else roof, timing=timing)
    where = {"tier": tier} if tier is not None else {"gpus_per_node": gpus_per_node}
    priced = tuple((e, collective_cost(e.collective, step.t, e.size, hw, algorithm=algorithm, **where))
                   for e in step.exchanges)
    return TPPrediction(step, compute, priced)


@dataclass(frozen=True)
class TPTrainingPlan:
    """A training step of a model tensor parallel over ``tp`` GPUs, in ``gpus / tp`` data-parallel groups
    (chapter 8 on chapter 3's plan; the command ``roofline train --tp``).

    ``plan`` is one GPU's step as :func:`~roofline.workloads.training.plan_training` plans it for the GPU's
    shard (:func:`shard_model`): its memory, with the model state sharded by ZeRO over the data-parallel
    group, and its compute, with the data-parallel traffic overlapped. ``prediction`` prices the
    tensor-parallel exchanges of :func:`tp_training_step`, which are not overlapped: ``time`` is
    ``compute_time + collective_time``. ``mfu`` counts the shard's model FLOPs (one GPU's share of the
    model's, norms and the padded vocabulary included) against that time at the GPU's peak.
    """

    tp: int
    gpus: int
    plan: TrainingPlan
    prediction: TPPrediction

    @property
    def data_parallel(self) -> int:
        """Data-parallel groups of ``tp`` GPUs: ``gpus / tp``."""
        return self.gpus // self.tp

    @property
    def compute_time(self) -> float:
        """Seconds of one GPU's step without the tensor-parallel exchanges (chapter 3's step time)."""
        return self.plan.time

    @property
    def collective_time(self) -> float:
        """Seconds in the tensor-parallel collectives per step (latency and transfer)."""
        return float(self.prediction.comm_time)

    @property
    def time(self) -> float:
        """Seconds per step: the compute and, not overlapped, the collectives."""
        return self.plan.time + self.prediction.comm_time

    @property
    def tokens(self) -> int:
        """Tokens one tensor-parallel group trains on per step: ``seq x micro_batch``."""
        return self.plan.tokens

    @property
    def tokens_per_s_per_gpu(self) -> float:
        """Tokens per second per GPU: a group's tokens over the step time, shared by its ``tp`` GPUs."""
        return self.plan.tokens / self.time / self.tp

    @property
    def model_flops(self) -> float:
        """One GPU's model FLOPs per step (its shard's forward and backward, no recomputation)."""
        return float(self.plan.model_flops)

    @property
    def mfu(self) -> float:
        """Model FLOPs utilization: :attr:`model_flops` over the step time at the GPU's peak."""
        return float(self.plan.model_flops) / (self.time * self.plan.peak)

    @property
    def memory_per_gpu(self) -> float:
        """Bytes one GPU holds: its shard's model state, activations and logits (chapter 3's footprint)."""
        return float(self.plan.footprint.total)

    @property
    def fits(self) -> bool:
        """Whether :attr:`memory_per_gpu` fits in the GPU's usable HBM."""
        return bool(self.plan.fits)


def tp_training_plan(model: Model | str, hardware: Hardware | str, *, tp, gpus=None, seq, micro_batch=1,
                     recompute: str = "none", zero_stage: int = 0, offload: bool = False, achieved=None,
                     timing: str = "step", attention: str = "flash", gpus_per_node=8) -> TPTrainingPlan:
    """Plan a training step of ``model`` on ``gpus`` GPUs of ``hardware`` (``tp`` when None), tensor parallel
    over ``tp`` of them (at most ``gpus_per_node``: the exchanges stay on NVLink) and data parallel over
    ``gpus / tp`` groups: a :class:`TPTrainingPlan`. The other arguments are
    :func:`~roofline.workloads.training.plan_training`'s, for one GPU's shard; the exchanges are
    :func:`tp_training_step`'s under the plan's recomputation, priced by :func:`predict_tp`.

    ``gpus`` must be a multiple of ``tp``. Llama 3 70B on 8 H100 SXM, ``tp=8``, 4,096 tokens: 2 x 80 + 4
    exchanges forward, 2 x 80 + 1 backward.
    """
    m = check_tp(model, tp, gpus_per_node=gpus_per_node)
    t = _tp(tp)
    hw = get_hardware(hardware)
    g = t if gpus is None else gpu_count("gpus", gpus)
    if g % t:
        raise ValueError(f"gpus must be a multiple of tp ({t}): the GPUs form {t}-GPU tensor-parallel groups, "
                         f"got gpus={g}")
    plan = plan_training(shard_model(m, t), hw, seq=seq, micro_batch=micro_batch, gpus=g // t, recompute=recompute,
                         zero_stage=zero_stage, offload=offload, achieved=achieved, timing=timing, attention=attention)
    step = tp_training_step(m, t, seq, micro_batch, recompute=plan.recompute, attention=attention)
    return TPTrainingPlan(t, g, plan, predict_tp(step, hw, gpus_per_node=gpus_per_node))


def tp_intensity(model: Model | str, tp, *, dtype: str = "bf16", hidden=None):
    """FLOPs each GPU runs per byte it sends, in one block's forward pass: the layer's matmul FLOPs over
    ``tp`` against two all-reduces of the block's activations (ring: ``2 (tp-1)/tp`` of the buffer each).

    Per token, ``2 P_layer / tp`` FLOPs against ``4 (tp-1)/tp * h * w_act`` bytes (``w_act`` bytes an
    activation), so the tokens cancel: ``P_layer / (2 (tp-1) h w_act)``. ``hidden`` scales the model's layer to another width, every matrix in
    proportion (``P_layer`` grows as ``hidden**2``), to ask at which width a degree starts to hide.
    Infinite for ``tp = 1``. Broadcasts over ``tp`` and ``hidden``.
    """
    m = load_model(model)
    t = number("tp", tp, integer=True)
    a = dtype_bytes(dtype)
    h = m.hidden_size if hidden is None else number("hidden", hidden)
    per_layer = m.layer_matmul_params * (np.asarray(h, dtype=float) / m.hidden_size) ** 2
    with np.errstate(divide="ignore"):
        out = np.divide(per_layer, 2 * (np.asarray(t, dtype=float) - 1) * h * a)
    return float(out) if np.ndim(out) == 0 else out


def tier_ridge(hardware: Hardware | str, tier: str = "scale_up", *, dtype: str = "bf16") -> float:
    """FLOPs a GPU can run in the time it sends one byte over ``tier``: the peak over the tier's one-way
    bandwidth per GPU (H100 SXM, bf16: 989 TFLOP/s over NVLink's 450 GB/s, about 2,200)."""
    hw = get_hardware(hardware)
    return hw.peak_flops(dtype) / hw.link(tier).each_way


def hiding_width(model: Model | str, tp, hardware: Hardware | str, tier: str | None = "scale_up", *,
                 dtype: str = "bf16", tokens=None, gpus_per_node=8):
    """The hidden size at which a block's matmuls take as long as its two all-reduces' bytes: the narrowest
    width, with the model's proportions, at which degree ``tp`` can hide behind the compute even with
    perfect overlap. On one ``tier`` (a flat ring, every byte on it) that is where :func:`tp_intensity`
    reaches :func:`tier_ridge`. With ``tier=None`` the all-reduces are priced as
    :func:`~roofline.core.collectives.collective_cost` prices a group that spans nodes of ``gpus_per_node``
    (hierarchically: NVLink inside each node, each GPU's 1/g share over its own network port, the slower
    tier setting the pace), the pricing chapters 7 to 9 use; a group inside one node is then plain NVLink.

    Per token a block's matmuls take ``2 kappa h^2 / (tp P)`` and its two all-reduces ``2 h w_act r``, with
    ``kappa h^2`` the block's matmul weights, ``w_act`` the bytes of an activation and ``r`` the all-reduce's
    transfer seconds per byte of buffer, so the width is ``tp P w_act r / kappa`` (flat: ``r = 2 (tp-1)/tp / B``). That count has no latency, so the tokens
    cancel. Given ``tokens`` (per micro-batch), the width is where the matmuls take as long as the two
    all-reduces *with* their latency: the positive root of ``2 s kappa h^2 / (tp P) = 2 (lat + s h w_act r)``. It
    is wider than the latency-free width and falls towards it as ``tokens`` grows."""
    m = load_model(model)
    hw = get_hardware(hardware)
    per_h2 = m.layer_matmul_params / m.hidden_size ** 2
    t = number("tp", tp, integer=True)
    a = dtype_bytes(dtype)
    if tier is not None:
        tier_ridge(hw, tier, dtype=dtype)  # names the tiers when tier is not one of them
    where = {"tier": tier} if tier is not None else {"gpus_per_node": gpus_per_node}
    one = collective_cost("all_reduce", t, 1.0, hw, **where)  # one byte of buffer: its transfer is x
    x = np.asarray(one.transfer, dtype=float)
    peak = hw.peak_flops(dtype)
    out = np.where(np.asarray(t) > 1, np.asarray(t, dtype=float) * peak * a * x / per_h2, 0.0)
    if tokens is not None:
        s = number("tokens", tokens, integer=True)
        if np.ndim(t) or np.ndim(s):
            raise TypeError("hiding_width with tokens takes one degree tp and one token count, not arrays")
        if t > 1:
            latency = float(one.latency)
            # q h^2 - l h - latency = 0, with q h^2 the compute and l h the transfer of the two all-reduces, halved
            q = s * per_h2 / (t * peak)
            lin = s * a * float(x)
            out = (lin + np.sqrt(lin * lin + 4 * q * latency)) / (2 * q)
    return float(out) if np.ndim(out) == 0 else out


def layer_times(model: Model | str, tp, tokens, hardware: Hardware | str, *, tier: str | None = "scale_up",
                gpus_per_node=8, dtype: str = "bf16"):
    """``(compute, communication)`` seconds of one block's forward pass on ``tokens`` tokens per GPU group:
    the layer's matmul FLOPs over ``tp`` at the datasheet peak, against its two all-reduces priced on
    ``tier`` (flat) or, with ``tier=None``, hierarchically over nodes of ``gpus_per_node``. Broadcasts over
    ``tokens``."""
    m = check_tp(model, tp)
    t = _tp(tp)
    hw = get_hardware(hardware)
    tokens = number("tokens", tokens, integer=True)
    compute = 2 * tokens * m.layer_matmul_params / t / hw.peak_flops(dtype)
    where = {"tier": tier} if tier is not None else {"gpus_per_node": gpus_per_node}
    ar = collective_cost("all_reduce", t, tokens * m.hidden_size * dtype_bytes(dtype), hw, **where)
    return compute, 2 * ar.time


@dataclass(frozen=True)
class DegreePoint:
    """Decode on ``tp`` tensor-parallel GPUs (the field ``t``) at one batch and context: the step
    (``time``, the time per output token, split into ``compute`` and ``comm``), tokens per second per GPU,
    the weights each GPU holds and whether they and the batch's KV cache fit (``fits``), and the largest
    batch that fits."""

    t: int
    time: float
    compute: float
    comm: float
    comm_latency: float
    tokens_per_s_per_gpu: float
    weights_per_gpu: float
    kv_per_gpu: float
    fits: bool
    max_batch: int


def decode_by_degree(model: Model | str, hardware: Hardware | str, degrees=(1, 2, 4, 8), *, batch: int = 1,
                     context: int = 1024, gpus_per_node=8, tier: str | None = None, dtype: str = "bf16",
                     accounting: str = "text") -> list[DegreePoint]:
    """:class:`DegreePoint` for each degree in ``degrees``: a decode step of ``batch`` sequences at
    ``context`` tokens (:func:`tp_decode_step`, :func:`predict_tp` on the datasheet roof, hierarchical over
    nodes of ``gpus_per_node`` unless ``tier`` is given), and the memory (chapter 5's
    :func:`~roofline.serving.largest_batch` with ``gpus=tp``)."""
    m, hw = load_model(model), get_hardware(hardware)
    batch = int(number("batch", batch, integer=True))
    context = int(number("context", context, integer=True))
    if isinstance(degrees, (int, float)) or not len(degrees):
        raise TypeError(f"degrees must be a sequence of tensor-parallel degrees, got {degrees!r}")
    out = []
    for t in degrees:
        step = tp_decode_step(m, t, batch, context, dtype=dtype, accounting=accounting)
        pred = predict_tp(step, hw, gpus_per_node=gpus_per_node, tier=tier)
        t = step.t
        weights = weights_per_gpu(m, tp=t, weights_dtype=dtype)
        kv = batch * float(shard_model(m, t).kv_cache_bytes(context, dtype))
        most = int(largest_batch(m, hw, context, gpus=t, weights_dtype=dtype, block_size=None))
        time = float(pred.time)
        out.append(DegreePoint(t, time, float(pred.compute_time), float(pred.comm_time), float(pred.comm_latency),
                               batch / time / t, weights, kv, weights + kv <= hw.usable_capacity, most))
    return out


def best_degree(model: Model | str, hardware: Hardware | str, degrees=(1, 2, 4, 8, 16, 32), **kwargs) -> DegreePoint:
    """The :class:`DegreePoint` with the shortest time per output token among ``degrees`` (arguments as
    :func:`decode_by_degree`; degrees past a node are priced hierarchically unless ``tier`` is given)."""
    return min(decode_by_degree(model, hardware, degrees, **kwargs), key=lambda p: p.time)


# Chapter 8's quantities that the prose quotes, each one call for the notebook.

def norm_share(model: Model | str) -> float:
    """Chapter 8: the norm scales' share of the parameters, the part every tensor-parallel GPU keeps whole."""
    m = load_model(model)
    return m.norm_params / m.params


__all__ += ["norm_share"]


def message_bytes(model: Model | str, tokens=1, *, dtype: str = "bf16", hidden=None):
    """Chapter 8: the buffer of one tensor-parallel all-reduce, ``tokens x h x a`` bytes (one token's
    activations in decode: 16 KB for Llama 3 70B in bf16); ``hidden`` asks at another width."""
    m = load_model(model)
    h = m.hidden_size if hidden is None else number("hidden", hidden)
    return number("tokens", tokens, integer=True) * h * dtype_bytes(dtype)


__all__ += ["message_bytes"]


def width_constant(model: Model | str) -> float:
    """Chapter 8: ``c = P_layer / h**2``, a layer's matmul weights in units of the hidden size squared (about
    12 for a plain transformer; Llama 3 70B: 2 + 2/8 for attention, its K and V h/8 wide (8 KV heads of
    128), 3 x 3.5 for its MLP: 12.75)."""
    m = load_model(model)
    return m.layer_matmul_params / m.hidden_size ** 2


__all__ += ["width_constant"]


def width_layer_times(model: Model | str, tp, tokens, hardware: Hardware | str, hidden, *, dtype: str = "bf16"):
    """Chapter 8, exercise 1: :func:`layer_times` for ``model`` scaled to width ``hidden`` (every matrix in
    proportion, ``P_layer = c h**2``): ``2 tokens c hidden**2 / tp / P`` seconds of matmuls against two
    all-reduces of ``tokens x hidden`` activations inside a node."""
    m = check_tp(model, tp)
    t = _tp(tp)
    hw = get_hardware(hardware)
    tokens = number("tokens", tokens, integer=True)
    w = number("hidden", hidden)
    compute = 2 * tokens * m.layer_matmul_params / m.hidden_size ** 2 * w ** 2 / t / hw.peak_flops(dtype)
    ar = collective_cost("all_reduce", t, tokens * w * dtype_bytes(dtype), hw)
    return compute, 2 * ar.time


__all__ += ["width_layer_times"]


def kv_room(hardware: Hardware | str, weights_per_gpu):
    """Chapter 8: the HBM left for the KV cache on each GPU once it holds ``weights_per_gpu`` bytes of
    weights: usable capacity less the weights (broadcasts over a list of degrees' weights)."""
    w = number("weights_per_gpu", weights_per_gpu, strict=False)
    return get_hardware(hardware).usable_capacity - w


__all__ += ["kv_room"]


def _degree_point(point) -> None:
    if not isinstance(point, DegreePoint):
        raise TypeError(f"point must be a DegreePoint (from decode_by_degree), got {type(point).__name__}")


def batch_per_gpu(point: DegreePoint) -> float:
    """Chapter 8: the largest batch of a :class:`DegreePoint` per GPU of its degree, ``max_batch / t``."""
    _degree_point(point)
    return point.max_batch / point.t


__all__ += ["batch_per_gpu"]


def stack_time(model: Model | str, tp, tokens, hardware: Hardware | str, *, pp: int = 1, tier: str | None = None,
               gpus_per_node=8, dtype: str = "bf16") -> float:
    """Chapter 8, exercise 2: the forward pass of one pipeline stage's ``L / pp`` layers, each its
    :func:`layer_times` compute plus communication (no overlap): ``L / pp (c + k)``."""
    m = load_model(model)
    pp = number("pp", pp, integer=True)
    c, k = layer_times(m, tp, tokens, hardware, tier=tier, gpus_per_node=gpus_per_node, dtype=dtype)
    return m.num_layers / pp * (c + k) if pp != 1 else m.num_layers * (c + k)


__all__ += ["stack_time"]


def kv_head_copies(model: Model | str, tp) -> int:
    """Chapter 8, exercise 4: how many GPUs hold a copy of each KV head when the degree ``tp`` exceeds the
    model's KV heads (``tp // kv_heads``; 1 when the heads split evenly)."""
    m = load_model(model)
    t = _tp(tp)
    return max(1, t // m.num_kv_heads)


__all__ += ["kv_head_copies"]


def wait_share(model: Model | str, tp, hardware: Hardware | str, tier: str = "scale_up", *,
               dtype: str = "bf16") -> float:
    """Chapter 8, exercise 7: the share of the link's time the compute cannot cover when the degree's
    :func:`tp_intensity` is below the tier's :func:`tier_ridge`: ``1 - intensity / ridge`` (0 above it)."""
    return max(0.0, 1 - float(tp_intensity(model, tp, dtype=dtype)) / tier_ridge(hardware, tier, dtype=dtype))


__all__ += ["wait_share"]


def stack_activations(model: Model | str, seq, tp: int = 1, *, sequence_parallel: bool = False, micro_batch=1) -> float:
    """Chapter 8: the activations all ``L`` layers save for the backward pass on each of ``tp`` GPUs
    (:func:`~roofline.workloads.memory.activation_bytes` per layer, times ``L``)."""
    m = load_model(model)
    return activation_bytes(m, seq, micro_batch, tp=tp, sequence_parallel=sequence_parallel) * m.num_layers


__all__ += ["stack_activations"]


def replicated_activations(model: Model | str, seq, micro_batch=1) -> float:
    """Chapter 8: the bytes per layer of the saved tensors tensor parallelism does not shard (the norms'
    and residuals' inputs, whole on every GPU): what sequence parallelism splits."""
    seq, micro_batch = number("seq", seq, integer=True), number("micro_batch", micro_batch, integer=True)
    return sum(x.nbytes(seq, micro_batch) for x in saved_tensors(load_model(model)) if not x.sharded_by_tp)


__all__ += ["replicated_activations"]


def degree_speedup(points, tp: int, base: int = 1) -> float:
    """Chapter 8: how much faster a decode step runs at degree ``tp`` than at ``base``, from
    :func:`decode_by_degree`'s points: ``time(base) / time(tp)``."""
    by_t = {p.t: p for p in points if isinstance(p, DegreePoint)}
    for name, d in (("tp", tp), ("base", base)):
        if d not in by_t:
            raise ValueError(f"{name} must be one of the points' degrees {sorted(by_t)}, got {d!r}")
    return by_t[base].time / by_t[tp].time


__all__ += ["degree_speedup"]


class AgainstPipeline(NamedTuple):
    """Chapter 8: one token's decode on ``tp`` tensor-parallel GPUs against a ``tp``-stage pipeline (the token
    walks the stages in turn, so the pipeline's step is the whole model on one GPU): both times, the
    pipeline's over tensor parallelism's, the tensor-parallel time a published ratio implies
    (``pipeline / published``, a floor: a real pipeline is no faster than ours) and how far that lies
    above our tensor-parallel time, ``implied / tp - 1``."""

    tp_time: float
    pp_time: float
    ratio: float
    implied_tp_time: float
    implied_over: float


__all__ += ["AgainstPipeline"]


def against_pipeline(model: Model | str, hardware: Hardware | str, tp: int = 8, *, context: int = 2048,
                     dtype: str = "bf16", published=None) -> AgainstPipeline:
    """Chapter 8: :class:`AgainstPipeline` at batch 1 and ``context``, priced on the datasheet roof;
    ``published`` defaults to NVIDIA's TP-over-PP ratio at minimum latency (:data:`PUBLISHED`)."""
    hw = get_hardware(hardware)
    if published is None:
        published = PUBLISHED["nvidia_405b_tp_over_pp_min_latency"][0]
    published = number("published", published)
    tp_time = float(predict_tp(tp_decode_step(model, tp, 1, context, dtype=dtype), hw).time)
    pp_time = float(predict(decode_step(load_model(model), 1, context, dtype=dtype), hw).time)
    implied = pp_time / published
    return AgainstPipeline(tp_time, pp_time, pp_time / tp_time, implied, implied / tp_time - 1)


__all__ += ["against_pipeline"]


def width_margin(model: Model | str, tp, hardware: Hardware | str, tier: str | None = "scale_up", *,
                 dtype: str = "bf16", gpus_per_node=8) -> float:
    """Chapter 8: :func:`hiding_width` over the model's own hidden size: how many times wider the model would
    have to be for degree ``tp``'s all-reduces on ``tier`` (None: hierarchically over nodes of
    ``gpus_per_node``) to hide behind its matmuls (below 1 they already do)."""
    return hiding_width(model, tp, hardware, tier, dtype=dtype, gpus_per_node=gpus_per_node) / load_model(model).hidden_size


def compute_share(model: Model | str, tp, tokens, hardware: Hardware | str, *, tier: str | None = None,
                  gpus_per_node=8, dtype: str = "bf16"):
    """Chapter 8: the share of one block's forward pass a GPU spends in its matmuls when the two
    all-reduces do not overlap with them (each all-reduce's output is the next norm's input, so nothing
    runs beside it unless the matmul is chunked): ``compute / (compute + communication)`` of
    :func:`layer_times`, hierarchically over nodes unless ``tier`` is given. Broadcasts over ``tokens``."""
    c, k = layer_times(model, tp, tokens, hardware, tier=tier, gpus_per_node=gpus_per_node, dtype=dtype)
    return c / (c + k)


__all__ += ["width_margin", "compute_share"]


def comm_share(point: DegreePoint) -> float:
    """Chapter 8: the share of a :class:`DegreePoint`'s decode step spent in its all-reduces, ``comm / time``."""
    _degree_point(point)
    return point.comm / point.time


__all__ += ["comm_share"]


def comm_latency_share(point: DegreePoint) -> float:
    """Chapter 8: the share of a :class:`DegreePoint`'s all-reduce time that is latency, ``comm_latency / comm``."""
    _degree_point(point)
    return point.comm_latency / point.comm


__all__ += ["comm_latency_share"]
