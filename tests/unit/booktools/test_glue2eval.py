"""The converter from glue roles to {eval} (booktools.glue2eval) and the binding glue makes (roofline.present.glue)."""

import nbformat
import pytest

from booktools.glue2eval import ConversionError, clashes, convert_notebook, convert_source, main
from roofline.present import glue as book


def test_every_glue_text_form_becomes_eval_and_nothing_else_changes():
    text = ("The step takes {glue:text}`decode_time`, i.e. {glue}`tokens_s` tokens/s; "
            "{glue:}`a` and {glue:any}`b_2`. Keep {cite}`williams2009` and {numref}`fig-roof` and `code`.")
    new, n = convert_source(text)
    assert n == 4
    assert new == ("The step takes {eval}`decode_time`, i.e. {eval}`tokens_s` tokens/s; "
                   "{eval}`a` and {eval}`b_2`. Keep {cite}`williams2009` and {numref}`fig-roof` and `code`.")
    assert convert_source(new) == (new, 0)  # idempotent


@pytest.mark.parametrize("role, says", [
    ("{glue:text}`decode_time:.2f`", "format spec"),
    ("{glue:text}`other.ipynb::decode_time`", "another notebook"),
    ("{glue:md}`table`", "no {eval} form"),
    ("{glue:text}`class`", "identifier"),
    ("{glue:text}`len`", "builtin"),
    (":::{glue:figure} fig_name\n:::", "no {eval} form"),
    ("```{glue} fig_name\n```", "no {eval} form"),
])
def test_forms_it_cannot_convert_are_named_not_guessed(role, says):
    with pytest.raises(ConversionError, match="cell 3") as err:
        convert_source(f"Before {{glue:text}}`fine`.\n\n{role}\n", where="x.ipynb, cell 3: ")
    assert says in str(err.value) and role.split("\n")[0] in str(err.value)


def _notebook(tmp_path, cells):
    nb = nbformat.v4.new_notebook(cells=cells)
    path = tmp_path / "ch.ipynb"
    nbformat.write(nb, path)
    return path


def _glue_cell(source, names, tags=("remove-cell",)):
    outputs = [nbformat.v4.new_output("display_data", data={"application/papermill.record/text/plain": "'1 ms'"},
                                      metadata={"scrapbook": {"name": n, "mime_prefix": "application/papermill.record/"}})
               for n in names]
    return nbformat.v4.new_code_cell(source, metadata={"tags": list(tags)}, outputs=outputs)


def test_a_notebook_is_converted_in_markdown_only_and_glue_cells_move_above_their_first_use(tmp_path, capsys):
    path = _notebook(tmp_path, [
        nbformat.v4.new_code_cell("from roofline.present.glue import glue\nt = 1e-3"),
        nbformat.v4.new_markdown_cell("It takes {glue:text}`step_time`."),
        _glue_cell('glue("step_time", t, "s")', ["step_time"]),
        nbformat.v4.new_code_cell('print("{glue:text}`step_time` stays in code")'),
    ])
    assert main([str(path)]) == 0
    cells = nbformat.read(path, as_version=4).cells
    assert [c.source for c in cells] == [
        "from roofline.present.glue import glue\nt = 1e-3",
        'glue("step_time", t, "s")',  # moved up: Run All now glues before the prose reads it
        "It takes {eval}`step_time`.",
        'print("{glue:text}`step_time` stays in code")',
    ]
    assert "1 glue role now {eval}" in capsys.readouterr().out


def test_a_glue_cell_that_cannot_move_is_reported(tmp_path):
    path = _notebook(tmp_path, [
        nbformat.v4.new_markdown_cell("It takes {glue:text}`step_time`."),
        nbformat.v4.new_code_cell("t = 1e-3"),
        _glue_cell('glue("step_time", t, "s")', ["step_time"]),
    ])
    with pytest.raises(ConversionError, match=r"cell 0 uses \{eval\}`step_time`, glued by cell 2 .* reads t"):
        convert_notebook(path)


def test_nothing_is_written_when_a_form_is_refused(tmp_path):
    path = _notebook(tmp_path, [nbformat.v4.new_markdown_cell("{glue:text}`ok` and {glue:text}`x:.1f`")])
    before = path.read_text()
    assert main([str(path)]) == 1
    assert path.read_text() == before


def test_a_glue_name_that_is_also_a_variable_is_found():
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("ib_ridge = 2.0\nglue('ib_ridge', ib_ridge)\nglue('other', 1)\nimport numpy as np"),
        nbformat.v4.new_code_cell("glue_text('np', 'numpy')"),
    ])
    assert clashes(nb) == ["ib_ridge", "np"]


# --- the binding roofline.present.glue.glue makes for JupyterLab's {eval} ---------------------------------

@pytest.fixture
def kernel_namespace(monkeypatch):
    ns = {"t": 1e-3}
    monkeypatch.setattr(book, "_notebook_namespace", lambda: ns)
    return ns


def test_glue_binds_the_formatted_text_which_shows_without_quotes(kernel_namespace):
    book.glue("step_time", 4.79e-3, "s")
    book.glue_text("verdict", "doesn't fit")
    assert kernel_namespace["step_time"] == "4.79 ms" and repr(kernel_namespace["step_time"]) == "4.79 ms"
    assert repr(kernel_namespace["verdict"]) == "doesn't fit"
    book.glue("step_time", 5.35e-3, "s")  # re-running the cell rebinds its own text
    assert kernel_namespace["step_time"] == "5.35 ms"


def test_glue_never_replaces_a_notebook_variable(kernel_namespace):
    with pytest.raises(ValueError, match="'t' is already a variable of the notebook"):
        book.glue("t", 1.0)
    assert kernel_namespace["t"] == 1e-3


@pytest.mark.parametrize("name", ["1x", "a-b", "for", "len", ""])
def test_glue_names_must_be_evaluable(name):
    with pytest.raises(ValueError, match="identifier"):
        book.glue(name, 1.0)


def test_a_glue_name_that_is_also_a_variable_is_glued_under_another_name(tmp_path, capsys):
    path = _notebook(tmp_path, [
        _glue_cell('ib_ridge = 2.0\nglue("ib_ridge", ib_ridge)\nglue_text( "block", "x")\nblock = 3', ["ib_ridge", "block"]),
        nbformat.v4.new_markdown_cell("Ridge {glue:text}`ib_ridge`, block {glue:text}`block`, ib_ridge_text."),
    ])
    assert main([str(path)]) == 0
    code, prose = (c.source for c in nbformat.read(path, as_version=4).cells)
    # ib_ridge_text is a word of the notebook already, so the new name takes the next suffix
    assert code == 'ib_ridge = 2.0\nglue("ib_ridge_text2", ib_ridge)\nglue_text( "block_text", "x")\nblock = 3'
    assert prose == "Ridge {eval}`ib_ridge_text2`, block {eval}`block_text`, ib_ridge_text."
    assert "glued as 'ib_ridge_text2' now" in capsys.readouterr().out
    assert clashes(nbformat.read(path, as_version=4)) == []
