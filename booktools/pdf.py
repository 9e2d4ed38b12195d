"""``make pdf``: the built book printed to PDF by headless Chromium, one PDF per page and the whole book.

Every page of ``_toc.yml`` is opened in the built site (``_build/html``, or the student edition's with
``STUDENT=1``), given time to draw its explorers and typeset its equations, and printed with the book's
print stylesheet (``_static/roofline-print.css``: the article alone, figures and tables whole, solutions
open, each explorer as its default frame with a line saying where it is live). The pages are then joined,
in the book's order and with one bookmark per page, into ``book.pdf`` (pypdf). The browser is the one the
tests use (``booktools.browser.find_chromium``: Debian's Chromium, never a download); with none, the
command says how to install one and exits 1.

    python -m booktools.pdf [--site _build/html] [--out _build/pdf]
"""

from __future__ import annotations

import argparse
import re
import sys
from html import unescape
from pathlib import Path

import yaml

from booktools.browser import ARGS, ENABLE_BROWSER, find_chromium

ROOT = Path(__file__).resolve().parents[1]

# In the page: true once the fonts are in and every image has decoded; MathJax's own promise says when
# it has typeset (awaited first).
READY_JS = "() => document.fonts.status === 'loaded' && [...document.images].every(img => img.complete)"
TYPESET_JS = "() => (window.MathJax && MathJax.startup && MathJax.startup.promise) ? MathJax.startup.promise.then(() => true) : true"


def pages(toc: Path = ROOT / "_toc.yml") -> list[str]:
    """The book's pages in reading order, as document names (``chapters/01-three-budgets``)."""
    data = yaml.safe_load(toc.read_text(encoding="utf-8"))
    names = [data["root"]]
    for part in data.get("parts", []):
        names += [c["file"] for c in part.get("chapters", [])]
    return names


def title_of(html: str, fallback: str) -> str:
    """A built page's title as its heading prints it, with the chapter's number or the appendix's letter
    ("7. Buying memory with network traffic"): the text of its first ``<h1>`` that carries a section number,
    else of its first ``<h1>`` (a page outside the numbered parts), else ``fallback``."""
    heads = re.findall(r"<h1[^>]*>(.*?)</h1>", html, flags=re.S)
    for head in sorted(heads, key=lambda h: "section-number" not in h):
        text = re.sub(r'<a class="headerlink".*?</a>', "", head, flags=re.S)
        text = " ".join(unescape(re.sub(r"<[^>]+>", "", text)).split())
        if text:
            return text
    return fallback


def print_book(site: Path, out: Path, chromium: str) -> list[Path]:
    """Print every page of ``site`` into ``out`` (one PDF each, named after the page), then ``book.pdf``."""
    from playwright.sync_api import sync_playwright
    from pypdf import PdfWriter

    out.mkdir(parents=True, exist_ok=True)
    printed: list[tuple[Path, str]] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=ARGS)
        try:
            for name in pages():
                page_file = site / f"{name}.html"
                if not page_file.is_file():
                    raise SystemExit(f"{page_file} is not there: build the book first (make book)")
                page = browser.new_page(viewport={"width": 1100, "height": 1400})
                page.goto(page_file.as_uri(), wait_until="load")
                page.evaluate(TYPESET_JS)
                page.wait_for_function(READY_JS, timeout=60_000)
                page.wait_for_timeout(500)  # the explorers' script draws after load
                page.emulate_media(media="print")
                target = out / f"{name.split('/')[-1]}.pdf"
                page.pdf(path=str(target), format="A4", print_background=True, display_header_footer=True,
                         header_template="<span></span>",
                         footer_template='<div style="font-size:8px;width:100%;text-align:center;color:#666">'
                                         '<span class="title"></span> &middot; <span class="pageNumber"></span>'
                                         ' / <span class="totalPages"></span></div>',
                         margin={"top": "16mm", "bottom": "18mm", "left": "15mm", "right": "15mm"})
                printed.append((target, title_of(page_file.read_text(encoding="utf-8"), name)))
                page.close()
        finally:
            browser.close()
    writer = PdfWriter()
    for path, title in printed:
        start = len(writer.pages)
        writer.append(str(path))
        writer.add_outline_item(title=title, page_number=start)
    book = out / "book.pdf"
    with open(book, "wb") as f:
        writer.write(f)
    return [book] + [p for p, _ in printed]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m booktools.pdf", description=__doc__.split("\n\n")[0])
    parser.add_argument("--site", type=Path, default=ROOT / "_build" / "html", help="the built site")
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "pdf", help="where the PDFs go")
    args = parser.parse_args(argv)
    args.site, args.out = args.site.resolve(), args.out.resolve()
    chromium, how = find_chromium()
    if chromium is None:
        print(f"make pdf needs a browser to print with: {how}; {ENABLE_BROWSER}", file=sys.stderr)
        return 1
    files = print_book(args.site, args.out, chromium)
    from pypdf import PdfReader

    print(f"{files[0]}: {len(PdfReader(str(files[0])).pages)} pages; one PDF per page beside it ({len(files) - 1})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
