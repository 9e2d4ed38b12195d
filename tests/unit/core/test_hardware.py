"""The hardware catalog: every figure sourced, validated on load, looked up by name."""

import tomllib
from importlib import resources

import pytest

import roofline as rl
from roofline.core.hardware import CatalogError, load_catalog
from roofline.core.roof import Roof

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
    datasheet = rl.as_roof(h100)
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
        (lambda t: t.replace('hbm_bandwidth = { value = 3.35,', 'hbm_bandwidth = { value = -3.35,', 1), r"\[gpus.h100-sxm\] hbm_bandwidth: expected a positive finite number, got -3.35"),
        (lambda t: t.replace('hbm_bandwidth = { value = 3.35,', 'hbm_bandwidth = { value = 0,', 1), "leave a figure out rather than set it to 0"),
        (lambda t: t.replace('hbm_bandwidth = { value = 3.35,', 'hbm_bandwidth = { value = "3.35",', 1), "expected a positive finite number, got '3.35'"),
        (lambda t: t.replace('value = 3.35, unit = "TB/s"', 'value = 3.35, unit = "TB/hour"', 1), "unknown unit 'TB/hour'"),
        (lambda t: t.replace('value = 3.35, unit = "TB/s"', 'value = 3.35, unit = "TFLOP/s"', 1), "expected B/s"),
        (lambda t: t.replace('hbm_bandwidth = { value = 3.35, unit = "TB/s", source = "nvidia-h100-datasheet"', 'hbm_bandwidth = { value = 3.35, unit = "TB/s", source = "nowhere"', 1), "source 'nowhere' is not in"),
        (lambda t: t.replace('bf16 = { value = 989.4, unit = "TFLOP/s",', 'bf16 = { value = 1978.9, unit = "TFLOP/s", sparse = true,', 1), "sparse figure where a dense one belongs"),
        (lambda t: t.replace('memory_type = "HBM3"\n', '', 1), r"missing field\(s\) memory_type"),
        (lambda t: t.replace('bf16 = { value = 989.4,', 'bf17 = { value = 989.4,', 1), "dense.bf17: unknown dtype"),
        (lambda t: t + "\n[gpus.broken\n", "not valid TOML"),
        # fields no rule reads, malformed dates and an alias given twice: refused with the entry and field named
        (lambda t: t.replace('memory_type = "HBM3"\n', 'memory_type = "HBM3"\nbogus = 5\n', 1), r"\[gpus.h100-sxm\]: unknown field 'bogus'"),
        (lambda t: t.replace('hbm_bandwidth = { value = 3.35, unit = "TB/s",', 'hbm_bandwidth = { value = 3.35, unit = "TB/s", colour = 1,', 1), r"\[gpus.h100-sxm\] hbm_bandwidth: unknown field 'colour'"),
        (lambda t: t + "\n[extras]\nx = 1\n", "hardware catalog: unknown field 'extras'"),
        (lambda t: t.replace('date = "2024"', 'date = "yesterday"', 1), r"date: expected a date such as \"2024\".* got 'yesterday'"),
        (lambda t: t.replace('date = "2024"', 'date = "2024-13"', 1), "got '2024-13'"),
        (lambda t: t.replace('aliases = ["h100", "h100-sxm5"]', 'aliases = ["h100", "h100-sxm5", "H100"]', 1), r"\[gpus.h100-sxm\] aliases\[2\]: 'H100' is given twice \(aliases\[0\] already\)"),
        (lambda t: t.replace('bf16 = { value = 989.4, unit = "TFLOP/s",', 'bf16 = { value = 1e-320, unit = "TFLOP/s",', 1), "dense.bf16: expected a figure between 1 and 1e\\+24 FLOP/s"),
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
    from roofline.present import tables

    t = tables.hardware_table(["v100-sxm2", "h100-sxm"])
    assert t.column("dense bf16") == ("125.0 TFLOP/s (fp16)", "989.4 TFLOP/s")
    with pytest.raises(ValueError, match="no dense bf16 peak"):
        tables.hardware_table(["v100-sxm2"], fallback=None)


