"""Chapter 1 read as a student reads it locally: `make lab`, open the chapter, Run All.

JupyterLab (with jupyterlab-myst, both pinned) runs headless on a free port of 127.0.0.1 with a token,
serving a copy of the chapters (so nothing the run writes lands in the repository's notebooks), and
Chromium, driven by Playwright as in tests/book/test_browser.py, opens chapter 1 with the numbers JupyterLab
stored in it removed, runs all cells and scrolls through. Every markdown cell must then be rendered
MyST: no raw ``{glue``, ``{eval}``, ``{numref}`` or ``{cite}`` left, math typeset, and each number
evaluated against the live kernel, i.e. the very text glued under its name; figures captioned and
numbered, {numref} resolved to those numbers. Screenshots and the text read are left in
``_build/browser/lab-<chapter>*``. ``ROOFLINE_LAB_CHAPTERS=02-memory-budget.ipynb,...`` reads other
chapters the same way. Skipped without a browser, as the other browser tests (a failure with
``CI=true``).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from playwright import sync_api

from booktools.browser import ARGS, local

ROOT = Path(__file__).resolve().parents[2]
# chapter 1 by default (a CI run on two cores); ROOFLINE_LAB_CHAPTERS=a.ipynb,b.ipynb reads others the same way
NOTEBOOKS = os.environ.get("ROOFLINE_LAB_CHAPTERS", "01-three-budgets.ipynb").split(",")
SHOTS = ROOT / "_build" / "browser"
PANEL = ".jp-NotebookPanel:not(.lm-mod-hidden)"  # the notebook on show (a hidden tab keeps its cells in the page)
RAW = re.compile(r"\{glue|\{eval\}|\{numref\}|\{cite\}|\{term\}|\{doc\}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(chromium, tmp_path_factory):
    """(base URL, token) of a JupyterLab serving a copy of chapters/."""
    home = tmp_path_factory.mktemp("lab")
    root = home / "chapters"
    shutil.copytree(ROOT / "chapters", root, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    for path in root.glob("*.ipynb"):
        # the reader's JupyterLab has not stored any evaluated numbers yet: they must come from the kernel
        opened = json.loads(path.read_text())
        for cell in opened["cells"]:
            cell["metadata"].pop("user_expressions", None)
        path.write_text(json.dumps(opened))
    settings = home / "settings"
    (settings / "@jupyterlab" / "apputils-extension").mkdir(parents=True)
    (settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False}))
    port, token = _free_port(), secrets.token_hex(16)
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(home / "config"), "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
           "JUPYTERLAB_SETTINGS_DIR": str(settings), "JUPYTERLAB_WORKSPACES_DIR": str(home / "workspaces"),
           "JUPYTER_DATA_DIR": str(home / "data")}
    log = open(home / "lab.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
         "--ServerApp.port_retries=0", "--allow-root", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}"],
        cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"JupyterLab did not start:\n{(home / 'lab.log').read_text()[-3000:]}")
            time.sleep(0.5)
        yield base, token
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


# In the page: the notebook's cells that are on screen, with their index and what a reader sees in them
# (innerText: the text as laid out, so only for cells on screen; the browser skips the others).
_ON_SCREEN_JS = """() => [...document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell')].map((cell, index) => {
  const r = cell.getBoundingClientRect(), myst = cell.querySelector('.myst');
  if (r.bottom < 0 || r.top > window.innerHeight) return null;
  return {index, markdown: cell.classList.contains('jp-MarkdownCell'),
    rendered: !!myst && !!cell.querySelector('.jp-InputArea-editor.lm-mod-hidden') && myst.innerText.trim().length > 0,
    text: myst ? myst.innerText : cell.innerText,
    errors: cell.querySelectorAll('.myst [data-mime-type="application/vnd.jupyter.stderr"]').length,
    math: cell.querySelectorAll('.myst .katex, .myst mjx-container').length};
}).filter(c => c)"""


def _glued(committed) -> dict[str, str]:
    """{name: glued text} for the numbers that are the same on every run (not the reader's own machine's,
    glued in cells nbval ignores, which the kernel measures afresh)."""
    import ast

    found = {}
    for cell in committed["cells"]:
        if "nbval-ignore-output" in cell["metadata"].get("tags", []):
            continue
        for o in cell.get("outputs", []):
            record = o.get("metadata", {}).get("scrapbook", {})
            if record.get("name"):
                found[record["name"]] = ast.literal_eval(o["data"][record["mime_prefix"] + "text/plain"])
    return found


@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_a_chapter_reads_in_jupyterlab_after_run_all(lab, chromium, notebook):
    base, token = lab
    committed = json.loads((ROOT / "chapters" / notebook).read_text())
    stem = Path(notebook).stem
    cells = committed["cells"]
    n_code = sum(c["cell_type"] == "code" for c in cells)
    glued = _glued(committed)
    outside = []
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            page.route("**/*", lambda r: r.continue_() if local(r.request.url) else (outside.append(r.request.url),
                                                                                    r.abort()))
            page.goto(f"{base}/lab/tree/{notebook}?reset&token={token}", wait_until="domcontentloaded")
            page.locator(f"{PANEL} .jp-Notebook .jp-Cell").nth(len(cells) - 1).wait_for(state="attached", timeout=120_000)
            page.locator(f"{PANEL} .jp-Notebook-ExecutionIndicator[data-status='idle']").first.wait_for(timeout=120_000)
            page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
            page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()
            # done when the last code cell has its number, [n_code]
            page.wait_for_function(
                """n => { const p = [...document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell .jp-InputPrompt')].map(e => e.textContent);
                          return p.length === n && p[n - 1].includes(`[${n}]`) && !p.some(t => t.includes('*')); }""",
                arg=n_code, timeout=300_000, polling=500)
            page.locator(f"{PANEL} .jp-Notebook-ExecutionIndicator[data-status='idle']").first.wait_for(timeout=60_000)
            # scroll through, as a reader does, so that every cell is laid out and painted
            # solutions are dropdowns: open them all, as a reader checking each one would
            page.locator(f"{PANEL} .myst details").evaluate_all("ds => ds.forEach(d => d.open = true)")
            # and read each cell while it is on screen (the last look at a cell counts)
            scroller = page.locator(f"{PANEL} .jp-WindowedPanel-outer").first
            seen, shots, y = {}, 0, 0
            total = page.locator(f"{PANEL} .jp-Notebook .jp-Cell").count()
            while True:
                scroller.evaluate(f"e => e.scrollTo(0, {y})")
                # a cell the window lays out afresh, or that jupyterlab-myst renders again, comes back with its
                # solution closed: open every dropdown on screen again before reading
                page.locator(f"{PANEL} .myst details").evaluate_all("ds => ds.forEach(d => d.open = true)")
                page.wait_for_timeout(200)
                for cell in page.evaluate(_ON_SCREEN_JS):
                    seen[cell["index"]] = cell
                if y % 5400 == 0 and shots < 6:
                    page.screenshot(path=str(SHOTS / f"lab-{stem}-{shots}.png"))
                    shots += 1
                if scroller.evaluate("e => e.scrollTop + e.clientHeight >= e.scrollHeight - 2"):
                    break
                y += 600
            # a figure with its caption, and an opened solution, to look at
            for name, locator in (("figure", page.locator(f"{PANEL} .jp-Notebook .jp-MarkdownCell", has_text=re.compile(r"Figure\s1:"))),
                                  ("solution", page.locator(f"{PANEL} .jp-Notebook .myst details").first)):
                locator.first.scroll_into_view_if_needed()
                page.wait_for_timeout(300)
                page.screenshot(path=str(SHOTS / f"lab-{stem}-{name}.png"))
            page.locator(f"{PANEL} .jp-Notebook .jp-Cell").last.scroll_into_view_if_needed()
            page.wait_for_timeout(500)
            page.screenshot(path=str(SHOTS / f"lab-{stem}-end.png"))
        finally:
            browser.close()

    (SHOTS / f"lab-{stem}.txt").write_text("\n\n".join(f"[{i}] {seen[i]['text']}" for i in sorted(seen)
                                                         if seen[i]["markdown"]), encoding="utf-8")
    assert total == len(cells) and sorted(seen) == list(range(len(cells))), (total, len(cells), sorted(seen))
    markdown = [(seen[i], c) for i, c in enumerate(cells) if c["cell_type"] == "markdown"]
    assert all(s["markdown"] for s, _ in markdown)
    unrendered = [s["index"] for s, _ in markdown if not s["rendered"]]
    assert not unrendered, f"markdown cells not rendered by jupyterlab-myst: {unrendered}"
    for s, c in markdown:
        raw = RAW.findall(s["text"])
        assert not raw, f"cell {s['index']} shows raw roles {raw}: {s['text'][:300]!r}"
        # {numref} resolved to the figure's number (the caption cells name them), not left as a bare label
        bare = re.findall(r"\bfig-[a-z0-9-]+", s["text"])
        assert not bare, f"cell {s['index']}: figure references not resolved: {bare}"
        assert s["errors"] == 0, f"cell {s['index']}: an {{eval}} failed in the kernel: {s['text'][:300]!r}"
        source = "".join(c["source"])
        flat = " ".join(s["text"].replace("\u2019", "'").split())
        for name in re.findall(r"\{eval\}`([^`]+)`", source):
            if name in glued:
                assert " ".join(glued[name].split()) in flat, f"cell {s['index']}: {name} = {glued[name]!r} not shown"
        if "$" in source:
            assert s["math"] > 0, f"cell {s['index']}: math not typeset: {s['text'][:200]!r}"
    assert "What you will be able to do" in markdown[0][0]["text"]
    # each figure's caption under it, numbered, and the prose's references to it by that number
    figures = [c["metadata"]["mystnb"]["figure"] for c in cells if "figure" in c["metadata"].get("mystnb", {})]
    text = "\n".join(s["text"] for s, _ in markdown).replace("\u2019", "'")  # MyST prints ' as a typographic quote
    for number, figure in enumerate(figures, 1):
        assert re.search(rf"Figure\s{number}:\s*{re.escape(figure['caption'][:40])}", text), figure["name"]
    assert len(re.findall(r"Figure\s\d", text)) > len(figures)
