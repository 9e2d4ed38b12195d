"""The planner of chapter 9: every layout it returns fits, the best is the fastest that fits, the grid is
priced the way the pieces it is made of price one layout."""

import re
import numpy as np
import pytest

from roofline.core.hardware import get_hardware
from roofline.core.model import param_count
from roofline.parallel.pipeline import bubble_fraction
from roofline.parallel.planner import plan
from roofline.core.policies import RECOMPUTES


@pytest.fixture(scope="module")
def seventy():
    return plan("llama-3-70b", "h100", nodes=8, gpus_per_node=8, seq=8192, global_batch=512)


def test_returned_layouts_fit(seventy):
    usable = get_hardware("h100").usable_capacity
    for x in seventy.top(20):
        assert x.fits and x.memory <= usable
    assert np.all(seventy.grid["memory"][seventy.ranked] <= usable)
    assert not np.all(seventy.grid["fits"])  # some layouts were rejected for memory


def test_best_is_at_least_as_fast_as_every_other_fitting_layout(seventy):
    best = seventy.best
    fits = seventy.grid["fits"]
    assert best.time <= seventy.grid["time"][fits].min() + 1e-12
    # and the rejected layouts faster than it were rejected for memory alone
    faster = seventy.grid["time"] < best.time
    assert not np.any(faster & fits)


def test_degrees_multiply_to_the_cluster_and_divide_the_batch(seventy):
    g = seventy.grid
    assert np.all(g["tp"] * g["pp"] * g["dp"] == 64)
    assert np.all(g["dp"] * g["micro_batch"] * g["micro_batches"] == 512)
    assert np.all(g["tp"] <= 8)


def test_time_is_the_sum_of_its_parts_and_the_bubble_follows_the_schedule(seventy):
    for x in seventy.top(10):
        assert x.time == pytest.approx(x.compute + x.bubble + x.pipeline_comm + x.data_comm)
        schedule = "1f1b" if x.v == 1 else "interleaved"
        assert x.bubble / x.compute == pytest.approx(bubble_fraction(x.pp, x.micro_batches, x.v, schedule))


def test_mfu_counts_the_model_flops(seventy):
    x = seventy.best
    # 6 N per token and attention: between 6 N and 1.5 x 6 N per token at 8k
    tokens = 512 * 8192
    flops = x.tflops * x.time * 64
    assert 6 * param_count("llama-3-70b") * tokens < flops < 1.5 * 6 * param_count("llama-3-70b") * tokens
    assert x.mfu == pytest.approx(x.tflops / get_hardware("h100").peak_flops("bf16"))


def test_more_memory_saved_costs_time(seventy):
    f = seventy.frontier()
    assert len(f) >= 2
    assert all(a.time <= b.time and a.memory > b.memory for a, b in zip(f, f[1:]))


def test_405b_on_16k_gpus_uses_a_full_node_of_tensor_parallelism():
    p = plan("llama-3.1-405b", "h100", nodes=2048, gpus_per_node=8, seq=8192, global_batch=2048)
    best = p.best
    assert best.tp * best.pp * best.dp == 16384
    assert best.tp == 8 and best.pp > 1  # the model state alone needs several nodes' worth of GPUs
    assert 0 < best.mfu < 1


def test_bad_input():
    with pytest.raises(ValueError, match="global_batch"):
        plan("llama-3-8b", "h100", nodes=64, seq=4096, global_batch=1)
    with pytest.raises(ValueError, match="fits on no layout") as err:
        plan("llama-3.1-405b", "h100", nodes=1, seq=8192, global_batch=8)
    # the leanest layout still holds 16 bytes a parameter over the node's 8 GPUs
    assert err.value.needed > 16 * param_count("llama-3.1-405b") / 8
    with pytest.raises(ValueError, match="nodes"):
        plan("llama-3-8b", "h100", nodes=0, seq=4096, global_batch=8)
    with pytest.raises(KeyError, match="recomputes"):
        plan("llama-3-8b", "h100", nodes=1, seq=4096, global_batch=8, recomputes=("sometimes",))
    with pytest.raises(ValueError, match="achieved"):
        plan("llama-3-8b", "h100", nodes=1, seq=4096, global_batch=8, achieved=1.5)


