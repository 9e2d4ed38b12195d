"""A measured quantity against a size, read between its points in log-log space (appendices B and C).

Every calibrated rate of the book is such a curve: the bandwidth a read of so many bytes reached, the FLOP/s
a matmul of so many rows or FLOPs reached, a collective's bus bandwidth at a buffer size. Between two
measured points the curve is a straight line on log-log axes (rates and sizes both span orders of
magnitude); beyond the ends it is held flat, so that no rate is extrapolated past what was measured.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["loglog", "Curve"]


def loglog(x: ArrayLike, xs, ys):
    """``y`` at ``x`` on the curve through ``(xs, ys)``: piecewise linear in ``log x`` and ``log y``, held flat
    beyond the ends (``xs`` increasing and positive, ``ys`` positive). Broadcasts over ``x``."""
    return np.exp(np.interp(np.log(np.maximum(x, 1e-300)), np.log(xs), np.log(ys)))


@dataclass(frozen=True)
class Curve:
    """A measured quantity ``y`` against ``x``: :func:`loglog` through its points, with checks on them."""

    xs: tuple
    ys: tuple

    def __post_init__(self):
        if not self.xs or len(self.xs) != len(self.ys):
            raise ValueError(f"a curve needs as many ys as xs, at least one: got {len(self.xs)} xs, {len(self.ys)} ys")
        if any(b <= a for a, b in zip(self.xs, self.xs[1:])):
            raise ValueError(f"a curve's xs must be increasing, got {self.xs!r}")
        if min(self.xs) <= 0 or min(self.ys) <= 0:
            raise ValueError("a curve's xs and ys must be positive")

    @classmethod
    def flat(cls, y: float) -> "Curve":
        """The same ``y`` at every ``x`` (a datasheet's rate, which knows no sizes)."""
        return cls((1.0,), (float(y),))

    def __call__(self, x: ArrayLike):
        out = loglog(np.asarray(x, dtype=float), self.xs, self.ys)
        return out.item() if out.ndim == 0 else out

    @property
    def top(self) -> float:
        """The largest ``y`` measured."""
        return float(max(self.ys))

    def capped(self, cap: float) -> "Curve":
        """The same curve with every ``y`` at most ``cap`` (a calibrated rate never above the datasheet's)."""
        return Curve(self.xs, tuple(min(float(y), cap) for y in self.ys))

    def scaled(self, factor: float) -> "Curve":
        """The same curve with every ``y`` times ``factor`` (a sweep's shape carried to another chip's level)."""
        return Curve(self.xs, tuple(float(y) * factor for y in self.ys))
