"""Decode and prefill workloads, both accountings."""

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import roofline as rl

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
    old = dict(qkv="separate", mlp="separate", omit=rl.inference.ELEMENTWISE_OPS)
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
    assert explicit["attention"].bytes == L * H * 4 * N**2 * a and flash["attention"].bytes == 0


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
