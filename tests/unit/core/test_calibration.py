"""roofline.core.calibration: each calibrated roof is its records (capped at the datasheet), the nu fit, the
constants appendix C tabulates, and get_roof, the one function that gives a roof (its default and its one refusal)."""

from __future__ import annotations

import pytest

from roofline.core.calibration import (CALIBRATED_CHIPS, EXCLUDED, ROOF_QUANTITIES, calibrated_roof, get_roof,
                                       measured_roof, roof_constants, roof_kind)
from roofline.core.cluster_roof import ClusterRoof, datasheet_cluster_roof
from roofline.core.hardware import get_hardware
from roofline.core.records import microbenchmarks, record
from roofline.core.roof import CalibratedRoof


def test_each_calibration_constant_is_its_record():
    a100 = get_roof("a100-sxm-80gb", "calibrated", "fp16")
    assert a100.bandwidth == pytest.approx(1.70e12) and record("mb0171")["operation"] == "STREAM Triad"
    assert a100.launch_s == pytest.approx(2.62e-6) and record("mb0177")["category"] == "launch_overhead"
    assert a100.port == pytest.approx(24e9) and "200Gb/s" in record("mb0058")["interconnect"]
    assert a100.port * 8 == pytest.approx(record("mb0054")["value"] * 1e9)  # the DGX A100's 192 GB/s over 8 ports
    assert a100.gemm(2 * 8192 ** 3) == pytest.approx(253.7e12) and record("mb0129")["shape_mnk"] == [8192] * 3
    assert a100.nvlink(2 ** 30) == pytest.approx(228.1e9) and record("mb0045")["message_size_bytes"] == 2 ** 30
    assert a100.attention[(128, True)](4096) == pytest.approx(173e12)
    h100 = get_roof("h100-sxm", "calibrated")
    assert h100.bandwidth == pytest.approx(2.97e12) and h100.port == pytest.approx(48e9)
    assert h100.gemm(2 * 4096 ** 3) == pytest.approx(788.72e12)


@pytest.mark.parametrize("chip", CALIBRATED_CHIPS)
def test_no_calibrated_rate_beats_the_datasheet(chip):
    cal, sheet = get_roof(chip, "calibrated"), datasheet_cluster_roof(chip)
    assert cal.gemm.top <= sheet.peak_flops and cal.bandwidth <= sheet.bandwidth
    assert cal.nvlink.top <= sheet.nvlink.top and cal.port <= sheet.port and cal.send_nvlink <= sheet.send_nvlink
    assert all(c.top <= sheet.peak_flops for c in cal.attention.values())
    assert cal.launch_s > 0 and cal.latency_s > 0


@pytest.mark.parametrize("chip", CALIBRATED_CHIPS)
def test_every_source_named_is_a_record_or_the_h200_measurement(chip):
    roof = get_roof(chip, "calibrated")
    ids = microbenchmarks()
    for quantity, names in roof.sources.items():
        for name in names:
            first = name.split("-")[0]
            assert first in ids or name.startswith(("h200-2026", "FlashAttention")), (quantity, name)
    for rid in EXCLUDED:
        assert rid in ids
    # no end-to-end result among the records the roofs read
    assert all(r["category"] not in ("training", "inference") for r in ids.values())


def test_a_chip_without_records_is_refused_by_name():
    with pytest.raises(ValueError, match="roof .calibrated. has no data for the V100: microbenchmarks were gathered "
                                         "for the A100 80GB, H100 SXM, H200 and H800 SXM only; use the datasheet roof"):
        get_roof("v100-sxm2", "calibrated")


