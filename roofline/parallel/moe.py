"""Mixture of experts on the roofline: experts touched per layer, the weights a step reads, and expert
parallelism with its two all-to-alls (chapter 10).

A MoE layer sends each token to ``k`` of its ``E`` routed experts (plus any shared expert every token
uses). The FLOPs per token follow the ``k`` experts (the *active* parameters); the bytes a step reads
follow the *distinct* experts its ``T`` tokens touch, which depends on the routing: three named choices
(:data:`ROUTINGS`), counted in :mod:`roofline.core.routing` and re-exported here as the chapter's
vocabulary.

Expert parallelism (:func:`expert_parallel_step`) puts ``E / ep`` routed experts on each of ``ep`` GPUs.
The layout, named: attention, the dense layers and the shared expert run data-parallel (each GPU a copy
of those weights and ``1/ep`` of the batch, as DeepSeek-V3 serves its decode); each MoE layer sends every
token's hidden vector to the GPUs holding its ``k`` experts and brings the ``k`` results back: two
all-to-alls per MoE layer, each GPU's buffer ``k x hidden`` numbers per token it holds, priced by
:func:`roofline.core.collectives.collective_cost`. Load is balanced (the experts' tokens spread evenly; a
``capacity_factor`` above 1 pads every expert to that multiple of its fair share, FLOPs and all-to-all
bytes alike).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np

from roofline.core.checks import number
from roofline.core.collectives import CollectiveCost, collective_cost
from roofline.core.cost import Breakdown
from roofline.core.hardware import Hardware, get_hardware
from roofline.core.model import Model, load_model
from roofline.core.routing import (ROUTINGS, check_routing, expected_experts, expert_bounds, experts_touched,
                                   nodes_touched, simulate_experts_touched)
from roofline.core.roof import predict
from roofline.core.units import dtype_bytes
from roofline.parallel.tensor_parallel import weights_per_gpu
from roofline.workloads.inference import compute_bound_batch, decode_step
from roofline.workloads.kv_cache import check_context, kv_bytes_per_token, sequence_kv_bytes
from roofline.workloads.training import training_flops_per_token

__all__ = ["PUBLISHED", "ROUTINGS", "check_routing", "expected_experts", "expert_bounds", "experts_touched",
           "simulate_experts_touched", "nodes_touched", "saturation_batch", "routed_expert_params",
           "all_to_all_bytes_per_token", "dense_equivalent", "expert_parallel_batch", "ExpertParallelStep",
           "expert_parallel_step"]

_MIXTRAL = "Jiang et al. 2024, Mixtral of Experts (arXiv:2401.04088), abstract"
_V3 = "DeepSeek-AI 2024, DeepSeek-V3 Technical Report (arXiv:2412.19437)"
PUBLISHED = {
    "mixtral_total": (47e9, _MIXTRAL + ": each token has access to 47B parameters"),
    "mixtral_active": (13e9, _MIXTRAL + ": but only uses 13B active parameters"),
    "v3_total": (671e9, _V3 + ", abstract: 671B total parameters"),
    "v3_active": (37e9, _V3 + ", abstract: 37B activated for each token"),
    "v3_node_limit": (4, _V3 + ", section 4.2: each token sent to at most 4 nodes"),
    "v3_pretraining_gpu_hours": (2.664e6, _V3 + ", section 1: pre-training 2664K H800 GPU hours"),
    "v3_gpu_hours": (2.788e6, _V3 + ", section 1: 2.788M H800 GPU hours for its full training"),
    "v3_tokens": (14.8e12, _V3 + ", abstract: pre-trained on 14.8 trillion tokens"),
    "v3_cluster_gpus": (2048, _V3 + ", section 3.1: a cluster of 2048 H800 GPUs"),
    "v3_prefill_ep": (32, _V3 + ", section 3.4.1: prefill units of 32 GPUs, the MoE part EP32"),
    "v3_decode_ep": (320, _V3 + ", section 3.4.2: decode units of 320 GPUs, the MoE part EP320"),
    "v3_train_pp": (16, _V3 + ", section 3.2: 16-way pipeline parallelism"),
    "v3_train_ep": (64, _V3 + ", section 3.2: 64-way expert parallelism spanning 8 nodes"),
    "v3_train_zero": (1, _V3 + ", section 3.2: ZeRO-1 data parallelism, no tensor parallelism"),
    "v3_train_seq": (4096, _V3 + ", section 4.2: pre-training sequence length 4K"),
    "v3_train_batch": (15360, _V3 + ", section 4.2: the batch ramps from 3,072 to 15,360 sequences, then stays"),
    "v3_hours_per_trillion": (180e3, _V3 + ", section 1: 180K H800 GPU hours per trillion tokens"),
    "v3_days_per_trillion": (3.7, _V3 + ", section 1: 3.7 days per trillion tokens on the 2048-GPU cluster"),
}
"""Published figures chapter 10 quotes beside the package's own counts: (value, source)."""


