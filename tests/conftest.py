import matplotlib

# Tests draw figures without a display. (Not through MPLBACKEND: nbval's kernels inherit the
# environment, and the notebooks must keep their inline backend to show their figures.)
matplotlib.use("Agg")

import contextlib
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import settings

import roofline as rl
from booktools import NUMPY_PINNED
from booktools.browser import ENABLE_BROWSER, find_chromium

# The kernels the tests start (nbval, the book build) draw figures as `make` has them drawn: without
# numpy's AVX-512 code, whose last bits differ from the other CPUs' (see the Makefile). A child process
# reads this when it imports numpy.
os.environ.setdefault("NPY_DISABLE_CPU_FEATURES", NUMPY_PINNED)

# No per-example time limit: a property test asserts a law, not a speed (speeds live in `make bench`),
# and a machine shared by other jobs must not turn a slow example into a failure.
settings.register_profile("laws", deadline=None)
# In CI the examples are drawn from a fixed seed and no database replays old failures: a red run there
# means the change under test broke a law, not that this run drew an unlucky example.
settings.register_profile("ci", deadline=None, derandomize=True, database=None)
settings.load_profile("ci" if os.environ.get("CI", "").lower() == "true" else "laws")


@contextlib.contextmanager
def _memory_cap(extra: int):
    """Let the process map at most ``extra`` more bytes of address space while the block runs (Linux; a
    no-op elsewhere): an allocation past it raises MemoryError in the test instead of taking the machine."""
    try:
        import resource

        with open("/proc/self/statm") as f:
            mapped = int(f.read().split()[0]) * resource.getpagesize()
    except (ImportError, OSError):
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = mapped + extra if hard == resource.RLIM_INFINITY else min(hard, mapped + extra)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


@pytest.fixture(scope="session")
def memory_cap():
    """``with memory_cap(extra):`` caps the address space the block may add (see :func:`_memory_cap`); for the fuzz
    tests, whose draws may ask for anything, so that a runaway allocation fails the test, not the machine."""
    return _memory_cap


@pytest.fixture(scope="session")
def rec():
    """Our H200 record (roofline/data/measured), read and validated."""
    from roofline.core.records import load_measurement

    return load_measurement("h200-2026-11-29")


@pytest.fixture(scope="session")
def raw():
    """The same record as its JSON says it, for tests that break it on purpose (a copy each time it is edited)."""
    import json
    from importlib import resources

    return json.loads(resources.files("roofline").joinpath("data/measured/h200-2026-11-29.json").read_text())


@pytest.fixture(scope="session")
def llama():
    return rl.load_model("llama-3-8b")


@pytest.fixture(scope="session")
def shape():
    """Llama 3 8B's config.json numbers, typed by hand, so that a test can state a formula in them
    (``tests/unit/core/test_model.py`` checks that the shipped config says the same)."""
    return SimpleNamespace(hidden=4096, layers=32, heads=32, kv_heads=8, head_dim=128, intermediate=14336,
                           vocab=128256)


@pytest.fixture(scope="session")
def h100():
    return rl.get_hardware("h100-sxm")


@pytest.fixture(scope="session")
def site(tmp_path_factory):
    """The book, built once per test run as CI builds it: zero warnings, and with no npm (a stand-in
    ``npm``/``node`` first on PATH fails and leaves a mark if anything calls it): the scripts the
    site serves itself are committed under _vendor/."""
    if os.environ.get("ROOFLINE_SITE"):  # a site built already, to iterate on the browser tests quickly
        return Path(os.environ["ROOFLINE_SITE"]).resolve()
    root, out = Path(__file__).resolve().parents[1], tmp_path_factory.mktemp("book")
    fake = tmp_path_factory.mktemp("no-npm")
    for name in ("npm", "node", "npx"):
        (fake / name).write_text(f"#!/bin/sh\ntouch '{fake}/called-{name}'\necho '{name} is not here' >&2\nexit 127\n")
        (fake / name).chmod(0o755)
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "jupyter-book"), "build", str(root), "--path-output", str(out),
         "--warningiserror", "--keep-going"],
        capture_output=True, text=True, timeout=1200, env={**os.environ, "PATH": f"{fake}:{os.environ['PATH']}"},
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    # Sphinx warnings read "path: WARNING: ..." (the kernel's own "WARNING |" log line is not one)
    assert "build succeeded" in proc.stdout and "WARNING:" not in proc.stdout + proc.stderr
    assert not list(fake.glob("called-*")), "the book build called npm or node"
    return out / "_build" / "html"


# --- the browser the page tests drive ------------------------------------------------------------------

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


@pytest.fixture(scope="module")
def browser(chromium):
    """Headless Chromium through Playwright, one per test module (a module that drives its own, as
    tests/book/test_lab.py does, never overlaps it)."""
    from playwright import sync_api

    from booktools.browser import ARGS

    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium, args=ARGS)
        try:
            yield b
        finally:
            b.close()



LONGEST_ID = 100
"""The most characters a test's parameter id may hold (the part between the brackets): long ids break some
pytest versions' command lines ("argument list too long") and read badly in a report."""


def pytest_make_parametrize_id(config, val, argname):
    """A parameter shown in a test id: as pytest shows it where that is short, else its first characters and a
    short hash of the whole, so that ids stay unique, stable from run to run, and short."""
    import hashlib

    if isinstance(val, (str, bytes, int, float)) and not isinstance(val, bool):
        text = val.decode("utf-8", "replace") if isinstance(val, bytes) else str(val)
        text = text.encode("unicode_escape").decode("ascii")
        if len(text) > 30:
            return f"{text[:20]}~{hashlib.sha1(text.encode()).hexdigest()[:8]}"
    return None