def _entry(**fields):
    """A minimal catalog with one chip, its fields replaced by ``fields`` (TOML source text)."""
    base = {"name": '"My Chip"', "vendor": '"Me"', "architecture": '"Mine"', "year": "2025",
            "form_factor": '"card"', "memory_type": '"HBM3"', "aliases": '["mine"]',
            "hbm_bandwidth": '{ value = 2, unit = "TB/s", source = "sheet" }',
            "hbm_capacity": '{ value = 96, unit = "GB", source = "sheet" }'}
    base.update(fields)
    dense = base.pop("dense", '{ bf16 = { value = 500, unit = "TFLOP/s", source = "sheet", note = "dense" } }')
    sources = base.pop("sources", '{ sheet = { title = "My datasheet", url = "https://example.com", date = "2025" } }')
    lines = [f"sources = {sources}", "", "[gpus.my-chip]"] + [f"{k} = {v}" for k, v in base.items()]
    return "\n".join(lines + [f"dense = {dense}", ""])


def test_a_minimal_catalog_loads(tmp_path):
    h = load_catalog(_write(tmp_path, _entry()))["my-chip"]
    assert h.hbm_bandwidth == 2e12 and h.ridge_point() == 250 and h.aliases == ("mine",)


@pytest.mark.parametrize("fields, message", [
    (dict(hbm_bandwidth='{ value = inf, unit = "TB/s", source = "sheet" }'),
     r"^\[gpus.my-chip\] hbm_bandwidth: expected a positive finite number, got inf$"),
    (dict(hbm_bandwidth='{ value = nan, unit = "TB/s", source = "sheet" }'), "hbm_bandwidth: expected a positive finite number, got nan"),
    (dict(hbm_bandwidth='{ value = 1e308, unit = "TB/s", source = "sheet" }'), "hbm_bandwidth: .* which overflows"),
    (dict(hbm_bandwidth="5"), r"hbm_bandwidth: expected a table \{value, unit, source\}, got 5"),
    (dict(hbm_bandwidth='{ value = { x = 1 }, unit = "TB/s", source = "sheet" }'), "hbm_bandwidth: expected a positive finite number, got a dict"),
    (dict(aliases='"h100"'), r"aliases: expected a list of strings such as \[\"h100\"\], got 'h100'"),
    (dict(aliases="[1, 2]"), r"aliases\[0\]: expected a non-empty string, got 1"),
    (dict(year="-2022"), "year: expected a year between 1990 and 2100, got -2022"),
    (dict(year="20224"), "year: expected a year between 1990 and 2100, got 20224"),
    (dict(year='"2024"'), "year: expected an integer, got '2024'"),
    (dict(name="3"), "name: expected a non-empty string, got 3"),
    (dict(dense='{ bf16 = { value = 500, unit = "TFLOP/s", source = "sheet", note = 7 } }'), r"dense.bf16.note: expected a string, got 7"),
    (dict(dense='{ bf16 = { value = 500, unit = 5, source = "sheet" } }'), "dense.bf16: unknown unit 5"),
    (dict(dense='{ bf16 = { value = 500, unit = "TFLOP/s", source = ["sheet"] } }'), r"dense.bf16: source a list \['sheet'\] is not in \[sources\]"),
    (dict(dense="[1, 2]"), "dense: expected a table of dense peaks by dtype"),
    (dict(interconnect='{ scale_up = { value = 900, unit = "GB/s", source = "sheet", direction = "bidirectional", name = 4 } }'),
     "interconnect.scale_up.name: expected a non-empty string, got 4"),
    (dict(interconnect="3"), "interconnect: expected a table of links by tier"),
    (dict(sources="5"), r"\[sources\]: expected a table of \[sources.KEY\] tables, got 5"),
    (dict(sources="{ sheet = 5 }"), r"\[sources.sheet\]: expected a table \{title, url, date\}, got 5"),
    (dict(sources='{ sheet = { title = 1, url = "u", date = "2025" } }'), r"\[sources.sheet\] title: expected a non-empty string"),
])
def test_malformed_catalog_values_are_catalog_errors_naming_entry_and_field(tmp_path, fields, message):
    with pytest.raises(CatalogError, match=message):
        load_catalog(_write(tmp_path, _entry(**fields)))


