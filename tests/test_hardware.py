"""The hardware catalog: every figure sourced, validated on load, looked up by name."""

import tomllib
from importlib import resources

import pytest

import roofline as rl
from roofline.hardware import CatalogError, load_catalog
from roofline.roof import Roof

REQUIRED = ["v100-sxm2", "a100-sxm-80gb", "h100-sxm", "h200-sxm", "b200"]


def test_catalog_has_the_chapter_one_chips():
    names = rl.hardware_names()
    for key in REQUIRED:
        assert key in names


@pytest.mark.parametrize("key", REQUIRED)
def test_every_entry_has_sourced_bandwidth_capacity_and_interconnect(key):
    h = rl.get_hardware(key)
    assert h.hbm_bandwidth > 0 and h.hbm_capacity > 0
    for path, fig in h.figures.items():
        assert fig.source.title and fig.source.url.startswith(("http", "shared/")), path
    assert "scale_up" in h.interconnect


def test_dense_figures_are_dense(h100):
    # The H100 datasheet's bf16 "1,979 with sparsity" halves to the dense 989.4 used by the text.
    assert h100.peak_flops("bf16") == pytest.approx(989.4e12)
    assert h100.peak_flops("fp8") == pytest.approx(2 * h100.peak_flops("bf16"), rel=1e-3)
    assert "sparsity" in h100.source("dense.bf16").note


def test_a_missing_dtype_is_absent_not_zero():
    v100 = rl.get_hardware("v100-sxm2")
    assert "bf16" not in v100.dense_flops
    with pytest.raises(ValueError, match="no dense bf16 peak"):
        v100.ridge_point("bf16")
    assert v100.ridge_point("fp16") == pytest.approx(125e12 / 900e9)


def test_lookup_by_alias_and_close_matches():
    assert rl.get_hardware("H100").key == "h100-sxm"
    with pytest.raises(KeyError, match="did you mean"):
        rl.get_hardware("h100-smx")
    with pytest.raises(TypeError, match="hardware must be a name"):
        rl.get_hardware(3.35)


def test_ridge_points_of_the_text():
    assert rl.ridge_point("h100-sxm") == pytest.approx(295.3, abs=0.05)
    assert rl.ridge_point("a100-sxm-80gb") == pytest.approx(153.0, abs=0.1)
    assert rl.ridge_point("h200-sxm") == pytest.approx(206.1, abs=0.1)


def test_roof_kinds_are_kept_apart(h100):
    datasheet = h100.roof()
    measured = Roof("H200 measured", 776e12, 4.08e12, kind="measured")
    assert datasheet.kind == "datasheet" and measured.kind == "measured"
    assert datasheet.with_(bandwidth=4e12).kind == "what-if"
    with pytest.raises(ValueError, match="kind must be"):
        Roof("x", 1e12, 1e12, kind="guess")
    with pytest.raises(ValueError, match="bandwidth must be"):
        Roof("x", 1e12, -1.0)


def _catalog_text():
    return resources.files("roofline").joinpath("data/hardware.toml").read_text()


def _write(tmp_path, text):
    path = tmp_path / "hw.toml"
    path.write_text(text)
    return path


def test_the_shipped_catalog_parses_through_the_public_loader(tmp_path):
    assert set(load_catalog(_write(tmp_path, _catalog_text()))) == set(rl.hardware_names())


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda t: t.replace('hbm_bandwidth = { value = 3.35,', 'hbm_bandwidth = { value = -3.35,', 1), r"\[h100-sxm\] field 'hbm_bandwidth': value must be positive"),
        (lambda t: t.replace('hbm_bandwidth = { value = 3.35,', 'hbm_bandwidth = { value = 0,', 1), "leave a figure out rather than set it to 0"),
        (lambda t: t.replace('hbm_bandwidth = { value = 3.35,', 'hbm_bandwidth = { value = "3.35",', 1), "value must be a number"),
        (lambda t: t.replace('value = 3.35, unit = "TB/s"', 'value = 3.35, unit = "TB/hour"', 1), "unknown unit 'TB/hour'"),
        (lambda t: t.replace('value = 3.35, unit = "TB/s"', 'value = 3.35, unit = "TFLOP/s"', 1), "expected B/s"),
        (lambda t: t.replace('hbm_bandwidth = { value = 3.35, unit = "TB/s", source = "nvidia-h100-datasheet"', 'hbm_bandwidth = { value = 3.35, unit = "TB/s", source = "nowhere"', 1), "source 'nowhere' is not in"),
        (lambda t: t.replace('bf16 = { value = 989.4, unit = "TFLOP/s",', 'bf16 = { value = 1978.9, unit = "TFLOP/s", sparse = true,', 1), "sparse figure where a dense one belongs"),
        (lambda t: t.replace('memory_type = "HBM3"\n', '', 1), r"missing field\(s\) memory_type"),
        (lambda t: t.replace('bf16 = { value = 989.4,', 'bf17 = { value = 989.4,', 1), "dense.bf17': unknown dtype"),
        (lambda t: t + "\n[gpus.broken\n", "not valid TOML"),
    ],
)
def test_bad_catalog_entries_get_clear_errors(tmp_path, edit, message):
    text = edit(_catalog_text())
    assert text != _catalog_text()
    with pytest.raises(CatalogError, match=message):
        load_catalog(_write(tmp_path, text))


def test_every_source_key_is_used_and_every_entry_cites_existing_sources():
    raw = tomllib.loads(_catalog_text())
    used = set()
    for entry in raw["gpus"].values():
        for value in [*entry.values(), *entry.get("dense", {}).values(), *entry.get("interconnect", {}).values()]:
            if isinstance(value, dict) and "source" in value:
                used.add(value["source"])
    assert used == set(raw["sources"])


def test_network_figures_are_per_gpu():
    # a DGX-1 shares four 100 Gb/s EDR ports among eight V100s
    assert rl.get_hardware("v100-sxm2").interconnect["network"].each_way == 50e9 / 8
    assert rl.get_hardware("h100-sxm").interconnect["network"].each_way == 400e9 / 8


def test_hardware_table_marks_a_fallback_format():
    from roofline import tables

    t = tables.hardware_table(["v100-sxm2", "h100-sxm"])
    assert t.column("dense bf16") == ("125.0 TFLOP/s (fp16)", "989.4 TFLOP/s")
    with pytest.raises(ValueError, match="no dense bf16 peak"):
        tables.hardware_table(["v100-sxm2"], fallback=None)
