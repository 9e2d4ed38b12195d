"""Fine-grained MoE training (issue 48, item 4): the expert all-to-all priced from DeepEP's normal kernels, the
experts' forward products from DeepGEMM's grouped kernels, group-limited (node-limited) routing, and DeepSeek-V3's
multi-token-prediction module. Each value worked by hand in its docstring from the records it reads."""

import dataclasses
import math

import pytest

import roofline as rl
from roofline.core.calibration import EP_NORMAL_LOAD, EP_NORMAL_RECORDS, GROUPED_GEMM_RECORDS, ep_normal_rates, get_roof
from roofline.core.checks import UnknownNameError
from roofline.core.curve import Curve
from roofline.core.cluster_roof import FP8_DISPATCH_BYTES
from roofline.core.fp8 import fp8_recipe
from roofline.core.model import MoE
from roofline.core.records import record, record_value
from roofline.core.routing import exchange_units
from roofline.parallel.cluster import (TrainLayout, _layer, expert_exchange_seconds, grouped_expert_forward,
                                       mtp_flops_per_token, price_step)

V3 = rl.load_model("deepseek-v3")
QWEN = rl.load_model("qwen3-30b-a3b")
H800_FP8 = get_roof("h800-sxm", "calibrated", "fp8")
H800_SHEET = get_roof("h800-sxm", "datasheet")
BLOCKWISE = fp8_recipe("deepseek-blockwise")
# DeepSeek-V3's published layout: PP 16, EP 64 over 8 nodes, no TP, 4,096-token sequences, micro-batch 1
V3_LAYOUT = TrainLayout(seq=4096, ep=64, dp=128, pp=16, dtype="fp8", fp8_recipe="deepseek-blockwise")
DISPATCH_BYTES = 4096 * 4 * 7168 * (1 + 4 / 128)  # 121,110,528: a token to 4 nodes, fp8 with a scale per 128


# ------------------------------------------------------------------------------------ the records


def test_the_grouped_records_are_deepgemms_table_rows_in_tflops():
    """Ten rows of DeepGEMM's README (4 contiguous, 6 masked), each quoting the value it holds."""
    assert len(GROUPED_GEMM_RECORDS) == 10
    for i in GROUPED_GEMM_RECORDS:
        r = record(i)
        assert f"| {r['value']} TFLOPS" in r["quote"].replace("  ", " ")
        assert r["source"]["url"].startswith("https://github.com/deepseek-ai/DeepGEMM/blob/")
        assert r["shape_mnk"][0] == r["m_per_group"]
    assert record_value("mbx300") == pytest.approx(1346e12)
    assert record_value("mbx309") == pytest.approx(815e12)


def test_deepep_normal_rates_are_its_readme_bandwidths():
    """Inside a node DeepEP's dispatch reached 153 GB/s and its combine 158 (mb0094, mb0095); across 2, 4 and 8
    nodes the dispatch 43, 58 and 51 GB/s (mb0096, mb0098, mb0100), read as a curve of the group's size."""
    rdma, nvlink, ids = ep_normal_rates()
    assert ids == EP_NORMAL_RECORDS
    assert nvlink == pytest.approx({"dispatch": 153e9, "combine": 158e9})
    assert [rdma["dispatch"](g) for g in (16, 32, 64)] == pytest.approx([43e9, 58e9, 51e9])
    assert rdma["combine"](64) == pytest.approx(50e9)
    assert rdma["dispatch"](128) == pytest.approx(51e9)  # held past the largest group measured


def test_the_normal_kernels_load_is_the_one_their_records_name():
    """4,096 tokens a batch, hidden 7,168, top-8 experts from top-4 groups, as each record's setting says."""
    assert EP_NORMAL_LOAD == (4096, 7168, 8, 4)
    for i in EP_NORMAL_RECORDS:
        assert record(i)["message_size_label"] == "4096 tokens/batch, hidden 7168, top-4 groups, top-8 experts"


# ------------------------------------------------------------------------------------ routing


