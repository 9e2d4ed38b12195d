"""Which roof: the calibrated roofs built from records, beside the datasheet's, and the one function that
answers "the roof of this chip, of this kind, in this format" (appendices B and C).

A roof comes in one of two kinds (:data:`~roofline.core.cluster_roof.ROOF_KINDS`): the **datasheet**'s,
a floor no kernel beats, and a **calibrated** one, what microbenchmarks of the chip reached, an estimate.
And at one of two scopes (:data:`SCOPES`):

``'cluster'``
    A :class:`~roofline.core.cluster_roof.ClusterRoof`: a chip and its fabric, pricing a step's pieces by
    size (a matmul by its FLOPs, a memory-bound kernel by its bytes, a collective by its buffer); the
    training and serving models of chapters 7 to 13 and appendix C. Calibrated for the chips of
    :data:`CALIBRATED_CHIPS`, each from published microbenchmark records only (matmul sweeps, flash-attention
    benchmarks, STREAM, tiny-kernel launch rates, nccl-tests bus bandwidths, copy bandwidths), named by id
    (:func:`~roofline.core.records.record`), never from an end-to-end run nor another tool's efficiency
    factors; the H200's kernels from our own measurement of one. Where a chip has no record of a quantity the
    value is carried over from a named chip and said so in ``assumptions``; every calibrated rate is capped at
    the datasheet's, so an estimate is never below its floor.
``'chip'``
    The roof that times one GPU's list of kernels (:func:`~roofline.core.roof.predict`; chapters 1 to 6 and
    appendix B): the :class:`~roofline.core.hardware.Hardware` itself for the datasheet (the peak of every
    format it lists), or the :class:`~roofline.core.roof.CalibratedRoof` of our measurement
    (:func:`calibrated_roof`), which exists for the measured chip alone unless its efficiencies are carried to
    another, an assumption labelled as such.

:func:`get_roof` holds the default (calibrated where the chip has a calibrated roof at that scope, else the
datasheet's) and the one refusal (a calibrated roof asked of a chip without one).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache
from types import MappingProxyType
from typing import NamedTuple

import numpy as np

from roofline.core.checks import unknown_name
from roofline.core.cluster_roof import ROOF_KINDS, ClusterRoof, datasheet_cluster_roof, joined_time
from roofline.core.curve import Curve
from roofline.core.hardware import Hardware, get_hardware
from roofline.core.ops import attention_flops
from roofline.core.records import (LayersMeasurement, Measurement, MeasurementError, load_layers, load_measurement,
                                   microbenchmarks, record, record_ids, record_value, source_records)
from roofline.core.roof import CalibratedRoof, Roof

__all__ = ["SCOPES", "CALIBRATED_CHIPS", "MEASURED_CHIP", "roof_kind", "get_roof", "measured_roof", "calibrated_roof",
           "EXCLUDED", "NU_CLOSENESS", "NU_GRID", "NuPoint", "NuFit", "gemm_nu_points", "fit_gemm_nu",
           "one_way", "RoofConstant", "ROOF_QUANTITIES", "roof_constants", "custom_all_reduce_curves", "ep_low_latency_curves", "QUANTIZATION_RECORDS", "ROWWISE_GEMM_RECORDS",
           "cast_share", "fp8_training_roof", "SWIGLU_RECORDS", "CROSS_ENTROPY_RECORD", "CROSS_ENTROPY_BYTES",
           "HOPPER_ATTENTION_KERNELS", "kernel_shares", "hopper_attention_kernels", "training_kernels_roof",
           "training_kernel_constants", "GROUPED_GEMM_RECORDS", "grouped_gemm_curves", "EP_NORMAL_LOAD",
           "EP_NORMAL_RECORDS", "ep_normal_rates"]

SCOPES = ("cluster", "chip")
"""What a roof prices: a step's pieces on a chip and its fabric ('cluster'), or one GPU's kernels ('chip')."""

MEASURED_CHIP = "h200-sxm"
"""The chip our own measurement record is of (``roofline/data/measured``): the one with a calibrated 'chip' roof."""


# ------------------------------------------------------------------------------------- one GPU's kernels

_BANDWIDTHS = ("best", "copy", "read", "write")
"""The bandwidths a measured roof may take: the fastest of copy and read, or one benchmark by name."""


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


def calibrated_roof(record: Measurement, layers: "LayersMeasurement | None" = None, *, mode: str = "graph",
                    label: str | None = None):
    """The :class:`~roofline.core.roof.CalibratedRoof` of a record's microbenchmarks, and only those:

    - bandwidth by transfer size from ``read_bandwidth_vs_size`` (latency-bound below a few MB), and the
      sustained bandwidth, the best median of the copy and read benchmarks;
    - matmul FLOP/s by rows ``m``: the best median of the CUDA-graph sweeps (``gemm_graph``) at each ``m``,
      and for fp8 of the per-call sweep (launch-bound at small ``m``: an underestimate there);
    - flash attention's FLOP/s by sequence length from ``layers.attention`` when given (causal FLOPs
      counted exactly, as the refined accounting does);
    - the launch latency per kernel, eager and CUDA graph, from ``launch_overhead``;
    - when the record has ``decode_attention`` (from :func:`roofline.measured.probe.gpu_record`), the bandwidth a
      decode attention kernel reached by sequences x KV heads and bytes per group: a kernel with few
      groups cannot keep every multiprocessor busy. Without it, attention is timed by the read sweep.

    The end-to-end decode and prefill times are not used: they are what the roof is tested against.
    """
    if not isinstance(record, Measurement):
        raise TypeError(f"record must be a Measurement (from load_measurement), got {type(record).__name__}")
    missing = [k for k, v in (("read_bandwidth_vs_size", record.read_bandwidth_vs_size),
                              ("gemm_graph", record.gemm_graph), ("launch_overhead", record.launch_overhead)) if not v]
    if missing:
        raise MeasurementError(f"record {record.name!r} lacks {', '.join(missing)}: a calibrated roof needs the read "
                               "sweep, the CUDA-graph matmul sweep and the launch overhead")
    found = [record.bandwidth[k].bytes_per_s for k in ("copy", "read") if k in record.bandwidth]
    if not found:
        raise MeasurementError(f"record {record.name!r} has neither a 'copy' nor a 'read' bandwidth")
    reads = sorted(record.read_bandwidth_vs_size, key=lambda r: r.bytes)

    def curve(gemms):
        best: dict[int, float] = {}
        for g in gemms:
            best[g.m] = max(best.get(g.m, 0.0), g.flops_per_s)
        rows = sorted(best)
        return tuple(float(r) for r in rows), tuple(best[r] for r in rows)

    rows, flops = {}, {}
    rows["bf16"], flops["bf16"] = curve(record.gemm_graph)
    if record.gemm_fp8_per_call:
        rows["fp8"], flops["fp8"] = curve(record.gemm_fp8_per_call)
    att_t, att_f = (), ()
    if layers is not None:
        runs = sorted(layers.attention, key=lambda r: r.tokens)
        att_t = tuple(float(r.tokens) for r in runs)
        att_f = tuple(float(attention_flops(r.tokens, r.tokens, r.heads * r.head_dim, causal="exact")) / r.flash_seconds
                      for r in runs)
    by_groups: dict[int, dict[float, float]] = {}
    for r in record.decode_attention:  # the best of repeated shapes, per group count and bytes per group
        curve_ = by_groups.setdefault(r.groups, {})
        per = r.bytes / r.groups
        curve_[per] = max(curve_.get(per, 0.0), r.bytes_per_s)
    groups = tuple(float(g) for g in sorted(by_groups))
    curves = tuple((tuple(sorted(by_groups[g])), tuple(by_groups[g][x] for x in sorted(by_groups[g])))
                   for g in sorted(by_groups))
    lo = record.launch_overhead
    return CalibratedRoof(label or f"{record.env.device} calibrated", max(found),
                          tuple(float(r.bytes) for r in reads), tuple(float(r.seconds) for r in reads), rows, flops,
                          {"graph": lo.graph_s_per_kernel, "eager": lo.eager_s_per_kernel}, mode, att_t, att_f,
                          groups, curves)


# ------------------------------------------------------------------------- the cluster roofs' curves

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
    return _best_at_each((x(record(i)), record_value(i)) for i in ids)


def _gemm_flops(r) -> float:
    m, n, k = r["shape_mnk"]
    return 2.0 * m * n * k


def _attention(gpu: str, tool: str, cap: float, operation: str = "attention forward+backward") -> dict:
    out = {}
    for hd in (64, 128):
        for causal in (False, True):
            ids = record_ids(category="attention_kernel", gpu=gpu, operation=operation, head_dim=hd,
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
    for rid, r in microbenchmarks().items():
        if r.get("category") != "gemm" or not str(r.get("dtype", "")).startswith("fp8") or rid in EXCLUDED:
            continue
        if not str(r.get("gpu", "")).startswith(("H100", "H800")):
            continue
        m, n, k = r["shape_mnk"]
        if m > most_rows:
            continue
        flops = 2.0 * m * n * k
        nbytes = k * n + m * k + 2.0 * m * n
        out.append(NuPoint(rid, m, n, k, flops / roof.gemm(flops), nbytes / roof.bandwidth, flops / record_value(rid)))
    return tuple(sorted(out, key=lambda p: (p.rows, p.n, p.k, p.record)))


@lru_cache(maxsize=1)
def fit_gemm_nu() -> NuFit:
    """:math:`\\nu` fitted to the records of :func:`gemm_nu_points` whose two times are close (at least
    :data:`NU_CLOSENESS`): the exponent of :data:`NU_GRID` with the least squared log ratio of measured
    to priced time. Matmul records only: never a step of a model, never a serving run."""
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
        bandwidth=min(record_value("mb0171"), hw.hbm_bandwidth),
        launch_s=record_value("mb0177"),
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


def one_way(record_id: str) -> float:
    """A point-to-point copy record's rate in one direction, bytes/s: a bidirectional test counts half, a one-way
    test its value. nvbandwidth's SM-copy bidirectional test runs odd and even warps copying in opposite directions
    and reports 'size/(kernel time)', the bytes of both directions together (its README, "Bandwidth calculation"),
    and p2pBandwidthLatencyTest's bidirectional rows add the two directions too. mb0279, the A100's 423 GB/s of
    SM-copy reads both ways between two GPUs, is 211.5 GB/s each way."""
    r = record(record_id)
    if r.get("category") != "nvlink_p2p":
        raise ValueError(f"record {record_id!r} is not a point-to-point copy (category {r.get('category')!r})")
    both = "bidirectional" in f"{r.get('tool', '')} {r.get('operation', '')}".lower()
    return record_value(record_id) / (2.0 if both else 1.0)


def _fabric(hw: Hardware, gpu: str, *, all_to_all: str, all_reduce: str, port: str, port_check: str,
            all_to_all_port: str, send: str, latency: str) -> tuple[dict, dict]:
    """A chip's fabric from its records: the all-reduce sweep of ``gpu`` inside a node, all-to-all as a share of
    all-reduce at the same scale, one network port, all-to-all across nodes, a two-GPU copy, and one message's
    latency (a 1 KiB all-reduce's time over its 14 ring steps); each capped at the datasheet's link.
    ``port_check`` is the vendor's multi-node all-reduce of eight ports a node, which agrees with the port's rate."""
    sweep = record_ids(category="collective", gpu=gpu, operation="all_reduce", message_size_bytes=lambda s: isinstance(s, int))
    up, net = hw.link("scale_up").each_way, hw.link("network").each_way
    fabric = dict(nvlink=_sweep(sweep, lambda r: float(r["message_size_bytes"])).capped(up),
                  all_to_all_nvlink=record_value(all_to_all) / record_value(all_reduce), port=min(record_value(port), net),
                  all_to_all_port=min(record_value(all_to_all_port), net), send_nvlink=min(one_way(send), up),
                  latency_s=record_value(latency) / 14)
    return fabric, {"nvlink": (f"{sweep[0]}-{sweep[-1]}",), "all_to_all_nvlink": (all_to_all, all_reduce),
                    "port": (port, port_check), "all_to_all_port": (all_to_all_port,), "send_nvlink": (send,),
                    "latency": (latency,)}


def _h100_fabric(hw: Hardware) -> tuple[dict, dict]:
    fabric, sources = _fabric(hw, "H100 SXM 80GB", all_to_all="mb0066", all_reduce="mb0060", port="mb0057",
                              port_check="mb0055", all_to_all_port="mb0068", send="mb0281", latency="mb0049")
    fabric["custom_all_reduce"], sources["custom_all_reduce"] = custom_all_reduce_curves("H100")
    fabric["ep_low_latency"], sources["ep_low_latency"] = ep_low_latency_curves()
    rdma, _, ids = ep_normal_rates()
    fabric["ep_rdma"], sources["ep_rdma"] = rdma, tuple(i for i in ids if record(i)["n_nodes"] > 1)
    return fabric, sources


EP_NORMAL_LOAD = (4096, 7168, 8, 4)
"""The load DeepEP's normal kernels were measured at (its README: 'the DeepSeek-V3/R1 pretraining setting'): tokens
a GPU, hidden size, experts a token, and the nodes a token's experts are limited to (top-4 groups, a group a
node)."""

EP_NORMAL_RECORDS = ("mb0094", "mb0095", "mb0096", "mb0097", "mb0098", "mb0099", "mb0100", "mb0101")
"""DeepEP's normal (high-throughput) dispatch and combine on H800s with one CX7 400 Gb/s port a GPU (its README at
commit 567632d, V1 tables): inside a node at 8 GPUs, across 2, 4 and 8 nodes at 16, 32 and 64."""


def ep_normal_rates() -> tuple[dict, dict, tuple]:
    """DeepEP's normal kernels (:data:`EP_NORMAL_RECORDS`) as a roof holds them: ``({'dispatch': Curve,
    'combine': Curve}, {'dispatch': bytes/s, 'combine': bytes/s}, ids)``, the internode curves of bytes/s against
    the group's size (16, 32, 64) and the intranode rates (8 GPUs of a node). The bytes are DeepEP's tests' own
    count (tests/test_internode.py and test_intranode.py at commit 567632d): across nodes a token once for each node
    holding one of its experts, its own included ('num_rdma_token_sent'), inside a node once for each GPU
    ('recv_x.numel()'); :meth:`~roofline.core.cluster_roof.ClusterRoof.ep_exchange_time` counts them the same way."""
    rdma, nvlink = {}, {}
    for what in ("dispatch", "combine"):
        ids = [i for i in EP_NORMAL_RECORDS if f"MoE {what}" in record(i)["operation"]]
        nvlink[what] = float(np.mean([record_value(i) for i in ids if record(i)["n_nodes"] == 1]))
        rdma[what] = _best_at_each([(float(record(i)["n_gpus"]), record_value(i)) for i in ids
                                    if record(i)["n_nodes"] > 1])
    return rdma, nvlink, EP_NORMAL_RECORDS


def ep_low_latency_curves() -> tuple[dict, tuple]:
    """DeepEP's low-latency dispatch and combine on the H800 (each GPU with one CX7 400 Gb/s port), seconds
    against the expert-parallel group's size at 128 tokens a GPU: ``{'dispatch': Curve, 'combine': Curve}``
    and the record ids (chapter 13)."""
    out, ids = {}, []
    for what in ("dispatch", "combine"):
        found = record_ids(category="collective", operation=lambda o, w=what: str(o).startswith(f"low-latency MoE {w}"))
        out[what] = _fastest_at_each([(float(record(i)["n_gpus"]), record_value(i)) for i in found])
        ids += found
    return out, tuple(ids)


def custom_all_reduce_curves(gpu: str) -> tuple[dict, tuple]:
    """The engines' one-shot/two-shot all-reduce on ``gpu`` (a prefix of the records' ``gpu``), from the
    published records of operation 'custom all_reduce': for each group size, a curve of seconds against the
    buffer's bytes, and the record ids (chapter 13; SGLang's kernels, TensorRT-LLM's as adapted)."""
    ids = record_ids(category="collective", operation="custom all_reduce", gpu=lambda g: str(g).startswith(gpu))
    by_n: dict[int, list] = {}
    for i in ids:
        by_n.setdefault(int(record(i)["n_gpus"]), []).append((float(record(i)["message_size_bytes"]), record_value(i)))
    return {n: _fastest_at_each(pts) for n, pts in sorted(by_n.items())}, tuple(ids)


