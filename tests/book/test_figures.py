"""The same commit draws the same figure files, byte for byte, whatever CPU draws them.

Two chapters whose figures once came out differently on another machine (log axes, where numpy's
AVX-512 log and power differ in the last bit from its other code) are executed twice in fresh kernels,
their figures saved into two folders: once as the book's build runs (numpy without its AVX-512 code:
the Makefile and tests/conftest.py set NPY_DISABLE_CPU_FEATURES), once as on a CPU without AVX2 either.
Every SVG and PNG must be the same in both, and the same as the one in figures/ (which the build
writes, and which is committed: a clean clone's `make book` must leave `git status` clean).
"""

import os
import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from booktools import NUMPY_PINNED

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = ["05-kv-cache", "10-mixture-of-experts"]
OLDER_CPU = "X86_V3"  # AVX2 and FMA: with the pinned set disabled too, numpy runs its baseline code


def _draw(chapter: str, folder: Path, disabled: str) -> dict[str, bytes]:
    """Execute ``chapter`` in a fresh kernel that saves its figures into ``folder``; {file name: bytes}."""
    nb = nbformat.read(ROOT / "chapters" / f"{chapter}.ipynb", as_version=4)
    env = {**os.environ, "ROOFLINE_FIGURES": str(folder), "NPY_DISABLE_CPU_FEATURES": disabled}
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(ROOT / "chapters")}}).execute(env=env)
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_the_makefile_and_the_tests_pin_numpy_alike():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(rf"^export NPY_DISABLE_CPU_FEATURES \?= {NUMPY_PINNED}$", makefile, flags=re.M)
    assert os.environ["NPY_DISABLE_CPU_FEATURES"] == NUMPY_PINNED or os.environ.get("CI") != "true"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_two_builds_on_different_cpus_draw_the_same_files(chapter, tmp_path):
    pinned = os.environ["NPY_DISABLE_CPU_FEATURES"]
    first = _draw(chapter, tmp_path / "first", pinned)
    second = _draw(chapter, tmp_path / "second", f"{OLDER_CPU} {pinned}")
    names = sorted(first)
    assert names and all(n.startswith(f"ch{chapter[:2]}-") for n in names), names
    assert {n.rsplit(".", 1)[1] for n in names} == {"png", "svg"}
    assert sorted(second) == names
    differ = [n for n in names if first[n] != second[n]]
    assert differ == [], f"drawn differently on another CPU: {differ}"
    stale = [n for n in names if (ROOT / "figures" / n).read_bytes() != first[n]]
    assert stale == [], f"figures/ holds other bytes than the build draws (run `make book`, commit): {stale}"
