"""Prose carries the argument, tables carry the numbers (issue 52): on the built pages, at most
``LIMIT_PER_100`` numbers per 100 words of prose and at most ``LIMIT_PER_SENTENCE`` in one sentence
(``booktools.density`` says what counts as prose and as a number; ``make bench`` prints every page).

The pages held to the limits are listed in ``CHECKED``. The pages still to be brought under them are in
``TO_DO``, each moved to ``CHECKED`` when its prose is fixed; the pages that are not prose (a list of works,
the API generated from the package's docstrings) are in ``NOT_PROSE`` with the reason. A page of the table of
contents in none of the three fails, so a new page is never left unmeasured.
"""

from __future__ import annotations

import pytest

from booktools import density
from booktools.layout import pages

CHECKED = [
    "intro.html",
    "chapters/front/roadmap.html",
    "chapters/front/notation.html",
    "chapters/01-three-budgets.html",
    "chapters/02-memory-budget.html",
    "chapters/03-recomputation.html",
    "chapters/04-tiling.html",
    "chapters/05-kv-cache.html",
    "chapters/06-quantization.html",
    "chapters/07-data-parallel.html",
    "chapters/09-pipeline-parallel.html",
    "chapters/appendix-cluster.html",
    "chapters/appendix-measured.html",
    "chapters/appendix-calibrated.html",
    "chapters/reference/glossary.html",
    "chapters/reference/cli.html",
    "chapters/08-tensor-parallel.html",
    "chapters/10-mixture-of-experts.html",
    "chapters/11-long-sequences.html",
    "chapters/12-serving.html",
    "chapters/13-serving-at-scale.html",
    "chapters/reference/rules.html",
]

# Pages not yet held to the limits: none since issue 52's second pass brought in chapters 6-13, appendix C
# and the rules page. A new page goes into CHECKED, or here with the reason, until it is rewritten.
TO_DO = [
]

NOT_PROSE = {
    "bibliography.html": "a list of works: authors, years, volumes and pages",
    "chapters/reference/api.html": "generated from the package's docstrings: signatures, defaults and examples",
}


# --- the measure, on pages small enough to count by hand ---------------------------------------------------

PAGE = """<html><body><nav>Chapter 1 of 13</nav><article class="bd-article">
<h1><span class="section-number">2. </span>The memory budget<a class="headerlink" href="#x">#</a></h1>
<p>An H100 holds 80 GB; Llama 3 needs 16.1 GB <span class="bibtex-citation">[<a href="../bibliography.html#id3">Meta, 2024</a>]</span>
at $m$ = <span class="pasted-text">2,048</span> tokens (<a href="#fig-a"><span class="std std-numref">Fig. 2.1</span></a>).
Decode has intensity <span class="math notranslate nohighlight">\\(m = 1\\)</span>, and training costs
<span class="math notranslate nohighlight">\\(6N\\)</span> FLOPs.</p>
<ul><li><p>one item with 3 numbers, 4 and 5.</p></li></ul>
<div class="cell docutils container"><div class="cell_input">glue("x", 123)</div><div class="cell_output">456 789</div></div>
<table><tr><td>1</td><td>2</td></tr></table>
<div class="math notranslate nohighlight">\\[ I = 2 \\cdot 3 \\]</div>
<figure><figcaption>Figure 1: 7 8 9</figcaption></figure>
<div class="dropdown admonition"><p class="admonition-title">Solution</p><p>10 11 12 13 14 15</p></div>
</article></body></html>"""


def test_the_measure_counts_the_prose_and_only_the_prose():
    blocks = density.prose_blocks(PAGE)
    # the heading without its number and link; the paragraph without its citation and figure number
    assert blocks[0] == "The memory budget"
    assert "Meta" not in blocks[1] and "2.1" not in blocks[1]
    assert blocks[2] == "one item with 3 numbers, 4 and 5."
    assert len(blocks) == 3, blocks  # no code, table, display math, figure or solution
    # 80, 3 (Llama 3), 16.1, 2,048 and the 1 of m = 1; not H100, 6N or the year of the citation
    assert density.numbers_in(blocks[1]) == ["80", "3", "16.1", "2,048", "1"]
    d = density.measure_html(PAGE, "x.html")
    assert (d.numbers, d.most_in_sentence) == (8, 4)
    assert d.words == sum(density.words_in(b) for b in blocks)
    assert d.sentence.startswith("An H100 holds 80 GB")


def test_the_main_path_leaves_out_what_is_marked_optional():
    page = """<article class="bd-article"><section id="a"><h2>Main line</h2><p>one two three</p>
    <div class="admonition note"><p class="admonition-title">Optional: a box</p><p>four five</p></div>
    <div class="admonition note"><p class="admonition-title">What to remember</p><p>six</p></div></section>
    <section id="b"><h2>Going further (optional)</h2><p>seven eight nine ten</p>
    <section id="c"><h3>A refinement</h3><p>eleven</p></section></section></article>"""
    # "Main line" (2), "one two three" (3), "What to remember" (3), "six" (1)
    assert density.main_path_words(page) == 9
    # and the optional ones: "Optional: a box" (3), "four five" (2), "Going further (optional)" (3), "seven
    # eight nine ten" (4), "A refinement" (2), "eleven" (1)
    assert density.measure_html(page).words == 9 + 3 + 2 + 3 + 4 + 2 + 1


def test_sentences_end_at_a_full_stop_not_inside_a_number():
    assert density.sentences("It takes 4.79 ms. Then 16.2 µs! Why? At 2,048.") == [
        "It takes 4.79 ms.", "Then 16.2 µs!", "Why?", "At 2,048."]


def test_a_page_passes_at_the_limits_and_fails_past_them():
    at = density.Density("p", words=100, numbers=5, most_in_sentence=4, sentence="")
    assert at.within()
    assert not density.Density("p", 100, 6, 4, "").within()
    assert not density.Density("p", 100, 5, 5, "").within()


def test_every_page_is_checked_to_do_or_not_prose():
    listed = set(CHECKED) | set(TO_DO) | set(NOT_PROSE)
    assert not set(CHECKED) & set(TO_DO)
    missing = [p for p in pages() if p not in listed]
    assert not missing, f"pages the density test does not list (add each to CHECKED): {missing}"
    assert not listed - set(pages()), f"listed pages the book does not have: {sorted(listed - set(pages()))}"


# Issue 52: chapter 1's main path, outside its optional section, exercises' statements included.
MAIN_PATH_WORDS = {"chapters/01-three-budgets.html": 3500}


# --- the book as built -------------------------------------------------------------------------------------

@pytest.mark.parametrize("page", CHECKED)
def test_prose_carries_few_numbers(site, page):
    d = density.measure(site, page)
    crowded = density.over_limit((site / page).read_text(encoding="utf-8"))
    assert d.within(), (
        f"{page}: {d.per_100:.1f} numbers per 100 words of prose (at most {density.LIMIT_PER_100:g}), "
        f"{d.most_in_sentence} in one sentence (at most {density.LIMIT_PER_SENTENCE}); move the numbers into a "
        "table or a figure and keep the verdict. Sentences over the limit:\n"
        + "\n".join(f"  ({n}) {s}" for n, s in crowded))


@pytest.mark.parametrize("page", sorted(MAIN_PATH_WORDS))
def test_the_main_path_stays_short(site, page):
    words = density.main_path_words((site / page).read_text(encoding="utf-8"))
    assert words <= MAIN_PATH_WORDS[page], (
        f"{page}: {words:,} words outside its optional sections (at most {MAIN_PATH_WORDS[page]:,}); move an "
        "aside into the section marked optional, or to the chapter that uses it")
