"""The cluster model's laws: any layout priced or refused by name; the estimate never below the floor; more
bandwidth or more FLOP/s never slower; the parts add up to the step."""

from dataclasses import replace

import pytest

from roofline.core.cluster_roof import datasheet_cluster_roof
from roofline.core.curve import Curve
from roofline.core.model import load_model
from roofline.core.calibration import get_roof
from roofline.core.checks import UnknownNameError
from roofline.parallel.cluster import PART_ORDER, TrainLayout, check_layout, part_gaps, part_shares, price_step
from roofline.parallel.planner import gpt_model
from roofline.measured.training_runs import development_checks

GPT22 = gpt_model(6144, 64, 48)

LAYOUTS = [
    ("llama-3-8b", "h100-sxm", TrainLayout(seq=8192, tp=2, dp=8, micro_batch=1, global_batch=64)),
    ("llama-3-8b", "h100-sxm", TrainLayout(seq=8192, tp=1, dp=16, zero_stage=3, global_batch=32)),
    ("llama-3-70b", "h100-sxm", TrainLayout(seq=8192, tp=8, pp=4, dp=4, global_batch=256, schedule="interleaved",
                                            chunks=5)),
    ("llama-3.1-405b", "h100-sxm", TrainLayout(seq=131072, tp=8, cp=16, pp=16, dp=8, global_batch=128,
                                               recompute="full", schedule="interleaved", chunks=2)),
    ("llama-3.1-405b", "h100-sxm", TrainLayout(seq=8192, tp=8, pp=16, dp=128, global_batch=2048)),
    ("mixtral-8x7b", "h100-sxm", TrainLayout(seq=4096, tp=2, pp=4, dp=8, ep=8, global_batch=256)),
    ("deepseek-v3", "h100-sxm", TrainLayout(seq=4096, tp=1, pp=16, dp=128, ep=64, global_batch=4096,
                                            recompute="full")),
    (GPT22, "a100-sxm-80gb", TrainLayout(seq=2048, tp=8, micro_batch=4, global_batch=4, attention="standard",
                                         dtype="fp16", grad_dtype="fp16")),
    ("llama-3-8b", "a100-sxm-80gb", TrainLayout(seq=4096, tp=4, cp=2, dp=4, global_batch=32, cp_method="all_to_all")),
]


def _priced(model, gpu, lay):
    dtype = lay.dtype
    return price_step(model, lay, get_roof(gpu, "calibrated", dtype)), price_step(model, lay, datasheet_cluster_roof(gpu, dtype))


@pytest.mark.parametrize("model,gpu,lay", LAYOUTS, ids=[f"{i}" for i in range(len(LAYOUTS))])
def test_the_estimate_is_never_below_the_floor_in_any_part(model, gpu, lay):
    est, floor = _priced(model, gpu, lay)
    assert est.time >= floor.time > 0
    for k, t in floor.parts.items():
        assert est.parts[k] >= t * (1 - 1e-9) or k == "data-parallel", k  # overlap may hide more under the estimate
    assert est.memory == floor.memory  # memory does not depend on the roof
    assert sum(est.parts.values()) == pytest.approx(est.time)


@pytest.mark.parametrize("model,gpu,lay", LAYOUTS[:6], ids=[f"{i}" for i in range(6)])
def test_more_bandwidth_or_more_flops_is_never_slower(model, gpu, lay):
    roof = get_roof(gpu, "calibrated", lay.dtype)
    base = price_step(model, lay, roof).time
    faster = [
        replace(roof, gemm=Curve(roof.gemm.xs, tuple(2 * y for y in roof.gemm.ys)),
                attention={k: Curve(c.xs, tuple(2 * y for y in c.ys)) for k, c in roof.attention.items()}),
        replace(roof, bandwidth=2 * roof.bandwidth),
        replace(roof, nvlink=Curve(roof.nvlink.xs, tuple(2 * y for y in roof.nvlink.ys))),
        replace(roof, port=2 * roof.port, all_to_all_port=2 * roof.all_to_all_port),
    ]
    for r in faster:
        assert price_step(model, lay, r).time <= base * (1 + 1e-12)


