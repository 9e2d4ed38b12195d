"""Can everyone read the book? axe-core's verdict on every page, in the theme's light and dark modes.

Each page of the table of contents is opened in headless Chromium (``booktools.browser``), once with the
reader's system set to light and once to dark (the theme follows it: ``html_context.default_mode`` is
``auto``), after MathJax has typeset and with every dropdown (the exercises' solutions) open, and
axe-core (``_vendor/axe-core/axe.min.js``, pinned in ``package-lock.json``; the site never serves it)
checks it against its rules (WCAG 2.x A and AA, and its best practices). A violation has an impact:
minor, moderate, serious or critical; ``tests/book/test_a11y.py`` fails on any serious or critical one.

    python -m booktools.a11y --site _build/html [page.html ...]

prints, per page and mode, the violations by impact, then each one with the elements it names.
"""

from __future__ import annotations

import sys
from pathlib import Path

from booktools.layout import OPEN_JS, TYPESET_JS, pages, serve

ROOT = Path(__file__).resolve().parent.parent
AXE = ROOT / "_vendor" / "axe-core" / "axe.min.js"
MODES = ("light", "dark")
# the site's pages besides the table of contents' (index.html only sends the browser to intro.html)
GENERATED = ("genindex.html", "py-modindex.html", "search.html")
IMPACTS = ("critical", "serious", "moderate", "minor")
SEVERE = ("critical", "serious")

# In the page, with axe loaded: the violations, each with its rule, impact, one-line help and the
# elements it found (CSS selectors, with axe's summary of what is wrong for the first few).
RUN_JS = """async () => {
  const result = await axe.run(document, {resultTypes: ['violations']});
  return result.violations.map(v => ({
    id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.map(n => n.target.join(' ')),
    why: v.nodes.slice(0, 3).map(n => (n.failureSummary || '').split('\\n').slice(1).join(' ').trim()),
  }));
}"""

# In the page: the mode the theme is showing ("light" or "dark").
MODE_JS = "() => document.documentElement.dataset.theme || ''"


def check(browser, base: str, page_path: str, mode: str) -> dict:
    """One page in one mode: ``{"mode": what the theme showed, "violations": [...]}`` (see RUN_JS)."""
    context = browser.new_context(viewport={"width": 1280, "height": 900}, color_scheme=mode)
    page = context.new_page()
    try:
        page.goto(f"{base}/{page_path}", wait_until="load")
        page.evaluate(TYPESET_JS)
        page.evaluate(OPEN_JS)
        page.wait_for_timeout(100)
        page.add_script_tag(content=AXE.read_text(encoding="utf-8"))
        return {"mode": page.evaluate(MODE_JS), "violations": page.evaluate(RUN_JS)}
    finally:
        context.close()


def site_pages(site: Path) -> list[str]:
    """Every page a reader can open: the table of contents' and the index, module index and search pages."""
    return pages() + [name for name in GENERATED if (site / name).is_file()]


def survey(site: Path, only: list[str] | None = None, browser=None) -> dict:
    """``{(page, mode): check(...)}`` over every page of the site (:func:`site_pages`, or ``only``), in both
    modes; with ``browser`` (a Playwright browser) it is used, else a Chromium is found and launched."""
    from booktools.browser import ARGS, find_chromium

    out = {}
    only = only or site_pages(site)
    with serve(site) as base:
        if browser is not None:
            for page_path in only:
                for mode in MODES:
                    out[page_path, mode] = check(browser, base, page_path, mode)
            return out
        from playwright import sync_api

        chromium, how = find_chromium()
        if chromium is None:
            raise RuntimeError(how)
        with sync_api.sync_playwright() as p:
            launched = p.chromium.launch(executable_path=chromium, args=ARGS)
            try:
                for page_path in only:
                    for mode in MODES:
                        out[page_path, mode] = check(launched, base, page_path, mode)
            finally:
                launched.close()
    return out


def counts(found: dict) -> dict:
    """``{mode: {impact: violations summed over the pages}}``: one per rule and page, however many elements."""
    total = {mode: dict.fromkeys(IMPACTS, 0) for mode in MODES}
    for (_, mode), result in found.items():
        for v in result["violations"]:
            total[mode][v["impact"] or "minor"] += 1
    return total


def main(argv: list[str]) -> None:
    args = list(argv)
    if "--site" not in args:
        raise SystemExit("usage: python -m booktools.a11y --site _build/html [page.html ...]")
    i = args.index("--site")
    site = Path(args[i + 1]).resolve()
    del args[i:i + 2]
    found = survey(site, args or None)
    print(f"{'page':<42} " + " ".join(f"{mode + ' ' + impact[:4]:>13}" for mode in MODES for impact in IMPACTS))
    for page_path in dict.fromkeys(p for p, _ in found):
        cells = []
        for mode in MODES:
            impacts = [v["impact"] for v in found[page_path, mode]["violations"]]
            cells += [f"{impacts.count(impact):>13}" for impact in IMPACTS]
        print(f"{page_path:<42} " + " ".join(cells))
    for mode, by_impact in counts(found).items():
        print(f"{mode}: " + ", ".join(f"{n} {impact}" for impact, n in by_impact.items()) + " (rules x pages)")
    for (page_path, mode), result in found.items():
        if result["mode"] != mode:
            print(f"  {page_path} {mode}: the theme showed {result['mode']!r}")
        for v in result["violations"]:
            nodes = ", ".join(v["nodes"][:4]) + (f" and {len(v['nodes']) - 4} more" if len(v["nodes"]) > 4 else "")
            print(f"  {page_path} {mode} {v['impact']} {v['id']}: {v['help']} [{len(v['nodes'])}: {nodes}]")
            for why in v["why"][:1]:
                print(f"      {why[:300]}")


if __name__ == "__main__":
    main(sys.argv[1:])
