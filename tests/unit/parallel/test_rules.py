"""The rules of thumb (roofline.parallel.rules): each one's value worked by hand from the datasheet and the
config, the laws they state (the band, the format that cancels, the optimum that is a minimum), their
agreement with the package's full model where they should agree, and bad input."""

import dataclasses
import math

import pytest
from hypothesis import given, settings, strategies as st

from roofline.core.cost import Cost
from roofline.core.hardware import get_hardware
from roofline.core.model import NotModelledError, load_model
from roofline.parallel import rules
from roofline.parallel.data_parallel import hiding_tokens
from roofline.parallel.planner import plan
from roofline.serving.capacity import weights_kv_crossover
from roofline.workloads.inference import compute_bound_batch, decode_step
from roofline.workloads.memory import weight_bytes

H100 = get_hardware("h100-sxm")
NVLINK = 450e9  # H100 SXM: NVLink 4's 900 GB/s bidirectional, each way
NIC = 50e9  # one 400 Gb/s ConnectX-7 per GPU


def test_the_ridge_is_the_catalogs_295_on_an_h100():
    assert rules.ridge("h100-sxm") == pytest.approx(989.4e12 / 3.35e12)
    assert round(rules.ridge("h100-sxm")) == 295
    assert rules.ridge("h100-sxm", "fp8") == pytest.approx(2 * rules.ridge("h100-sxm"), rel=1e-3)  # 1978.9 vs 989.4


def test_the_vector_roof_is_the_non_tensor_fp32_rate_and_a_dot_product_sits_under_it():
    assert rules.vector_roof("h100-sxm") == pytest.approx(66.9e12)
    assert rules.vector_ridge("h100-sxm") == pytest.approx(66.9 / 3.35)  # about 20 FLOP/B
    assert rules.dot_intensity("bf16") == 0.5 and rules.dot_intensity("fp32") == 0.25
    # every chip's fp32 entry is the vector rate, as its source says
    from roofline.core.hardware import hardware_names
    for key in hardware_names():
        hw = get_hardware(key)
        if "fp32" in hw.dense_flops:
            note = hw.source("dense.fp32").note.lower()
            assert "non-tensor" in note or "vector" in note, (key, note)


def test_the_band_holds_and_is_two_at_the_ridge():
    at_ridge = Cost(flops=rules.ridge(H100) * 1e9, bytes=1e9)
    band = rules.time_band(at_ridge, H100)
    assert band.ratio == pytest.approx(2.0)
    assert band.upper == pytest.approx(2 * band.lower)


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 512), st.integers(0, 32768))
def test_max_le_time_le_sum_within_two(batch, context):
    band = rules.time_band(decode_step("llama-3-8b", batch, context), H100)
    assert band.lower <= band.upper <= 2 * band.lower * (1 + 1e-12)
    assert 1 <= band.ratio <= 2 + 1e-12


def test_data_parallel_threshold_by_hand():
    # one node: (F / W) (G-1)/G = 989.4e12 / 450e9 x 7/8
    assert rules.dp_tokens("llama-3-8b", H100) == pytest.approx(989.4e12 / NVLINK * 7 / 8)
    # eight nodes: the network port, which carries (nodes-1)/nodes / g of the buffer: 989.4e12 / 50e9 x 7/8 / 8
    assert rules.dp_tokens("llama-3-8b", H100, nodes=8) == pytest.approx(989.4e12 / NIC * 7 / 8 / 8)


@pytest.mark.parametrize("nodes", [1, 2, 8, 64])
@pytest.mark.parametrize("model", ["llama-3-8b", "llama-3-70b"])
def test_the_closed_form_is_the_packages_threshold_and_the_model_cancels(model, nodes):
    assert rules.dp_tokens_closed(H100, nodes=nodes) == pytest.approx(rules.dp_tokens(model, H100, nodes=nodes))
    assert rules.dp_tokens(model, H100, nodes=nodes) == pytest.approx(rules.dp_tokens("llama-3-8b", H100, nodes=nodes))


@pytest.mark.parametrize("nodes", [1, 4])
def test_fsdp_has_data_parallelisms_threshold_once_its_gathers_overlap_the_forward_pass(nodes):
    fsdp = rules.fsdp_tokens("llama-3-70b", H100, nodes=nodes)
    assert fsdp == pytest.approx(rules.dp_tokens("llama-3-70b", H100, nodes=nodes))
    # everything behind the backward pass, as hiding_tokens counts ZeRO-3: 1.5 times
    assert hiding_tokens("llama-3-70b", H100, nodes=nodes, zero_stage=3) == pytest.approx(1.5 * fsdp)


