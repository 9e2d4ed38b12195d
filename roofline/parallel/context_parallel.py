"""Context parallelism: one sequence spread over ``cp`` GPUs, its attention priced two ways (chapter 11).

Every GPU keeps ``seq / cp`` of the sequence's tokens. The matmuls, norms and the loss are local: each GPU
runs them on its own tokens, so their FLOPs and activations divide by ``cp``. Attention is not local: every
query needs the keys and values of all the positions before it. Two ways to get them:

- **Ring** (ring attention, Liu, Zaharia and Abbeel, arXiv:2310.01889): each GPU keeps its queries and passes
  its key/value block to its neighbour, ``cp - 1`` times per layer, computing attention on the block it holds
  while the next one arrives (a point-to-point transfer, :func:`roofline.core.collectives.collective_cost`
  ``'send_recv'``). The transfer hides when the block's attention takes longer than sending the block
  (:func:`ring_hiding_block`). Under a causal mask a contiguous split leaves the early GPUs idle; the zig-zag
  split (``2 cp`` chunks, GPU ``i`` taking chunks ``i`` and ``2 cp - 1 - i``, as Llama 3 did) gives every GPU
  the same work (:func:`pair_matrix`).
- **All-to-all** (DeepSpeed-Ulysses, Jacobs et al., arXiv:2309.14509): an all-to-all turns the sequence-sharded
  Q, K and V into head-sharded ones (every GPU gets the whole sequence for ``heads / cp`` heads), attention runs
  locally, a second all-to-all turns the output back. Each GPU must take whole key/value heads, so ``cp``
  cannot exceed the model's key/value heads (:func:`check_all_to_all`).

Assumptions, named: the ring overlaps each transfer with the block computed meanwhile (the last block has
nothing left to transfer); the backward pass of the ring sends the key/value blocks and their gradients,
twice the forward's bytes, and the all-to-all's backward the forward's bytes again (the output's gradient in,
those of Q, K and V out); a training plan prices the backward's attention at twice the forward's FLOPs (the
model FLOPs of :func:`~roofline.workloads.training.training_step`), while :func:`phase_factors` counts the
2.5 times the flash kernel runs, for the thresholds of each pass; the all-to-alls are not overlapped (DeepSpeed-
Ulysses runs them between the projections and the attention); attention runs at the same fraction of peak as
the rest of the step. Times of transfers come from :mod:`roofline.core.collectives` only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from roofline.core.calibration import get_roof
from roofline.core.checks import count, number, unknown_name
from roofline.core.collectives import bytes_sent, collective_cost
from roofline.core.cost import Breakdown
from roofline.core.hardware import Hardware, get_hardware, require_links
from roofline.workloads.inference import prefill
from roofline.workloads.memory import (FitsOnItsHardware, Footprint, activation_bytes, layer_activations,
                                       training_footprint)
from roofline.core.model import Model, NotModelledError, load_model
from roofline.core.network import gpu_count
from roofline.core.policies import recompute_policy
from roofline.core.roof import predict
from roofline.workloads.training import training_step
from roofline.core.units import dtype_bytes

__all__ = ["METHODS", "LAYOUTS", "chunk_owners", "pair_matrix", "pairs_per_gpu", "ring_schedule", "ring_balance",
           "kv_block_bytes", "ring_hiding_block", "ring_layer_times", "check_all_to_all", "all_to_all_sizes",
           "all_to_all_layer_time", "context_parallel_ops", "ContextParallelPlan", "plan_context_parallel",
           "ContextParallelPrefill", "context_parallel_prefill", "longest_sequence", "smallest_cp",
           "LongContext", "long_context", "RingLayerTimes"]

METHODS = ("ring", "all-to-all")
LAYOUTS = ("zigzag", "contiguous")


def _method(method: str) -> str:
    if not isinstance(method, str) or method.replace("_", "-") not in METHODS:
        raise unknown_name("method", str(method), METHODS)
    return method.replace("_", "-")


def _layout(layout: str) -> str:
    if layout not in LAYOUTS:
        raise unknown_name("layout", str(layout), LAYOUTS)
    return layout


# The largest context-parallel degree priced: the ring's pair matrix grows as cp**2 (cp 4,096 took 1.7 GB), and
# no published run spreads one sequence over more GPUs than this (smallest_cp searches up to it too).
_MAX_CP = 1024


def _cp(cp) -> int:
    return count("cp", cp, maximum=_MAX_CP, what=" (the ring's pairs grow as cp**2; no run spreads one sequence "
                                                 "over more GPUs)")


def _split(seq, cp: int, layout: str) -> int:
    """Tokens per chunk: ``seq / (2 cp)``; the sequence must split into ``2 cp`` equal chunks."""
    seq = int(number("seq", seq, integer=True))
    if seq % (2 * cp):
        raise ValueError(f"seq must split into 2 x cp = {2 * cp} equal chunks (a multiple of {2 * cp}), got {seq}")
    return seq // (2 * cp)


def chunk_owners(cp, layout: str = "zigzag") -> np.ndarray:
    """Which GPU owns each of the ``2 cp`` chunks of the sequence: contiguous gives GPU ``i`` chunks ``2i`` and
    ``2i + 1``; zig-zag gives it chunks ``i`` and ``2 cp - 1 - i`` (an early chunk and its mirror)."""
    cp, layout = _cp(cp), _layout(layout)
    j = np.arange(2 * cp)
    return j // 2 if layout == "contiguous" else np.where(j < cp, j, 2 * cp - 1 - j)


def pair_matrix(seq, cp, layout: str = "zigzag") -> np.ndarray:
    """Query-key pairs a causal mask keeps between GPU ``i``'s queries (row) and GPU ``j``'s keys (column).

    Chunk ``a``'s queries against chunk ``b``'s keys: the whole ``c x c`` square when ``b < a``, the triangle
    with its diagonal ``c (c + 1) / 2`` when ``a == b``, nothing when ``b > a`` (``c`` tokens per chunk).
    The matrix sums to ``seq (seq + 1) / 2``, the unsplit count.
    """
    cp, layout = _cp(cp), _layout(layout)
    c = float(_split(seq, cp, layout))
    a = np.arange(2 * cp)
    chunk = np.where(a[None, :] < a[:, None], c * c, 0.0) + np.where(a[None, :] == a[:, None], c * (c + 1) / 2, 0.0)
    owner = chunk_owners(cp, layout)
    out = np.zeros((cp, cp))
    np.add.at(out, (owner[:, None].repeat(2 * cp, 1), owner[None, :].repeat(2 * cp, 0)), chunk)
    return out


def pairs_per_gpu(seq, cp, layout: str = "zigzag") -> np.ndarray:
    """Causal query-key pairs each GPU computes over a whole ring pass (equal for every GPU under zig-zag)."""
    return pair_matrix(seq, cp, layout).sum(axis=1)


def ring_schedule(seq, cp, layout: str = "zigzag") -> np.ndarray:
    """Pairs each ring step costs: at step ``k`` GPU ``i`` holds GPU ``(i - k) mod cp``'s keys, and the step
    lasts as long as its busiest GPU (the others wait for the next block). Shape ``(cp,)``."""
    pairs = pair_matrix(seq, cp, layout)
    cp = pairs.shape[0]
    i = np.arange(cp)
    return np.array([pairs[i, (i - k) % cp].max() for k in range(cp)])


def ring_balance(seq, cp, layout: str = "zigzag") -> float:
    """Useful fraction of the ring's attention time: the pairs each GPU would do with a perfect split
    (``seq (seq + 1) / 2 / cp``) over the pairs the busiest GPU does, step by step. 1 under zig-zag; about
    one half for a long contiguous ring under a causal mask."""
    total = pair_matrix(seq, cp, layout).sum()
    return float(total / _cp(cp) / ring_schedule(seq, cp, layout).sum())


def _achieved(achieved) -> float:
    achieved = float(number("achieved", achieved))
    if achieved > 1:
        raise ValueError(f"achieved is a fraction of peak and cannot exceed 1, got {achieved!r}")
    return achieved


def _dense_full(m: Model, what: str) -> None:
    if m.moe is not None or m.mla is not None:
        raise NotModelledError(f"{what} models a dense decoder with standard attention; {m.name} has "
                               f"{'experts' if m.moe is not None else 'latent attention'}")
    if m.full_attention_layers != m.num_layers:
        raise NotModelledError(f"{what} models full attention in every layer; {m.name} has sliding-window layers")


def kv_block_bytes(model: Model | str, tokens, dtype: str = "bf16"):
    """Bytes of one layer's keys and values for ``tokens`` tokens: ``tokens x 2 x kv_heads x head_dim x
    bytes``: what a ring step sends. Broadcasts over ``tokens``."""
    m = load_model(model)
    tokens = number("tokens", tokens, integer=True)
    return tokens * 2 * m.num_kv_heads * m.head_dim * dtype_bytes(dtype)


def _seconds_per_byte(hw: Hardware, cp: int, tier, gpus_per_node) -> float:
    """The ring's point-to-point transfer time per byte (bandwidth only) from roofline.core.collectives."""
    kwargs = {"tier": tier} if tier is not None else {"gpus_per_node": gpus_per_node}
    return collective_cost("send_recv", max(cp, 2), 1.0, hw, **kwargs).transfer


