"""Speculative decoding (chapter 12): the expectation, the verify step's cost, the speed-up and its limits."""

import re

import numpy as np
import pytest

import roofline as rl
from roofline import measured as M
from roofline.serving import speculative as SP
from roofline.workloads.inference import verify_step
from roofline.core.calibration import calibrated_roof
from roofline.core.records import load_layers, load_measurement

TARGET, DRAFT = "llama-3-8b", "llama-3.2-1b"


@pytest.mark.parametrize("alpha, gamma", [(0.0, 3), (0.5, 1), (0.6, 4), (0.8, 4), (0.9, 8)])
def test_expectation_matches_a_seeded_simulation_of_acceptances(alpha, gamma):
    formula = SP.expected_tokens(alpha, gamma)
    simulated = SP.simulate_tokens(alpha, gamma, steps=200_000, seed=7)
    # the sum 1 + alpha + ... + alpha**gamma, and the simulation within a few standard errors
    assert formula == pytest.approx(sum(alpha ** k for k in range(gamma + 1)))
    assert simulated == pytest.approx(formula, abs=0.02)


def test_expectation_limits_and_broadcasting():
    assert SP.expected_tokens(0.0, 5) == 1.0
    assert SP.expected_tokens(0.999999, 4) == pytest.approx(5.0, rel=1e-5)
    out = SP.expected_tokens(np.array([0.2, 0.5, 0.8]), 4)
    assert out.shape == (3,) and np.all(np.diff(out) > 0)


def test_simulation_is_deterministic_for_a_seed():
    assert SP.simulate_tokens(0.7, 5, 10_000, seed=3) == SP.simulate_tokens(0.7, 5, 10_000, seed=3)
    assert SP.simulate_tokens(0.7, 5, 10_000, seed=3) != SP.simulate_tokens(0.7, 5, 10_000, seed=4)


def test_verify_step_of_one_token_is_a_decode_step():
    for accounting in ("text", "refined"):
        one, dec = verify_step(TARGET, 1, 2048, 4, accounting=accounting), rl.decode_step(TARGET, 4, 2048, accounting=accounting)
        assert one.flops == dec.flops and one.bytes == dec.bytes


def test_verify_cost_is_monotone_in_q_and_nearly_flat_while_memory_bound():
    q = np.array([1, 2, 4, 8, 16, 32, 64, 128, 256, 512])
    work = verify_step(TARGET, q, 2048)
    t = np.asarray(rl.predict(work, "h200-sxm").time)
    assert np.all(np.diff(np.asarray(work.flops)) > 0) and np.all(np.diff(t) >= 0)
    bound = np.asarray(rl.predict(work, "h200-sxm").bound)
    flat = bound == "memory"
    assert flat[:7].all() and t[6] / t[0] < 1.01  # 64 queries cost under 1% more than one on the datasheet roof
    assert (bound == "compute").any() and t[-1] / t[0] > 1.5  # past the ridge each query costs its FLOPs


def test_verify_attention_counts_the_causal_triangle_over_the_new_tokens():
    m = rl.load_model(TARGET)
    q, c = 5, 100
    a = verify_step(m, q, c, accounting="refined")
    pairs = sum(c + i for i in range(1, q + 1))  # query i sees the cache and the new tokens up to itself
    assert float(a.parts["attention"].flops) == pytest.approx(4 * pairs * m.attention_width * m.num_layers)


def test_calibrated_roof_predicts_the_measured_verify_steps():
    rec, layers = load_measurement(), load_layers()
    cal, model = calibrated_roof(rec, layers), M.model_of(rec)
    runs = {v.query_tokens: v.seconds for v in layers.verify}
    assert runs[64] == pytest.approx(5.63e-3, abs=5e-6) and runs[1] == pytest.approx(4.57e-3, abs=5e-6)
    for q, measured in runs.items():
        if q == 1:
            continue  # one query runs a matrix-vector kernel faster than the calibrated matmul curve at one row
        p = rl.predict(verify_step(model, q, 2048, accounting="refined", **M.MEASURED_WORKLOAD), cal, timing="kernel")
        assert 1 / 1.25 <= float(p.time) / measured <= 1.25, q


