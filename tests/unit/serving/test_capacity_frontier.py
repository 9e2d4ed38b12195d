"""Time to first token and the latency-throughput curve (chapter 12), built on chapter 5's planner."""

import numpy as np
import pytest

import roofline as rl
from roofline import serving as S


def test_ttft_is_a_prefill_of_the_prompt():
    for gpu in ("h100-sxm", "h200-sxm"):
        assert S.time_to_first_token("llama-3-8b", gpu, 2048) == pytest.approx(
            float(rl.predict(rl.prefill("llama-3-8b", 2048), gpu).time))
    t = S.time_to_first_token("llama-3-8b", "h200-sxm", np.array([512, 2048, 8192]))
    assert np.all(np.diff(t) > 0)


def test_curve_ends_at_chapter_5s_wall_with_its_decode_step():
    c = S.latency_throughput("llama-3-8b", "h200-sxm", 8192)
    plan = S.serving_capacity("llama-3-8b", "h200-sxm", 8192)
    assert c["max_batch"] == plan.max_batch == c["batch"][-1]
    assert c["tpot"][-1] == pytest.approx(plan.step_time) and c["tokens_per_s"][-1] == pytest.approx(plan.tokens_per_s)
    assert np.all(np.diff(c["tpot"]) > 0) and np.all(np.diff(c["tokens_per_s"]) > 0)


def test_curve_under_tensor_parallelism_matches_the_plan():
    c = S.latency_throughput("llama-3-70b", "h100-sxm", 8192, gpus=4)
    plan = S.serving_capacity("llama-3-70b", "h100-sxm", 8192, gpus=4)
    assert c["tpot"][-1] == pytest.approx(plan.step_time)


@pytest.mark.parametrize("call, message", [
    (lambda: S.latency_throughput("llama-3-8b", "h200-sxm", 8192, batches=[1, 4000]), "batches: at 8,192 tokens at most"),
    (lambda: S.latency_throughput("llama-3.1-405b", "h100-sxm", 8192), "context: not one sequence"),
    (lambda: S.time_to_first_token("llama-3-8b", "h200-sxm", 0), "prompt must be"),
    (lambda: S.time_to_first_token("llama-2-7b", "h200-sxm", 10_000), "beyond what"),
])
def test_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()
