"""Appendix C's tables, figures and explorer: each cell and readout checked against the check it shows."""

import numpy as np
import pytest

from roofline.core.calibration import get_roof
from roofline.core.units import fmt
from roofline.present import plot, tables, widgets
from roofline.measured.training_runs import development_checks
from roofline.parallel.cluster import part_shares


@pytest.fixture(scope="module")
def checks():
    return development_checks()


def test_cluster_roof_table_puts_the_a100_and_h100_side_by_side_with_their_records():
    t = tables.cluster_roof_table([get_roof("a100-sxm-80gb", "calibrated", "fp16"), get_roof("h100-sxm", "calibrated", "bf16")])
    assert t.columns == ("quantity", "A100 80GB", "A100 80GB: from", "H100 SXM", "H100 SXM: from")
    row = dict((r[0], r[1:]) for r in t.rows)
    assert row["memory-bound kernels"] == ("1.70 TB/s", "mb0171: Azure AI Benchmarking Guide - results",
                                           "2.97 TB/s", "mb0166: Azure AI Benchmarking Guide - results")
    assert row["all-to-all in a node, share of all-reduce"][0] == f"{100 * 210 / 232:.0f}%"
    assert row["all-reduce in a node, largest buffer"][1].startswith("mb0025 to mb0048 (24 records)")
    assert t.wrap == ("A100 80GB: from", "H100 SXM: from")


def test_development_table_shows_each_run_its_times_and_ratio(checks):
    t = tables.development_table(checks)
    assert len(t.rows) == len(checks) == 18
    first = dict(zip(t.columns, t.rows[0]))
    c = checks[0]
    assert first["run"] == c.run.label + " *"  # Table 1 of Narayanan et al. states no micro-batch
    assert first["published"] == fmt(c.published_s, "s") == "3.53 s"
    assert first["floor"] == fmt(c.floor.time, "s") and first["estimate"] == fmt(c.estimate.time, "s")
    assert first["estimate / published"] == f"{c.estimate.time / 3.53:.2f}"
    assert "layout" in t.wrap and "micro-batch" not in t.column("run")[0]


def test_short_layout_names_degrees_micro_batch_and_schedule(checks):
    by = {c.run.id: c for c in checks}
    assert tables.short_layout(by["korthikanti-175B-selective-sp"].estimate.layout) == \
        "TP 8 · PP 8 · DP 1, micro-batch 1, interleaved x3"
    assert tables.short_layout(by["korthikanti-22B-full-recompute"].estimate.layout) == "TP 8 · DP 1, micro-batch 4"


def test_step_parts_table_lists_the_nonzero_parts_and_the_step(checks):
    c = {x.run.id: x for x in checks}["korthikanti-175B-selective-sp"]
    t = tables.step_parts_table({"floor": c.floor, "estimate": c.estimate})
    parts = t.column("part")
    assert "context-parallel" not in parts and "expert all-to-all" not in parts  # no CP, no experts
    assert parts[-1] == "step" and t.rows[-1][1:] == (fmt(c.floor.time, "s"), fmt(c.estimate.time, "s"))
    row = dict((r[0], r[1:]) for r in t.rows)
    share = 100 * c.estimate.parts["matmuls"] / c.estimate.time
    assert row["matmuls"][1] == f"{fmt(c.estimate.parts['matmuls'], 's')} ({share:.0f}%)"


def test_development_chart_draws_estimates_and_floors_at_the_published_times(checks):
    fig = plot.development_chart(checks)
    ax = fig.axes[0]
    assert ax.get_xscale() == ax.get_yscale() == "log"
    est, floor = [l for l in ax.lines if l.get_label() in ("calibrated estimate", "datasheet floor")]
    assert est.get_marker() != floor.get_marker()
    np.testing.assert_allclose(est.get_xdata(), [c.published_s for c in checks])
    np.testing.assert_allclose(floor.get_ydata(), [c.floor.time for c in checks])
    assert max(fig.get_size_inches()) <= 6  # a phone's column


