"""The book: builds with zero warnings, shows the package's numbers, and its tests catch drift.

These tests run the real tools (jupyter-book, nbval) in subprocesses and take about a minute.
"""

import html
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import roofline as rl
from roofline.core.units import fmt

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def _text(page: Path) -> str:
    raw = page.read_text(encoding="utf-8")
    raw = re.sub(r"<script.*?</script>", " ", raw, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", " ", raw))


def test_chapter_one_shows_the_package_numbers(site):
    text = _text(site / "chapters" / "01-three-budgets.html")
    h100, llama = rl.get_hardware("h100-sxm"), rl.load_model("llama-3-8b")
    decode = rl.predict(rl.decode_step(llama), h100)
    prefill = rl.predict(rl.prefill(llama, 2048), h100)
    expected = [
        fmt(h100.peak_flops(), "FLOP/s", 4),
        fmt(h100.ridge_point()),
        fmt(decode.memory_time, "s"),
        fmt(decode.compute_time, "s"),
        fmt(100 * decode.utilization, "%", 2),
        fmt(1 / decode.time),
        fmt(prefill.cost.flops, "FLOP"),
        fmt(prefill.time, "s"),
        fmt(prefill.cost.intensity, digits=4),
        fmt(llama.params, per="billion"),
        fmt(rl.model_state_bytes(llama), "B", 4),
    ]
    for number in expected:
        assert number in text, number
    # myst-nb reads glued text back with literal_eval: an unquoted '1,365' would come out as '(1, 365)'
    assert not re.search(r"\(\d+, \d+\)", text)


def test_figures_and_solutions_render(site):
    page = (site / "chapters" / "01-three-budgets.html").read_text(encoding="utf-8")
    assert page.count('class="figure') >= 4 or page.count("<figure") >= 4
    assert page.count("Fig. ") >= 4
    assert page.count("dropdown") >= 5
    assert "application/vnd.jupyter.widget-state+json" in page  # the explorer's frames travel with the page


def test_intro_links_the_chapter(site):
    assert "chapters/01-three-budgets.html" in (site / "intro.html").read_text(encoding="utf-8")


def test_nbval_catches_a_changed_datasheet(tmp_path):
    """Change the H100's bandwidth in a copy of the package: the prose would change, so nbval must fail."""
    copy = tmp_path / "roofline"
    shutil.copytree(ROOT / "roofline", copy, ignore=shutil.ignore_patterns("__pycache__"))
    catalog = copy / "data" / "hardware.toml"
    text = catalog.read_text()
    edited = text.replace('hbm_bandwidth = { value = 3.35, unit = "TB/s"', 'hbm_bandwidth = { value = 3.0, unit = "TB/s"', 1)
    assert edited != text
    catalog.write_text(edited)
    # the copy saves its figures into the test's folder, not the book's figures/
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "ROOFLINE_FIGURES": str(tmp_path / "figures")}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-o", "addopts=", "--nbval",
         "--nbval-current-env", "--nbval-sanitize-with", str(ROOT / "tests" / "sanitize.cfg"),
         str(ROOT / "chapters" / "01-three-budgets.ipynb")],
        capture_output=True, text=True, timeout=900, env=env, cwd=tmp_path,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-3000:]
    # the committed prose says 4.79 ms; the edited datasheet gives 16.06 GB / 3.0 TB/s = 5.35 ms
    assert "4.79 ms" in out and "5.35 ms" in out


def test_reference_pages_render_the_api_and_the_command_line(site):
    api = (site / "chapters" / "reference" / "api.html").read_text(encoding="utf-8")
    for anchor in ("roofline.core.model.Model.active_params", "roofline.core.hardware.get_hardware",
                   "roofline.workloads.inference.decode_step", "roofline.cli.main.main"):
        assert f'id="{anchor}"' in api, anchor
    cli = _text(site / "chapters" / "reference" / "cli.html")
    mixtral = rl.load_model("mixtral-8x7b")
    assert f"{mixtral.params:,}" in cli and f"{mixtral.active_params:,}" in cli
    assert "did you mean" in cli and "Traceback" not in cli


