"""``make bench``: the figures to quote for speed and weight. Printed, never asserted.

- one scalar decode step built and timed, in microseconds (goal: at most 100);
- one vectorized decode sweep over 10^6 (batch, context) pairs under the step rule (goal: under 0.2 s)
  and under the kernel rule, on a datasheet roof and on the calibrated one (goal: under 1 s);
- a cold book build (fresh output folder, notebooks executed), in seconds;
- chapter 1's page weight: its HTML (the explorer's frames ride inside it) and every file it loads
  (scripts, styles, fonts, images), in MB as stored and as a static host sends them (gzip); in
  headless Chromium when one is found (``booktools.browser``), else from the files the HTML names;
- every chapter page's weight, its HTML and the files it names, as stored and gzipped (goal: under
  4 MB stored each);
- every page's prose density: numbers per 100 words and the most numbers in one sentence, prose only
  (``booktools.density``; goals: at most 5 per 100 words, at most 4 in a sentence);
- chapter 1's time to usable sliders: from opening the page from local disk (``file://``) in headless
  Chromium to the decode explorer's slider having a handle and its frame being on screen, the median
  of five cold loads (goals: at most 4 MB stored, 1.5 MB gzipped, 1.5 s);
- chapter 12's batching simulation, each policy over 512 requests (goal: under 1 s each);
- chapter 9's layout search for 16,384 GPUs, one call (goal: under 5 s);
- the package's unit tests (``make check``), in seconds (goal: under 60 s on two cores);
- the chapters' hidden cells: lines of code, glue calls, lines per glued number, and any ``def`` or
  ``class`` or line of arithmetic left in a notebook (goal: none; formulas live in the package);
- nbval over the chapters, in seconds.
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
CHAPTER = "chapters/01-three-budgets.html"


def _seconds(cmd: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        print(proc.stdout[-2000:], proc.stderr[-2000:], file=sys.stderr)
        raise SystemExit(f"failed: {' '.join(cmd)}")
    return elapsed


def sweep_seconds(n_batch: int = 1000, n_context: int = 1000, repeat: int = 5, *, timing: str = "step",
                  calibrated: bool = False) -> float:
    """Best time of one decode_step + predict call over n_batch x n_context pairs, under ``timing``
    on the H100's datasheet (or, with ``calibrated``, the H200's calibrated roof)."""
    import roofline as rl
    from roofline.core.calibration import get_roof

    model = rl.load_model("llama-3-8b")
    roof = get_roof("h200-sxm", "calibrated", scope="chip") if calibrated else rl.get_hardware("h100-sxm")
    batch = np.arange(1, n_batch + 1, dtype=float)[None, :]
    context = np.linspace(0, 131_072, n_context).round()[:, None]
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        pred = rl.predict(rl.decode_step(model, batch, context, accounting="refined"), roof, timing=timing)
        _ = batch / pred.time  # tokens/s for every pair
        best = min(best, time.perf_counter() - start)
    return best


def scalar_seconds(n: int = 2000, repeat: int = 5) -> float:
    """Best time of one scalar decode_step + predict call (Llama 3 8B, batch 1, 2,048 tokens, H100 SXM)."""
    import roofline as rl

    model, roof = rl.load_model("llama-3-8b"), rl.get_hardware("h100-sxm")
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(n):
            rl.predict(rl.decode_step(model, 1, 2048), roof)
        best = min(best, (time.perf_counter() - start) / n)
    return best


def batching_seconds(repeat: int = 3) -> dict[str, float]:
    """Best time of chapter 12's batching simulation, per policy: 512 requests in a burst, Llama 3 8B on one
    H200, 64 slots (chunks of 256 prompt tokens for 'chunked')."""
    from roofline.serving import batching

    requests = batching.make_requests(512, 1000.0, (128, 2048), (16, 512), seed=12)
    out = {}
    for policy in batching.POLICIES:
        best = float("inf")
        for _ in range(repeat):
            start = time.perf_counter()
            batching.simulate(requests, "llama-3-8b", "h200-sxm", policy=policy, max_batch=64,
                              chunk=256 if policy == "chunked" else None)
            best = min(best, time.perf_counter() - start)
        out[policy] = best
    return out


def page_weight(site: Path, page: str = CHAPTER) -> dict[str, tuple[int, int]]:
    """Bytes (stored, gzipped) of ``page`` and of every file of the site it loads by name.

    Files named by ``<script src>``, ``<link href>`` (styles, preloads) and ``<img src>``; not what
    those load in turn (fonts), which :func:`in_browser` counts.
    Keys: "html", "scripts", "styles", "images".
    """
    path = site / page
    raw = path.read_text(encoding="utf-8")
    kinds = {"scripts": r"<script[^>]*\ssrc=\"([^\"]+)\"", "styles": r"<link[^>]*\shref=\"([^\"]+\.css)[^\"]*\"",
             "images": r"<img[^>]*\ssrc=\"([^\"]+)\""}
    weight = {"html": size(path.read_bytes())}
    for kind, pattern in kinds.items():
        files = {(path.parent / m.split("?")[0]).resolve() for m in re.findall(pattern, raw) if "://" not in m}
        missing = [f for f in files if not f.is_file()]
        if missing:
            raise FileNotFoundError(f"{page} names files the site lacks: {missing}")
        sizes = [size(f.read_bytes()) for f in files]
        weight[kind] = (sum(s for s, _ in sizes), sum(g for _, g in sizes))
    return weight


def size(data: bytes) -> tuple[int, int]:
    """(bytes stored, bytes gzipped at level 6, as a static host would send them)."""
    return len(data), len(gzip.compress(data, 6))


def in_browser(site: Path, page: str = CHAPTER, loads: int = 5) -> tuple[float, tuple[int, int], list[str]]:
    """(median seconds to usable sliders, (stored, gzipped) bytes of every file the page loaded,
    requests outside the site) over ``loads`` cold loads from ``file://`` in headless Chromium."""
    from playwright import sync_api

    from booktools.browser import ARGS, USABLE_JS, find_chromium, record

    chromium, how = find_chromium()
    if chromium is None:
        raise RuntimeError(how)
    times, files, outside = [], set(), []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=ARGS)
        try:
            for _ in range(loads):
                context = browser.new_context(viewport={"width": 1280, "height": 900})  # a cold cache each time
                tab = context.new_page()
                failed, loaded = [], []
                record(tab, outside, failed, loaded)
                tab.goto((site / page).as_uri(), wait_until="commit")
                times.append(tab.wait_for_function(USABLE_JS, polling="raf", timeout=30_000).json_value() / 1e3)
                tab.wait_for_load_state("load")
                tab.wait_for_timeout(500)  # fonts MathJax asks for after load
                if failed:
                    raise FileNotFoundError(f"{page} asks for files the site lacks: {failed}")
                files |= {Path(path) for _, path in loaded}
                context.close()
        finally:
            browser.close()
    sizes = [size(f.read_bytes()) for f in files if f.is_file()]
    return sorted(times)[len(times) // 2], (sum(s for s, _ in sizes), sum(g for _, g in sizes)), outside


def chapter_weights(site: Path) -> dict[str, tuple[int, int]]:
    """Bytes (stored, gzipped) of every chapter page (``chapters/*.html``) with the files its HTML names
    (:func:`page_weight`: the frames ride inside the HTML; the fonts the styles load are not counted)."""
    out = {}
    for path in sorted((site / "chapters").glob("*.html")):
        if path.name.startswith("_"):
            continue
        weight = page_weight(site, path.relative_to(site).as_posix())
        out[path.relative_to(site).as_posix()] = tuple(sum(w[k] for w in weight.values()) for k in (0, 1))
    return out


def report_chapters(site: Path) -> None:
    """Print every chapter page's weight (goal: under 4 MB stored each)."""
    weights = chapter_weights(site)
    for page, (stored, sent) in weights.items():
        print(f"page weight, {page} and the files it names: {stored / 1e6:.2f} MB as stored, {sent / 1e6:.2f} MB "
              f"gzipped (goal: under 4 MB stored)", flush=True)
    heaviest = max(weights, key=lambda p: weights[p][0])
    print(f"heaviest chapter page: {heaviest}, {weights[heaviest][0] / 1e6:.2f} MB as stored", flush=True)


def report_density(site: Path) -> None:
    """Print every page's numbers per 100 words of prose and the most numbers in one of its sentences."""
    from booktools import density

    print(f"prose density, every page (goals: at most {density.LIMIT_PER_100:g} numbers per 100 words, at most "
          f"{density.LIMIT_PER_SENTENCE} in a sentence; 'over' marks a page past either):", flush=True)
    print(density.table([density.measure(site, page) for page in density.pages()]), flush=True)


def report_page(site: Path) -> None:
    """Print chapter 1's weight and time to usable sliders for the built site in ``site``, then every chapter's
    weight and every page's prose density."""
    report_density(site)
    report_chapters(site)
    weight = page_weight(site, CHAPTER)
    total = [sum(w[k] for w in weight.values()) / 1e6 for k in (0, 1)]
    parts = ", ".join(f"{kind} {w[0] / 1e6:.2f}" for kind, w in weight.items())
    try:
        usable, loaded, outside = in_browser(site)
    except RuntimeError as err:
        print(f"chapter 1 page weight, files its HTML names: {total[0]:.2f} MB as stored ({parts}), "
              f"{total[1]:.2f} MB gzipped", flush=True)
        print(f"chapter 1 time to usable sliders: not measured, {err}", flush=True)
        return
    print(f"chapter 1 page weight, every file it loads in Chromium: {loaded[0] / 1e6:.2f} MB as stored, "
          f"{loaded[1] / 1e6:.2f} MB gzipped (HTML and what it names: {parts})", flush=True)
    print(f"chapter 1 time to usable sliders, file:// in headless Chromium, median of 5: {usable:.2f} s"
          + (f"; requests outside the site: {outside}" if outside else ""), flush=True)


def planner_seconds(repeat: int = 3) -> tuple[float, int]:
    """Best time of chapter 9's whole layout search for Llama 3.1 405B on 16,384 H100s (2,048 nodes of 8), 2,048
    sequences of 8,192 tokens per step, and the number of layouts it priced."""
    from roofline.parallel.planner import plan

    best, count = float("inf"), 0
    for _ in range(repeat):
        start = time.perf_counter()
        result = plan("llama-3.1-405b", "h100", nodes=2048, gpus_per_node=8, seq=8192, global_batch=2048)
        best, count = min(best, time.perf_counter() - start), result.count
    return best, count


def cluster_seconds(repeat: int = 3) -> tuple[float, float, int]:
    """Best time of one cluster-model step (Llama 3.1 405B's long-context layout on 16,384 H100s, calibrated
    roof) and of the whole development set (every published run and every setting its source leaves open),
    and how many layouts the development set priced."""
    from roofline.core.calibration import get_roof
    from roofline.measured.training_runs import development_checks, development_layouts, development_runs
    from roofline.parallel.cluster import TrainLayout, price_step

    roof = get_roof("h100-sxm", "calibrated")
    lay = TrainLayout(seq=131072, tp=8, cp=16, pp=16, dp=8, global_batch=128, recompute="full",
                      schedule="interleaved", chunks=8)
    one = dev = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        price_step("llama-3.1-405b", lay, roof)
        one = min(one, time.perf_counter() - start)
        start = time.perf_counter()
        development_checks()
        dev = min(dev, time.perf_counter() - start)
    a100 = get_roof("a100-sxm-80gb", "calibrated", "fp16")
    count = sum(len(development_layouts(r, a100)[1]) for r in development_runs())
    return one, dev, count


def cluster_plan_seconds(repeat: int = 3) -> tuple[float, int]:
    """Best time of ``roofline plan``'s search ranked by the calibrated estimate, Llama 3.1 405B on 16,384 H100s
    (2,048 nodes of 8), 2,048 sequences of 8,192 tokens, and the number of layouts it priced."""
    from roofline.core.calibration import get_roof
    from roofline.parallel.cluster import search

    best, count = float("inf"), 0
    for _ in range(repeat):
        start = time.perf_counter()
        result = search("llama-3.1-405b", get_roof("h100-sxm", "calibrated"), gpus=16384, gpus_per_node=8, seq=8192,
                        global_batch=2048)
        best, count = min(best, time.perf_counter() - start), result.priced
    return best, count


def serving_plan_seconds(repeat: int = 3) -> tuple[float, int]:
    """Best time of ``roofline serve --plan``'s search under the calibrated roof: DeepSeek-V3 on H800s, replicas
    of up to 32 GPUs, prompts of 2,048 and answers of 512 tokens, a TPOT target of 100 ms; and the layouts priced."""
    from roofline.core.calibration import get_roof
    from roofline.serving.deployment import Workload, plan_serving

    roof = get_roof("h800-sxm", "calibrated", "fp8")
    best, count = float("inf"), 0
    for _ in range(repeat):
        start = time.perf_counter()
        rows = plan_serving("deepseek-v3", roof.hardware, Workload(2048, 512), roof, max_gpus=32, tpot_slo=0.1,
                            weights_dtype="fp8")
        best, count = min(best, time.perf_counter() - start), len(rows)
    return best, count


def hidden_cells(paths=None) -> dict:
    """What the chapters' hidden (``remove-cell``) code cells hold: lines of code (blank lines and comments
    left out) and ``glue``/``glue_text`` calls; and in every code cell, the ``def``/``class`` statements and
    the lines that do arithmetic (an operator between two operands that are not both literals, string
    formatting aside)."""
    import ast
    import json

    paths = sorted((ROOT / "chapters").glob("*.ipynb")) if paths is None else paths
    lines = glues = arithmetic = 0
    defs = []
    for path in paths:
        for i, cell in enumerate(json.loads(Path(path).read_text(encoding="utf-8"))["cells"]):
            if cell["cell_type"] != "code":
                continue
            source = "".join(cell["source"])
            code = [line for line in source.splitlines() if line.strip() and not line.lstrip().startswith(("#", "%", "!"))]
            try:
                tree = ast.parse("\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))))
            except SyntaxError:
                tree = ast.Module(body=[], type_ignores=[])
            defs += [f"{Path(path).name} cell {i}: {type(n).__name__.replace('Def', '').lower()} {n.name}"
                     for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))]
            arithmetic += len({n.lineno for n in ast.walk(tree) if isinstance(n, ast.BinOp)
                               and not (isinstance(n.left, ast.Constant) and isinstance(n.right, ast.Constant))
                               and not (isinstance(n.op, ast.Mod) and isinstance(n.left, ast.Constant))})
            if "remove-cell" in cell.get("metadata", {}).get("tags", []):
                lines += len(code)
                glues += sum(isinstance(n, ast.Call) and getattr(n.func, "id", getattr(n.func, "attr", "")) in ("glue", "glue_text")
                             for n in ast.walk(tree))
    return {"lines": lines, "glues": glues, "defs": defs, "arithmetic": arithmetic}


