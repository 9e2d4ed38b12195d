"""The data-parallel step of chapter 7: ZeRO's traffic, memory reused from chapter 2, overlap, the hiding law."""

import dataclasses
from types import MappingProxyType

import pytest

from roofline.parallel import data_parallel as dp
from roofline.workloads import memory, training
from roofline.core import network


def step(**kw):
    base = dict(seq=4096, achieved=0.5, recompute="full")
    return dp.data_parallel_step("llama-3-8b", "h100-sxm", **{**base, **kw})


@pytest.mark.parametrize("nodes", [1, 4])
def test_zero3_sends_one_and_a_half_times_plain_data_parallelism(nodes):
    plain, z1, z2, z3 = (step(nodes=nodes, zero_stage=s) for s in range(4))
    assert z1.sent == pytest.approx(plain.sent) and z2.sent == pytest.approx(plain.sent)
    assert z3.sent == pytest.approx(1.5 * plain.sent)
    # and plain data parallelism sends what the seed counts: the bytes of one all-reduce of the gradients
    assert plain.sent == pytest.approx(network.data_parallel_bytes(plain.model.params, plain.gpus))


def test_memory_is_chapter_twos_footprint():
    for stage in range(4):
        s = step(nodes=2, zero_stage=stage)
        want = memory.training_footprint("llama-3-8b", 4096, 1, gpus=16, zero_stage=stage, recompute="full")
        assert float(s.footprint.total) == pytest.approx(float(want.total))
    hybrid = step(nodes=4, zero_stage=3, hybrid=True)
    inside = memory.training_footprint("llama-3-8b", 4096, 1, gpus=8, zero_stage=3, recompute="full")
    assert float(hybrid.footprint.total) == pytest.approx(float(inside.total))
    assert float(hybrid.footprint.total) > float(step(nodes=4, zero_stage=3).footprint.total)


def test_compute_is_the_training_step():
    s = step(nodes=2)
    t = training.training_step("llama-3-8b", 4096, recompute="full")
    assert s.compute == pytest.approx(float(t.flops) / (0.5 * s.peak))
    assert s.model_flops == pytest.approx(float(t["forward"].flops + t["backward"].flops))
    assert s.mfu == pytest.approx(s.model_flops / (s.time * s.peak))
    assert s.time == pytest.approx(s.compute + s.exposed) and s.exposed <= s.communication


def test_exposed_time_law():
    # link faster than compute: only the last unit shows; slower: all the excess plus one unit's share
    assert dp.exposed_time(1.0, 10, 0.05) == pytest.approx(0.05)
    assert dp.exposed_time(1.0, 10, 0.2) == pytest.approx(0.1 + 2.0 - 1.0)
    assert dp.exposed_time(1.0, 1, 0.3) == pytest.approx(0.3)  # one bucket: nothing overlaps
    assert dp.exposed_time(1.0, 10, 0.0) == 0
    # more buckets of the same total traffic never expose more, while the link keeps up
    total = 0.5
    exposed = [dp.exposed_time(1.0, k, total / k) for k in (1, 2, 4, 8, 16)]
    assert exposed == sorted(exposed, reverse=True)


def test_buckets_trade_latency_for_overlap():
    one = step(nodes=4, bucket=32e9)  # one bucket: the whole all-reduce after the backward pass
    many = step(nodes=4)
    tiny = step(nodes=4, bucket=64e3)  # so many buckets the latency terms pile up
    assert one.exposed > 100 * many.exposed
    assert tiny.communication > 2 * many.communication
    assert many.sent == pytest.approx(one.sent)


def test_one_gpu_sends_nothing():
    s = step(nodes=1, gpus_per_node=1)
    assert s.sent == 0 and s.exposed == 0 and s.communication == 0


def test_exposed_time_grows_as_tokens_per_gpu_shrink():
    seqs = [256, 512, 1024, 2048, 4096]
    exposed = [step(nodes=16, seq=s, recompute="none").exposed for s in seqs]
    assert exposed == sorted(exposed, reverse=True) and exposed[0] > exposed[-1]


