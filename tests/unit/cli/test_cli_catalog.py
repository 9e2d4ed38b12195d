"""`roofline hardware`, `roofline params` and `roofline ridge`, run the way a reader runs them: in a
subprocess, through ``python -m roofline``."""

import json

import pytest

import roofline as rl

from cli_helpers import run


def test_hardware_lists_every_entry():
    out = run("hardware", check_rc=0).stdout
    for key in rl.hardware_names():
        assert key in out
    assert "3.35 TB/s" in out  # H100 SXM's HBM, as the datasheet gives it


def test_one_entry_shows_every_figure_with_its_source():
    out = run("hardware", "H100", check_rc=0).stdout
    h = rl.get_hardware("h100-sxm")
    for path, fig in h.figures.items():
        assert path in out
        assert fig.source.url in out
    assert "989.4 TFLOP/s" in out and "with sparsity" in out


def test_hardware_json():
    data = json.loads(run("hardware", "mi300x", "--json", check_rc=0).stdout)
    assert data["figures"]["hbm_bandwidth"]["value"] == pytest.approx(5.3e12)
    assert data["figures"]["dense.bf16"]["source"]["url"].startswith("https://")


@pytest.mark.parametrize("name, total, active", [
    ("llama-3-8b", 8_030_261_248, 8_030_261_248),
    ("mixtral-8x7b", 46_702_792_704, 12_879_925_248),
    ("deepseek-v3", 671_026_419_200, 37_552_297_472),
])
def test_params_json(name, total, active):
    data = json.loads(run("params", name, "--json", check_rc=0).stdout)
    assert data["total"] == total and data["active"] == active
    assert isinstance(data["total"], int) and isinstance(data["active"], int)


def test_params_of_a_config_file(tmp_path):
    cfg = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 160, "num_hidden_layers": 2,
           "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000}
    path = tmp_path / "tiny" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(cfg))
    data = json.loads(run("params", str(path), "--json", check_rc=0).stdout)
    assert data["name"] == "tiny" and data["total"] == rl.model_from_config(cfg).params
    out = run("params", str(path), check_rc=0).stdout
    assert f"{data['total']:,}" in out


def test_ridge():
    assert "295.3 FLOP per byte" in run("ridge", "h100-sxm", check_rc=0).stdout
    data = json.loads(run("ridge", "h100-sxm", "--dtype", "fp8", "--json", check_rc=0).stdout)
    assert data["ridge_point"] == pytest.approx(rl.ridge_point("h100-sxm", "fp8"))


def test_params_names_the_attention_layout_of_gemma_2():
    out = run("params", "gemma-2-9b", check_rc=0).stdout
    assert "9,241,705,984" in out
    assert "sliding window     4,096 tokens on 21 of 42 layers (local), 21 global" in out
    assert "soft-capping       tanh on scores at 50 and final logits at 30" in out
    data = json.loads(run("params", "gemma-2-9b", "--json", check_rc=0).stdout)
    assert (data["sliding_window"], data["sliding_layers"]) == (4096, 21)
