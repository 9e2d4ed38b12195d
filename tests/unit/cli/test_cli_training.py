"""`roofline train`: a thin layer over roofline.workloads.training.plan_training, on good and bad input."""

import json

import pytest

from roofline.workloads import training

from cli_helpers import in_process


def run(*args):
    return in_process("train", *args)


def test_json_is_the_package_plan():
    status, out, _ = run("llama-3-8b", "--gpu", "h100-sxm", "--gpus", "8", "--seq", "4096", "--recompute", "full",
                         "--zero", "3", "--achieved", "0.5", "--json")
    assert status == 0
    got = json.loads(out)
    plan = training.plan_training("llama-3-8b", "h100-sxm", seq=4096, gpus=8, recompute="full", zero_stage=3,
                                  achieved=0.5)
    assert got["fits"] is True and got["memory_bytes"] == pytest.approx(float(plan.footprint.total))
    assert got["model_flops"] == pytest.approx(plan.model_flops)
    assert got["hardware_flops"] == pytest.approx(plan.hardware_flops)
    assert got["mfu"] == pytest.approx(plan.mfu) and got["hfu"] == pytest.approx(0.5)
    assert got["time_s"] == pytest.approx(plan.time) and got["network_link"] == "scale_up"
    assert sum(got["memory_parts"].values()) == pytest.approx(got["memory_bytes"])


def test_text_says_whether_it_fits_and_by_how_much():
    status, out, _ = run("llama-3-8b", "--gpu", "h100", "--seq", "4096")
    assert status == 0  # an answer, even when the answer is no
    plan = training.plan_training("llama-3-8b", "h100-sxm", seq=4096)
    assert "DOES NOT FIT" in out and f"by {-plan.spare / 1e9:.1f} GB" in out
    assert "MFU 100.0%, HFU 100.0%" in out  # the floor: compute-bound, every FLOP at peak
    status, out, _ = run("llama-3-8b", "--gpu", "h200", "--gpus", "8", "--zero", "3", "--seq", "4096",
                         "--recompute", "full")
    assert "fits within" in out and "31.2% recomputed" in out and "MFU 76.2%, HFU 100.0%" in out


def test_every_1_is_full_and_offload_reports_the_link():
    full = json.loads(run("llama-3-8b", "--gpu", "h100", "--seq", "8192", "--recompute", "full", "--json")[1])
    every = json.loads(run("llama-3-8b", "--gpu", "h100", "--seq", "8192", "--recompute", "every-1", "--json")[1])
    assert every["memory_bytes"] == full["memory_bytes"] and every["hardware_flops"] == full["hardware_flops"]
    assert every["recompute"] == "every-1"
    status, out, _ = run("llama-3-8b", "--gpu", "h100", "--seq", "4096", "--offload", "--achieved", "0.5")
    assert status == 0 and "each way over PCIe Gen5 x16" in out and "not hidden" in out


@pytest.mark.parametrize("args, argument, words", [
    (["--recompute", "every-0"], "--recompute", "every-K"),
    (["--recompute", "sometimes"], "--recompute", "none, selective, full, every-K"),
    (["--zero", "4"], "--zero", "invalid choice"),
    (["--achieved", "0"], "--achieved", "fraction of peak"),
    (["--achieved", "1.5"], "--achieved", "fraction of peak"),
    (["--micro-batch", "0"], "--micro-batch", "whole number >= 1"),
    (["--gpus", "two"], "--gpus", "whole number >= 1"),
])
def test_bad_flags_exit_2_naming_the_argument(args, argument, words):
    status, out, _ = run("llama-3-8b", "--gpu", "h100", "--seq", "4096", *args, "--json")
    assert status == 2
    error = json.loads(out)
    assert error["argument"] == argument and words in error["error"] and error["status"] == 2


def test_bad_names_and_missing_arguments():
    status, _, err = run("llama-3-8b", "--gpu", "h10", "--seq", "4096")
    assert status == 2 and "did you mean" in err and "h100" in err
    status, _, err = run("lama-3-8b", "--gpu", "h100", "--seq", "4096")
    assert status == 2 and "llama-3-8b" in err
    status, _, err = run("llama-3-8b", "--gpu", "h100")
    assert status == 2 and "--seq" in err


def test_a_mixture_of_experts_is_not_modelled_yet():
    status, _, err = run("mixtral-8x7b", "--gpu", "h100", "--seq", "4096")
    assert status == 1 and "not modelled" in err and "experts" in err


def test_a_sequence_past_the_models_context_is_flagged():
    status, out, _ = run("llama-3-8b", "--gpu", "h100", "--seq", "65536", "--recompute", "full")
    assert status == 0 and "BEYOND THE MODEL'S CONTEXT" in out
