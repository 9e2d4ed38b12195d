"""Measurements on real hardware, and the roofline held against them (appendix "The roofline meets a
real GPU").

The files live in ``roofline/data/measured/`` with a README that explains every field (its provenance:
one NVIDIA H200 SXM, PyTorch 2.11, 2026-11-29). :func:`load_measurement` reads the main file (or one
that :mod:`roofline.measure` wrote on the reader's machine: same format), :func:`load_layers` the
layer-level one. Both validate as they read: a missing key, a wrong type or a time that is not a
positive number fails with a :class:`MeasurementError` naming the file, the record and the key.

:func:`measured_roof` turns a record into a :class:`~roofline.hardware.Roof` of kind 'measured'.
:class:`Comparison` pairs a roofline prediction with the time measured for the same work; since the
roofline is a lower bound on time, ``predicted <= measured`` should hold, and
:func:`bound_violations` lists the points where it does not.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Iterable, Mapping, Sequence

import numpy as np

from ._check import number, unknown_name
from .cost import Cost
from .hardware import Roof
from .inference import decode_step, prefill
from .model import Model
from .performance import as_roof, predict

__all__ = [
    "MeasurementError", "Env", "Bandwidth", "Gemm", "ReadSize", "LaunchOverhead", "DecodeOp", "DecodeRun",
    "PrefillRun", "Measurement", "VerifyRun", "AttentionRun", "TrainRun", "LayersMeasurement",
    "measurement_names", "load_measurement", "load_layers", "parse_measurement", "measured_roof",
    "model_of", "Comparison", "compare_gemms", "compare_decode", "compare_prefill", "compare_decode_ops", "compare_reads", "bound_violations",
    "comparison_table", "ratios", "parse_layers", "sweep", "knee", "compute_bound_from", "ceilings_table",
    "READ_ROOF_EXCEPTIONS",
]


class MeasurementError(ValueError):
    """A malformed measurement file; the message names the file, the record and the key."""


# ---------------------------------------------------------------------------------------------
# Records


@dataclass(frozen=True)
class Env:
    """The machine and software a measurement ran on."""

    device: str  # 'NVIDIA H200', or a CPU's name
    date_utc: str
    python: str
    platform: str
    details: Mapping[str, object] = field(default_factory=dict, repr=False)  # everything else in `env`


@dataclass(frozen=True)
class Bandwidth:
    """One memory benchmark: ``bytes`` moved (read + written) in a median of ``seconds``."""

    name: str  # 'copy', 'read' or 'write'
    bytes: float
    seconds: float
    best_bytes_per_s: float

    @property
    def bytes_per_s(self) -> float:
        return self.bytes / self.seconds


@dataclass(frozen=True)
class Gemm:
    """One ``(m x k) @ (k x n)`` product: FLOPs, minimum HBM bytes, median seconds."""

    m: int
    n: int
    k: int
    flops: float
    min_bytes: float
    seconds: float
    best_flops_per_s: float
    dtype: str = "bf16"

    @property
    def flops_per_s(self) -> float:
        return self.flops / self.seconds

    @property
    def intensity(self) -> float:
        return self.flops / self.min_bytes

    @property
    def cost(self) -> Cost:
        """The product's cost as measured: its FLOPs and the minimum bytes the file records (an fp8
        product writes a bf16 output, which ``rl.matmul(..., 'fp8')`` would count at one byte)."""
        return Cost(self.flops, self.min_bytes)


@dataclass(frozen=True)
class ReadSize:
    """A read of ``bytes`` in ``seconds``: small buffers show latency, not bandwidth."""

    bytes: float
    seconds: float

    @property
    def bytes_per_s(self) -> float:
        return self.bytes / self.seconds


@dataclass(frozen=True)
class LaunchOverhead:
    """Seconds per tiny kernel launched from Python (eager) and replayed from a CUDA graph."""

    kernels: int
    eager_s_per_kernel: float
    graph_s_per_kernel: float


@dataclass(frozen=True)
class DecodeOp:
    """One matmul of a decode layer ('qkv', 'o', 'gate_up', 'down') at a batch size."""

    op: str
    batch: int
    k: int
    n: int
    flops: float
    min_bytes: float
    seconds: float

    @property
    def cost(self) -> Cost:
        return Cost(self.flops, self.min_bytes)


@dataclass(frozen=True)
class DecodeRun:
    """A whole decode step: ``batch`` sequences, each with ``context`` cached tokens."""

    batch: int
    context: int
    weight_bytes: float
    kv_bytes: float
    seconds_eager: float
    seconds_graph: float
    best_seconds_graph: float

    @property
    def tokens_per_s(self) -> float:
        """Tokens per second of the CUDA-graph step (one token per sequence)."""
        return self.batch / self.seconds_graph


@dataclass(frozen=True)
class PrefillRun:
    """A prefill of ``tokens`` tokens at batch 1."""

    tokens: int
    seconds: float
    best_seconds: float


@dataclass(frozen=True)
class Measurement:
    """One measurement file: the machine, its bandwidths and matmuls, and (on a GPU) model steps."""

    name: str
    about: str
    env: Env
    bandwidth: Mapping[str, Bandwidth]
    gemm_graph: tuple[Gemm, ...] = ()
    gemm_per_call: tuple[Gemm, ...] = ()
    gemm_fp8_per_call: tuple[Gemm, ...] = ()
    read_bandwidth_vs_size: tuple[ReadSize, ...] = ()
    launch_overhead: LaunchOverhead | None = None
    model: Mapping[str, int] | None = None
    decode_ops: tuple[DecodeOp, ...] = ()
    decode: tuple[DecodeRun, ...] = ()
    prefill: tuple[PrefillRun, ...] = ()
    notes: Mapping[str, str] = field(default_factory=dict, repr=False)

    def gemms(self, dtype: str = "bf16") -> tuple[Gemm, ...]:
        """Every matmul of ``dtype`` in the file, graph-timed and per call."""
        return tuple(g for g in (*self.gemm_graph, *self.gemm_per_call, *self.gemm_fp8_per_call) if g.dtype == dtype)


@dataclass(frozen=True)
class VerifyRun:
    query_tokens: int
    context: int
    seconds: float
    best_seconds: float


@dataclass(frozen=True)
class AttentionRun:
    tokens: int
    heads: int
    head_dim: int
    flash_seconds: float
    flash_peak_extra_bytes: float
    explicit_seconds: float | None  # None where the explicit form ran out of memory
    explicit_peak_extra_bytes: float | None
    explicit_error: str = ""


@dataclass(frozen=True)
class TrainRun:
    batch: int
    tokens: int
    checkpoint: bool
    layers: int
    layer_params: int
    seconds: float
    best_seconds: float
    model_flops: float
    peak_extra_bytes: float

    @property
    def model_flops_per_s(self) -> float:
        return self.model_flops / self.seconds


@dataclass(frozen=True)
class LayersMeasurement:
    name: str
    about: str
    env: Env
    verify: tuple[VerifyRun, ...]
    attention: tuple[AttentionRun, ...]
    train: tuple[TrainRun, ...]
    notes: Mapping[str, str] = field(default_factory=dict, repr=False)


# ---------------------------------------------------------------------------------------------
# Validation


def _get(where: str, raw, key: str, kind: str = "positive"):
    """``raw[key]`` checked as ``kind``: 'positive' (a finite number > 0), 'count' (a whole number > 0),
    'text', 'bool', 'table' (a JSON object) or 'list'."""
    if not isinstance(raw, dict):
        raise MeasurementError(f"{where}: expected a JSON object, got {type(raw).__name__} {raw!r:.60}")
    if key not in raw:
        raise MeasurementError(f"{where}: missing '{key}'")
    value = raw[key]
    if kind in ("positive", "count"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise MeasurementError(f"{where} field '{key}': must be a number, got {value!r}")
        if not math.isfinite(value) or value <= 0:
            what = "time" if "second" in key else "value"
            raise MeasurementError(f"{where} field '{key}': a {what} must be a finite number > 0, got {value!r}")
        if kind == "count":
            if value != int(value):
                raise MeasurementError(f"{where} field '{key}': must be a whole number, got {value!r}")
            return int(value)
        return float(value)
    expected = {"text": str, "bool": bool, "table": dict, "list": list}[kind]
    if not isinstance(value, expected):
        raise MeasurementError(f"{where} field '{key}': expected {kind}, got {type(value).__name__} {value!r:.60}")
    return value


def _records(where: str, raw: dict, key: str, build, required: bool = False) -> tuple:
    if key not in raw:
        if required:
            raise MeasurementError(f"{where}: missing '{key}'")
        return ()
    items = _get(where, raw, key, "list")
    if required and not items:
        raise MeasurementError(f"{where} field '{key}': is empty")
    return tuple(build(f"{where} {key}[{i}]", r) for i, r in enumerate(items))


def _env(where: str, raw) -> Env:
    where = f"{where} env"
    device = raw.get("gpu") or raw.get("cpu") if isinstance(raw, dict) else None
    if not device:
        raise MeasurementError(f"{where}: missing 'gpu' or 'cpu' (the device measured)")
    return Env(str(device), _get(where, raw, "date_utc", "text"), _get(where, raw, "python", "text"),
               _get(where, raw, "platform", "text"), MappingProxyType(dict(raw)))


def _gemm(dtype: str):
    def build(where, r) -> Gemm:
        m, n, k = (_get(where, r, x, "count") for x in ("m", "n", "k"))
        flops = _get(where, r, "flops")
        if flops != 2 * m * n * k:
            raise MeasurementError(f"{where} field 'flops': expected 2mnk = {2 * m * n * k}, got {flops:.0f}")
        seconds = _get(where, r, "seconds")
        best = _get(where, r, "best_flops_per_s") if "best_flops_per_s" in r else flops / seconds
        if best < flops / seconds * (1 - 1e-9):
            raise MeasurementError(f"{where} field 'best_flops_per_s': {best:.4g} is below the median's {flops / seconds:.4g}")
        return Gemm(m, n, k, flops, _get(where, r, "min_bytes"), seconds, best, r.get("dtype", dtype))
    return build


def _bandwidth(where: str, raw) -> dict[str, Bandwidth]:
    out = {}
    for name, r in raw.items():
        w = f"{where} bandwidth.{name}"
        b, s = _get(w, r, "bytes"), _get(w, r, "seconds")
        best = _get(w, r, "best_bytes_per_s") if "best_bytes_per_s" in r else b / s
        out[name] = Bandwidth(name, b, s, best)
    if not out:
        raise MeasurementError(f"{where} field 'bandwidth': is empty")
    return out


def parse_measurement(raw: dict, name: str = "measurement") -> Measurement:
    """Validate the parsed JSON of a measurement file and return its typed records."""
    where = name
    if not isinstance(raw, dict):
        raise MeasurementError(f"{where}: expected a JSON object at the top, got {type(raw).__name__}")
    env = _env(where, _get(where, raw, "env", "table"))
    bandwidth = _bandwidth(where, _get(where, raw, "bandwidth", "table"))
    gemm_graph = _records(where, raw, "gemm_graph", _gemm("bf16"))
    gemm_per_call = _records(where, raw, "gemm_per_call", _gemm("bf16"))
    fp8 = _records(where, raw, "gemm_fp8_per_call", _gemm("fp8"))
    if not (gemm_graph or gemm_per_call):
        raise MeasurementError(f"{where}: missing 'gemm_graph' or 'gemm_per_call' (no matmul throughput to build a roof from)")
    sizes = _records(where, raw, "read_bandwidth_vs_size", lambda w, r: ReadSize(_get(w, r, "bytes"), _get(w, r, "seconds")))
    launch = None
    if "launch_overhead" in raw:
        w, r = f"{where} launch_overhead", _get(where, raw, "launch_overhead", "table")
        launch = LaunchOverhead(_get(w, r, "kernels", "count"), _get(w, r, "eager_s_per_kernel"), _get(w, r, "graph_s_per_kernel"))
    model = None
    if "model" in raw:
        r = _get(where, raw, "model", "table")
        model = MappingProxyType({k: _get(f"{where} model", r, k, "count")
                                  for k in ("vocab", "d", "ff", "layers", "heads", "kv_heads", "head_dim", "params")})
    ops = _records(where, raw, "decode_ops", lambda w, r: DecodeOp(
        _get(w, r, "op", "text"), _get(w, r, "batch", "count"), _get(w, r, "k", "count"), _get(w, r, "n", "count"),
        _get(w, r, "flops"), _get(w, r, "min_bytes"), _get(w, r, "seconds")))
    decode = _records(where, raw, "decode", lambda w, r: DecodeRun(
        _get(w, r, "batch", "count"), _get(w, r, "context", "count"), _get(w, r, "weight_bytes"), _get(w, r, "kv_bytes"),
        _get(w, r, "seconds_eager"), _get(w, r, "seconds_graph"), _get(w, r, "best_seconds_graph")))
    prefill = _records(where, raw, "prefill", lambda w, r: PrefillRun(
        _get(w, r, "tokens", "count"), _get(w, r, "seconds"), _get(w, r, "best_seconds")))
    if (decode or prefill) and model is None:
        raise MeasurementError(f"{where}: has decode or prefill runs but no 'model' (their shape)")
    return Measurement(name, str(raw.get("about", "")), env, MappingProxyType(bandwidth), gemm_graph, gemm_per_call,
                       fp8, sizes, launch, model, ops, decode, prefill, MappingProxyType(dict(raw.get("notes", {}))))


def parse_layers(raw: dict, name: str = "layers") -> LayersMeasurement:
    """Validate the parsed JSON of a layer-level measurement file (verify, attention, train)."""
    where = name
    if not isinstance(raw, dict):
        raise MeasurementError(f"{where}: expected a JSON object at the top, got {type(raw).__name__}")
    env = _env(where, _get(where, raw, "env", "table"))
    verify = _records(where, raw, "verify", lambda w, r: VerifyRun(
        _get(w, r, "query_tokens", "count"), _get(w, r, "context", "count"), _get(w, r, "seconds"), _get(w, r, "best_seconds")),
        required=True)

    def attention(w, r):
        failed = "explicit_error" in r
        return AttentionRun(_get(w, r, "tokens", "count"), _get(w, r, "heads", "count"), _get(w, r, "head_dim", "count"),
                            _get(w, r, "flash_seconds"), _get(w, r, "flash_peak_extra_bytes"),
                            None if failed else _get(w, r, "explicit_seconds"),
                            None if failed else _get(w, r, "explicit_peak_extra_bytes"),
                            _get(w, r, "explicit_error", "text") if failed else "")

    attn = _records(where, raw, "attention", attention, required=True)
    train = _records(where, raw, "train", lambda w, r: TrainRun(
        _get(w, r, "batch", "count"), _get(w, r, "tokens", "count"), _get(w, r, "checkpoint", "bool"),
        _get(w, r, "layers", "count"), _get(w, r, "layer_params", "count"), _get(w, r, "seconds"),
        _get(w, r, "best_seconds"), _get(w, r, "model_flops"), _get(w, r, "peak_extra_bytes")), required=True)
    return LayersMeasurement(name, str(raw.get("about", "")), env, verify, attn, train,
                             MappingProxyType(dict(raw.get("notes", {}))))


def _read(name_or_path: str | Path) -> tuple[dict, str]:
    if not isinstance(name_or_path, (str, Path)):
        raise TypeError(f"measurement must be a name such as 'h200-2026-11-29' or a path to a .json file, got {name_or_path!r}")
    key = str(name_or_path).strip()
    if key in measurement_names():
        text = resources.files("roofline").joinpath(f"data/measured/{key}.json").read_text(encoding="utf-8")
        label = f"{key}.json"
    else:
        path = Path(name_or_path)
        if not path.is_file():
            raise unknown_name("measurement", key, measurement_names())
        text, label = path.read_text(encoding="utf-8"), path.name
    try:
        return json.loads(text), label
    except json.JSONDecodeError as exc:
        raise MeasurementError(f"{label}: not valid JSON: {exc}") from None


def measurement_names() -> list[str]:
    """The measurement files shipped with the package, e.g. ['h200-2026-11-29', 'h200-2026-11-29-layers']."""
    folder = resources.files("roofline").joinpath("data/measured")
    return sorted(p.name.removesuffix(".json") for p in folder.iterdir() if p.name.endswith(".json"))


def load_measurement(name_or_path: str | Path = "h200-2026-11-29") -> Measurement:
    """A shipped measurement by name, or any file in the same format by path (validated)."""
    raw, label = _read(name_or_path)
    return parse_measurement(raw, label)


def load_layers(name_or_path: str | Path = "h200-2026-11-29-layers") -> LayersMeasurement:
    """The layer-level measurements (verify, attention, train) by name or path (validated)."""
    raw, label = _read(name_or_path)
    return parse_layers(raw, label)


# ---------------------------------------------------------------------------------------------
# Roofs and comparisons

_BANDWIDTHS = ("best", "copy", "read", "write")


def measured_roof(record: Measurement, dtype: str | None = None, *, bandwidth: str = "best", label: str | None = None) -> Roof:
    """The roof a machine was seen to reach: the fastest matmul of ``dtype`` (best run; bf16 where there
    is one, else the record's own format) and the best
    measured bandwidth (``'best'``: the fastest of copy and read; or one benchmark by name).

    A ceiling built from a slower benchmark is not a ceiling: the appendix shows points through it.
    """
    if not isinstance(record, Measurement):
        raise TypeError(f"record must be a Measurement (from load_measurement), got {type(record).__name__}")
    if dtype is None:  # bf16 where measured (a GPU), else the first matmul's format (fp32 on a CPU)
        every = (*record.gemm_graph, *record.gemm_per_call)
        dtype = "bf16" if any(g.dtype == "bf16" for g in every) else every[0].dtype
    gemms = record.gemms(dtype)
    if not gemms:
        raise ValueError(f"record {record.name!r} has no {dtype} matmuls to build a roof from")
    if bandwidth not in _BANDWIDTHS:
        raise ValueError(f"bandwidth must be one of {', '.join(map(repr, _BANDWIDTHS))}, got {bandwidth!r}")
    if bandwidth == "best":
        found = [record.bandwidth[k].best_bytes_per_s for k in ("copy", "read") if k in record.bandwidth]
        if not found:
            raise ValueError(f"record {record.name!r} has neither a 'copy' nor a 'read' bandwidth")
        bw = max(found)
    elif bandwidth in record.bandwidth:
        bw = record.bandwidth[bandwidth].best_bytes_per_s
    else:
        raise ValueError(f"record {record.name!r} has no {bandwidth!r} bandwidth; it has {', '.join(record.bandwidth)}")
    peak = max(g.best_flops_per_s for g in gemms)
    return Roof(label or f"{record.env.device} measured", peak, bw, "measured", dtype)


def model_of(record: Measurement, name: str = "measured model") -> Model:
    """The model shape a record's decode and prefill ran, as a :class:`~roofline.model.Model`."""
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


def _compare(label, cost, roof, measured, dtype) -> Comparison:
    p = predict(cost, roof, dtype=dtype)
    return Comparison(label, float(p.time), float(measured), str(p.bound))


def compare_gemms(gemms: Sequence[Gemm], roof, *, prefix: str = "") -> list[Comparison]:
    """Each measured matmul against the roofline's time for its FLOPs and minimum bytes."""
    return [_compare(f"{prefix}m={g.m} n={g.n} k={g.k}", g.cost, as_roof(roof, g.dtype), g.seconds, g.dtype) for g in gemms]


def compare_decode_ops(record: Measurement, roof) -> list[Comparison]:
    """Each measured decode-layer matmul ('qkv', 'o', 'gate_up', 'down' at a batch) under ``roof``."""
    return [_compare(f"{o.op} batch={o.batch}", o.cost, roof, o.seconds, "bf16") for o in record.decode_ops]


def compare_reads(record: Measurement, roof) -> list[Comparison]:
    """Each read of ``read_bandwidth_vs_size`` against the time its bytes take at the roof's bandwidth."""
    return [_compare(f"read {r.bytes / 2**20:g} MiB", Cost(0.0, r.bytes), roof, r.seconds, "bf16")
            for r in record.read_bandwidth_vs_size]


def compare_decode(record: Measurement, roof, *, accounting: str = "refined", graph: bool = True,
                   runs: Sequence[DecodeRun] | None = None) -> list[Comparison]:
    """Each measured decode step (CUDA-graph time, or eager with ``graph=False``) against
    :func:`~roofline.inference.decode_step` under ``roof`` for the record's own model shape.
    ``runs`` picks some of the record's steps (a sweep over batch or context), in their order."""
    model = model_of(record)
    return [_compare(f"decode batch={r.batch} context={r.context}",
                     decode_step(model, r.batch, r.context, accounting=accounting), roof,
                     r.seconds_graph if graph else r.seconds_eager, "bf16")
            for r in (record.decode if runs is None else runs)]


def compare_prefill(record: Measurement, roof, *, accounting: str = "refined") -> list[Comparison]:
    """Each measured prefill against :func:`~roofline.inference.prefill` under ``roof``."""
    model = model_of(record)
    return [_compare(f"prefill tokens={r.tokens}", prefill(model, r.tokens, accounting=accounting), roof, r.seconds, "bf16")
            for r in record.prefill]


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


def comparison_table(columns: Mapping[str, Sequence[Comparison]], *, key: str = "label", title: str = "",
                     key_first: str | None = None):
    """A :class:`~roofline.tables.Table` of measured time and predicted/measured under each roof.

    ``columns`` maps a roof's name to the comparisons under it; all lists cover the same points in
    the same order. ``key_first`` names the roof whose ratio is the key column: it comes right after
    the point's name, the headers shorten to 'ratio, NAME roof' and the measured time goes last, so a
    long table keeps what matters in view and fits a page.
    """
    from .tables import Table
    from .units import fmt

    lists = list(columns.values())
    first = lists[0]
    for name, cs in columns.items():
        if [c.label for c in cs] != [c.label for c in first]:
            raise ValueError(f"comparisons under {name!r} do not cover the same points as the first column")
    if key_first is not None:
        if key_first not in columns:
            raise ValueError(f"key_first must be one of {', '.join(map(repr, columns))}, got {key_first!r}")
        names = [key_first, *(n for n in columns if n != key_first)]
        header = ("point", *(f"ratio, {n} roof" for n in names), "measured time")
        rows = tuple((c.label, *(f"{columns[n][i].ratio:.2f}" + ("" if columns[n][i].obeys else " (!)") for n in names),
                      fmt(c.measured, "s")) for i, c in enumerate(first))
        return Table(header, rows, title)
    header = ("point", "measured", *(f"predicted/measured, {n}" for n in columns))
    rows = tuple((c.label, fmt(c.measured, "s"), *(f"{cs[i].ratio:.2f}" + ("" if cs[i].obeys else " (!)") for cs in lists))
                 for i, c in enumerate(first))
    return Table(header, rows, title)


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


def ceilings_table(datasheet: Roof | Sequence[Roof], measured: Roof | Sequence[Roof], title: str = ""):
    """Datasheet and measured ceilings side by side, with the fraction of each the machine reached."""
    from .tables import Table
    from .units import fmt

    ds = [datasheet] if isinstance(datasheet, Roof) else list(datasheet)
    ms = [measured] if isinstance(measured, Roof) else list(measured)
    if len(ds) != len(ms):
        raise ValueError(f"datasheet and measured need as many roofs each, got {len(ds)} and {len(ms)}")
    rows = [("HBM bandwidth", fmt(ds[0].bandwidth, "B/s"), fmt(ms[0].bandwidth, "B/s"), f"{100 * ms[0].bandwidth / ds[0].bandwidth:.0f}%")]
    for d, m in zip(ds, ms):
        rows.append((f"dense {d.dtype} matmul", fmt(d.peak_flops, "FLOP/s", 4), fmt(m.peak_flops, "FLOP/s", 4),
                     f"{100 * m.peak_flops / d.peak_flops:.0f}%"))
        rows.append((f"ridge point, {d.dtype} (FLOP/B)", f"{d.ridge_point:,.0f}", f"{m.ridge_point:,.0f}",
                     f"{100 * m.ridge_point / d.ridge_point:.0f}%"))
    return Table(("ceiling", "datasheet", "measured", "measured / datasheet"), tuple(rows), title)


# Points of the H200 file that break the bound under a roof built from the `read` benchmark alone
# (measured_roof(record, bandwidth="read")); under the default roof (the best of copy and read) and
# under the datasheet roof every point obeys it. The appendix explains these; its tests hold them.
READ_ROOF_EXCEPTIONS = MappingProxyType({
    "read 1024 MiB": "the sweep replays 16 sums per CUDA graph and streams faster than the one-call 2 GiB read benchmark",
    "read 2048 MiB": "the same: a benchmark is a lower bound on the ceiling, not the ceiling",
    "read 4096 MiB": "the same",
    "gate_up batch=1": "a matrix-vector product over 235 MB of weights reads memory faster than torch.sum does",
})
