"""``make pdf`` prints a book (booktools/pdf.py): a title page, a contents with chapter numbers and the
pages they start on, page numbers that run on through the book, links that stay inside the PDF for
everything it holds and go to the web edition for the rest, never to a file of the machine that printed it.

To keep the run short the test prints four pages of the book (the introduction, chapter 1 with its
explorer, figures, equations, citations and glossary links, the glossary and the bibliography) as
`make pdf` prints all of them, with a web address given as `make pdf URL=...` gives it. Skipped without
a browser, as the other browser tests are (tests/conftest.py).
"""

import re
from pathlib import Path

import pytest
from pypdf import PdfReader

from booktools import pdf
from booktools.edition import edition

ROOT = Path(__file__).resolve().parents[2]
PAGES = ["intro", "chapters/01-three-budgets", "chapters/reference/glossary", "bibliography"]
URL = "https://books.example.org/three-budgets/"


@pytest.fixture(scope="module")
def printed(chromium, site, tmp_path_factory):
    out = tmp_path_factory.mktemp("pdf")
    made = pdf.print_book(site, out, chromium, url=URL, only=PAGES, api=False)
    reader = PdfReader(str(made["book"]))
    texts = [page.extract_text() or "" for page in reader.pages]
    return made, reader, texts


def test_the_title_page_names_the_book_its_edition_version_licences_and_address(printed, site):
    _, reader, texts = printed
    book = edition(ROOT)
    title = " ".join(texts[0].split())
    for expected in ("The Three Budgets", "Full edition, with the worked solutions",
                     f"Version {book.version} of {book.date}", "CC BY 4.0", "MIT", URL, "How to cite"):
        assert expected in title, expected
    built = pdf.built_from(site)  # the commit of the pages printed, as their footer says
    assert built and f"printed from commit {built}" in title
    assert not re.search(r"·\s*\d+\s*$", texts[0])  # the title page carries no page number
    assert reader.metadata.title.startswith("The Three Budgets") and book.version in reader.metadata.subject


def test_the_student_edition_says_so_on_its_title_page():
    page = pdf._title_page(edition(ROOT), True, URL)
    assert "Student edition" in page and "without the worked solutions" in page


def test_page_numbers_run_on_from_the_contents_to_the_last_page(printed):
    _, reader, texts = printed
    numbers = [re.search(r"·\s*(\d+)\s*$", t.strip()) for t in texts[1:]]
    assert all(numbers), [i for i, n in enumerate(numbers, 1) if not n]
    assert [int(n.group(1)) for n in numbers] == list(range(1, len(reader.pages)))
    labels = [reader.page_labels[i] for i in range(len(reader.pages))]
    assert labels[1:] == [str(i) for i in range(1, len(reader.pages))]  # the viewer shows the printed numbers


def test_the_contents_lists_every_page_with_its_number_and_where_it_starts(printed, site):
    made, _, texts = printed
    contents = " ".join(texts[1].split())
    assert contents.startswith("Contents")
    starts = {name: i for name, i in pdf.destinations(made["book"]).items() if name.startswith("p-")}
    shown = [p for p in pdf.book_pages().pages if p.name in PAGES]
    assert sorted(starts) == sorted(p.anchor for p in shown)
    for page in shown:
        start = starts[page.anchor]  # the printed number: the title page is the PDF's first and unnumbered
        assert texts[start].strip().endswith(f"· {start}"), page.name
        title = pdf.title_of((site / f"{page.name}.html").read_text(encoding="utf-8"), page.name)
        number = f"{page.number} " if page.number else ""
        assert re.search(rf"{re.escape(number + title)} {start}(\s|$)", contents), (page.name, contents)
    assert "chapter 1" in texts[starts["p-chapters-01-three-budgets"]].lower()


def test_links_stay_inside_for_the_book_and_go_to_the_web_for_the_rest(printed):
    made, _, texts = printed
    found = pdf.links(made["book"])
    destinations = pdf.destinations(made["book"])
    assert len(found["inside"]) >= 50  # citations, glossary terms, cross references, the contents
    assert [name for name in found["inside"] if name not in destinations] == []
    assert [u for u in found["outside"] if not re.match(r"(https?|mailto):", u)] == []  # no file://
    assert any("bibliography--" in name for name in found["inside"])  # a citation lands in the bibliography
    assert any("glossary--term-" in name for name in found["inside"])  # a term lands on its definition
    # pages the PDF does not hold (here chapter 2, in the full book the API reference) are on the web edition
    assert any(u.startswith(URL + "chapters/02-memory-budget.html") for u in found["outside"])
    squashed = re.sub(r"\s+", "", "".join(texts))  # the address may break across lines
    assert f"isat{URL}chapters/01-three-budgets.html" in squashed


def test_each_chapter_pdf_keeps_its_own_links_and_sends_the_others_to_the_web(printed):
    made, reader, _ = printed
    chapter = made["chapters/01-three-budgets"]
    found = pdf.links(chapter)
    destinations = pdf.destinations(chapter)
    assert found["inside"] and [name for name in found["inside"] if name not in destinations] == []
    assert [u for u in found["outside"] if not re.match(r"(https?|mailto):", u)] == []
    assert any(u.startswith(URL + "bibliography.html#") for u in found["outside"])
