"""Every "chapter N" a reader follows lands on a chapter that treats the thing (issue 52: chapter 10 once sent
the reader to chapter 2 for the 6N count of training FLOPs, which chapter 1 derives).

Where a thing is treated is written once, in the glossary: each entry ends with the chapters (and
appendices) that introduce or price it ("Chapters 2 and 3."). ``HOMES`` adds the few things the text cites
that are not glossary terms. A reference is a parenthesis that names chapters, "(chapter 8)" or
"(..., chapters 10 and 11)", or a possessive, "chapter 7's FSDP". Its subject is the clause it closes (back
to the last comma, colon, semicolon or full stop) with the parenthesis's own words, or the words after the
possessive; every thing with a home named there must between them cover every chapter cited. A clause that
names no thing with a home is not checked, and neither are the terms every chapter uses (``EVERYWHERE``).

The markdown of the pages in ``CHECKED`` is read from the sources (no build needed); the pages still to be
brought in are in ``TO_DO`` (the second pass of issue 52), and a page of the table of contents in neither
fails, so that a new page is never left unread.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from booktools.layout import pages

ROOT = Path(__file__).resolve().parents[2]

CHECKED = [
    "intro.md",
    "chapters/front/roadmap.md",
    "chapters/front/notation.md",
    "chapters/01-three-budgets.ipynb",
    "chapters/02-memory-budget.ipynb",
    "chapters/03-recomputation.ipynb",
    "chapters/04-tiling.ipynb",
    "chapters/05-kv-cache.ipynb",
    "chapters/06-quantization.ipynb",
    "chapters/07-data-parallel.ipynb",
    "chapters/09-pipeline-parallel.ipynb",
    "chapters/appendix-cluster.ipynb",
    "chapters/appendix-measured.ipynb",
    "chapters/appendix-calibrated.ipynb",
    "chapters/08-tensor-parallel.ipynb",
    "chapters/10-mixture-of-experts.ipynb",
    "chapters/11-long-sequences.ipynb",
    "chapters/12-serving.ipynb",
    "chapters/13-serving-at-scale.ipynb",
    "chapters/reference/rules.ipynb",
    "chapters/reference/glossary.md",
    "chapters/reference/cli.md",
    "chapters/reference/api.md",
    "bibliography.md",
]

TO_DO = [
]

# Things the text cites that are not glossary terms: a name, the pattern that finds it, its chapters.
HOMES = {
    "6N": (r"\$6N\$|\b6N\b|six FLOPs per (?:active )?parameter", {"1"}),
    "8N": (r"\$8N\$", {"1", "3"}),
}

# Glossary terms every chapter leans on: a clause that names one says nothing about where a reference points.
EVERYWHERE = {"decode", "prefill", "activations", "all-reduce", "roofline", "collective", "KV cache", "HBM",
              "NVLink", "arithmetic intensity", "memory-bound", "compute-bound"}

CHAPTERS = r"[Cc]hapters? (\d+)((?:(?:, | and | or | to )\d+)*)"


def glossary_homes(text: str) -> dict[str, set[str]]:
    """``{term: chapters}`` from the glossary's source: the chapters (numbers) and appendices (letters)
    named in the last sentence of each entry, when it begins "Chapter", "Chapters", "Appendix" or
    "Appendices"."""
    body = text.split("```{glossary}", 1)[1].split("```", 1)[0]
    homes = {}
    for entry in re.split(r"\n(?=\S)", body.strip()):
        name, _, rest = entry.partition("\n")
        definition = " ".join(rest.split())
        last = re.search(r"((?:Chapters?|Appendix|Appendices)\b[^.]*(?:\([^)]*\)[^.]*)*)\.\s*$", definition)
        if last:
            where = set(re.findall(r"\b(\d+)\b", last.group(1))) | set(re.findall(r"\b([ABC])\b", last.group(1)))
            homes[name.strip()] = where
    return homes


def units(source: str) -> list[str]:
    """The markdown as units of running text: paragraphs with their lines joined, and each table row or
    heading on its own (a parenthesis never spans two of them)."""
    out = []
    for block in re.split(r"\n\s*\n", source):
        lines = block.split("\n")
        if any(line.lstrip().startswith(("|", "#")) for line in lines):
            out += [line for line in lines if line.strip()]
        else:
            out.append(" ".join(lines))
    return out


def plain(text: str) -> str:
    """Roles reduced to their words: a glossary link to its text and term, other roles to a placeholder."""
    text = re.sub(r"\{term\}`([^`<]*?)\s*<([^`>]*)>`", r"\1 \2", text)
    text = re.sub(r"\{term\}`([^`]*)`", r"\1", text)
    text = re.sub(r"\{(?:doc|numref|cite|eval|ref)\}`[^`]*`", "REF", text)
    return " ".join(text.split())


def patterns(homes: dict[str, set[str]]) -> dict[str, tuple[re.Pattern, set[str]]]:
    out = {}
    for term, where in homes.items():
        if term in EVERYWHERE or not where:
            continue
        words = r"[ -]".join(re.escape(w) for w in term.split())
        out[term] = (re.compile(rf"(?<![\w-]){words}s?(?![\w-])", 0 if term != term.lower() else re.I), where)
    for name, (pattern, where) in HOMES.items():
        out[name] = (re.compile(pattern), where)
    return out


def references(unit: str, things: dict[str, tuple[re.Pattern, set[str]]]) -> list[tuple[set[str], set[str], str]]:
    """``(chapters cited, chapters of the things named, the subject)`` for each reference in ``unit`` whose
    subject names a thing with a home."""
    text, found = plain(unit), []
    subjects = []
    for m in re.finditer(r"\(([^()]*?)\b" + CHAPTERS + r"[^()]*\)", text):
        clause = re.split(r"[.;:!?,]\s|[()]", text[:m.start()])[-1]
        subjects.append(({m.group(2)} | set(re.findall(r"\d+", m.group(3))), f"{clause.strip()} ({m.group(1)}"))
    for m in re.finditer(CHAPTERS + r"'s ([^.,;:()]{0,60})", text):
        subjects.append(({m.group(1)} | set(re.findall(r"\d+", m.group(2))), m.group(0)))
    for cited, subject in subjects:
        named = [where for pattern, where in things.values() if pattern.search(subject)]
        if named:
            found.append((cited, set().union(*named), subject.strip()))
    return found


def markdown_of(path: Path) -> list[str]:
    if path.suffix == ".ipynb":
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        return ["".join(c["source"]) for c in cells if c["cell_type"] == "markdown"]
    return [path.read_text(encoding="utf-8")]


THINGS = patterns(glossary_homes((ROOT / "chapters" / "reference" / "glossary.md").read_text(encoding="utf-8")))


def test_the_glossary_gives_homes_and_the_reader_finds_a_wrong_pointer():
    homes = glossary_homes((ROOT / "chapters" / "reference" / "glossary.md").read_text(encoding="utf-8"))
    assert homes["flash attention"] == {"4"} and homes["recomputation"] == {"2", "3"}
    assert homes["kernel rule"] == {"B"} and len(homes) > 50
    wrong = "Training costs six FLOPs per active parameter per token (chapter 2), and more."
    assert references(wrong, THINGS) == [({"2"}, {"1"}, "Training costs six FLOPs per active parameter per token (")]
    assert references(wrong.replace("chapter 2", "chapter 1"), THINGS)[0][:2] == ({"1"}, {"1"})
    right = "paged attention (chapter 5), then ({term}`recomputation`, chapter 3) and chapter 4's flash attention."
    assert [(c, w) for c, w, _ in references(right, THINGS)] == [({"5"}, {"5"}), ({"3"}, {"2", "3"}), ({"4"}, {"4"})]
    # a clause that names nothing with a home, or only a term every chapter uses, is not read
    assert references("the all-reduces of chapter 8 (chapter 8), and so on (chapter 12)", THINGS) == []


def test_every_page_is_checked_or_to_do():
    sources = {p.removesuffix(".html") for p in pages()}
    listed = {str(Path(p).with_suffix("")) for p in CHECKED + TO_DO}
    assert not set(CHECKED) & set(TO_DO)
    assert sources == listed, f"not listed: {sorted(sources - listed)}; not pages: {sorted(listed - sources)}"


@pytest.mark.parametrize("page", CHECKED)
def test_a_chapter_reference_points_where_the_thing_is_treated(page):
    wrong = []
    for source in markdown_of(ROOT / page):
        for unit in units(source):
            for cited, where, subject in references(unit, THINGS):
                if not cited <= where:
                    wrong.append(f"chapter {', '.join(sorted(cited - where))} cited for '{subject[-100:]}', "
                                 f"treated in {', '.join(sorted(where))}")
    assert not wrong, (f"{page}: a 'chapter N' that does not treat what it is cited for (fix the reference, or "
                       "the glossary entry's chapters if the chapter does treat it):\n  " + "\n  ".join(wrong))
