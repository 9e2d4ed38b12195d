"""The committed chapters: executed in order, with outputs, numbers glued rather than typed.

nbval (run by pytest on chapters/) compares the outputs; these checks catch what it cannot: a cell
committed without outputs passes nbval vacuously.

A prose number is ``{eval}`name``` in the markdown and ``glue("name", ...)`` in a hidden code cell:
the site reads the glued output (``booktools.evalrole``), JupyterLab evaluates the name in the kernel
(jupyterlab-myst), and the executor stores what the kernel answered in the markdown cell's
``user_expressions`` metadata; the checks below hold the three to one text.
"""

import ast
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))
REFERENCE = sorted((ROOT / "chapters" / "reference").glob("*.ipynb"))
# the Reference part's pages written as notebooks (the rules of thumb): the house rules of a chapter's prose and
# cells, without a chapter's objectives, figures and exercises
NOTEBOOKS = CHAPTERS + REFERENCE
EVAL_ROLE = re.compile(r"\{eval\}`([A-Za-z_][A-Za-z0-9_]*)`")
ANY_EVAL = re.compile(r"\{eval\}`([^`]*)`")
GLUE_ROLES = re.compile(r"\{glue(?::[a-z]*)?\}")
# a quantity typed into prose: a number followed by a unit, a percent or a times sign
TYPED = re.compile(r"(?<![\w.])\d[\d,]*(\.\d+)?\s?(%|×|ms\b|µs\b|us\b|GB\b|MB\b|kB\b|TB\b|GB/s|TB/s|GFLOP|TFLOP|FLOP/s|tokens/s|tokens per second)")


def _cells(path):
    return json.loads(path.read_text())["cells"]


def _prose(cell):
    text = "".join(cell["source"])
    text = ANY_EVAL.sub("", text)
    text = re.sub(r"\$\$.*?\$\$", "", text, flags=re.S)
    text = re.sub(r"\$[^$]*\$", "", text)
    return re.sub(r"`[^`]*`", "", text)


def _glued(cells):
    names = []
    for c in cells:
        for o in c.get("outputs", []):
            name = o.get("metadata", {}).get("scrapbook", {}).get("name")
            if name:
                names.append(name)
    return names


def _glued_text(cells):
    """{name: the text glued under it}, read back as myst-nb reads it (a quoted str literal)."""
    found = {}
    for c in cells:
        for o in c.get("outputs", []):
            record = o.get("metadata", {}).get("scrapbook", {})
            if record.get("name"):
                found[record["name"]] = ast.literal_eval(o["data"][record["mime_prefix"] + "text/plain"])
    return found


