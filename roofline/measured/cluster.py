"""Calibrated cluster roofs from published microbenchmarks, and the training development set (appendix C).

:func:`cluster_roof` builds a :class:`~roofline.core.cluster_roof.ClusterRoof` for the A100 80GB SXM, the
H100 SXM and the H200 from microbenchmark records only: matmul sweeps (cuBLASLt, torch.mm), flash-attention
benchmarks, STREAM, tiny-kernel launch rates, nccl-tests bus bandwidths and copy bandwidths, each record
named by its id in ``roofline/data/microbenchmarks.json`` (a copy of the project's transcription, with each
record's source, commit and quote). The H200's kernels come from the project's own measurement of one
(``roofline/data/measured``). Never an end-to-end training run, never another tool's efficiency factors.
Where a chip has no record of a quantity the value is carried over from a named chip and said so in
``assumptions``. Every calibrated rate is capped at the datasheet's, so an estimate is never below its floor.

:func:`development_runs` reads the published training runs of ``roofline/data/published`` (Korthikanti et
al. 2022, Table 5; Narayanan et al. 2021, Table 1), for checking the cluster model, never for fitting it.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from functools import lru_cache
from importlib import resources
from types import MappingProxyType
from typing import Mapping, NamedTuple

from roofline.core.checks import count, unknown_name
from roofline.core.cluster_roof import ClusterRoof, Curve, joined_time
from roofline.core.hardware import Hardware, get_hardware
from roofline.core.units import fmt

__all__ = ["microbenchmarks", "record", "cluster_roof", "CALIBRATED_CHIPS", "EXCLUDED", "DevelopmentRun", "development_runs",
           "development_layouts", "DevelopmentCheck", "check_run", "development_checks", "ROOFS", "estimate_step",
           "ClusterPlan", "cluster_plan", "NU_CLOSENESS", "NU_GRID", "NuPoint", "NuFit", "gemm_nu_points", "fit_gemm_nu"]


@lru_cache(maxsize=1)
def _records() -> Mapping[str, dict]:
    data = resources.files("roofline.data")
    found = list(json.loads(data.joinpath("microbenchmarks.json").read_text()))
    found += json.loads(data.joinpath("microbenchmarks-added.json").read_text())["records"]
    out: dict[str, dict] = {}
    for r in found:
        if r["id"] in out:
            raise ValueError(f"microbenchmark record {r['id']!r} is given twice")
        out[r["id"]] = r
    return MappingProxyType(out)


def microbenchmarks() -> Mapping[str, dict]:
    """Every published microbenchmark record, by id: the shared transcription's (``mb0001`` ...) and those the
    project added later in the same schema (``mbx001`` ..., ``roofline/data/microbenchmarks-added.json``)."""
    return _records()


def record(record_id: str) -> dict:
    """One microbenchmark record: its value, unit, settings, source and quote."""
    recs = _records()
    if record_id not in recs:
        raise unknown_name("microbenchmark record", record_id, recs)
    return recs[record_id]


_UNIT = {"GB/s": 1e9, "TB/s": 1e12, "TFLOP/s": 1e12, "us": 1e-6, "us per kernel": 1e-6}


def _value(record_id: str) -> float:
    r = record(record_id)
    return float(r["value"]) * _UNIT[r["unit"]]


def _ids(**match) -> list[str]:
    out = []
    for rid, r in _records().items():
        if all((r.get(k) == v) if not callable(v) else v(r.get(k)) for k, v in match.items()):
            out.append(rid)
    return out


def _best_at_each(points) -> Curve:
    """A curve through ``(x, y)`` points, keeping the best ``y`` where two share an ``x`` (two matmul shapes of
    the same FLOPs)."""
    xs, ys = [], []
    for px, py in sorted(points):
        if xs and px == xs[-1]:
            ys[-1] = max(ys[-1], py)
        else:
            xs.append(px)
            ys.append(py)
    return Curve(tuple(xs), tuple(ys))


def _sweep(ids, x) -> Curve:
    return _best_at_each((x(record(i)), _value(i)) for i in ids)


def _gemm_flops(r) -> float:
    m, n, k = r["shape_mnk"]
    return 2.0 * m * n * k


def _attention(gpu: str, tool: str, cap: float, operation: str = "attention forward+backward") -> dict:
    out = {}
    for hd in (64, 128):
        for causal in (False, True):
            ids = _ids(category="attention_kernel", gpu=gpu, operation=operation, head_dim=hd,
                       causal=causal, tool=lambda t: t.startswith(tool))
            if ids:
                out[(hd, causal)] = _sweep(ids, lambda r: float(r["seq_len"])).capped(cap)
    return out



# Records excluded from a curve, with why (the book states them in appendix C).
EXCLUDED = MappingProxyType({
    "mb0133": "a cuBLASLt matmul of 802,816 x 192 x 768 on the A100, 192 output columns wide, far narrower than any "
              "layer of the development set, which reaches 158 TFLOP/s: a curve by FLOPs alone cannot hold it",
    "mb0125": "the same narrow shape on the H100 (fp8)",
    "mb0138": "a bf16 torch.mm of 10,240 cubed on the H100, slower than 8,192 cubed in the same community "
              "submission (likely throttled clocks): the curve keeps the sweep's shape up to 8,192",
    "mb0158": "DeepGEMM's fp8 matmul of 4,096 x 32,768 x 512 on the H800, 512 deep, which reaches 775 TFLOP/s "
              "where shapes of the same FLOPs reach 1,100 or more: too narrow for a curve by FLOPs",
    "mb0160": "a DeepGEMM row whose quote is another row's (64 x 4,096 x 7,168 at 287 TFLOP/s), so its 1,410 "
              "TFLOP/s for 4,096 x 4,096 x 7,168 has no quote behind it",
    "mb0162": "DeepGEMM's later 128 x 160 tiles (a pull request), for a shape the README's table already gives: "
              "the curve keeps one version of the kernel",
})


# ------------------------------------------------------------------------ joining a matmul's two times

NU_CLOSENESS = 1 / 3
"""A record enters the fit of :math:`\\nu` when its shorter time is at least this share of its longer one:
far from the ridge every exponent gives the larger time, and the record says nothing about the join."""
NU_GRID = (1.0, 8.0, 0.01)
"""The exponents tried (from, to, step): a bounded search, so the fit always ends."""


class NuPoint(NamedTuple):
    """One decode-shaped fp8 matmul: its FLOPs at the H100 fp8 sweep's rate for that size (``compute_s``), its
    bytes at the STREAM rate (``memory_s``, fp8 operands and a 16-bit output) and the time it took."""

    record: str
    rows: int
    n: int
    k: int
    compute_s: float
    memory_s: float
    measured_s: float

    @property
    def closeness(self) -> float:
        """The shorter of the two priced times over the longer: 1 at the ridge."""
        return min(self.compute_s, self.memory_s) / max(self.compute_s, self.memory_s)

    def priced(self, nu: float | None) -> float:
        """The time the roof gives it with the exponent ``nu`` (None: the larger of the two)."""
        if nu is None:
            return max(self.compute_s, self.memory_s)
        return joined_time(self.compute_s, self.memory_s, nu)


class NuFit(NamedTuple):
    """The fitted exponent, the records it used and the spread of measured over priced time, with ``nu``
    and with the roofline's larger-of-two (both as root-mean-square log ratios)."""

    nu: float
    points: tuple
    rms_log: float
    rms_log_max: float

    @property
    def typical(self) -> float:
        """The typical factor between measured and priced time with ``nu``: ``exp(rms_log)``."""
        return math.exp(self.rms_log)

    @property
    def typical_max(self) -> float:
        """The same factor with the larger of the two times."""
        return math.exp(self.rms_log_max)