# The backward pass of attention against its forward (chapter 11). FLOPs: the flash kernel's backward runs
# five matmuls of the forward's size against the forward's two (the gradients of Q, K and V, the
# gradient of the probabilities, and the scores it recomputes instead of saving; Dao 2023), 2.5 times the
# forward. Bytes each GPU sends: the ring passes the key/value blocks round again and their gradients
# with them, twice the forward's; the all-to-all sends the output's gradient one way and the gradients
# of Q, K and V the other, the forward's bytes again.
BACKWARD_ATTENTION_FLOPS = 2.5
BACKWARD_BYTES = {"ring": 2.0, "all-to-all": 1.0}
PHASES = ("forward", "backward", "step")
__all__ += ["BACKWARD_ATTENTION_FLOPS", "BACKWARD_BYTES", "PHASES", "phase_factors"]


def phase_factors(method: str = "ring", phase: str = "forward") -> tuple[float, float]:
    """Chapter 11: ``(bytes, FLOPs)`` of attention's traffic and work in ``phase`` ('forward', 'backward' or
    'step', forward and backward together) in units of the forward pass's, for ``method`` ('ring' or
    'all-to-all'): forward ``(1, 1)``, backward ``(BACKWARD_BYTES[method], BACKWARD_ATTENTION_FLOPS)``."""
    method = _method(method)
    if phase not in PHASES:
        raise ValueError(f"phase must be one of {', '.join(map(repr, PHASES))}, got {phase!r}")
    back = (BACKWARD_BYTES[method], BACKWARD_ATTENTION_FLOPS)
    return {"forward": (1.0, 1.0), "backward": back, "step": (1.0 + back[0], 1.0 + back[1])}[phase]


