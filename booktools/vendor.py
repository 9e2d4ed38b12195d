"""A self-contained book: the scripts the pages load, committed under ``_vendor/`` with their licenses.

The built pages need two things that Sphinx and myst-nb would otherwise take from a CDN: a widget
manager for the sliders on the static page, and MathJax 3. The book's own ``roofline-widgets.js`` draws
the explorers (``roofline.present.widgets.frame_explorer``) by itself, in a few kB; for any other widget it
loads the ipywidgets 8 embed manager (``@jupyter-widgets/html-manager``'s ``embed.js``, 1.9 MB, which
needs no RequireJS), vendored here. MathJax comes as separate components (loader, core, TeX input,
HTML output and its fonts, and assistive MathML, which gives screen readers a MathML copy of each
equation: half the bytes of a combined build, which also carries a menu and MathML input the book does
not use). ``_vendor/axe-core/`` holds axe-core, which the accessibility test runs in each page; the site
does not serve it.
They are committed, so ``make book`` needs only Python: no npm, no network.

``package.json`` and ``package-lock.json`` pin the versions; ``make vendor`` (``python -m
booktools.vendor``, for maintainers, needs npm) runs ``npm ci`` and copies only the files the pages load,
with the licenses, into ``_vendor/``, and writes ``_vendor/MANIFEST.json`` (each file's package, version
and SHA-256), which the tests check against the lock file and the files.

As a Sphinx extension (``sphinx: local_extensions`` in ``_config.yml``) this adds ``_vendor/`` to
``html_static_path``, so the site serves it under ``_static/`` (the script paths in ``_config.yml`` are
relative to that; not a ``_static/`` folder, where Jupyter Book would add every script to every page),
and fails the build, naming the file, when a configured script is missing.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STATIC = "_vendor"  # served as the site's _static/ (html_static_path), relative to the book's root
MANIFEST = "MANIFEST.json"
TEST_ONLY = "axe-core"  # a folder of _vendor/ that the tests use and the site does not serve

# (package, path inside it, destination under _vendor/): only what the pages load, and the licenses.
# A path ending in "/" copies the files of that folder whose names end with one of the suffixes given.
_COPIES = [
    ("@jupyter-widgets/html-manager", "dist/embed.js", "html-manager/embed.js"),
    ("@jupyter-widgets/html-manager", "dist/embed.js.LICENSE.txt", "html-manager/embed.js.LICENSE.txt"),
    # html-manager ships no license file; ipywidgets' (BSD-3-Clause) is the same text in its sibling
    ("@jupyter-widgets/controls7", "LICENSE", "html-manager/LICENSE"),
    # Font Awesome, which embed.js's styles name; modern browsers take the woff2 files only
    ("@jupyter-widgets/html-manager", "dist/*.woff2", "html-manager/"),
    ("@fortawesome/fontawesome-free", "LICENSE.txt", "html-manager/fontawesome-LICENSE.txt"),
    # MathJax as components (_config.yml's mathjax3_config names them): the loader, the core, TeX input
    # (base, ams and the rest of its usual set), HTML output and its fonts; TeX extensions a page needs
    # beyond those (boldsymbol, cancel, ...) are loaded on demand from input/tex/extensions/.
    ("mathjax", "es5/startup.js", "mathjax/startup.js"),
    ("mathjax", "es5/core.js", "mathjax/core.js"),
    ("mathjax", "es5/input/tex.js", "mathjax/input/tex.js"),
    ("mathjax", "es5/input/tex/extensions/*.js", "mathjax/input/tex/extensions/"),
    ("mathjax", "es5/output/chtml.js", "mathjax/output/chtml.js"),
    ("mathjax", "es5/output/chtml/fonts/tex.js", "mathjax/output/chtml/fonts/tex.js"),
    ("mathjax", "es5/output/chtml/fonts/woff-v2/*.woff", "mathjax/output/chtml/fonts/woff-v2/"),
    # assistive MathML: a visually hidden MathML copy of every equation beside its drawing (which is then
    # aria-hidden), so that a screen reader reads the mathematics rather than nothing
    ("mathjax", "es5/a11y/assistive-mml.js", "mathjax/a11y/assistive-mml.js"),
    ("mathjax", "LICENSE", "mathjax/LICENSE"),
    # axe-core, for the accessibility test (tests/book/test_a11y.py) only: never copied into the site
    ("axe-core", "axe.min.js", f"{TEST_ONLY}/axe.min.js"),
    ("axe-core", "LICENSE", f"{TEST_ONLY}/LICENSE"),
]
_OURS = {"roofline-widgets.js", MANIFEST, "README.md"}  # committed by hand, kept by refresh()


class VendorError(RuntimeError):
    """The vendored scripts are missing, stale, or could not be refreshed."""


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def locked_versions(root: Path = ROOT) -> dict[str, str]:
    """{package: version} as ``package-lock.json`` pins them."""
    lock = root / "package-lock.json"
    if not lock.is_file():
        raise VendorError(f"{lock} is missing: it pins the scripts the book serves itself")
    packages = json.loads(lock.read_text())["packages"]
    return {name.removeprefix("node_modules/"): info["version"] for name, info in packages.items()
            if name.startswith("node_modules/") and "version" in info}


def manifest(root: Path = ROOT) -> dict[str, dict[str, str]]:
    """{path under _vendor/: {"package", "version", "sha256"}} as ``make vendor`` last wrote it."""
    path = root / STATIC / MANIFEST
    if not path.is_file():
        raise VendorError(f"{path} is missing: run `make vendor` (needs npm) to fetch the pinned scripts")
    return json.loads(path.read_text())


def refresh(root: Path = ROOT, *, log=print) -> dict[str, dict[str, str]]:
    """``npm ci`` the pinned packages, copy what the pages load into ``_vendor/``, write the manifest.

    Raises :class:`VendorError` with the reason (npm missing or failing, a file gone from a package).
    """
    versions = locked_versions(root)
    npm = shutil.which("npm")
    if npm is None:
        raise VendorError("npm (Node.js) was not found on PATH; `make vendor` needs it (building the book does not)")
    log("booktools.vendor: npm ci (@jupyter-widgets/html-manager, MathJax, pinned in package-lock.json)")
    proc = subprocess.run([npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"],
                          cwd=root, capture_output=True, text=True)
    if proc.returncode != 0:
        raise VendorError(f"npm ci failed (exit {proc.returncode}):\n{(proc.stdout + proc.stderr)[-3000:]}")
    modules, dest = root / "node_modules", root / STATIC
    for old in dest.iterdir() if dest.is_dir() else ():
        if old.name not in _OURS:
            shutil.rmtree(old) if old.is_dir() else old.unlink()
    entries = {}
    for package, inner, target in _COPIES:
        folder, _, pattern = inner.rpartition("/")
        sources = sorted((modules / package / folder).glob(pattern))
        if not sources:
            raise VendorError(f"{modules / package / inner} is missing after npm ci; did {package} change its layout?")
        for src in sources:
            dst = dest / (target + src.name if target.endswith("/") else target)
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dst)
            entries[dst.relative_to(dest).as_posix()] = {"package": package, "version": versions[package],
                                                         "sha256": _sha256(dst)}
    (dest / MANIFEST).write_text(json.dumps(dict(sorted(entries.items())), indent=1) + "\n")
    total = sum((dest / p).stat().st_size for p in entries)
    log(f"booktools.vendor: {len(entries)} files, {total / 1e6:.2f} MB, in {dest.relative_to(root)}/")
    return entries


def check(root: Path = ROOT) -> list[str]:
    """What is wrong with the committed copy: files missing, changed, or from other versions than the
    lock pins. Empty when all is well."""
    versions, problems = locked_versions(root), []
    for path, entry in manifest(root).items():
        file = root / STATIC / path
        if not file.is_file():
            problems.append(f"{STATIC}/{path} is missing")
        elif _sha256(file) != entry["sha256"]:
            problems.append(f"{STATIC}/{path} differs from what `make vendor` copied")
        if versions.get(entry["package"]) != entry["version"]:
            problems.append(f"{STATIC}/{path} is {entry['package']} {entry['version']}, the lock pins "
                            f"{versions.get(entry['package'])}")
    return problems


# --- the Sphinx extension ---------------------------------------------------------------------------

def _config_inited(app, config) -> None:
    from sphinx.errors import ExtensionError

    root = Path(app.srcdir)
    # here rather than in _config.yml, where Jupyter Book would add every script in it to every page
    config.html_static_path = [*config.html_static_path, str(root / STATIC)]
    # Sphinx copies a static folder less what exclude_patterns matches, relative to that folder: the
    # tests' axe-core stays out of the site (no page of the book's source is named so)
    config.exclude_patterns = [*config.exclude_patterns, TEST_ONLY]
    wanted = [*config.nb_ipywidgets_js, config.mathjax_path]
    missing = [p for p in wanted if "://" not in p and not (root / STATIC / p).is_file()]
    if missing:
        raise ExtensionError(f"scripts the pages load are missing from {STATIC}/: {', '.join(missing)} "
                             "(they are committed; `make vendor` fetches them again with npm)")


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
    return {"parallel_read_safe": True, "parallel_write_safe": True}


def main() -> int:
    try:
        refresh()
    except VendorError as err:
        print(f"booktools.vendor: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
