"""Serving: how many requests fit beside the weights, and how fast they decode (chapter 5).

A server holds the weights once and one KV cache per request in flight. The cache is what caps the
batch: usable HBM less the weights, divided by the bytes one sequence's cache takes, is the largest
number of requests that fit (:func:`largest_batch`). Decode wants that batch large (chapter 1), so the
bytes per token of the cache decide throughput as much as the weights do. :func:`serving_capacity` puts
it together: the memory, the largest batch at a context, and the decode step at that batch under a
roof (:func:`roofline.workloads.inference.decode_step`, :func:`roofline.core.roof.predict`).

Named choices:

- **Layouts.** Multi-head (one K and V per query head), grouped-query (a K and V per group), multi-query
  (one for all heads) and DeepSeek's multi-head latent attention (one compressed latent and one shared
  rotary key per token and layer); sliding-window layers keep only their window
  (:meth:`roofline.core.model.Model.kv_cache_bytes`). :func:`attention_layout` names them.
- **Paging.** With ``block_size`` B, a sequence of ``c`` tokens holds ``ceil(c / B)`` blocks of B
  tokens (Kwon et al. 2023); the last one is partly empty, so the waste is under one block per
  sequence. ``block_size=None`` is an exact, contiguous cache of ``c`` tokens; ``reserve_tokens``
  is the older practice of reserving a contiguous cache for the longest sequence a request may reach.
- **Tensor parallelism.** ``gpus`` GPUs serve one copy of the model, pooling their HBM, bandwidth and
  FLOPs (the all-reduces are not counted: chapter 8). Each GPU keeps the KV heads of its query heads,
  so a KV head is stored on ``gpus / num_kv_heads`` GPUs when there are fewer KV heads than GPUs, and
  a latent (MLA) on every GPU (:func:`kv_replicas`).
- **MLA decode.** The decode step of latent attention is modelled under the text accounting with the
  absorbed kernel (chapter 10), not kernel by kernel (:class:`~roofline.core.model.NotModelledError` from
  :func:`~roofline.workloads.inference.decode_step` under ``accounting='refined'``); its attention FLOPs per
  cached token, absorbed or not, are :func:`mla_attention_flops_per_key`.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from roofline.core.checks import number
from roofline.core.cost import Breakdown
from roofline.core.hardware import Hardware, get_hardware
from roofline.workloads.inference import PARTS, decode_step, prefill
from roofline.core.model import Model, NotModelledError, load_model
from roofline.core.network import gpu_count
from roofline.core.ops import Op
from roofline.core.roof import CalibratedRoof, as_roof, predict
from roofline.workloads.quantization import check_math
from roofline.core.units import dtype_bytes, fmt
from roofline.parallel.tensor_parallel import (TPPrediction, check_tp, predict_tp, tp_decode_step,
                                              weights_per_gpu)
from roofline.workloads.memory import Footprint
from roofline.workloads.kv_cache import (VLLM_BLOCK_SIZE, attention_layout, check_context, kv_bytes_per_token, kv_replicas,
                                         largest_batch, paged_tokens, paging_waste, sequence_kv_bytes,
                                         shared_prefix_saving)
from roofline.workloads.memory import weight_bytes

__all__ = [
    "PUBLISHED",
    "VLLM_BLOCK_SIZE",
    "ServingCapacity",
    "attention_layout",
    "check_context",
    "kv_replicas",
    "kv_bytes_per_token",
    "paged_tokens",
    "sequence_kv_bytes",
    "paging_waste",
    "largest_batch",
    "mla_attention_flops_per_key",
    "serving_capacity",
    "TPServingCapacity",
    "tp_serving_capacity",
    "expert_parallel_footprint",
    "shared_prefix_saving",
    "time_to_first_token",
    "latency_throughput",
]

PUBLISHED = MappingProxyType({
    # (value, unit, bib key, what the source reports)
    "mqa_quality": ("minor", "", "shazeer2019mqa",
                    "multi-query attention decodes much faster with only minor quality degradation"),
    "gqa_uptrain_compute": (5.0, "%", "ainslie2023gqa",
                            "share of the original pre-training compute spent uptraining a multi-head checkpoint"),
    "mla_kv_saving": (93.3, "%", "deepseek2024v2",
                      "KV cache saved by DeepSeek-V2 (MLA) against DeepSeek 67B (multi-head)"),
    "mla_throughput": (5.76, "×", "deepseek2024v2",
                       "DeepSeek-V2's maximum generation throughput against DeepSeek 67B's"),
    "mla_gqa_groups": (2.25, "", "deepseek2024v2",
                       "MLA's cache equals that of GQA with this many groups, at quality above MHA"),
    "vllm_used_low": (20.4, "%", "kwon2023vllm",
                      "least share of KV memory holding real token states in the systems vLLM compared against"),
    "vllm_used_high": (38.2, "%", "kwon2023vllm",
                       "largest share of KV memory holding real token states in those systems"),
    "vllm_gain_low": (2.0, "×", "kwon2023vllm", "throughput gain of vLLM at the same latency, low end"),
    "vllm_gain_high": (4.0, "×", "kwon2023vllm", "throughput gain of vLLM at the same latency, high end"),
})
"""Figures the chapter quotes from its sources, each with its bibliography key: the roofline cannot
compute quality, nor a real allocator's waste, so these are reported, not derived."""