def test_speedup_is_expectation_over_relative_cost():
    p = SP.speculate(TARGET, DRAFT, "h200-sxm", 0.8, 4)
    c = p.draft_time / p.decode_time
    assert p.speedup == pytest.approx(SP.expected_tokens(0.8, 4) / (4 * c + p.verify_time / p.decode_time))
    assert 0 < p.wasted < 1 and p.spec_flops_per_token > p.plain_flops_per_token


def test_breakeven_alpha_gives_speedup_one():
    a = SP.breakeven_alpha("llama-3-70b", DRAFT, "h200-sxm", 4)
    assert 0 < a < 0.2
    assert SP.speculate("llama-3-70b", DRAFT, "h200-sxm", a, 4).speedup == pytest.approx(1.0, abs=1e-6)
    assert SP.speculate("llama-3-70b", DRAFT, "h200-sxm", a * 0.9, 4).speedup < 1


def test_best_gamma_falls_as_the_batch_grows():
    g1, s1 = SP.best_gamma(TARGET, DRAFT, "h200-sxm", 0.8, context=256)
    g64, s64 = SP.best_gamma(TARGET, DRAFT, "h200-sxm", 0.8, batch=64, context=256)
    assert g64 < g1 and s64 < s1


def test_speculation_stops_paying_where_decode_nears_the_compute_roof():
    b = SP.stops_paying_batch(TARGET, DRAFT, "h200-sxm", 0.8, 4, context=128)
    assert b is not None and b > 1
    assert SP.speculate(TARGET, DRAFT, "h200-sxm", 0.8, 4, batch=b, context=128).speedup <= 1
    assert SP.speculate(TARGET, DRAFT, "h200-sxm", 0.8, 4, batch=b - 1, context=128).speedup > 1


@pytest.mark.parametrize("call, error, message", [
    (lambda: SP.expected_tokens(1.0, 4), ValueError, "alpha (the acceptance rate) must be in [0, 1)"),
    (lambda: SP.expected_tokens(-0.1, 4), ValueError, "alpha must be"),
    (lambda: SP.expected_tokens(0.5, 0), ValueError, "gamma must be"),
    (lambda: SP.simulate_tokens(0.5, 2, steps=0), ValueError, "steps must be"),
    (lambda: SP.speculate(TARGET, "llama-3-70b", "h200-sxm", 0.8, 4), ValueError, "draft must be smaller than the target"),
    (lambda: SP.speculate(TARGET, DRAFT, "h200-sxm", 1.2, 4), ValueError, "alpha"),
    (lambda: SP.speculate(TARGET, DRAFT, "h200-sxm", 0.8, [2, 3]), TypeError, "gamma must be one whole number"),
    (lambda: SP.load_draft("llama-3.2-1"), KeyError, "did you mean 'llama-3.2-1b'"),
    (lambda: SP.best_gamma(TARGET, DRAFT, "h200-sxm", 0.8, gammas=[]), ValueError, "gammas must name"),
    (lambda: SP.stops_paying_batch(TARGET, DRAFT, "h200-sxm", 0.8, 4, max_batch=0), ValueError, "max_batch must be"),
    (lambda: SP.breakeven_alpha(TARGET, DRAFT, "h200-sxm", 0), ValueError, "gamma must be"),
    (lambda: SP.speculate("llama-3-70b", DRAFT, "h200-sxm", 0.8, 4, tp=0), ValueError, "tp must be a whole number > 0"),
    (lambda: SP.speculate("llama-3-70b", DRAFT, "h200-sxm", 0.8, 4, tp=3), ValueError, "tp must divide"),
])
def test_bad_input_names_the_argument(call, error, message):
    with pytest.raises(error, match=re.escape(message)):
        call()


def test_the_shipped_draft_shares_the_targets_vocabulary():
    d, t = SP.load_draft(DRAFT), rl.load_model(TARGET)
    assert d.vocab_size == t.vocab_size and d.params < t.params / 5


