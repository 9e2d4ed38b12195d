"""Rules of thumb: each chapter's threshold in closed form, to be worked by hand (the Reference part's page).

Every rule is a first-order reading of the three budgets: a ratio of one peak to one bandwidth (a *ridge*)
times a constant that comes from the model's shape. Where the package already has the quantity, the rule
calls it (the ridge point is :func:`roofline.core.roof.ridge_point`, data parallelism's threshold is
:func:`roofline.parallel.data_parallel.hiding_tokens`, tensor parallelism's width is
:func:`roofline.parallel.tensor_parallel.hiding_width`, the compute-bound decode batch is
:func:`roofline.workloads.inference.compute_bound_batch`); this module adds only what was missing and
:func:`rules_for` sets each rule beside what the package's full model answers for the same question (the
planner's layout, the decode step priced degree by degree, the batch sweep), with a line saying why they
part where they do.

The rules leave out, on purpose: collective latency (the alpha of the alpha-beta model), the pipeline
bubble, memory, launch overheads and the contention of overlapping kernels. The full model has them, which
is where the gaps come from. A measured (calibrated) roof moves every ridge, and with it every threshold
here: :func:`calibrated_thresholds` puts the rates a cluster roof (appendix C) holds through the same
formulas, and :func:`rules_for` sets the result beside the datasheet's value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np

from roofline.core.checks import count, number, unknown_name
from roofline.core.cluster_roof import ENGINE_ALLREDUCE, ClusterRoof
from roofline.core.collectives import collective_cost
from roofline.core.cost import Breakdown, Cost
from roofline.core.hardware import Hardware, get_hardware
from roofline.core.model import Model, NotModelledError, load_model, param_count
from roofline.core.network import cluster
from roofline.core.roof import predict, ridge_point
from roofline.core.units import dtype_bytes
from roofline.parallel.data_parallel import hiding_tokens, tier_thresholds
from roofline.parallel.planner import bubble_share, plan as plan_layouts
from roofline.parallel.tensor_parallel import (best_degree, check_tp, comm_latency_share, hiding_width, message_bytes,
                                                tier_ridge, width_constant)
from roofline.workloads.inference import compute_bound_batch, decode_step
from roofline.workloads.kv_cache import check_context, largest_batch
from roofline.workloads.memory import activation_bytes, layer_activations, saved_tensors, weight_bytes
from roofline.workloads.training import step_tokens, training_flops_per_token

__all__ = ["ridge", "vector_roof", "vector_ridge", "dot_intensity", "dp_tokens", "dp_tokens_closed", "fsdp_tokens",
           "tp_width", "MixedOptimum", "mixed_optimum", "decode_tp_constant", "decode_tp_bound", "attention_crossover",
           "attention_crossover_exact", "kv_bound_batch", "decode_compute_batch", "Band", "time_band", "RuleResult",
           "band_check", "decode_batch_check", "kv_batch_check", "fsdp_check", "decode_tp_check", "mixed_checks",
           "attention_check", "matmul_outputs_bytes", "Keep", "keep_by_intensity", "matmul_outputs_check",
           "mixed_constant", "calibrated_thresholds", "rules_for", "find_rule", "AGAINST", "decode_bus_bandwidth"]

AGAINST = ("mlp", "layer")
"""What attention's FLOPs are set against in :func:`attention_crossover`: the MLP's matmuls, or every matmul
of the layer (the projections too, the comparison "How to Scale Your Model" makes)."""


def _dense(model, what: str) -> Model:
    m = load_model(model)
    if m.moe is not None or m.mla is not None:
        raise NotModelledError(f"{what} reads one dense layer's shape (its matmul weights, hidden size and attention "
                               f"width); {m.name} has {'experts' if m.moe is not None else 'latent attention'}, "
                               "which the rules of thumb do not model yet")
    return m


# --- chapter 1: the roofs ---------------------------------------------------------------------------------

def ridge(hardware: Hardware | str, dtype: str = "bf16") -> float:
    """Chapter 1: the ridge point ``F / B_hbm`` (FLOP per byte); work of lower intensity is memory-bound.
    The catalog's own figure, :func:`roofline.core.roof.ridge_point` (H100 SXM in bf16: 295)."""
    return float(ridge_point(get_hardware(hardware), dtype))


def vector_roof(hardware: Hardware | str) -> float:
    """Chapter 1: the second compute roof, FLOP/s of the vector (non-tensor) units, for work the tensor cores
    cannot run (reductions, dot products, norms, softmax): the catalog's ``fp32`` entry, which is the
    non-tensor FP32 rate on every chip it lists (H100 SXM: 66.9 TFLOP/s, against 989 on the tensor cores)."""
    return float(get_hardware(hardware).peak_flops("fp32"))


def vector_ridge(hardware: Hardware | str) -> float:
    """Chapter 1: the vector roof's ridge, ``F_vector / B_hbm`` (H100 SXM: 20 FLOP/B): below it vector work is
    memory-bound. A dot product (:func:`dot_intensity`, 0.5 in bf16) sits far below either ridge."""
    hw = get_hardware(hardware)
    return vector_roof(hw) / hw.hbm_bandwidth


def dot_intensity(dtype: str = "bf16") -> float:
    """Chapter 1: a dot product of two ``k``-vectors runs ``2 k`` FLOPs (a multiply and an add per element) on
    ``2 k w`` bytes read, so its intensity is ``1 / w`` FLOP/B whatever ``k``: 0.5 in bf16, 0.25 in fp32."""
    return 1.0 / dtype_bytes(dtype)


class Band(NamedTuple):
    """Chapter 1: the max-to-sum band of one piece of work: ``lower = max(t_compute, t_memory)`` (perfect
    overlap, the step rule), ``upper = t_compute + t_memory`` (none, the serial rule), ``ratio = upper /
    lower``, between 1 and 2."""

    lower: float | np.ndarray
    upper: float | np.ndarray
    ratio: float | np.ndarray


