"""roofline.workloads.tiling: tiled matmul traffic, explicit and flash attention IO, Dao et al.'s count (chapter 4)."""

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import roofline as rl
from roofline.workloads import tiling
from roofline.core.records import load_layers


# ---------------------------------------------------------------------------------------------
# Tiled matmul


def test_tile_covering_the_output_gives_the_minimum_traffic():
    m, n, k = 512, 384, 256
    assert tiling.tiled_matmul(m, n, k, 4096).bytes == rl.matmul(m, n, k).bytes
    assert tiling.tiled_matmul(m, n, k, m, n).bytes == rl.matmul(m, n, k).bytes


def test_one_by_one_tiles_read_every_operand_once_per_product():
    # a 1 x 1 tile reads a row of A and a column of B for every output: 2 m n k reads, m n writes
    m, n, k = 6, 5, 7
    assert tiling.tiled_matmul(m, n, k, 1).bytes == 2 * (2 * m * n * k + m * n)


def test_hand_count_with_partial_tiles():
    # m = 5 rows in tiles of 2 -> 3 row tiles; n = 4 in tiles of 3 -> 2 column tiles
    m, n, k = 5, 4, 3
    a_reads = m * k * 2  # A re-read for each of the 2 column tiles
    b_reads = k * n * 3  # B re-read for each of the 3 row tiles
    c_writes = m * n
    assert tiling.tiled_matmul(m, n, k, 2, 3, dtype="fp8").bytes == a_reads + b_reads + c_writes


@settings(max_examples=60, deadline=None)
@given(m=st.integers(1, 300), n=st.integers(1, 300), k=st.integers(1, 300), t=st.integers(1, 64))
def test_tiling_changes_bytes_not_flops(m, n, k, t):
    small, big = tiling.tiled_matmul(m, n, k, t), tiling.tiled_matmul(m, n, k, 2 * t)
    assert small.flops == big.flops == 2 * m * n * k
    assert big.bytes <= small.bytes  # a bigger tile never moves more
    assert big.bytes >= rl.matmul(m, n, k).bytes  # and never less than reading everything once


def test_decode_cannot_be_rescued_by_tiling():
    tiles = np.array([1, 16, 256, 4096])
    assert np.all(tiling.tiled_matmul(1, 4096, 4096, tiles).intensity < 1)
    assert tiling.tile_for_intensity(1, 4096, 4096, 1.0) is None


def test_square_tile_is_the_largest_that_fits():
    for on_chip in (233472, 52428800, 1000):
        t = tiling.square_tile(on_chip)
        assert 3 * t * t * 2 <= on_chip < 3 * (t + 1) ** 2 * 2


def test_tile_for_intensity_is_the_first_tile_that_crosses():
    ridge = rl.get_hardware("h100-sxm").ridge_point()
    t = tiling.tile_for_intensity(4096, 4096, 4096, ridge)
    assert tiling.tiled_matmul(4096, 4096, 4096, t).intensity >= ridge
    assert tiling.tiled_matmul(4096, 4096, 4096, t - 1).intensity < ridge
    # one SM's shared memory holds too small a tile for the ridge; the L2 holds one far past it
    h100 = rl.get_hardware("h100-sxm")
    assert tiling.square_tile(h100.shared_memory_per_sm) < t < tiling.square_tile(h100.l2_bytes)


# ---------------------------------------------------------------------------------------------
# Dao et al. 2022: the count of Algorithm 1 and Theorem 2


def _algorithm_1(n, d, m):
    """Algorithm 1 of Dao et al., run as loops that count every element loaded from or stored to HBM."""
    bc = math.ceil(m / (4 * d))
    br = min(bc, d)
    count = n * d + 2 * n  # step 2: O, l and m initialised in HBM
    for j in range(0, n, bc):
        cols = min(bc, n - j)
        count += 2 * cols * d  # load K_j, V_j
        for i in range(0, n, br):
            rows = min(br, n - i)
            count += 2 * rows * d + 2 * rows  # load Q_i, O_i, l_i, m_i
            count += rows * d + 2 * rows  # write O_i, l_i, m_i
    return count


