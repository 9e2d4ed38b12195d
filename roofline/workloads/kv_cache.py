"""The KV cache as a budget (chapter 5): the bytes one sequence keeps, how paging rounds them, how many
copies tensor parallelism makes, and how many sequences fit beside the weights.

Every layer keeps a key and a value per token (or, for multi-head latent attention, one compressed
latent and one rotary key); the shape of a model says how many bytes that is per token
(:meth:`roofline.core.model.Model.kv_bytes_per_token`) and what a sliding window keeps
(:meth:`~roofline.core.model.Model.kv_cache_bytes`). This module turns those into a server's budget:

- **Paging.** With ``block_size`` B, a sequence of ``c`` tokens holds ``ceil(c / B)`` blocks of B
  tokens (Kwon et al. 2023); the last one is partly empty, so the waste is under one block per
  sequence. ``block_size=None`` is an exact, contiguous cache of ``c`` tokens; ``reserve_tokens``
  is the older practice of reserving a contiguous cache for the longest sequence a request may reach.
- **Tensor parallelism.** Each of ``gpus`` GPUs keeps the KV heads of its query heads, so a KV head is
  stored on ``gpus / num_kv_heads`` GPUs when there are fewer KV heads than GPUs, and a latent (MLA)
  on every GPU (:func:`kv_replicas`).
- **Capacity.** Usable HBM less the weights, divided by the bytes of one sequence, is the largest batch
  (:func:`largest_batch`).

Serving (:mod:`roofline.serving`), expert parallelism and tensor parallelism all build on it.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from roofline.core.checks import number
from roofline.core.hardware import Hardware, get_hardware
from roofline.core.model import Model, load_model
from roofline.workloads.memory import weight_bytes

__all__ = ["VLLM_BLOCK_SIZE", "attention_layout", "check_context", "kv_replicas", "kv_bytes_per_token", "paged_tokens",
           "sequence_kv_bytes", "paging_waste", "largest_batch", "shared_prefix_saving"]

# vLLM's default number of tokens per KV block (Kwon et al. 2023 use 16 in their experiments).
VLLM_BLOCK_SIZE = 16


def attention_layout(model: Model | str) -> str:
    """'MHA', 'GQA', 'MQA' or 'MLA', with ' + sliding window' where some layers attend through one."""
    m = load_model(model)
    if m.mla is not None:
        name = "MLA"
    elif m.num_kv_heads == m.num_heads:
        name = "MHA"
    elif m.num_kv_heads == 1:
        name = "MQA"
    else:
        name = "GQA"
    return name + (" + sliding window" if m.sliding_layers else "")


def check_context(model: Model | str, context: ArrayLike) -> None:
    """A ``ValueError`` if ``context`` passes the length the model was trained for (its
    ``max_position_embeddings``); nothing if the config does not say."""
    m = load_model(model)
    context = number("context", context, integer=True, strict=False)
    limit = m.max_position_embeddings
    if limit is not None and np.any(np.asarray(context) > limit):
        worst = int(np.max(context))
        raise ValueError(f"context {worst:,} tokens is beyond what {m.name} was trained for: its config gives "
                         f"max_position_embeddings {limit:,}; ask for at most {limit:,} tokens")


def kv_replicas(model: Model | str, gpus: int = 1) -> int:
    """How many copies of each token's KV cache ``gpus`` tensor-parallel GPUs keep between them.

    Query heads are split evenly over the GPUs and each keeps the KV heads its query heads read: one
    copy while there are at least as many KV heads as GPUs, ``gpus / num_kv_heads`` copies when there
    are fewer (multi-query attention on 8 GPUs: 8), and ``gpus`` copies of MLA's latent, which every
    head reads.
    """
    m = load_model(model)
    g = int(number("gpus", gpus, integer=True))
    if m.num_heads % g:
        raise ValueError(f"gpus must divide {m.name}'s {m.num_heads} query heads for tensor parallelism, got {g}")
    if m.mla is not None:
        return g
    if m.num_kv_heads >= g:
        if m.num_kv_heads % g:
            raise ValueError(f"gpus must divide {m.name}'s {m.num_kv_heads} KV heads (or be a multiple of it), got {g}")
        return 1
    if g % m.num_kv_heads:
        raise ValueError(f"gpus must be a multiple of {m.name}'s {m.num_kv_heads} KV heads (or divide it), got {g}")
    return g // m.num_kv_heads


def kv_bytes_per_token(model: Model | str, kv_dtype: str = "bf16", *, gpus: int = 1) -> float:
    """KV-cache bytes one token adds across the server, every layer (the window ignored: a token while
    it is inside every window), copies under tensor parallelism included. Llama 2 7B in bf16: 524,288."""
    m = load_model(model)
    return m.kv_bytes_per_token(kv_dtype) * kv_replicas(m, gpus)


def paged_tokens(context: ArrayLike, block_size: int | None = VLLM_BLOCK_SIZE):
    """Token slots a sequence of ``context`` tokens holds: whole blocks of ``block_size`` (``None``:
    exactly ``context``). Broadcasts over ``context``."""
    context = number("context", context, integer=True, strict=False)
    if block_size is None:
        return context
    b = number("block_size", block_size, integer=True)
    if np.ndim(b):
        raise TypeError(f"block_size must be one whole number, got an array of shape {np.shape(b)}")
    return np.ceil(np.asarray(context, dtype=float) / b) * b if np.ndim(context) else math.ceil(context / b) * b


def sequence_kv_bytes(model: Model | str, context: ArrayLike, kv_dtype: str = "bf16", *, block_size: int | None = VLLM_BLOCK_SIZE,
                      gpus: int = 1, reserve_tokens: int | None = None):
    """Bytes of KV cache one sequence of ``context`` tokens holds on the server: its token slots
    (:func:`paged_tokens`, or ``reserve_tokens`` reserved up front), each layer keeping every slot or,
    through a sliding window, its last ``sliding_window``; copies under tensor parallelism included."""
    m = load_model(model)
    if reserve_tokens is not None:
        reserve_tokens = number("reserve_tokens", reserve_tokens, integer=True)
        context = number("context", context, integer=True, strict=False)
        if np.any(np.asarray(context) > reserve_tokens):
            raise ValueError(f"reserve_tokens ({int(reserve_tokens):,}) must hold the context "
                             f"({int(np.max(context)):,} tokens)")
        slots = np.broadcast_to(reserve_tokens, np.shape(context)) if np.ndim(context) else reserve_tokens
    else:
        slots = paged_tokens(context, block_size)
    return m.kv_cache_bytes(slots, kv_dtype) * kv_replicas(m, gpus)


def paging_waste(model: Model | str, context, kv_dtype: str = "bf16", *, block_size: int = VLLM_BLOCK_SIZE,
                 gpus: int = 1):
    """Bytes held but empty in a sequence's last block: at most ``block_size - 1`` tokens' worth."""
    return (sequence_kv_bytes(model, context, kv_dtype, block_size=block_size, gpus=gpus)
            - sequence_kv_bytes(model, context, kv_dtype, block_size=None, gpus=gpus))


def largest_batch(model: Model | str, hardware: Hardware | str, context, *, gpus: int = 1,
                  weights_dtype: str = "bf16", kv_dtype: str | None = None,
                  block_size: int | None = VLLM_BLOCK_SIZE, reserve_tokens: int | None = None, reserve: float = 0.0):
    """The most sequences of ``context`` tokens whose KV cache fits beside the weights (0 if none).

    ``floor((gpus x usable HBM - weights - reserve) / bytes per sequence)``, with the bytes per
    sequence of :func:`sequence_kv_bytes`. Broadcasts over ``context`` (an int for one context).
    Llama 3 8B on one H200 at 8,192 tokens in bf16: 16.06 GB of weights in 149.0 GB usable leave room
    for 123 sequences of 1.07 GB.
    """
    m, h = load_model(model), get_hardware(hardware)
    context = number("context", context, integer=True)  # at least one token: an empty sequence has no cache
    g = number("gpus", gpus, integer=True)
    free = g * h.usable_capacity - weight_bytes(m, weights_dtype=weights_dtype) - number("reserve", reserve, strict=False)
    per = sequence_kv_bytes(m, context, kv_dtype or weights_dtype, block_size=block_size, gpus=int(g),
                            reserve_tokens=reserve_tokens)
    out = np.floor(np.maximum(free, 0.0) / np.asarray(per, dtype=float))
    return int(out) if np.ndim(out) == 0 else out.astype(int)


def shared_prefix_saving(model: Model | str, prefix: int, requests: int, kv_dtype: str = "bf16", *,
                         block_size: int | None = VLLM_BLOCK_SIZE, gpus: int = 1) -> float:
    """Bytes saved when ``requests`` sequences share their first ``prefix`` tokens (a system prompt)
    and the cache keeps one copy of it: ``requests - 1`` copies of the shared part, which with paging
    is the prefix's whole blocks (a partly filled block is copied when a sequence first writes to it)."""
    m = load_model(model)
    prefix = int(number("prefix", prefix, integer=True, strict=False))
    requests = int(number("requests", requests, integer=True))
    b = 1 if block_size is None else int(number("block_size", block_size, integer=True))
    shared = prefix // b * b
    return (requests - 1) * float(m.kv_cache_bytes(shared, kv_dtype)) * kv_replicas(m, gpus)
