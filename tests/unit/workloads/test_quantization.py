"""Chapter 6: formats with group-wise scales, the crossover batch law, refusals, the published bill."""

import math

import numpy as np
import pytest

import roofline as rl
from roofline.workloads import quantization as q
from roofline.core.formats import Formats, formats
from roofline.core.records import load_measurement
from roofline.core.units import GroupFormat, bits_per_element, dtype_bytes, group_format


# ---- bytes per parameter, scales included -------------------------------------------------------------------

def test_int4_with_group_128_and_fp16_scales_is_4_125_bits():
    assert bits_per_element("int4-g128") == 4.125
    assert dtype_bytes("int4-g128") == 4.125 / 8


def test_a_zero_point_per_group_costs_the_element_width_again():
    # four bits of zero point per 128 weights, on top of the 16-bit scale
    assert bits_per_element("int4-g128-zp") == 4 + (16 + 4) / 128
    assert bits_per_element("int8-g64-zp") == 8 + (16 + 8) / 64


@pytest.mark.parametrize("group", [16, 32, 64, 128, 256, 1024])
def test_scale_overhead_falls_as_one_over_the_group(group):
    assert bits_per_element(f"int4-g{group}") - 4 == pytest.approx(16 / group)
    assert bits_per_element(f"int4-g{group}-fp32") - 4 == pytest.approx(32 / group)


def test_microscaling_formats_by_name():
    assert bits_per_element("mxfp4") == 4 + 8 / 32  # E2M1 in blocks of 32 with one E8M0 scale
    assert bits_per_element("nvfp4") == 4 + 8 / 16  # E2M1 in blocks of 16 with one fp8 scale
    assert group_format("mxfp4") == GroupFormat("fp4", 32, "e8m0")


def test_plain_formats_are_not_group_formats_and_bad_names_say_so():
    assert group_format("int4") is None and dtype_bytes("int4") == 0.5
    with pytest.raises(KeyError, match="unknown dtype 'int4-g0'"):
        dtype_bytes("int4-g0")
    with pytest.raises(KeyError, match="int4-g128"):
        dtype_bytes("int4-128")


def test_group_formats_are_for_storage_only():
    with pytest.raises(ValueError, match="math format must be a plain format"):
        Formats(math="int4-g128")
    assert formats("bf16", weights_dtype="int4-g128").bytes("weights") == dtype_bytes("int4-g128")


def test_the_group_size_where_scales_eat_a_tenth_of_the_saving():
    g = q.group_size_for_overhead(0.1)
    # at that group the overhead is exactly a tenth of the twelve bits int4 saves against bf16
    assert 16 / g == pytest.approx(0.1 * 12)
    assert bits_per_element(f"int4-g{math.floor(g)}") - 4 > 1.2 > bits_per_element(f"int4-g{math.ceil(g)}") - 4


# ---- float layouts -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("layout, largest", [((4, 3, "nan"), 448), ((5, 2, "ieee"), 57344), ((5, 10, "ieee"), 65504),
                                              ((2, 1, "none"), 6), ((8, 7, "ieee"), 3.3895313892515355e38)])
def test_float_layouts_reach_their_published_maxima(layout, largest):
    assert q.float_range(*layout).max == largest


def test_e4m3_trades_range_for_precision_against_e5m2():
    e4m3, e5m2 = q.float_range(4, 3, "nan"), q.float_range(5, 2, "ieee")
    assert e4m3.binades < e5m2.binades
    assert e4m3.min_subnormal == 2.0**-9 and e5m2.min_subnormal == 2.0**-16


# ---- decode intensity scales with the byte ratio -------------------------------------------------------------

@pytest.mark.parametrize("weights", ["int8", "int4", "fp8", "int4-g128", "int4-g32-zp"])
def test_decode_intensity_scales_with_the_byte_ratio(weights):
    # the first-order count at no context: every byte is a weight, so intensity is inversely their width
    base = rl.decode_step("llama-3-8b", 1, 0)
    narrow = rl.decode_step("llama-3-8b", 1, 0, weights_dtype=weights)
    assert narrow.intensity / base.intensity == pytest.approx(2 / dtype_bytes(weights))
    assert narrow.flops == base.flops


