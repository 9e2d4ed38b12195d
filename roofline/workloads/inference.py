"""Inference workloads: one decode step and one prefill, kernel by kernel and part by part (chapter 1).

A workload is a list of operations (:class:`~roofline.core.ops.Op`, one per kernel, launched once per
layer or once per step); its :class:`~roofline.core.cost.Breakdown` groups them by part. Two accountings,
named, side by side:

``accounting='text'``
    The book's first-order count. Every parameter is a weight read once per step and used for one
    multiply-accumulate per token, the embedding table included (as if it were a matmul) and the
    norms too; activations are free. Decode at batch 1 and no context then has intensity exactly 1
    in bf16. The KV cache is read in decode (``context`` tokens per sequence) and written in prefill.

``accounting='refined'``
    What a real step's kernels move. The embedding is a lookup of one row per token; each matmul reads
    its input and writes its output once; norms read their scales and their activations; RoPE, the
    write of the new keys and values into the cache, the residual adds, the MLP's activation and
    sampling are kernels of their own, counted in the part ``elementwise`` (their few FLOPs run on the
    vector units and are counted as zero); flash attention reads Q, K and V and writes its output and an
    fp32 log-sum-exp (explicit attention writes the scores; in a prompt a mask kernel reads them with a
    one-byte causal mask and writes them again; softmax reads and writes them; the value product reads
    them: Dao et al.'s standard attention, as chapter 4 counts it); decode reads the cache including the new token, and causal attention counts its
    triangle exactly. The kernel choices are :data:`OPTIONS`; ``omit`` leaves named elementwise kernels
    out, to match a measurement that ran without them.

Parts, in order (:data:`PARTS`): weights (the decoder layers' matmuls), embedding, lm_head, norms,
kv_cache, attention, activations, elementwise. A part that costs nothing under an accounting is kept as
a zero so tables line up.

Mixture-of-experts models (chapter 10): every token's FLOPs go through its ``k`` experts whatever the
routing, but which experts' weights a step reads depends on it once a step holds more than one token.
A step of one token (decode at batch 1) is exact; with more, ``routing`` must be named (there is no
default: the routing is a property of the traffic, not of the model): ``'uniform'`` (each token picks
``E_tok`` of the ``E`` experts independently and uniformly: ``E (1 - (1 - E_tok/E)^T)`` read per layer in
expectation), ``'best'`` (every token sent to the same ``E_tok``) or ``'worst'`` (as many distinct experts as
the tokens can reach, ``min(E, E_tok T)``), see :func:`roofline.parallel.moe.experts_touched`. Without it a
:class:`~roofline.core.model.NotModelledError` names the argument.

Latent attention (DeepSeek's MLA) is modelled under ``accounting='text'``: decode runs the absorbed
kernel DeepSeek serves with (the key and value up-projections folded into the query and the output,
so each head scores against the cached latent and rotary key, ``2 heads (2 r + d_rope)`` FLOPs per
cached token and layer, reading only the latent cache); prefill expands every token's latent once
(``kv_b_proj``, counted as its matmul) and attends per head, ``2 heads (d_nope + d_rope + d_v)`` per
pair, causal at half. The refined, kernel-by-kernel accounting of MLA is not modelled and raises
:class:`~roofline.core.model.NotModelledError`.
"""

from __future__ import annotations

from types import MappingProxyType

import numpy as np
from numpy.typing import ArrayLike

from roofline.core.checks import broadcast, number, unknown_name
from roofline.core.cost import Breakdown
from roofline.core.formats import Formats, formats
from roofline.core.model import Linear, Model, NotModelledError, load_model
from roofline.core.ops import Op, attention_flops
from roofline.core.routing import check_routing, experts_touched
from roofline.core.roof import predict

__all__ = ["ACCOUNTINGS", "OPTIONS", "ELEMENTWISE_OPS", "PARTS", "decode_step", "prefill", "verify_step",
           "attention_parity_tokens", "compute_bound_batch", "build_step", "check_modelled"]

ACCOUNTINGS = ("text", "refined")


