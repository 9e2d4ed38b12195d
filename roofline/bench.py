"""``make bench``: the figures to quote for speed. Printed, never asserted.

- a cold book build (fresh output folder, notebooks executed), in seconds;
- nbval over the chapters, in seconds;
- one vectorized decode sweep over 10^6 (batch, context) pairs, in milliseconds;
- chapter 1's page weight: its HTML (the explorer's frames ride inside it) plus the scripts, styles
  and images it names, in MB as stored and as a static host sends them (gzip).
"""

from __future__ import annotations

import gzip
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def _seconds(cmd: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        print(proc.stdout[-2000:], proc.stderr[-2000:], file=sys.stderr)
        raise SystemExit(f"failed: {' '.join(cmd)}")
    return elapsed


def sweep_seconds(n_batch: int = 1000, n_context: int = 1000, repeat: int = 5) -> float:
    """Best time of one decode_step + predict call over n_batch x n_context pairs."""
    import roofline as rl

    model, roof = rl.load_model("llama-3-8b"), rl.get_hardware("h100-sxm")
    batch = np.arange(1, n_batch + 1, dtype=float)[None, :]
    context = np.linspace(0, 131_072, n_context).round()[:, None]
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        pred = rl.predict(rl.decode_step(model, batch, context, accounting="refined"), roof)
        _ = batch / pred.time  # tokens/s for every pair
        best = min(best, time.perf_counter() - start)
    return best


def page_weight(site: Path, page: str) -> dict[str, tuple[int, int]]:
    """Bytes (stored, gzipped) of ``page`` and of every file of the site it loads by name.

    Files named by ``<script src>``, ``<link href>`` (styles, preloads) and ``<img src>``; not what
    those load in turn (fonts: a few hundred kB more, which tests/test_browser.py counts in a browser).
    Keys: "html", "scripts", "styles", "images".
    """
    path = site / page
    raw = path.read_text(encoding="utf-8")
    kinds = {"scripts": r"<script[^>]*\ssrc=\"([^\"]+)\"", "styles": r"<link[^>]*\shref=\"([^\"]+\.css)[^\"]*\"",
             "images": r"<img[^>]*\ssrc=\"([^\"]+)\""}
    size = lambda data: (len(data), len(gzip.compress(data, 6)))
    weight = {"html": size(path.read_bytes())}
    for kind, pattern in kinds.items():
        files = {(path.parent / m.split("?")[0]).resolve() for m in re.findall(pattern, raw) if "://" not in m}
        missing = [f for f in files if not f.is_file()]
        if missing:
            raise FileNotFoundError(f"{page} names files the site lacks: {missing}")
        sizes = [size(f.read_bytes()) for f in files]
        weight[kind] = (sum(s for s, _ in sizes), sum(g for _, g in sizes))
    return weight


def main() -> None:
    bin_ = Path(sys.executable).parent
    sweep = sweep_seconds()
    print(f"decode sweep, 10^6 (batch, context) pairs, one vectorized call: {1e3 * sweep:.1f} ms", flush=True)
    with tempfile.TemporaryDirectory() as out:
        book = _seconds([str(bin_ / "jupyter-book"), "build", str(ROOT), "--path-output", out, "--warningiserror"], ROOT)
        weight = page_weight(Path(out, "_build", "html"), "chapters/01-three-budgets.html")
    print(f"cold book build: {book:.1f} s", flush=True)
    total = [sum(w[k] for w in weight.values()) / 1e6 for k in (0, 1)]
    parts = ", ".join(f"{kind} {w[0] / 1e6:.2f}" for kind, w in weight.items())
    print(f"chapter 1 page weight: {total[0]:.2f} MB as stored ({parts}), {total[1]:.2f} MB sent gzipped", flush=True)
    nbval = _seconds([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "chapters"], ROOT)
    print(f"nbval over chapters/: {nbval:.1f} s", flush=True)


if __name__ == "__main__":
    main()