def gemm_nu_points(most_rows: int = 256) -> tuple[NuPoint, ...]:
    """Every published fp8 matmul of at most ``most_rows`` rows on the H100's die (the H100 and the H800:
    DeepGEMM's table and vLLM's decode-shaped sweep), priced on the H100's fp8 sweep and STREAM rate without
    a join. Records excluded from the curves (:data:`EXCLUDED`) are left out."""
    roof = _h100(get_hardware("h100-sxm"), "fp8", join=False)
    out = []
    for rid, r in _records().items():
        if r.get("category") != "gemm" or not str(r.get("dtype", "")).startswith("fp8") or rid in EXCLUDED:
            continue
        if not str(r.get("gpu", "")).startswith(("H100", "H800")):
            continue
        m, n, k = r["shape_mnk"]
        if m > most_rows:
            continue
        flops = 2.0 * m * n * k
        nbytes = k * n + m * k + 2.0 * m * n
        out.append(NuPoint(rid, m, n, k, flops / roof.gemm(flops), nbytes / roof.bandwidth, flops / _value(rid)))
    return tuple(sorted(out, key=lambda p: (p.rows, p.n, p.k, p.record)))


@lru_cache(maxsize=1)
def fit_gemm_nu() -> NuFit:
    """:math:`\\nu` fitted to the records of :func:`gemm_nu_points` whose two times are close (at least
    :data:`NU_CLOSENESS`): the exponent of :data:`NU_GRID` with the least squared log ratio of measured
    to priced time. Matmul records only: never a step of a model, never a serving run."""
    import numpy as np

    pts = tuple(p for p in gemm_nu_points() if p.closeness >= NU_CLOSENESS)
    if not pts:
        raise ValueError("no decode-shaped fp8 matmul record has its two times close enough to fit nu")
    lo, hi, step = NU_GRID
    grid = np.arange(lo, hi + step / 2, step)

    def spread(nu):
        return float(np.sqrt(np.mean([np.log(p.measured_s / p.priced(nu)) ** 2 for p in pts])))

    errors = [spread(nu) for nu in grid]
    best = float(round(grid[int(np.argmin(errors))], 2))
    return NuFit(best, pts, min(errors), spread(None))


def _fp8_join(dtype: str, note: str = "") -> tuple[float | None, tuple]:
    """The exponent a Hopper roof of ``dtype`` joins its matmuls' two times with, and the assumption that says
    so: :func:`fit_gemm_nu`'s for fp8 (``note`` added to the words), none for other formats."""
    if dtype != "fp8":
        return None, ()
    fit = fit_gemm_nu()
    return fit.nu, (f"a matmul's compute and memory times are joined with nu = {fit.nu:.2f} (fitted to "
                    f"{len(fit.points)} decode-shaped fp8 matmuls of the H100's die, fit_gemm_nu); bf16 matmuls keep "
                    f"the larger of the two{note}",)


