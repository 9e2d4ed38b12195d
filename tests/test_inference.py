"""Decode and prefill workloads, both accountings."""

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import roofline as rl

PARTS = ["weights", "embedding", "lm_head", "norms", "kv_cache", "attention", "activations"]


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
    assert r["kv_cache"].bytes == batch * (context + 1) * m.kv_bytes_per_token()


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