def test_the_h800_roof_is_the_h100_with_its_own_links_and_deepseeks_fp8_matmuls():
    h800, h100 = get_roof("h800-sxm", "calibrated"), get_roof("h100-sxm", "calibrated")
    # the same die: bf16 matmuls, attention, HBM and launches are the H100's records
    assert h800.gemm == h100.gemm and h800.bandwidth == h100.bandwidth and h800.launch_s == h100.launch_s
    # its NVLink: the one H800 all-reduce (215 GB/s) is above the cut link's 200 GB/s a direction, so capped
    assert record("mb0081")["value"] == 215 and h800.nvlink.top == pytest.approx(200e9)
    assert h800.send_nvlink == pytest.approx(200e9)  # the H100's 396 GB/s copy cannot pass the H800's link
    # DeepEP: 153 GB/s dispatch inside a node, a share of the all-reduce curve as the roof holds it (capped at
    # 200 GB/s), so that an 8-GPU all-to-all of a large buffer runs at DeepEP's 153 GB/s; at 153/215 of the cap it
    # ran at 142 GB/s, below the record it came from (issue 52). 51 GB/s at 64 GPUs, capped at the 50 GB/s NIC
    assert record("mb0094")["value"] == 153 and h800.all_to_all_nvlink == pytest.approx(153 / 200)
    assert h800.bus_bandwidth("all_to_all", 8, 1e9, 8) == pytest.approx(153e9)
    assert record("mb0100")["n_gpus"] == 64 and h800.all_to_all_port == pytest.approx(50e9)
    fp8 = get_roof("h800-sxm", "calibrated", "fp8")
    assert record("mb0159")["shape_mnk"] == [4096, 7168, 16384]
    assert fp8.gemm(2 * 4096 * 7168 * 16384) == pytest.approx(1520e12)  # DeepGEMM's best row
    # two shapes of the same FLOPs (64 x 4,096 x 7,168 and 128 x 7,168 x 2,048): the curve keeps the faster
    assert fp8.gemm(2 * 64 * 4096 * 7168) == pytest.approx(510e12)
    # mb0160, 4,096 x 4,096 x 7,168, corrected to its own row's quote (1,410 TFLOP/s), is on the curve
    assert "mb0160" in fp8.sources["gemm"] and fp8.gemm(2 * 4096 * 4096 * 7168) == pytest.approx(1410e12)
    assert not {"mb0158", "mb0162"} & set(fp8.sources["gemm"])


def test_a_bidirectional_copy_counts_half_each_way():
    """nvbandwidth's SM-copy bidirectional test reports the bytes of both directions over the kernel's time, so the
    A100's 423 GB/s (mb0279) is 211.5 GB/s each way, below its NVLink's 300 GB/s; the H200's one-way copy engine
    write (mb0281, the H100's proxy) counts whole."""
    from roofline.core.calibration import one_way

    assert "bidirectional" in record("mb0279")["tool"] and record("mb0279")["value"] == 423
    assert one_way("mb0279") == pytest.approx(211.5e9)
    assert one_way("mb0281") == pytest.approx(396.4e9)
    assert get_roof("a100-sxm-80gb", "calibrated").send_nvlink == pytest.approx(211.5e9)
    with pytest.raises(ValueError, match="'mb0060' is not a point-to-point copy"):
        one_way("mb0060")


def test_nu_is_fitted_to_decode_shaped_fp8_matmuls_only_and_narrows_their_spread():
    from roofline.core.calibration import NU_CLOSENESS, NU_GRID, fit_gemm_nu, gemm_nu_points

    fit = fit_gemm_nu()
    points = gemm_nu_points()
    assert all(p.rows <= 256 for p in points)
    assert {record(p.record)["gpu"].split()[0] for p in points} == {"H100", "H800"}
    assert {p.record for p in fit.points} == {p.record for p in points if p.closeness >= NU_CLOSENESS}
    assert len(fit.points) >= 10 and not any(p.record in EXCLUDED for p in fit.points)
    assert NU_GRID[0] < fit.nu < NU_GRID[1]
    assert fit.rms_log < fit.rms_log_max  # the join prices them better than the larger of the two
    # the fitted exponent is the grid's best: a step either side is no better
    import numpy as np

    for nu in (fit.nu - NU_GRID[2], fit.nu + NU_GRID[2]):
        spread = float(np.sqrt(np.mean([np.log(p.measured_s / p.priced(nu)) ** 2 for p in fit.points])))
        assert spread >= fit.rms_log - 1e-12


