"""roofline.measured.compare: predictions beside our H200's measured kernels, decode and prefill; the bound check
and the calibration band (appendices A and B)."""


import pytest

import roofline as rl
from roofline.measured import probe
from roofline import measured as M
from roofline.present import tables
from roofline.core.calibration import calibrated_roof, measured_roof
from roofline.core.records import Gemm, load_layers, load_measurement


def test_turning_point_matches_the_roofline(rec):
    for n in (4096, 8192):
        s = M.sweep(rec.gemm_graph, n)
        assert M.knee(s) == 256
        assert M.compute_bound_from(s, rl.get_hardware("h200")) == 256
    with pytest.raises(ValueError, match="share one"):
        M.knee(rec.gemm_graph)


def _all(rec, roof, roof8):
    return (M.compare_decode(rec, roof) + M.compare_prefill(rec, roof) + M.compare_decode_ops(rec, roof)
            + M.compare_reads(rec, roof) + M.compare_gemms(rec.gemm_graph, roof, prefix="graph ")
            + M.compare_gemms(rec.gemm_per_call, roof, prefix="call ") + M.compare_gemms(rec.gemm_fp8_per_call, roof8))


def test_every_point_obeys_the_bound_under_datasheet_and_measured_roofs(rec):
    h = rl.get_hardware("h200-sxm")
    for roof, roof8 in ((rl.as_roof(h, "bf16"), rl.as_roof(h, "fp8")), (measured_roof(rec), measured_roof(rec, "fp8"))):
        points = _all(rec, roof, roof8)
        assert len(points) == 136
        assert M.bound_violations(points) == []


def test_a_roof_from_the_read_benchmark_alone_is_broken_only_where_explained(rec):
    read = measured_roof(rec, bandwidth="read")
    points = _all(rec, read, measured_roof(rec, "fp8", bandwidth="read"))
    assert {c.label for c in points if not c.obeys} == set(M.READ_ROOF_EXCEPTIONS)
    assert M.bound_violations(points, M.READ_ROOF_EXCEPTIONS) == []
    with pytest.raises(ValueError, match="obey the bound"):
        M.bound_violations(points, {"decode batch=1 context=2048": "no reason"})
    with pytest.raises(ValueError, match="not compared"):
        M.bound_violations(points, {"nonsense": "x"})


def test_ratios_a_reader_would_check(rec):
    h = rl.get_hardware("h200-sxm")
    dec = M.compare_decode(rec, h)[0]
    assert dec.label == "decode batch=1 context=2048" and dec.ratio == pytest.approx(0.642, abs=1e-3)
    pre = {c.label: c for c in M.compare_prefill(rec, measured_roof(rec))}
    assert pre["prefill tokens=2048"].ratio == pytest.approx(0.833, abs=1e-3)
    table = tables.comparison_table({"datasheet": M.compare_prefill(rec, h), "measured": list(pre.values())})
    assert table.rows[4] == ("prefill tokens=2048", "48.6 ms", "0.66", "0.83")
    keyed = tables.comparison_table({"datasheet": M.compare_prefill(rec, h), "measured": list(pre.values())},
                               key_first="measured")
    assert keyed.columns == ("point", "ratio, measured roof", "ratio, datasheet roof", "measured time")
    assert keyed.rows[4] == ("prefill tokens=2048", "0.83", "0.66", "48.6 ms")
    with pytest.raises(ValueError, match="key_first must be one of 'datasheet', got"):
        tables.comparison_table({"datasheet": M.compare_prefill(rec, h)}, key_first="measure")


# --- bad files ------------------------------------------------------------------------------


# --- the reader's machine ------------------------------------------------------------------


# --- formulas a reader can check by hand --------------------------------------------------------


def test_the_measured_model_is_llama_3_8b_without_its_norm_scales(rec, shape):
    m = M.model_of(rec)
    assert (m.hidden_size, m.num_layers, m.num_heads, m.num_kv_heads, m.head_dim, m.intermediate_size,
            m.vocab_size) == (shape.hidden, shape.layers, shape.heads, shape.kv_heads, shape.head_dim,
                              shape.intermediate, shape.vocab)
    assert rec.model["params"] == rl.load_model("llama-3-8b").params - (2 * shape.layers + 1) * shape.hidden


