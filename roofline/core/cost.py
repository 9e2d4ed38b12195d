"""What a piece of work costs: FLOPs and HBM bytes, and their ratio (chapter 1).

A :class:`Cost` is a pair of numbers (or of numpy arrays, for a sweep). Costs add, and scale by a
count. A :class:`Breakdown` is a named sum of costs, so a workload can say where its time goes:
weights, KV cache, attention, lm_head...
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Iterator, Mapping

import numpy as np
from numpy.typing import ArrayLike

from roofline.core.checks import number, unknown_name

__all__ = ["Cost", "Breakdown", "arithmetic_intensity"]


def arithmetic_intensity(flops: ArrayLike, bytes_moved: ArrayLike):
    """FLOPs per byte of HBM traffic. Work that moves no bytes has infinite intensity."""
    flops = number("flops", flops, strict=False)
    bytes_moved = number("bytes_moved", bytes_moved, strict=False)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(np.asarray(bytes_moved) > 0, np.divide(flops, bytes_moved), np.where(np.asarray(flops) > 0, np.inf, 0.0))
    return out.item() if out.ndim == 0 else out


def _quantity(x, what, which):
    if what is None:
        return number(which, x, strict=False)
    if not isinstance(what, str):
        raise TypeError(f"what must be the name of an attribute or method (e.g. 'time', 'peak_flops'), got {what!r}")
    try:
        value = getattr(x, what)
    except AttributeError:
        raise AttributeError(f"{which} ({type(x).__name__}) has no attribute {what!r} to compare") from None
    return number(which, value() if callable(value) else value, strict=False)


def ratio(a, b, what: str | None = None):
    """How many times ``a`` is ``b`` (chapters 1 to 12 quote such ratios: "2.3x faster"): two numbers, or
    with ``what`` the same attribute of two results, a method called with no arguments
    (``ratio(h100, a100, 'peak_flops')``, ``ratio(slow, fast, 'time')``). A plain comparison of two
    package results, no model in it."""
    x, y = _quantity(a, what, "a"), _quantity(b, what, "b")
    if np.any(np.asarray(y) == 0):
        raise ZeroDivisionError(f"b{'.' + what if what else ''} is zero: no ratio")
    out = np.divide(x, y)
    return out.item() if np.ndim(out) == 0 else out


__all__ += ["ratio"]


def difference(a, b, what: str | None = None):
    """``a`` less ``b``, two numbers or with ``what`` the same attribute of two results (as :func:`ratio`):
    "fp8 fits 12 more sequences". A plain comparison of two package results."""
    x, y = _quantity(a, what, "a"), _quantity(b, what, "b")
    out = np.subtract(x, y)
    return out.item() if np.ndim(out) == 0 else out


__all__ += ["difference"]


def nearest(values, target):
    """The member of ``values`` (numbers, or the keys of a dict) closest to ``target``: "the measured
    context nearest the crossover" (chapter 5). The first of two equally close; ``values`` must not be empty."""
    options = list(values)
    if not options:
        raise ValueError("values must hold at least one number to pick from, got none")
    goal = number("target", target, strict=False)
    return min(options, key=lambda v: abs(number("values", v, strict=False) - goal))


__all__ += ["nearest"]


def gain(a, b, what: str | None = None):
    """How much more ``a`` is than ``b``, as a fraction (as :func:`ratio`): ``a / b - 1``; "12% faster"."""
    return ratio(a, b, what) - 1


__all__ += ["gain"]


@dataclass(frozen=True)
class Cost:
    """FLOPs done and bytes moved across the HBM boundary (not bytes touched: reuse from SRAM is free)."""

    flops: float | np.ndarray = 0.0
    bytes: float | np.ndarray = 0.0

    def __post_init__(self):
        object.__setattr__(self, "flops", number("flops", self.flops, strict=False))
        object.__setattr__(self, "bytes", number("bytes", self.bytes, strict=False))

    @classmethod
    def _raw(cls, flops, bytes_) -> "Cost":
        """A cost from numbers already checked (the package's own formulas): no validation, for speed."""
        c = object.__new__(cls)
        object.__setattr__(c, "flops", flops)
        object.__setattr__(c, "bytes", bytes_)
        return c

    @property
    def intensity(self):
        """Arithmetic intensity, FLOP per byte."""
        return arithmetic_intensity(self.flops, self.bytes)

    def __add__(self, other: "Cost") -> "Cost":
        if not isinstance(other, Cost):
            return NotImplemented
        return Cost._raw(self.flops + other.flops, self.bytes + other.bytes)

    def __radd__(self, other):
        if other == 0:  # so that sum() works
            return self
        return NotImplemented

    def __mul__(self, count) -> "Cost":
        count = number("count", count, strict=False)
        return Cost(self.flops * count, self.bytes * count)

    __rmul__ = __mul__


