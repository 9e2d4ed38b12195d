"""Costs of the operations a transformer is made of (chapter 1; attention again in chapter 4).

Each function returns a :class:`~roofline.cost.Cost` and broadcasts over numpy arrays.
"""

from __future__ import annotations

import numpy as np

from ._check import broadcast, number
from .cost import Cost
from .units import dtype_bytes

__all__ = ["matmul", "attention_flops", "kv_cache_bytes"]


def matmul(m, n, k, dtype: str = "bf16") -> Cost:
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


def attention_flops(queries, keys, width, layers=1, *, causal: bool | str = False, window=None):
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


def kv_cache_bytes(tokens, kv_bytes_per_token, sequences=1):
    """Bytes of the KV cache that ``sequences`` sequences of ``tokens`` tokens hold (or read once)."""
    tokens = number("tokens", tokens, integer=True, strict=False)
    sequences = number("sequences", sequences, integer=True)
    per_token = number("kv_bytes_per_token", kv_bytes_per_token)
    broadcast(tokens=tokens, sequences=sequences, kv_bytes_per_token=per_token)
    return tokens * sequences * per_token