def test_a_comparison_is_the_roofline_time_over_the_measured_time(rec):
    peak, bw = 989.4e12, 4.8e12  # the H200's datasheet roof
    h = rl.get_hardware("h200-sxm")
    run, model = rec.decode[0], M.model_of(rec)
    # the kernels the measurement ran: fused projections, no norms, RoPE or sampling
    step = rl.decode_step(model, run.batch, run.context, accounting="refined", **M.MEASURED_WORKLOAD)
    c = M.compare_decode(rec, h)[0]
    assert c.predicted == pytest.approx(max(step.flops / peak, step.bytes / bw))
    assert c.measured == run.seconds_graph and c.ratio == pytest.approx(c.predicted / run.seconds_graph)
    assert c.obeys == (c.predicted <= c.measured) and c.bound == "memory"
    assert M.compare_decode(rec, h, graph=False)[0].measured == run.seconds_eager
    i = [r.tokens for r in rec.prefill].index(2048)
    pre = rl.prefill(model, 2048, accounting="refined", **M.MEASURED_WORKLOAD)
    p = M.compare_prefill(rec, h)[i]
    assert p.predicted == pytest.approx(max(pre.flops / peak, pre.bytes / bw)) and p.bound == "compute"
    assert p.ratio == pytest.approx(p.predicted / rec.prefill[i].seconds)


def test_matmuls_reads_and_layer_ops_are_timed_at_the_roof(rec):
    peak, bw = 989.4e12, 4.8e12
    h = rl.get_hardware("h200-sxm")
    for g, c in zip(rec.gemm_graph, M.compare_gemms(rec.gemm_graph, h)):
        flops, nbytes = 2 * g.m * g.n * g.k, 2 * (g.m * g.k + g.k * g.n + g.m * g.n)
        assert c.predicted == pytest.approx(max(flops / peak, nbytes / bw)) and c.measured == g.seconds
    for r, c in zip(rec.read_bandwidth_vs_size, M.compare_reads(rec, h)):
        assert c.predicted == pytest.approx(r.bytes / bw) and c.label == f"read {r.bytes / 2**20:g} MiB"
    for o, c in zip(rec.decode_ops, M.compare_decode_ops(rec, h)):
        assert c.predicted == pytest.approx(max(o.flops / peak, o.min_bytes / bw))
    assert list(M.ratios(M.compare_reads(rec, h))) == [c.predicted / c.measured for c in M.compare_reads(rec, h)]


def _gemm(m, seconds, n=4096, k=4096):
    return Gemm(m, n, k, 2 * m * n * k, 2 * (m * k + k * n + m * n), seconds, 2 * m * n * k / seconds)


def test_knee_and_compute_bound_from_on_a_sweep_by_hand():
    times = {1: 10e-6, 16: 11e-6, 64: 12e-6, 128: 12.6e-6, 256: 20e-6}
    sweep = [_gemm(m, t) for m, t in times.items()]
    assert M.knee(sweep) == 128  # the first time above 1.25 x 10 us
    assert M.knee(sweep, factor=1.5) == 256
    # a (m x 4096) @ (4096 x 4096) product in bf16 has intensity 2 m 4096^2 / (2 (2 m 4096 + 4096^2)),
    # 4096 m / (2 m + 4096): it reaches a ridge of 206 at m = 206 x 4096 / (4096 - 2 x 206) = 229.04
    roof = rl.Roof("ridge 206", 206 * 4.8e12, 4.8e12)
    ms = [1, 64, 128, 229, 230, 256, 512]
    assert M.compute_bound_from([_gemm(m, 1e-3) for m in ms], roof) == 230
    assert M.compute_bound_from([_gemm(m, 1e-3) for m in ms[:4]], roof) is None


def test_ceilings_table_prints_measured_over_datasheet(rec):
    h = rl.get_hardware("h200-sxm")
    sheet, roof = rl.as_roof(h, "bf16"), measured_roof(rec)
    t = tables.ceilings_table(sheet, roof)
    assert t.rows[0][-1] == f"{100 * roof.bandwidth / 4.8e12:.0f}%"
    assert t.rows[1][-1] == f"{100 * roof.peak_flops / 989.4e12:.0f}%"
    assert t.rows[2][1:] == (f"{989.4e12 / 4.8e12:,.0f}", f"{roof.peak_flops / roof.bandwidth:,.0f}",
                             f"{100 * (roof.peak_flops / roof.bandwidth) / (989.4e12 / 4.8e12):.0f}%")


