"""How many numbers a page's prose asks a reader to carry: numbers per 100 words, and the most in one sentence.

Measured on the built page (``_build/html``), because that is where a glued ``{eval}`name``` has become
'16.1 GB'. What counts as *prose* is what a reader reads as running text: the article's paragraphs, list
items, headings, admonitions (the "What to remember" notes, the optional boxes, the exercises' statements)
and figure captions. Left out, as issue 52 defines the measure:

- code cells, with everything they print (tables, figures and explorers drawn by the package);
- tables written in the text;
- display math (an inline formula stays, as one word: a symbol, or a number where it states one, as $2048$ or $m = 1$);
- citations (an author-year citation carries a year that no reader adds up) and cross-references to
  figures and equations ("Fig. 1.3");
- the worked solutions, hidden behind their dropdowns;
- figures, captions included (most are a code cell's output already);
- the navigation a page carries: section numbers, header links, and the numbers of the figures and
  equations the text refers to ("Fig. 1.3"), which the numbered table of contents adds.

A *number* is a run of digits, with thousands commas and a decimal part ('2,048', '0.34', '16'), not
glued to a letter: 'H100', 'fp8', '8B' and 'GB' are words; '3' in 'Llama 3' and '7' in 'chapter 7' are
numbers, as the issue counted them (a reader still has to hold them apart from the quantities).

A sentence ends at '.', '!' or '?' followed by a space, or at the end of its paragraph or list item.

``python -m booktools.density --site _build/html`` prints every page of the table of contents;
``make bench`` prints the same table; ``tests/book/test_density.py`` holds the pages it lists to the
book's limits (``LIMIT_PER_100`` and ``LIMIT_PER_SENTENCE``).
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from bs4 import BeautifulSoup, NavigableString

ROOT = Path(__file__).resolve().parent.parent

LIMIT_PER_100 = 5.0  # numbers per 100 words of prose, at most (DESIGN.md: "aim at 4-5")
LIMIT_PER_SENTENCE = 4  # numbers in one sentence, at most

# What a page shows that is not prose (CSS selectors, for BeautifulSoup): code cells and their outputs,
# tables, display math, the solutions' dropdowns, citations, and the navigation inside headings.
LEFT_OUT = (
    "div.cell",  # a code cell: its source and everything it printed or drew
    "table",
    "figure",
    "div.math",  # display math ($$ ... $$, amsmath environments)
    "div.dropdown",  # a worked solution (sphinx-togglebutton's dropdown admonition) ...
    "details",  # ... and the same when a page folds it into <details>
    "a.headerlink",
    "span.section-number",
    "div.toctree-wrapper",
    "nav",
    "script",
    "style",
)

# A citation, author-year: the parenthesis or the name-and-year that sphinxcontrib-bibtex writes around
# the links into the bibliography; and a numbered reference to a figure, table or equation.
CITATION_LINK = re.compile(r"bibliography\.html#")
NUMREF = ("std-numref", "eqref")

NUMBER = re.compile(r"(?<![\w.])[-\u2212]?\d[\d,]*(?:\.\d+)?(?![A-Za-z_\d])")

# An inline formula that states a quantity: a number, or a symbol set to one ($2048$, $m = 1$, $n = k = 4096$).
INLINE_QUANTITY = re.compile(r"(?:[^=]+=\s*)*([{}\d.,\s]*\d[{}\d.,\s]*)")
SENTENCE_END = re.compile(r"(?<=[.!?])[\"'”’)]*\s+")

BLOCKS = ("p", "li", "dt", "dd", "h1", "h2", "h3", "h4", "h5", "h6", "figcaption", "caption",
          "p.admonition-title", "blockquote")


@dataclass(frozen=True)
class Density:
    """One page's prose: its words, its numbers, and the sentence carrying the most numbers."""

    page: str
    words: int
    numbers: int
    most_in_sentence: int
    sentence: str

    @property
    def per_100(self) -> float:
        """Numbers per 100 words of prose (0 for a page with no prose)."""
        return 100 * self.numbers / self.words if self.words else 0.0

    def within(self, per_100: float = LIMIT_PER_100, per_sentence: int = LIMIT_PER_SENTENCE) -> bool:
        return round(self.per_100, 1) <= per_100 and self.most_in_sentence <= per_sentence


def _strip(soup: BeautifulSoup) -> None:
    """Remove from ``soup``, in place, everything the measure leaves out, and flatten inline math."""
    for selector in LEFT_OUT:
        for el in soup.select(selector):
            el.decompose()
    for el in soup.select("span.bibtex-citation"):  # "[Kaplan et al., 2020]", the brackets and links in one span
        el.replace_with(NavigableString(" "))
    for link in soup.find_all("a", href=CITATION_LINK):  # any other link into the bibliography
        link.replace_with(NavigableString(" "))
    for cls in NUMREF:
        for el in soup.select(f"span.{cls}"):
            if el.parent is not None:
                (el.find_parent("a") or el).replace_with(NavigableString(" figure "))
    for el in soup.select("span.math"):
        tex = el.get_text().strip().removeprefix("\\(").removesuffix("\\)")
        quantity = INLINE_QUANTITY.fullmatch(tex.strip())
        el.replace_with(NavigableString(f" {quantity.group(1).strip('{} ')} " if quantity else " x "))