def _fastest_at_each(points) -> Curve:
    """A curve of times through ``(x, seconds)`` points, keeping the shortest where two share an ``x``, and
    never falling as ``x`` grows (a larger buffer is never faster: a time below a smaller buffer's is that
    buffer's, SGLang's TP 4 row at 16 KiB, 3.7 us against 4.8 us at 2 KiB, read as noise)."""
    best: dict[float, float] = {}
    for x, y in points:
        best[x] = min(best.get(x, y), y)
    xs, ys = sorted(best), []
    for x in xs:
        ys.append(max(best[x], ys[-1]) if ys else best[x])
    return Curve(tuple(xs), tuple(ys))


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
        bandwidth=min(record_value("mb0166"), hw.hbm_bandwidth),
        launch_s=record_value("mb0179"),
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
            "the engines' custom all-reduce is SGLang's one-shot/two-shot kernel timed without CUDA graphs (a "
            "launch inside each time), held at its smallest buffer's time below it",
            "a decode step's expert all-to-alls run DeepEP's low-latency kernels at the H800's measured times (the "
            "same CX7 400 Gb/s port per GPU, pure RDMA), scaled by their bytes",
            "a training step's expert all-to-alls across nodes run DeepEP's normal kernels at the H800's measured "
            "bandwidths (the same CX7 400 Gb/s port per GPU); inside a node, where DeepEP's kernels were measured "
            "on the H800 only (its NVLink cut to 200 GB/s), at nccl-tests' all-to-all rate over NVLink 4",
        ))


