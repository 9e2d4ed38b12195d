"""Pipeline parallelism: the model's layers cut into ``p`` stages, micro-batches passed from stage to stage
(chapter 9).

Schedules (Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters Using
Megatron-LM", SC 2021, arXiv:2104.04473, section 2.2), for ``n_mb`` micro-batches per step on ``p`` stages,
each stage taking ``t_f`` and ``t_b`` per micro-batch forward and backward:

- **GPipe** (Huang et al. 2019): every forward pass, then every backward pass. The step lasts
  ``(n_mb + p - 1)(t_f + t_b)``: a bubble of ``(p - 1)(t_f + t_b)``, a fraction ``(p - 1)/n_mb`` of the ideal
  ``n_mb (t_f + t_b)``. Each stage holds the activations of all ``n_mb`` micro-batches at the turn.
- **1F1B** (PipeDream-Flush): after ``p - s - 1`` warm-up forwards, stage ``s`` alternates one forward and
  one backward. Same bubble, but the first stage holds at most ``p`` micro-batches, the others fewer.
- **Interleaved 1F1B**: each GPU holds ``v`` non-adjacent chunks of ``L/(p v)`` layers (virtual stages);
  the fill and drain shrink by ``v``, the bubble fraction to ``(p - 1)/(m v)``, at ``v`` times the
  point-to-point messages. Megatron-LM asks ``m`` to be a multiple of ``p``.

:func:`simulate` plays a schedule out operation by operation (each waits for its stage and for the message
it needs), so the closed forms above are checked against a timeline rather than assumed.

Boundary traffic: a stage sends its output activations forward, ``seq * micro_batch * hidden`` elements, and
receives the same size of gradient back: point to point, once per boundary per micro-batch each way
(``v`` times with interleaving). With tensor parallelism each of the ``t`` GPUs of a stage sends its
``1/t`` share (Megatron's scatter-gather optimisation), then gathers over NVLink.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from roofline.core.checks import number, unknown_name
from roofline.core.collectives import collective_cost
from roofline.core.hardware import Hardware, get_hardware
from roofline.core.model import Model, load_model, param_count
from roofline.parallel.tensor_parallel import tier_ridge
from roofline.core.units import dtype_bytes

__all__ = ["SCHEDULES", "PUBLISHED", "Slot", "Timeline", "bubble_fraction", "in_flight", "schedule_order",
           "simulate", "boundary_bytes", "stage_layers", "boundary_intensity"]

SCHEDULES = ("gpipe", "1f1b", "interleaved")

PUBLISHED: dict = {
    "narayanan_bubble": ("(p-1)/m", "Narayanan et al. 2021 (arXiv:2104.04473), section 2.2.1: the bubble time "
                                    "fraction of GPipe and 1F1B"),
    "narayanan_interleaved_bubble": ("(p-1)/(m v)", "same paper, section 2.2.2: interleaved schedule with v "
                                                    "model chunks per device"),
}


def _schedule(schedule: str) -> str:
    if schedule not in SCHEDULES:
        raise unknown_name("schedule", schedule, SCHEDULES)
    return schedule


def _pmv(p, m, v, schedule):
    schedule = _schedule(schedule)
    p = number("p", p, integer=True, minimum=1, strict=False)
    m = number("m", m, integer=True, minimum=1, strict=False)
    v = number("v", v, integer=True, minimum=1, strict=False)
    if schedule != "interleaved" and np.any(np.asarray(v) != 1):
        raise ValueError(f"v (model chunks per GPU) must be 1 for the {schedule!r} schedule, got {v!r}; "
                         f"use schedule='interleaved' for v > 1")
    return p, m, v, schedule


def bubble_fraction(p, m, v=1, schedule: str = "1f1b"):
    """Idle time over ideal time, ``(p - 1)/(m v)`` (``v = 1`` for GPipe and 1F1B). Broadcasts."""
    p, m, v, _ = _pmv(p, m, v, schedule)
    return (p - 1) / (m * v)


def in_flight(p, m, v=1, schedule: str = "1f1b"):
    """The most micro-batches whose activations the first stage holds at once, in units of one micro-batch's
    activations for the whole stage: ``m`` for GPipe, ``min(p, m)`` for 1F1B, and for interleaved 1F1B
    ``min(p + (p - 1)/v, m)`` (Megatron-LM's warm-up: ``2 (p - 1) + (v - 1) p`` chunk forwards before the
    first backward, each chunk a ``1/v`` of the stage). Broadcasts."""
    p, m, v, schedule = _pmv(p, m, v, schedule)
    if schedule == "gpipe":
        return m * np.ones_like(p) if np.ndim(p) else m
    if schedule == "1f1b":
        return np.minimum(p, m)
    return np.minimum(p + (p - 1) / v, m)


def schedule_order(p: int, m: int, v: int = 1, schedule: str = "1f1b") -> list[list[tuple]]:
    """Each stage's operations in the order it runs them: ``("F" or "B", micro_batch, chunk)``."""
    p, m, v, schedule = _pmv(p, m, v, schedule)
    p, m, v = int(p), int(m), int(v)
    if schedule == "interleaved" and m % p:
        raise ValueError(f"m (micro-batches) must be a multiple of p ({p}) for the interleaved schedule, got {m}")
    orders = []
    for s in range(p):
        if schedule == "gpipe":
            orders.append([("F", i, 0) for i in range(m)] + [("B", i, 0) for i in range(m)])
            continue
        # the sequence of (micro_batch, chunk) each direction visits: groups of p micro-batches, chunk by chunk
        fwd = [(g * p + i, c) for g in range(m // p if v > 1 else 1) for c in range(v) for i in range(p)] \
            if v > 1 else [(i, 0) for i in range(m)]
        bwd = [(g * p + i, v - 1 - c) for g in range(m // p) for c in range(v) for i in range(p)] \
            if v > 1 else [(i, 0) for i in range(m)]
        total = m * v
        warm = min(total, (p - s - 1) if v == 1 else (p - s - 1) * 2 + (v - 1) * p)
        order = [("F", *fwd[i]) for i in range(warm)]
        f, b = warm, 0
        while b < total:
            if f < total:
                order.append(("F", *fwd[f]))
                f += 1
            order.append(("B", *bwd[b]))
            b += 1
        orders.append(order)
    return orders


@dataclass(frozen=True)
class Slot:
    """One operation on the timeline: a forward or backward pass of one micro-batch's chunk on one stage."""

    stage: int
    kind: str  # "F" or "B"
    micro_batch: int
    chunk: int
    start: float
    end: float


@dataclass(frozen=True)
class Timeline:
    """A simulated step: the slots, the step's length, and what the closed forms predict."""

    p: int
    m: int
    v: int
    schedule: str
    forward: float  # one micro-batch's forward on one stage (all its chunks)
    backward: float
    slots: tuple

    @property
    def makespan(self) -> float:
        return max(s.end for s in self.slots)

    @property
    def ideal(self) -> float:
        return self.m * (self.forward + self.backward)

    @property
    def bubble(self) -> float:
        """Idle time over ideal time on the busiest stage (they are all equally busy)."""
        return self.makespan / self.ideal - 1

    def peak_in_flight(self, stage: int = 0) -> float:
        """The most micro-batches' activations ``stage`` holds at once (a chunk counts ``1/v``): a forward
        adds its chunk when it starts, a backward frees it when it ends."""
        events = []
        for s in self.slots:
            if s.stage == stage:
                events.append((s.start, 1) if s.kind == "F" else (s.end, -1))
        events.sort(key=lambda e: (e[0], e[1]))
        held = peak = 0
        for _, d in events:
            held += d
            peak = max(peak, held)
        return peak / self.v

    def busy(self, stage: int) -> float:
        return sum(s.end - s.start for s in self.slots if s.stage == stage)


def simulate(p: int, m: int, v: int = 1, schedule: str = "1f1b", *, forward=1.0, backward=2.0,
             message=0.0) -> Timeline:
    """Play a schedule out: each stage runs its :func:`schedule_order` one operation at a time, an operation
    starting when its stage is free and the activation (forward) or gradient (backward) it needs has arrived
    from the neighbouring virtual stage, ``message`` seconds after it was sent. ``forward`` and ``backward``
    are one micro-batch's times on one stage (each chunk takes ``1/v`` of them)."""
    p, m, v, schedule = _pmv(p, m, v, schedule)
    p, m, v = int(p), int(m), int(v)
    tf, tb = float(number("forward", forward)), float(number("backward", backward))
    msg = float(number("message", message, strict=False))
    orders = schedule_order(p, m, v, schedule)
    last = p * v - 1
    done: dict = {}  # (kind, micro_batch, virtual stage) -> end time
    free = [0.0] * p
    nxt = [0] * p
    slots = []
    remaining = sum(len(o) for o in orders)
    while remaining:
        progressed = False
        for s in range(p):
            while nxt[s] < len(orders[s]):
                kind, i, c = orders[s][nxt[s]]
                k = c * p + s  # the virtual stage: chunk c of stage s holds layers k L/(p v) to (k+1) L/(p v)
                if kind == "F":
                    dep = ("F", i, k - 1) if k > 0 else None
                else:
                    dep = ("B", i, k + 1) if k < last else ("F", i, k)
                if dep is not None and dep not in done:
                    break
                ready = 0.0 if dep is None else done[dep] + (msg if dep[2] != k else 0.0)
                start = max(free[s], ready)
                end = start + (tf if kind == "F" else tb) / v
                done[(kind, i, k)] = end
                free[s] = end
                slots.append(Slot(s, kind, i, c, start, end))
                nxt[s] += 1
                remaining -= 1
                progressed = True
        if not progressed:  # pragma: no cover - every shipped schedule is deadlock-free
            raise RuntimeError(f"the {schedule} schedule deadlocked at p={p}, m={m}, v={v}")
    return Timeline(p, m, v, schedule, tf, tb, tuple(slots))


def stage_layers(layers, p):
    """Layers on each of ``p`` stages when they do not divide evenly: the first ``L mod p`` stages take one
    more, so the slowest stage has ``ceil(L/p)`` (a list of ints)."""
    L = int(number("layers", layers, integer=True))
    p = int(number("p", p, integer=True))
    if p > L:
        raise ValueError(f"p (pipeline stages) must be at most the number of layers ({L}), got {p}")
    return [L // p + (1 if s < L % p else 0) for s in range(p)]


def boundary_bytes(model: Model | str, seq, micro_batch=1, *, tp=1, dtype: str = "bf16"):
    """Bytes each GPU sends across one stage boundary per micro-batch, one way: the activations
    ``seq * micro_batch * hidden`` (the gradient coming back is the same size), split over ``tp`` GPUs.
    Broadcasts."""
    m = load_model(model)
    s = number("seq", seq, integer=True)
    b = number("micro_batch", micro_batch, integer=True)
    t = number("tp", tp, integer=True)
    return s * b * m.hidden_size * dtype_bytes(dtype) / t


def boundary_intensity(model: Model | str, p, *, dtype: str = "bf16"):
    """FLOPs a stage runs per byte it sends across its boundary, forward and backward together: ``6 N_stage``
    FLOPs a token (``N_stage = N / p`` of the weights) against ``2 h a`` bytes a token (activations out,
    gradients back). Independent of the sequence, micro-batch and tensor degree (both divide by ``t``)."""
    m = load_model(model)
    p = number("p", p, integer=True)
    return 6 * param_count(m) / p / (2 * m.hidden_size * dtype_bytes(dtype))


# Chapter 9's quantities that the prose quotes, each one call for the notebook.

def head_layers(model: Model | str) -> float:
    """Chapter 9: the output head's weights in decoder layers' worth, ``lm_head / ((N - embedding - lm_head)
    / L)``: how much heavier the last stage is when it carries the head (about two thirds of a layer for
    Llama 3.1 405B: its 2.1B-parameter head against 3.2B a layer)."""
    m = load_model(model)
    layer = (param_count(m) - m.embedding_params - m.lm_head_params) / m.num_layers
    return m.lm_head_params / layer


__all__ += ["head_layers"]


class BoundaryShare(NamedTuple):
    """Chapter 9: one boundary send (seconds, one way), one stage's compute for the same micro-batch
    (seconds), and the share the two sends (activations out, gradients back) take of that compute."""

    send: float
    stage: float
    share: float


__all__ += ["BoundaryShare"]


def boundary_share(model: Model | str, hardware: Hardware | str, seq, p, *, tp=1, tier: str = "network",
                   dtype: str = "bf16") -> BoundaryShare:
    """Chapter 9: a micro-batch of ``seq`` tokens crossing one stage boundary on ``tier``
    (:func:`boundary_bytes`, a point-to-point send), against the stage's ``6 N seq / (p t) / P`` seconds
    of compute at peak; ``share = 2 send / stage``."""
    hw = get_hardware(hardware)
    p = number("p", p, integer=True)
    t = number("tp", tp, integer=True)
    send = float(collective_cost("send_recv", 2, boundary_bytes(model, seq, tp=tp, dtype=dtype), hw, tier=tier).time)
    stage = 6 * param_count(load_model(model)) * number("seq", seq, integer=True) / p / t / hw.peak_flops(dtype)
    return BoundaryShare(send, stage, 2 * send / stage)


__all__ += ["boundary_share"]


def hiding_stages(model: Model | str, hardware: Hardware | str, tier: str = "network", *, dtype: str = "bf16") -> float:
    """Chapter 9: the most stages whose boundary traffic the compute still hides on ``tier``:
    :func:`boundary_intensity` falls as ``1/p``, so it meets the tier's ridge at ``p = intensity(1) / ridge``."""
    return boundary_intensity(model, 1, dtype=dtype) / tier_ridge(hardware, tier, dtype=dtype)


__all__ += ["hiding_stages"]


def micro_batches_for(p, target, v=1, schedule: str = "1f1b") -> int:
    """Chapter 9: the fewest micro-batches whose bubble (:func:`bubble_fraction`) is at most ``target``:
    ``ceil((p-1)/target)`` for GPipe and 1F1B; for interleaved 1F1B ``(p-1)/(target v)`` rounded up to a
    whole multiple of ``p`` (Megatron-LM's interleaved schedule takes ``m`` in multiples of ``p``)."""
    p, _, v, schedule = _pmv(p, 1, v, schedule)
    target = number("target", target)
    if target >= 1:
        raise ValueError(f"target is a bubble fraction and must be below 1, got {target!r}")
    if schedule == "interleaved":
        return int(math.ceil((p - 1) / (target * v) / p) * p)
    return int(math.ceil((p - 1) / target))


__all__ += ["micro_batches_for"]


def pipeline_messages(p, m, v=1):
    """Chapter 9: point-to-point sends on a step's critical path, ``2 (m v + p - 1)`` (forward and backward:
    each of the ``m v`` chunk passes, and the ``p - 1`` hops of filling and draining the pipeline)."""
    p, m, v, _ = _pmv(p, m, v, "interleaved")
    return 2 * (m * v + p - 1)


__all__ += ["pipeline_messages"]


def stage_activation_bytes(layers, p, m, layer_bytes, v=1, schedule: str = "1f1b"):
    """Chapter 9: the activations the first (fullest) stage holds at once: :func:`in_flight` micro-batches
    times its ``ceil(L/p)`` layers (:func:`stage_layers`) times ``layer_bytes`` per layer and micro-batch."""
    per_stage = max(stage_layers(layers, p))
    return in_flight(p, m, v, schedule) * per_stage * number("layer_bytes", layer_bytes)


__all__ += ["stage_activation_bytes"]


class StageBalance(NamedTuple):
    """Chapter 9: layers per stage when ``L`` does not divide by ``p``: the mean, the most and the least, the
    throughput lost to the fullest stage (``1 - mean/most``) and the idle share of the shortest
    (``1 - least/most``)."""

    mean: float
    most: int
    least: int
    loss: float
    short_idle: float


__all__ += ["StageBalance"]


def stage_balance(layers, p) -> StageBalance:
    """Chapter 9: :class:`StageBalance` of :func:`stage_layers` (126 layers on 16 stages: 7.875 on average,
    8 on the fullest, a 1.6% loss)."""
    lay = stage_layers(layers, p)
    mean = int(layers) / len(lay)
    return StageBalance(mean, max(lay), min(lay), 1 - mean / max(lay), 1 - min(lay) / max(lay))


__all__ += ["stage_balance"]


def boundary_margin(model: Model | str, p, hardware: Hardware | str, tier: str = "network", *,
                    dtype: str = "bf16") -> float:
    """Chapter 9: :func:`boundary_intensity` at ``p`` stages over the tier's ridge point: how many times over
    the compute hides the boundary traffic (below 1 it cannot)."""
    return boundary_intensity(model, p, dtype=dtype) / tier_ridge(hardware, tier, dtype=dtype)


__all__ += ["boundary_margin"]
