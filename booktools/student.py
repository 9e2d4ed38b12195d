"""The student edition: the built book with every exercise kept and every worked solution taken out.

``make book STUDENT=1`` builds the book as usual (``_build/html``) and then writes the student edition
beside it, ``_build/student/html``: the same site, file for file, except that on every page each
``Solution`` block (the ``:::{admonition} Solution`` / ``:class: dropdown`` that follows an exercise) is
cut out of the HTML, and the page's Exercises section says that this copy leaves the solutions out.
Working on the built pages rather than building a second time keeps the two editions identical in
everything else (numbers, figures, the explorers' frames, which the notebooks' execution makes) and costs
seconds.

The notebooks and pages a reader downloads from the edition (``_sources/``, what each page's download
button offers) lose their solutions too: every ``Solution`` block leaves the markdown, the note is added
after the Exercises heading, and the numbers glued only for the solutions leave the stored outputs and
the answers JupyterLab shows on opening (the code cells that compute them stay, as the package does: a
student who runs them is doing the exercise). One trace stays: the site's search index still lists a page
for a word that only its solutions use (the index holds words, not text, so nothing of a solution can be
read from it).

    python -m booktools.student [--site _build/html] [--out _build/student/html]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
from html.parser import HTMLParser
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTE = ("Student edition: the worked solutions are left out of this copy; your instructor has the edition "
        "that holds them.")
NOTE_HTML = f'<div class="admonition note student-edition"><p class="admonition-title">Note</p><p>{NOTE}</p></div>\n'


class _Finder(HTMLParser):
    """Where each admonition ``<div>`` starts and ends (character offsets), with its title, and where
    the Exercises section's heading ends."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.text = text
        self._lines = [0]
        for line in text.splitlines(keepends=True):
            self._lines.append(self._lines[-1] + len(line))
        self.blocks: list[list] = []  # [start, end, title]
        self._stack: list[list | None] = []  # one entry per open div: the block it opens, or None
        self._title: list | None = None
        self.exercises_heading_end: int | None = None
        self._in_exercises = False

    def _offset(self) -> int:
        line, col = self.getpos()
        return self._lines[line - 1] + col

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        classes = (attributes.get("class") or "").split()
        if tag == "div":
            block = [self._offset(), None, ""] if "admonition" in classes else None
            if block is not None:
                self.blocks.append(block)
            self._stack.append(block)
        elif tag == "p" and "admonition-title" in classes and self._stack and self._stack[-1] is not None:
            self._title = self._stack[-1]
        elif tag == "section" and attributes.get("id") == "exercises":
            self._in_exercises = True

    def handle_endtag(self, tag):
        if tag == "div" and self._stack:
            block = self._stack.pop()
            if block is not None:
                block[1] = self.text.index(">", self._offset()) + 1
        elif tag == "p":
            self._title = None
        elif tag == "h2" and self._in_exercises and self.exercises_heading_end is None:
            self.exercises_heading_end = self.text.index(">", self._offset()) + 1

    def handle_data(self, data):
        if self._title is not None:
            self._title[2] += data


def is_solution(title: str) -> bool:
    return title.strip().startswith("Solution")


def strip_solutions(text: str) -> tuple[str, int]:
    """``text`` (a page's HTML) without its solution blocks, and the note after the Exercises heading
    when it had any. Returns the new HTML and how many blocks were cut."""
    finder = _Finder(text)
    finder.feed(text)
    finder.close()
    cuts = [(start, end) for start, end, title in finder.blocks if end is not None and is_solution(title)]
    # a solution inside another solution goes with its parent
    outer = [c for c in cuts if not any(o[0] < c[0] and c[1] <= o[1] for o in cuts)]
    if not outer:
        return text, 0
    pieces, last = [], 0
    note_at = finder.exercises_heading_end
    for start, end in sorted(outer):
        if note_at is not None and last <= note_at <= start:
            pieces += [text[last:note_at], NOTE_HTML]
            last = note_at
            note_at = None
        pieces.append(text[last:start])
        last = end
    pieces.append(text[last:])
    return "".join(pieces), len(outer)


# the opening line of a MyST colon fence ("::: {admonition} Solution"), and a line that only closes one
_FENCE_OPEN = re.compile(r"^[ \t]*(:{3,})[ \t]*\{([\w:-]+)\}[ \t]*(.*)$")
_FENCE_CLOSE = re.compile(r"^[ \t]*(:{3,})[ \t]*$")
_EVAL = re.compile(r"\{eval\}`([^`]+)`")
EXERCISES_HEADING = re.compile(r"^#{2}[ \t]+Exercises[ \t]*$", flags=re.M)
NOTE_MD = f"\n\n:::{{note}}\n{NOTE}\n:::"


