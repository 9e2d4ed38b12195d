"""roofline.measured.training_runs: the cluster model against the published runs of the development set (Korthikanti
et al. 2022, Table 5; Narayanan et al. 2021, Table 1), never fitted to them."""

import statistics

import pytest

from roofline.measured.training_runs import development_checks, development_ratios, development_runs
from roofline.core.checks import UnknownNameError


@pytest.fixture(scope="module")
def checks():
    return development_checks()


def test_the_development_set_has_its_eighteen_runs(checks):
    runs = development_runs()
    assert len(runs) == 18 and len(checks) == 18
    assert {r.raw["gpu_count"] for r in runs} >= {8, 64, 280, 512, 3072}


def test_every_development_run_is_estimated_within_a_quarter(checks):
    for c in checks:
        assert 1 / 1.25 <= c.ratio <= 1.25, (c.run.id, c.estimate.time, c.published_s)
    assert abs(statistics.median(c.ratio for c in checks) - 1) <= 0.10


def test_the_floor_is_at_or_below_every_published_time(checks):
    for c in checks:
        assert c.floor.time <= c.estimate.time <= c.floor.time * 2
        assert c.floor.time <= c.published_s, c.run.id


def test_the_published_settings_are_kept(checks):
    by = {c.run.id: c for c in checks}
    k175 = by["korthikanti-175B-selective-sp"].estimate.layout
    assert (k175.tp, k175.pp, k175.dp, k175.micro_batch, k175.chunks, k175.recompute, k175.sp) == \
        (8, 8, 1, 1, 3, "selective", True)
    n1t = by["megatron-ptdp-1008.0B-3072gpu"].estimate.layout
    assert (n1t.tp, n1t.pp, n1t.dp, n1t.batch, n1t.recompute) == (8, 64, 6, 3072, "full")
    assert all(c.estimate.fits for c in checks)


# The ratio table as it stood when the model landed (estimate / published, two decimals): a regression
# check, so that a change to the model that moves a prediction is seen and explained in appendix C.
RATIOS = {
    "megatron-ptdp-1.7B-32gpu": 1.00, "megatron-ptdp-3.6B-64gpu": 1.01, "megatron-ptdp-7.5B-128gpu": 1.03,
    "megatron-ptdp-18.4B-256gpu": 0.99, "megatron-ptdp-39.1B-512gpu": 0.91, "megatron-ptdp-76.1B-1024gpu": 0.92,
    "megatron-ptdp-145.6B-1536gpu": 0.89, "megatron-ptdp-310.1B-1920gpu": 0.90, "megatron-ptdp-529.6B-2520gpu": 0.91,
    "megatron-ptdp-1008.0B-3072gpu": 0.88, "korthikanti-22B-selective-sp": 1.03, "korthikanti-22B-full-recompute": 1.08,
    "korthikanti-175B-selective-sp": 0.99, "korthikanti-175B-full-recompute": 1.03,
    "korthikanti-530B-selective-sp": 0.96, "korthikanti-530B-full-recompute": 0.99,
    "korthikanti-1T-selective-sp": 0.99, "korthikanti-1T-full-recompute": 1.00,
}


def test_the_ratio_table_has_not_moved(checks):
    assert {c.run.id: round(c.ratio, 2) for c in checks} == pytest.approx(RATIOS, abs=0.011)


# --- chapters 10 and 11: the hiding block and the token rate under the calibrated roof --------------------------


# ------------------------------------------------------------------- a matmul's two times, joined near the ridge


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


# ------------------------------------------------------------------- the modern development set (NeMo 24.07, fp8)


@pytest.fixture(scope="module")
def modern():
    from roofline.measured.training_runs import modern_checks

    return modern_checks()


def test_the_modern_set_has_its_twelve_runs_on_h100s_in_fp8(modern):
    assert len(modern) == 12 and {c.run.raw["gpu_count"] for c in modern} >= {8, 16, 64, 128, 512}
    assert all(c.estimate.layout.dtype == "fp8" and c.estimate.layout.recipe.name == "te-delayed" for c in modern)
    assert all(c.estimate.roof.hardware.key == "h100-sxm" and c.estimate.roof.calibrated for c in modern)
    assert len({c.run.label for c in modern}) == 12


def test_every_modern_run_is_estimated_within_a_quarter_and_the_median_within_a_tenth(modern):
    for c in modern:
        assert 1 / 1.25 <= c.ratio <= 1.25, (c.run.id, c.estimate.time, c.published_s)
    assert abs(statistics.median(c.ratio for c in modern) - 1) <= 0.10


def test_the_fp8_floor_is_below_every_modern_published_time(modern):
    for c in modern:
        assert c.floor.time <= c.estimate.time and c.floor.time <= c.published_s, c.run.id
        assert c.floor.roof.peak_flops == c.floor.roof.hardware.peak_flops("fp8")


def test_the_modern_published_settings_are_kept(modern):
    by = {c.run.id: c.estimate.layout for c in modern}
    l70 = by["nemo2407-h100-fp8-llama3-70b"]
    assert (l70.tp, l70.pp, l70.cp, l70.dp, l70.chunks, l70.micro_batches, l70.sp) == (4, 4, 2, 2, 5, 64, True)
    assert by["nemo2407-h100-fp8-nemotron4-340b"].recompute == "selective"
    assert by["nemo2407-h100-fp8-gpt3-5b"].micro_batch == 4 and by["nemo2407-h100-fp8-llama3-8b"].cp == 2


# The modern table as it stood when the fp8 model landed (estimate / published, two decimals): a regression check.
MODERN_RATIOS = {
    "nemo2407-h100-fp8-gpt3-5b": 0.89, "nemo2407-h100-fp8-gpt3-20b": 0.88, "nemo2407-h100-fp8-gpt3-175b-128gpu": 0.94,
    "nemo2407-h100-fp8-gpt3-175b-512gpu": 1.03, "nemo2407-h100-fp8-llama2-7b": 0.92, "nemo2407-h100-fp8-llama2-13b": 0.91,
    "nemo2407-h100-fp8-llama2-70b": 1.06, "nemo2407-h100-fp8-nemotron-8b": 0.87, "nemo2407-h100-fp8-nemotron-22b": 0.97,
    "nemo2407-h100-fp8-nemotron4-340b": 1.01, "nemo2407-h100-fp8-llama3-8b": 0.86, "nemo2407-h100-fp8-llama3-70b": 0.97,
}


def test_the_modern_ratio_table_has_not_moved(modern):
    assert {c.run.id: round(c.ratio, 2) for c in modern} == pytest.approx(MODERN_RATIOS, abs=0.011)