def test_step_parts_chart_stacks_shares_to_the_whole_step(checks):
    prices = {c.run.label: c.estimate for c in checks[:3]}
    fig = plot.step_parts_chart(prices)
    ax = fig.axes[0]
    # bars of one run add to 100%
    widths = [p.get_width() for p in ax.patches if abs(p.get_y() + p.get_height() / 2 - 2) < 1e-9]
    assert sum(widths) == pytest.approx(100 * sum(v for k, v in part_shares(checks[0].estimate).items()
                                                  if k in plot.PART_COLORS and any(
                                                      part_shares(p)[k] > 0.005 for p in prices.values())))
    assert [t.get_text() for t in ax.get_yticklabels()] == list(prices)


def test_cluster_explorer_reads_the_estimate_and_the_floor_of_a_run(checks):
    e = widgets.cluster_explorer(checks[10:12])
    assert [c.description for c in e.controls] == ["run", "roof"]
    assert len(e.frames) == 4
    c = checks[10]
    est, floor = e.text((0, 0)), e.text((0, 1))
    assert f"estimate {fmt(c.estimate.time, 's')}" in est and f"({c.ratio:.2f})" in est
    assert f"floor {fmt(c.floor.time, 's')}" in floor and f"({c.floor_ratio:.2f})" in floor
    assert f"MFU {100 * c.estimate.mfu:.0f}%" in est
    assert len({e.png(k) for k in e.frames}) == 4
    with pytest.raises(ValueError, match="at least one"):
        widgets.cluster_explorer([])


def test_every_part_of_a_step_has_its_colour_in_the_order_the_parts_stack():
    from roofline.parallel.cluster import PART_ORDER

    assert list(plot.PART_COLORS) == list(PART_ORDER)


def test_the_fp8_training_table_sets_each_recipe_beside_bf16():
    from roofline.parallel.cluster import TrainLayout, fastest_recipe, fp8_training

    # with full recomputation every recipe fits (50.5 GB in bf16): without it none does, and a layout that does
    # not fit has no step to set beside bf16 (test_no_step_for_a_misfit)
    lay = TrainLayout(seq=8192, dp=8, global_batch=64, zero_stage=1, recompute="full")
    priced = fp8_training("llama-3.1-8b", "h100-sxm", lay, ("te-delayed", "torchao-rowwise"))
    t = tables.fp8_training_table(priced)
    assert [r[0] for r in t.rows] == ["bf16", "Transformer Engine, delayed scaling per tensor",
                                      "torchao float8, scaling per row"]
    assert t.rows[0][2] == "1.00×" and t.rows[0][4] == "none"
    bf16, te = priced["bf16"][1], priced["te-delayed"][1]
    assert t.rows[1][2] == f"{bf16.time / te.time:.2f}×"
    assert fastest_recipe(priced) == "te-delayed"  # the cached weights' casts beat converting at every micro-batch
    with pytest.raises(ValueError, match="at least one fp8 recipe"):
        fastest_recipe({"bf16": priced["bf16"]})


def test_the_training_kernels_table_names_each_constant_with_its_records():
    from roofline.core.calibration import cast_share, kernel_shares, training_kernel_constants

    consts = {c.name: c for c in training_kernel_constants("h100-sxm")}
    assert consts["fp8 casts, share of the STREAM rate"].value == cast_share()
    assert consts["fused cross-entropy, share of the STREAM rate"].value == kernel_shares()["cross-entropy"]
    t = tables.constants_table(training_kernel_constants("h100-sxm"))
    row = {r[0]: r for r in t.rows}
    assert row["fp8 casts, share of the STREAM rate"][1] == f"{100 * cast_share():.0f}%"
    assert row["fp8 casts, share of the STREAM rate"][2].startswith("mbx100 to mbx105 (6 records): torchao")
    assert "mb0266 to mb0269, mbx139 to mbx144" in row["cuDNN attention, causal, 8,192 tokens (fwd+bwd)"][2]