def _check_accounting(accounting: str) -> None:
    if accounting not in ACCOUNTINGS:
        raise ValueError(f"accounting must be one of {', '.join(map(repr, ACCOUNTINGS))}, got {accounting!r}")


def check_modelled(m: Model, tokens: ArrayLike, what: str, routing=None, accounting: str = "text") -> None:
    """Refuse what the package cannot count: MLA kernel by kernel, and MoE steps of more than one token
    with no routing named."""
    if routing is not None:
        check_routing(routing)
    if m.mla is not None and accounting != "text":
        raise NotModelledError(
            f"{what} of {m.name}: multi-head latent attention (MLA) is modelled under accounting='text' only "
            "(the absorbed decode kernel, the expanded prefill); its kernels one by one are not modelled yet")
    if m.moe is not None and routing is None and np.any(np.asarray(tokens) > 1):
        e = m.moe
        raise NotModelledError(
            f"{what} of {m.name}: with more than one token in a step, which experts are read depends on the "
            f"routing (between {e.experts_per_token} and {e.num_experts} of the {e.num_experts} experts per "
            "layer); name it: routing='uniform' (independent uniform choices, the expected count), 'best' "
            "(every token to the same experts) or 'worst' (as many experts as the tokens can reach). One token "
            "(decode at batch 1) is exact without it")


def _mla_attention_flops(m: Model, queries, keys, *, decode: bool, causal):
    """Score and value FLOPs of latent attention over every layer: absorbed in decode (each head works in
    the latent space, ``r + d_rope`` wide for scores, ``r`` for values), expanded per head in prefill
    (``d_nope + d_rope`` for scores, ``d_v`` for values); :func:`roofline.core.ops.attention_flops` counts the
    pairs (``4 pairs`` per unit of width), so the width here is half the per-pair FLOPs over the heads."""
    a, heads = m.mla, m.num_heads
    per_pair = heads * ((2 * a.kv_lora_rank + a.qk_rope_head_dim) if decode
                        else (a.qk_nope_head_dim + a.qk_rope_head_dim + a.v_head_dim))  # FLOPs / 2 per pair
    return attention_flops(queries, keys, 1, m.num_layers, causal=causal) * per_pair / 2


OPTIONS = {
    "attention": ("flash", "explicit"),
    "qkv": ("fused", "separate"),
    "mlp": ("fused", "separate"),
    "lm_head": ("all", "last"),
}
"""Named kernel choices of the refined accounting, each with its default first.

``attention``: ``'flash'`` reads Q, K and V and writes the output and its log-sum-exp (Dao et al. 2022);
``'explicit'`` writes the score matrix, softmax reads and writes it, and the value product reads it.
``qkv``: the three projections as one ``'fused'`` matmul (as serving engines run them) or three
``'separate'`` ones, each reading the layer's input. ``mlp``: ``'fused'``, one gate-up matmul and one
activation kernel (SiLU times up), or ``'separate'``: gate and up matmuls, SiLU and the product as two
elementwise kernels. ``lm_head``: logits
for ``'all'`` tokens of a prefill, or the ``'last'`` of each sequence (what a server keeps).
"""

# operations of the refined accounting that are not matmuls or attention: they can be left out by name
# (``omit``), e.g. to match a measurement that ran without norms or rotary embeddings
ELEMENTWISE_OPS = ("embedding", "attn_norm", "rope", "kv_write", "attn_residual", "mlp_norm", "act", "silu", "mul",
                   "mlp_residual", "final_norm", "sample")

PARTS = ("weights", "embedding", "lm_head", "norms", "kv_cache", "attention", "activations", "elementwise")


_DEFAULTS = MappingProxyType({key: choices[0] for key, choices in OPTIONS.items()})


def _check_options(options: dict, omit) -> tuple[dict, tuple]:
    if not options and not omit:
        return _DEFAULTS, ()
    out = {}
    for key, value in options.items():
        if key not in OPTIONS:
            raise TypeError(f"unknown option {key!r}; the options are {', '.join(OPTIONS)}")
        if value not in OPTIONS[key]:
            raise ValueError(f"{key} must be one of {', '.join(map(repr, OPTIONS[key]))}, got {value!r}")
    for key, choices in OPTIONS.items():
        out[key] = options.get(key, choices[0])
    omit = (omit,) if isinstance(omit, str) else tuple(omit)
    for name in omit:
        if name not in ELEMENTWISE_OPS:
            raise unknown_name("operation to omit", name, ELEMENTWISE_OPS)
    return out, omit