def test_there_is_a_chapter():
    assert CHAPTERS, "no notebooks in chapters/"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_executed_once_top_to_bottom_with_outputs(path):
    code = [c for c in _cells(path) if c["cell_type"] == "code"]
    assert [c["execution_count"] for c in code] == list(range(1, len(code) + 1))
    # every cell but the opening imports shows or glues something
    empty = [i for i, c in enumerate(code[1:], 2) if not c["outputs"]]
    assert not empty, f"code cells {empty} have no outputs"
    for c in code:
        for o in c["outputs"]:
            assert o["output_type"] != "error", "".join(c["source"])
            assert o.get("name") != "stderr", f"stderr output in: {''.join(c['source'])[:80]}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_glue_reference_is_glued_once_and_used(path):
    cells = _cells(path)
    glued = _glued(cells)
    assert len(glued) == len(set(glued)), "a name is glued twice"
    used = {m for c in cells if c["cell_type"] == "markdown" for m in EVAL_ROLE.findall("".join(c["source"]))}
    assert used - set(glued) == set(), "referenced but never glued"
    assert set(glued) - used == set(), "glued but never used in the prose"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_prose_numbers_are_eval_roles_of_bare_names(path):
    """JupyterLab renders {eval} and not glue roles; the site's {eval} takes a glued name only."""
    for i, c in enumerate(_cells(path)):
        if c["cell_type"] != "markdown":
            continue
        text = "".join(c["source"])
        old = GLUE_ROLES.findall(text)
        assert not old, (f"cell {i} still has {old[0]} roles, which JupyterLab shows raw: run "
                         f"`python -m booktools.glue2eval {path.relative_to(ROOT)}`, then re-execute it")
        odd = [e for e in ANY_EVAL.findall(text) if not EVAL_ROLE.fullmatch(f"{{eval}}`{e}`")]
        assert not odd, f"cell {i}: {{eval}} of {odd}, not a bare glued name"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_jupyterlab_shows_the_glued_text_before_and_after_run_all(path):
    """Each markdown cell carries what the kernel answered for its {eval} roles when the executor
    reached it (jupyterlab-myst shows these on opening, and writes the same after Run All): one entry
    per role, in order, each the very text glued under that name, which nbval compares."""
    cells = _cells(path)
    glued = _glued_text(cells)
    for i, c in enumerate(cells):
        if c["cell_type"] != "markdown":
            continue
        names = EVAL_ROLE.findall("".join(c["source"]))
        stored = c["metadata"].get("user_expressions", [])
        assert [e["expression"] for e in stored] == names, (
            f"cell {i}: the evaluated roles are stale; re-execute with python -m booktools.notebooks")
        for e in stored:
            assert e["result"]["status"] == "ok", (i, e)
            assert e["result"]["data"]["text/plain"] == glued[e["expression"]], (i, e, glued[e["expression"]])


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_quantity_is_typed_into_prose(path):
    for c in _cells(path):
        # a JupyterLab caption cell copies a figure's metadata caption (names such as "A100 80GB")
        if c["cell_type"] == "markdown" and "lab_caption" not in c["metadata"].get("roofline", {}):
            m = TYPED.search(_prose(c))
            assert m is None, f"typed quantity {m.group(0)!r} in: {''.join(c['source'])[:100]}"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_figures_are_captioned_described_and_saved_for_slides(path):
    figures = [c for c in _cells(path) if c["cell_type"] == "code" and "figure" in c["metadata"].get("mystnb", {})]
    assert figures
    for c in figures:
        meta = c["metadata"]["mystnb"]
        assert meta["figure"]["caption"] and meta["figure"]["name"].startswith("fig-")
        assert len(meta["image"]["alt"]) > 40
        assert any("image/png" in o.get("data", {}) for o in c["outputs"])
        saved = re.search(r'plot\.save\(fig, "([^"]+)"\)', "".join(c["source"]))
        if "nbval-ignore-output" in c["metadata"].get("tags", []):
            # the reader's own machine: different on every run, so not a figure for slides
            assert saved is None, "a machine-dependent figure would change figures/ on every build"
            continue
        assert saved, "figure not written to figures/"
        for ext in ("svg", "png"):
            assert (ROOT / "figures" / f"{saved.group(1)}.{ext}").stat().st_size > 1000


def test_every_figure_file_is_whole():
    """figures/ is course material: a PNG that stops before its end chunk, or an SVG cut off mid-element
    (a file caught half-written by a commit), must not ship."""
    from xml.etree import ElementTree

    files = sorted((ROOT / "figures").iterdir())
    assert files
    for f in files:
        if f.suffix == ".png":
            data = f.read_bytes()
            assert data[:8] == b"\x89PNG\r\n\x1a\n" and data.endswith(b"IEND\xaeB`\x82"), f"{f.name} is not a whole PNG"
        elif f.suffix == ".svg":
            try:
                ElementTree.parse(f)
            except ElementTree.ParseError as e:
                raise AssertionError(f"{f.name} is not a whole SVG: {e}") from None