def _a100(hw: Hardware, dtype: str) -> ClusterRoof:
    peak = hw.peak_flops(dtype)
    gemm_ids = ["mb0126", "mb0131", "mb0127", "mb0128", "mb0129", "mb0132", "mb0130"]
    fabric, fsources = _fabric(hw, "A100 SXM4 80GB", all_to_all="mb0065", all_reduce="mb0051", port="mb0058",
                               port_check="mb0054", all_to_all_port="mb0067", send="mb0279", latency="mb0050")
    return ClusterRoof(
        f"{hw.short} calibrated", hw, "calibrated", dtype, peak,
        gemm=_sweep(gemm_ids, _gemm_flops).capped(peak),
        attention=_attention("A100 SXM4 80GB", "FlashAttention-2", peak),
        bandwidth=min(_value("mb0171"), hw.hbm_bandwidth),
        launch_s=_value("mb0177"),
        **fabric,
        sources={"gemm": tuple(gemm_ids), "attention": ("mb0181-mb0201",), "bandwidth": ("mb0171",),
                 "launch": ("mb0177",), **fsources},
        assumptions=(
            "bf16 matmuls reach the fp16 sweep's rates (the A100's datasheet gives both the same peak)",
            "all-gather and reduce-scatter reach all-reduce's bus bandwidth at the same buffer size (no sweep of "
            "them was published for the A100)",
            "across nodes the bus bandwidth follows the NVLink sweep's dependence on size, scaled to the ports' "
            "rate (no multi-node sweep was published for the A100)",
            "one message's latency is the 1 KiB all-reduce's time over its 14 ring steps",
        ))


def _fabric(hw: Hardware, gpu: str, *, all_to_all: str, all_reduce: str, port: str, port_check: str,
            all_to_all_port: str, send: str, latency: str) -> tuple[dict, dict]:
    """A chip's fabric from its records: the all-reduce sweep of ``gpu`` inside a node, all-to-all as a share of
    all-reduce at the same scale, one network port, all-to-all across nodes, a two-GPU copy, and one message's
    latency (a 1 KiB all-reduce's time over its 14 ring steps); each capped at the datasheet's link.
    ``port_check`` is the vendor's multi-node all-reduce of eight ports a node, which agrees with the port's rate."""
    sweep = _ids(category="collective", gpu=gpu, operation="all_reduce", message_size_bytes=lambda s: isinstance(s, int))
    up, net = hw.link("scale_up").each_way, hw.link("network").each_way
    fabric = dict(nvlink=_sweep(sweep, lambda r: float(r["message_size_bytes"])).capped(up),
                  all_to_all_nvlink=_value(all_to_all) / _value(all_reduce), port=min(_value(port), net),
                  all_to_all_port=min(_value(all_to_all_port), net), send_nvlink=min(_value(send), up),
                  latency_s=_value(latency) / 14)
    return fabric, {"nvlink": (f"{sweep[0]}-{sweep[-1]}",), "all_to_all_nvlink": (all_to_all, all_reduce),
                    "port": (port, port_check), "all_to_all_port": (all_to_all_port,), "send_nvlink": (send,),
                    "latency": (latency,)}


def _h100_fabric(hw: Hardware) -> tuple[dict, dict]:
    return _fabric(hw, "H100 SXM 80GB", all_to_all="mb0066", all_reduce="mb0060", port="mb0057",
                   port_check="mb0055", all_to_all_port="mb0068", send="mb0281", latency="mb0049")


def _h100(hw: Hardware, dtype: str, join: bool = True) -> ClusterRoof:
    """The H100's roof; its fp8 matmuls join their two times with :func:`fit_gemm_nu`'s exponent, unless
    ``join`` is False (the larger of the two, as :func:`gemm_nu_points` prices them for the fit)."""
    peak = hw.peak_flops(dtype)
    nu, joined = _fp8_join(dtype) if join else (None, ())
    gemm_ids = ["mb0134", "mb0135", "mb0136", "mb0137"] if dtype in ("bf16", "fp16") else \
        ["mb0117", "mb0123", "mb0118", "mb0119", "mb0120", "mb0124", "mb0121", "mb0122"]
    fabric, fsources = _h100_fabric(hw)
    return ClusterRoof(
        f"{hw.short} calibrated", hw, "calibrated", dtype, peak,
        gemm=_sweep(gemm_ids, _gemm_flops).capped(peak),
        attention=_attention("H100 SXM5 80GB", "FlashAttention-2", peak),
        attention_forward=_attention("H100 SXM5 80GB", "FlashAttention-3", hw.peak_flops("bf16"), "attention forward"),
        bandwidth=min(_value("mb0166"), hw.hbm_bandwidth),
        launch_s=_value("mb0179"),
        **fabric,
        sources={"gemm": tuple(gemm_ids), "attention": ("FlashAttention-2 fwd+bwd, H100",), "bandwidth": ("mb0166",),
                 "launch": ("mb0179",), "attention_forward": ("FlashAttention-3 forward, H100",), **fsources},
        gemm_nu=nu,
        assumptions=(
            *joined,
            "the launch rate is the H200's (mb0179): the same Hopper launch path",
            "point-to-point NVLink copies reach the H200's (mb0281): the same NVLink 4",
            "the NVLink sweep (NVLS on) is capped at the link's one-way rate",
            "all-gather and reduce-scatter reach all-reduce's bus bandwidth at the same buffer size",
            "across nodes the bus bandwidth follows the NVLink sweep's dependence on size, scaled to the ports' rate",
        ))