def _linears(m: Model, qkv_fused: bool = False, mlp_fused: bool = False) -> tuple:
    """((Linear, count), ...) for the model's decoder layers, with q/k/v and gate/up fused into one
    matmul each where asked (and possible); worked out once per Model object and choice."""
    cache = m.__dict__.get("_roofline_linears")
    if cache is None:
        cache = {}
        object.__setattr__(m, "_roofline_linears", cache)  # a cache beside the frozen fields, not a field
    key = (qkv_fused, mlp_fused)
    out = cache.get(key)
    if out is None:
        out = dict(_count_linears(m))
        if qkv_fused:
            out = _fuse(out, ("q_proj", "k_proj", "v_proj"), "qkv_proj")
        if mlp_fused:
            out = _fuse(out, ("gate_proj", "up_proj"), "gate_up_proj")
        out = cache[key] = tuple(out.items())
    return out


def _count_linears(m: Model):
    """(count, Linear) pairs for the matmuls one token meets in the decoder layers: the same linear in
    every layer counts once with the number of layers (experts used k times count k times)."""
    L = m.num_layers
    n_moe = m.moe.moe_layers(L) if m.moe is not None else 0  # counted, not looped: a config may be huge
    counts: dict = {}

    def add(linears, layers):
        for lin in linears:
            counts[lin] = counts.get(lin, 0) + layers

    if L - n_moe:
        add((*m.attention_linears(), *m.dense_mlp_linears()), L - n_moe)
    if n_moe:
        e = m.moe
        add((*m.attention_linears(), m.router(), *m.shared_expert_linears(), *(m.expert_linears() * e.experts_per_token)),
            n_moe)
    return MappingProxyType(counts)


_ATTENTION_LINEARS = frozenset(("q_proj", "k_proj", "v_proj", "qkv_proj"))


def _fuse(linears: dict, names: tuple, fused: str) -> dict:
    """Replace the linears called ``names`` (same input, same count) by one wider one."""
    found = [lin for lin in linears if lin.name in names]
    if len(found) != len(names) or len({linears[lin] for lin in found}) != 1 or len({lin.in_features for lin in found}) != 1:
        return linears
    count = linears[found[0]]
    out, done = {}, False
    for lin, c in linears.items():
        if lin.name in names:
            if not done:
                out[Linear(fused, found[0].in_features, sum(f.out_features for f in found),
                           any(f.bias for f in found))] = count
                done = True
        else:
            out[lin] = c
    return out