def test_a_vllm_record_by_hand():
    """vLLM's 128 x 43,008 x 5,376 fp8 matmul on an H100 (647.3 TFLOP/s): its weights are 231 MB, so at the
    STREAM rate it cannot take under 78 microseconds; it took 91.4."""
    from roofline.core.calibration import gemm_nu_points

    r = record("mbx008")
    assert r["shape_mnk"] == [128, 43008, 5376] and r["value"] == pytest.approx(647.281778)
    p = next(p for p in gemm_nu_points() if p.record == "mbx008")
    assert p.measured_s == pytest.approx(2 * 128 * 43008 * 5376 / 647.281778e12)
    assert p.memory_s == pytest.approx((43008 * 5376 + 128 * 5376 + 2 * 128 * 43008) / 2.97e12)
    assert p.measured_s > p.priced(None)


@pytest.mark.parametrize("chip,joined", [("h100-sxm", True), ("h200-sxm", True), ("h800-sxm", False)])
def test_which_roofs_join_and_say_so(chip, joined):
    from roofline.core.calibration import fit_gemm_nu

    fp8, bf16 = get_roof(chip, "calibrated", "fp8"), get_roof(chip, "calibrated", "bf16")
    assert bf16.gemm_nu is None
    assert fp8.gemm_nu == (fit_gemm_nu().nu if joined else None)
    said = " ".join(fp8.assumptions)
    assert ("joined with nu" in said) == joined and ("larger of its two times" in said) == (not joined)


def test_roof_constants_are_the_roofs_own_values_with_the_records_they_came_from():
    roof = get_roof("a100-sxm-80gb", "calibrated", "fp16")
    consts = {c.name: c for c in roof_constants(roof)}
    assert [c.name for c in roof_constants(roof)] == [q[0] for q in ROOF_QUANTITIES]
    assert consts["memory-bound kernels"].value == pytest.approx(1.7e12)  # STREAM Triad, 1.70 TB/s
    assert consts["memory-bound kernels"].records == ("mb0171",)
    assert consts["memory-bound kernels"].sources == ("Azure AI Benchmarking Guide - results",)
    assert consts["best matmul"].value == pytest.approx(256.5e12)  # the sweep's best, under the 312 TFLOP/s peak
    assert consts["latency of one message"].value == pytest.approx(44.8e-6 / 14)
    # a range of records is listed record by record; the attention curve's records are its benchmark's
    assert len(consts["all-reduce in a node, largest buffer"].records) == 24
    assert all(r.startswith("mb") for r in consts["best flash attention (fwd+bwd, causal, head 128)"].records)


def test_the_h100s_attention_constant_names_its_flashattention_2_records():
    consts = {c.name: c for c in roof_constants(get_roof("h100-sxm", "calibrated", "bf16"))}
    att = consts["best flash attention (fwd+bwd, causal, head 128)"]
    assert att.records and all(record(r)["tool"].startswith("FlashAttention-2") for r in att.records)
    assert att.value <= get_roof("h100-sxm", "calibrated", "bf16").peak_flops


def test_the_h200s_fp8_matmuls_are_its_own_records():
    """The H200 record's per-call fp8 sweep (torch._scaled_mm, n = k = 8,192) of 1,024 rows and more sets the
    H200's fp8 curve: its first point is the 1,024-row product, as the record gives it."""
    from roofline.core.records import load_measurement

    h200 = get_roof("h200-sxm", "calibrated", "fp8")
    fp8 = sorted((g for g in load_measurement().gemm_fp8_per_call if g.m >= 1024), key=lambda g: g.flops)
    assert h200.gemm.xs[0] == fp8[0].flops == 2 * 1024 * 8192 * 8192
    assert h200.gemm.ys[0] == pytest.approx(fp8[0].flops_per_s)
    assert h200.sources["gemm"] == ("h200-2026-11-29 gemms",)
    assert not any("reach the H100's" in a for a in h200.assumptions if "fp8" in a)


