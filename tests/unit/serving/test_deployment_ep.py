"""Expert-parallel decode at DeepSeek's scale (roofline.serving.deployment, chapter 13): redundant experts,
DeepEP's low-latency all-to-alls, the two-batch overlap, the grouped matmul labelled by what binds, and the
published figures it is held against."""

import pytest

from roofline.core.calibration import get_roof
from roofline.core.hardware import get_hardware
from roofline.core.model import load_model
from roofline.measured.serving import EP_DECODE_RUNS, ep_decode_checks
from roofline.serving.deployment import Deployment, Workload, largest_batch, step_time

V3F = dict(weights_dtype="fp8", math_dtype="fp8", kv_dtype="bf16")
H800 = get_hardware("h800-sxm")


def test_redundant_experts_let_ep_divide_the_copies_and_cost_their_weights():
    with pytest.raises(ValueError, match="ep 72 must divide deepseek-v3's 256 experts"):
        step_time("deepseek-v3", Deployment(tp=1, dp_attention=72, ep=72, **V3F), get_roof("h100-sxm", "calibrated", "fp8"),
                  decode=72, context=10)
    d = Deployment(tp=1, dp_attention=72, ep=72, redundant_experts=32, **V3F)
    assert d.label() == "TP 1 x DP-attention 72, EP 72 (+32 copies)"
    plain = Deployment(tp=1, dp_attention=64, ep=64, **V3F)
    more = Deployment(tp=1, dp_attention=64, ep=64, redundant_experts=64, **V3F)
    w = Workload(2000, 100)
    assert largest_batch("deepseek-v3", H800, w, more) < largest_batch("deepseek-v3", H800, w, plain)


def test_a_decode_steps_all_to_alls_run_deepeps_low_latency_kernels_by_their_bytes():
    """DeepEP's table: at EP 144 (between 128 and 256, both 192-194 us dispatch, 369 us combine held) a step
    of 128 tokens a GPU, 7,168 wide, top 8, takes the measured times; 64 tokens take half."""
    roof = get_roof("h800-sxm", "calibrated", "fp8")
    at128 = roof.moe_all_to_all_time(128, 128, 7168, 8)
    assert at128 == pytest.approx(192e-6 + 369e-6)
    assert roof.moe_all_to_all_time(128, 64, 7168, 8) == pytest.approx(at128 / 2)
    d = Deployment(tp=1, dp_attention=128, ep=128, **V3F)
    step = step_time("deepseek-v3", d, roof, decode=128 * 128, context=2000)
    layers = load_model("deepseek-v3").moe.moe_layers(61)
    assert step.parts["expert all-to-all"] == pytest.approx(layers * at128)


def test_two_batch_overlap_hides_the_all_to_alls_behind_the_other_micro_batch():
    roof = get_roof("h800-sxm", "calibrated", "fp8")
    base = dict(tp=1, dp_attention=144, ep=144, redundant_experts=32, **V3F)
    added = step_time("deepseek-v3", Deployment(**base), roof, decode=128 * 144, context=4989)
    both = step_time("deepseek-v3", Deployment(**base, overlap="two-batch"), roof, decode=128 * 144, context=4989)
    a2a = both.parts["expert all-to-all"]
    work = both.seconds if both.seconds > a2a else sum(both.parts.values()) - a2a
    assert both.overlapped and both.seconds == pytest.approx(max(a2a, sum(both.parts.values()) - a2a))
    assert both.seconds < added.seconds
    assert work <= both.seconds and a2a <= both.seconds


def test_the_grouped_matmul_is_labelled_by_what_binds():
    """At 8 sequences over 8 GPUs with 256 experts a token's 8 experts leave about 2 rows an expert: reading its
    weights takes far longer than its FLOPs, weight streaming; at 512 rows an expert the FLOPs bind."""
    roof = get_roof("h800-sxm", "calibrated", "fp8")
    few = step_time("deepseek-v3", Deployment(tp=1, dp_attention=8, ep=8, **V3F), roof, decode=64, context=1000)
    assert few.expert_matmuls == "weight streaming"
    many = step_time("deepseek-v3", Deployment(tp=1, dp_attention=8, ep=8, **V3F), roof, decode=16384, context=1000)
    assert many.expert_matmuls == "FLOPs"
    dense = step_time("llama-3.1-8b", Deployment(**V3F), roof, decode=8, context=1000)
    assert dense.expert_matmuls is None


@pytest.mark.parametrize("check", ep_decode_checks(), ids=[r.label for r in EP_DECODE_RUNS])
def test_ep_decode_never_beats_its_ceiling_and_states_its_settings(check):
    assert check.per_gpu(check.estimate) <= check.per_gpu(check.ceiling)
    assert check.per_gpu(check.added) <= check.per_gpu(check.estimate)
    assert check.run.batch_per_gpu * check.run.gpus * 8 / (256 + check.run.redundant) == check.tokens_per_expert
    assert all(":" in s for s in check.run.sources)