def test_a_step_of_the_22b_run_adds_up_by_hand():
    """Korthikanti's 22B run on 8 A100s, one micro-batch of 4: the tensor-parallel share is 48 layers x (2
    all-gathers + 2 reduce-scatters) forward and again backward, plus the head's gather each way and three
    small all-reduces of the loss; no bubble, no data-parallel exchange."""
    lay = TrainLayout(seq=2048, tp=8, micro_batch=4, global_batch=4, attention="standard", dtype="fp16",
                      grad_dtype="fp16", sequence_parallel=True)
    roof = get_roof("a100-sxm-80gb", "calibrated", "fp16")
    p = price_step(GPT22, lay, roof)
    msg = 4 * 2048 * 6144 * 2
    ag = roof.collective_time("all_gather", 8, msg, per_node=8)
    rs = roof.collective_time("reduce_scatter", 8, msg, per_node=8)
    small = roof.collective_time("all_reduce", 8, 4 * 2048 * 4, per_node=8)
    assert p.parts["tensor-parallel"] == pytest.approx(48 * 2 * 2 * (ag + rs) + 2 * ag + 3 * small)
    assert p.parts["bubble"] == 0 and p.parts["data-parallel"] == 0 and p.parts["pipeline sends"] == 0
    assert lay.micro_batches == 1 and lay.gpus == 8


def test_the_bubble_is_a_share_of_an_average_stage():
    lay = TrainLayout(seq=2048, tp=8, pp=8, micro_batch=1, global_batch=64, schedule="interleaved", chunks=3,
                      attention="standard", dtype="fp16", grad_dtype="fp16")
    roof = get_roof("a100-sxm-80gb", "calibrated", "fp16")
    m = gpt_model(12288, 96, 96)
    p = price_step(m, lay, roof)
    one = replace(lay, global_batch=8)  # one micro-batch per pipeline, same stage
    assert p.parts["bubble"] == pytest.approx(price_step(m, one, roof).parts["bubble"])
    deeper = price_step(m, replace(lay, chunks=1, schedule="1f1b"), roof)
    assert deeper.parts["bubble"] == pytest.approx(3 * p.parts["bubble"], rel=0.02)


def test_recomputation_trades_time_for_memory():
    roof = get_roof("h100-sxm", "calibrated")
    lay = TrainLayout(seq=8192, tp=4, pp=2, dp=2, global_batch=64)
    none, sel, full = (price_step("llama-3-70b", replace(lay, recompute=r), roof) for r in ("none", "selective", "full"))
    assert none.time < sel.time < full.time
    assert none.memory_parts["activations"] >= sel.memory_parts["activations"] > full.memory_parts["activations"]
    assert full.hfu > full.mfu


@pytest.mark.parametrize("changes,needle", [
    (dict(pp=40), "pp (40) must be at most the layers (32)"),
    (dict(tp=3), "tp (3) must divide the attention heads (32)"),
    (dict(ep=2), "needs a mixture-of-experts model"),
    (dict(pp=2, schedule="interleaved", chunks=3, global_batch=4), "chunks (3) must divide the layers per stage (16"),
    (dict(schedule="zero-bubble"), "'zero-bubble' is not priced"),
    (dict(schedule="1f1b", chunks=2), "chunks must be 1 for the '1f1b' schedule"),
    (dict(dp=4, micro_batch=2, global_batch=6), "global_batch (6) must be a multiple of dp x micro_batch"),
    (dict(cp=3), "2 x cp (6) to divide seq"),
    (dict(recompute="some"), "unknown recompute 'some'"),
    (dict(attention="flesh"), "did you mean 'flash'"),
    (dict(tp=0), "tp must be"),
    (dict(pp=2, schedule="interleaved", chunks=2, global_batch=3), "multiple of pp (2)"),
])
def test_a_layout_that_cannot_run_is_refused_by_name(changes, needle):
    lay = replace(TrainLayout(seq=8192), **changes)
    with pytest.raises((ValueError, KeyError)) as err:
        check_layout("llama-3-8b", lay)
    assert needle in str(err.value)


