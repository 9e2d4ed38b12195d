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
