"""Issue 33's unhelpful errors, pinned: each case gives exit status 2 and one message naming the argument at fault
and what was expected, as one JSON object under ``--json``."""

import json

import pytest

from roofline.core.model import model_config
from roofline.core.routing import experts_touched

from cli_helpers import in_process
from test_cli_main import MY_CHIP


def _error(*args):
    """The JSON error of ``roofline ARGS --json`` (status 2), parsed strictly; the text error beside it."""
    status, out, err = in_process(*args, "--json")
    assert status == 2 and err == "", (status, out, err)
    data = json.loads(out, parse_constant=pytest.fail)
    text_status, text_out, text = in_process(*args)
    assert text_status == 2 and text_out == "" and data["error"] in text
    return data


@pytest.mark.parametrize("command", [("params",), ("decode", "--gpu", "h100"), ("train", "--gpu", "h100", "--seq", "8")])
def test_a_model_name_too_long_for_a_file_name_is_an_unknown_name(command):
    name = "x" * 256
    data = _error(command[0], name, *command[1:])
    assert data["argument"] == "model" and data["error"].startswith("unknown model 'xxxx")
    assert "(256 characters); known: deepseek-v3" in data["error"] and name not in data["error"]
    close = _error("params", "llama-3-8b" + "b" * 300)["error"]
    assert "(310 characters); did you mean 'llama-3-8b'?" in close
    assert "not a path this system can open" in _error("params", "./" + "x" * 300 + "/config.json")["error"]


def test_a_hidden_size_past_any_model_is_refused_where_the_config_enters(tmp_path):
    config = model_config("llama-3-8b") | {"hidden_size": 2**40, "head_dim": 128}
    path = tmp_path / "wide.json"
    path.write_text(json.dumps(config))
    for command in (("plan", str(path), "--gpu", "h100", "--nodes", "1", "--seq", "4096", "--global-batch", "8"),
                    ("params", str(path)), ("decode", str(path), "--gpu", "h100")):
        data = _error(*command)
        assert data["argument"] == "model" and data["error"] == (
            "model config 'wide': 'hidden_size' must be a positive integer (at most 1,048,576), got 1099511627776")


@pytest.mark.parametrize("args, argument", [
    (("decode", "llama-3-8b", "--gpu", "h100", "--accounting", "text", "--attention", "explicit"), "--attention"),
    (("prefill", "llama-3-8b", "--gpu", "h100", "--tokens", "64", "--accounting", "text", "--lm-head", "last"),
     "--lm-head"),
])
def test_a_kernel_option_under_the_first_order_count_names_the_conflict(args, argument):
    data = _error(*args)
    assert data["argument"] == argument and "--context" not in data["error"]
    assert data["error"].startswith(f"{argument} chooses kernels, which only the refined accounting counts")
    # without --accounting a kernel option asks for the refined count
    status, out, _ = in_process(*args[:args.index("--accounting")], *args[args.index("--accounting") + 2:], "--json")
    assert status == 0 and json.loads(out)["accounting"] == "refined"


@pytest.mark.parametrize("args, needs", [
    (("train", "llama-3-8b", "--seq", "4096", "--gpus", "2"), "train --gpus 2 needs 'scale_up'"),
    (("train", "llama-3-8b", "--seq", "4096", "--nodes", "2"),
     "train over 2 nodes of 8 GPUs needs 'scale_up' (GPU to GPU inside a node: NVLink, Infinity Fabric) or 'host' "
     "(GPU to CPU: PCIe) and 'network' (between nodes, per GPU: InfiniBand, Ethernet)"),
    (("train", "llama-3-8b", "--seq", "4096", "--offload"), "train --offload needs 'host' (GPU to CPU: PCIe)"),
    (("train", "llama-3-8b", "--seq", "4096", "--tp", "2"), "train --tp 2 needs 'scale_up'"),
    (("train", "llama-3-8b", "--seq", "4096", "--cp", "2"), "train --cp 2 needs 'scale_up'"),
    (("decode", "llama-3-8b", "--tp", "2"), "decode --tp 2 needs 'scale_up'"),
    (("prefill", "llama-3-8b", "--tokens", "4096", "--cp", "16"), "prefill --cp 16 needs 'scale_up'"),
    (("serve", "llama-3-8b", "--context", "1024", "--tp", "2"), "serve --tp 2 needs 'scale_up'"),
    (("decode", "mixtral-8x7b", "--batch", "8", "--ep", "2"), "decode --ep 2 needs 'scale_up'"),
    (("plan", "llama-3-8b", "--nodes", "2", "--seq", "4096", "--global-batch", "64"),
     "plan over 2 nodes of 8 GPUs needs 'scale_up'"),
])
def test_a_catalog_without_an_interconnect_names_the_tiers_the_command_needs(tmp_path, args, needs):
    path = tmp_path / "mine.toml"
    path.write_text(MY_CHIP)
    data = _error(*args, "--gpu", "mine", "--catalog", str(path))
    assert data["argument"] == "--catalog" and data["error"].startswith(needs)
    assert data["error"].endswith("gives no interconnect at all (no [gpus.my-chip.interconnect] table); add "
                                  + ("them" if "and 'network'" in data["error"] else "it")
                                  + " under [gpus.my-chip.interconnect]")
    assert "one of  for" not in data["error"] and data["error"].strip()


