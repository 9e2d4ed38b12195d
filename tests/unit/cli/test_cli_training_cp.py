"""`roofline train --cp N --cp-method ring|all-to-all` and `roofline prefill --cp N`: thin layers over
roofline.parallel.context_parallel, on good and bad input."""

import json

import pytest

from roofline.parallel import context_parallel as cp

from cli_helpers import in_process


run = in_process


@pytest.mark.parametrize("method", ["ring", "all-to-all"])
def test_train_json_is_the_package_plan(method):
    status, out, _ = run("train", "llama-3-70b", "--gpu", "h100-sxm", "--seq", "131072", "--cp", "8", "--gpus", "8",
                         "--cp-method", method, "--recompute", "full", "--zero", "3", "--json")
    assert status == 0
    got = json.loads(out)
    plan = cp.plan_context_parallel("llama-3-70b", "h100-sxm", seq=131072, cp=8, method=method, recompute="full",
                                    zero_stage=3, gpus=64)
    assert got["cp"] == 8 and got["cp_method"] == method and got["gpus"] == 64
    assert got["fits"] is True and got["memory_bytes"] == pytest.approx(float(plan.footprint.total))
    assert got["time_s"] == pytest.approx(plan.time) and got["cp_exposed_s"] == pytest.approx(plan.exposed)
    assert got["hardware_flops_per_gpu"] == pytest.approx(float(plan.step.flops))


def test_train_text_says_whether_it_fits_and_what_is_exposed():
    status, out, _ = run("train", "llama-3-8b", "--gpu", "h100-sxm", "--seq", "131072", "--cp", "16")
    assert status == 0
    assert "over cp 16 GPUs (ring attention, zig-zag split)" in out
    assert "InfiniBand" in out and "not hidden" in out  # two nodes: 8,192-token blocks are below the IB threshold
    status, out, _ = run("train", "llama-3-70b", "--gpu", "h100-sxm", "--seq", "131072", "--cp", "2", "--recompute",
                         "full", "--zero", "3")
    assert status == 0 and "DOES NOT FIT" in out


def test_train_without_cp_is_unchanged():
    _, with_one, _ = run("train", "llama-3-8b", "--gpu", "h100-sxm", "--seq", "4096", "--cp", "1", "--json")
    _, without, _ = run("train", "llama-3-8b", "--gpu", "h100-sxm", "--seq", "4096", "--json")
    assert with_one == without


def test_prefill_cp_is_the_package_prefill():
    status, out, _ = run("prefill", "llama-3-8b", "--gpu", "h100-sxm", "--tokens", "131072", "--cp", "8", "--json")
    assert status == 0
    got = json.loads(out)
    p = cp.context_parallel_prefill("llama-3-8b", "h100-sxm", 131072, 8)
    assert got["time_s"] == pytest.approx(p.time) and got["tier"] == "scale_up"
    status, text, _ = run("prefill", "llama-3-8b", "--gpu", "h100-sxm", "--tokens", "131072", "--cp", "8")
    assert status == 0 and "time to first token" in text


@pytest.mark.parametrize("args, argument, message", [
    (("train", "llama-3-8b", "--gpu", "h100", "--seq", "131072", "--cp", "16", "--cp-method", "all-to-all"), "--cp",
     "must not exceed llama-3-8b's 8 key/value heads"),
    (("train", "llama-3-8b", "--gpu", "h100", "--seq", "1000", "--cp", "8"), "--cp", "a multiple of 16"),
    (("train", "llama-3-8b", "--gpu", "h100", "--seq", "8192", "--cp", "0"), None, "expected a whole number >= 1"),
    (("train", "llama-3-8b", "--gpu", "h100", "--seq", "8192", "--cp", "2", "--cp-method", "ulysses"), None,
     "invalid choice: 'ulysses'"),
    (("train", "llama-3-8b", "--gpu", "h100", "--seq", "8192", "--cp", "2", "--offload"), "--cp", "drop --offload"),
    (("prefill", "llama-3-8b", "--gpu", "h100", "--tokens", "8192", "--cp", "2", "--batch", "2"), "--cp",
     "leave --batch"),
    (("prefill", "mixtral-8x7b", "--gpu", "h100", "--tokens", "8192", "--cp", "2"), None, "not modelled"),
])
def test_bad_input_names_the_argument(args, argument, message):
    status, out, err = run(*args, "--json")
    got = json.loads(out)
    assert status in (1, 2) and message in got["error"]
    if argument is not None:
        assert got["argument"] == argument