def test_expert_parallelism_is_checked_against_the_experts():
    with pytest.raises(ValueError, match=r"ep \(16\) exceeds the experts \(8\)"):
        check_layout("mixtral-8x7b", TrainLayout(seq=4096, dp=16, ep=16))
    with pytest.raises(ValueError, match=r"ep \(8\) must divide dp x cp \(4\)"):
        check_layout("mixtral-8x7b", TrainLayout(seq=4096, dp=4, ep=8))
    with pytest.raises(ValueError, match=r"ep \(3\) must divide the experts \(8\)"):
        check_layout("mixtral-8x7b", TrainLayout(seq=4096, dp=6, ep=3))


def test_expert_parallelism_moves_tokens_and_splits_experts():
    roof = get_roof("h100-sxm", "calibrated")
    base = TrainLayout(seq=4096, tp=1, dp=8, global_batch=8)
    one, eight = (price_step("mixtral-8x7b", replace(base, ep=e), roof) for e in (1, 8))
    assert one.parts["expert all-to-all"] == 0 < eight.parts["expert all-to-all"]
    assert eight.memory_parts["weights"] < one.memory_parts["weights"] / 3


def test_tensor_parallelism_across_nodes_is_priced_on_the_network():
    roof = get_roof("h100-sxm", "calibrated")
    inside = price_step("llama-3-70b", TrainLayout(seq=8192, tp=8, dp=2, global_batch=2), roof)
    across = price_step("llama-3-70b", TrainLayout(seq=8192, tp=16, dp=1, global_batch=2), roof)
    # half the work per GPU, but every exchange leaves the node through the ports
    assert across.parts["tensor-parallel"] > 2 * inside.parts["tensor-parallel"]


def test_context_parallelism_hides_the_ring_behind_long_attention():
    roof = get_roof("h100-sxm", "calibrated")
    lay = TrainLayout(seq=131072, tp=8, cp=16, pp=16, dp=8, global_batch=128, recompute="full")
    p = price_step("llama-3.1-405b", lay, roof)
    assert p.parts["context-parallel"] < 0.05 * p.parts["attention"]
    assert p.fits, p.memory / 1e9


def test_the_roof_must_be_a_cluster_roof():
    with pytest.raises(TypeError, match="roof must be a ClusterRoof"):
        price_step("llama-3-8b", TrainLayout(seq=2048), "h100-sxm")


def test_a_search_ranks_fitting_layouts_and_a_restricted_one_never_beats_it():
    from roofline.parallel.cluster import search

    roof = get_roof("h100-sxm", "calibrated")
    full = search("llama-3-70b", roof, gpus=64, seq=8192, global_batch=128)
    assert full.priced > 100 and full.refused > 0
    times = [p.time for p in full.ranked]
    assert times == sorted(times) and all(p.fits for p in full.ranked)
    assert full.best.layout.gpus == 64
    narrow = search("llama-3-70b", roof, gpus=64, seq=8192, global_batch=128, tps=(8,), recomputes=("full",))
    assert narrow.best.time >= full.best.time
    published = price_step("llama-3-70b", TrainLayout(seq=8192, tp=8, pp=2, dp=4, global_batch=128,
                                                       recompute="full", zero_stage=1), roof)
    assert full.best.time <= published.time  # that layout is in the space searched


def test_a_search_where_nothing_fits_says_so():
    from roofline.parallel.cluster import search

    s = search("llama-3.1-405b", get_roof("h100-sxm", "calibrated"), gpus=8, seq=8192, global_batch=8)
    assert s.ranked == () and s.priced > 0 and s.leanest > get_roof("h100-sxm").hardware.usable_capacity
    with pytest.raises(ValueError, match=r"Llama 3.1 405B fits on no layout of the 8 H100 SXMs at seq 8,192: the "
                                         r"leanest of the \d+ priced needs \d+ GB per GPU against 84.0 GB usable"):
        s.best
    with pytest.raises(ValueError, match="global_batch \\(7\\) is not divisible by dp x micro_batch of any layout"):
        search("llama-3.1-405b", get_roof("h100-sxm"), gpus=8, seq=8192, global_batch=7, micro_batches=(2,),
               tps=(1,), cps=(1,), pps=(1,))


