"""Tensor parallelism (chapter 8): the split, the exchanges, their price, and the limits of t."""

import numpy as np
import pytest

import roofline as rl
from roofline.core import collectives as col
from roofline.workloads import memory
from roofline.parallel import tensor_parallel as tp

SMALL = rl.Model("small", hidden_size=64, intermediate_size=128, num_layers=2, num_heads=4, num_kv_heads=2,
                 head_dim=16, vocab_size=256)


@pytest.mark.parametrize("model", ["llama-3-8b", "llama-3-70b"])
@pytest.mark.parametrize("t", [2, 4, 8])
def test_per_gpu_flops_times_t_are_the_unsplit_flops_and_the_norms_are_replicated(model, t):
    whole = rl.decode_step(model, 4, 1024)
    one = tp.tp_decode_step(model, t, 4, 1024).work
    for part in ("weights", "attention", "embedding", "lm_head"):
        assert one[part].flops * t == pytest.approx(whole[part].flops, rel=1e-12), part
    assert one["norms"].flops == pytest.approx(whole["norms"].flops)  # every GPU normalizes the whole hidden state
    assert one["kv_cache"].bytes * t == pytest.approx(whole["kv_cache"].bytes)  # 8 KV heads: t <= 8 divides them


def test_prefill_and_training_split_the_same_way():
    whole, one = rl.prefill("llama-3-8b", 2048), tp.tp_prefill("llama-3-8b", 4, 2048).work
    assert one["weights"].flops * 4 == pytest.approx(whole["weights"].flops)
    whole = rl.training_step("llama-3-8b", 2048)
    one = tp.tp_training_step("llama-3-8b", 4, 2048).work
    # matmuls and attention split by 4; the norms' and residuals' elementwise work (no FLOPs counted) is whole
    assert one.flops * 4 == pytest.approx(whole.flops, rel=1e-9)


def test_all_reduce_bytes_per_layer_by_hand_for_a_small_model():
    step = tp.tp_decode_step(SMALL, 2, batch=3)
    # batch 3 x hidden 64 x 2 bytes = 384 bytes per all-reduce; a ring over 2 GPUs sends 2 (2-1)/2 of it each
    ar = step.exchange("attention all-reduce")
    assert (ar.collective, ar.size, ar.count) == ("all_reduce", 3 * 64 * 2, 2)
    assert step.exchange("mlp all-reduce").count == 2
    pred = tp.predict_tp(step, "h100")
    per_layer = sum(c.bytes * e.count for e, c in pred.priced if e.name.endswith("all-reduce") and e.name != "embedding all-reduce")
    assert per_layer / SMALL.num_layers == 2 * 384
    # the embedding's all-reduce and the gather of 3 x 256 logits of 2 bytes (each GPU sends its half)
    assert pred.comm_bytes == 2 * 2 * 384 + 384 + 3 * 256 * 2 / 2


def test_kv_heads_are_replicated_beyond_their_number():
    assert tp.kv_heads_per_gpu("llama-3-8b", 4) == 2
    assert tp.kv_heads_per_gpu("llama-3.1-405b", 16) == 1  # 8 KV heads over 16 GPUs: each kept twice
    one = tp.tp_decode_step("llama-3.1-405b", 16, 1, 4096).work
    whole = rl.decode_step("llama-3.1-405b", 1, 4096)
    assert one["kv_cache"].bytes * 8 == pytest.approx(whole["kv_cache"].bytes)
    assert one["attention"].flops * 16 == pytest.approx(whole["attention"].flops)


def test_refusals_name_t():
    with pytest.raises(ValueError, match="tp must divide llama-3-8b's 32 query heads, got tp=6"):
        tp.check_tp("llama-3-8b", 6)
    odd = rl.Model("odd", 96, 192, 2, 12, 6, 8, 100)
    with pytest.raises(ValueError, match="tp must divide odd's 6 KV heads or be a multiple of them"):
        tp.check_tp(odd, 4)
    with pytest.raises(ValueError, match="at most the 8 GPUs of a node"):
        tp.check_tp("llama-3-70b", 16, gpus_per_node=8)
    with pytest.raises(rl.NotModelledError, match="dense models only"):
        tp.tp_decode_step("mixtral-8x7b", 2)


