"""Does every page fit its column? What the layout browser test (tests/book/test_layout.py) asserts,
and what ``python -m booktools.layout --site _build/html`` prints page by page.

Each page of the table of contents is opened in headless Chromium (``booktools.browser``) at a desktop
width (1280 px) and at a phone's (400 px), with every dropdown (the exercises' solutions) opened, after
MathJax has typeset. Measured in the page, against the column each element sits in (the content box of
the article, or of the admonition holding it):

- tables whose content is wider than the column: cut off, seen only through a sideways scroll;
- pictures (figures, explorer frames and their pictures, SVGs) wider than the column;
- display equations (MathJax ``mjx-container[display]``) wider than the column, or scrolling inside
  their own box;
- console messages of type error, uncaught exceptions, and files the site lacks (404).
"""

from __future__ import annotations

import functools
import http.server
import sys
import threading
from contextlib import contextmanager
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
WIDTHS = {"desktop": {"width": 1280, "height": 900}, "phone": {"width": 400, "height": 860}}

# In the page, once it has settled: each kind of element that sticks out of its column, as
# "tag.class [width > column]" strings.
MEASURE_JS = """() => {
  const article = document.querySelector('article.bd-article') || document.body;
  const inner = el => {
    const cs = getComputedStyle(el);
    return el.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight);
  };
  const column = el => {
    const box = el.parentElement.closest('.admonition, details, .sd-card, article.bd-article') || article;
    return inner(box);
  };
  const name = el => `${el.tagName.toLowerCase()}${[...el.classList].slice(0, 3).map(c => '.' + c).join('')}` +
      (getComputedStyle(el).visibility === 'visible' ? '' : ' (hidden frame)');
  const shown = el => { const r = el.getBoundingClientRect(); return r.width > 0 && r.height > 0; };
  const wide = (selector, width) => [...article.querySelectorAll(selector)].filter(shown).flatMap(el => {
    const w = width(el), c = column(el);
    return w > c + 1 ? [`${name(el)} [${Math.round(w)} > ${Math.round(c)}]`] : [];
  });
  const full = el => Math.max(el.getBoundingClientRect().width, el.scrollWidth);
  // a table's own width, and that of any box between it and its column that scrolls it sideways
  const table = el => {
    let w = full(el);
    for (let a = el.parentElement; a && a !== article && !a.matches('.admonition, details'); a = a.parentElement) {
      if (a.scrollWidth > a.clientWidth + 1 && getComputedStyle(a).overflowX !== 'visible') w = Math.max(w, a.scrollWidth);
    }
    return w;
  };
  return {
    column: Math.round(inner(article)),
    tables: wide('table:not(.mjx-table)', table),
    pictures: wide('img, svg:not(.tb-icon), .rl-frame, .rl-picture, figure', full),
    // an equation that scrolls inside its own box counts as wider than its column, whatever its box
    equations: wide('mjx-container[display="true"]', el =>
        el.scrollWidth > el.clientWidth + 1 ? Math.max(full(el), column(el) + 2) : full(el)),
  };
}"""

# Moves every slider of every explorer on the page through all its positions and back to where it was,
# as a reader's input would (the 'input' event roofline-widgets.js listens to), measuring after each
# step, once the browser has laid it out: the explorer's height, and the width of the slider's track.
# Returns, per explorer, its sliders' names and the distinct heights and track widths seen.
STEADY_JS = """async () => {
  const frame = () => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  const out = [];
  for (const box of document.querySelectorAll('.roofline-explorer')) {
    const sliders = [...box.querySelectorAll('.widget-slider')].filter(s => s.querySelector('input[type=range]'));
    const names = sliders.map(s => (s.querySelector('.rl-description') || {}).textContent || '?');
    const heights = new Set(), tracks = names.map(() => new Set());
    const look = () => {
      heights.add(Math.round(box.getBoundingClientRect().height * 10) / 10);
      sliders.forEach((s, i) => tracks[i].add(Math.round(s.querySelector('input').getBoundingClientRect().width)));
    };
    look();
    for (const s of sliders) {
      const input = s.querySelector('input[type=range]'), start = +input.value;
      for (let v = +input.min; v <= +input.max + 1; v++) {
        input.value = v <= +input.max ? v : start;
        input.dispatchEvent(new Event('input', {bubbles: true}));
        await frame();
        look();
      }
    }
    out.push({sliders: names, heights: [...heights], tracks: tracks.map(t => [...t])});
  }
  return out;
}"""

# Opens every dropdown (sphinx-togglebutton's admonitions, <details>), so their content is measured too.
OPEN_JS = """() => {
  document.querySelectorAll('.toggle-hidden').forEach(el => el.classList.remove('toggle-hidden'));
  document.querySelectorAll('details').forEach(el => { el.open = true; });
}"""

# Resolves once MathJax (when the page loads it) has typeset everything.
TYPESET_JS = """async () => {
  if (!document.querySelector('script[src*="mathjax"]')) return 0;
  for (let i = 0; i < 600 && !(window.MathJax && MathJax.startup && MathJax.startup.promise); i++)
    await new Promise(r => setTimeout(r, 50));
  await MathJax.startup.promise;
  return document.querySelectorAll('mjx-container').length;
}"""