def mla_attention_flops_per_key(model: Model | str, *, absorbed: bool = True) -> float:
    """FLOPs one decode query spends on one cached token, summed over layers, under latent attention.

    ``absorbed`` (how DeepSeek serves it): the key up-projection is folded into the query and the value
    up-projection into the output, so each head scores against the cached latent and rotary key
    (``kv_lora_rank + qk_rope_head_dim`` wide) and sums latents (``kv_lora_rank`` wide):
    ``2 heads (2 r + d_rope)`` per layer. Not absorbed: every cached latent is first expanded to
    per-head keys and values (``kv_b_proj``, ``2 r heads (d_nope + d_v)``), then attended to as in
    multi-head attention (``2 heads (d_nope + d_rope + d_v)``).
    """
    m = load_model(model)
    if m.mla is None:
        raise ValueError(f"{m.name} does not use multi-head latent attention (no kv_lora_rank in its config)")
    a, heads = m.mla, m.num_heads
    if absorbed:
        per_layer = 2 * heads * (2 * a.kv_lora_rank + a.qk_rope_head_dim)
    else:
        expand = 2 * a.kv_lora_rank * heads * (a.qk_nope_head_dim + a.v_head_dim)
        per_layer = expand + 2 * heads * (a.qk_nope_head_dim + a.qk_rope_head_dim + a.v_head_dim)
    return float(m.num_layers * per_layer)