def test_a_shipped_chip_without_a_network_is_named_at_the_gpu():
    data = _error("train", "llama-3-8b", "--gpu", "h100-pcie", "--seq", "4096", "--nodes", "2")
    assert data["argument"] == "--gpu" and "needs 'network'" in data["error"]
    assert "gives only 'scale_up', 'host'; add it under [gpus.h100-pcie.interconnect]" in data["error"]


@pytest.mark.parametrize("command", [("train", "llama-3-8b", "--gpu", "h100", "--seq", "4096"),
                                     ("plan", "llama-3-8b", "--gpu", "h100", "--nodes", "1", "--seq", "4096",
                                      "--global-batch", "8")])
@pytest.mark.parametrize("value", ["1e-320", "5e-324", "0", "nan", "inf", "-0.5", "1.5"])
def test_a_fraction_of_peak_out_of_range_is_blamed_on_achieved(command, value):
    data = _error(*command, "--achieved", value)
    assert data["argument"] == "--achieved" and "expected a fraction of peak at least 1e-06 and at most 1" in data["error"]


def test_help_under_json_is_json_and_a_value_given_to_json_is_named():
    for args in (("--help",), ("decode", "--help"), ("plan", "-h")):
        status, out, _ = in_process(*args, "--json")
        assert status == 0 and json.loads(out)["help"].startswith("usage: roofline")
    status, out, err = in_process("decode", "llama-3-8b", "--gpu", "h100", "--json=1")  # asks for JSON, errors in it
    data = json.loads(out)
    assert status == 2 and err == "" and data["argument"] == "--json" and "--json is a switch and takes no value, got '1'" in data["error"]


