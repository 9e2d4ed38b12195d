"""Chapter 5's serving planner: KV bytes per layout, capacity, paging, decode at the largest batch."""

import json
import re
import math
from importlib import resources

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import roofline as rl
from roofline import serving as S


def _config(name):
    return json.loads(resources.files("roofline").joinpath(f"data/models/{name}.json").read_text())


@pytest.mark.parametrize("name, expected", [("llama-2-7b", 524_288), ("llama-3-8b", 131_072)])
def test_bytes_per_token_by_hand(name, expected):
    c = _config(name)
    head = c["hidden_size"] // c["num_attention_heads"]
    by_hand = 2 * c["num_hidden_layers"] * c.get("num_key_value_heads", c["num_attention_heads"]) * head * 2
    assert by_hand == expected
    assert S.kv_bytes_per_token(name, "bf16") == expected
    assert S.kv_bytes_per_token(name, "fp8") == expected / 2


def test_layouts_are_named_from_the_config():
    assert S.attention_layout("llama-2-7b") == "MHA"
    assert S.attention_layout("llama-3-8b") == "GQA"
    assert S.attention_layout("deepseek-v3") == "MLA"
    assert S.attention_layout("gemma-2-9b") == "GQA + sliding window"
    mqa = rl.model_from_config({**_config("llama-3-8b"), "num_key_value_heads": 1}, "mqa")
    assert S.attention_layout(mqa) == "MQA"
    assert S.kv_bytes_per_token(mqa) == 131_072 / 8