def test_zero_shards_each_experts_state_over_its_own_replicas():
    """With ZeRO-1 over 8 replicas, splitting the experts 8 ways (EP 8) leaves each GPU the same share of the
    experts' optimizer state as ZeRO alone does: EP divides the experts, and ZeRO then has one replica of each
    to shard over instead of eight."""
    roof = get_roof("h100-sxm", "calibrated")
    base = TrainLayout(seq=4096, dp=8, global_batch=8, zero_stage=1)
    one, eight = (price_step("mixtral-8x7b", replace(base, ep=e), roof) for e in (1, 8))
    assert eight.memory_parts["optimizer"] == pytest.approx(one.memory_parts["optimizer"])
    assert eight.memory_parts["weights"] < one.memory_parts["weights"]


# Chapters 7 and 8: the pieces of a micro-batch the chapters set their exchanges against.

def test_layer_seconds_at_the_datasheet_are_the_layers_flops_at_peak_and_its_all_reduces_at_nvlink():
    from roofline.parallel.cluster import layer_seconds

    m = load_model("llama-3-70b")
    sheet = datasheet_cluster_roof("h100-sxm")
    lay = TrainLayout(seq=4096, tp=8, sequence_parallel=False, recompute="none")
    fwd = layer_seconds(m, lay, sheet)
    # 70B's layer: 8192 x (8192 + 2 x 1024 + 8192) + 3 x 8192 x 28672 matmul weights, 4,096 rows, an eighth each
    weights = 8192 * (8192 + 2 * 1024 + 8192) + 3 * 8192 * 28672
    assert fwd["matmuls"] == pytest.approx(2 * 4096 * weights / 8 / 989.4e12, rel=0.03)
    # two ring all-reduces of 4,096 x 8,192 bf16 numbers over 8 GPUs at 450 GB/s
    assert fwd["tensor-parallel"] == pytest.approx(2 * 2 * 7 / 8 * 4096 * 8192 * 2 / 450e9)
    back = layer_seconds(m, lay, sheet, phase="backward")
    assert back["matmuls"] == pytest.approx(2 * fwd["matmuls"])  # the input's gradient and the weight's
    with pytest.raises(KeyError, match="phase"):
        layer_seconds(m, lay, sheet, phase="sideways")


def test_backward_seconds_cover_the_weights_four_n_flops_and_split_over_stages():
    from roofline.parallel.cluster import backward_seconds

    sheet = datasheet_cluster_roof("h100-sxm")
    m = load_model("llama-3-8b")
    one = backward_seconds(m, TrainLayout(seq=4096, recompute="none"), sheet)
    weights = 4 * m.params * 4096 / 989.4e12  # 4 N FLOPs a token at peak: the chapter's backward pass
    assert weights < one < 1.3 * weights  # attention and the small kernels add the rest
    two = backward_seconds(m, TrainLayout(seq=4096, pp=2, recompute="none", global_batch=2), sheet)
    assert two == pytest.approx(one / 2, rel=0.1)  # half the layers, one end each
    with pytest.raises(TypeError, match="roof must be a ClusterRoof"):
        backward_seconds(m, TrainLayout(seq=4096), "h100-sxm")