@dataclass(frozen=True)
class ServingCapacity:
    """One server: a model on ``gpus`` GPUs at one context, its memory and its decode at the largest batch.

    Memory (bytes, across the server): ``usable`` HBM, ``weights``, ``kv_per_token``, ``kv_per_sequence``
    (paged or reserved), ``waste_per_sequence`` (held but empty: the end of the last block, or of the
    reservation) and ``max_batch``. Decode at
    ``batch`` (``max_batch`` unless asked otherwise): ``step_time`` (also the time per output token, each
    sequence getting one token a step), ``tokens_per_s``, ``bound``, ``utilization``, ``flops``,
    ``bytes`` and ``kv_read_share`` (the KV cache's share of the bytes); None where ``not_modelled``
    says why (a mixture of experts at batch > 1, latent attention) or nothing fits.
    """

    model: str
    hardware: str
    gpus: int
    context: int
    weights_dtype: str
    kv_dtype: str
    block_size: int | None
    layout: str
    usable: float
    weights: float
    kv_per_token: float
    kv_per_sequence: float
    waste_per_sequence: float
    max_batch: int
    batch: int
    reserve: float = 0.0  # bytes set aside for anything else (activations, the engine's workspace)
    kv_copies: int = 1  # copies of each token's cache across the GPUs (kv_replicas)
    roof: str = ""
    step_time: float | None = None
    tokens_per_s: float | None = None
    bound: str | None = None
    utilization: float | None = None
    flops: float | None = None
    bytes: float | None = None
    kv_read_share: float | None = None
    not_modelled: str | None = None
    math_dtype: str | None = None  # the matmuls' format (None: bf16, whatever the weights are stored in)

    @property
    def fits(self) -> bool:
        """Whether at least one sequence of this context fits beside the weights."""
        return self.max_batch >= 1

    @property
    def kv_total(self) -> float:
        """KV cache held at ``batch`` sequences."""
        return self.batch * self.kv_per_sequence

    @property
    def time_per_output_token(self) -> float | None:
        """Seconds between two tokens of one request: one decode step."""
        return self.step_time

    @property
    def achieved_flops(self) -> float | None:
        """FLOP/s the decode step sustains (chapter 5): ``flops / step_time``; None without a decode."""
        return None if self.step_time is None else self.flops / self.step_time

    @property
    def intensity(self) -> float | None:
        """FLOP per byte of the decode step (chapter 5): ``flops / bytes``; None without a decode."""
        return None if self.bytes is None else self.flops / self.bytes

    def verdict(self) -> str:
        """The plan in one sentence, for a reader (computed words, following the catalog)."""
        where = f"{self.gpus} × {self.hardware}" if self.gpus > 1 else f"one {self.hardware}"
        if not self.fits:
            if self.weights + self.reserve >= self.usable:
                return (f"{self.model} does not fit on {where}: the weights alone take {fmt(self.weights, 'B')} of "
                        f"{fmt(self.usable, 'B')} usable")
            return (f"{self.model} leaves {fmt(self.usable - self.weights - self.reserve, 'B')} for the KV cache on {where}, less than "
                    f"one sequence of {self.context:,} tokens needs ({fmt(self.kv_per_sequence, 'B')})")
        head = f"{self.max_batch:,} sequences of {self.context:,} tokens fit on {where}"
        if self.step_time is None:
            return head + f"; decode not modelled: {self.not_modelled}"
        return (head + f"; at batch {self.batch:,} a decode step takes {fmt(self.step_time, 's')}, "
                f"{fmt(self.tokens_per_s, 'tokens/s')} in all, {self.bound}-bound at "
                f"{fmt(100 * self.utilization, '%')} of peak FLOP/s")

    def as_dict(self) -> dict:
        """Every field and derived figure, for JSON."""
        out = {k: getattr(self, k) for k in self.__dataclass_fields__}
        out.update(fits=self.fits, kv_total=self.kv_total, time_per_output_token=self.time_per_output_token)
        return out


def _server_roof(h: Hardware, gpus: int, roof, math: str = "bf16"):
    """The roof of ``gpus`` GPUs pooled: the datasheet's in the ``math`` format (bf16 unless the matmuls
    are asked to run narrower: storage formats are widened before the multiply), or a given roof (one GPU
    only when calibrated)."""
    if roof is None:
        one = as_roof(h, math)
    elif isinstance(roof, CalibratedRoof):
        if gpus != 1:
            raise ValueError("roof: a calibrated roof describes one GPU; use the datasheet roof for gpus > 1")
        return roof
    else:
        one = as_roof(roof)
    return one.pooled(gpus)


def _with_replicas(step: Breakdown, replicas: int) -> Breakdown:
    """A decode step on tensor-parallel GPUs that keep ``replicas`` copies of the cache: every copy is read
    by its own GPU, one operation more for the copies beyond the first."""
    if replicas == 1:
        return step
    extra = (replicas - 1) * np.asarray(step.parts["kv_cache"].bytes, dtype=float)
    extra = float(extra) if extra.ndim == 0 else extra
    ops = (*step.ops, Op.build("kv_replicas", "attention", math=step.formats.math, reads={"kv_cache": extra}))
    return Breakdown.from_ops(step.name, ops, step.formats, PARTS)