def _h200(hw: Hardware, dtype: str) -> ClusterRoof:
    from roofline.measured.compare import calibrated_roof
    from roofline.measured.records import load_layers, load_measurement

    rec = load_measurement()
    single = calibrated_roof(rec, load_layers(), mode="eager")
    peak = hw.peak_flops(dtype)
    # the curve by FLOPs is of matmuls of thousands of rows (the record's decode-shaped ones, a few rows, are
    # left out: their time is the launch's); the per-call sweeps of bf16 and of fp8 (torch._scaled_mm)
    gemms = sorted((g.flops, g.flops_per_s) for g in (*rec.gemm_per_call, *rec.gemm_fp8_per_call)
                   if g.dtype == dtype and g.m >= 1024)
    h100 = get_hardware("h100-sxm")
    if not gemms:
        raise ValueError(f"the H200 record has no {dtype} matmuls of 1,024 rows or more")
    gemm, gemm_sources = _best_at_each(gemms).capped(peak), ("h200-2026-11-29 gemms",)
    nu, joined = _fp8_join(dtype, ", the H100's exponent on the same die")
    fabric, fsources = _h100_fabric(h100)
    return ClusterRoof(
        f"{hw.short} calibrated", hw, "calibrated", dtype, peak,
        gemm=gemm,
        attention=_attention("H100 SXM5 80GB", "FlashAttention-2", peak),
        attention_forward=_attention("H100 SXM5 80GB", "FlashAttention-3", hw.peak_flops("bf16"), "attention forward"),
        bandwidth=min(single.bandwidth, hw.hbm_bandwidth),
        launch_s=_value("mb0179"),
        **fabric,
        sources={"gemm": gemm_sources, "bandwidth": ("h200-2026-11-29 reads",),
                 "launch": ("mb0179",), "attention": ("FlashAttention-2 fwd+bwd, H100",),
                 "attention_forward": ("FlashAttention-3 forward, H100",),
                 **fsources},
        gemm_nu=nu,
        assumptions=(
            *joined,
            "flash attention reaches the H100's FlashAttention-2 rates (the same Hopper die; the H200's own record "
            "holds forward passes only)",
            "the fabric is the H100's (NVLink 4, one 400 Gb/s port per GPU); the H200 record's one all-reduce "
            "(mb0093, 482 GB/s) agrees with the H100 sweep's top",
        ))


def _h800(hw: Hardware, dtype: str) -> ClusterRoof:
    """The H800: the H100's die with NVLink cut to 200 GB/s a direction. Its own records are DeepSeek's fp8
    GEMMs (DeepGEMM), DeepEP's all-to-alls and one nccl-tests all-reduce; the rest is the H100's roof."""
    h100 = _h100(get_hardware("h100-sxm"), dtype)
    up, net = hw.link("scale_up").each_way, hw.link("network").each_way
    gemm, sources = h100.gemm, dict(h100.sources)
    if dtype not in ("bf16", "fp16"):  # DeepGEMM's README table, less what EXCLUDED says why
        ids = [i for i in _ids(category="gemm", gpu=lambda g: str(g).startswith("H800")) if i not in EXCLUDED]
        gemm, sources["gemm"] = _sweep(ids, _gemm_flops).capped(hw.peak_flops(dtype)), tuple(ids)
    # the H100's size-dependence, scaled so its top is the H800's one all-reduce (mb0081), capped at the link
    scale = _value("mb0081") / h100.nvlink.top
    sources.update(nvlink=(sources["nvlink"][0] + " scaled to mb0081",), all_to_all_nvlink=("mb0094", "mb0081"),
                   all_to_all_port=("mb0100",))
    return replace(
        h100, label=f"{hw.short} calibrated", hardware=hw, peak_flops=hw.peak_flops(dtype), gemm=gemm,
        bandwidth=min(h100.bandwidth, hw.hbm_bandwidth),
        nvlink=Curve(h100.nvlink.xs, tuple(y * scale for y in h100.nvlink.ys)).capped(up),
        all_to_all_nvlink=_value("mb0094") / _value("mb0081"), all_to_all_port=min(_value("mb0100"), net),
        send_nvlink=min(h100.send_nvlink, up), port=min(h100.port, net), sources=sources, gemm_nu=None,
        assumptions=(
            "bf16 matmuls, flash attention, the HBM's STREAM rate and the launch cost are the H100's: the same die",
            *(("a matmul takes the larger of its two times: DeepGEMM's curve holds decode-shaped matmuls of 64 "
               "and 128 rows, so the loss near the ridge is in the curve already",) if h100.gemm_nu is not None else ()),
            "fp8 matmuls are DeepGEMM's block-scaled kernels, DeepSeek's own, over the README's shapes (DeepSeek-V3's "
            "inference shapes)",
            "the NVLink all-reduce follows the H100 sweep's dependence on size, scaled to the one H800 figure "
            "(mb0081, 215 GB/s) and capped at the link's 200 GB/s a direction",
            "all-to-all inside a node is DeepEP's dispatch (mb0094) as a share of that all-reduce; across nodes "
            "DeepEP's at 64 GPUs (mb0100), its kernels forwarding through NVLink to the ports",
            "the network port, one message's latency and a two-GPU copy are the H100's (the same 400 Gb/s NIC), "
            "the copy capped at the H800's link",
        ))

