"""The serving development set (roofline.measured.serving): the ceiling holds, the estimate's misses are
counted, the runtime settings are the tool's documented defaults (chapter 13)."""

import pytest

from roofline.measured.serving import ESTIMATE_BAND, TRTLLM_RUNTIME, serving_dev_checks, serving_runs, trtllm_bench_limits

CHECKS = serving_dev_checks()


def test_the_set_is_the_thirteen_published_runs():
    runs = serving_runs()
    assert len(runs) == 13 and len({r.id for r in runs}) == 13
    assert {r.model for r in runs} == {"llama-3.1-8b", "llama-3.1-70b", "llama-3.3-70b", "llama-3.1-405b", "mixtral-8x7b"}
    one = next(r for r in runs if r.id == "trt014-l31-70b-h100-tp2-128-128")
    assert (one.tp, one.published, one.workload.requests) == (2, 5194.8171, 30000)
    assert one.label == "Llama 3.1 70B, H100, TP 2, 128/128"


@pytest.mark.parametrize("check", CHECKS, ids=[c.run.id for c in CHECKS])
def test_the_datasheet_ceiling_is_at_or_above_every_published_run(check):
    assert check.ceiling.output_tokens_per_s >= check.run.published
    assert check.ceiling_over_published >= 1.0


@pytest.mark.parametrize("check", CHECKS, ids=[c.run.id for c in CHECKS])
def test_every_estimate_is_no_slower_than_the_run_and_within_half_again(check):
    """The estimate, kernel by kernel without overlap, still lands above every run (it prices no runtime
    overhead of its own) and within 1.5x of each; chapter 13 says where."""
    assert 1.0 <= check.estimate_over_published <= 1.5


def test_ten_of_thirteen_runs_are_within_the_band():
    """The three misses are TensorRT-LLM 0.14 runs of Llama 3.1 70B whose steps are mostly matmuls; both
    TensorRT-LLM 1.0 runs land inside, the 405B closest of all (chapter 13 says where and why)."""
    within = [c.run.id for c in CHECKS if c.within_band]
    assert ESTIMATE_BAND == 1.3 and len(within) == 10
    misses = [c for c in CHECKS if not c.within_band]
    assert all(c.run.version == "v0.14" and c.run.model == "llama-3.1-70b" for c in misses)
    worst = max(CHECKS, key=lambda c: c.estimate_over_published)
    assert worst.run.id == "trt014-l31-70b-h200-tp1-128-2048"
    assert worst.estimate.step.parts["matmuls"] > worst.estimate.step.seconds / 2
    newer = [c for c in CHECKS if c.run.version == "v1.0"]
    assert len(newer) == 2 and all(c.within_band for c in newer)
    assert min(CHECKS, key=lambda c: c.estimate_over_published).run.id == "trt10-l31-405b-h100-tp8-1000-1000"


def test_the_runtime_settings_are_trtllms_documented_defaults():
    run = next(r for r in serving_runs() if r.id == "trt014-l31-8b-h100-tp1-128-128")
    d = run.deployment()
    assert (d.kv_policy, d.kv_fraction) == (TRTLLM_RUNTIME["kv_policy"][0], TRTLLM_RUNTIME["kv_fraction"][0])
    assert d.head_dtype == TRTLLM_RUNTIME["head_dtype"][0] == "bf16"  # ModelOpt's FP8 leaves lm_head unquantized
    assert d.max_batch == 4096 and d.max_tokens == 8192  # the tool's own example: a 7B model, 4,096 and 8,192
    assert all(key in ("trtllm-runtime-options", "trtllm-kv-cache", "trtllm-bench-tuning", "modelopt-quant-config")
               for _, key, _ in TRTLLM_RUNTIME.values())


@pytest.mark.parametrize("fit,i,o,pp,expected", [
    (10_000, 128, 128, 1, (4096, 8192)),     # capped at 4,096, then 4,096 x 2 tokens
    (150, 2048, 2048, 1, (160, 2048)),       # a multiple of 32 below 256; tokens at least 2,048
    (20, 128, 128, 1, (64, 2048)),           # at least 64
    (700, 2048, 128, 1, (768, 12288)),       # a multiple of 128; 700 x 17 = 11,900 rounded up to 1,024s
    (3000, 2048, 128, 1, (3072, 32768)),     # tokens capped at 32,768
    (3000, 1000, 1000, 2, (1536, 3072)),     # split over two stages
])
def test_trtllm_bench_limits_follow_its_rule(fit, i, o, pp, expected):
    assert trtllm_bench_limits(fit, i, o, pp) == expected


