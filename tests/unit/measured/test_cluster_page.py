"""What appendix C reads off the cluster model: the roof's constants with their records, the parts of a step
as shares and as the estimate's excess over the floor, and the ratios to the published times."""

import pytest

from roofline.core.checks import UnknownNameError
from roofline.core.calibration import ROOF_QUANTITIES, roof_constants, get_roof
from roofline.core.records import record
from roofline.measured.training import development_checks, development_ratios
from roofline.parallel.cluster import PART_ORDER, part_gaps, part_shares



@pytest.fixture(scope="module")
def checks():
    return development_checks()


def test_roof_constants_are_the_roofs_own_values_with_the_records_they_came_from():
    roof = get_roof("a100-sxm-80gb", "calibrated", "fp16")
    consts = {c.name: c for c in roof_constants(roof)}
    assert [c.name for c in roof_constants(roof)] == [q[0] for q in ROOF_QUANTITIES]
    assert consts["memory-bound kernels"].value == pytest.approx(1.7e12)  # STREAM Triad, 1.70 TB/s
    assert consts["memory-bound kernels"].records == ("mb0171",)
    assert consts["memory-bound kernels"].sources == ("Azure AI Benchmarking Guide - results",)
    assert consts["best matmul"].value == pytest.approx(256.5e12)  # the sweep's best, under the 312 TFLOP/s peak
    assert consts["latency of one message"].value == pytest.approx(44.8e-6 / 14)
    # a range of records is listed record by record; the attention curve's records are its benchmark's
    assert len(consts["all-reduce in a node, largest buffer"].records) == 24
    assert all(r.startswith("mb") for r in consts["best flash attention (fwd+bwd, causal, head 128)"].records)


def test_the_h100s_attention_constant_names_its_flashattention_2_records():
    consts = {c.name: c for c in roof_constants(get_roof("h100-sxm", "calibrated", "bf16"))}
    att = consts["best flash attention (fwd+bwd, causal, head 128)"]
    assert att.records and all(record(r)["tool"].startswith("FlashAttention-2") for r in att.records)
    assert att.value <= get_roof("h100-sxm", "calibrated", "bf16").peak_flops


def test_part_shares_add_to_one_and_part_gaps_to_the_difference_of_the_steps(checks):
    c = checks[0]
    shares = part_shares(c.estimate)
    assert list(shares) == list(PART_ORDER)
    assert sum(shares.values()) == pytest.approx(1.0)
    gaps = part_gaps(c.floor, c.estimate)
    assert sum(gaps.values()) == pytest.approx(c.estimate.time - c.floor.time)
    assert gaps["matmuls"] > 0  # the calibrated matmuls are slower than the peak


def test_ratios_are_predicted_over_published_and_the_floor_is_below_every_published_time(checks):
    est, floor = development_ratios(checks), development_ratios(checks, "floor")
    assert est[0] == pytest.approx(checks[0].estimate.time / checks[0].published_s) == pytest.approx(checks[0].ratio)
    assert floor[0] == pytest.approx(checks[0].floor_ratio)
    assert max(floor) < 1 and all(f < e for f, e in zip(floor, est))
    with pytest.raises(UnknownNameError, match="unknown kind 'measured'"):
        development_ratios(checks, "measured")


def test_a_runs_label_and_whether_its_source_left_settings_open(checks):
    by = {c.run.id: c.run for c in checks}
    assert by["korthikanti-175B-selective-sp"].label == "GPT 175B, selective"
    assert not by["korthikanti-175B-selective-sp"].settings_unstated  # micro-batch 1, three virtual stages stated
    assert by["megatron-ptdp-1.7B-32gpu"].settings_unstated  # Table 1 gives no micro-batch
    assert len({r.label for r in by.values()}) == len(by)
