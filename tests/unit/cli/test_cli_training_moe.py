"""`roofline train <MoE model> --ep ... --roof calibrated` (issue 48, item 4): fine-grained MoE layouts answered
through the package's estimate, with the terms the step model used printed, and bad expert layouts refused with
the flag named."""

import json

import pytest

from roofline.parallel.cluster import TrainLayout, estimate_step

from cli_helpers import in_process

run = in_process

QWEN_NODE = ("train", "qwen3-30b-a3b", "--gpu", "h100-sxm", "--nodes", "1", "--gpus-per-node", "8", "--seq", "4096",
             "--ep", "8", "--global-batch", "64", "--zero", "1", "--roof", "calibrated")
QWEN_TWO = ("train", "qwen3-30b-a3b", "--gpu", "h100-sxm", "--nodes", "2", "--gpus-per-node", "8", "--seq", "4096",
            "--ep", "16", "--global-batch", "128", "--zero", "1", "--roof", "calibrated")
V3 = ("train", "deepseek-v3", "--gpu", "h800-sxm", "--nodes", "256", "--gpus-per-node", "8", "--seq", "4096",
      "--pp", "16", "--ep", "64", "--global-batch", "1920", "--zero", "1", "--dtype", "fp8", "--fp8-recipe",
      "deepseek-blockwise", "--roof", "calibrated")


def test_the_json_is_the_package_estimate_for_the_same_moe_layout():
    status, out, _ = run(*QWEN_TWO, "--json")
    assert status == 0
    got = json.loads(out)
    lay = TrainLayout(seq=4096, dp=16, ep=16, global_batch=128, zero_stage=1, recompute="none", gpus_per_node=8)
    floor, est = estimate_step("qwen3-30b-a3b", "h100-sxm", lay, roof="calibrated")
    assert got["layout"]["ep"] == 16
    assert got["time_s"] == pytest.approx(est.time)
    assert got["estimate"]["parts_s"]["expert all-to-all"] == pytest.approx(est.parts["expert all-to-all"])
    assert got["floor"]["time_s"] == pytest.approx(floor.time) and floor.time < est.time


def test_inside_a_node_the_h100s_all_to_all_is_the_measured_nvlink_one():
    """Qwen3-30B-A3B at EP 8 in one node: 16 experts a GPU, ``4,096 x 8 x 8 / 128 = 2,048`` rows each; a token to
    ``8 (1 - C(112,8)/C(128,8)) = 5.34`` GPUs; no DeepEP intranode figure for the H100, so nccl-tests' rate."""
    status, out, _ = run(*QWEN_NODE)
    assert status == 0, out
    assumed = out.split("  assumed: ", 1)[1].split("\n", 1)[0]
    assert "dropless routing" in assumed
    assert "16 experts a GPU, 2,048 rows each a micro-batch, each expert a matmul of its own" in assumed
    assert "a token sent once to each of the 5.34 GPUs its experts sit on" in assumed
    assert "the measured all-to-all over NVLink" in assumed
    assert "expert all-to-all" in out.split("where the estimate's time goes:")[1]


def test_across_nodes_the_all_to_all_runs_at_deepeps_measured_rates():
    """EP 16 over 2 nodes: a token to ``2 (1 - C(64,8)/C(128,8)) = 1.99`` nodes, at DeepEP's internode rates."""
    got = json.loads(run(*QWEN_TWO, "--json")[1])
    assert got["assumed"]["expert all-to-all"].startswith("a token sent once to each of the 1.99 nodes")
    assert "DeepEP's internode bandwidths (mb0096-mb0101)" in got["assumed"]["expert all-to-all"]
    sheet = json.loads(run(*QWEN_TWO[:-1], "datasheet", "--json")[1])
    assert "the network port's datasheet rate (a floor)" in sheet["assumed"]["expert all-to-all"]


def test_deepseek_v3_names_the_grouped_kernels_node_limited_routing_and_its_prediction_module():
    status, out, _ = run(*V3)
    assert status == 0, out
    assert "4 experts a GPU, 8,192 rows each a micro-batch, their forward products one grouped kernel" in out
    assert "(mbx300-mbx309)" in out
    assert "4.00 nodes its experts sit on, at most 4 of 8 expert groups (node-limited routing)" in out
    assert "the dispatch in fp8, the combine in bf16" in out
    assert "1 multi-token-prediction layer trained on the last stage" in out


def test_a_dense_model_prints_no_expert_terms():
    status, out, _ = run("train", "llama-3-8b", "--gpu", "h100-sxm", "--nodes", "1", "--seq", "4096",
                         "--global-batch", "64", "--roof", "calibrated", "--json")
    assert status == 0
    assert not {"experts", "expert all-to-all", "mtp"} & set(json.loads(out)["assumed"])


@pytest.mark.parametrize("ep, needle", [
    ("3", "--ep (3) must divide the experts (128) of qwen3-30b-a3b"),
    ("256", "--ep (256) exceeds the experts (128) of qwen3-30b-a3b"),
])
def test_an_expert_degree_the_experts_do_not_allow_is_refused_naming_the_flag(ep, needle):
    args = list(QWEN_TWO)
    args[args.index("--ep") + 1] = ep
    status, out, err = run(*args)
    assert status == 2 and out == ""
    assert needle in err


def test_an_expert_degree_on_a_dense_model_is_refused_naming_the_flag():
    status, _, err = run("train", "llama-3-8b", "--gpu", "h100-sxm", "--nodes", "1", "--seq", "4096", "--ep", "2",
                         "--global-batch", "64")
    assert status == 2
    assert "--ep (2) needs a mixture-of-experts model; llama-3-8b is dense" in err


def test_the_help_says_how_experts_are_routed_and_exchanged():
    status, out, _ = run("train", "--help")
    assert status == 0
    text = " ".join(out.split())
    assert "must divide the experts. Routing is dropless and balanced" in text
    assert "DeepEP's kernels" in text