def test_tensor_parallel_width_by_hand_for_llama_3_70b():
    m = load_model("llama-3-70b")
    h, i, kv = m.hidden_size, m.intermediate_size, m.num_kv_heads * m.head_dim
    c = (2 * h * h + 2 * h * kv + 3 * h * i) / h**2  # q, o; k, v; gate, up, down
    assert c == pytest.approx(12.75)
    want = 2 * (8 - 1) * 2 * (989.4e12 / NVLINK) / c
    assert rules.tp_width(m, 8, H100) == pytest.approx(want)
    assert 4800 < want < h  # so 70B's width hides its all-reduces at degree 8


def test_decode_tp_bound_by_hand():
    m = load_model("llama-3-70b")
    p_layer = m.layer_matmul_params
    beta = 3.35e12 / NVLINK
    want = 1 + p_layer / (4 * m.hidden_size) / (64 * beta)
    assert rules.decode_tp_bound(m, H100, 64) == pytest.approx(want)
    assert 55 < want < 57


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 4096), st.sampled_from(["fp16", "fp8", "fp32", "int8"]))
def test_decode_tp_bound_does_not_move_with_the_format(batch, dtype):
    same = rules.decode_tp_bound("llama-3-70b", H100, batch, dtype=dtype)
    assert same == pytest.approx(rules.decode_tp_bound("llama-3-70b", H100, batch, dtype="bf16"))


def test_narrower_weights_than_activations_lower_the_decode_bound_in_proportion():
    bf16 = rules.decode_tp_bound("llama-3-70b", H100, 16)
    fp8_weights = rules.decode_tp_bound("llama-3-70b", H100, 16, weights_dtype="fp8")
    assert fp8_weights - 1 == pytest.approx((bf16 - 1) / 2)


def test_decode_tp_bound_broadcasts_over_the_batch():
    out = rules.decode_tp_bound("llama-3-8b", H100, [1, 2, 4])
    assert (out[0] - 1) == pytest.approx(2 * (out[1] - 1)) == pytest.approx(4 * (out[2] - 1))


def test_mixed_optimum_by_hand_for_llama_3_70b_on_64_h100s():
    m = load_model("llama-3-70b")
    tokens = 512 * 8192
    fm = 3 * m.layer_matmul_params / (8 * m.hidden_size)
    assert fm == pytest.approx(39168)
    mo = rules.mixed_optimum(m, H100, tokens=tokens, nodes=8)
    assert mo.x == pytest.approx(math.sqrt(tokens / fm * NIC / NVLINK * 64))
    assert mo.x * mo.y == pytest.approx(64)
    assert mo.pays and mo.tokens_per_gpu_limit == pytest.approx(fm * NVLINK / NIC)


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 64), st.integers(1 << 10, 1 << 26))
def test_the_mixed_optimum_minimizes_the_traffic_it_counts(nodes, tokens):
    m = load_model("llama-3-8b")
    mo = rules.mixed_optimum(m, H100, tokens=tokens, nodes=nodes)
    wy = NVLINK
    wx = NIC if nodes > 1 else NVLINK

    def traffic(x):  # ZeRO-3's three collectives of the shard, tensor parallelism's four all-reduces
        return 3 * m.layer_matmul_params * x / (mo.n * wx) + 8 * tokens * m.hidden_size / (x * wy)

    assert traffic(mo.x) <= min(traffic(mo.x * 1.05), traffic(mo.x / 1.05))
    assert mo.pays == (tokens / mo.n < mo.tokens_per_gpu_limit)


def test_the_attention_crossover_for_llama_3_8b_by_hand():
    m = load_model("llama-3-8b")
    mlp = 3 * 4096 * 14336  # gate, up, down
    width = 32 * 128
    assert rules.attention_crossover(m) == pytest.approx(mlp / width) == 43008
    assert rules.attention_crossover(m, causal=False) == pytest.approx(43008 / 2)
    # the package's own count, the triangle with its diagonal: 2 w L S (S + 1) = 2 S P_mlp L
    assert rules.attention_crossover_exact(m) == 43008 - 1


