"""The queue in roofline.serving.deployment (chapter 13; issue 51's laws): Little's law from the printed
latencies, a wait for clients past what fits, the offline figure as the peak no load beats, TTFT under chunked
prefill and as a pipeline, and a disaggregated prefill pool under a flow of prompts."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roofline.core.calibration import get_roof
from roofline.core.hardware import get_hardware
from roofline.serving.deployment import (CHUNK_TOKENS, Deployment, Workload, pipeline_piece_share, pipelined_prefill, plan_serving,
                                         prefill_pool, step_time, sustain)

H100 = get_hardware("h100-sxm")
FP8 = dict(weights_dtype="fp8", kv_dtype="fp8", math_dtype="fp8")
CAL, DS = get_roof(H100, "calibrated", "fp8"), get_roof(H100, "datasheet", "fp8")
LAWS = settings(max_examples=12, derandomize=True, database=None, deadline=None)


def _little(s):
    """Requests in flight by Little's law from the printed rate and latencies."""
    w = s.workload
    return s.output_tokens_per_s / w.output_tokens * (s.ttft_s + (w.output_tokens - 1) * s.tpot_s)


def test_one_client_on_a_disaggregated_pair_is_priced_as_one_request():
    """Issue 51's reproducer: one client, a prompt of 1,024 and an answer of 128 on one prefill and one decode
    GPU. The output is 128 tokens every TTFT + 127 TPOT, one request in flight, decoding for all but its first
    token's time (the decode pool's batch: 127 TPOT over the whole), not a batch of none."""
    d = Deployment(disaggregate=(1, 1))
    s = sustain("llama-3-8b", H100, Workload(1024, 128, concurrency=1), d, get_roof(H100, "calibrated"))
    assert s.batch == pytest.approx(127 * s.tpot_s / (s.ttft_s + 127 * s.tpot_s), rel=2e-3)
    assert s.output_tokens_per_s == pytest.approx(128 / (s.ttft_s + 127 * s.tpot_s), rel=1e-9)
    assert _little(s) == pytest.approx(1.0, rel=1e-9)


@pytest.mark.parametrize("disaggregate", [None, (1, 1)])
def test_clients_past_what_fits_wait_in_a_queue_and_the_ttft_says_so(disaggregate):
    d = Deployment(disaggregate=disaggregate) if disaggregate else Deployment()
    roof = get_roof(H100, "calibrated")
    few = sustain("llama-3-8b", H100, Workload(1024, 128, concurrency=64), d, roof)
    many = sustain("llama-3-8b", H100, Workload(1024, 128, concurrency=100_000), d, roof)
    peak = sustain("llama-3-8b", H100, Workload(1024, 128), d, roof)
    assert many.sustained and many.ttft_s > 100 * few.ttft_s
    assert many.output_tokens_per_s <= peak.output_tokens_per_s * (1 + 1e-6)
    assert _little(many) == pytest.approx(100_000, rel=1e-6)
    if disaggregate is None:
        assert any("wait for a place" in n for n in many.notes)


def test_the_offline_figure_is_the_peak_the_planner_sizes_from():
    w = Workload(2048, 256)
    d = Deployment(tp=2, **FP8)
    off = sustain("llama-3.1-70b", H100, w, d, CAL)
    assert off.output_tokens_per_s == off.peak_output_tokens_per_s
    row = next(r for r in plan_serving("llama-3.1-70b", H100, w, CAL, max_gpus=2, **FP8) if r.deployment.tp == 2
               and r.deployment.pp == 1)
    assert row.capacity.output_tokens_per_s == pytest.approx(off.output_tokens_per_s)
    # a rate needs the replicas that its tokens over the peak say
    need = plan_serving("llama-3.1-70b", H100, Workload(2048, 256, rate=5.0), CAL, max_gpus=2, **FP8)
    row = next(r for r in need if r.deployment.tp == 2 and r.deployment.pp == 1)
    assert row.replicas == math.ceil(5.0 * 256 / off.output_tokens_per_s)


