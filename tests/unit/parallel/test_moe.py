"""roofline.parallel.moe and the mixture-of-experts branch of roofline.workloads.inference (chapter 10)."""

import math
import re

import numpy as np
import pytest

import roofline as rl
from roofline.parallel.tensor_parallel import weights_per_gpu
from roofline.core import collectives as col
from roofline.parallel import moe

MIXTRAL, V3 = rl.load_model("mixtral-8x7b"), rl.load_model("deepseek-v3")


@pytest.mark.parametrize("E, k, T", [(8, 2, 1), (8, 2, 3), (8, 2, 12), (64, 6, 16), (256, 8, 32), (256, 8, 300)])
def test_expected_count_matches_a_seeded_random_routing(E, k, T):
    trials = 4000 if T < 100 else 1000  # a long step's 300 tokens: fewer trials, the band widens with them
    mean, sd = moe.simulate_experts_touched(E, k, T, trials=trials, seed=7)
    expected = moe.expected_experts(E, k, T)
    error = sd / math.sqrt(trials)
    assert abs(mean - expected) <= 4 * error + 1e-9  # within four standard errors of the simulated mean
    low, high = moe.expert_bounds(E, k, T)
    assert low <= expected <= high and low <= mean <= high


def test_bounds_and_expectation_meet_at_one_token_and_part_as_tokens_grow():
    T = np.arange(1, 200)
    exp = moe.expected_experts(256, 8, T)
    low, high = moe.expert_bounds(256, 8, T)
    assert exp[0] == low[0] == high[0] == 8
    assert np.all(low <= exp) and np.all(exp <= high) and np.all(np.diff(exp) > 0)
    assert high[-1] == 256 and 255 < exp[-1] < 256
    assert moe.expected_experts(8, 8, 5) == 8  # every expert used by every token


def test_nodes_touched_matches_a_seeded_simulation():
    rng = np.random.default_rng(3)
    trials = 20000
    picks = np.argsort(rng.random((trials, 256)), axis=1)[:, :8] // 32  # the node of each of 8 experts
    counts = np.array([len(set(row)) for row in picks])
    expected = moe.nodes_touched(256, 8, 8)
    assert abs(counts.mean() - expected) < 4 * counts.std() / math.sqrt(trials)
    assert moe.nodes_touched(256, 8, 1) == 1 and moe.nodes_touched(8, 8, 8) == 8


def test_remote_nodes_leave_out_the_tokens_own_node():
    # the token sits on node 0; count the other nodes its 8 experts fall on, as a reader would check
    rng = np.random.default_rng(4)
    trials = 20000
    picks = np.argsort(rng.random((trials, 256)), axis=1)[:, :8] // 32
    remote = np.array([len(set(row) - {0}) for row in picks])
    expected = moe.nodes_touched(256, 8, 8, remote=True)
    assert abs(remote.mean() - expected) < 4 * remote.std() / math.sqrt(trials)
    assert 4.6 < expected < 4.65 < moe.nodes_touched(256, 8, 8)  # 7 (1 - C(224, 8) / C(256, 8)) = 4.633
    assert moe.nodes_touched(256, 8, 1, remote=True) == 0  # one node: nothing leaves it
    assert moe.nodes_touched(8, 8, 8, remote=True) == 7
    with pytest.raises(TypeError, match="remote must be True or False"):
        moe.nodes_touched(256, 8, 8, remote="yes")


def test_saturation_batch_is_the_first_batch_past_the_fraction():
    for m in (MIXTRAL, V3):
        b = moe.saturation_batch(m, 0.99)
        E = m.moe.num_experts
        assert moe.experts_touched(m, b) >= 0.99 * E > moe.experts_touched(m, b - 1)
    assert moe.saturation_batch(MIXTRAL) == 17  # 0.75^16 = 1.0%, 0.75^17 = 0.75%


