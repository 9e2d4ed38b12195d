"""Chapters 1 and 3: a link's ridge."""

import pytest

import roofline as rl


def test_link_ridge_by_hand():
    h100 = rl.get_hardware("h100-sxm")
    # 989.4 TFLOP/s dense bf16 over PCIe Gen5's 64 GB/s each way
    assert rl.link_ridge(h100, "host") == pytest.approx(989.4e12 / 64e9)
    assert rl.link_ridge(h100, "host", achieved=0.4) == pytest.approx(0.4 * 989.4e12 / 64e9)
    assert rl.link_ridge("h100-sxm", "scale_up") == pytest.approx(989.4e12 / h100.interconnect["scale_up"].each_way)
    with pytest.raises(ValueError, match="link must be one of"):
        rl.link_ridge(h100, "pcie")
    with pytest.raises(ValueError, match="achieved"):
        rl.link_ridge(h100, "host", achieved=0)


def test_a_cluster_is_checked_as_a_whole_and_each_count_by_name():
    from roofline.core.network import MAX_GPUS, cluster

    assert cluster(2048, 8) == (2048, 8)
    with pytest.raises(ValueError, match="nodes x gpus_per_node must be at most"):
        cluster(MAX_GPUS // 4, 8)
    with pytest.raises(ValueError, match="gpus_per_node"):
        cluster(1, 100_000)
