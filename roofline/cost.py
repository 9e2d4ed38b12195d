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

from ._check import number, unknown_name

__all__ = ["Cost", "Breakdown", "arithmetic_intensity"]


def arithmetic_intensity(flops, bytes_moved):
    """FLOPs per byte of HBM traffic. Work that moves no bytes has infinite intensity."""
    flops = number("flops", flops, strict=False)
    bytes_moved = number("bytes_moved", bytes_moved, strict=False)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(np.asarray(bytes_moved) > 0, np.divide(flops, bytes_moved), np.where(np.asarray(flops) > 0, np.inf, 0.0))
    return out.item() if out.ndim == 0 else out


@dataclass(frozen=True)
class Cost:
    """FLOPs done and bytes moved across the HBM boundary (not bytes touched: reuse from SRAM is free)."""

    flops: float | np.ndarray = 0.0
    bytes: float | np.ndarray = 0.0

    def __post_init__(self):
        object.__setattr__(self, "flops", number("flops", self.flops, strict=False))
        object.__setattr__(self, "bytes", number("bytes", self.bytes, strict=False))

    @property
    def intensity(self):
        """Arithmetic intensity, FLOP per byte."""
        return arithmetic_intensity(self.flops, self.bytes)

    def __add__(self, other: "Cost") -> "Cost":
        if not isinstance(other, Cost):
            return NotImplemented
        return Cost(self.flops + other.flops, self.bytes + other.bytes)

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
    """A workload's cost, part by part. ``total`` is their sum; parts keep their order."""

    name: str
    parts: Mapping[str, Cost]

    def __post_init__(self):
        if not isinstance(self.name, str):
            raise TypeError(f"Breakdown name must be a string, got {self.name!r}")
        if not isinstance(self.parts, Mapping):
            raise TypeError(f"parts must be a mapping of part names to Costs, got {type(self.parts).__name__}")
        for part, cost in self.parts.items():
            if not isinstance(part, str) or not isinstance(cost, Cost):
                raise TypeError(f"parts must map names to Costs; part {part!r} is a {type(cost).__name__}")
        object.__setattr__(self, "parts", MappingProxyType(dict(self.parts)))

    def __getitem__(self, part: str) -> Cost:
        try:
            return self.parts[part]
        except KeyError:
            raise unknown_name("part", part, self.parts) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self.parts)

    @property
    def total(self) -> Cost:
        return sum(self.parts.values(), Cost())

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