@pytest.mark.parametrize("n,d,m", [(4, 2, 16), (7, 3, 20), (64, 8, 128), (100, 16, 300), (33, 4, 4)])
def test_dao_count_matches_the_algorithm_run_as_loops(n, d, m):
    assert tiling.dao_forward_accesses(n, d, m) == _algorithm_1(n, d, m)


def test_dao_count_is_theta_n2_d2_over_m():
    # within d <= M <= N d, with blocks of at least one key, the count over N^2 d^2 / M stays within
    # a constant band: three passes over Q and O per key block, and 4d/M key blocks per key
    ratios = []
    for n in (1024, 4096, 16384):
        for d in (32, 64, 128):
            for m in (4 * d, 16 * d, 64 * d, 8 * d * d):
                ratios.append(tiling.dao_forward_accesses(n, d, m) / (n * n * d * d / m))
    assert 12 <= min(ratios) and max(ratios) <= 16  # near M = N d the fixed 3 N d + 2 N term shows


def test_dao_count_halves_when_the_sram_doubles():
    n, d = 16384, 64
    big = tiling.dao_forward_accesses(n, d, 8192) - 3 * n * d - 2 * n
    small = tiling.dao_forward_accesses(n, d, 4096) - 3 * n * d - 2 * n
    assert small == pytest.approx(2 * big)


def test_explicit_forward_is_algorithm_0_count():
    # Algorithm 0 (no mask): read Q, K (write S), read S (write P), read P, V (write O): 4 N d + 4 N^2
    n, d = 3, 2
    qkvo = 4 * n * d
    scores = 4 * n * n  # S written, S read, P written, P read
    e = tiling.explicit_attention(n, d, 1, causal=False)
    assert e.bytes == 2 * (qkvo + scores)
    assert e.flops == 4 * n * n * d
    # Theta(N d + N^2): the count over N d + N^2 is between 4 and 8 bytes (bf16) at any size
    for n in (16, 1024, 65536):
        e = tiling.explicit_attention(n, 128, 1, causal=False)
        assert 8 <= e.bytes / (n * 128 + n * n) <= 16


def test_explicit_hand_count_with_mask_and_groups():
    # 2 sequences, 4 query heads sharing 2 KV heads, 5 tokens, heads of 3, bf16, causal
    batch, h, hkv, n, d = 2, 4, 2, 5, 3
    q = batch * h * n * d  # Q read, O written
    kv = batch * hkv * n * d  # K read, V read
    s = batch * h * n * n  # one score-sized tensor
    mask = n * n  # one byte each
    e = tiling.explicit_attention(n, d, h, kv_heads=hkv, batch=batch)
    assert [op.name for op in e.ops] == ["scores", "mask", "softmax", "pv"]
    assert e.bytes == 2 * (2 * q + 2 * kv + 6 * s) + mask
    assert e.part("scores").bytes == 2 * 6 * s + mask
    assert e.flops == 4 * batch * h * n * n * d  # the whole square: the mask comes afterwards
    assert e.peak_bytes == 2 * 2 * s + mask and e.saved_bytes == 2 * s


# ---------------------------------------------------------------------------------------------
# Flash attention


def test_flash_reads_q_k_v_once_when_a_block_holds_the_sequence():
    n, d, h = 512, 64, 4
    f = tiling.flash_attention(n, d, h, on_chip=4 * n * d * 2, causal=False)
    assert f.block == n
    assert f.bytes == 2 * 4 * h * n * d  # Q, K, V read once; O written once
    assert f.peak_bytes == 2 * h * n * d and f.saved_bytes == 0  # inference keeps nothing


