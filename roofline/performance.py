"""The roofline model: a cost under a roof gives a time, a bound and a utilization (chapter 1).

S. Williams, A. Waterman and D. Patterson, Communications of the ACM 52(4), 2009.
Attainable FLOP/s = min(peak, bandwidth x intensity).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._check import number
from .cost import Breakdown, Cost
from .hardware import Hardware, Roof, get_hardware

__all__ = ["as_roof", "attainable_flops", "Prediction", "predict"]


def as_roof(roof: Roof | Hardware | str, dtype: str = "bf16") -> Roof:
    """A :class:`Roof` from a roof, a :class:`Hardware`, or a catalog name (datasheet figures)."""
    if isinstance(roof, Roof):
        return roof
    return get_hardware(roof).roof(dtype)


def attainable_flops(intensity, roof: Roof | Hardware | str, dtype: str = "bf16"):
    """The best FLOP/s any kernel of this intensity can reach: ``min(peak, bandwidth * intensity)``."""
    r = as_roof(roof, dtype)
    intensity = number("intensity", intensity, strict=False)
    out = np.minimum(r.peak_flops, r.bandwidth * np.asarray(intensity))
    return out.item() if np.ndim(out) == 0 else out


def _scalar(x):
    return x.item() if isinstance(x, np.ndarray) and x.ndim == 0 else x


@dataclass(frozen=True)
class Prediction:
    """What the roofline says of one cost (or a sweep of them) under one roof."""

    cost: Cost
    roof: Roof
    compute_time: float | np.ndarray  # FLOPs / peak FLOP/s
    memory_time: float | np.ndarray  # bytes / bandwidth
    time: float | np.ndarray  # the two combined under the overlap assumption
    overlap: str

    @property
    def bound(self):
        """'memory' where moving bytes takes longer than the math, else 'compute'."""
        out = np.where(np.asarray(self.memory_time) > np.asarray(self.compute_time), "memory", "compute")
        return str(out) if out.ndim == 0 else out

    @property
    def utilization(self):
        """Fraction of peak FLOP/s the work achieves at the predicted time."""
        return _scalar(np.divide(self.compute_time, self.time))

    @property
    def achieved_flops(self):
        """FLOP/s at the predicted time (equals the attainable FLOP/s under perfect overlap)."""
        return _scalar(np.divide(self.cost.flops, self.time))

    @property
    def intensity(self):
        return self.cost.intensity

    @property
    def shortfall(self):
        """How many times below the ridge point the work sits (below 1 means past the ridge)."""
        return _scalar(np.divide(self.roof.ridge_point, self.cost.intensity))


def predict(cost: Cost | Breakdown, roof: Roof | Hardware | str, *, dtype: str = "bf16", overlap: str = "perfect") -> Prediction:
    """Time a cost under a roof.

    ``overlap='perfect'`` is the roofline's own assumption, ``max(compute, memory)``: data movement
    hides entirely behind the math or the other way round. ``overlap='none'`` adds the two, which is
    closer to what kernels with exposed dependencies get; the truth lies between.
    """
    if isinstance(cost, Breakdown):
        cost = cost.total
    if not isinstance(cost, Cost):
        raise TypeError(f"cost must be a Cost or a Breakdown, got {type(cost).__name__}")
    r = as_roof(roof, dtype)
    compute = _scalar(np.divide(cost.flops, r.peak_flops))
    memory = _scalar(np.divide(cost.bytes, r.bandwidth))
    if overlap == "perfect":
        time = np.maximum(compute, memory)
    elif overlap == "none":
        time = np.add(compute, memory)
    else:
        raise ValueError(f"overlap must be 'perfect' or 'none', got {overlap!r}")
    return Prediction(cost, r, compute, memory, _scalar(np.asarray(time)), overlap)