def test_no_page_loads_anything_from_outside_the_site(site):
    """Every page, read as a browser loads it: no script, style sheet, font, image or frame from another
    host, and no style sheet that imports or names one (the widget manager and MathJax come from
    _vendor/, served as _static/)."""
    elsewhere = r"""["']?(?:https?:)?//"""
    tags = re.compile(rf"""<(?:script|img|iframe|source|audio|video|embed|input)\b[^>]*\ssrc=({elsewhere}[^"'\s>]+)"""
                      rf"""|<link\b[^>]*\shref=({elsewhere}[^"'\s>]+)""", re.I)
    in_css = re.compile(rf"""url\(\s*({elsewhere}[^)]+)\)|@import\s+({elsewhere}[^;]+)""", re.I)
    found = {}
    pages = sorted(site.rglob("*.html"))
    assert len(pages) > 5
    for page in pages:
        raw = page.read_text(encoding="utf-8")
        styles = " ".join(re.findall(r"<style\b[^>]*>(.*?)</style>", raw, flags=re.S | re.I))
        hits = [a or b for a, b in tags.findall(raw)] + [a or b for a, b in in_css.findall(styles)]
        if hits:
            found[str(page.relative_to(site))] = hits
    for css in sorted(site.rglob("*.css")):
        hits = [a or b for a, b in in_css.findall(css.read_text(encoding="utf-8", errors="replace"))]
        if hits:
            found[str(css.relative_to(site))] = hits
    assert found == {}, found
    chapter = (site / "chapters" / "01-three-budgets.html").read_text(encoding="utf-8")
    for script in ("_static/roofline-widgets.js", "_static/mathjax/startup.js", "_static/roofline.css", "_static/roofline-nav.js",
                   "_static/roofline-math.js"):
        assert f"../{script}" in chapter, script


def test_the_page_head_is_the_themes_less_fontawesome_js():
    """_templates/static/webpack-macros.html overrides the theme's file to drop one 1.5 MB script; the
    rest must stay the theme's own, or a theme upgrade would silently change every page head."""
    import pydata_sphinx_theme

    theme = Path(pydata_sphinx_theme.__file__).parent / "theme" / "pydata_sphinx_theme" / "static" / "webpack-macros.html"
    ours = (ROOT / "_templates" / "static" / "webpack-macros.html").read_text()
    body = lambda text: [line.rstrip() for line in re.sub(r"(<!--.*?-->|\{#.*?#\})", "", text, flags=re.S).splitlines()
                         if line.strip()]
    expected = [line for line in body(theme.read_text()) if "fontawesome.js" not in line]
    assert len(expected) == len(body(theme.read_text())) - 1
    assert body(ours) == expected


def test_icons_still_come_from_the_themes_webfont(site):
    """Without fontawesome.js the icons are drawn by the theme's style sheet and its webfont."""
    page = (site / "chapters" / "01-three-budgets.html").read_text(encoding="utf-8")
    assert "fontawesome.js" not in page and 'class="fa-solid fa-bars"' in page
    css = (site / "_static" / "styles" / "pydata-sphinx-theme.css").read_text(encoding="utf-8")
    assert ".fa-bars:before" in css and "fa-solid-900.woff2" in css
    assert (site / "_static" / "vendor" / "fontawesome" / "webfonts" / "fa-solid-900.woff2").is_file()


