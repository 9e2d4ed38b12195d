"""The ``{eval}`name``` role on the site: the glued text of that name, read from the notebook's outputs.

The chapters write a computed number into the prose as ``{eval}`decode_time```. Two readers resolve it:

- JupyterLab, through jupyterlab-myst, evaluates ``decode_time`` against the live kernel, where
  ``roofline.present.glue.glue`` bound it to the formatted text;
- the book build (this module), which reads the text from the glued output of the same name, exactly
  as myst-nb's ``{glue:text}`` does, and renders the same node (so the site is what it was with
  ``{glue:text}``, and shows what nbval compares).

myst-nb has an ``{eval}`` role of its own, but it needs a kernel alive while the page is parsed
(``nb_execution_mode: inline``); the book executes its notebooks in ``force`` mode and keeps one
mechanism: every prose number is a glued output. This role replaces myst-nb's. It accepts a bare name
(an identifier, as ``glue`` requires); anything else, or a name the notebook never glued, is a build
warning (an error under ``--warningiserror``), naming it.

Registered as a Sphinx extension (``sphinx: local_extensions`` in ``_config.yml``).
"""

from __future__ import annotations

from myst_nb.ext.glue.roles import PasteTextRole
from myst_nb.ext.glue.utils import glue_warning


class GluedEvalRole(PasteTextRole):
    """``{eval}`name```: the text glued under ``name`` in this notebook."""

    def run(self):
        name = self.text.strip()
        if not name.isidentifier():
            return [], [glue_warning(f"{{eval}}`{self.text}`: the book evaluates bare glued names only "
                                     "(an identifier glued with roofline.present.glue.glue)", self.document, self.line)]
        self.text = name
        return super().run()


def _register(app) -> None:
    # after every extension's setup: myst-nb registers its own (kernel-bound) eval role there
    app.add_role("eval", GluedEvalRole(), override=True)


def setup(app):
    app.connect("builder-inited", _register)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