def test_a_token_reaches_fewer_gpus_than_experts_when_some_share_one():
    """Qwen3-30B-A3B, 128 experts, top 8, over 8 GPUs (16 experts each): ``8 (1 - C(112,8)/C(128,8)) = 5.34``
    GPUs a token."""
    assert exchange_units(128, 8, 8) == pytest.approx(8 * (1 - math.comb(112, 8) / math.comb(128, 8)))
    assert exchange_units(128, 8, 8) == pytest.approx(5.339, abs=1e-3)


def test_node_limited_routing_caps_the_nodes_a_token_reaches():
    """DeepSeek-V3 over 8 nodes, a group of 32 experts a node, a token's experts from at most 4 groups: uniformly
    5.29 nodes, capped at 4. Over 16 parts (a group spans two) the cap is 4 x 16 / 8 = 8 and does not bind
    (uniformly ``16 (1 - C(240,8)/C(256,8)) = 6.52``); over 2 nodes (4 groups each) the cap of 4 does not bind
    either (``2 (1 - C(128,8)/C(256,8)) = 1.99``)."""
    assert exchange_units(256, 8, 8) == pytest.approx(5.295, abs=1e-3)
    assert exchange_units(256, 8, 8, 8, 4) == 4.0
    assert exchange_units(256, 8, 16, 8, 4) == pytest.approx(16 * (1 - math.comb(240, 8) / math.comb(256, 8)))
    assert exchange_units(256, 8, 16, 8, 4) == pytest.approx(6.523, abs=1e-3)
    assert exchange_units(256, 8, 2, 8, 4) == pytest.approx(2 * (1 - math.comb(128, 8) / math.comb(256, 8)))


def test_deepseek_v3s_config_gives_its_groups_and_its_prediction_module():
    assert (V3.moe.groups, V3.moe.groups_per_token, V3.mtp_layers) == (8, 4, 1)
    assert (QWEN.moe.groups, QWEN.moe.groups_per_token, QWEN.mtp_layers) == (1, None, 0)


@pytest.mark.parametrize("kwargs, message", [
    (dict(groups=3), r"MoE.groups \(3\) must divide num_experts \(256\)"),
    (dict(groups=8, groups_per_token=9), r"groups_per_token \(9\) exceeds groups \(8\)"),
])
def test_bad_groups_are_refused_with_the_field_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(V3.moe, **kwargs)


def test_exchange_units_refuses_more_groups_a_token_than_groups():
    with pytest.raises(ValueError, match=r"groups_per_token \(5\) exceeds groups \(4\)"):
        exchange_units(256, 8, 8, 4, 5)


# ------------------------------------------------------------------------------------ grouped matmuls


def test_a_grouped_matmul_runs_at_deepgemms_measured_rate():
    """mbx300: 4 groups of 8,192 x 4,096 x 7,168 are ``2 x 4 x 8,192 x 4,096 x 7,168 = 1.924e12`` FLOPs; at
    1,346 TFLOP/s, 1.4295 ms."""
    assert H800_FP8.grouped_gemm_time(4, 8192, 4096, 7168) == pytest.approx(2 * 4 * 8192 * 4096 * 7168 / 1346e12)
    assert H800_FP8.grouped_gemm_time(4, 8192, 4096, 7168) == pytest.approx(1.4295e-3, rel=1e-4)


def test_rows_or_shapes_outside_the_records_are_not_read():
    """Below 256 rows a group (the smallest measured), or a shape DeepGEMM did not time (Qwen3's 768-wide
    experts), the grouped curve answers nothing and each expert is priced as its own matmul."""
    assert H800_FP8.grouped_gemm_time(4, 128, 4096, 7168) is None
    assert H800_FP8.grouped_gemm_time(4, 8192, 1536, 2048) is None
    assert grouped_expert_forward(QWEN, H800_FP8, BLOCKWISE, 8192, 16) == {}