def test_megatron_configurations_have_the_published_parameter_counts():
    from roofline.parallel.planner import PUBLISHED, gpt_model

    for run in PUBLISHED["megatron_gpt"][0]:
        m = gpt_model(run["hidden"], run["heads"], run["layers"])
        assert param_count(m) == pytest.approx(run["params"], rel=1e-3)
        assert run["gpus"] % (run["tp"] * run["pp"]) == 0


def test_one_stage_compute_is_the_tensor_parallel_step_of_chapter_8():
    from roofline.parallel.tensor_parallel import predict_tp, tp_training_step

    p = plan("llama-3-8b", "h100", nodes=1, gpus_per_node=8, seq=4096, global_batch=8)
    g = p.grid
    sel = np.flatnonzero((g["tp"] == 8) & (g["pp"] == 1) & (g["micro_batch"] == 1) & (g["recompute"] == 0))
    assert len(sel) == 1
    x = p.layout(int(sel[0]))
    step = predict_tp(tp_training_step("llama-3-8b", 8, 4096, 1, sequence_parallel=True), "h100", gpus_per_node=8)
    assert x.compute == pytest.approx(8 * step.time)
    # two stages: the slower stage runs half the layers and the output head, so more than half the step
    sel2 = np.flatnonzero((g["tp"] == 4) & (g["pp"] == 2) & (g["micro_batch"] == 1) & (g["recompute"] == 0)
                          & (g["v"] == 1))
    two = p.layout(int(sel2[0]))
    one4 = predict_tp(tp_training_step("llama-3-8b", 4, 4096, 1, sequence_parallel=True), "h100", gpus_per_node=8)
    assert 0.5 * 8 * one4.time < two.compute < 8 * one4.time


def test_where_picks_the_layouts_with_the_fields_asked(seventy):
    from roofline.parallel import planner

    idx = planner.where(seventy, tp=8, pp=2, recompute="full")
    g = seventy.grid
    assert idx.size > 0
    assert (g["tp"][idx] == 8).all() and (g["pp"][idx] == 2).all()
    assert (g["recompute"][idx] == RECOMPUTES.index("full")).all()
    # every layout of the grid with those degrees, counted by hand
    assert idx.size == sum(1 for i in range(seventy.count) if g["tp"][i] == 8 and g["pp"][i] == 2 and g["recompute"][i] == 2)
    fast = planner.where(seventy, fitting=True, tp=8)
    assert list(fast) == [i for i in seventy.ranked if g["tp"][i] == 8]


def test_first_layout_with_no_fields_is_the_best(seventy):
    from roofline.parallel import planner

    assert planner.first_layout(seventy) == seventy.best
    lay = planner.first_layout(seventy, tp=4)
    assert lay.tp == 4
    assert all(lay.time <= seventy.layout(int(i)).time for i in seventy.ranked if seventy.grid["tp"][i] == 4)


@pytest.mark.parametrize("call, error, message", [
    (lambda p: __import__("roofline.parallel.planner", fromlist=["x"]).where("plan", tp=8), TypeError, "plan must be a Plan"),
    (lambda p: __import__("roofline.parallel.planner", fromlist=["x"]).where(p, tensor=8), KeyError, "unknown field 'tensor'"),
    (lambda p: __import__("roofline.parallel.planner", fromlist=["x"]).where(p, recompute="some"), KeyError, "unknown recompute"),
    (lambda p: __import__("roofline.parallel.planner", fromlist=["x"]).first_layout(p, tp=3), ValueError, "no fitting layout of the plan has tp=3"),
])
def test_where_bad_input(seventy, call, error, message):
    with pytest.raises(error, match=__import__("re").escape(message)):
        call(seventy)


def test_megatron_runs_price_each_published_cluster():
    from roofline.parallel import planner

    runs = planner.megatron_runs()
    assert [label for label, _, _ in runs] == ["GPT 146B", "GPT 310B", "GPT 530B", "GPT 1008B"]
    for _, pub, best in runs:
        assert best.tp * best.pp * best.dp == pub["gpus"]  # the same cluster, nodes of eight
    ratios = planner.published_over_bound(runs)
    assert ratios == [pub["tflops"] / best.tflops for _, pub, best in runs]
    assert all(0 < r < 1 for r in ratios)  # published runs sit below the model's bound


