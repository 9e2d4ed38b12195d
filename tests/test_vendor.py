"""The self-hosted scripts: CDN fallback addresses follow the lock file, and failures say why."""

import json
import shutil
from pathlib import Path

import pytest

from roofline import vendor

ROOT = Path(__file__).resolve().parent.parent


def _locked(package):
    return json.loads((ROOT / "package-lock.json").read_text())["packages"][f"node_modules/{package}"]["version"]


def test_the_cdn_fallback_loads_the_versions_the_lock_pins():
    assert vendor.cdn_url("npm/require.js").endswith(f"/requirejs@{_locked('requirejs')}/require.js")
    embed = vendor.cdn_url("npm/html-manager/embed-amd.js")
    assert embed.endswith(f"/@jupyter-widgets/html-manager@{_locked('@jupyter-widgets/html-manager')}/dist/embed-amd.js")
    assert vendor.cdn_url("npm/mathjax/tex-mml-chtml.js").endswith(f"/mathjax@{_locked('mathjax')}/es5/tex-mml-chtml.js")
    assert vendor.cdn_url("roofline-widgets.js") == "roofline-widgets.js"  # ours, always served by the site


def test_the_configured_scripts_are_ones_fetch_copies():
    import yaml

    config = yaml.safe_load((ROOT / "_config.yml").read_text())["sphinx"]["config"]
    for path in [*config["nb_ipywidgets_js"], config["mathjax_path"]]:
        assert vendor.cdn_url(path).startswith(("https://", "roofline-widgets.js")), path
    assert (ROOT / vendor.STATIC / "roofline-widgets.js").is_file()


def test_unknown_paths_and_a_missing_npm_are_clear_errors(tmp_path, monkeypatch):
    with pytest.raises(vendor.VendorError, match="not a file that roofline.vendor copies"):
        vendor.cdn_url("npm/nothing-here.js")
    with pytest.raises(vendor.VendorError, match="package-lock.json is missing"):
        vendor.fetch(tmp_path)
    shutil.copy(ROOT / "package-lock.json", tmp_path)
    monkeypatch.setattr(vendor.shutil, "which", lambda name: None)
    with pytest.raises(vendor.VendorError, match="npm .* was not found"):
        vendor.fetch(tmp_path)


def test_tests_and_ci_insist_on_the_self_contained_site(monkeypatch):
    monkeypatch.delenv("ROOFLINE_SELF_CONTAINED", raising=False)
    monkeypatch.delenv("CI", raising=False)
    assert not vendor.self_contained_required()
    monkeypatch.setenv("CI", "true")
    assert vendor.self_contained_required()
    monkeypatch.delenv("CI")
    monkeypatch.setenv("ROOFLINE_SELF_CONTAINED", "1")
    assert vendor.self_contained_required()
