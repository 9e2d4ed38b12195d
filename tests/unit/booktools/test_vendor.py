"""The scripts the site serves itself: committed under _vendor/, the versions the lock pins, small."""

import json
import shutil
from pathlib import Path

import pytest

from booktools import vendor

ROOT = Path(__file__).resolve().parents[3]


def test_the_committed_scripts_are_the_ones_the_lock_pins():
    assert vendor.check() == []
    entries = vendor.manifest()
    locked = vendor.locked_versions()
    assert entries["html-manager/embed.js"]["version"] == locked["@jupyter-widgets/html-manager"]
    assert entries["mathjax/startup.js"]["version"] == locked["mathjax"]
    # every package that ships code here ships its license beside it
    for folder in ("html-manager", "mathjax", vendor.TEST_ONLY):
        assert any(p.startswith(f"{folder}/") and "LICENSE" in p for p in entries), folder
    # the accessibility test's axe-core, pinned as a development dependency
    assert entries[f"{vendor.TEST_ONLY}/axe.min.js"]["version"] == locked["axe-core"]


def test_the_configured_scripts_are_committed_and_few_megabytes():
    import yaml

    config = yaml.safe_load((ROOT / "_config.yml").read_text())["sphinx"]["config"]
    for path in [*config["nb_ipywidgets_js"], config["mathjax_path"]]:
        assert (ROOT / vendor.STATIC / path).is_file(), path
    assert "require" not in " ".join(config["nb_ipywidgets_js"]), "the embed manager needs no RequireJS"
    # the fallback widget manager that roofline-widgets.js loads for widgets other than explorers
    assert '"html-manager/embed.js"' in (ROOT / vendor.STATIC / "roofline-widgets.js").read_text()
    assert "html-manager/embed.js" in vendor.manifest()
    served = [f for f in (ROOT / vendor.STATIC).rglob("*")
              if f.is_file() and f.relative_to(ROOT / vendor.STATIC).parts[0] != vendor.TEST_ONLY]
    total = sum(f.stat().st_size for f in served)
    assert total < 5e6, f"_vendor/ serves {total / 1e6:.1f} MB"


def test_a_changed_or_stale_copy_is_reported(tmp_path):
    shutil.copytree(ROOT / vendor.STATIC, tmp_path / vendor.STATIC)
    shutil.copy(ROOT / "package-lock.json", tmp_path)
    assert vendor.check(tmp_path) == []
    embed = tmp_path / vendor.STATIC / "html-manager" / "embed.js"
    embed.write_bytes(embed.read_bytes() + b"\n")
    (tmp_path / vendor.STATIC / "mathjax" / "LICENSE").unlink()
    lock = json.loads((tmp_path / "package-lock.json").read_text())
    lock["packages"]["node_modules/mathjax"]["version"] = "9.9.9"
    (tmp_path / "package-lock.json").write_text(json.dumps(lock))
    problems = "\n".join(vendor.check(tmp_path))
    assert "html-manager/embed.js differs" in problems
    assert "mathjax/LICENSE is missing" in problems
    assert "the lock pins 9.9.9" in problems


def test_missing_lock_manifest_or_npm_are_clear_errors(tmp_path, monkeypatch):
    with pytest.raises(vendor.VendorError, match="package-lock.json is missing"):
        vendor.refresh(tmp_path)
    with pytest.raises(vendor.VendorError, match="MANIFEST.json is missing: run `make vendor`"):
        vendor.manifest(tmp_path)
    shutil.copy(ROOT / "package-lock.json", tmp_path)
    monkeypatch.setattr(vendor.shutil, "which", lambda name: None)
    with pytest.raises(vendor.VendorError, match="npm .* was not found.*building the book does not"):
        vendor.refresh(tmp_path)
