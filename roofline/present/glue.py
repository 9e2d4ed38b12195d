"""Helpers for the chapters' notebooks: put a computed number into the prose in one line.

``glue('decode_time', pred.time, 's')`` formats the number once (here '4.79 ms') and does two things
with that text, so that the prose reads the same on the site and in JupyterLab:

- it hands the text to ``myst_nb.glue``: the cell's (hidden) output carries it, nbval compares it on
  every test run, and the book build reads it from there;
- it binds the same text to the name ``decode_time`` in the notebook's namespace, where JupyterLab's
  MyST renderer (jupyterlab-myst) evaluates the inline role ``{eval}`decode_time``` against the live
  kernel.

The prose writes ``{eval}`decode_time``` in both cases: on the site, ``booktools.evalrole`` resolves it
from the glued output of that name (not from a kernel), so the page shows exactly what nbval checks.

A name is bound only when it is free or holds text an earlier ``glue`` bound (re-running a cell): a
glue name never replaces a notebook's own variable. Only the notebooks import this module; the
package itself never needs myst-nb.

The text is glued as a plain ``str``: myst-nb reads a glued ``text/plain`` back with
``ast.literal_eval``, which strips a string's quotes but would turn an unquoted '1,365' into the
tuple (1, 365).
"""

from __future__ import annotations

import builtins
import keyword

from roofline.core.units import Quantity

__all__ = ["glue", "glue_text", "GluedText"]


class GluedText(str):
    """The text a name is bound to in the notebook: a ``str`` that shows itself without quotes, so
    that an inline ``{eval}`name``` reads '4.79 ms' whatever characters the text holds."""

    __slots__ = ()

    def __repr__(self) -> str:
        return str.__str__(self)


def glue(name: str, value, unit: str = "", digits: int = 3, **format) -> None:
    """Glue ``value`` as formatted text under ``name`` and bind the text to ``name`` in the notebook;
    the cell shows nothing (returns None on purpose, so a glue call on a cell's last line adds no
    output). ``format`` goes to :class:`Quantity`."""
    glue_text(name, repr(Quantity(float(value), unit, digits, **format)))


def glue_text(name: str, text: str) -> None:
    """Glue a computed string (a name, a bound) as it is, and bind it to ``name`` in the notebook."""
    from myst_nb import glue as _glue

    if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name) or hasattr(builtins, name):
        raise ValueError(f"name must be a Python identifier that is not a keyword or a builtin "
                         f"(the prose evaluates it), got {name!r}")
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    namespace = _notebook_namespace()
    if namespace is not None:
        held = namespace.get(name)
        if name in namespace and not isinstance(held, GluedText):
            raise ValueError(f"glue name {name!r} is already a variable of the notebook "
                             f"({type(held).__name__}); choose another name for the glued text")
        namespace[name] = GluedText(text)
    _glue(name, str(text), display=False)


def _notebook_namespace() -> dict | None:
    """The running IPython kernel's user namespace, or None outside one (a plain script, a test)."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython comes with myst-nb
        return None
    shell = get_ipython()
    return None if shell is None else shell.user_ns