def main(argv: list[str]) -> None:
    """``python -m booktools.bench`` for every figure; ``--site _build/html`` for the pages' alone."""
    if argv[:1] == ["--site"] and len(argv) == 2:
        report_page(Path(argv[1]).resolve())
        return
    bin_ = Path(sys.executable).parent
    check = _seconds([sys.executable, "-m", "pytest", "-q", "-n", "auto", "-p", "no:cacheprovider", "tests/unit"], ROOT)
    print(f"unit tests (make check): {check:.1f} s (goal: under 60 s on two cores)", flush=True)
    cells = hidden_cells()
    print(f"hidden cells: {cells['lines']:,} lines of code for {cells['glues']:,} glue calls, "
          f"{cells['lines'] / max(cells['glues'], 1):.2f} lines per glued number; def/class in notebooks: "
          f"{len(cells['defs'])} (goal: 0); lines with arithmetic: {cells['arithmetic']} (goal: 0)", flush=True)
    print(f"one scalar decode_step + predict: {1e6 * scalar_seconds():.0f} us (goal: at most 100 us)", flush=True)
    sweep = sweep_seconds()
    print(f"decode sweep, 10^6 (batch, context) pairs, one vectorized call, step rule: {1e3 * sweep:.1f} ms "
          "(goal: under 200 ms)", flush=True)
    for label, kwargs in (("kernel rule, datasheet", {"timing": "kernel"}),
                          ("kernel rule, calibrated H200", {"timing": "kernel", "calibrated": True})):
        print(f"decode sweep, 10^6 pairs, {label}: {1e3 * sweep_seconds(**kwargs):.1f} ms (goal: under 1 s)", flush=True)
    for policy, seconds in batching_seconds().items():
        print(f"batching simulation, 512 requests, {policy}: {1e3 * seconds:.0f} ms (goal: under 1 s)", flush=True)
    seconds, count = planner_seconds()
    print(f"layout search, Llama 3.1 405B on 16,384 H100s, {count:,} layouts: {seconds:.2f} s (goal: under 5 s)",
          flush=True)
    seconds, count = cluster_plan_seconds()
    print(f"layout search by the calibrated estimate (roofline plan), Llama 3.1 405B on 16,384 H100s, {count:,} layouts: "
          f"{seconds:.2f} s (goal: under 2 s)", flush=True)
    seconds, count = serving_plan_seconds()
    print(f"serving planner (roofline serve --plan), DeepSeek-V3 on H800s, replicas up to 32 GPUs, {count} layouts: "
          f"{seconds:.2f} s (goal: under 2 s)", flush=True)
    one, dev, count = cluster_seconds()
    print(f"cluster model: one step priced in {1e3 * one:.1f} ms; the development set ({count} layouts) in "
          f"{1e3 * dev:.0f} ms", flush=True)
    with tempfile.TemporaryDirectory() as out:
        book = _seconds([str(bin_ / "jupyter-book"), "build", str(ROOT), "--path-output", out, "--warningiserror"], ROOT)
        print(f"cold book build: {book:.1f} s", flush=True)
        report_page(Path(out, "_build", "html"))
    nbval = _seconds([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "chapters"], ROOT)
    print(f"nbval over chapters/: {nbval:.1f} s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
