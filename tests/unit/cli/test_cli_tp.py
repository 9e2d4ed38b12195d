"""``--tp N`` on decode, prefill, serve and train (chapter 8)."""

import json

import pytest

from roofline.parallel import tensor_parallel as tp
from roofline.cli import main

from cli_helpers import in_process


call = in_process


def test_decode_with_tp_is_one_gpus_kernels_plus_the_collectives():
    status, out, _ = call("decode", "llama-3-70b", "--gpu", "h100-sxm", "--context", "1024", "--tp", "8", "--json")
    assert status == 0
    got = json.loads(out)
    pred = tp.predict_tp(tp.tp_decode_step("llama-3-70b", 8, 1, 1024), "h100-sxm")
    assert got["time_s"] == pytest.approx(pred.time)
    assert got["collectives"] == 2 * 80 + 2 and got["collective_time_s"] == pytest.approx(pred.comm_time)
    assert got["fits"] is True  # 141 GB of weights over 8 GPUs


def test_tp_one_is_the_plain_command():
    _, plain, _ = call("decode", "llama-3-8b", "--gpu", "h100-sxm", "--json")
    _, one, _ = call("decode", "llama-3-8b", "--gpu", "h100-sxm", "--tp", "1", "--json")
    assert json.loads(plain) == json.loads(one)


def test_prefill_and_train_accept_tp():
    status, out, _ = call("prefill", "llama-3-8b", "--gpu", "h100-sxm", "--tokens", "2048", "--tp", "2")
    assert status == 0 and "66 collectives over NVLink" in out  # 2 per layer, the embedding and the logits
    status, out, _ = call("train", "llama-3-70b", "--gpu", "h100-sxm", "--tp", "8", "--gpus", "64", "--seq", "4096",
                          "--recompute", "full", "--zero", "1", "--json")
    got = json.loads(out)
    assert status == 0 and got["data_parallel"] == 8
    assert got["collectives"] == (2 * 80 + 4) + (2 * 80 + 1) + 2 * 80  # forward, backward, recomputed forward
    assert got["time_s"] > got["compute_time_s"]


@pytest.mark.parametrize("argv, message", [
    (("decode", "llama-3-8b", "--gpu", "h100", "--tp", "3"), "tp must divide llama-3-8b's 32 query heads"),
    (("decode", "llama-3.1-405b", "--gpu", "h100", "--tp", "16"), "at most the 8 GPUs of a node"),
    (("serve", "llama-3-8b", "--gpu", "h100", "--context", "1024", "--tp", "6"), "tp must divide"),
    (("train", "llama-3-8b", "--gpu", "h100", "--tp", "4", "--gpus", "6", "--seq", "1024"), "multiple of --tp"),
])
def test_bad_tp_is_refused_naming_the_flag(argv, message):
    status, out, _ = call(*argv, "--json")
    got = json.loads(out)
    assert status == 2 and message in got["error"] and got["argument"] in ("--tp", "--gpus")


def test_mixture_of_experts_is_not_modelled_here():
    status, out, _ = call("decode", "mixtral-8x7b", "--gpu", "h100", "--tp", "2", "--json")
    assert status == 1 and "dense models only" in json.loads(out)["error"]


@pytest.mark.parametrize("argv", [
    ["train", "llama-3-8b", "--gpu", "h100", "--seq", "4096", "--tp", "2", "--accumulation", "4"],
    ["serve", "llama-3-8b", "--gpu", "h100", "--context", "4096", "--tp", "2", "--curve"],
    ["serve", "llama-3-8b", "--gpu", "h100", "--context", "4096", "--tp", "2", "--prompt", "512"],
])
def test_tp_refuses_what_it_would_otherwise_ignore(argv, capsys):
    """--tp beside a flag whose answer it would not include is refused, naming --tp, not silently dropped."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "--tp" in err and "does not combine" in err


def test_tp_and_ep_together_are_refused(capsys):
    """Two ways of splitting one model at once are not modelled: the error names --ep."""
    assert main(["decode", "mixtral-8x7b", "--gpu", "h100", "--context", "1024", "--tp", "2", "--ep", "2",
                 "--routing", "uniform"]) == 2
    assert "--tp and --ep together" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [
    ["prefill", "llama-3-8b", "--gpu", "h100", "--tokens", "65536", "--tp", "2", "--cp", "2"],
])
def test_two_splits_or_cp_with_nodes_are_refused(argv, capsys):
    """--cp beside --tp in a prefill is refused naming a flag rather than dropped."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "--cp" in err and ("together" in err or "does not combine" in err)


