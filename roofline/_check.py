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

__all__ = ["number", "unknown_name", "UnknownNameError"]


class UnknownNameError(KeyError):
    """An unknown hardware, model, dtype or policy name; the message lists the close matches."""

    def __str__(self) -> str:  # KeyError would print the message inside quotes
        return str(self.args[0])


def number(name: str, value, *, minimum: float = 0.0, strict: bool = True, integer: bool = False):
    """Return ``value`` as a float (or a float array) after checking it.

    ``strict`` means ``value > minimum``; otherwise ``value >= minimum``. ``integer`` asks for whole
    numbers (batch sizes, token counts). Scalars come back as Python floats, arrays as float arrays,
    so that every formula broadcasts.
    """
    t = type(value)
    if t is int or t is float:  # the common scalar case, checked without numpy
        ok = math.isfinite(value) and (value > minimum if strict else value >= minimum)
        if ok and (not integer or value == int(value)):
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
    arr = arr.astype(float)
    comparison = ">" if strict else ">="
    bad = ~np.isfinite(arr) | ((arr <= minimum) if strict else (arr < minimum))
    if integer:
        bad |= np.isfinite(arr) & (arr != np.round(arr))
    if bad.any():
        kind = "a whole number" if integer else "a finite number"
        if arr.ndim == 0:
            raise ValueError(f"{name} must be {kind} {comparison} {minimum:g}, got {value!r}")
        first = float(arr[bad].flat[0])
        raise ValueError(f"{name} must be {kind} {comparison} {minimum:g} in every element, got {first!r}")
    return arr.item() if arr.ndim == 0 else arr


def unknown_name(kind: str, name: str, known: Iterable[str]) -> UnknownNameError:
    """A ``KeyError`` for an unknown name that lists the close matches (or everything known)."""
    known = sorted(known)
    close = difflib.get_close_matches(str(name).lower(), [k.lower() for k in known], n=3, cutoff=0.5)
    close = [k for k in known if k.lower() in close]
    if close:
        hint = "did you mean " + " or ".join(repr(c) for c in close) + "?"
    else:
        hint = "known: " + ", ".join(known)
    return UnknownNameError(f"unknown {kind} {name!r}; {hint}")