def test_a_catalog_capacity_past_any_chip_is_refused_at_the_catalog(tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text(MY_CHIP.replace('value = 141, unit = "GB"', 'value = 1e30, unit = "GB"'))
    data = _error("serve", "llama-3-8b", "--gpu", "mine", "--context", "1024", "--curve", "--catalog", str(path))
    assert data["argument"] == "--catalog" and "[gpus.my-chip] hbm_capacity: expected a figure between" in data["error"]
    assert "ufunc" not in data["error"]


def test_the_uniform_routing_a_moe_decode_assumes_is_the_packages_expectation():
    status, out, _ = in_process("decode", "mixtral-8x7b", "--gpu", "h100", "--batch", "64", "--json")
    data = json.loads(out, parse_constant=pytest.fail)
    assert status == 0 and data["routing"] == "uniform" and data["routing_assumed"] is True
    assert data["experts_read_per_layer"] == experts_touched("mixtral-8x7b", 64, "uniform")


# --- issue 51: flags that lied or vanished, each answered or refused with why ------------------------------------

@pytest.mark.parametrize("args, argument, words", [
    (("train", "llama-3-8b", "--gpu", "h100", "--nodes", "1000000", "--tp", "8", "--seq", "4096"), "--nodes",
     "--nodes must be at most 131,072 at 8 GPUs per node (a cluster of at most 1,048,576 GPUs"),
    (("train", "llama-3-8b", "--gpu", "h100", "--dp", "3", "--gpus", "8", "--seq", "4096", "--pp", "1"), "--gpus",
     "--dp 3 and --gpus 8 disagree"),
    (("train", "llama-3-8b", "--gpu", "h100", "--nodes", "2", "--gpus", "8", "--tp", "2", "--seq", "4096"), "--gpus",
     "--gpus 8 disagrees with --nodes 2 x --gpus-per-node 8"),
    (("train", "llama-3-8b", "--gpu", "h100", "--dp", "2", "--seq", "4096", "--sequence-parallel", "on"),
     "--sequence-parallel", "it needs tp > 1"),
    (("train", "llama-3-8b", "--gpu", "h100", "--seq", "2048", "--dp", "9007199254740992"), "--dp",
     "GPUs (tp x cp x pp x dp), more than the 1,048,576 of the largest cluster priced"),
    (("serve", "llama-3-8b", "--gpu", "h100", "--input", "10", "--output", "10", "--rate", "-inf"), "--rate",
     "expected a positive finite number"),
])
def test_a_flag_either_acts_or_is_refused_naming_it(args, argument, words):
    data = _error(*args)
    assert data["argument"] == argument and words in data["error"], data


def test_a_model_whose_heads_a_node_does_not_divide_gets_rules_at_a_degree_that_does(tmp_path):
    """A one-head config: the rules ask about tensor degree 1 (the most of the node's 8 GPUs that divide one head),
    and an explicit --tp 2 is refused naming --tp."""
    cfg = model_config("llama-3-8b") | {"num_attention_heads": 1, "num_key_value_heads": 1, "head_dim": 4096}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    status, out, _ = in_process("rules", str(path), "--gpu", "h100", "--json")
    assert status == 0 and json.loads(out)["tp"] == 1
    data = _error("rules", str(path), "--gpu", "h100", "--tp", "2")
    assert data["argument"] == "--tp" and "--tp must divide" in data["error"] and "1 attention heads, got 2" in data["error"]


def test_plan_and_rules_on_one_node_need_no_network():
    """The MI300X's catalog entry has NVLink-like links and no network: one node of eight is priced."""
    for args in (("plan", "llama-3-8b", "--gpu", "mi300x", "--nodes", "1", "--seq", "4096", "--global-batch", "8"),
                 ("plan", "llama-3-8b", "--gpu", "mi300x", "--nodes", "1", "--seq", "4096", "--global-batch", "8",
                  "--accounting", "text"),
                 ("rules", "llama-3-8b", "--gpu", "mi300x", "--global-batch", "8")):
        status, out, err = in_process(*args, "--json")
        assert status == 0 and json.loads(out), err
    data = _error("plan", "llama-3-8b", "--gpu", "mi300x", "--nodes", "2", "--seq", "4096", "--global-batch", "8",
                  "--accounting", "text")
    assert data["argument"] == "--gpu" and "needs 'network'" in data["error"]


def test_a_sequence_past_the_trained_context_is_said_by_every_training_answer():
    common = ("llama-3-8b", "--gpu", "h100", "--seq", "8193")
    for args in (("plan", *common, "--nodes", "1", "--global-batch", "8"),
                 ("plan", *common, "--nodes", "1", "--global-batch", "8", "--accounting", "text"),
                 ("train", *common, "--nodes", "1", "--pp", "2")):
        status, out, _ = in_process(*args)
        assert status == 0 and "BEYOND THE MODEL'S CONTEXT: 8,193 tokens per sequence" in out
    status, out, _ = in_process("plan", *common, "--nodes", "1", "--global-batch", "8", "--json")
    assert json.loads(out)["beyond_trained_context"] is True


@pytest.mark.parametrize("weights", ["int4-g128", "mxfp4"])
def test_the_weight_formats_serve_help_gives_work_as_written(weights):
    """Group-wise formats are widened to bf16 for their matmuls (W4A16), as --math-dtype's help says."""
    status, out, err = in_process("serve", "llama-3-8b", "--gpu", "h100", "--input", "1024", "--output", "128",
                                  "--weights-dtype", weights, "--json")
    assert status == 0, err
    assert json.loads(out)["output_tokens_per_s"] > 0


def test_a_kv_cache_sent_between_nodes_needs_the_network_the_catalog_gives(tmp_path):
    """A chip with NVLink and no network: the pools of 8 and 8 GPUs span two nodes, so the cache would cross the
    network, which the datasheet roof had priced at NVLink's rate; refused naming the tier (train refuses alike)."""
    path = tmp_path / "mine.toml"
    path.write_text(MY_CHIP + '\n[gpus.my-chip.interconnect]\nscale_up = { value = 900, unit = "GB/s", source = '
                              '"my-sheet", direction = "bidirectional", name = "MyLink" }\n')
    args = ("serve", "llama-3-8b", "--gpu", "mine", "--input", "1024", "--output", "128", "--catalog", str(path),
            "--roof", "datasheet")
    status, out, _ = in_process(*args, "--disaggregate", "4:4", "--json")  # one node: NVLink carries the cache
    assert status == 0 and json.loads(out)["output_tokens_per_s"] > 0
    data = _error(*args, "--disaggregate", "8:8")
    assert data["argument"] == "--catalog" and "needs 'network'" in data["error"]
    assert "[gpus.my-chip.interconnect]" in data["error"]


@pytest.mark.parametrize("flags, flag", [(("--plan", "--disaggregate", "1:1"), "--disaggregate"),
                                         (("--plan", "--tp", "2"), "--tp"),
                                         (("--disaggregate", "2:2", "--replicas", "2"), "--replicas")])
def test_serve_flags_that_would_be_ignored_are_refused(flags, flag):
    data = _error("serve", "llama-3-8b", "--gpu", "h100", "--input", "1024", "--output", "128", *flags)
    assert data["argument"] == flag