MODELS = st.sampled_from([("llama-3.1-8b", 1), ("llama-3.1-8b", 2), ("llama-3.1-70b", 2), ("llama-3.1-70b", 4),
                         ("mixtral-8x7b", 2)])
LENGTHS = st.tuples(st.sampled_from([128, 1024, 4096, 16384]), st.sampled_from([1, 16, 256, 1024]))


@LAWS
@given(MODELS, LENGTHS, st.sampled_from([None, 2048, 8192]), st.sampled_from(["colocated", "split"]))
def test_laws_of_the_queue(model_tp, lengths, budget, how):
    """Output at any load at most the offline peak; TTFT and TPOT never fall as the clients or the rate grow;
    Little's law within rounding for every sustained answer."""
    (model, tp), (i, o) = model_tp, lengths
    d = Deployment(tp=tp, max_tokens=budget, **FP8, disaggregate=(tp, tp) if how == "split" else None)
    peak = sustain(model, H100, Workload(i, o), d, CAL)
    assert peak.fits
    loads = [sustain(model, H100, Workload(i, o, concurrency=c), d, CAL) for c in (1, 4, 32, 256, 4096)]
    top = peak.peak_output_tokens_per_s
    rates = [sustain(model, H100, Workload(i, o, rate=top / o * x), d, CAL) for x in (0.05, 0.4, 0.9, 1.5)]
    for s in loads + rates:
        assert s.output_tokens_per_s <= top * (1 + 1e-6)
        if s.sustained:
            n = s.workload.concurrency or s.output_tokens_per_s / o * (s.ttft_s + (o - 1) * s.tpot_s)
            assert _little(s) == pytest.approx(n, rel=1e-6)
    for runs in (loads, [r for r in rates if r.sustained]):
        for a, b in zip(runs, runs[1:]):
            assert b.ttft_s >= a.ttft_s * (1 - 1e-6) and b.tpot_s >= a.tpot_s * (1 - 1e-6)
            assert b.output_tokens_per_s >= a.output_tokens_per_s * (1 - 1e-6)
    assert not rates[-1].sustained and rates[-1].ttft_s is None


@pytest.mark.parametrize("i,budget", [(2048, 8192), (20000, 8192), (20000, 2048), (20000, None)])
def test_ttft_is_never_below_one_prefill_of_the_prompt_alone(i, budget):
    alone = step_time("llama-3.1-70b", Deployment(tp=4, **FP8), CAL, decode=0, context=i, prefill=i, keys=i / 2,
                      seq=i).seconds
    for d in (Deployment(tp=4, max_tokens=budget, **FP8), Deployment(tp=4, max_tokens=budget, disaggregate=(4, 4), **FP8)):
        for w in (Workload(i, 64, concurrency=1), Workload(i, 64, concurrency=16), Workload(i, 64)):
            s = sustain("llama-3.1-70b", H100, w, d, CAL)
            assert s.ttft_s >= alone


def test_a_smaller_step_budget_cuts_a_long_prompt_into_chunks_and_a_budget_of_zero_is_refused():
    w = Workload(20000, 64, concurrency=1)
    whole = sustain("llama-3.1-8b", H100, w, Deployment(max_tokens=None, **FP8), CAL)
    engines = sustain("llama-3.1-8b", H100, w, Deployment(**FP8), CAL)
    small = sustain("llama-3.1-8b", H100, w, Deployment(max_tokens=2048, **FP8), CAL)
    assert Deployment().max_tokens == CHUNK_TOKENS == 8192
    assert whole.ttft_s < engines.ttft_s < small.ttft_s  # 1 step, 3 chunks, 10 chunks
    with pytest.raises(ValueError, match="max_tokens"):
        Deployment(max_tokens=0)