@dataclass(frozen=True)
class Breakdown:
    """A workload's cost, part by part. ``total`` is their sum; parts keep their order.

    A workload built from operations (:func:`~roofline.workloads.inference.decode_step`, ...) keeps them in
    ``ops`` (:class:`~roofline.operations.Op`, one per kernel) with the number ``formats`` it is
    stored and computed in; its parts are then the grouping of those operations by part
    (:meth:`from_ops`). A bare breakdown (no operations) is timed as one piece of work.
    """

    name: str
    parts: Mapping[str, Cost]
    ops: tuple = ()
    formats: object = None  # a roofline.core.formats.Formats, when the work says what it is computed in

    def __post_init__(self):
        if not isinstance(self.name, str):
            raise TypeError(f"Breakdown name must be a string, got {self.name!r}")
        if not isinstance(self.parts, Mapping):
            raise TypeError(f"parts must be a mapping of part names to Costs, got {type(self.parts).__name__}")
        for part, cost in self.parts.items():
            if not isinstance(part, str) or not isinstance(cost, Cost):
                raise TypeError(f"parts must map names to Costs; part {part!r} is a {type(cost).__name__}")
        object.__setattr__(self, "parts", MappingProxyType(dict(self.parts)))
        object.__setattr__(self, "ops", tuple(self.ops))

    @classmethod
    def from_ops(cls, name: str, ops, formats=None, order=()) -> "Breakdown":
        """Group operations by part: each part's cost is the sum of every operation's share of it.
        ``order`` lists parts to put first (kept even when no operation has them, as zeros)."""
        sums: dict[str, list] = {p: [0.0, 0.0] for p in order}
        for op in ops:
            flops, reads, writes = op.split
            for p in dict.fromkeys((*flops, *reads, *writes)):  # the op's parts, as Op.parts has them
                f, by = flops.get(p, 0.0), reads.get(p, 0.0) + writes.get(p, 0.0)
                s = sums.get(p)
                if s is None:
                    sums[p] = [f, by]
                else:
                    s[0] = s[0] + f
                    s[1] = s[1] + by
        # the parts are the package's own sums of checked numbers: built without re-validation, for speed
        b = object.__new__(cls)
        for field, value in (("name", name), ("parts", MappingProxyType({p: Cost._raw(f, by) for p, (f, by) in sums.items()})),
                             ("ops", tuple(ops)), ("formats", formats)):
            object.__setattr__(b, field, value)
        return b

    def op(self, name: str):
        """The operation called ``name`` (close matches on a miss)."""
        for o in self.ops:
            if o.name == name:
                return o
        raise unknown_name("operation", name, [o.name for o in self.ops])

    def subtotal(self, *parts: str) -> Cost:
        """The cost of some parts together, e.g. ``subtotal('weights', 'embedding', 'lm_head')``."""
        return sum((self[p] for p in parts), Cost._raw(0.0, 0.0))

    def __getitem__(self, part: str) -> Cost:
        try:
            return self.parts[part]
        except KeyError:
            raise unknown_name("part", part, self.parts) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self.parts)

    @property
    def total(self) -> Cost:
        t = self.__dict__.get("_total")  # worked out once: the parts are frozen
        if t is None:
            t = sum(self.parts.values(), Cost._raw(0.0, 0.0))
            object.__setattr__(self, "_total", t)
        return t

    @property
    def flops(self):
        return self.total.flops

    @property
    def bytes(self):
        return self.total.bytes

    @property
    def intensity(self):
        return self.total.intensity

    def share(self, part: str, of: str = "flops"):
        """Fraction of the total FLOPs (or ``of='bytes'``) that ``part`` accounts for."""
        if of not in ("flops", "bytes"):
            raise ValueError(f"of must be 'flops' or 'bytes', got {of!r}")
        whole = getattr(self.total, of)
        return np.divide(getattr(self[part], of), whole)
