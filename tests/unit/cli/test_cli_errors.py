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