OPTIONAL = re.compile(r"\boptional\b", flags=re.I)


def _optional(el) -> bool:
    """A section whose heading says it is optional ("Going further (optional)"), or an admonition whose
    title does ("Optional: ...")."""
    if el.name == "section":
        heading = el.find(["h1", "h2", "h3", "h4", "h5", "h6"], recursive=False)
        return bool(heading and OPTIONAL.search(heading.get_text()))
    title = el.find("p", class_="admonition-title", recursive=False)
    return bool(title and OPTIONAL.search(title.get_text()))


def prose_blocks(html: str, *, optional: bool = True) -> list[str]:
    """The text of every block of prose of a built page, in order: paragraphs, list items, headings,
    admonition titles and captions, each as one string with its whitespace collapsed. With
    ``optional=False``, only the page's main path: sections and admonitions marked optional left out."""
    soup = BeautifulSoup(html, "html.parser")
    article = soup.select_one("article.bd-article") or soup.select_one("main") or soup
    _strip(article)
    if not optional:
        for el in [e for e in article.select("section, div.admonition") if _optional(e)]:
            el.decompose()
    blocks = []
    for el in article.find_all(BLOCKS):
        # the text of this block alone: a list item's nested list or paragraphs are blocks of their own
        parts = []
        for node in el.descendants:
            if isinstance(node, NavigableString):
                inner = node.find_parent(BLOCKS)
                if inner is el:
                    parts.append(str(node))
        text = re.sub(r"\s+", " ", "".join(parts)).strip()
        if text:
            blocks.append(text)
    return blocks


def numbers_in(text: str) -> list[str]:
    """The numbers in ``text`` (module docstring)."""
    return NUMBER.findall(text)


def words_in(text: str) -> int:
    return sum(1 for w in text.split() if re.search(r"\w", w))


def sentences(block: str) -> list[str]:
    return [s for s in SENTENCE_END.split(block) if s.strip()]


def measure_html(html: str, page: str = "") -> Density:
    words = numbers = 0
    most, worst = 0, ""
    for block in prose_blocks(html):
        words += words_in(block)
        numbers += len(numbers_in(block))
        for s in sentences(block):
            n = len(numbers_in(s))
            if n > most:
                most, worst = n, s
    return Density(page, words, numbers, most, worst)


def main_path_words(html: str) -> int:
    """Words of a page's prose outside its optional sections and boxes (issue 52: chapter 1's main path)."""
    return sum(words_in(b) for b in prose_blocks(html, optional=False))


def over_limit(html: str, limit: int = LIMIT_PER_SENTENCE) -> list[tuple[int, str]]:
    """Every sentence of the page's prose holding more than ``limit`` numbers, with its count."""
    found = []
    for block in prose_blocks(html):
        for s in sentences(block):
            n = len(numbers_in(s))
            if n > limit:
                found.append((n, s))
    return found


def measure(site: Path, page: str) -> Density:
    """The density of ``page`` (a path relative to ``site``, 'chapters/01-three-budgets.html')."""
    return measure_html((Path(site) / page).read_text(encoding="utf-8"), page)


def pages(root: Path = ROOT) -> list[str]:
    """Every page of the table of contents, as built-site paths, in the book's order."""
    from booktools.layout import pages as toc_pages

    return toc_pages(root)


def table(rows: list[Density]) -> str:
    lines = [f"{'page':<44} {'words':>6} {'numbers':>7} {'per 100':>7} {'in one sentence':>15}"]
    for d in rows:
        mark = "" if d.within() else "  over"
        lines.append(f"{d.page:<44} {d.words:>6,} {d.numbers:>7,} {d.per_100:>7.1f} {d.most_in_sentence:>15}{mark}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m booktools.density", description=__doc__.split("\n\n")[0])
    parser.add_argument("--site", type=Path, default=ROOT / "_build" / "html", help="the built book (default: %(default)s)")
    parser.add_argument("--sentences", action="store_true",
                        help=f"print every sentence with more than {LIMIT_PER_SENTENCE} numbers, page by page")
    parser.add_argument("page", nargs="*", help="pages to measure (default: every page of the table of contents)")
    args = parser.parse_args(argv)
    if not (args.site / "index.html").is_file():
        print(f"no built book at {args.site}: run `make book` first", file=sys.stderr)
        return 2
    rows = [measure(args.site, p) for p in (args.page or pages())]
    print(table(rows))
    if args.sentences:
        for page in args.page or pages():
            crowded = over_limit((args.site / page).read_text(encoding="utf-8"))
            for n, s in crowded:
                print(f"\n{page} ({n}): {s}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
