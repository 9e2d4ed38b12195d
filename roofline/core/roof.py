"""The roofline: work under a roof gives a time, a bound and a utilization (chapter 1; the appendix).

S. Williams, A. Waterman and D. Patterson, Communications of the ACM 52(4), 2009:
attainable FLOP/s = min(peak, bandwidth x intensity).

Two kinds of roof:

:class:`Roof`
    Two ceilings, peak FLOP/s and HBM bandwidth: a datasheet's promise (``kind='datasheet'``), the best a
    benchmark reached (``'measured'``) or a what-if. It gives a floor: no kernel beats it.
:class:`CalibratedRoof`
    What microbenchmarks of one machine say each kind of kernel reaches: bandwidth as a function of how
    many bytes a kernel moves, matmul throughput as a function of its rows, flash attention's throughput
    by sequence length, and the launch latency (eager or CUDA graph). It gives an estimate, not a floor.

Three timing rules, named (:data:`TIMINGS`):

``'step'``
    The text's: ``max(FLOPs / peak, bytes / bandwidth)`` over the whole step, as if every byte of one
    kernel could hide behind the math of another. The lowest of the three; chapter 1 uses it.
``'kernel'``
    Each kernel's own ``max(compute, memory)``, summed: a kernel cannot hide its bytes behind a later
    kernel's math. A kernel also takes at least its launch interval (launches are asynchronous, so a
    launch hides behind the kernel before it, but a stream of short kernels runs at the launch rate).
``'serial'``
    Compute plus memory plus launch, for every kernel: no overlap anywhere. The highest.

``step <= kernel <= serial`` for any work under any roof.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Mapping, NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from roofline.core.checks import number, unknown_name
from roofline.core.cost import Breakdown, Cost
from roofline.core.curve import loglog
from roofline.core.hardware import Hardware, get_hardware
from roofline.core.ops import Op

__all__ = [
    "TIMINGS", "KIND_GROUPS", "Roof", "CalibratedRoof", "ridge_point", "as_roof", "attainable_flops", "Prediction", "OpTime",
    "predict",
]

TIMINGS = ("step", "kernel", "serial")
_OVERLAP = {"perfect": "step", "none": "serial"}  # the names chapter 1 first used


@dataclass(frozen=True)
class Roof:
    """The two ceilings of the roofline model: peak FLOP/s and memory bandwidth (bytes/s).

    ``kind`` says what they are: 'datasheet' (the vendor's promise), 'measured' (what a benchmark
    reached) or 'what-if'. ``dtype`` is the number format of the peak. ``launch_s`` is a time every
    kernel takes at least (0 on a datasheet, which knows nothing of launches).
    """

    label: str
    peak_flops: float
    bandwidth: float
    kind: str = "datasheet"
    dtype: str = "bf16"
    launch_s: float = 0.0

    def __post_init__(self):
        number("peak_flops", self.peak_flops)
        number("bandwidth", self.bandwidth)
        number("launch_s", self.launch_s, strict=False)
        if self.kind not in ("datasheet", "measured", "what-if"):
            raise ValueError(f"kind must be 'datasheet', 'measured' or 'what-if', got {self.kind!r}")

    @property
    def ridge_point(self) -> float:
        """FLOPs the roof demands per byte of HBM traffic before compute becomes the limit."""
        return self.peak_flops / self.bandwidth

    def with_(self, **changes) -> "Roof":
        """A copy with some fields changed (a what-if roof unless ``kind`` is given)."""
        changes.setdefault("kind", "what-if")
        return replace(self, **changes)

    def pooled(self, gpus: int) -> "Roof":
        """The roof of ``gpus`` of these GPUs working as one (chapters 5 and 12's servers): their FLOP/s and
        their HBM bandwidth add, the ridge stays where it is, each kernel still pays one launch, and the
        collectives between them are not counted (chapter 8 prices those). ``gpus`` 1 is this roof."""
        n = int(number("gpus", gpus, integer=True))
        if n == 1:
            return self
        return replace(self, label=f"{n} × {self.label}", peak_flops=n * self.peak_flops, bandwidth=n * self.bandwidth)


@dataclass(frozen=True)
class CalibratedRoof:
    """A machine as its microbenchmarks saw it: what each kind of kernel reaches (the appendix).

    ``read_bytes``/``read_seconds``: a read of that many bytes took that long (small reads are bound by
    latency, not bandwidth); a kernel that moves ``b`` bytes takes at least the interpolated time.
    ``matmul_rows``/``matmul_flops``: per number format, the FLOP/s a matmul of ``m`` rows reached at
    best in the sweeps (small ``m`` fills the tensor cores' tiles badly). ``attention_tokens``/
    ``attention_flops``: flash attention's FLOP/s by sequence length. ``decode_groups``/``decode_curves``:
    when the record has them, the bandwidth a decode attention kernel reached, by its sequences x KV heads
    (one ``(bytes per group, bytes/s)`` curve per group count); a kernel with few groups leaves most of
    the GPU idle. ``launch``: seconds per kernel, ``'graph'`` or ``'eager'``, as chosen by ``mode``.

    Built by :func:`roofline.core.calibration.calibrated_roof` from a measurement record; never fitted to the
    end-to-end decode and prefill times it is tested against.
    """

    label: str
    bandwidth: float
    read_bytes: tuple
    read_seconds: tuple
    matmul_rows: Mapping[str, tuple]
    matmul_flops: Mapping[str, tuple]
    launch: Mapping[str, float]
    mode: str = "graph"
    attention_tokens: tuple = ()
    attention_flops: tuple = ()
    decode_groups: tuple = ()
    decode_curves: tuple = ()
    assumption: str = ""  # set when the efficiencies were carried over from another chip
    kind: str = field(default="calibrated", init=False)

    def __post_init__(self):
        if self.mode not in self.launch:
            raise ValueError(f"mode must be one of {', '.join(map(repr, self.launch))}, got {self.mode!r}")
        object.__setattr__(self, "matmul_rows", MappingProxyType(dict(self.matmul_rows)))
        object.__setattr__(self, "matmul_flops", MappingProxyType(dict(self.matmul_flops)))
        object.__setattr__(self, "launch", MappingProxyType(dict(self.launch)))
        if len(self.decode_groups) != len(self.decode_curves):
            raise ValueError(f"decode_curves must hold one (bytes per group, bytes/s) curve per entry of decode_groups: "
                             f"{len(self.decode_curves)} curves for {len(self.decode_groups)} group counts")
        if any(b <= a for a, b in zip(self.decode_groups, self.decode_groups[1:])):
            raise ValueError(f"decode_groups must be increasing, got {self.decode_groups!r}")

    @property
    def launch_s(self) -> float:
        """Seconds a kernel takes at least, in this roof's launch mode."""
        return self.launch[self.mode]

    @property
    def dtype(self) -> str:
        return "bf16" if "bf16" in self.matmul_flops else next(iter(self.matmul_flops))

    def peak(self, dtype: str) -> float:
        """The fastest matmul of ``dtype`` seen in the sweeps (the measured compute ceiling)."""
        return float(max(self._matmul(dtype)[1]))

    @property
    def peak_flops(self) -> float:
        return self.peak(self.dtype)

    @property
    def ridge_point(self) -> float:
        return self.peak_flops / self.bandwidth

    def _matmul(self, dtype: str):
        try:
            return self.matmul_rows[dtype], self.matmul_flops[dtype]
        except KeyError:
            raise ValueError(f"{self.label} has no measured {dtype} matmuls (it has: "
                             f"{', '.join(self.matmul_flops)}); measure them, or use a datasheet roof") from None

    def memory_seconds(self, nbytes: ArrayLike):
        """Time one kernel takes to move ``nbytes`` through HBM, from the read sweep."""
        nbytes = np.asarray(nbytes, dtype=float)
        xs, ys = np.asarray(self.read_bytes), np.asarray(self.read_seconds)
        small = ys[0]  # below the smallest read measured: its latency
        big = nbytes / self.bandwidth  # beyond the largest: the sustained bandwidth
        t = loglog(np.maximum(nbytes, xs[0]), xs, ys)
        return np.where(nbytes <= xs[0], small, np.where(nbytes >= xs[-1], np.maximum(big, ys[-1]), t))

    def matmul_flops_per_s(self, m: ArrayLike, dtype: str = "bf16"):
        """FLOP/s a matmul of ``m`` rows reaches at best, from the sweeps (flat beyond their ends)."""
        rows, flops = self._matmul(dtype)
        return loglog(np.asarray(m, dtype=float), rows, flops)

    def attention_flops_per_s(self, tokens: ArrayLike, dtype: str = "bf16"):
        """FLOP/s of flash attention over ``tokens`` queries, from its sweep (else the matmul rate)."""
        if not self.attention_tokens:
            return self.matmul_flops_per_s(tokens, dtype)
        return loglog(np.asarray(tokens, dtype=float), self.attention_tokens, self.attention_flops)

    def decode_attention_bandwidth(self, groups: ArrayLike, bytes_per_group: ArrayLike):
        """Bytes/s a decode attention kernel of ``groups`` sequences x KV heads, each moving
        ``bytes_per_group``, reached in the record's sweep: log-log interpolation along each measured
        group count, then between group counts; held flat beyond the sweep's ends."""
        if not self.decode_groups:
            raise ValueError(f"{self.label} has no decode attention sweep (measure one with roofline.measured.probe)")
        g, per = np.broadcast_arrays(np.log(np.maximum(np.asarray(groups, dtype=float), 1e-300)),
                                     np.asarray(bytes_per_group, dtype=float))
        shape, g, per = g.shape, g.ravel(), per.ravel()
        curves = np.log([loglog(per, xs, ys) for xs, ys in self.decode_curves])  # (group counts, points)
        axis = np.log(np.asarray(self.decode_groups, dtype=float))
        if len(axis) == 1:
            return np.exp(curves[0]).reshape(shape)
        g = np.clip(g, axis[0], axis[-1])
        j = np.clip(np.searchsorted(axis, g, side="right") - 1, 0, len(axis) - 2)
        w = (g - axis[j]) / (axis[j + 1] - axis[j])
        point = np.arange(len(g))
        return np.exp((1 - w) * curves[j, point] + w * curves[j + 1, point]).reshape(shape)

    def kernel_seconds(self, op: Op):
        """(compute, memory) seconds of an operation's launches: its bytes at the bandwidth a kernel of
        that size reached, its FLOPs at the rate a matmul of its rows (or flash attention of its length)
        reached, else at the measured peak of its format.

        A matmul below this roof's ridge point (fewer FLOPs per byte than the measured peak over the
        sustained bandwidth) streams its operands: the sweep timed such products at the speed they read
        their weights, so its time at the matmul's rows counts as memory time, and its compute time is
        its FLOPs at the peak. The kernel rule's time is the same either way; the bound is named right.
        """
        per = op.count or 1
        if (op.kind == "attention" and op.groups is not None and self.decode_groups
                and np.all(np.asarray(op.queries) == 1)):  # a decode kernel, timed by the decode sweep
            memory = op.bytes / self.decode_attention_bandwidth(op.groups, op.bytes / per / op.groups)
        else:
            memory = per * self.memory_seconds(op.bytes / per)
        if op.kind == "matmul" and op.m is not None:
            peak = self.peak(op.math)
            swept = op.flops / self.matmul_flops_per_s(op.m, op.math)
            streams = op.flops * self.bandwidth < peak * op.bytes
            if np.ndim(streams) == 0:
                return (op.flops / peak, np.maximum(memory, swept)) if streams else (swept, memory)
            return np.where(streams, op.flops / peak, swept), np.where(streams, np.maximum(memory, swept), memory)
        if op.kind == "attention" and op.queries is not None:
            rate = self.attention_flops_per_s(op.queries, op.math)
        else:
            rate = self.peak(op.math)
        return op.flops / rate, memory

    def with_mode(self, mode: str) -> "CalibratedRoof":
        """The same machine with kernels launched ``'eager'`` (from Python) or from a CUDA ``'graph'``."""
        return replace(self, mode=mode)

    def carried_to(self, hardware: Hardware | str, datasheet: Hardware | str) -> "CalibratedRoof":
        """An assumption, labelled as such: this machine's efficiencies carried over to ``hardware``.

        Bandwidths scale by the ratio of the two datasheets' HBM bandwidths, FLOP/s by their dense peaks
        per format; launch latencies are kept.
        """
        to, frm = get_hardware(hardware), get_hardware(datasheet)
        bw = to.hbm_bandwidth / frm.hbm_bandwidth
        flops = {}
        for d, fl in self.matmul_flops.items():
            flops[d] = tuple(np.asarray(fl) * (to.peak_flops(d) / frm.peak_flops(d)))
        att = tuple(np.asarray(self.attention_flops) * (to.peak_flops("bf16") / frm.peak_flops("bf16")))
        decode = tuple((xs, tuple(np.asarray(ys) * bw)) for xs, ys in self.decode_curves)
        return replace(self, label=f"{to.short} (assumed: {frm.short} efficiencies)", bandwidth=self.bandwidth * bw,
                       read_seconds=tuple(np.asarray(self.read_seconds) / bw), matmul_flops=flops,
                       attention_flops=att, decode_curves=decode,
                       assumption=f"{frm.short}'s measured efficiencies carried over to {to.short}'s datasheet")


def as_roof(roof: Roof | CalibratedRoof | Hardware | str, dtype: str = "bf16") -> Roof | CalibratedRoof:
    """A roof from a roof, a :class:`~roofline.core.hardware.Hardware`, or a catalog name (datasheet figures)."""
    if isinstance(roof, (Roof, CalibratedRoof)):
        return roof
    h = get_hardware(roof)
    cache = h.__dict__.get("_roofline_roofs")  # one Roof per format, made once per Hardware object
    if cache is None:
        cache = {}
        object.__setattr__(h, "_roofline_roofs", cache)
    r = cache.get(dtype)
    if r is None:
        r = cache[dtype] = Roof(h.short or h.name, h.peak_flops(dtype), h.hbm_bandwidth, "datasheet", dtype)
    return r


def ridge_point(hardware: str | Hardware | Roof | CalibratedRoof, dtype: str = "bf16") -> float:
    """FLOP per byte at which ``hardware`` turns from memory-bound to compute-bound (chapter 1)."""
    return as_roof(hardware, dtype).ridge_point


def attainable_flops(intensity: ArrayLike, roof: Roof | Hardware | str, dtype: str = "bf16"):
    """The best FLOP/s any kernel of this intensity can reach: ``min(peak, bandwidth * intensity)``."""
    r = as_roof(roof, dtype)
    intensity = number("intensity", intensity, strict=False)
    out = np.minimum(r.peak_flops, r.bandwidth * np.asarray(intensity))
    return out.item() if np.ndim(out) == 0 else out


def _max(a, b):
    """The larger of two times, scalars or arrays (numpy only where an array is involved)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.maximum(a, b)
    return a if a >= b else b


def _scalar(x):
    if type(x) is float:
        return x
    if isinstance(x, np.ndarray) and x.ndim == 0:
        return x.item()
    if isinstance(x, np.generic):
        return x.item()
    return x


class OpTime(NamedTuple):
    """One operation's times under a roof: compute, memory, launch, and what the rule made of them."""

    op: Op
    compute: float | np.ndarray
    memory: float | np.ndarray
    launch: float
    time: float | np.ndarray

    @property
    def bound(self):
        """'compute', 'memory' or 'launch': whichever of the three is largest."""
        c, m = np.asarray(self.compute), np.asarray(self.memory)
        la = np.full(np.broadcast(c, m).shape, self.launch)
        out = np.where((la > c) & (la > m), "launch", np.where(m > c, "memory", "compute"))
        return str(out) if out.ndim == 0 else out


# How kernels are grouped when a step's time is split by kind (Prediction.time_by_kind)
KIND_GROUPS = MappingProxyType({"matmul": ("matmul",), "attention": ("attention",), "elementwise": ("elementwise", "lookup")})


@dataclass(frozen=True)
class Prediction:
    """What the roofline says of one piece of work (or a sweep of them) under one roof and timing rule."""

    cost: Cost
    roof: Roof | CalibratedRoof
    compute_time: float | np.ndarray  # the sum over kernels of FLOPs / peak
    memory_time: float | np.ndarray  # the sum over kernels of bytes / bandwidth
    time: float | np.ndarray  # the three combined under the timing rule
    timing: str = "step"
    _ops: object = ()  # the OpTimes, or a function that computes them when first asked for
    launch_time: float | np.ndarray = 0.0  # kernels times the launch latency

    @property
    def ops(self) -> tuple:
        """One :class:`OpTime` per operation (computed on first use under the step rule)."""
        if callable(self._ops):
            object.__setattr__(self, "_ops", self._ops())
        return self._ops

    @property
    def overlap(self) -> str:
        """The timing rule under chapter 1's first names: 'perfect' (step) or 'none' (serial)."""
        return {"step": "perfect", "serial": "none"}.get(self.timing, self.timing)

    @property
    def bound(self):
        """'memory' where moving bytes takes longer than the math, else 'compute'."""
        out = np.where(np.asarray(self.memory_time) > np.asarray(self.compute_time), "memory", "compute")
        return str(out) if out.ndim == 0 else out

    @property
    def utilization(self):
        """Fraction of peak FLOP/s the work achieves at the predicted time."""
        return _scalar(np.divide(self.compute_time, self.time))

    @property
    def achieved_flops(self):
        """FLOP/s at the predicted time (equals the attainable FLOP/s under the step rule)."""
        return _scalar(np.divide(self.cost.flops, self.time))

    @property
    def intensity(self):
        return self.cost.intensity

    @property
    def shortfall(self):
        """How many times below the ridge point the work sits (below 1 means past the ridge)."""
        return _scalar(np.divide(self.roof.ridge_point, self.cost.intensity))

    def time_by_kind(self) -> dict[str, float]:
        """Seconds of the kernels by kind: 'matmul', 'attention' and 'elementwise' (lookups counted with
        the elementwise kernels), each the sum of its kernels' own times under the rule (under the step
        rule those are each kernel's max, which need not add up to the step's time)."""
        out = {}
        for group, kinds in KIND_GROUPS.items():
            out[group] = _scalar(sum((np.asarray(t.time, dtype=float) for t in self.ops if t.op.kind in kinds),
                                     np.zeros_like(np.asarray(self.time, dtype=float))))
        return out

    def op(self, name: str) -> OpTime:
        """The times of the operation called ``name``."""
        for t in self.ops:
            if t.op.name == name:
                return t
        raise unknown_name("operation", name, [t.op.name for t in self.ops])


def _work(cost, dtype):
    """(ops, total cost, the work's math format or None) of a Cost or a Breakdown."""
    if isinstance(cost, Breakdown):
        fmt = cost.formats.math if cost.formats is not None else None
        if cost.ops:
            return cost.ops, cost.total, fmt
        total = cost.total
    elif isinstance(cost, Cost):
        total, fmt = cost, None
    else:
        raise TypeError(f"cost must be a Cost or a Breakdown, got {type(cost).__name__}")
    op = Op.build("work", "matmul", math=fmt or dtype or "bf16", flops={"work": total.flops}, reads={"work": total.bytes})
    return (op,), total, fmt


def _peak_of(roof, hw: Hardware | None, math: str):
    if isinstance(roof, Roof):
        if math != roof.dtype:
            raise ValueError(f"the work computes in {math} but the roof {roof.label!r} is a {roof.dtype} roof; "
                             f"pass a {math} roof (or the hardware, and the work's own format is used)")
        return roof.peak_flops
    if isinstance(roof, CalibratedRoof):
        return roof.peak(math)
    return hw.peak_flops(math)


def predict(cost: Cost | Breakdown, roof: Roof | CalibratedRoof | Hardware | str, *, dtype: str | None = None,
            timing: str | None = None, overlap: str | None = None, launch: float | None = None) -> Prediction:
    """Time a piece of work under a roof.

    ``timing`` is one of :data:`TIMINGS` (default ``'step'``, the text's). ``overlap`` is chapter 1's
    older name for the same choice: ``'perfect'`` is ``'step'``, ``'none'`` is ``'serial'``.

    The peak is that of the work's own math format: a decode step built in fp8 is timed against the fp8
    peak. ``dtype`` names the format of a bare :class:`Cost`; given for work that carries its own format,
    it must agree (an error names both). ``roof`` is a catalog name or :class:`Hardware` (the datasheet
    roof of every format the work uses), a :class:`Roof` (one format), or a :class:`CalibratedRoof`.
    ``launch`` overrides the seconds per kernel launch (0 for a datasheet roof).
    """
    if overlap is not None:
        if overlap not in _OVERLAP:
            raise ValueError(f"overlap must be 'perfect' or 'none', got {overlap!r}")
        if timing is not None and timing != _OVERLAP[overlap]:
            raise ValueError(f"overlap={overlap!r} means timing={_OVERLAP[overlap]!r}, but timing={timing!r} was given")
        timing = _OVERLAP[overlap]
    timing = timing or "step"
    if timing not in TIMINGS:
        raise ValueError(f"timing must be one of {', '.join(map(repr, TIMINGS))}, got {timing!r}")
    ops, total, fmt = _work(cost, dtype)
    if dtype is not None and fmt is not None and dtype != fmt:
        raise ValueError(f"dtype={dtype!r} conflicts with the work, which computes in {fmt!r}; "
                         "build the work in the format you mean (e.g. decode_step(..., dtype=...)) or leave dtype out")
    hw = None
    if not isinstance(roof, (Roof, CalibratedRoof)):
        hw = get_hardware(roof)
    main = fmt or dtype or (roof.dtype if isinstance(roof, (Roof, CalibratedRoof)) else "bf16")
    shown = roof if isinstance(roof, (Roof, CalibratedRoof)) else as_roof(hw, main)
    lat = float(number("launch", launch, strict=False)) if launch is not None else float(roof.launch_s if hw is None else 0.0)
    cal = isinstance(roof, CalibratedRoof)
    bw = shown.bandwidth

    peaks: dict[str, float] = {}
    for op in ops:
        if op.math not in peaks:
            peaks[op.math] = _peak_of(roof, hw, op.math)

    def op_times(rule: str) -> list:
        """(op, compute, memory, launches, time) for every operation under ``rule``."""
        out = []
        for op in ops:
            if cal:
                compute, memory = roof.kernel_seconds(op)
            else:
                compute = op.flops / peaks[op.math]
                memory = op.bytes / bw
            if rule == "step":  # each kernel's own max, shown beside a step time that is not their sum
                out.append((op, compute, memory, 0.0, _max(compute, memory)))
                continue
            launches = lat * op.count
            t = _max(_max(compute, memory), launches) if rule == "kernel" else compute + memory + launches
            out.append((op, compute, memory, launches, t))
        return out

    def as_op_times(rows) -> tuple:
        return tuple(OpTime(op, _scalar(c), _scalar(m), la, _scalar(t)) for op, c, m, la, t in rows)

    if timing == "step":
        if cal:
            rows = op_times("step")
            comp, mem = sum(r[1] for r in rows), sum(r[2] for r in rows)
        else:  # from the totals, so that a step's time is exactly FLOPs / peak or bytes / bandwidth
            by_math: dict[str, object] = {}
            for op in ops:
                by_math[op.math] = by_math.get(op.math, 0.0) + op.flops
            comp = sum(fl / peaks[d] for d, fl in by_math.items())
            mem = total.bytes / bw
        tot, lau = _max(comp, mem), 0.0
        times = lambda: as_op_times(op_times("step"))  # noqa: E731 (per-kernel times only when asked for)
    else:
        rows = op_times(timing)
        comp, mem, lau, tot = (sum(r[i] for r in rows) for i in (1, 2, 3, 4))
        times = as_op_times(rows)
    return Prediction(total, shown, _scalar(comp), _scalar(mem), _scalar(tot), timing, times, _scalar(lau))


def tokens_per_s(prediction: Prediction, tokens=1):
    """Tokens per second of a predicted step that produces ``tokens`` tokens (chapter 1: a decode step
    at batch 1 gives one): ``tokens / time``."""
    if not isinstance(prediction, Prediction):
        raise TypeError(f"prediction must be a Prediction from predict(), got {type(prediction).__name__}")
    return number("tokens", tokens) / prediction.time


__all__ += ["tokens_per_s"]


def time_per_token(prediction: Prediction, tokens=1):
    """Seconds per token of a predicted step over ``tokens`` tokens (chapter 1: a prefill of 2,048 tokens
    against a decode step): ``time / tokens``."""
    if not isinstance(prediction, Prediction):
        raise TypeError(f"prediction must be a Prediction from predict(), got {type(prediction).__name__}")
    return prediction.time / number("tokens", tokens)


__all__ += ["time_per_token"]
