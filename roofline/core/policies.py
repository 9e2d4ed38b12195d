"""The named policies that several budgets price: ZeRO stages and activation recomputation (chapters 2, 3, 7).

One table each, so that memory (what a stage shards, what a policy keeps), compute (what a policy
recomputes) and the network (what a stage sends) can never disagree about what a name means.

- Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training Trillion Parameter Models", SC 2020
  (arXiv:1910.02054), sections 5 and 7: stages 1 to 3 shard the optimizer state, then the gradients, then
  the weights; stages 1 and 2 send what plain data parallelism sends, stage 3 half as much again.
- Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models", MLSys 2023
  (arXiv:2205.05198): selective recomputation redoes the attention core only; full recomputation keeps each
  layer's input and runs its forward pass again.
- Chen et al., "Training Deep Nets with Sublinear Memory Cost" (arXiv:1604.06174, 2016): checkpoints at
  the input of every k-th layer, each segment of k layers run forward again (all its activations held)
  when the backward pass reaches it; one extra forward pass in all, memory O(sqrt L) at the best k
  (chapter 3). ``'every-1'`` is full recomputation.
- "How to Scale Your Model" (Austin et al., 2025, jax-ml/scaling-book), and JAX's
  ``checkpoint_dots`` policies: save the outputs of the large matmuls and rebuild everything elementwise
  (norms, activation functions) in the backward pass, ``'matmul-outputs'`` here; chapter 3 derives from the
  ridge point which tensors that keeps.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping

__all__ = ["ZeroStage", "ZERO_STAGES", "zero_stage", "Recompute", "RECOMPUTE", "RECOMPUTES", "MATMUL_OUTPUTS", "recompute_policy"]


@dataclass(frozen=True)
class ZeroStage:
    """A ZeRO stage: which parts of the model state each of G GPUs holds 1/G of, and the bytes each GPU
    sends per step in units of the gradients' size (ring collectives, before the (G-1)/G factor)."""

    stage: int
    shards: frozenset
    traffic: float
    note: str


ZERO_STAGES: Mapping[int, ZeroStage] = MappingProxyType({
    0: ZeroStage(0, frozenset(), 2.0, "plain data parallelism: every GPU holds everything; one all-reduce"),
    1: ZeroStage(1, frozenset({"master", "momentum", "variance"}), 2.0,
                 "optimizer state sharded; reduce-scatter of gradients plus all-gather of weights"),
    2: ZeroStage(2, frozenset({"master", "momentum", "variance", "gradients"}), 2.0, "gradients sharded too"),
    3: ZeroStage(3, frozenset({"master", "momentum", "variance", "gradients", "weights"}), 3.0,
                 "weights sharded too: all-gathered for the forward and again for the backward pass"),
})


def zero_stage(stage) -> ZeroStage:
    """The ZeRO stage ``stage`` (0 to 3); a clear error otherwise."""
    if isinstance(stage, bool) or stage not in ZERO_STAGES:
        raise ValueError(f"stage must be 0, 1, 2 or 3, got {stage!r}")
    return ZERO_STAGES[stage]


@dataclass(frozen=True)
class Recompute:
    """An activation recomputation policy: the FLOPs it runs per parameter per token (forward 2, backward
    4, plus 2 for a second forward) and how many times the attention core's forward FLOPs run."""

    name: str
    param_flops: int
    attention_passes: int
    keeps: str
    every: int = 0  # checkpoint spacing in layers (Chen et al.): 0 for none and selective, 1 for full, k for every-k


RECOMPUTE: Mapping[str, Recompute] = MappingProxyType({
    "none": Recompute("none", 6, 3, "every tensor the backward pass needs"),
    "selective": Recompute("selective", 6, 4, "everything but the attention core's score-sized tensors, recomputed"),
    "full": Recompute("full", 8, 4, "each layer's input only; the whole forward pass runs again", every=1),
})

RECOMPUTES = tuple(RECOMPUTE)
"""The names of Korthikanti et al.'s three policies, in the order every table and search lists them."""

MATMUL_OUTPUTS = Recompute(
    "matmul-outputs", 6, 3,
    "the layer's input and the outputs of its matmuls (the projections, the attention kernel, the MLP's gate and "
    "up); the norms and the activation function run again, elementwise")
"""Save the large matmul outputs (chapter 3): no matmul runs twice (with a flash kernel: an explicit softmax
output is not a matmul's and is rebuilt, the attention core with it), so its FLOPs are the model's; what it
rebuilds is elementwise work, priced in bytes, not FLOPs. Kept apart from :data:`RECOMPUTE`, the three
policies of Korthikanti et al."""

_EVERY = re.compile(r"every-([0-9]+)")


def recompute_policy(name) -> Recompute:
    """The recomputation policy called ``name``: 'none', 'selective', 'full', 'matmul-outputs' (keep the
    matmuls' outputs, rebuild the elementwise work) or 'every-K' (a checkpoint at the input of every K-th
    layer, K >= 1; 'every-1' is the same trade as 'full')."""
    if isinstance(name, Recompute):
        return name
    if isinstance(name, str) and name in RECOMPUTE:
        return RECOMPUTE[name]
    if name == MATMUL_OUTPUTS.name:
        return MATMUL_OUTPUTS
    found = _EVERY.fullmatch(name.strip()) if isinstance(name, str) else None
    if found is None or int(found.group(1)) < 1:
        raise ValueError(f"recompute must be one of {', '.join(map(repr, RECOMPUTE))}, 'matmul-outputs' or 'every-K' with K a whole "
                         f"number >= 1 (a checkpoint every K layers), got {name!r}")
    k = int(found.group(1))
    return Recompute(f"every-{k}", 8, 4, f"the input of one layer in {k}; a segment of {k} layers runs forward again, "
                     "all its activations held, when the backward pass reaches it", every=k)