def _ops(m: Model, batch, queries, keys, *, decode: bool, f: Formats, accounting: str, options: dict, omit,
         routing=None, experts_read=None) -> list:
    """The kernels of one step: ``batch`` sequences of ``queries`` new tokens attending to ``keys``
    tokens each (the cache plus the new ones). In a MoE layer the routed experts' FLOPs follow the
    tokens (``k`` experts each) and their weight reads the distinct experts touched under ``routing``
    (:func:`roofline.parallel.moe.experts_touched`), or ``experts_read`` per layer when given (expert parallelism)."""
    L, d, V = m.num_layers, m.hidden_size, m.vocab_size
    wb, a, math = f.bytes("weights"), f.bytes("activations"), f.math
    eb = f.bytes("embeddings")  # the embedding table, output head and norms (the weights' format unless set)
    T = batch * queries  # tokens through the matmuls
    out_rows = T if (options["lm_head"] == "all") else batch  # decode: T == batch; a verify step scores every query
    qw = m.attention_width if m.mla is None else None  # MLA: text accounting only (check_modelled)
    kvw = m.num_kv_heads * m.head_dim  # K (or V) numbers per token per layer
    kv_written = batch * m.kv_cache_bytes(queries, f.kv)  # the new tokens' K and V (a window keeps its last ones)
    ops: list[Op] = []
    add = ops.append
    refined = accounting == "refined"
    linears = _linears(m, refined and options["qkv"] == "fused", refined and options["mlp"] == "fused")

    if m.moe is not None:  # routed experts: weights read for the experts the step's tokens touch
        e = m.moe
        n_moe = e.moe_layers(L)
        if experts_read is None:
            experts_read = experts_touched(m, T, routing or "uniform")  # exactly k for one token, any routing
    else:
        n_moe = 0

    def matmul(lin, count):
        acts = {"activations": T * a * lin.in_features * count} if refined else {}
        outs = {"activations": T * a * lin.out_features * count} if refined else {}
        read, rows = count, T
        if lin.name.startswith("expert."):  # count is k per MoE layer; the weights are read once per expert touched
            read = experts_read * n_moe
            rows = T * e.experts_per_token / experts_read  # tokens per expert touched (a calibrated roof's m)
        return Op.build(lin.name.removesuffix("_proj"), "matmul", count=count, math=math,
                        flops={"weights": 2 * T * lin.params * count},
                        reads={"weights": wb * lin.params * read, **acts}, writes=outs,
                        m=rows, n=lin.out_features, k=lin.in_features)

    def elementwise(name, count, reads, writes, kind="elementwise"):
        if name not in omit:
            add(Op.build(name, kind, count=count, math=math, reads=reads, writes=writes))

    if not refined:
        # the first-order count: every parameter a weight read once and used once per token
        table = m.embedding_params
        add(Op.build("embedding", "lookup", math=math, flops={"embedding": 2 * T * table}, reads={"embedding": eb * table}))
        add(Op.build("norms", "elementwise", count=2 * L + 1, math=math, flops={"norms": 2 * T * m.norm_params},
                     reads={"norms": eb * m.norm_params}))
    else:
        # the embedding gathers one row per token (today's ``embedding`` part) and writes it out
        tied = eb * m.embedding_params if m.tie_word_embeddings else 0.0
        elementwise("embedding", 1, {"embedding": T * d * a}, {"elementwise": T * d * a}, kind="lookup")
    att = [(lin, c) for lin, c in linears if lin.name in _ATTENTION_LINEARS]
    causal = "half" if accounting == "text" else "exact"
    # every layer's score and value products; a sliding-window layer sees only its window
    if m.mla is not None:  # latent attention, text accounting: absorbed in decode, expanded in prefill
        att_flops = batch * _mla_attention_flops(m, queries, keys, decode=decode, causal=False if decode else causal)
    elif decode and np.all(np.asarray(queries) == 1):  # one query per sequence attends to every cached token (and, refined, itself)
        att_flops = batch * m.attention_flops(1, keys)
    elif decode:  # a verify step: the new queries are the last of the keys, each seeing those before it
        one = np.asarray(queries) == 1  # (a sweep over queries may start at a plain decode step)
        att_flops = batch * np.where(one, m.attention_flops(1, keys),
                                     m.attention_flops(queries, np.maximum(keys, queries), causal="exact"))
    elif options["attention"] == "explicit" and refined:  # the whole square, masked afterwards
        att_flops = 4 * batch * queries * keys * qw * L
    else:
        att_flops = batch * m.attention_flops(queries, keys, causal=causal)
    kv_read = batch * m.kv_cache_bytes(keys, f.kv) if decode else 0.0
    groups = batch * m.num_kv_heads if decode and m.mla is None else None  # a decode kernel's pieces of work

    if not refined:  # the projections, attention over the cache, then the rest of the layer's matmuls
        for lin, c in att:
            add(matmul(lin, c))
        add(Op.build("attention", "attention", count=L, math=math, flops={"attention": att_flops},
                     reads={"kv_cache": kv_read} if decode else {}, writes={} if decode else {"kv_cache": kv_written},
                     queries=queries, keys=keys, groups=groups))
        for lin, c in linears:
            if lin.name not in _ATTENTION_LINEARS:
                add(matmul(lin, c))
    else:
        x = T * d * a * L  # one pass over every layer's hidden states
        norm = ({"norms": eb * d * L, "elementwise": x}, {"elementwise": x})  # read the scale and the input, write
        residual = ({"elementwise": 2 * x}, {"elementwise": x})  # read the two summands, write the sum
        q_in = T * qw * a * L

        def qkv_in(k_and_v: int, query: bool = True) -> dict:
            """What an attention kernel reads: Q (``query``) and K and/or V (``k_and_v`` of them), from the
            cache in decode, from the projections in prefill."""
            if decode:
                return {"activations": q_in if query else 0.0, "kv_cache": kv_read * k_and_v / 2}
            return {"activations": (q_in if query else 0.0) + T * k_and_v * kvw * a * L}

        elementwise("attn_norm", L, *norm)
        for lin, c in att:
            add(matmul(lin, c))
        elementwise("rope", L, {"elementwise": T * (qw + kvw) * a * L}, {"elementwise": T * (qw + kvw) * a * L})
        elementwise("kv_write", L, {"elementwise": T * 2 * kvw * a * L}, {"kv_cache": kv_written})
        if options["attention"] == "flash":
            lse = T * m.num_heads * 4 * L  # fp32 log-sum-exp per query and head
            add(Op.build("attention", "attention", count=L, math=math, flops={"attention": att_flops},
                         reads=qkv_in(2), writes={"activations": q_in + lse}, queries=queries, keys=keys, groups=groups))
        else:  # the score product reads Q and K; softmax rewrites the scores; the value product reads them and V
            scores = batch * m.num_heads * queries * keys * a * L
            add(Op.build("scores", "matmul", count=L, math=math, flops={"attention": att_flops / 2},
                         reads=qkv_in(1), writes={"attention": scores}, m=queries, n=keys, k=m.head_dim))
            if not decode:  # a causal prompt: a mask kernel rewrites the scores, reading a one-byte mask of the
                # square once per layer (chapter 4's count, roofline.workloads.tiling.explicit_attention)
                add(Op.build("mask", "elementwise", count=L, math=math, reads={"attention": scores + queries * keys * L},
                             writes={"attention": scores}))
            add(Op.build("softmax", "elementwise", count=L, math=math, reads={"attention": scores},
                         writes={"attention": scores}))
            add(Op.build("pv", "matmul", count=L, math=math, flops={"attention": att_flops / 2},
                         reads={**qkv_in(1, query=False), "attention": scores}, writes={"activations": q_in},
                         m=queries, n=m.head_dim, k=keys))
        for lin, c in linears:
            if lin.name == "o_proj":
                add(matmul(lin, c))
        elementwise("attn_residual", L, *residual)
        elementwise("mlp_norm", L, *norm)
        for lin, c in linears:  # gate and up (or gate_up), and for a mixture of experts its router and experts
            if lin.name not in _ATTENTION_LINEARS and lin.name not in ("o_proj", "down_proj"):
                add(matmul(lin, c))
        if m.moe is None:
            width = m.intermediate_size
            if options["mlp"] == "fused":
                elementwise("act", L, {"elementwise": 2 * T * width * a * L}, {"elementwise": T * width * a * L})
            else:
                elementwise("silu", L, {"elementwise": T * width * a * L}, {"elementwise": T * width * a * L})
                elementwise("mul", L, {"elementwise": 2 * T * width * a * L}, {"elementwise": T * width * a * L})
        for lin, c in linears:
            if lin.name == "down_proj":
                add(matmul(lin, c))
        elementwise("mlp_residual", L, *residual)
        elementwise("final_norm", 1, {"norms": eb * d, "elementwise": T * d * a}, {"elementwise": T * d * a})
    # the output head: its weights are the embedding's when tied (read once, counted under embedding)
    head = m.lm_head
    head_w = {"lm_head": eb * m.lm_head_params} if not (refined and m.tie_word_embeddings) else {"embedding": tied}
    io_in = {"activations": out_rows * d * a} if refined else {}
    io_out = {"activations": out_rows * V * a} if refined else {}
    add(Op.build("lm_head", "matmul", math=math, flops={"lm_head": 2 * out_rows * head.params},
                 reads={**head_w, **io_in}, writes=io_out, m=out_rows, n=V, k=d))
    if refined:
        picked = T if decode else batch  # a verify step samples at every query (decode: T == batch)
        elementwise("sample", 1, {"elementwise": picked * V * a}, {"elementwise": picked * 8.0})
    return ops