def test_decode_at_batch_one_reads_the_active_weights_plus_the_cache():
    for m in (MIXTRAL, V3, rl.load_model("qwen1.5-moe-a2.7b"), rl.load_model("qwen3-30b-a3b")):
        for context in (0, 4096):
            step = rl.decode_step(m, 1, context)
            assert step.bytes == 2 * m.active_params + m.kv_cache_bytes(context)  # exactly: k experts, not E(1-(1-k/E))
            # any routing names the same step at one token
            assert rl.decode_step(m, 1, context, routing="worst").bytes == step.bytes


def test_mla_decode_attention_is_the_absorbed_kernel_of_chapter_5():
    from roofline import serving as S

    a = rl.decode_step(V3, 1, 1000)
    b = rl.decode_step(V3, 1, 0)
    assert a.flops - b.flops == pytest.approx(1000 * S.mla_attention_flops_per_key(V3, absorbed=True))
    with pytest.raises(rl.NotModelledError, match="accounting='text'"):
        rl.decode_step(V3, 1, 10, accounting="refined")


def test_weight_bytes_follow_the_experts_touched():
    B = np.array([1, 2, 8, 64, 512])
    for routing in moe.ROUTINGS:
        step = rl.decode_step(MIXTRAL, B, 0, routing=routing)
        one = rl.decode_step(MIXTRAL, 1, 0)
        extra = (moe.experts_touched(MIXTRAL, B, routing) - 2) * sum(l.params for l in MIXTRAL.expert_linears()) \
            * MIXTRAL.moe.moe_layers(MIXTRAL.num_layers) * 2
        assert np.allclose(step.bytes - one.bytes, extra)
        # FLOPs do not depend on the routing: k experts per token
        assert np.allclose(step.flops, B * one.flops)
    best, uni, worst = (rl.decode_step(MIXTRAL, 4, 0, routing=r).bytes for r in ("best", "uniform", "worst"))
    assert best < uni < worst
    # past the saturation batch every routing reads nearly all the weights
    assert rl.decode_step(MIXTRAL, 64, 0, routing="uniform").bytes == pytest.approx(2 * MIXTRAL.params, rel=1e-6)


def test_prefill_of_a_moe_reads_all_its_experts_and_multiplies_k():
    p = rl.prefill(MIXTRAL, 2048, routing="uniform")
    assert p.flops == pytest.approx(2048 * 2 * MIXTRAL.active_params + p["attention"].flops, rel=1e-9)
    assert p.subtotal("weights", "embedding", "lm_head", "norms").bytes == pytest.approx(2 * MIXTRAL.params, rel=1e-9)


def test_a_moe_step_of_many_tokens_needs_its_routing_named():
    with pytest.raises(rl.NotModelledError, match="routing='uniform'"):
        rl.decode_step(MIXTRAL, 8)
    with pytest.raises(rl.NotModelledError, match="routing"):
        rl.prefill(V3, 128)
    with pytest.raises(KeyError, match="unknown routing 'unifrom'; did you mean 'uniform'"):
        rl.decode_step(MIXTRAL, 8, routing="unifrom")
    # a dense model accepts a routing and ignores it
    assert rl.decode_step("llama-3-8b", 8, routing="best").bytes == rl.decode_step("llama-3-8b", 8).bytes


def test_weights_per_gpu_under_expert_and_tensor_parallelism():
    routed = moe.routed_expert_params(MIXTRAL)
    assert routed == 32 * 8 * 3 * 4096 * 14336
    assert weights_per_gpu(MIXTRAL, ep=1) == 2 * MIXTRAL.params
    # tensor parallelism splits everything but the norms and the routers (Mixtral's 8 KV heads go one to a GPU)
    whole = MIXTRAL.norm_params + MIXTRAL.router().params * 32
    assert weights_per_gpu(MIXTRAL, tp=8) == pytest.approx(2 * ((MIXTRAL.params - whole) / 8 + whole))
    ep8 = weights_per_gpu(MIXTRAL, ep=8)
    assert ep8 == pytest.approx(2 * (MIXTRAL.params - routed + routed / 8))
    assert weights_per_gpu(MIXTRAL, tp=8) < ep8  # EP keeps a copy of attention on every GPU


