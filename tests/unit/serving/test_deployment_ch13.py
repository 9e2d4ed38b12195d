"""The helpers chapter 13 appends to roofline.serving.deployment: interference, the disaggregated splits, the
prefix sweep and its savings, one tensor-parallel all-reduce, the slice counted by hand."""

import math

import pytest

import roofline as rl
from roofline.measured.serving import serving_roof
from roofline.serving import deployment as D

H100 = rl.get_hardware("h100-sxm")
FP8 = dict(weights_dtype="fp8", kv_dtype="fp8", math_dtype="fp8")
W = D.Workload(2048, 256)


@pytest.fixture(scope="module")
def cal():
    return serving_roof(H100, "calibrated", "fp8")


def test_published_serving_figures_carry_their_source():
    for value, source in D.PUBLISHED_SERVING.values():
        assert value > 0 and "SGLang" in source
    assert D.PUBLISHED_SERVING["sglang_gpus"][0] == 8 * D.PUBLISHED_SERVING["sglang_nodes"][0]


def test_interference_grows_with_the_prompt_tokens_in_the_step(cal):
    d = D.Deployment(tp=2, **FP8)
    small, big = (D.interference("llama-3.1-70b", W, d, cal, b) for b in (4, 128))
    assert small.prompt_tokens == pytest.approx(4 * 2048 / 256)
    assert 1.0 <= small.inflation < big.inflation
    assert big.inflation == pytest.approx(big.mixed.seconds / big.pure.seconds)
    # no prompt to compute (all of it cached but the last token's worth): the steps nearly agree
    cached = D.interference("llama-3.1-70b", D.Workload(2048, 256, prefix_hit=0.999), d, cal, 32)
    assert cached.inflation < D.interference("llama-3.1-70b", W, d, cal, 32).inflation


def test_splits_cover_every_whole_replica_split_and_the_best_is_the_fastest(cal):
    d = D.Deployment(tp=2, **FP8)
    splits = D.disaggregated_splits("llama-3.1-70b", H100, W, d, cal, 8)
    assert [s.deployment.disaggregate for s in splits] == [(2, 6), (4, 4), (6, 2)]
    best = D.best_split(splits)
    assert best.output_tokens_per_s == max(s.output_tokens_per_s for s in splits)
    with pytest.raises(ValueError, match="cannot hold"):
        D.disaggregated_splits("llama-3.1-70b", H100, W, d, cal, 2)
    with pytest.raises(ValueError, match="no splits"):
        D.best_split(())


def test_a_prefix_cache_raises_offline_throughput_and_saves_flops_and_memory(cal):
    d = D.Deployment(tp=2, **FP8)
    rows = D.prefix_sweep("llama-3.1-70b", H100, W, d, cal, [0.0, 0.5, 0.9])
    assert [r.workload.prefix_hit for r in rows] == [0.0, 0.5, 0.9]
    assert rows[0].output_tokens_per_s < rows[1].output_tokens_per_s < rows[2].output_tokens_per_s
    s = D.prefix_savings("llama-3.1-70b", H100, D.Workload(2048, 256, prefix_hit=0.5), d, cal)
    assert s.flops_cached < s.flops_full and s.kv_cached < s.kv_full and s.shared > 0
    assert s.shared + s.kv_cached == pytest.approx(s.kv_full)  # the prefix moved out of every sequence, kept once
    none = D.prefix_savings("llama-3.1-70b", H100, W, d, cal)
    assert none.flops_full == none.flops_cached and none.shared == 0


def test_a_small_all_reduce_is_latency_bound(cal):
    one, big = D.tp_exchange("llama-3.1-70b", cal, 8, 1), D.tp_exchange("llama-3.1-70b", cal, 8, 1024)
    assert one.message == 8192 * 2.0
    assert one.per_step == 2 * rl.load_model("llama-3.1-70b").num_layers
    assert one.per_step * one.seconds == pytest.approx(
        D.step_time("llama-3.1-70b", D.Deployment(tp=8, **FP8), cal, decode=1, context=2048).parts["tensor-parallel"])
    assert one.bus_bandwidth < big.bus_bandwidth and one.share_of_best < 0.05
    assert big.seconds / one.seconds < big.message / one.message  # far from proportional to the bytes
    solo = D.tp_exchange("llama-3.1-70b", cal, 1, 1)
    assert solo.seconds == 0 and math.isinf(solo.bus_bandwidth) and solo.per_step == 0


def test_slice_by_hand_takes_the_larger_of_the_two_counts():
    s = D.slice_by_hand("llama-3.1-70b", H100, W, 64, 0.03, weights_dtype="fp8")
    assert s.total == pytest.approx(s.weights + s.kv)
    assert s.by_memory == pytest.approx(s.total / H100.usable_capacity)
    assert s.by_bandwidth == pytest.approx(s.total / (H100.hbm_bandwidth * 0.03))
    assert s.gpus >= max(s.by_memory, s.by_bandwidth) and s.gpus / 2 < max(s.by_memory, s.by_bandwidth)
    tight = D.slice_by_hand("llama-3.1-70b", H100, W, 64, 0.003, weights_dtype="fp8")
    assert tight.gpus > s.gpus and tight.by_bandwidth > tight.by_memory
