"""A layout that does not fit has no step (issue 52): wherever the book prints a priced layout, in a table, an
explorer's readout or a glued number, a layout over its GPU's usable memory shows by how much it is over and
never a step time or an MFU. Chapter 7 once printed 77.7% MFU for a data-parallel step that did not fit and its
explorer an MFU for a layout over by 1.05 TB; chapter 9 printed 85.4% for a setting that did not fit."""

from types import SimpleNamespace

import pytest

import roofline as rl
from roofline.core.units import fmt
from roofline.parallel import data_parallel as dp
from roofline.parallel.cluster import TrainLayout, estimate_step, fp8_training
from roofline.parallel.planner import Layout
from roofline.present import plot, tables, widgets
from roofline.present.glue import layout_texts

H100 = rl.get_hardware("h100-sxm")


@pytest.fixture(scope="module")
def ddp70():
    """Llama 3 70B under plain data parallelism on 64 H100s: every GPU holds the whole training state, 16 bytes
    for each of its 70.6 billion parameters, 1.13 TB before any activation, against 84.0 GB usable."""
    return dp.data_parallel_step("llama-3-70b", H100, nodes=8, zero_stage=0, seq=4096, achieved=0.5)


@pytest.fixture(scope="module")
def zero3_70():
    return dp.data_parallel_step("llama-3-70b", H100, nodes=8, zero_stage=3, seq=4096, achieved=0.5)


def over(memory) -> str:
    return f"does not fit by {fmt(memory - H100.usable_capacity, 'B')}"


def test_misfit_says_by_how_much_and_only_for_a_layout_that_does_not_fit(ddp70, zero3_70):
    memory = float(ddp70.footprint.total)
    assert memory > 16 * 70e9  # the state alone, worked by hand above
    assert tables.misfit(ddp70) == over(memory)
    assert tables.mfu_cell(ddp70) == tables.step_cell(ddp70) == over(memory)
    # the same model sharded by ZeRO-3 over the 64 GPUs fits: its own MFU and step
    assert tables.misfit(zero3_70) is None
    assert tables.mfu_cell(zero3_70) == f"{100 * zero3_70.mfu:.1f}%" and tables.step_cell(zero3_70) == fmt(zero3_70.time, "s")


def test_a_step_price_and_a_planner_layout_answer_the_same_way():
    floor, est = estimate_step("llama-3-70b", "h100-sxm", TrainLayout(seq=4096, dp=64, recompute="full", zero_stage=0))
    assert not est.fits and tables.mfu_cell(est) == over(est.memory) == tables.step_cell(floor)
    lay = Layout(tp=8, pp=1, dp=8, micro_batch=1, micro_batches=8, v=1, recompute="full", zero_stage=0, memory=100e9,
                 compute=1.0, bubble=0.0, pipeline_comm=0.0, data_comm=0.0, time=1.0, mfu=0.9, tflops=890e12, fits=False)
    assert tables.mfu_cell(lay, "h100-sxm") == "does not fit by 16.0 GB"  # 100 GB against 84.0 GB usable
    with pytest.raises(ValueError, match="hardware"):
        tables.misfit(lay)  # a planner layout carries no chip: the caller must name it


def test_tables_print_no_step_and_no_mfu_for_a_layout_that_does_not_fit(ddp70, zero3_70):
    t = tables.data_parallel_table({"DDP": ddp70, "ZeRO-3": zero3_70})
    assert t.rows[0][-2:] == ("—", over(float(ddp70.footprint.total)))
    assert "%" in t.rows[1][-1]
    lay = Layout(tp=8, pp=1, dp=8, micro_batch=1, micro_batches=8, v=1, recompute="full", zero_stage=0, memory=100e9,
                 compute=1.0, bubble=0.0, pipeline_comm=0.0, data_comm=0.0, time=1.0, mfu=0.9, tflops=890e12, fits=False)
    col = dict((r[0], r[1]) for r in tables.plan_table([lay]).rows)
    assert col["step"] == col["MFU"] == "does not fit by 16.0 GB" and col["memory per GPU"] == fmt(100e9, "B")
    priced = {"DDP": estimate_step("llama-3-70b", "h100-sxm", TrainLayout(seq=4096, dp=64, recompute="full"))}
    row = tables.estimate_beside_floor_table(priced).rows[0]
    assert "%" not in "".join(row) and row[2] == row[3] == over(priced["DDP"][1].memory)


