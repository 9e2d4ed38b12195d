"""The batching simulation (chapter 12): step times from the roofline, determinism, and what each policy buys."""

import re

import numpy as np
import pytest

import roofline as rl
from roofline.serving import batching as BT

MODEL, GPU = "llama-3-8b", "h200-sxm"


@pytest.fixture(scope="module")
def requests():
    return BT.make_requests(200, 20.0, prompt=(128, 2048), output=(16, 512), seed=1)


@pytest.fixture(scope="module")
def runs(requests):
    return {p: BT.simulate(requests, MODEL, GPU, policy=p, max_batch=64, chunk=512 if p == "chunked" else None)
            for p in BT.POLICIES}


@pytest.mark.parametrize("batch, context", [(1, 0), (7, 1000), (64, 4096), (512, 100), (2048, 16)])
def test_step_cost_is_the_roofline_of_a_decode_step(batch, context):
    cost = BT.StepCost.of(MODEL, GPU)
    assert cost.decode(batch, context) == pytest.approx(float(rl.predict(rl.decode_step(MODEL, batch, context), GPU).time), rel=1e-12)


@pytest.mark.parametrize("tokens", [1, 256, 2048, 8192])
def test_step_cost_is_the_roofline_of_a_prefill(tokens):
    cost = BT.StepCost.of(MODEL, GPU)
    assert cost.prefill(tokens) == pytest.approx(float(rl.predict(rl.prefill(MODEL, tokens), GPU).time), rel=1e-12)


def test_requests_are_seeded_and_in_range():
    a, b = BT.make_requests(50, 5.0, seed=3), BT.make_requests(50, 5.0, seed=3)
    assert np.array_equal(a.arrival, b.arrival) and np.array_equal(a.prompt, b.prompt) and np.array_equal(a.output, b.output)
    assert np.all(np.diff(a.arrival) > 0) and a.prompt.min() >= 128 and a.output.max() <= 512
    assert not np.array_equal(a.prompt, BT.make_requests(50, 5.0, seed=4).prompt)


def test_simulation_is_deterministic(requests, runs):
    again = BT.simulate(requests, MODEL, GPU, policy="chunked", max_batch=64, chunk=512)
    assert np.array_equal(again.finish, runs["chunked"].finish) and np.array_equal(again.step_time, runs["chunked"].step_time)


def test_every_request_gets_all_its_tokens(requests, runs):
    for r in runs.values():
        assert np.all(np.isfinite(r.finish)) and np.all(r.ttft > 0) and np.all(r.latency >= r.ttft)
        assert r.output_tokens == int(requests.output.sum())
        assert np.all(r.step_decode <= 64)
    # continuous batching: every decode step makes one token per sequence in flight, and every prefill one more
    c = runs["continuous"]
    assert c.step_decode.sum() + len(requests) == requests.output.sum()
    # the prompts' tokens all went through, chunked or whole
    assert runs["chunked"].step_prefill.sum() == runs["continuous"].step_prefill.sum() == requests.prompt.sum()


def test_static_batching_pads_and_wastes_slots(requests, runs):
    s = runs["static"]
    # a group runs as long as its longest output: the mean output over the mean of the groups' longest
    groups = [requests.output[i:i + 64] for i in range(0, len(requests), 64)]
    held = sum(64 * g.max() for g in groups)
    assert s.wasted_slots == pytest.approx(1 - requests.output.sum() / held)
    assert s.wasted_slots > 0.3


def test_continuous_batching_beats_static_on_the_same_requests(runs):
    s, c = runs["static"].summary(), runs["continuous"].summary()
    assert c["throughput"] > 1.5 * s["throughput"]
    assert c["ttft_p50"] < s["ttft_p50"] / 10


def test_chunked_prefill_shortens_the_worst_gap_between_tokens(runs):
    c, k = runs["continuous"].summary(), runs["chunked"].summary()
    assert k["worst_gap_p99"] < c["worst_gap_p99"] / 2
    assert np.max(runs["chunked"].step_prefill) <= 512