def test_deepseek_v3s_experts_forward_is_one_grouped_call_a_projection():
    """EP 64: 4 experts a GPU, each ``4,096 x 8 x 64 / 256 = 8,192`` rows. Gate and up side by side: 1.4295 ms
    (above), 0.1787 ms a projection of an expert; down, ``2 x 4 x 8,192 x 7,168 x 2,048 = 0.962e12`` FLOPs at
    1,214 TFLOP/s (mbx301), 0.7925 ms, 0.1981 ms an expert."""
    f = grouped_expert_forward(V3, H800_FP8, BLOCKWISE, 8192, 4)
    assert f["expert.gate_proj"] == f["expert.up_proj"] == pytest.approx(1.4295e-3 / 8, rel=1e-4)
    assert f["expert.down_proj"] == pytest.approx(2 * 4 * 8192 * 7168 * 2048 / 1214e12 / 4)
    assert f["expert.down_proj"] == pytest.approx(0.1981e-3, rel=1e-3)


def test_only_a_block_scaled_recipe_reads_the_grouped_kernels():
    """DeepGEMM's kernels scale by blocks; a per-tensor recipe (Transformer Engine's) or bf16 prices each
    expert as its own matmul."""
    assert grouped_expert_forward(V3, H800_FP8, fp8_recipe("te-delayed"), 8192, 4) == {}
    assert grouped_expert_forward(V3, H800_FP8, None, 8192, 4) == {}


# ------------------------------------------------------------------------------------ the all-to-all


def test_deepeps_internode_dispatch_prices_its_own_readme_row():
    """DeepEP's dispatch at 64 GPUs over 8 nodes (mb0100): 4,096 tokens of 7,168 in fp8 to 4 nodes each,
    ``4,096 x 4 x 7,168 x 1.03125 = 121.1 MB``, at 51 GB/s: 2.3747 ms."""
    assert FP8_DISPATCH_BYTES == 1.03125
    t = H800_FP8.ep_exchange_time("dispatch", 64, DISPATCH_BYTES, per_node=8)
    assert t == pytest.approx(DISPATCH_BYTES / 51e9)
    assert t == pytest.approx(2.3747e-3, rel=1e-4)


def test_the_datasheet_floor_sends_what_leaves_the_node_through_its_port():
    """The same bytes under the datasheet: 7/8 of 121.1 MB leave the node, at the port's 50 GB/s: 2.119 ms,
    below DeepEP's measured 2.375 ms."""
    t = H800_SHEET.ep_exchange_time("dispatch", 64, DISPATCH_BYTES, per_node=8)
    assert t == pytest.approx(DISPATCH_BYTES * 7 / 8 / 50e9)
    assert t < H800_FP8.ep_exchange_time("dispatch", 64, DISPATCH_BYTES, per_node=8)


def test_inside_a_node_the_h800_runs_deepeps_intranode_rates():
    """8 GPUs of one node, 100 MB: the dispatch at 153 GB/s, 0.654 ms; the combine at 158 GB/s, 0.633 ms."""
    assert H800_FP8.ep_exchange_time("dispatch", 8, 100e6, per_node=8) == pytest.approx(100e6 / 153e9)
    assert H800_FP8.ep_exchange_time("combine", 8, 100e6, per_node=8) == pytest.approx(100e6 / 158e9)


def test_an_unknown_exchange_is_refused_by_name():
    with pytest.raises(UnknownNameError, match="unknown kind 'gather'; known: combine, dispatch"):
        H800_FP8.ep_exchange_time("gather", 8, 1e6, per_node=8)


def test_deepseek_v3s_layer_exchanges_at_its_published_layout():
    """A micro-batch of 4,096 tokens a GPU, each to 4 nodes: the fp8 dispatch 121.1 MB at 51 GB/s (2.375 ms) and
    the bf16 combine ``4,096 x 4 x 7,168 x 2 = 234.9 MB`` at 50 GB/s (4.698 ms): 7.072 ms forward, the same
    backward."""
    fwd, bwd = expert_exchange_seconds(V3, V3_LAYOUT, H800_FP8)
    assert fwd == bwd == pytest.approx(DISPATCH_BYTES / 51e9 + 4096 * 4 * 7168 * 2 / 50e9)
    assert fwd == pytest.approx(7.072e-3, rel=1e-3)