def time_band(work: Cost | Breakdown, roof, *, dtype: str | None = None) -> Band:
    """Chapter 1: ``max(t_c, t_m) <= T <= t_c + t_m``: the step and serial timing rules of
    :func:`roofline.core.roof.predict`, side by side. The sum is at most twice the max (``a + b <= 2 max(a,
    b)``), so any overlap the hardware manages lands the time within a factor of two of the floor; the
    ratio is largest (2) at the ridge, where the two times are equal."""
    low = predict(work, roof, dtype=dtype, timing="step").time
    high = predict(work, roof, dtype=dtype, timing="serial").time
    ratio = np.divide(high, low)
    return Band(low, high, float(ratio) if np.ndim(ratio) == 0 else ratio)


# --- chapter 7: data parallelism and FSDP -------------------------------------------------------------------

def dp_tokens(model: Model | str, hardware: Hardware | str, *, nodes=1, gpus_per_node=8,
              grad_dtype: str = "bf16") -> float:
    """Chapter 7: the tokens each GPU must process per step for plain data parallelism to hide its gradient
    all-reduce behind the backward pass: :func:`~roofline.parallel.data_parallel.hiding_tokens` (ZeRO-0).

    The exchange starts with the backward pass (the first buckets are ready as it begins), so it has the
    backward's ``4 N`` FLOPs a token to hide behind, not the step's ``6 N``. A ring all-reduce sends
    ``2 (N_d-1)/N_d`` of the ``w N`` gradient bytes, so ``4 N D_GPU / P_peak >= 2 (N_d-1)/N_d w N / B_link``
    gives

    ``D_GPU >= (P_peak / B_link) x w x 2 (N_d-1)/N_d / 4``, which is ``(P_peak / B_link) (N_d-1)/N_d`` for bf16
    gradients (``w = 2``):

    the model's size cancels, and the threshold is the link's ridge point. Across nodes the slower tier
    sets it (:func:`dp_tokens_closed`)."""
    return float(hiding_tokens(model, hardware, nodes=nodes, gpus_per_node=gpus_per_node, zero_stage=0,
                               grad_dtype=grad_dtype))


def dp_tokens_closed(hardware: Hardware | str, *, nodes=1, gpus_per_node=8, grad_dtype: str = "bf16") -> float:
    """Chapter 7, by hand: :func:`dp_tokens` as the largest of the tiers' thresholds
    (:func:`~roofline.parallel.data_parallel.tier_thresholds`: NVLink carries ``(G_node-1)/G_node`` of the
    buffer, each GPU's network port ``(n_node-1)/n_node / G_node``), scaled by ``w / 2`` for gradients of ``w``
    bytes."""
    nodes, g = cluster(nodes, gpus_per_node)
    if nodes == 1:  # one node: NVLink alone, (g-1)/g of the buffer
        worst = tier_ridge(hardware, "scale_up") * (g - 1) / g
    else:
        worst = max(t.tokens for t in tier_thresholds(hardware, nodes=nodes, gpus_per_node=g).values())
    return worst * dtype_bytes(grad_dtype) / 2


def fsdp_tokens(model: Model | str, hardware: Hardware | str, *, nodes=1, gpus_per_node=8,
                grad_dtype: str = "bf16") -> float:
    """Chapter 7: the tokens per GPU at which FSDP (ZeRO-3) hides its traffic once each layer's weight gather
    overlaps the forward pass (the next layer prefetched while this one computes).

    ZeRO-3 sends ``3 (N_d-1)/N_d w N`` bytes a step, 1.5 times plain data parallelism: a gather before the forward
    pass, a gather and a reduce-scatter in the backward pass. Phase by phase, the forward's gather
    (``(N_d-1)/N_d w N``) has ``2 N`` FLOPs a token to hide behind and the backward's two (``2 (N_d-1)/N_d w N``) have
    ``4 N``: each phase has the same bytes per FLOP as data parallelism's all-reduce against the backward, so
    the threshold is the same, ``(P_peak / B_link) (N_d-1)/N_d`` in bf16. Priced here with
    :func:`~roofline.core.collectives.collective_cost`, the larger of the two phases' thresholds.
    (:func:`~roofline.parallel.data_parallel.hiding_tokens` with ``zero_stage=3`` sets all the traffic against
    the backward pass and so finds 1.5 times this.)"""
    m, hw = load_model(model), get_hardware(hardware)
    nodes, g = cluster(nodes, gpus_per_node)
    n = nodes * g
    psi = param_count(m) * dtype_bytes(grad_dtype)
    peak = hw.peak_flops("bf16")
    forward, backward = _pass_flops(m)
    kw = {"gpus_per_node": g}
    gather = collective_cost("all_gather", n, psi, hw, overhead=0, **kw).transfer
    scatter = collective_cost("reduce_scatter", n, psi, hw, overhead=0, **kw).transfer
    return float(max(gather / (forward / peak), (gather + scatter) / (backward / peak)))


# --- chapter 8: tensor parallelism ----------------------------------------------------------------------------

def tp_width(model: Model | str, tp, hardware: Hardware | str, tier: str = "scale_up", *, dtype: str = "bf16"):
    """Chapter 8: the hidden size past which degree ``tp``'s all-reduces hide behind the layer's matmuls:
    :func:`~roofline.parallel.tensor_parallel.hiding_width` (latency left out).

    Per token a layer runs ``2 kappa h^2 / t`` FLOPs on each GPU (``N_layer = kappa h^2`` its matmul weights,
    ``kappa`` about 12) and sends two ring all-reduces of ``h w_act`` bytes, ``4 (t-1)/t h w_act``; equal
    times give

    ``h* = 2 (t-1) w_act (P_peak / B_link) / kappa``,

    the tier's ridge point again, times a constant. Broadcasts over ``tp``."""
    return hiding_width(model, tp, hardware, tier, dtype=dtype)


def decode_tp_constant(model: Model | str) -> float:
    """Chapter 8: ``F_d = N_layer / (4 h)``, the model's constant in :func:`decode_tp_bound` (``kappa h / 4``
    with ``N_layer = kappa h^2``), in tokens: a layer's matmul weights over the four hidden states' worth of
    elements its two all-reduces carry per token (Llama 3 70B: 26,112)."""
    m = _dense(model, "decode_tp_constant")
    return m.layer_matmul_params / (4 * m.hidden_size)


