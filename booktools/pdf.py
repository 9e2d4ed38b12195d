"""``make pdf``: the built book printed by headless Chromium as one book, and its API reference apart.

The pages of ``_toc.yml`` (less the API reference) are joined, in the book's order, into one HTML
document written beside them in the built site (``_build/html``, or the student edition's with
``STUDENT=1``) and printed once, so that the page numbers run on from the first chapter to the last and
every link inside the book becomes a link inside the PDF:

- a title page (printed on its own, unnumbered): the title, the edition (the full one, with worked
  solutions, or the student's), the version and its date with the commit, the authors, the licences,
  the address of the web edition and of the source when ``_config.yml`` sets them, and how to cite;
- a contents with the parts, the chapters' numbers (1-13, appendices A-C) and the page each starts on;
- each page of the book, a chapter's number above its title; its links rewritten: to anything in the
  book, a link inside the PDF; to a page the PDF does not hold (the API reference, the index) or a file of
  the site, that page's address on the web edition (``html.baseurl``, or ``--url``), and no link at all
  when no address is configured: never a ``file://`` address of the machine that printed it. Each
  explorer prints its default frame and says where it is live.

The API reference, a third of the pages, is printed the same way into ``api.pdf``. One PDF per chapter
is cut from the book beside them, with the book's page numbers. The browser is the one the tests use
(``booktools.browser.find_chromium``: Debian's Chromium, never a download); with none, the command says
how to install one and exits 1.

    python -m booktools.pdf [--site _build/html] [--out _build/pdf] [--url https://.../] [--student]
"""

from __future__ import annotations

import argparse
import html
import json
import posixpath
import re
import sys
from dataclasses import dataclass
from html import unescape
from pathlib import Path
from urllib.parse import urlsplit

import yaml

from booktools.browser import ARGS, ENABLE_BROWSER, find_chromium
from booktools.edition import Edition, edition

ROOT = Path(__file__).resolve().parents[1]
API = "chapters/reference/api"  # printed into a PDF of its own
BOOK_FILE = "_print-book.html"  # written into the site's root while it prints, then removed
FRONT_FILE = "_print-title.html"

# In the page: true once the fonts are in and every image has decoded; MathJax's own promise says when
# it has typeset (awaited first).
READY_JS = "() => document.fonts.status === 'loaded' && [...document.images].every(img => img.complete)"
TYPESET_JS = ("() => (window.MathJax && MathJax.startup && MathJax.startup.promise) ? "
              "MathJax.startup.promise.then(() => true) : true")

MARGINS = {"top": "16mm", "bottom": "18mm", "left": "15mm", "right": "15mm"}
FOOTER = ('<div style="font-size:8px;width:100%;text-align:center;color:#555;font-family:sans-serif">'
          '{title} &middot; <span class="pageNumber"></span></div>')


@dataclass
class Page:
    name: str  # the document name, "chapters/05-kv-cache"
    title: str = ""
    part: str = ""
    number: str = ""  # "5", "A", or "" for pages that are not chapters

    @property
    def anchor(self) -> str:
        return "p-" + self.slug

    @property
    def slug(self) -> str:
        return re.sub(r"[^A-Za-z0-9-]+", "-", self.name)


@dataclass
class Book:
    pages: list[Page]  # in reading order


def book_pages(toc: Path = ROOT / "_toc.yml") -> Book:
    """The book's pages in reading order with their parts, and the chapters' numbers: ``chapters/NN-...``
    are chapter NN, ``chapters/appendix-...`` the appendices A, B, C in the order of the contents."""
    data = yaml.safe_load(toc.read_text(encoding="utf-8"))
    pages, appendix = [Page(data["root"])], 0
    for part in data.get("parts", []):
        for chapter in part.get("chapters", []):
            page = Page(chapter["file"], part=part.get("caption", ""))
            leaf = page.name.rsplit("/", 1)[-1]
            if re.match(r"^\d+-", leaf) and page.name.startswith("chapters/"):
                page.number = str(int(leaf.split("-")[0]))
            elif leaf.startswith("appendix-"):
                page.number = "ABCDEFGH"[appendix]
                appendix += 1
            pages.append(page)
    return Book(pages)


