"""`roofline decode/prefill` and their number formats (chapter 6): storage formats anywhere, math formats
only where the chip has tensor cores for them."""

import json

import pytest

import roofline as rl
from roofline.workloads import quantization as q

from cli_helpers import in_process, run


cli = in_process


def test_fp8_math_is_refused_on_an_a100_with_the_chips_that_have_it():
    status, out, err = cli("decode", "llama-3-8b", "--gpu", "a100", "--math-dtype", "fp8")
    assert status == 2 and out == ""
    assert "A100 80GB has no fp8 tensor cores" in err
    for key in q.chips_with("fp8"):
        assert rl.get_hardware(key).short in err


def test_the_refusal_names_the_flag_in_json():
    status, out, _ = cli("prefill", "llama-3-8b", "--gpu", "a100-sxm-40gb", "--tokens", "512", "--dtype", "fp8", "--json")
    data = json.loads(out)
    assert status == 2 and data["argument"] == "--dtype" and "no fp8 tensor cores" in data["error"]
    status, out, _ = cli("decode", "llama-3-8b", "--gpu", "h100", "--math-dtype", "fp4", "--json")
    data = json.loads(out)
    assert status == 2 and data["argument"] == "--math-dtype" and "B200" in data["error"]


def test_fp8_storage_runs_on_an_a100_and_halves_the_weight_bytes():
    status, out, _ = cli("decode", "llama-3-8b", "--gpu", "a100", "--weights-dtype", "fp8", "--json")
    data = json.loads(out)
    assert status == 0
    assert data["weights_bytes"] == pytest.approx(rl.load_model("llama-3-8b").params)
    assert data["intensity"] == pytest.approx(2.0)


def test_group_wise_weights_count_their_scales():
    status, out, _ = cli("decode", "llama-3-8b", "--gpu", "h100", "--weights-dtype", "int4-g128", "--json")
    data = json.loads(out)
    assert status == 0 and data["weights_dtype"] == "int4-g128"
    assert data["weights_bytes"] == pytest.approx(rl.load_model("llama-3-8b").params * 4.125 / 8)
    assert data["intensity"] == pytest.approx(16 / 4.125)


def test_embeddings_kept_in_bf16_are_held_and_read_in_bf16():
    args = ("decode", "llama-3-8b", "--gpu", "h100", "--weights-dtype", "int4-g128", "--embeddings-dtype", "bf16", "--json")
    data = json.loads(cli(*args)[1])
    kw = {"weights_dtype": "int4-g128", "embeddings_dtype": "bf16"}
    assert data["weights_bytes"] == pytest.approx(q.weight_bytes("llama-3-8b", **kw))
    assert data["bytes"] == pytest.approx(rl.decode_step("llama-3-8b", **kw).bytes)
    assert data["math_dtype"] == "bf16" and data["embeddings_dtype"] == "bf16"


def test_fp8_math_halves_prefill_on_an_h100():
    base = json.loads(cli("prefill", "llama-3-8b", "--gpu", "h100", "--tokens", "4096", "--json")[1])
    fp8 = json.loads(cli("prefill", "llama-3-8b", "--gpu", "h100", "--tokens", "4096", "--weights-dtype", "fp8",
                         "--math-dtype", "fp8", "--json")[1])
    assert base["bound"] == fp8["bound"] == "compute"
    assert fp8["time_s"] == pytest.approx(base["time_s"] / 2, rel=1e-4)


def test_an_unknown_storage_format_names_close_matches():
    status, _, err = cli("decode", "llama-3-8b", "--gpu", "h100", "--kv-dtype", "int4-g12x")
    assert status == 2 and "--kv-dtype" in err and "int4-g128" in err


def test_int4_math_needs_int4_weights():
    status, _, err = cli("decode", "llama-3-8b", "--gpu", "h100", "--math-dtype", "int4")
    assert status == 2 and "needs int4 weights" in err


def test_a_mixture_with_wide_embeddings_holds_every_expert():
    """Fixed: with --embeddings-dtype the footprint counted only the experts one step reads."""
    status, out, _ = in_process("decode", "mixtral-8x7b", "--gpu", "h100", "--weights-dtype", "int4-g128",
                                "--embeddings-dtype", "bf16", "--json")
    m = rl.load_model("mixtral-8x7b")
    other = m.embedding_params + m.lm_head_params + m.norm_params
    assert status == 0 and json.loads(out)["weights_bytes"] == (m.params - other) * 0.515625 + other * 2  # 24.5 GB


# --- through python -m roofline, as a reader runs it ---------------------------------------------

def test_decode_matches_the_package():
    data = json.loads(run("decode", "llama-3-8b", "--gpu", "h100-sxm", "--batch", "1", "--context", "0", "--json",
                          check_rc=0).stdout)
    pred = rl.predict(rl.decode_step("llama-3-8b"), rl.get_hardware("h100-sxm"))
    assert data["time_s"] == pytest.approx(pred.time)
    assert data["bound"] == "memory"
    assert set(data["parts"]) == set(rl.PARTS)
    table = run("decode", "llama-3-8b", "--gpu", "h100-sxm", check_rc=0).stdout
    assert "4.79 ms" in table and "weights" in table and "predicted time" in table


def test_prefill_and_refined_accounting():
    data = json.loads(run("prefill", "llama-3-8b", "--gpu", "h100", "--tokens", "2048", "--json", check_rc=0).stdout)
    assert data["bound"] == "compute" and data["tokens"] == 2048
    assert data["flops"] == pytest.approx(rl.prefill("llama-3-8b", 2048).flops)
    refined = run("decode", "llama-3-8b", "--gpu", "h100", "--batch", "4", "--context", "1024",
                  "--accounting", "refined", check_rc=0).stdout
    assert "refined FLOPs" in refined


def test_prefill_json_keeps_the_prompt_length_and_the_step_tokens_apart():
    data = json.loads(run("prefill", "llama-3-8b", "--gpu", "h100", "--tokens", "2048", "--batch", "4", "--json",
                          check_rc=0).stdout)
    assert data["tokens"] == 2048 and data["batch"] == 4 and data["step_tokens"] == 8192
    assert data["time_per_token_s"] == pytest.approx(data["time_s"] / 8192)


def test_a_step_that_cannot_fit_says_so():
    args = ("decode", "llama-3-8b", "--gpu", "h100", "--context", "100000000", "--batch", "1000")
    data = json.loads(run(*args, "--json", check_rc=0).stdout)
    m = rl.load_model("llama-3-8b")
    assert data["fits"] is False and data["within_trained_context"] is False
    assert data["kv_cache_bytes"] == 1000 * 100_000_001 * m.kv_bytes_per_token()  # 13.1 PB
    assert data["max_position_embeddings"] == m.max_position_embeddings == 8192
    assert data["time_s"] > 0  # the numbers are still given
    table = run(*args, check_rc=0).stdout
    assert "DOES NOT FIT" in table and "13.1 PB" in table and "BEYOND THE MODEL'S CONTEXT" in table
    ok = json.loads(run("decode", "llama-3-8b", "--gpu", "h100", "--context", "4096", "--json", check_rc=0).stdout)
    assert ok["fits"] is True and ok["within_trained_context"] is True
    assert ok["resident_bytes"] == m.params * 2 + 4097 * m.kv_bytes_per_token()
    assert "memory: weights 16.1 GB + KV cache 131 kB = 16.1 GB" in run("decode", "llama-3-8b", "--gpu", "h100", check_rc=0).stdout
