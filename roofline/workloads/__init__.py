"""Workloads on one GPU, spoken in the core's vocabulary.

- :mod:`~roofline.workloads.inference`: decode, prefill and verify steps, kernel by kernel (chapters 1, 5, 12).
- :mod:`~roofline.workloads.kv_cache`: the KV cache as a budget: bytes per sequence, paging, copies, capacity (chapter 5).
- :mod:`~roofline.workloads.memory`: model state, activations, recomputation, footprints and verdicts (chapters 2, 3).
- :mod:`~roofline.workloads.training`: a training step, MFU and HFU, recomputation plans (chapters 1, 3).
- :mod:`~roofline.workloads.tiling`: how tiles change the bytes a kernel moves (chapter 4).
- :mod:`~roofline.workloads.quantization`: number formats priced in the three budgets (chapter 6).
"""
