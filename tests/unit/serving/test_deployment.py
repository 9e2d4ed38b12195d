"""Serving at scale (roofline.serving.deployment): the laws a reader would check (chapter 13)."""

import dataclasses
import math

import numpy as np
import pytest

from roofline.core.cluster_roof import datasheet_cluster_roof
from roofline.core.hardware import get_hardware
from roofline.core.model import load_model
from roofline.core.calibration import get_roof
from roofline.serving.deployment import (Deployment, Workload, ceiling_deployment, frontier, largest_batch, layouts,
                                         plan_serving, serving_pair, smallest_slice, step_time, sustain)

H100, H200 = get_hardware("h100-sxm"), get_hardware("h200-sxm")
FP8 = dict(weights_dtype="fp8", kv_dtype="fp8", math_dtype="fp8")
DS = {"h100": datasheet_cluster_roof(H100, "fp8"), "h200": datasheet_cluster_roof(H200, "fp8")}
CAL = {"h100": get_roof(H100, "calibrated", "fp8"), "h200": get_roof(H200, "calibrated", "fp8")}

CASES = [("llama-3.1-8b", H100, 1, Workload(1024, 256)), ("llama-3.1-70b", H100, 4, Workload(2048, 128)),
         ("llama-3.1-70b", H200, 2, Workload(128, 1024, prefix_hit=0.5)), ("mixtral-8x7b", H100, 2, Workload(512, 512)),
         ("llama-3.1-8b", H200, 1, Workload(4096, 64, requests=500))]


@pytest.mark.parametrize("model,hw,tp,w", CASES)
def test_the_calibrated_estimate_never_beats_the_datasheet_ceiling(model, hw, tp, w):
    pair = serving_pair(model, hw, w, Deployment(tp=tp, **FP8))
    assert pair.ceiling.fits and pair.estimate.fits
    assert pair.estimate.output_tokens_per_s <= pair.ceiling.output_tokens_per_s
    assert pair.estimate.tpot_s >= pair.ceiling.tpot_s


@pytest.mark.parametrize("decode,context,prefill", [(1, 128, 0), (64, 4096, 0), (256, 1024, 4096), (0, 0, 8192)])
def test_a_calibrated_step_is_never_faster_than_the_datasheet_step(decode, context, prefill):
    for tp in (1, 4):
        d = Deployment(tp=tp, **FP8)
        ds = step_time("llama-3.1-70b", d, DS["h100"], decode=decode, context=context, prefill=prefill)
        cal = step_time("llama-3.1-70b", d, CAL["h100"], decode=decode, context=context, prefill=prefill)
        assert cal.seconds >= ds.seconds > 0
        assert ds.seconds == max(ds.flops / DS["h100"].peak_flops, ds.bytes / DS["h100"].bandwidth, ds.exchange)
        assert cal.seconds == pytest.approx(sum(cal.parts.values()))


def test_more_hbm_or_bandwidth_never_lowers_the_ceiling():
    for w, tp in ((Workload(2048, 512), 2), (Workload(16384, 1024), 4)):
        d = Deployment(tp=tp, **FP8)
        base = sustain("llama-3.1-70b", H100, w, d, DS["h100"])
        bigger = dataclasses.replace(H100, hbm_total=H100.hbm_total * 1.5)
        faster = dataclasses.replace(H100, hbm_bandwidth=H100.hbm_bandwidth * 1.5)
        more = sustain("llama-3.1-70b", bigger, w, d, datasheet_cluster_roof(bigger, "fp8"))
        quick = sustain("llama-3.1-70b", faster, w, d, datasheet_cluster_roof(faster, "fp8"))
        assert more.max_batch > base.max_batch and more.output_tokens_per_s >= base.output_tokens_per_s
        assert quick.output_tokens_per_s >= base.output_tokens_per_s
        if base.bound == "bandwidth":
            assert quick.output_tokens_per_s > base.output_tokens_per_s