def test_two_entries_may_not_share_a_name(tmp_path):
    text = _entry() + "\n" + _entry().split("\n", 2)[2].replace("[gpus.my-chip]", "[gpus.other-chip]")
    with pytest.raises(CatalogError, match=r"\[gpus.other-chip\] aliases: 'mine' already names \[gpus.my-chip\]"):
        load_catalog(_write(tmp_path, text))
    clash = _entry(aliases='["other-chip"]') + "\n" + _entry().split("\n", 2)[2].replace(
        "[gpus.my-chip]", "[gpus.other-chip]").replace('aliases = ["mine"]', "aliases = []")
    with pytest.raises(CatalogError, match="'other-chip' already names"):
        load_catalog(_write(tmp_path, clash))


@pytest.mark.parametrize("make, message", [
    (lambda p: p, "is a directory; give the path of a .toml file"),
    (lambda p: p / "absent.toml", "no such file"),
    (lambda p: (p / "latin1.toml").write_bytes(b'title = "caf\xe9"') and p / "latin1.toml", r"is not UTF-8 text \(byte 12"),
    (lambda p: (p / "deep.toml").write_text("a = " + "[" * 100_000 + "]" * 100_000) and p / "deep.toml", "nested too deeply"),
])
def test_unreadable_catalog_files_are_named(tmp_path, make, message):
    with pytest.raises(CatalogError, match=message):
        load_catalog(make(tmp_path))


def test_get_hardware_from_a_readers_catalog(tmp_path):
    path = _write(tmp_path, _entry())
    assert rl.get_hardware("mine", catalog=path).name == "My Chip"
    assert rl.hardware_names(catalog=str(path)) == ["my-chip"]
    assert rl.get_hardware("MY-CHIP", catalog=load_catalog(path)).key == "my-chip"
    with pytest.raises(KeyError, match="unknown hardware 'h100'; did you mean 'my-chip' or 'mine'|known: mine, my-chip"):
        rl.get_hardware("h100", catalog=path)
    assert rl.get_hardware("h100").key == "h100-sxm"  # the shipped catalog is untouched
    with pytest.raises(TypeError, match="catalog must be"):
        rl.get_hardware("h100", catalog=42)


def test_scale_hardware_multiplies_named_figures_only():
    import roofline as rl

    h100 = rl.get_hardware("h100-sxm")
    fast = rl.scale_hardware(h100, hbm_bandwidth=2)
    assert fast.hbm_bandwidth == 2 * 3.35e12 and fast.peak_flops() == h100.peak_flops()
    assert fast.ridge_point() == pytest.approx(h100.ridge_point() / 2)
    with pytest.raises(ValueError, match="the factor for hbm_bandwidth must be a positive number"):
        rl.scale_hardware(h100, hbm_bandwidth=0)
    with pytest.raises(ValueError, match="name is not a numeric figure"):
        rl.scale_hardware(h100, name=2)
# --- units as the datasheets print them: decimal GB and PFLOP/s, binary GiB ------------------------------

def test_sold_capacities_are_decimal_gigabytes_and_device_totals_keep_their_binary_units():
    """The catalog's "80 GB" is 80 x 10^9 bytes; a device total given in GiB is 2^30 bytes a unit (the V100's
    31.74 GiB, the B200's 178.35 GiB): reading one as the other would move every verdict by 7%."""
    assert rl.get_hardware("h100-sxm").hbm_capacity == 80e9
    assert rl.get_hardware("a100-sxm-80gb").hbm_capacity == 80e9
    assert rl.get_hardware("v100-sxm2").hbm_total == pytest.approx(31.74 * 2**30, rel=1e-12)
    assert rl.get_hardware("b200").hbm_total == pytest.approx(178.35 * 2**30, rel=1e-12)
    assert rl.fmt(rl.get_hardware("h100-sxm").hbm_capacity, "B") == "80.0 GB"


