"""FP8 training layouts in the cluster model (chapter 6, appendix C): which matmuls run at the fp8 rate, what the
casts cost, what the recipes keep in memory, and the refusals; worked by hand where a reader would check."""

from dataclasses import replace

import numpy as np
import pytest

from roofline.core.calibration import QUANTIZATION_RECORDS, cast_share, fp8_training_roof, get_roof
from roofline.core.checks import UnknownNameError
from roofline.core.fp8 import FP8_MATMULS, FP8_RECIPES, fp8_recipe
from roofline.core.model import load_model
from roofline.core.records import record_value
from roofline.parallel.cluster import TrainLayout, check_layout, estimate_step, price_step
from roofline.workloads.memory import activation_bytes

LAY = TrainLayout(seq=8192, dp=8, global_batch=64, zero_stage=1, recompute="none")


@pytest.mark.parametrize("recipe", sorted(FP8_RECIPES))
def test_the_fp8_floor_is_at_or_below_the_bf16_floor_of_the_same_layout(recipe):
    bf16_floor, bf16_est = estimate_step("llama-3.1-8b", "h100-sxm", LAY)
    fp8_floor, fp8_est = estimate_step("llama-3.1-8b", "h100-sxm", replace(LAY, dtype="fp8", fp8_recipe=recipe))
    assert fp8_floor.time <= bf16_floor.time and fp8_floor.time <= fp8_est.time
    assert fp8_est.time < bf16_est.time  # every recipe here buys time on the H100 at this size
    assert fp8_floor.roof.peak_flops == pytest.approx(2 * bf16_floor.roof.peak_flops, rel=1e-3)  # the fp8 peak


def test_under_the_datasheet_the_linear_layers_take_half_the_bf16_time():
    """Every product of a linear layer of Llama 3.1 8B at 8,192 tokens is far above the ridge, so at the
    datasheet's peaks a layer's fp8 matmuls take its bf16 matmuls' time over the ratio of the peaks (1,979 over
    989.4 TFLOP/s: half), forward and backward; its attention, kept in bf16, the same time."""
    from roofline.parallel.cluster import layer_seconds

    m = load_model("llama-3.1-8b")
    lo, hi = get_roof("h100-sxm", "datasheet", "bf16"), get_roof("h100-sxm", "datasheet", "fp8")
    for phase in ("forward", "backward"):
        bf16 = layer_seconds(m, LAY, lo, phase)
        fp8 = layer_seconds(m, replace(LAY, dtype="fp8"), hi, phase)
        assert fp8["matmuls"] == pytest.approx(bf16["matmuls"] * lo.peak_flops / hi.peak_flops, rel=1e-9)
        assert fp8["attention"] == bf16["attention"] and fp8["fp8 casts"] > 0


def test_the_casts_move_what_the_recipe_says_at_the_quantization_kernels_rate():
    """One dense layer of Llama 3.1 8B, 8,192 tokens, one GPU, Transformer Engine's delayed scaling: forward, the
    inputs of q/k/v (one cast, shared), o, gate/up (shared) and down; backward, the output gradient of each of the
    seven linears; four bytes an element each (read bf16, write fp8 and its transpose)."""
    m = load_model("llama-3.1-8b")
    roof = get_roof("h100-sxm", "calibrated", "fp8")
    from roofline.parallel.cluster import layer_seconds

    T, h, i, q, kv = 8192, m.hidden_size, m.intermediate_size, m.attention_width, m.num_kv_heads * m.head_dim
    lay = TrainLayout(seq=T, dtype="fp8", recompute="none", zero_stage=0)
    fwd = layer_seconds(m, lay, roof)["fp8 casts"]
    bwd = layer_seconds(m, lay, roof, "backward")["fp8 casts"]
    assert fwd == pytest.approx(4 * T * (h + q + h + i) / roof.cast_bandwidth)
    assert bwd == pytest.approx(4 * T * (q + 2 * kv + h + 2 * i + h) / roof.cast_bandwidth)
    current = replace(lay, fp8_recipe="te-current")  # an amax pass first: two more bytes read an element
    assert layer_seconds(m, current, roof)["fp8 casts"] == pytest.approx(fwd * 6 / 4)