def test_fp8_training_table_gives_no_step_for_a_recipe_that_does_not_fit():
    # the 70B model unsharded on one node: no format fits, so no row has a step or a speed-up
    priced = fp8_training("llama-3-70b", "h100-sxm", TrainLayout(seq=8192, dp=8, global_batch=8, recompute="full"),
                          ("te-delayed",))
    t = tables.fp8_training_table(priced)
    for row, (_, (_, est)) in zip(t.rows, priced.items()):
        assert row[1] == over(est.memory) and row[2:6] == ("—",) * 4


def test_verdicts_table_cells_read_the_layout_and_refuse_a_misfits_numbers(ddp70, zero3_70):
    t = tables.verdicts_table({"MFU": [zero3_70, ddp70], "step": [("step", zero3_70), ("step", ddp70)],
                               "threshold": [(1923.8, "", 4), None]}, ("fits", "does not"))
    rows = {r[0]: r[1:] for r in t.rows}
    assert rows["MFU"] == (f"{100 * zero3_70.mfu:.1f}%", over(float(ddp70.footprint.total)))
    assert rows["step"] == (fmt(zero3_70.time, "s"), over(float(ddp70.footprint.total)))
    assert rows["threshold"] == ("1,924", "—")
    with pytest.raises(ValueError, match="3 cells for 2 columns|cells"):
        tables.verdicts_table({"x": [None, None, None]}, ("a", "b"))


def test_development_table_marks_a_run_the_model_counts_over_its_memory():
    # a run that trained is priced as published, but the table says the model's count puts it over
    floor, est = estimate_step("llama-3-70b", "h100-sxm", TrainLayout(seq=4096, dp=64, recompute="full"))
    check = SimpleNamespace(run=SimpleNamespace(label="a run", settings_unstated=False), estimate=est, floor=floor,
                            published_s=est.time, ratio=1.0)
    (row,) = tables.development_table([check]).rows
    assert row[2].endswith(f"trained, though the model counts {fmt(est.memory - H100.usable_capacity, 'B')} over its memory")


def test_published_layouts_table_refuses_a_planner_bound_that_does_not_fit():
    lay = Layout(tp=8, pp=1, dp=8, micro_batch=1, micro_batches=8, v=1, recompute="full", zero_stage=0, memory=100e9,
                 compute=1.0, bubble=0.0, pipeline_comm=0.0, data_comm=0.0, time=1.0, mfu=0.9, tflops=890e12, fits=False)
    with pytest.raises(ValueError, match="must be one that fits"):
        tables.published_layouts_table([("run", {"gpus": 64, "tp": 8, "pp": 1, "tflops": 400e12}, lay, 1.0)])
    fits = Layout(**{**lay.__dict__, "memory": 60e9, "fits": True})
    (row,) = tables.published_layouts_table([("run", {"gpus": 64, "tp": 8, "pp": 1, "tflops": 400e12}, fits, 1.1)]).rows
    assert row[-2:] == ("45%", "1.10")  # 400 of the bound's 890 TFLOP/s per GPU


def test_glued_numbers_of_a_layout_come_from_it_and_a_misfit_has_none(ddp70, zero3_70):
    texts = layout_texts("z3", zero3_70, "layout", "memory", "step", "mfu", exposed=(zero3_70.exposed, "s"))
    assert texts == {"z3__layout": "ZeRO-3 (FSDP full) on 64 GPUs", "z3__memory": fmt(float(zero3_70.footprint.total), "B"),
                     "z3__step": fmt(zero3_70.time, "s"), "z3__mfu": fmt(zero3_70.mfu, "%", convert=True),
                     "z3__exposed": fmt(zero3_70.exposed, "s")}
    assert layout_texts("ddp", ddp70, "misfit") == {"ddp__misfit": over(float(ddp70.footprint.total))}
    for q in ("mfu", "step"):
        with pytest.raises(ValueError, match="does not fit by .* no " + q):
            layout_texts("ddp", ddp70, q)
    with pytest.raises(ValueError, match="no exposed to print"):
        layout_texts("ddp", ddp70, "memory", exposed=(ddp70.exposed, "s"))
    with pytest.raises(ValueError, match="fits"):
        layout_texts("z3", zero3_70, "misfit")
    with pytest.raises(ValueError, match="prefix"):
        layout_texts("z3__x", zero3_70, "mfu")


def test_the_data_parallel_explorer_reads_out_no_step_for_a_layout_that_does_not_fit():
    e = widgets.data_parallel_explorer(("llama-3-70b",), per_node=(8,), nodes=(8,), tokens=(4096,),
                                       layouts=(("DDP", 0, False), ("ZeRO-3", 3, False)))
    ddp, z3 = e.text((0, 0, 0, 0, 0)), e.text((0, 0, 0, 1, 0))
    step = dp.data_parallel_step("llama-3-70b", H100, nodes=8, zero_stage=0, seq=4096, achieved=0.5, recompute="full")
    assert over(float(step.footprint.total)) in ddp
    assert "MFU" not in ddp and "compute" not in ddp and "exposed" not in ddp
    assert "MFU" in z3
    # the page opens on a layout that fits
    assert [c.index for c in e.controls][3] == 1


