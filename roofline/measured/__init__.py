"""Measurements on real hardware, and the roofline held against them (appendix "The roofline meets a
real GPU").

Five rooms: :mod:`~roofline.measured.records` (what a file holds, read and validated),
:mod:`~roofline.measured.compare` (measured and calibrated roofs, predictions against measurements),
:mod:`~roofline.measured.checkpointing` (the recomputation runs of chapter 3),
:mod:`~roofline.measured.cluster` (calibrated cluster roofs from published microbenchmarks, and the
published training runs they are checked against) and :mod:`~roofline.measured.probe` (what measures a
reader's own machine). All but the last are importable from here; their tables are :mod:`roofline.present.tables`'.
"""

from roofline.measured.checkpointing import *  # noqa: F401,F403
from roofline.measured.checkpointing import __all__ as _checkpointing
from roofline.measured.cluster import *  # noqa: F401,F403
from roofline.measured.cluster import __all__ as _cluster
from roofline.measured.compare import *  # noqa: F401,F403
from roofline.measured.compare import __all__ as _compare
from roofline.measured.records import *  # noqa: F401,F403
from roofline.measured.records import __all__ as _records

__all__ = [*_records, *_compare, *_checkpointing, *_cluster]