def test_hiding_threshold_is_the_links_ridge_and_scales_as_one_over_its_bandwidth(h100):
    t = dp.hiding_tokens("llama-3-8b", h100, nodes=1, gpus_per_node=8)
    nvlink = h100.interconnect["scale_up"].each_way
    assert t == pytest.approx(7 / 8 * h100.peak_flops("bf16") / nvlink)
    # the model's size cancels
    assert dp.hiding_tokens("llama-3-70b", h100) == pytest.approx(t)
    # a network twice as fast halves the threshold on it
    flat = dp.hiding_tokens("llama-3-8b", h100, nodes=16, tier="network")
    link = h100.interconnect["network"]
    faster = h100.with_(interconnect=MappingProxyType({**h100.interconnect, "network": dataclasses.replace(
        link, bytes_per_s=2 * link.bytes_per_s)}))
    assert dp.hiding_tokens("llama-3-8b", faster, nodes=16, tier="network") == pytest.approx(flat / 2)
    # ZeRO-3 needs half as many tokens again; a GPU at half its peak needs half as many
    assert dp.hiding_tokens("llama-3-8b", h100, zero_stage=3) == pytest.approx(1.5 * t)
    assert dp.hiding_tokens("llama-3-8b", h100, achieved=0.5) == pytest.approx(t / 2)


def test_hiding_threshold_marks_where_exposed_time_appears(h100):
    t = dp.hiding_tokens("llama-3-8b", h100, nodes=16, achieved=0.5)
    below = dp.data_parallel_step("llama-3-8b", h100, nodes=16, seq=int(t / 2), achieved=0.5, recompute="none")
    above = dp.data_parallel_step("llama-3-8b", h100, nodes=16, seq=int(2 * t), achieved=0.5, recompute="none")
    assert below.exposed > 0.2 * below.communication
    assert above.exposed < 0.05 * above.communication


def test_hybrid_sharding_keeps_accumulated_steps_off_the_network():
    full = step(nodes=4, zero_stage=3, accumulation=8)
    hybrid = step(nodes=4, zero_stage=3, hybrid=True, accumulation=8)
    assert hybrid.sent_network < full.sent_network / 8
    assert hybrid.sent_scale_up == pytest.approx(full.sent_scale_up)


def test_strategy_names():
    assert [dp.strategy_name(s) for s in range(4)] == ["DDP", "ZeRO-1", "ZeRO-2", "ZeRO-3 (FSDP full)"]
    assert dp.strategy_name(3, hybrid=True) == "FSDP hybrid"


@pytest.mark.parametrize("call, error, message", [
    (lambda: step(nodes=0), ValueError, "nodes must be"),
    (lambda: step(zero_stage=4), ValueError, "stage must be 0, 1, 2 or 3"),
    (lambda: step(zero_stage=2, hybrid=True), ValueError, "zero_stage must be 3 with hybrid=True"),
    (lambda: step(hybrid="yes"), TypeError, "hybrid must be True or False"),
    (lambda: step(achieved=1.5), ValueError, "cannot exceed 1"),
    (lambda: step(bucket=0), ValueError, "bucket must be"),
    (lambda: step(accumulation=0.5), ValueError, "accumulation must be"),
    (lambda: dp.data_parallel_step("mixtral-8x7b", "h100"), Exception, "experts"),
    (lambda: dp.exposed_time(1.0, 0, 0.1), ValueError, "units must be"),
    (lambda: dp.hiding_tokens("llama-3-8b", "h100", achieved=2), ValueError, "cannot exceed 1"),
    (lambda: dp.hiding_tokens("llama-3-8b", "h100", tier="ib"), KeyError, "unknown tier 'ib'"),
    (lambda: dp.strategy_name(5), ValueError, "stage must be"),
])
def test_bad_input(call, error, message):
    with pytest.raises(error, match=__import__("re").escape(message)):
        call()


def test_gradient_bytes_and_buckets_by_hand():
    n = 8_030_261_248  # Llama 3 8B's parameters
    assert dp.gradient_bytes("llama-3-8b") == 2 * n
    assert dp.gradient_bytes("llama-3-8b", "fp32") == 4 * n
    assert dp.bucket_count("llama-3-8b") == 613  # 16.06 GB / 25 MiB = 612.7, rounded up
    assert dp.bucket_count("llama-3-8b", bucket=1e12) == 1