def test_keeping_the_embeddings_in_bf16_costs_their_bytes():
    m = rl.load_model("llama-3-8b")
    all4 = q.weight_bytes(m, weights_dtype="int4")
    kept = q.weight_bytes(m, weights_dtype="int4", embeddings_dtype="bf16")
    other = m.embedding_params + m.lm_head_params + m.norm_params
    assert kept - all4 == pytest.approx(other * (2 - 0.5))


def test_default_formats_leave_chapter_one_numbers_alone():
    b = rl.decode_step("llama-3-8b")
    assert b.bytes == 2 * rl.load_model("llama-3-8b").params and b.intensity == 1
    assert rl.decode_step("llama-3-8b", embeddings_dtype="bf16").bytes == b.bytes


# ---- the crossover batch law ---------------------------------------------------------------------------------

@pytest.mark.parametrize("weights", ["bf16", "int8", "int4", "fp8"])
def test_crossover_batch_is_ridge_times_bytes_per_weight_over_two(weights):
    h = rl.get_hardware("h100-sxm")
    c = q.crossover_batch("llama-3-8b", h, weights_dtype=weights)
    assert c.batch == pytest.approx(h.ridge_point("bf16") * dtype_bytes(weights) / 2)


def test_w4a16_turns_compute_bound_at_a_quarter_of_the_bf16_batch():
    bf16 = q.crossover_batch("llama-3-8b", "h100", weights_dtype="bf16").batch
    w4 = q.crossover_batch("llama-3-8b", "h100", weights_dtype="int4").batch
    assert w4 / bf16 == pytest.approx(0.25)


@pytest.mark.parametrize("model", ["llama-3-8b", "llama-3-70b", "llama-2-7b", "gemma-7b"])
@pytest.mark.parametrize("options", [{}, {"weights_dtype": "int4-g128", "embeddings_dtype": "bf16"},
                                     {"weights_dtype": "int8"}, {"kv_dtype": "fp8"}])
@pytest.mark.parametrize("context", [0, 64])
def test_the_law_agrees_with_a_sweep_of_every_batch(model, options, context):
    c = q.crossover_batch(model, "h100-sxm", context, accounting="refined", **options)
    swept = rl.compute_bound_batch(model, "h100-sxm", context, accounting="refined", **options)
    assert c.first_compute_bound == swept


def test_fp8_math_doubles_the_peak_and_halves_the_bytes_so_the_crossover_stays():
    bf16 = q.crossover_batch("llama-3-8b", "h100").batch
    fp8 = q.crossover_batch("llama-3-8b", "h100", dtype="fp8").batch
    assert fp8 == pytest.approx(bf16, rel=1e-4)  # the whitepaper's fp8 peak is 2 x 989.4 rounded to 1978.9


def test_a_long_cache_keeps_decode_memory_bound_at_any_batch():
    c = q.crossover_batch("llama-3-8b", "h100", 4096)
    assert c.batch is None and c.flops_per_sequence / c.peak_flops < c.kv_bytes_per_sequence / c.bandwidth


# ---- speedups -----------------------------------------------------------------------------------------------

def test_w4a16_speeds_decode_by_the_byte_ratio_at_batch_one_and_not_at_all_past_the_ridge():
    kw = {"weights_dtype": "int4"}
    assert q.decode_speedup("llama-3-8b", "h100", 1, 0, **kw) == pytest.approx(4)
    assert q.decode_speedup("llama-3-8b", "h100", 512, 0, **kw) == pytest.approx(1)
    # in between it falls monotonically
    s = q.decode_speedup("llama-3-8b", "h100", np.array([1, 16, 64, 128, 256, 512]), 0, **kw)
    assert np.all(np.diff(s) <= 1e-12)