# --- the appendices' helpers -------------------------------------------------------------------

def _cmp(*ratios):
    return [M.Comparison(f"p{i}", r, 1.0, "memory") for i, r in enumerate(ratios)]


@pytest.fixture(scope="module")
def cal():
    return calibrated_roof(load_measurement("h200-2026-11-29"), load_layers("h200-2026-11-29-layers"))


def test_predictions_band_and_worst_factor_by_hand():
    cs = _cmp(0.5, 0.9, 1.2, 1.3)
    assert list(M.predictions(cs)) == [0.5, 0.9, 1.2, 1.3]
    assert [c.ratio for c in M.within_band(cs, 1.25)] == [0.9, 1.2]
    assert M.worst_factor(cs) == 2.0  # 0.5 is off by a factor of two, more than 1.3
    assert M.worst_factor(_cmp(1.0)) == 1.0


def test_idle_sms_and_half_bandwidth_read(rec):
    assert M.model_of(rec).num_heads == 32 and rec.env.details["sm_count"] == 132
    assert M.idle_sm_share(rec) == pytest.approx(1 - 32 / 132)
    half = M.half_bandwidth_read(rec, 4e12)
    sizes = rec.read_bandwidth_vs_size
    assert half.bytes_per_s >= 2e12
    assert all(r.bytes_per_s < 2e12 for r in sizes[:sizes.index(half)])


def test_time_and_gap_shares_add_up(cal):
    step = rl.decode_step("llama-3-8b", 1, 2048, accounting="refined")
    sheet = rl.predict(step, "h200-sxm", timing="kernel")
    shares = M.time_shares(sheet)
    assert shares["matmul"] == pytest.approx(sheet.time_by_kind()["matmul"] / sheet.time)
    assert sum(shares.values()) == pytest.approx(1)  # under the kernel rule the kernels' times add up
    gap = M.gap_shares(sheet, rl.predict(step, cal, timing="kernel"))
    assert sum(gap.values()) == pytest.approx(1)


def test_launch_total_and_one_layers_kv_read(cal):
    step = rl.decode_step("llama-3-8b", 1, 2048, accounting="refined")
    assert M.launch_total(step, cal, "eager") == pytest.approx(sum(o.count for o in step.ops) * cal.launch["eager"])
    nbytes, rate, fraction = M.layer_kv_read(rl.load_model("llama-3-8b"), 2048, cal)
    assert nbytes == 2048 * 2 * 8 * 128 * 2  # K and V, 8 KV heads of 128, bf16: 8 MiB a layer
    assert rate == pytest.approx(nbytes / float(cal.memory_seconds(nbytes)))
    assert fraction == pytest.approx(rate / cal.bandwidth) and 0 < fraction < 1


def test_implied_slowdown_solves_the_kernels_factor_from_a_timing(cal, rec):
    p = rl.predict(rl.decode_step("llama-3-8b", 1, 32768, accounting="refined"), cal, timing="kernel")
    att = p.op("attention")
    # reading at half the rate doubles attention's memory time: the factor that timing implies is two
    assert M.implied_slowdown(p, p.time + float(att.memory)) == pytest.approx(2.0)
    assert M.implied_slowdown(p, p.time) == pytest.approx(1.0)
    # the appendix's miss: one sequence over 131,072 tokens measured 12.98 ms against 9.21 ms estimated
    model = M.model_of(rec)
    long = rl.predict(rl.decode_step(model, 1, 131072, accounting="refined", **M.MEASURED_WORKLOAD), cal, timing="kernel")
    run = next(r for r in rec.decode if (r.batch, r.context) == (1, 131072))
    assert M.implied_slowdown(long, run.seconds_graph) == pytest.approx(1.885, abs=0.005)
    with pytest.raises(ValueError, match="op must be a kernel bound by memory"):
        M.implied_slowdown(rl.predict(rl.prefill("llama-3-8b", 4096), cal, timing="kernel"), 1.0, "attention")
    with pytest.raises(ValueError, match="measured"):
        M.implied_slowdown(p, -1.0)


