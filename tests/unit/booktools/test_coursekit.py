"""The course kit's pieces that need no build: the figure index's parts and the student edition's filter."""

import json

from booktools import figindex, student


def test_saved_files_maps_each_figure_cell_to_the_name_plot_save_gives_it(tmp_path):
    nb = {"cells": [
        {"cell_type": "code", "metadata": {"mystnb": {"figure": {"name": "fig-roofs"}}},
         "source": ["fig = plot.roofline_chart(h100)\n", 'plot.save(fig, "ch01-roofs")']},
        {"cell_type": "code", "metadata": {"mystnb": {"figure": {"name": "fig-live"}}}, "source": ["plot.roofline_chart(h)"]},
        {"cell_type": "code", "metadata": {}, "source": ['plot.save(fig, "not-a-figure-cell")']},
        {"cell_type": "markdown", "metadata": {}, "source": ["text"]}]}
    path = tmp_path / "ch.ipynb"
    path.write_text(json.dumps(nb))
    assert figindex.saved_files(path) == {"fig-roofs": "ch01-roofs"}


def test_svg_size_reads_inches_and_the_median_text_size(tmp_path):
    svg = tmp_path / "f.svg"
    svg.write_text('<svg xmlns="http://www.w3.org/2000/svg" width="504pt" height="316.8pt">'
                   '<text style="font-size: 10px">a</text><text style="font-size: 10px">b</text>'
                   '<text style="font-size: 7px">2</text></svg>')
    assert figindex.svg_size(svg) == (7.0, 4.4, 10.0)  # the 7 px superscript is not the figure's text


def test_a_seven_inch_figure_fills_a_slide_at_about_one_point_seven():
    scale, pt = figindex.on_slide(7.0, 4.4, 10.0)
    assert round(scale, 3) == round(min(13.333 / 7, 7.5 / 4.4), 3) == 1.705  # the height binds
    assert round(pt, 1) == 17.0
    scale, _ = figindex.on_slide(7.0, 2.0, 10.0)
    assert round(scale, 3) == round(13.333 / 7, 3)  # a wide, short figure: the width binds


PAGE = """<html><body><main><section id="exercises">
<h2>Exercises<a class="headerlink" href="#exercises">#</a></h2>
<p>Try each first.</p>
<p><strong>1. First.</strong> Compute it.</p>
<div class="dropdown admonition">
<p class="admonition-title">Solution</p>
<p>The worked answer, forty-two.</p>
<div class="note admonition"><p class="admonition-title">Aside</p><p>nested, goes with it</p></div>
</div>
<p><strong>2. Second.</strong> Explain it.</p>
<div class="dropdown admonition"><p class="admonition-title">Solution</p><p>Another worked answer.</p></div>
<div class="tip admonition"><p class="admonition-title">Note on solutions</p><p>Kept: not a solution block.</p></div>
</section></main></body></html>
"""


def test_strip_solutions_cuts_each_solution_keeps_the_exercises_and_notes_the_edition_once():
    text, cut = student.strip_solutions(PAGE)
    assert cut == 2
    assert "First." in text and "Second." in text and "Kept: not a solution block." in text
    assert "worked answer" not in text and "nested, goes with it" not in text
    assert text.count(student.NOTE) == 1
    assert text.index("Exercises") < text.index(student.NOTE) < text.index("Try each first.")
    assert text.count("<div") == text.count("</div>")  # whole blocks cut, nothing left dangling


def test_a_page_without_solutions_is_left_as_it_is():
    page = "<html><body><div class=\"note admonition\"><p class=\"admonition-title\">Note</p></div></body></html>"
    assert student.strip_solutions(page) == (page, 0)


def test_the_student_edition_is_the_site_with_solutions_cut(tmp_path):
    site = tmp_path / "html"
    (site / "chapters").mkdir(parents=True)
    (site / "index.html").write_text("<html>front</html>")
    (site / "chapters" / "one.html").write_text(PAGE)
    (site / "_static").mkdir()
    (site / "_static" / "x.css").write_text("p {}")
    cut = student.student_edition(site, tmp_path / "student")
    assert cut == {"chapters/one.html": 2}
    assert (tmp_path / "student" / "_static" / "x.css").read_text() == "p {}"
    assert (tmp_path / "student" / "index.html").read_text() == "<html>front</html>"
    assert (site / "chapters" / "one.html").read_text() == PAGE  # the full edition untouched


def test_every_committed_figure_reads_on_a_slide():
    """The figure pack is sized for slides: scaled to fill a 16:9 slide, most of each figure's text is at least
    12 pt (labels readable when projected). A figure drawn too tall or with small text fails here, named."""
    from pathlib import Path

    figures = Path(__file__).resolve().parents[3] / "figures"
    small = {}
    for svg in sorted(figures.glob("*.svg")):
        width, height, text = figindex.svg_size(svg)
        _, points = figindex.on_slide(width, height, text)
        if points < 12:
            small[svg.stem] = round(points, 1)
    assert len(list(figures.glob("*.svg"))) > 40
    assert small == {}, "figures whose text is under 12 pt on a 16:9 slide"