@pytest.mark.parametrize("argv", [
    ["train", "llama-3-8b", "--gpu", "h100", "--seq", "65536", "--tp", "2", "--cp", "2", "--json"],
    ["train", "llama-3-8b", "--gpu", "h100", "--seq", "65536", "--cp", "2", "--nodes", "2", "--json"],
    ["train", "llama-3-8b", "--gpu", "h100", "--seq", "4096", "--tp", "2", "--nodes", "2", "--json"],
])
def test_train_prices_tp_with_cp_or_with_nodes_as_one_cluster_layout(argv, capsys):
    """What chapter 8's and chapter 11's single-split paths refused, the cluster model prices (appendix C)."""
    assert main(argv) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["estimate"]["time_s"] >= got["floor"]["time_s"] > 0


# --- every number from a package function -----------------------------------------------------------

def test_train_with_tp_prints_the_packages_tensor_parallel_plan():
    status, out, _ = call("train", "llama-3-70b", "--gpu", "h100-sxm", "--tp", "8", "--gpus", "64", "--seq", "4096",
                          "--recompute", "full", "--zero", "1", "--json")
    got = json.loads(out)
    run = tp.tp_training_plan("llama-3-70b", "h100-sxm", tp=8, gpus=64, seq=4096, recompute="full", zero_stage=1)
    assert status == 0
    assert got["time_s"] == run.time and got["compute_time_s"] == run.compute_time
    assert got["tokens_per_s_per_gpu"] == run.tokens_per_s_per_gpu and got["mfu"] == run.mfu
    assert got["memory_bytes"] == run.memory_per_gpu and got["collective_time_s"] == run.collective_time
    _, text, _ = call("train", "llama-3-70b", "--gpu", "h100-sxm", "--tp", "8", "--gpus", "64", "--seq", "4096",
                      "--recompute", "full", "--zero", "1")
    assert f"MFU {run.mfu:.1%}" in text and "485 collectives" in text


def test_serve_with_tp_prints_the_packages_tensor_parallel_server():
    from roofline.serving.capacity import tp_serving_capacity

    status, out, _ = call("serve", "llama-3-70b", "--gpu", "h100-sxm", "--context", "8192", "--tp", "8", "--json")
    got = json.loads(out)
    p = tp_serving_capacity("llama-3-70b", "h100-sxm", 8192, tp=8)
    assert status == 0 and got["batch"] == got["max_batch"] == 197
    assert got["memory_bytes"] == p.memory_per_gpu and got["time_s"] == p.time
    assert got["tokens_per_s"] == p.tokens_per_s and got["tokens_per_s_per_gpu"] == p.tokens_per_s_per_gpu


def test_serve_with_tp_reads_the_cache_in_the_weights_format():
    """Fixed: the step read a bf16 cache while the memory held an fp8 one (the weights' format, chapter 5)."""
    _, fp8, _ = call("serve", "llama-3-70b", "--gpu", "h100-sxm", "--context", "8192", "--tp", "4", "--batch", "16",
                     "--weights-dtype", "fp8", "--json")
    _, named, _ = call("serve", "llama-3-70b", "--gpu", "h100-sxm", "--context", "8192", "--tp", "4", "--batch", "16",
                       "--weights-dtype", "fp8", "--kv-dtype", "fp8", "--json")
    assert json.loads(fp8)["time_s"] == json.loads(named)["time_s"]


def test_serve_with_tp_that_fits_nothing_still_answers_in_json():
    status, out, _ = call("serve", "llama-3.1-405b", "--gpu", "h100-sxm", "--context", "8192", "--tp", "2", "--json")
    got = json.loads(out)
    assert status == 0 and got["fits"] is False and got["max_batch"] == 0 and "does not fit" in got["verdict"]


def test_decode_with_tp_keeps_narrow_weights_beside_wide_embeddings():
    """Fixed: with --embeddings-dtype the shard's layers were counted in bf16, whatever --weights-dtype said."""
    from roofline.workloads.memory import inference_footprint

    _, out, _ = call("decode", "llama-3-70b", "--gpu", "h100-sxm", "--batch", "16", "--context", "4096", "--tp", "4",
                     "--weights-dtype", "int4-g128", "--embeddings-dtype", "bf16", "--json")
    shard = tp.shard_model("llama-3-70b", 4)
    want = inference_footprint(shard, 16, 4097, dtype="int4-g128", kv_dtype="bf16", embeddings_dtype="bf16").total
    assert json.loads(out)["memory_bytes"] == want
    assert want < 16e9  # a quarter of 39.5 GB of weights and of 21.5 GB of cache, not the 40.6 GB printed before
