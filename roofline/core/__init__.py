"""The core vocabulary (chapter 1 and the notation page): what every workload is counted in.

Rooms, each importing only those above it in this list:

- :mod:`~roofline.core.checks`: argument checks shared by every function (numbers, names and their close matches).
- :mod:`~roofline.core.units`: units and number formats' widths; printing (``fmt``).
- :mod:`~roofline.core.policies`: named policies (ZeRO stages, recomputation).
- :mod:`~roofline.core.formats`: the number formats a workload is stored and computed in.
- :mod:`~roofline.core.cost`: FLOPs and bytes, and their breakdown by part.
- :mod:`~roofline.core.ops`: operations (kernels): matmuls, attention, elementwise work.
- :mod:`~roofline.core.hardware`: accelerators' datasheets, with sources.
- :mod:`~roofline.core.model`: a transformer's shape from its ``config.json``.
- :mod:`~roofline.core.routing`: which experts, and nodes, a step's tokens reach.
- :mod:`~roofline.core.roof`: a roof, the timing rules, and predictions on it.
- :mod:`~roofline.core.collectives`: collectives on the links between GPUs.
- :mod:`~roofline.core.network`: the bandwidth tiers and the bytes data parallelism sends.

Nothing here imports a workload, a measurement or a picture.
"""