def test_mla_latent_matches_deepseeks_published_sizes():
    """DeepSeek-V2/V3 cache d_c = 4 d_h = 512 latent values plus a d_h/2 = 64 rotary key per layer, which
    their paper equates to grouped-query attention with 2.25 groups of d_h = 128."""
    v3 = rl.load_model("deepseek-v3")
    d_h = v3.mla.v_head_dim
    assert (v3.mla.kv_lora_rank, v3.mla.qk_rope_head_dim) == (4 * d_h, d_h // 2) == (512, 64)
    groups = S.PUBLISHED["mla_gqa_groups"][0]
    assert v3.mla.latent_width == 2 * groups * d_h == 576
    assert S.kv_bytes_per_token(v3) == 61 * 576 * 2 == 70_272
    # multi-head attention of the same width would cache a 192-wide key and 128-wide value for 128 heads
    mha = 61 * 128 * (192 + 128) * 2
    assert S.kv_bytes_per_token(v3) / mha == pytest.approx(576 / (128 * 320))


def test_mla_absorbed_attention_flops_by_hand():
    v3 = rl.load_model("deepseek-v3")
    assert S.mla_attention_flops_per_key(v3) == 61 * 2 * 128 * (2 * 512 + 64)
    naive = 61 * (2 * 512 * 128 * (128 + 128) + 2 * 128 * (128 + 64 + 128))
    assert S.mla_attention_flops_per_key(v3, absorbed=False) == naive
    # absorbed, a cached token costs 2 bytes per latent value and ~242 FLOP per byte: near the ridge
    intensity = S.mla_attention_flops_per_key(v3) / S.kv_bytes_per_token(v3)
    assert 200 < intensity < 300
    with pytest.raises(ValueError, match="llama-3-8b does not use multi-head latent attention"):
        S.mla_attention_flops_per_key("llama-3-8b")


def test_sliding_window_layers_keep_their_window():
    g = rl.load_model("gemma-2-9b")
    w, per_layer = g.sliding_window, g.kv_bytes_per_token() / g.num_layers
    assert len(g.sliding_layers) == g.num_layers // 2
    long = 2 * w
    expect = per_layer * (g.num_layers // 2 * long + g.num_layers // 2 * w)
    assert S.sequence_kv_bytes(g, long, block_size=None) == expect
    assert S.sequence_kv_bytes(g, w // 2, block_size=None) == g.kv_bytes_per_token() * (w // 2)


@pytest.mark.parametrize("model", ["llama-2-7b", "llama-3-8b", "gemma-2-9b", "deepseek-v3"])
def test_largest_batch_never_grows_with_context(model):
    m = rl.load_model(model)
    contexts = np.unique(np.geomspace(1, m.max_position_embeddings, 60).astype(int))
    for gpu in ("h100-sxm", "h200-sxm"):
        b = S.largest_batch(m, gpu, contexts, weights_dtype="fp8" if m.mla else "bf16", gpus=8 if m.mla else 1)
        assert np.all(np.diff(b) <= 0)
        assert np.all(b == [S.largest_batch(m, gpu, int(c), weights_dtype="fp8" if m.mla else "bf16",
                                            gpus=8 if m.mla else 1) for c in contexts])


def test_largest_batch_by_hand():
    h, m = rl.get_hardware("a100-sxm-80gb"), rl.load_model("llama-2-7b")
    free = h.usable_capacity - 2 * m.params
    assert S.largest_batch(m, h, 3328, block_size=None) == math.floor(free / (524_288 * 3328))
    # paging by 16 changes nothing at a multiple of 16; fp8 KV doubles the room per sequence
    assert S.largest_batch(m, h, 3328) == S.largest_batch(m, h, 3328, block_size=None)
    assert S.largest_batch(m, h, 3328, kv_dtype="fp8") == math.floor(free / (262_144 * 3328))
    # reserving the model's whole context per request holds fewer
    assert S.largest_batch(m, h, 3328, reserve_tokens=4096) == math.floor(free / (524_288 * 4096))
    with pytest.raises(ValueError, match="reserve_tokens"):
        S.largest_batch(m, h, 4000, reserve_tokens=2048)


@settings(max_examples=60, deadline=None)
@given(context=st.integers(1, 8192), block=st.sampled_from([1, 8, 16, 32, 128, 256]))
def test_paging_wastes_less_than_one_block_per_sequence(context, block):
    per_token = S.kv_bytes_per_token("llama-3-8b")
    waste = S.paging_waste("llama-3-8b", context, block_size=block)
    assert 0 <= waste <= (block - 1) * per_token
    assert (waste == 0) == (context % block == 0)


@settings(max_examples=40, deadline=None)
@given(context=st.integers(1, 8192), block=st.sampled_from([16, 64, 512]))
def test_paging_waste_is_bounded_with_sliding_windows_too(context, block):
    per_token = S.kv_bytes_per_token("gemma-2-9b")
    assert 0 <= S.paging_waste("gemma-2-9b", context, block_size=block) <= (block - 1) * per_token


def test_tensor_parallel_copies_of_the_cache():
    assert S.kv_replicas("llama-3-8b", 8) == 1
    assert S.kv_replicas("llama-3-8b", 16) == 2  # 32 query heads, 8 KV heads: each KV head on 2 GPUs
    assert S.kv_replicas("deepseek-v3", 8) == 8  # every GPU keeps the whole latent
    assert S.kv_bytes_per_token("deepseek-v3", gpus=8) == 8 * 70_272
    with pytest.raises(ValueError, match="gpus must divide llama-3-8b's 32 query heads"):
        S.kv_replicas("llama-3-8b", 3)


def test_plan_at_the_largest_batch_is_the_decode_step_there():
    plan = S.serving_capacity("llama-3-8b", "h200-sxm", 8192)
    h = rl.get_hardware("h200-sxm")
    assert plan.max_batch == S.largest_batch("llama-3-8b", h, 8192) == plan.batch
    assert plan.usable == h.usable_capacity and plan.weights == 2 * rl.load_model("llama-3-8b").params
    step = rl.decode_step("llama-3-8b", plan.batch, 8192)
    pred = rl.predict(step, h)
    assert plan.step_time == pytest.approx(float(pred.time))
    assert plan.time_per_output_token == plan.step_time
    assert plan.tokens_per_s == pytest.approx(plan.batch / plan.step_time)
    assert plan.bound == "memory" and 0 < plan.utilization < 1
    # at the wall the step reads nearly all of the HBM: the KV cache most of it
    assert plan.weights + plan.kv_total <= plan.usable
    assert plan.kv_read_share > 0.8
    assert "sequences of 8,192 tokens fit on one H200" in plan.verdict()


def test_a_smaller_batch_can_be_asked_for_but_not_a_larger_one():
    plan = S.serving_capacity("llama-3-8b", "h100-sxm", 4096, batch=8)
    assert plan.batch == 8 and plan.max_batch > 8
    with pytest.raises(ValueError, match="does not fit: at 4,096 tokens at most"):
        S.serving_capacity("llama-3-8b", "h100-sxm", 4096, batch=10_000)


def test_more_gpus_pool_memory_and_bandwidth():
    one = S.serving_capacity("llama-3-70b", "h200-sxm", 8192)
    four = S.serving_capacity("llama-3-70b", "h200-sxm", 8192, gpus=4)
    assert four.usable == 4 * one.usable
    assert four.max_batch > 4 * max(one.max_batch, 1) - 1
    assert four.roof.startswith("4 × ")


def test_a_context_past_the_trained_length_is_refused():
    with pytest.raises(ValueError, match=r"context 8,193 tokens is beyond what llama-3-8b was trained for.*8,192"):
        S.serving_capacity("llama-3-8b", "h100-sxm", 8193)


def test_a_model_that_does_not_fit_says_so():
    plan = S.serving_capacity("llama-3.1-405b", "h100-sxm", 4096)
    assert plan.max_batch == 0 and not plan.fits and plan.step_time is None
    assert "does not fit on one H100 SXM: the weights alone take" in plan.verdict()
    # 141 GB of weights on an H200 with 7 GB set aside leave under 1 GB: less than one 8k sequence (2.7 GB)
    tight = S.serving_capacity("llama-3-70b", "h200-sxm", 8192, reserve=7e9)
    assert tight.max_batch == 0 and tight.weights < tight.usable
    assert "less than one sequence of 8,192 tokens needs (2.68 GB)" in tight.verdict()


def test_moe_and_mla_plans_give_capacity_and_say_what_is_not_modelled():
    plan = S.serving_capacity("deepseek-v3", "h200-sxm", 32768, gpus=8, weights_dtype="fp8")
    assert plan.fits and plan.step_time is None
    assert "routing" in plan.not_modelled  # latent attention is modelled (text accounting); the routing is not named
    mix = S.serving_capacity("mixtral-8x7b", "h200-sxm", 4096)
    assert mix.fits and mix.step_time is None and "routing" in mix.not_modelled


def test_bad_input_names_the_argument():
    with pytest.raises(ValueError, match="context"):
        S.serving_capacity("llama-3-8b", "h100-sxm", 0)
    with pytest.raises(KeyError, match="dtype"):
        S.serving_capacity("llama-3-8b", "h100-sxm", 1024, kv_dtype="fp7")
    with pytest.raises(ValueError, match="block_size"):
        S.paged_tokens(100, 0)
    with pytest.raises(KeyError, match="h100-sxm"):
        S.serving_capacity("llama-3-8b", "h100-sx", 1024)


def test_a_shared_prefix_is_stored_once_in_whole_blocks():
    per = S.kv_bytes_per_token("llama-3-8b")
    assert S.shared_prefix_saving("llama-3-8b", 2000, 32) == 31 * 2000 * per  # 2,000 = 125 blocks of 16
    assert S.shared_prefix_saving("llama-3-8b", 2010, 32) == 31 * 2000 * per  # the partial block is not shared
    assert S.shared_prefix_saving("llama-3-8b", 2010, 32, block_size=None) == 31 * 2010 * per
    assert S.shared_prefix_saving("llama-3-8b", 2000, 1) == 0


def test_a_reservation_for_the_longest_request_wastes_the_rest():
    plan = S.serving_capacity("llama-2-7b", "a100-sxm-80gb", 1000, reserve_tokens=4096)
    per = S.kv_bytes_per_token("llama-2-7b")
    assert plan.kv_per_sequence == 4096 * per and plan.waste_per_sequence == 3096 * per
    assert plan.max_batch == S.largest_batch("llama-2-7b", "a100-sxm-80gb", 4096, block_size=None)
    assert plan.max_batch < S.serving_capacity("llama-2-7b", "a100-sxm-80gb", 1000).max_batch


def test_largest_batch_needs_a_context():
    with pytest.raises(ValueError, match="context"):
        S.largest_batch("llama-3-8b", "h100-sxm", [0, 1024])
    assert S.largest_batch("llama-3-8b", "h200-sxm", 8192) == 123  # the docstring's example


def test_compute_roof_and_prefill_in_decode_steps():
    step = rl.decode_step("llama-3-8b", 1, 0)
    assert S.compute_roof_tokens_per_s("llama-3-8b", "h200-sxm") == pytest.approx(989.4e12 / float(step.flops))
    ttft = S.time_to_first_token("llama-3-8b", "h100-sxm", 4096)
    dec = rl.predict(rl.decode_step("llama-3-8b", 64, 4096), "h100-sxm").time
    assert S.prefill_in_decode_steps("llama-3-8b", "h100-sxm", 4096, batch=64, context=4096) == pytest.approx(ttft / dec)
    assert S.prefill_in_decode_steps("llama-3-8b", "h100-sxm", 4096) == pytest.approx(
        ttft / rl.predict(rl.decode_step("llama-3-8b", 1, 4096), "h100-sxm").time)


@pytest.mark.parametrize("call, error, message", [
    (lambda: S.compute_roof_tokens_per_s("llama-3-8b", "h200-sxm", "fp7"), KeyError, "fp7"),
    (lambda: S.prefill_in_decode_steps("llama-3-8b", "h100-sxm", 0), ValueError, "prompt must be"),
    (lambda: S.prefill_in_decode_steps("llama-3-8b", "h100-sxm", 512, context=-1), ValueError, "context must be"),
])
def test_chapter_12_capacity_bad_input(call, error, message):
    with pytest.raises(error, match=re.escape(message)):
        call()




# ---- chapter 5's quoted figures, moved out of the notebook --------------------------------------------------

def test_with_kv_heads_rebuilds_a_shipped_config():
    mqa = S.with_kv_heads("llama-3-8b", 1, "mqa")
    assert mqa.num_kv_heads == 1 and mqa.num_heads == 32
    assert S.kv_bytes_per_token(mqa) == 2 * 32 * 1 * 128 * 2  # 8,192: K and V, 32 layers, one head of 128
    assert mqa.params < rl.load_model("llama-3-8b").params  # smaller K and V projections
    assert S.with_kv_heads("llama-2-7b", 8).name == "llama-2-7b with 8 KV heads"
    with pytest.raises(ValueError, match="kv_heads must divide the 32 query heads"):
        S.with_kv_heads("llama-3-8b", 3)
    with pytest.raises(KeyError, match="unknown model"):
        S.with_kv_heads("llama-3-9b", 1)


def test_deepseek_v3_without_its_latent_by_hand():
    # 61 layers, 128 heads, keys of 192 (128 + 64 rotary) and values of 128, two bytes each
    assert S.mha_kv_bytes_per_token("deepseek-v3") == 61 * 128 * (192 + 128) * 2
    assert S.mha_kv_bytes_per_token("deepseek-v3", kv_heads=1) == 61 * (192 + 128) * 2
    assert S.mha_kv_bytes_per_token("llama-3-8b") == 2 * 32 * 32 * 128 * 2  # multi-head: every query head
    with pytest.raises(ValueError, match="kv_heads"):
        S.mha_kv_bytes_per_token("deepseek-v3", kv_heads=0)


def test_mla_intensity_is_flops_per_key_over_the_latent_bytes():
    flops = S.mla_attention_flops_per_key("deepseek-v3")
    assert S.mla_intensity("deepseek-v3") == pytest.approx(flops / (61 * 576 * 2))
    assert S.mla_intensity("deepseek-v3", "fp8") == pytest.approx(2 * S.mla_intensity("deepseek-v3"))


def test_room_crossover_and_batches_by_hand():
    m, h = rl.load_model("llama-3-8b"), rl.get_hardware("h100-sxm")
    assert S.kv_room(m, h) == h.usable_capacity - 2 * 8_030_261_248
    assert S.kv_room("llama-3-70b", h, gpus=4) == 4 * h.usable_capacity - 2 * rl.load_model("llama-3-70b").params
    # weights read once per step against 131,072 cache bytes per token and sequence
    assert S.weights_kv_crossover(m) == pytest.approx(2 * 8_030_261_248 / 131_072)
    assert S.weights_kv_crossover(m, 32) == pytest.approx(2 * 8_030_261_248 / (32 * 131_072))
    assert S.batch_kv_bytes_per_token(m, 32) == 32 * 131_072
    room = S.kv_room(m, h)
    assert room // S.sequence_kv_bytes(m, 8192) == S.largest_batch(m, h, 8192)  # the wall of chapter 5
    with pytest.raises(ValueError, match="gpus"):
        S.kv_room(m, h, gpus=0)
    with pytest.raises(ValueError, match="batch"):
        S.weights_kv_crossover(m, 0)


def test_sliding_window_shares_by_hand():
    # Phi-3 mini 4k: every one of 32 layers keeps its last 2,047 of 4,096 tokens
    assert S.window_share("phi-3-mini-4k") == pytest.approx(2047 / 4096)
    # Gemma 2 9B: 21 of 42 layers keep 4,096 of 8,192
    assert S.window_share("gemma-2-9b") == pytest.approx((21 * 8192 + 21 * 4096) / (42 * 8192))
    assert S.window_share("llama-3-8b") == 1
    assert S.full_cache_bytes("gemma-2-9b") == rl.load_model("gemma-2-9b").kv_bytes_per_token() * 8192
    with pytest.raises(ValueError, match="context"):
        S.full_cache_bytes("gemma-2-9b", -1)


def test_paging_waste_share_and_reserve_share_by_hand():
    # 17 tokens take two blocks of 16 (15 slots empty), 32 tokens two full ones: 15 of 64 slots empty
    assert S.paging_waste_share("llama-3-8b", [17, 32], block_size=16) == pytest.approx(15 / 64)
    assert S.reserve_share([1024, 3072], 4096) == 0.5
    with pytest.raises(ValueError, match="reserve_tokens"):
        S.reserve_share([1024], 0)


def test_marginal_intensity_of_one_more_sequence():
    # Llama 2 7B at 3,328 tokens: one more sequence reads its 3,328 x 512 KiB of cache and does about
    # 2 x 6.74 GFLOP of matmuls plus its attention: near 8.7 FLOP/B, far below any ridge
    i = S.marginal_intensity("llama-2-7b", 3328)
    one, two = rl.decode_step("llama-2-7b", 1, 3328), rl.decode_step("llama-2-7b", 2, 3328)
    assert i == pytest.approx((two.flops - one.flops) / (two.bytes - one.bytes))
    assert 8 < i < 9.5
    assert S.marginal_intensity("llama-2-7b", 3328, kv_dtype="fp8") == pytest.approx(2 * i, rel=0.01)


def test_decode_throughput_is_batch_over_step_time_and_plans_expose_their_ratios():
    pred = rl.predict(rl.decode_step("llama-3-8b", 64, 8192), "h100-sxm")
    assert S.decode_throughput("llama-3-8b", "h100-sxm", 64, 8192) == pytest.approx(64 / pred.time)
    assert S.decode_throughput("llama-3-8b", "h100-sxm", np.array([1, 2]), 8192).shape == (2,)
    with pytest.raises(ValueError, match="batch"):
        S.decode_throughput("llama-3-8b", "h100-sxm", 0, 8192)
    plan = S.serving_capacity("llama-2-7b", "a100-sxm-80gb", 3328)
    assert plan.achieved_flops == pytest.approx(plan.flops / plan.step_time)
    assert plan.intensity == pytest.approx(plan.flops / plan.bytes)
    assert plan.achieved_flops == pytest.approx(plan.utilization * rl.get_hardware("a100-sxm-80gb").peak_flops())
    none = S.serving_capacity("llama-3-70b", "h100-sxm", 8192)
    assert not none.fits and none.achieved_flops is None and none.intensity is None
# --- a tensor-parallel server (``roofline serve --tp``) ----------------------------------------------

def test_a_tensor_parallel_server_holds_a_shard_and_its_share_of_the_cache():
    m = rl.load_model("llama-3-70b")
    p = S.tp_serving_capacity(m, "h100-sxm", 8192, tp=8)
    assert p.max_batch == p.batch == S.serving_capacity(m, "h100-sxm", 8192, gpus=8).max_batch == 197
    # each GPU: its shard in bf16 and, per sequence, 8,192 tokens x 80 layers x one KV head of 128 x K and V x 2 B
    per_sequence = 8192 * 80 * 1 * 128 * 2 * 2
    shard = rl.parallel.tensor_parallel.shard_model(m, 8)
    assert p.memory_per_gpu == shard.params * 2 + 197 * per_sequence  # 83.7 GB
    assert p.memory_per_gpu == pytest.approx(83.74e9, rel=1e-3) and p.fits
    assert p.tokens_per_s == pytest.approx(197 / p.time) and p.tokens_per_s_per_gpu == pytest.approx(197 / p.time / 8)
    assert p.time == pytest.approx(p.compute_time + p.collective_time)


def test_a_tensor_parallel_server_decodes_the_cache_in_the_format_it_stores():
    """The cache follows the weights' format unless told (chapter 5): fp8 weights, an fp8 cache, read as such."""
    fp8 = S.tp_serving_capacity("llama-3-70b", "h100-sxm", 8192, tp=4, batch=16, weights_dtype="fp8")
    wide = S.tp_serving_capacity("llama-3-70b", "h100-sxm", 8192, tp=4, batch=16, weights_dtype="fp8", kv_dtype="bf16")
    assert fp8.plan.kv_dtype == "fp8"
    read = fp8.prediction.step.work.parts["kv_cache"].bytes
    assert read == pytest.approx(wide.prediction.step.work.parts["kv_cache"].bytes / 2)
    assert fp8.time < wide.time


def test_a_tensor_parallel_server_that_holds_nothing_has_no_step():
    p = S.tp_serving_capacity("llama-3.1-405b", "h100-sxm", 8192, tp=2)
    assert p.max_batch == 0 and not p.fits and p.prediction is None and p.time is None


def test_an_expert_parallel_gpu_holds_its_experts_and_its_sequences_cache():
    m = rl.load_model("mixtral-8x7b")
    held = S.expert_parallel_footprint(m, 64, 1024, ep=8)
    assert held["weights"] == rl.parallel.tensor_parallel.weights_per_gpu(m, ep=8)
    # 64 / 8 = 8 sequences of 1,024 tokens, each token 32 layers x 8 KV heads x 128 x K and V x 2 B
    assert held["kv_cache"] == 8 * 1024 * 32 * 8 * 128 * 2 * 2
    assert S.expert_parallel_footprint(m, 64, 1024, ep=8, kv_dtype="fp8")["kv_cache"] == held["kv_cache"] / 2
    with pytest.raises(ValueError, match=r"batch must be a multiple of ep \(8\).*got batch=12"):
        S.expert_parallel_footprint(m, 12, 1024, ep=8)


@pytest.mark.parametrize("call, error, message", [
    (lambda: S.mla_intensity("deepseek-v3", "fp7"), KeyError, "unknown dtype 'fp7'"),
    (lambda: S.window_share("phi-3-mini-4k", 0), ValueError, "context must be a whole number"),
    (lambda: S.marginal_intensity("llama-2-7b", -1), ValueError, "context must be a whole number"),
    (lambda: S.paging_waste_share("llama-3-8b", [17], block_size=0), ValueError, "block_size must be a whole number"),
])
def test_chapter_5_helpers_refuse_bad_input(call, error, message):
    with pytest.raises(error, match=message):
        call()
