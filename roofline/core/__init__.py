"""The core vocabulary (chapter 1 and the notation page): what every workload is counted in.

Rooms, each importing only those above it in this list:

- :mod:`~roofline.core.checks`: argument checks shared by every function (numbers, names and their close matches).
- :mod:`~roofline.core.units`: units and number formats' widths; printing (``fmt``).
- :mod:`~roofline.core.policies`: named policies (ZeRO stages, recomputation).
- :mod:`~roofline.core.formats`: the number formats a workload is stored and computed in.
- :mod:`~roofline.core.fp8`: fp8 training recipes: which matmuls run in fp8, what their casts move and keep.
- :mod:`~roofline.core.cost`: FLOPs and bytes, and their breakdown by part.
- :mod:`~roofline.core.ops`: operations (kernels): matmuls, attention, elementwise work.
- :mod:`~roofline.core.hardware`: accelerators' datasheets, with sources.
- :mod:`~roofline.core.model`: a transformer's shape from its ``config.json``.
- :mod:`~roofline.core.routing`: which experts, and nodes, a step's tokens reach.
- :mod:`~roofline.core.curve`: a measured quantity against a size, read between its points in log-log space.
- :mod:`~roofline.core.roof`: one GPU's roof, the timing rules, and predictions on it.
- :mod:`~roofline.core.collectives`: collectives on the links between GPUs.
- :mod:`~roofline.core.network`: the bandwidth tiers and the bytes data parallelism sends.
- :mod:`~roofline.core.cluster_roof`: the roof of a chip and its fabric, pricing a step's pieces by size.
- :mod:`~roofline.core.records`: our measurement of a GPU and the published microbenchmarks, read and validated.
- :mod:`~roofline.core.calibration`: the calibrated roofs built from those records, and :func:`~roofline.core.calibration.get_roof`,
  the one function that gives the roof of a chip, of a kind, in a format.

Nothing here imports a workload, a measurement's check or a picture.
"""
