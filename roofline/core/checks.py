"""Argument checks shared by every module.

Bad input should fail at the edge with a message that names the argument and says what was
expected, never deep inside numpy and never as a silently wrong answer.
"""

from __future__ import annotations

import difflib
import math
import numbers
from collections.abc import Iterable

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["number", "count", "LARGEST_COUNT", "broadcast", "unknown_name", "UnknownNameError", "close_matches"]


class UnknownNameError(KeyError):
    """An unknown hardware, model, dtype or policy name; the message lists the close matches."""

    def __str__(self) -> str:  # KeyError would print the message inside quotes
        return str(self.args[0])


def number(name: str, value: ArrayLike, *, minimum: float = 0.0, strict: bool = True, integer: bool = False):
    """Return ``value`` as a float (or a float array) after checking it.

    ``strict`` means ``value > minimum``; otherwise ``value >= minimum``. ``integer`` asks for whole
    numbers (batch sizes, token counts). Scalars come back as Python floats, arrays as float arrays,
    so that every formula broadcasts.
    """
    t = type(value)
    if (t is float or (t is int and -2**53 <= value <= 2**53)):  # the common scalar case, checked without numpy
        ok = math.isfinite(value) and (value > minimum if strict else value >= minimum)
        if ok and (not integer or (value == int(value) and abs(value) <= LARGEST_COUNT)):
            return float(value)
    if isinstance(value, (bool, np.bool_)) or isinstance(value, (str, bytes)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__} {value!r}")
    if isinstance(value, numbers.Number):
        arr = np.asarray(value)
    else:
        try:
            arr = np.asarray(value)
        except Exception as exc:  # pragma: no cover - numpy raises many kinds
            raise TypeError(f"{name} must be a number or an array of numbers, got {value!r}") from exc
        if arr.dtype.kind not in "iuf":
            raise TypeError(f"{name} must be a number or an array of numbers, got {value!r}")
    if np.iscomplexobj(arr):
        raise TypeError(f"{name} must be a real number, got {value!r}")
    try:
        arr = arr.astype(float)
    except OverflowError:  # a Python integer past the largest float (about 1.8e308)
        raise ValueError(f"{name} must be a finite number, got a number too large to compute with "
                         f"({_digits(value)} digits)") from None
    except (TypeError, ValueError):  # an object array of things that are not numbers
        raise TypeError(f"{name} must be a number or an array of numbers, got {_short(value)}") from None
    comparison = ">" if strict else ">="
    bad = ~np.isfinite(arr) | ((arr <= minimum) if strict else (arr < minimum))
    if integer:
        bad |= np.isfinite(arr) & (arr != np.round(arr))
        huge = np.isfinite(arr) & (np.abs(arr) > LARGEST_COUNT)
        if (huge & ~bad).any():  # a whole number past 2**53: no count means that much, and its arithmetic overflows
            first = float(arr[huge & ~bad].flat[0])
            shown = f"{first:,.0f}" if first < 1e20 else f"{first:g}"
            raise ValueError(f"{name} must be a whole number no larger than {LARGEST_COUNT:,} (2**53), got {shown}")
    if bad.any():
        kind = "a whole number" if integer else "a finite number"
        if arr.ndim == 0:
            raise ValueError(f"{name} must be {kind} {comparison} {minimum:g}, got {value!r}")
        first = float(arr[bad].flat[0])
        raise ValueError(f"{name} must be {kind} {comparison} {minimum:g} in every element, got {first!r}")
    return arr.item() if arr.ndim == 0 else arr


# The largest whole number a count may be (2**53): past it a float no longer holds every whole number, and no batch,
# token or GPU count means that much.
LARGEST_COUNT = 2**53


def count(name: str, value, *, minimum: int = 1, maximum: int = LARGEST_COUNT, what: str = "") -> int:
    """Return ``value`` as a Python ``int`` after checking that it is one whole number in ``[minimum, maximum]``.

    For every count that sizes an array or a loop (GPUs, nodes, a degree, a sweep's length): an array, a
    fraction, a non-finite or a value past ``maximum`` is a ``ValueError`` or ``TypeError`` naming ``name``, so
    that nothing allocates or loops in proportion to an unbounded input. ``what`` says why the bound is there.
    """
    if not isinstance(value, (int, float, str, bytes)) and np.ndim(value) != 0:
        raise TypeError(f"{name} must be a single whole number, got an array of shape {np.shape(value)}")
    v = number(name, value, minimum=minimum, strict=False, integer=True)
    if v > maximum:
        raise ValueError(f"{name} must be at most {maximum:,}{what}, got {_short(value)}")
    return int(v)


def _digits(value) -> str:
    """How many digits a huge integer has, without printing all of them."""
    try:
        return f"{len(str(abs(int(value)))):,}"
    except (TypeError, ValueError):
        return "too many"


def _short(value, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def broadcast(**arrays):
    """Check that named array arguments broadcast together; a ``ValueError`` naming them if not.

    Scalars always do. ``broadcast(batch=[1, 2, 3], context=[0, 1024])`` says which arguments
    disagree and their shapes, rather than numpy's anonymous message deep inside a formula.
    """
    if all(type(v) is float or type(v) is int for v in arrays.values()):  # scalars: nothing to check
        return ()
    shapes = {name: np.shape(value) for name, value in arrays.items()}
    try:
        return np.broadcast_shapes(*shapes.values())
    except ValueError:
        shown = ", ".join(f"{name} of shape {shape}" for name, shape in shapes.items() if shape)
        raise ValueError(f"{shown} do not broadcast together: give arrays of one length "
                         "(or shapes numpy can broadcast, such as a column and a row), or a single number") from None


def close_matches(name: str, known: Iterable[str], n: int = 3) -> list[str]:
    """The ``n`` known names closest to ``name``, closest first.

    A known name that begins with the one typed comes first (``a100-sxm`` finds ``a100-sxm-80gb``),
    then the rest by similarity (``h100-smx`` finds ``h100-sxm``); a name that contains the one
    typed, or is contained in it, counts as close however different its length.
    """
    wanted = str(name).strip().lower()
    ranked = []
    for k in set(known):
        low = k.lower()
        ratio = difflib.SequenceMatcher(None, wanted, low).ratio()
        if len(wanted) >= 2 and low.startswith(wanted):
            ranked.append((0, -ratio, k))
        elif ratio >= 0.5 or (min(len(low), len(wanted)) >= 3 and (wanted in low or low in wanted)):
            ranked.append((1, -ratio, k))
    return [k for _, _, k in sorted(ranked)[:n]]


def unknown_name(kind: str, name: str, known: Iterable[str]) -> UnknownNameError:
    """A ``KeyError`` for an unknown name that lists the close matches (or everything known)."""
    known = sorted(known)
    close = close_matches(name, known)
    if close:
        hint = "did you mean " + " or ".join(repr(c) for c in close) + "?"
    else:
        hint = "known: " + ", ".join(known)
    shown = repr(name) if len(str(name)) <= 60 else f"{str(name)[:40]!r}... ({len(str(name)):,} characters)"
    return UnknownNameError(f"unknown {kind} {shown}; {hint}")
