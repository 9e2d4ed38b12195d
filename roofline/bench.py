"""``make bench``: the figures to quote for speed. Printed, never asserted.

- a cold book build (fresh output folder, notebooks executed), in seconds;
- nbval over the chapters, in seconds;
- one vectorized decode sweep over 10^6 (batch, context) pairs, in milliseconds.
"""

from __future__ import annotations

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


def main() -> None:
    bin_ = Path(sys.executable).parent
    sweep = sweep_seconds()
    print(f"decode sweep, 10^6 (batch, context) pairs, one vectorized call: {1e3 * sweep:.1f} ms", flush=True)
    with tempfile.TemporaryDirectory() as out:
        book = _seconds([str(bin_ / "jupyter-book"), "build", str(ROOT), "--path-output", out, "--warningiserror"], ROOT)
        page = Path(out, "_build", "html", "chapters")
        weight = sum(p.stat().st_size for p in page.glob("*.html"))
    print(f"cold book build: {book:.1f} s", flush=True)
    print(f"chapter pages (HTML with embedded frames): {weight / 1e6:.2f} MB", flush=True)
    nbval = _seconds([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "chapters"], ROOT)
    print(f"nbval over chapters/: {nbval:.1f} s", flush=True)


if __name__ == "__main__":
    main()
