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


# --- the engines' custom all-reduce (chapter 13) ----------------------------------------------------------------

from roofline.core.cluster_roof import CUSTOM_ALL_REDUCE_MAX_BYTES, ENGINE_ALLREDUCE  # noqa: E402
from roofline.core.calibration import get_roof as _get_roof  # noqa: E402


@pytest.mark.parametrize("chip", ["h100-sxm", "h200-sxm", "h800-sxm"])
def test_a_custom_all_reduce_is_never_slower_than_the_ring_on_small_buffers_nor_faster_than_the_link(chip):
    roof = _get_roof(chip, "calibrated", "fp8")
    link = roof.hardware.link("scale_up").each_way
    for n in (2, 4, 8):
        for size in (1024, 8192, 16384, 65536, 262144, 1 << 20, 4 << 20, CUSTOM_ALL_REDUCE_MAX_BYTES):
            custom = roof.all_reduce_time(n, size, kind="custom")
            ring = roof.all_reduce_time(n, size, kind="nccl")
            assert custom >= size * 2 * (n - 1) / n / link
            if size <= 1 << 20:
                assert custom < ring


def test_the_custom_all_reduce_reads_its_records_by_hand():
    """SGLang's table (pull request #2904) at TP 8: 5.9 us for 512 float32 (2 KiB), 5.7 us at 16 KiB (a larger
    buffer is never faster: the curve holds 5.9 there), 7.8 us at 128 KiB; halfway in log size between 16 and
    128 KiB (the geometric mean of the sizes) the time is the geometric mean of 5.9 and 7.8; below 2 KiB it is
    held at 5.9 us."""
    roof = _get_roof("h100-sxm", "calibrated", "fp8")
    assert roof.custom_all_reduce_time(8, 16384) == pytest.approx(5.9e-6)
    assert roof.custom_all_reduce_time(8, 131072) == pytest.approx(7.8e-6)
    assert roof.custom_all_reduce_time(8, (16384 * 131072) ** 0.5) == pytest.approx((5.9e-6 * 7.8e-6) ** 0.5)
    assert roof.custom_all_reduce_time(8, 512) == pytest.approx(5.9e-6)
    # a group of 6 takes the times of the group of 8, the nearest measured at or above it
    assert roof.custom_all_reduce_time(6, 16384) == roof.custom_all_reduce_time(8, 16384)
    # past the largest buffer measured (4 MiB) it grows at that buffer's rate: 8 MiB takes twice 4 MiB's 33.8 us
    assert roof.custom_all_reduce_time(8, 8 << 20) == pytest.approx(2 * 33.8e-6)


def test_nccl_takes_over_past_the_buffer_across_nodes_and_on_the_datasheet():
    cal, ds = _get_roof("h100-sxm", "calibrated", "fp8"), _get_roof("h100-sxm", "datasheet", "fp8")
    big = CUSTOM_ALL_REDUCE_MAX_BYTES + 1
    assert cal.all_reduce_time(8, big, kind="custom") == cal.collective_time("all_reduce", 8, big)
    assert cal.all_reduce_time(16, 16384, per_node=8, kind="custom") == cal.collective_time("all_reduce", 16, 16384,
                                                                                          per_node=8)
    assert ds.all_reduce_time(8, 16384, kind="custom") == ds.collective_time("all_reduce", 8, 16384)
    assert cal.all_reduce_time(1, 16384, kind="custom") == 0.0
    assert ENGINE_ALLREDUCE == "custom"
    a100 = _get_roof("a100-sxm-80gb", "calibrated")  # no custom kernel measured there: NCCL's sweep
    assert not a100.custom_all_reduce_applies(8, 16384)
    with pytest.raises(KeyError, match="allreduce"):
        cal.all_reduce_time(8, 16384, kind="mpi")
    with pytest.raises(ValueError, match="no custom all-reduce"):
        a100.custom_all_reduce_time(8, 16384)
