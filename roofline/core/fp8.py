"""FP8 training recipes: which matmuls of a linear layer run in fp8, what the casts around them move, what they
keep in memory (chapter 6's fp8 training; appendix C).

A recipe names the scaling (one scale per tensor, per row, or per block of 1 x 128 and 128 x 128 elements), the
matmuls it runs at the fp8 rate (a linear layer's forward product, the product for its input's gradient and the
one for its weight's gradient), and what it costs beside them, per element of an operand:

- **casts**: every operand of an fp8 matmul is converted from bf16 first, a memory-bound kernel that reads two
  bytes an element and writes one (and one more where it writes a transposed copy at once, which Hopper's fp8
  tensor cores need for the backward products); current scaling reads the tensor once more to find its largest
  magnitude (its amax) before the cast, delayed scaling takes the scale from earlier steps' amaxes and finds the
  new one inside the cast;
- **amax reductions**: the scales must agree across the GPUs that share a tensor: delayed scaling all-reduces the
  amaxes of a whole forward (and backward) pass at once, current scaling one amax per cast over the
  tensor-parallel group;
- **memory**: a cached fp8 copy of each weight (and its transpose) beside the bf16 weight and the fp32 master
  copy; linear inputs saved for the backward pass in fp8 where the recipe keeps them so (one byte instead of two);
- **all-gathers**: with FSDP, weights gathered in fp8 (one byte a parameter) where the recipe casts before the
  gather (torchao's float8 all-gather).

Attention (its kernel and, with the explicit kernel, its batched matmuls), the output head, the router of a
mixture of experts, the norms and the optimizer stay in bf16 in every recipe here. The numbers are properties of
the recipes as their sources describe them; the rates the casts run at are microbenchmarks
(:func:`roofline.core.calibration.get_roof`).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping

from roofline.core.checks import unknown_name

__all__ = ["FP8_MATMULS", "FP8Recipe", "FP8_RECIPES", "fp8_recipe", "DEFAULT_FP8_RECIPE"]

FP8_MATMULS = ("forward", "data-gradient", "weight-gradient")
"""The three products of a linear layer: the forward one, the input's gradient and the weight's gradient."""


@dataclass(frozen=True)
class FP8Recipe:
    """One fp8 training recipe (see the module's notes).

    ``scaling``: 'tensor', 'row' or 'block'. ``matmuls``: those of :data:`FP8_MATMULS` run in fp8 (the others in
    bf16). ``cast_bytes``: bytes a cast moves per element of an operand (reads and writes, transposed copy
    included), ``casts``: how many such casts each operand takes (a recipe that scales rows casts an operand
    once along each axis), ``amax_bytes``: bytes an amax pass reads per element before a cast (current scaling),
    ``kernels``: kernels per operand cast (launches). ``weight_cast``: 'step' (the fp8 weights are cached across a
    step's micro-batches) or 'micro-batch'. ``weight_copy_bytes``: bytes a parameter of a linear layer's weight
    kept in fp8 across the step (the copy and its transpose). ``fp8_saved_inputs``: linear inputs kept for the
    backward pass in fp8. ``fp8_all_gather``: FSDP gathers the weights in fp8. ``amax_reduction``: 'pass'
    (one all-reduce of every amax per forward and per backward pass), 'cast' (one per cast, over the
    tensor-parallel group) or 'none'. ``gemm``: the matmul kernels' scaling the rates come from ('tensorwise',
    'rowwise', 'blockwise'). ``fp8_dispatch``: a mixture of experts sends its tokens to their experts in fp8 (the
    forward dispatch and the gradients' dispatch of the backward pass; the combines stay in bf16), as DeepSeek-V3
    does. ``source``: where the recipe is described."""

    name: str
    title: str
    scaling: str
    matmuls: tuple
    cast_bytes: float
    casts: int
    amax_bytes: float
    kernels: int
    weight_cast: str
    weight_copy_bytes: float
    fp8_saved_inputs: bool
    fp8_all_gather: bool
    amax_reduction: str
    gemm: str
    source: str
    fp8_dispatch: bool = False

    def runs_fp8(self, matmul: str) -> bool:
        """Whether ``matmul`` (of :data:`FP8_MATMULS`) runs in fp8 under this recipe."""
        if matmul not in FP8_MATMULS:
            raise unknown_name("matmul", matmul, FP8_MATMULS)
        return matmul in self.matmuls

    @property
    def bytes_per_operand_element(self) -> float:
        """Bytes the casts of one operand move per element: its amax pass and its casts."""
        return self.casts * (self.cast_bytes + self.amax_bytes)


FP8_RECIPES: Mapping[str, FP8Recipe] = MappingProxyType({r.name: r for r in (
    FP8Recipe("te-delayed", "Transformer Engine, delayed scaling per tensor", "tensor", FP8_MATMULS,
              cast_bytes=4.0, casts=1, amax_bytes=0.0, kernels=1, weight_cast="step", weight_copy_bytes=2.0,
              fp8_saved_inputs=True, fp8_all_gather=False, amax_reduction="pass", gemm="tensorwise",
              source="Transformer Engine's DelayedScaling recipe (HYBRID: E4M3 forward, E5M2 gradients), as "
                     "Megatron-Core and NeMo run it"),
    FP8Recipe("te-current", "Transformer Engine, current scaling per tensor", "tensor", FP8_MATMULS,
              cast_bytes=4.0, casts=1, amax_bytes=2.0, kernels=2, weight_cast="step", weight_copy_bytes=2.0,
              fp8_saved_inputs=True, fp8_all_gather=False, amax_reduction="cast", gemm="tensorwise",
              source="Transformer Engine's Float8CurrentScaling recipe: each tensor's amax found before its cast"),
    FP8Recipe("torchao-tensorwise", "torchao float8, dynamic scaling per tensor, fp8 all-gather", "tensor",
              FP8_MATMULS, cast_bytes=4.0, casts=1, amax_bytes=2.0, kernels=2, weight_cast="micro-batch",
              weight_copy_bytes=0.0, fp8_saved_inputs=False, fp8_all_gather=True, amax_reduction="none",
              gemm="tensorwise",
              source="torchao's float8 training with tensorwise scaling and FSDP2's float8 all-gather "
                     "(enable_fsdp_float8_all_gather), as torchtitan runs it"),
    FP8Recipe("torchao-rowwise", "torchao float8, scaling per row", "row", FP8_MATMULS, cast_bytes=3.0, casts=2,
              amax_bytes=0.0, kernels=2, weight_cast="micro-batch", weight_copy_bytes=0.0, fp8_saved_inputs=False,
              fp8_all_gather=False, amax_reduction="none", gemm="rowwise",
              source="torchao's float8 training with rowwise scaling: each operand cast along both axes, "
                     "the high-precision tensors saved"),
    FP8Recipe("deepseek-blockwise", "DeepSeek-V3's blockwise scaling (1 x 128 activations, 128 x 128 weights)",
              "block", FP8_MATMULS, cast_bytes=4.0, casts=1, amax_bytes=0.0, kernels=1, weight_cast="step",
              weight_copy_bytes=2.0, fp8_saved_inputs=True, fp8_all_gather=False, amax_reduction="none",
              gemm="blockwise",
              source="DeepSeek-V3 technical report, section 3.3: fine-grained quantization, all three products "
                     "of a linear layer in FP8, activations cached in FP8; section 3.3.4: the activations before the "
                     "experts' up-projections and the gradients before their down-projections dispatched in FP8, "
                     "both combines in BF16", fp8_dispatch=True),
)})

DEFAULT_FP8_RECIPE = "te-delayed"
"""The recipe an fp8 layout takes when none is named: Transformer Engine's delayed scaling, NeMo's default."""


def fp8_recipe(name: str | FP8Recipe) -> FP8Recipe:
    """The recipe of :data:`FP8_RECIPES` named ``name`` (a recipe passes through); an unknown name is refused
    with the close matches."""
    if isinstance(name, FP8Recipe):
        return name
    if name not in FP8_RECIPES:
        raise unknown_name("fp8_recipe", name, FP8_RECIPES)
    return FP8_RECIPES[name]