def test_a_peak_given_in_pflop_s_is_a_thousand_tflop_s():
    """The B200's dense bf16 is printed as 2.25 PFLOP/s, fp8 4.5 and fp4 9: 2.27x the H100's 989.4 TFLOP/s."""
    b200, h100 = rl.get_hardware("b200"), rl.get_hardware("h100-sxm")
    assert b200.peak_flops("bf16") == 2.25e15 and b200.peak_flops("fp8") == 4.5e15 and b200.peak_flops("fp4") == 9e15
    assert b200.peak_flops("bf16") / h100.peak_flops("bf16") == pytest.approx(2.274, abs=1e-3)


# --- a link the catalog does not give: named, with the tiers the entry has and where to add it (issue 33) ---------

def test_a_missing_link_names_the_tier_the_entry_and_the_table():
    from roofline.core.hardware import MissingLinkError, require_links
    pcie = rl.get_hardware("h100-pcie")
    with pytest.raises(MissingLinkError, match=r"tier must be one of 'scale_up', 'host' for the H100 PCIe, got "
                                               r"'network': .* add network \(between nodes"):
        pcie.interconnect["network"]
    with pytest.raises(ValueError, match=r"\[gpus.h100-pcie.interconnect\]"):
        pcie.link("network")
    assert pcie.link("host") is pcie.interconnect["host"]
    bare = pcie.with_(interconnect={})
    with pytest.raises(KeyError, match="gives no interconnect at all"):  # a KeyError too, never KeyError('')
        bare.interconnect["scale_up"]
    with pytest.raises(MissingLinkError, match=r"^train over 2 nodes needs 'scale_up' \(GPU to GPU inside a node: "
                                               r"NVLink, Infinity Fabric\) or 'host' \(GPU to CPU: PCIe\) and "
                                               r"'network' .* gives no interconnect at all"):
        require_links(bare, [("scale_up", "host"), "network"], "train over 2 nodes")
    with pytest.raises(MissingLinkError, match=r"needs 'network' .* gives only 'scale_up', 'host'; add it under"):
        require_links(pcie, [("scale_up", "host"), "network"], "x")
    require_links("h100-sxm", [("scale_up", "host"), "network"], "x")  # every link there: nothing raised
    with pytest.raises(KeyError, match="unknown tier 'nvlink'"):
        require_links("h100-sxm", ["nvlink"], "x")
    assert pcie.with_(hbm_bandwidth=1e12).interconnect.keys() == pcie.interconnect.keys()


def test_a_chip_with_no_memory_past_the_runtimes_reserve_is_refused_at_load(tmp_path):
    """1 GB of HBM against the default 1 GiB (1.07 GB) reserve would leave -73.7 MB usable: refused naming the
    field; an entry's own reserve below its capacity loads, and its usable memory is the difference."""
    with pytest.raises(CatalogError, match=r"\[gpus.my-chip\] hbm_capacity: the memory a program can allocate "
                                           r"\(1 GB\) must be more than the reserve kept for the runtime \(1.07 GB, "
                                           r"the default\)"):
        load_catalog(_write(tmp_path, _entry(hbm_capacity='{ value = 1, unit = "GB", source = "sheet" }')))
    with pytest.raises(CatalogError, match=r"\[gpus.my-chip\] reserve: .* \(96 GB\) .* \(100 GB\)"):
        load_catalog(_write(tmp_path, _entry(reserve='{ value = 100, unit = "GB", source = "sheet" }')))
    ok = load_catalog(_write(tmp_path, _entry(reserve='{ value = 6, unit = "GB", source = "sheet" }')))["my-chip"]
    assert ok.usable_capacity == pytest.approx(90e9)