def _h200(hw: Hardware, dtype: str) -> ClusterRoof:
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
        launch_s=record_value("mb0179"),
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
            "the fabric is the H100's (NVLink 4, one 400 Gb/s port per GPU), its custom all-reduce too; the H200 "
            "record's one all-reduce (mb0093, 482 GB/s) agrees with the H100 sweep's top",
        ))


def _h800(hw: Hardware, dtype: str) -> ClusterRoof:
    """The H800: the H100's die with NVLink cut to 200 GB/s a direction. Its own records are DeepSeek's fp8
    GEMMs (DeepGEMM), DeepEP's all-to-alls and one nccl-tests all-reduce; the rest is the H100's roof."""
    h100 = _h100(get_hardware("h100-sxm"), dtype)
    up, net = hw.link("scale_up").each_way, hw.link("network").each_way
    gemm, sources = h100.gemm, dict(h100.sources)
    if dtype not in ("bf16", "fp16"):  # DeepGEMM's README table, less what EXCLUDED says why
        ids = [i for i in record_ids(category="gemm", gpu=lambda g: str(g).startswith("H800")) if i not in EXCLUDED]
        gemm, sources["gemm"] = _sweep(ids, _gemm_flops).capped(hw.peak_flops(dtype)), tuple(ids)
    # the H100's size-dependence, scaled so its top is the H800's one all-reduce (mb0081), capped at the link
    scale = record_value("mb0081") / h100.nvlink.top
    nvlink = h100.nvlink.scaled(scale).capped(up)
    sources.update(nvlink=(sources["nvlink"][0] + " scaled to mb0081",), all_to_all_nvlink=("mb0094", "mb0081"),
                   all_to_all_port=("mb0100",), ep_nvlink=("mb0094", "mb0095"))
    _, ep_nvlink, _ = ep_normal_rates()
    # DeepEP's in-node all-to-all (mb0094) as a share of the all-reduce curve's top as this roof holds it (capped at
    # the link), so a large buffer's all-to-all runs at DeepEP's measured rate, not at that share of the uncapped
    # all-reduce (153/215 of the 200 GB/s cap, 142 GB/s)
    return replace(
        h100, label=f"{hw.short} calibrated", hardware=hw, peak_flops=hw.peak_flops(dtype), gemm=gemm,
        bandwidth=min(h100.bandwidth, hw.hbm_bandwidth),
        nvlink=nvlink,
        all_to_all_nvlink=min(record_value("mb0094"), up) / nvlink.top, all_to_all_port=min(record_value("mb0100"), net),
        send_nvlink=min(h100.send_nvlink, up), port=min(h100.port, net), sources=sources, gemm_nu=None,
        ep_nvlink=ep_nvlink,
        assumptions=(
            "bf16 matmuls, flash attention, the HBM's STREAM rate and the launch cost are the H100's: the same die",
            *(("a matmul takes the larger of its two times: DeepGEMM's curve holds decode-shaped matmuls of 64 "
               "and 128 rows, so the loss near the ridge is in the curve already",) if h100.gemm_nu is not None else ()),
            "fp8 matmuls are DeepGEMM's block-scaled kernels, DeepSeek's own, over the README's shapes (DeepSeek-V3's "
            "inference shapes)",
            "the NVLink all-reduce follows the H100 sweep's dependence on size, scaled to the one H800 figure "
            "(mb0081, 215 GB/s) and capped at the link's 200 GB/s a direction",
            "all-to-all inside a node runs at DeepEP's dispatch (mb0094, 153 GB/s) on large buffers, a share of that "
            "capped all-reduce curve; across nodes DeepEP's at 64 GPUs (mb0100), its kernels forwarding through NVLink "
            "to the ports; a training step's expert all-to-alls run at DeepEP's own measured rates (mb0094-mb0101)",
            "the network port, one message's latency and a two-GPU copy are the H100's (the same 400 Gb/s NIC), "
            "the copy capped at the H800's link; so are the engines' custom all-reduce times (a small buffer waits on "
            "a launch and two barriers, not on the link), never below a buffer's bytes at the H800's link",
        ))