def test_shard_model_holds_a_t_th_of_the_weights_plus_whole_norms():
    m = rl.load_model("llama-3-8b")
    for t in (2, 8):
        s = tp.shard_model(m, t)
        assert s.params * t == m.params + (t - 1) * m.norm_params
    assert tp.shard_model(m, 1) is m
    assert tp.weights_per_gpu(m, tp=8) == pytest.approx(tp.shard_model(m, 8).params * 2)
    assert tp.weights_per_gpu(m) == rl.workloads.memory.weight_bytes(m)  # one GPU holds the whole model
    # past its 8 KV heads, Llama 3 8B copies them: 16 GPUs each keep a whole key and value head
    assert tp.weights_per_gpu(m, tp=16) == pytest.approx(tp.shard_model(m, 16).params * 2)


def test_the_shards_saved_tensors_are_chapter_twos_tensor_parallel_count():
    for t in (2, 4, 8):
        assert memory.activation_bytes(tp.shard_model("llama-3-8b", t), 4096, 1) == pytest.approx(
            memory.activation_bytes("llama-3-8b", 4096, 1, tp=t))


def test_intensity_is_layer_params_over_2_t_minus_1_h_a_and_independent_of_tokens():
    m = rl.load_model("llama-3-70b")
    assert tp.tp_intensity(m, 8) == pytest.approx(m.layer_matmul_params / (2 * 7 * m.hidden_size * 2))
    assert tp.tp_intensity(m, 1) == np.inf
    compute, comm = tp.layer_times(m, 8, np.array([1024, 4096]), "h100", tier="scale_up")
    # without latency the ratio of compute to transfer would be intensity / ridge for every token count
    assert compute[1] / compute[0] == pytest.approx(4)


def test_hiding_width_is_where_intensity_meets_the_ridge():
    for model in ("llama-3-8b", "llama-3.1-405b"):
        for tier in ("scale_up", "network"):
            w = tp.hiding_width(model, 8, "h100", tier)
            assert tp.tp_intensity(model, 8, hidden=w) == pytest.approx(tp.tier_ridge("h100", tier))
    # with every byte of a flat ring on InfiniBand no Llama 3 would be wide enough at t = 16
    for model in ("llama-3-8b", "llama-3-70b", "llama-3.1-405b"):
        assert tp.tp_intensity(model, 16) < tp.tier_ridge("h100", "network")


def test_hiding_width_with_tokens_counts_the_all_reduces_latency():
    m = rl.load_model("llama-3-70b")
    h = rl.get_hardware("h100")
    bare = tp.hiding_width(m, 8, h, "scale_up")
    w = tp.hiding_width(m, 8, h, "scale_up", tokens=4096)
    # at that width a block's matmuls take exactly as long as its two all-reduces, latency included
    compute = 2 * 4096 * m.layer_matmul_params / m.hidden_size ** 2 * w * w / 8 / h.peak_flops("bf16")
    exchange = 2 * col.collective_cost("all_reduce", 8, 4096 * w * 2, h, tier="scale_up").time
    assert compute == pytest.approx(exchange, rel=1e-9)
    # the latency makes it wider than the latency-free width (about 6% at 4,096 tokens), less so with more tokens
    assert 1.05 * bare < w < 1.07 * bare
    assert bare < tp.hiding_width(m, 8, h, "scale_up", tokens=65536) < w < tp.hiding_width(m, 8, h, "scale_up", tokens=1024)
    assert tp.hiding_width(m, 1, h, "scale_up", tokens=4096) == 0.0
    with pytest.raises(ValueError, match="tokens must be"):
        tp.hiding_width(m, 8, h, "scale_up", tokens=0)


