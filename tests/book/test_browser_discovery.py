"""Which browser the page tests drive (booktools.browser), and what happens without one (conftest.py)."""

import os
import re
import subprocess
import sys
from pathlib import Path

from booktools.browser import BROWSER_NAMES, find_chromium

ROOT = Path(__file__).resolve().parents[2]


def _executable(folder: Path, name: str) -> Path:
    path = folder / name
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)
    return path


def test_chromium_is_found_by_variable_then_by_name_on_path(tmp_path):
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    assert find_chromium({"PATH": str(bin_)})[0] is None
    chrome = _executable(bin_, "google-chrome")
    assert find_chromium({"PATH": str(bin_)}) == (str(chrome), "google-chrome on PATH")
    # chromium comes before google-chrome when both are there
    first = _executable(bin_, BROWSER_NAMES[0])
    assert find_chromium({"PATH": str(bin_)})[0] == str(first)
    # $CHROMIUM wins over PATH, and a $CHROMIUM that is not there is reported, not replaced
    mine = _executable(tmp_path, "my-chrome")
    assert find_chromium({"PATH": str(bin_), "CHROMIUM": str(mine)})[0] == str(mine)
    path, why = find_chromium({"PATH": str(bin_), "CHROMIUM": str(tmp_path / "nowhere")})
    assert path is None and "nowhere" in why and "not an executable" in why


def _pytest_without_a_browser(tmp_path, **env):
    """The browser tests run with no browser to be found: PATH holds nothing, $CHROMIUM points nowhere."""
    empty = tmp_path / "empty"
    empty.mkdir(exist_ok=True)
    environ = {k: v for k, v in os.environ.items() if k not in ("CI", "CHROMIUM")}
    environ.update(PATH=str(empty), CHROMIUM=str(tmp_path / "no-such-browser"), **env)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-o", "addopts=-ra", "-q",
         str(ROOT / "tests" / "book" / "test_browser.py")],
        capture_output=True, text=True, timeout=300, env=environ, cwd=tmp_path,
    )


def test_without_a_browser_the_browser_tests_are_skipped_with_one_line_saying_how_to_enable_them(tmp_path):
    proc = _pytest_without_a_browser(tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    skipped = [line for line in out.splitlines() if line.startswith("SKIPPED")]
    assert len(skipped) == 1, out[-3000:]
    assert "no-such-browser" in skipped[0] and "apt-get install chromium" in skipped[0], skipped
    assert re.search(r"\b\d+ skipped in ", out) and not re.search(r"\d+ (passed|failed|errors?)\b", out), out[-3000:]


def test_in_ci_a_missing_browser_fails_and_is_named(tmp_path):
    proc = _pytest_without_a_browser(tmp_path, CI="true")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-3000:]
    assert "CI=true" in out and "no-such-browser" in out and "not an executable" in out, out[-3000:]
    assert "skipped" not in out