def serving_capacity(model: Model | str, hardware: Hardware | str, context: int, *, gpus: int = 1,
                     weights_dtype: str = "bf16", kv_dtype: str | None = None, math_dtype: str | None = None,
                     block_size: int | None = VLLM_BLOCK_SIZE, batch: int | None = None, roof=None,
                     accounting: str = "text", timing: str = "step", reserve: float = 0.0,
                     reserve_tokens: int | None = None, routing: str | None = None) -> ServingCapacity:
    """Serve ``model`` on ``gpus`` GPUs of ``hardware`` at ``context`` tokens per sequence.

    Returns a :class:`ServingCapacity`: the memory, the largest batch (:func:`largest_batch`), and at that
    batch (or at ``batch``, which must fit) the decode step under ``roof`` (the datasheet when None;
    a calibrated roof for one GPU) by ``timing`` and ``accounting``. A context past the model's
    ``max_position_embeddings`` is a ``ValueError``; a model that does not fit gives a plan with
    ``max_batch`` 0 and no decode figures. ``reserve_tokens`` reserves a contiguous cache of that many
    tokens per request instead of paging (``block_size`` is then ignored). ``routing`` names how a
    mixture of experts routes its tokens (:func:`roofline.parallel.moe.experts_touched`; required for its decode
    at batch > 1, else the plan says the decode is not modelled). The command
    ``roofline serve`` prints it.
    """
    m, h = load_model(model), get_hardware(hardware)
    g = gpu_count("gpus", gpus)
    context = number("context", context, integer=True)
    if np.ndim(context):
        raise TypeError("serving_capacity takes one context; for a sweep call largest_batch with an array")
    context = int(context)
    check_context(m, context)
    kv_dtype = kv_dtype or weights_dtype
    dtype_bytes(weights_dtype), dtype_bytes(kv_dtype)  # names checked before any arithmetic
    if math_dtype is not None:
        check_math(h, math_dtype)  # a math format the chip has no tensor cores for is refused (chapter 6)
    replicas = kv_replicas(m, g)
    if reserve_tokens is not None:
        block_size = None
    per_seq = float(sequence_kv_bytes(m, context, kv_dtype, block_size=block_size, gpus=g, reserve_tokens=reserve_tokens))
    waste = per_seq - float(sequence_kv_bytes(m, context, kv_dtype, block_size=None, gpus=g))
    most = largest_batch(m, h, context, gpus=g, weights_dtype=weights_dtype, kv_dtype=kv_dtype,
                         block_size=block_size, reserve=reserve, reserve_tokens=reserve_tokens)
    if batch is not None:
        batch = int(number("batch", batch, integer=True))
        if batch > most:
            raise ValueError(f"batch {batch:,} does not fit: at {context:,} tokens at most {most:,} sequences do")
    at = most if batch is None else batch
    base = dict(model=m.name, hardware=h.short or h.name, gpus=g, context=context, weights_dtype=weights_dtype,
                kv_dtype=kv_dtype, block_size=block_size, layout=attention_layout(m), usable=g * h.usable_capacity,
                weights=weight_bytes(m, weights_dtype=weights_dtype), kv_per_token=kv_bytes_per_token(m, kv_dtype, gpus=g),
                kv_per_sequence=per_seq, waste_per_sequence=waste, max_batch=most, batch=at,
                reserve=float(number("reserve", reserve, strict=False)), kv_copies=replicas, math_dtype=math_dtype)
    server = _server_roof(h, g, roof, math_dtype or "bf16")
    if at < 1:
        return ServingCapacity(**base, roof=server.label, not_modelled="nothing fits")
    try:
        step = decode_step(m, at, context, weights_dtype=weights_dtype, kv_dtype=kv_dtype, math_dtype=math_dtype,
                           accounting=accounting, routing=routing)
    except NotModelledError as exc:
        return ServingCapacity(**base, roof=server.label, not_modelled=str(exc))
    step = _with_replicas(step, replicas)
    pred = predict(step, server, timing=timing)
    t = float(pred.time)
    return ServingCapacity(**base, roof=server.label, step_time=t, tokens_per_s=at / t, bound=str(pred.bound),
                       utilization=float(pred.utilization), flops=float(step.flops), bytes=float(step.bytes),
                       kv_read_share=float(step.parts["kv_cache"].bytes) / float(step.bytes))


