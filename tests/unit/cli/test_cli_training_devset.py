"""`roofline train` expresses every layout of the development set: each published run, given as flags on a
config.json of its GPT model, prints the same estimate and floor as the package's check of that run."""

import json

import pytest

from roofline.measured.training_runs import development_checks

from cli_helpers import in_process

CHECKS = development_checks()


@pytest.mark.parametrize("check", CHECKS, ids=[c.run.id for c in CHECKS])
def test_every_development_run_is_one_train_command(check, tmp_path):
    raw, lay = check.run.raw, check.estimate.layout
    md = raw["model"]
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": "gpt2", "n_embd": md["hidden"], "n_head": md["heads"],
                                  "n_layer": md["layers"], "n_positions": raw["seq_len"], "vocab_size": md["vocab"]}))
    argv = ["train", str(config), "--gpu", "a100-80gb", "--nodes", str(raw["gpu_count"] // 8), "--tp", str(lay.tp),
            "--pp", str(lay.pp), "--seq", str(lay.seq), "--global-batch", str(lay.batch), "--micro-batch",
            str(lay.micro_batch), "--recompute", lay.recompute, "--sequence-parallel", "on" if lay.sp else "off",
            "--attention", "explicit", "--dtype", "fp16", "--zero", "0", "--no-overlap", "--json"]
    if lay.chunks > 1:
        argv += ["--chunks", str(lay.chunks)]
    status, out, err = in_process(*argv)
    assert status == 0, err
    got = json.loads(out)
    assert got["gpus"] == raw["gpu_count"] and got["layout"]["dp"] == raw["dp"]
    assert got["time_s"] == pytest.approx(check.estimate.time)
    assert got["floor"]["time_s"] == pytest.approx(check.floor.time)


@pytest.mark.parametrize("key", ["llama3_405b_8k_8192", "llama3_405b_8k", "llama3_405b_128k"])
def test_llama_3_405b_stages_are_each_one_train_command(key):
    """The three layouts of the Llama 3 paper's Table 4, as published (TP 8, PP 16, CP 1 or 16, the DP that
    fills the GPUs, 16M tokens a step); the paper leaves the interleaving depth unstated: 8 chunks, the layers
    per stage."""
    from roofline.parallel.planner import PUBLISHED

    pub = PUBLISHED[key][0]
    batch = 2 ** 24 // pub["seq"]  # "16M tokens" a step: 16 x 2**20, as Table 4's batch size per DP rank gives
    status, out, err = in_process("train", "llama-3.1-405b", "--gpu", "h100", "--nodes", str(pub["gpus"] // 8),
                                  "--tp", "8", "--cp", str(pub["cp"]), "--pp", "16", "--seq", str(pub["seq"]),
                                  "--global-batch", str(batch), "--chunks", "8", "--recompute", "full", "--zero", "1",
                                  "--json")
    assert status == 0, err
    got = json.loads(out)
    assert got["layout"]["dp"] == pub["dp"] and got["gpus"] == pub["gpus"] and got["fits"]
    assert got["floor"]["mfu"] > got["mfu"] > 0