_BUILDERS = {"a100-sxm-80gb": _a100, "h100-sxm": _h100, "h200-sxm": _h200, "h800-sxm": _h800}
CALIBRATED_CHIPS = tuple(_BUILDERS)
"""The chips with a calibrated cluster roof (their microbenchmarks were gathered)."""


# ------------------------------------------------------------------------------------ fp8 training

QUANTIZATION_RECORDS = ("mbx100", "mbx101", "mbx102", "mbx103", "mbx104", "mbx105")
"""torchao's blockwise fp8 quantization kernels on the H100 (bf16 in, fp8 and scales out): the rate the roofs'
casts run at, as a share of the H100's STREAM triad (mb0166)."""

ROWWISE_GEMM_RECORDS = ("mbx106", "mbx107", "mbx108")
"""FBGEMM's fp8 matmuls with one scale per row, on an H100 limited to 500 W."""


def _lower(a: Curve, b: Curve) -> Curve:
    """The lower of two curves at every point of either (where they cross between points, the points' lower)."""
    xs = sorted(set(a.xs) | set(b.xs))
    return Curve(tuple(xs), tuple(min(a(x), b(x)) for x in xs))


def cast_share() -> float:
    """The share of the STREAM triad's rate (mb0166) the H100's fp8 quantization kernels reach: the median of
    :data:`QUANTIZATION_RECORDS` over it."""
    return float(np.median([record_value(i) for i in QUANTIZATION_RECORDS])) / record_value("mb0166")