def test_tp_layer_times_at_the_datasheet_match_the_chapters_count_without_latency():
    from roofline.parallel import cluster as C, tensor_parallel as tp

    sheet = datasheet_cluster_roof("h100-sxm")
    lt = C.tp_layer_times("llama-3-70b", 8, 4096, sheet)
    c, _ = tp.layer_times("llama-3-70b", 8, 4096, "h100-sxm")
    assert lt.matmuls == pytest.approx(c, rel=0.03)  # every FLOP at peak (the narrow K and V at HBM speed)
    # two all-reduces of 67.1 MB over 8 GPUs at 450 GB/s, no latency
    assert lt.exchange == pytest.approx(2 * 2 * 7 / 8 * 4096 * 8192 * 2 / 450e9)
    assert lt.compute_share == pytest.approx(lt.matmuls / (lt.matmuls + lt.exchange))
    # measured: NVLink reaches 362 GB/s of bus bandwidth for a 64 MiB all-reduce, and the matmuls slow too
    cal = C.tp_layer_times("llama-3-70b", 8, 4096, get_roof("h100-sxm", "calibrated"))
    assert cal.exchange == pytest.approx(2 * 2 * 7 / 8 * 4096 * 8192 * 2 / 361.78e9, rel=0.01)
    assert cal.matmuls > lt.matmuls
    # across two nodes the exchange outlasts the matmuls, at the floor and under the estimate
    assert C.tp_layer_times("llama-3-70b", 16, 4096, sheet).exchange_over_compute > 1
    assert C.tp_layer_times("llama-3-70b", 16, 4096, get_roof("h100-sxm", "calibrated")).exchange_over_compute > 1


def test_tp_stack_time_is_the_stages_layers_each_matmuls_plus_exchange():
    from roofline.parallel import cluster as C

    sheet = datasheet_cluster_roof("h100-sxm")
    lt = C.tp_layer_times("llama-3.1-405b", 8, 4096, sheet)
    assert C.tp_stack_time("llama-3.1-405b", 8, 4096, sheet, pp=2) == pytest.approx(63 * (lt.matmuls + lt.exchange))
    with pytest.raises(ValueError, match="pp must be"):
        C.tp_stack_time("llama-3.1-405b", 8, 4096, sheet, pp=0)
    with pytest.raises(TypeError, match="roof must be a ClusterRoof"):
        C.tp_layer_times("llama-3.1-405b", 8, 4096, "h100-sxm")


def test_a_layout_reads_as_prose_in_running_text_and_as_shorthand_on_the_command_line():
    """``describe`` is the command line's shorthand; ``prose`` is what a chapter's sentence shows: every degree,
    the micro-batches and their count, the schedule, the recomputation and the ZeRO stage in words, no symbol."""
    moe = TrainLayout(seq=4096, tp=1, pp=16, dp=128, ep=64, micro_batch=1, global_batch=15360, recompute="none",
                      schedule="1f1b", zero_stage=1)
    assert moe.describe() == "TP 1 x PP 16 x DP 128 x EP 64, micro-batch 1 (120 a step), 1F1B, recompute none, ZeRO-1"
    assert moe.prose() == ("16 pipeline stages, 128-way data parallelism, 64-way expert parallelism and no tensor "
                           "parallelism, 120 micro-batches of 1 sequence a step on the 1F1B schedule, "
                           "no recomputation and ZeRO-1")
    dense = TrainLayout(seq=8192, tp=8, pp=16, dp=64, micro_batch=2, global_batch=2048, recompute="full",
                        schedule="interleaved", chunks=4, zero_stage=1)
    assert dense.prose() == ("16 pipeline stages, 64-way data parallelism and 8-way tensor parallelism with sequence "
                             "parallelism, 16 micro-batches of 2 sequences a step on the interleaved schedule "
                             "of 4 chunks per GPU, full recomputation and ZeRO-1")
    flat = TrainLayout(seq=4096, tp=1, dp=8, micro_batch=4, global_batch=64, zero_stage=0)
    assert flat.prose() == ("8-way data parallelism and no tensor parallelism, 2 accumulated micro-batches of 4 sequences "
                            "a step, selective recomputation and no ZeRO sharding")
    assert "m =" not in moe.prose() + dense.prose() + flat.prose()


