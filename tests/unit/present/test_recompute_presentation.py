"""Chapter 3's tables, figures and explorer: what a reader sees follows the package's numbers."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

import roofline as rl  # noqa: E402
from roofline import measured
from roofline.workloads import memory, training
from roofline.present import plot, tables, widgets  # noqa: E402
from roofline.core.records import load_layers


def test_recompute_table_rows_add_up():
    t = tables.recompute_table("llama-3-8b", [4096], [("none", "none", "flash"), ("full", "full", "flash")])
    assert t.column("policy") == ("none", "full")
    kept, working = memory.layer_activations("llama-3-8b", 4096, 1, recompute="full")
    assert t.column("peak")[1] == rl.fmt(kept + working, "B", 3)
    assert t.column("extra FLOPs")[0] == "0.0%"


def test_checkpoint_runs_follow_the_measurement_file():
    runs = measured.checkpoint_runs()
    layers = load_layers()
    assert [r.run for r in runs] == list(layers.train)
    for r in runs:
        # the file's own model FLOPs (6N tokens + 3 x attention) are reproduced exactly
        assert r.model_flops == pytest.approx(r.run.model_flops, rel=1e-12)
        assert r.hfu >= r.mfu and (r.hfu == r.mfu) == (not r.run.checkpoint)
        assert r.working == 0 or r.run.checkpoint
    t = tables.checkpoint_runs_table(runs)
    assert len(t.rows) == len(runs)
    assert t.columns == ("tokens x batch", "checkpoints", "measured", "count", "gap", "model FLOP/s", "MFU", "HFU")
    first = runs[0].run  # the file's own numbers: its peak memory, its model FLOPs over its seconds, the H200's bf16 peak
    assert t.rows[0][:3] == (f"{first.tokens:,} x {first.batch}", "yes" if first.checkpoint else "no",
                             rl.fmt(first.peak_extra_bytes, "B", 3))
    assert t.rows[0][5:7] == (rl.fmt(first.model_flops / first.seconds, "FLOP/s", 3),
                              f"{100 * first.model_flops / first.seconds / 989.4e12:.1f}%")


def test_best_plan_table_names_a_policy_that_fits():
    t = tables.best_plan_table("llama-3-8b", "h100-sxm", [4096, 16384], gpus=8, zero_stage=3, achieved=0.5)
    assert t.column("fastest policy that fits")[0] == "none"
    assert t.column("fastest policy that fits")[1] != "none"  # 16k tokens without recomputation does not fit
    assert not memory.training_footprint("llama-3-8b", 16384, 1, gpus=8, zero_stage=3).fits("h100-sxm")
    # 4,096 tokens, no recomputation: the footprint of that plan, and its step time at half of peak
    fp = memory.training_footprint("llama-3-8b", 4096, 1, gpus=8, zero_stage=3)
    assert t.column("memory per GPU")[0] == rl.fmt(float(fp.total), "B", 3)
    step = training.training_step("llama-3-8b", 4096, 1, recompute="none")
    assert t.column("step time")[0] == rl.fmt(step.flops / (0.5 * 989.4e12), "s", 3)
    assert t.column("MFU")[0] == "50.0%"


def test_frontier_and_throughput_charts_draw_every_point():
    points = training.frontier("llama-3-8b", 4096, 1, spacings=[1, 2, 4])
    fig = plot.frontier_chart(points)
    assert sum(len(line.get_xdata()) for line in fig.axes[0].lines) == len(points)
    plt.close(fig)
    fig = plot.recompute_throughput_chart([1, 2, 3], {"a": [1e12, 2e12, float("nan")]})
    assert list(fig.axes[0].lines[0].get_ydata()[:2]) == [1.0, 2.0]
    plt.close(fig)


def test_recompute_explorer_frames_and_readout():
    e = widgets.recompute_explorer("llama-3-8b", micro_batches=(1, 2), seqs=(4096, 16384), achieved=0.5)
    assert len(e.frames) == 2 * 2 * len(widgets.RECOMPUTE_CHOICES)
    first = e.text((0, 0, 0))
    assert "4,096 tokens, none" in first and "fits on both" in first and "MFU 50.0%, HFU 50.0%" in first
    plan = training.plan_training("llama-3-8b", "h100-sxm", seq=16384, micro_batch=2, gpus=8, zero_stage=3,
                                  recompute="full", achieved=0.5)
    text = e.text((1, 1, 2))
    verdict = memory.fit_summary(float(plan.footprint.total), ["h100-sxm", "h200-sxm"])
    assert f"MFU {plan.mfu:.1%}" in text and f"HFU {plan.hfu:.1%}" in text and verdict in text