def fp8_training_roof(roof: ClusterRoof) -> ClusterRoof:
    """``roof`` (of 'fp8') with what an fp8 training recipe needs beside its per-tensor matmuls (chapter 6,
    appendix C): the chip's bf16 roof of the same kind for the parts the recipes keep in bf16, and, calibrated,
    the rate of the quantization kernels (:func:`cast_share` of the roof's memory-bound bandwidth) and the
    curves of matmuls scaled per row (FBGEMM's, :data:`ROWWISE_GEMM_RECORDS`) and per block (DeepGEMM's, the
    H800's records), each held at or below the per-tensor curve of the same chip: a scaling finer than one per
    tensor adds work to the kernel and never removes any. The datasheet's keeps every fp8 matmul at the peak and
    every cast at the HBM rate: a floor. A roof of another format is returned as it is."""
    if not isinstance(roof, ClusterRoof):
        raise TypeError(f"roof must be a ClusterRoof, got {type(roof).__name__}")
    if roof.dtype != "fp8" or roof.bf16 is not None:
        return roof
    hw = roof.hardware
    bf16 = get_roof(hw, roof.kind, "bf16") if "bf16" in hw.dense_flops else None
    if not roof.calibrated:
        return replace(roof, bf16=bf16)
    peak = hw.peak_flops("fp8")
    deepgemm = [i for i in record_ids(category="gemm", gpu=lambda g: str(g).startswith("H800")) if i not in EXCLUDED]
    curves = {"rowwise": _lower(roof.gemm, _sweep(ROWWISE_GEMM_RECORDS, _gemm_flops).capped(peak)),
              "blockwise": _lower(roof.gemm, _sweep(deepgemm, _gemm_flops).capped(peak))}
    cast = min(cast_share() * roof.bandwidth, hw.hbm_bandwidth)
    grouped = grouped_gemm_curves(peak) if hw.key in ("h100-sxm", "h200-sxm", "h800-sxm") else {}
    sources = dict(roof.sources, cast=QUANTIZATION_RECORDS, rowwise_gemm=ROWWISE_GEMM_RECORDS,
                   blockwise_gemm=tuple(deepgemm), **({"grouped_gemm": GROUPED_GEMM_RECORDS} if grouped else {}))
    assumptions = (
        *roof.assumptions,
        f"fp8 casts (bf16 in, fp8 out) run at {cast_share():.0%} of the memory-bound kernels' rate, the share "
        "torchao's blockwise quantization kernels reached of the STREAM triad on the H100 (mbx100-mbx105); the "
        "per-tensor casts of Transformer Engine and torchao are taken at the same rate",
        "fp8 matmuls scaled per row reach at most FBGEMM's rowwise kernels on a 500 W H100 (mbx106-mbx108), and "
        "per block at most DeepGEMM's on the H800 (the same die), each at most the per-tensor curve",
        *(("the forward products of a block-scaled layout's experts of DeepGEMM's grouped shapes (DeepSeek-V3's: gate "
           "and up 4,096 x 7,168 side by side, down 7,168 x 2,048) run as one grouped kernel at its measured rates "
           "on the H800 (mbx300-mbx309, the same die), read by the rows each expert takes (256 to 8,192); other "
           "shapes, other row counts and the backward products each expert on its own",) if grouped else ()),
    )
    return replace(roof, bf16=bf16, fp8_gemm=curves, cast_bandwidth=cast, sources=sources, assumptions=assumptions,
                   grouped_gemm=grouped)