def decode_tp_bound(model: Model | str, hardware: Hardware | str, batch=1, *, tier: str = "scale_up",
                    dtype: str = "bf16", weights_dtype: str | None = None):
    """Chapter 8: the largest tensor-parallel degree at which a memory-bound decode step's all-reduces still
    take less time than its weight reads: ``t < 1 + F_d / (B rho)``, with ``rho = B_HBM / B_link`` (HBM
    bandwidth over the link's) and ``F_d = N_layer / (4 h)``.

    Per layer each GPU reads ``w N_layer / t`` bytes of weights (at ``B_HBM``) and sends two ring
    all-reduces of the batch's activations, ``2 x 2 (t-1)/t x B h w_act`` bytes (at ``B_link``).
    Communication wins when ``4 (t-1) B h w_act / B_link > w N_layer / B_HBM``. With one format for weights
    and activations (``w = w_act``) the bytes per element cancel: the bound does not move with the
    precision, fp8 shrinks both sides alike. ``weights_dtype`` narrower than ``dtype`` (fp8 weights, bf16
    activations) lowers it in proportion. KV-cache reads, which also shrink with ``t``, are left out (they
    raise the bound), and so is the all-reduces' latency (which, at a small batch, is what the full model
    finds binding). Broadcasts over ``batch``."""
    m, hw = _dense(model, "decode_tp_bound"), get_hardware(hardware)
    b = number("batch", batch, integer=True)
    a = dtype_bytes(dtype)
    aw = dtype_bytes(weights_dtype or dtype)
    w = hw.link(tier).each_way
    out = 1 + decode_tp_constant(m) * (aw / a) * (w / hw.hbm_bandwidth) / np.asarray(b, dtype=float)
    return float(out) if np.ndim(out) == 0 else out


# --- chapter 9: mixing FSDP and tensor parallelism --------------------------------------------------------------

def mixed_constant(model: Model | str) -> float:
    """Chapter 9: ``F_m = 3 N_layer / (8 h)``, the model's constant in :func:`mixed_optimum`, in tokens: a
    layer's three ZeRO-3 collectives of its weights over the eight hidden states' worth of elements its four
    tensor-parallel all-reduces carry per token (about ``4.5 h`` for a plain layer)."""
    m = _dense(model, "mixed_constant")
    return 3 * m.layer_matmul_params / (8 * m.hidden_size)


class MixedOptimum(NamedTuple):
    """Chapter 9: the FSDP degree ``x`` (``N_d_opt``; the tensor degree ``y = G / x``) that minimizes a training
    step's communication for ``tokens`` tokens a step on ``n`` (``G``) GPUs (unrounded), the width constant ``F_m``, the
    bandwidth ratio ``W_x / W_y``, and ``pays``: whether mixing beats FSDP alone (``x < n``), which happens
    below ``tokens_per_gpu_limit`` tokens per GPU."""

    x: float
    y: float
    n: int
    width_constant: float
    bandwidth_ratio: float
    tokens_per_gpu_limit: float
    pays: bool


def mixed_optimum(model: Model | str, hardware: Hardware | str, *, tokens, nodes=1, gpus_per_node=8) -> MixedOptimum:
    """Chapter 9: ``N_d_opt = sqrt(D / F_m x B_d / B_t x G)``, the FSDP degree that minimizes the traffic of
    ``N_d``-way FSDP times ``t``-way tensor parallelism (``N_d t = G``) for a step of ``D`` tokens.

    From the package's own cost terms, per layer and per step, at large degrees (every ring's ``(n-1)/n``
    factor taken as 1): ZeRO-3 sends three collectives (:data:`~roofline.core.network.ZERO_COLLECTIVES`) of
    the layer's ``w N_layer / t`` weight shard over the FSDP link, ``3 w N_layer / (t B_d)`` seconds; tensor
    parallelism four all-reduces (two forward, two backward) of the ``D / N_d`` tokens' activations,
    ``2 x 4 D h w / (N_d B_t)``. With ``t = G / N_d`` the sum ``3 w N_layer N_d / (G B_d) + 8 D h w / (N_d B_t)``
    is least at

    ``N_d_opt^2 = D G B_d / (F_m B_t)``, ``F_m = 3 N_layer / (8 h)`` (about ``4.5 h`` for a plain layer).

    Mixing pays when ``N_d_opt < G``, that is when the tokens per GPU ``D / G`` are below ``F_m B_t / B_d``.
    ``B_d`` is the network (each GPU's port) when the cluster spans nodes, else NVLink; ``B_t`` is NVLink
    (tensor parallelism stays inside a node). Compute, latency, the pipeline and memory are left out: the
    planner (:func:`roofline.parallel.planner.plan`) has them."""
    m, hw = _dense(model, "mixed_optimum"), get_hardware(hardware)
    nodes, g = cluster(nodes, gpus_per_node)
    b = float(number("tokens", tokens, integer=True))
    n = nodes * g
    wy = hw.link("scale_up").each_way
    wx = hw.link("network").each_way if nodes > 1 else wy
    fm = mixed_constant(m)
    ratio = wx / wy
    x = math.sqrt(b / fm * ratio * n)
    return MixedOptimum(x, n / x, n, fm, ratio, fm / ratio, x < n)


# --- chapter 11: attention against the MLP ----------------------------------------------------------------------

def _against(m: Model, against: str) -> float:
    if against not in AGAINST:
        raise unknown_name("against", against, AGAINST)
    return float(m.mlp_matmul_params if against == "mlp" else m.layer_matmul_params)


def attention_crossover(model: Model | str, *, against: str = "mlp", causal: bool = True) -> float:
    """Chapter 11: the sequence length at which a layer's attention scores and values (``QK^T`` and ``PV``)
    cost as many FLOPs as its MLP (``against='mlp'``) or as all its matmuls (``'layer'``).

    Over a sequence of ``S`` tokens the matmuls run ``2 S N_mlp`` FLOPs (``N_mlp`` the weights they use) and
    the causal attention ``4 S^2 d / 2`` (``d`` the query heads times head size; the mask keeps half the
    pairs), so ``S_mlp* = N_mlp / d``. Counting every pair (``causal=False``) halves it: ``N_mlp / (2 d)``.
    For a plain layer against all its matmuls (``N_layer = 16 h^2`` with a gated MLP of ``4 h``, ``d = h``)
    that is ``8 h``, the figure "How to Scale Your Model" gives, which puts the crossover at half the length
    the mask does (``16 h``)."""
    m = _dense(model, "attention_crossover")
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be True or False, got {causal!r}")
    return _against(m, against) / (m.attention_width * (1 if causal else 2))