def test_exchange_intensity_is_eight_sevenths_of_the_tokens_on_eight_gpus():
    # 4 N t / (2 * 7/8 * 2 N) = 8 t / 7: the N cancels
    assert dp.exchange_intensity("llama-3-8b", 4096, 8) == pytest.approx(8 * 4096 / 7)
    assert dp.exchange_intensity("llama-3-70b", 4096, 8) == pytest.approx(8 * 4096 / 7)


def test_exposure_sweep_is_the_steps_and_the_threshold():
    sweep = dp.exposure_sweep("llama-3-8b", "h100-sxm", [512, 8192], nodes=16)
    s = dp.data_parallel_step("llama-3-8b", "h100-sxm", nodes=16, seq=8192, achieved=0.5, recompute="none")
    assert sweep["compute"][1] == s.compute and sweep["exposed"][1] == s.exposed
    assert sweep["threshold"] == dp.hiding_tokens("llama-3-8b", "h100-sxm", nodes=16, achieved=0.5)
    assert sweep["exposed"][0] > 0


def test_zero3_layer_times():
    from roofline.core.collectives import collective_time

    s = dp.data_parallel_step("llama-3-70b", "h100-sxm", nodes=8, zero_stage=3,
                              seq=4096, achieved=0.5)
    n = 70_553_706_496
    assert dp.layer_gather_time(s) == pytest.approx(collective_time("all_gather", 64, 2 * n / 80, "h100-sxm"))
    assert dp.layer_forward_time(s) * 80 == pytest.approx(s.forward_time)


def test_published_exchange_reads_the_llama3_table():
    e = dp.published_exchange("h100-sxm")
    n = 405_853_388_800  # Llama 3.1 405B's parameters
    assert (e.dp, e.nodes, e.global_batch) == (64, 1024, 2048)  # 8,192 / (8 x 16); 16M tokens / 8,192
    assert e.flops_per_gpu == pytest.approx(6 * n * 2**24 / 8192)
    assert e.shard == pytest.approx(2 * n / 128)
    assert e.floor_share == pytest.approx(430e12 / 989.4e12)  # the published rate over peak
    assert e.backward == pytest.approx(2 / 3 * e.floor)
    assert e.window(4) == pytest.approx(e.backward / 4)
    assert e.tokens_per_replica == 2**24 / 64


def test_published_per_gpu_of_zero():
    per_gpu, share = dp.published_per_gpu("v100-sxm2", "fp16")
    assert per_gpu == 15e15 / 400 == 37.5e12
    assert share == pytest.approx(0.3)  # 37.5 of the V100's 125 TFLOP/s


def test_tier_thresholds_by_hand():
    t = dp.tier_thresholds("a100-sxm-80gb", nodes=16)
    assert t["scale_up"] == pytest.approx((7 / 8, 1040.0, 910.0))  # 312 TFLOP/s over 300 GB/s
    assert t["network"] == pytest.approx((15 / 16 / 8, 12480.0, 1462.5))  # over 25 GB/s


@pytest.mark.parametrize("call, error, message", [
    (lambda: dp.gradient_bytes("llama-3-8b", "fp7"), KeyError, "unknown dtype"),
    (lambda: dp.bucket_count("llama-3-8b", bucket=0), ValueError, "bucket must be"),
    (lambda: dp.tier_thresholds("h100-pcie", nodes=2), ValueError, "tier must be one of"),
    (lambda: dp.exchange_intensity("llama-3-8b", 4096, n=1), ValueError, "n must be"),
    (lambda: dp.exchange_intensity("llama-3-8b", -1), ValueError, "tokens must be"),
    (lambda: dp.layer_gather_time("step"), TypeError, "step must be a DataParallelStep"),
    (lambda: dp.layer_forward_time(None), TypeError, "step must be a DataParallelStep"),
    (lambda: dp.published_exchange().window(0), ValueError, "micro_batches must be"),
    (lambda: dp.tier_thresholds("a100-sxm-80gb", nodes=1), ValueError, "nodes must be"),
])
def test_chapter_helpers_bad_input(call, error, message):
    with pytest.raises(error, match=__import__("re").escape(message)):
        call()


