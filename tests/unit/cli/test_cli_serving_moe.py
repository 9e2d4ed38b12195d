"""``--routing`` and ``--ep`` on roofline decode, prefill and serve (chapter 10), good input and bad."""

import json

import pytest

import roofline as rl
from roofline.parallel.tensor_parallel import weights_per_gpu
from roofline.parallel import moe
from roofline import serving as S
from roofline.cli import main

from cli_helpers import in_process


call = in_process


@pytest.mark.parametrize("routing", moe.ROUTINGS)
def test_decode_with_a_routing_prints_the_packages_step(routing):
    status, out, err = call("decode", "mixtral-8x7b", "--gpu", "h200", "--batch", "16", "--context", "512",
                            "--routing", routing, "--json")
    assert status == 0 and not err
    data = json.loads(out)
    step = rl.decode_step("mixtral-8x7b", 16, 512, routing=routing)
    assert data["bytes"] == step.bytes and data["flops"] == step.flops
    assert data["time_s"] == rl.predict(step, "h200").time


def test_prefill_and_serve_take_the_routing():
    status, out, _ = call("prefill", "deepseek-v3", "--gpu", "h200", "--tokens", "1024", "--routing", "uniform", "--json")
    assert status == 0 and json.loads(out)["flops"] == rl.prefill("deepseek-v3", 1024, routing="uniform").flops
    status, out, _ = call("serve", "mixtral-8x7b", "--gpu", "h200", "--context", "4096", "--routing", "best", "--json")
    plan = S.serving_capacity("mixtral-8x7b", "h200", 4096, routing="best")
    assert status == 0 and json.loads(out)["step_time"] == plan.step_time is not None


def test_without_a_routing_the_uniform_expectation_is_assumed_and_said():
    """decode mixtral-8x7b --batch 64 answers as peers do, with the expected experts of uniform routing, and says
    so (text and JSON); --routing best and worst still give the bounds around it."""
    status, out, err = call("decode", "mixtral-8x7b", "--gpu", "h200", "--batch", "64", "--json")
    data = json.loads(out)
    step = rl.decode_step("mixtral-8x7b", 64, routing="uniform")
    assert status == 0 and not err and data["bytes"] == step.bytes and data["time_s"] == rl.predict(step, "h200").time
    assert data["routing"] == "uniform" and data["routing_assumed"] is True
    assert data["experts_read_per_layer"] == pytest.approx(8 * (1 - (1 - 2 / 8) ** 64)) and data["experts"] == 8
    given = json.loads(call("decode", "mixtral-8x7b", "--gpu", "h200", "--batch", "64", "--routing", "uniform",
                            "--json")[1])
    assert given["routing_assumed"] is False and given["time_s"] == data["time_s"]
    best, worst = (json.loads(call("decode", "mixtral-8x7b", "--gpu", "h200", "--batch", "64", "--routing", r,
                                   "--json")[1]) for r in ("best", "worst"))
    assert best["bytes"] < data["bytes"] <= worst["bytes"] and best["experts_read_per_layer"] == 2
    status, text, _ = call("decode", "mixtral-8x7b", "--gpu", "h200", "--batch", "64")
    assert status == 0 and "routing: uniform" in text and "assumed, as no --routing was given" in text
    status, text, _ = call("decode", "deepseek-v3", "--gpu", "h200", "--batch", "64", "--ep", "8")
    assert status == 0 and "uniform routing (assumed" in text
    status, text, _ = call("prefill", "qwen3-30b-a3b", "--gpu", "h200", "--tokens", "256", "--json")
    assert status == 0 and json.loads(text)["flops"] == rl.prefill("qwen3-30b-a3b", 256, routing="uniform").flops
    # the Python API still asks: its Breakdown has no field to say a routing was assumed (chapter 10)
    with pytest.raises(rl.NotModelledError, match="routing"):
        rl.decode_step("mixtral-8x7b", 64)
    # one token needs no routing, and a dense model gets no routing fields
    assert call("decode", "mixtral-8x7b", "--gpu", "h200")[0] == 0
    assert "routing" not in json.loads(call("decode", "llama-3-8b", "--gpu", "h200", "--batch", "8", "--json")[1])


def test_ep_prints_one_gpus_step_and_the_all_to_alls():
    status, out, err = call("decode", "deepseek-v3", "--gpu", "h200", "--batch", "64", "--context", "4096", "--ep", "8",
                            "--routing", "uniform", "--weights-dtype", "fp8", "--json")
    assert status == 0 and not err
    data = json.loads(out)
    s = moe.expert_parallel_step("deepseek-v3", "h200", 64, 4096, ep=8, routing="uniform", weights_dtype="fp8")
    assert data["time_s"] == s.time and data["overlapped_time_s"] == s.overlapped_time
    assert data["all_to_all_calls"] == 116 and data["all_to_all_time_s"] == s.all_to_all.time
    assert data["weights_per_gpu"] == weights_per_gpu("deepseek-v3", ep=8, weights_dtype="fp8") and data["fits"]
    status, out, _ = call("decode", "deepseek-v3", "--gpu", "h200", "--batch", "64", "--ep", "8", "--routing", "best")
    assert status == 0 and "two per MoE layer" in out and "over NVLink" in out and "DOES NOT FIT" in out  # bf16