def pages(root: Path = ROOT) -> list[str]:
    """Every page of the table of contents, as a path in the built site ("chapters/01-three-budgets.html")."""
    toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8"))
    out = [toc["root"] + ".html"]
    for part in toc.get("parts", []):
        out += [c["file"] + ".html" for c in part.get("chapters", [])]
    return out


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@contextmanager
def serve(site: Path):
    """The built site from a server on 127.0.0.1 (its address, while the block runs)."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        thread.join()


def measure(browser, base: str, page_path: str, viewport: dict, shot: Path | None = None) -> dict:
    """One page at one viewport: the column's width, the tables, pictures and display equations wider
    than their column, and the console's errors (with the files the site lacks and the requests outside it)."""
    from booktools.browser import record

    outside, failed, loaded, console = [], [], [], []
    phone = viewport["width"] < 600
    context = browser.new_context(viewport=viewport, device_scale_factor=1, is_mobile=phone, has_touch=phone)
    page = context.new_page()
    try:
        page.on("console", lambda m: console.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: console.append(f"uncaught: {e}"))
        record(page, outside, failed, loaded)
        page.goto(f"{base}/{page_path}", wait_until="load")
        page.evaluate(TYPESET_JS)
        page.evaluate(OPEN_JS)
        page.wait_for_timeout(200)  # a frame for the fitting script and the browser's layout
        found = page.evaluate(MEASURE_JS)
        if shot is not None:
            shot.parent.mkdir(parents=True, exist_ok=True)
            try:
                page.screenshot(path=str(shot), full_page=True, timeout=120_000)
            except Exception as err:  # a picture to look at, not a measurement: note it and go on
                print(f"no screenshot of {page_path} at {viewport['width']} px: {type(err).__name__}", file=sys.stderr)
    finally:
        context.close()
    found["console"] = console + [f"missing {status}: {path}" for status, path in failed] + \
        [f"outside the site: {url}" for url in outside]
    return found


def steadiness(browser, base: str, page_path: str, viewport: dict) -> list[dict]:
    """Every explorer of one page, each slider moved through all its positions (:data:`STEADY_JS`):
    ``[{"sliders": names, "heights": distinct heights, "tracks": distinct track widths per slider}]``."""
    phone = viewport["width"] < 600
    context = browser.new_context(viewport=viewport, is_mobile=phone, has_touch=phone)
    page = context.new_page()
    try:
        page.goto(f"{base}/{page_path}", wait_until="load")
        page.evaluate(TYPESET_JS)
        return page.evaluate(STEADY_JS)
    finally:
        context.close()


def survey(site: Path, shots: Path | None = None, only: list[str] | None = None) -> dict:
    """``{(page, "desktop" | "phone"): measure(...)}`` over every page of the book (or ``only``)."""
    from playwright import sync_api

    from booktools.browser import ARGS, find_chromium

    chromium, how = find_chromium()
    if chromium is None:
        raise RuntimeError(how)
    out = {}
    with serve(site) as base, sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=ARGS)
        try:
            for page_path in only or pages():
                for kind, viewport in WIDTHS.items():
                    shot = shots / f"{Path(page_path).stem}-{viewport['width']}.png" if shots else None
                    out[page_path, kind] = measure(browser, base, page_path, viewport, shot)
        finally:
            browser.close()
    return out


def main(argv: list[str]) -> None:
    """``python -m booktools.layout --site DIR [--shots DIR] [page.html ...]``: counts per page, then the details."""
    args = list(argv)
    site = shots = None
    if "--site" in args:
        i = args.index("--site")
        site = Path(args[i + 1]).resolve()
        del args[i:i + 2]
    if "--shots" in args:
        i = args.index("--shots")
        shots = Path(args[i + 1]).resolve()
        del args[i:i + 2]
    if site is None:
        raise SystemExit("usage: python -m booktools.layout --site _build/html [--shots DIR] [page.html ...]")
    found = survey(site, shots, args or None)
    print("pictures: those on screen (with the explorers' hidden frames); console: errors at both widths")
    print(f"{'page':<42} {'tables cut, 1280':>16} {'pictures, 400':>13} {'equations, 400':>14} {'console':>8}")
    for page_path in dict.fromkeys(p for p, _ in found):
        d, m = found[page_path, "desktop"], found[page_path, "phone"]
        errors = len(d["console"]) + len(m["console"])
        shown = sum("(hidden frame)" not in item for item in m["pictures"])
        pictures = f"{shown} ({len(m['pictures'])})"
        print(f"{page_path:<42} {len(d['tables']):>16} {pictures:>13} {len(m['equations']):>14} {errors:>8}")
    for (page_path, kind), f in found.items():
        for what in ("tables", "pictures", "equations", "console"):
            for item in f[what]:
                print(f"  {page_path} {kind} {what}: {item}")


if __name__ == "__main__":
    main(sys.argv[1:])
