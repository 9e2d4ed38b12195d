"""The student edition (``make book STUDENT=1``): every exercise of the full edition, no solution.

It is made here as `make book STUDENT=1` makes it (booktools/student.py, from the book the other tests
build), and compared page by page with the full edition."""

from html.parser import HTMLParser
from pathlib import Path

import pytest

from booktools.student import NOTE, student_edition

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = sorted(p.stem for p in (ROOT / "chapters").glob("*.ipynb"))


class _Blocks(HTMLParser):
    """The text of each solution block (an admonition whose title is 'Solution...') and the exercises'
    numbered openings (``<strong>3.`` in the Exercises section)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.blocks, self.exercises, self._depth, self._in_strong = [], [], 0, False
        self._exercises_started = False

    @property
    def solutions(self) -> list[str]:
        return [b for b in self.blocks if b.strip().startswith("Solution")]

    def handle_starttag(self, tag, attrs):
        classes = (dict(attrs).get("class") or "").split()
        if self._depth:
            self._depth += tag == "div"
        elif tag == "div" and "admonition" in classes:
            self._depth = 1
            self.blocks.append("")
        if tag == "section" and dict(attrs).get("id") == "exercises":
            self._exercises_started = True
        self._in_strong = tag == "strong"

    def handle_endtag(self, tag):
        if self._depth and tag == "div":
            self._depth -= 1
        if tag == "strong":
            self._in_strong = False

    def handle_data(self, data):
        if self._depth:
            self.blocks[-1] += data
        elif self._in_strong and self._exercises_started and data[:1].isdigit() and "." in data[:4]:
            self.exercises.append(data.split(".")[0])


def _read(page: Path) -> _Blocks:
    blocks = _Blocks()
    blocks.feed(page.read_text(encoding="utf-8"))
    return blocks


@pytest.fixture(scope="module")
def student_site(site, tmp_path_factory):
    out = tmp_path_factory.mktemp("student") / "html"
    student_edition(site, out)
    return out


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_the_student_edition_keeps_every_exercise_and_no_solution(site, student_site, chapter):
    full = _read(site / "chapters" / f"{chapter}.html")
    kept = _read(student_site / "chapters" / f"{chapter}.html")
    assert len(full.exercises) >= 6 and len(full.solutions) >= 6  # the full edition has both
    assert kept.exercises == full.exercises
    assert kept.solutions == []
    text = (student_site / "chapters" / f"{chapter}.html").read_text(encoding="utf-8")
    for solution in full.solutions:  # not a sentence of any solution survives anywhere on the page
        sentence = max(solution.split(". "), key=len).strip()
        assert sentence not in text, sentence[:80]
    assert text.count(NOTE) == 1


def _notebook_text(path: Path) -> str:
    """A notebook as a reader's editor would search it: every cell's source, its stored outputs and the
    answers JupyterLab shows, as one text."""
    import json

    nb = json.loads(path.read_text(encoding="utf-8"))
    parts = []
    for cell in nb["cells"]:
        parts.append("".join(cell["source"]))
        parts.append(json.dumps(cell.get("outputs", []), ensure_ascii=False))
        parts.append(json.dumps(cell.get("metadata", {}), ensure_ascii=False))
    return "\n".join(parts)


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_the_notebook_a_student_downloads_has_no_solution(site, student_site, chapter):
    """The page's download button offers _sources/chapters/NAME.ipynb: in the student edition it keeps
    every exercise, is a valid notebook, and holds no solution block, no sentence of one, and no number
    glued for the solutions alone (in the outputs or in the answers JupyterLab shows on opening)."""
    import json
    import re

    import nbformat

    link = f'href="../_sources/chapters/{chapter}.ipynb"'
    assert link in (student_site / "chapters" / f"{chapter}.html").read_text(encoding="utf-8")
    full_path = site / "_sources" / "chapters" / f"{chapter}.ipynb"
    kept_path = student_site / "_sources" / "chapters" / f"{chapter}.ipynb"
    full, kept = full_path.read_text(encoding="utf-8"), kept_path.read_text(encoding="utf-8")
    nbformat.validate(nbformat.reads(kept, as_version=4))
    assert full.count("{admonition} Solution") >= 6
    assert kept.count("{admonition} Solution") == 0
    assert re.findall(r"\*\*(\d+)\.", kept) == re.findall(r"\*\*(\d+)\.", full)  # every exercise
    assert kept.count(NOTE) == 1
    # nothing of a solution's prose: each block's longest sentence is gone from the whole notebook
    blocks = re.findall(r":::\{admonition\} Solution\n(.*?)\n:::", "".join(
        "".join(c["source"]) for c in json.loads(full)["cells"] if c["cell_type"] == "markdown"), flags=re.S)
    assert len(blocks) == full.count("{admonition} Solution")
    text = _notebook_text(kept_path)
    for block in blocks:
        sentence = max(block.replace("\n", " ").split(". "), key=len).strip()
        assert sentence not in text, sentence[:80]
    # the numbers glued for the solutions alone are not stored
    prose = " ".join("".join(c["source"]) for c in json.loads(kept)["cells"] if c["cell_type"] == "markdown")
    used = set(re.findall(r"\{eval\}`([^`]+)`", prose))
    stored = {o["metadata"]["scrapbook"]["name"] for c in json.loads(kept)["cells"] if c["cell_type"] == "code"
              for o in c.get("outputs", []) if "scrapbook" in o.get("metadata", {})}
    assert stored <= used | set(re.findall(r"\{eval\}`([^`]+)`", " ".join(
        json.dumps(c.get("metadata", {})) for c in json.loads(kept)["cells"]))), stored - used
    answered = {e["expression"] for c in json.loads(kept)["cells"] if c["cell_type"] == "markdown"
                for e in c.get("metadata", {}).get("user_expressions", [])}
    assert answered <= used, answered - used


def test_no_file_of_the_student_edition_holds_a_solution(site, student_site):
    """Every text file the student edition serves (pages, downloads, scripts, the search index aside,
    which holds words, not sentences) is searched for the solutions' sentences: none is found."""
    sentences = set()
    for chapter in CHAPTERS:
        for solution in _read(site / "chapters" / f"{chapter}.html").solutions:
            sentences.add(max(solution.split(". "), key=len).strip())
    assert len(sentences) >= 6 * len(CHAPTERS)
    found = {}
    for path in student_site.rglob("*"):
        if path.is_file() and path.suffix in (".html", ".ipynb", ".md", ".txt", ".js", ".json") \
                and path.name != "searchindex.js":
            text = path.read_text(encoding="utf-8", errors="replace")
            hits = [s[:60] for s in sentences if s in text]
            if hits:
                found[str(path.relative_to(student_site))] = hits
    assert found == {}
