"""Chapter 3's explorer on the built page: each of its three controls moves the frame, offline."""

from test_browser import _explorer, _step, server  # noqa: F401  (a fixture and helpers of the chapter 1-2 tests; the browser is tests/conftest.py's)
from booktools.browser import record


def test_chapter_three_controls_work_offline(browser, server):  # noqa: F811
    outside, failed, loaded = [], [], []
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        record(page, outside, failed, loaded)
        page.goto(f"{server}/chapters/03-recomputation.html", wait_until="load")
        box = _explorer(page, "policy")
        box.scroll_into_view_if_needed()

        def visible():
            frame = box.locator(".rl-frame:visible")
            return frame.locator(".rl-picture").screenshot(), frame.locator(".widget-html").inner_text()

        seen = [visible()]
        for control, presses in (("sequence", 2), ("policy", 2), ("micro-batch", 1)):
            _step(page, box, control, presses)
            seen.append(visible())
        _, text = seen[-1]
        assert len({s for s, _ in seen}) == len(seen), "a control moved but the picture did not change"
        assert "micro-batch 2, 16,384 tokens, full" in text and "MFU" in text and "HFU" in text, text
    finally:
        page.close()
    assert outside == [] and failed == [], (outside, failed)
