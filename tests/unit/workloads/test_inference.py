"""Decode and prefill workloads, both accountings."""

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import roofline as rl
import roofline.workloads.inference

PARTS = list(rl.PARTS)


def test_parts_are_the_same_under_both_accountings(llama):
    for acc in rl.ACCOUNTINGS:
        assert list(rl.decode_step(llama, accounting=acc)) == PARTS
        assert list(rl.prefill(llama, 128, accounting=acc)) == PARTS


def test_text_decode_counts_every_parameter_once(llama):
    step = rl.decode_step(llama)
    assert step.flops == 2 * llama.params and step.bytes == 2 * llama.params
    assert step.intensity == 1


@given(batch=st.integers(1, 100_000))
def test_text_decode_intensity_is_the_batch(batch):
    assert rl.decode_step("llama-3-8b", batch).intensity == pytest.approx(batch)


@settings(max_examples=30)
@given(batch=st.integers(1, 4096), context=st.integers(0, 131_072))
def test_refined_decode_reads_at_least_the_layers_weights_and_the_cache(batch, context):
    m = rl.load_model("llama-3-8b")
    r = rl.decode_step(m, batch, context, accounting="refined")
    assert r.bytes >= 2 * m.num_layers * m.layer_matmul_params + batch * context * m.kv_bytes_per_token()
    # the new token's K and V are written to the cache, then read back with the context
    assert r["kv_cache"].bytes == batch * (context + 1) * m.kv_bytes_per_token() + batch * m.kv_bytes_per_token()


def test_decode_sweep_is_one_call_and_matches_the_loop(llama):
    b = np.array([1, 8, 64])[None, :]
    c = np.array([0, 4096])[:, None]
    sweep = rl.decode_step(llama, b, c, accounting="refined")
    assert sweep.flops.shape == (2, 3)
    one = rl.decode_step(llama, 8, 4096, accounting="refined")
    assert sweep.flops[1, 1] == one.flops and sweep.bytes[1, 1] == one.bytes


def test_kv_cache_reads_cap_decode_intensity(llama, h100):
    # with 2048 tokens of context the cache grows with the batch as fast as the FLOPs
    assert rl.compute_bound_batch(llama, h100, context=2048) is None
    assert rl.compute_bound_batch(llama, h100) == int(np.floor(h100.ridge_point())) + 1


def test_prefill_attention_counting(llama):
    text = rl.prefill(llama, 2048)
    assert text["attention"].flops == 2 * 2048**2 * llama.attention_width * llama.num_layers
    refined = rl.prefill(llama, 2048, accounting="refined")
    assert refined["attention"].flops == pytest.approx(text["attention"].flops * 2049 / 2048)
    assert refined["embedding"].flops == 0


def test_prefill_batch_scales_work_but_not_weights(llama):
    one, four = rl.prefill(llama, 512), rl.prefill(llama, 512, batch=4)
    assert four.flops == pytest.approx(4 * one.flops)
    assert four["weights"].bytes == one["weights"].bytes
    assert four["kv_cache"].bytes == 4 * one["kv_cache"].bytes


