"""Batching requests of different lengths: static, continuous and chunked prefill (chapter 12).

A small, seeded simulation on top of the roofline's step times. Requests arrive at random times with
random prompt and output lengths (:func:`make_requests`); a scheduler decides, step by step, which
tokens go through the model together; each step is timed by the roofline from what it contains
(:class:`StepCost`). Three schedulers, named:

``'static'``
    Requests are grouped ``max_batch`` at a time in arrival order. A group starts when its last member has
    arrived and the previous group is done; its prompts are padded to the longest and prefilled together,
    then it decodes until its longest output is done, finished sequences keeping their slots (the padding
    and idle slots of request-level batching).
``'continuous'``
    Iteration-level scheduling (Orca, Yu et al. 2022): after every step finished sequences leave and waiting
    ones join, up to ``max_batch`` in flight. A request that joins has its whole prompt processed in the step
    it joins, beside the others' decode tokens, so that step is as long as a prefill.
``'chunked'``
    Continuous batching with chunked prefill (Sarathi-Serve, Agrawal et al. 2024): at most ``chunk`` prompt
    tokens join a step, so a long prompt is spread over several steps and the decode steps stay short.

The step time is the roofline's for the step's FLOPs and bytes under the first-order count, which is
affine in what the step contains: every token costs the weight FLOPs, every (query, key) pair the attention
FLOPs, every byte of KV cache read or written its bytes, and the weights are read once per step. The
coefficients are read off :func:`roofline.workloads.inference.decode_step` (:meth:`StepCost.of`), so a step of
``B`` sequences at context ``S`` costs exactly what ``decode_step(model, B, S)`` does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from roofline.core.checks import number
from roofline.core.hardware import Hardware, get_hardware
from roofline.workloads.inference import decode_step
from roofline.core.model import Model, load_model
from roofline.core.roof import Roof, as_roof

__all__ = ["POLICIES", "Requests", "StepCost", "SimResult", "make_requests", "simulate"]

POLICIES = ("static", "continuous", "chunked")


@dataclass(frozen=True)
class Requests:
    """Arrival times (s, sorted), prompt lengths and output lengths (tokens, each at least 1)."""

    arrival: np.ndarray
    prompt: np.ndarray
    output: np.ndarray

    def __len__(self) -> int:
        return len(self.arrival)


def _range(name, value) -> tuple[int, int]:
    try:
        lo, hi = value
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a pair (shortest, longest) of whole numbers of tokens, got {value!r}") from None
    lo, hi = int(number(f"{name}[0]", lo, integer=True)), int(number(f"{name}[1]", hi, integer=True))
    if hi < lo:
        raise ValueError(f"{name} must be (shortest, longest) with shortest <= longest, got {value!r}")
    return lo, hi


def make_requests(n: int, rate: float, prompt=(128, 2048), output=(16, 512), *, seed: int = 0) -> Requests:
    """``n`` requests arriving as a Poisson process of ``rate`` per second, prompt and output lengths
    drawn uniformly from the inclusive ranges ``prompt`` and ``output``; the same ``seed`` gives the
    same requests."""
    n = int(number("n", n, integer=True))
    rate = float(number("rate", rate))
    (plo, phi), (olo, ohi) = _range("prompt", prompt), _range("output", output)
    rng = np.random.default_rng(int(number("seed", seed, integer=True, strict=False)))
    arrival = np.cumsum(rng.exponential(1.0 / rate, n))
    return Requests(arrival, rng.integers(plo, phi + 1, n), rng.integers(olo, ohi + 1, n))


@dataclass(frozen=True)
class StepCost:
    """The roofline time of a step from what it holds, under the first-order count.

    ``flops_per_token`` (every weight used once per token), ``flops_per_pair`` (score and value products
    of one query with one key, every layer), ``weight_bytes`` (read once per step) and ``kv_bytes_per_token``
    (one token's keys and values, every layer), against the roof's ``peak_flops`` and ``bandwidth``.
    """

    flops_per_token: float
    flops_per_pair: float
    weight_bytes: float
    kv_bytes_per_token: float
    peak_flops: float
    bandwidth: float

    @classmethod
    def of(cls, model: Model | str, hardware: Hardware | Roof | str, *, dtype: str = "bf16") -> "StepCost":
        """The coefficients of ``model`` read off :func:`~roofline.workloads.inference.decode_step` (text
        accounting) and the roof of ``hardware`` (a catalog name, :class:`Hardware`, or a :class:`Roof`)."""
        m = load_model(model)
        roof = hardware if isinstance(hardware, Roof) else as_roof(get_hardware(hardware), dtype)
        one, two, ctx = (decode_step(m, b, c, dtype=dtype) for b, c in ((1, 0), (2, 0), (1, 1)))
        return cls(float(two.flops - one.flops), float(ctx.flops - one.flops), float(one.bytes),
                   float(ctx.bytes - one.bytes), float(roof.peak_flops), float(roof.bandwidth))

    def time(self, tokens: ArrayLike, pairs: ArrayLike, kv_tokens: ArrayLike):
        """Seconds for a step of ``tokens`` tokens, ``pairs`` query-key pairs and ``kv_tokens`` tokens of
        cache read or written; 0 for a step with no tokens. Broadcasts."""
        tokens = np.asarray(tokens, dtype=float)
        compute = (self.flops_per_token * tokens + self.flops_per_pair * np.asarray(pairs, dtype=float)) / self.peak_flops
        memory = (self.weight_bytes + self.kv_bytes_per_token * np.asarray(kv_tokens, dtype=float)) / self.bandwidth
        out = np.where(tokens > 0, np.maximum(compute, memory), 0.0)
        return float(out) if out.ndim == 0 else out

    def decode(self, batch: ArrayLike, context: ArrayLike):
        """A decode step of ``batch`` sequences with ``context`` cached tokens each."""
        batch = np.asarray(batch, dtype=float)
        return self.time(batch, batch * np.asarray(context, dtype=float), batch * np.asarray(context, dtype=float))

    def prefill(self, tokens: ArrayLike, batch: ArrayLike=1):
        """A prefill of ``batch`` prompts of ``tokens`` tokens (causal: half the square of pairs)."""
        t, b = np.asarray(tokens, dtype=float), np.asarray(batch, dtype=float)
        return self.time(b * t, b * t * t / 2.0, b * t)

    def memory_bound_chunk(self, batch, context) -> int:
        """The longest prompt chunk (from the prompt's start) that can join a decode step of ``batch``
        sequences at ``context`` tokens without making the step compute-bound: the chunk that rides on
        the weights' read for free (Sarathi-Serve's budget, by the roofline). 0 if the decode step is
        compute-bound already."""
        b = float(number("batch", batch, integer=True, strict=False))
        c = float(number("context", context, integer=True, strict=False))
        chunk = np.arange(0, 1 << 17, dtype=float)
        compute = (self.flops_per_token * (b + chunk) + self.flops_per_pair * (b * c + chunk * chunk / 2)) / self.peak_flops
        memory = (self.weight_bytes + self.kv_bytes_per_token * (b * c + chunk)) / self.bandwidth
        ok = np.flatnonzero(compute <= memory)
        return int(chunk[ok[-1]]) if ok.size else 0

    def compute_bound_tokens(self) -> float:
        """Tokens per step (no context) past which a step is compute-bound: weights over the ridge."""
        return self.weight_bytes / self.flops_per_token * self.peak_flops / self.bandwidth


@dataclass(frozen=True)
class SimResult:
    """What a simulated server did: per request (in arrival order) ``ttft`` (arrival to first token),
    ``finish`` and ``latency`` (arrival to last token), ``tpot`` (mean time between its later tokens,
    NaN for one-token outputs) and ``worst_gap`` (the longest wait between two of its tokens); per step
    ``step_start``, ``step_time``, ``step_decode`` (sequences making a real token; static batching's
    padded slots compute too, but are not counted) and ``step_prefill`` (prompt tokens); ``slot_steps`` (slot-steps held) and ``useful_steps`` (slot-steps that made a real token)."""

    policy: str
    max_batch: int
    chunk: int | None
    ttft: np.ndarray
    finish: np.ndarray
    latency: np.ndarray
    tpot: np.ndarray
    worst_gap: np.ndarray
    step_start: np.ndarray
    step_time: np.ndarray
    step_decode: np.ndarray
    step_prefill: np.ndarray
    output_tokens: int
    slot_steps: float
    useful_steps: float
    first_arrival: float

    @property
    def makespan(self) -> float:
        """From the first arrival to the last token."""
        return float(np.max(self.finish) - self.first_arrival)

    @property
    def throughput(self) -> float:
        """Output tokens per second over the makespan."""
        return self.output_tokens / self.makespan

    @property
    def wasted_slots(self) -> float:
        """Share of the slot-steps held that produced no real token (padding, finished sequences)."""
        return 1.0 - self.useful_steps / self.slot_steps if self.slot_steps else 0.0

    def summary(self) -> dict:
        """Medians and 99th percentiles a serving engineer reads, and throughput."""
        tpot = self.tpot[np.isfinite(self.tpot)]
        return {"policy": self.policy, "throughput": self.throughput, "ttft_p50": float(np.median(self.ttft)),
                "ttft_p99": float(np.percentile(self.ttft, 99)), "tpot_p50": float(np.median(tpot)),
                "tpot_p99": float(np.percentile(tpot, 99)), "worst_gap_p99": float(np.percentile(self.worst_gap, 99)),
                "latency_p50": float(np.median(self.latency)), "wasted_slots": self.wasted_slots}


def _static(req: Requests, cost: StepCost, B: int) -> SimResult:
    n = len(req)
    ttft, finish, gap = np.empty(n), np.empty(n), np.zeros(n)
    starts, times, decs, pres = [], [], [], []
    clock, slot_steps, useful = 0.0, 0.0, 0.0
    for g0 in range(0, n, B):
        idx = np.arange(g0, min(g0 + B, n))
        b = len(idx)
        clock = max(clock, float(req.arrival[idx[-1]]))
        P, O = int(np.max(req.prompt[idx])), int(np.max(req.output[idx]))
        t_pre = cost.prefill(P, b)  # prompts padded to the longest
        starts.append(clock), times.append(t_pre), decs.append(0), pres.append(b * P)
        clock += t_pre
        ttft[idx] = clock - req.arrival[idx]
        if O > 1:  # every slot decodes until the longest is done; step j makes token j + 1 over P + j cached
            steps = cost.decode(b, P + np.arange(O - 1))
            ends, peak = clock + np.cumsum(steps), np.maximum.accumulate(steps)
            k = req.output[idx] - 2  # the step that made each request's last token (-1: the prefill did)
            finish[idx] = np.where(k >= 0, ends[np.maximum(k, 0)], clock)
            gap[idx] = np.where(k >= 0, peak[np.maximum(k, 0)], 0.0)
            live = np.sum(req.output[idx][:, None] - 1 > np.arange(O - 1)[None, :], axis=0)  # real tokens per step
            starts.extend(ends - steps), times.extend(steps), decs.extend(live), pres.extend([0] * (O - 1))
            clock = float(ends[-1])
        else:
            finish[idx] = clock
        slot_steps += B * O
        useful += float(np.sum(req.output[idx]))
    return _result("static", B, None, req, ttft, finish, gap, starts, times, decs, pres, slot_steps, useful)


def _continuous(req: Requests, cost: StepCost, B: int, chunk: int | None, policy: str) -> SimResult:
    n = len(req)
    arrival, prompt, output = req.arrival, req.prompt.astype(float), req.output.astype(float)
    phase = np.zeros(n, dtype=np.int8)  # 0 waiting, 1 prefilling, 2 decoding, 3 done
    done_prompt = np.zeros(n)  # prompt tokens already in the cache
    made = np.zeros(n)  # output tokens produced
    ttft, finish, gap = np.full(n, np.nan), np.full(n, np.nan), np.zeros(n)
    last_token = np.zeros(n)
    starts, times, decs, pres = [], [], [], []
    clock, slot_steps, useful = float(arrival[0]), 0.0, 0.0
    next_in = 0  # requests are sorted by arrival: the first not yet admitted
    while True:
        in_flight = int(np.count_nonzero((phase == 1) | (phase == 2)))
        if in_flight == 0 and next_in >= n:
            break
        if in_flight == 0 and arrival[next_in] > clock:
            clock = float(arrival[next_in])  # idle until the next request arrives
        arrived = int(np.searchsorted(arrival, clock, side="right"))
        take = min(B - in_flight, arrived - next_in)
        if take > 0:
            phase[next_in:next_in + take] = 1
            next_in += take
        dec = np.flatnonzero(phase == 2)
        pre = np.flatnonzero(phase == 1)
        rest = prompt[pre] - done_prompt[pre]
        if chunk is None:
            piece = rest
        else:  # the budget goes to prompts in arrival order
            before = np.concatenate(([0.0], np.cumsum(rest)[:-1]))
            piece = np.clip(chunk - before, 0.0, rest)
        offset = done_prompt[pre]
        ctx = prompt[dec] + made[dec] - 1.0  # cached tokens of each decoding sequence: all but its newest token
        tokens = len(dec) + float(np.sum(piece))
        # a prompt piece attends to the cache before it and causally to itself (half the square, as prefill)
        pairs = float(np.sum(ctx)) + float(np.sum(piece * offset + piece * piece / 2))
        kv = float(np.sum(ctx)) + float(np.sum(offset + piece))  # caches read, and the piece's keys written
        dt = cost.time(tokens, pairs, kv)
        starts.append(clock), times.append(dt), decs.append(len(dec)), pres.append(float(np.sum(piece)))
        clock += dt
        slot_steps += B
        useful += len(dec)
        # decoding sequences each made a token
        made[dec] += 1
        gap[dec] = np.maximum(gap[dec], clock - last_token[dec])
        last_token[dec] = clock
        ended = dec[made[dec] >= output[dec]]
        phase[ended], finish[ended] = 3, clock
        # prompts that are now complete give their first token
        done_prompt[pre] += piece
        full = pre[done_prompt[pre] >= prompt[pre]]
        made[full], ttft[full], last_token[full] = 1, clock - arrival[full], clock
        useful += len(full)
        one = full[output[full] <= 1]
        phase[full], phase[one], finish[one] = 2, 3, clock
    return _result(policy, B, chunk, req, ttft, finish, gap, starts, times, decs, pres, slot_steps, useful)


def _result(policy, B, chunk, req, ttft, finish, gap, starts, times, decs, pres, slot_steps, useful) -> SimResult:
    first = finish - req.arrival - ttft
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(req.output > 1, first / (req.output - 1), np.nan)
    return SimResult(policy, B, chunk, ttft, finish, finish - req.arrival, tpot, gap,
                     np.asarray(starts, dtype=float), np.asarray(times, dtype=float), np.asarray(decs, dtype=float),
                     np.asarray(pres, dtype=float), int(np.sum(req.output)), float(slot_steps), float(useful),
                     float(req.arrival[0]))


def simulate(requests: Requests, model: Model | str, hardware: Hardware | Roof | str, *, policy: str = "continuous",
             max_batch: int = 64, chunk: int | None = None, dtype: str = "bf16") -> SimResult:
    """Serve ``requests`` with ``model`` on ``hardware`` under ``policy`` (one of :data:`POLICIES`),
    at most ``max_batch`` sequences in flight; ``chunk`` (prompt tokens per step) for ``'chunked'`` only.
    Deterministic: the same requests give the same result. Memory is not checked: choose ``max_batch``
    within :func:`roofline.serving.largest_batch` for the longest request."""
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {', '.join(map(repr, POLICIES))}, got {policy!r}")
    if not isinstance(requests, Requests) or len(requests) == 0:
        raise TypeError(f"requests must be a non-empty Requests (from make_requests), got {type(requests).__name__}")
    B = int(number("max_batch", max_batch, integer=True))
    if policy == "chunked":
        if chunk is None:
            raise ValueError("policy 'chunked' needs chunk, the most prompt tokens a step may take")
        chunk = int(number("chunk", chunk, integer=True))
    elif chunk is not None:
        raise ValueError(f"chunk belongs to policy 'chunked', not {policy!r}")
    cost = StepCost.of(model, hardware, dtype=dtype)
    if policy == "static":
        return _static(requests, cost, B)
    return _continuous(requests, cost, B, chunk, policy)


# Chapter 12's quantities that the prose quotes, each one call for the notebook.

def _requests(requests) -> Requests:
    if not isinstance(requests, Requests):
        raise TypeError(f"requests must be Requests (from make_requests), got {type(requests).__name__}")
    return requests


def arrival_span(requests: Requests) -> float:
    """Chapter 12: seconds from the first request's arrival to the last's."""
    r = _requests(requests)
    return float(r.arrival[-1] - r.arrival[0])


__all__ += ["arrival_span"]


def since_first_arrival(result: SimResult, requests: Requests) -> np.ndarray:
    """Chapter 12: each simulated step's start, in seconds after the first request arrived."""
    if not isinstance(result, SimResult):
        raise TypeError(f"result must be a SimResult (from simulate), got {type(result).__name__}")
    return result.step_start - _requests(requests).arrival[0]


__all__ += ["since_first_arrival"]


def offered_tokens_per_s(rate, requests: Requests) -> float:
    """Chapter 12: the output tokens per second ``requests`` arriving at ``rate`` per second ask of a server:
    the rate times their mean output length."""
    return number("rate", rate) * float(_requests(requests).output.mean())


__all__ += ["offered_tokens_per_s"]


def chunk_join_time(cost: StepCost, batch, context, chunk) -> float:
    """Chapter 12: a decode step of ``batch`` sequences at ``context`` tokens with a ``chunk``-token prompt
    chunk (from the prompt's start) riding along: ``batch + chunk`` tokens, ``batch context + chunk**2 / 2``
    query-key pairs, ``batch context + chunk`` tokens of cache (:meth:`StepCost.time`)."""
    if not isinstance(cost, StepCost):
        raise TypeError(f"cost must be a StepCost (StepCost.of), got {type(cost).__name__}")
    b = number("batch", batch, integer=True)
    c = number("context", context, integer=True, strict=False)
    k = number("chunk", chunk, integer=True, strict=False)
    return cost.time(b + k, b * c + k ** 2 / 2, b * c + k)


__all__ += ["chunk_join_time"]


class StaticWaste(NamedTuple):
    """Chapter 12, exercise 5: a static batch's mean output length, its longest (every slot is held until
    the longest sequence ends), and the share of slot-steps wasted, ``1 - mean / longest``."""

    mean: float
    longest: float
    waste: float


__all__ += ["StaticWaste"]


def expected_static_waste(outputs=(16, 512), slots: int = 64) -> StaticWaste:
    """Chapter 12, exercise 5: :class:`StaticWaste` in expectation, for ``slots`` output lengths drawn
    uniformly from the whole numbers ``outputs = (lo, hi)``: the longest is ``sum o (F(o) - F(o-1))`` with
    ``F(o) = ((o - lo + 1) / n)**slots`` the chance that all ``slots`` draws are at most ``o``."""
    lo, hi = _range("outputs", outputs)
    slots = int(number("slots", slots, integer=True))
    o = np.arange(lo, hi + 1, dtype=float)
    cdf = ((o - o[0] + 1) / len(o)) ** slots
    longest = float(np.sum(o * np.diff(np.concatenate(([0.0], cdf)))))
    return StaticWaste(float(o.mean()), longest, float(1 - o.mean() / longest))


__all__ += ["expected_static_waste"]


def drawn_static_waste(requests: Requests, slots: int = 64) -> StaticWaste:
    """Chapter 12, exercise 5: :class:`StaticWaste` of the groups of ``slots`` requests a static server forms
    in order of arrival (the mean output, the mean of each group's longest)."""
    r = _requests(requests)
    slots = int(number("slots", slots, integer=True))
    if len(r) % slots:
        raise ValueError(f"slots must divide the {len(r)} requests into whole groups, got {slots}")
    groups = r.output.reshape(-1, slots).astype(float)
    mean, longest = float(groups.mean()), float(groups.max(axis=1).mean())
    return StaticWaste(mean, longest, 1 - mean / longest)


__all__ += ["drawn_static_waste"]


def throughput_gain(result: SimResult, baseline: SimResult) -> float:
    """Chapter 12: how many times the output tokens per second of ``baseline`` a policy's run reaches
    (:meth:`SimResult.summary`'s throughput; continuous over static batching, say)."""
    for name, r in (("result", result), ("baseline", baseline)):
        if not isinstance(r, SimResult):
            raise TypeError(f"{name} must be a SimResult (from simulate), got {type(r).__name__}")
    return result.summary()["throughput"] / baseline.summary()["throughput"]


__all__ += ["throughput_gain"]