@pytest.mark.parametrize("roof", ["h100-ds", "h100-cal"])
def test_ttft_and_tpot_rise_with_the_offered_rate_and_the_clients(roof):
    r = DS["h100"] if roof.endswith("ds") else CAL["h100"]
    d = Deployment(tp=2, **FP8)
    by_rate = [sustain("llama-3.1-70b", H100, Workload(1024, 256, rate=x), d, r) for x in (0.5, 2, 8, 16)]
    by_clients = [sustain("llama-3.1-70b", H100, Workload(1024, 256, concurrency=c), d, r) for c in (1, 8, 64, 256)]
    for runs in (by_rate, by_clients):
        ok = [x for x in runs if x.sustained]
        assert len(ok) >= 3
        assert all(a.tpot_s <= b.tpot_s and a.ttft_s <= b.ttft_s for a, b in zip(ok, ok[1:]))
        assert all(a.output_tokens_per_s <= b.output_tokens_per_s for a, b in zip(runs, runs[1:]))


def test_a_rate_is_carried_by_the_batch_littles_law_gives():
    d = Deployment(tp=4, replicas=2, **FP8)
    w = Workload(2048, 256, rate=6.0)
    s = sustain("llama-3.1-70b", H100, w, d, CAL["h100"])
    assert s.sustained and s.limit == "load"
    assert s.output_tokens_per_s == pytest.approx(6.0 * 256)
    assert s.batch == pytest.approx(6.0 / 2 * (s.ttft_s + 255 * s.tpot_s), rel=2e-3)


def test_a_rate_past_capacity_is_not_sustained_and_has_no_latency():
    d = Deployment(tp=1, **FP8)
    cap = sustain("llama-3.1-8b", H100, Workload(1024, 256), d, CAL["h100"]).output_tokens_per_s
    s = sustain("llama-3.1-8b", H100, Workload(1024, 256, rate=2 * cap / 256), d, CAL["h100"])
    assert not s.sustained and s.ttft_s is None and s.tpot_s is None
    assert s.output_tokens_per_s == pytest.approx(cap, rel=1e-6)


def test_a_prefix_hit_of_zero_is_no_cache_and_a_hit_saves_prefill_and_memory():
    d = Deployment(tp=2, **FP8)
    none = sustain("llama-3.1-70b", H100, Workload(4096, 256), d, CAL["h100"])
    zero = sustain("llama-3.1-70b", H100, Workload(4096, 256, prefix_hit=0.0), d, CAL["h100"])
    tiny = sustain("llama-3.1-70b", H100, Workload(4096, 256, prefix_hit=1e-9), d, CAL["h100"])
    half = sustain("llama-3.1-70b", H100, Workload(4096, 256, prefix_hit=0.5), d, CAL["h100"])
    assert zero == none
    assert tiny.output_tokens_per_s == pytest.approx(none.output_tokens_per_s, rel=1e-6)
    assert half.max_batch > none.max_batch and half.output_tokens_per_s > none.output_tokens_per_s
    one = step_time("llama-3.1-70b", d, CAL["h100"], decode=0, context=4096, prefill=4096 * 0.5, keys=2048 + 1024)
    full = step_time("llama-3.1-70b", d, CAL["h100"], decode=0, context=4096, prefill=4096, keys=2048)
    assert one.flops < full.flops


def test_the_largest_batch_by_hand():
    m, d, w = load_model("llama-3.1-8b"), Deployment(**FP8), Workload(1000, 1000)
    weights = (m.params) * 1.0  # fp8: one byte a parameter (norms too small to move the count)
    per_seq = 1500 * m.kv_bytes_per_token("fp8")
    assert largest_batch(m, H100, w, d) == pytest.approx((H100.usable_capacity - weights) / per_seq, abs=1.0)
    reserve = largest_batch(m, H100, w, dataclasses.replace(d, kv_policy="reserve"))
    assert reserve == pytest.approx((H100.usable_capacity - weights) / (2000 * m.kv_bytes_per_token("fp8")), abs=1.0)
    # tensor parallelism past the KV heads copies the cache: TP 8 holds 8x the room, but each GPU a head's copy
    d8 = Deployment(tp=8, **FP8)
    assert largest_batch(m, H100, w, d8) > 7 * largest_batch(m, H100, w, d)


def test_an_offline_benchmark_of_one_wave():
    d = Deployment(tp=1, **FP8)
    most = largest_batch("llama-3.1-8b", H100, Workload(512, 512), d)
    s = sustain("llama-3.1-8b", H100, Workload(512, 512, requests=most), d, CAL["h100"])
    assert s.batch == most and s.notes == (f"one wave of {most:,} requests",)
    assert s.output_tokens_per_s == pytest.approx(most * 512 / (s.ttft_s + 512 * s.tpot_s))
    two = sustain("llama-3.1-8b", H100, Workload(512, 512, requests=most + 1), d, CAL["h100"])
    assert two.output_tokens_per_s < s.output_tokens_per_s  # a second wave of one request runs almost empty


