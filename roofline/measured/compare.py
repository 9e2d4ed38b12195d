"""The roofline held against our measurement of a GPU: predictions beside the times measured (appendix B).

The roofs come from :mod:`roofline.core.calibration` (:func:`~roofline.core.calibration.measured_roof`, the best
each benchmark reached; :func:`~roofline.core.calibration.calibrated_roof`, what each kind of kernel reaches, from
the microbenchmarks only). :class:`Comparison` pairs a prediction with the time
measured for the same work: a datasheet or measured roof is a floor, so ``predicted <= measured`` should
hold (:func:`bound_violations`); a calibrated roof is an estimate, held within a factor
(:func:`calibration_misses`).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Iterable, Mapping, NamedTuple, Sequence

import numpy as np

from roofline.core.checks import number
from roofline.core.cost import Breakdown, Cost
from roofline.core.formats import Formats
from roofline.workloads.inference import decode_step, prefill
from roofline.core.model import Model
from roofline.core.ops import Op
from roofline.core.roof import CalibratedRoof, as_roof, predict
from roofline.core.calibration import calibrated_roof
from roofline.core.records import DecodeRun, Gemm, LayersMeasurement, Measurement

__all__ = [
    "MEASURED_WORKLOAD",
    "model_of",
    "Comparison",
    "compare_gemms",
    "compare_decode_ops",
    "compare_reads",
    "compare_decode",
    "compare_prefill",
    "CALIBRATION_BAND",
    "CALIBRATION_EXCEPTIONS",
    "calibrated_comparisons",
    "calibration_misses",
    "bound_violations",
    "ratios",
    "sweep",
    "knee",
    "compute_bound_from",
    "READ_ROOF_EXCEPTIONS",
]

# ---------------------------------------------------------------------------------------------
# Roofs and comparisons

# The kernels the record's decode and prefill ran, as its README and notes describe them: Llama 3 8B's
# shape with fused qkv and gate-up matmuls, RMSNorm and RoPE left out, flash (SDPA) attention with GQA,
# the lm_head over every token of a prefill, no sampling.
MEASURED_WORKLOAD = MappingProxyType({"qkv": "fused", "mlp": "fused", "attention": "flash",
                                      "omit": ("attn_norm", "mlp_norm", "final_norm", "rope", "sample")})


def model_of(record: Measurement, name: str = "measured model") -> Model:
    """The model shape a record's decode and prefill ran, as a :class:`~roofline.core.model.Model`."""
    if record.model is None:
        raise ValueError(f"record {record.name!r} has no 'model'")
    r = record.model
    return Model(name=name, hidden_size=r["d"], intermediate_size=r["ff"], num_layers=r["layers"], num_heads=r["heads"],
                 num_kv_heads=r["kv_heads"], head_dim=r["head_dim"], vocab_size=r["vocab"])


@dataclass(frozen=True)
class Comparison:
    """A roofline prediction beside the time measured for the same work."""

    label: str
    predicted: float  # seconds, the roofline's lower bound
    measured: float  # seconds
    bound: str  # 'memory' or 'compute', as the roofline calls it

    @property
    def ratio(self) -> float:
        """predicted / measured: at most 1 if the roofline holds; the fraction of the roof reached."""
        return self.predicted / self.measured

    @property
    def obeys(self) -> bool:
        return self.predicted <= self.measured


def _compare(label, cost, roof, measured, dtype, timing: str = "step") -> Comparison:
    p = predict(cost, roof, dtype=dtype, timing=timing)
    return Comparison(label, float(p.time), float(measured), str(p.bound))


def compare_gemms(gemms: Sequence[Gemm], roof, *, prefix: str = "") -> list[Comparison]:
    """Each measured matmul against the roofline's time for its FLOPs and minimum bytes."""
    return [_compare(f"{prefix}m={g.m} n={g.n} k={g.k}", g.cost, as_roof(roof, g.dtype), g.seconds, g.dtype) for g in gemms]