def test_expert_parallel_all_to_alls_are_chapter_7s():
    s = moe.expert_parallel_step(V3, "h200", 256, 4096, ep=32, routing="uniform")
    size = 8 * 8 * 7168 * 2  # 8 tokens per GPU, k = 8, hidden 7168, bf16
    assert s.all_to_all == col.collective_cost("all_to_all", 32, size, "h200")
    assert s.calls == 2 * 58  # two per MoE layer; DeepSeek-V3's first three layers are dense
    assert moe.all_to_all_bytes_per_token(V3) == 8 * 7168 * 2
    assert s.time == pytest.approx(s.gpu_time + s.communication_time)
    assert s.overlapped_time <= s.time
    ib = moe.expert_parallel_step(V3, "h200", 64, 4096, ep=8, tier="network")
    nv = moe.expert_parallel_step(V3, "h200", 64, 4096, ep=8)
    assert ib.all_to_all.time > nv.all_to_all.time and ib.gpu_time == nv.gpu_time
    # one GPU's expert FLOPs are its tokens' share; the capacity factor pads them and the buffers
    padded = moe.expert_parallel_step(V3, "h200", 64, 4096, ep=8, capacity_factor=1.25)
    assert padded.all_to_all.size == pytest.approx(1.25 * nv.all_to_all.size)
    assert padded.work.flops > nv.work.flops