@dataclass(frozen=True)
class TPServingCapacity:
    """A server of one model tensor parallel over ``tp`` GPUs (chapter 8 on chapter 5's server; the
    command ``roofline serve --tp``).

    ``plan`` is :func:`serving_capacity` with ``gpus=tp``: the memory pooled over the ``tp`` GPUs, the largest
    batch and the batch served. ``prediction`` is one tensor-parallel decode step at that batch
    (:func:`~roofline.parallel.tensor_parallel.tp_decode_step`, its all-reduces priced and not overlapped;
    None when nothing fits). ``weights_per_gpu`` is one GPU's shard of the weights
    (:func:`~roofline.parallel.tensor_parallel.weights_per_gpu`: norms whole on every GPU).
    """

    tp: int
    plan: ServingCapacity
    prediction: TPPrediction | None
    weights_per_gpu: float
    usable_per_gpu: float

    @property
    def batch(self) -> int:
        return self.plan.batch

    @property
    def max_batch(self) -> int:
        return self.plan.max_batch

    @property
    def memory_per_gpu(self) -> float:
        """Bytes one GPU holds at :attr:`batch`: its shard of the weights and its share of the KV cache
        (every copy of a replicated KV head counted, :func:`kv_replicas`)."""
        return float(self.weights_per_gpu + self.plan.kv_total / self.tp)

    @property
    def fits(self) -> bool:
        """Whether at least one sequence fits and :attr:`memory_per_gpu` is within one GPU's usable HBM."""
        return self.plan.fits and self.memory_per_gpu <= self.usable_per_gpu

    @property
    def time(self) -> float | None:
        """Seconds per decode step (the time per output token): one GPU's kernels and the collectives."""
        return None if self.prediction is None else float(self.prediction.time)

    @property
    def compute_time(self) -> float | None:
        return None if self.prediction is None else float(self.prediction.compute_time)

    @property
    def collective_time(self) -> float | None:
        return None if self.prediction is None else float(self.prediction.comm_time)

    @property
    def tokens_per_s(self) -> float | None:
        """Output tokens per second of the server: one per sequence per step."""
        return None if self.prediction is None else self.plan.batch / self.time

    @property
    def tokens_per_s_per_gpu(self) -> float | None:
        return None if self.prediction is None else self.plan.batch / self.time / self.tp


def tp_serving_capacity(model: Model | str, hardware: Hardware | str, context: int, *, tp, weights_dtype: str = "bf16",
                        kv_dtype: str | None = None, math_dtype: str | None = None,
                        block_size: int | None = VLLM_BLOCK_SIZE, batch: int | None = None,
                        gpus_per_node=8) -> TPServingCapacity:
    """Serve ``model`` tensor parallel over ``tp`` GPUs of ``hardware`` at ``context`` tokens per sequence:
    a :class:`TPServingCapacity`. The memory and the batch are :func:`serving_capacity`'s with ``gpus=tp`` (same
    arguments; the cache in the weights' format unless ``kv_dtype`` says otherwise); the decode step at that
    batch is one GPU's kernels plus the collectives, on the datasheet roof, hierarchically over nodes of
    ``gpus_per_node`` (``tp`` at most that: the all-reduces stay on NVLink).

    Llama 3 70B on 8 H100 SXM at 8,192 tokens in bf16: 197 sequences fit, each GPU holding 83.7 GB.
    """
    m, h = check_tp(model, tp, gpus_per_node=gpus_per_node), get_hardware(hardware)
    t = int(number("tp", tp, integer=True))
    plan = serving_capacity(m, h, context, gpus=t, weights_dtype=weights_dtype, kv_dtype=kv_dtype, math_dtype=math_dtype,
                        block_size=block_size, batch=batch)
    prediction = None
    if plan.max_batch >= 1:
        step = tp_decode_step(m, t, plan.batch, plan.context, weights_dtype=weights_dtype, kv_dtype=plan.kv_dtype,
                              math_dtype=math_dtype)
        prediction = predict_tp(step, h, gpus_per_node=gpus_per_node)
    return TPServingCapacity(t, plan, prediction, weights_per_gpu(m, tp=t, weights_dtype=weights_dtype), h.usable_capacity)


def expert_parallel_footprint(model: Model | str, batch, tokens, *, ep, weights_dtype: str = "bf16",
                              kv_dtype: str | None = None) -> Footprint:
    """What one of ``ep`` expert-parallel GPUs holds (chapter 10): its weights
    (:func:`~roofline.parallel.tensor_parallel.weights_per_gpu`: its share of the routed experts, a copy of everything
    else) and the KV cache of its own ``batch / ep`` sequences of ``tokens`` tokens each (attention is not
    split: each GPU attends for its part of the batch). ``batch`` must be a multiple of ``ep``."""
    m = load_model(model)
    e = int(number("ep", ep, integer=True))
    b = int(number("batch", batch, integer=True))
    if b % e:
        raise ValueError(f"batch must be a multiple of ep ({e}): each GPU attends for batch / ep sequences, "
                         f"got batch={b}")
    weights = weights_per_gpu(m, ep=e, weights_dtype=weights_dtype)
    kv = b // e * float(m.kv_cache_bytes(tokens, kv_dtype or weights_dtype))
    return Footprint({"weights": weights, "kv_cache": kv})