def test_a_sweep_over_queries_may_start_at_a_plain_decode_step():
    sweep = verify_step(TARGET, np.array([1, 2, 4]), np.array([0, 0, 5]))
    singles = [verify_step(TARGET, q, c).flops for q, c in ((1, 0), (2, 0), (4, 5))]
    assert np.allclose(np.asarray(sweep.flops), singles)


def test_cost_ratio_and_breakeven_tokens():
    p = SP.speculate("llama-3-70b", SP.load_draft("llama-3.2-1b"), "h200-sxm", 0.8, 4, context=2048)
    assert SP.cost_ratio(p) == pytest.approx(p.draft_time / p.decode_time)
    need = SP.breakeven_tokens(p)
    assert need == pytest.approx((4 * p.draft_time + p.verify_time) / p.decode_time)
    # speculation pays exactly when a step yields more tokens than it costs in plain steps
    assert (p.speedup > 1) == (p.tokens_per_step > need)
    assert p.speedup == pytest.approx(p.tokens_per_step / need)


@pytest.mark.parametrize("fn", ["cost_ratio", "breakeven_tokens"])
def test_chapter_12_speculative_bad_input(fn):
    with pytest.raises(TypeError, match="plan must be a SpeculativePlan"):
        getattr(SP, fn)(0.5)


def test_a_verify_step_scores_the_drafts_and_one_more():
    from roofline.serving.speculative import verify_tokens

    assert verify_tokens(4) == 5
    with pytest.raises(ValueError, match="gamma"):
        verify_tokens(2.5)


# Issue 52: chapter 12's explorer serves Llama 3 70B on eight H200s, split by tensor parallelism; at batch one
# every step then pays its all-reduces, which a pooled roof left out.

def test_a_tensor_parallel_verify_step_of_one_query_is_the_decode_step():
    from roofline.parallel.tensor_parallel import tp_decode_step, tp_verify_step

    v, d = tp_verify_step("llama-3-70b", 8, 1, 2048, 4), tp_decode_step("llama-3-70b", 8, 4, 2048)
    assert v.work.flops == pytest.approx(d.work.flops) and v.work.bytes == pytest.approx(d.work.bytes)
    assert [(e.name, e.size, e.count) for e in v.exchanges] == [(e.name, e.size, e.count) for e in d.exchanges]


def test_a_tensor_parallel_verify_step_exchanges_every_query():
    from roofline.parallel.tensor_parallel import tp_verify_step

    m = rl.load_model("llama-3-70b")
    v = tp_verify_step(m, 8, 5, 2048, 2)
    # 2 L + 2 collectives, each block's all-reduce on 5 queries x 2 sequences x 8,192 bf16 numbers = 163,840 bytes
    assert v.collectives == 2 * 80 + 2
    assert v.exchange("mlp all-reduce").size == 5 * 2 * 8192 * 2 == 163_840
    assert v.tokens == 10


def test_speculation_on_eight_gpus_pays_the_all_reduces():
    h = rl.get_hardware("h200-sxm")
    pooled = SP.speculate("llama-3-70b", DRAFT, roof=rl.as_roof(h).pooled(8), alpha=0.8, gamma=4)
    split = SP.speculate("llama-3-70b", DRAFT, h, alpha=0.8, gamma=4, tp=8)
    assert split.tp == 8 and pooled.tp == 1 and pooled.decode_exchange == 0.0
    # the plain step: the pooled roof's time plus its all-reduces, at batch one at least 162 calls' latency
    assert split.decode_exchange > 0
    assert split.decode_time >= pooled.decode_time + split.decode_exchange * (1 - 1e-9)
    # the draft is split the same way and pays its own 2 x 16 + 2 all-reduces: it costs more of a target step,
    # so the acceptance rate that breaks even rises
    assert SP.cost_ratio(split) > SP.cost_ratio(pooled)
    assert SP.breakeven_alpha("llama-3-70b", DRAFT, h, 4, tp=8) > SP.breakeven_alpha("llama-3-70b", DRAFT, roof=rl.as_roof(h).pooled(8), gamma=4)
