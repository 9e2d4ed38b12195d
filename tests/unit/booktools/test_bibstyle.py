"""The bibliography's names: a list that ends in ``and others`` reads "et al.", as the text's citations do."""

from pybtex.database import parse_string

from booktools.bibstyle import style_for

BIB = r"""
@misc{herd, author = {Grattafiori, Aaron and others}, title = {Models in a herd}, year = {2024}}
@misc{two, author = {Jacobs, Sam Ade and He, Yuxiong}, title = {DeepSpeed Ulysses}, year = {2023}}
@misc{some, author = {Jiang, Albert Q. and Sablayrolles, Alexandre and others}, title = {Mistral 7B}, year = {2023}}
"""


def _texts():
    style = style_for("alpha")()
    entries = parse_string(BIB, "bibtex").entries
    return {e.key: e.text.render_as("text") for e in style.format_entries(entries.values())}


def test_a_list_ending_in_others_reads_et_al_and_others_are_unchanged():
    texts = _texts()
    assert texts["herd"].startswith("Aaron Grattafiori et al. Models in a herd.")
    assert texts["some"].startswith("Albert Q. Jiang, Alexandre Sablayrolles et al.")
    assert texts["two"].startswith("Sam Ade Jacobs and Yuxiong He.")
    assert not any("others" in t for t in texts.values())


def test_each_bibliography_entry_is_an_item_of_its_list():
    from booktools.bibstyle import list_items

    page = ('<div role="list" class="citation-list">\n<div class="citation" id="id9" role="doc-biblioentry">'
            '<span class="label">Meta24</span></div>\n<div class="citation" id="id10" role="doc-biblioentry">x</div></div>')
    fixed = list_items(page)
    assert fixed.count('role="listitem"') == 2 and "doc-biblioentry" not in fixed
    assert fixed.replace('role="listitem"', 'role="doc-biblioentry"') == page  # nothing else touched
