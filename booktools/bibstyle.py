"""The bibliography names a long author list as the text cites it: "Grattafiori et al.", never
"Grattafiori and others".

A BibTeX entry whose authors end in ``and others`` is printed by pybtex's styles with a literal "and
others", while sphinxcontrib-bibtex's author-year citations in the text say "et al.". This extension
registers, at ``config-inited``, a subclass of whatever bibliography style the book uses
(``bibtex_default_style``) whose name lists end in "et al." when the entry's list ends in ``others``, and
makes it the default. One citation form on every page (issue 32).

It also gives the bibliography's entries the role their list asks for: docutils writes the list as
``<div role="list">`` and each entry as ``role="doc-biblioentry"``, a role ARIA 1.2 deprecates and that a
list does not accept as its item (axe: aria-required-children, critical), so a screen reader met a list
of nothing. Each entry becomes a ``listitem`` (issue 50).
"""

from __future__ import annotations

from pybtex.plugin import find_plugin, register_plugin
from pybtex.richtext import Text
from pybtex.style.template import FieldIsMissing, join, node, sentence

GROUP = "pybtex.style.formatting"


@node
def names_et_al(children, context, role, **kwargs):
    """The persons of ``role`` joined as pybtex's ``names`` does, with a trailing ``others`` written
    " et al." after the named ones (no "and" before it)."""
    assert not children
    try:
        persons = context["entry"].persons[role]
    except KeyError:
        raise FieldIsMissing(role, context["entry"]) from None  # as pybtex's names: optional[...] skips it
    style = context["style"]
    named = [p for p in persons if str(p) != "others"]
    formatted = [style.format_name(p, style.abbreviate_names) for p in named]
    if len(named) < len(persons):
        return Text(join(sep=", ")[formatted].format_data(context), " et al.")
    return join(**kwargs)[formatted].format_data(context)


def style_for(base: str):
    """The subclass of the pybtex style ``base`` that writes "et al."; registered as ``roofline-<base>``."""
    parent = find_plugin(GROUP, base)

    class EtAl(parent):
        def format_names(self, role, as_sentence=True):
            formatted = names_et_al(role, sep=", ", sep2=" and ", last_sep=", and ")
            return sentence[formatted] if as_sentence else formatted

    EtAl.__name__ = f"EtAl{parent.__name__}"
    return EtAl


def _config_inited(app, config) -> None:
    base = config.bibtex_default_style
    name = f"roofline-{base}"
    try:
        find_plugin(GROUP, name)
    except Exception:
        register_plugin(GROUP, name, style_for(base))
    config.bibtex_default_style = name


def list_items(body: str) -> str:
    """``body`` (a page's HTML) with each bibliography entry's role a list item."""
    return body.replace('role="doc-biblioentry"', 'role="listitem"')


def _page_context(app, pagename, templatename, context, doctree) -> None:
    if "body" in context:
        context["body"] = list_items(context["body"])


def setup(app):
    app.connect("config-inited", _config_inited, priority=900)
    app.connect("html-page-context", _page_context)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
