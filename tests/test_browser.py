"""The published page in a real browser, with no network: the sliders work and the math is typeset.

Headless Chromium driven by Playwright opens chapter 1 from a server on 127.0.0.1. The browser is
``$CHROMIUM``, else chromium, chromium-browser or google-chrome on PATH (never a downloaded one);
without one these tests are skipped, except in CI (``CI=true``), where that is a failure. Every request to anywhere else is aborted and fails the test, so a page
that leans on a CDN cannot pass. Screenshots of the explorer before and after are left in
``_build/browser/`` to look at.
"""

import functools
import gzip
import http.server
import re
import threading
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from playwright import sync_api

ROOT = Path(__file__).resolve().parent.parent
CHAPTER = "chapters/01-three-budgets.html"
SHOTS = ROOT / "_build" / "browser"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def server(chromium, site):
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    thread.join()


@pytest.fixture(scope="module")
def chapter(chromium, server, site):
    """Chapter 1 loaded in Chromium: (page, requests outside the site, local files that failed,
    local files loaded, uncaught JavaScript errors)."""
    outside, failed, loaded, errors = [], [], [], []

    def route(r):
        host = urlsplit(r.request.url).hostname
        if host in ("127.0.0.1", "localhost"):
            r.continue_()
        else:
            outside.append(r.request.url)
            r.abort()

    def response(resp):
        path = unquote(urlsplit(resp.url).path)
        (failed if resp.status >= 400 else loaded).append((resp.status, path))

    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("response", response)
            page.route("**/*", route)
            page.goto(f"{server}/{CHAPTER}", wait_until="load")
            yield page, outside, failed, loaded, errors
        finally:
            browser.close()


def _explorer(page):
    """The decode explorer: the widget box that holds the batch slider."""
    box = page.locator(".widget-vbox", has=page.locator(".widget-slider", has_text="batch")).first
    box.wait_for(state="visible")
    return box


def _visible_frame(box):
    """(src of the visible frame image, the visible text beside it, its tokens/s, the batch slider's value)."""
    img = box.locator("img:visible")
    assert img.count() == 1, f"expected one visible frame, found {img.count()}"
    html = box.locator(".widget-html:visible")
    assert html.count() == 1
    text = html.inner_text()
    tokens = re.search(r"([\d,.]+) tokens/s", text)
    assert tokens, text
    batch = box.locator(".widget-slider", has_text="batch").locator(".widget-readout").inner_text()
    return img.get_attribute("src"), text, tokens.group(1), batch


def test_the_page_asks_for_nothing_outside_the_site(chapter):
    page, outside, failed, _, errors = chapter
    _explorer(page)  # rendered: the widget manager has run, and asked for what it needs
    page.wait_for_function("document.querySelectorAll('mjx-container').length > 0")
    assert outside == [], f"requests outside the site: {outside}"
    assert failed == [], f"files the site lacks: {failed}"
    assert errors == [], f"JavaScript errors: {errors}"


def test_moving_the_batch_slider_switches_the_frame_and_the_numbers(chapter):
    page, *_ = chapter
    box = _explorer(page)
    box.scroll_into_view_if_needed()
    SHOTS.mkdir(parents=True, exist_ok=True)
    src_before, text_before, tokens_before, batch_before = _visible_frame(box)
    box.screenshot(path=str(SHOTS / "explorer-before.png"))
    assert f"batch {batch_before}," in text_before, (batch_before, text_before)

    box.locator(".widget-slider", has_text="batch").locator(".noUi-handle").focus()
    for _ in range(3):
        page.keyboard.press("ArrowRight")
    # wait for the slider to move (not for a time): its readout shows the new batch
    box.locator(".widget-slider", has_text="batch").locator(".widget-readout").filter(
        has_not_text=re.compile(rf"^{re.escape(batch_before)}$")).wait_for()
    src_after, text_after, tokens_after, batch_after = _visible_frame(box)
    box.screenshot(path=str(SHOTS / "explorer-after.png"))

    assert batch_after != batch_before
    assert src_after != src_before, "the slider moved but the picture did not change"
    assert tokens_after != tokens_before, (text_before, text_after)
    assert f"batch {batch_after}," in text_after, "the numbers beside the picture are not the slider's"


def test_the_math_is_typeset(chapter):
    page, *_ = chapter
    page.wait_for_function("document.querySelectorAll('mjx-container').length > 0")
    assert page.locator("mjx-container").count() >= 5
    assert page.locator(".math").count() > 0
    assert page.locator("mjx-merror").count() == 0, "MathJax could not typeset some of the math"


def test_the_page_weighs_under_three_megabytes(chapter, site):
    """What a reader downloads for chapter 1 (HTML with the frames, scripts, styles, fonts, figures),
    as a static host sends it, gzip-compressed. Printed by `make bench` too."""
    _, _, _, loaded, _ = chapter
    files = {site / path.lstrip("/") for _, path in loaded}
    assert site / CHAPTER in files and any("npm/html-manager" in str(f) for f in files)
    sent = sum(len(gzip.compress(f.read_bytes(), 6)) for f in files)
    assert sent < 3e6, f"chapter 1 sends {sent / 1e6:.2f} MB gzipped"


def test_chapter_two_three_nested_controls_work_offline(server, chapter):
    """Chapter 2's explorer nests three stacks (micro-batch, sequence, recompute): each control must
    reach its own level, with the frame and the numbers following."""
    outside = []
    page = chapter[0].context.browser.new_page(viewport={"width": 1280, "height": 900})  # one Playwright session per module
    try:
        page.route("**/*", lambda r: r.continue_() if urlsplit(r.request.url).hostname in ("127.0.0.1", "localhost")
                   else (outside.append(r.request.url), r.abort()))
        page.goto(f"{server}/chapters/02-memory-budget.html", wait_until="load")
        box = page.locator(".widget-vbox", has=page.locator(".widget-slider", has_text="recompute")).first
        box.wait_for(state="visible")
        box.scroll_into_view_if_needed()

        def visible():
            return box.locator("img:visible").get_attribute("src"), box.locator(".widget-html:visible").inner_text()

        seen = [visible()]
        for control, presses in (("sequence", 3), ("recompute", 2), ("micro-batch", 1)):
            slider = box.locator(".widget-slider", has_text=control)
            before = slider.locator(".widget-readout").inner_text()
            slider.locator(".noUi-handle").focus()
            for _ in range(presses):
                page.keyboard.press("ArrowRight")
            slider.locator(".widget-readout").filter(has_not_text=re.compile(rf"^{re.escape(before)}$")).wait_for()
            seen.append(visible())
        src, text = seen[-1]
        assert len({s for s, _ in seen}) == len(seen), "a control moved but the picture did not change"
        assert "micro-batch 2, 8,192 tokens, recompute: full" in text, text
    finally:
        page.close()
    assert outside == [], f"requests outside the site: {outside}"