def ring_hiding_block(model: Model | str, hardware: Hardware | str, *, tier: str | None = "network", cp: int = 2,
                      gpus_per_node=8, causal: bool = True, achieved=1.0, dtype: str = "bf16",
                      phase: str = "forward") -> float:
    """Tokens per GPU at which a ring step's key/value transfer takes as long as the attention on the block:
    past it the transfer hides behind the compute.

    A step on a block of ``L`` tokens computes ``4 x width x pairs`` FLOPs, with ``pairs = L^2 / 2`` for an
    off-diagonal zig-zag step under a causal mask (two half-squares; ``L^2`` without a mask), and sends
    ``L x 2 x kv_width x bytes``. The compute grows as ``L^2``, the transfer as ``L``, so they cross at
    ``L* = kv_bytes_per_token x peak x achieved / (4 x width x f x bandwidth)`` with ``f = 1/2`` causal.
    ``tier`` is a link of the catalog ('scale_up', 'network'...), or None for the tier a ring of ``cp``
    crosses (NVLink inside a node of ``gpus_per_node``, the network beyond). Latency is left out: it is the
    bandwidth law; :func:`ring_layer_times` adds the per-step latency.

    ``phase`` 'forward' is that count; 'backward' sends twice the bytes against 2.5 times the FLOPs
    (:func:`phase_factors`), so its block is 0.8 of the forward's; 'step' (both passes) 3 against 3.5.
    The forward is the pass that binds: a ring that hides its forward hides its backward.
    """
    m, hw = load_model(model), get_hardware(hardware)
    _dense_full(m, "ring_hiding_block")
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be True or False, got {causal!r}")
    achieved = _achieved(achieved)
    per_token = float(kv_block_bytes(m, 1, dtype))
    rate = hw.peak_flops(dtype) * achieved
    f = 0.5 if causal else 1.0
    nbytes, flops = phase_factors("ring", phase)
    return (nbytes / flops) * per_token * rate * _seconds_per_byte(hw, _cp(cp), tier, gpus_per_node) / (
        4 * m.attention_width * f)


@dataclass(frozen=True)
class RingLayerTimes:
    """One layer's ring in the forward pass, in seconds: each step's attention (``compute``, shape ``(cp,)``),
    one block's transfer (``transfer``, latency included), the whole ring (``time``: every step lasts the
    longer of its attention and the transfer it hides, the last step has no transfer) and what the
    transfers add (``exposed``)."""

    compute: np.ndarray
    transfer: float
    time: float
    exposed: float


