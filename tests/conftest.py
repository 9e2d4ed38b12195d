import matplotlib

# Tests draw figures without a display. (Not through MPLBACKEND: nbval's kernels inherit the
# environment, and the notebooks must keep their inline backend to show their figures.)
matplotlib.use("Agg")

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import roofline as rl


@pytest.fixture(scope="session")
def llama():
    return rl.load_model("llama-3-8b")


@pytest.fixture(scope="session")
def h100():
    return rl.get_hardware("h100-sxm")


@pytest.fixture(scope="session")
def site(tmp_path_factory):
    """The book, built once per test run as CI builds it: zero warnings, and self-contained (the
    scripts it needs fetched with npm, never taken from a CDN; the build fails if it cannot)."""
    root, out = Path(__file__).resolve().parent.parent, tmp_path_factory.mktemp("book")
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "jupyter-book"), "build", str(root), "--path-output", str(out),
         "--warningiserror", "--keep-going"],
        capture_output=True, text=True, timeout=1200, env={**os.environ, "ROOFLINE_SELF_CONTAINED": "1"},
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    # Sphinx warnings read "path: WARNING: ..." (the kernel's own "WARNING |" log line is not one)
    assert "build succeeded" in proc.stdout and "WARNING:" not in proc.stdout + proc.stderr
    return out / "_build" / "html"


# --- the browser the page tests drive ------------------------------------------------------------------

BROWSER_NAMES = ("chromium", "chromium-browser", "google-chrome")
ENABLE_BROWSER = "to run them, `apt-get install chromium` or point $CHROMIUM at a Chromium or Chrome"


def find_chromium(env=os.environ) -> tuple[str | None, str]:
    """(path of the browser, how it was found or why none was): ``$CHROMIUM`` when set, else the first
    of chromium, chromium-browser, google-chrome on PATH. Never downloads one."""
    chosen = env.get("CHROMIUM")
    if chosen:
        path = shutil.which(chosen, path=env.get("PATH", os.defpath))
        if path is None:
            return None, f"$CHROMIUM is {chosen!r}, which is not an executable"
        return path, f"$CHROMIUM={chosen}"
    for name in BROWSER_NAMES:
        path = shutil.which(name, path=env.get("PATH", os.defpath))
        if path:
            return path, f"{name} on PATH"
    return None, f"no Chromium found ($CHROMIUM is unset and none of {', '.join(BROWSER_NAMES)} is on PATH)"


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def pytest_collection_modifyitems(config, items):
    """No browser, outside CI: skip every test that needs one, as one line of pytest's summary (a skip
    mark, which pytest folds per file, rather than a skip from the fixture, reported once per test)."""
    needing = [item for item in items if "chromium" in getattr(item, "fixturenames", ())]
    if not needing or _in_ci():
        return
    path, how = find_chromium()
    if path is None:
        mark = pytest.mark.skip(reason=f"browser tests skipped: {how}; {ENABLE_BROWSER}")
        for item in needing:
            item.add_marker(mark)


@pytest.fixture(scope="session")
def chromium():
    """The browser's path. In CI (``CI=true``) a missing browser is a failure that names what was
    looked for; elsewhere the tests that need one were skipped at collection."""
    path, how = find_chromium()
    if path is None:
        if _in_ci():
            pytest.fail(f"CI=true, and the browser tests need a browser: {how}; {ENABLE_BROWSER}.", pytrace=False)
        pytest.skip(f"browser tests skipped: {how}; {ENABLE_BROWSER}")
    return path
