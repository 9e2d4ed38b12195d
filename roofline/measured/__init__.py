"""Measurements held against the model: our measurement of a GPU, published runs, and the reader's own machine
(appendices B and C, chapters 3, 9 and 13). The records themselves are read in :mod:`roofline.core.records`, and
the roofs built from them in :mod:`roofline.core.calibration`; here the model meets what was measured.

- :mod:`~roofline.measured.compare`: predictions beside our H200's measured kernels, decode and prefill
  (appendix B).
- :mod:`~roofline.measured.checkpointing`: the recomputation runs of chapter 3.
- :mod:`~roofline.measured.training_runs`: the training development set (published runs) and the cluster model
  checked against it (appendix C, chapter 9).
- :mod:`~roofline.measured.serving`: the serving development set and the deployment model checked against
  it (chapter 13).
- :mod:`~roofline.measured.probe`: what measures a reader's own machine and writes a record in the same format.

Every room's names are importable from here (``from roofline import measured as M``); their tables are
:mod:`roofline.present.tables`'.
"""

from roofline.measured.checkpointing import *  # noqa: F401,F403
from roofline.measured.checkpointing import __all__ as _checkpointing
from roofline.measured.compare import *  # noqa: F401,F403
from roofline.measured.compare import __all__ as _compare
from roofline.measured.probe import *  # noqa: F401,F403
from roofline.measured.probe import __all__ as _probe
from roofline.measured.serving import *  # noqa: F401,F403
from roofline.measured.serving import __all__ as _serving
from roofline.measured.training_runs import *  # noqa: F401,F403
from roofline.measured.training_runs import __all__ as _training

__all__ = [*_compare, *_checkpointing, *_training, *_serving, *_probe]