GROUPED_GEMM_RECORDS = tuple(f"mbx{i}" for i in range(300, 310))
"""DeepGEMM's grouped fp8 matmuls on the H800 (its README at commit 2e7e580): the contiguous layout (mbx300-mbx303,
4 or 8 groups of 8,192 or 4,096 rows) and the masked one (mbx304-mbx309, 1 to 4 groups of 1,024 to 256), each of
DeepSeek-V3's two expert shapes."""


def grouped_gemm_curves(cap: float) -> dict:
    """The block-scaled grouped matmuls of :data:`GROUPED_GEMM_RECORDS` as a roof holds them: for each shape
    ``(n, k)`` the groups share, a curve of FLOP/s against the rows of each group (the best where two records share
    a row count), capped at ``cap``. The contiguous and masked layouts run one persistent kernel over the groups'
    tiles, so their rows read on one curve (4,096 and 8,192 rows a group from the contiguous table, 256 to 1,024
    from the masked one)."""
    out: dict = {}
    for i in GROUPED_GEMM_RECORDS:
        r = record(i)
        m, n, k = r["shape_mnk"]
        out.setdefault((n, k), []).append((float(r["m_per_group"]), record_value(i)))
    return {key: _best_at_each(pts).capped(cap) for key, pts in sorted(out.items())}


# --------------------------------------------------------------- a training step's kernels on Hopper

SWIGLU_RECORDS = (("mbx151", "mbx152", 16384), ("mbx153", "mbx154", 32768))
"""Megatron-Core's fused SwiGLU on the H100 (8,192 tokens): (forward, forward and backward, columns per GPU)."""

CROSS_ENTROPY_RECORD = ("mbx156", 131072)
"""Megatron-Core's fused vocabulary-parallel cross-entropy on the H100 (8,192 tokens, one GPU): forward and
backward over a vocabulary of 131,072."""

CROSS_ENTROPY_BYTES = 36.0
"""Bytes the cluster model counts per logit of the cross-entropy, forward and backward together (about nine fp32
passes over the logits; :mod:`roofline.parallel.cluster`)."""

HOPPER_ATTENTION_KERNELS = ("fa3", "cudnn")
"""The flash-attention kernels besides FlashAttention-2 whose forward and backward speeds were published for the
H100 (the FlashAttention-3 paper's figures): FlashAttention-3 and cuDNN's fused attention (what Transformer
Engine picks on Hopper)."""

_ATTENTION_TOOLS = {"fa3": "FlashAttention-3", "cudnn": "cuDNN"}


def kernel_shares() -> dict:
    """The share of the H100's STREAM triad (mb0166) each kind of memory-bound kernel reaches on the bytes the
    cluster model counts for it, from Megatron-Core's own kernels on the H100 (Liger-Kernel's benchmark data):

    - 'activation forward': a gated activation reads its two inputs and writes one output, 6 bytes a column of
      a token, over :data:`SWIGLU_RECORDS`' forward times (the mean of the two widths);
    - 'activation backward': twice the forward's bytes over the backward's time (forward and backward less
      forward);
    - 'cross-entropy': :data:`CROSS_ENTROPY_BYTES` a logit over :data:`CROSS_ENTROPY_RECORD`'s time."""
    stream = record_value("mb0166")
    fwd, bwd = [], []
    for f, full, cols in SWIGLU_RECORDS:
        tokens = record(f)["tokens"]
        nbytes = 6.0 * cols * tokens
        fwd.append(nbytes / record_value(f))
        bwd.append(2 * nbytes / (record_value(full) - record_value(f)))
    rid, vocab = CROSS_ENTROPY_RECORD
    ce = CROSS_ENTROPY_BYTES * vocab * record(rid)["tokens"] / record_value(rid)
    return {"activation forward": float(np.mean(fwd)) / stream, "activation backward": float(np.mean(bwd)) / stream,
            "cross-entropy": ce / stream}


def _attention_points(tool: str, operation: str, head_dim: int, causal: bool) -> Curve | None:
    ids = record_ids(category="attention_kernel", gpu="H100 SXM5 80GB", operation=operation, head_dim=head_dim,
                     causal=causal, tool=lambda t: str(t).startswith(tool))
    return _sweep(ids, lambda r: float(r["seq_len"])) if ids else None