def build_step(name, m, batch, queries, keys, *, decode, dtype, weights_dtype, kv_dtype, math_dtype, accounting,
          omit, options, embeddings_dtype=None, routing=None, experts_read=None) -> Breakdown:
    _check_accounting(accounting)
    f = formats(dtype, weights_dtype=weights_dtype, kv_dtype=kv_dtype, math_dtype=math_dtype,
                embeddings_dtype=embeddings_dtype)
    options, omit = _check_options(options, omit)
    if accounting == "text" and (omit or any(options[k] != OPTIONS[k][0] for k in ("attention", "qkv", "mlp"))):
        raise ValueError("kernel options (attention, qkv, mlp, omit) belong to accounting='refined'; the "
                         "first-order count has no kernels to choose")
    ops = _ops(m, batch, queries, keys, decode=decode, f=f, accounting=accounting, options=options, omit=omit,
               routing=routing, experts_read=experts_read)
    return Breakdown.from_ops(name, ops, f, PARTS)


def decode_step(model: Model | str, batch: ArrayLike=1, context: ArrayLike=0, *, dtype: str = "bf16", kv_dtype: str | None = None,
                weights_dtype: str | None = None, math_dtype: str | None = None, accounting: str = "text",
                omit=(), embeddings_dtype: str | None = None, routing: str | None = None, **options) -> Breakdown:
    """One decode step: ``batch`` sequences each produce one token, each attending to ``context``
    cached tokens. Broadcasts over arrays of ``batch`` and ``context``.

    Formats: ``dtype`` for everything, or ``weights_dtype``, ``kv_dtype``, ``math_dtype`` and
    ``embeddings_dtype`` apart (see :func:`roofline.core.formats.formats`; group-wise formats such as
    ``'int4-g128'`` count their scales). Under ``accounting='refined'`` the kernel choices of
    :data:`OPTIONS` apply (``attention='explicit'``, ``qkv='fused'``...), and ``omit`` leaves out named
    elementwise kernels (:data:`ELEMENTWISE_OPS`). The result keeps its operations (``.ops``).
    ``routing`` ('uniform', 'best' or 'worst') says which experts a mixture of experts reads at
    batch > 1 (required there; ignored by a dense model).

    Llama 3 8B, batch 1, no context, text accounting: 16.06 GFLOP over 16.06 GB, intensity 1.
    """
    m = load_model(model)
    batch = number("batch", batch, integer=True)
    context = number("context", context, integer=True, strict=False)
    broadcast(batch=batch, context=context)
    check_modelled(m, batch, "decode_step", routing, accounting)
    keys = context + 1 if accounting == "refined" else context
    return build_step(f"decode step of {m.name}", m, batch, 1, keys, decode=True, dtype=dtype, weights_dtype=weights_dtype,
                 kv_dtype=kv_dtype, math_dtype=math_dtype, accounting=accounting, omit=omit, options=options,
                 embeddings_dtype=embeddings_dtype, routing=routing)


