"""Costs and the operations they come from."""

import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import roofline as rl
from roofline import Breakdown, Cost


def test_square_matmul_intensity_is_n_over_3():
    assert rl.matmul(4096, 4096, 4096).intensity == pytest.approx(4096 / 3)
    assert rl.matmul(4096, 4096, 4096).intensity == pytest.approx(1365.33, abs=0.01)


@given(n=st.integers(1, 1 << 20), k=st.integers(1, 1 << 20))
def test_matvec_intensity_never_exceeds_one_in_bf16(n, k):
    assert rl.matmul(1, n, k).intensity < 1 + 1e-12


def test_matvec_intensity_tends_to_one():
    sizes = 2.0 ** np.arange(4, 24)
    i = rl.matmul(1, sizes, sizes).intensity
    assert np.all(np.diff(i) > 0) and abs(i[-1] - 1) < 1e-6


def test_matmul_vectorizes_like_a_loop():
    m = np.array([1, 16, 256])
    swept = rl.matmul(m, 4096, 8192)
    for j, mm in enumerate(m):
        one = rl.matmul(int(mm), 4096, 8192)
        assert swept.flops[j] == one.flops and swept.bytes[j] == one.bytes


def test_costs_add_and_scale():
    a, b = Cost(10, 4), Cost(6, 4)
    assert (a + b) == Cost(16, 8) and (a + b).intensity == 2
    assert sum([a, b]) == a + b
    assert 3 * a == Cost(30, 12)
    assert Cost(5, 0).intensity == np.inf and Cost(0, 0).intensity == 0
    with pytest.raises(ValueError, match="flops must be"):
        Cost(-1, 2)
    with pytest.raises(ValueError, match="bytes must be"):
        Cost(1, float("nan"))


def test_breakdown_total_and_share():
    b = Breakdown("w", {"weights": Cost(90, 10), "attention": Cost(10, 0)})
    assert b.total == Cost(100, 10) and b.share("attention") == pytest.approx(0.1)
    with pytest.raises(KeyError, match="did you mean 'weights'"):
        b["weight"]
    with pytest.raises(ValueError, match="of must be"):
        b.share("weights", of="seconds")


def test_attention_flops_accountings():
    full = rl.attention_flops(2048, 2048, 4096, 32)
    assert rl.attention_flops(2048, 2048, 4096, 32, causal="half") == full / 2
    assert rl.attention_flops(2048, 2048, 4096, 32, causal=True) == full / 2
    exact = rl.attention_flops(2048, 2048, 4096, 32, causal="exact")
    assert exact == pytest.approx(full / 2 * (2049 / 2048))
    with pytest.raises(ValueError, match="causal must be"):
        rl.attention_flops(8, 8, 8, causal="triangle")
    with pytest.raises(ValueError, match="width must be"):
        rl.attention_flops(8, 8, 0)


def test_exact_causal_counts_the_last_rows_of_the_triangle():
    # one query at the end of 4096 keys sees all 4096 of them: never more than the full square
    assert rl.attention_flops(1, 4096, 1, causal="exact") == 4 * 4096
    assert rl.attention_flops(1, 4096, 1, causal="exact") <= rl.attention_flops(1, 4096, 1)
    # 3 queries after 2 cached tokens: rows of 3, 4 and 5 keys
    assert rl.attention_flops(3, 5, 1, causal="exact") == 4 * (3 + 4 + 5)
    # the rows add up: a prefill of 6 then 3 more queries is the triangle of 9
    assert (rl.attention_flops(6, 6, 1, causal="exact") + rl.attention_flops(3, 9, 1, causal="exact")
            == rl.attention_flops(9, 9, 1, causal="exact"))
    with pytest.raises(ValueError, match="queries must not exceed keys"):
        rl.attention_flops(10, 4, 1, causal="exact")


@pytest.mark.parametrize("call, names", [
    (lambda: rl.matmul([1, 2, 3], [4, 5], 8), "m of shape (3,), n of shape (2,)"),
    (lambda: rl.attention_flops([1, 2], [3, 4, 5], 8), "queries of shape (2,), keys of shape (3,)"),
    (lambda: rl.kv_cache_bytes([1, 2], 10, [1, 2, 3]), "tokens of shape (2,), sequences of shape (3,)"),
])
def test_broadcast_mismatches_name_the_arguments(call, names):
    with pytest.raises(ValueError, match=re.escape(names) + " do not broadcast together"):
        call()
def test_share_of_bytes_is_the_parts_bytes_over_the_total(llama):
    # decode at 2,048 tokens of context: 268 MB of KV cache beside 16.06 GB of weights
    step = rl.decode_step(llama, 1, 2048)
    kv, weights = 2048 * 131_072, 2 * llama.params
    assert step.share("kv_cache", of="bytes") == pytest.approx(kv / (weights + kv))
    assert step.share("attention") == pytest.approx(4 * 2048 * 4096 * 32 / (2 * llama.params + 4 * 2048 * 4096 * 32))


def test_matmul_bytes_are_each_operand_once_at_its_width():
    # (m x k) @ (k x n): read A and B, write C; 2 bytes each in bf16, 1 in fp8, 4 in fp32
    for dtype, size in [("bf16", 2), ("fp8", 1), ("fp32", 4)]:
        c = rl.matmul(8, 4096, 14336, dtype)
        assert c.flops == 2 * 8 * 4096 * 14336
        assert c.bytes == size * (8 * 14336 + 14336 * 4096 + 8 * 4096)


def test_kv_cache_bytes_are_tokens_x_sequences_x_bytes_per_token():
    assert rl.kv_cache_bytes(2048, 131_072, 4) == 2048 * 4 * 131_072


# ---- ratio and difference: plain comparisons of two results ------------------------------------------------

def test_ratio_and_difference_of_numbers_and_of_results():
    import roofline as rl

    h100, a100 = rl.get_hardware("h100-sxm"), rl.get_hardware("a100-sxm-80gb")
    assert rl.ratio(h100, a100, "peak_flops") == pytest.approx(989.4 / 312)  # dense bf16 TFLOP/s, datasheets
    assert rl.ratio(h100, a100, "hbm_bandwidth") == pytest.approx(3.35 / 2.039)
    assert rl.ratio(6, 4) == 1.5 and rl.difference(6, 4) == 2
    assert rl.difference(h100, a100, "hbm_capacity") == pytest.approx(0)
    with pytest.raises(ZeroDivisionError, match="b is zero"):
        rl.ratio(1, 0)
    with pytest.raises(AttributeError, match="no attribute 'speed'"):
        rl.ratio(h100, a100, "speed")
    with pytest.raises(TypeError, match="what must be the name"):
        rl.ratio(h100, a100, 3)
    with pytest.raises(TypeError, match="a must be a number"):
        rl.ratio("fast", 2)


def test_gain_is_ratio_less_one():
    import roofline as rl

    assert rl.gain(3, 2) == 0.5 and rl.gain(2, 2) == 0
    with pytest.raises(ZeroDivisionError):
        rl.gain(3, 0)


def test_nearest_picks_the_measured_value_closest_to_a_target():
    import roofline as rl

    assert rl.nearest([512, 2048, 8192, 32768], 6000) == 8192  # |8192 - 6000| < |2048 - 6000|
    assert rl.nearest({512: "a", 2048: "b"}, 1280) == 512  # a tie goes to the first
    with pytest.raises(ValueError, match="values must hold at least one number"):
        rl.nearest([], 3)