def title_of(text: str, fallback: str) -> str:
    """A built page's title as its heading prints it, with the chapter's number or the appendix's letter
    ("7. Buying memory with network traffic"): the text of its first ``<h1>`` that carries a section number,
    else of its first ``<h1>`` (a page outside the numbered parts), else ``fallback``."""
    heads = re.findall(r"<h1[^>]*>(.*?)</h1>", text, flags=re.S)
    for head in sorted(heads, key=lambda h: "section-number" not in h):
        shown = re.sub(r'<a class="headerlink".*?</a>', "", head, flags=re.S)
        shown = " ".join(unescape(re.sub(r"<[^>]+>", "", shown)).split())
        if shown:
            return shown
    return fallback


# --- one document from many pages ---------------------------------------------------------------------

_ATTR = re.compile(r'(\s)(href|src|id|for|aria-labelledby|aria-describedby|aria-controls)="([^"]*)"')


def _article(text: str) -> str:
    start = text.find('<article class="bd-article"')
    if start < 0:
        raise ValueError("no <article class=\"bd-article\"> in the page")
    start = text.index(">", start) + 1
    return text[start:text.index("</article>", start)]


def _widget_state(text: str) -> dict:
    match = re.search(r'<script type="application/vnd.jupyter.widget-state\+json">(.*?)</script>', text, flags=re.S)
    return json.loads(match.group(1)) if match else {}


class Linker:
    """Rewrites a page's links for the joined document: ids prefixed with the page's slug (two pages may
    both have a section "exercises"), links into the book made links inside the document, everything
    else an address of the web edition (or no link)."""

    def __init__(self, book: Book, url: str):
        self.inside = {p.name: p for p in book.pages}
        self.url = url.rstrip("/") + "/" if url else ""
        self.outward: list[str] = []  # links that left the document (site paths), for the record

    def target(self, page: Page, href: str) -> str | None:
        """Where ``href`` (as written on ``page``) points in the PDF: "#id", an http(s) address, or None."""
        parts = urlsplit(href)
        if parts.scheme in ("http", "https", "mailto"):
            return href
        if parts.scheme or href.startswith("//"):
            return None  # javascript:, data:, file: ... nothing a reader of the PDF can follow
        if not parts.path:
            return f"#{page.slug}--{parts.fragment}" if parts.fragment else f"#{page.anchor}"
        path = posixpath.normpath(posixpath.join(posixpath.dirname(page.name), parts.path))
        name = path[:-5] if path.endswith(".html") else None
        if name in self.inside:
            other = self.inside[name]
            return f"#{other.slug}--{parts.fragment}" if parts.fragment else f"#{other.anchor}"
        self.outward.append(path)
        if not self.url:
            return None
        return self.url + path + (f"#{parts.fragment}" if parts.fragment else "")

    def source(self, page: Page, src: str) -> str:
        """An image or script address as the document at the site's root finds it."""
        parts = urlsplit(src)
        if parts.scheme or src.startswith("//") or src.startswith("#"):
            return src
        return posixpath.normpath(posixpath.join(posixpath.dirname(page.name), parts.path)) + \
            (f"?{parts.query}" if parts.query else "")

    def rewrite(self, page: Page, fragment: str) -> str:
        def one(match):
            space, attribute, value = match.groups()
            if attribute == "href":
                target = self.target(page, html.unescape(value))
                return f'{space}href="{html.escape(target)}"' if target else f"{space}data-no-link=\"\""
            if attribute == "src":
                return f'{space}src="{html.escape(self.source(page, html.unescape(value)))}"'
            ids = " ".join(f"{page.slug}--{v}" for v in value.split())
            return f'{space}{attribute}="{ids}"'

        return _ATTR.sub(one, fragment)