def prefill(model: Model | str, tokens: ArrayLike, batch: ArrayLike=1, *, dtype: str = "bf16", kv_dtype: str | None = None,
            weights_dtype: str | None = None, math_dtype: str | None = None, accounting: str = "text",
            omit=(), embeddings_dtype: str | None = None, routing: str | None = None, **options) -> Breakdown:
    """Process a prompt of ``tokens`` tokens for ``batch`` sequences in one pass, writing their KV cache.

    Causal attention is counted at half the square in the first-order count (2 S^2 x width x layers
    FLOPs), exactly in the refined one (flash skips the masked half; the explicit form computes the
    whole square). The lm_head runs over every token (``lm_head='all'``, as in the text and in the
    measured H200 runs); ``lm_head='last'`` keeps only each sequence's last logits, as a server does.
    Formats, kernel options and ``routing`` (a mixture of experts) as in :func:`decode_step`.
    Llama 3 8B, 2048 tokens: 34.0 TFLOP, 3.2% of it attention; 16.06 GB + 268 MB; intensity about 2082.
    """
    m = load_model(model)
    tokens = number("tokens", tokens, integer=True)
    batch = number("batch", batch, integer=True)
    broadcast(tokens=tokens, batch=batch)
    check_modelled(m, tokens * batch, "prefill", routing, accounting)
    return build_step(f"prefill of {m.name}", m, batch, tokens, tokens, decode=False, dtype=dtype,
                 weights_dtype=weights_dtype, kv_dtype=kv_dtype, math_dtype=math_dtype, accounting=accounting,
                 omit=omit, options=options, embeddings_dtype=embeddings_dtype, routing=routing)


