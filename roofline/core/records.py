"""Records of measurements, read and validated the way :mod:`~roofline.core.hardware` reads the catalog
(appendices B and C): what the calibrated roofs are built from.

Two kinds, each a data file shipped in ``roofline/data/``:

- **Our own measurement of a GPU** (``data/measured/``, with a README that explains every field; its
  provenance: one NVIDIA H200 SXM, PyTorch 2.11, 2026-11-29). :func:`load_measurement` reads the main file
  (or one that :mod:`roofline.measured.probe` wrote on the reader's machine: same format),
  :func:`load_layers` the layer-level one. Both validate as they read: a missing key, a wrong type or a
  time that is not a positive number fails with a :class:`MeasurementError` naming the file, the record
  and the key.
- **Published microbenchmarks** (``data/microbenchmarks.json``, the project's transcription with each
  record's source, commit and quote, and ``data/microbenchmarks-added.json``, the records added later in
  the same schema): :func:`microbenchmarks`, :func:`record`, :func:`record_value` (in SI units) and
  :func:`record_ids` (the records that match some fields).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from functools import lru_cache
from typing import Mapping

from roofline.core.checks import number, unknown_name
from roofline.core.cost import Cost

__all__ = [
    "MeasurementError",
    "Env",
    "Bandwidth",
    "Gemm",
    "ReadSize",
    "LaunchOverhead",
    "DecodeOp",
    "DecodeRun",
    "PrefillRun",
    "DecodeAttentionRun",
    "decode_attention_bytes",
    "Measurement",
    "VerifyRun",
    "AttentionRun",
    "TrainRun",
    "LayersMeasurement",
    "measurement_names",
    "load_measurement",
    "load_layers",
    "parse_measurement",
    "parse_layers",
    "microbenchmarks",
    "record",
    "record_value",
    "record_ids",
    "source_records",
    "apply_corrections",
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
    def bytes_per_s(self) -> float:
        """The least bytes the product moves over its median time: the bandwidth it streamed at."""
        return self.min_bytes / self.seconds

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
class DecodeAttentionRun:
    """One attention kernel of a decode step, alone: ``batch`` sequences of one query each, every query
    head over ``context`` cached tokens of its KV head. ``bytes`` is what it must move at least: the keys
    and values read, the queries read and the output written."""

    batch: int
    context: int
    heads: int
    kv_heads: int
    head_dim: int
    bytes: float
    seconds: float

    @property
    def groups(self) -> int:
        """Sequences x KV heads: the independent pieces of work a kernel can hand to the GPU's processors."""
        return self.batch * self.kv_heads

    @property
    def bytes_per_s(self) -> float:
        return self.bytes / self.seconds


def decode_attention_bytes(batch: int, context: int, heads: int, kv_heads: int, head_dim: int, itemsize: int = 2) -> int:
    """The least HBM bytes of a decode attention kernel: K and V of every cached token read, one query per
    head read and one output per head written."""
    for name, v in (("batch", batch), ("context", context), ("heads", heads), ("kv_heads", kv_heads),
                    ("head_dim", head_dim), ("itemsize", itemsize)):
        number(name, v, integer=True)
    return itemsize * head_dim * batch * (2 * kv_heads * context + 2 * heads)


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
    decode_attention: tuple[DecodeAttentionRun, ...] = ()

    def gemms(self, dtype: str = "bf16") -> tuple[Gemm, ...]:
        """Every matmul of ``dtype`` in the file, graph-timed and per call."""
        return tuple(g for g in (*self.gemm_graph, *self.gemm_per_call, *self.gemm_fp8_per_call) if g.dtype == dtype)

    def fastest_gemm(self, m: int) -> Gemm:
        """The graph-timed product of ``m`` rows that reached the most FLOP/s: the one that sets a
        calibrated roof's matmul rate at ``m``."""
        found = [g for g in self.gemm_graph if g.m == m]
        if not found:
            raise ValueError(f"m must be a row count of the graph-timed sweep ({', '.join(map(str, sorted({g.m for g in self.gemm_graph})))}), got {m!r}")
        return max(found, key=lambda g: g.flops_per_s)


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
    attention = _records(where, raw, "decode_attention", _decode_attention)
    return Measurement(name, str(raw.get("about", "")), env, MappingProxyType(bandwidth), gemm_graph, gemm_per_call,
                       fp8, sizes, launch, model, ops, decode, prefill, MappingProxyType(dict(raw.get("notes", {}))),
                       attention)