def time_to_first_token(model: Model | str, hardware: Hardware | str, prompt, *, gpus: int = 1,
                        weights_dtype: str = "bf16", kv_dtype: str | None = None, math_dtype: str | None = None,
                        roof=None, accounting: str = "text", timing: str = "step", routing: str | None = None):
    """Seconds from a request's admission to its first token when its prompt of ``prompt`` tokens is
    prefilled alone (chapter 12): one :func:`~roofline.workloads.inference.prefill` that keeps only the last
    logits, on ``gpus`` GPUs pooled (all-reduces not counted). Queueing and sharing the step with other
    requests add to it (:mod:`roofline.serving.batching` simulates both). Broadcasts over ``prompt``.
    ``routing`` as in :func:`~roofline.workloads.inference.prefill` (a mixture of experts)."""
    m, h = load_model(model), get_hardware(hardware)
    g = gpu_count("gpus", gpus)
    prompt = number("prompt", prompt, integer=True)
    check_context(m, prompt)
    if math_dtype is not None:
        check_math(h, math_dtype)
    work = prefill(m, prompt, weights_dtype=weights_dtype, kv_dtype=kv_dtype or weights_dtype, math_dtype=math_dtype,
                   accounting=accounting, routing=routing, **({"lm_head": "last"} if accounting == "refined" else {}))
    t = predict(work, _server_roof(h, g, roof, math_dtype or "bf16"), timing=timing).time
    return float(t) if np.ndim(t) == 0 else np.asarray(t)


def latency_throughput(model: Model | str, hardware: Hardware | str, context: int, *, batches=None, prompt=None,
                       gpus: int = 1, weights_dtype: str = "bf16", kv_dtype: str | None = None,
                       math_dtype: str | None = None, roof=None, accounting: str = "text",
                       timing: str = "step", routing: str | None = None) -> dict:
    """The serving frontier at one context (chapter 12): for each batch that fits, the time per output
    token (one decode step) and the tokens per second it gives, with the time to first token of a
    ``prompt``-token prompt alone (default: the context) and the largest batch (chapter 5's wall).

    ``batches`` defaults to the powers of two below the wall and the wall itself. Returns a dict of
    numpy arrays ``batch``, ``tpot``, ``tokens_per_s``, ``bound`` and the numbers ``ttft`` and
    ``max_batch``. Raises a ``ValueError`` when nothing fits or a batch asked for does not. ``routing``
    as in :func:`~roofline.workloads.inference.decode_step` (a mixture of experts).
    """
    m, h = load_model(model), get_hardware(hardware)
    g = gpu_count("gpus", gpus)
    context = int(number("context", context, integer=True))
    check_context(m, context)
    kv_dtype = kv_dtype or weights_dtype
    most = largest_batch(m, h, context, gpus=g, weights_dtype=weights_dtype, kv_dtype=kv_dtype)
    if most < 1:
        raise ValueError(f"context: not one sequence of {context:,} tokens fits beside {m.name}'s weights on "
                         f"{g} × {h.short}")
    if batches is None:
        b = 2 ** np.arange(int(np.log2(most)) + 1)
        batches = np.unique(np.append(b[b < most], most))
    batches = np.asarray(number("batches", batches, integer=True), dtype=float).reshape(-1)
    if np.any(batches > most):
        raise ValueError(f"batches: at {context:,} tokens at most {most:,} sequences fit, asked for "
                         f"{int(np.max(batches)):,}")
    step = decode_step(m, batches, context, weights_dtype=weights_dtype, kv_dtype=kv_dtype, math_dtype=math_dtype,
                       accounting=accounting, routing=routing)
    step = _with_replicas(step, kv_replicas(m, g))
    pred = predict(step, _server_roof(h, g, roof, math_dtype or "bf16"), timing=timing)
    tpot = np.asarray(pred.time, dtype=float)
    ttft = time_to_first_token(m, h, context if prompt is None else prompt, gpus=g, weights_dtype=weights_dtype,
                               kv_dtype=kv_dtype, math_dtype=math_dtype, roof=roof, accounting=accounting, timing=timing,
                               routing=routing)
    return {"batch": batches.astype(int), "tpot": tpot, "tokens_per_s": batches / tpot,
            "bound": np.broadcast_to(np.asarray(pred.bound), batches.shape), "ttft": float(ttft), "max_batch": int(most)}


