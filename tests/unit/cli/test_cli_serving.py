"""``roofline serve``: the serving planner of chapter 5 on the command line, good input and bad."""

import json
import math
import subprocess
import sys

import pytest

import roofline as rl
from roofline import serving as S

from cli_helpers import in_process


call = in_process


def test_serve_prints_the_plan_the_package_computes():
    status, out, err = call("serve", "llama-2-7b", "--gpu", "a100-sxm-80gb", "--context", "3328")
    assert status == 0 and not err
    plan = S.serving_capacity("llama-2-7b", "a100-sxm-80gb", 3328)
    h = rl.get_hardware("a100-sxm-80gb")
    by_hand = math.floor((h.usable_capacity - 2 * rl.load_model("llama-2-7b").params) / (524_288 * 3328))
    assert plan.max_batch == by_hand == 40
    assert "largest batch that fits           40" in out
    assert "524,288 B" in out
    assert f"{plan.step_time * 1e3:.1f} ms (the time per output token)" in out
    assert "memory, compute 4.78% busy" in out
    assert out.strip().endswith(plan.verdict())


def test_serve_json_carries_every_figure():
    status, out, _ = call("serve", "llama-3-8b", "--gpu", "h200", "--context", "8192", "--kv-dtype", "fp8", "--json")
    assert status == 0
    data = json.loads(out)
    plan = S.serving_capacity("llama-3-8b", "h200-sxm", 8192, kv_dtype="fp8")
    assert data["gpu"] == "h200-sxm" and data["kv_dtype"] == "fp8" and data["fits"] is True
    assert data["kv_per_token"] == 65_536
    assert data["max_batch"] == plan.max_batch == S.largest_batch("llama-3-8b", "h200-sxm", 8192, kv_dtype="fp8")
    assert data["tokens_per_s"] == plan.tokens_per_s and data["time_per_output_token"] == plan.step_time
    assert data["bound"] == "memory" and 0 < data["utilization"] < 1


def test_block_size_and_gpus_reach_the_plan():
    status, out, _ = call("serve", "llama-3-8b", "--gpu", "h100-sxm", "--context", "1000", "--block-size", "256",
                          "--json")
    data = json.loads(out)
    assert status == 0 and data["block_size"] == 256
    assert data["kv_per_sequence"] == 1024 * 131_072 and data["waste_per_sequence"] == 24 * 131_072
    status, out, _ = call("serve", "llama-3-70b", "--gpu", "h100-sxm", "--context", "8192", "--gpus", "4")
    assert status == 0 and "on 4 × H100 SXM" in out and "all-reduces not counted" in out
    status, out, _ = call("serve", "deepseek-v3", "--gpu", "h200", "--context", "32768", "--gpus", "8",
                          "--weights-dtype", "fp8")
    assert status == 0 and "(8 copies across the GPUs)" in out and "decode step at batch" in out
    assert "routing: uniform" in out and "assumed, as no --routing was given" in out


def test_a_context_beyond_the_trained_length_is_bad_input():
    status, out, err = call("serve", "llama-3-8b", "--gpu", "h100-sxm", "--context", "9000")
    assert status == 2 and not out
    assert "context 9,000 tokens is beyond what llama-3-8b was trained for" in err
    assert "max_position_embeddings 8,192" in err
    status, out, _ = call("serve", "llama-3-8b", "--gpu", "h100-sxm", "--context", "9000", "--json")
    assert status == 2 and json.loads(out)["argument"] == "--context"


def test_a_model_that_does_not_fit_says_so():
    status, out, _ = call("serve", "llama-3.1-405b", "--gpu", "h100-sxm", "--context", "4096")
    assert status == 0
    assert "largest batch that fits    0" in out
    assert "DOES NOT FIT: llama-3.1-405b does not fit on one H100 SXM: the weights alone take 812 GB" in out
    status, out, _ = call("serve", "llama-3.1-405b", "--gpu", "h100-sxm", "--context", "4096", "--json")
    data = json.loads(out)
    assert data["fits"] is False and data["max_batch"] == 0 and data["step_time"] is None