def test_hierarchical_latency_steps_by_hand():
    assert dp.hierarchical_latency_steps(256, 8) == 2 * 7 + 2 * 31  # a ring of 8 inside, of 32 nodes across
    assert dp.hierarchical_latency_steps(8, 8) == 14
    assert dp.hierarchical_latency_steps(64, 8, "all_gather") == 7 + 7
    with pytest.raises(ValueError, match=r"n must be a whole number of nodes of gpus_per_node \(8\)"):
        dp.hierarchical_latency_steps(12, 8)


def test_roof_hiding_tokens_prices_the_all_reduce_against_the_cluster_models_backward_pass():
    from roofline.core.cluster_roof import datasheet_cluster_roof
    from roofline.core.calibration import get_roof
    from roofline.parallel.cluster import TrainLayout, backward_seconds

    sheet, cal = datasheet_cluster_roof("h100-sxm"), get_roof("h100-sxm", "calibrated")
    tokens = dp.roof_hiding_tokens("llama-3-8b", sheet, nodes=1)
    per_token = backward_seconds("llama-3-8b", TrainLayout(seq=4096, recompute="none", zero_stage=0), sheet) / 4096
    # at the threshold the backward pass lasts one ring all-reduce of 16.06 GB over 8 GPUs at 450 GB/s
    assert tokens * per_token == pytest.approx(2 * 7 / 8 * 16.06e9 / 450e9, rel=1e-3)
    # the fuller backward pass (attention, small kernels) lowers the chapter's 4 N threshold, a little
    chapter = dp.hiding_tokens("llama-3-8b", "h100-sxm", nodes=1)
    assert 0.8 * chapter < tokens < chapter
    # the H100's measured matmuls fall further short of the datasheet than its links: the estimate hides sooner
    assert dp.roof_hiding_tokens("llama-3-8b", cal, nodes=1) < tokens
    assert dp.roof_hiding_tokens("llama-3-8b", cal, nodes=16) > dp.roof_hiding_tokens("llama-3-8b", cal, nodes=1)


def test_zero_layouts_name_the_chapters_four_stages_over_all_gpus():
    lays = dp.zero_layouts(seq=4096, gpus=64)
    assert list(lays) == ["DDP", "ZeRO-1", "ZeRO-2", "ZeRO-3 (FSDP full)"]
    assert [lay.zero_stage for lay in lays.values()] == [0, 1, 2, 3]
    assert all(lay.dp == lay.gpus == 64 and lay.tp == lay.pp == 1 and lay.recompute == "full" for lay in lays.values())


def test_roof_bucket_exchange_sends_each_bucket_at_the_bus_bandwidth_for_its_size():
    from roofline.core.cluster_roof import datasheet_cluster_roof
    from roofline.core.calibration import get_roof

    sheet, cal = datasheet_cluster_roof("h100-sxm"), get_roof("h100-sxm", "calibrated")
    # at the datasheet there is no latency: 613 buckets of 25 MiB cost what one all-reduce of 16.06 GB costs
    # over one node, 2 x 7/8 of the buffer at 450 GB/s
    one = dp.roof_bucket_exchange("llama-3-8b", sheet, nodes=1)
    assert dp.bucket_count("llama-3-8b") == 613
    assert one.busy == pytest.approx(2 * 7 / 8 * 16.06e9 / 450e9, rel=1e-3)
    # measured, a 1 MiB all-reduce inside a node reaches 43.7 GB/s of bus bandwidth, a tenth of the link
    small = dp.roof_bucket_exchange("llama-3-8b", cal, nodes=1, bucket=2**20)
    assert small.busy == pytest.approx(2 * 7 / 8 * 16.06e9 / 43.7e9, rel=0.01)
    # across 32 nodes the default bucket exposes far more than one ten times larger, and one bucket exposes all
    runs = [dp.roof_bucket_exchange("llama-3-8b", cal, nodes=32, bucket=b) for b in (2**20, dp.DEFAULT_BUCKET, 2**28)]
    assert runs[0].exposed > runs[1].exposed > 10 * runs[2].exposed
    whole = dp.roof_bucket_exchange("llama-3-8b", cal, nodes=32, bucket=dp.gradient_bytes("llama-3-8b"))
    assert whole.exposed == pytest.approx(whole.busy)