def compare_decode_ops(record: Measurement, roof, *, timing: str = "step") -> list[Comparison]:
    """Each measured decode-layer matmul ('qkv', 'o', 'gate_up', 'down' at a batch) under ``roof``; under a
    calibrated roof each is timed as the matmul kernel it is (rows = batch)."""
    out = []
    for o in record.decode_ops:
        op = Op.build(o.op, "matmul", flops={"matmul": o.flops}, reads={"matmul": o.min_bytes}, m=o.batch, n=o.n, k=o.k)
        work = Breakdown.from_ops(o.op, (op,), Formats())
        out.append(_compare(f"{o.op} batch={o.batch}", work, roof, o.seconds, "bf16", timing))
    return out


def compare_reads(record: Measurement, roof) -> list[Comparison]:
    """Each read of ``read_bandwidth_vs_size`` against the time its bytes take at the roof's bandwidth."""
    return [_compare(f"read {r.bytes / 2**20:g} MiB", Cost(0.0, r.bytes), roof, r.seconds, "bf16")
            for r in record.read_bandwidth_vs_size]


def _as_measured(accounting: str) -> dict:
    """The kernel options of the measured runs (refined accounting), as keyword arguments."""
    return dict(MEASURED_WORKLOAD) if accounting == "refined" else {}


def compare_decode(record: Measurement, roof, *, accounting: str = "refined", graph: bool = True,
                   runs: Sequence[DecodeRun] | None = None, timing: str = "step") -> list[Comparison]:
    """Each measured decode step (CUDA-graph time, or eager with ``graph=False``) against
    :func:`~roofline.workloads.inference.decode_step` under ``roof`` for the record's own model shape and kernels
    (:data:`MEASURED_WORKLOAD`). ``runs`` picks some of the record's steps (a sweep over batch or
    context), in their order; ``timing`` is the rule (``'kernel'`` for a calibrated estimate)."""
    model = model_of(record)
    return [_compare(f"decode batch={r.batch} context={r.context}",
                     decode_step(model, r.batch, r.context, accounting=accounting, **_as_measured(accounting)), roof,
                     r.seconds_graph if graph else r.seconds_eager, "bf16", timing)
            for r in (record.decode if runs is None else runs)]


def compare_prefill(record: Measurement, roof, *, accounting: str = "refined", timing: str = "step") -> list[Comparison]:
    """Each measured prefill against :func:`~roofline.workloads.inference.prefill` under ``roof`` (kernels as measured)."""
    model = model_of(record)
    return [_compare(f"prefill tokens={r.tokens}", prefill(model, r.tokens, accounting=accounting,
                                                           **_as_measured(accounting)), roof, r.seconds, "bf16", timing)
            for r in record.prefill]


# How far a calibrated estimate may be from a measurement, either way, before it counts as a miss.
CALIBRATION_BAND = 1.25

# Points the calibrated roof misses by more than 1.25x, and why. Like READ_ROOF_EXCEPTIONS, an excuse that
# no longer applies is an error (calibration_misses).
CALIBRATION_EXCEPTIONS = MappingProxyType({
    "decode batch=1 context=131072": (
        "attention over 131k cached tokens for one sequence: a kernel that parallelizes over sequences and heads "
        "has 8 to 32 thread blocks for 132 SMs, and most likely reads the cache well below the bandwidth the read "
        "sweep reached with every SM busy (matching the timing takes attention about 1.9x slower, a factor solved "
        "from this point, not measured); the record predates the probe's decode attention sweep, which measures a "
        "kernel with so few blocks"),
})


def calibrated_comparisons(record: Measurement, layers: "LayersMeasurement | None" = None) -> dict[str, list[Comparison]]:
    """The held-out test of the calibrated roof: every decode step (CUDA-graph times, graph launches) and
    every prefill (launched from Python, eager launches) under the kernel rule, as measured."""
    roof = calibrated_roof(record, layers)
    return {"decode": compare_decode(record, roof, timing="kernel"),
            "prefill": compare_prefill(record, roof.with_mode("eager"), timing="kernel")}