def test_token_rate_per_gpu_is_the_batch_over_the_step_and_the_gpus():
    from roofline.parallel.cluster import estimate_step, token_rate_per_gpu
    from roofline.parallel.cluster import TrainLayout

    lay = TrainLayout(seq=4096, tp=1, dp=8, ep=8, global_batch=16)
    _, est = estimate_step("mixtral-8x7b", "h100-sxm", lay)
    assert token_rate_per_gpu(est) == pytest.approx(16 * 4096 / (est.time * 8))
    a2a = est.parts["expert all-to-all"]
    assert a2a > 0
    assert token_rate_per_gpu(est, ("expert all-to-all",)) == pytest.approx(16 * 4096 / ((est.time - a2a) * 8))
    with pytest.raises(KeyError, match="hidden"):
        token_rate_per_gpu(est, ("all-to-all",))
    with pytest.raises(TypeError, match="price"):
        token_rate_per_gpu(lay)


def test_part_shares_add_to_one_and_part_gaps_to_the_difference_of_the_steps(checks):
    c = checks[0]
    shares = part_shares(c.estimate)
    assert list(shares) == list(PART_ORDER)
    assert sum(shares.values()) == pytest.approx(1.0)
    gaps = part_gaps(c.floor, c.estimate)
    assert sum(gaps.values()) == pytest.approx(c.estimate.time - c.floor.time)
    assert gaps["matmuls"] > 0  # the calibrated matmuls are slower than the peak


@pytest.fixture(scope="module")
def checks():
    return development_checks()


def test_the_planners_grid_and_what_a_search_gives_back():
    from roofline.parallel.cluster import degree_grid, estimate_step, search

    assert degree_grid("llama-3-8b", 8192) == {"tps": (1, 2, 4, 8), "cps": (1, 2, 4, 8), "eps": (1,)}
    assert degree_grid("llama-3-8b", 2048, gpus_per_node=4) == {"tps": (1, 2, 4), "cps": (1, 2), "eps": (1,)}
    assert degree_grid("mixtral-8x7b", 4096)["eps"] == (1, 2, 4, 8)
    found = search("llama-3-8b", get_roof("h100-sxm", "calibrated"), gpus=16, seq=4096, global_batch=64)
    assert found.fitting == len(found.ranked) > 0 and {p.layout.cp for p in found.ranked} > {1}
    floors = found.floors(3)
    assert len(floors) == 3 and all(f.layout == e.layout and f.time <= e.time for f, e in zip(floors, found.ranked))
    floor, est = estimate_step("llama-3-8b", "h100-sxm", found.best.layout)
    assert est.time == pytest.approx(found.best.time) and floor.time == pytest.approx(floors[0].time)
    assert estimate_step("llama-3-8b", "b200", found.best.layout)[1] is None  # no calibrated roof: the floor alone
    with pytest.raises(ValueError, match="roof 'calibrated' has no data for the B200"):
        estimate_step("llama-3-8b", "b200", found.best.layout, roof="calibrated")


def test_the_planners_inputs_are_checked_before_any_layout_is_priced():
    """Issue 51's edges: a degree of 0 names its list (it divided by zero), a format no training recipe has is an
    unknown dtype (not "no layout divides the global batch"), and a ZeRO stage of True is not stage 1."""
    from roofline.parallel.cluster import check_layout, search

    roof = get_roof("h100-sxm", "calibrated")
    for name in ("tps", "cps", "pps", "eps", "micro_batches", "chunks"):
        with pytest.raises(ValueError, match=f"{name} must be a whole number"):
            search("llama-3-8b", roof, gpus=8, seq=4096, global_batch=8, **{name: (0,)})
    with pytest.raises(KeyError, match="unknown dtype 'int4'"):
        search("llama-3-8b", roof, gpus=8, seq=4096, global_batch=8, dtype="int4")
    with pytest.raises(ValueError, match="zero_stage must be 0, 1, 2 or 3, got True"):
        check_layout("llama-3-8b", TrainLayout(seq=4096, dp=2, zero_stage=True))


# ------------------------------------------------------------------ settings a source leaves open (appendix C, train)