def hopper_attention_kernels(cap: float) -> dict:
    """Forward-and-backward FLOP/s curves of :data:`HOPPER_ATTENTION_KERNELS` on the H100, by head size and mask,
    from the FlashAttention-3 paper's forward (mb0226-mb0269) and backward (mbx115-mbx150) figures: at each
    sequence length of the backward figure, ``3.5 / (1/forward + 2.5/backward)`` (the benchmarks' count, the
    backward 2.5 times the forward). Published backward speeds are without the causal mask; a causal pass is
    taken at the non-causal one's rate times the ratio of FlashAttention-3's causal to non-causal forward at that
    length and head size (the kernel family whose both forwards were published), and cuDNN's causal forward the
    same way (its causal forward was not transcribed). Head size 64 uses cuDNN's 128 forward. Capped at ``cap``."""
    out: dict = {}
    for kernel, tool in _ATTENTION_TOOLS.items():
        curves = {}
        for hd in (64, 128):
            bwd = _attention_points(tool, "attention backward", hd, False)
            fwd_nc = _attention_points(tool, "attention forward", hd, False) or _attention_points(tool, "attention forward", 128, False)
            fa3_nc = _attention_points("FlashAttention-3", "attention forward", hd, False)
            fa3_c = _attention_points("FlashAttention-3", "attention forward", hd, True)
            if bwd is None or fwd_nc is None or fa3_nc is None or fa3_c is None:
                continue
            for causal in (False, True):
                pts = []
                for L, b in zip(bwd.xs, bwd.ys):
                    ratio = fa3_c(L) / fa3_nc(L) if causal else 1.0
                    f = (fa3_c(L) if kernel == "fa3" else fwd_nc(L) * ratio) if causal else fwd_nc(L)
                    pts.append((L, 3.5 / (1.0 / f + 2.5 / (b * ratio))))
                curves[(hd, causal)] = Curve(tuple(x for x, _ in pts), tuple(y for _, y in pts)).capped(cap)
        out[kernel] = curves
    return out


def training_kernels_roof(roof: ClusterRoof) -> ClusterRoof:
    """A calibrated Hopper roof (the H100, H200 and H800: one die) with its training kernels by name: the
    attention kernels of :func:`hopper_attention_kernels` and the memory-bound kernels' rates of
    :func:`kernel_shares` (each share times the roof's own memory-bound bandwidth, capped at it). Other roofs
    are returned as they are."""
    if not roof.calibrated or roof.hardware.key not in ("h100-sxm", "h200-sxm", "h800-sxm") or roof.kernel_rates:
        return roof
    rates = {k: min(v * roof.bandwidth, roof.bandwidth) for k, v in kernel_shares().items()}
    sources = dict(roof.sources, attention_kernels=("mb0226-mb0269", "mbx115-mbx150"),
                   kernel_rates=tuple(i for f, full, _ in SWIGLU_RECORDS for i in (f, full)) + (CROSS_ENTROPY_RECORD[0],))
    assumptions = (
        *roof.assumptions,
        "flash attention by FlashAttention-3 or cuDNN runs a causal backward pass at the non-causal rate times "
        "FlashAttention-3's causal-to-non-causal forward ratio (no causal backward was published)",
        "a gated activation and the cross-entropy run at the rates Megatron-Core's fused kernels reached on the H100, "
        "as shares of the STREAM triad; a plain activation (GeLU, squared ReLU) at the gated one's; the norms, "
        "residual adds and rotary embeddings at the STREAM rate",
    )
    return replace(roof, attention_kernels=hopper_attention_kernels(roof.peak_flops if roof.dtype != "fp8"
                                                                    else roof.hardware.peak_flops("bf16")),
                   kernel_rates=rates, sources=sources, assumptions=assumptions)


def training_kernel_constants(hardware: Hardware | str = "h100-sxm") -> tuple:
    """Appendix C: what fp8 training on a Hopper chip adds to its calibrated roof, as :class:`RoofConstant`
    entries with their records: the best fp8 matmul, the quantization kernels' share of the STREAM rate,
    cuDNN's causal attention at 8,192 tokens (head 128), and the shares of Megatron-Core's fused SwiGLU
    (forward, backward) and cross-entropy."""
    hw = get_hardware(hardware)
    bf16, fp8 = get_roof(hw, "calibrated", "bf16"), get_roof(hw, "calibrated", "fp8")
    shares = kernel_shares()
    swiglu = tuple(i for f, full, _ in SWIGLU_RECORDS for i in (f, full))
    attention = tuple(record_ids(category="attention_kernel", gpu="H100 SXM5 80GB", head_dim=128, causal=False,
                                 tool=lambda t: str(t).startswith("cuDNN"))) + ("mb0241", "mb0247")
    rows = (
        ("best fp8 matmul (per tensor)", fp8.gemm.top, "FLOP/s", tuple(fp8.sources.get("gemm", ()))),
        ("fp8 casts, share of the STREAM rate", cast_share(), "%", QUANTIZATION_RECORDS),
        ("cuDNN attention, causal, 8,192 tokens (fwd+bwd)", bf16.attention_kernels["cudnn"][(128, True)](8192),
         "FLOP/s", attention),
        ("fused SwiGLU forward, share of the STREAM rate", shares["activation forward"], "%", swiglu),
        ("fused SwiGLU backward, share of the STREAM rate", shares["activation backward"], "%", swiglu),
        ("fused cross-entropy, share of the STREAM rate", shares["cross-entropy"], "%", (CROSS_ENTROPY_RECORD[0],)),
    )
    return tuple(RoofConstant(name, float(value), unit, tuple(ids),
                              tuple(dict.fromkeys(record(i)["source"]["title"] for i in ids)))
                 for name, value, unit, ids in rows)