def calibration_misses(comparisons: Iterable[Comparison], factor: float = CALIBRATION_BAND,
                       exceptions: Mapping[str, str] | None = None) -> list[Comparison]:
    """Points predicted more than ``factor`` times too fast or too slow, less the named exceptions; an
    exception that is now within the factor is returned too (a stale excuse)."""
    exceptions = dict(CALIBRATION_EXCEPTIONS if exceptions is None else exceptions)
    out = []
    for c in comparisons:
        off = not (1 / factor <= c.ratio <= factor)
        if off != (c.label in exceptions):
            out.append(c)
    return out


def bound_violations(comparisons: Iterable[Comparison], exceptions: Mapping[str, str] | None = None) -> list[Comparison]:
    """The points where the roofline predicts *more* time than was measured, less the named exceptions.

    ``exceptions`` maps a comparison's label to the reason it may break the bound (L2 reuse, a part
    of the model the measurement left out, ...). An exception that no longer breaks the bound is an
    error too: a stale excuse hides nothing but should not stay.
    """
    exceptions = dict(exceptions or {})
    comparisons = list(comparisons)
    labels = {c.label for c in comparisons}
    unknown = set(exceptions) - labels
    if unknown:
        raise ValueError(f"exceptions name points that are not compared: {', '.join(sorted(unknown))}")
    stale = [c.label for c in comparisons if c.label in exceptions and c.obeys]
    if stale:
        raise ValueError(f"exceptions name points that obey the bound (remove them): {', '.join(stale)}")
    return [c for c in comparisons if not c.obeys and c.label not in exceptions]


def ratios(comparisons: Sequence[Comparison]) -> np.ndarray:
    """predicted / measured for each comparison, as an array."""
    return np.array([c.ratio for c in comparisons])


def sweep(gemms: Sequence[Gemm], n: int, k: int | None = None) -> tuple[Gemm, ...]:
    """The products of one (n, k) shape, in order of m."""
    k = n if k is None else k
    out = sorted((g for g in gemms if g.n == n and g.k == k), key=lambda g: g.m)
    if not out:
        raise ValueError(f"no measured products with n={n} and k={k}")
    return tuple(out)


def knee(gemms: Sequence[Gemm], factor: float = 1.25) -> int:
    """The smallest m whose measured time exceeds ``factor`` times the smallest product's.

    While a product is memory-bound its time is the weights' read time and barely moves with m;
    once the math takes over, time grows with m. Where that starts is the measured turning point.
    """
    factor = number("factor", factor, minimum=1.0)
    gemms = sorted(gemms, key=lambda g: g.m)
    if len({(g.n, g.k) for g in gemms}) != 1:
        raise ValueError("gemms must share one (n, k) shape; pick them with sweep()")
    for g in gemms:
        if g.seconds > factor * gemms[0].seconds:
            return g.m
    raise ValueError(f"no product in the sweep takes {factor:g}x the smallest one's time")


def compute_bound_from(gemms: Sequence[Gemm], roof) -> int | None:
    """The smallest m in a sweep that the roofline calls compute-bound under ``roof``, or None."""
    for g in sorted(gemms, key=lambda g: g.m):
        if predict(g.cost, roof, dtype=g.dtype).bound == "compute":
            return g.m
    return None


# Points of the H200 file that break the bound under a roof built from the `read` benchmark alone
# (measured_roof(record, bandwidth="read")); under the default roof (the best of copy and read) and
# under the datasheet roof every point obeys it. The appendix explains these; its tests hold them.
READ_ROOF_EXCEPTIONS = MappingProxyType({
    "read 1024 MiB": "the sweep replays 16 sums per CUDA graph and streams faster than the one-call 4 GiB read benchmark",
    "read 2048 MiB": "the same: a benchmark is a lower bound on the ceiling, not the ceiling",
    "read 4096 MiB": "the same",
    "gate_up batch=1": "a matrix-vector product over 235 MB of weights reads memory faster than torch.sum does",
})


# ---------------------------------------------------------------------------------------------
# The appendices' quantities that the prose quotes, each one call for the notebook

def predictions(comparisons: Sequence[Comparison]) -> np.ndarray:
    """Appendices A and B: the predicted seconds of each comparison, as an array (beside :func:`ratios`)."""
    return np.array([c.predicted for c in comparisons])


