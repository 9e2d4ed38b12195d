"""The roofline itself, and the laws it must obey for any input."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import roofline as rl
from roofline import Cost, Roof

positive = st.floats(1e-3, 1e18, allow_nan=False, allow_infinity=False)
roofs = st.builds(lambda f, b: Roof("r", f, b), st.floats(1e9, 1e16), st.floats(1e9, 1e13))


@given(flops=positive, nbytes=positive, roof=roofs)
def test_time_is_never_below_either_roof(flops, nbytes, roof):
    p = rl.predict(Cost(flops, nbytes), roof)
    assert p.time >= flops / roof.peak_flops * (1 - 1e-12)
    assert p.time >= nbytes / roof.bandwidth * (1 - 1e-12)
    assert 0 < p.utilization <= 1 + 1e-12
    assert rl.predict(Cost(flops, nbytes), roof, overlap="none").time >= p.time


@given(flops=positive, nbytes=positive, roof=roofs, factor=st.floats(1.0, 100.0))
def test_more_bandwidth_is_never_slower(flops, nbytes, roof, factor):
    faster = roof.with_(bandwidth=roof.bandwidth * factor)
    assert rl.predict(Cost(flops, nbytes), faster).time <= rl.predict(Cost(flops, nbytes), roof).time


@given(intensity=st.floats(0, 1e6), roof=roofs)
def test_attainable_never_exceeds_peak_nor_the_memory_slope(intensity, roof):
    a = rl.attainable_flops(intensity, roof)
    assert a <= roof.peak_flops and a <= roof.bandwidth * intensity * (1 + 1e-12)


def test_bound_flips_at_the_ridge(h100):
    r = h100.ridge_point()
    below, above = Cost(r * 0.99, 1.0), Cost(r * 1.01, 1.0)
    assert rl.predict(below, h100).bound == "memory" and rl.predict(above, h100).bound == "compute"
    sweep = rl.predict(Cost(np.array([1.0, 1000.0]), np.array([1.0, 1.0])), h100)
    assert list(sweep.bound) == ["memory", "compute"]


def test_predict_accepts_names_breakdowns_and_rejects_bad_options(llama):
    step = rl.decode_step(llama)
    assert rl.predict(step, "h100-sxm").time == rl.predict(step.total, rl.get_hardware("h100")).time
    with pytest.raises(ValueError, match="overlap must be"):
        rl.predict(step, "h100-sxm", overlap="some")
    with pytest.raises(TypeError, match="cost must be a Cost"):
        rl.predict(42, "h100-sxm")
    with pytest.raises(KeyError, match="did you mean"):
        rl.predict(step, "h1000")


# --- formulas a reader can check by hand ----------------------------------------------------


def test_one_decode_step_on_an_h100_by_hand(llama):
    # 16.06 GFLOP over 16.06 GB (2 bytes and 2 FLOPs per parameter) on 989.4 TFLOP/s and 3.35 TB/s
    peak, bw = 989.4e12, 3.35e12
    flops = nbytes = 2 * llama.params
    p = rl.predict(rl.decode_step(llama), "h100-sxm")
    assert p.compute_time == pytest.approx(flops / peak)  # 16.2 us
    assert p.memory_time == pytest.approx(nbytes / bw)  # 4.79 ms
    assert p.time == pytest.approx(max(flops / peak, nbytes / bw))
    assert p.utilization == pytest.approx((flops / peak) / (nbytes / bw))  # 0.34%
    assert p.achieved_flops == pytest.approx(flops / (nbytes / bw))  # bandwidth x intensity
    assert p.shortfall == pytest.approx((peak / bw) / 1.0)  # ridge over intensity 1
    assert p.bound == "memory"


@given(flops=st.floats(1.0, 1e18), nbytes=st.floats(1.0, 1e15), roof=roofs)
def test_no_overlap_adds_the_two_times_and_perfect_overlap_takes_the_larger(flops, nbytes, roof):
    compute, memory = flops / roof.peak_flops, nbytes / roof.bandwidth
    none = rl.predict(Cost(flops, nbytes), roof, overlap="none")
    perfect = rl.predict(Cost(flops, nbytes), roof)
    assert none.time == pytest.approx(compute + memory, rel=1e-12)
    assert perfect.time == pytest.approx(max(compute, memory), rel=1e-12)
    assert perfect.achieved_flops == pytest.approx(rl.attainable_flops(flops / nbytes, roof), rel=1e-9)
    assert none.utilization == pytest.approx(compute / (compute + memory), rel=1e-12)


def test_attainable_flops_is_the_lower_of_the_two_roofs(h100):
    peak, bw = 989.4e12, 3.35e12
    assert rl.attainable_flops(1, h100) == pytest.approx(bw)  # matrix-vector: bandwidth x 1
    assert rl.attainable_flops(100, h100) == pytest.approx(100 * bw)
    assert rl.attainable_flops(1365, h100) == pytest.approx(peak)  # a 4096^3 matmul is past the ridge
    assert rl.ridge_point(h100) == pytest.approx(peak / bw)
    assert rl.attainable_flops(2, h100, dtype="fp8") == pytest.approx(2 * bw)