def ring_layer_times(model: Model | str, hardware: Hardware | str, seq, cp, *, layout: str = "zigzag",
                     tier: str | None = None, gpus_per_node=8, achieved=1.0, dtype: str = "bf16") -> RingLayerTimes:
    """One layer's forward ring of ``cp`` GPUs over a sequence of ``seq`` tokens (see :class:`RingLayerTimes`).

    Each step's attention: its busiest GPU's pairs (:func:`ring_schedule`) x ``4 x width`` FLOPs at
    ``achieved`` x peak. Each transfer: ``collective_cost('send_recv', cp, kv_block_bytes)``, on ``tier`` or
    on the tier a ring of ``cp`` crosses. The backward pass doubles both.
    """
    m, hw = load_model(model), get_hardware(hardware)
    _dense_full(m, "ring_layer_times")
    cp = _cp(cp)
    achieved = _achieved(achieved)
    rate = hw.peak_flops(dtype) * achieved
    compute = ring_schedule(seq, cp, layout) * 4 * m.attention_width / rate
    if cp == 1:
        return RingLayerTimes(compute, 0.0, float(compute.sum()), 0.0)
    block = float(kv_block_bytes(m, int(seq) // cp, dtype))
    kwargs = {"tier": tier} if tier is not None else {"gpus_per_node": gpus_per_node}
    transfer = float(collective_cost("send_recv", cp, block, hw, **kwargs).time)
    exposed = float(np.maximum(transfer - compute[:-1], 0.0).sum())
    return RingLayerTimes(compute, transfer, float(compute.sum()) + exposed, exposed)


def check_all_to_all(model: Model | str, cp) -> None:
    """All-to-all attention hands each GPU whole heads: ``cp`` must divide the query heads and the key/value
    heads. Past the key/value heads (8 for Llama 3) each GPU would need a copy of a shared head: refused."""
    m, cp = load_model(model), _cp(cp)
    if cp > m.num_kv_heads:
        raise ValueError(f"cp must not exceed {m.name}'s {m.num_kv_heads} key/value heads for all-to-all attention "
                         f"(each GPU takes whole heads; beyond that the heads would have to be replicated), got {cp}; "
                         f"the ring has no such limit")
    if m.num_kv_heads % cp or m.num_heads % cp:
        raise ValueError(f"cp must divide {m.name}'s {m.num_heads} query and {m.num_kv_heads} key/value heads for "
                         f"all-to-all attention, got {cp}")


def all_to_all_sizes(model: Model | str, seq, cp, dtype: str = "bf16") -> tuple[float, float]:
    """One layer's two forward all-to-alls, each GPU's send buffer in bytes (nccl-tests' size): Q, K and V of its
    ``seq / cp`` tokens before attention, the attention output after it."""
    m, cp = load_model(model), _cp(cp)
    check_all_to_all(m, cp)
    seq = int(number("seq", seq, integer=True))
    if seq % cp:
        raise ValueError(f"seq must be a multiple of cp ({cp}), got {seq}")
    tokens, b = seq // cp, dtype_bytes(dtype)
    kv = m.num_kv_heads * m.head_dim
    return tokens * (m.attention_width + 2 * kv) * b, tokens * m.attention_width * b


def all_to_all_layer_time(model: Model | str, hardware: Hardware | str, seq, cp, *, tier: str | None = None,
                          gpus_per_node=8, dtype: str = "bf16") -> float:
    """Seconds of one layer's two forward all-to-alls (:func:`roofline.core.collectives.collective_cost`
    ``'all_to_all'``), not overlapped with anything."""
    hw = get_hardware(hardware)
    kwargs = {"tier": tier} if tier is not None else {"gpus_per_node": gpus_per_node}
    if _cp(cp) == 1:
        return 0.0
    return float(sum(collective_cost("all_to_all", cp, size, hw, **kwargs).time
                     for size in all_to_all_sizes(model, seq, cp, dtype)))


def all_to_all_share(model: Model | str, hardware: Hardware | str, seq, cp, *, phase: str = "forward",
                     tier: str | None = None, gpus_per_node=8, achieved=1.0, dtype: str = "bf16") -> float:
    """Chapter 11: one layer's all-to-alls over its attention, in ``phase`` ('forward', 'backward' or 'step';
    :func:`phase_factors`): :func:`all_to_all_layer_time` over the layer's attention on one GPU (the zig-zag
    ring schedule's, which balances the causal mask as the head split does). The all-to-alls are not
    overlapped, so this is the share they add to the attention."""
    nbytes, flops = phase_factors("all-to-all", phase)
    m = load_model(model)
    attention = float(ring_layer_times(m, hardware, seq, cp, achieved=achieved, dtype=dtype).compute.sum())
    comm = all_to_all_layer_time(m, hardware, seq, cp, tier=tier, gpus_per_node=gpus_per_node, dtype=dtype)
    return nbytes * comm / (flops * attention)


__all__ += ["all_to_all_share"]


def _attention_pairs(m: Model, seq: int, cp: int, method: str, layout: str) -> float:
    """Causal pairs the busiest GPU computes: the ring's busiest row, or an equal share of heads."""
    if method == "ring":
        return float(pairs_per_gpu(seq, cp, layout).max())
    check_all_to_all(m, cp)
    return seq * (seq + 1) / 2 / cp


def context_parallel_ops(ops, model: Model | str, seq, cp, *, method: str = "ring", layout: str = "zigzag",
                         micro_batch=1, dtype: str = "bf16") -> list:
    """The operations of ``seq / cp`` local tokens (a prefill's or a training step's, as
    :func:`~roofline.workloads.inference.prefill` and :func:`~roofline.workloads.training.training_step` build them) with every
    attention kernel made a context-parallel one: its FLOPs those of the pairs the busiest GPU computes,
    and, for the ring, each extra step's reads (the query block, the arriving key/value block and the
    running output) and writes (the output again) added. Other operations are unchanged."""
    m, cp = load_model(model), _cp(cp)
    method, layout = _method(method), _layout(layout)
    seq = int(number("seq", seq, integer=True))
    local = seq // cp
    pairs = _attention_pairs(m, seq, cp, method, layout)
    own = local * (local + 1) / 2  # what the local op counts (causal, exact)
    a = dtype_bytes(dtype)
    per_step = micro_batch * m.num_layers * (local * m.attention_width * a * 2 + float(kv_block_bytes(m, local, dtype))
                                             + local * m.num_heads * 4)
    written = micro_batch * m.num_layers * (local * m.attention_width * a + local * m.num_heads * 4)
    extra_reads = (cp - 1) * per_step if method == "ring" else 0.0
    extra_writes = (cp - 1) * written if method == "ring" else 0.0
    forward = next((op.flops for op in ops if op.name == "attention"), None)
    if forward is None:
        raise ValueError("ops hold no 'attention' kernel (a flash attention prefill or training step is expected)")
    out = []
    for op in ops:
        if op.kind != "attention":
            out.append(op)
            continue
        share = op.flops / forward  # 1 forward, 2 backward, 1 recompute
        flops, reads, writes = op.split
        r_scale = (op.reads + share * extra_reads) / op.reads if op.reads else 1.0
        w_scale = (op.writes + share * extra_writes) / op.writes if op.writes else 1.0
        split = ({k: v * pairs / own for k, v in flops.items()}, {k: v * r_scale for k, v in reads.items()},
                 {k: v * w_scale for k, v in writes.items()})
        out.append(op._replace(flops=op.flops * pairs / own, reads=op.reads * r_scale, writes=op.writes * w_scale,
                               split=split, keys=seq))
    return out


@dataclass(frozen=True)
class ContextParallelPlan(FitsOnItsHardware):
    """One training step of one sequence (per micro-batch sequence) spread over ``cp`` GPUs, seen from the
    busiest GPU: its operations (``step``), memory (``footprint``), compute time, the context-parallel
    traffic's time and the part of it not hidden (``exposed``)."""

    model: Model
    hardware: Hardware
    seq: int
    cp: int
    method: str
    layout: str
    micro_batch: int
    recompute: str
    zero_stage: int
    gpus: int
    step: Breakdown
    footprint: Footprint
    compute_time: float
    comm_time: float
    exposed: float
    tier: str
    useful_flops: float  # the unsplit step's model FLOPs over cp: what a perfect split gives each GPU

    @property
    def time(self) -> float:
        return self.compute_time + self.exposed

    @property
    def model_flops(self) -> float:
        return float(self.step["forward"].flops + self.step["backward"].flops)

    @property
    def mfu(self) -> float:
        """Model FLOPs of the GPU's share of the sequence (the unsplit step's over ``cp``) per second of
        step, over peak."""
        return self.useful_flops / (self.time * self.hardware.peak_flops(self.step.formats.math))


    @property
    def tokens_per_s(self) -> float:
        """Tokens per second per GPU."""
        return self.seq * self.micro_batch / self.cp / self.time


def _passes(recompute: str, method: str = "ring") -> float:
    """Forward-pass equivalents of attention traffic in a training step: forward 1, backward
    :data:`BACKWARD_BYTES` of the method (the ring: the key/value blocks and their gradients, 2; the
    all-to-all: the output's gradient in, the gradients of Q, K and V out, 1), and 1 more when the policy
    reruns the attention core."""
    policy = recompute_policy(recompute)
    return 1.0 + BACKWARD_BYTES[method] + (1.0 if (policy.every or policy.name == "selective") else 0.0)


def _tier(hw: Hardware, cp: int, tier, gpus_per_node) -> str:
    if tier is not None:
        return tier
    require_links(hw, [("scale_up", "host") if cp <= gpus_per_node else "network"],
                  f"context parallelism over {cp:g} GPUs in nodes of {gpus_per_node:g}")
    inside = "scale_up" if "scale_up" in hw.interconnect else "host"
    return inside if cp <= gpus_per_node else "network"


def plan_context_parallel(model: Model | str, hardware: Hardware | str, *, seq, cp, method: str = "ring",
                          layout: str = "zigzag", micro_batch=1, recompute: str = "full", zero_stage: int = 3,
                          gpus=None, tier: str | None = None, gpus_per_node=8, achieved=None,
                          timing: str = "step", dtype: str = "bf16") -> ContextParallelPlan:
    """Does a sequence of ``seq`` tokens train on ``cp`` GPUs, and how fast (chapter 11; ``roofline train --cp``)?

    Each GPU runs the training step of ``seq / cp`` tokens (:func:`~roofline.workloads.training.training_step`) with its
    attention made context-parallel (:func:`context_parallel_ops`), priced on the roofline (or at
    ``achieved`` x peak). The model state is sharded ZeRO-``zero_stage`` over ``gpus`` GPUs (default ``cp``:
    the context-parallel group shards it, as DeepSpeed-Ulysses and Llama 3 do). Memory: the local step's
    (:func:`~roofline.workloads.memory.training_footprint` at ``seq / cp`` tokens) plus the buffers in flight (the
    ring's two key/value blocks and, backward, their gradients; the all-to-all's received Q, K, V and output).
    Traffic: the ring's transfers beyond what each step's attention hides, or the all-to-alls in full.
    """
    m, hw = load_model(model), get_hardware(hardware)
    _dense_full(m, "plan_context_parallel")
    cp, method, layout = _cp(cp), _method(method), _layout(layout)
    seq = int(number("seq", seq, integer=True))
    micro_batch = int(number("micro_batch", micro_batch, integer=True))
    gpus = cp if gpus is None else gpu_count("gpus", gpus)
    if method == "ring":
        _split(seq, cp, layout)
    else:
        check_all_to_all(m, cp)
        if seq % cp:
            raise ValueError(f"seq must be a multiple of cp ({cp}), got {seq}")
    policy = recompute_policy(recompute)
    local = seq // cp
    base = training_step(m, local, micro_batch, recompute=policy.name, dtype=dtype)
    ops = context_parallel_ops(base.ops, m, seq, cp, method=method, layout=layout, micro_batch=micro_batch, dtype=dtype)
    step = Breakdown.from_ops(f"context-parallel training step of {m.title}, cp {cp} ({method})", ops, base.formats,
                              order=("forward", "backward", "recompute"))
    if achieved is None:
        compute = float(predict(step, hw, timing=timing).time)
        rate_fraction = 1.0
    else:
        rate_fraction = _achieved(achieved)
        compute = float(step.flops) / (rate_fraction * hw.peak_flops(step.formats.math))
    passes = _passes(policy.name, method) * m.num_layers * micro_batch
    if method == "ring":
        ring = ring_layer_times(m, hw, seq, cp, layout=layout, tier=tier, gpus_per_node=gpus_per_node,
                                achieved=rate_fraction, dtype=dtype)
        comm = passes * ring.transfer * (cp - 1)
        exposed = passes * ring.exposed
        buffers = 4 * float(kv_block_bytes(m, local, dtype)) * micro_batch
    else:
        comm = exposed = passes * all_to_all_layer_time(m, hw, seq, cp, tier=tier, gpus_per_node=gpus_per_node,
                                                        dtype=dtype)
        qkv, out = all_to_all_sizes(m, seq, cp, dtype) if cp > 1 else (0.0, 0.0)
        buffers = (qkv + out) * micro_batch
    fp = training_footprint(m, local, micro_batch, gpus=gpus, zero_stage=zero_stage, recompute=policy.name)
    footprint = Footprint({**fp.parts, "context-parallel buffers": buffers})
    whole = training_step(m, seq, micro_batch, recompute="none", dtype=dtype) if cp > 1 else base
    useful = float(whole["forward"].flops + whole["backward"].flops) / cp
    return ContextParallelPlan(m, hw, seq, cp, method, layout, micro_batch, policy.name, zero_stage, gpus, step,
                               footprint, compute, float(comm), float(exposed), _tier(hw, cp, tier, gpus_per_node),
                               useful)


@dataclass(frozen=True)
class ContextParallelPrefill:
    """A long prompt's prefill spread over ``cp`` GPUs (``roofline prefill --cp``): the busiest GPU's operations,
    its compute time, the traffic's time and what of it is not hidden; ``time`` is the time to the first token
    (the prompt's forward pass)."""

    model: Model
    hardware: Hardware
    tokens: int
    cp: int
    method: str
    step: Breakdown
    compute_time: float
    comm_time: float
    exposed: float
    tier: str

    @property
    def time(self) -> float:
        return self.compute_time + self.exposed


def context_parallel_prefill(model: Model | str, hardware: Hardware | str, tokens, cp, *, method: str = "ring",
                             layout: str = "zigzag", tier: str | None = None, gpus_per_node=8, dtype: str = "bf16",
                             timing: str = "step") -> ContextParallelPrefill:
    """The prefill of one ``tokens``-token prompt over ``cp`` GPUs: each runs the refined prefill of
    ``tokens / cp`` tokens (flash attention) with its attention made context-parallel, priced on the roofline
    under ``timing``; the ring's forward transfers beyond what each step hides, or the two all-to-alls per
    layer, are added."""
    m, hw = load_model(model), get_hardware(hardware)
    _dense_full(m, "context_parallel_prefill")
    cp, method, layout = _cp(cp), _method(method), _layout(layout)
    tokens = int(number("tokens", tokens, integer=True))
    if method == "ring":
        _split(tokens, cp, layout)
    elif tokens % cp:
        raise ValueError(f"tokens must be a multiple of cp ({cp}), got {tokens}")
    base = prefill(m, tokens // cp, accounting="refined", attention="flash", dtype=dtype)
    ops = context_parallel_ops(base.ops, m, tokens, cp, method=method, layout=layout, dtype=dtype)
    step = Breakdown.from_ops(f"context-parallel prefill of {m.name}, cp {cp} ({method})", ops, base.formats)
    compute = float(predict(step, hw, timing=timing).time)
    if method == "ring":
        ring = ring_layer_times(m, hw, tokens, cp, layout=layout, tier=tier, gpus_per_node=gpus_per_node, dtype=dtype)
        comm, exposed = m.num_layers * ring.transfer * (cp - 1), m.num_layers * ring.exposed
    else:
        comm = exposed = m.num_layers * all_to_all_layer_time(m, hw, tokens, cp, tier=tier,
                                                              gpus_per_node=gpus_per_node, dtype=dtype)
    return ContextParallelPrefill(m, hw, tokens, cp, method, step, compute, float(comm), float(exposed),
                                  _tier(hw, cp, tier, gpus_per_node))


def longest_sequence(model: Model | str, hardware: Hardware | str, *, cp=1, recompute: str = "full", gpus=None,
                     zero_stage: int = 3, micro_batch=1, multiple: int = 1024) -> int:
    """The longest sequence (a multiple of ``multiple`` and of ``2 cp``) whose training step fits in each GPU's
    usable HBM when spread over ``cp`` GPUs with the model state sharded ZeRO-``zero_stage`` over ``gpus``
    (default ``cp``). 0 when not even the shortest fits (the model state alone is too big)."""
    m, hw = load_model(model), get_hardware(hardware)
    cp = _cp(cp)
    gpus = cp if gpus is None else gpu_count("gpus", gpus)
    unit = int(np.lcm(int(number("multiple", multiple, integer=True)), 2 * cp))

    def fits(n: int) -> bool:
        seq = n * unit
        fp = training_footprint(m, seq // cp, micro_batch, gpus=gpus, zero_stage=zero_stage, recompute=recompute)
        return float(fp.total) + 4 * float(kv_block_bytes(m, seq // cp)) * micro_batch <= hw.usable_capacity

    if not fits(1):
        return 0
    lo, hi = 1, 2
    while fits(hi):
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo * unit


def smallest_cp(model: Model | str, hardware: Hardware | str, seq, *, recompute: str = "full", gpus=None,
                zero_stage: int = 3, micro_batch=1, largest: int = 1024) -> int:
    """The smallest power-of-two context-parallel degree at which a ``seq``-token sequence trains within each
    GPU's usable HBM (model state ZeRO-sharded over ``gpus``, default the degree itself). Raises ValueError
    when even ``largest`` GPUs do not hold it."""
    seq = int(number("seq", seq, integer=True))
    cp = 1
    while cp <= largest:
        if seq % (2 * cp) == 0 or cp == 1:
            plan_fp = training_footprint(load_model(model), seq // cp, micro_batch, gpus=cp if gpus is None else gpus,
                                         zero_stage=zero_stage, recompute=recompute)
            extra = 4 * float(kv_block_bytes(model, seq // cp)) * micro_batch if cp > 1 else 0.0
            if float(plan_fp.total) + extra <= get_hardware(hardware).usable_capacity:
                return cp
        cp *= 2
    raise ValueError(f"seq of {seq} tokens does not fit on up to {largest} GPUs of context parallelism; "
                     f"shard the model state over more GPUs (gpus) or recompute more")


@dataclass(frozen=True)
class LongContext:
    """What one sequence of ``seq`` tokens costs a model (chapter 11's opening table): attention's share of a
    prefill's FLOPs and of its time on ``hardware`` (kernel rule), the training activations every layer keeps
    without recomputation and with full recomputation (plus the one layer being recomputed), the fp32
    logits, and the sequence's KV cache (inference)."""

    model: Model
    seq: int
    attention_flops_share: float
    attention_time_share: float
    activations: float
    activations_full_recompute: float
    logits: float
    kv_cache: float


def long_context(model: Model | str, seq, hardware: Hardware | str = "h100-sxm", *, dtype: str = "bf16") -> LongContext:
    """Attention's share and the memory of one ``seq``-token sequence (see :class:`LongContext`)."""
    m, hw = load_model(model), get_hardware(hardware)
    _dense_full(m, "long_context")
    seq = int(number("seq", seq, integer=True))
    step = prefill(m, seq, accounting="refined", attention="flash", dtype=dtype)
    pred = predict(step, hw, timing="kernel")
    attention = sum(float(t.time) for t in pred.ops if t.op.kind == "attention")
    none, _ = layer_activations(m, seq, 1, recompute="none")
    full, working = layer_activations(m, seq, 1, recompute="full")
    return LongContext(m, seq, float(step.share("attention")), attention / float(pred.time), float(none),
                       float(full + working), seq * m.vocab_size * 4.0, float(m.kv_cache_bytes(seq, dtype)))


# Chapter 11's quantities that the prose quotes, each one call for the notebook.

def sequence_parallel_saving(model: Model | str, seq, tp: int, micro_batch=1) -> float:
    """Chapter 11: the activation bytes sequence parallelism saves each of ``tp`` GPUs over all ``L`` layers:
    ``L (a_tp - a_sp)`` (:func:`~roofline.workloads.memory.activation_bytes` with and without it)."""
    m = load_model(model)
    return m.num_layers * (activation_bytes(m, seq, micro_batch, tp=tp)
                           - activation_bytes(m, seq, micro_batch, tp=tp, sequence_parallel=True))


__all__ += ["sequence_parallel_saving"]


def block_attention_time(model: Model | str, hardware: Hardware | str, block, *, causal: bool = True,
                         dtype: str = "bf16"):
    """Chapter 11: one ring step's attention on a block of ``block`` tokens at peak, ``4 x width x pairs / P``
    with ``pairs = block**2 / 2`` off the diagonal under a causal zig-zag (``block**2`` without a mask), as
    :func:`ring_hiding_block` counts it. Broadcasts over ``block``."""
    m, hw = load_model(model), get_hardware(hardware)
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be True or False, got {causal!r}")
    b = np.asarray(number("block", block, integer=True), dtype=float)
    out = 4 * m.attention_width * b ** 2 / (2 if causal else 1) / hw.peak_flops(dtype)
    return float(out) if np.ndim(out) == 0 else out


__all__ += ["block_attention_time"]


def pair_imbalance(seq, cp, layout: str = "zigzag") -> float:
    """Chapter 11: the busiest GPU's causal pairs over the idlest's over a whole ring pass
    (:func:`pairs_per_gpu`): 1 under zig-zag, about ``2 cp - 1`` for a contiguous split."""
    rows = pairs_per_gpu(seq, cp, layout)
    return float(rows.max() / rows.min())


__all__ += ["pair_imbalance"]


def contiguous_balance_limit(cp) -> float:
    """Chapter 11, exercise 2: :func:`ring_balance` of a contiguous split as the sequence grows: every ring
    step but the first lasts a full block square ``B**2`` on its busiest GPU, the first half of one, against
    ``cp B**2 / 2`` pairs per GPU split evenly: ``(cp / 2) / (cp - 1/2)``."""
    cp = _cp(cp)
    return (cp / 2) / (cp - 0.5)


__all__ += ["contiguous_balance_limit"]


def block_tokens(seq, cp) -> int:
    """Chapter 11: the tokens each of ``cp`` GPUs holds of a ``seq``-token sequence, ``seq // cp``."""
    return int(number("seq", seq, integer=True)) // _cp(cp)


__all__ += ["block_tokens"]


def hiding_margin(model: Model | str, hardware: Hardware | str, seq, cp, *, tier: str | None = "network") -> float:
    """Chapter 11: each GPU's block (:func:`block_tokens`) over the block at which the ring's transfer hides
    (:func:`ring_hiding_block` on ``tier``): above 1 the ring's sends hide behind the attention."""
    return block_tokens(seq, cp) / ring_hiding_block(model, hardware, tier=tier)


__all__ += ["hiding_margin"]


def ring_transfer_total(times: RingLayerTimes) -> float:
    """Chapter 11: the ring's ``cp - 1`` block transfers of one layer, back to back (the last step sends
    nothing): ``(cp - 1) x transfer``."""
    if not isinstance(times, RingLayerTimes):
        raise TypeError(f"times must be RingLayerTimes (from ring_layer_times), got {type(times).__name__}")
    return times.transfer * (len(times.compute) - 1)


__all__ += ["ring_transfer_total"]


def ulysses_published_bytes(model: Model | str, seq, cp, dtype: str = "bf16") -> float:
    """Chapter 11: DeepSpeed-Ulysses' count of one layer's all-to-all traffic per GPU, ``4 N h / P`` elements
    (Jacobs et al. 2023: Q, K, V and the output, each ``N h``, over ``P`` GPUs; no grouped KV heads)."""
    m = load_model(model)
    return 4 * number("seq", seq, integer=True) * m.hidden_size * dtype_bytes(dtype) / _cp(cp)


__all__ += ["ulysses_published_bytes"]


def all_to_all_leaving_bytes(model: Model | str, seq, cp, dtype: str = "bf16") -> float:
    """Chapter 11: the bytes that leave each GPU in one layer's two all-to-alls, ``(cp-1)/cp`` of each buffer
    (:func:`all_to_all_sizes`; a GPU keeps its own share)."""
    qkv, out = all_to_all_sizes(model, seq, cp, dtype)
    return bytes_sent("all_to_all", cp, qkv) + bytes_sent("all_to_all", cp, out)


__all__ += ["all_to_all_leaving_bytes"]


def rs_ag_bytes(n, size=1.0) -> float:
    """Chapter 11: the bytes each of ``n`` GPUs sends for a reduce-scatter and an all-gather of ``size`` bytes,
    sequence parallelism's pair in place of one all-reduce: ``2 (n-1)/n size``, the all-reduce's own."""
    return bytes_sent("reduce_scatter", n, size) + bytes_sent("all_gather", n, size)


__all__ += ["rs_ag_bytes"]


HIDING_TIERS = ("scale_up", "network")
"""The links a ring's key/value blocks may cross in :func:`calibrated_hiding_block`: NVLink, or a GPU's network port."""


def calibrated_hiding_block(model: Model | str, hardware: Hardware | str, *, seq: int, tier: str = "network",
                            phase: str = "forward") -> float:
    """Chapter 11: the ring's hiding block (:func:`ring_hiding_block`) under the chip's calibrated roof rather than
    its datasheet: the attention kernel at the rate the flash-attention sweep measured at ``seq`` tokens (causal, the
    model's head size) and each key/value block sent at the measured point-to-point rate of ``tier`` ('scale_up':
    NVLink, 'network': the GPU's port). The law is the datasheet's, ``S_shard* = (c_KV / 2dL) x P / B_link``, with
    both rates replaced: a slower kernel lowers the block, a slower link raises it."""
    if tier not in HIDING_TIERS:
        raise unknown_name("tier", tier, HIDING_TIERS)
    m, hw = load_model(model), get_hardware(hardware)
    seq = count("seq", seq)
    roof = get_roof(hw, "calibrated")
    probe = 1e15  # FLOPs: the flash curve's rate is their ratio to its seconds
    rate = probe / roof.flash_time(probe, seq, head_dim=m.head_dim, causal=True)
    link = roof.port if tier == "network" else roof.send_nvlink
    sheet = ring_hiding_block(m, hw, tier=tier, phase=phase)
    return sheet * (rate / hw.peak_flops("bf16")) * (hw.interconnect[tier].each_way / link)


__all__ += ["HIDING_TIERS", "calibrated_hiding_block"]
