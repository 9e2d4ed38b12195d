"""Inference workloads: one decode step and one prefill, broken down by part (chapter 1).

Two accountings, named, side by side:

``accounting='text'``
    The book's first-order model. Every parameter is a weight read once per step and used for one
    multiply-accumulate per token, the embedding table included (as if it were a matmul) and the
    norms too; activations are free. Decode at batch 1 and no context then has intensity exactly 1
    in bf16. The KV cache is read in decode (``context`` tokens per sequence) and written in prefill.

``accounting='refined'``
    What a real step moves: the embedding is a lookup that reads one row per token, norm scales are
    read but their few elementwise FLOPs are not counted (only matmul and attention FLOPs are), each
    matmul reads its input activations and writes its output once (no fusion), decode also writes
    the new token's K and V, and causal attention counts its triangle exactly.

Parts, in order: weights (the decoder layers' matmuls), embedding, lm_head, norms, kv_cache,
attention, activations. A part that costs nothing under an accounting is kept as a zero so tables
line up.

Mixture-of-experts models are modelled exactly only where the routing does not matter: a step
that processes one token (decode at batch 1) reads and multiplies the experts that token uses.
With more tokens the experts read depend on the routing, and latent attention (DeepSeek's MLA)
depends on the kernel; both raise :class:`~roofline.model.NotModelledError` rather than guess.
"""

from __future__ import annotations

import numpy as np

from ._check import broadcast, number
from .cost import Breakdown, Cost
from .model import Model, NotModelledError, load_model
from .units import dtype_bytes

__all__ = ["ACCOUNTINGS", "decode_step", "prefill", "attention_parity_tokens", "compute_bound_batch"]

ACCOUNTINGS = ("text", "refined")


def _check_accounting(accounting: str) -> None:
    if accounting not in ACCOUNTINGS:
        raise ValueError(f"accounting must be one of {', '.join(map(repr, ACCOUNTINGS))}, got {accounting!r}")


def _check_modelled(m: Model, tokens, what: str) -> None:
    """Refuse what the package cannot yet count exactly: MLA, and MoE steps with more than one token."""
    if m.mla is not None:
        raise NotModelledError(
            f"{what} of {m.name}: multi-head latent attention (MLA) is not modelled yet (its attention FLOPs "
            "and traffic depend on whether the kernel absorbs kv_b_proj); params, active_params and "
            "kv_bytes_per_token are exact")
    if m.moe is not None and np.any(np.asarray(tokens) > 1):
        e = m.moe
        raise NotModelledError(
            f"{what} of {m.name}: with more than one token in a step, which experts are read depends on the "
            f"routing (between {e.experts_per_token} and {e.num_experts} of the {e.num_experts} experts per "
            "layer); not modelled yet. One token (decode at batch 1) is exact")


def _activation_bytes(m: Model, tokens, act: float):
    """Bytes each matmul of every layer reads in and writes out for ``tokens`` tokens, plus logits."""
    if m.moe is None:
        per_layer = sum(lin.in_features + lin.out_features for lin in m.layer_linears())
        return tokens * act * (m.num_layers * per_layer + m.hidden_size + m.vocab_size)
    path = sum(lin.in_features + lin.out_features for i in range(m.num_layers) for lin in m.token_linears(i))
    return tokens * act * (path + m.hidden_size + m.vocab_size)


def _weights_parts(m: Model, tokens, accounting: str, wb: float, act: float) -> dict[str, Cost]:
    # every token of the step uses the same weights: all of them for a dense model, the routed
    # experts of the one token for a MoE model (more tokens are refused by _check_modelled)
    layer_w = m.active_decoder_matmul_params
    table = m.embedding_params
    head = m.vocab_size * m.hidden_size
    parts = {
        "weights": Cost(2 * tokens * layer_w, wb * layer_w),
        # lm_head's weights are the embedding's when tied: read once, counted under embedding
        "lm_head": Cost(2 * tokens * head, wb * m.lm_head_params),
    }
    if accounting == "text":
        parts["embedding"] = Cost(2 * tokens * table, wb * table)
        parts["norms"] = Cost(2 * tokens * m.norm_params, wb * m.norm_params)
    else:
        parts["embedding"] = Cost(0.0, act * tokens * m.hidden_size + (wb * table if m.tie_word_embeddings else 0.0))
        parts["norms"] = Cost(0.0, wb * m.norm_params)
    return parts


def _ordered(name: str, parts: dict[str, Cost]) -> Breakdown:
    order = ("weights", "embedding", "lm_head", "norms", "kv_cache", "attention", "activations")
    return Breakdown(name, {k: parts[k] for k in order})


