"""``roofline speculate`` and the new output of ``roofline serve`` (chapter 12), good input and bad."""

import json

import numpy as np
import pytest

from roofline import serving as S
from roofline.serving import speculative as SP

from cli_helpers import in_process
from roofline.core.units import fmt


call = in_process


def test_speculate_prints_what_the_package_computes():
    status, out, err = call("speculate", "llama-3-70b", "--draft", "llama-3.2-1b", "--gpu", "h200", "--alpha", "0.8",
                            "--gamma", "4")
    assert status == 0 and not err
    plan = SP.speculate("llama-3-70b", "llama-3.2-1b", "h200-sxm", 0.8, 4)
    assert f"speed-up                    {plan.speedup:.2f}×" in out
    assert f"tokens per verify step      {SP.expected_tokens(0.8, 4):.3f}" in out
    assert f"break-even acceptance rate  {SP.breakeven_alpha('llama-3-70b', 'llama-3.2-1b', 'h200-sxm', 4):.3f}" in out
    assert f"{S.largest_batch('llama-3-70b', 'h200-sxm', 2048):,} sequences of 2,048 tokens fit" in out


def test_speculate_json_and_batch():
    status, out, _ = call("speculate", "llama-3-8b", "--draft", "llama-3.2-1b", "--gpu", "h200-sxm", "--alpha", "0.7",
                          "--gamma", "3", "--batch", "32", "--context", "512", "--json")
    data = json.loads(out)
    plan = SP.speculate("llama-3-8b", "llama-3.2-1b", "h200-sxm", 0.7, 3, batch=32, context=512)
    assert status == 0 and data["batch"] == 32 and data["speedup"] == pytest.approx(plan.speedup)
    assert data["stops_paying_batch"] == SP.stops_paying_batch("llama-3-8b", "llama-3.2-1b", "h200-sxm", 0.7, 3, context=512)


@pytest.mark.parametrize("args, argument, message", [
    (("--alpha", "1"), "--alpha", "below 1"),
    (("--alpha", "-0.2"), "--alpha", "at least 0"),
    (("--alpha", "most"), "--alpha", "acceptance rate"),
    (("--alpha", "0.8", "--gamma", "0"), "--gamma", "whole number >= 1"),
])
def test_speculate_bad_numbers(args, argument, message):
    status, out, _ = call("speculate", "llama-3-8b", "--draft", "llama-3.2-1b", "--gpu", "h200", *args, "--json")
    data = json.loads(out)
    assert status == 2 and data["argument"] == argument and message in data["error"]


def test_speculate_refuses_a_draft_larger_than_the_target():
    status, out, _ = call("speculate", "llama-3-8b", "--draft", "llama-3-70b", "--gpu", "h200", "--alpha", "0.8", "--json")
    data = json.loads(out)
    assert status == 2 and data["argument"] == "--draft" and "draft must be smaller" in data["error"]
    status, out, _ = call("speculate", "llama-3-8b", "--draft", "llama-3.2-1", "--gpu", "h200", "--alpha", "0.8", "--json")
    assert status == 2 and "did you mean 'llama-3.2-1b'" in json.loads(out)["error"]


def test_serve_prints_the_time_to_first_token_and_the_curve():
    status, out, _ = call("serve", "llama-3-8b", "--gpu", "h200", "--context", "8192", "--curve")
    assert status == 0
    curve = S.latency_throughput("llama-3-8b", "h200-sxm", 8192)
    assert f"time to first token: {fmt(S.time_to_first_token('llama-3-8b', 'h200-sxm', 8192), 's')}" in out
    for b, t in zip(curve["batch"], curve["tpot"]):
        assert any(line.split()[:3] == [f"{b:,}", *fmt(t, "s").split()] for line in out.splitlines()), b
    plan = S.serving_capacity("llama-3-8b", "h200-sxm", 8192)
    assert out.strip().endswith(plan.verdict())


def test_serve_json_carries_ttft_and_curve():
    status, out, _ = call("serve", "llama-3-8b", "--gpu", "h100", "--context", "4096", "--prompt", "1000", "--curve", "--json")
    data = json.loads(out)
    assert status == 0 and data["prompt"] == 1000
    assert data["ttft"] == pytest.approx(S.time_to_first_token("llama-3-8b", "h100-sxm", 1000))
    assert data["curve"]["batch"][-1] == data["max_batch"]
    assert np.all(np.diff(data["curve"]["tokens_per_s"]) > 0) and np.all(np.diff(data["curve"]["tpot"]) > 0)


def test_speculate_refuses_a_context_past_the_trained_length():
    status, out, _ = call("speculate", "llama-3-8b", "--draft", "llama-3.2-1b", "--gpu", "h200", "--alpha", "0.8",
                          "--context", "100000", "--json")
    data = json.loads(out)
    assert status == 2 and data["argument"] == "--context" and "max_position_embeddings 8,192" in data["error"]


def test_speculate_a_mixture_of_experts_is_priced_and_a_foreign_draft_refused():
    # Mixtral is priced at the uniform routing now (test_cli_serving_moe.py); Llama 3.2 1B's vocabulary is not its
    status, out, _ = call("speculate", "mixtral-8x7b", "--draft", "llama-3.2-1b", "--gpu", "h200", "--alpha", "0.8")
    assert status == 2 and "share the target's vocabulary" in out + _


def test_a_draft_with_another_vocabulary_is_refused():
    status, out, _ = in_process("speculate", "llama-3-8b", "--draft", "gpt2", "--gpu", "h200", "--alpha", "0.8", "--json")
    error = json.loads(out)
    assert status == 2 and error["argument"] == "--draft"
    assert "draft must share the target's vocabulary: gpt2 has 50,257 tokens, llama-3-8b 128,256" in error["error"]
    with pytest.raises(ValueError, match="share the target's vocabulary"):
        SP.speculate("llama-3-8b", "gpt2", "h200", 0.8)


def test_speculate_says_whether_the_batch_fits():
    base = ("speculate", "llama-3-8b", "--draft", "llama-3.2-1b", "--gpu", "h200", "--alpha", "0.8")
    status, out, _ = in_process(*base, "--batch", "9007199254740992")
    assert status == 0 and out.strip().splitlines()[-1].startswith("DOES NOT FIT: batch 9,007,199,254,740,992")
    status, out, _ = in_process(*base)
    assert status == 0 and "fits on the H200" in out.strip().splitlines()[-1]
    data = json.loads(in_process(*base, "--batch", "4096", "--json")[1])
    assert data["fits"] is False and data["largest_batch"] < 4096
    assert json.loads(in_process(*base, "--json")[1])["fits"] is True