def test_published_over_bound_by_hand():
    from types import SimpleNamespace

    from roofline.parallel import planner

    assert planner.published_over_bound([("x", {"tflops": 150e12}, SimpleNamespace(tflops=200e12))]) == [0.75]
    with pytest.raises(TypeError, match="runs must be"):
        planner.published_over_bound([("x", 3)])


def test_bubble_share_follows_the_schedule(seventy):
    from roofline.parallel import planner

    for x in seventy.top(10):
        assert planner.bubble_share(x) == pytest.approx(x.bubble / x.compute)
        if x.pp == 1:
            assert planner.bubble_share(x) == 0
    with pytest.raises(TypeError, match="layout must be a Layout"):
        planner.bubble_share(seventy)


# --- every count bounded where it enters: answers (or errors) at once, whatever the input -------------------

@pytest.mark.parametrize("kwargs, message", [
    ({"nodes": 1e308}, "nodes must be a whole number no larger than 9,007,199,254,740,992"),
    ({"nodes": 2**53}, "nodes must be at most 131,072 at 8 GPUs per node"),
    ({"nodes": 10**8}, "nodes must be at most 131,072"),
    ({"nodes": 1, "gpus_per_node": 100_000}, "gpus_per_node must be at most 576"),
    ({"nodes": 2, "gpus_per_node": 2**53}, "gpus_per_node must be at most 576"),
    ({"nodes": np.array([])}, "nodes must be a single whole number"),
    ({"nodes": 8, "micro_batches": np.arange(1, 100_001)}, "micro_batches must be a list of 1 to 256 values"),
    ({"nodes": 8, "micro_batches": []}, "micro_batches must be a list of 1 to 256 values"),
])
def test_plan_refuses_counts_no_cluster_has_at_once(kwargs, message):
    import time
    start = time.perf_counter()
    with pytest.raises((ValueError, TypeError), match=re.escape(message)):
        plan("llama-3-8b", "h100-sxm", seq=4096, global_batch=512, **{"gpus_per_node": 8, **kwargs})
    assert time.perf_counter() - start < 2


def test_the_divisor_search_is_exact_and_fast():
    from roofline.parallel.planner import _degrees
    for n in (1, 2, 12, 36, 97, 1024, 720_720):
        assert _degrees(n) == [d for d in range(1, n + 1) if n % d == 0]
    assert _degrees(2**40)[-1] == 2**40 and len(_degrees(2**40)) == 41  # 2**20 trial divisions, not 2**40


def test_a_layout_past_the_grid_is_a_clear_error():
    p = plan("llama-3-8b", "h100-sxm", nodes=2, seq=4096, global_batch=512)
    assert p.layout(0) == p.layout(-p.count)
    with pytest.raises(ValueError, match=f"i must be at most {p.count - 1:,} \\(the grid has {p.count:,} layouts\\)"):
        p.layout(10**9)


def test_zero3_traffic_is_every_layer_gathered_for_every_micro_batch(seventy):
    import roofline as rl
    # chapter 9: the fastest 70B layout on 64 H100s leans on ZeRO-3 hiding almost all of its traffic
    from roofline.core.collectives import collective_cost

    b = seventy.best
    assert (b.tp, b.pp, b.zero_stage, b.micro_batches) == (4, 1, 3, 32)
    m, L = rl.load_model("llama-3-70b"), rl.load_model("llama-3-70b").num_layers
    layer = (param_count(m) - m.embedding_params - m.lm_head_params) / L
    psi = 2.0 * (L * layer + m.embedding_params + m.lm_head_params) / b.tp  # bf16 weights on one GPU
    gather = collective_cost("all_gather", b.dp, psi / L, "h100-sxm", gpus_per_node=2).time
    scatter = collective_cost("reduce_scatter", b.dp, psi / L, "h100-sxm", gpus_per_node=2).time
    assert b.data_traffic == pytest.approx(b.micro_batches * L * (2 * gather + scatter))
    # about 30 s of collectives a step, 0.37 s of which show: the MFU rests on hiding the rest
    assert 29 < b.data_traffic < 31 and b.data_comm == pytest.approx(0.3726, rel=1e-3)
    assert b.data_traffic > 0.8 * b.compute