def _head(site: Path, book: Book, linker: Linker, title: str) -> str:
    """The head of a page that loads MathJax and the explorers' script, its addresses made the root's, less
    its widget state and its links to neighbours."""
    for page in book.pages + [p for p in book_pages().pages if p not in book.pages]:
        path = site / f"{page.name}.html"
        text = path.read_text(encoding="utf-8") if path.is_file() else ""
        if "mathjax/startup.js" in text and "roofline-widgets.js" in text:
            break
    else:
        raise ValueError("no page of the book loads MathJax and roofline-widgets.js")
    head = text[text.index("<head>") + 6:text.index("</head>")]
    head = re.sub(r'<script type="application/vnd.jupyter.widget-state\+json">.*?</script>', "", head, flags=re.S)
    head = re.sub(r'<link rel="(?:index|search|next|prev|canonical)"[^>]*>', "", head)
    head = re.sub(r"<title>.*?</title>", f"<title>{html.escape(title)}</title>", head, flags=re.S)
    head = re.sub(r'(\s)(href|src)="([^"]*)"', lambda m: f'{m.group(1)}{m.group(2)}="'
                  f'{html.escape(linker.source(page, html.unescape(m.group(3))))}"', head)
    return head


PRINT_CSS = """
@media print {
  /* the theme hides a page's first h1 in print (its own print header repeats it); here it is the title */
  .bd-main .bd-content .bd-article h1:first-of-type { display: block; }
  .print-title { height: 250mm; display: flex; flex-direction: column; justify-content: space-between; }
  .print-page, .print-contents { break-before: page; page-break-before: always; }
}
.print-title h1 { font-size: 30pt; margin: 30mm 0 4mm; border: 0; }
.print-title .subtitle { font-size: 15pt; margin: 0 0 14mm; }
.print-title .edition { font-size: 13pt; font-weight: 600; margin: 0 0 2mm; }
.print-title p { margin: 0 0 2mm; }
.print-title .small { font-size: 9.5pt; color: #333; }
.print-title .small p { margin: 0 0 1.5mm; }
.print-contents h1 { font-size: 20pt; margin-bottom: 6mm; }
.print-contents h2 { font-size: 11pt; margin: 4mm 0 1mm; text-transform: none; }
.print-contents ol { list-style: none; margin: 0; padding: 0; }
.print-contents li { display: flex; align-items: baseline; gap: 0.5em; margin: 0.7mm 0; font-size: 10.5pt; }
.print-contents .num { flex: 0 0 2.2em; font-weight: 600; }
.print-contents .name { flex: 0 1 auto; }
.print-contents .dots { flex: 1 1 auto; border-bottom: 1px dotted #888; margin: 0 0.3em; transform: translateY(-0.25em); }
.print-contents .page { flex: 0 0 auto; min-width: 2em; text-align: right; font-variant-numeric: tabular-nums; }
.print-contents a, .print-title a { text-decoration: none; color: inherit; }
.chapter-label { font-size: 11pt; font-weight: 600; letter-spacing: 0.04em; text-transform: uppercase;
  color: #555; margin: 0 0 1mm; }
[data-no-link] { text-decoration: none; }
"""