def test_serve_with_ep_gives_the_largest_batch_and_its_step():
    status, out, _ = call("serve", "deepseek-v3", "--gpu", "h200", "--context", "4096", "--weights-dtype", "fp8",
                          "--ep", "32", "--routing", "uniform", "--json")
    data = json.loads(out)
    most = moe.expert_parallel_batch("deepseek-v3", "h200", 4096, ep=32, weights_dtype="fp8")
    assert status == 0 and data["max_batch"] == most == data["batch"] and "network" in data["tiers"]


@pytest.mark.parametrize("args, argument, message", [
    (("decode", "llama-3-8b", "--gpu", "h200", "--ep", "8"), "--ep", "has no experts"),
    (("decode", "mixtral-8x7b", "--gpu", "h200", "--batch", "6", "--ep", "4", "--routing", "best"), "--batch",
     "batch must be a multiple of ep (4)"),
    (("decode", "mixtral-8x7b", "--gpu", "h200", "--batch", "8", "--ep", "3", "--routing", "best"), "--ep",
     "ep must divide the 8 experts"),
    (("decode", "mixtral-8x7b", "--gpu", "h200", "--batch", "8", "--ep", "8", "--routing", "best", "--timing",
      "kernel"), "--ep", "text accounting, the step rule"),
    (("decode", "mixtral-8x7b", "--gpu", "h200", "--routing", "unif"), "--routing", "invalid choice: 'unif'"),
    (("serve", "mixtral-8x7b", "--gpu", "h200", "--context", "4096", "--ep", "0"), "--ep", "--ep"),
])
def test_bad_input_exits_2_naming_the_flag(args, argument, message):
    status, out, err = call(*args)
    assert status == 2 and not out and message in err
    status, out, _ = call(*args, "--json")
    assert status == 2 and json.loads(out)["argument"] == argument


def test_ep_refuses_serve_flags_it_would_ignore(capsys):
    """serve --ep beside --curve is refused, naming --ep, rather than printing no curve."""
    assert main(["serve", "mixtral-8x7b", "--gpu", "h200", "--context", "4096", "--ep", "2", "--routing", "uniform",
                 "--curve"]) == 2
    assert "does not combine" in capsys.readouterr().err


def test_speculate_on_a_mixture_of_experts_assumes_uniform_routing_and_says_so():
    from roofline.serving.speculative import speculate

    status, out, err = call("speculate", "qwen3-30b-a3b", "--draft", "qwen3-8b", "--gpu", "h200", "--alpha", "0.7",
                            "--json")
    assert status == 0 and not err
    data = json.loads(out)
    assert data["routing"] == "uniform" and data["routing_assumed"] is True
    plan = speculate("qwen3-30b-a3b", "qwen3-8b", "h200", 0.7, 4, routing="uniform")
    assert data["speedup"] == pytest.approx(float(plan.speedup))
    # the verify step scores gamma + 1 = 5 tokens: the experts a uniform routing of five tokens reads
    assert data["experts_read_per_layer"] == pytest.approx(float(moe.experts_touched(rl.load_model("qwen3-30b-a3b"), 5)))
    status, out, _ = call("speculate", "qwen3-30b-a3b", "--draft", "qwen3-8b", "--gpu", "h200", "--alpha", "0.7",
                          "--routing", "best")
    assert status == 0 and "routing: best" in out and "assumed" not in out


def test_a_verify_step_of_a_mixture_of_experts_takes_the_routing():
    best = rl.verify_step("qwen3-30b-a3b", 5, 1024, routing="best")
    worst = rl.verify_step("qwen3-30b-a3b", 5, 1024, routing="worst")
    assert best.bytes < worst.bytes  # five tokens on the same experts read fewer weights than spread out
    with pytest.raises(rl.NotModelledError, match="routing"):
        rl.verify_step("qwen3-30b-a3b", 5, 1024)


def test_ep_takes_the_math_format_so_fp8_experts_run_at_the_fp8_peak():
    # chapter 10: --math-dtype fp8 reaches expert_parallel_step (it was dropped on the --ep path)
    args = ("decode", "deepseek-v3", "--gpu", "h200", "--batch", "4096", "--context", "0", "--ep", "8",
            "--routing", "uniform", "--weights-dtype", "fp8", "--json")
    status, out, err = call(*args, "--math-dtype", "fp8")
    assert status == 0 and not err
    s = moe.expert_parallel_step("deepseek-v3", "h200", 4096, 0, ep=8, routing="uniform", weights_dtype="fp8",
                                 math_dtype="fp8")
    w8a16 = json.loads(call(*args)[1])
    assert json.loads(out)["compute_time_s"] == s.compute_time < w8a16["compute_time_s"]