def test_a_prompt_through_a_pipeline_takes_two_p_minus_one_over_p_squared_of_its_serial_time():
    """On the datasheet roof a compute-bound prompt's stage step scales with its tokens, so cut into p pieces
    through p stages it takes (p + p - 1) stage steps of a p-th of the prompt: (2p - 1) / p^2 of the serial
    time, 268 -> 146 -> 86.6 -> 58.9 ms shapes, not 1/p."""
    t = 65536
    for p in (2, 4, 8):
        d = Deployment(tp=1, pp=p, max_tokens=None, **FP8)
        serial = p * step_time("llama-3.1-70b", d, DS, decode=0, context=t, prefill=t * p, keys=t / 2, seq=t).seconds
        piped, pieces = pipelined_prefill("llama-3.1-70b", d, DS, t, keys=t / 2, seq=t)
        assert pieces == p
        assert serial / p <= piped <= serial
        assert piped == pytest.approx((2 * p - 1) / p ** 2 * serial, rel=0.02)
    # on the calibrated roof too it stays between a p-th of the serial time and the serial time
    d = Deployment(tp=1, pp=4, **FP8)
    serial = 4 * step_time("llama-3.1-70b", d, CAL, decode=0, context=4096, prefill=4096 * 4, keys=2048, seq=4096).seconds
    piped, _ = pipelined_prefill("llama-3.1-70b", d, CAL, 4096, keys=2048, seq=4096)
    assert serial / 4 <= piped <= serial


def test_the_rule_for_a_prompt_cut_into_p_pieces_reads_as_worked_by_hand():
    """One stage: the whole prompt, 1. Two stages, two pieces: three stage steps of a quarter each, 3/4.
    Eight: 15 steps of a 64th, 15/64 = 23.4%. A stage count that is not a whole number of stages is refused."""
    assert pipeline_piece_share(1) == 1.0
    assert pipeline_piece_share(2) == 0.75
    assert pipeline_piece_share(8) == pytest.approx(0.234375)
    for bad in (0, 2.5):
        with pytest.raises(ValueError, match="stages"):
            pipeline_piece_share(bad)


def test_the_prefill_pool_names_the_batch_it_peaks_at():
    """The pool's peak is k / T(k) at the batch peak_batch names: that batch's rate is the peak, and none
    of the others beats it."""
    pool = prefill_pool("llama-3.1-8b", Deployment(disaggregate=(2, 6), **FP8), CAL, Workload(4096, 256))
    rates = dict((k, k / t) for k, t in pool.batches)
    assert rates[pool.peak_batch] == pool.peak == max(rates.values())


def test_a_ttft_target_sizes_the_prefill_pool_and_one_below_a_lone_prefill_gets_nothing():
    d = Deployment(disaggregate=(2, 6), **FP8)
    w = Workload(4096, 256)
    pool = prefill_pool("llama-3.1-8b", d, CAL, w)
    free = sustain("llama-3.1-8b", H100, w, d, CAL)
    tight = sustain("llama-3.1-8b", H100, w, d, CAL, ttft_slo=2 * pool.alone + free.kv_transfer_s)
    assert tight.output_tokens_per_s < free.output_tokens_per_s and tight.limit in ("prefill", "slo")
    # DistServe's goodput: at the rate the target allows, the prompt's queue and prefill take the target
    assert pool.ttft(pool.rate_within(2 * pool.alone)) == pytest.approx(2 * pool.alone, rel=1e-6)
    none = sustain("llama-3.1-8b", H100, w, d, CAL, ttft_slo=0.5 * pool.alone)
    assert none.output_tokens_per_s == 0 and none.limit == "slo" and "below one prompt's prefill" in none.notes[0]


def test_sustain_takes_a_chip_by_name_and_refuses_another_chips_roof():
    d = Deployment(**FP8)
    by_name = sustain("llama-3.1-8b", "h100", Workload(1024, 128), d, CAL)
    assert by_name == sustain("llama-3.1-8b", H100, Workload(1024, 128), d, CAL)
    with pytest.raises(ValueError, match="roof is the H200's"):
        sustain("llama-3.1-8b", "h100", Workload(1024, 128), d, get_roof("h200-sxm", "calibrated", "fp8"))