def _pools(d, w, roof):
    """The two pools' capacities, priced apart by hand: a prefill replica finishes at best 8,192 / 2,048 = 4
    prompts in one step of 8,192 tokens (the step budget; larger batches only take more such steps); a decode
    replica holds the largest batch that fits, each request decoding O - 1 steps after its first token."""
    P, D = d.disaggregate
    n = 8192 / w.input_tokens
    pre = step_time("llama-3.1-8b", d, roof, decode=0, context=w.input_tokens, prefill=n * w.input_tokens,
                    keys=w.input_tokens / 2, seq=w.input_tokens).seconds
    b = largest_batch("llama-3.1-8b", H100, w, d)
    dec = step_time("llama-3.1-8b", d, roof, decode=b, context=w.input_tokens + w.output_tokens / 2).seconds
    return P * n / pre * w.output_tokens, D * b / dec * w.output_tokens / (w.output_tokens - 1)


def test_disaggregation_with_an_infinite_link_carries_the_slower_pool_and_the_best_split_is_best():
    w = Workload(2048, 256)
    rates = {}
    for p in range(1, 8):
        d = Deployment(**FP8, disaggregate=(p, 8 - p), kv_link=math.inf)
        s = sustain("llama-3.1-8b", H100, w, d, CAL["h100"])
        rates[p] = s.output_tokens_per_s
        assert s.output_tokens_per_s == pytest.approx(min(_pools(d, w, CAL["h100"])), rel=1e-6)
        assert s.kv_transfer_s == 0
    best = max(rates.values())
    assert all(best >= r for r in rates.values())
    # its decode never waits for a prompt: the TPOT is a pure decode step's, below the colocated one at that batch
    p = max(rates, key=rates.get)
    dis = sustain("llama-3.1-8b", H100, w, Deployment(**FP8, disaggregate=(p, 8 - p), kv_link=math.inf), CAL["h100"])
    col = frontier("llama-3.1-8b", H100, w, Deployment(**FP8), CAL["h100"], batches=[int(dis.batch)])
    assert dis.tpot_s < col.tpot_s[0]


def test_a_finite_link_costs_the_kv_transfer():
    w = Workload(8192, 256)
    fast = sustain("llama-3.1-8b", H100, w, Deployment(**FP8, disaggregate=(2, 6), kv_link=math.inf), CAL["h100"])
    net = sustain("llama-3.1-8b", H100, w, Deployment(**FP8, disaggregate=(2, 6), kv_link="network"), CAL["h100"])
    cache = load_model("llama-3.1-8b").kv_cache_bytes(8192, "fp8")
    assert net.kv_transfer_s == pytest.approx(CAL["h100"].latency_s + cache / CAL["h100"].port)
    assert net.ttft_s == pytest.approx(fast.ttft_s + net.kv_transfer_s)


def test_targets_cap_the_batch_and_one_no_batch_meets_gives_nothing():
    d = Deployment(tp=2, **FP8)
    free = sustain("llama-3.1-70b", H100, Workload(1024, 256), d, CAL["h100"])
    capped = sustain("llama-3.1-70b", H100, Workload(1024, 256), d, CAL["h100"], tpot_slo=free.tpot_s / 3)
    assert capped.limit == "slo" and capped.tpot_s <= free.tpot_s / 3 * (1 + 1e-3) and capped.batch < free.batch
    none = sustain("llama-3.1-70b", H100, Workload(1024, 256), d, CAL["h100"], tpot_slo=1e-4)
    assert none.output_tokens_per_s == 0 and none.batch == 0 and none.limit == "slo"