def _title_page(book_edition: Edition, student: bool, url: str) -> str:
    e = book_edition
    title, _, subtitle = e.title.partition(":")
    which = ("Student edition: every exercise, without the worked solutions" if student else
             "Full edition, with the worked solutions of the exercises")
    licences = "; ".join(f"{covers}: {name} ({address})" for covers, name, address in e.license_lines())
    rows = [f"<p>{html.escape(e.authors)}</p>",
            f"<p>Version {html.escape(e.version)} of {html.escape(e.date)}"
            + (f", printed from commit {html.escape(e.commit)}" if e.commit else "") + "</p>"]
    small = [f"<p>Licences: {html.escape(licences)}.</p>"]
    if url:
        small.append(f'<p>Web edition, with live explorers: <a href="{html.escape(url)}">{html.escape(url)}</a></p>')
    if e.repository:
        small.append(f'<p>Source and issues: <a href="{html.escape(e.repository)}">{html.escape(e.repository)}</a></p>')
    small.append(f"<p>How to cite: {html.escape(e.citation.replace('*', ''))}</p>")
    return (f'<section class="print-title"><div><h1>{html.escape(title.strip())}</h1>'
            f'<p class="subtitle">{html.escape(subtitle.strip()[:1].upper() + subtitle.strip()[1:])}</p>'
            f'<p class="edition">{html.escape(which)}</p>{"".join(rows)}</div>'
            f'<div class="small">{"".join(small)}</div></section>')


def _contents(book: Book, numbers: dict[str, int] | None, api: str | None = None) -> str:
    """The contents: parts, chapter numbers, titles and the page each starts on (blank on the first pass,
    three figure spaces, as wide as the numbers that replace them). ``api``, when the API reference is
    printed apart, is where it is (its web address, or "" for none), listed last as "api.pdf"."""
    out = ['<nav class="print-contents" id="print-contents"><h1>Contents</h1>']
    groups: list[tuple[str, list[str]]] = []
    for page in book.pages:
        if not groups or groups[-1][0] != page.part:
            groups.append((page.part, []))
        where = str(numbers[page.anchor]) if numbers and page.anchor in numbers else "&#8199;" * 3
        groups[-1][1].append(f'<li><span class="num">{html.escape(page.number)}</span>'
                             f'<a class="name" href="#{page.anchor}">{html.escape(page.title)}</a>'
                             f'<span class="dots"></span><a class="page" href="#{page.anchor}">{where}</a></li>')
    if api is not None:
        name = f'<a class="name" href="{html.escape(api)}">Python API</a>' if api else '<span class="name">Python API</span>'
        groups[-1][1].append(f'<li><span class="num"></span>{name}<span class="dots"></span>'
                             f'<span class="page">printed apart: api.pdf</span></li>')
    for part, items in groups:
        if part:
            out.append(f"<h2>{html.escape(part)}</h2>")
        out.append("<ol>" + "".join(items) + "</ol>")
    out.append("</nav>")
    return "".join(out)


def joined(site: Path, book: Book, linker: Linker, numbers: dict[str, int] | None, url: str,
           title: str) -> str:
    """The book as one HTML document (the contents, then every page), to be written at the site's root."""
    texts = {page.name: (site / f"{page.name}.html").read_text(encoding="utf-8") for page in book.pages}
    for page in book.pages:
        page.title = page.title or title_of(texts[page.name], page.name)
    api = None if any(p.name == API for p in book.pages) else (f"{url}{API}.html" if url else "")
    body, state = [_contents(book, numbers, api)] if len(book.pages) > 1 else [], {}
    for page in book.pages:
        text = texts[page.name]
        found = _widget_state(text)
        if found:
            state.setdefault("version_major", found.get("version_major"))
            state.setdefault("version_minor", found.get("version_minor"))
            state.setdefault("state", {}).update(found.get("state", {}))
        live = f' style=\'--live: "{url}{page.name}.html"\'' if url else ""
        label = (f'<p class="chapter-label">{"Appendix" if page.number.isalpha() else "Chapter"} {page.number}</p>'
                 if page.number else "")
        body.append(f'<div class="print-page" id="{page.anchor}"{live}>{label}{linker.rewrite(page, _article(text))}</div>')
    live_css = ('.print-page .roofline-explorer::after { content: "A live version of this figure, with its '
                'controls, is at " var(--live) " and in the book\'s notebooks."; }') if url else ""
    state_tag = (f'<script type="application/vnd.jupyter.widget-state+json">{json.dumps(state)}</script>'
                 if state else "")
    return (f'<!DOCTYPE html><html lang="en" data-content_root="./" data-theme="light"><head>'
            f'{_head(site, book, linker, title)}<style>{PRINT_CSS}{live_css}</style></head>'
            f'<body><div class="bd-page-width"><main class="bd-main"><div class="bd-content">'
            f'<div class="bd-article-container"><article class="bd-article">{"".join(body)}</article>'
            f'</div></div></main></div>{state_tag}</body></html>')