def saturation_batch(model: Model | str, fraction: float = 0.99) -> int:
    """The smallest number of tokens in a step at which uniform routing touches, in expectation, at
    least ``fraction`` of the experts of each MoE layer: ``ceil(ln(1 - epsilon) / ln(1 - E_tok/E))``
    for ``epsilon = fraction`` and ``E_tok`` experts per token (Mixtral, 2 of 8, 99%: 17 tokens). One token when
    every expert is used (``E_tok = E``)."""
    m = load_model(model)
    if m.moe is None:
        raise ValueError(f"model {m.name!r} has no experts")
    f = number("fraction", fraction)
    if np.ndim(f) or not f < 1:
        raise ValueError(f"fraction must be one number between 0 and 1 (exclusive), got {fraction!r}")
    E, k = m.moe.num_experts, m.moe.experts_per_token
    if k == E:
        return 1
    T = int(np.ceil(np.log1p(-f) / np.log1p(-k / E) - 1e-12))
    return max(T, 1)


def routed_expert_params(model: Model | str) -> int:
    """Parameters of every routed expert of every MoE layer (what expert parallelism spreads)."""
    m = load_model(model)
    if m.moe is None:
        raise ValueError(f"model {m.name!r} has no experts")
    return m.moe.moe_layers(m.num_layers) * m.moe.num_experts * sum(lin.params for lin in m.expert_linears())


def all_to_all_bytes_per_token(model: Model | str, dtype: str = "bf16") -> float:
    """Bytes one token sends each way in one MoE layer under expert parallelism: its hidden vector to each
    of its ``k`` experts (dispatch), and as many back (combine): ``k x hidden x bytes``."""
    m = load_model(model)
    if m.moe is None:
        raise ValueError(f"model {m.name!r} has no experts")
    return float(m.moe.experts_per_token * m.hidden_size * dtype_bytes(dtype))


def dense_equivalent(model: Model | str, size: str = "active") -> Model:
    """The dense model a MoE is compared with: the same attention, embeddings and layers, with every MoE
    layer's experts replaced by one dense MLP as wide as the experts a token uses (``size='active'``:
    ``k`` routed experts plus the shared ones, so about the active parameters) or as all of them
    together (``'total'``: about the total parameters). Every layer gets that MLP (DeepSeek-V3's three
    dense layers too), and the router is gone, so the counts come close without being equal: compare
    ``params``."""
    m = load_model(model)
    if m.moe is None:
        raise ValueError(f"model {m.name!r} has no experts; it is its own dense equivalent")
    if size not in ("active", "total"):
        raise ValueError(f"size must be 'active' or 'total', got {size!r}")
    e = m.moe
    routed = e.experts_per_token if size == "active" else e.num_experts
    width = routed * e.expert_intermediate_size + e.shared_intermediate_size
    family = "llama" if m.mla is None else m.family
    return replace(m, name=f"{m.name}-dense-{size}", moe=None, intermediate_size=width, family=family)


