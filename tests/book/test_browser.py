"""The published page in a real browser, with no network: the sliders work, steadily, the math is
typeset, the page is light, and it reads on a phone.

Headless Chromium driven by Playwright opens the chapters from a server on 127.0.0.1. The browser is
``$CHROMIUM``, else chromium, chromium-browser or google-chrome on PATH (never a downloaded one);
without one these tests are skipped, except in CI (``CI=true``), where that is a failure. Every
request to anywhere else is aborted and fails the test, so a page that leans on a CDN cannot pass.
Screenshots (the explorer before and after a step; chapter 1 at a phone's width) are left in
``_build/browser/`` to look at, with the figures measured in ``figures.txt``.
"""

import functools
import http.server
import re
import threading
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from booktools.bench import size
from booktools.browser import USABLE_JS, record

ROOT = Path(__file__).resolve().parents[2]
CHAPTER = "chapters/01-three-budgets.html"
SHOTS = ROOT / "_build" / "browser"
PHONE = {"width": 400, "height": 860}


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def _note(line: str) -> None:
    """Keep a measured figure where a reader of the test run finds it (``_build/browser/figures.txt``)."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    with open(SHOTS / "figures.txt", "a", encoding="utf-8") as f:
        f.write(line + "\n")


@pytest.fixture(scope="module")
def server(chromium, site):
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    thread.join()


@pytest.fixture(scope="module")
def chapter(browser, server):
    """Chapter 1 loaded in Chromium: (page, requests outside the site, local files that failed,
    local files loaded, uncaught JavaScript errors, seconds from opening to usable sliders)."""
    outside, failed, loaded, errors = [], [], [], []
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.on("pageerror", lambda e: errors.append(str(e)))
    record(page, outside, failed, loaded)
    page.goto(f"{server}/{CHAPTER}", wait_until="commit")
    usable = page.wait_for_function(USABLE_JS, polling="raf", timeout=60_000).json_value() / 1e3
    page.wait_for_load_state("load")
    yield page, outside, failed, loaded, errors, usable
    page.close()


def _explorer(page, control="batch"):
    """The explorer whose sliders include ``control``."""
    box = page.locator(".roofline-explorer", has=page.locator(".widget-slider", has_text=control)).first
    box.wait_for(state="visible")
    return box


def _visible_frame(box):
    """(a screenshot of the visible frame's picture, the text beside it, its tokens/s, the batch readout)."""
    frame = box.locator(".rl-frame:visible")
    assert frame.count() == 1, f"expected one visible frame, found {frame.count()}"
    text = frame.locator(".widget-html").inner_text()
    tokens = re.search(r"([\d,.]+) tokens/s", text)
    assert tokens, text
    batch = box.locator(".widget-slider", has_text="batch").locator(".widget-readout").inner_text()
    return frame.locator(".rl-picture").screenshot(), text, tokens.group(1), batch


def _step(page, box, control, presses=1, key="ArrowRight"):
    """Move ``control`` by ``presses`` key presses and wait (not for a time) until its readout changes."""
    slider = box.locator(".widget-slider", has_text=control)
    before = slider.locator(".widget-readout").inner_text()
    slider.locator("input[type=range]").focus()
    for _ in range(presses):
        page.keyboard.press(key)
    slider.locator(".widget-readout").filter(has_not_text=re.compile(rf"^{re.escape(before)}$")).wait_for()


def test_the_page_asks_for_nothing_outside_the_site(chapter):
    page, outside, failed, _, errors, _ = chapter
    _explorer(page)  # rendered: the widget manager has run, and asked for what it needs
    page.wait_for_function("document.querySelectorAll('mjx-container').length > 0")
    assert outside == [], f"requests outside the site: {outside}"
    assert failed == [], f"files the site lacks: {failed}"
    assert errors == [], f"JavaScript errors: {errors}"


def test_the_sliders_become_usable_and_the_time_is_reported(chapter):
    """Reported, not asserted as a timing (``make bench`` prints the median of five cold loads)."""
    page, *_, usable = chapter
    box = _explorer(page)
    assert box.locator(".widget-slider input[type=range]").count() == 2  # batch and context
    _note(f"chapter 1 sliders usable {usable:.2f} s after opening the page (127.0.0.1, headless Chromium)")
    assert usable > 0


def test_moving_the_batch_slider_switches_the_frame_and_the_numbers(chapter):
    page, *_ = chapter
    box = _explorer(page)
    box.scroll_into_view_if_needed()
    SHOTS.mkdir(parents=True, exist_ok=True)
    src_before, text_before, tokens_before, batch_before = _visible_frame(box)
    box.screenshot(path=str(SHOTS / "explorer-before.png"))
    assert f"batch {batch_before}," in text_before, (batch_before, text_before)

    _step(page, box, "batch", 3)
    src_after, text_after, tokens_after, batch_after = _visible_frame(box)
    box.screenshot(path=str(SHOTS / "explorer-after.png"))

    assert batch_after != batch_before
    assert src_after != src_before, "the slider moved but the picture did not change"
    assert tokens_after != tokens_before, (text_before, text_after)
    assert f"batch {batch_after}," in text_after, "the numbers beside the picture are not the slider's"


# Watches the explorer on every animation frame: its height, and how many frames are on screen with
# their pictures decoded.
_WATCH_JS = """box => {
  window.__seen = [];
  const look = () => {
    const shown = [...box.querySelectorAll('.rl-frame')].filter(f => getComputedStyle(f).visibility === 'visible'
        && [...f.querySelectorAll('img')].every(img => img.complete && img.naturalWidth > 0));
    window.__seen.push([box.getBoundingClientRect().height, shown.length]);
    window.__watching = requestAnimationFrame(look);
  };
  look();
}"""


def test_slider_steps_keep_the_height_and_never_blank_the_picture(chapter):
    """Every step of both sliders, watched on every animation frame: the explorer keeps one height,
    and exactly one frame's picture is on screen, decoded, at every frame the browser paints."""
    page, *_ = chapter
    box = _explorer(page)
    box.scroll_into_view_if_needed()
    height = box.bounding_box()["height"]
    box.evaluate(_WATCH_JS)
    batches = box.locator(".widget-slider", has_text="batch").locator(".widget-readout")
    # earlier tests may have moved the slider: start from its first position, so that ten steps right and ten
    # left come back to it (a step past the last position would be lost)
    box.locator(".widget-slider", has_text="batch").locator("input[type=range]").focus()
    page.keyboard.press("Home")
    batches.filter(has_text=re.compile(r"^1$")).wait_for(timeout=20_000)
    first = batches.inner_text()
    for control, presses, key in (("batch", 10, "ArrowRight"), ("context", 3, "ArrowRight"),
                                  ("batch", 10, "ArrowLeft"), ("context", 3, "ArrowLeft")):
        slider = box.locator(".widget-slider", has_text=control)
        before = slider.locator(".widget-readout").inner_text()
        slider.locator("input[type=range]").focus()
        for _ in range(presses):
            page.keyboard.press(key)
            page.wait_for_timeout(40)  # let the browser paint each step (the test asserts no timing)
        slider.locator(".widget-readout").filter(has_not_text=re.compile(rf"^{re.escape(before)}$")).wait_for()
    # on a loaded machine the key presses queue: wait until the last one is handled (back where it opened)
    batches.filter(has_text=re.compile(rf"^{re.escape(first)}$")).wait_for(timeout=20_000)
    page.wait_for_timeout(100)
    seen = page.evaluate("cancelAnimationFrame(window.__watching), window.__seen")
    assert batches.inner_text() == first and len(seen) > 20, (batches.inner_text(), len(seen))
    heights = {round(h, 1) for h, _ in seen}
    assert heights == {round(height, 1)}, f"the explorer's height changed: {sorted(heights)} (was {height})"
    counts = {n for _, n in seen}
    assert counts == {1}, f"the browser painted {sorted(counts)} frames on screen (want exactly 1, decoded)"


def test_the_math_is_typeset(chapter):
    page, *_ = chapter
    page.wait_for_function("document.querySelectorAll('mjx-container').length > 0")
    assert page.locator("mjx-container").count() >= 5
    assert page.locator(".math").count() > 0
    assert page.locator("mjx-merror").count() == 0, "MathJax could not typeset some of the math"


def test_the_page_is_light(chapter, site):
    """What a reader downloads for chapter 1 (HTML with the frames, scripts, styles, fonts, figures):
    at most 4 MB as stored and 1.5 MB as a static host sends it, gzip-compressed. `make bench` prints it."""
    page, _, _, loaded, *_ = chapter
    page.wait_for_timeout(500)  # fonts MathJax asks for once it has typeset
    files = {site / path.lstrip("/") for _, path in loaded}
    assert site / CHAPTER in files and any("roofline-widgets.js" in str(f) for f in files)
    assert not any("html-manager" in str(f) for f in files), "a page of explorers alone loads no widget manager"
    stored, sent = (sum(s[k] for s in map(size, (f.read_bytes() for f in files))) for k in (0, 1))
    _note(f"chapter 1 page weight: {stored / 1e6:.2f} MB stored, {sent / 1e6:.2f} MB gzipped, {len(files)} files")
    assert stored <= 4e6, f"chapter 1 and what it loads weigh {stored / 1e6:.2f} MB as stored"
    assert sent <= 1.5e6, f"chapter 1 sends {sent / 1e6:.2f} MB gzipped"


def test_chapter_two_three_controls_work_offline(browser, server):
    """Chapter 2's explorer has three controls (micro-batch, sequence, recompute): each must reach
    its own level, with the frame and the numbers following."""
    outside, failed, loaded = [], [], []
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        record(page, outside, failed, loaded)
        page.goto(f"{server}/chapters/02-memory-budget.html", wait_until="load")
        box = _explorer(page, "recompute")
        box.scroll_into_view_if_needed()

        def visible():
            frame = box.locator(".rl-frame:visible")
            return frame.locator(".rl-picture").screenshot(), frame.locator(".widget-html").inner_text()

        seen = [visible()]
        for control, presses in (("sequence", 3), ("recompute", 2), ("micro-batch", 1)):
            _step(page, box, control, presses)
            seen.append(visible())
        src, text = seen[-1]
        assert len({s for s, _ in seen}) == len(seen), "a control moved but the picture did not change"
        assert "micro-batch 2, 8,192 tokens, recompute: full" in text, text
    finally:
        page.close()
    assert outside == [] and failed == [], (outside, failed)


# Elements sticking out of the viewport sideways, other than inside a box that scrolls them (a box that
# merely hides its overflow cuts the content off: that counts as sticking out).
_OVERFLOW_JS = """() => {
  const width = document.documentElement.clientWidth, out = [];
  const clipped = el => {
    for (let a = el.parentElement; a && a !== document.body; a = a.parentElement) {
      const ox = getComputedStyle(a).overflowX;
      if (ox === 'auto' || ox === 'scroll') {
        const r = a.getBoundingClientRect();
        return r.left >= -1 && r.right <= width + 1;
      }
    }
    return false;
  };
  for (const el of document.body.querySelectorAll('*')) {
    const r = el.getBoundingClientRect(), style = getComputedStyle(el);
    if (r.width === 0 || r.height === 0 || style.visibility === 'hidden' || style.position === 'fixed') continue;
    if ((r.right > width + 1 || r.left < -1) && !clipped(el)) {
      out.push(`${el.tagName.toLowerCase()}.${[...el.classList].join('.')} [${Math.round(r.left)}, ${Math.round(r.right)}]`);
    }
  }
  return {scroll: document.documentElement.scrollWidth, width, out: out.slice(0, 20)};
}"""


def test_on_a_phone_nothing_is_wider_than_the_screen(browser, server):
    """At 400 px, chapters 1 and 2: the page never scrolls sideways; wide tables and long equations
    scroll in their own box; the explorer's readouts are on screen; the navigation opens. Full-page
    screenshots are left in _build/browser/ to look at. (One test, not parametrized: a missing browser
    then folds into one summary line.)"""
    for page_path in (CHAPTER, "chapters/02-memory-budget.html"):
        _phone(browser, server, page_path)


def _phone(browser, server, page_path):
    page = browser.new_page(viewport=PHONE, device_scale_factor=2, is_mobile=True, has_touch=True)
    try:
        outside, failed, loaded = [], [], []
        record(page, outside, failed, loaded)
        page.goto(f"{server}/{page_path}", wait_until="load")
        box = _explorer(page, "recompute" if "02-" in page_path else "batch")
        page.wait_for_function("document.querySelectorAll('mjx-container').length > 0")
        page.wait_for_timeout(300)
        name = Path(page_path).stem
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / f"phone-{name}.png"), full_page=True)
        box.scroll_into_view_if_needed()
        box.screenshot(path=str(SHOTS / f"phone-{name}-explorer.png"))

        found = page.evaluate(_OVERFLOW_JS)
        assert found["scroll"] <= found["width"], f"the page scrolls sideways: {found}"
        assert found["out"] == [], f"wider than the screen, outside a scrolling box: {found['out']}"
        for readout in box.locator(".widget-readout").all():
            r = readout.bounding_box()
            assert readout.is_visible() and r["x"] >= 0 and r["x"] + r["width"] <= PHONE["width"], r
        text = box.locator(".rl-frame:visible .widget-html").bounding_box()
        assert text["x"] >= 0 and text["x"] + text["width"] <= PHONE["width"], text

        toggle = page.locator(".primary-toggle:visible")
        assert toggle.count() >= 1, "no button opens the table of contents on a phone"
        toggle.first.click()
        other = "01-three-budgets" if "02-" in page_path else "02-memory-budget"  # the current page's link is "#"
        link = page.locator(f'nav a.reference.internal[href*="{other}"]:visible').first
        link.wait_for(state="visible")
        r = link.bounding_box()
        assert 0 <= r["x"] and r["x"] + r["width"] <= PHONE["width"], r
        assert outside == [] and failed == [], (outside, failed)
    finally:
        page.close()