def attention_crossover_exact(model: Model | str, *, against: str = "mlp", limit: int = 1 << 24):
    """Chapter 11: the shortest sequence at which the package's own count of attention FLOPs
    (:meth:`~roofline.core.model.Model.attention_flops`, the causal triangle counted pair by pair, sliding
    windows through their window) reaches the MLP's (or the layer's) matmul FLOPs, by bisection up to
    ``limit`` tokens; None if it never does (a model whose every layer attends through a window)."""
    m = _dense(model, "attention_crossover_exact")
    p = _against(m, against) * m.num_layers
    limit = count("limit", limit, maximum=1 << 40)

    def ahead(s: int) -> bool:
        return float(m.attention_flops(s, s, causal="exact")) >= 2 * s * p

    if not ahead(limit):
        return None
    lo, hi = 1, limit
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ahead(mid) else (mid + 1, hi)
    return lo


# --- chapter 3: which activations to keep ----------------------------------------------------------------------

def matmul_outputs_bytes(model: Model | str, act_dtype: str = "bf16") -> float:
    """Chapter 3: bytes per token and per layer a Llama layer keeps when it saves its matmuls' outputs and
    rebuilds the elementwise work, ``w_act (2 h + 2 d + 2 n_kv d_head + 2 d_ff)``: the layer's input and the
    residual stream after attention (``2 h``), Q and the attention output (``2 d``), K and V (``2 n_kv
    d_head``), the MLP's gate and up outputs (``2 d_ff``, ``d_ff`` the MLP's inner width). Without recomputation the
    layer also keeps the two norms' outputs and the SwiGLU's two products, ``w_act (2 h + 2 d_ff)`` more; full
    recomputation keeps ``w_act h``. The fp32 softmax statistics (4 bytes a head) are left out."""
    m = _dense(model, "matmul_outputs_bytes")
    kv = m.num_kv_heads * m.head_dim
    return dtype_bytes(act_dtype) * (2 * m.hidden_size + 2 * m.attention_width + 2 * kv + 2 * m.intermediate_size)


class Keep(NamedTuple):
    """One tensor a layer could keep (chapter 3): its ``name``, its bytes per token at the sequence asked
    (``per_token``), the FLOPs per byte its rebuilding costs (``intensity``), whether the ridge rule keeps
    it (``by_rule``: rebuilding would be compute-bound) and whether the 'matmul-outputs' policy does
    (``by_policy``)."""

    name: str
    per_token: float
    intensity: float
    by_rule: bool
    by_policy: bool


def keep_by_intensity(model: Model | str, hardware: Hardware | str, seq, *, flash: bool = True,
                      dtype: str = "bf16") -> tuple[Keep, ...]:
    """Chapter 3: which of a layer's tensors to keep, by the ridge. Rebuilding a tensor costs FLOPs
    (:meth:`~roofline.workloads.memory.SavedTensor.rebuild_intensity`, per byte it would keep); keeping it
    costs those bytes of HBM for the whole step. Where rebuilding runs below the ridge point it is
    memory-bound work on bytes the backward pass reads anyway, nearly free; above it, it is the matmul
    run again. So keep a tensor when its rebuild intensity exceeds :func:`ridge`: every matmul output (``2
    x`` its inner dimension, thousands of FLOPs an element) and the attention output once the sequence
    passes the ridge in tokens (``4`` FLOPs an element per key, ``(S + 1)/2`` keys); not the norms' outputs,
    SiLU and the gating product (a few FLOPs an element), nor an explicit kernel's softmax output (``2
    d_head + 5``, below the ridge for heads of 128). The layer's input is kept always."""
    m, hw = _dense(model, "keep_by_intensity"), get_hardware(hardware)
    s = count("seq", seq)
    r = ridge(hw, dtype)
    out = []
    for t in saved_tensors(m, flash=flash):
        intensity = float(t.rebuild_intensity(s))
        out.append(Keep(t.name, float(t.nbytes(s, 1)) / s, intensity, intensity > r, t.kept_with_matmul_outputs))
    return tuple(out)


def matmul_outputs_check(model: Model | str, hardware: Hardware | str, seq=4096) -> RuleResult:
    """Chapter 3: :func:`matmul_outputs_bytes` beside what the package's tensor-by-tensor count keeps under
    'matmul-outputs' (:func:`~roofline.workloads.memory.layer_activations`), per token and layer, and where
    the ridge rule (:func:`keep_by_intensity`) keeps a different set."""
    m, hw = _dense(model, "matmul_outputs_check"), get_hardware(hardware)
    s = count("seq", seq)
    rule = matmul_outputs_bytes(m)
    kept, working = layer_activations(m, s, 1, recompute="matmul-outputs")
    full = float(kept) / (m.num_layers * s)
    none = float(activation_bytes(saved_tensors(m), s, 1)) / s
    differ = [k.name for k in keep_by_intensity(m, hw, s) if k.by_rule != k.by_policy]
    reason = (f"the count adds the fp32 softmax statistics; {full / none:.0%} of what a layer keeps without "
              f"recomputation, with no matmul run again; the layer being rebuilt adds "
              f"{float(working) / float(kept):.1%} to the kept bytes at the peak")
    if differ:
        reason += "; the ridge rule also keeps " + ", ".join(differ) + " (cheap reductions, a few bytes)"
    return RuleResult("matmul outputs kept per token and layer", rule, "B", 3,
                      "w_act (2 h + 2 d + 2 n_kv d_head + 2 d_ff)",
                      f"bf16 activations, a flash kernel; rebuilding costs bytes, not FLOPs, at sequence {s:,}",
                      full, "B", "the tensor-by-tensor count (layer_activations, 'matmul-outputs')", reason)


# --- chapter 5: decode's batch --------------------------------------------------------------------------------