def strip_markdown_solutions(text: str) -> tuple[str, list[str]]:
    """``text`` (MyST markdown) without its ``{admonition} Solution`` blocks, and the blocks cut. A block
    ends at the first closing fence at least as long as its opening that no fence inside it opened."""
    lines = text.splitlines(keepends=True)
    kept, cut, i = [], [], 0
    while i < len(lines):
        opening = _FENCE_OPEN.match(lines[i])
        if not (opening and opening.group(2) == "admonition" and is_solution(opening.group(3))):
            kept.append(lines[i])
            i += 1
            continue
        stack, j = [len(opening.group(1))], i + 1
        while j < len(lines) and stack:
            inner, close = _FENCE_OPEN.match(lines[j]), _FENCE_CLOSE.match(lines[j])
            if close and len(close.group(1)) >= stack[-1]:
                stack.pop()
            elif inner:
                stack.append(len(inner.group(1)))
            j += 1
        cut.append("".join(lines[i:j]))
        i = j
        # the blank line that separated the block from what follows goes with it
        if kept and not kept[-1].strip() and i < len(lines) and not lines[i].strip():
            i += 1
    return "".join(kept), cut


def _source(cell) -> str:
    return cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])


def strip_notebook_solutions(text: str) -> tuple[str, int]:
    """``text`` (a notebook's JSON) without its solutions: the Solution blocks out of its markdown cells,
    the note after its Exercises heading, and the numbers glued for the solutions alone out of the stored
    outputs and of the answers JupyterLab shows (``user_expressions``). Returns the JSON and the blocks cut."""
    nb = json.loads(text)
    markdown = [cell for cell in nb["cells"] if cell["cell_type"] == "markdown"]
    cut_blocks: list[str] = []
    for cell in markdown:
        source, cut = strip_markdown_solutions(_source(cell))
        if cut:
            cut_blocks += cut
            cell["source"] = source.splitlines(keepends=True)
    if not cut_blocks:
        return text, 0
    heading = next((cell for cell in markdown if EXERCISES_HEADING.search(_source(cell))), None)
    if heading is not None:
        source = EXERCISES_HEADING.sub(lambda m: m.group(0) + NOTE_MD, _source(heading), count=1)
        heading["source"] = source.splitlines(keepends=True)
    for cell in markdown:  # the answers JupyterLab shows: only for the roles the cell still has
        if "user_expressions" in cell.get("metadata", {}):
            used = set(_EVAL.findall(_source(cell)))
            cell["metadata"]["user_expressions"] = [e for e in cell["metadata"]["user_expressions"]
                                                    if e.get("expression") in used]
    still_used = {name for cell in markdown for name in _EVAL.findall(_source(cell))}
    only_solutions = {name for block in cut_blocks for name in _EVAL.findall(block)} - still_used
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            cell["outputs"] = [o for o in cell.get("outputs", [])
                               if o.get("metadata", {}).get("scrapbook", {}).get("name") not in only_solutions]
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n", len(cut_blocks)


def student_edition(site: Path, out: Path) -> dict[str, int]:
    """Copy ``site`` to ``out`` with the solutions cut out of every page and of every downloadable
    notebook or markdown source (``_sources/``); returns the cuts per file."""
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(site, out)
    cut = {}
    for page in sorted(out.rglob("*.html")):
        text, n = strip_solutions(page.read_text(encoding="utf-8"))
        if n:
            page.write_text(text, encoding="utf-8")
            cut[str(page.relative_to(out))] = n
    for source in sorted((out / "_sources").rglob("*")) if (out / "_sources").is_dir() else ():
        if source.suffix == ".ipynb":
            text, n = strip_notebook_solutions(source.read_text(encoding="utf-8"))
        elif source.suffix in (".md", ".txt"):
            text, blocks = strip_markdown_solutions(source.read_text(encoding="utf-8"))
            n = len(blocks)
        else:
            continue
        if n:
            source.write_text(text, encoding="utf-8")
            cut[str(source.relative_to(out))] = n
    return cut


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m booktools.student", description=__doc__.split("\n\n")[0])
    parser.add_argument("--site", type=Path, default=ROOT / "_build" / "html", help="the built book")
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "student" / "html", help="the student edition")
    args = parser.parse_args(argv)
    if not (args.site / "index.html").is_file():
        print(f"{args.site} holds no built book: run `make book` first", file=sys.stderr)
        return 1
    cut = student_edition(args.site, args.out)
    pages = {k: n for k, n in cut.items() if k.endswith(".html")}
    sources = {k: n for k, n in cut.items() if not k.endswith(".html")}
    print(f"{args.out}: {sum(pages.values())} solutions taken out of {len(pages)} pages and "
          f"{sum(sources.values())} out of the {len(sources)} notebooks they offer for download; "
          f"open {args.out / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
