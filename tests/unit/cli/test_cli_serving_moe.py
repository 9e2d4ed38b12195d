"""``--routing`` and ``--ep`` on roofline decode, prefill and serve (chapter 10), good input and bad."""

import json

import pytest

import roofline as rl
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
    plan = S.serving_plan("mixtral-8x7b", "h200", 4096, routing="best")
    assert status == 0 and json.loads(out)["step_time"] == plan.step_time is not None


def test_without_a_routing_a_moe_step_is_not_modelled_and_says_which_flag():
    status, out, err = call("decode", "mixtral-8x7b", "--gpu", "h200", "--batch", "8")
    assert status == 1 and not out and "--routing uniform" in err
    status, _, err = call("decode", "deepseek-v3", "--gpu", "h200", "--batch", "64", "--ep", "8")
    assert status == 1 and "--routing" in err
    # one token needs no routing
    assert call("decode", "mixtral-8x7b", "--gpu", "h200")[0] == 0


def test_ep_prints_one_gpus_step_and_the_all_to_alls():
    status, out, err = call("decode", "deepseek-v3", "--gpu", "h200", "--batch", "64", "--context", "4096", "--ep", "8",
                            "--routing", "uniform", "--weights-dtype", "fp8", "--json")
    assert status == 0 and not err
    data = json.loads(out)
    s = moe.expert_parallel_step("deepseek-v3", "h200", 64, 4096, ep=8, routing="uniform", weights_dtype="fp8")
    assert data["time_s"] == s.time and data["overlapped_time_s"] == s.overlapped_time
    assert data["all_to_all_calls"] == 116 and data["all_to_all_time_s"] == s.all_to_all.time
    assert data["weights_per_gpu"] == moe.weights_per_gpu("deepseek-v3", ep=8, weights_dtype="fp8") and data["fits"]
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