def test_achieved_rates_launches_and_weights_over_kv(rec):
    assert M.achieved(rl.Cost(1e12, 1e9), 0.5) == (2e12, 2e9)
    run = rec.decode[0]
    assert M.eager_tokens_per_s([run]) == [run.batch / run.seconds_eager]
    lo = rec.launch_overhead
    launches = M.implied_launches(run, rec)
    assert run.seconds_graph + launches * (lo.eager_s_per_kernel - lo.graph_s_per_kernel) == pytest.approx(run.seconds_eager)
    step = rl.decode_step("llama-3-8b", 1, 2048)
    assert step["kv_cache"].bytes == 2048 * 32 * 4096  # 32 layers of 4 KiB a token
    assert M.weights_over_kv(step) == pytest.approx((step["weights"].bytes + step["lm_head"].bytes) / (2048 * 32 * 4096))
    assert M.seconds_per_token(rec.prefill)[0] == rec.prefill[0].seconds / rec.prefill[0].tokens


def test_predicted_tokens_per_s_is_batch_over_predicted(rec):
    runs = [r for r in rec.decode if r.context == 2048]
    roof = measured_roof(rec, "bf16")
    got = M.predicted_tokens_per_s(rec, roof, runs)
    want = [r.batch / c.predicted for r, c in zip(runs, M.compare_decode(rec, roof, runs=runs))]
    assert list(got) == pytest.approx(want)


@pytest.mark.parametrize("call, error, message", [
    (lambda rec, cal: M.within_band(_cmp(1.0), 0.5), ValueError, "factor must be"),
    (lambda rec, cal: M.worst_factor([]), ValueError, "comparisons must hold at least one"),
    (lambda rec, cal: M.half_bandwidth_read(rec, 1e15), ValueError, "no read of the sweep reaches half"),
    (lambda rec, cal: M.gap_shares(*[rl.predict(rl.decode_step("llama-3-8b", 1, 512), "h200-sxm")] * 2), ValueError,
     "there is no gap to share"),
    (lambda rec, cal: M.launch_total(rl.decode_step("llama-3-8b", 1, 512), cal, "lazy"), ValueError, "mode must be one of"),
    (lambda rec, cal: M.layer_kv_read(rl.load_model("llama-3-8b"), -1, cal), ValueError, "context must be"),
    (lambda rec, cal: M.achieved(rl.Cost(1.0, 1.0), 0), ValueError, "seconds must be"),
    (lambda rec, cal: probe.page_buffer_bytes(-5), ValueError, "llc must be"),
])
def test_appendix_helpers_bad_input(rec, cal, call, error, message):
    with pytest.raises(error, match=__import__("re").escape(message)):
        call(rec, cal)


def test_within_band_keeps_the_points_predicted_within_the_factor():
    from types import SimpleNamespace

    points = [SimpleNamespace(ratio=r) for r in (0.7, 0.8, 1.0, 1.25, 1.3)]
    assert [p.ratio for p in M.within_band(points, 1.25)] == [0.8, 1.0, 1.25]  # 1/1.25 = 0.8 is inside
    assert M.within_band(points, 2.0) == points
    with pytest.raises(ValueError, match="factor"):
        M.within_band(points, 1.0)


def test_a_product_timed_one_call_at_a_time_pays_far_more_than_a_launch(rec):
    c = M.call_overhead(rec, 1, 4096)
    # 55.7 us per call against 12.9 us in a graph: 42.7 us added, of which an 11.5 us launch is about a quarter
    assert (c.per_call, c.graph) == pytest.approx((55.68e-6, 12.94e-6), rel=1e-3)
    assert c.extra == pytest.approx(c.per_call - c.graph) and c.extra == pytest.approx(42.74e-6, rel=1e-3)
    assert c.beyond_launch == pytest.approx(c.extra - rec.launch_overhead.eager_s_per_kernel)
    assert 30e-6 < c.beyond_launch < 32e-6
    assert M.call_overhead(rec, 1, 8192, 8192).per_call == M.sweep(rec.gemm_per_call, 8192)[0].seconds
    with pytest.raises(ValueError, match=r"\(m, n, k\) must be a bf16 product the record timed one call at a time"):
        M.call_overhead(rec, 3, 4096)