@pytest.mark.parametrize("chip", ["h100-sxm", "h200-sxm", "h800-sxm"])
def test_a_prefill_runs_at_flash_attentions_forward_rate(chip):
    """FlashAttention-3's forward pass on the H100 (its benchmark) is faster per FLOP than FlashAttention-2's
    forward and backward together, and no faster than the bf16 peak."""
    roof = get_roof(chip, "calibrated", "bf16")
    assert roof.attention_forward
    flops, seq = 1e12, 4096
    fwd = roof.flash_forward_time(flops, seq)
    both = roof.flash_time(flops, seq)
    assert fwd < both
    assert fwd >= flops / get_hardware(chip).peak_flops("bf16")


def test_measured_roof(rec):
    roof = measured_roof(rec)
    assert roof.kind == "measured" and roof.dtype == "bf16"
    assert roof.bandwidth == rec.bandwidth["copy"].best_bytes_per_s  # copy beat read
    assert roof.peak_flops == pytest.approx(786.19e12, rel=1e-4)
    assert roof.ridge_point == pytest.approx(184.1, abs=0.1)
    assert measured_roof(rec, "fp8").peak_flops == pytest.approx(1385.1e12, rel=1e-4)
    assert measured_roof(rec, bandwidth="read").bandwidth == rec.bandwidth["read"].best_bytes_per_s
    with pytest.raises(ValueError, match="bandwidth must be one of"):
        measured_roof(rec, bandwidth="fastest")
    with pytest.raises(ValueError, match="no fp16 matmuls"):
        measured_roof(rec, "fp16")
    with pytest.raises(TypeError, match="record must be a Measurement"):
        measured_roof({"env": {}})


def test_the_measured_roof_is_the_best_matmul_and_the_best_bandwidth(rec):
    roof = measured_roof(rec)
    assert roof.peak_flops == max(g.best_flops_per_s for g in (*rec.gemm_graph, *rec.gemm_per_call) if g.dtype == "bf16")
    assert roof.bandwidth == max(rec.bandwidth["copy"].best_bytes_per_s, rec.bandwidth["read"].best_bytes_per_s)
    assert roof.ridge_point == roof.peak_flops / roof.bandwidth
    assert measured_roof(rec, "fp8").peak_flops == max(g.best_flops_per_s for g in rec.gemm_fp8_per_call)
    g = rec.gemm_graph[0]
    assert g.intensity == g.flops / g.min_bytes and g.flops_per_s == g.flops / g.seconds
    copy = rec.bandwidth["copy"]
    assert copy.bytes_per_s == copy.bytes / copy.seconds
    run = rec.decode[-1]
    assert run.tokens_per_s == run.batch / run.seconds_graph


def test_the_fastest_product_at_a_row_count_sets_the_calibrated_rate(rec):
    cal = calibrated_roof(rec)
    for m in (1, 128, 4096):
        g = rec.fastest_gemm(m)
        assert g.m == m and float(cal.matmul_flops_per_s(m)) == pytest.approx(g.flops_per_s)
        assert g.bytes_per_s == pytest.approx(g.min_bytes / g.seconds)
    # a batch-1 product reads about one byte per FLOP, so its FLOP/s is its bandwidth in bytes/s
    assert rec.fastest_gemm(1).flops_per_s == pytest.approx(rec.fastest_gemm(1).bytes_per_s, rel=0.01)
    with pytest.raises(ValueError, match=r"m must be a row count of the graph-timed sweep \(1, 2, 4"):
        rec.fastest_gemm(3)


def test_the_measured_bandwidth_is_the_faster_of_copy_and_read(rec):
    """On the H200 the copy benchmark (4.27 TB/s) beat the read (4.11 TB/s); the write (3.36 TB/s) is not a
    candidate: the roof takes the best a kernel was seen to stream, not the first or the slowest."""
    copy_, read = rec.bandwidth["copy"].best_bytes_per_s, rec.bandwidth["read"].best_bytes_per_s
    assert copy_ > read > rec.bandwidth["write"].best_bytes_per_s
    assert measured_roof(rec).bandwidth == copy_
    for name in ("copy", "read", "write"):
        assert measured_roof(rec).bandwidth >= measured_roof(rec, bandwidth=name).bandwidth