def _decode_attention(where: str, r) -> DecodeAttentionRun:
    shape = [_get(where, r, x, "count") for x in ("batch", "context", "heads", "kv_heads", "head_dim")]
    if shape[2] % shape[3]:
        raise MeasurementError(f"{where} field 'heads': {shape[2]} query heads do not share {shape[3]} KV heads evenly")
    nbytes, least = _get(where, r, "bytes"), decode_attention_bytes(*shape)
    if nbytes != least:
        raise MeasurementError(f"{where} field 'bytes': expected 2 x head_dim x batch x (2 x kv_heads x context + "
                               f"2 x heads) = {least} (bf16), got {nbytes:.0f}")
    return DecodeAttentionRun(*shape, nbytes, _get(where, r, "seconds"))


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
# Published microbenchmarks


def apply_corrections(records: Mapping[str, dict], corrections: list) -> dict[str, dict]:
    """``records`` with each correction of ``microbenchmarks-added.json`` applied: a correction names a shared
    record (``id``), the fields it replaces (``fields``: the quote copied from the wrong row, its location) and
    ``why``; the mended record keeps every other field and says, under ``corrected``, what was mended and why.
    A correction of a record that does not exist, of its id, or without a reason is an error."""
    out = dict(records)
    for c in corrections:
        rid, fields, why = c.get("id"), c.get("fields"), c.get("why")
        if rid not in out:
            raise unknown_name("corrected microbenchmark record", rid, out)
        if not isinstance(fields, dict) or not fields or "id" in fields:
            raise ValueError(f"the correction of {rid!r} must replace some fields of the record other than its id, "
                             f"got {fields!r}")
        if not isinstance(why, str) or not why.strip():
            raise ValueError(f"the correction of {rid!r} must say why (a 'why' text)")
        out[rid] = {**out[rid], **fields, "corrected": {"fields": sorted(fields), "why": why}}
    return out


@lru_cache(maxsize=1)
def _microbenchmarks() -> Mapping[str, dict]:
    data = resources.files("roofline.data")
    found = list(json.loads(data.joinpath("microbenchmarks.json").read_text()))
    added = json.loads(data.joinpath("microbenchmarks-added.json").read_text())
    found += added["records"]
    out: dict[str, dict] = {}
    for r in found:
        if r["id"] in out:
            raise ValueError(f"microbenchmark record {r['id']!r} is given twice")
        out[r["id"]] = r
    return MappingProxyType(apply_corrections(out, added.get("corrections", [])))


def microbenchmarks() -> Mapping[str, dict]:
    """Every published microbenchmark record, by id: the shared transcription's (``mb0001`` ...) and those the
    project added later in the same schema (``mbx001`` ..., ``roofline/data/microbenchmarks-added.json``)."""
    return _microbenchmarks()


def record(record_id: str) -> dict:
    """One microbenchmark record: its value, unit, settings, source and quote."""
    recs = _microbenchmarks()
    if record_id not in recs:
        raise unknown_name("microbenchmark record", record_id, recs)
    return recs[record_id]


_UNITS = {"GB/s": 1e9, "TB/s": 1e12, "TFLOP/s": 1e12, "us": 1e-6, "us per kernel": 1e-6, "ms": 1e-3}


def record_value(record_id: str) -> float:
    """A microbenchmark record's value in SI units (bytes/s, FLOP/s or seconds)."""
    r = record(record_id)
    return float(r["value"]) * _UNITS[r["unit"]]


def record_ids(**match) -> list[str]:
    """The ids of the records whose fields equal the values given (a callable value is a test of the field):
    ``record_ids(category="gemm", gpu=lambda g: g.startswith("H800"))``."""
    return [rid for rid, r in _microbenchmarks().items()
            if all((r.get(k) == v) if not callable(v) else v(r.get(k)) for k, v in match.items())]


def source_records(source: str) -> list[str]:
    """A roof's source entry as record ids: 'mb0025-mb0048' is the range, 'mb0058' one record, anything else
    (a measurement of our own, named in words) none."""
    recs = _microbenchmarks()
    a, _, b = source.partition("-")
    if a in recs and b in recs:
        return [i for i in recs if a <= i <= b]
    return [source] if source in recs else []