def test_hiding_width_across_nodes_is_priced_hierarchically():
    # chapter 8: t = 16 over two nodes of eight H100s, the all-reduce priced as chapter 7 prices it
    m, h = rl.load_model("llama-3-70b"), rl.get_hardware("h100")
    w = tp.hiding_width(m, 16, h, None)
    compute = 2 * m.layer_matmul_params / m.hidden_size ** 2 * w * w / 16 / h.peak_flops("bf16")  # per token
    exchange = 2 * col.collective_cost("all_reduce", 16, w * 2, h, gpus_per_node=8).transfer
    assert compute == pytest.approx(exchange, rel=1e-9)
    # each GPU's network share is 1/8 of the buffer, so NVLink (7/4 of it at 450 GB/s) sets the pace, as in a
    # node: the width is twice the eight-way one (half the compute per GPU, the same bytes), about 9,700,
    # nowhere near the ~93,000 of a flat ring with every byte on InfiniBand
    assert w == pytest.approx(2 * tp.hiding_width(m, 8, h, "scale_up"))
    assert 9_600 < w < 9_700 and tp.hiding_width(m, 16, h, "network") > 9 * w
    # inside one node the hierarchical price is plain NVLink
    assert tp.hiding_width(m, 8, h, None) == pytest.approx(tp.hiding_width(m, 8, h, "scale_up"))
    # Llama 3 70B falls short at t = 16, Llama 3.1 405B clears it
    assert tp.width_margin(m, 16, h, None) > 1 > tp.width_margin("llama-3.1-405b", 16, h, None)


def test_compute_share_of_a_block_with_nothing_overlapped():
    c, k = tp.layer_times("llama-3-70b", 16, 4096, "h100", tier=None)
    assert tp.compute_share("llama-3-70b", 16, 4096, "h100") == pytest.approx(c / (c + k))
    assert tp.compute_share("llama-3-70b", 16, 4096, "h100") < tp.compute_share("llama-3-70b", 8, 4096, "h100") < 1


def test_tier_ridge_of_an_h100():
    assert tp.tier_ridge("h100", "scale_up") == pytest.approx(rl.get_hardware("h100").peak_flops("bf16") / 450e9)


def test_decode_latency_floor_at_large_t():
    """At batch 1 the exchanges are tiny: their time is nearly all latency, at least 2L calls' overhead,
    and it grows with t while the weight reads shrink, so the step stops falling."""
    m = rl.load_model("llama-3-70b")
    times = {}
    for t in (1, 2, 4, 8):
        pred = tp.predict_tp(tp.tp_decode_step(m, t, 1, 1024), "h100")
        times[t] = pred.time
        if t > 1:
            floor = 2 * m.num_layers * col.collective_cost("all_reduce", t, 1.0, "h100").latency
            assert pred.comm_time >= floor
            assert pred.comm_latency / pred.comm_time > 0.9
    assert times[2] < times[1] and times[4] < times[2]
    # the weight reads fall as 1/t, the latency floor does not: halving 4 -> 8 gains less than 1 -> 2 did
    assert times[4] / times[8] < times[1] / times[2]


def test_sequence_parallel_sends_the_same_bytes_as_the_all_reduces():
    plain = tp.predict_tp(tp.tp_training_step("llama-3-8b", 4, 2048), "h100")
    sp = tp.predict_tp(tp.tp_training_step("llama-3-8b", 4, 2048, sequence_parallel=True), "h100")
    assert sp.comm_bytes == pytest.approx(plain.comm_bytes)
    counts = {e.phase: 0 for e in plain.step.exchanges}
    for e in plain.step.exchanges:
        if e.name in ("attention all-reduce", "mlp all-reduce"):
            counts[e.phase] += e.count
    assert counts == {"forward": 64, "backward": 64}
    full = tp.tp_training_step("llama-3-8b", 4, 2048, recompute="full")
    assert sum(e.count for e in full.exchanges if e.phase == "recompute") == 64


def test_hierarchical_pricing_across_two_nodes_uses_the_network():
    step = tp.tp_decode_step("llama-3.1-405b", 16, 1, 1024)
    flat = tp.predict_tp(step, "h100", tier="network")
    two_nodes = tp.predict_tp(step, "h100", gpus_per_node=8)
    assert all(c.tiers == ("scale_up", "network") for _, c in two_nodes.priced)
    assert two_nodes.comm_time < flat.comm_time


def test_one_gpu_is_the_unsplit_step():
    step = tp.tp_decode_step("llama-3-8b", 1, 8, 512)
    assert step.exchanges == ()
    assert tp.predict_tp(step, "h100").time == pytest.approx(rl.predict(rl.decode_step("llama-3-8b", 8, 512), "h100").time)