def test_the_quantization_explorer_times_no_decode_step_for_a_batch_that_does_not_fit():
    e = widgets.quantization_explorer("llama-3-70b", "h100-sxm", weights=(("bf16", "bf16"),), maths=("bf16",),
                                      kvs=("bf16",), batches=(1,))
    text = e.text((0, 0, 0, 0))  # 141 GB of bf16 weights on an 84.0 GB GPU: neither a decode step nor a prefill
    assert "does not fit by" in text and "no decode step" in text and "no prefill either" in text
    assert not any(unit in text for unit in (" ms", " µs", " s,", " s;")), text
    small = widgets.quantization_explorer("llama-3-8b", "h100-sxm", weights=(("bf16", "bf16"),), maths=("bf16",),
                                          kvs=("bf16",), batches=(1, 256)).text
    assert "decode step" in small((0, 0, 0, 0)) and "no decode step" not in small((0, 0, 0, 0))
    assert "no decode step" in small((0, 0, 0, 1)) and "prefill" in small((0, 0, 0, 1))  # 256 x 4,096 tokens: over


def test_the_exposure_chart_draws_no_step_that_does_not_fit():
    toks = [512, 2048]
    ddp = dp.exposure_sweep("llama-3-8b", H100, toks, nodes=1)
    with pytest.raises(ValueError, match="does not fit at 512, 2,048"):
        plot.exposure_chart(toks, {"DDP": ddp}, capacity=H100.usable_capacity)
    zero2 = dp.exposure_sweep("llama-3-8b", H100, toks, nodes=1, zero_stage=2)
    plot.exposure_chart(toks, {"ZeRO-2": zero2}, capacity=H100.usable_capacity)


def test_layout_cell_names_the_layout_whichever_model_priced_it():
    lay = Layout(tp=4, pp=1, dp=16, micro_batch=1, micro_batches=32, v=1, recompute="none", zero_stage=3, memory=60e9,
                 compute=1.0, bubble=0.0, pipeline_comm=0.0, data_comm=0.0, time=1.0, mfu=0.8, tflops=790e12, fits=True)
    assert tables.layout_cell(lay) == "TP 4 · PP 1 · DP 16, ZeRO-3"
    _, est = estimate_step("llama-3-70b", "h100-sxm", TrainLayout(seq=4096, dp=64, recompute="full", zero_stage=3))
    assert tables.layout_cell(est) == tables.short_layout(est.layout) + ", ZeRO-3"
    with pytest.raises(TypeError, match="StepPrice or a planner Layout"):
        tables.layout_cell("TP 4")


def test_the_pipeline_explorer_draws_every_frame_at_one_height():
    """Chapter 9's explorer once left about 550 px blank under a frame of two stages, because each frame was as
    tall as its own stages and the page kept the tallest: now two stages and sixteen are drawn alike."""
    import struct

    e = widgets.pipeline_explorer(stages=(2, 16), micro_batches=(16,), schedules=(("1F1B", ("1f1b", 1)),))
    heights = {struct.unpack(">II", e.png(k)[16:24])[1] for k in e.frames}
    assert len(heights) == 1


def test_a_verdicts_column_of_words_wraps_and_keeps_each_number_with_its_unit(zero3_70):
    t = tables.verdicts_table({"layout": ["TP 4 · DP 16, ZeRO-3", "TP 1 · CP 4 · DP 16, ZeRO-3"],
                               "step": [("step", zero3_70), (34.8, "s")]}, ("planner", "estimate"), wrap=("planner", "estimate"))
    rows = {r[0]: r[1:] for r in t.rows}
    assert rows["layout"] == ("TP 4 · DP 16, ZeRO-3", "TP 1 · CP 4 · DP 16, ZeRO-3")  # words as they are
    assert rows["step"] == (fmt(zero3_70.time, "s").replace(" ", "\u00a0"), "34.8\u00a0s")
    assert t.wrap == ("", "planner", "estimate") and "nowrap" not in t._repr_html_().split("ZeRO-3")[0].split("<td")[-1]
    with pytest.raises(ValueError, match="wrap names columns"):
        tables.verdicts_table({"x": [None]}, ("a",), wrap=("b",))
