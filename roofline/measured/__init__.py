"""Measurements on real hardware, and the roofline held against them (appendix "The roofline meets a
real GPU").

Three rooms: :mod:`~roofline.measured.records` (what a file holds, read and validated),
:mod:`~roofline.measured.compare` (measured and calibrated roofs, predictions against measurements) and
:mod:`~roofline.measured.present` (tables). Everything is importable from here.
"""

from .checkpointing import *  # noqa: F401,F403
from .checkpointing import __all__ as _checkpointing
from .compare import *  # noqa: F401,F403
from .compare import __all__ as _compare
from .present import *  # noqa: F401,F403
from .present import __all__ as _present
from .records import *  # noqa: F401,F403
from .records import __all__ as _records

__all__ = [*_records, *_compare, *_present, *_checkpointing]