def test_weight_only_quantization_leaves_prefill_alone_and_fp8_math_halves_it():
    h = rl.get_hardware("h100")
    base = rl.predict(rl.prefill("llama-3-8b", 4096), h)
    w4 = rl.predict(rl.prefill("llama-3-8b", 4096, weights_dtype="int4-g128"), h)
    fp8 = rl.predict(rl.prefill("llama-3-8b", 4096, dtype="fp8"), h)
    assert base.bound == w4.bound == "compute" and w4.time == base.time
    assert fp8.time == pytest.approx(base.time / 2, rel=1e-4)


def test_dequantization_budget_is_vector_peak_times_bytes_over_bandwidth():
    h = rl.get_hardware("h100")
    assert q.dequantization_budget(h, "int4-g128") == pytest.approx(h.peak_flops("fp32") * 4.125 / 8 / h.hbm_bandwidth)


# ---- hardware support ----------------------------------------------------------------------------------------

def test_fp8_math_is_refused_on_an_a100_and_the_message_says_where_it_runs():
    with pytest.raises(ValueError, match="A100 80GB has no fp8 tensor cores") as info:
        q.check_math("a100-sxm-80gb", formats("bf16", math_dtype="fp8"))
    assert "H100 SXM" in str(info.value) and "--" not in str(info.value)
    with pytest.raises(ValueError, match="no fp8"):
        q.crossover_batch("llama-3-8b", "a100", dtype="fp8")


def test_fp8_storage_is_allowed_on_an_a100():
    q.check_math("a100", formats("bf16", weights_dtype="fp8", kv_dtype="fp8"))
    assert q.serving_point("llama-3-8b", "a100", 1024, weights_dtype="fp8").fits


def test_fp4_has_a_peak_only_on_blackwell():
    assert q.chips_with("fp4") == ["b200"]
    assert rl.get_hardware("b200").peak_flops("fp4") == 2 * rl.get_hardware("b200").peak_flops("fp8")


# ---- deployments ---------------------------------------------------------------------------------------------

def test_w4a16_fits_llama_3_70b_on_one_h100_where_bf16_does_not():
    assert not q.serving_point("llama-3-70b", "h100", 4096).fits
    p = q.serving_point("llama-3-70b", "h100", 4096, **q.scheme("W4A16 (int4, g128)"))
    assert p.fits and p.max_batch >= 1
    h = rl.get_hardware("h100")
    m = rl.load_model("llama-3-70b")
    assert p.weights + p.max_batch * m.kv_cache_bytes(4096, "bf16") <= h.usable_capacity
    assert p.weights + (p.max_batch + 1) * m.kv_cache_bytes(4096, "bf16") > h.usable_capacity


def test_fp8_kv_doubles_the_batch_that_fits_up_to_rounding():
    a = q.max_batch("llama-3-8b", "h100", 4096)
    b = q.max_batch("llama-3-8b", "h100", 4096, kv_dtype="fp8")
    assert b in (2 * a, 2 * a + 1)


def test_unknown_scheme_names_close_matches():
    with pytest.raises(KeyError, match="W4A16"):
        q.scheme("W4A16")


# ---- the published bill -------------------------------------------------------------------------------------

def test_every_published_row_cites_a_bibliography_entry_and_a_table():
    bib = (rl.__file__.rsplit("/roofline/", 1)[0] + "/references.bib")
    text = open(bib, encoding="utf-8").read()
    for row in q.PUBLISHED:
        assert f"{{{row.source}," in text, row.source
        assert row.where.startswith("Table ")
        assert row.metric in ("perplexity", "accuracy")


def test_good_methods_cost_little_and_naive_ones_a_lot():
    worst_good = max(q.relative_change(r) for r in q.PUBLISHED
                     if r.method in ("LLM.int8()", "SmoothQuant-O3", "AWQ") and r.weight_bits >= 4)
    naive = min(q.relative_change(r) for r in q.PUBLISHED if "naive" in r.method)
    assert worst_good < 0.03 < 0.4 < naive


def test_published_filters_and_names():
    assert {r.source for r in q.published(method="AWQ")} == {"lin2024awq"}
    with pytest.raises(KeyError, match="AWQ"):
        q.published(method="AWQQ")


# ---- the measured fp8 gap -----------------------------------------------------------------------------------