def test_attention_parity(llama):
    s = rl.attention_parity_tokens(llama)
    p = rl.prefill(llama, int(round(s)))
    linear = p.flops - p["attention"].flops
    assert p["attention"].flops == pytest.approx(linear, rel=1e-4)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: rl.decode_step("llama-3-8b", batch=-1), "batch must be"),
        (lambda: rl.decode_step("llama-3-8b", batch=0), "batch must be"),
        (lambda: rl.decode_step("llama-3-8b", batch=float("nan")), "batch must be"),
        (lambda: rl.decode_step("llama-3-8b", batch=1.5), "batch must be a whole number"),
        (lambda: rl.decode_step("llama-3-8b", context=-5), "context must be"),
        (lambda: rl.decode_step("llama-3-8b", accounting="exact"), "accounting must be one of"),
        (lambda: rl.prefill("llama-3-8b", tokens=0), "tokens must be"),
        (lambda: rl.prefill("llama-3-8b", tokens=np.array([128, -1])), "tokens must be"),
    ],
)
def test_bad_input_names_the_argument(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_unknown_model_and_dtype():
    with pytest.raises(KeyError, match="did you mean .*'llama-3-8b'"):
        rl.decode_step("lama-3-8b")
    with pytest.raises(KeyError, match="unknown dtype 'bf8'"):
        rl.decode_step("llama-3-8b", dtype="bf8")


# --- workloads as operations ----------------------------------------------------------------------

@pytest.mark.parametrize("accounting", rl.ACCOUNTINGS)
@pytest.mark.parametrize("work", ["decode", "prefill"])
def test_parts_are_the_grouping_of_the_operations(accounting, work):
    b = (rl.decode_step("llama-3-8b", 8, 1024, accounting=accounting) if work == "decode"
         else rl.prefill("llama-3-8b", 512, 2, accounting=accounting))
    assert b.ops, "a workload keeps its kernels"
    for part in b:
        assert sum(o.parts.get(part, rl.Cost()).flops for o in b.ops) == pytest.approx(b[part].flops, rel=1e-12)
        assert sum(o.parts.get(part, rl.Cost()).bytes for o in b.ops) == pytest.approx(b[part].bytes, rel=1e-12)
    for o in b.ops:
        assert sum(c.bytes for c in o.parts.values()) == pytest.approx(o.reads + o.writes, rel=1e-12)
    assert b.subtotal("weights", "embedding", "lm_head").bytes == pytest.approx(
        b["weights"].bytes + b["embedding"].bytes + b["lm_head"].bytes)


def test_refined_operations_keep_the_old_part_totals_where_the_accounting_is_the_same(llama):
    """Separate projections and no elementwise kernels: the refined parts of before, plus what the
    kernels add by name (the new token's K and V written, attention's Q read and output written)."""
    m, a, L = llama, 2, llama.num_layers
    kvb = m.kv_bytes_per_token()
    old = dict(qkv="separate", mlp="separate", omit=rl.workloads.inference.ELEMENTWISE_OPS)
    b, c = 4, 1000
    step = rl.decode_step(m, b, c, accounting="refined", **old)
    per_layer = sum(lin.in_features + lin.out_features for lin in m.layer_linears())
    assert step["weights"].bytes == 2 * m.decoder_matmul_params
    assert step["activations"].bytes == (b * a * (L * per_layer + m.hidden_size + m.vocab_size)  # every matmul's in and out
                                         + L * (2 * b * m.attention_width * a + b * m.num_heads * 4))  # Q, O, LSE
    assert step["kv_cache"].bytes == b * (c + 1) * kvb  # the cache read; its write is the kv_write kernel, omitted
    assert step["embedding"].bytes == 0 and step["elementwise"].bytes == 0 and step["norms"].bytes == 0
    full = rl.decode_step(m, b, c, accounting="refined")
    assert full["kv_cache"].bytes == step["kv_cache"].bytes + b * kvb
    assert full["norms"].bytes == 2 * m.norm_params


def test_attention_traffic_against_dao_et_al(llama):
    """Standard attention (Dao et al. 2022, Algorithm 0) moves 4Nd + 4N^2 numbers per head: Q and K in, S
    out, S in and P out, P and V in, O out. Flash attention moves Q, K, V and O once, plus its log-sum-exp."""
    m = rl.load_model("llama-2-7b")  # multi-head: every head has its own K and V, as in the paper
    N, d, H, L, a = 1024, m.head_dim, m.num_heads, m.num_layers, 2
    flash = rl.prefill(m, N, accounting="refined")
    explicit = rl.prefill(m, N, accounting="refined", attention="explicit")
    pieces = ("scores", "softmax", "pv")
    moved = sum(explicit.op(p).bytes for p in pieces)
    assert moved == L * H * (4 * N * d + 4 * N**2) * a
    assert flash.op("attention").bytes == L * H * (4 * N * d * a + 4 * N)
    # tiling changes the bytes, not the work: the explicit form computes the masked half too
    assert sum(explicit.op(p).flops for p in pieces) == 4 * N * N * d * H * L
    assert flash.op("attention").flops == 4 * N * (N + 1) / 2 * d * H * L
    # the causal mask is one more pass over the scores, plus a one-byte mask of the square per layer
    assert explicit.op("mask").bytes == L * (2 * H * N**2 * a + N**2) and explicit.op("mask").flops == 0
    assert explicit["attention"].bytes == L * (H * 6 * N**2 * a + N**2) and flash["attention"].bytes == 0


def test_explicit_attention_is_chapter_4s_count():
    """One count of standard attention in the package: a prompt's explicit attention moves, layer by layer,
    the score traffic roofline.workloads.tiling counts for the same shape (chapter 4), masked and grouped-query."""
    from roofline.workloads import tiling

    for name, N in (("llama-3-8b", 2048), ("llama-2-7b", 512)):
        m = rl.load_model(name)
        step = rl.prefill(m, N, accounting="refined", attention="explicit")
        one = tiling.explicit_attention(N, m.head_dim, m.num_heads, kv_heads=m.num_kv_heads, causal=True)
        assert step["attention"].bytes == m.num_layers * one.part("scores").bytes
        assert step.subtotal("attention").flops == m.num_layers * one.part("attention").flops
    decode = rl.decode_step("llama-3-8b", 1, 4096, accounting="refined", attention="explicit")
    assert "mask" not in [o.name for o in decode.ops]  # one query sees every cached key: nothing to mask


def test_lm_head_over_the_last_token_only(llama):
    every, last = rl.prefill(llama, 2048, accounting="refined"), rl.prefill(llama, 2048, accounting="refined", lm_head="last")
    assert every["lm_head"].flops == 2048 * last["lm_head"].flops == 2048 * 2 * llama.vocab_size * llama.hidden_size


def test_fused_projections_read_the_input_once(llama):
    fused, separate = (rl.decode_step(llama, 16, accounting="refined", qkv=q) for q in ("fused", "separate"))
    assert [o.name for o in fused.ops if o.kind == "matmul"][:2] == ["qkv", "o"]
    saved = separate["activations"].bytes - fused["activations"].bytes
    assert saved == 2 * 16 * 2 * llama.hidden_size * llama.num_layers  # two of three reads of the layer input
    assert fused.flops == separate.flops


@pytest.mark.parametrize("call, error, message", [
    (lambda: rl.decode_step("llama-3-8b", accounting="refined", attention="paged"), ValueError,
     "attention must be one of 'flash', 'explicit'"),
    (lambda: rl.decode_step("llama-3-8b", accounting="refined", fusion=True), TypeError, "unknown option 'fusion'"),
    (lambda: rl.decode_step("llama-3-8b", accounting="refined", omit=("ropes",)), KeyError, "did you mean 'rope'"),
    (lambda: rl.decode_step("llama-3-8b", attention="explicit"), ValueError, "belong to accounting='refined'"),
    (lambda: rl.decode_step("llama-3-8b", dtype="int3"), KeyError, "unknown dtype 'int3'"),
])
def test_bad_kernel_options_are_named(call, error, message):
    with pytest.raises(error, match=message):
        call()
@pytest.mark.parametrize("call, names", [
    (lambda: rl.decode_step("llama-3-8b", [1, 2, 3], [0, 1024]), "batch of shape (3,), context of shape (2,)"),
    (lambda: rl.prefill("llama-3-8b", [128, 256], [1, 2, 4]), "tokens of shape (2,), batch of shape (3,)"),
])
def test_broadcast_mismatches_name_the_arguments(call, names):
    with pytest.raises(ValueError, match=re.escape(names)):
        call()


def test_compute_bound_batch_wants_one_context(h100):
    with pytest.raises(TypeError, match="context must be a single number"):
        rl.compute_bound_batch("llama-3-8b", h100, context=[0, 1024])
    with pytest.raises(TypeError, match="max_batch must be a single whole number"):
        rl.compute_bound_batch("llama-3-8b", h100, max_batch=[4, 8])
# --- formulas a reader can check by hand, in Llama 3 8B's config numbers (the `shape` fixture) ----


def _widths(shape):
    """Query width (heads x head size, 4096) and K/V width (KV heads x head size, 1024)."""
    return shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim


def _layer_io(shape):
    """Elements one token's matmuls read in and write out in one layer: q, k, v, o; gate, up, down."""
    h, i = shape.hidden, shape.intermediate
    q, kv = _widths(shape)
    return (h + q) + 2 * (h + kv) + (q + h) + 2 * (h + i) + (i + h)


def test_decode_attention_flops_at_a_context_are_4_x_context_x_width_x_layers(llama, shape):
    # one new token scores against `context` cached keys (QK^T) and sums as many values (PV):
    # 2 x 2 x context x width FLOPs per layer. 2048 tokens: 4 x 2048 x 4096 x 32 = 1.07 GFLOP.
    q, _ = _widths(shape)
    for batch, context in [(1, 2048), (8, 4096), (3, 1), (1, 131_072)]:
        text = rl.decode_step(llama, batch, context)
        attention = batch * 4 * context * q * shape.layers
        assert text["attention"].flops == attention
        assert text.flops == batch * 2 * llama.params + attention
        # the refined accounting lets the new token attend to itself too: context + 1 keys
        refined = rl.decode_step(llama, batch, context, accounting="refined")
        assert refined["attention"].flops == batch * 4 * (context + 1) * q * shape.layers
    assert rl.decode_step(llama, 1, 2048)["attention"].flops == pytest.approx(1.074e9, rel=1e-3)


@settings(max_examples=30)
@given(context=st.integers(0, 1 << 20), more=st.integers(1, 1 << 16))
def test_decode_attention_grows_linearly_with_the_context(context, more):
    m = rl.load_model("llama-3-8b")
    a, b = rl.decode_step(m, 1, context), rl.decode_step(m, 1, context + more)
    assert b["attention"].flops - a["attention"].flops == 4 * more * m.attention_width * m.num_layers
    assert b["kv_cache"].bytes - a["kv_cache"].bytes == more * m.kv_bytes_per_token()


def test_kv_cache_traffic_is_tokens_x_2_layers_kv_heads_head_size_x_bytes(llama, shape):
    per_token = 2 * shape.layers * shape.kv_heads * shape.head_dim * 2  # K and V in bf16: 131,072 B
    assert rl.decode_step(llama, 4, 2048)["kv_cache"].bytes == 4 * 2048 * per_token
    assert rl.decode_step(llama, 4, 2048, kv_dtype="fp8")["kv_cache"].bytes == 4 * 2048 * per_token / 2
    # weights in fp8, cache in bf16: the cache keeps its own format
    assert rl.decode_step(llama, 4, 2048, dtype="fp8", kv_dtype="bf16")["kv_cache"].bytes == 4 * 2048 * per_token
    assert rl.decode_step(llama, 4, 2048, dtype="fp8")["kv_cache"].bytes == 4 * 2048 * per_token / 2
    assert rl.prefill(llama, 2048)["kv_cache"].bytes == 2048 * per_token  # 268 MB written
    assert rl.prefill(llama, 2048, batch=3, kv_dtype="fp8")["kv_cache"].bytes == 3 * 2048 * per_token / 2


def test_text_decode_weights_are_read_once_at_the_weights_width(llama, shape):
    h, v = shape.hidden, shape.vocab
    for dtype, size in [("bf16", 2), ("fp8", 1), ("fp32", 4)]:
        step = rl.decode_step(llama, 16, 0, dtype=dtype)
        assert step.bytes == size * llama.params  # read once, whatever the batch
        assert step.flops == 16 * 2 * llama.params  # one multiply-add per parameter per token
        assert step["embedding"].bytes == step["lm_head"].bytes == size * v * h
        assert step["norms"].bytes == size * (2 * shape.layers + 1) * h


def test_refined_decode_bytes_part_by_part(llama, shape):
    h, i, v, n = shape.hidden, shape.intermediate, shape.vocab, shape.layers
    q, kv = _widths(shape)
    per_layer_weights = h * q + 2 * h * kv + q * h + 3 * h * i
    per_layer_io = _layer_io(shape)  # each matmul reads its input and writes its output once
    kv_token = 2 * n * kv * 2
    heads = llama.num_heads
    for batch, context in [(1, 0), (8, 2048)]:
        # separate projections: each matmul reads its own input (the fused default reads it once)
        r = rl.decode_step(llama, batch, context, accounting="refined", qkv="separate", mlp="separate")
        assert r["weights"].bytes == 2 * n * per_layer_weights
        assert r["weights"].flops == batch * 2 * n * per_layer_weights
        assert r["embedding"].bytes == batch * 2 * h and r["embedding"].flops == 0  # one row looked up per token
        assert r["lm_head"].bytes == 2 * v * h and r["lm_head"].flops == batch * 2 * v * h
        assert r["norms"].bytes == 2 * (2 * n + 1) * h and r["norms"].flops == 0
        # read the context and the new token, after writing the new token's K and V
        assert r["kv_cache"].bytes == batch * (context + 1) * kv_token + batch * kv_token
        # every matmul's input and output, the logits' input and output, and attention's Q in, output out
        # and fp32 log-sum-exp per head
        assert r["activations"].bytes == batch * 2 * (n * per_layer_io + h + v) + n * batch * (2 * q * 2 + heads * 4)


def test_prefill_flops_are_2_n_per_token_plus_causal_attention(llama, shape):
    q, kv = _widths(shape)
    h, v, n = shape.hidden, shape.vocab, shape.layers
    for s, batch in [(2048, 1), (512, 4)]:
        text = rl.prefill(llama, s, batch=batch)
        attention = batch * 2 * s * s * q * n  # half of 4 s^2 x width x layers
        assert text["attention"].flops == attention
        assert text.flops == batch * s * 2 * llama.params + attention
        assert text.bytes == 2 * llama.params + batch * s * 2 * n * kv * 2  # weights once, the cache written
        refined = rl.prefill(llama, s, batch=batch, accounting="refined", qkv="separate", mlp="separate")
        assert refined["attention"].flops == batch * 4 * s * (s + 1) / 2 * q * n  # the triangle, diagonal included
        flash_io = n * (2 * q + 2 * kv)  # flash attention reads Q, K, V and writes its output
        lse = n * llama.num_heads * 4  # and one fp32 log-sum-exp per query and head
        assert refined["activations"].bytes == batch * s * (2 * (n * _layer_io(shape) + h + v + flash_io) + lse)
    assert rl.prefill(llama, 2048).flops == pytest.approx(34.0e12, rel=2e-3)


def test_attention_parity_is_params_over_width_x_layers(llama, shape):
    # 2 S^2 w L = 2 N S  ->  S = N / (w L) = 8,030,261,248 / (4096 x 32) = 61,266 tokens
    assert rl.attention_parity_tokens(llama) == llama.params / (shape.heads * shape.head_dim * shape.layers)
    assert round(rl.attention_parity_tokens(llama)) == 61_266


def test_compute_bound_batch_is_the_first_batch_past_the_ridge(llama, h100):
    # text accounting at no context: intensity = batch, so the first whole batch above the ridge
    for hw in (h100, rl.get_hardware("h200-sxm")):
        assert rl.compute_bound_batch(llama, hw) == int(hw.peak_flops("bf16") / hw.hbm_bandwidth) + 1
    # in fp8 a byte carries one parameter: intensity 2 x batch against the fp8 ridge
    fp8 = rl.as_roof(h100, "fp8")
    assert rl.compute_bound_batch(llama, fp8, dtype="fp8") == int(fp8.peak_flops / fp8.bandwidth / 2) + 1


def test_a_huge_layer_count_is_counted_not_looped(llama):
    """Layers are grouped by kind and counted, so a model at the layer cap (100,000) is priced at once,
    exactly; past the cap the model itself is refused."""
    from dataclasses import replace

    from roofline.core.model import MAX_LAYERS

    big = replace(llama, num_layers=MAX_LAYERS)
    assert rl.decode_step(big)["weights"].flops == 2 * MAX_LAYERS * llama.layer_matmul_params
    moe = rl.load_model("mixtral-8x7b")
    huge = replace(moe, num_layers=MAX_LAYERS)
    assert rl.decode_step(huge)["weights"].bytes == pytest.approx(
        MAX_LAYERS / moe.num_layers * rl.decode_step(moe)["weights"].bytes, rel=1e-12)
    with pytest.raises(ValueError, match="num_layers must be at most 100,000"):
        replace(llama, num_layers=2**50)


def test_counts_past_2_to_the_53_are_refused_where_they_enter():
    with pytest.raises(ValueError, match=r"batch must be a whole number no larger than 9,007,199,254,740,992 \(2\*\*53\), got 1e\+308"):
        rl.decode_step("llama-3-8b", 1e308)
    with pytest.raises(ValueError, match="no larger than 9,007,199,254,740,992"):
        rl.decode_step("llama-3-8b", np.array([1.0, 2.0**60]))
    assert rl.decode_step("llama-3-8b", 2**53).flops < float("inf")  # the largest count still computes
    with pytest.raises(ValueError, match=r"max_batch must be at most 1,048,576"):
        rl.workloads.inference.compute_bound_batch("llama-3-8b", "h100-sxm", max_batch=2**53)