def test_scaling_books_8d_is_the_count_without_the_mask():
    # a plain layer: full multi-head attention, a gated MLP 4D wide: P_layer = 4 D^2 + 12 D^2
    m = dataclasses.replace(load_model("llama-3-8b"), intermediate_size=4 * 4096, num_kv_heads=32)
    d = m.hidden_size
    assert rules.attention_crossover(m, against="layer", causal=False) == pytest.approx(8 * d)
    assert rules.attention_crossover(m, against="layer") == pytest.approx(16 * d)


def test_kv_bound_batch_is_chapter_fives_crossover_turned_round():
    m = load_model("llama-3-8b")
    assert rules.kv_bound_batch(m, 4096) == pytest.approx(weight_bytes(m) / (4096 * 131072))
    assert rules.kv_bound_batch(m, 4096) * 4096 == pytest.approx(weights_kv_crossover(m, 1))
    assert list(rules.kv_bound_batch(m, [1024, 2048])) == pytest.approx(
        [weights_kv_crossover(m, 1) / 1024, weights_kv_crossover(m, 1) / 2048])


def test_the_compute_bound_decode_batch_is_the_ridge_and_the_sweep_agrees_at_no_context():
    assert rules.decode_compute_batch(H100) == pytest.approx(rules.ridge(H100))
    assert rules.decode_compute_batch(H100, "fp8") == pytest.approx(rules.decode_compute_batch(H100), rel=1e-3)
    assert compute_bound_batch("llama-3-8b", H100, 0) == math.ceil(rules.decode_compute_batch(H100))


def test_rules_for_a_cluster_sets_the_planner_beside_the_rules():
    out = rules.rules_for("llama-3-70b", H100, nodes=8, seq=8192, global_batch=512)
    by = {r.name: r for r in out}
    best = plan("llama-3-70b", H100, nodes=8, seq=8192, global_batch=512).best
    mixed = by["mixed FSDP x TP: tensor degree"]
    assert mixed.model_value == best.tp and mixed.chapter == 9
    assert mixed.value == pytest.approx(rules.mixed_optimum("llama-3-70b", H100, tokens=512 * 8192, nodes=8).y)
    assert by["ridge point"].value == pytest.approx(rules.ridge(H100))
    assert by["data-parallel tokens per GPU"].model_value == pytest.approx(512 * 8192 / 64)
    assert all(r.chapter in range(1, 13) and r.assumption and r.statement for r in out)
    assert all(r.reason for r in out if r.model_value is not None)


def test_find_rule_picks_one_result_by_the_start_of_its_name():
    out = rules.rules_for("llama-3-8b", H100)
    assert rules.find_rule(out, "KV-bound").value == pytest.approx(rules.kv_bound_batch("llama-3-8b", 4096))
    with pytest.raises(KeyError, match="starts no rule's name; the rules: 'ridge point'"):
        rules.find_rule(out, "pipeline")
    with pytest.raises(KeyError, match="more than one"):
        rules.find_rule(out, "d")  # 'data-parallel ...' and 'decode ...'
    assert rules.find_rule(out, "data").name == "data-parallel tokens per GPU"


def test_rules_for_without_a_batch_stands_alone():
    out = rules.rules_for("llama-3-8b", "h200")
    mixed = next(r for r in out if r.name.startswith("mixed"))
    assert mixed.model_value is None and "global_batch" in mixed.reason