def kv_bound_batch(model: Model | str, context, *, kv_dtype: str = "bf16", weights_dtype: str = "bf16"):
    """Chapter 5: the decode batch at which a step reads as many KV-cache bytes as weight bytes,
    ``weights / (context x kv bytes per token)``: past it the cache, not the weights, is the larger read,
    and a bigger batch no longer spreads the step's bytes over more tokens. A sliding-window layer keeps
    only its window (:meth:`~roofline.core.model.Model.kv_cache_bytes`), so a sequence's cache is counted
    as the model holds it. (Chapter 5's
    ``weights_kv_crossover`` asks the same equality for the context at a given batch.) Broadcasts over
    ``context``."""
    m = load_model(model)
    c = number("context", context, integer=True)
    out = weight_bytes(m, weights_dtype=weights_dtype) / np.asarray(m.kv_cache_bytes(c, kv_dtype), dtype=float)
    return float(out) if np.ndim(out) == 0 else out


def decode_compute_batch(hardware: Hardware | str, dtype: str = "bf16") -> float:
    """Chapters 1 and 5: the decode batch at which the weight matmuls reach the ridge. Each weight (``w``
    bytes, read once a step) serves ``2 B`` FLOPs, an intensity of ``2 B / w``; it equals the ridge at ``B* =
    I* w / 2``, 295 in bf16 on an H100 SXM (the ridge itself: ``w = 2``). KV reads and attention are left
    out: :func:`~roofline.workloads.inference.compute_bound_batch` sweeps the whole step, and at a long
    context finds the step never compute-bound."""
    return ridge(hardware, dtype) * dtype_bytes(dtype) / 2


# --- the rules under a calibrated roof ---------------------------------------------------------------------------

def calibrated_thresholds(model: Model | str, roof: ClusterRoof, *, nodes=1, gpus_per_node=8, seq=4096, batch=64,
                          tp=None, engine_allreduce: str = ENGINE_ALLREDUCE) -> dict[str, float]:
    """Each rate-bound rule again, with the rates a cluster roof holds in place of the datasheet's
    (appendix C's :class:`~roofline.core.cluster_roof.ClusterRoof`: for the calibrated roof, what
    microbenchmarks reached). The formulas are the datasheet rules' own; only the rates change:

    - ``P``: the best matmul rate of the roof's sweep (``roof.gemm.top``) for ``P_peak``;
    - ``B_HBM``: the memory-bound kernels' bandwidth (``roof.bandwidth``);
    - a collective's link: its bus bandwidth at the buffer the rule sends (nccl-tests' convention, which
      the ring factors of the rules already assume): the gradients for data parallelism and FSDP, one
      sequence of ``seq`` tokens' activations for the training width rule, one decode step's ``batch``
      activations for the decode bound (small messages: the latency shows as a lower bandwidth), that one
      run as an inference engine runs it (``engine_allreduce``: its custom kernels by default, chapter 13;
      :meth:`~roofline.core.cluster_roof.ClusterRoof.all_reduce_time`);
    - the mixed optimum's ratio ``B_d / B_t``: one network port (NVLink inside one node) over NVLink's best.

    Keys are the names :func:`rules_for` gives (``'ridge point'``, ``'compute-bound decode batch'``,
    ``'data-parallel tokens per GPU'``, ``'FSDP tokens per GPU'``, ``'tensor-parallel hiding width'``,
    ``'decode tensor-parallel bound'``, ``'mixing pays below'``); rules that read no rate (the KV-bound
    batch, the attention crossover, the band) are not moved. The calibrated roof's rates are below the
    datasheet's, never above: where a ratio of two of them rises, so does the threshold."""
    if not isinstance(roof, ClusterRoof):
        raise TypeError(f"roof must be a ClusterRoof (roofline.core.calibration.get_roof), "
                        f"got {type(roof).__name__}")
    m = _dense(model, "calibrated_thresholds")
    nodes, g = cluster(nodes, gpus_per_node)
    n = nodes * g
    seq, batch = count("seq", seq), count("batch", batch)
    tp = count("tp", g if tp is None else tp, maximum=g, what=f" (tensor parallelism stays inside a node of {g})")
    peak, hbm = roof.gemm.top, roof.bandwidth
    a = dtype_bytes("bf16")
    psi = param_count(m) * a
    forward, backward = _pass_flops(m)
    per_node = None if nodes == 1 else g
    allreduce = roof.collective_time("all_reduce", n, psi, per_node=per_node)
    gather = roof.collective_time("all_gather", n, psi, per_node=per_node)
    scatter = roof.collective_time("reduce_scatter", n, psi, per_node=per_node)
    kappa = width_constant(m)
    width_bw = roof.bus_bandwidth("all_reduce", tp, message_bytes(m, seq), tp) if tp > 1 else float("inf")
    decode_bw = decode_bus_bandwidth(roof, g, message_bytes(m, batch), engine_allreduce)
    wy = roof.nvlink.top
    wx = roof.port if nodes > 1 else wy
    return {
        "ridge point": peak / hbm,
        "compute-bound decode batch": peak / hbm * a / 2,
        "data-parallel tokens per GPU": float(allreduce) / (backward / peak),
        "FSDP tokens per GPU": float(max(gather / (forward / peak), (gather + scatter) / (backward / peak))),
        "tensor-parallel hiding width": 2 * (tp - 1) * a * peak / (kappa * width_bw),
        "decode tensor-parallel bound": 1 + decode_tp_constant(m) * (decode_bw / hbm) / batch,
        "mixing pays below": mixed_constant(m) * wy / wx,
    }


def decode_bus_bandwidth(roof: ClusterRoof, tp, size, allreduce: str = ENGINE_ALLREDUCE) -> float:
    """The bus bandwidth (nccl-tests' convention, ``2 (t-1)/t`` of the buffer over the time) of one decode
    all-reduce of ``size`` bytes over ``tp`` GPUs of a node, run as ``allreduce`` says (the engines' custom
    kernels by default, or 'nccl'): what the calibrated decode bound reads (chapter 13, the rules page)."""
    t = count("tp", tp, maximum=1 << 10)
    sec = roof.all_reduce_time(t, float(size), per_node=t, kind=allreduce)
    return float(size) * 2 * (t - 1) / t / sec if t > 1 and sec > 0 else float("inf")