def test_open_layouts_are_every_value_that_runs_of_what_was_left_open():
    from roofline.parallel.cluster import open_layouts

    lay = TrainLayout(seq=4096, tp=2, pp=4, dp=4, global_batch=64, recompute="full")
    assert open_layouts("llama-3-8b", lay) == (lay,)
    # 32 layers over 4 stages: 8 a stage; interleaving depths 2, 4 and 8 divide it, plain 1F1B beside them
    got = open_layouts("llama-3-8b", lay, ("chunks",))
    assert [(x.schedule, x.chunks) for x in got] == [("1f1b", 1), ("interleaved", 2), ("interleaved", 4),
                                                      ("interleaved", 8)]
    inter = open_layouts("llama-3-8b", replace(lay, schedule="interleaved", chunks=2), "chunks")
    assert [x.chunks for x in inter] == [2, 4, 8]
    # 64 sequences over 4 replicas: 16 each, so micro-batches 1, 2, 4 and 8 all divide; the interleaved schedule
    # needs the micro-batches per pipeline (16, 8, 4, 2) to be a multiple of pp = 4, which 2 is not
    both = open_layouts("llama-3-8b", replace(lay, schedule="interleaved", chunks=2), ("micro_batch", "chunks"))
    assert sorted({x.micro_batch for x in both}) == [1, 2, 4]
    assert len(open_layouts("llama-3-8b", lay, ("micro_batch", "recompute"))) == 4 * 3


def test_open_settings_are_refused_where_they_mean_nothing():
    from roofline.parallel.cluster import open_layouts

    with pytest.raises(ValueError, match="needs the global batch"):
        open_layouts("llama-3-8b", TrainLayout(seq=4096, dp=8), ("micro_batch",))
    with pytest.raises(UnknownNameError, match="unknown open 'microbatch'.*micro_batch"):
        open_layouts("llama-3-8b", TrainLayout(seq=4096, dp=8), ("microbatch",))
    with pytest.raises(ValueError, match="must divide the attention heads"):
        open_layouts("llama-3-8b", TrainLayout(seq=4096, tp=3, dp=8, global_batch=64), ("micro_batch",))


def test_estimate_step_takes_the_fastest_that_fits_of_the_open_settings():
    from roofline.parallel.cluster import estimate_step, open_layouts

    lay = TrainLayout(seq=8192, dp=8, global_batch=64, zero_stage=3)
    open_ = ("micro_batch", "recompute")
    roof = get_roof("h100-sxm", "calibrated")
    priced = [price_step("llama-3-8b", x, roof) for x in open_layouts("llama-3-8b", lay, open_)]
    fastest = min((p for p in priced if p.fits), key=lambda p: p.time)
    assert any(not p.fits for p in priced)  # a faster layout that does not fit is not taken
    floor, est = estimate_step("llama-3-8b", "h100-sxm", lay, open=open_)
    assert est.layout == fastest.layout == floor.layout and est.time == fastest.time
    assert floor.time <= est.time


# ------------------------------------------------------------------------------- FSDP as PyTorch runs it (item 3)


def _dp_traffic(p):
    """Seconds of data-parallel traffic of a step, exposed and hidden together."""
    return p.parts["data-parallel"] + p.hidden.get("data-parallel", 0.0)


