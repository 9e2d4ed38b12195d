"""The explorers chapters 5 to 12 show: each built on a small grid, its readouts checked against the package
function it says it reads, and its frames checked to differ where the setting does.

(Chapter 1's decode explorer and the frame mechanism are tested in test_widgets_plot.py, chapter 2-4's in
test_recompute_presentation.py and test_widgets_plot.py, chapter 10's in test_moe_presentation.py.)"""

import re

import numpy as np
import pytest

from roofline.core.hardware import get_hardware
from roofline.core.model import load_model
from roofline.core.roof import as_roof
from roofline.core.units import fmt
from roofline.present import widgets


def _frames_differ(explorer):
    return len({explorer.png(k) for k in explorer.frames}) > 1


def test_serving_explorer_reads_the_largest_batch_of_serving_capacity_and_refuses_untrained_contexts():
    from roofline.serving.capacity import serving_capacity

    e = widgets.serving_explorer(models=("llama-3-8b",), gpus=("h100-sxm",), contexts=(4000, 200000),
                                 kv_dtypes=("bf16",), block_sizes=(16,))
    assert [c.description for c in e.controls] == ["model", "GPU", "context", "KV format", "block size"]
    assert len(e.frames) == 2
    plan = serving_capacity("llama-3-8b", get_hardware("h100-sxm"), 4000, kv_dtype="bf16", block_size=16)
    fits = e.text((0, 0, 0, 0, 0))
    assert f"{plan.max_batch:,} sequences fit" in fits
    assert fmt(plan.tokens_per_s, "tokens/s") in fits and fmt(plan.step_time, "s") in fits
    beyond = e.text((0, 0, 1, 0, 0))
    assert "beyond the 8,192 tokens" in beyond and "sequences fit" not in beyond
    assert _frames_differ(e)


def test_quantization_explorer_says_a_large_int4_batch_does_not_fit_and_times_it_as_the_package_does():
    from roofline import decode_step, predict

    h = get_hardware("h100-sxm")
    e = widgets.quantization_explorer("llama-3-8b", h, weights=(("int4, g128", "int4-g128"),), maths=("bf16",),
                                      kvs=("bf16",), batches=(1, 256))
    small, large = e.text((0, 0, 0, 0)), e.text((0, 0, 0, 1))
    assert "does not fit" not in small and "fits in the 84.0 GB usable" in small
    assert "<b>does not fit by" in large and "no decode step at this batch" in large
    step = predict(decode_step("llama-3-8b", 1, 4096, weights_dtype="int4-g128", math_dtype="bf16", kv_dtype="bf16",
                               embeddings_dtype="bf16"), h)
    assert f"decode step {fmt(step.time, 's')}" in small
    assert _frames_differ(e)


def test_data_parallel_explorer_reads_data_parallel_step():
    from roofline.parallel.data_parallel import data_parallel_step

    h = get_hardware("h100-sxm")
    e = widgets.data_parallel_explorer(models=("llama-3-8b",), per_node=(8,), nodes=(1, 4),
                                       layouts=(("ZeRO-3", 3, False),), tokens=(2048,))
    for j, nodes in enumerate((1, 4)):
        s = data_parallel_step("llama-3-8b", h, nodes=nodes, gpus_per_node=8, zero_stage=3, seq=2048, achieved=0.5,
                               recompute="full")
        text = e.text((0, 0, j, 0, 0))
        assert f"{nodes * 8} GPUs" in text
        assert fmt(float(s.footprint.total), "B") in text and f"MFU {s.mfu:.1%}" in text
    # ZeRO-3 over four times the GPUs holds less per GPU
    per_gpu = [float(re.search(r"([\d.]+) GB per GPU", e.text((0, 0, j, 0, 0))).group(1)) for j in (0, 1)]
    assert per_gpu[1] < per_gpu[0]


def test_speculation_explorer_reads_speculate_and_a_custom_grid_starts_inside_it():
    from roofline.serving.speculative import speculate

    h = get_hardware("h200-sxm")
    e = widgets.speculation_explorer(drafts=("llama-3.2-1b",), alphas=(0.05, 0.8), gammas=(4,), batches=(1, 256))
    plan = speculate(load_model("llama-3-70b"), "llama-3.2-1b", h, alpha=0.8, gamma=4,
                     batch=np.asarray([1.0, 256.0]), context=2048, tp=8)
    speedups = np.asarray(plan.decode_time) / np.asarray(plan.time_per_token)
    for j in range(2):
        assert f"{speedups[j]:.2f}×" in e.text((0, 1, 0, j))
        # the plain step's all-reduces are read out (issue 52: eight GPUs at batch one pay them)
        assert f"{fmt(float(np.asarray(plan.decode_exchange)[j]), 's')} of it in all-reduces" in e.text((0, 1, 0, j))
    assert speedups[1] < speedups[0]  # speculation buys less at a large batch, where decode is nearer the roof
    # a twentieth: the readout and the verdict agree with the plan
    low = speculate(load_model("llama-3-70b"), "llama-3.2-1b", h, alpha=0.05, gamma=4, context=2048, tp=8)
    assert ("does not pay" in e.text((0, 0, 0, 0))) == (float(low.speedup) <= 1)
    # each batch has its own time axis (issue 52: one axis for all batches left the batch-one bars a sliver)
    bases = [e.frames[(0, 1, 0, j)].children[1].children[0].value for j in range(2)]
    assert bases[0] != bases[1]


