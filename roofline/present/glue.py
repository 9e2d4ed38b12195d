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


# --- one layout's numbers, glued together under names that carry it (issue 52) ---------------------------------

__all__ += ["layout_texts", "glue_layout", "LAYOUT_SEPARATOR"]

LAYOUT_SEPARATOR = "__"
"""Between a layout's prefix and the quantity in a glue name: ``meta__mfu`` is the MFU of the layout glued as
``meta__layout``. ``tests/book/test_layout_numbers.py`` reads the names: in a sentence that names a layout, every
number glued for a layout is one of that layout's."""

_TIMED = ("s", "%")  # the units of a step's time and of its MFU: none for a layout that does not fit


def _layout_words(step) -> str:
    """The layout in words for running text: a :class:`~roofline.parallel.cluster.StepPrice`'s layout phrase, a
    planner :class:`~roofline.parallel.planner.Layout`'s degrees, a
    :class:`~roofline.parallel.data_parallel.DataParallelStep`'s strategy and GPUs."""
    if hasattr(step, "roof") and hasattr(step, "layout"):
        return step.layout.prose()
    if hasattr(step, "footprint") and hasattr(step, "strategy"):
        return f"{step.strategy} on {step.gpus:,} GPUs"
    if all(hasattr(step, k) for k in ("tp", "pp", "dp")):
        return f"TP {step.tp} × PP {step.pp} × DP {step.dp}"
    raise TypeError(f"step must be a StepPrice, a DataParallelStep or a planner Layout, got {type(step).__name__}")


def layout_texts(prefix: str, step, *quantities: str, hardware=None, words: str | None = None, digits: int = 3,
                 **extra) -> dict[str, str]:
    """The texts :func:`glue_layout` glues, by name, all read from the one priced layout ``step`` (a
    :class:`~roofline.parallel.cluster.StepPrice`, a :class:`~roofline.parallel.data_parallel.DataParallelStep`, or
    a planner :class:`~roofline.parallel.planner.Layout` with ``hardware``). ``quantities`` chooses among:

    - ``layout``: the layout in words (``words`` overrides them with a short name such as 'ZeRO-3');
    - ``memory``: its memory per GPU;
    - ``step`` and ``mfu``: its step time and its MFU, which a layout that does not fit does not have: asking
      for either raises, so that no sentence can print one (:func:`roofline.present.tables.misfit`);
    - ``misfit``: 'does not fit by 52.1 GB', which only a layout that does not fit has.

    Each ``extra`` quantity, ``name=(value, unit[, digits])``, is another number of the same layout the prose
    sets beside it (its bubble, a published rate); a time or a percentage of a layout that does not fit is
    refused. Every name is ``{prefix}__{quantity}``.
    """
    from roofline.present.tables import misfit

    if not isinstance(prefix, str) or not prefix.isidentifier() or LAYOUT_SEPARATOR in prefix or prefix.endswith("_"):
        raise ValueError(f"prefix must be an identifier without '{LAYOUT_SEPARATOR}' (it names the layout), got {prefix!r}")
    known = ("layout", "memory", "step", "mfu", "misfit")
    unknown = [q for q in quantities if q not in known]
    if unknown:
        raise ValueError(f"quantities must be among {', '.join(map(repr, known))}, got {', '.join(map(repr, unknown))}")
    over = misfit(step, hardware)
    out = {}
    for q in quantities:
        if q == "layout":
            out[q] = words if words is not None else _layout_words(step)
        elif q == "memory":
            memory = step.footprint.total if hasattr(step, "footprint") else step.memory
            out[q] = repr(Quantity(float(memory), "B", digits))
        elif q == "misfit":
            if not over:
                raise ValueError(f"{prefix}: the layout fits, so it has no 'does not fit by' to print")
            out[q] = over
        elif over:
            raise ValueError(f"{prefix}: the layout {over}, so it has no {q} to print")
        elif q == "step":
            out[q] = repr(Quantity(float(step.time), "s", digits))
        else:
            out[q] = repr(Quantity(float(step.mfu), "%", digits, convert=True))
    for name, spec in extra.items():
        if name in known or not name.isidentifier():
            raise ValueError(f"extra quantity {name!r} clashes with a quantity glue_layout names or is not an identifier")
        if not isinstance(spec, tuple) or len(spec) not in (2, 3):
            raise TypeError(f"extra quantity {name!r} must be (value, unit) or (value, unit, digits), got {spec!r}")
        value, unit, *d = spec
        if over and unit in _TIMED:
            raise ValueError(f"{prefix}: the layout {over}, so it has no {name} to print (a time or a share of a step)")
        out[name] = repr(Quantity(float(value), unit, d[0] if d else digits, convert=unit == "%"))
    if not out:
        raise ValueError("name at least one quantity to glue")
    return {f"{prefix}{LAYOUT_SEPARATOR}{k}": v for k, v in out.items()}


def glue_layout(prefix: str, step, *quantities: str, **kwargs) -> None:
    """Glue one layout's numbers (:func:`layout_texts`), each under ``{prefix}__{quantity}``: the prose writes
    ``{eval}`meta__layout``` and ``{eval}`meta__mfu```, and both come from one priced layout. A layout that does
    not fit has no ``step`` or ``mfu`` to glue: asking for one stops the notebook."""
    for name, text in layout_texts(prefix, step, *quantities, **kwargs).items():
        glue_text(name, text)
