"""Helpers for the chapters' notebooks: glue a computed number into the prose in one line.

``glue('decode_time', pred.time, 's')`` formats the number once (here '4.79 ms') and hands the text to
``myst_nb.glue``, so the page shows the package's figure and nbval checks it on every test run. Only
the notebooks import this module; the package itself never needs myst-nb.

The text is glued as a plain ``str``: myst-nb reads a glued ``text/plain`` back with
``ast.literal_eval``, which strips a string's quotes but would turn an unquoted '1,365' into the
tuple (1, 365).
"""

from __future__ import annotations

from .units import Quantity

__all__ = ["glue", "glue_text"]


def glue(name: str, value, unit: str = "", digits: int = 3, **format) -> None:
    """Glue ``value`` as formatted text under ``name``; the cell shows nothing (returns None on purpose,
    so a glue call on a cell's last line adds no output). ``format`` goes to :class:`Quantity`."""
    glue_text(name, repr(Quantity(float(value), unit, digits, **format)))


def glue_text(name: str, text: str) -> None:
    """Glue a computed string (a name, a bound) as it is."""
    from myst_nb import glue as _glue

    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    _glue(name, text, display=False)