def decode_step(model: Model | str, batch=1, context=0, *, dtype: str = "bf16", kv_dtype: str | None = None,
                accounting: str = "text") -> Breakdown:
    """One decode step: ``batch`` sequences each produce one token, each attending to ``context``
    cached tokens. Broadcasts over arrays of ``batch`` and ``context``.

    Llama 3 8B, batch 1, no context, text accounting: 16.06 GFLOP over 16.06 GB, intensity 1.
    """
    m = load_model(model)
    _check_accounting(accounting)
    batch = number("batch", batch, integer=True)
    context = number("context", context, integer=True, strict=False)
    broadcast(batch=batch, context=context)
    _check_modelled(m, batch, "decode_step")
    wb = dtype_bytes(dtype)
    parts = _weights_parts(m, batch, accounting, wb, wb)
    if accounting == "text":
        parts["kv_cache"] = Cost(0.0, m.kv_cache_bytes(context, kv_dtype or dtype) * batch)
        parts["attention"] = Cost(m.attention_flops(1, context) * batch, 0.0)
        parts["activations"] = Cost()
    else:
        # read the cached context, write the new token's K and V; the new token attends to itself too
        parts["kv_cache"] = Cost(0.0, m.kv_cache_bytes(context + 1, kv_dtype or dtype) * batch)
        parts["attention"] = Cost(m.attention_flops(1, context + 1) * batch, 0.0)
        parts["activations"] = Cost(0.0, _activation_bytes(m, batch, wb))
    return _ordered(f"decode step of {m.name}", parts)


def prefill(model: Model | str, tokens, batch=1, *, dtype: str = "bf16", kv_dtype: str | None = None,
            accounting: str = "text") -> Breakdown:
    """Process a prompt of ``tokens`` tokens for ``batch`` sequences in one pass, writing their KV cache.

    Causal attention is counted at half the square in the text's accounting (2 S^2 x width x layers
    FLOPs), exactly in the refined one. The lm_head runs over every token, as in the text and in the
    measured H200 runs (a server that keeps only the last token's logits saves that part).
    Llama 3 8B, 2048 tokens: 34.0 TFLOP, 3.2% of it attention; 16.06 GB + 268 MB; intensity about 2082.
    """
    m = load_model(model)
    _check_accounting(accounting)
    tokens = number("tokens", tokens, integer=True)
    batch = number("batch", batch, integer=True)
    broadcast(tokens=tokens, batch=batch)
    _check_modelled(m, tokens * batch, "prefill")
    wb = dtype_bytes(dtype)
    n = tokens * batch
    parts = _weights_parts(m, n, accounting, wb, wb)
    parts["kv_cache"] = Cost(0.0, m.kv_cache_bytes(tokens, kv_dtype or dtype) * batch)
    causal = "half" if accounting == "text" else "exact"
    parts["attention"] = Cost(m.attention_flops(tokens, tokens, causal=causal) * batch, 0.0)
    if accounting == "text":
        parts["activations"] = Cost()
    else:
        # each layer's flash attention reads Q, K, V and writes its output once
        attn_io = batch * tokens * wb * m.num_layers * (2 * m.attention_width + 2 * m.num_kv_heads * m.head_dim)
        parts["activations"] = Cost(0.0, _activation_bytes(m, n, wb) + attn_io)
    return _ordered(f"prefill of {m.name}", parts)


def attention_parity_tokens(model: Model | str) -> float:
    """Prompt length at which prefill's causal attention FLOPs equal its weight FLOPs (text accounting).

    ``2 S^2 width layers = 2 N S`` gives ``S = N / (width * layers)``: about 61k tokens for Llama 3 8B.
    Below it the weights dominate, which is why attention is a few percent of a 2048-token prefill.
    """
    m = load_model(model)
    return m.active_params / (m.attention_width * m.num_layers)


def compute_bound_batch(model: Model | str, roof, context=0, *, max_batch: int = 1 << 16, **options):
    """The smallest decode batch that the roofline calls compute-bound under ``roof``, or None.

    One vectorized call over every batch from 1 to ``max_batch``. With a long context the KV-cache
    reads grow with the batch as fast as the FLOPs do, and decode may never cross the ridge: None.
    ``options`` go to :func:`decode_step` (``accounting``, ``dtype``, ``kv_dtype``).
    """
    from .performance import predict

    max_batch = number("max_batch", max_batch, integer=True)
    if np.ndim(max_batch):
        raise TypeError(f"max_batch must be a single whole number, got an array of shape {np.shape(max_batch)}")
    if np.ndim(context):
        raise TypeError(f"compute_bound_batch sweeps the batch for one context; context must be a single number, "
                        f"got an array of shape {np.shape(context)} (call it once per context)")
    max_batch = int(max_batch)
    batches = np.arange(1, max_batch + 1, dtype=float)
    bound = np.asarray(predict(decode_step(model, batches, context, **options), roof,
                               dtype=options.get("dtype", "bf16")).bound)
    hits = np.flatnonzero(bound == "compute")
    return int(batches[hits[0]]) if hits.size else None