def _front(site: Path, book: Book, linker: Linker, title_html: str, title: str) -> str:
    return (f'<!DOCTYPE html><html lang="en" data-content_root="./" data-theme="light"><head>'
            f'{_head(site, book, linker, title)}<style>{PRINT_CSS}</style></head>'
            f'<body><div class="bd-page-width"><main class="bd-main"><div class="bd-content">'
            f'<div class="bd-article-container"><article class="bd-article">{title_html}</article>'
            f'</div></div></main></div></body></html>')


# --- printing ---------------------------------------------------------------------------------------

def _print(browser, path: Path, target: Path, footer: str | None) -> None:
    # laid out at the printed column's width (A4 less the margins, 180 mm at 96 px to the inch), so that
    # what the scripts size to the column (explorers, equations scaled down to fit) fits the paper
    page = browser.new_page(viewport={"width": 680, "height": 960})
    try:
        page.goto(path.as_uri(), wait_until="load", timeout=300_000)
        page.evaluate(TYPESET_JS)
        page.wait_for_function(READY_JS, timeout=300_000)
        page.wait_for_timeout(500)  # the explorers' and the fitting scripts draw after load
        page.emulate_media(media="print", color_scheme="light")
        options = dict(path=str(target), format="A4", print_background=True, margin=MARGINS,
                       outline=False, tagged=True)
        if footer:
            options.update(display_header_footer=True, header_template="<span></span>", footer_template=footer)
        page.pdf(**options)
    finally:
        page.close()


def built_from(site: Path) -> str | None:
    """The commit the site was built from, as its footer says it (booktools.edition), or None: the title
    page names the commit of the pages it prints, not the checkout's, which may have moved on since."""
    path = site / "intro.html"
    found = re.search(r"\(commit ([0-9a-f]{7,40})\)", path.read_text(encoding="utf-8")) if path.is_file() else None
    return found.group(1) if found else None


def destinations(pdf: Path) -> dict[str, int]:
    """{named destination: page index from 0} of a PDF that Chromium printed (one per link target)."""
    from pypdf import PdfReader

    reader = PdfReader(str(pdf))
    return {str(name).lstrip("/"): reader.get_destination_page_number(dest)
            for name, dest in reader.named_destinations.items()}


def links(pdf: Path) -> dict[str, list[str]]:
    """The PDF's links: {"inside": [named destinations], "outside": [URIs]}."""
    from pypdf import PdfReader

    reader, out = PdfReader(str(pdf)), {"inside": [], "outside": []}
    for page in reader.pages:
        for annot in page.get("/Annots") or []:
            annot = annot.get_object()
            if annot.get("/Subtype") != "/Link":
                continue
            action = annot.get("/A")
            action = action.get_object() if action is not None else None
            if action is not None and "/URI" in action:
                out["outside"].append(str(action["/URI"]))
            elif action is not None and "/D" in action:
                out["inside"].append(str(action["/D"]).lstrip("/"))
            elif "/Dest" in annot:
                out["inside"].append(str(annot["/Dest"]).lstrip("/"))
    return out