def test_figure_names_are_unique_across_the_book():
    """A {numref} target is global to the site: two chapters naming a figure alike would make the build fail
    (duplicate label) or, worse, link a reader to the other chapter's figure."""
    owner: dict[str, str] = {}
    for path in CHAPTERS:
        for c in _cells(path):
            name = c["metadata"].get("mystnb", {}).get("figure", {}).get("name") if c["cell_type"] == "code" else None
            if name:
                assert name not in owner, f"figure {name!r} is named in both {owner[name]} and {path.name}"
                owner[name] = path.name
    assert len(owner) >= 2 * len(CHAPTERS)


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_exercises_have_worked_solutions_in_prose(path):
    """At least six exercises, each with a hidden solution that is a worked derivation in prose and
    math with its numbers glued; no solution shows code (a reader would see glue calls)."""
    cells = _cells(path)
    solutions = [c for c in cells if c["cell_type"] == "markdown" and ":class: dropdown" in "".join(c["source"])]
    assert len(solutions) >= 6, f"{len(solutions)} exercises with solutions, want at least six"
    for c in solutions:
        text = "".join(c["source"])
        body = text[text.index(":class: dropdown"):]
        assert EVAL_ROLE.search(body), f"a solution without a computed number: {body[:80]!r}"
        assert "```" not in body, "a solution shows code"
    shown = [c for c in cells if c["cell_type"] == "code" and "glue(" in "".join(c["source"])
             and "remove-cell" not in c["metadata"].get("tags", [])]
    assert not shown, "glue() calls a reader would see: " + "; ".join("".join(c["source"])[:60] for c in shown)


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_chapter_opens_with_objectives_and_closes_with_a_summary(path):
    cells = [c for c in _cells(path) if c["cell_type"] == "markdown"]
    assert "What you will be able to do" in "".join(cells[0]["source"])
    headings = [line for c in cells for line in "".join(c["source"]).splitlines() if line.startswith("## ")]
    assert any(h.startswith("## Summary") for h in headings), headings


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_every_figure_has_its_caption_for_jupyterlab(path):
    """Right after each figure cell, a markdown cell hidden from the site (remove-cell) holds a MyST
    figure with the figure's name and its caption as in the metadata: JupyterLab shows "Figure N:
    caption" under the picture and resolves {numref} to it. One per figure, none left over."""
    cells = _cells(path)
    figures = {c["metadata"]["mystnb"]["figure"]["name"]: i for i, c in enumerate(cells)
               if c["cell_type"] == "code" and "figure" in c["metadata"].get("mystnb", {})}
    captions = {c["metadata"]["roofline"]["lab_caption"]: i for i, c in enumerate(cells)
                if "lab_caption" in c["metadata"].get("roofline", {})}
    assert set(captions) == set(figures), "caption cells are stale: re-execute with python -m booktools.notebooks"
    for name, i in figures.items():
        caption = cells[i + 1]
        meta = cells[i]["metadata"]["mystnb"]["figure"]
        assert captions[name] == i + 1 and caption["cell_type"] == "markdown"
        assert "remove-cell" in caption["metadata"]["tags"]
        text = "".join(caption["source"])
        assert text.startswith(":::{figure}\n") and f":label: {name}\n" in text and meta["caption"] in text, text


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_every_figure_is_referred_to_by_number(path):
    cells = _cells(path)
    names = [c["metadata"]["mystnb"]["figure"]["name"] for c in cells
             if c["cell_type"] == "code" and "figure" in c["metadata"].get("mystnb", {})]
    prose = "".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    missing = [n for n in names if f"{{numref}}`{n}`" not in prose]
    assert not missing, f"figures never referred to with {{numref}}: {missing}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_cell_defines_a_function_or_a_class(path):
    """Formulas live in the package: a chapter's cells, hidden or not, call, pick, format and glue."""
    from booktools.bench import hidden_cells

    assert hidden_cells([path])["defs"] == []


def test_there_is_the_rules_page():
    assert ROOT / "chapters" / "reference" / "rules.ipynb" in REFERENCE


@pytest.mark.parametrize("path", REFERENCE, ids=lambda p: p.name)
def test_reference_pages_show_no_glue_call(path):
    shown = [c for c in _cells(path) if c["cell_type"] == "code" and "glue" in "".join(c["source"])
             and "remove-cell" not in c["metadata"].get("tags", [])]
    assert not shown, "glue calls a reader would see: " + "; ".join("".join(c["source"])[:60] for c in shown)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_a_visible_code_cell_is_one_package_call(path):
    """The one rule for code a reader sees: a visible cell is a single call of the package (a table, an
    explorer), however many lines its arguments take; set-up, choices and plotting live in hidden cells."""
    shown = []
    for c in _cells(path):
        tags = c["metadata"].get("tags", [])
        if c["cell_type"] != "code" or "remove-cell" in tags or "remove-input" in tags:
            continue
        body = ast.parse("".join(c["source"])).body
        if len(body) != 1 or not isinstance(body[0], ast.Expr) or not isinstance(body[0].value, ast.Call):
            shown.append("".join(c["source"])[:70])
    assert not shown, "visible cells that are more than one package call: " + " | ".join(shown)