def test_decode_by_degree_frees_memory_for_the_kv_cache_and_finds_the_fastest_degree():
    rows = tp.decode_by_degree("llama-3-70b", "h100", (1, 2, 4, 8), batch=1, context=8192)
    assert [r.t for r in rows] == [1, 2, 4, 8]
    assert not rows[0].fits and rows[1].fits  # 141 GB of weights need two 80 GB GPUs
    assert all(a.max_batch < b.max_batch for a, b in zip(rows[1:], rows[2:]))
    assert rows[3].weights_per_gpu == pytest.approx(tp.weights_per_gpu("llama-3-70b", tp=8))
    best = tp.best_degree("llama-3-8b", "h100", (1, 2, 4, 8), context=1024)
    assert best.time == min(r.time for r in tp.decode_by_degree("llama-3-8b", "h100", (1, 2, 4, 8), context=1024))
    # throughput per GPU at batch 1 falls with t: each GPU runs a t-th of the step but waits the whole of it
    assert all(a.tokens_per_s_per_gpu > b.tokens_per_s_per_gpu for a, b in zip(rows, rows[1:]))


def test_chapter_8_sizes_by_hand():
    m = rl.load_model("llama-3-70b")
    assert tp.norm_share(m) == pytest.approx((2 * 80 + 1) * 8192 / m.params)  # two norms a layer and a final one
    assert tp.message_bytes(m) == 8192 * 2  # one token's activations in bf16: 16 KB
    assert tp.message_bytes(m, 4096) == 4096 * 8192 * 2
    assert tp.message_bytes(m, 4096, hidden=1000, dtype="fp8") == 4096 * 1000
    # attention: q and o h x h, k and v h x h/8; MLP: three h x 3.5 h
    assert tp.width_constant(m) == pytest.approx(2 + 2 / 8 + 3 * 3.5) == 12.75


def test_width_layer_times_at_the_models_own_width_are_layer_times():
    m = rl.load_model("llama-3-70b")
    assert tp.width_layer_times(m, 8, 4096, "h100-sxm", m.hidden_size) == pytest.approx(
        tp.layer_times(m, 8, 4096, "h100-sxm"))
    c, k = tp.width_layer_times(m, 8, 4096, "h100-sxm", 2 * m.hidden_size)
    assert c == pytest.approx(4 * tp.layer_times(m, 8, 4096, "h100-sxm")[0])  # compute grows as h**2


def test_kv_room_batch_per_gpu_and_kv_head_copies():
    h100 = rl.get_hardware("h100-sxm")
    assert tp.kv_room(h100, 40e9) == pytest.approx(h100.usable_capacity - 40e9)
    point = tp.decode_by_degree("llama-3-70b", h100, (8,), context=8192)[0]
    assert tp.batch_per_gpu(point) == point.max_batch / 8
    assert tp.kv_head_copies("llama-3.1-405b", 16) == 2  # 16 GPUs, 8 KV heads
    assert tp.kv_head_copies("llama-3.1-405b", 4) == 1


def test_stack_time_and_activations_over_layers():
    c, k = tp.layer_times("llama-3.1-405b", 8, 4096, "h100-sxm", tier=None)
    assert tp.stack_time("llama-3.1-405b", 8, 4096, "h100-sxm", pp=2) == pytest.approx(126 / 2 * (c + k))
    assert tp.stack_activations("llama-3-8b", 8192, 4) == pytest.approx(32 * memory.activation_bytes("llama-3-8b", 8192, 1, tp=4))
    a_tp = memory.activation_bytes("llama-3-70b", 8192, 1, tp=8)
    a_sp = memory.activation_bytes("llama-3-70b", 8192, 1, tp=8, sequence_parallel=True)
    # sequence parallelism splits the replicated tensors over the eight GPUs
    assert a_tp - a_sp == pytest.approx(tp.replicated_activations("llama-3-70b", 8192) * 7 / 8)


def test_wait_share_is_one_less_intensity_over_ridge():
    i, r = tp.tp_intensity("llama-3-8b", 8), tp.tier_ridge("h100-sxm", "scale_up")
    assert tp.wait_share("llama-3-8b", 8, "h100-sxm") == pytest.approx(1 - i / r)
    assert tp.wait_share("llama-3.1-405b", 2, "h100-sxm") == 0.0  # wide enough to hide


