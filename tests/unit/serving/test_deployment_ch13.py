"""The helpers chapter 13 appends to roofline.serving.deployment: interference, the disaggregated splits, the
prefix sweep and its savings, one tensor-parallel all-reduce, the slice counted by hand."""

import math

import pytest

import roofline as rl
from roofline.parallel.tensor_parallel import weights_per_gpu
from roofline.core.calibration import get_roof
from roofline.serving import deployment as D

H100 = rl.get_hardware("h100-sxm")
FP8 = dict(weights_dtype="fp8", kv_dtype="fp8", math_dtype="fp8")
W = D.Workload(2048, 256)


@pytest.fixture(scope="module")
def cal():
    return get_roof(H100, "calibrated", "fp8")


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


def test_a_wide_head_weighs_two_bytes_a_parameter_and_runs_at_its_own_peak(cal):
    """ModelOpt's FP8 leaves the output head and the embedding table in bf16 (and the norms, which are no
    linear layers): Llama 3.1 8B's two 128,256 x 4,096 tables take 1,050,673,152 bytes each at TP 1, not half
    that, and the head's matmul is timed as a bf16 one on the fp8 roof (twice the FLOPs' time at the same rate)."""
    m = rl.load_model("llama-3.1-8b")
    narrow, wide = D.Deployment(**FP8), D.Deployment(**FP8, head_dtype="bf16")
    assert wide.head == "bf16" and narrow.head == "fp8"
    held = {d: weights_per_gpu(m, tp=d.tp, weights_dtype=d.weights_dtype, head_dtype=d.head) for d in (wide, narrow)}
    assert held[wide] - held[narrow] == pytest.approx(m.embedding_params + m.lm_head_params + m.norm_params)
    assert m.embedding_params + m.lm_head_params == 2 * 128256 * 4096
    a = D.step_time(m, narrow, cal, decode=2048, context=1024)
    b = D.step_time(m, wide, cal, decode=2048, context=1024)
    assert b.parts["output head"] > a.parts["output head"]
    assert b.parts["matmuls"] == a.parts["matmuls"] and b.flops == a.flops  # the FLOPs themselves are the same
    # under the datasheet roof the head's FLOPs go at the bf16 peak, the rest at the fp8 peak
    sheet = get_roof(H100, "datasheet", "fp8")
    head_flops = 2 * 2048 * 128256 * 4096
    sa, sb = (D.step_time(m, d, sheet, decode=2048, context=1024) for d in (narrow, wide))
    assert sb.flops == sa.flops
    assert sb.parts["compute"] - sa.parts["compute"] == pytest.approx(
        head_flops / H100.peak_flops("bf16") - head_flops / H100.peak_flops("fp8"))
    from roofline.core.checks import UnknownNameError

    with pytest.raises(UnknownNameError, match="unknown dtype 'fp9'; did you mean 'fp4' or 'fp8'"):
        D.Deployment(**FP8, head_dtype="fp9")


def test_a_mixture_of_experts_pays_its_dispatch_and_combine_in_bytes(cal):
    """Mixtral 8x7B routes each token to 2 experts: 2 (1 + 2) x 4,096 numbers of 2 bytes, 49,152 bytes a token
    and MoE layer; a dense model pays none."""
    assert D.moe_dispatch_bytes("mixtral-8x7b") == 4 * (1 + 2) * 4096 == 49152
    assert D.moe_dispatch_bytes("llama-3.1-8b") == 0.0
    m = rl.load_model("mixtral-8x7b")
    d = D.Deployment(tp=2, **FP8)
    step = D.step_time(m, d, cal, decode=256, context=1024)
    per_layer = step.bytes / m.num_layers
    assert per_layer > 256 * D.moe_dispatch_bytes(m)