def worst_factor(comparisons: Iterable[Comparison]) -> float:
    """Appendix B: the largest factor by which any comparison is off, too fast or too slow:
    ``max(max(r, 1/r))`` over the ratios (1 for a perfect prediction)."""
    r = [c.ratio for c in comparisons]
    if not r:
        raise ValueError("comparisons must hold at least one Comparison")
    return max(max(x, 1 / x) for x in r)


def idle_sm_share(record: Measurement) -> float:
    """Appendix B: the share of the GPU's SMs a decode attention kernel with one thread block per query
    head leaves idle for one sequence: ``1 - heads / SMs`` (32 heads on the H200's 132 SMs: 76%)."""
    return 1 - model_of(record).num_heads / record.env.details["sm_count"]


def half_bandwidth_read(record: Measurement, bandwidth: float):
    """Appendix B: the smallest read of the size sweep that streams at half of ``bandwidth`` or more
    (:class:`~roofline.core.records.ReadSize`): below it, a read is mostly latency."""
    bandwidth = number("bandwidth", bandwidth)
    try:
        return next(r for r in record.read_bandwidth_vs_size if r.bytes_per_s >= 0.5 * bandwidth)
    except StopIteration:
        raise ValueError(f"no read of the sweep reaches half of bandwidth ({bandwidth:g} B/s)") from None


def time_shares(prediction) -> dict[str, float]:
    """Appendix B: each kind of kernel's share of a prediction's time (``time_by_kind`` over ``time``:
    'matmul', 'attention', 'elementwise')."""
    return {k: v / prediction.time for k, v in prediction.time_by_kind().items()}


def gap_shares(before, after) -> dict[str, float]:
    """Appendix B: where the time ``after`` adds over ``before`` goes, by kind of kernel: each kind's
    difference over the sum of the differences (two predictions of the same step)."""
    a, b = before.time_by_kind(), after.time_by_kind()
    gap = {k: b[k] - a[k] for k in b}
    total = sum(gap.values())
    if total == 0:
        raise ValueError("the two predictions take the same time by kind: there is no gap to share")
    return {k: v / total for k, v in gap.items()}


def launch_total(step, roof: CalibratedRoof, mode: str = "eager") -> float:
    """Appendix B: the launch time of every kernel of ``step`` (its ops' counts) at ``roof``'s per-kernel
    launch cost for ``mode`` ('eager' or 'graph')."""
    if mode not in roof.launch:
        raise ValueError(f"mode must be one of {', '.join(map(repr, roof.launch))}, got {mode!r}")
    return sum(o.count for o in step.ops) * roof.launch[mode]


def layer_kv_read(model: Model, context: int, roof: CalibratedRoof):
    """Appendix B, exercise 4: one layer's KV cache for one sequence of ``context`` tokens (bytes), the
    bandwidth ``roof``'s size curve gives a read of that size, and that as a fraction of its sustained
    bandwidth: ``(bytes, bytes_per_s, fraction)``."""
    context = number("context", context, integer=True)
    nbytes = context * model.kv_bytes_per_token() / model.num_layers
    rate = nbytes / float(roof.memory_seconds(nbytes))
    return nbytes, rate, rate / roof.bandwidth


def implied_slowdown(prediction, measured: float, op: str = "attention") -> float:
    """Appendix B, exercise 6: the factor by which kernel ``op``, bound by memory, would have to read more
    slowly than ``prediction`` (kernel rule) assumes for the step to take ``measured`` seconds:
    ``(measured - (time - time(op))) / memory(op)``. Solved from a timing, it is a fit to that timing, never a
    calibration of the roof that predicts it."""
    measured = number("measured", measured)
    t = prediction.op(op)
    if t.bound != "memory":
        raise ValueError(f"op must be a kernel bound by memory in the prediction, got {op!r} bound by {t.bound}")
    return (measured - (prediction.time - float(t.time))) / float(t.memory)


def achieved(cost, seconds) -> tuple[float, float]:
    """Appendix A: the FLOP/s and bytes/s a measured run of ``cost`` reached in ``seconds``."""
    seconds = number("seconds", seconds)
    return float(cost.flops) / seconds, float(cost.bytes) / seconds