# ---------------------------------------------------------------------------------------- which roof


def _calibrated_chips(scope: str) -> tuple:
    return CALIBRATED_CHIPS if scope == "cluster" else (MEASURED_CHIP,)


def roof_kind(hardware: Hardware | str, kind: str | None = None, *, scope: str = "cluster", carry: bool = False) -> str:
    """The kind of roof ``hardware`` answers with at ``scope``: ``kind`` as given, or (``None``) 'calibrated' where
    the chip has a calibrated roof at that scope and 'datasheet' elsewhere. A calibrated roof asked of a chip
    without one is refused, naming the chips that have one (at the 'chip' scope, ``carry=True`` assumes the
    measured chip's efficiencies instead)."""
    if scope not in SCOPES:
        raise unknown_name("scope", scope, SCOPES)
    hw = get_hardware(hardware)
    chips = _calibrated_chips(scope)
    if kind is None:
        return "calibrated" if hw.key in chips else "datasheet"
    if kind not in ROOF_KINDS:
        raise unknown_name("roof", kind, ROOF_KINDS)
    if kind == "calibrated" and hw.key not in chips and not (scope == "chip" and carry):
        names = [get_hardware(k).short for k in chips]
        names = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
        basis = (f"microbenchmarks were gathered for the {names} only" if scope == "cluster" else
                 f"one GPU's kernels were measured on the {names} only (carrying its efficiencies over to another "
                 "chip is an assumption, made only when asked for)")
        raise ValueError(f"roof 'calibrated' has no data for the {hw.short}: {basis}; use the datasheet roof")
    return kind


def get_roof(hardware: Hardware | str, kind: str | None = None, dtype: str = "bf16", *, scope: str = "cluster",
             launch: str = "graph", carry: bool = False):
    """The roof of ``hardware``, of ``kind`` (:data:`~roofline.core.cluster_roof.ROOF_KINDS`; ``None``: the
    calibrated one where the chip has it, :func:`roof_kind`), its matmuls in ``dtype``, at ``scope``:

    - ``'cluster'``: a :class:`~roofline.core.cluster_roof.ClusterRoof`, the datasheet's
      (:func:`~roofline.core.cluster_roof.datasheet_cluster_roof`) or the chip's calibrated one;
    - ``'chip'``: the datasheet's is the :class:`~roofline.core.hardware.Hardware` itself (every format's
      peak, as :func:`~roofline.core.roof.predict` takes it); the calibrated one is the measured chip's
      :class:`~roofline.core.roof.CalibratedRoof` with kernels launched ``launch`` ('graph' or 'eager'),
      carried over to another chip's datasheet only with ``carry=True`` (an assumption, labelled as one).
    """
    hw = get_hardware(hardware)
    kind = roof_kind(hw, kind, scope=scope, carry=carry)
    if scope == "chip":
        if kind == "datasheet":
            return hw
        roof = _measured_chip_roof(launch)
        return roof if hw.key == MEASURED_CHIP else roof.carried_to(hw, MEASURED_CHIP)
    hw.peak_flops(dtype)  # a format the chip has no peak for is refused here, naming the formats it has
    if kind == "datasheet":
        return fp8_training_roof(datasheet_cluster_roof(hw, dtype))
    if hw is get_hardware(hw.key):
        return _cached(hw.key, dtype)
    return fp8_training_roof(training_kernels_roof(_BUILDERS[hw.key](hw, dtype)))


@lru_cache(maxsize=16)
def _cached(key: str, dtype: str) -> ClusterRoof:
    return fp8_training_roof(training_kernels_roof(_BUILDERS[key](get_hardware(key), dtype)))


@lru_cache(maxsize=4)
def _measured_chip_roof(launch: str) -> CalibratedRoof:
    record_ = load_measurement()
    return calibrated_roof(record_, load_layers(), mode=launch, label=f"{get_hardware(MEASURED_CHIP).short} calibrated ({launch})")


# ------------------------------------------------------------------------------------ for appendix C's page

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

@dataclass(frozen=True)
class RoofConstant:
    """One constant of a calibrated roof: its value (SI units, a share for '%'), and the records it came from
    with their sources' titles (a source that is not a record, such as the H200's own measurement, by name)."""

    name: str
    value: float
    unit: str
    records: tuple
    sources: tuple


def _constant_value(roof: ClusterRoof, attr: str) -> float:
    if attr == "gemm":
        return roof.gemm.top
    if attr == "attention":
        return roof.attention_curve(128, True).top
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
        ids = [i for e in entries for i in source_records(e)]
        if attr == "attention" and not ids:
            gpu = {"a100-sxm-80gb": "A100 SXM4 80GB"}.get(roof.hardware.key, "H100 SXM5 80GB")
            ids = record_ids(category="attention_kernel", gpu=gpu, operation="attention forward+backward",
                       tool=lambda t: t.startswith("FlashAttention-2"))
        titles = tuple(dict.fromkeys(record(i)["source"]["title"] for i in ids)) or tuple(entries)
        out.append(RoofConstant(name, _constant_value(roof, attr), unit, tuple(ids), titles))
    return tuple(out)