def test_measured_fp8_against_bf16_on_the_h200():
    r = q.measured_fp8_speedup(load_measurement())
    assert r.fp8_shape == r.bf16_shape and r.bf16_timing == "per call"
    assert 1.7 < r.ratio < 1.8  # the two headline figures
    # at the same shape and the same timing, larger products come close to the datasheet's 2
    same = {m: fp8 / per_call for m, n, k, fp8, per_call, graph in r.same_shape}
    assert max(same.values()) > 1.9


# ---- chapter 6's quoted ratios, moved out of the notebook ---------------------------------------------------

def test_weight_only_schemes_keep_embeddings_head_and_norms_in_bf16():
    m = rl.load_model("llama-3-8b")
    # Llama 3 8B: 128,256 x 4,096 for the embedding table and again for the untied head, plus the norms
    # (two per layer and one final, 4,096 wide each)
    expected = 2 * 128_256 * 4096 + (2 * 32 + 1) * 4096
    assert q.bf16_kept_params(m) == expected
    assert q.bf16_kept_share("llama-3-8b") == pytest.approx(expected / m.params)
    assert 0.13 < q.bf16_kept_share(m) < 0.14
    with pytest.raises(KeyError, match="unknown model"):
        q.bf16_kept_params("llama-3-8")


def test_room_for_the_kv_cache_is_usable_hbm_less_the_weights():
    h = rl.get_hardware("h200-sxm")
    m = rl.load_model("llama-3-70b")
    assert q.kv_room(m, h) == pytest.approx(h.usable_capacity - 2 * m.params)
    # int4 weights leave more room, and max_batch divides that room by one sequence's cache
    room = q.kv_room(m, h, **q.scheme("W4A16 (int4, g128)"))
    assert room > q.kv_room(m, h)
    assert q.max_batch(m, h, 8192, **q.scheme("W4A16 (int4, g128)")) == int(room // m.kv_cache_bytes(8192))
    with pytest.raises(KeyError, match="unknown hardware"):
        q.kv_room(m, "h300")


def test_datasheet_fp8_peak_is_twice_bf16_on_hopper():
    assert q.peak_ratio("h200-sxm") == pytest.approx(1978.9 / 989.4)
    assert q.peak_ratio("h100-sxm", "bf16", "bf16") == 1
    with pytest.raises(KeyError, match="dtype"):
        q.peak_ratio("h100-sxm", "fp7")


def test_published_rows_as_quoted_and_their_change_in_points():
    rows = {(r.source, r.model, r.method, r.scheme): r for r in q.PUBLISHED}
    sq = rows[("xiao2023smoothquant", "OPT-175B", "SmoothQuant-O3", "W8A8 int8")]
    assert (q.quality_text(sq, "baseline"), q.quality_text(sq)) == ("66.9%", "66.8%")
    awq = rows[("lin2024awq", "Llama-2 7B", "AWQ", "W4A16 int4, g128")]
    assert (q.quality_text(awq, "baseline"), q.quality_text(awq)) == ("5.47", "5.60")
    assert q.absolute_change(awq) == pytest.approx(5.60 - 5.47)
    with pytest.raises(ValueError, match="which must be 'value' or 'baseline'"):
        q.quality_text(awq, "base")
    with pytest.raises(TypeError, match="row must be a Published row"):
        q.absolute_change((5.47, 5.60))


def test_fp8_ratios_at_one_shape_and_against_the_datasheet():
    rec = load_measurement()
    gap = q.measured_fp8_speedup(rec)
    m, n, k, fp8, per_call, graph = gap.same_shape[-1]
    assert gap.ratio_at(m) == fp8 / per_call and gap.ratio_at(m, bf16="graph") == fp8 / graph
    assert gap.row(m) == gap.same_shape[-1]
    h = rl.get_hardware("h200-sxm")
    assert gap.of_peak(h) == (gap.fp8 / 1978.9e12, gap.bf16 / 989.4e12)
    with pytest.raises(ValueError, match="m must be one of"):
        gap.ratio_at(3)
    with pytest.raises(ValueError, match="bf16 must be 'per call' or 'graph'"):
        gap.ratio_at(m, bf16="eager")


def test_bf16_in_graphs_ran_slower_than_per_call_at_the_headline_shape():
    gap = q.measured_fp8_speedup(load_measurement())
    m = gap.fp8_shape[0]
    assert m == 4096
    # 693 TFLOP/s in graphs against 776 one call at a time: a graph saves only the launch, so this is noise
    assert gap.graph_over_call(m) == pytest.approx(693.0 / 775.8, rel=1e-3)
    assert gap.ratio_at(m) == pytest.approx(1.74, abs=0.005) and gap.ratio_at(m, bf16="graph") == pytest.approx(1.95, abs=0.005)
    # small products gain from the graph (launch-bound); from 2,048 rows on the graph sweep ran slower
    assert gap.graph_over_call(16) > 1.5
    assert gap.graph_slower() == (2048, 4096, 8192, 16384)
    with pytest.raises(ValueError, match="m must be one of"):
        gap.graph_over_call(3)


def test_fp8_per_call_is_slower_than_bf16_in_graphs_only_for_small_products_and_never_against_per_call():
    gap = q.measured_fp8_speedup(load_measurement())
    assert gap.slower_than_graph() == (16, 32, 64, 128)  # 43.8 us against 34.1 us at m = 16
    assert all(gap.ratio_at(m, bf16="graph") > 1 for m, *_ in gap.same_shape if m >= 256)
    assert min(gap.ratio_at(m) for m, *_ in gap.same_shape) > 1.4  # like with like, fp8 is faster at every m


def test_launch_and_output_shares_of_a_measured_fp8_product():
    rec = load_measurement()
    g = next(x for x in rec.gemm_fp8_per_call if x.m == 8192)
    assert q.launch_share(rec, 8192) == pytest.approx(rec.launch_overhead.eager_s_per_kernel
                                                      / (2 * 8192 * g.n * g.k / g.flops_per_s))
    # an fp8 product of 8192 x 8192 x 8192 reads two 64 MiB operands and writes a 128 MiB bf16 output:
    # half its minimum bytes
    assert g.n == g.k == 8192 and g.min_bytes == pytest.approx(2 * 8192**2 + 2 * 8192**2)
    assert q.output_byte_share(g) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="m must be a row count"):
        q.launch_share(rec, 3)
    with pytest.raises(TypeError, match="gemm must be a measured Gemm"):
        q.output_byte_share((8192, 8192))


