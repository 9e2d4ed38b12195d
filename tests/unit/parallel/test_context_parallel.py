"""Context parallelism (chapter 11): the causal split, the ring's hiding law, the all-to-all's head limit,
and the per-GPU step against the unsplit one."""

import numpy as np
import pytest

from roofline import attention_flops, load_model, prefill, training_step
from roofline.core.collectives import collective_cost
from roofline.parallel.context_parallel import (all_to_all_sizes, check_all_to_all, chunk_owners,
                                                context_parallel_prefill, kv_block_bytes, longest_sequence,
                                                pair_matrix, pairs_per_gpu, plan_context_parallel, ring_balance,
                                                ring_hiding_block, ring_layer_times, ring_schedule, smallest_cp)
from roofline.core.hardware import get_hardware


def brute_pairs(seq, cp, layout):
    """Count the causal pairs GPU by GPU, position by position."""
    owner = np.repeat(chunk_owners(cp, layout), seq // (2 * cp))
    q, k = np.meshgrid(np.arange(seq), np.arange(seq), indexing="ij")
    kept = k <= q
    out = np.zeros((cp, cp))
    np.add.at(out, (owner[q[kept]], owner[k[kept]]), 1)
    return out


@pytest.mark.parametrize("cp", [1, 2, 3, 4, 8])
@pytest.mark.parametrize("layout", ["zigzag", "contiguous"])
def test_pair_matrix_counts_every_kept_pair_once(cp, layout):
    seq = 48 * cp
    assert np.array_equal(pair_matrix(seq, cp, layout), brute_pairs(seq, cp, layout))
    assert pair_matrix(seq, cp, layout).sum() == seq * (seq + 1) / 2


@pytest.mark.parametrize("cp", [2, 4, 8, 16])
def test_zigzag_gives_every_gpu_the_same_attention_and_they_add_up_to_the_unsplit_flops(cp):
    m = load_model("llama-3-8b")
    seq = 1024 * cp
    per_gpu = pairs_per_gpu(seq, cp, "zigzag")
    assert np.allclose(per_gpu, per_gpu[0])
    flops = per_gpu[0] * 4 * m.attention_width * m.num_layers
    whole = attention_flops(seq, seq, m.attention_width, m.num_layers, causal="exact")
    assert flops * cp == pytest.approx(whole, rel=1e-12)


def test_contiguous_causal_ring_keeps_about_half_the_gpus_busy():
    assert ring_balance(2**17, 16, "zigzag") == pytest.approx(1.0)
    balance = ring_balance(2**17, 16, "contiguous")
    assert 0.5 < balance < 0.55  # (cp/2) / (cp - 1/2) = 0.516 for 16
    # every step but the first, some GPU holds a whole block: the step costs a full square
    c = 2**17 // 16
    assert np.all(ring_schedule(2**17, 16, "contiguous")[1:] == c * c)
    # zig-zag: every off-diagonal step costs half a square on every GPU
    assert np.all(ring_schedule(2**17, 16, "zigzag")[1:] == c * c / 2)


@pytest.mark.parametrize("model", ["llama-3-8b", "llama-3-70b", "llama-3.1-405b"])
@pytest.mark.parametrize("tier", ["scale_up", "network"])
def test_at_the_hiding_block_the_transfer_takes_as_long_as_the_block_attention(model, tier):
    m, hw = load_model(model), get_hardware("h100-sxm")
    block = ring_hiding_block(m, hw, tier=tier)
    attention = 4 * m.attention_width * block * block / 2 / hw.peak_flops("bf16")
    transfer = collective_cost("send_recv", 2, kv_block_bytes(m, 1) * block, hw, tier=tier).transfer
    assert attention == pytest.approx(transfer, rel=1e-12)


def test_hiding_block_scales_with_the_ratio_of_peak_to_link():
    hw = get_hardware("h100-sxm")
    nvlink = ring_hiding_block("llama-3-8b", hw, tier="scale_up")
    ib = ring_hiding_block("llama-3-8b", hw, tier="network")
    assert ib / nvlink == pytest.approx(hw.interconnect["scale_up"].each_way / hw.interconnect["network"].each_way)
    # no mask: twice the work per block, half the block length; half the peak: half the length again
    assert ring_hiding_block("llama-3-8b", hw, causal=False) == pytest.approx(ib / 2)
    assert ring_hiding_block("llama-3-8b", hw, achieved=0.5) == pytest.approx(ib / 2)
    # grouped-query attention: 70B's K and V are 8 of 64 heads against 8B's 8 of 32: half the bytes per FLOP
    assert ring_hiding_block("llama-3-70b", hw) == pytest.approx(ib / 2)


def test_ring_hides_past_the_threshold_and_not_before():
    hw = get_hardware("h100-sxm")
    block = ring_hiding_block("llama-3-8b", hw, tier="network")
    cp = 16  # two nodes: the ring crosses the network
    short = ring_layer_times("llama-3-8b", hw, int(block // 2) // 32 * 32 * cp, cp)
    long = ring_layer_times("llama-3-8b", hw, int(block * 2) // 32 * 32 * cp, cp)
    assert short.exposed > 0 and short.transfer > short.compute[1]
    assert long.exposed == 0 and long.transfer < long.compute[1]
    assert long.time == pytest.approx(long.compute.sum())


def test_all_to_all_degree_is_limited_by_the_kv_heads_and_sends_q_k_v_and_the_output():
    for cp in (1, 2, 4, 8):
        check_all_to_all("llama-3-70b", cp)
    with pytest.raises(ValueError, match="must not exceed llama-3-70b's 8 key/value heads"):
        check_all_to_all("llama-3-70b", 16)
    with pytest.raises(ValueError, match="must not exceed"):
        plan_context_parallel("llama-3-8b", "h100", seq=2**17, cp=16, method="all-to-all")
    m = load_model("llama-3-8b")
    qkv, out = all_to_all_sizes(m, 8192, 4)
    assert qkv == 2048 * (4096 + 2 * 1024) * 2 and out == 2048 * 4096 * 2
    # the ring has no such limit
    assert plan_context_parallel("llama-3-8b", "h100", seq=2**17, cp=16).cp == 16


@pytest.mark.parametrize("method", ["ring", "all-to-all"])
def test_per_gpu_training_step_is_the_unsplit_one_over_cp(method):
    seq, cp = 32768, 4
    plan = plan_context_parallel("llama-3-8b", "h100-sxm", seq=seq, cp=cp, method=method, recompute="none")
    whole = training_step("llama-3-8b", seq, recompute="none")
    # every FLOP of the unsplit step is done once, a quarter on each GPU (zig-zag and heads split evenly)
    assert float(plan.step.flops) * cp == pytest.approx(float(whole.flops), rel=1e-9)
    assert plan.model_flops == pytest.approx(plan.useful_flops, rel=1e-9)
    # activations per GPU are those of seq / cp tokens
    one = plan_context_parallel("llama-3-8b", "h100-sxm", seq=seq, cp=1, recompute="none")
    assert float(plan.footprint["activations"]) == pytest.approx(float(one.footprint["activations"]) / cp, rel=1e-9)
    assert float(plan.footprint["logits"]) == pytest.approx(float(one.footprint["logits"]) / cp, rel=1e-9)


def test_contiguous_layout_pays_the_busiest_gpu():
    zig = plan_context_parallel("llama-3-8b", "h100-sxm", seq=2**17, cp=8, recompute="none")
    flat = plan_context_parallel("llama-3-8b", "h100-sxm", seq=2**17, cp=8, layout="contiguous", recompute="none")
    assert flat.step["forward"].flops > zig.step["forward"].flops
    assert flat.time > zig.time


def test_prefill_over_cp_gpus_is_faster_and_does_the_same_work():
    one = context_parallel_prefill("llama-3-8b", "h100-sxm", 2**17, 1)
    eight = context_parallel_prefill("llama-3-8b", "h100-sxm", 2**17, 8)
    whole = prefill("llama-3-8b", 2**17, accounting="refined")
    assert float(one.step.flops) == pytest.approx(float(whole.flops))
    assert float(eight.step.flops) == pytest.approx(float(whole.flops) / 8, rel=0.01)  # the lm_head of each 1/8
    assert eight.time < one.time / 7


def test_longest_sequence_and_smallest_cp_agree():
    hw = get_hardware("h100-sxm")
    longest = longest_sequence("llama-3-70b", hw, cp=1, gpus=64)
    assert 0 < longest < 2**17
    cp = smallest_cp("llama-3-70b", hw, 2**17, gpus=64)
    assert cp > 1
    assert not plan_context_parallel("llama-3-70b", hw, seq=2**17, cp=cp // 2, gpus=64).fits
    assert plan_context_parallel("llama-3-70b", hw, seq=2**17, cp=cp, gpus=64).fits
    assert longest_sequence("llama-3-70b", hw, cp=cp, gpus=64) >= 2**17


def test_long_context_attention_share_grows_towards_one_and_memory_is_linear():
    from roofline.parallel.context_parallel import long_context
    rows = [long_context("llama-3-8b", s) for s in (8192, 32768, 131072, 2**20)]
    shares = [r.attention_flops_share for r in rows]
    assert shares == sorted(shares) and shares[0] < 0.2 and shares[-1] > 0.8
    # forward attention 2 s^2 width L (causal) against 2 s N for the matmuls: the share is s w L / (s w L + N)
    m = load_model("llama-3-8b")
    assert rows[2].kv_cache == pytest.approx(4 * rows[1].kv_cache)
    assert rows[2].activations_full_recompute < rows[2].activations
    assert rows[3].logits == pytest.approx(2**20 * m.vocab_size * 4)
    assert all(0 < r.attention_time_share < 1 for r in rows)


def test_chapter_11_helpers_by_hand():
    from roofline.core.collectives import bytes_sent
    from roofline.parallel import context_parallel as cp
    from roofline.workloads import memory

    a_tp = memory.activation_bytes("llama-3-70b", 8192, 1, tp=8)
    a_sp = memory.activation_bytes("llama-3-70b", 8192, 1, tp=8, sequence_parallel=True)
    assert cp.sequence_parallel_saving("llama-3-70b", 8192, 8) == pytest.approx(80 * (a_tp - a_sp))
    # 4 x 8,192 (the attention width) x 4,096**2 / 2 pairs at 989.4 TFLOP/s
    assert cp.block_attention_time("llama-3-70b", "h100-sxm", 4096) == pytest.approx(4 * 8192 * 4096**2 / 2 / 989.4e12)
    assert cp.block_attention_time("llama-3-70b", "h100-sxm", 4096, causal=False) == pytest.approx(
        2 * cp.block_attention_time("llama-3-70b", "h100-sxm", 4096))
    assert cp.pair_imbalance(4096, 4, "zigzag") == 1.0
    rows = cp.pairs_per_gpu(4096, 4, "contiguous")
    assert cp.pair_imbalance(4096, 4, "contiguous") == pytest.approx(rows.max() / rows.min())
    assert cp.contiguous_balance_limit(16) == pytest.approx(8 / 15.5)
    assert cp.ring_balance(2**20, 4, "contiguous") == pytest.approx(cp.contiguous_balance_limit(4), rel=1e-3)
    assert cp.block_tokens(131072, 16) == 8192
    assert cp.hiding_margin("llama-3.1-405b", "h100-sxm", 131072, 16) == pytest.approx(
        8192 / cp.ring_hiding_block("llama-3.1-405b", "h100-sxm", tier="network"))
    r = cp.ring_layer_times("llama-3-70b", "h100-sxm", 131072, 8)
    assert cp.ring_transfer_total(r) == pytest.approx(7 * r.transfer)
    # DeepSpeed-Ulysses: 4 N h / P elements of two bytes
    assert cp.ulysses_published_bytes("llama-2-7b", 131072, 8) == 4 * 131072 * 4096 * 2 / 8
    qkv, out = cp.all_to_all_sizes("llama-2-7b", 131072, 8)
    assert cp.all_to_all_leaving_bytes("llama-2-7b", 131072, 8) == pytest.approx(7 / 8 * (qkv + out))
    assert cp.all_to_all_leaving_bytes("llama-2-7b", 131072, 8) == pytest.approx(
        bytes_sent("all_to_all", 8, qkv) + bytes_sent("all_to_all", 8, out))


@pytest.mark.parametrize("call, error, message", [
    (lambda cp: cp.sequence_parallel_saving("llama-3-70b", 0, 8), ValueError, "seq must be"),
    (lambda cp: cp.block_attention_time("llama-3-70b", "h100", -1), ValueError, "block must be"),
    (lambda cp: cp.block_attention_time("llama-3-70b", "h100", 16, causal="yes"), TypeError, "causal must be True or False"),
    (lambda cp: cp.pair_imbalance(4096, 4, "striped"), KeyError, "unknown layout"),
    (lambda cp: cp.contiguous_balance_limit(0), ValueError, "cp must be"),
    (lambda cp: cp.block_tokens(131072, 2.5), ValueError, "cp must be a whole number"),
    (lambda cp: cp.hiding_margin("llama-3-70b", "h100", 131072, 16, tier="infiniband"), KeyError, "unknown tier 'infiniband'"),
    (lambda cp: cp.ring_transfer_total(1.0), TypeError, "times must be RingLayerTimes"),
    (lambda cp: cp.ulysses_published_bytes("llama-2-7b", 131072, 0), ValueError, "cp must be"),
    (lambda cp: cp.all_to_all_leaving_bytes("llama-2-7b", 4097, 4), ValueError, "seq must be a multiple of cp (4)"),
])
def test_chapter_11_helpers_bad_input(call, error, message):
    from roofline.parallel import context_parallel as cp

    with pytest.raises(error, match=__import__("re").escape(message)):
        call(cp)


def test_reduce_scatter_and_all_gather_send_what_an_all_reduce_sends():
    from roofline.core.collectives import bytes_sent
    from roofline.parallel import context_parallel as cp

    assert cp.rs_ag_bytes(8, 1.0) == pytest.approx(2 * 7 / 8)
    assert cp.rs_ag_bytes(8, 1e9) == pytest.approx(bytes_sent("all_reduce", 8, 1e9))
    with pytest.raises(ValueError, match="n must be"):
        cp.rs_ag_bytes(0)


# --- the ring's traffic in a training step: cp - 1 block transfers per pass and layer ------------------------

def test_ring_training_traffic_is_cp_minus_one_block_transfers_per_pass_by_hand():
    """Llama 3 8B, one 65,536-token sequence over 8 H100s of one node, no recomputation. Each GPU holds
    8,192 tokens; a ring step sends one block of keys and values, 8,192 x 2 x 8 heads x 128 x 2 bytes
    (33.6 MB), over NVLink at 450 GB/s each way, with NCCL's 3.6 us per call and 0.47 us per step. A
    layer's ring makes 7 transfers (the last step has none to hide); the forward pass counts once and the
    backward twice (blocks and their gradients): 3 passes of 32 layers."""
    from roofline.parallel.context_parallel import plan_context_parallel

    block = 8192 * 2 * 8 * 128 * 2
    one = 3.6e-6 + 0.47e-6 + block / 450e9
    plan = plan_context_parallel("llama-3-8b", "h100-sxm", seq=65536, cp=8, recompute="none")
    assert plan.tier == "scale_up"
    assert plan.comm_time == pytest.approx(3 * 32 * 7 * one, rel=1e-9)
    # rerunning the attention core under full recomputation sends the ring once more
    full = plan_context_parallel("llama-3-8b", "h100-sxm", seq=65536, cp=8, recompute="full")
    assert full.comm_time == pytest.approx(4 * 32 * 7 * one, rel=1e-9)


def test_a_ring_of_two_makes_one_transfer_per_pass_and_layer():
    """Two GPUs: each holds half the sequence and sends its block once, so the step's traffic is the
    number of passes times one block's transfer as ring_layer_times prices it, and it grows as cp - 1."""
    from roofline.parallel.context_parallel import plan_context_parallel

    two = plan_context_parallel("llama-3-8b", "h100-sxm", seq=65536, cp=2, recompute="none")
    ring = ring_layer_times("llama-3-8b", "h100-sxm", 65536, 2)
    assert two.comm_time == pytest.approx(3 * 32 * ring.transfer, rel=1e-12)
    four = plan_context_parallel("llama-3-8b", "h100-sxm", seq=65536, cp=4, recompute="none")
    assert four.comm_time == pytest.approx(3 * 32 * 3 * ring_layer_times("llama-3-8b", "h100-sxm", 65536, 4).transfer,
                                           rel=1e-12)


def test_the_degree_is_bounded_before_the_pair_matrix_grows_as_its_square():
    from roofline.parallel.context_parallel import pair_matrix
    assert pair_matrix(2**20, 1024).shape == (1024, 1024)  # the largest degree priced: about 100 MB at the peak
    for cp in (2048, 16384, 2**53):
        with pytest.raises(ValueError, match="cp must be at most 1,024"):
            pair_matrix(2**20, cp)


import roofline as rl  # noqa: E402
from roofline.parallel import context_parallel as cp  # noqa: E402
from roofline.core.calibration import get_roof


def test_the_backward_pass_has_its_own_thresholds_and_the_forward_binds():
    # chapter 11: B* and the all-to-all's share are the forward's; the backward sends K, V, dK, dV round the
    # ring (twice the bytes), the output's and Q, K, V's gradients through the all-to-all (the same bytes),
    # against 2.5 times the attention FLOPs (the flash kernel's five matmuls against two)
    m, h = rl.load_model("llama-3-70b"), rl.get_hardware("h100-sxm")
    assert cp.phase_factors("ring", "backward") == (2.0, 2.5) and cp.phase_factors("all-to-all", "step") == (2.0, 3.5)
    fwd = cp.ring_hiding_block(m, h, tier="network")
    assert cp.ring_hiding_block(m, h, tier="network", phase="backward") == pytest.approx(0.8 * fwd)
    assert cp.ring_hiding_block(m, h, tier="network", phase="step") == pytest.approx(3 / 3.5 * fwd)
    share = cp.all_to_all_share(m, h, 131072, 8)
    attention = float(cp.ring_layer_times(m, h, 131072, 8).compute.sum())
    assert share == pytest.approx(cp.all_to_all_layer_time(m, h, 131072, 8) / attention)
    assert 0.03 < share < 0.035  # the text's forward share
    assert cp.all_to_all_share(m, h, 131072, 8, phase="step") == pytest.approx(2 / 3.5 * share)
    with pytest.raises(ValueError, match="phase must be one of"):
        cp.phase_factors("ring", "both")


def test_a_training_plan_counts_each_methods_backward_bytes():
    m, h = rl.load_model("llama-2-7b"), rl.get_hardware("a100-sxm-80gb")
    u = cp.plan_context_parallel(m, h, seq=32768, cp=8, method="all-to-all", recompute="none")
    one = cp.all_to_all_layer_time(m, h, 32768, 8)
    assert u.comm_time == pytest.approx(2 * m.num_layers * one)  # forward and the backward's same bytes
    r = cp.plan_context_parallel(m, h, seq=32768, cp=8, method="ring", recompute="none")
    ring = cp.ring_layer_times(m, h, 32768, 8)
    assert r.comm_time == pytest.approx(3 * m.num_layers * ring.transfer * 7)  # forward and twice that backward


def test_calibrated_hiding_block_is_the_law_at_the_measured_rates():
    import roofline as rl
    from roofline.parallel.context_parallel import calibrated_hiding_block

    roof = get_roof("h100-sxm", "calibrated")
    # Llama 3 70B: 8 KV heads x 128 x (K and V) x 2 bytes = 4,096 bytes a token a layer, d = 64 x 128 = 8,192,
    # so B* = 4096 / (2 x 8192) x F / W = F / (4 W)
    rate = 1.0 / roof.flash_time(1.0, 131072, head_dim=128, causal=True)
    assert calibrated_hiding_block("llama-3-70b", "h100-sxm", seq=131072) == pytest.approx(rate / (4 * roof.port))
    nvl = calibrated_hiding_block("llama-3-70b", "h100-sxm", seq=131072, tier="scale_up")
    assert nvl == pytest.approx(rate / (4 * roof.send_nvlink))
    # the FlashAttention-2 kernel at about a third of the H100's peak: the block shrinks against the datasheet's
    from roofline.parallel.context_parallel import ring_hiding_block
    assert calibrated_hiding_block("llama-3-70b", "h100-sxm", seq=131072) < ring_hiding_block(
        rl.load_model("llama-3-70b"), "h100-sxm", tier="network") / 2


def test_calibrated_hiding_block_refuses_an_unknown_tier_and_a_bad_seq():
    from roofline.parallel.context_parallel import calibrated_hiding_block

    with pytest.raises(KeyError, match="tier"):
        calibrated_hiding_block("llama-3-70b", "h100-sxm", seq=8192, tier="pcie")
    with pytest.raises(ValueError, match="seq"):
        calibrated_hiding_block("llama-3-70b", "h100-sxm", seq=0)
