import matplotlib

# Tests draw figures without a display. (Not through MPLBACKEND: nbval's kernels inherit the
# environment, and the notebooks must keep their inline backend to show their figures.)
matplotlib.use("Agg")

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import settings

import roofline as rl

# No per-example time limit: a property test asserts a law, not a speed (speeds live in `make bench`),
# and a machine shared by other jobs must not turn a slow example into a failure.
settings.register_profile("laws", deadline=None)
settings.load_profile("laws")


@pytest.fixture(scope="session")
def llama():
    return rl.load_model("llama-3-8b")


@pytest.fixture(scope="session")
def shape():
    """Llama 3 8B's config.json numbers, typed by hand, so that a test can state a formula in them
    (``tests/test_model.py`` checks that the shipped config says the same)."""
    return SimpleNamespace(hidden=4096, layers=32, heads=32, kv_heads=8, head_dim=128, intermediate=14336,
                           vocab=128256)


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
