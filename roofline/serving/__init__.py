"""Serving: how many requests fit and how fast they are answered.

- :mod:`~roofline.serving.capacity`: the batch that fits beside the weights and its decode step (chapters 5, 12);
  its names are importable from here (``from roofline import serving as S; S.serving_capacity(...)``).
- :mod:`~roofline.serving.batching`: static, continuous and chunked batching, simulated (chapter 12).
- :mod:`~roofline.serving.speculative`: speculative decoding (chapter 12).
- :mod:`~roofline.serving.deployment`: what a deployment sustains for a workload under latency targets, the
  datasheet ceiling beside the calibrated estimate, and the serving-layout planner (chapter 13).
"""

from roofline.serving.capacity import *  # noqa: F401,F403
from roofline.serving.capacity import __all__