# Chapter 12's quantities that the prose quotes, each one call for the notebook.

def compute_roof_tokens_per_s(model: Model | str, hardware: Hardware | str, dtype: str = "bf16") -> float:
    """Chapter 12: the tokens per second no batch can pass on one GPU, its peak over one token's decode FLOPs
    (:func:`~roofline.workloads.inference.decode_step` at batch 1, no context): the frontier's compute roof."""
    return get_hardware(hardware).peak_flops(dtype) / float(decode_step(load_model(model), 1, 0).flops)


__all__ += ["compute_roof_tokens_per_s"]


def prefill_in_decode_steps(model: Model | str, hardware: Hardware | str, prompt, *, batch=1, context=None) -> float:
    """Chapter 12: a prompt's time to first token (:func:`time_to_first_token`) in decode steps of ``batch``
    sequences at ``context`` tokens (default: the prompt's length) on the datasheet roof: how many steps
    of the running batch one arriving prompt costs."""
    m, h = load_model(model), get_hardware(hardware)
    prompt = int(number("prompt", prompt, integer=True))
    context = prompt if context is None else int(number("context", context, integer=True, strict=False))
    return time_to_first_token(m, h, prompt) / float(predict(decode_step(m, batch, context), h).time)


__all__ += ["prefill_in_decode_steps"]


# --------------------------------------------------------------------------------------------------------------
# Chapter 5's quoted figures, as functions (the notebook only calls, picks and glues)
# --------------------------------------------------------------------------------------------------------------


def with_kv_heads(model: str, kv_heads: int, name: str | None = None) -> Model:
    """A shipped model rebuilt from its config with ``kv_heads`` K/V heads (chapter 5: Llama 3 8B as
    multi-query with 1, Llama 2 7B as grouped-query with 8); every other number is the config's."""
    from roofline.core.model import model_config, model_from_config

    config = model_config(model)
    heads = config["num_attention_heads"]
    kv_heads = int(number("kv_heads", kv_heads, integer=True))
    if heads % kv_heads:
        raise ValueError(f"kv_heads must divide the {heads} query heads of {model}, got {kv_heads}")
    return model_from_config({**config, "num_key_value_heads": kv_heads}, name or f"{model} with {kv_heads} KV heads")


__all__ += ["with_kv_heads"]


def mha_kv_bytes_per_token(model: Model | str, kv_dtype: str = "bf16", *, kv_heads: int | None = None) -> float:
    """KV bytes per token the model would cache without latent attention (chapter 5): every layer keeps
    a key of ``head_dim`` and a value of ``v_head_dim`` for each of ``kv_heads`` heads (all the query
    heads by default: multi-head; 1: multi-query), ``layers x kv_heads x (d_k + d_v) x bytes``."""
    m = load_model(model)
    d_v = m.mla.v_head_dim if m.mla is not None else m.head_dim
    heads = m.num_heads if kv_heads is None else int(number("kv_heads", kv_heads, integer=True))
    return float(m.num_layers * heads * (m.head_dim + d_v) * dtype_bytes(kv_dtype))


__all__ += ["mha_kv_bytes_per_token"]


def mla_intensity(model: Model | str, kv_dtype: str = "bf16", *, absorbed: bool = True) -> float:
    """FLOP per byte of latent-attention decode (chapter 5): :func:`mla_attention_flops_per_key` over the
    bytes one cached token holds (:func:`kv_bytes_per_token`)."""
    return mla_attention_flops_per_key(model, absorbed=absorbed) / kv_bytes_per_token(model, kv_dtype)


__all__ += ["mla_intensity"]


def kv_room(model: Model | str, hardware: Hardware | str, *, gpus: int = 1, weights_dtype: str = "bf16",
            reserve: float = 0.0) -> float:
    """Bytes of usable HBM left for the KV cache beside the weights (chapter 5), what
    :func:`largest_batch` divides by one sequence's cache: ``gpus x usable - weights - reserve``."""
    h = get_hardware(hardware)
    gpus = int(number("gpus", gpus, integer=True))
    return gpus * h.usable_capacity - weight_bytes(model, weights_dtype=weights_dtype) - reserve