def print_book(site: Path, out: Path, chromium: str, *, url: str = "", student: bool = False,
               only: list[str] | None = None, api: bool = True, chapters: bool = True,
               book_edition: Edition | None = None) -> dict[str, Path]:
    """Print ``site`` into ``out``: ``book.pdf`` (title page, contents, the pages of ``_toc.yml`` but the
    API reference, or only those in ``only``), ``api.pdf`` (unless ``api`` is false), and one PDF per page
    of the book cut from it (unless ``chapters`` is false).
    Returns {"book": path, "api": path, chapter name: path}."""
    from playwright.sync_api import sync_playwright
    from pypdf import PdfReader, PdfWriter

    e = book_edition or edition(ROOT, commit=built_from(site))
    url = (url or e.url).strip()
    url = url.rstrip("/") + "/" if url else ""
    book = book_pages()
    book.pages = [p for p in book.pages if p.name != API and (only is None or p.name in only)]
    for page in book.pages:
        if not (site / f"{page.name}.html").is_file():
            raise SystemExit(f"{site / page.name}.html is not there: build the book first (make book)")
    out.mkdir(parents=True, exist_ok=True)
    name = e.short_title + (", student edition" if student else "")
    footer = FOOTER.format(title=html.escape(f"{name}, version {e.version}"))
    made: dict[str, Path] = {}
    doc, front = site / BOOK_FILE, site / FRONT_FILE
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=ARGS)
        try:
            linker = Linker(book, url)
            front.write_text(_front(site, book, linker, _title_page(e, student, url), name), encoding="utf-8")
            _print(browser, front, out / "_title.pdf", None)
            # twice: first to learn where each page starts, then with those numbers in the contents
            numbers = None
            for _ in range(3):
                linker = Linker(book, url)
                doc.write_text(joined(site, book, linker, numbers, url, name), encoding="utf-8")
                _print(browser, doc, out / "_body.pdf", footer)
                found = destinations(out / "_body.pdf")
                starts = {pg.anchor: found[pg.anchor] + 1 for pg in book.pages if pg.anchor in found}
                if starts == numbers:
                    break
                numbers = starts
            else:
                raise RuntimeError("the contents' page numbers did not settle in three printings")
            if api:
                api_book = Book([Page(API)])
                api_linker = Linker(api_book, url)
                # the API page is printed alone: links to the book go to the web edition (or nowhere)
                doc.write_text(joined(site, api_book, api_linker, None, url, f"{e.short_title}: Python API"),
                               encoding="utf-8")
                _print(browser, doc, out / "api.pdf", FOOTER.format(
                    title=html.escape(f"{e.short_title}, version {e.version}: Python API")))
                made["api"] = out / "api.pdf"
        finally:
            browser.close()
            for f in (doc, front):
                f.unlink(missing_ok=True)
    missing = [pg.name for pg in book.pages if pg.anchor not in numbers]
    if missing:
        raise RuntimeError(f"the printed book has no destination for {missing}")

    writer = PdfWriter()
    writer.append(str(out / "_title.pdf"), import_outline=False)
    writer.append(str(out / "_body.pdf"), import_outline=False)
    writer.add_outline_item(title="Title page", page_number=0)
    writer.add_outline_item(title="Contents", page_number=1)
    parts = {}
    for page in book.pages:
        parent = None
        if page.part:
            if page.part not in parts:
                parts[page.part] = writer.add_outline_item(title=page.part, page_number=numbers[page.anchor])
            parent = parts[page.part]
        label = f"{page.number}. {page.title}" if page.number else page.title
        writer.add_outline_item(title=label, page_number=numbers[page.anchor], parent=parent)
    # the viewer's page numbers are the printed ones: the title page apart, then 1, 2, 3...
    writer.set_page_label(0, 0, prefix="Title")
    writer.set_page_label(1, len(writer.pages) - 1, style="/D", start=1)
    writer.add_metadata({"/Title": f"{e.title}" + (" (student edition)" if student else ""),
                         "/Author": e.authors, "/Subject": f"Version {e.version} of {e.date}",
                         "/Keywords": "; ".join(e.licenses)})
    with open(out / "book.pdf", "wb") as f:
        writer.write(f)
    made["book"] = out / "book.pdf"
    for scratch in (out / "_title.pdf", out / "_body.pdf"):
        scratch.unlink(missing_ok=True)

    if chapters:
        for page, target in chapter_pdfs(made["book"], book, numbers, out, url, e).items():
            made[page] = target
    return made