_BUILDERS = {"a100-sxm-80gb": _a100, "h100-sxm": _h100, "h200-sxm": _h200, "h800-sxm": _h800}
CALIBRATED_CHIPS = tuple(_BUILDERS)  # the chips with a calibrated cluster roof


def cluster_roof(hardware: Hardware | str, dtype: str = "bf16") -> ClusterRoof:
    """The calibrated cluster roof of a chip, from microbenchmarks only; a chip with no records is refused,
    naming the ones that have them."""
    hw = get_hardware(hardware)
    if hw.key not in _BUILDERS:
        raise ValueError(f"no calibrated cluster roof for the {hw.short}: microbenchmarks were gathered for "
                         f"{', '.join(get_hardware(k).short for k in CALIBRATED_CHIPS)}; use the datasheet roof")
    return _cached(hw.key, dtype) if hw is get_hardware(hw.key) else _BUILDERS[hw.key](hw, dtype)


@lru_cache(maxsize=16)
def _cached(key: str, dtype: str) -> ClusterRoof:
    hw = get_hardware(key)
    return _BUILDERS[key](hw, dtype)


# ------------------------------------------------------------------------------------------ development set

@dataclass(frozen=True)
class DevelopmentRun:
    """One published training run, as its source gives it (``raw``), with the time it took per step."""

    id: str
    raw: dict

    @property
    def published_s(self) -> float:
        rep = self.raw["reported"].get("iteration_time_s")
        return float(rep if rep is not None else self.raw["derived"]["implied_iteration_time_s"])

    @property
    def source(self) -> str:
        return self.raw["source"]["title"]

    @property
    def label(self) -> str:
        """A short name for tables and controls: the model and the recomputation ('GPT 175B, selective')."""
        name = self.raw["model"]["name"].split(" (")[0]
        return f"{name}, {_recompute(self.raw['activation_recomputation'])}"

    @property
    def settings_unstated(self) -> bool:
        """True where the source leaves the micro-batch or the interleaving depth open, so that the model
        takes the fastest that fits."""
        sched = self.raw["pipeline_schedule"].lower()
        unstated_depth = self.raw["pp"] > 1 and sched.startswith("interleaved") and "virtual stages not stated" in sched
        return self.raw["micro_batch"] is None or unstated_depth


@lru_cache(maxsize=1)
def development_runs() -> tuple[DevelopmentRun, ...]:
    """The published training runs of the development set (18 on A100 80GB clusters)."""
    text = resources.files("roofline.data.published").joinpath("training-dev-set.json").read_text()
    return tuple(DevelopmentRun(r["id"], r) for r in json.loads(text)["runs"])


def _recompute(text: str) -> str:
    return "selective" if text.startswith("selective") else "full" if text.startswith("full") else "none"


def development_layouts(run: DevelopmentRun, roof: ClusterRoof):
    """The layouts a development run may have used: its published settings, and every micro-batch
    (1, 2, 4, 8) and interleaving depth its source leaves unstated. The model, then the layouts."""
    from roofline.parallel.cluster import TrainLayout
    from roofline.parallel.planner import gpt_model

    r = run.raw
    md = r["model"]
    m = gpt_model(md["hidden"], md["heads"], md["layers"], vocab=md["vocab"], seq=r["seq_len"])
    sched = r["pipeline_schedule"].lower()
    per_stage = md["layers"] // r["pp"]
    if r["pp"] == 1:
        chunk_options = [("1f1b", 1)]
    elif "3 virtual" in sched:
        chunk_options = [("interleaved", 3)]
    elif sched.startswith("interleaved") and per_stage > 1:
        chunk_options = [("interleaved", c) for c in range(2, per_stage + 1) if per_stage % c == 0]
    else:
        chunk_options = [("1f1b", 1)]
    mbs = [r["micro_batch"]] if r["micro_batch"] else [1, 2, 4, 8]
    out = []
    for mb in mbs:
        for schedule, chunks in chunk_options:
            lay = TrainLayout(seq=r["seq_len"], tp=r["tp"], cp=r["cp"], pp=r["pp"], dp=r["dp"], micro_batch=mb,
                              global_batch=r["global_batch_sequences"], recompute=_recompute(r["activation_recomputation"]),
                              sequence_parallel=bool(r["sequence_parallel"]), schedule=schedule, chunks=chunks,
                              zero_stage=0, attention="standard", overlap_grad_reduce=False, dtype="fp16",
                              grad_dtype="fp16")
            if lay.batch % (lay.dp * mb) or (schedule == "interleaved" and lay.micro_batches % lay.pp):
                continue
            out.append(lay)
    if not out:  # interleaving impossible at every micro-batch: plain 1F1B
        out = [replace(lay, schedule="1f1b", chunks=1) for lay in
               (TrainLayout(seq=r["seq_len"], tp=r["tp"], pp=r["pp"], dp=r["dp"], micro_batch=mb,
                            global_batch=r["global_batch_sequences"], recompute=_recompute(r["activation_recomputation"]),
                            sequence_parallel=bool(r["sequence_parallel"]), zero_stage=0, attention="standard",
                            overlap_grad_reduce=False, dtype="fp16", grad_dtype="fp16") for mb in mbs)
               if lay.batch % (lay.dp * lay.micro_batch) == 0]
    return m, out