@pytest.mark.parametrize("call, error, match", [
    (lambda: rules.rules_for("llama-3-8b", H100, seq=0), ValueError, "seq"),
    (lambda: rules.rules_for("llama-3-8b", H100, seq=10**5), ValueError, "beyond what llama-3-8b was trained for"),
    (lambda: rules.rules_for("llama-3-8b", "v100-sxm2"), ValueError, "no dense bf16 peak"),
    (lambda: rules.rules_for("llama-3-8b", H100, tp=16), ValueError, "tp must be at most 8"),
    (lambda: rules.rules_for("llama-3-8b", H100, global_batch=-1), ValueError, "global_batch"),
    (lambda: rules.rules_for("llama-3-8b", H100, nodes=0), ValueError, "nodes"),
    (lambda: rules.decode_tp_bound("llama-3-8b", H100, 0), ValueError, "batch"),
    (lambda: rules.decode_tp_bound("llama-3-8b", H100, 1, tier="fabric"), KeyError, "tier"),
    (lambda: rules.attention_crossover("llama-3-8b", against="attention"), KeyError, "against"),
    (lambda: rules.attention_crossover("llama-3-8b", causal="yes"), TypeError, "causal"),
    (lambda: rules.mixed_optimum("llama-3-8b", H100, tokens=0), ValueError, "tokens"),
    (lambda: rules.kv_bound_batch("llama-3-8b", -5), ValueError, "context"),
    (lambda: rules.dot_intensity("bf17"), KeyError, "bf16"),
    (lambda: rules.rules_for("mixtral-8x7b", H100), NotModelledError, "experts"),
])
def test_bad_input_names_the_argument(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_the_mixed_optimum_is_where_the_packages_own_collectives_cost_least():
    # the layer's traffic priced by collective_cost (ZeRO-3's three collectives over X on the network, tensor
    # parallelism's four all-reduces over Y on NVLink), at every power-of-two split of a large cluster
    from roofline.core.collectives import collective_cost

    m = load_model("llama-3-70b")
    n, tokens = 4096, 4096 * 8192  # X_opt about 624, Y about 6.6: inside a node
    shard = lambda y: m.layer_matmul_params * 2 / y  # noqa: E731 - bf16 weights, a tensor shard

    def cost(x):
        y = n // x
        fsdp = sum(collective_cost(c, x, shard(y), H100, tier="network", overhead=0).transfer
                   for c in ("all_gather", "all_gather", "reduce_scatter"))
        tp = 4 * collective_cost("all_reduce", y, tokens / x * m.hidden_size * 2, H100, tier="scale_up",
                                 overhead=0).transfer if y > 1 else 0.0
        return fsdp + tp

    splits = [2**k for k in range(1, 12)]
    best = min(splits, key=cost)
    mo = rules.mixed_optimum(m, H100, tokens=tokens, nodes=n // 8)
    assert abs(math.log2(best) - math.log2(mo.x)) <= 0.5 + 0.1  # the power of two nearest the rule's X_opt


# --- each chapter's comparison, one rule beside the full model (the *_check functions) ---------------------

def test_rules_for_is_the_chapters_checks_put_together():
    out = rules.rules_for("llama-3-70b", H100, nodes=8, seq=8192, global_batch=512)
    p = plan("llama-3-70b", H100, nodes=8, seq=8192, global_batch=512)
    assert rules.find_rule(out, "mixed") == rules.mixed_checks("llama-3-70b", H100, seq=8192, global_batch=512,
                                                               nodes=8, plan=p)[0]
    assert rules.find_rule(out, "FSDP") == rules.fsdp_check("llama-3-70b", H100, nodes=8)
    assert rules.find_rule(out, "attention") == rules.attention_check("llama-3-70b")
    assert rules.find_rule(out, "KV-bound") == rules.kv_batch_check("llama-3-70b", H100, 8192, 8)
    assert rules.find_rule(out, "compute-bound") == rules.decode_batch_check("llama-3-70b", H100, 8192)


def test_the_mixed_check_sets_the_planners_degree_beside_the_rule_and_says_why():
    mixed, pays = rules.mixed_checks("llama-3.1-405b", H100, seq=8192, global_batch=2048, nodes=2048)
    best = plan("llama-3.1-405b", H100, nodes=2048, seq=8192, global_batch=2048).best
    assert mixed.value > 8 and mixed.model_value == best.tp == 8  # the rule asks past the node; the node caps it
    assert "stops at the node" in mixed.reason and f"PP {best.pp}" in mixed.reason and "bubble" in mixed.reason
    assert pays.model_value == pytest.approx(2048 * 8192 / 16384) and "pays" in pays.reason
    small, _ = rules.mixed_checks("llama-3-8b", H100, seq=4096, global_batch=64)
    assert small.value < 1 and small.model_value == 1 and small.reason.startswith("agree")


def test_the_mixed_check_refuses_a_plan_for_another_question():
    p = plan("llama-3-70b", H100, nodes=8, seq=8192, global_batch=512)
    with pytest.raises(ValueError, match="another question"):
        rules.mixed_checks("llama-3-70b", H100, seq=8192, global_batch=256, nodes=8, plan=p)


def test_the_decode_batch_check_agrees_with_no_context_and_parts_at_a_long_one():
    empty = rules.decode_batch_check("llama-3-8b", H100, 0)
    assert empty.model_value == compute_bound_batch("llama-3-8b", H100, 0) and empty.reason.startswith("agree")
    assert rules.decode_batch_check("llama-3-8b", H100, 4096).model_value == "never"
    big = rules.decode_batch_check("llama-3.1-405b", H100, 4096)
    assert big.model_value > big.value and "later" in big.reason


def test_the_decode_tp_check_names_latency_when_degrees_past_the_node_lose():
    r = rules.decode_tp_check("llama-3-8b", H100, 1, 1024, degrees=(1, 2, 4, 8, 16, 32))
    assert r.value > 32  # bandwidth alone would allow any degree on offer
    assert r.model_value < 32 and r.reason.startswith("latency")
    assert rules.decode_tp_check("llama-3-70b", H100, 64, 8192).reason.startswith("agree")


def test_the_band_and_kv_checks_hold_their_laws():
    band = rules.band_check("llama-3-8b", H100, 64, 4096)
    assert band.model_value == pytest.approx(1) or 1 <= band.model_value <= band.value <= 2
    assert band.model_value <= band.value <= 2
    kv = rules.kv_batch_check("llama-3.1-405b", H100, 4096, 8)
    assert kv.model_value == 0 and "do not fit" in kv.reason


def test_the_decode_tp_constant_is_a_layers_weights_over_four_widths():
    m = load_model("llama-3-70b")
    assert rules.decode_tp_constant(m) == m.layer_matmul_params / (4 * 8192) == 26112
    rho = H100.hbm_bandwidth / NVLINK
    assert rules.decode_tp_bound(m, H100, 32) == pytest.approx(1 + 26112 / (32 * rho))


def test_the_kv_bound_batch_counts_a_sliding_windows_cache_as_the_model_keeps_it():
    g = load_model("gemma-2-9b")  # every other layer keeps only its window of 4,096 tokens
    assert rules.kv_bound_batch(g, 8192) == pytest.approx(weight_bytes(g) / g.kv_cache_bytes(8192))
    assert rules.kv_bound_batch(g, 8192) > weight_bytes(g) / (8192 * g.kv_bytes_per_token())
    assert rules.kv_bound_batch(g, 2048) == pytest.approx(weight_bytes(g) / (2048 * g.kv_bytes_per_token()))


# --- chapter 3: which activations to keep --------------------------------------------------------------------

def test_matmul_outputs_keep_94_208_bytes_a_token_in_a_llama_3_8b_layer():
    # h = 4096, d = 32 x 128 = 4096, n_kv d_head = 8 x 128 = 1024, i = 14336, bf16:
    # 2 x (2 x 4096 + 2 x 4096 + 2 x 1024 + 2 x 14336) = 2 x 47,104
    assert rules.matmul_outputs_bytes("llama-3-8b") == 94_208
    # the tensor-by-tensor count adds the fp32 softmax statistics, 4 bytes for each of 32 heads
    from roofline.workloads.memory import kept_bytes_per_token_layer
    assert kept_bytes_per_token_layer("llama-3-8b", 4096, recompute="matmul-outputs") == 94_208 + 4 * 32
    # and drops what 'none' keeps beyond it: the two norms' outputs and SwiGLU's two products, 2 x (2h + 2i)
    none = kept_bytes_per_token_layer("llama-3-8b", 4096)
    assert none - (94_208 + 128) == 2 * (2 * 4096 + 2 * 14336) + 2 * 4  # and the two norms' fp32 statistics


def test_the_ridge_keeps_matmul_outputs_and_rebuilds_elementwise_work():
    keep = {k.name: k for k in rules.keep_by_intensity("llama-3-8b", "h100-sxm", 4096)}
    for name in ("Q after RoPE", "K after RoPE and V", "gate output (SiLU input)", "up output", "RMSNorm 2 input",
                 "attention output (o_proj input)"):
        assert keep[name].by_rule and keep[name].by_policy, name
    assert keep["up output"].intensity == 4096  # 2h FLOPs an element over 2 bytes
    for name in ("QKV input", "gate/up input", "SiLU output", "down_proj input"):
        assert not keep[name].by_rule and not keep[name].by_policy, name
    # the attention output costs 4 FLOPs an element per key, (S + 1)/2 keys, over 2 bytes: S + 1 FLOP/B,
    # above the H100's ridge of 295 from S = 295 on, below it at 128 tokens
    assert keep["attention output (o_proj input)"].intensity == 4097
    short = {k.name: k for k in rules.keep_by_intensity("llama-3-8b", "h100-sxm", 128)}
    assert not short["attention output (o_proj input)"].by_rule
    assert short["attention output (o_proj input)"].by_policy  # the policy keeps it whatever the length
    # an explicit kernel's softmax output: 2 d_head + 5 = 261 FLOPs an element, 130.5 FLOP/B, below the ridge
    explicit = {k.name: k for k in rules.keep_by_intensity("llama-3-8b", "h100-sxm", 4096, flash=False)}
    assert explicit["softmax output"].intensity == pytest.approx(130.5)
    assert not explicit["softmax output"].by_rule and not explicit["softmax output"].by_policy


def test_matmul_outputs_check_names_the_norm_statistics_where_rule_and_policy_part():
    r = rules.matmul_outputs_check("llama-3-8b", "h100-sxm", 4096)
    assert r.value == 94_208 and r.model_value == 94_336
    assert "RMSNorm 1 statistics" in r.reason and "56%" in r.reason


# --- the rules under a calibrated roof -------------------------------------------------------------------------

def test_the_datasheet_cluster_roof_gives_back_the_datasheet_rules_in_one_node():
    from roofline.core.cluster_roof import datasheet_cluster_roof
    moved = rules.calibrated_thresholds("llama-3-70b", datasheet_cluster_roof("h100-sxm"))
    results = rules.rules_for("llama-3-70b", "h100-sxm")
    for key, value in moved.items():
        assert value == pytest.approx(next(r.value for r in results if r.name.startswith(key)), rel=1e-9), key


def test_the_calibrated_h100_roof_moves_the_rules_by_its_measured_rates():
    from roofline.core.calibration import get_roof
    roof = get_roof("h100-sxm", "calibrated")
    moved = rules.calibrated_thresholds("llama-3-70b", roof, batch=64)
    assert moved["ridge point"] == pytest.approx(roof.gemm.top / roof.bandwidth)
    assert moved["ridge point"] < rules.ridge("h100-sxm")  # the matmuls fall further short of peak than HBM
    # a decode step's all-reduce of 64 x 8192 bf16 activations (1 MiB) reaches a tenth of NVLink's best on
    # NCCL's sweep (43.7 GB/s): the bound falls from 56 GPUs to about 7. The engines' custom kernel takes
    # 16.7 us for it (SGLang's table at TP 8), 1 MiB x 7/4 / 16.7 us = 110 GB/s: the bound falls to about 16
    assert rules.decode_tp_bound("llama-3-70b", "h100-sxm", 64) == pytest.approx(55.8, abs=0.1)
    nccl = rules.calibrated_thresholds("llama-3-70b", roof, batch=64, engine_allreduce="nccl")
    assert 5 < nccl["decode tensor-parallel bound"] < 10
    assert rules.decode_bus_bandwidth(roof, 8, 1 << 20) == pytest.approx((1 << 20) * 1.75 / 16.7e-6)
    assert moved["decode tensor-parallel bound"] == pytest.approx(
        1 + rules.decode_tp_constant("llama-3-70b") * (1 << 20) * 1.75 / 16.7e-6 / roof.bandwidth / 64)
    assert 14 < moved["decode tensor-parallel bound"] < 18
    results = rules.rules_for("llama-3-70b", "h100-sxm", roof=roof)
    assert rules.find_rule(results, "ridge point").calibrated == moved["ridge point"]
    assert rules.find_rule(results, "KV-bound").calibrated is None  # reads no rate
    with pytest.raises(ValueError, match="roof is the H100 SXM's"):
        rules.rules_for("llama-3-70b", "h200-sxm", roof=roof)
    with pytest.raises(TypeError, match="roof must be a ClusterRoof"):
        rules.calibrated_thresholds("llama-3-70b", "h100-sxm")



def test_mixed_constant_is_three_eighths_of_a_layer_over_its_width():
    m = load_model("llama-3-70b")
    assert rules.mixed_constant(m) == pytest.approx(3 * m.layer_matmul_params / (8 * 8192))
    assert rules.mixed_optimum(m, "h100-sxm", tokens=4_194_304, nodes=8).width_constant == rules.mixed_constant(m)