@pytest.mark.parametrize("call, error, message", [
    (lambda: tp.message_bytes("llama-3-70b", -1), ValueError, "tokens must be"),
    (lambda: tp.width_layer_times("llama-3-70b", 8, 4096, "h100-sxm", 0), ValueError, "hidden must be"),
    (lambda: tp.kv_room("h100-sxm", -1.0), ValueError, "weights_per_gpu must be"),
    (lambda: tp.batch_per_gpu(3), TypeError, "point must be a DegreePoint"),
    (lambda: tp.stack_time("llama-3-70b", 8, 4096, "h100-sxm", pp=0), ValueError, "pp must be"),
    (lambda: tp.kv_head_copies("llama-3-70b", 0), ValueError, "tp must be"),
    (lambda: tp.wait_share("llama-3-8b", 8, "h100-pcie", "network"), ValueError, "tier must be one of"),
])
def test_chapter_8_helpers_bad_input(call, error, message):
    with pytest.raises(error, match=__import__("re").escape(message)):
        call()


def test_degree_speedup_and_the_pipeline_comparison():
    pts = tp.decode_by_degree("llama-3-70b", "h100-sxm", (1, 2, 8), context=1024)
    assert tp.degree_speedup(pts, 8) == pytest.approx(pts[0].time / pts[2].time)
    assert tp.degree_speedup(pts, 8, base=2) == pytest.approx(pts[1].time / pts[2].time)
    x = tp.against_pipeline("llama-3.1-405b", "h200-sxm", 8, context=2048, dtype="fp8", published=1.5)
    assert x.pp_time == pytest.approx(float(rl.predict(rl.decode_step("llama-3.1-405b", 1, 2048, dtype="fp8"), "h200-sxm").time))
    assert x.ratio == pytest.approx(x.pp_time / x.tp_time) and x.ratio > 1  # eight GPUs read the weights at once
    assert x.implied_tp_time == pytest.approx(x.pp_time / 1.5)
    assert x.implied_over == pytest.approx(x.implied_tp_time / x.tp_time - 1)


@pytest.mark.parametrize("call, error, message", [
    (lambda: tp.degree_speedup(tp.decode_by_degree("llama-3-8b", "h100", (1, 2)), 8), ValueError,
     "tp must be one of the points' degrees [1, 2], got 8"),
    (lambda: tp.against_pipeline("llama-3-70b", "h100", 8, published=0), ValueError, "published must be"),
])
def test_chapter_8_comparisons_bad_input(call, error, message):
    with pytest.raises(error, match=__import__("re").escape(message)):
        call()


def test_width_margin_is_hiding_width_over_hidden():
    w = tp.hiding_width("llama-3.1-405b", 16, "h100-sxm", "network")
    assert tp.width_margin("llama-3.1-405b", 16, "h100-sxm", "network") == pytest.approx(w / 16384)
    with pytest.raises(ValueError, match="tier must be one of"):
        tp.width_margin("llama-3-8b", 8, "h100-pcie", "network")


def test_comm_shares_of_a_degree_point():
    p = tp.decode_by_degree("llama-3-70b", "h100-sxm", (8,), context=1024)[0]
    assert tp.comm_share(p) == pytest.approx(p.comm / p.time) and 0 < tp.comm_share(p) < 1
    assert tp.comm_latency_share(p) == pytest.approx(p.comm_latency / p.comm)
    for fn in (tp.comm_share, tp.comm_latency_share):
        with pytest.raises(TypeError, match="point must be a DegreePoint"):
            fn(None)


# --- a block's two all-reduces ---------------------------------------------------------------------------------

def test_a_blocks_forward_pays_two_all_reduces_priced_by_hand():
    """Llama 3 8B over 8 GPUs of an H100 node, 4,096 tokens: after attention and after the MLP each GPU
    all-reduces the 4,096 x 4,096 bf16 activations (33.6 MB). A ring all-reduce sends 2 (t - 1) / t of the
    buffer at NVLink's 450 GB/s each way, and pays NCCL's 3.6 us per call plus 0.47 us for each of its
    2 (t - 1) steps: 140.7 us. Two of them: 281 us against 226 us of matmuls."""
    size = 4096 * 4096 * 2
    one = 3.6e-6 + 2 * 7 * 0.47e-6 + 2 * 7 / 8 * size / 450e9
    compute, comm = tp.layer_times("llama-3-8b", 8, 4096, "h100-sxm")
    assert comm == pytest.approx(2 * one, rel=1e-9)
    assert compute == pytest.approx(2 * 4096 * rl.load_model("llama-3-8b").layer_matmul_params / 8 / 989.4e12, rel=1e-3)


