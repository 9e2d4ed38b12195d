"""`roofline train` gives the answer appendix C prints: each development run, typed as its source gives it (the
published settings, ``auto`` for those the source leaves open, :func:`~roofline.measured.training_runs.train_argv`)
on a config.json of its model, prints the same estimate, floor and layout as the package's check of that run."""

import json

import pytest

from roofline.measured.training_runs import development_checks, modern_checks, train_argv

from cli_helpers import in_process

CHECKS = development_checks() + modern_checks()


@pytest.mark.parametrize("check", CHECKS, ids=[c.run.id for c in CHECKS])
def test_every_development_run_is_one_train_command(check, tmp_path):
    raw, lay = check.run.raw, check.estimate.layout
    config = tmp_path / "config.json"
    config.write_text(json.dumps(check.run.config()))
    argv = train_argv(check.run, str(config))
    assert ("auto" in argv) == check.run.settings_unstated
    status, out, err = in_process(*argv, "--json")
    assert status == 0, err
    got = json.loads(out)
    assert got["gpus"] == raw["gpu_count"] and got["layout"]["dp"] == raw["dp"]
    assert got["layout"]["dtype"] == lay.dtype and got["layout"]["attention_kernel"] == lay.attention_kernel
    assert got["time_s"] == check.estimate.time  # the same function, the same settings: the same number
    assert got["floor"]["time_s"] == check.floor.time
    assert (got["layout"]["micro_batch"], got["layout"]["chunks"], got["layout"]["recompute"]) == \
        (lay.micro_batch, lay.chunks, lay.recompute)
    assert set(got["picked"]) <= {"micro_batch", "chunks", "schedule"} and bool(got["picked"]) == check.run.settings_unstated


def test_the_text_says_what_it_picked_and_what_it_assumed(tmp_path):
    """Narayanan et al.'s 1.7B run leaves its micro-batch open: the text names the one picked; and the defaults
    that move a published comparison (flash attention, the overlapped reduction) are printed, with their flags."""
    check = next(c for c in CHECKS if c.run.id == "megatron-ptdp-1.7B-32gpu")
    config = tmp_path / "config.json"
    config.write_text(json.dumps(check.run.config()))
    status, out, err = in_process(*train_argv(check.run, str(config)))
    assert status == 0, err
    assert f"picked (the fastest that fits, of the values left open): micro-batch {check.estimate.layout.micro_batch}" in out
    assert "explicit attention kernel" in out and "waits for the backward pass" in out
    bare = [a for a in train_argv(check.run, str(config)) if a not in ("--no-overlap",)]
    i = bare.index("--attention")
    del bare[i:i + 2]
    status, out, err = in_process(*bare)
    assert status == 0, err
    assert "assumed: flash attention, FlashAttention-2 (--attention-kernel; --attention explicit" in out and "overlaps the backward pass (--no-overlap" in out


@pytest.mark.parametrize("argv, flag, words", [
    (["--micro-batch", "auto"], "--micro-batch", "needs --global-batch"),
    (["--chunks", "auto", "--global-batch", "64"], "--chunks", "needs a pipeline"),
    (["--micro-batch", "0"], "--micro-batch", "expected auto or a whole number"),
    (["--recompute", "sometimes"], "--recompute", "or auto"),
])
def test_auto_is_refused_where_it_means_nothing(argv, flag, words):
    status, out, err = in_process("train", "llama-3-8b", "--gpu", "h100", "--nodes", "1", "--seq", "4096", *argv)
    assert status == 2 and flag in err and words in err, err


def test_auto_recompute_picks_the_fastest_that_fits():
    status, out, err = in_process("train", "llama-3-8b", "--gpu", "h100", "--nodes", "1", "--seq", "8192",
                                  "--global-batch", "64", "--micro-batch", "auto", "--recompute", "auto", "--zero", "3", "--json")
    assert status == 0, err
    got = json.loads(out)
    assert set(got["picked"]) == {"micro_batch", "recompute"} and got["fits"]
    from roofline.parallel.cluster import TrainLayout, estimate_step
    lay = TrainLayout(seq=8192, dp=8, global_batch=64, zero_stage=3)
    _, est = estimate_step("llama-3-8b", "h100-sxm", lay, open=("micro_batch", "recompute"))
    assert got["time_s"] == est.time and got["picked"] == {"micro_batch": est.layout.micro_batch,
                                                           "recompute": est.layout.recompute}


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