def test_the_quantization_rate_is_its_records_median_share_of_stream():
    share = float(np.median([record_value(i) for i in QUANTIZATION_RECORDS])) / record_value("mb0166")
    assert cast_share() == share and 0.85 < share < 1
    h100 = get_roof("h100-sxm", "calibrated", "fp8")
    assert h100.cast_bandwidth == pytest.approx(share * h100.bandwidth)
    assert h100.bf16.dtype == "bf16" and h100.high is h100.bf16
    # finer scalings never beat the per-tensor curve of the same chip
    for curve in h100.fp8_gemm.values():
        for x in (1e9, 1e11, 1e12, 1e13):
            assert curve(x) <= h100.gemm(x) * (1 + 1e-12)
    assert h100.fp8_gemm["rowwise"](7.7e12) == pytest.approx(record_value("mbx107"), rel=0.01)
    assert fp8_training_roof(get_roof("h100-sxm", "calibrated", "bf16")).bf16 is None  # a bf16 roof as it is


def test_fp8_memory_adds_the_weight_copies_and_saves_the_inputs_the_recipe_keeps_in_fp8():
    """Llama 3.1 8B, ZeRO-1 over 8: delayed scaling keeps an fp8 weight and its transpose (2 bytes a parameter) and
    the linear layers' own inputs in fp8 (1 byte an element instead of 2), an fp8 copy beside the attention output;
    torchao's rowwise recipe keeps neither."""
    m = load_model("llama-3.1-8b")
    bf16 = estimate_step(m, "h100-sxm", LAY)[1]
    te = estimate_step(m, "h100-sxm", replace(LAY, dtype="fp8"))[1]
    rw = estimate_step(m, "h100-sxm", replace(LAY, dtype="fp8", fp8_recipe="torchao-rowwise"))[1]
    linear = m.params - m.vocab_size * m.hidden_size * 2  # the weights that are not the embedding and head
    assert te.memory_parts["fp8 weights"] == pytest.approx(2 * linear, rel=1e-3)
    T, h, i, q = 8192, m.hidden_size, m.intermediate_size, m.attention_width
    saved = (h + h + i) * T * 1 - q * T * 1  # qkv, gate/up and down inputs halved; an fp8 copy of o_proj's input
    per_layer = activation_bytes(m, T, 1) - activation_bytes(m, T, 1, fp8_inputs=True)
    assert per_layer == pytest.approx(saved)
    assert bf16.memory_parts["activations"] - te.memory_parts["activations"] == pytest.approx(per_layer * m.num_layers)
    assert te.memory - bf16.memory == pytest.approx(2 * linear - per_layer * m.num_layers, rel=1e-3)
    assert rw.memory == pytest.approx(bf16.memory) and rw.memory_parts["fp8 weights"] == 0


def test_torchao_gathers_the_weights_in_fp8_under_fsdp():
    m = load_model("llama-3.1-8b")
    roof = get_roof("h100-sxm", "calibrated", "fp8")
    lay = replace(LAY, dp=32, zero_stage=3, dtype="fp8", fp8_recipe="torchao-tensorwise", global_batch=32)
    te = price_step(m, replace(lay, fp8_recipe="te-delayed"), roof)
    ao = price_step(m, lay, roof)
    dp = lambda p: p.parts["data-parallel"] + p.hidden["data-parallel"]
    emb = m.vocab_size * m.hidden_size * 2
    gathers = 2 * roof.collective_time("all_gather", 32, 2 * m.params, per_node=8)
    fp8_gathers = 2 * roof.collective_time("all_gather", 32, (m.params - emb) + 2 * emb, per_node=8)
    assert dp(te) - dp(ao) == pytest.approx(gathers - fp8_gathers)


def test_the_recipes_name_their_matmuls_and_unknown_ones_are_refused():
    assert all(FP8_RECIPES[r].runs_fp8(mm) for r in FP8_RECIPES for mm in FP8_MATMULS)
    with pytest.raises(UnknownNameError, match="unknown fp8_recipe 'te-delay'.*te-delayed"):
        fp8_recipe("te-delay")
    with pytest.raises(UnknownNameError, match="unknown matmul"):
        FP8_RECIPES["te-delayed"].runs_fp8("backward")