def test_flash_k_and_v_are_read_once_per_block_of_queries():
    n, d, h = 4096, 128, 2
    f = tiling.flash_attention(n, d, h, on_chip=128 * 4 * d * 2, causal=False)
    assert f.block == 128
    qo = 2 * 2 * h * n * d
    assert f.bytes == qo + 2 * (n // 128) * 2 * h * n * d
    # with an L2 that holds a head's K and V they cross once
    cached = tiling.flash_attention(n, d, h, on_chip=128 * 4 * d * 2, causal=False, l2=2 * n * d * 2)
    assert cached.bytes == qo + 2 * 2 * h * n * d
    assert cached.flops == f.flops  # tiling and caching change bytes, never FLOPs


def test_causal_block_pairs_counted_block_by_block():
    for n, b in ((10, 3), (64, 16), (7, 7), (5, 1), (100, 128)):
        pairs = 0
        for i in range(0, n, b):
            rows = min(b, n - i)
            for j in range(0, n, b):
                if j <= i:  # a block on or below the diagonal is computed whole
                    pairs += rows * min(b, n - j)
        assert tiling.causal_block_pairs(n, b) == pairs
    assert tiling.causal_block_pairs(1000, 1) == 1000 * 1001 / 2  # one-row blocks: the exact triangle


def test_causal_skipping_halves_flash_but_not_explicit():
    n, d, h = 16384, 128, 32
    full = tiling.flash_attention(n, d, h, on_chip=233472, causal=False)
    half = tiling.flash_attention(n, d, h, on_chip=233472)
    exact = rl.attention_flops(n, n, h * d, causal="exact")
    assert half.flops == pytest.approx(full.flops / 2, rel=0.02)
    assert exact <= half.flops <= exact * 1.02  # only the diagonal blocks' upper halves are wasted
    assert tiling.explicit_attention(n, d, h).flops == full.flops  # computes the whole square, masks after


def test_backward_flops_and_what_is_saved():
    n, d, h = 2048, 128, 8
    fwd = tiling.flash_attention(n, d, h, on_chip=233472, causal=False, training=True)
    bwd = tiling.flash_attention(n, d, h, on_chip=233472, causal=False, direction="backward")
    ebwd = tiling.explicit_attention(n, d, h, causal=False, direction="backward")
    assert bwd.flops == pytest.approx(2.5 * fwd.flops)  # the score product again, then four products
    assert ebwd.flops == 8 * h * n * n * d
    assert bwd.flops / ebwd.flops == pytest.approx(10 / 8)
    assert bwd.bytes < ebwd.bytes  # more FLOPs, fewer bytes even when every block streams from HBM
    cached = tiling.flash_attention(n, d, h, on_chip=233472, causal=False, direction="backward", l2=50 * 2**20)
    assert cached.bytes < ebwd.bytes / 5  # and far fewer when a head's queries stay in the L2
    assert fwd.saved_bytes == 2 * h * n * d + 4 * h * n  # O and the fp32 log-sum-exp
    assert tiling.explicit_attention(n, d, h, causal=False).saved_bytes == 2 * h * n * n  # P


# ---------------------------------------------------------------------------------------------
# Against the H200 measurements (the layers record: 32 heads of 128, batch 1, causal)


def _runs():
    return load_layers().attention


def test_flash_peak_memory_is_its_output():
    # tolerance 0.1%: the allocator adds a few hundred bytes of workspace to the output tensor
    for r in _runs():
        f = tiling.flash_attention(r.tokens, r.head_dim, r.heads, on_chip=233472)
        assert f.peak_bytes == pytest.approx(r.flash_peak_extra_bytes, rel=1e-3)


def test_explicit_peak_memory_is_score_tensors_and_the_mask():
    # the measured eager chain held three bf16 score tensors and the one-byte mask at its peak: one
    # integer explains every length within 1% from 2k tokens on; at 1k the allocator kept half a
    # tensor more. A minimal chain (two tensors) stays below every measurement.
    for r in _runs():
        least = tiling.explicit_attention(r.tokens, r.head_dim, r.heads).peak_bytes
        eager = tiling.explicit_attention(r.tokens, r.head_dim, r.heads, live_scores=3).peak_bytes
        if r.explicit_peak_extra_bytes is None:  # out of memory: it needed more than the GPU had left
            assert eager > rl.get_hardware("h200-sxm").usable_capacity
            continue
        assert least < r.explicit_peak_extra_bytes
        if r.tokens >= 2048:
            assert eager == pytest.approx(r.explicit_peak_extra_bytes, rel=0.01)
        else:
            assert eager <= r.explicit_peak_extra_bytes <= 1.2 * eager


def test_predicted_times_are_floors_for_both_variants():
    h200 = rl.get_hardware("h200-sxm")
    for r in _runs():
        flash = tiling.flash_attention(r.tokens, r.head_dim, r.heads, on_chip=h200.shared_memory_per_sm,
                                       l2=h200.l2_bytes)
        assert rl.predict(flash.breakdown, h200, timing="kernel").time <= r.flash_seconds
        if r.explicit_seconds is not None:
            explicit = tiling.explicit_attention(r.tokens, r.head_dim, r.heads)
            assert rl.predict(explicit.breakdown, h200, timing="kernel").time <= r.explicit_seconds


# ---------------------------------------------------------------------------------------------
# Decode and the crossing with the weights


def test_decode_attention_intensity_is_the_group_size():
    for heads, kv in ((32, 8), (64, 8), (32, 32)):
        d = tiling.decode_attention(32768, 128, heads, kv_heads=kv, batch=16)
        assert d.intensity == pytest.approx(heads / kv, rel=0.01)
    one = tiling.decode_attention(32768, 128, 32, kv_heads=8)
    split = tiling.decode_attention(32768, 128, 32, kv_heads=8, splits=16)
    assert split.flops == one.flops and one.bytes < split.bytes < 1.01 * one.bytes


def test_score_parity_tokens_balances_scores_and_weights():
    llama = rl.load_model("llama-3-8b")
    s = tiling.score_parity_tokens(llama)

    def score_bytes(n):
        e = tiling.explicit_attention(n, llama.head_dim, llama.num_heads, kv_heads=llama.num_kv_heads)
        return llama.num_layers * (e.part("scores").bytes - n * n)  # the mask is read once per layer, not per head

    weights = 2 * llama.params
    assert score_bytes(math.floor(s)) <= weights <= score_bytes(math.ceil(s))
    assert tiling.score_parity_tokens(llama, causal=False) > s  # fewer passes without the mask


# ---------------------------------------------------------------------------------------------
# Bad input and the catalog


def test_bad_input_names_the_argument():
    with pytest.raises(ValueError, match="kv_heads"):
        tiling.explicit_attention(128, 64, 6, kv_heads=4)
    with pytest.raises(ValueError, match="direction"):
        tiling.flash_attention(128, 64, 4, on_chip=233472, direction="sideways")
    with pytest.raises(ValueError, match="on_chip"):
        tiling.flash_attention(128, 128, 4, on_chip=100)
    with pytest.raises(ValueError, match="sram"):
        tiling.dao_forward_accesses(128, 64, 32)
    with pytest.raises(ValueError, match="tile_m"):
        tiling.tiled_matmul(64, 64, 64, 0)
    with pytest.raises(TypeError, match="intensity"):
        tiling.tile_for_intensity(64, 64, 64, [1, 2])


def test_hopper_shared_memory_is_in_the_catalog_with_its_source():
    for key in ("h100-sxm", "h200-sxm"):
        h = rl.get_hardware(key)
        assert h.shared_memory_per_sm == 228 * 1024
        assert "tuning" in h.source("shared_memory_per_sm").source.title.lower()


# ---------------------------------------------------------------------------------------------
# Online softmax and the published figures


def test_online_attention_equals_the_softmax_it_never_forms():
    rng = np.random.default_rng(4)
    q, k, v = (rng.standard_normal((37, 8)) * 3 for _ in range(3))
    s = q @ k.T / np.sqrt(8)
    p = np.exp(s - s.max(axis=1, keepdims=True))
    exact = (p / p.sum(axis=1, keepdims=True)) @ v
    for block in (1, 5, 37, 100):
        assert np.allclose(tiling.online_attention(q, k, v, block), exact, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="head_dim"):
        tiling.online_attention(q, k[:, :4], v, 4)


def test_published_fractions_agree_with_the_catalog_peaks():
    # the papers' own utilization figures follow from their FLOP/s and the catalog's dense peaks:
    # FlashAttention-2's 225 TFLOP/s is its "72% model FLOPs utilization"; FlashAttention-3's 740 its "75%"
    rows = {(r.kernel, r.dtype, r.unit): r for r in tiling.PUBLISHED}
    fa2 = rows[("FlashAttention-2", "bf16", "FLOP/s")]
    assert fa2.value / rl.get_hardware(fa2.hardware).peak_flops(fa2.dtype) == pytest.approx(0.72, abs=0.005)
    fa3 = rows[("FlashAttention-3", "fp16", "FLOP/s")]
    assert fa3.value / rl.get_hardware(fa3.hardware).peak_flops(fa3.dtype) == pytest.approx(0.75, abs=0.005)
    bib = (Path(__file__).resolve().parents[3] / "references.bib").read_text()
    for r in tiling.PUBLISHED:
        assert "{" + r.source + "," in bib, f"{r.source} is not in references.bib"


# ---------------------------------------------------------------------------------------------
# The chapter's explorer


def test_attention_explorer_frames_follow_the_sliders():
    from roofline.present import widgets

    ex = widgets.attention_explorer("h100-sxm", seqs=(1024, 65536), head_dims=(256,),
                                    on_chips=(64 * 2**10, 233472))
    assert "4 frames" in repr(ex)
    short, long_small, long_big = ex.text((0, 0, 1)), ex.text((1, 0, 0)), ex.text((1, 0, 1))
    assert "flash is" in short and "faster" in short
    # a 64k sequence with heads of 256: too little on chip and flash moves more than the explicit chain
    assert "slower" in long_small and "faster" in long_big
    assert "does not fit on the H100 SXM" in long_big  # the explicit chain's score tensors
    assert ex.png((1, 0, 0)) != ex.png((1, 0, 1))  # the flash point moves with the on-chip memory
    with pytest.raises(ValueError, match="shared memory per SM"):
        widgets.attention_explorer("a100-sxm-80gb")


# ---- chapter 4's quoted figures, moved out of the notebook --------------------------------------------------

def test_sizes_by_hand():
    assert tiling.tile_bytes(128) == 3 * 128 * 128 * 2  # A, B and C tiles in bf16: 96 KiB
    assert tiling.score_bytes(16384, 32) == 32 * 16384**2 * 2  # 16 GiB of scores, one tensor
    assert tiling.score_bytes(1024, 2, batch=3, dtype="fp32") == 3 * 2 * 1024**2 * 4
    assert tiling.kv_head_bytes(16384, 128) == 8 * 2**20  # K and V of one head: 8 MiB
    assert tiling.on_chip_elements(228 * 2**10) == 116_736  # an H100 SM's 228 KiB in bf16
    assert tiling.dao_factor(128, 228 * 2**10) == pytest.approx(128**2 / 116_736)
    assert tiling.dao_crossover_on_chip(256) == pytest.approx(2 / 3 * 256**2 * 2)
    assert tiling.flash_on_chip_bytes(8192, 128) == 8 * 2**20
    assert tiling.flash_block(tiling.flash_on_chip_bytes(8192, 128), 128) == 8192  # the inverse of flash_block
    assert tiling.query_blocks(16384, 228) == 72  # ceil(71.9)
    assert tiling.decode_work_items(8, splits=16) == 128
    assert tiling.params_per_head_layer("llama-3-8b") == pytest.approx(8_030_261_248 / (32 * 32))
    with pytest.raises(ValueError, match="tile"):
        tiling.tile_bytes(-1)
    with pytest.raises(ValueError, match="seq"):
        tiling.score_bytes(0.5, 32)
    with pytest.raises(ValueError, match="splits"):
        tiling.decode_work_items(8, splits=0)


def test_causal_block_excess_by_hand():
    # 4 tokens in blocks of 2: 2 x 2 pairs below the diagonal block row, then 2 rows x 4 keys = 12 of 10
    assert tiling.causal_block_excess(4, 2) == pytest.approx(12 / 10 - 1)
    assert tiling.causal_block_excess(4, 1) == 0  # blocks of one row: the exact triangle
    with pytest.raises(ValueError, match="block"):
        tiling.causal_block_excess(4, 0)


def test_reference_attention_and_agreement_digits():
    q = np.zeros((3, 4))
    v = np.arange(12.0).reshape(3, 4)
    # equal scores everywhere: every row is the mean of V's rows
    assert np.allclose(tiling.reference_attention(q, q, v), v.mean(axis=0))
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((64, 16)) for _ in range(3))
    assert tiling.agreement_digits(tiling.online_attention(q, k, v, 8), tiling.reference_attention(q, k, v)) > 12
    assert tiling.agreement_digits([1.001], [1.0]) == pytest.approx(3)
    with pytest.raises(ValueError, match="one shape"):
        tiling.agreement_digits([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="2-d arrays"):
        tiling.reference_attention(q[0], k, v)


def test_attention_pass_sweep_and_measured_rates():
    h200 = rl.get_hardware("h200-sxm")
    f = tiling.attention_pass("flash", 4096, 128, 32, h200)
    assert f.bytes == tiling.flash_attention(4096, 128, 32, on_chip=h200.shared_memory_per_sm, l2=h200.l2_bytes).bytes
    e = tiling.attention_pass("explicit", 4096, 128, 32, h200)
    assert e.peak_bytes == 3 * tiling.score_bytes(4096, 32) + 4096**2  # three live score tensors and the mask
    sweep = tiling.attention_sweep([1024, 4096], 128, 32, h200)
    assert sweep["flash"]["bytes"][1] == f.bytes and len(sweep["explicit"]["time"]) == 2
    assert sweep["explicit"]["time"][1] == rl.predict(e.breakdown, h200, timing="kernel").time
    assert tiling.measured_flops_per_s(f, 2.0) == f.flops / 2
    with pytest.raises(ValueError, match="kind must be 'flash' or 'explicit'"):
        tiling.attention_pass("fused", 4096, 128, 32, h200)
    with pytest.raises(TypeError, match="io must be an AttentionIO"):
        tiling.measured_flops_per_s(3.0, 1.0)


def test_score_passes_counted_and_implied():
    causal = tiling.explicit_attention(4096, 128, 32)
    # write S; mask reads and writes it; softmax reads and writes; pv reads P: six passes
    assert tiling.score_passes(causal, 4096, 32) == pytest.approx(6)
    assert tiling.score_passes(tiling.explicit_attention(4096, 128, 32, causal=False), 4096, 32) == pytest.approx(4)
    assert tiling.implied_score_passes(1.0, 1e12, 4096, 32) == pytest.approx(1e12 / (32 * 4096**2 * 2))
    with pytest.raises(ValueError, match="seconds"):
        tiling.implied_score_passes(0, 1e12, 4096, 32)


def test_smallest_winning_on_chip_sits_next_to_the_formula():
    m = tiling.smallest_winning_on_chip(65536, 256, 32, kv_heads=8)
    explicit = tiling.explicit_attention(65536, 256, 32, kv_heads=8).bytes
    assert tiling.flash_attention(65536, 256, 32, kv_heads=8, on_chip=m).bytes < explicit
    assert tiling.flash_attention(65536, 256, 32, kv_heads=8, on_chip=m - 1024).bytes >= explicit
    assert abs(m - tiling.dao_crossover_on_chip(256)) < 2 * 1024  # the closed form, within a step or two
    assert tiling.smallest_winning_on_chip(65536, 256, 32, kv_heads=8, sizes=[8192]) is None


def test_decode_attention_share_by_hand():
    h200 = rl.get_hardware("h200-sxm")
    l70 = rl.load_model("llama-3-70b")
    r = tiling.decode_attention_share(l70, h200, 32768, 8)
    assert r.weights_time == pytest.approx(2 * l70.params / h200.hbm_bandwidth)
    one = tiling.decode_attention(32768, 128, 64, kv_heads=8)
    per_seq = 80 * rl.predict(one.breakdown, h200, timing="kernel").time
    assert r.share == pytest.approx(r.attention_time / r.weights_time)
    assert r.crossover_batch == math.ceil(r.weights_time / per_seq)
    assert r.crossover_batch * per_seq >= r.weights_time > (r.crossover_batch - 1) * per_seq
    with pytest.raises(ValueError, match="batch"):
        tiling.decode_attention_share(l70, h200, 32768, 0)
def test_flash_reads_keys_and_values_once_per_kv_head_when_one_heads_fit_in_the_l2():
    """4,096 tokens, head size 128, 32 query heads sharing 8 KV heads, bf16, no mask: with a 50 MB L2 one
    KV head's keys and values (2 MiB) stay on chip for the query heads of its group, so the forward pass
    reads Q (32 x 4,096 x 128 x 2 B = 33.6 MB) and K and V once per KV head (8.39 MB each): 50.3 MB.
    Without the L2 each query head streams them once per block of queries, whatever the grouping."""
    io = tiling.flash_attention(4096, 128, 32, on_chip=228 * 1024, kv_heads=8, causal=False, l2=50e6)
    (op,) = io.ops
    assert sum(op.split[1].values()) == 32 * 4096 * 128 * 2 + 2 * 8 * 4096 * 128 * 2
    grouped = tiling.flash_attention(4096, 128, 32, on_chip=228 * 1024, kv_heads=8, causal=False)
    ungrouped = tiling.flash_attention(4096, 128, 32, on_chip=228 * 1024, kv_heads=32, causal=False)
    assert grouped.ops[0].bytes == ungrouped.ops[0].bytes  # per query head: GQA saves no stream without the cache


@pytest.mark.parametrize("call, error, message", [
    (lambda: tiling.attention_sweep([0], 128, 32, "h200-sxm"), ValueError, "seq must be a whole number"),
    (lambda: tiling.params_per_head_layer("llama-3-9b"), KeyError, "unknown model"),
    (lambda: tiling.kv_head_bytes(16, 0), ValueError, "head_dim must be a whole number"),
    (lambda: tiling.on_chip_elements(0), ValueError, "on_chip must be"),
    (lambda: tiling.dao_factor(0, 1024), ValueError, "head_dim must be a whole number"),
    (lambda: tiling.dao_crossover_on_chip(1.5), ValueError, "head_dim must be a whole number"),
    (lambda: tiling.flash_on_chip_bytes(0, 128), ValueError, "rows must be a whole number"),
    (lambda: tiling.query_blocks(16, 0), ValueError, "block must be a whole number"),
    (lambda: tiling.smallest_winning_on_chip(0, 128, 32), ValueError, "seq must be a whole number"),
    (lambda: tiling.score_passes(3.0, 16, 2), TypeError, "io must be an AttentionIO"),
    (lambda: tiling.implied_score_passes(1.0, 1e12, 16, 0), ValueError, "heads must be a whole number"),
])
def test_chapter_4_helpers_refuse_bad_input(call, error, message):
    with pytest.raises(error, match=message):
        call()
