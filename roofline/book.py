"""Helpers for the chapters' notebooks: glue a computed number into the prose in one line.

``glue('decode_time', pred.time, 's')`` formats the number once (here '4.79 ms') and hands it to
``myst_nb.glue``, so the page shows the package's figure and nbval checks it on every test run. Only
the notebooks import this module; the package itself never needs myst-nb.
"""

from __future__ import annotations

from .units import Quantity

__all__ = ["glue", "glue_text"]


def glue(name: str, value, unit: str = "", digits: int = 3, **format) -> Quantity:
    """Glue ``value`` as formatted text under ``name`` (no output in the cell); returns the Quantity."""
    from myst_nb import glue as _glue

    q = Quantity(float(value), unit, digits, **format)
    _glue(name, q, display=False)
    return q


class _Text(str):
    def __repr__(self) -> str:
        return str(self)


def glue_text(name: str, text: str) -> str:
    """Glue a computed string (a name, a bound) without the quotes a plain str's repr would add."""
    from myst_nb import glue as _glue

    _glue(name, _Text(text), display=False)
    return text
