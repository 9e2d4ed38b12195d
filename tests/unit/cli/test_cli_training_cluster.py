"""`roofline train ... --pp --ep --global-batch --schedule --chunks --roof`: any layout on a cluster, a thin
layer over roofline.parallel.cluster and roofline.core.calibration, on good and bad input."""

import json

import pytest

from roofline.parallel.cluster import estimate_step
from roofline.parallel.cluster import TrainLayout

from cli_helpers import in_process

run = in_process

LONG = ("train", "llama-3.1-405b", "--gpu", "h100-sxm", "--nodes", "2048", "--tp", "8", "--cp", "16", "--pp", "16",
        "--seq", "131072", "--global-batch", "128", "--recompute", "full", "--chunks", "8", "--zero", "1")


def test_train_prints_the_package_estimate_and_floor():
    status, out, _ = run(*LONG, "--json")
    assert status == 0
    got = json.loads(out)
    lay = TrainLayout(seq=131072, tp=8, cp=16, pp=16, dp=8, global_batch=128, recompute="full",
                      schedule="interleaved", chunks=8, zero_stage=1)
    floor, est = estimate_step("llama-3.1-405b", "h100-sxm", lay)
    assert got["gpus"] == 16384 and got["layout"]["dp"] == 8 and got["layout"]["micro_batches"] == 16
    assert got["roof"] == "calibrated"
    assert got["time_s"] == pytest.approx(est.time) and got["mfu"] == pytest.approx(est.mfu)
    assert got["floor"]["time_s"] == pytest.approx(floor.time)
    assert got["floor"]["time_s"] < got["time_s"]
    assert got["memory_bytes"] == pytest.approx(est.memory) and got["fits"] is True
    assert sum(got["estimate"]["parts_s"].values()) == pytest.approx(got["time_s"])


def test_train_text_names_the_layout_and_where_the_time_goes():
    status, out, _ = run(*LONG)
    assert status == 0
    assert "TP 8 x CP 16 x PP 16 x DP 8, micro-batch 1 (16 a step), interleaved x8, recompute full" in out
    assert "calibrated estimate" in out and "datasheet floor" in out and "bubble" in out


def test_the_datasheet_roof_alone_and_one_name_for_the_calibrated_one():
    _, sheet, _ = run(*LONG, "--roof", "datasheet", "--json")
    _, named, _ = run(*LONG, "--roof", "calibrated", "--json")
    _, cal, _ = run(*LONG, "--json")
    status, alias, _ = run(*LONG, "--roof", "measured", "--json")
    sheet, named, cal = json.loads(sheet), json.loads(named), json.loads(cal)
    assert sheet["estimate"] is None and sheet["time_s"] == pytest.approx(cal["floor"]["time_s"])
    assert named["time_s"] == pytest.approx(cal["time_s"]) and cal["roof"] == "calibrated"
    assert status == 2 and json.loads(alias)["argument"] == "--roof"


def test_a_chip_without_a_calibrated_roof_gets_the_floor_and_a_clear_refusal():
    base = ("train", "llama-3-8b", "--gpu", "b200", "--nodes", "2", "--tp", "4", "--seq", "4096")
    status, out, _ = run(*base, "--json")
    assert status == 0 and json.loads(out)["roof"] == "datasheet"
    status, _, err = run(*base, "--roof", "calibrated")
    assert status == 2 and "--roof 'calibrated' has no data for the B200: microbenchmarks were gathered for the A100 80GB, H100 SXM, H200 and H800 SXM only; use the datasheet roof" in err


@pytest.mark.parametrize("extra,flag,needle", [
    (("--pp", "5"), "--nodes", "must divide the 16 GPUs"),
    (("--pp", "2", "--chunks", "3"), "--chunks", "chunks (3) must divide the layers per stage"),
    (("--ep", "2"), "--ep", "needs a mixture-of-experts model"),
    (("--dp", "3"), "--dp", "disagrees with the cluster"),
    (("--recompute", "every-4"), "--recompute", "none, selective, full or auto"),
    (("--global-batch", "3"), "--global-batch", "must be a multiple of dp x micro_batch"),
    (("--offload",), "--offload", "not part of the cluster model"),
])
def test_bad_layouts_are_refused_naming_the_flag(extra, flag, needle):
    status, _, err = run("train", "llama-3-8b", "--gpu", "h100-sxm", "--nodes", "2", "--tp", "2", "--seq", "4096",
                         *extra)
    assert status == 2, err
    assert flag in err and needle in err


def test_tp_with_nodes_now_prices_the_whole_layout():
    status, out, _ = run("train", "llama-3-70b", "--gpu", "a100-80gb", "--nodes", "4", "--tp", "8", "--pp", "2",
                         "--seq", "4096", "--global-batch", "64", "--json")
    assert status == 0
    got = json.loads(out)
    assert got["layout"]["dp"] == 2 and got["floor"]["time_s"] < got["time_s"]


FSDP = ("train", "llama-3.1-8b", "--gpu", "h100", "--nodes", "4", "--seq", "8192", "--global-batch", "64", "--json")


