"""Operations: the kernels a workload is made of, and the formulas of their costs (chapters 1 and 4).

A step of a transformer is a sequence of kernels: matmuls, attention, the elementwise work between
them (norms, rotary embedding, residual adds, the MLP's activation), an embedding lookup, sampling.
Each :class:`Op` says what one such kernel costs: FLOPs, bytes read and written in HBM, the number
format of its math, how many times it is launched (once per layer, usually), and how its FLOPs and
bytes split among the book's *parts* (weights, KV cache, attention, activations...). A workload's
:class:`~roofline.core.cost.Breakdown` is the grouping of its operations by part.

Everything broadcasts: FLOPs and bytes may be numpy arrays over a sweep of batch sizes and context
lengths, so a sweep is one workload, not a loop.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Mapping, NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from roofline.core.checks import broadcast, number
from roofline.core.cost import Cost
from roofline.core.units import dtype_bytes

__all__ = ["Op", "OP_KINDS", "matmul", "attention_flops", "kv_cache_bytes"]


def matmul(m: ArrayLike, n: ArrayLike, k: ArrayLike, dtype: str = "bf16") -> Cost:
    """``(m x k) @ (k x n)``: 2mnk FLOPs; A and B read once and C written once.

    Those bytes are the minimum HBM traffic, reached when tiling keeps every reuse on chip. The
    intensity is ``mnk / (b (mk + kn + mn))`` for ``b`` bytes per element: about ``1/(1/m + 1/n + 1/k)``
    for bf16, so 4096**3 gives 1365 and a matrix-vector product (m = 1) gives about 1.
    """
    m = number("m", m, integer=True)
    n = number("n", n, integer=True)
    k = number("k", k, integer=True)
    broadcast(m=m, n=n, k=k)
    b = dtype_bytes(dtype)
    return Cost(2 * m * n * k, b * (m * k + k * n + m * n))


def attention_flops(queries: ArrayLike, keys: ArrayLike, width: ArrayLike, layers: ArrayLike=1, *, causal: bool | str = False, window=None):
    """FLOPs of the score (QK^T) and value (PV) products: ``4 * queries * keys * width`` per layer.

    ``width`` is query heads times head size. ``causal`` picks how the masked half is counted:
    ``False`` counts every pair; ``'half'`` (or ``True``) counts half of them, the usual accounting and
    the text's; ``'exact'`` counts the pairs the mask keeps when the queries are the last ``queries``
    of the ``keys`` positions: ``queries * keys - queries (queries - 1) / 2``, which is the triangle with
    its diagonal, ``keys (keys + 1) / 2``, when ``queries == keys``, and ``keys`` for one query
    (a decode step). More queries than keys is an error under ``'exact'``.

    ``window`` is a sliding window (Mistral's, Gemma 2's local layers): each query sees at most the
    ``window`` most recent keys, itself included. Under ``'half'`` the masked band is counted as an
    area (``w**2 / 2`` for the ramp, then ``w`` per query), under ``'exact'`` key by key.
    """
    queries = number("queries", queries, integer=True)
    keys = number("keys", keys, integer=True, strict=False)
    width = number("width", width, integer=True)
    layers = number("layers", layers, integer=True)
    broadcast(queries=queries, keys=keys, width=width, layers=layers)
    if causal not in (False, True, "half", "exact"):
        raise ValueError(f"causal must be False, True, 'half' or 'exact', got {causal!r}")
    if causal == "exact" and np.any(np.asarray(queries) > np.asarray(keys)):
        raise ValueError(f"causal='exact' counts the last `queries` rows of the causal triangle, so queries "
                         f"must not exceed keys; got queries {queries!r} and keys {keys!r}")
    if window is not None:
        w = number("window", window, integer=True)
        if causal is False:
            pairs = queries * np.minimum(keys, w)
        else:
            if np.any(np.asarray(queries) > np.asarray(keys)):
                raise ValueError(f"a causal count with a window needs queries <= keys; got {queries!r} and {keys!r}")
            ramp = (lambda n: np.where(n <= w, n * n / 2, w * w / 2 + (n - w) * w)) if causal != "exact" else \
                   (lambda n: np.where(n <= w, n * (n + 1) / 2, w * (w + 1) / 2 + (n - w) * w))
            pairs = ramp(np.asarray(keys)) - ramp(np.asarray(keys) - np.asarray(queries))
        out = 4 * pairs * width * layers
        return out.item() if np.ndim(out) == 0 else out
    if causal is False:
        pairs = queries * keys
    elif causal is True or causal == "half":
        pairs = queries * keys / 2
    else:
        pairs = queries * keys - queries * (queries - 1) / 2
    return 4 * pairs * width * layers


def kv_cache_bytes(tokens: ArrayLike, kv_bytes_per_token, sequences: ArrayLike=1):
    """Bytes of the KV cache that ``sequences`` sequences of ``tokens`` tokens hold (or read once)."""
    tokens = number("tokens", tokens, integer=True, strict=False)
    sequences = number("sequences", sequences, integer=True)
    per_token = number("kv_bytes_per_token", kv_bytes_per_token)
    broadcast(tokens=tokens, sequences=sequences, kv_bytes_per_token=per_token)
    return tokens * sequences * per_token


# matmul: a GEMM on the tensor cores (shape m x n x k per launch); attention: a fused attention
# kernel (flash) or, explicit, its pieces; elementwise: norms, RoPE, residual adds, activations,
# cache writes, sampling; lookup: the embedding gather.
OP_KINDS = ("matmul", "attention", "elementwise", "lookup")
_EMPTY: Mapping = MappingProxyType({})


class Op(NamedTuple):
    """One kernel of a workload, launched ``count`` times (once per layer for a layer's kernel).

    ``flops``, ``reads`` and ``writes`` are totals over all ``count`` launches. ``parts`` splits the
    same FLOPs and bytes among the book's parts; they add up to the totals (``split`` holds the three
    per-part mappings as given, and ``parts`` is built from them when asked for). ``m``, ``n``, ``k`` give
    a matmul's shape per launch (``m`` rows of tokens), ``queries``/``keys`` an attention
    kernel's per sequence, and ``groups`` its sequences x KV heads per launch (the pieces of work a
    decode attention kernel hands out); a calibrated roof times the kernel by them. (A named tuple: a decode step
    builds twenty of these, and a frozen dataclass would cost more than the arithmetic.)
    """

    name: str
    kind: str
    flops: float | np.ndarray
    reads: float | np.ndarray
    writes: float | np.ndarray
    split: tuple  # (flops, reads, writes), each a {part: amount} mapping; see ``parts``
    count: int = 1
    math: str = "bf16"
    m: float | np.ndarray | None = None
    n: int | None = None
    k: int | None = None
    queries: float | np.ndarray | None = None
    keys: float | np.ndarray | None = None
    groups: float | np.ndarray | None = None

    @property
    def parts(self) -> dict[str, Cost]:
        """The operation's FLOPs and bytes (read plus written) by part, in the order parts first appear."""
        flops, reads, writes = self.split
        return {p: Cost._raw(flops.get(p, 0.0), reads.get(p, 0.0) + writes.get(p, 0.0))
                for p in dict.fromkeys((*flops, *reads, *writes))}

    @property
    def bytes(self):
        """HBM bytes read and written, over all launches."""
        return self.reads + self.writes

    @property
    def cost(self) -> Cost:
        return Cost._raw(self.flops, self.bytes)

    @property
    def intensity(self):
        return self.cost.intensity

    @classmethod
    def build(cls, name: str, kind: str, *, count: int = 1, math: str = "bf16",
              flops: Mapping[str, object] | None = None, reads: Mapping[str, object] | None = None,
              writes: Mapping[str, object] | None = None, **shape) -> "Op":
        """An operation from its FLOPs, reads and writes given part by part.

        ``Op.build('o', 'matmul', count=32, flops={'weights': f}, reads={'weights': w,
        'activations': x}, writes={'activations': y})``: totals and the per-part split follow.
        """
        if kind not in OP_KINDS:
            raise ValueError(f"kind must be one of {', '.join(OP_KINDS)}, got {kind!r}")
        flops, reads, writes = flops or _EMPTY, reads or _EMPTY, writes or _EMPTY
        f_total = sum(flops.values(), 0.0)
        r_total = sum(reads.values(), 0.0)
        w_total = sum(writes.values(), 0.0)
        return cls(name, kind, f_total, r_total, w_total, (flops, reads, writes), count, math, **shape)