def eager_tokens_per_s(runs: Sequence[DecodeRun]) -> list[float]:
    """Appendix A: tokens per second of each decode run launched eagerly (``batch / seconds_eager``)."""
    return [r.batch / r.seconds_eager for r in runs]


def implied_launches(run: DecodeRun, record: Measurement) -> float:
    """Appendix A, exercise 2: the kernel launches a decode step's eager-over-graph time implies, at the
    record's launch costs: ``(eager - graph) / (eager per kernel - graph per kernel)``."""
    lo = record.launch_overhead
    return (run.seconds_eager - run.seconds_graph) / (lo.eager_s_per_kernel - lo.graph_s_per_kernel)


class CallOverhead(NamedTuple):
    """One bf16 product timed one call at a time against the same product in a CUDA graph (appendix A)."""

    per_call: float  # seconds, one timed call from Python
    graph: float  # seconds, the same product replayed in a graph
    launch: float  # seconds, the record's eager launch of a tiny kernel

    @property
    def extra(self) -> float:
        """What the per-call timing adds to the product: ``per_call - graph``."""
        return self.per_call - self.graph

    @property
    def beyond_launch(self) -> float:
        """The part of :attr:`extra` the launch figure does not cover: PyTorch's and cuBLAS's host path for a
        matmul call (argument checks, the dispatcher, the output's allocation, the kernel's selection) and
        the timer's own events, all inside the timed window: ``extra - launch``."""
        return self.extra - self.launch


def call_overhead(record: Measurement, m: int, n: int, k: int | None = None) -> CallOverhead:
    """Appendix A: the bf16 product ``m x k @ k x n`` (``k = n`` unless given) of a record timed one call at a
    time and in a CUDA graph, beside the record's eager launch cost."""
    k = n if k is None else k
    def find(gemms, how):
        got = [g for g in gemms if (g.m, g.n, g.k) == (m, n, k) and getattr(g, "dtype", "bf16") == "bf16"]
        if not got:
            raise ValueError(f"(m, n, k) must be a bf16 product the record timed {how}, got {(m, n, k)!r}")
        return got[0]
    return CallOverhead(find(record.gemm_per_call, "one call at a time").seconds, find(record.gemm_graph, "in a graph").seconds,
                        record.launch_overhead.eager_s_per_kernel)


__all__ += ["CallOverhead", "call_overhead"]


def weights_over_kv(step: Breakdown) -> float:
    """Appendix A, exercises 3 and 5: the weights' bytes (output head included) over one sequence's KV
    cache bytes in a decode step: the batch at which the KV cache reads as much as the weights."""
    return (step["weights"].bytes + step["lm_head"].bytes) / step["kv_cache"].bytes


def seconds_per_token(runs) -> list[float]:
    """Appendix A: each prefill run's seconds per prompt token."""
    return [r.seconds / r.tokens for r in runs]


__all__ += ["predictions", "worst_factor", "idle_sm_share", "half_bandwidth_read", "time_shares",
            "gap_shares", "launch_total", "layer_kv_read", "implied_slowdown", "achieved", "eager_tokens_per_s",
            "implied_launches", "weights_over_kv", "seconds_per_token"]


def predicted_tokens_per_s(record: Measurement, roof, runs: Sequence[DecodeRun]) -> np.ndarray:
    """Appendix A: the tokens per second ``roof`` predicts for each decode run, ``batch / predicted``
    (:func:`compare_decode` over ``runs``)."""
    return np.divide([r.batch for r in runs], predictions(compare_decode(record, roof, runs=runs)))


__all__ += ["predicted_tokens_per_s"]


def within_band(comparisons: Iterable[Comparison], factor: float = CALIBRATION_BAND) -> list[Comparison]:
    """The points predicted within ``factor`` of their measurement, too fast or too slow (chapter 1 counts
    them against the calibrated roof): ``1 / factor <= predicted / measured <= factor``."""
    factor = number("factor", factor, minimum=1.0)
    return [c for c in comparisons if 1 / factor <= c.ratio <= factor]


__all__ += ["within_band"]