@pytest.mark.parametrize("flags, fields", [
    (("--fsdp", "full"), {"zero_stage": 3}),
    (("--zero", "3"), {"zero_stage": 3}),
    (("--fsdp", "full", "--reshard-after-forward", "off"), {"zero_stage": 3, "reshard_after_forward": False}),
    (("--fsdp", "hybrid"), {"zero_stage": 3, "shard_group": 8}),
    (("--zero", "1", "--shard-group", "16"), {"zero_stage": 1, "shard_group": 16}),
])
def test_fsdp_flags_are_the_package_layouts_pytorch_names(flags, fields):
    status, out, err = run(*FSDP, *flags)
    assert status == 0, err
    got = json.loads(out)
    lay = TrainLayout(seq=8192, dp=32, global_batch=64, recompute="none", **fields)
    floor, est = estimate_step("llama-3.1-8b", "h100-sxm", lay)
    assert got["time_s"] == est.time and got["memory_bytes"] == est.memory and got["floor"]["time_s"] == floor.time
    assert got["layout"]["zero_stage"] == fields["zero_stage"]
    assert got["layout"]["reshard_after_forward"] == fields.get("reshard_after_forward", True)
    assert got["layout"]["shard_group"] == fields.get("shard_group", 32)


@pytest.mark.parametrize("flags, flag, words", [
    (("--fsdp", "full", "--zero", "1"), "--fsdp", "give --zero 3 with it"),
    (("--zero", "1", "--reshard-after-forward", "off"), "--reshard-after-forward", "applies to FSDP"),
    (("--zero", "3", "--shard-group", "5"), "--shard-group", "must divide the data-parallel ranks"),
    (("--zero", "3", "--hybrid"), "--hybrid", "--fsdp hybrid"),
])
def test_bad_fsdp_flags_are_refused_naming_the_flag(flags, flag, words):
    status, _, err = run(*FSDP[:-1], *flags)
    assert status == 2 and flag in err and words in err, err


@pytest.mark.parametrize("recipe", [None, "te-current", "deepseek-blockwise"])
def test_fp8_train_prints_the_package_estimate(recipe):
    flags = ("--dtype", "fp8") + (("--fp8-recipe", recipe) if recipe else ())
    status, out, err = run(*FSDP, "--zero", "1", *flags)
    assert status == 0, err
    got = json.loads(out)
    lay = TrainLayout(seq=8192, dp=32, global_batch=64, recompute="none", zero_stage=1, dtype="fp8", fp8_recipe=recipe)
    floor, est = estimate_step("llama-3.1-8b", "h100-sxm", lay)
    assert got["time_s"] == est.time and got["floor"]["time_s"] == floor.time and got["memory_bytes"] == est.memory
    assert got["layout"]["dtype"] == "fp8" and got["layout"]["fp8_recipe"] == (recipe or "te-delayed")
    assert "fp8_recipe" in got["assumed"] and got["estimate"]["parts_s"]["fp8 casts"] > 0


def test_plan_searches_fp8_and_bf16_together():
    status, out, err = run("plan", "llama-3.1-8b", "--gpu", "h100", "--nodes", "2", "--seq", "8192",
                           "--global-batch", "64", "--dtype", "both", "--top", "40", "--json")
    assert status == 0, err
    got = json.loads(out)
    from roofline.core.calibration import get_roof
    from roofline.parallel.cluster import search
    found = search("llama-3.1-8b", get_roof("h100-sxm", "calibrated"), gpus=16, seq=8192, global_batch=64,
                   dtypes=("bf16", "fp8"))
    assert got["layouts_priced"] == found.priced and got["layouts"][0]["time_s"] == found.best.time
    assert got["layouts"][0]["dtype"] == "fp8"  # on an H100 the fastest layout of this model trains in fp8
    status, out, err = run("plan", "llama-3.1-8b", "--gpu", "h100", "--nodes", "2", "--seq", "8192",
                           "--global-batch", "64", "--json")
    assert {x["dtype"] for x in json.loads(out)["layouts"]} == {"bf16"}  # bf16 unless asked


@pytest.mark.parametrize("argv, flag, words", [
    (FSDP[:-1] + ("--fp8-recipe", "te-delayed"), "--fp8-recipe", "give --dtype fp8 with it"),
    (FSDP[:-1] + ("--dtype", "fp8", "--fp8-recipe", "mxfp8"), "--fp8-recipe", "invalid choice"),
    (("plan", "llama-3.1-8b", "--gpu", "h100", "--nodes", "2", "--seq", "8192", "--global-batch", "64",
      "--fp8-recipe", "te-current"), "--fp8-recipe", "give --dtype fp8 or both"),
    (("plan", "llama-3.1-8b", "--gpu", "a100-80gb", "--nodes", "2", "--seq", "8192", "--global-batch", "64",
      "--dtype", "fp8"), "--dtype", "fp8"),
])
def test_bad_fp8_flags_are_refused_naming_the_flag(argv, flag, words):
    status, _, err = run(*argv)
    assert status == 2 and flag in err and words in err, err


def test_fp8_train_answers_for_a_mixture_of_experts():
    """Qwen3-30B-A3B on 32 H100s, its 128 experts over 8 ranks, in fp8 by DeepSeek-V3's blockwise recipe."""
    status, out, err = run("train", "qwen3-30b-a3b", "--gpu", "h100", "--nodes", "4", "--ep", "8", "--seq", "4096",
                           "--global-batch", "256", "--dtype", "fp8", "--fp8-recipe", "deepseek-blockwise",
                           "--zero", "1", "--roof", "calibrated", "--json")
    assert status == 0, err
    got = json.loads(out)
    lay = TrainLayout(seq=4096, dp=32, ep=8, global_batch=256, recompute="none", zero_stage=1, dtype="fp8",
                      fp8_recipe="deepseek-blockwise")
    floor, est = estimate_step("qwen3-30b-a3b", "h100-sxm", lay)
    assert got["time_s"] == est.time and got["floor"]["time_s"] == floor.time
    assert got["estimate"]["parts_s"]["expert all-to-all"] > 0 and got["estimate"]["parts_s"]["fp8 casts"] > 0
