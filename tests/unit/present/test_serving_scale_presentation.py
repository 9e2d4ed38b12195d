"""Chapter 13's figures, tables and explorer: each drawn or built on a small case and checked against the
package function it shows."""

import matplotlib.pyplot as plt
import pytest

import roofline as rl
from roofline.core.units import fmt
from roofline.measured.serving import serving_dev_checks
from roofline.core.calibration import get_roof
from roofline.present import plot, tables, widgets
from roofline.serving import deployment as D

H100 = rl.get_hardware("h100-sxm")
FP8 = dict(weights_dtype="fp8", kv_dtype="fp8", math_dtype="fp8")
W = D.Workload(2048, 256)


@pytest.fixture(scope="module")
def roofs():
    return {k: get_roof(H100, k, "fp8") for k in ("datasheet", "calibrated")}


def test_deployment_frontier_chart_draws_both_roofs_per_layout_and_the_targets(roofs):
    d = D.Deployment(tp=2, **FP8)
    ceil, est = (D.frontier("llama-3.1-70b", H100, W, d, roofs[k]) for k in ("datasheet", "calibrated"))
    fig = plot.deployment_frontier_chart({"TP 2": (ceil, est)}, targets=(0.03,), title="frontier")
    ax = fig.axes[0]
    lines = [l for l in ax.get_lines() if len(l.get_xdata())]
    solid = [l for l in lines if l.get_label() == "TP 2"][0]
    assert list(solid.get_xdata()) == pytest.approx(list(est.tpot_s * 1e3))
    assert list(solid.get_ydata()) == pytest.approx(list(est.tokens_per_s_per_gpu))
    assert any(list(l.get_xdata()) == [30.0, 30.0] for l in lines)  # the target's vertical line
    assert ax.get_xscale() == ax.get_yscale() == "log" and ax.get_title() == "frontier"
    assert [t.get_text() for t in fig.legends or ax.get_legend().get_texts()][:1] == ["TP 2"]
    plt.close(fig)


def test_serving_step_chart_stacks_a_steps_parts_to_its_time(roofs):
    steps = {f"TP {t}": D.step_time("llama-3.1-70b", D.Deployment(tp=t, **FP8), roofs["calibrated"], decode=1, context=2048)
             for t in (1, 8)}
    fig = plot.serving_step_chart(steps, title="batch 1")
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.texts] == [fmt(s.seconds, "s") for s in steps.values()]
    assert "tensor-parallel" in [t.get_text() for t in ax.get_legend().get_texts()]
    plt.close(fig)


def test_sustained_table_reads_sustain(roofs):
    s = D.sustain("llama-3.1-70b", H100, W, D.Deployment(tp=2, **FP8), roofs["calibrated"], tpot_slo=0.03)
    t = tables.sustained_table({"TP 2": s})
    assert t.rows[0] == ("TP 2", f"{s.output_tokens_per_s_per_gpu:,.0f}", fmt(s.ttft_s, "s"), fmt(s.tpot_s, "s"),
                         f"{s.batch:,.0f}", "slo")


def test_serving_dev_table_has_a_row_per_run_and_marks_the_misses():
    checks = serving_dev_checks()
    t = tables.serving_dev_table(checks)
    assert len(t.rows) == len(checks) and len(t.columns) == 6
    assert sum(r[4].endswith("*") for r in t.rows) == sum(not c.within_band for c in checks)
    # every ratio shows its third place, so that a miss just past the band (1.302) does not read as 1.30
    for r, c in zip(t.rows, checks):
        assert r[4].split()[0] == f"{c.estimate_over_published:.3f}"
    assert {r[1] for r in t.rows} == {"v0.14", "v1.0"}


def test_serving_plan_table_lists_the_planners_rows_in_order(roofs):
    rows = D.plan_serving("llama-3.1-70b", H100, W, roofs["calibrated"], max_gpus=4, tpot_slo=0.03, **FP8)
    t = tables.serving_plan_table(rows, n=3)
    assert [r[0] for r in t.rows] == [r.deployment.label() for r in rows[:3]]


def test_serving_scale_explorer_reads_sustain_and_says_when_a_target_is_missed(roofs):
    e = widgets.serving_scale_explorer(models=("llama-3.1-70b",), gpus=("h100-sxm",), degrees=(1, 2),
                                       targets=(0.015, 0.03), hits=(0.0,))
    assert [c.description for c in e.controls] == ["model", "GPU", "t", "TPOT target", "prefix hit"]
    s = D.sustain("llama-3.1-70b", H100, W, D.Deployment(tp=2, **FP8), roofs["calibrated"], tpot_slo=0.03)
    assert f"{s.output_tokens_per_s_per_gpu:,.0f} tokens/s per GPU" in e.text((0, 0, 1, 1, 0))
    assert "missed" in e.text((0, 0, 0, 0, 0))  # one H100 cannot make a 70B token in 15 ms
    assert len({e.png(k) for k in e.frames}) > 1


def test_ep_decode_table_has_a_row_per_published_deployment_with_its_settings():
    from roofline.measured.serving import ep_decode_checks
    checks = ep_decode_checks()
    t = tables.ep_decode_table(checks)
    assert len(t.rows) == len(checks) and t.columns[0] == "deployment"
    for row, c in zip(t.rows, checks):
        assert row[1] == f"{c.run.batch_per_gpu:,}" and row[2] == f"{c.run.kv_length:,}"
        assert row[7] == f"{c.estimate_over_published:.2f}" and row[8] == c.estimate.expert_matmuls
        assert row[0].endswith("MTP on") == c.run.mtp