def test_tensor_parallel_all_reduces_at_batch_one_are_latency_bound():
    """At batch 1 the all-reduces of TP 8 are small messages: the calibrated NVLink curve makes them far
    slower than their bytes at the link's rate, so TP 8 is far from 8x faster than TP 1."""
    one = step_time("llama-3.1-70b", Deployment(tp=8, **FP8), CAL["h100"], decode=1, context=1024)
    msg = 8192 * 2
    bytes_time = 2 * 80 * msg * 2 * 7 / 8 / CAL["h100"].nvlink.top
    assert one.parts["tensor-parallel"] > 10 * bytes_time
    solo = step_time("llama-3.1-70b", Deployment(tp=1, **FP8), CAL["h100"], decode=1, context=1024)
    assert solo.seconds / one.seconds < 6


def test_the_planner_ranks_what_meets_and_names_the_smallest_slice():
    rows = plan_serving("llama-3.1-70b", H100, Workload(2048, 256), CAL["h100"], max_gpus=8, tpot_slo=0.03, **FP8)
    assert {r.deployment.replica_gpus for r in rows} == {1, 2, 4, 8}
    met = [r for r in rows if r.meets]
    assert met and all(r.capacity.tpot_s <= 0.03 * 1.001 for r in met)
    per_gpu = [r.tokens_per_s_per_gpu for r in met]
    assert per_gpu == sorted(per_gpu, reverse=True)
    best = smallest_slice(rows)
    assert best.gpus == min(r.gpus for r in met)
    assert smallest_slice(plan_serving("llama-3.1-70b", H100, Workload(2048, 256), CAL["h100"], tpot_slo=1e-4, **FP8)) is None


def test_a_rate_needs_replicas_in_the_planner():
    rows = plan_serving("llama-3.1-8b", H100, Workload(1024, 256, rate=50), CAL["h100"], max_gpus=2, **FP8)
    for r in rows:
        assert r.replicas == math.ceil(50 * 256 / r.capacity.output_tokens_per_s)


def test_layouts_spread_experts_only_for_a_mixture():
    dense = layouts("llama-3.1-70b", max_gpus=8)
    assert all(d.ep == 1 and d.dp_attention == 1 for d in dense)
    moe = layouts("deepseek-v3", max_gpus=16)
    assert any(d.dp_attention == 8 and d.ep == 8 for d in moe)
    assert all(d.replica_gpus <= 16 and 256 % d.ep == 0 for d in moe)


def test_data_parallel_attention_shards_the_cache_where_tensor_parallelism_copies_it():
    m = load_model("deepseek-v3")  # one latent per token: TP keeps a whole copy on every GPU
    w = Workload(2048, 512)
    h800 = get_hardware("h800-sxm")  # sixteen GPUs, the experts over all sixteen, either way
    tp8 = largest_batch(m, h800, w, Deployment(tp=8, dp_attention=2, ep=16, **FP8))
    dp16 = largest_batch(m, h800, w, Deployment(tp=1, dp_attention=16, ep=16, **FP8))
    assert tp8 > 0 and dp16 > 4 * tp8