# --- every rule at once ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class RuleResult:
    """One rule evaluated: its ``name``, ``value`` and ``unit``, the ``chapter`` that derives it, the
    ``assumption`` it makes, and where the package's full model answers the same question, that answer
    (``model_value``, ``model_unit``, what it is: ``model_label``) and ``reason``, one line on where and why
    the two part (or that they agree). ``calibrated`` is the same rule under a cluster roof's rates
    (:func:`calibrated_thresholds`), ``calibrated_label`` which roof; ``None`` where the rule reads no rate or
    no roof was given."""

    name: str
    value: float | None
    unit: str
    chapter: int
    statement: str
    assumption: str
    model_value: float | str | None = None
    model_unit: str = ""
    model_label: str = ""
    reason: str = ""
    calibrated: float | None = None
    calibrated_label: str = ""


def band_check(model: Model | str, hardware: Hardware | str, batch=64, context=4096) -> RuleResult:
    """Chapter 1: the max-to-sum band (:func:`time_band`) of a decode step of ``batch`` sequences at
    ``context``, beside the kernel rule's time over the step rule's."""
    m, hw = load_model(model), get_hardware(hardware)
    decode = decode_step(m, count("batch", batch), count("context", context, minimum=0))
    band = time_band(decode, hw)
    kernel = float(predict(decode, hw, timing="kernel").time / band.lower)
    return RuleResult("max-to-sum band", band.ratio, "x", 1, "max(t_c, t_m) <= T <= t_c + t_m",
                      f"a decode step of {batch} at context {context:,}: serial time over the step rule's",
                      kernel, "x", "the kernel rule's time over the step rule's (each kernel's own max, summed)",
                      "inside the band, as every timing rule is; the band is at most 2, reached when compute "
                      "and memory times are equal")


def decode_batch_check(model: Model | str, hardware: Hardware | str, context=0) -> RuleResult:
    """Chapter 1: :func:`decode_compute_batch` (``B* = I* w / 2``) beside the package's batch sweep of the
    whole decode step at ``context`` (:func:`~roofline.workloads.inference.compute_bound_batch`), and why
    they part: the KV cache and attention, which the rule leaves out."""
    m, hw = load_model(model), get_hardware(hardware)
    context = count("context", context, minimum=0)
    bstar = decode_compute_batch(hw)
    full = compute_bound_batch(m, hw, context)
    if full is None:
        reason = ("the KV reads grow with the batch as fast as the FLOPs, so at a long context decode stays "
                  "memory-bound")
    elif context == 0:
        reason = "agree: with no cache the step is its weight matmuls, and the sweep takes the next whole batch"
    else:
        reason = "the full step adds the KV cache and attention, which push the crossing later"
    label = f"compute_bound_batch at context {context:,}"
    if context:
        label += f" (at context 0: {compute_bound_batch(m, hw, 0)})"
    return RuleResult("compute-bound decode batch", bstar, "sequences", 1, "B* = I* w / 2",
                      "weight reads only: no KV cache, no attention",
                      full if full is not None else "never", "sequences" if full is not None else "", label, reason)


def kv_batch_check(model: Model | str, hardware: Hardware | str, context, gpus=1) -> RuleResult:
    """Chapter 5: :func:`kv_bound_batch` at ``context`` beside the largest batch whose cache fits on ``gpus``
    GPUs (:func:`~roofline.workloads.kv_cache.largest_batch`), and which of the two limits comes first."""
    m, hw = load_model(model), get_hardware(hardware)
    context = count("context", context)
    gpus = count("gpus", gpus)
    kb = kv_bound_batch(m, context)
    fits = int(largest_batch(m, hw, context, gpus=gpus))
    many = "s" if gpus > 1 else ""
    return RuleResult("KV-bound batch", kb, "sequences", 5, "B_kv = weight bytes / (S x KV bytes per token)",
                      f"context {context:,}, bf16 weights and cache", fits, "sequences",
                      f"the largest batch that fits in the memory of {gpus} GPU{many}",
                      f"the weights alone do not fit on {gpus} GPU{many}" if fits == 0 else
                      "the cache's reads overtake the weights' before memory runs out" if kb < fits else
                      "memory runs out before the cache's reads overtake the weights'")


def fsdp_check(model: Model | str, hardware: Hardware | str, *, nodes=1, gpus_per_node=8) -> RuleResult:
    """Chapter 7: :func:`fsdp_tokens` beside :func:`~roofline.parallel.data_parallel.hiding_tokens` with
    ``zero_stage=3``, which sets all of ZeRO-3's traffic against the backward pass."""
    m, hw = load_model(model), get_hardware(hardware)
    nodes, g = cluster(nodes, gpus_per_node)
    fs = fsdp_tokens(m, hw, nodes=nodes, gpus_per_node=g)
    return RuleResult("FSDP tokens per GPU", fs, "tokens", 7, "the same threshold, gathers behind the forward pass",
                      "ZeRO-3, forward gather behind the forward pass, the rest behind the backward",
                      float(hiding_tokens(m, hw, nodes=nodes, gpus_per_node=g, zero_stage=3)), "tokens",
                      "hiding_tokens(zero_stage=3): all traffic behind the backward pass",
                      "1.5 times the rule: it gives the forward pass's gather no compute to hide behind")