# --- get_roof: one function for every roof, its default and its one refusal -------------------------------------

ONE_REFUSAL = ("roof 'calibrated' has no data for the B200: microbenchmarks were gathered for the A100 80GB, "
               "H100 SXM, H200 and H800 SXM only; use the datasheet roof")


def test_get_roof_gives_the_calibrated_roof_where_the_chip_has_one_and_the_datasheet_elsewhere():
    assert roof_kind("h100-sxm") == "calibrated" and roof_kind("b200") == "datasheet"
    h100, b200 = get_roof("h100-sxm"), get_roof("b200")
    assert isinstance(h100, ClusterRoof) and h100.kind == "calibrated" and h100.dtype == "bf16"
    assert b200.kind == "datasheet" and b200.peak_flops == get_hardware("b200").peak_flops("bf16")
    assert get_roof("h100-sxm", "calibrated") is h100  # built once per chip and format
    assert get_roof("h100-sxm", "calibrated", "fp8").peak_flops == get_hardware("h100-sxm").peak_flops("fp8")
    assert get_roof("h100-sxm", "datasheet") == datasheet_cluster_roof("h100-sxm")
    assert set(CALIBRATED_CHIPS) == {"a100-sxm-80gb", "h100-sxm", "h200-sxm", "h800-sxm"}


def test_get_roof_refuses_one_way_and_names_what_it_knows():
    with pytest.raises(ValueError) as refused:
        get_roof("b200", "calibrated")
    assert str(refused.value) == ONE_REFUSAL
    with pytest.raises(KeyError, match="unknown roof 'calibrate'; did you mean 'calibrated'"):
        get_roof("h100-sxm", "calibrate")
    with pytest.raises(KeyError, match="unknown scope 'node'"):
        get_roof("h100-sxm", scope="node")
    with pytest.raises(ValueError, match="has no dense fp4 peak in the catalog"):
        get_roof("h100-sxm", "calibrated", "fp4")


def test_the_chip_scope_is_the_datasheet_itself_or_our_h200_measurement():
    h100 = get_hardware("h100-sxm")
    assert get_roof(h100, "datasheet", scope="chip") is h100  # every format's peak, as predict takes it
    h200 = get_roof("h200-sxm", scope="chip")  # the default: the measured chip's calibrated roof
    assert isinstance(h200, CalibratedRoof) and h200.label == "H200 calibrated (graph)" and h200.mode == "graph"
    assert get_roof("h200-sxm", "calibrated", scope="chip", launch="eager").mode == "eager"
    assert roof_kind("h100-sxm", scope="chip") == "datasheet"
    with pytest.raises(ValueError, match="one GPU's kernels were measured on the H200 only"):
        get_roof("h100-sxm", "calibrated", scope="chip")
    carried = get_roof("h100-sxm", "calibrated", scope="chip", carry=True)
    assert carried.assumption == "H200's measured efficiencies carried over to H100 SXM's datasheet"
    assert carried.bandwidth == pytest.approx(h200.bandwidth * 3.35 / 4.8)


def test_the_command_line_says_the_packages_refusal_with_its_flag():
    import contextlib
    import io
    import json as _json

    from roofline.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = main(["train", "llama-3-8b", "--gpu", "b200", "--seq", "4096", "--nodes", "2", "--tp", "2",
                       "--roof", "calibrated", "--json"])
    error = _json.loads(out.getvalue())
    assert status == 2 and error["argument"] == "--roof" and error["error"] == "--" + ONE_REFUSAL


# ------------------------------------------------------------------ a training step's kernels on Hopper (issue 48)