@pytest.mark.parametrize("fields, error, match", [
    ({"fp8_recipe": "te-delayed"}, ValueError, "fp8_recipe .* needs dtype 'fp8'"),
    ({"dtype": "fp8", "fp8_recipe": "mxfp8"}, UnknownNameError, "unknown fp8_recipe 'mxfp8'"),
    ({"dtype": "fp8", "grad_dtype": "fp8"}, UnknownNameError, "unknown grad_dtype 'fp8'"),
])
def test_bad_fp8_layouts_are_refused_naming_the_constraint(fields, error, match):
    with pytest.raises(error, match=match):
        check_layout("llama-3.1-8b", replace(LAY, **fields))


def test_an_fp8_layout_needs_an_fp8_roof():
    with pytest.raises(ValueError, match="dtype 'fp8' is priced under a roof of its own format"):
        price_step("llama-3.1-8b", replace(LAY, dtype="fp8"), get_roof("h100-sxm", "calibrated", "bf16"))
    with pytest.raises(ValueError, match="dtype 'bf16' is priced under a roof of its own format"):
        price_step("llama-3.1-8b", LAY, get_roof("h100-sxm", "calibrated", "fp8"))


def test_fp8_training_prices_one_layout_in_every_format_and_bounds_the_speed_up():
    """Amdahl: a step of 10 s whose matmuls take 6 s would take 7 s with the matmuls halved, 1.43x faster; the
    recipes' speed-ups all fall below that bound, for their matmuls do not halve and their casts add time."""
    from roofline.parallel.cluster import fp8_speedup_bound, fp8_training

    priced = fp8_training("llama-3.1-8b", "h100-sxm", LAY)
    assert list(priced) == ["bf16", *FP8_RECIPES]
    bf16 = priced["bf16"][1]
    bound = fp8_speedup_bound(bf16)
    assert bound == pytest.approx(bf16.time / (bf16.time - bf16.parts["matmuls"] / 2))
    assert all(1 < bf16.time / est.time < bound for name, (_, est) in priced.items() if name != "bf16")
    assert priced["te-delayed"][1].time == estimate_step("llama-3.1-8b", "h100-sxm", replace(LAY, dtype="fp8"))[1].time
    with pytest.raises(ValueError, match="bf16 or fp16 step"):
        fp8_speedup_bound(priced["te-delayed"][1])


def test_a_search_over_both_formats_ranks_them_together_and_refuses_what_it_cannot_price():
    from roofline.parallel.cluster import search

    roof = get_roof("h100-sxm", "calibrated")
    both = search("llama-3.1-8b", roof, gpus=8, seq=8192, global_batch=16, dtypes=("bf16", "fp8"), tps=(1, 2),
                  cps=(1,), zero_stages=(1,))
    bf16 = search("llama-3.1-8b", roof, gpus=8, seq=8192, global_batch=16, tps=(1, 2), cps=(1,), zero_stages=(1,))
    assert both.priced == 2 * bf16.priced and {p.layout.dtype for p in both.ranked} == {"bf16", "fp8"}
    assert both.best.layout.dtype == "fp8" and both.best.time < bf16.best.time
    assert both.floors(1)[0].roof.dtype == "fp8"  # each floor in its layout's own format
    with pytest.raises(UnknownNameError, match="unknown fp8_recipe 'te'"):
        search("llama-3.1-8b", roof, gpus=8, seq=8192, global_batch=16, dtypes=("fp8",), fp8_recipe="te")
    with pytest.raises(ValueError, match="dtypes must include 'fp8'"):
        search("llama-3.1-8b", roof, gpus=8, seq=8192, global_batch=16, fp8_recipe="te-current")
    with pytest.raises(ValueError, match="give dtype or dtypes, not both"):
        search("llama-3.1-8b", roof, gpus=8, seq=8192, global_batch=16, dtype="bf16", dtypes=("fp8",))