@pytest.mark.parametrize("kwargs,match", [
    (dict(input_tokens=0, output_tokens=10), "input_tokens"),
    (dict(input_tokens=10, output_tokens=10, rate=0), "rate"),
    (dict(input_tokens=10, output_tokens=10, rate=float("inf")), "rate"),
    (dict(input_tokens=10, output_tokens=10, rate=1, concurrency=2), "not both"),
    (dict(input_tokens=10, output_tokens=10, prefix_hit=1.0), "prefix_hit"),
    (dict(input_tokens=10, output_tokens=10, requests=5, rate=1), "requests"),
])
def test_a_bad_workload_is_refused_by_name(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        Workload(**kwargs)


@pytest.mark.parametrize("kwargs,match", [
    (dict(tp=0), "tp"), (dict(kv_policy="lazy"), "kv_policy"), (dict(kv_fraction=1.5), "kv_fraction"),
    (dict(disaggregate=(3, 4), tp=2), "prefill pool"), (dict(disaggregate=5), "pair"), (dict(kv_link="wifi"), "kv_link"),
    (dict(weights_dtype="fp9"), "fp9"), (dict(allreduce="ring"), "allreduce must be one of nccl, custom"),
])
def test_a_bad_deployment_is_refused_by_name(kwargs, match):
    with pytest.raises((ValueError, TypeError, KeyError), match=match):
        Deployment(**kwargs)


def test_a_layout_the_model_cannot_take_and_lengths_past_its_context_are_refused():
    with pytest.raises(ValueError, match="tp 3 must divide"):
        sustain("llama-3.1-8b", H100, Workload(10, 10), Deployment(tp=3), DS["h100"])
    with pytest.raises(ValueError, match="ep 2: llama-3.1-8b has no experts"):
        sustain("llama-3.1-8b", H100, Workload(10, 10), Deployment(ep=2), DS["h100"])
    with pytest.raises(ValueError, match="past llama-3-8b's context"):
        sustain("llama-3-8b", H100, Workload(8000, 500), Deployment(), DS["h100"])


def test_the_frontier_climbs_in_throughput_and_latency_to_the_memory_wall():
    f = frontier("llama-3.1-70b", H100, Workload(2048, 256), Deployment(tp=4, **FP8), CAL["h100"])
    assert f.batch[-1] == f.max_batch and f.batch[0] == 1
    assert np.all(np.diff(f.tokens_per_s_per_gpu) > 0) and np.all(np.diff(f.tpot_s) > 0)


def test_a_lightly_loaded_prefill_pool_does_not_wait_to_fill_a_step():
    """At half a prompt a second on two prefill GPUs, each prefills a prompt alone, almost never queueing: the
    TTFT is one prompt's step (2,048 tokens, within the 8,192-token budget) and a sliver of M/D/1 wait,
    ``rho / (2 (1 - rho))`` of it with ``rho`` = 0.25 prompts/s x the step."""
    d = Deployment(**FP8, disaggregate=(2, 6))
    light = sustain("llama-3.1-8b", H100, Workload(2048, 256, rate=0.5), d, CAL["h100"])
    heavy = sustain("llama-3.1-8b", H100, Workload(2048, 256), d, CAL["h100"])
    alone = step_time("llama-3.1-8b", d, CAL["h100"], decode=0, context=2048, prefill=2048, keys=1024, seq=2048).seconds
    rho = 0.25 * alone
    assert light.ttft_s == pytest.approx(alone * (1 + rho / (2 * (1 - rho))) + light.kv_transfer_s)
    assert light.ttft_s < heavy.ttft_s


def test_the_ceiling_deployment_drops_every_runtime_cap():
    d = Deployment(tp=2, kv_policy="reserve", kv_fraction=0.9, max_batch=64, max_tokens=2048)
    c = ceiling_deployment(d)
    assert (c.tp, c.kv_policy, c.kv_fraction, c.max_batch, c.max_tokens) == (2, "grow", 1.0, None, None)


def test_serving_roofs_and_a_chip_without_a_calibrated_roof():
    assert get_roof("h100-sxm", "datasheet", "fp8").kind == "datasheet"
    assert get_roof("h100-sxm", "calibrated", "fp8").calibrated
    with pytest.raises(KeyError, match="unknown roof 'measured'"):
        get_roof("h100-sxm", "measured")
    pair = serving_pair("llama-3.1-8b", "b200", Workload(1024, 128), Deployment(weights_dtype="fp8"))
    assert pair.estimate is None and pair.ceiling.fits


def test_a_deployment_takes_a_chips_name_and_only_that_chips_roof():
    """Issue 51: sustain took a Hardware only (a name raised AttributeError) and priced an H100 deployment under
    the H200's roof without a word."""
    w, d = Workload(1024, 128), Deployment()
    by_name = sustain("llama-3-8b", "h100", w, d, get_roof("h100", "calibrated"))
    by_entry = sustain("llama-3-8b", H100, w, d, get_roof("h100", "calibrated"))
    assert by_name.output_tokens_per_s == by_entry.output_tokens_per_s > 0
    assert largest_batch("llama-3-8b", "h100", w, d) == by_name.max_batch
    with pytest.raises(ValueError, match=r"roof is the H200's but hardware is the H100 SXM: price a deployment under "
                                         r"its own chip's roof"):
        sustain("llama-3-8b", "h100", w, d, get_roof("h200", "calibrated"))


def test_a_group_wise_weight_format_computes_in_bf16_unless_told():
    assert Deployment(weights_dtype="int4-g128").math == "bf16" and Deployment(weights_dtype="mxfp4").math == "bf16"
    assert Deployment(weights_dtype="fp8").math == "fp8" and Deployment(weights_dtype="int8").math == "int8"
    assert Deployment(weights_dtype="int4-g128", math_dtype="fp8").math == "fp8"
