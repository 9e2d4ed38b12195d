"""`roofline rules`: every rule of thumb on the command line, as rules_for computes it."""

import json

import pytest

from cli_helpers import in_process
from roofline.parallel.rules import mixed_optimum, rules_for


def run(*args):
    return in_process("rules", *args)


CLUSTER = ("llama-3-70b", "--gpu", "h100", "--nodes", "8", "--seq", "8192", "--global-batch", "512")


def test_json_is_rules_for():
    status, out, _ = run(*CLUSTER, "--json")
    assert status == 0
    got = json.loads(out)
    want = rules_for("llama-3-70b", "h100", nodes=8, seq=8192, global_batch=512)
    assert [r["name"] for r in got["rules"]] == [r.name for r in want]
    for g, w in zip(got["rules"], want):
        assert g["chapter"] == w.chapter and g["unit"] == w.unit
        assert g["value"] == pytest.approx(w.value)
        if isinstance(w.model_value, (int, float)):
            assert g["model_value"] == pytest.approx(w.model_value)
    mixed = next(r for r in got["rules"] if r["name"].startswith("mixed"))
    assert mixed["value"] == pytest.approx(mixed_optimum("llama-3-70b", "h100", tokens=512 * 8192, nodes=8).y)
    assert "planner" in mixed["model_label"]


def test_text_names_each_rule_with_its_chapter_and_the_full_models_answer():
    status, out, _ = run(*CLUSTER)
    assert status == 0
    assert "ridge point (chapter 1): 295 FLOP/B" in out
    assert "data-parallel tokens per GPU (chapter 7)" in out and "planner's layout leaves" in out
    assert "full model:" in out and "TP " in out
    assert "inf" not in out and "nan" not in out


def test_defaults_are_one_node_of_eight_and_no_planner():
    status, out, _ = run("llama-3-8b", "--gpu", "h200", "--json")
    got = json.loads(out)
    assert status == 0 and got["nodes"] == 1 and got["gpus_per_node"] == 8 and got["tp"] == 8
    assert got["global_batch"] is None
    mixed = next(r for r in got["rules"] if r["name"].startswith("mixed"))
    assert mixed["model_value"] is None


@pytest.mark.parametrize("args,argument,words", [
    (("llama-3-8b", "--gpu", "h100", "--tp", "16"), "--tp", "at most 8"),
    (("llama-3-8b", "--gpu", "h100", "--nodes", "0"), "--nodes", "whole"),
    (("llama-3-8b", "--gpu", "h100", "--nodes", "9007199254740992"), "--nodes", "at most"),
    (("llama-3-8b", "--gpu", "h100", "--nodes", "64", "--global-batch", "1"), "--global-batch", "divisible"),
    (("llama-3-8b", "--gpu", "h1000"), "--gpu", "h100"),
    (("llama-3-8b",), "--gpu", "required"),
    (("mixtral-8x7b", "--gpu", "h100"), None, "not modelled"),
    (("llama-3-8b", "--gpu", "v100-sxm2"), "--gpu", "no dense bf16 peak"),
    (("llama-3-8b", "--gpu", "h100", "--seq", "200000"), "--seq", "beyond what llama-3-8b was trained for"),
])
def test_bad_input_names_the_flag(args, argument, words):
    status, out, _ = run(*args, "--json")
    assert status in (1, 2)
    got = json.loads(out)
    assert got["argument"] == argument
    assert words in got["error"]
