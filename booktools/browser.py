"""The browser the page tests and ``make bench`` drive: found, never downloaded.

``find_chromium()`` takes ``$CHROMIUM`` when set, else the first of chromium, chromium-browser,
google-chrome on PATH. ``open_page`` loads a page of the built site in headless Chromium (through
Playwright) with every request outside the site aborted and recorded.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from urllib.parse import unquote, urlsplit

BROWSER_NAMES = ("chromium", "chromium-browser", "google-chrome")
ENABLE_BROWSER = "to run them, `apt-get install chromium` or point $CHROMIUM at a Chromium or Chrome"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]

# In the page: the moment chapter 1's decode explorer can be used, i.e. its sliders are there and
# exactly one frame is on screen with its pictures decoded; false before.
USABLE_JS = """() => {
  const box = document.querySelector('.roofline-explorer');
  if (!box || !box.querySelector('.widget-slider input[type=range], .widget-slider .noUi-handle')) return false;
  const shown = [...box.querySelectorAll('.rl-frame')].filter(f => getComputedStyle(f).visibility === 'visible'
      && [...f.querySelectorAll('img')].every(img => img.complete && img.naturalWidth > 0));
  return shown.length === 1 ? performance.now() : false;
}"""


def find_chromium(env=os.environ) -> tuple[str | None, str]:
    """(path of the browser, how it was found or why none was)."""
    chosen = env.get("CHROMIUM")
    search = env.get("PATH", os.defpath)
    if chosen:
        path = shutil.which(chosen, path=search)
        if path is None:
            return None, f"$CHROMIUM is {chosen!r}, which is not an executable"
        return path, f"$CHROMIUM={chosen}"
    for name in BROWSER_NAMES:
        path = shutil.which(name, path=search)
        if path:
            return path, f"{name} on PATH"
    return None, f"no Chromium found ($CHROMIUM is unset and none of {', '.join(BROWSER_NAMES)} is on PATH)"


def local(url: str) -> bool:
    parts = urlsplit(url)
    return parts.scheme in ("file", "data", "blob") or parts.hostname in ("127.0.0.1", "localhost")


def record(page, outside: list, failed: list, loaded: list) -> None:
    """Abort and note every request outside the site; note each local file served or missing."""

    def route(r):
        if local(r.request.url):
            r.continue_()
        else:
            outside.append(r.request.url)
            r.abort()

    def response(resp):
        if urlsplit(resp.url).scheme in ("data", "blob"):
            return
        path = unquote(urlsplit(resp.url).path)
        (failed if resp.status >= 400 else loaded).append((resp.status, path))

    def finished(request):  # file:// loads have no response object with a status in some versions
        if urlsplit(request.url).scheme == "file":
            loaded.append((200, unquote(urlsplit(request.url).path)))

    page.route("**/*", route)
    page.on("response", response)
    page.on("requestfinished", finished)