def test_a_page_with_other_widgets_gets_the_widget_manager(browser, server, site):
    """roofline-widgets.js draws explorers itself; a view with any other widget is left to the real
    widget manager (the vendored embed.js), which it then loads, from the site."""
    import json

    import ipywidgets as W
    from ipywidgets.embed import embed_data

    slider = W.IntSlider(value=7, max=10, description="other")
    data = embed_data(views=[slider])
    page_path = site / "chapters" / "_other-widgets.html"
    page_path.write_text(
        "<!DOCTYPE html><html><head>"
        f'<script type="application/vnd.jupyter.widget-state+json">{json.dumps(data["manager_state"])}</script>'
        '<script src="../_static/roofline-widgets.js"></script></head><body>'
        f'<script type="application/vnd.jupyter.widget-view+json">{json.dumps(data["view_specs"][0])}</script>'
        "</body></html>", encoding="utf-8")
    outside, failed, loaded = [], [], []
    page = browser.new_page()
    try:
        record(page, outside, failed, loaded)
        page.goto(f"{server}/chapters/_other-widgets.html", wait_until="load")
        drawn = page.locator(".widget-slider", has_text="other")
        drawn.locator(".noUi-handle").wait_for()  # the widget manager's slider, not ours
        assert drawn.locator(".widget-readout").inner_text() == "7"
    finally:
        page.close()
        page_path.unlink()
    assert any(path.endswith("html-manager/embed.js") for _, path in loaded)
    assert outside == [] and failed == [], (outside, failed)