@dataclass(frozen=True)
class DevelopmentCheck:
    """One development run priced: the layout chosen (the fastest that fits under the estimate, where the
    source leaves settings open), its floor and estimate, and the published time."""

    run: DevelopmentRun
    floor: "object"
    estimate: "object"

    @property
    def published_s(self) -> float:
        return self.run.published_s

    @property
    def ratio(self) -> float:
        """Estimate over published: below 1 the model is too fast."""
        return self.estimate.time / self.published_s

    @property
    def floor_ratio(self) -> float:
        """Floor over published: never above 1 if the floor is one."""
        return self.floor.time / self.published_s


def check_run(run: DevelopmentRun, roof: ClusterRoof | None = None) -> DevelopmentCheck:
    """Price one development run under the calibrated A100 roof and the datasheet's."""
    from roofline.core.cluster_roof import datasheet_cluster_roof
    from roofline.parallel.cluster import price_step

    roof = roof or cluster_roof("a100-sxm-80gb", "fp16")
    m, layouts = development_layouts(run, roof)
    priced = [price_step(m, lay, roof) for lay in layouts]
    fitting = [p for p in priced if p.fits] or priced
    best = min(fitting, key=lambda p: p.time)
    floor = price_step(m, best.layout, datasheet_cluster_roof(roof.hardware, roof.dtype))
    return DevelopmentCheck(run, floor, best)


def development_checks(roof: ClusterRoof | None = None) -> tuple[DevelopmentCheck, ...]:
    """Every development run priced (appendix C's table)."""
    return tuple(check_run(r, roof) for r in development_runs())


ROOFS = ("datasheet", "calibrated")


@dataclass(frozen=True)
class ClusterPlan:
    """A search ranked by the calibrated estimate: ``ranked`` pairs the fastest fitting layouts' estimates with
    their datasheet floors, fastest estimate first; ``fitting`` counts every layout that fits."""

    ranked: tuple
    priced: int
    refused: int
    fitting: int


def _powers_of_two(most: int) -> tuple:
    out, k = [], 1
    while k <= most:
        out.append(k)
        k *= 2
    return tuple(out)