def test_chapter_6_helpers_refuse_bad_input():
    with pytest.raises(KeyError, match="unknown model"):
        q.bf16_kept_share("llama-3-9b")
    with pytest.raises(KeyError, match="unknown hardware"):
        q.measured_fp8_speedup(load_measurement()).of_peak("h300")


def test_the_context_where_an_fp8_cache_saves_as_much_as_four_bit_weights():
    m = rl.load_model("llama-3-8b")
    w4 = q.scheme("W4A16 (int4, g128)")
    one, sixteen = q.equal_saving_context(m, 1), q.equal_saving_context(m, 16)
    assert one == pytest.approx(158_080) and sixteen == pytest.approx(one / 16)
    # there both save the same bytes, so (memory-bound) both speed decode up by the same factor
    for batch, ctx in ((1, one), (16, sixteen)):
        assert q.decode_speedup(m, "h200-sxm", batch, round(ctx), kv_dtype="fp8") == pytest.approx(
            q.decode_speedup(m, "h200-sxm", batch, round(ctx), **w4), rel=1e-3)
    # shorter contexts favour the weights, longer the cache
    assert q.decode_speedup(m, "h200-sxm", 16, 4096, **w4) > q.decode_speedup(m, "h200-sxm", 16, 4096, kv_dtype="fp8")
    assert q.decode_speedup(m, "h200-sxm", 16, 32768, **w4) < q.decode_speedup(m, "h200-sxm", 16, 32768, kv_dtype="fp8")
    with pytest.raises(ValueError, match="kv_dtype must be narrower than bf16"):
        q.equal_saving_context(m, 1, kv_dtype="bf16")
