"""Every page of the book fits its column, in headless Chromium (``booktools.layout`` measures):

- at a desktop's width (1280 px) no table is wider than its column, i.e. none is cut off behind a
  sideways scroll;
- at a desktop's and at a phone's width (400 px) no picture (figure, explorer frame) and no display
  equation is wider than its column, and no equation scrolls inside its own box;
- the console logs no error on any page, no file the site lacks is asked for, and each page names its
  icon (so the browser does not ask the host for /favicon.ico);
- every explorer keeps its height, and each slider its track's width, at every position of every slider;
- every chapter page, with what it names, weighs under 4 MB as stored (``make bench`` prints each).

Skipped without a browser, as the other browser tests are (tests/conftest.py).
"""

import re
from pathlib import Path

import pytest

from booktools.bench import chapter_weights
from booktools.layout import WIDTHS, measure, pages, serve, steadiness

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = [p for p in pages(ROOT) if re.fullmatch(r"chapters/[^/]+\.html", p)]


@pytest.fixture(scope="module")
def base(chromium, site):
    with serve(site) as url:
        yield url


@pytest.fixture(scope="module")
def measured(browser, base):
    """``{(page, "desktop" | "phone"): what booktools.layout.measure found}`` for every page of the book."""
    return {(page, kind): measure(browser, base, page, viewport)
            for page in pages(ROOT) for kind, viewport in WIDTHS.items()}


def _found(measured, kinds, what):
    return {f"{page} at {WIDTHS[kind]['width']} px": f[what] for (page, kind), f in measured.items()
            if kind in kinds and f[what]}


def test_the_book_has_its_pages():
    assert len(CHAPTERS) >= 14 and "intro.html" in pages(ROOT)


def test_no_table_is_cut_off_at_a_desktop_width(measured):
    assert _found(measured, ["desktop"], "tables") == {}


def test_no_picture_is_wider_than_its_column(measured):
    assert _found(measured, ["desktop", "phone"], "pictures") == {}


def test_no_display_equation_is_wider_than_its_column_or_scrolls(measured):
    assert _found(measured, ["desktop", "phone"], "equations") == {}


def test_no_page_logs_an_error(measured):
    assert _found(measured, ["desktop", "phone"], "console") == {}


def test_every_page_names_an_icon_the_site_has(site):
    for page in pages(ROOT):
        html = (site / page).read_text(encoding="utf-8")
        icon = re.search(r'<link rel="icon" href="([^"]+)"', html)
        assert icon, f"{page} names no icon: the browser asks the host for /favicon.ico"
        assert ((site / page).parent / icon.group(1).split("?")[0]).resolve().is_file(), (page, icon.group(1))


def test_every_explorer_keeps_its_size_at_every_step(browser, base):
    """Each slider of each explorer moved through all its positions, at both widths: one height for the
    explorer (a readout that wrapped onto a second line grew it by a line), one width per track."""
    moved, explorers = [], 0
    for page in CHAPTERS:
        for kind, viewport in WIDTHS.items():
            for box in steadiness(browser, base, page, viewport):
                explorers += 1
                tracks = {n: t for n, t in zip(box["sliders"], box["tracks"]) if len(t) > 1}
                if len(box["heights"]) > 1 or tracks:
                    moved.append(f"{page} at {viewport['width']} px, sliders {box['sliders']}: heights "
                                 f"{sorted(box['heights'])}, track widths {tracks}")
    assert explorers >= 2 * 12, f"only {explorers} explorers found"
    assert moved == []


def test_every_chapter_page_is_light(site):
    heavy = {page: f"{stored / 1e6:.2f} MB" for page, (stored, _) in chapter_weights(site).items() if stored > 4e6}
    assert heavy == {}, f"chapter pages over 4 MB as stored: {heavy}"
