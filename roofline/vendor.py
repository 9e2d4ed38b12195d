"""A self-contained book: the scripts the pages need, served from the site itself (issue #6).

The built pages load three things that Sphinx and myst-nb would otherwise take from a CDN: RequireJS
and the ipywidgets 8 embed manager (``@jupyter-widgets/html-manager``), which bring the sliders to
life on the static page, and MathJax 3, which typesets the math. ``package.json`` and
``package-lock.json`` in the repository root pin them; :func:`fetch` installs them with ``npm ci``
and copies what the pages load into ``_vendor/npm/`` (git-ignored). This extension adds ``_vendor/``
(which also holds the committed ``roofline-widgets.js``) to ``html_static_path``, so the site serves
them under ``_static/``; the script paths in ``_config.yml`` (``npm/...``) are relative to that.
(Not a ``_static/`` folder: Jupyter Book would add every script in it to every page.)

As a Sphinx extension (``sphinx: extra_extensions`` in ``_config.yml``) this runs at the start of
every build, and only does work when the lock file changed. Without npm (or without a network on a
first build) the book still builds, with the CDN scripts, and says so. Where the site must be
self-contained (``ROOFLINE_SELF_CONTAINED=1``, which the tests set, or ``CI=true``) it fails instead.

``python -m roofline.vendor`` fetches by hand.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STATIC = "_vendor"  # served as the site's _static/ (html_static_path), relative to the book's root
VENDOR = "npm"      # inside it: what fetch() copies

# node_modules path -> destination under _vendor/npm/ (the script paths in _config.yml point here).
_COPIES = [
    ("requirejs/require.js", "require.js"),
    ("requirejs/README.md", "require.README.md"),
    ("@jupyter-widgets/html-manager/dist", "html-manager"),
    ("@jupyter-widgets/html-manager/package.json", "html-manager/package.json"),
    ("mathjax/LICENSE", "mathjax/LICENSE"),
    ("mathjax/es5/tex-mml-chtml.js", "mathjax/tex-mml-chtml.js"),
    # what MathJax loads on demand, relative to its own script: fonts, TeX extensions, menu, a11y
    ("mathjax/es5/output", "mathjax/output"),
    ("mathjax/es5/input", "mathjax/input"),
    ("mathjax/es5/a11y", "mathjax/a11y"),
    ("mathjax/es5/ui", "mathjax/ui"),
    ("mathjax/es5/adaptors", "mathjax/adaptors"),
    ("mathjax/es5/sre", "mathjax/sre"),
]
# the html-manager's dist holds other builds and source maps that no page loads
_SKIP = shutil.ignore_patterns("*.map", "embed.js", "embed.js.LICENSE.txt")

_STAMP = ".package-lock.sha256"


class VendorError(RuntimeError):
    """The self-hosted scripts could not be fetched."""


def _lock_digest(root: Path) -> str:
    lock = root / "package-lock.json"
    if not lock.is_file():
        raise VendorError(f"{lock} is missing: it pins the scripts the book serves itself")
    return hashlib.sha256(lock.read_bytes()).hexdigest()


def vendor_dir(root: Path = ROOT) -> Path:
    return root / STATIC / VENDOR


def is_current(root: Path = ROOT) -> bool:
    """True when _vendor/npm/ holds the scripts that package-lock.json pins."""
    stamp = vendor_dir(root) / _STAMP
    return stamp.is_file() and stamp.read_text().strip() == _lock_digest(root)


def fetch(root: Path = ROOT, *, log=print) -> Path:
    """``npm ci`` the pinned packages and copy what the pages load into ``_vendor/npm/``.

    Does nothing when the copy is already current. Raises :class:`VendorError` with the reason
    (npm missing, npm failing) otherwise.
    """
    digest = _lock_digest(root)
    dest = vendor_dir(root)
    if is_current(root):
        return dest
    npm = shutil.which("npm")
    if npm is None:
        raise VendorError("npm (Node.js) was not found on PATH; it fetches the pinned scripts in package-lock.json")
    log("roofline.vendor: npm ci (RequireJS, @jupyter-widgets/html-manager, MathJax, pinned in package-lock.json)")
    proc = subprocess.run([npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"],
                          cwd=root, capture_output=True, text=True)
    if proc.returncode != 0:
        raise VendorError(f"npm ci failed (exit {proc.returncode}):\n{(proc.stdout + proc.stderr)[-3000:]}")
    modules = root / "node_modules"
    if dest.exists():
        shutil.rmtree(dest)
    for source, target in _COPIES:
        src, dst = modules / source, dest / target
        if not src.exists():
            raise VendorError(f"{src} is missing after npm ci; did a pinned package change its layout?")
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dst, ignore=_SKIP)
        else:
            shutil.copy2(src, dst)
    (dest / _STAMP).write_text(digest + "\n")
    log(f"roofline.vendor: copied into {dest.relative_to(root)}/")
    return dest


def self_contained_required() -> bool:
    """Tests and CI build the self-contained site or fail; a reader's build may fall back to CDNs."""
    return os.environ.get("ROOFLINE_SELF_CONTAINED") == "1" or os.environ.get("CI", "").lower() == "true"


