"""Many GPUs: every way of splitting a model's work, and the planner that chooses among them.

- :mod:`~roofline.parallel.data_parallel`: data parallelism and ZeRO (chapter 7).
- :mod:`~roofline.parallel.tensor_parallel`: tensor parallelism (chapter 8).
- :mod:`~roofline.parallel.pipeline`: pipeline schedules and their bubbles (chapter 9).
- :mod:`~roofline.parallel.planner`: chapter 9's first-order layout search over tensor, pipeline and data
  parallelism, the text's count ranked by its floor (``roofline plan --roof datasheet``).
- :mod:`~roofline.parallel.moe`: mixtures of experts and expert parallelism (chapter 10).
- :mod:`~roofline.parallel.context_parallel`: one sequence over many GPUs (chapter 11).
- :mod:`~roofline.parallel.rules`: every chapter's threshold in closed form, beside the full model (the Reference
  part's rules of thumb).
- :mod:`~roofline.parallel.cluster`: one training step of any layout on a cluster, priced under a cluster roof (the
  floor and the estimate), and the training-layout planner over the cluster model (``roofline plan``; appendix C).
"""
