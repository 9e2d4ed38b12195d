"""roofline.core.cluster_roof: joining a matmul's two times, and the roof kinds."""

from __future__ import annotations

import pytest
from roofline.core.cluster_roof import datasheet_cluster_roof


def test_joined_time_is_the_larger_far_apart_and_two_to_the_one_over_nu_at_the_ridge():
    from roofline.core.cluster_roof import joined_time

    assert joined_time(10.0, 10.0, 2.0) == pytest.approx(10.0 * 2 ** 0.5)
    assert joined_time(1.0, 1e-9, 2.95) == pytest.approx(1.0)
    assert joined_time(3.0, 4.0, 2.0) == pytest.approx(5.0)  # a 3-4-5 triangle: nu = 2 is the Euclidean norm
    assert joined_time(0.0, 0.0, 3.0) == 0.0
    # never below the larger time, never above the sum, and higher nu comes closer to the larger
    for a, b in ((1.0, 0.5), (2.0, 2.0), (0.3, 7.0)):
        lo, hi = joined_time(a, b, 8.0), joined_time(a, b, 1.5)
        assert max(a, b) <= lo <= hi <= a + b


def test_a_roof_without_nu_keeps_the_larger_time_and_nu_below_one_is_refused():
    from dataclasses import replace

    sheet = datasheet_cluster_roof("h100-sxm", "fp8")
    flops, nbytes = 2 * 128 * 8192 * 8192, 8192 * 8192
    assert sheet.gemm_nu is None
    assert sheet.gemm_time(flops, nbytes) == pytest.approx(max(flops / sheet.peak_flops, nbytes / sheet.bandwidth))
    joined = replace(sheet, gemm_nu=2.0)
    assert joined.gemm_time(flops, nbytes) > sheet.gemm_time(flops, nbytes)
    with pytest.raises(ValueError, match="gemm_nu"):
        replace(sheet, gemm_nu=0.5)