# --- the Sphinx extension ---------------------------------------------------------------------------

CDN = "https://cdn.jsdelivr.net/npm/"


def cdn_url(path: str, root: Path = ROOT) -> str:
    """The CDN address of a file that fetch() serves at ``_static/<path>`` (the same pinned version).

    ``cdn_url("npm/require.js")`` is RequireJS at the version package-lock.json pins. Paths outside
    ``npm/`` come back unchanged.
    """
    prefix = VENDOR + "/"
    if not path.startswith(prefix):
        return path
    rest = path[len(prefix):]
    lock = json.loads((root / "package-lock.json").read_text())["packages"]
    for source, target in _COPIES:
        if rest == target or rest.startswith(target + "/"):
            parts = source.split("/")
            n = 2 if parts[0].startswith("@") else 1
            package, inner = "/".join(parts[:n]), "/".join(parts[n:]) + rest[len(target):]
            version = lock[f"node_modules/{package}"]["version"]
            return f"{CDN}{package}@{version}/{inner.lstrip('/')}"
    raise VendorError(f"{path!r} is not a file that roofline.vendor copies (see _COPIES)")


def _cdn_fallback(config, root: Path) -> None:
    """Load the same pinned scripts from a CDN: the configured ``npm/...`` paths become CDN URLs."""
    config.nb_ipywidgets_js = {
        cdn_url(path, root): {k: cdn_url(v, root) if isinstance(v, str) else v for k, v in attrs.items()}
        for path, attrs in config.nb_ipywidgets_js.items()
    }
    config.mathjax_path = cdn_url(config.mathjax_path, root)


def _config_inited(app, config) -> None:
    from sphinx.util import logging
    from sphinx.util.console import bold

    logger = logging.getLogger(__name__)
    root = Path(app.srcdir)
    # here rather than in _config.yml, where Jupyter Book would add every script in it to every page
    config.html_static_path = [*config.html_static_path, str(root / STATIC)]
    try:
        fetch(root, log=lambda msg: logger.info(msg))
    except VendorError as err:
        if self_contained_required():
            from sphinx.errors import ExtensionError

            raise ExtensionError(f"the book must be self-contained here, but its scripts could not be fetched: {err}") from err
        _cdn_fallback(config, root)
        app.roofline_vendor_note = (f"roofline.vendor: {err}\nroofline.vendor: NOTE: this site loads RequireJS, "
                                    "the widget manager and MathJax from a CDN, so its sliders and math need a "
                                    "network. Install Node.js/npm and rebuild for a self-contained site.")
        # info, not warning: the build must stay warning-free, and this site still works (online)
        logger.info(bold("\n" + app.roofline_vendor_note + "\n"))


def _build_finished(app, exception) -> None:
    """Say it again at the end, where a reader of the build log looks."""
    note = getattr(app, "roofline_vendor_note", None)
    if note and exception is None:
        from sphinx.util import logging
        from sphinx.util.console import bold

        logging.getLogger(__name__).info(bold("\n" + note))


def _drop_duplicate_scripts(app, pagename, templatename, context, doctree) -> None:
    """Emit each script once. Inline scripts (sphinx-thebe's config, togglebutton's) arrive twice, once
    with filename None and once with '', so Sphinx keeps both; thebe's second copy declares
    ``const THEBE_JS_URL`` again, a JavaScript error on every page."""
    seen, kept = set(), []
    for js in context.get("script_files", []):
        attributes = getattr(js, "attributes", {})
        key = (getattr(js, "filename", js) or "", tuple(sorted((k, str(v)) for k, v in attributes.items())))
        if key not in seen:
            seen.add(key)
            kept.append(js)
    if "script_files" in context:
        context["script_files"][:] = kept


def setup(app):
    app.connect("config-inited", _config_inited)
    app.connect("html-page-context", _drop_duplicate_scripts, priority=900)
    app.connect("build-finished", _build_finished)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


if __name__ == "__main__":
    print(fetch())