def cluster_plan(model, hardware: Hardware | str, *, nodes: int, gpus_per_node: int = 8, seq: int, global_batch: int,
                 dtype: str = "bf16", keep: int = 50) -> ClusterPlan:
    """``roofline plan``'s search: every layout of ``gpus`` GPUs (tensor parallelism inside a node; context
    parallelism up to 16 where each rank keeps at least 1,024 tokens; every pipeline depth; expert parallelism
    over powers of two dividing the experts, for a mixture of experts; micro-batches 1 to 8; the three
    recomputation policies; 1, 2 or 4 chunks; ZeRO 0, 1 or 3) ranked by the calibrated estimate of ``hardware``,
    the ``keep`` fastest with their datasheet floors. A ``ValueError`` when no layout divides the global batch,
    or when none fits."""
    from roofline.core.cluster_roof import datasheet_cluster_roof
    from roofline.core.model import load_model
    from roofline.parallel.cluster import price_step, search
    from roofline.parallel.planner import cluster_size

    m = load_model(model)
    hw = get_hardware(hardware)
    nodes, gpus_per_node = cluster_size(nodes, gpus_per_node)
    gpus = nodes * gpus_per_node
    cps = tuple(c for c in _powers_of_two(16) if seq % (2 * c) == 0 and seq // c >= 1024) or (1,)
    eps = (1,) if m.moe is None else tuple(e for e in _powers_of_two(m.moe.num_experts) if m.moe.num_experts % e == 0)
    tps = tuple(t for t in _powers_of_two(gpus_per_node))
    found = search(m, cluster_roof(hw, dtype), gpus=gpus, seq=seq, global_batch=global_batch,
                   gpus_per_node=gpus_per_node, tps=tps, cps=cps, eps=eps, dtype=dtype)
    if not found.priced:
        raise ValueError(f"global_batch ({global_batch:,}) is not divisible by dp x micro_batch of any layout of the "
                         f"{gpus:,} GPUs")
    if not found.ranked:
        raise ValueError(f"{m.title} fits on no layout of the {gpus:,} {hw.short}s at seq {seq:,}: the leanest of the "
                         f"{found.priced:,} priced needs {fmt(found.leanest, 'B')} per GPU against "
                         f"{fmt(hw.usable_capacity, 'B')} usable (more nodes, a shorter seq, or a smaller model)")
    sheet = datasheet_cluster_roof(hw, dtype)
    ranked = tuple((e, price_step(m, e.layout, sheet)) for e in found.ranked[:keep])
    return ClusterPlan(ranked, found.priced, found.refused, len(found.ranked))


def estimate_step(model, hardware: Hardware | str, layout, *, roof: str = "calibrated"):
    """One training step of ``layout`` priced at the datasheet floor and, with ``roof='calibrated'``, under the
    chip's calibrated roof as well: ``(floor, estimate)``, the estimate ``None`` for the datasheet alone. The
    layout's ``dtype`` picks the peak both divide by."""
    from roofline.core.cluster_roof import datasheet_cluster_roof
    from roofline.parallel.cluster import price_step

    if roof not in ROOFS:
        raise unknown_name("roof", roof, ROOFS)
    hw = get_hardware(hardware)
    floor = price_step(model, layout, datasheet_cluster_roof(hw, layout.dtype))
    return floor, (price_step(model, layout, cluster_roof(hw, layout.dtype)) if roof == "calibrated" else None)


# ------------------------------------------------------------------------------------ for appendix C's page

__all__ += ["RoofConstant", "ROOF_QUANTITIES", "roof_constants", "part_shares", "part_gaps", "development_ratios", "PART_ORDER"]

# The quantities of a calibrated roof in the order appendix C's table lists them: (name, attribute, unit).
ROOF_QUANTITIES = (
    ("best matmul", "gemm", "FLOP/s"),
    ("best flash attention (fwd+bwd, causal, head 128)", "attention", "FLOP/s"),
    ("memory-bound kernels", "bandwidth", "B/s"),
    ("least time of a kernel", "launch", "s"),
    ("all-reduce in a node, largest buffer", "nvlink", "B/s"),
    ("all-to-all in a node, share of all-reduce", "all_to_all_nvlink", "%"),
    ("one network port, ring bus bandwidth", "port", "B/s"),
    ("all-to-all across nodes", "all_to_all_port", "B/s"),
    ("one message inside a node", "send_nvlink", "B/s"),
    ("latency of one message", "latency", "s"),
)

# The parts of a StepPrice in the order the figures stack them.
PART_ORDER = ("matmuls", "attention", "memory-bound", "recompute", "tensor-parallel", "context-parallel",
              "expert all-to-all", "pipeline sends", "data-parallel", "bubble", "optimizer")


@dataclass(frozen=True)
class RoofConstant:
    """One constant of a calibrated roof: its value (SI units, a share for '%'), and the records it came from
    with their sources' titles (a source that is not a record, such as the H200's own measurement, by name)."""

    name: str
    value: float
    unit: str
    records: tuple
    sources: tuple


def _record_ids(source: str) -> list[str]:
    """A roof's source entry as record ids: 'mb0025-mb0048' is the range, 'mb0058' one record, anything else
    none."""
    recs = _records()
    a, _, b = source.partition("-")
    if a in recs and b in recs:
        return [i for i in recs if a <= i <= b]
    return [source] if source in recs else []


def _constant_value(roof: ClusterRoof, attr: str) -> float:
    if attr == "gemm":
        return roof.gemm.top
    if attr == "attention":
        return roof._attention_curve(128, True).top
    if attr == "nvlink":
        return roof.nvlink.top
    if attr == "launch":
        return roof.launch_s
    if attr == "latency":
        return roof.latency_s
    return float(getattr(roof, attr))


def roof_constants(roof: ClusterRoof) -> tuple[RoofConstant, ...]:
    """The constants of ``roof`` as appendix C's table shows them (:data:`ROOF_QUANTITIES`), each with the
    records it was built from and their sources' titles; the attention curve's records are those of the
    chip's FlashAttention-2 benchmark."""
    out = []
    for name, attr, unit in ROOF_QUANTITIES:
        entries = roof.sources.get(attr, ())
        ids = [i for e in entries for i in _record_ids(e)]
        if attr == "attention" and not ids:
            gpu = {"a100-sxm-80gb": "A100 SXM4 80GB"}.get(roof.hardware.key, "H100 SXM5 80GB")
            ids = _ids(category="attention_kernel", gpu=gpu, operation="attention forward+backward",
                       tool=lambda t: t.startswith("FlashAttention-2"))
        titles = tuple(dict.fromkeys(record(i)["source"]["title"] for i in ids)) or tuple(entries)
        out.append(RoofConstant(name, _constant_value(roof, attr), unit, tuple(ids), titles))
    return tuple(out)


def part_shares(price) -> dict:
    """Each part of a :class:`~roofline.parallel.cluster.StepPrice` as a share of its step, in
    :data:`PART_ORDER`."""
    return {k: price.parts.get(k, 0.0) / price.time for k in PART_ORDER}


def part_gaps(floor, estimate) -> dict:
    """Seconds each part of ``estimate`` adds over the same part of ``floor`` (the same layout under the
    datasheet's roof), in :data:`PART_ORDER`; they add up to the difference of the two steps."""
    return {k: estimate.parts.get(k, 0.0) - floor.parts.get(k, 0.0) for k in PART_ORDER}


def development_ratios(checks, kind: str = "estimate") -> tuple[float, ...]:
    """Predicted over published time for each check: the calibrated ``'estimate'`` or the datasheet ``'floor'``."""
    if kind not in ("estimate", "floor"):
        raise unknown_name("kind", kind, ("estimate", "floor"))
    return tuple(getattr(c, kind).time / c.published_s for c in checks)


# ------------------------------------------------------------------------------ for chapter 9's published runs

__all__ += ["MEGATRON_2021", "MegatronSearch", "megatron_searches"]

# What Megatron-LM's 2021 software could run, as the search's arguments: no ZeRO, the explicit attention kernel,
# fp16 with fp16 gradients, no overlap of the gradient reduction, no sequence parallelism, recomputation none or
# full (selective came in 2022), and every interleaving depth up to 16 that divides a stage's layers.
MEGATRON_2021 = MappingProxyType({"zero_stages": (0,), "attention": "standard", "dtype": "fp16",
                                  "overlap_grad_reduce": False, "sequence_parallel": False,
                                  "recomputes": ("none", "full"), "chunks": tuple(range(1, 17))})


@dataclass(frozen=True)
class MegatronSearch:
    """Chapter 9: one of Megatron-LM's GPT runs (:data:`roofline.parallel.planner.PUBLISHED` ``'megatron_gpt'``)
    as the development set prices it (``check``: published time, floor and estimate of the published layout),
    and the calibrated search of the same cluster and batch under :data:`MEGATRON_2021`: ``best`` over both
    recomputation policies, ``best_full`` with the published full recomputation held."""

    label: str
    published: dict
    check: DevelopmentCheck
    best: object
    best_full: object

    @property
    def lead(self) -> float:
        """The published layout's estimate over the search's best: above 1, the search finds a faster layout."""
        return self.check.estimate.time / self.best.time

    @property
    def lead_full(self) -> float:
        """The same, against the best with full recomputation held."""
        return self.check.estimate.time / self.best_full.time


def megatron_searches(roof: ClusterRoof | None = None) -> tuple[MegatronSearch, ...]:
    """Chapter 9: each Megatron-LM GPT run of :data:`~roofline.parallel.planner.PUBLISHED` beside its development
    check and the best layouts a calibrated search (A100 80GB, fp16 unless ``roof`` says otherwise) finds for the
    same GPUs (nodes of eight), sequence and batch under :data:`MEGATRON_2021`."""
    from roofline.parallel.cluster import search
    from roofline.parallel.planner import PUBLISHED, gpt_model

    roof = roof or cluster_roof("a100-sxm-80gb", "fp16")
    checks = {c.run.raw["gpu_count"]: c for c in development_checks(roof) if c.run.id.startswith("megatron-ptdp-")}
    out = []
    for run in PUBLISHED["megatron_gpt"][0]:
        check = checks[run["gpus"]]
        m = gpt_model(run["hidden"], run["heads"], run["layers"], seq=check.run.raw["seq_len"])
        kwargs = dict(MEGATRON_2021)
        args = dict(gpus=run["gpus"], seq=check.run.raw["seq_len"], global_batch=run["batch"], gpus_per_node=8)
        best = search(m, roof, **args, **kwargs).best
        kwargs["recomputes"] = ("full",)
        best_full = search(m, roof, **args, **kwargs).best
        out.append(MegatronSearch(f"GPT {run['params'] / 1e9:.0f}B", run, check, best, best_full))
    return tuple(out)


# ------------------------------------------------------------------------------ chapters 10 and 11 beside the floor

HIDING_TIERS = ("scale_up", "network")


def calibrated_hiding_block(model, hardware: Hardware | str, *, seq: int, tier: str = "network",
                            phase: str = "forward") -> float:
    """Chapter 11: the ring's hiding block (:func:`~roofline.parallel.context_parallel.ring_hiding_block`) under
    the chip's calibrated roof rather than its datasheet: the attention kernel at the rate the flash-attention
    sweep measured at ``seq`` tokens (causal, the model's head size) and each key/value block sent at the
    measured point-to-point rate of ``tier`` ('scale_up': NVLink, 'network': the GPU's port). The law is the
    datasheet's, ``S_shard* = (c_KV / 2dL) x P / B_link``, with both rates replaced: a slower kernel lowers the block, a
    slower link raises it."""
    from roofline.core.model import load_model
    from roofline.parallel.context_parallel import ring_hiding_block

    if tier not in HIDING_TIERS:
        raise unknown_name("tier", tier, HIDING_TIERS)
    m, hw = load_model(model), get_hardware(hardware)
    seq = count("seq", seq)
    roof = cluster_roof(hw)
    probe = 1e15  # FLOPs: the flash curve's rate is their ratio to its seconds
    rate = probe / roof.flash_time(probe, seq, head_dim=m.head_dim, causal=True)
    link = roof.port if tier == "network" else roof.send_nvlink
    sheet = ring_hiding_block(m, hw, tier=tier, phase=phase)
    return sheet * (rate / hw.peak_flops("bf16")) * (hw.interconnect[tier].each_way / link)


def token_rate_per_gpu(price, hidden=()) -> float:
    """Chapter 10: tokens a second each GPU trains under ``price`` (a
    :class:`~roofline.parallel.cluster.StepPrice`), with the parts named in ``hidden`` (for example
    ``('expert all-to-all',)``) taken out of the step as if they ran wholly behind compute: the batch's tokens
    over the remaining seconds and the GPUs."""
    from roofline.parallel.cluster import StepPrice

    if not isinstance(price, StepPrice):
        raise TypeError(f"price must be a StepPrice, got {type(price).__name__}")
    hidden = (hidden,) if isinstance(hidden, str) else tuple(hidden)
    for name in hidden:
        if name not in price.parts:
            raise unknown_name("hidden", name, price.parts)
    seconds = price.time - sum(price.parts[k] for k in hidden)
    return price.layout.batch * price.layout.seq / (seconds * price.layout.gpus)


__all__ += ["HIDING_TIERS", "calibrated_hiding_block", "token_rate_per_gpu"]