def expert_parallel_batch(model: Model | str, hardware: Hardware | str, context, *, ep: int,
                          weights_dtype: str = "bf16", kv_dtype: str | None = None, block_size: int | None = 16) -> int:
    """The most sequences of ``context`` tokens ``ep`` expert-parallel GPUs serve at once: each GPU holds
    :func:`weights_per_gpu` and the whole KV cache of its own ``1/ep`` of the batch (attention is
    data-parallel), so ``ep x floor((usable - weights per GPU) / bytes per sequence)``; paged in blocks of
    ``block_size`` tokens as :func:`roofline.serving.sequence_kv_bytes` counts them."""
    m, h = load_model(model), get_hardware(hardware)
    context = number("context", context, integer=True)
    if np.ndim(context):
        raise TypeError("expert_parallel_batch takes one context")
    check_context(m, int(context))
    ep = int(number("ep", ep, integer=True))
    free = h.usable_capacity - weights_per_gpu(m, ep=ep, weights_dtype=weights_dtype)
    per = float(sequence_kv_bytes(m, int(context), kv_dtype or weights_dtype, block_size=block_size))
    return ep * int(max(free, 0.0) // per)


@dataclass(frozen=True)
class ExpertParallelStep:
    """One decode step (or prefill) of a MoE model under expert parallelism, seen from one GPU.

    ``work``: that GPU's FLOPs and HBM bytes (its share of the batch through attention and the shared
    parts, the routed-expert FLOPs of ``1/ep`` of the tokens, the weights of the experts it holds that
    the step touches). ``all_to_all``: one of the all-to-alls (dispatch or combine, the same size);
    ``calls``: how many per step (two per MoE layer). Times in seconds under the step rule.
    """

    model: str
    ep: int
    tokens: float  # tokens of the whole step, across the ep GPUs
    routing: str
    capacity_factor: float
    work: Breakdown
    all_to_all: CollectiveCost
    calls: int
    compute_time: float
    memory_time: float
    _hardware: Hardware = None
    dispatch: CollectiveCost | None = None  # the dispatch all-to-all when it is sent in another format (None: all_to_all)

    @property
    def moe_layer_time(self) -> float:
        """One GPU's share of one MoE layer's matmuls (router, shared and routed experts) on the roofline,
        the step rule: the work the layer's two all-to-alls could hide behind."""
        parts = [op for op in self.work.ops if op.name.startswith(("expert.", "shared.", "router"))]
        layers = self.calls // 2
        # each matmul at the peak of its own math format (fp8 experts on the fp8 peak), as predict() does
        work = Breakdown.from_ops("MoE layers", parts, self.work.formats)
        return float(predict(work, self._hardware).time) / layers

    @property
    def all_to_all_pair_time(self) -> float:
        """The dispatch and the combine of one MoE layer (``all_to_all`` is the combine; the dispatch is
        ``dispatch`` when it was sent in its own format, else the same)."""
        return (self.dispatch or self.all_to_all).time + self.all_to_all.time

    @property
    def gpu_time(self) -> float:
        """The GPU's own work on the roofline (the step rule: the larger of compute and memory)."""
        return max(self.compute_time, self.memory_time)

    @property
    def communication_time(self) -> float:
        """Every all-to-all of the step, one after another."""
        return self.calls // 2 * self.all_to_all_pair_time

    @property
    def time(self) -> float:
        """The step with no overlap: the GPU's work, then the all-to-alls (the pessimistic count)."""
        return self.gpu_time + self.communication_time

    @property
    def overlapped_time(self) -> float:
        """The step with the all-to-alls hidden behind the work of another micro-batch (DeepSeek-V3's
        dual micro-batch overlap), the optimistic count: the larger of the two."""
        return max(self.gpu_time, self.communication_time)


def expert_parallel_step(model: Model | str, hardware: Hardware | str, batch, context=0, *, ep: int,
                         routing: str = "uniform", prompt=None, tier: str | None = None, gpus_per_node: int = 8,
                         capacity_factor: float = 1.0, dtype: str = "bf16", weights_dtype: str | None = None,
                         kv_dtype: str | None = None, math_dtype: str | None = None,
                         dispatch_dtype: str | None = None) -> ExpertParallelStep:
    """Decode (``prompt`` None: ``batch`` sequences, ``context`` cached tokens each) or prefill (``batch``
    prompts of ``prompt`` tokens) of a MoE model over ``ep`` GPUs, expert-parallel, on ``hardware``.

    ``batch`` must be a multiple of ``ep`` (each GPU holds ``batch / ep`` sequences). The all-to-alls are
    priced by :func:`roofline.core.collectives.collective_cost` on ``tier`` (None: NVLink inside a node, the
    network across nodes; 'network' forces InfiniBand). Text accounting, the step rule.

    Formats as in :func:`~roofline.workloads.inference.decode_step`: ``dtype`` for the activations (and
    the all-to-all buffers), ``weights_dtype`` for the stored weights, ``math_dtype`` for the matmuls
    (None: ``dtype``). DeepSeek-V3 stores its weights in fp8 *and* multiplies them on the fp8 tensor
    cores (``weights_dtype='fp8', math_dtype='fp8'``), so its expert work is timed at the fp8 peak;
    fp8 weights alone (``math_dtype`` left out) are dequantized and multiplied in ``dtype``.
    ``dispatch_dtype`` sends the dispatch all-to-all in another format than the combine (DeepSeek-V3
    quantizes the tokens to fp8 before dispatching them and combines in bf16); None: ``dtype`` both ways.
    """
    from roofline.workloads.inference import check_modelled, build_step

    m, h = load_model(model), get_hardware(hardware)
    if m.moe is None:
        raise ValueError(f"model {m.name!r} has no experts; expert parallelism needs a mixture of experts")
    routing = check_routing(routing)
    ep = number("ep", ep, integer=True)
    batch = number("batch", batch, integer=True)
    cf = number("capacity_factor", capacity_factor)
    for name, v in (("ep", ep), ("batch", batch), ("capacity_factor", cf), ("context", context)):
        if np.ndim(v):
            raise TypeError(f"expert_parallel_step takes single numbers; {name} is an array")
    ep, batch = int(ep), int(batch)
    if cf < 1:
        raise ValueError(f"capacity_factor must be at least 1 (1: every expert gets exactly its share), got {capacity_factor!r}")
    if m.moe.num_experts % ep:
        raise ValueError(f"ep must divide the {m.moe.num_experts} experts of {m.name}, got {ep}")
    if batch % ep:
        raise ValueError(f"batch must be a multiple of ep ({ep}): each GPU holds batch / ep sequences, got {batch}")
    local = batch // ep
    queries = 1 if prompt is None else int(number("prompt", prompt, integer=True))
    tokens = batch * queries
    decode = prompt is None
    context = number("context", context, integer=True, strict=False)
    keys = context if decode else queries
    check_modelled(m, local * queries, "expert_parallel_step", routing, "text")
    # the experts this GPU holds that the whole step's tokens touch (balanced: 1/ep of all touched)
    read = experts_touched(m, tokens, routing) / ep
    work = build_step(f"{'decode step' if decode else 'prefill'} of {m.name}, one GPU of {ep} (expert-parallel)", m,
                 local, queries, keys, decode=decode, dtype=dtype, weights_dtype=weights_dtype, kv_dtype=kv_dtype,
                 math_dtype=math_dtype, accounting="text", omit=(), options={}, routing=routing, experts_read=read)
    if cf != 1:
        from roofline.workloads.inference import PARTS
        from roofline.core.ops import Op
        ops = []
        for op in work.ops:
            if op.name.startswith("expert."):
                flops, reads, writes = op.split
                op = Op.build(op.name, op.kind, count=op.count, math=op.math,
                              flops={p: v * cf for p, v in flops.items()}, reads=reads, writes=writes,
                              m=op.m * cf, n=op.n, k=op.k)
            ops.append(op)
        work = Breakdown.from_ops(work.name, ops, work.formats, PARTS)
    a = dtype_bytes(dtype)
    size = local * queries * m.moe.experts_per_token * m.hidden_size * a * cf  # each GPU's send buffer
    cost = collective_cost("all_to_all", ep, size, h, gpus_per_node=gpus_per_node, tier=tier)
    dispatch = None
    if dispatch_dtype is not None and dtype_bytes(dispatch_dtype) != a:
        dispatch = collective_cost("all_to_all", ep, size / a * dtype_bytes(dispatch_dtype), h,
                                   gpus_per_node=gpus_per_node, tier=tier)
    pred = predict(work, h)
    return ExpertParallelStep(m.name, ep, float(tokens), routing, float(cf), work, cost,
                              2 * m.moe.moe_layers(m.num_layers), float(pred.compute_time), float(pred.memory_time), h,
                              dispatch)


# Chapter 10's quantities that the prose quotes, each one call for the notebook.

def _moe_model(model) -> Model:
    m = load_model(model)
    if m.moe is None:
        raise ValueError(f"model {m.name!r} has no experts")
    return m


def expert_params(model: Model | str) -> int:
    """Chapter 10: the parameters of one routed expert in one layer (its gate, up and down matrices)."""
    return sum(lin.params for lin in _moe_model(model).expert_linears())


__all__ += ["expert_params"]


def shared_experts(model: Model | str) -> int:
    """Chapter 10: the shared expert's width in routed experts' widths (DeepSeek-V3: 1; 0 without one)."""
    e = _moe_model(model).moe
    return (e.shared_intermediate_size or 0) // e.expert_intermediate_size


__all__ += ["shared_experts"]


def sparsity(model: Model | str) -> float:
    """Chapter 10: ``E / k``, experts per expert a token uses (Mixtral: 8 / 2 = 4; DeepSeek-V3: 256 / 8 = 32):
    the factor by which a MoE layer needs more tokens than a dense one to reach the same intensity."""
    e = _moe_model(model).moe
    return e.num_experts / e.experts_per_token


__all__ += ["sparsity"]


def total_over_active(model: Model | str) -> float:
    """Chapter 10: parameters stored per parameter a token uses (Mixtral 8x7B: 46.7B / 12.9B, 3.6x)."""
    m = _moe_model(model)
    return m.params / m.active_params


__all__ += ["total_over_active"]


def dense_training_ratio(model: Model | str) -> float:
    """Chapter 10: the training FLOPs per token of a dense model of the MoE's total size over the MoE's own
    (:func:`~roofline.workloads.training.training_flops_per_token` of :func:`dense_equivalent` 'total')."""
    m = _moe_model(model)
    return training_flops_per_token(dense_equivalent(m, "total")) / training_flops_per_token(m)


__all__ += ["dense_training_ratio"]


def compute_bound_ratio(model: Model | str, hardware: Hardware | str, routing: str = "uniform") -> float:
    """Chapter 10: the batch at which the MoE's decode turns compute-bound over that of a dense model of its
    active size (:func:`~roofline.workloads.inference.compute_bound_batch`); near :func:`sparsity`."""
    m = _moe_model(model)
    dense = dense_equivalent(m, "active")
    return compute_bound_batch(m, hardware, routing=routing) / compute_bound_batch(dense, hardware)


__all__ += ["compute_bound_ratio"]


def tokens_per_expert(model: Model | str, tokens, routing: str = "uniform"):
    """Chapter 10: the tokens each expert a step reads sees, ``T k / experts_touched(T)`` (the rows of
    its matmuls; :func:`experts_touched` under ``routing``)."""
    m = _moe_model(model)
    t = number("tokens", tokens, integer=True)
    return t * m.moe.experts_per_token / experts_touched(m, t, routing)


__all__ += ["tokens_per_expert"]


def token_all_to_all_bytes(model: Model | str, dtype: str = "bf16") -> float:
    """Chapter 10: the bytes one token sends over a whole forward pass under expert parallelism:
    dispatch and combine (:func:`all_to_all_bytes_per_token` each) on every MoE layer."""
    m = _moe_model(model)
    return 2 * all_to_all_bytes_per_token(m, dtype) * m.moe.moe_layers(m.num_layers)


__all__ += ["token_all_to_all_bytes"]


def per_gpu_step(model: Model | str, hardware: Hardware | str, per_gpu, context=0, *, ep: int,
                 **options) -> ExpertParallelStep:
    """Chapter 10: :func:`expert_parallel_step` with ``per_gpu`` sequences on each of the ``ep`` GPUs
    (``ep x per_gpu`` in all); ``options`` as there."""
    per_gpu = int(number("per_gpu", per_gpu, integer=True))
    ep = int(number("ep", ep, integer=True))
    return expert_parallel_step(model, hardware, ep * per_gpu, context, ep=ep, **options)


__all__ += ["per_gpu_step"]


class PublishedTraining(NamedTuple):
    """Chapter 10: DeepSeek-V3's published pre-training on the chapter's model: FLOPs (``6 N_active`` a
    token plus attention, :func:`~roofline.workloads.training.training_flops_per_token`, times the tokens),
    the FLOP/s each GPU sustained over the published GPU hours, and a dense model of the total size's
    FLOPs over them."""

    flops: float
    sustained: float
    dense_ratio: float


__all__ += ["PublishedTraining"]


def published_training(model: Model | str = "deepseek-v3") -> PublishedTraining:
    """Chapter 10: :class:`PublishedTraining` from :data:`PUBLISHED`'s tokens and pre-training GPU hours."""
    m = _moe_model(model)
    tokens, hours = PUBLISHED["v3_tokens"][0], PUBLISHED["v3_pretraining_gpu_hours"][0]
    flops = training_flops_per_token(m) * tokens
    dense = training_flops_per_token(dense_equivalent(m, "total")) * tokens / flops
    return PublishedTraining(flops, flops / (hours * 3600), dense)


__all__ += ["published_training"]


def mha_kv_bytes(model: Model | str, context=1, dtype: str = "fp8") -> float:
    """Chapter 10: the KV cache bytes a plain multi-head attention with the model's heads would keep for
    ``context`` tokens: ``L x heads x (d_k + d_v)`` elements a token (MLA's keys are ``head_dim`` wide,
    values ``v_head_dim``), against MLA's compressed latent."""
    m = load_model(model)
    if m.mla is None:
        raise ValueError(f"model {m.name!r} has no multi-head latent attention to compare plain attention with")
    per_token = m.num_layers * m.num_heads * (m.head_dim + m.mla.v_head_dim) * dtype_bytes(dtype)
    return per_token * number("context", context, integer=True)


__all__ += ["mha_kv_bytes"]


def miss_probability(model: Model | str) -> float:
    """Chapter 10, exercise 1: the chance one token's routing leaves a given expert out, ``q = 1 - E_tok/E``."""
    e = _moe_model(model).moe
    return 1 - e.experts_per_token / e.num_experts


__all__ += ["miss_probability"]


def saturation_tokens(model: Model | str, fraction: float = 0.99) -> float:
    """Chapter 10, exercise 1: :func:`saturation_batch` before rounding up, ``ln(1 - epsilon) / ln(1 - E_tok/E)``,
    ``epsilon`` the ``fraction``."""
    f = number("fraction", fraction)
    if not f < 1:
        raise ValueError(f"fraction must be between 0 and 1 (exclusive), got {fraction!r}")
    return float(np.log(1 - f) / np.log(miss_probability(model)))


__all__ += ["saturation_tokens"]


def touched_share(model: Model | str, tokens, routing: str = "uniform"):
    """Chapter 10: the share of a layer's experts a step of ``tokens`` reads, ``experts_touched / E``."""
    m = _moe_model(model)
    return experts_touched(m, tokens, routing) / m.moe.num_experts


__all__ += ["touched_share"]


def ridge_tokens(model: Model | str, hardware: Hardware | str, dtype: str = "bf16") -> float:
    """Chapter 10, exercise 2: the tokens a step needs for its experts' matmuls to reach the ridge point,
    ``ridge x E / k`` (a dense layer needs the ridge alone)."""
    return get_hardware(hardware).ridge_point(dtype) * sparsity(model)


__all__ += ["ridge_tokens"]


class TokenExchange(NamedTuple):
    """Chapter 10, exercise 3: one token in one MoE layer under expert parallelism: bytes it sends (dispatch
    and combine), their seconds on a link, the FLOPs of its ``k`` routed experts and the shared one, their
    seconds at peak."""

    bytes: float
    seconds: float
    flops: float
    compute: float

    @property
    def ratio(self) -> float:
        """The link's seconds over the experts' seconds: above 1 the exchange cannot hide behind the work."""
        return self.seconds / self.compute


__all__ += ["TokenExchange"]


def token_exchange(model: Model | str, hardware: Hardware | str, tier: str = "network", *,
                   dtype: str = "fp8") -> TokenExchange:
    """Chapter 10, exercise 3: :class:`TokenExchange` on ``tier``: ``2 k h a`` bytes of bf16 activations over
    the tier's bandwidth against ``2 (k P_expert + P_shared)`` FLOPs at the ``dtype`` peak the experts run at."""
    m, hw = _moe_model(model), get_hardware(hardware)
    hw.link(tier)  # a tier the catalog does not give the GPU is named before anything is counted
    sent = 2 * all_to_all_bytes_per_token(m)
    flops = 2 * (expert_params(m) * m.moe.experts_per_token + sum(lin.params for lin in m.shared_expert_linears()))
    return TokenExchange(sent, sent / hw.interconnect[tier].each_way, flops, flops / hw.peak_flops(dtype))


__all__ += ["token_exchange"]


def non_routed_params(model: Model | str) -> int:
    """Chapter 10, exercise 4: the parameters outside the routed experts (attention, shared experts, dense
    layers, embeddings), which expert parallelism keeps whole on every GPU."""
    m = _moe_model(model)
    return m.params - routed_expert_params(m)


__all__ += ["non_routed_params"]


def mla_saving(model: Model | str, dtype: str = "fp8") -> float:
    """Chapter 10: the KV cache a plain multi-head attention with the model's heads would keep per token
    (:func:`mha_kv_bytes`) over what its multi-head latent attention keeps
    (:func:`~roofline.workloads.kv_cache.kv_bytes_per_token`)."""
    return mha_kv_bytes(model, 1, dtype) / kv_bytes_per_token(model, dtype)


__all__ += ["mla_saving"]


def against_dense(model: Model | str, hardware: Hardware | str, batch, context=0, *, size: str = "active",
                  routing: str = "uniform") -> float:
    """Chapter 10: a MoE decode step's time over that of its dense equivalent of ``size`` ('active' or
    'total', :func:`dense_equivalent`) at the same ``batch`` and ``context``, on the datasheet roof."""
    m, hw = _moe_model(model), get_hardware(hardware)
    mine = predict(decode_step(m, batch, context, routing=routing), hw).time
    return mine / predict(decode_step(dense_equivalent(m, size), batch, context, routing=routing), hw).time


__all__ += ["against_dense"]


def exchange_over_work(step: ExpertParallelStep) -> float:
    """Chapter 10: an expert-parallel step's dispatch-and-combine time per MoE layer over the layer's
    expert work: above 1 the all-to-all cannot hide behind the experts."""
    if not isinstance(step, ExpertParallelStep):
        raise TypeError(f"step must be an ExpertParallelStep (from expert_parallel_step), got {type(step).__name__}")
    return step.all_to_all_pair_time / step.moe_layer_time


__all__ += ["exchange_over_work"]


def published_token_rate(gpu_hours, tokens=1e12) -> float:
    """Chapter 10: tokens a second each GPU trained, from a published count of GPU hours for ``tokens`` tokens:
    ``tokens / (gpu_hours x 3600)`` (DeepSeek-V3's 180K H800 hours per trillion tokens: about 1,543)."""
    hours = number("gpu_hours", gpu_hours)
    return number("tokens", tokens) / (hours * 3600.0)


__all__ += ["published_token_rate"]