def test_the_kernel_shares_are_the_bytes_the_model_counts_over_the_records_times():
    """Megatron-Core's SwiGLU forward at 16,384 columns of 8,192 tokens: 6 bytes a column of a token (two bf16 inputs
    read, one written) over 0.433 ms; its backward twice those bytes over the forward-and-backward time less the
    forward; the cross-entropy 36 bytes a logit of 8,192 x 131,072 over 18.2 ms; each over the STREAM triad."""
    from roofline.core.calibration import kernel_shares
    from roofline.core.records import record_value

    stream = record_value("mb0166")
    f16 = 6 * 16384 * 8192 / record_value("mbx151")
    f32 = 6 * 32768 * 8192 / record_value("mbx153")
    b16 = 12 * 16384 * 8192 / (record_value("mbx152") - record_value("mbx151"))
    b32 = 12 * 32768 * 8192 / (record_value("mbx154") - record_value("mbx153"))
    shares = kernel_shares()
    assert shares["activation forward"] == pytest.approx((f16 + f32) / 2 / stream)
    assert shares["activation backward"] == pytest.approx((b16 + b32) / 2 / stream)
    assert shares["cross-entropy"] == pytest.approx(36 * 8192 * 131072 / record_value("mbx156") / stream)
    assert 0.2 < shares["activation backward"] < shares["activation forward"] < shares["cross-entropy"] < 1
    h100 = get_roof("h100-sxm", "calibrated")
    assert h100.kernel_rates["cross-entropy"] == pytest.approx(shares["cross-entropy"] * h100.bandwidth)
    # a kind the roof holds no rate for runs at the memory-bound kernels' bandwidth, and the A100 holds none
    assert h100.kernel_time("norm", 1e9) == pytest.approx(1e9 / h100.bandwidth)
    assert get_roof("a100-sxm-80gb", "calibrated", "fp16").kernel_rates == {}


def test_the_hopper_attention_kernels_join_the_papers_forward_and_backward():
    """cuDNN at 8,192 tokens, head 128, no mask: forward 600 TFLOP/s (mb0268), backward 518 (FlashAttention-3
    paper, Figure 6): 3.5 / (1/600 + 2.5/518) = 539 TFLOP/s for the benchmarks' forward-and-backward count."""
    from roofline.core.records import record_value

    h100 = get_roof("h100-sxm", "calibrated")
    cudnn = h100.attention_kernels["cudnn"][(128, False)]
    assert cudnn(8192) == pytest.approx(3.5 / (1 / 600e12 + 2.5 / 518e12), rel=1e-9)
    assert record_value("mb0268") == 600e12
    # causal: both passes at the non-causal rates times FlashAttention-3's causal-to-plain forward ratio
    ratio = record_value("mb0247") / record_value("mb0241")  # 602 / 646 at 8,192, head 128
    assert h100.attention_kernels["cudnn"][(128, True)](8192) == pytest.approx(cudnn(8192) * ratio, rel=1e-9)
    # faster than FlashAttention-2 at every length the figures share; the default kernel stays FlashAttention-2
    for L in (1024, 4096, 16384):
        assert h100.attention_kernels["fa3"][(128, True)](L) > h100.attention[(128, True)](L)
    flops = 1e15
    assert h100.flash_time(flops, 8192) == h100.flash_time(flops, 8192, kernel=None)
    assert h100.flash_time(flops, 8192, kernel="cudnn") < h100.flash_time(flops, 8192)


def test_a_flash_kernel_is_named_only_where_flash_attention_runs():
    from roofline.core.checks import UnknownNameError
    from roofline.parallel.cluster import TrainLayout, check_layout

    with pytest.raises(UnknownNameError, match="unknown attention_kernel 'fa4'"):
        check_layout("llama-3.1-8b", TrainLayout(seq=4096, attention_kernel="fa4"))
    with pytest.raises(ValueError, match="give attention='flash' with it"):
        check_layout("llama-3.1-8b", TrainLayout(seq=4096, attention="standard", attention_kernel="cudnn"))