def verify_step(model: Model | str, queries: ArrayLike, context: ArrayLike=0, batch: ArrayLike=1, *, dtype: str = "bf16", kv_dtype: str | None = None,
                weights_dtype: str | None = None, math_dtype: str | None = None, accounting: str = "text",
                omit=(), embeddings_dtype: str | None = None, routing: str | None = None, **options) -> Breakdown:
    """One step that scores ``queries`` new tokens of each of ``batch`` sequences against ``context``
    cached tokens: speculative decoding's verify pass (chapter 12), and a prefill chunk on top of a cache.

    The weights are read once for all ``batch x queries`` tokens; each sequence's cache is read once; new
    query ``i`` attends to the cache and to the ``i`` new tokens up to itself (the causal count of
    :func:`roofline.core.ops.attention_flops` with ``causal='exact'``); the lm_head scores every query.
    ``queries=1`` is :func:`decode_step` exactly. Formats, accountings, kernel options and a mixture of
    experts' ``routing`` (required when ``batch x queries`` exceeds one) as there. Broadcasts over
    ``queries``, ``context`` and ``batch``.
    """
    m = load_model(model)
    queries = number("queries", queries, integer=True)
    batch = number("batch", batch, integer=True)
    context = number("context", context, integer=True, strict=False)
    broadcast(queries=queries, batch=batch, context=context)
    check_modelled(m, batch * queries, "verify_step", routing, accounting)
    # the first-order count reads the cache but not the new tokens' own keys (as decode_step); refined reads both.
    # Without a cache the first-order count still lets each query see the new tokens before it (keys >= queries).
    if accounting == "refined":
        keys = context + queries
    else:
        keys = np.where(np.asarray(queries) > 1, np.maximum(context + queries - 1, queries), context + queries - 1)
        keys = float(keys) if keys.ndim == 0 else keys
    return build_step(f"verify step of {m.name}", m, batch, queries, keys, decode=True, dtype=dtype,
                 weights_dtype=weights_dtype, kv_dtype=kv_dtype, math_dtype=math_dtype, accounting=accounting,
                 omit=omit, options=options, embeddings_dtype=embeddings_dtype, routing=routing)


def attention_parity_tokens(model: Model | str) -> float:
    """Prompt length at which prefill's causal attention FLOPs equal its weight FLOPs (text accounting).

    ``2 S^2 width layers = 2 N S`` gives ``S = N / (width * layers)``: about 61k tokens for Llama 3 8B.
    Below it the weights dominate, which is why attention is a few percent of a 2048-token prefill.
    """
    m = load_model(model)
    return m.active_params / (m.attention_width * m.num_layers)


# The longest batch sweep compute_bound_batch makes (its arrays hold every batch from 1 to max_batch).
_MAX_SWEEP = 2**20


def compute_bound_batch(model: Model | str, roof, context=0, *, max_batch: int = 1 << 16, **options):
    """The smallest decode batch that the roofline calls compute-bound under ``roof``, or None.

    One vectorized call over every batch from 1 to ``max_batch``. With a long context the KV-cache
    reads grow with the batch as fast as the FLOPs do, and decode may never cross the ridge: None.
    ``options`` go to :func:`decode_step` (``accounting``, ``dtype``, ``kv_dtype``).
    """

    max_batch = number("max_batch", max_batch, integer=True)
    if not np.ndim(max_batch) and max_batch > _MAX_SWEEP:  # one array of max_batch batches: bound it first
        raise ValueError(f"max_batch must be at most {_MAX_SWEEP:,} (2**20; the sweep holds one array of every "
                         f"batch), got {max_batch:g}")
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