def test_reshard_after_forward_off_moves_traffic_to_memory_as_the_formula_says():
    """Llama 3.1 8B on 32 H100s, FSDP over all 32, two micro-batches a step. Resharding after the forward pass
    (FSDP's default) holds 1/32 of the bf16 weights and gradients and, per micro-batch, gathers the weights twice
    (forward and backward) and reduce-scatters the gradients once: 2 x 2 gathers and 2 scatters a step. Kept
    gathered to the backward pass: the whole 2 bytes a parameter of weights and, accumulated over two
    micro-batches before the one reduction, of gradients; one gather and one scatter a step."""
    m = load_model("llama-3.1-8b")
    roof = get_roof("h100-sxm", "calibrated")
    on = TrainLayout(seq=8192, dp=32, global_batch=64, zero_stage=3, recompute="none")
    off = replace(on, reshard_after_forward=False)
    p_on, p_off = price_step(m, on, roof), price_step(m, off, roof)
    n = m.params  # tp 1, pp 1: every parameter on every GPU's stage
    assert p_on.memory_parts["weights"] == pytest.approx(2 * n / 32)
    assert p_off.memory_parts["weights"] == pytest.approx(2 * n)
    assert p_off.memory_parts["gradients"] == pytest.approx(2 * n) and p_on.memory_parts["gradients"] == pytest.approx(2 * n / 32)
    assert p_off.memory_parts["optimizer"] == p_on.memory_parts["optimizer"] == pytest.approx(12 * n / 32)
    assert p_off.memory - p_on.memory == pytest.approx(2 * 2 * n * (1 - 1 / 32))
    size = 2 * n  # the stage's weights in bf16, the buffer of each gather and scatter
    ag = roof.collective_time("all_gather", 32, size, per_node=8)
    rs = roof.collective_time("reduce_scatter", 32, size, per_node=8)
    assert _dp_traffic(p_on) == pytest.approx(2 * (2 * ag + rs))
    assert _dp_traffic(p_off) == pytest.approx(ag + rs)
    assert p_off.memory_parts["activations"] == p_on.memory_parts["activations"]


def test_hybrid_sharding_shards_over_the_group_and_reduces_across_groups():
    """FSDP hybrid over groups of 8 (one node) of 32 ranks: the optimizer state is an eighth of 12 bytes a
    parameter, not a 32nd; the gradients are reduce-scattered in the group, and each rank all-reduces its eighth
    with its counterparts in the other 3 groups, one per node."""
    m = load_model("llama-3.1-8b")
    roof = get_roof("h100-sxm", "calibrated")
    lay = TrainLayout(seq=8192, dp=32, global_batch=32, zero_stage=3, shard_group=8, recompute="none")
    p = price_step(m, lay, roof)
    n = m.params
    assert p.memory_parts["optimizer"] == pytest.approx(12 * n / 8) and p.memory_parts["weights"] == pytest.approx(2 * n / 8)
    size = 2 * n
    ag = roof.collective_time("all_gather", 8, size, per_node=8)
    rs = roof.collective_time("reduce_scatter", 8, size, per_node=8)
    across = roof.collective_time("all_reduce", 4, size / 8, per_node=1)
    assert _dp_traffic(p) == pytest.approx(2 * ag + rs + across)
    assert lay.sharding_text == "ZeRO-3 (FSDP, hybrid over 8)" and lay.shards == 8
    # ZeRO-1 over the same groups: reduce-scatter and gather in the group, the shard all-reduced across, once a step
    z1 = price_step(m, replace(lay, zero_stage=1), roof)
    assert z1.memory_parts["optimizer"] == pytest.approx(12 * n / 8) and z1.memory_parts["weights"] == pytest.approx(2 * n)
    assert _dp_traffic(z1) == pytest.approx(ag + rs + across)


@pytest.mark.parametrize("fields, match", [
    ({"zero_stage": 1, "reshard_after_forward": False}, "reshard_after_forward applies to ZeRO-3"),
    ({"zero_stage": 3, "shard_group": 3}, r"shard_group \(3\) must divide the data-parallel ranks"),
    ({"zero_stage": 0, "shard_group": 4}, "needs a ZeRO stage of 1 or more"),
    ({"zero_stage": 3, "shard_group": 0}, "shard_group must be"),
])
def test_bad_fsdp_settings_are_refused_naming_the_constraint(fields, match):
    with pytest.raises(ValueError, match=match):
        check_layout("llama-3.1-8b", TrainLayout(seq=4096, dp=8, **fields))


@pytest.mark.parametrize("schedule", ["dualpipe", "DualPipeV"])
def test_dualpipe_is_refused_by_name_with_what_it_would_overlap(schedule):
    with pytest.raises(ValueError, match="DualPipe.*not priced.*all-to-all"):
        check_layout("qwen3-30b-a3b", TrainLayout(seq=4096, pp=2, dp=4, ep=4, schedule=schedule))