def test_the_figure_index_is_the_one_the_build_made_and_lists_every_file(site):
    """figures/README.md is generated (booktools/figindex.py, copied by `make book`): the committed copy is
    the build's, and it names every figure file in figures/ and no file that is not there."""
    built = (site.parent / "figure-index.md").read_text(encoding="utf-8")
    committed = (ROOT / "figures" / "README.md").read_text(encoding="utf-8")
    assert committed == built, "figures/README.md is stale: run `make book` and commit it"
    listed = set(re.findall(r"\(([a-z0-9-]+)\.svg\)", committed))
    on_disk = {p.stem for p in (ROOT / "figures").glob("*.svg")}
    assert listed == on_disk
    assert all((ROOT / "figures" / f"{name}.png").is_file() for name in listed)
    # every numbered figure, in the book's order: chapter by chapter (1, 2, ... then the appendices A, B, ...),
    # each chapter's figures numbered from 1, one chapter per document
    rows = re.findall(r"^\| ([0-9A-Z]+)\.(\d+) \| [^|]* \(([\w-]+)\) \|", committed, flags=re.M)
    assert len(rows) == len(re.findall(r"^\| [^-F]", committed, flags=re.M)) > 20
    chapters = list(dict.fromkeys(c for c, _, _ in rows))
    numbered = [c for c in chapters if c.isdigit()]
    assert chapters == numbered + sorted(set(chapters) - set(numbered))
    assert [int(c) for c in numbered] == sorted(int(c) for c in numbered) and numbered[0] == "1"
    assert [c for c in chapters if not c.isdigit()] == ["A", "B", "C"]
    for chapter in chapters:
        figures = [(int(n), doc) for c, n, doc in rows if c == chapter]
        assert [n for n, _ in figures] == list(range(1, len(figures) + 1)), chapter
        assert len({doc for _, doc in figures}) == 1, chapter
    page = (site / "chapters" / "01-three-budgets.html").read_text(encoding="utf-8")
    assert "Fig. 1.1" in page and "| 1.1 | The three budgets (01-three-budgets) |" in committed
    appendix = (site / "chapters" / "appendix-measured.html").read_text(encoding="utf-8")
    assert "Fig. A.1" in appendix and "| A.1 | The roofline meets a real GPU (appendix-measured) |" in committed


def test_chapters_and_appendices_carry_their_numbers(site):
    """The prose says "chapter 7" and "appendix B": the page's title, the sidebar and the previous/next links
    say so too (_toc.yml numbers the chapters' and the appendices' parts; booktools.numbering letters the
    appendices), and the pages before and after them stay unnumbered."""
    import yaml

    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    chapters, appendices, plain = [], [], [toc["root"]]
    for part in toc["parts"]:
        files = [c["file"] for c in part["chapters"]]
        if not part.get("numbered"):
            plain += files
        elif part["caption"] == "Appendices":
            appendices += files
        else:
            chapters += files
    expected = {**{f: f"{i}." for i, f in enumerate(chapters, 1)},
                **{f: f"{chr(ord('A') + i)}." for i, f in enumerate(appendices)}}
    assert len(chapters) == 13 and len(appendices) == 3
    assert [f.split("/")[-1][:2] for f in chapters] == [f"{i:02d}" for i in range(1, 14)]
    sidebar = (site / "intro.html").read_text(encoding="utf-8")
    for doc, number in expected.items():
        page = (site / f"{doc}.html").read_text(encoding="utf-8")
        heading = re.search(r'<h1><span class="section-number">([^<]*)</span>', page)
        assert heading and heading.group(1).strip() == number, doc
        title = re.search(r"<title>([^<]*)", page).group(1)
        assert title.startswith(number + " "), (doc, title)
        link = re.search(rf'href="{re.escape(doc)}\.html">([^<]*)<', sidebar)
        assert link and link.group(1).startswith(number + " "), (doc, link and link.group(1))
        printed = re.search(r'<div id="jb-print-docs-body"[^>]*>\s*<h1>([^<]*)</h1>', page)  # make pdf's heading
        assert printed and printed.group(1).startswith(number + " "), (doc, printed and printed.group(1))
    for doc in plain:
        page = (site / f"{doc}.html").read_text(encoding="utf-8")
        assert not re.search(r'<h1><span class="section-number">', page), doc
        printed = re.search(r'<div id="jb-print-docs-body"[^>]*>\s*<h1>([^<]*)</h1>', page)
        assert printed and not re.match(r"[0-9A-Z]+\. ", printed.group(1)), doc