def test_expert_parallel_batch_counts_each_gpus_own_sequences():
    from roofline import serving as S

    h = rl.get_hardware("h200")
    per = S.sequence_kv_bytes(V3, 4096, "fp8")
    free = h.usable_capacity - weights_per_gpu(V3, ep=32, weights_dtype="fp8")
    assert moe.expert_parallel_batch(V3, h, 4096, ep=32, weights_dtype="fp8") == 32 * int(free // per)
    assert moe.expert_parallel_batch(V3, h, 4096, ep=8) == 0  # 671B in bf16: 198 GB a GPU over 8 GPUs


def test_dense_equivalents_come_within_the_router_of_the_moe():
    a, t = moe.dense_equivalent(MIXTRAL, "active"), moe.dense_equivalent(MIXTRAL, "total")
    router = MIXTRAL.num_layers * MIXTRAL.router().params
    assert a.params == MIXTRAL.active_params - router and t.params == MIXTRAL.params - router
    assert a.moe is None and a.intermediate_size == 2 * 14336
    # DeepSeek-V3: one token's MLP is 8 routed + 1 shared experts of 2,048, the width of its dense layers
    assert moe.dense_equivalent(V3).intermediate_size == V3.intermediate_size == 18432
    # a decode step of the active equivalent at batch 1 reads what the MoE reads, less the router
    assert rl.decode_step(a, 1, 0).bytes == rl.decode_step(MIXTRAL, 1, 0).bytes - 2 * router


def test_moe_layer_time_is_the_expert_ops_on_the_roof():
    s = moe.expert_parallel_step(V3, "h200", 64, 0, ep=8)
    ops = [op for op in s.work.ops if op.name.startswith(("expert.", "shared.", "router"))]
    flops, nbytes = sum(op.flops for op in ops), sum(op.bytes for op in ops)
    h = rl.get_hardware("h200")
    assert s.moe_layer_time == pytest.approx(max(flops / h.peak_flops("bf16"), nbytes / h.hbm_bandwidth) / 58)
    assert s.all_to_all_pair_time == 2 * s.all_to_all.time


def test_fp8_experts_are_timed_at_the_fp8_peak_and_then_the_nvlink_exchange_no_longer_hides():
    # chapter 10, Fig. 35: DeepSeek-V3 at 4,096 tokens per GPU on 8 H200s, fp8 weights multiplied in fp8
    kw = dict(ep=8, tier="scale_up", weights_dtype="fp8", kv_dtype="fp8")
    w8a16 = moe.per_gpu_step(V3, "h200", 4096, 0, **kw)
    fp8 = moe.per_gpu_step(V3, "h200", 4096, 0, math_dtype="fp8", **kw)
    h = rl.get_hardware("h200")
    assert {op.math for op in fp8.work.ops} == {"fp8"} and fp8.work.formats.math == "fp8"
    ops = [op for op in fp8.work.ops if op.name.startswith(("expert.", "shared.", "router"))]
    flops = sum(op.flops for op in ops)
    assert fp8.moe_layer_time == pytest.approx(flops / h.peak_flops("fp8") / 58)  # compute-bound at this size
    assert fp8.moe_layer_time == pytest.approx(w8a16.moe_layer_time / 2, rel=1e-3)  # the fp8 peak is twice bf16's
    assert w8a16.moe_layer_time == pytest.approx(3.30e-3, rel=0.01) and fp8.moe_layer_time == pytest.approx(1.65e-3, rel=0.01)
    # the exchange is the same bytes either way; in fp8 it outlasts the work it was to hide behind
    assert fp8.all_to_all == w8a16.all_to_all
    assert moe.exchange_over_work(w8a16) < 1 < moe.exchange_over_work(fp8)


def test_expert_parallel_at_ep_one_is_the_plain_step():
    s = moe.expert_parallel_step(MIXTRAL, "h100", 16, 512, ep=1, routing="uniform")
    plain = rl.decode_step(MIXTRAL, 16, 512, routing="uniform")
    assert s.work.bytes == pytest.approx(plain.bytes) and s.work.flops == pytest.approx(plain.flops)
    assert s.communication_time == 0


MOE_BAD_INPUT = {
    "check_routing": (lambda: moe.check_routing("wrost"), KeyError, "did you mean 'worst'"),
    "expected_experts": (lambda: moe.expected_experts(8, 9, 4), ValueError, "top_k must not exceed num_experts"),
    "expert_bounds": (lambda: moe.expert_bounds(8, 2, 0), ValueError, "tokens must be"),
    "experts_touched": (lambda: moe.experts_touched("llama-3-8b", 4), ValueError, "has no experts"),
    "simulate_experts_touched": (lambda: moe.simulate_experts_touched(8, 2, [1, 2]), TypeError, "single numbers"),
    "nodes_touched": (lambda: moe.nodes_touched(256, 8, 3), ValueError, "nodes must divide num_experts (256)"),
    "saturation_batch": (lambda: moe.saturation_batch(MIXTRAL, 1.0), ValueError, "fraction must be"),
    "routed_expert_params": (lambda: moe.routed_expert_params("qwen2-7b"), ValueError, "has no experts"),
    "all_to_all_bytes_per_token": (lambda: moe.all_to_all_bytes_per_token(MIXTRAL, "bf61"), KeyError,
                                   "did you mean 'bf16'"),
    "dense_equivalent": (lambda: moe.dense_equivalent(MIXTRAL, "half"), ValueError, "size must be 'active' or 'total'"),
    "expert_parallel_batch": (lambda: moe.expert_parallel_batch(V3, "h200", 200_000, ep=8), ValueError,
                              "context 200,000 tokens is beyond"),
    "ExpertParallelStep": None,  # a record built by expert_parallel_step
    "expert_parallel_step": (lambda: moe.expert_parallel_step(MIXTRAL, "h100", 6, ep=4), ValueError,
                             "batch must be a multiple of ep (4)"),
}


def test_every_moe_function_has_a_bad_input_case():
    public = {name for name in moe.__all__ if callable(getattr(moe, name))}
    assert public == set(MOE_BAD_INPUT)


@pytest.mark.parametrize("name", [n for n, case in MOE_BAD_INPUT.items() if case is not None])
def test_moe_bad_input_fails_at_the_edge(name):
    call, error, message = MOE_BAD_INPUT[name]
    with pytest.raises(error, match=re.escape(message)):
        call()


def test_more_bad_input():
    with pytest.raises(ValueError, match="capacity_factor must be at least 1"):
        moe.expert_parallel_step(MIXTRAL, "h100", 8, ep=8, capacity_factor=0.9)
    with pytest.raises(ValueError, match="ep must divide the 8 experts"):
        moe.expert_parallel_step(MIXTRAL, "h100", 6, ep=3)
    with pytest.raises(ValueError, match="no experts"):
        moe.expert_parallel_step("llama-3-8b", "h100", 8, ep=8)
    with pytest.raises(TypeError, match="routing must be one of"):
        rl.decode_step(MIXTRAL, 4, routing=2)


def test_chapter_10_counts_by_hand():
    from roofline.parallel import moe

    assert moe.expert_params("mixtral-8x7b") == 3 * 4096 * 14336  # gate, up and down, 4,096 x 14,336
    assert moe.shared_experts("deepseek-v3") == 1
    assert moe.sparsity("mixtral-8x7b") == 4.0 and moe.sparsity("deepseek-v3") == 32.0
    mix = rl.load_model("mixtral-8x7b")
    assert moe.total_over_active(mix) == pytest.approx(mix.params / mix.active_params)
    assert moe.miss_probability("mixtral-8x7b") == 0.75
    assert moe.non_routed_params("deepseek-v3") == rl.load_model("deepseek-v3").params - moe.routed_expert_params("deepseek-v3")


def test_saturation_and_touched_share():
    from roofline.parallel import moe

    exact = moe.saturation_tokens("mixtral-8x7b", 0.99)
    assert exact == pytest.approx(math.log(0.01) / math.log(0.75))  # 16.0
    assert moe.saturation_batch("mixtral-8x7b", 0.99) == math.ceil(exact)
    # 1 - 0.75**T of the experts in expectation
    assert moe.touched_share("mixtral-8x7b", 4) == pytest.approx(1 - 0.75 ** 4)


def test_tokens_per_expert_and_ridge_tokens():
    from roofline.parallel import moe

    assert moe.tokens_per_expert("mixtral-8x7b", 64) == pytest.approx(64 * 2 / moe.experts_touched("mixtral-8x7b", 64))
    assert moe.tokens_per_expert("mixtral-8x7b", 2048, "worst") == 2048 * 2 / 8  # every expert busy
    assert moe.ridge_tokens("deepseek-v3", "h100-sxm") == pytest.approx(989.4e12 / 3.35e12 * 32)


def test_all_to_all_and_the_token_exchange():
    from roofline.parallel import moe

    v3 = rl.load_model("deepseek-v3")
    assert moe.token_all_to_all_bytes(v3) == 2 * 8 * 7168 * 2 * 58  # k x h x bf16, both ways, 58 MoE layers
    x = moe.token_exchange(v3, "h200-sxm", "network")
    assert x.bytes == 2 * 8 * 7168 * 2
    assert x.seconds == pytest.approx(x.bytes / 50e9)
    assert x.flops == 2 * 9 * 3 * 7168 * 2048  # eight routed experts and one shared, each three 7,168 x 2,048
    assert x.compute == pytest.approx(x.flops / rl.get_hardware("h200-sxm").peak_flops("fp8"))


def test_mha_kv_bytes_and_published_training():
    from roofline.parallel import moe

    # 61 layers x 128 heads x (192 + 128) elements, one byte each in fp8
    assert moe.mha_kv_bytes("deepseek-v3", 1, "fp8") == 61 * 128 * (192 + 128)
    assert moe.mha_kv_bytes("deepseek-v3", 4096, "fp8") == 4096 * 61 * 128 * 320
    t = moe.published_training()
    tokens, hours = moe.PUBLISHED["v3_tokens"][0], moe.PUBLISHED["v3_pretraining_gpu_hours"][0]
    assert t.flops == pytest.approx(rl.training_flops_per_token("deepseek-v3") * tokens)
    assert t.sustained == pytest.approx(t.flops / (hours * 3600))
    assert t.dense_ratio == pytest.approx(moe.dense_training_ratio("deepseek-v3"))


def test_per_gpu_step_and_compute_bound_ratio():
    from roofline.parallel import moe

    a = moe.per_gpu_step("deepseek-v3", "h200-sxm", 16, 0, ep=8, weights_dtype="fp8")
    b = moe.expert_parallel_step("deepseek-v3", "h200-sxm", 128, 0, ep=8, weights_dtype="fp8")
    assert a.time == b.time
    mix = rl.load_model("mixtral-8x7b")
    assert moe.compute_bound_ratio(mix, "h200-sxm") == pytest.approx(
        rl.compute_bound_batch(mix, "h200-sxm", routing="uniform")
        / rl.compute_bound_batch(moe.dense_equivalent(mix, "active"), "h200-sxm"))


@pytest.mark.parametrize("call, error, message", [
    (lambda moe: moe.expert_params("llama-3-8b"), ValueError, "has no experts"),
    (lambda moe: moe.sparsity("llama-3-8b"), ValueError, "has no experts"),
    (lambda moe: moe.saturation_tokens("mixtral-8x7b", 1.0), ValueError, "fraction must be between 0 and 1"),
    (lambda moe: moe.tokens_per_expert("mixtral-8x7b", -3), ValueError, "tokens must be"),
    (lambda moe: moe.per_gpu_step("deepseek-v3", "h200-sxm", 0.5, ep=8), ValueError, "per_gpu must be"),
    (lambda moe: moe.mha_kv_bytes("llama-3-8b"), ValueError, "has no multi-head latent attention"),
    (lambda moe: moe.token_exchange("deepseek-v3", "h100-pcie", "network"), ValueError, "tier must be one of"),
])
def test_chapter_10_helpers_bad_input(call, error, message):
    from roofline.parallel import moe

    with pytest.raises(error, match=__import__("re").escape(message)):
        call(moe)


CHAPTER_10_BAD_INPUT = {
    "expert_params": (lambda: moe.expert_params("llama-3-8b"), ValueError, "has no experts"),
    "shared_experts": (lambda: moe.shared_experts("qwen2-7b"), ValueError, "has no experts"),
    "sparsity": (lambda: moe.sparsity("llama-3-8b"), ValueError, "has no experts"),
    "total_over_active": (lambda: moe.total_over_active("llama-3-8b"), ValueError, "has no experts"),
    "dense_training_ratio": (lambda: moe.dense_training_ratio("llama-3-8b"), ValueError, "has no experts"),
    "compute_bound_ratio": (lambda: moe.compute_bound_ratio(MIXTRAL, "h200", "wrost"), KeyError, "did you mean 'worst'"),
    "tokens_per_expert": (lambda: moe.tokens_per_expert(MIXTRAL, -3), ValueError, "tokens must be"),
    "token_all_to_all_bytes": (lambda: moe.token_all_to_all_bytes(MIXTRAL, "bf61"), KeyError, "did you mean 'bf16'"),
    "per_gpu_step": (lambda: moe.per_gpu_step(V3, "h200", 0.5, ep=8), ValueError, "per_gpu must be"),
    "PublishedTraining": None,  # a record built by published_training
    "published_training": (lambda: moe.published_training("llama-3-8b"), ValueError, "has no experts"),
    "mha_kv_bytes": (lambda: moe.mha_kv_bytes("llama-3-8b"), ValueError, "has no multi-head latent attention"),
    "miss_probability": (lambda: moe.miss_probability("llama-3-8b"), ValueError, "has no experts"),
    "saturation_tokens": (lambda: moe.saturation_tokens(MIXTRAL, 1.0), ValueError, "fraction must be between 0 and 1"),
    "touched_share": (lambda: moe.touched_share("llama-3-8b", 4), ValueError, "has no experts"),
    "ridge_tokens": (lambda: moe.ridge_tokens(V3, "h200", "fp7"), KeyError, "fp7"),
    "TokenExchange": None,  # a record built by token_exchange
    "token_exchange": (lambda: moe.token_exchange(V3, "h100-pcie", "network"), ValueError, "tier must be one of"),
    "non_routed_params": (lambda: moe.non_routed_params("llama-3-8b"), ValueError, "has no experts"),
    "published_token_rate": (lambda: moe.published_token_rate(-1.0), ValueError, "gpu_hours must be"),
}
MOE_BAD_INPUT.update(CHAPTER_10_BAD_INPUT)


@pytest.mark.parametrize("name", [n for n, case in CHAPTER_10_BAD_INPUT.items() if case is not None])
def test_chapter_10_bad_input_fails_at_the_edge(name):
    call, error, message = CHAPTER_10_BAD_INPUT[name]
    with pytest.raises(error, match=re.escape(message)):
        call()


def test_mla_saving_against_dense_and_exchange_over_work():
    assert moe.mla_saving("deepseek-v3", "fp8") == pytest.approx(61 * 128 * 320 / __import__("roofline.workloads.kv_cache", fromlist=["x"]).kv_bytes_per_token("deepseek-v3", "fp8"))
    a = moe.dense_equivalent(MIXTRAL, "active")
    t = rl.predict(rl.decode_step(MIXTRAL, 64, 4096, routing="uniform"), "h200").time
    assert moe.against_dense(MIXTRAL, "h200", 64, 4096) == pytest.approx(t / rl.predict(rl.decode_step(a, 64, 4096), "h200").time)
    s = moe.expert_parallel_step(V3, "h200", 64, 0, ep=8)
    assert moe.exchange_over_work(s) == pytest.approx(s.all_to_all_pair_time / s.moe_layer_time)
    x = moe.token_exchange(V3, "h200", "network")
    assert x.ratio == pytest.approx(x.seconds / x.compute)


CHAPTER_10_MORE_BAD_INPUT = {
    "mla_saving": (lambda: moe.mla_saving("llama-3-8b"), ValueError, "has no multi-head latent attention"),
    "against_dense": (lambda: moe.against_dense(MIXTRAL, "h200", 64, size="half"), ValueError, "size must be 'active' or 'total'"),
    "exchange_over_work": (lambda: moe.exchange_over_work(3), TypeError, "step must be an ExpertParallelStep"),
}
MOE_BAD_INPUT.update(CHAPTER_10_MORE_BAD_INPUT)


@pytest.mark.parametrize("name", sorted(CHAPTER_10_MORE_BAD_INPUT))
def test_chapter_10_more_bad_input(name):
    call, error, message = CHAPTER_10_MORE_BAD_INPUT[name]
    with pytest.raises(error, match=re.escape(message)):
        call()


def test_an_fp8_dispatch_halves_the_dispatch_and_leaves_the_combine():
    # chapter 10: DeepSeek-V3 dispatches in fp8 and combines in bf16; at 4,096 tokens per GPU on 8 H200s that
    # quarter of the bytes brings the NVLink exchange back under the fp8 experts' work
    kw = dict(ep=8, tier="scale_up", weights_dtype="fp8", kv_dtype="fp8", math_dtype="fp8")
    both = moe.per_gpu_step(V3, "h200", 4096, 0, **kw)
    fp8 = moe.per_gpu_step(V3, "h200", 4096, 0, dispatch_dtype="fp8", **kw)
    assert fp8.all_to_all == both.all_to_all and fp8.dispatch.size == pytest.approx(both.all_to_all.size / 2)
    assert fp8.all_to_all_pair_time == pytest.approx(fp8.dispatch.time + fp8.all_to_all.time)
    assert fp8.communication_time == pytest.approx(58 * fp8.all_to_all_pair_time)
    assert moe.exchange_over_work(fp8) < 1 < moe.exchange_over_work(both)
    # the same format both ways is the plain step
    assert moe.per_gpu_step(V3, "h200", 64, 0, dispatch_dtype="bf16", **kw).dispatch is None


def test_published_token_rate_is_tokens_over_gpu_seconds():
    # DeepSeek-V3: 180K H800 hours per trillion tokens, 1e12 / (180e3 x 3600) = 1,543.2 tokens a second a GPU
    assert moe.published_token_rate(180e3) == pytest.approx(1543.2, abs=0.05)
    # the pre-training total, 2.664M hours for 14.8T tokens, is the same rate
    assert moe.published_token_rate(2.664e6, 14.8e12) == pytest.approx(1543.2, abs=0.05)
    with pytest.raises(ValueError, match="gpu_hours"):
        moe.published_token_rate(0)