def chapter_pdfs(book_pdf: Path, book: Book, numbers: dict[str, int], out: Path, url: str,
                 e: Edition) -> dict[str, Path]:
    """One PDF per page of the book, cut from ``book_pdf`` with the book's page numbers. A link to a place
    in the same chapter stays a link inside it; one to another chapter goes to that place on the web
    edition, or is dropped when no address is configured."""
    from pypdf import PdfReader, PdfWriter
    from pypdf.generic import ArrayObject, DictionaryObject, NameObject, TextStringObject

    reader = PdfReader(str(book_pdf))
    dests = {str(k).lstrip("/"): reader.get_destination_page_number(v) for k, v in reader.named_destinations.items()}
    slugs = {pg.slug: pg for pg in book.pages}
    bounds = [numbers[pg.anchor] for pg in book.pages] + [len(reader.pages)]
    made = {}
    for page, start, end in zip(book.pages, bounds, bounds[1:]):
        end = max(end, start + 1)
        part = PdfWriter()
        for i in range(start, end):  # page by page: append() would drop the links that leave the range
            part.add_page(reader.pages[i])
        for name, index in dests.items():
            if start <= index < end:
                part.add_named_destination(name, index - start)
        for pdf_page in part.pages:
            kept = []
            for ref in pdf_page.get("/Annots") or []:
                annot = ref.get_object()
                dest = str(annot.get("/Dest", "")).lstrip("/")
                if not dest or start <= dests.get(dest, -1) < end:
                    kept.append(ref)
                    continue
                slug, _, anchor = dest.partition("--")
                other = slugs.get(slug[2:] if slug.startswith("p-") else slug)
                if url and other is not None:
                    address = f"{url}{other.name}.html" + (f"#{anchor}" if anchor else "")
                    del annot[NameObject("/Dest")]
                    annot[NameObject("/A")] = DictionaryObject({
                        NameObject("/Type"): NameObject("/Action"), NameObject("/S"): NameObject("/URI"),
                        NameObject("/URI"): TextStringObject(address)})
                    kept.append(ref)
            if "/Annots" in pdf_page:
                pdf_page[NameObject("/Annots")] = ArrayObject(kept)
        part.add_metadata({"/Title": f"{page.title}: {e.short_title}, version {e.version}", "/Author": e.authors})
        target = out / f"{page.name.rsplit('/', 1)[-1]}.pdf"
        with open(target, "wb") as f:
            part.write(f)
        made[page.name] = target
    return made


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m booktools.pdf", description=__doc__.split("\n\n")[0])
    parser.add_argument("--site", type=Path, default=ROOT / "_build" / "html", help="the built site")
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "pdf", help="where the PDFs go")
    parser.add_argument("--url", default="", help="the web edition's address (default: html.baseurl of _config.yml)")
    parser.add_argument("--student", action="store_true", help="the site is the student edition")
    args = parser.parse_args(argv)
    args.site, args.out = args.site.resolve(), args.out.resolve()
    chromium, how = find_chromium()
    if chromium is None:
        print(f"make pdf needs a browser to print with: {how}; {ENABLE_BROWSER}", file=sys.stderr)
        return 1
    made = print_book(args.site, args.out, chromium, url=args.url, student=args.student)
    from pypdf import PdfReader

    book, api = PdfReader(str(made["book"])), PdfReader(str(made["api"]))
    found = links(made["book"])
    local = [u for u in found["outside"] if u.startswith("file:")]
    print(f"{made['book']}: {len(book.pages)} pages (a title page, then 1-{len(book.pages) - 1}), "
          f"{len(found['inside'])} links inside it, {len(found['outside'])} to web addresses, {len(local)} to files")
    print(f"{made['api']}: {len(api.pages)} pages; one PDF per page of the book beside them "
          f"({len(made) - 2})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
