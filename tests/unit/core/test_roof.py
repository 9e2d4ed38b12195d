"""The roofline's one room: roofs, the three timing rules, formats carried by the work, the calibrated roof."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import roofline as rl
from roofline import measured as M
from roofline.core.hardware import get_hardware
import roofline.workloads.memory
from roofline.core.calibration import calibrated_roof, get_roof
from roofline.core.records import MeasurementError, decode_attention_bytes, load_layers, load_measurement, parse_measurement


@pytest.fixture(scope="module")
def cal(rec):
    return calibrated_roof(rec, load_layers())


# --- the three rules --------------------------------------------------------------------------------

def test_step_rule_is_the_text_max_over_the_whole_step(h100):
    step = rl.decode_step("llama-3-8b")
    p = rl.predict(step, h100)
    assert p.timing == "step"
    # 16.06 GB / 3.35 TB/s: chapter 1's 4.79 ms, computed from the totals
    assert p.time == step.bytes / 3.35e12
    assert p.time == rl.predict(step.total, h100).time


def test_kernel_rule_sums_each_kernels_own_max(h100):
    step = rl.prefill("llama-3-8b", 2048, accounting="refined")
    p = rl.predict(step, h100, timing="kernel")
    by_hand = sum(max(o.flops / h100.peak_flops("bf16"), o.bytes / h100.hbm_bandwidth) for o in step.ops)
    assert p.time == pytest.approx(by_hand, rel=1e-12)
    serial = rl.predict(step, h100, timing="serial")
    assert serial.time == pytest.approx(sum(o.flops / h100.peak_flops("bf16") + o.bytes / h100.hbm_bandwidth
                                            for o in step.ops), rel=1e-12)


def test_launch_latency_is_a_floor_per_kernel(h100):
    step = rl.decode_step("llama-3-8b", accounting="refined")
    launches = sum(o.count for o in step.ops)
    # with a launch of one second every kernel takes exactly its launches
    assert rl.predict(step, h100, timing="kernel", launch=1.0).time == pytest.approx(launches)
    assert rl.predict(step, h100, timing="serial", launch=1.0).time == pytest.approx(
        launches + rl.predict(step, h100, timing="serial").time)


@settings(max_examples=40, deadline=None)
@given(batch=st.integers(1, 4096), context=st.integers(0, 65_536), launch=st.floats(0, 1e-4),
       gpu=st.sampled_from(["h100-sxm", "a100-sxm-80gb", "h200-sxm", "mi300x"]),
       accounting=st.sampled_from(["text", "refined"]), attention=st.sampled_from(["flash", "explicit"]))
def test_step_at_most_kernel_at_most_serial(batch, context, launch, gpu, accounting, attention):
    opts = {"attention": attention} if accounting == "refined" else {}
    for work in (rl.decode_step("llama-3-8b", batch, context, accounting=accounting, **opts),
                 rl.prefill("llama-3-8b", max(context, 1), batch, accounting=accounting, **opts)):
        t = [rl.predict(work, gpu, timing=r, launch=launch).time for r in rl.TIMINGS]
        assert t[0] <= t[1] * (1 + 1e-12) and t[1] <= t[2] * (1 + 1e-12)


def test_rules_hold_on_the_calibrated_roof_and_on_a_sweep(cal):
    b = np.array([1, 16, 256])[None, :]
    c = np.array([0, 2048, 32768])[:, None]
    step = rl.decode_step("llama-3-8b", b, c, accounting="refined")
    t = [np.asarray(rl.predict(step, cal, timing=r).time) for r in rl.TIMINGS]
    assert t[0].shape == (3, 3)
    assert np.all(t[0] <= t[1]) and np.all(t[1] <= t[2])


def test_overlap_keeps_its_old_names(h100):
    step = rl.decode_step("llama-3-8b", 64)
    assert rl.predict(step, h100, overlap="perfect").time == rl.predict(step, h100, timing="step").time
    assert rl.predict(step, h100, overlap="none").time == rl.predict(step, h100, timing="serial").time


@pytest.mark.parametrize("kwargs, message", [
    ({"timing": "fastest"}, "timing must be one of 'step', 'kernel', 'serial'"),
    ({"overlap": "some"}, "overlap must be 'perfect' or 'none'"),
    ({"overlap": "none", "timing": "kernel"}, "overlap='none' means timing='serial'"),
    ({"launch": -1e-6}, "launch must be"),
])
def test_bad_rules_are_named(h100, kwargs, message):
    with pytest.raises(ValueError, match=message):
        rl.predict(rl.decode_step("llama-3-8b"), h100, **kwargs)


# --- formats ---------------------------------------------------------------------------------------

def test_fp8_work_is_timed_against_the_fp8_peak(h100):
    fp8 = rl.decode_step("llama-3-8b", 4096, dtype="fp8")
    p = rl.predict(fp8, "h100-sxm")
    assert p.compute_time == pytest.approx(fp8.flops / h100.peak_flops("fp8"))
    # the same work with bf16 math is twice as slow where compute binds
    bf16 = rl.predict(rl.decode_step("llama-3-8b", 4096, weights_dtype="fp8", kv_dtype="fp8"), "h100-sxm")
    assert bf16.compute_time == pytest.approx(h100.peak_flops("fp8") / h100.peak_flops("bf16") * p.compute_time)
    assert 1.99 < bf16.compute_time / p.compute_time < 2.01


def test_a_dtype_that_conflicts_with_the_work_is_an_error_naming_both():
    with pytest.raises(ValueError, match=r"dtype='bf16' conflicts with the work, which computes in 'fp8'"):
        rl.predict(rl.decode_step("llama-3-8b", dtype="fp8"), "h100-sxm", dtype="bf16")
    with pytest.raises(ValueError, match="computes in fp8 but the roof 'H100 SXM' is a bf16 roof"):
        rl.predict(rl.decode_step("llama-3-8b", dtype="fp8"), rl.as_roof(rl.get_hardware("h100-sxm"), "bf16"))


def test_a_format_the_chip_lacks_is_a_clear_error():
    with pytest.raises(ValueError, match="A100 SXM4 80 GB has no dense fp8 peak"):
        rl.predict(rl.decode_step("llama-3-8b", dtype="fp8"), "a100-sxm-80gb")


def test_weight_only_int4_reads_half_a_byte_and_multiplies_in_bf16():
    m = rl.load_model("llama-3-8b")
    w4 = rl.decode_step(m, weights_dtype="int4")
    assert w4.formats == rl.Formats(weights="int4", activations="bf16", kv="bf16", math="bf16")
    assert w4["weights"].bytes == 0.5 * m.decoder_matmul_params
    assert w4["weights"].flops == rl.decode_step(m)["weights"].flops
    assert all(o.math == "bf16" for o in w4.ops)


def test_fp8_kv_cache_halves_the_cache_bytes_only():
    bf, f8 = rl.decode_step("llama-3-8b", 8, 4096), rl.decode_step("llama-3-8b", 8, 4096, kv_dtype="fp8")
    assert f8["kv_cache"].bytes == bf["kv_cache"].bytes / 2
    assert f8["weights"].bytes == bf["weights"].bytes


def test_formats_reject_unknown_names():
    with pytest.raises(KeyError, match="weights format: unknown dtype 'int3'"):
        rl.Formats(weights="int3")
    with pytest.raises(ValueError, match="math format int4 needs int4 weights"):
        rl.Formats(math="int4")
    assert rl.formats("fp8").label() == "fp8"
    assert rl.formats("bf16", weights_dtype="int4").label() == "weights int4, math bf16"


# --- capacity as the device exposes it ------------------------------------------------------------

def test_usable_capacity_is_the_device_total_less_the_reserve():
    h100, h200 = get_hardware("h100-sxm"), get_hardware("h200-sxm")
    assert h100.hbm_capacity == 80e9  # the marketing figure stays beside it
    assert h100.hbm_total == 85_045_477_376  # deviceQuery: 81,106 MBytes
    assert h100.usable_capacity == 85_045_477_376 - 2**30
    assert h200.hbm_total == load_measurement().env.details["memory_bytes"]  # what the H200 itself reported
    for name in rl.hardware_names():
        h = get_hardware(name)
        assert h.hbm_capacity < h.hbm_total < 1.1 * h.hbm_capacity, name  # vendors' GB are GiB less a reserve


def test_footprints_are_compared_with_usable_capacity():
    # 8-bit Adam for Llama 3 8B: 80.3 GB, more than the marketing 80 GB, less than the usable 84.0 GB
    fp = rl.workloads.memory.model_state("llama-3-8b", "mixed-adam-8bit")
    assert 80e9 < float(fp.total) < get_hardware("h100-sxm").usable_capacity
    assert fp.fits("h100-sxm")
    assert fp.spare("h100-sxm") == pytest.approx(get_hardware("h100-sxm").usable_capacity - float(fp.total))


# --- the calibrated roof ---------------------------------------------------------------------------

def test_calibrated_roof_is_built_from_microbenchmarks_only(rec, cal):
    assert cal.bandwidth == max(rec.bandwidth["copy"].bytes_per_s, rec.bandwidth["read"].bytes_per_s)
    assert cal.launch == {"graph": rec.launch_overhead.graph_s_per_kernel, "eager": rec.launch_overhead.eager_s_per_kernel}
    # a read of a size in the sweep takes what the sweep measured
    r = rec.read_bandwidth_vs_size[8]
    assert cal.memory_seconds(r.bytes) == pytest.approx(r.seconds)
    # tiny kernels take the smallest read's latency; huge ones stream at the sustained bandwidth
    assert cal.memory_seconds(1.0) == rec.read_bandwidth_vs_size[0].seconds
    assert cal.memory_seconds(1e12) == pytest.approx(1e12 / cal.bandwidth)
    # matmul throughput at a swept row count is the best median of the sweeps at that m
    at_2048 = max(g.flops_per_s for g in rec.gemm_graph if g.m == 2048)
    assert cal.matmul_flops_per_s(2048) == pytest.approx(at_2048)
    assert cal.peak("bf16") == max(g.flops_per_s for g in rec.gemm_graph)


def test_calibrated_roof_predicts_every_held_out_point_within_a_quarter(rec):
    comps = M.calibrated_comparisons(rec, load_layers())
    everything = comps["decode"] + comps["prefill"]
    assert len(comps["decode"]) == len(rec.decode) and len(comps["prefill"]) == len(rec.prefill)
    assert M.calibration_misses(everything) == []
    inside = [c for c in everything if c.label not in M.CALIBRATION_EXCEPTIONS]
    assert len(inside) == len(everything) - 1
    assert max(max(c.ratio, 1 / c.ratio) for c in inside) < 1.25


def test_the_datasheet_floor_stays_below_every_measured_point(rec):
    sheet = get_hardware("h200-sxm")
    for c in M.compare_decode(rec, sheet) + M.compare_prefill(rec, sheet):
        assert c.predicted <= c.measured, c.label


def test_calibrated_roof_needs_its_microbenchmarks(rec):
    from dataclasses import replace

    with pytest.raises(MeasurementError, match="lacks read_bandwidth_vs_size, launch_overhead"):
        calibrated_roof(replace(rec, read_bandwidth_vs_size=(), launch_overhead=None))
    with pytest.raises(ValueError, match=r"roof 'calibrated' has no data for the H100 SXM: one GPU's kernels were "
                                         r"measured on the H200 only \(carrying"):
        get_roof("h100-sxm", "calibrated", scope="chip")
    carried = get_roof("h100-sxm", "calibrated", scope="chip", carry=True)
    assert "assumed" in carried.label and carried.assumption
    assert carried.bandwidth == pytest.approx(calibrated_roof(rec).bandwidth * 3.35 / 4.8)
    with pytest.raises(ValueError, match="mode must be one of 'graph', 'eager'"):
        calibrated_roof(rec, mode="jit")
    with pytest.raises(ValueError, match="has no measured int8 matmuls"):
        rl.predict(rl.decode_step("llama-3-8b", dtype="int8"), calibrated_roof(rec))


def test_cli_speaks_the_calibrated_roof(rec):
    from roofline.cli import main
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["decode", "llama-3-8b", "--gpu", "h200", "--batch", "1", "--context", "2048", "--roof", "calibrated",
                     "--timing", "kernel", "--ops", "--json"]) == 0
    data = json.loads(out.getvalue())
    measured = next(r for r in rec.decode if r.batch == 1 and r.context == 2048).seconds_graph
    assert 1 / 1.25 < data["time_s"] / measured < 1.25
    assert data["accounting"] == "refined" and data["timing"] == "kernel"
    names = [o["name"] for o in data["ops"]]
    assert names[:3] == ["embedding", "attn_norm", "qkv"] and names[-1] == "sample"
    assert sum(o["time_s"] for o in data["ops"]) == pytest.approx(data["time_s"])


def test_the_package_needs_numpy_only():
    """matplotlib and ipywidgets are the book's extra: the package and its command line work without them."""
    import subprocess
    import sys

    code = ("import sys; sys.modules['matplotlib'] = None; sys.modules['ipywidgets'] = None\n"
            "import roofline, roofline.cli, roofline.measured, roofline.present.tables\n"
            "sys.exit(roofline.cli.main(['decode', 'llama-3-8b', '--gpu', 'h200', '--roof', 'calibrated', "
            "'--timing', 'kernel', '--json']))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert '"time_s"' in proc.stdout


# --- the decode attention sweep (a record from roofline.measured.probe has it; the shipped H200 record does not) ----

def _with_decode_sweep(rec, seconds):
    """The shipped record's raw JSON plus a decode attention sweep whose kernel takes ``seconds(run)``."""
    from roofline.core.records import _read

    raw, name = _read("h200-2026-11-29")
    runs = []
    for b in (1, 4, 16, 64):
        for c in (2048, 8192, 131072):
            nbytes = decode_attention_bytes(b, c, 32, 8, 128)
            runs.append({"batch": b, "context": c, "heads": 32, "kv_heads": 8, "head_dim": 128, "bytes": nbytes,
                         "seconds": seconds(b * 8, nbytes)})
    return parse_measurement({**raw, "decode_attention": runs}, name)


def _few_groups(groups, nbytes):
    """A kernel that streams at 4 TB/s once it has 64 groups of work, proportionally less below."""
    return 2e-6 + nbytes / (4e12 * min(1.0, groups / 64))


def test_a_decode_sweep_times_decode_attention_by_its_groups_of_work(rec, cal):
    swept = _with_decode_sweep(rec, _few_groups)
    roof = calibrated_roof(swept, load_layers())
    assert roof.decode_groups == (8.0, 32.0, 128.0, 512.0)
    model = M.model_of(rec)

    def attention(batch, context, r=roof):
        step = rl.decode_step(model, batch, context, accounting="refined", **M.MEASURED_WORKLOAD)
        op = next(o for o in step.ops if o.name == "attention")
        return op, r.kernel_seconds(op)[1]

    # at a swept shape, each layer's kernel takes what the sweep measured for its bytes
    op, t = attention(1, 131072)
    assert op.groups == 8
    measured = _few_groups(8, decode_attention_bytes(1, 131072, 32, 8, 128))
    assert t / model.num_layers == pytest.approx(measured, rel=1e-3)
    # one sequence leaves 7/8 of the streaming rate unused: 8x the read sweep's time over the same bytes
    assert t > 7 * cal.kernel_seconds(op)[1]
    # between swept shapes the bandwidth lies between its neighbours'
    bw = roof.decode_attention_bandwidth
    per = decode_attention_bytes(1, 131072, 32, 8, 128) / 8
    assert bw(8, per) < bw(16, per) < bw(32, per)
    # a vectorized sweep gives the same as one call per point
    batches = np.array([1, 2, 16, 256])
    many = roof.decode_attention_bandwidth(batches * 8, per)
    assert many == pytest.approx([float(bw(b * 8, per)) for b in batches])
    # prefill attention and verify steps are not decode kernels: the sweep leaves them alone
    for work in (rl.prefill(model, 2048, accounting="refined", **M.MEASURED_WORKLOAD),
                 rl.verify_step(model, 8, 2048, accounting="refined")):
        o = next(o for o in work.ops if o.name == "attention")
        assert roof.kernel_seconds(o) == cal.kernel_seconds(o)
    # carried to another chip, it scales with the datasheets' bandwidths
    carried = roof.carried_to("h100-sxm", "h200-sxm")
    assert carried.decode_attention_bandwidth(8, per) == pytest.approx(bw(8, per) * 3.35 / 4.8)


def test_without_a_decode_sweep_nothing_changes(rec, cal):
    assert rec.decode_attention == () and cal.decode_groups == ()
    with pytest.raises(ValueError, match="no decode attention sweep"):
        cal.decode_attention_bandwidth(8, 1e6)


def test_a_decode_sweep_that_matches_the_read_benchmark_moves_no_prediction(rec, cal):
    """A kernel as fast as the read sweep over the same bytes: at the swept shapes the held-out ratios
    stay where they were (between and beyond them the two interpolations differ a little)."""
    swept = _with_decode_sweep(rec, lambda groups, nbytes: float(cal.memory_seconds(nbytes)))
    before = M.calibrated_comparisons(rec, load_layers())["decode"]
    after = M.calibrated_comparisons(swept, load_layers())["decode"]
    shapes = {(r.batch, r.context) for r in swept.decode_attention}
    pairs = [(b, a) for r, b, a in zip(rec.decode, before, after) if (r.batch, r.context) in shapes]
    assert len(pairs) == 7
    for b, a in pairs:
        assert a.ratio == pytest.approx(b.ratio, rel=1e-3), a.label


def test_a_decode_sweep_is_checked_when_read(rec):
    from roofline.core.records import _read

    raw, _ = _read("h200-2026-11-29")
    good = {"batch": 1, "context": 2048, "heads": 32, "kv_heads": 8, "head_dim": 128,
            "bytes": decode_attention_bytes(1, 2048, 32, 8, 128), "seconds": 1e-5}
    with pytest.raises(MeasurementError, match=r"decode_attention\[0\] field 'bytes': expected"):
        parse_measurement({**raw, "decode_attention": [{**good, "bytes": 1e6}]})
    with pytest.raises(MeasurementError, match=r"decode_attention\[0\]: missing 'kv_heads'"):
        parse_measurement({**raw, "decode_attention": [{k: v for k, v in good.items() if k != "kv_heads"}]})
    with pytest.raises(MeasurementError, match="do not share 7 KV heads evenly"):
        parse_measurement({**raw, "decode_attention": [{**good, "kv_heads": 7}]})
    with pytest.raises(ValueError, match="batch must be a whole number > 0, got 0"):
        decode_attention_bytes(0, 2048, 32, 8, 128)
    with pytest.raises(ValueError, match="one .* curve per entry of decode_groups: 1 curves for 2 group counts"):
        rl.CalibratedRoof("c", 1e12, (1.0,), (1e-6,), {}, {}, {"graph": 1e-6}, decode_groups=(8.0, 16.0),
                          decode_curves=(((1e6,), (1e12,)),))
    run = parse_measurement({**raw, "decode_attention": [good]}).decode_attention[0]
    assert run.groups == 8 and run.bytes_per_s == pytest.approx(good["bytes"] / 1e-5)


def test_a_calibrated_matmul_below_the_ridge_is_bound_by_memory(rec, cal):
    """The sweeps timed small products at the speed they stream their weights: a batch-1 decode's matmuls
    are memory-bound on the calibrated roof, a long prefill's are compute-bound, and either way the
    kernel's time is the sweep's time at its rows."""
    model = M.model_of(rec)
    ridge = cal.peak("bf16") / cal.bandwidth
    for work, bound in ((rl.decode_step(model, 1, 2048, accounting="refined", **M.MEASURED_WORKLOAD), "memory"),
                        (rl.prefill(model, 8192, accounting="refined", **M.MEASURED_WORKLOAD), "compute")):
        for op in (o for o in work.ops if o.kind == "matmul"):
            compute, memory = cal.kernel_seconds(op)
            assert (compute > memory) == (bound == "compute") == (op.flops / op.bytes > ridge), op.name
            swept = op.flops / cal.matmul_flops_per_s(op.m)
            assert max(compute, memory) == pytest.approx(max(swept, op.count * cal.memory_seconds(op.bytes / op.count)))
    # vectorized over batch, the same split as one call per batch
    batches = np.array([1, 64, 512, 4096])
    step = rl.decode_step(model, batches, 2048, accounting="refined", **M.MEASURED_WORKLOAD)
    qkv = next(o for o in step.ops if o.name == "qkv")
    many = np.array(cal.kernel_seconds(qkv))
    for i, b in enumerate(batches):
        one = next(o for o in rl.decode_step(model, int(b), 2048, accounting="refined", **M.MEASURED_WORKLOAD).ops
                   if o.name == "qkv")
        assert many[:, i] == pytest.approx(np.array(cal.kernel_seconds(one), dtype=float))


def test_time_by_kind_splits_the_kernel_rule_time(h100):
    """The kernels' times by kind add up to the kernel rule's time: matmuls, attention, and the
    elementwise kernels with the embedding lookup."""
    step = rl.decode_step("llama-3-8b", 1, 2048, accounting="refined")
    pred = rl.predict(step, h100, timing="kernel")
    kinds = pred.time_by_kind()
    assert set(kinds) == {"matmul", "attention", "elementwise"}
    assert sum(kinds.values()) == pytest.approx(pred.time)
    assert kinds["attention"] == pytest.approx(float(pred.op("attention").time))
    # a batch-1 decode on a datasheet: nearly all of it the weight matmuls
    assert kinds["matmul"] / pred.time > 0.9
    # vectorized: one split per point
    many = rl.predict(rl.decode_step("llama-3-8b", np.array([1, 64]), 2048, accounting="refined"), h100,
                      timing="kernel").time_by_kind()
    assert many["matmul"].shape == (2,) and many["matmul"][0] == pytest.approx(kinds["matmul"])


def test_tokens_per_s_and_time_per_token_by_hand():
    import roofline as rl

    decode = rl.predict(rl.decode_step("llama-3-8b", 1), "h100-sxm")
    # batch 1: one token per step, the weights (16.06 GB) streamed at 3.35 TB/s, about 209 tokens/s
    assert rl.tokens_per_s(decode) == pytest.approx(1 / decode.time)
    assert 200 < rl.tokens_per_s(decode) < 215
    pre = rl.predict(rl.prefill("llama-3-8b", 2048), "h100-sxm")
    assert rl.time_per_token(pre, 2048) == pytest.approx(pre.time / 2048)
    assert rl.tokens_per_s(pre, 2048) == pytest.approx(1 / rl.time_per_token(pre, 2048))
    with pytest.raises(TypeError, match="prediction must be a Prediction"):
        rl.tokens_per_s(0.005)
    with pytest.raises(ValueError, match="tokens"):
        rl.time_per_token(pre, 0)
def test_a_pooled_roof_adds_flops_and_bandwidth_and_keeps_the_ridge(h100):
    one = rl.as_roof(h100)
    eight = one.pooled(8)
    assert eight.peak_flops == 8 * h100.peak_flops("bf16") and eight.bandwidth == 8 * h100.hbm_bandwidth
    assert eight.ridge_point == pytest.approx(one.ridge_point)
    assert (eight.kind, eight.dtype, eight.launch_s) == (one.kind, one.dtype, one.launch_s)
    assert eight.label == "8 × " + one.label and one.pooled(1) is one
    # a decode step that streams its weights takes an eighth of the time on the pool
    step = rl.decode_step("llama-3-8b")
    assert rl.predict(step, eight).time == pytest.approx(rl.predict(step, one).time / 8)
    with pytest.raises(ValueError, match="gpus"):
        one.pooled(0)