__all__ += ["kv_room"]


def window_share(model: Model | str, context: int | None = None) -> float:
    """The share of a full cache a sliding-window model keeps for one sequence of ``context`` tokens (its
    trained length by default), chapter 5: exact cache bytes over ``kv_bytes_per_token x context``."""
    m = load_model(model)
    context = m.max_position_embeddings if context is None else int(number("context", context, integer=True))
    return float(sequence_kv_bytes(m, context, block_size=None)) / (m.kv_bytes_per_token() * context)


__all__ += ["window_share"]


def full_cache_bytes(model: Model | str, context: int | None = None) -> float:
    """Bytes a sequence of ``context`` tokens (the trained length by default) would cache if every layer
    kept every token, no window (chapter 5): ``kv_bytes_per_token x context``."""
    m = load_model(model)
    context = m.max_position_embeddings if context is None else int(number("context", context, integer=True))
    return m.kv_bytes_per_token() * context


__all__ += ["full_cache_bytes"]


def marginal_intensity(model: Model | str, context: int, **options) -> float:
    """FLOP per byte that one more sequence adds to a decode step (chapter 5): the step at batch 2 less
    the step at batch 1, FLOPs over bytes; ``options`` go to :func:`~roofline.workloads.inference.decode_step`."""
    one, two = decode_step(model, 1, context, **options), decode_step(model, 2, context, **options)
    return float(two.flops - one.flops) / float(two.bytes - one.bytes)


__all__ += ["marginal_intensity"]


def paging_waste_share(model: Model | str, contexts, *, block_size: int = VLLM_BLOCK_SIZE) -> float:
    """The share of the cache that paging holds empty over a set of requests (chapter 5): the sum of
    :func:`paging_waste` over the sum of the paged bytes."""
    return (float(np.sum(paging_waste(model, contexts, block_size=block_size)))
            / float(np.sum(sequence_kv_bytes(model, contexts, block_size=block_size))))


__all__ += ["paging_waste_share"]


def reserve_share(contexts, reserve_tokens: int) -> float:
    """The share of a reservation of ``reserve_tokens`` per request that requests of these lengths use,
    on average (chapter 5): ``mean(contexts) / reserve_tokens``."""
    reserve_tokens = int(number("reserve_tokens", reserve_tokens, integer=True))
    return float(np.mean(contexts)) / reserve_tokens


__all__ += ["reserve_share"]


def weights_kv_crossover(model: Model | str, batch: int = 1, kv_dtype: str = "bf16",
                         weights_dtype: str = "bf16") -> float:
    """The context at which a decode step of ``batch`` sequences reads as many cache bytes as weight
    bytes (chapter 5): ``weights / (batch x kv bytes per token)``."""
    batch = int(number("batch", batch, integer=True))
    return weight_bytes(model, weights_dtype=weights_dtype) / (batch * kv_bytes_per_token(model, kv_dtype))


__all__ += ["weights_kv_crossover"]


def decode_throughput(model: Model | str, hardware: Hardware | str, batch, context, **options):
    """Tokens per second of a decode step of ``batch`` sequences at ``context`` cached tokens (chapter 5):
    ``batch / step time`` on the datasheet roof under the step rule, no memory check (the wall is
    :func:`largest_batch`). Broadcasts over ``batch`` and ``context``; ``options`` go to
    :func:`~roofline.workloads.inference.decode_step`."""
    b = number("batch", batch, integer=True)
    out = np.asarray(b / predict(decode_step(model, batch, context, **options), get_hardware(hardware)).time)
    return out.item() if out.ndim == 0 else out


__all__ += ["decode_throughput"]


def batch_kv_bytes_per_token(model: Model | str, batch: int, kv_dtype: str = "bf16") -> float:
    """KV bytes a decode step of ``batch`` sequences adds per token of context (chapter 5):
    ``batch x kv_bytes_per_token``."""
    batch = int(number("batch", batch, integer=True))
    return batch * kv_bytes_per_token(model, kv_dtype)


__all__ += ["batch_kv_bytes_per_token"]