def test_a_lone_request_takes_a_prefill_then_decode_steps():
    r = BT.Requests(np.array([0.0]), np.array([1000]), np.array([5]))
    cost = BT.StepCost.of(MODEL, GPU)
    for policy in ("static", "continuous"):
        out = BT.simulate(r, MODEL, GPU, policy=policy, max_batch=8)
        assert out.ttft[0] == pytest.approx(cost.prefill(1000))
        assert out.latency[0] == pytest.approx(cost.prefill(1000) + sum(cost.decode(1, 1000 + j) for j in range(4)))


@pytest.mark.parametrize("call, error, message", [
    (lambda: BT.make_requests(0, 1.0), ValueError, "n must be"),
    (lambda: BT.make_requests(5, -1.0), ValueError, "rate must be"),
    (lambda: BT.make_requests(5, 1.0, prompt=(100, 10)), ValueError, "prompt must be (shortest, longest)"),
    (lambda: BT.make_requests(5, 1.0, output=7), TypeError, "output must be a pair"),
    (lambda: BT.simulate(BT.make_requests(5, 1.0), MODEL, GPU, policy="greedy"), ValueError, "policy must be one of"),
    (lambda: BT.simulate(BT.make_requests(5, 1.0), MODEL, GPU, policy="chunked"), ValueError, "needs chunk"),
    (lambda: BT.simulate(BT.make_requests(5, 1.0), MODEL, GPU, chunk=64), ValueError, "chunk belongs to policy 'chunked'"),
    (lambda: BT.simulate([1, 2], MODEL, GPU), TypeError, "requests must be a non-empty Requests"),
    (lambda: BT.simulate(BT.make_requests(5, 1.0), MODEL, GPU, max_batch=0), ValueError, "max_batch must be"),
])
def test_bad_input_names_the_argument(call, error, message):
    with pytest.raises(error, match=re.escape(message)):
        call()


def test_memory_bound_chunk_is_where_the_step_meets_the_ridge():
    cost = BT.StepCost.of(MODEL, GPU)
    c = cost.memory_bound_chunk(32, 1024)
    assert c > 0

    def parts(chunk):
        tokens, pairs = 32 + chunk, 32 * 1024 + chunk * chunk / 2
        return ((cost.flops_per_token * tokens + cost.flops_per_pair * pairs) / cost.peak_flops,
                (cost.weight_bytes + cost.kv_bytes_per_token * (32 * 1024 + chunk)) / cost.bandwidth)

    compute, memory = parts(c)
    assert compute <= memory
    compute, memory = parts(c + 1)
    assert compute > memory
    # with no context the weights set it: the ridge point in tokens (the chunk's own attention takes a token)
    assert int(cost.compute_bound_tokens()) - 2 <= cost.memory_bound_chunk(0, 0) <= cost.compute_bound_tokens()
    assert cost.memory_bound_chunk(4096, 0) == 0


# --- the cap on sequences in flight binds ------------------------------------------------------------------

def _burst(n=40, prompt=128, output=16):
    """``n`` requests that all arrive within a microsecond: many more than a small batch cap."""
    return BT.Requests(np.linspace(0.0, 1e-6, n), np.full(n, prompt), np.full(n, output))


@pytest.mark.parametrize("policy, chunk", [("continuous", None), ("chunked", 256)])
def test_a_burst_never_puts_more_sequences_in_flight_than_the_cap(policy, chunk):
    res = BT.simulate(_burst(), "llama-3-8b", "h100-sxm", policy=policy, max_batch=8, chunk=chunk)
    assert res.step_decode.max() == 8  # the cap is reached, and never passed
    assert np.all(res.step_decode <= 8)


def test_a_request_beyond_the_cap_waits_for_a_slot_to_free():
    """With 8 slots and every output 16 tokens long, the ninth request can start only when one of the
    first eight has made its last token: its time to first token is at least the first one's latency."""
    res = BT.simulate(_burst(), "llama-3-8b", "h100-sxm", policy="continuous", max_batch=8)
    first_eight = res.latency[:8]
    assert res.ttft[8] >= first_eight.min()
    assert np.all(res.ttft[:8] < first_eight.min())
