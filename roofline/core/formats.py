"""Number formats carried by the work (chapter 1; chapter 6 spends them).

A workload is stored in some formats and computed in one: int4 weights multiplied in bf16 (a
weight-only quantized model), an fp8 KV cache beside bf16 weights, fp8 weights and activations
multiplied on fp8 tensor cores. :class:`Formats` names the four, so that the roof a prediction uses
(the peak of the *math* format) can never disagree with the work.
"""

from __future__ import annotations

from dataclasses import dataclass

from roofline.core.units import dtype_bytes, group_format

__all__ = ["Formats", "formats"]




@dataclass(frozen=True)
class Formats:
    """The number format of each kind of tensor in a workload, and of its math.

    ``weights``: how the decoder layers' matmul weights are stored and read. ``activations``: what
    flows between kernels. ``kv``: the KV cache. ``math``: the tensor-core format the matmuls run in,
    whose peak the roof takes. Weight-only quantization (int4 or int8 weights) dequantizes to the math
    format on chip. Weights and KV cache may be group-wise formats (``'int4-g128'``: the bytes of the
    scales count); activations and math are plain formats.

    ``embeddings``: the format of the other parameters (the embedding table, the output head and the
    norms), or None for the weights' own (the default, and the book's first-order count). Weight-only
    checkpoints usually keep them in 16 bits (chapter 6).
    """

    weights: str = "bf16"
    activations: str = "bf16"
    kv: str = "bf16"
    math: str = "bf16"
    embeddings: str | None = None

    def __post_init__(self):
        for name in ("weights", "activations", "kv", "math", "embeddings"):
            value = getattr(self, name)
            if value is None and name == "embeddings":
                continue
            try:
                dtype_bytes(value)  # unknown names raise with the close matches
            except KeyError as exc:
                raise type(exc)(f"{name} format: {exc}") from None
        for name in ("activations", "math"):
            if group_format(getattr(self, name)) is not None:
                raise ValueError(f"{name} format must be a plain format such as 'bf16' or 'fp8', got the group-wise "
                                 f"{getattr(self, name)!r}; only weights and the KV cache are stored in groups")
        base = group_format(self.weights).base if group_format(self.weights) else self.weights
        if self.math == "int4" and base != "int4":
            raise ValueError(f"math format int4 needs int4 weights, got weights {self.weights!r}")

    def bytes(self, kind: str) -> float:
        """Bytes per element of ``kind`` ('weights', 'activations', 'kv', 'math' or 'embeddings'), the
        scales of a group-wise format included."""
        if kind not in ("weights", "activations", "kv", "math", "embeddings"):
            raise ValueError(f"kind must be 'weights', 'activations', 'kv', 'math' or 'embeddings', got {kind!r}")
        if kind == "embeddings" and self.embeddings is None:
            kind = "weights"
        return dtype_bytes(getattr(self, kind))

    def label(self) -> str:
        """A short description, e.g. 'bf16' or 'weights int4, math bf16'."""
        if len({self.weights, self.activations, self.kv, self.math}) == 1 and self.embeddings in (None, self.weights):
            return self.math
        parts = [f"weights {self.weights}"]
        if self.embeddings not in (None, self.weights):
            parts.append(f"embeddings {self.embeddings}")
        if self.activations != self.math:
            parts.append(f"activations {self.activations}")
        if self.kv != self.activations:
            parts.append(f"KV {self.kv}")
        parts.append(f"math {self.math}")
        return ", ".join(parts)


def formats(dtype: str = "bf16", *, weights_dtype: str | None = None, kv_dtype: str | None = None,
            math_dtype: str | None = None, embeddings_dtype: str | None = None) -> Formats:
    """The formats of a workload from the book's shorthand.

    ``dtype`` sets everything (weights, activations, KV cache and math: ``'fp8'`` is an fp8 model on
    fp8 tensor cores). ``weights_dtype`` stores the weights narrower (``'int4'``: W4A16, multiplied
    in ``dtype``); ``kv_dtype`` stores the cache in another format; ``math_dtype`` overrides the math
    (W8A8 in int8: ``weights_dtype='int8', math_dtype='int8'``); ``embeddings_dtype`` keeps the
    embedding table, output head and norms in another format (None: the weights').
    """
    dtype_bytes(dtype)
    weights = weights_dtype or dtype
    math = math_dtype or dtype
    return Formats(weights=weights, activations=dtype, kv=kv_dtype or dtype, math=math, embeddings=embeddings_dtype)