def test_a_bf16_layout_dispatches_in_bf16():
    """Without DeepSeek-V3's recipe the dispatch is bf16 too: 234.9 MB at 51 GB/s (4.605 ms) + 4.698 ms."""
    lay = dataclasses.replace(V3_LAYOUT, dtype="bf16", fp8_recipe=None)
    fwd, _ = expert_exchange_seconds(V3, lay, get_roof("h800-sxm", "calibrated"))
    assert fwd == pytest.approx(4096 * 4 * 7168 * 2 * (1 / 51e9 + 1 / 50e9))


# ------------------------------------------------------------------------------------ multi-token prediction


def test_deepseek_v3s_prediction_module_adds_about_four_percent_of_the_flops():
    """At 4,096 tokens: a MoE layer's linears a token meets (0.585B), the 2h x h projection (0.103B) and the head
    (0.927B) at 6 FLOPs a weight, 9.69 GFLOPs, and its attention ``4,096 x 128 x 320 x 3 = 0.503`` GFLOPs:
    10.19 GFLOPs a token; a model without the module spends none."""
    assert mtp_flops_per_token(V3, 4096) == pytest.approx(10.19e9, rel=1e-3)
    assert 4096 * 128 * 320 * 3 == pytest.approx(0.503e9, rel=1e-3)
    assert mtp_flops_per_token("llama-3-8b", 4096) == 0.0
    assert mtp_flops_per_token(V3, 4096, "full") > mtp_flops_per_token(V3, 4096)


def test_the_prediction_module_lands_on_the_last_stage_and_slows_the_step():
    """The module is a layer and a head on the last stage: without it the same layout's step is faster."""
    roof = get_roof("h800-sxm", "calibrated")
    lay = TrainLayout(seq=4096, ep=64, dp=128, pp=16, global_batch=1920)
    with_mtp = price_step(V3, lay, roof)
    without = price_step(dataclasses.replace(V3, mtp_layers=0), lay, roof)
    assert with_mtp.time > without.time
    assert with_mtp.model_flops > without.model_flops


def test_moe_without_groups_keeps_the_default():
    assert MoE(num_experts=8, experts_per_token=2, expert_intermediate_size=14336).groups_per_token is None


# ------------------------------------------------------------------------------------ inside one MoE layer


def _moe_layer_forward(roof, layout=V3_LAYOUT) -> dict:
    ph, _, _ = _layer(V3, layout, roof, moe=True)
    return dict(ph.fwd)


def _flat(rate: float) -> dict:
    return {shape: Curve((256.0, 8192.0), (rate, rate)) for shape in H800_FP8.grouped_gemm}


def test_the_layers_expert_forward_is_the_two_grouped_calls():
    """With the grouped curves held flat, the layer's forward matmuls move by exactly the grouped calls' FLOPs:
    4 experts of 8,192 rows, gate and up (4,096 x 7,168) and down (7,168 x 2,048), ``2 x 4 x 8,192 x (29.36M +
    14.68M) = 2.886e12`` FLOPs; at 0.5 PFLOP/s rather than 1, 2.886 ms more."""
    slow = _moe_layer_forward(dataclasses.replace(H800_FP8, grouped_gemm=_flat(0.5e15)))["matmuls"]
    fast = _moe_layer_forward(dataclasses.replace(H800_FP8, grouped_gemm=_flat(1e15)))["matmuls"]
    flops = 2 * 4 * 8192 * (4096 * 7168 + 7168 * 2048)
    assert slow - fast == pytest.approx(flops / 1e15)
    assert slow - fast == pytest.approx(2.886e-3, rel=1e-3)


def test_a_per_tensor_recipe_dispatches_in_bf16_and_pays_the_difference():
    """Transformer Engine's recipe keeps the dispatch in bf16: ``4,096 x 4 x 7,168 x (2 - 1.03125) = 113.8 MB``
    more at 51 GB/s, 2.231 ms more a layer's forward."""
    te = dataclasses.replace(V3_LAYOUT, fp8_recipe="te-delayed")
    extra = (_moe_layer_forward(get_roof("h800-sxm", "calibrated", "fp8"), te)["expert all-to-all"]
             - _moe_layer_forward(H800_FP8)["expert all-to-all"])
    assert extra == pytest.approx(4096 * 4 * 7168 * (2 - 1.03125) / 51e9)
    assert extra == pytest.approx(2.231e-3, rel=1e-3)