def test_a_blocks_communication_is_twice_the_collectives_own_all_reduce():
    for degree, tokens in ((2, 512), (4, 8192), (8, 1)):
        _, comm = tp.layer_times("llama-3-70b", degree, tokens, "h100-sxm")
        ar = col.collective_cost("all_reduce", degree, tokens * 8192 * 2, "h100-sxm", tier="scale_up")
        assert comm == pytest.approx(2 * ar.time, rel=1e-12)


# --- a tensor-parallel training run (``roofline train --tp``) ---------------------------------------

def test_a_tensor_parallel_training_plan_adds_its_collectives_to_chapter_threes_step():
    m, h = rl.load_model("llama-3-70b"), rl.get_hardware("h100-sxm")
    run = tp.tp_training_plan(m, h, tp=8, gpus=64, seq=4096, recompute="full", zero_stage=1)
    shard = rl.plan_training(tp.shard_model(m, 8), h, seq=4096, gpus=8, recompute="full", zero_stage=1)
    exchanges = tp.predict_tp(tp.tp_training_step(m, 8, 4096, recompute="full"), h)
    assert (run.tp, run.gpus, run.data_parallel) == (8, 64, 8)
    assert run.compute_time == pytest.approx(shard.time)
    assert run.collective_time == pytest.approx(exchanges.comm_time)
    assert run.time == pytest.approx(shard.time + exchanges.comm_time)  # the all-reduces are not overlapped
    assert run.prediction.step.collectives == (2 * 80 + 4) + (2 * 80 + 1) + 2 * 80  # forward, backward, recomputed
    # 4,096 tokens a step shared by the group's 8 GPUs
    assert run.tokens_per_s_per_gpu * run.time * 8 == pytest.approx(4096)
    # one GPU's share of 6 N per token (70.6 B parameters over 8), attention on top, at 989.4 TFLOP/s
    six_n = 6 * m.params / 8 * 4096
    assert 1.0 < run.model_flops / six_n < 1.15
    assert run.mfu == pytest.approx(run.model_flops / (run.time * 989.4e12), rel=1e-3)
    assert run.memory_per_gpu == pytest.approx(float(shard.footprint.total)) and run.fits


def test_a_tensor_parallel_training_plan_defaults_to_one_group_and_refuses_a_partial_one():
    run = tp.tp_training_plan("llama-3-8b", "h100-sxm", tp=2, seq=2048)
    assert (run.gpus, run.data_parallel) == (2, 1)
    with pytest.raises(ValueError, match=r"gpus must be a multiple of tp \(4\).*got gpus=6"):
        tp.tp_training_plan("llama-3-8b", "h100-sxm", tp=4, gpus=6, seq=1024)
    with pytest.raises(ValueError, match="tp must divide llama-3-8b's 32 query heads, got tp=3"):
        tp.tp_training_plan("llama-3-8b", "h100-sxm", tp=3, seq=1024)


def test_the_degree_is_called_tp_in_every_public_function():
    import inspect

    for name in tp.__all__:
        obj = getattr(tp, name)
        if inspect.isfunction(obj):
            params = inspect.signature(obj).parameters
            assert "t" not in params, f"{name} still takes t"
    assert tp.shard_model("llama-3-8b", tp=4).num_heads == 8


def test_a_step_knows_its_tokens_and_its_rate_per_gpu():
    decode = tp.predict_tp(tp.tp_decode_step("llama-3-70b", 8, 4, 1024), "h100-sxm")
    prefill = tp.predict_tp(tp.tp_prefill("llama-3-8b", 2, 2048, 2), "h100-sxm")
    train = tp.predict_tp(tp.tp_training_step("llama-3-8b", 4, 4096, 2), "h100-sxm")
    assert (decode.step.tokens, prefill.step.tokens, train.step.tokens) == (4, 4096, 8192)
    # a decode step gives each of its 4 sequences one token, shared by the 8 GPUs
    assert decode.tokens_per_s_per_gpu == pytest.approx(4 / decode.time / 8)
    assert decode.time_per_token == pytest.approx(decode.time / 4)
    assert prefill.tokens_per_s_per_gpu * prefill.time * 2 == pytest.approx(4096)