def test_tp_explorer_fits_70b_at_eight_gpus_not_one():
    from roofline.parallel.tensor_parallel import decode_by_degree

    e = widgets.tp_explorer(models=("llama-3-70b",), degrees=(1, 8), batches=(1,), contexts=(1024,))
    key = (0,) * len(e.controls)
    one, eight = e.text(key), e.text(key[:1] + (1,) + key[2:])
    # issue 52: no time or rate for a layout that does not fit
    assert "<b>does not fit</b>" in one and "no time per token" in one and "tokens/s" not in one
    assert not re.search(r"\d (ms|s) per output token", one)
    assert "does not fit" not in eight and "collectives" in eight
    points = decode_by_degree("llama-3-70b", get_hardware("h100-sxm"), (1, 8), batch=1, context=1024)
    assert fmt(points[1].time, "s") in eight and fmt(points[1].weights_per_gpu, "B") in eight
    assert _frames_differ(e)


def test_context_parallel_explorer_refuses_all_to_all_past_the_kv_heads_and_fits_the_ring():
    e = widgets.context_parallel_explorer(models=("llama-3-8b",), seqs=(131072,), cps=(1, 16))
    assert len(e.frames) == 8  # model x sequence x cp x method x tier
    assert "does not fit" in e.text((0, 0, 0, 0, 0))
    assert "MFU" not in e.text((0, 0, 0, 0, 0)) and "step" not in e.text((0, 0, 0, 0, 0)).replace("no step to time", "")
    ring16 = e.text((0, 0, 1, 0, 0))
    assert "(fits)" in ring16 and "16 GPUs, ring" in ring16
    assert "cp must not exceed" in e.text((0, 0, 1, 1, 0)) and "8 key/value heads" in e.text((0, 0, 1, 1, 0))


@pytest.mark.parametrize("kind,v,p,m,bubble", [("1f1b", 1, 4, 8, 3 / 8), ("gpipe", 1, 4, 8, 3 / 8),
                                               ("interleaved", 2, 4, 8, 3 / 16)])
def test_pipeline_explorer_reads_the_simulated_bubble_beside_the_closed_form(kind, v, p, m, bubble):
    e = widgets.pipeline_explorer(stages=(p,), micro_batches=(m,), schedules=((kind, (kind, v)),))
    text = e.text((0, 0, 0))
    assert f"bubble {100 * bubble:.1f}% of the ideal (closed form {100 * bubble:.1f}%)" in text


def test_the_memory_axis_holds_every_bar_and_keeps_twice_the_hbm_for_those_that_fit():
    # issue 52: chapter 11's explorer cut a 300 GB bar at 168 GB, twice an H100's 84 GB
    assert widgets.memory_axis(80.0, 84.0) == 168.0
    assert widgets.memory_axis(159.0, 84.0) == 168.0  # under 95% of the axis
    assert widgets.memory_axis(300.0, 84.0) == 500.0  # 330 GB rounds up to 500
    assert widgets.memory_axis(1500.0, 84.0) == 2000.0
    for total in (170.0, 300.0, 4.2e3, 9.9e5):
        assert widgets.memory_axis(total, 84.0) >= 1.1 * total


def test_a_long_time_is_read_in_minutes_or_hours_never_kiloseconds():
    assert widgets.duration(2.5) == "2.50 s"
    assert widgets.duration(1500.0) == "25.0 min"
    assert widgets.duration(36000.0) == "10.0 h"
    assert "ks" not in widgets.duration(5000.0)


def test_context_parallel_explorer_draws_a_bar_past_twice_the_hbm_whole():
    e = widgets.context_parallel_explorer(models=("llama-3-70b",), seqs=(131072,), cps=(1, 8))
    one = e.text((0, 0, 0, 0, 0))
    assert "does not fit" in one and "ks" not in one
    # the frame that does not fit is drawn on a wider axis than one that fits: different base pictures
    bases = {e.frames[(0, 0, j, 0, 0)].children[1].children[0].value for j in range(2)}
    assert len(bases) == 2
