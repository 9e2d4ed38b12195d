"""Everyone can read the book: axe-core finds no serious or critical violation on any page, in the light
mode or the dark, and a screen reader gets every equation as MathML and hears an explorer's readout change.

axe-core is vendored and pinned (``_vendor/axe-core/``, ``package-lock.json``); ``booktools.a11y`` opens
each page of the site (the table of contents' pages, the index, the module index, the search page) in
headless Chromium once per mode, with the reader's system set to that mode, and runs it. Every violation
found, whatever its impact, is written to ``_build/browser/axe.txt``; serious and critical ones fail.
Skipped without a browser, as the other browser tests are (tests/conftest.py).
"""

import re
from pathlib import Path

import pytest

from booktools import a11y
from booktools.layout import TYPESET_JS, serve

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "_build" / "browser"


@pytest.fixture(scope="module")
def found(browser, site):
    return a11y.survey(site, browser=browser)


def test_axe_checks_every_page_in_both_modes(found, site):
    assert {p for p, _ in found} == set(a11y.site_pages(site))
    assert len({p for p, _ in found}) >= 27
    assert {mode: sum(1 for _, m in found if m == mode) for mode in a11y.MODES} == \
        {mode: len(found) // 2 for mode in a11y.MODES}
    shown = {(page, mode): result["mode"] for (page, mode), result in found.items() if result["mode"] != mode}
    assert shown == {}, f"the theme did not follow the reader's mode: {shown}"


def test_no_page_has_a_serious_or_critical_violation_in_either_mode(found):
    SHOTS.mkdir(parents=True, exist_ok=True)
    lines = [f"{page} {mode} {v['impact']} {v['id']}: {v['help']} ({len(v['nodes'])}: {', '.join(v['nodes'][:3])})"
             for (page, mode), result in found.items() for v in result["violations"]]
    totals = a11y.counts(found)
    (SHOTS / "axe.txt").write_text("\n".join([f"{mode}: {by}" for mode, by in totals.items()] + lines) + "\n",
                                   encoding="utf-8")
    severe = [line for line in lines if line.split()[2] in a11y.SEVERE]
    assert severe == []


def test_axe_finds_what_it_should_on_a_page_made_to_fail(browser, tmp_path):
    """The check can fail: a page with grey text on grey, a list of no items and a button named other
    than it reads has serious and critical violations, in both modes."""
    (tmp_path / "bad.html").write_text(
        '<!DOCTYPE html><html lang="en"><head><title>bad</title></head><body><main>'
        '<p style="color:#999;background:#aaa">faint</p><div role="list"><div>not an item</div></div>'
        '<button aria-label="Close">Search Ctrl K</button></main></body></html>', encoding="utf-8")
    result = a11y.survey(tmp_path, only=["bad.html"], browser=browser)
    for mode in a11y.MODES:
        ids = {v["id"]: v["impact"] for v in result["bad.html", mode]["violations"]}
        assert ids.get("color-contrast") == "serious", ids
        assert ids.get("aria-required-children") == "critical", ids
        assert ids.get("label-content-name-mismatch") == "serious", ids


def test_every_equation_reaches_a_screen_reader_as_mathml(browser, site):
    """MathJax's assistive MathML: each typeset equation carries a MathML copy, which the accessibility
    tree exposes as math (the drawing itself is hidden from it), so chapter 1's equations are no longer silent."""
    with serve(site) as base:
        page = browser.new_page()
        try:
            page.goto(f"{base}/chapters/01-three-budgets.html", wait_until="load")
            typeset = page.evaluate(TYPESET_JS)
            equations = page.evaluate("""() => [...document.querySelectorAll('mjx-container')].map(c => ({
                mathml: (c.querySelector('mjx-assistive-mml > math') || {}).textContent || '',
                hidden: (c.querySelector('mjx-math') || {getAttribute: () => null}).getAttribute('aria-hidden')}))""")
            tree = page.locator("mjx-container[display='true']").first.aria_snapshot()
        finally:
            page.close()
    assert typeset == len(equations) >= 100
    assert [e for e in equations if not e["mathml"].strip()] == []
    assert {e["hidden"] for e in equations} == {"true"}
    assert re.search(r"- math\b", tree), tree


def test_a_readout_is_announced_when_its_slider_moves(browser, site):
    with serve(site) as base:
        page = browser.new_page()
        try:
            page.goto(f"{base}/chapters/01-three-budgets.html", wait_until="load")
            box = page.locator(".roofline-explorer").first
            box.wait_for(state="visible")
            readouts = box.locator(".widget-readout")
            assert readouts.count() >= 2
            assert {readouts.nth(i).get_attribute("aria-live") for i in range(readouts.count())} == {"polite"}
            before = readouts.first.inner_text()
            box.locator("input[type=range]").first.focus()
            page.keyboard.press("ArrowRight")
            readouts.first.filter(has_not_text=re.compile(rf"^{re.escape(before)}$")).wait_for()
        finally:
            page.close()


def test_the_scrolling_table_is_reached_by_the_keyboard(browser, site):
    """Appendix A's long table scrolls in its box: it is a focusable region named by its caption."""
    with serve(site) as base:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        try:
            page.goto(f"{base}/chapters/appendix-measured.html", wait_until="load")
            page.evaluate(TYPESET_JS)
            regions = page.evaluate("""() => [...document.querySelectorAll('.roofline-table-wrap[tabindex="0"]')]
                .map(el => [el.getAttribute('role'), el.getAttribute('aria-label'), el.scrollHeight > el.clientHeight])""")
        finally:
            page.close()
    assert regions and all(role == "region" and label and scrolls for role, label, scrolls in regions), regions


def test_the_search_button_is_the_themes_less_its_mismatched_name():
    """_templates/search-button-field.html overrides the theme's to drop aria-label="Search" (the button
    shows "Search Ctrl+K"); the rest must stay the theme's, or a theme upgrade would change it unseen."""
    import pydata_sphinx_theme

    theme = (Path(pydata_sphinx_theme.__file__).parent / "theme" / "pydata_sphinx_theme" / "components"
             / "search-button-field.html").read_text()
    ours = (ROOT / "_templates" / "search-button-field.html").read_text()
    body = lambda text: [line.strip() for line in re.sub(r"\{#.*?#\}", "", text, flags=re.S).splitlines() if line.strip()]
    assert ' aria-label="{{ _(\'Search\') }}"' in theme
    assert body(ours) == body(theme.replace(' aria-label="{{ _(\'Search\') }}"', ""))


def test_the_bibliography_is_a_list_of_items(site):
    text = (site / "bibliography.html").read_text(encoding="utf-8")
    entries = text.count('class="citation"')
    assert entries >= 50
    assert text.count('role="listitem"') == entries and "doc-biblioentry" not in text
