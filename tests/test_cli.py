"""The command line, run the way a reader runs it: in a subprocess, through ``python -m roofline``."""

import json
import subprocess
import sys

import pytest

import roofline as rl


def run(*args, check_rc=None):
    proc = subprocess.run([sys.executable, "-m", "roofline", *args], capture_output=True, text=True, timeout=120)
    if check_rc is not None:
        assert proc.returncode == check_rc, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    return proc


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


def test_decode_matches_the_package():
    data = json.loads(run("decode", "llama-3-8b", "--gpu", "h100-sxm", "--batch", "1", "--context", "0", "--json",
                          check_rc=0).stdout)
    pred = rl.predict(rl.decode_step("llama-3-8b"), rl.get_hardware("h100-sxm"))
    assert data["time_s"] == pytest.approx(pred.time)
    assert data["bound"] == "memory"
    assert set(data["parts"]) == set(rl.PARTS)
    table = run("decode", "llama-3-8b", "--gpu", "h100-sxm", check_rc=0).stdout
    assert "4.79 ms" in table and "weights" in table and "predicted time" in table


def test_prefill_and_refined_accounting():
    data = json.loads(run("prefill", "llama-3-8b", "--gpu", "h100", "--tokens", "2048", "--json", check_rc=0).stdout)
    assert data["bound"] == "compute" and data["tokens"] == 2048
    assert data["flops"] == pytest.approx(rl.prefill("llama-3-8b", 2048).flops)
    refined = run("decode", "llama-3-8b", "--gpu", "h100", "--batch", "4", "--context", "1024",
                  "--accounting", "refined", check_rc=0).stdout
    assert "refined FLOPs" in refined


@pytest.mark.parametrize("args, expected", [
    (("hardware", "h100-smx"), "did you mean 'h100-sxm'"),
    (("params", "lama-3-8b"), "did you mean"),
    (("decode", "llama-3-8b", "--gpu", "h10"), "unknown hardware 'h10'"),
    (("ridge", "v100", "--dtype", "bf16"), "no dense bf16 peak"),
])
def test_unknown_names_get_close_matches_and_status_2(args, expected):
    proc = run(*args, check_rc=2)
    assert expected in proc.stderr and proc.stderr.startswith("roofline: error:")


@pytest.mark.parametrize("flag, value", [("--batch", "0"), ("--batch", "abc"), ("--batch", "1.5"), ("--context", "-1")])
def test_bad_numbers_exit_2_like_argparse(flag, value):
    proc = run("decode", "llama-3-8b", "--gpu", "h100", flag, value, check_rc=2)
    assert f"error: argument {flag}: expected a whole number" in proc.stderr


def test_missing_arguments_exit_2():
    assert "--gpu" in run("decode", "llama-3-8b", check_rc=2).stderr
    assert "--tokens" in run("prefill", "llama-3-8b", "--gpu", "h100", check_rc=2).stderr


def test_not_modelled_is_said_plainly():
    proc = run("decode", "mixtral-8x7b", "--gpu", "h100", "--batch", "8", check_rc=1)
    assert "not modelled" in proc.stderr and "routing" in proc.stderr
    assert run("decode", "mixtral-8x7b", "--gpu", "h100", check_rc=0).stdout