def test_bad_input_names_the_argument():
    cases = [
        (("--gpu", "h10", "--context", "100"), "--gpu", "did you mean"),
        (("--gpu", "h100-sxm", "--context", "0"), "--context", "expected a whole number >= 1"),
        (("--gpu", "h100-sxm", "--context", "1000", "--gpus", "3"), "--gpus", "must divide llama-3-8b's 32 query heads"),
        (("--gpu", "h100-sxm", "--context", "1000", "--batch", "100000"), "--batch", "does not fit"),
        (("--gpu", "h100-sxm", "--context", "1000", "--block-size", "0"), "--block-size", "whole number >= 1"),
        (("--gpu", "h100-sxm", "--context", "1000", "--kv-dtype", "fp7"), "--kv-dtype", "did you mean 'fp4' or 'fp8'"),
        (("--context", "1000",), "--gpu", "required"),
    ]
    for args, argument, words in cases:
        status, out, _ = call("serve", "llama-3-8b", *args, "--json")
        data = json.loads(out)
        assert status == 2, args
        assert data["argument"] == argument, (args, data)
        assert words in data["error"], (args, data)
    status, _, err = call("serve", "llama-3-9b", "--gpu", "h100-sxm", "--context", "1000")
    assert status == 2 and "llama-3-8b" in err  # a close match is offered


def test_serve_runs_as_a_program():
    proc = subprocess.run([sys.executable, "-m", "roofline", "serve", "llama-3-8b", "--gpu", "h100-sxm",
                           "--context", "4096"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr
    assert "largest batch that fits" in proc.stdout


def test_tp_prices_the_all_reduces_that_gpus_leaves_out():
    """--gpus pools the GPUs (chapter 5); --tp splits the model Megatron's way and adds its collectives
    (chapter 8): the same largest batch, a longer step."""
    _, by_gpus, _ = call("serve", "llama-3-70b", "--gpu", "h100-sxm", "--context", "8192", "--gpus", "4", "--json")
    _, by_tp, _ = call("serve", "llama-3-70b", "--gpu", "h100-sxm", "--context", "8192", "--tp", "4", "--json")
    pooled, split = json.loads(by_gpus), json.loads(by_tp)
    assert split["tp"] == 4 and split["max_batch"] == pooled["max_batch"]
    assert split["time_s"] > pooled["step_time"] and split["collectives"] == 2 * 80 + 2
    status, out, _ = call("serve", "llama-3-70b", "--gpu", "h100-sxm", "--context", "8192", "--tp", "0", "--json")
    assert status == 2 and json.loads(out)["argument"] == "--tp"


def test_fp8_math_doubles_the_roof_and_is_refused_where_the_chip_has_none():
    """Chapter 6's formats on the serving planner: weights stored in fp8 are widened to bf16 unless the
    matmuls are asked to run in fp8, which halves the compute utilization at the same step (the peak
    doubles, the bytes do not change); an A100 has no fp8 tensor cores and says which chips do."""
    args = ("serve", "llama-3-8b", "--gpu", "h100-sxm", "--context", "4096", "--weights-dtype", "fp8", "--json")
    s16, out16, _ = call(*args)
    s8, out8, _ = call(*args, "--math-dtype", "fp8")
    assert s16 == s8 == 0
    bf16, fp8 = json.loads(out16), json.loads(out8)
    assert fp8["math_dtype"] == "fp8" and bf16["math_dtype"] is None
    assert fp8["max_batch"] == bf16["max_batch"] and fp8["step_time"] == bf16["step_time"]
    h = rl.get_hardware("h100-sxm")
    ratio = h.peak_flops("fp8") / h.peak_flops("bf16")
    assert bf16["utilization"] / fp8["utilization"] == pytest.approx(ratio, rel=1e-12)
    assert ratio == pytest.approx(2, rel=1e-3)  # 1,979 against 989.4 TFLOP/s dense
    status, out, err = call("serve", "llama-3-8b", "--gpu", "a100-sxm-80gb", "--context", "4096", "--math-dtype", "fp8")
    assert status == 2 and not out
    assert "no fp8 tensor cores" in err and "H100 SXM" in err