def decode_tp_check(model: Model | str, hardware: Hardware | str, batch=64, context=4096, *, degrees=None,
                    gpus_per_node=8) -> RuleResult:
    """Chapter 8: :func:`decode_tp_bound` at ``batch`` beside the fastest of ``degrees`` for a decode step at
    ``context`` priced degree by degree (:func:`~roofline.parallel.tensor_parallel.best_degree`; degrees past
    a node are priced hierarchically). ``degrees`` defaults to the powers of two up to the node that the
    model's heads allow."""
    m, hw = _dense(model, "decode_tp_check"), get_hardware(hardware)
    g = count("gpus_per_node", gpus_per_node)
    batch = count("batch", batch)
    if degrees is None:
        degrees = tuple(d for d in (1, 2, 4, 8, 16, 32) if d <= g and _tp_ok(m, d, g))
    degrees = tuple(count("degrees", d) for d in degrees)
    bound = decode_tp_bound(m, hw, batch)
    best = best_degree(m, hw, degrees, batch=batch, context=context, gpus_per_node=g)
    below = [d for d in degrees if d <= bound]
    pick = max(below) if below else min(degrees)  # the degree the rule picks: the largest under its bound
    if best.t == pick:
        reason = ("agree: the largest degree on offer pays" if pick == max(degrees) else
                  "agree: the largest degree under the bound is the fastest")
    elif best.t < pick:
        reason = (f"latency, which the rule leaves out: {comm_latency_share(best):.0%} of the all-reduces' time at "
                  f"degree {best.t}" + (", and the node's edge" if best.t <= g < pick else ""))
    else:
        reason = "the KV-cache reads, which the rule leaves out, also fall with t and let a larger degree pay"
    return RuleResult(f"decode tensor-parallel bound at batch {batch}", bound, "GPUs", 8,
                      "t < 1 + F_d / (B rho), F_d = kappa h / 4, rho = B_HBM / B_link",
                      "bandwidth only: no latency, no KV reads; independent of the format", best.t, "GPUs",
                      f"the fastest degree of {', '.join(map(str, degrees))} for decode (best_degree)", reason)


def mixed_checks(model: Model | str, hardware: Hardware | str, *, seq, global_batch=None, nodes=1,
                 gpus_per_node=8, plan=None) -> tuple[RuleResult, RuleResult]:
    """Chapter 9: :func:`mixed_optimum` for a step of ``global_batch`` sequences of ``seq`` tokens (one a GPU
    without it) as two results: the tensor degree ``G / N_d_opt`` beside the planner's
    (:func:`roofline.parallel.planner.plan`), and the tokens per GPU below which mixing pays beside this
    step's. Without ``global_batch`` the planner is not asked. ``plan``, a plan already made for this
    model, chip, cluster and step, saves making it again (an error if it answers another question)."""
    m, hw = _dense(model, "mixed_checks"), get_hardware(hardware)
    nodes, g = cluster(nodes, gpus_per_node)
    n = nodes * g
    seq = count("seq", seq)
    if plan is not None:
        asked = (m.name, hw.key, nodes, g, seq, global_batch)
        held = (plan.model.name, plan.hardware.key, plan.nodes, plan.gpus_per_node, plan.seq, plan.global_batch)
        if asked != held:
            raise ValueError(f"plan answers another question: (model, gpu, nodes, gpus_per_node, seq, global_batch) "
                             f"= {held}, asked {asked}")
    if global_batch is not None and plan is None:
        global_batch = count("global_batch", global_batch)
        step_tokens(global_batch, seq)  # a step's tokens stay a countable whole number
        plan = plan_layouts(m, hw, nodes=nodes, gpus_per_node=g, seq=seq, global_batch=global_batch)
    tokens = seq * (global_batch if global_batch is not None else n)
    per_gpu = tokens / n
    mo = mixed_optimum(m, hw, tokens=tokens, nodes=nodes, gpus_per_node=g)
    label = "the planner's tensor degree" if plan is not None else ""
    mv = plan.best.tp if plan is not None else None
    mixed = RuleResult("mixed FSDP x TP: tensor degree", mo.y, "GPUs", 9,
                       "N_d_opt = sqrt(D / F_m x B_d / B_t x G), F_m = 3 kappa h / 8, t = G / N_d_opt",
                       f"{tokens:,} tokens a step; communication only, large degrees, no pipeline",
                       mv, "GPUs" if mv is not None else "", label, _mixed_reason(mo, g, plan))
    pays = RuleResult("mixing pays below", mo.tokens_per_gpu_limit, "tokens per GPU", 9, "D / G < F_m B_t / B_d",
                      "as the mixed optimum", per_gpu, "tokens per GPU", "this step's tokens per GPU",
                      "mixing pays here" if mo.pays else "FSDP alone moves fewer bytes here")
    return mixed, pays


def attention_check(model: Model | str) -> RuleResult:
    """Chapter 11: :func:`attention_crossover` (the causal mask counted) beside the package's exact count
    (:func:`attention_crossover_exact`)."""
    m = _dense(model, "attention_check")
    ac = attention_crossover(m)
    exact = attention_crossover_exact(m)
    return RuleResult("attention-MLP crossover", ac, "tokens", 11, "S_mlp* = N_mlp / d (causal)",
                      "causal mask counted as half the square; scores and values against the MLP's matmuls",
                      exact if exact is not None else "never", "tokens" if exact is not None else "",
                      "the package's exact count (the triangle pair by pair, windows included)",
                      "agree within the diagonal the exact count adds" if exact is not None and
                      abs(exact - ac) <= 1 else "the sliding windows keep attention linear past the window")


def default_tp(model: Model | str, gpus_per_node=8) -> int:
    """The tensor degree :func:`rules_for` asks about unless told: a node's GPUs, or the most of them that divide
    the model's attention heads (a model of 12 heads on nodes of 8: 6)."""
    m = load_model(model)
    g = count("gpus_per_node", gpus_per_node)
    return max(d for d in range(1, g + 1) if m.num_heads % d == 0)


__all__ += ["default_tp"]


def rules_for(model: Model | str, hardware: Hardware | str, *, nodes=1, gpus_per_node=8, seq=4096,
              global_batch=None, batch=64, tp=None, roof: ClusterRoof | None = None) -> list[RuleResult]:
    """Every rule of this module for one model on one cluster of ``nodes`` x ``gpus_per_node`` GPUs, in
    chapter order. ``seq`` is the training sequence and the decode context, ``batch`` the decode batch,
    ``tp`` the tensor degree the width rule asks about (default: the node's GPUs, or the most of them that divide
    the attention heads); ``global_batch`` (sequences a step) brings in the
    planner (:func:`roofline.parallel.planner.plan`) for the layout rules (without it they stand alone and
    one sequence per GPU is the training step). Each chapter's own comparison is one of the ``*_check``
    functions, which take the chapter's cases (a context of 0, degrees past a node). With ``roof`` (a cluster
    roof of the same chip, :func:`roofline.core.calibration.get_roof`) each rate-bound rule also carries its value
    under that roof's rates (:func:`calibrated_thresholds`)."""
    m, hw = _dense(model, "rules_for"), get_hardware(hardware)
    nodes, g = cluster(nodes, gpus_per_node)
    n = nodes * g
    seq = count("seq", seq)
    check_context(m, seq)  # the decode rules take it as the context
    hw.peak_flops("bf16")  # every rule prices bf16 work: a chip without a bf16 peak says so first
    batch = count("batch", batch)
    tp = count("tp", default_tp(m, g) if tp is None else tp, maximum=g,
               what=f" (tensor parallelism stays inside a node of {g})")
    if m.num_heads % tp:
        raise ValueError(f"tp must divide {m.name}'s {m.num_heads} attention heads, got {tp}")
    plan = None
    if global_batch is not None:
        global_batch = count("global_batch", global_batch)
        step_tokens(global_batch, seq)  # a step's tokens stay a countable whole number
        plan = plan_layouts(m, hw, nodes=nodes, gpus_per_node=g, seq=seq, global_batch=global_batch)
    tokens = seq * (global_batch if global_batch is not None else n)
    per_gpu = tokens / n
    out = []

    r = ridge(hw)
    out.append(RuleResult("ridge point", r, "FLOP/B", 1, "I* = P_peak / B_HBM",
                          "dense bf16 tensor-core peak over HBM bandwidth, datasheet figures"))
    vr = vector_ridge(hw)
    out.append(RuleResult("vector ridge point", vr, "FLOP/B", 1, "I*_vector = P_fp32 / B_HBM",
                          f"non-tensor FP32 peak; a bf16 dot product has intensity {dot_intensity('bf16'):g} FLOP/B",
                          None, "", "", "a dot product sits below the vector ridge too: memory-bound on either roof"))
    out.append(band_check(m, hw, batch, seq))
    out.append(decode_batch_check(m, hw, seq))
    out.append(kv_batch_check(m, hw, seq, tp))
    dp = dp_tokens(m, hw, nodes=nodes, gpus_per_node=g)
    out.append(RuleResult("data-parallel tokens per GPU", dp, "tokens", 7, "D_GPU > (P_peak / B_link) (N_d - 1) / N_d, bf16 gradients",
                          "ring all-reduce behind the backward pass (4N FLOPs a token), no latency",
                          per_gpu, "tokens", "this step's tokens per GPU",
                          ("hides" if per_gpu >= dp else "exposed: fewer tokens per GPU than the threshold")
                          + (f"; the planner's layout leaves {plan.best.data_comm / plan.best.time:.1%} of its step "
                             "in data-parallel traffic (latency, buckets and its own degrees counted)"
                             if plan is not None else "")))
    out.append(fsdp_check(m, hw, nodes=nodes, gpus_per_node=g))
    width = float(tp_width(m, tp, hw))
    wl = f"the model's hidden size (tensor degree {tp})"
    out.append(RuleResult(f"tensor-parallel hiding width at degree {tp}", width, "", 8,
                          "h* = 2 (t - 1) w_act (P_peak / B_link) / kappa", "NVLink, no latency, no overlap needed beyond the matmuls",
                          m.hidden_size, "", wl,
                          "the model is wider: its all-reduces hide" if m.hidden_size >= width else
                          "the model is narrower: its all-reduces cannot hide, which is why the chapter keeps the "
                          "degree small or accepts the wait"))
    out.append(decode_tp_check(m, hw, batch, seq, gpus_per_node=g))
    out.extend(mixed_checks(m, hw, seq=seq, global_batch=global_batch, nodes=nodes, gpus_per_node=g, plan=plan))
    out.append(attention_check(m))
    out.insert(4, matmul_outputs_check(m, hw, seq))
    if roof is not None:
        if roof.hardware.key != hw.key:
            raise ValueError(f"roof is the {roof.hardware.short}'s and the rules are asked for the {hw.short}: "
                             "give the same chip's roof")
        moved = calibrated_thresholds(m, roof, nodes=nodes, gpus_per_node=g, seq=seq, batch=batch, tp=tp)
        label = f"under the {roof.label} roof"
        out = [replace(r, calibrated=next((v for k, v in moved.items() if r.name.startswith(k)), None),
                       calibrated_label=label) if any(r.name.startswith(k) for k in moved) else r for r in out]
    return out


def find_rule(results, name: str) -> RuleResult:
    """The result of :func:`rules_for` whose name starts with ``name`` (``'mixed'``, ``'KV-bound'``); an error
    listing the names when none does, or when more than one does."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"name must be the start of a rule's name, got {name!r}")
    found = [r for r in results if isinstance(r, RuleResult) and r.name.startswith(name)]
    if len(found) != 1:
        names = ", ".join(repr(r.name) for r in results if isinstance(r, RuleResult))
        raise KeyError(f"name {name!r} starts {'no' if not found else 'more than one'} rule's name; the rules: {names}")
    return found[0]


def _mixed_reason(mo: MixedOptimum, g: int, plan) -> str:
    if mo.y > g:
        head = f"tensor parallelism stops at the node's {g} GPUs"
    elif mo.y < 1:
        head = "the rule's optimum is FSDP alone (N_d_opt above G)"
    else:
        head = "the rule counts bytes alone"
    if plan is None:
        return head + "; pass global_batch for the planner"
    b = plan.best
    if mo.y < 1 and b.tp == 1:
        head = "agree: no tensor parallelism (N_d_opt above G)"
    chose = f"TP {b.tp} x PP {b.pp} x DP {b.dp}, ZeRO-{b.zero_stage}"
    if b.pp > 1:
        chose += f", a bubble of {bubble_share(b):.0%} of the compute"
    elif b.zero_stage == 3 and b.data_traffic > 0:
        chose += f", {1 - b.data_comm / b.data_traffic:.0%} of ZeRO-3's traffic hidden"
    return f"{head}; the planner chose {chose}"


def _pass_flops(m: Model) -> tuple[float, float]:
    """A training token's FLOPs in the forward pass (``2 N``) and in the backward (the rest of ``6 N``)."""
    forward = 2 * param_count(m)
    return forward, training_flops_per_token(m) - forward


def _tp_ok(m: Model, d: int, g: int) -> bool:
    try:
        check_tp(m, d, gpus_per_node=g)
        return True
    except (ValueError, NotModelledError):
        return False
