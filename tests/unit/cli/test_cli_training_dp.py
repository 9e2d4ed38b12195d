"""`roofline train --nodes --gpus-per-node`: the data-parallel step of chapter 7 on the command line."""

import json

import pytest

from roofline.parallel import data_parallel

from cli_helpers import in_process


def run(*args):
    return in_process("train", *args)


def test_json_is_the_package_step():
    status, out, _ = run("llama-3-70b", "--gpu", "h100", "--seq", "4096", "--nodes", "8", "--gpus-per-node", "8",
                         "--zero", "3", "--recompute", "full", "--achieved", "0.45", "--json")
    assert status == 0
    got = json.loads(out)
    want = data_parallel.data_parallel_step("llama-3-70b", "h100", nodes=8, gpus_per_node=8, zero_stage=3,
                                            seq=4096, recompute="full", achieved=0.45)
    assert got["gpus"] == 64 and got["strategy"] == "ZeRO-3 (FSDP full)"
    for key, value in [("compute_time_s", want.compute), ("communication_time_s", want.communication),
                       ("exposed_time_s", want.exposed), ("time_s", want.time), ("mfu", want.mfu),
                       ("memory_bytes", float(want.footprint.total)), ("sent_network_bytes", want.sent_network)]:
        assert got[key] == pytest.approx(value), key
    assert got["time_s"] == pytest.approx(got["compute_time_s"] + got["exposed_time_s"])


def test_text_prints_compute_communication_exposed_and_mfu():
    status, out, _ = run("llama-3-8b", "--gpu", "h100", "--seq", "4096", "--nodes", "4", "--zero", "3",
                         "--recompute", "full", "--achieved", "0.5")
    assert status == 0
    want = data_parallel.data_parallel_step("llama-3-8b", "h100", nodes=4, zero_stage=3, seq=4096, recompute="full",
                                            achieved=0.5)
    for word in ("compute", "communication", "exposed", "MFU", "32 GPUs", "InfiniBand NDR", "NVLink 4"):
        assert word in out, word
    assert f"MFU {want.mfu:.1%}" in out and "fits within" in out


def test_without_the_new_flags_the_chapter_three_output_is_unchanged():
    _, plain, _ = run("llama-3-8b", "--gpu", "h100", "--seq", "4096", "--gpus", "8", "--zero", "3")
    assert plain.startswith("training step of Llama 3 8B") and "data-parallel training step" not in plain
    _, dp, _ = run("llama-3-8b", "--gpu", "h100", "--seq", "4096", "--gpus-per-node", "8", "--zero", "3")
    assert dp.startswith("data-parallel training step") and "1 node x 8" in dp


@pytest.mark.parametrize("args, message", [
    (("--nodes", "0"), "expected a whole number >= 1"),
    (("--nodes", "4", "--gpus", "8"), "--gpus 8 disagrees with --nodes 4 x --gpus-per-node 8"),
    (("--nodes", "2", "--hybrid"), "--hybrid is ZeRO-3 inside each node: give --zero 3"),
    (("--nodes", "2", "--offload"), "--offload is priced by the chapter 3 step on one node"),
    (("--nodes", "2", "--gpu", "h100-pcie"), "needs 'network' (between nodes, per GPU: InfiniBand, Ethernet) on the "
                                             "H100 PCIe, and its catalog entry gives only 'scale_up', 'host'"),
    (("--gpus-per-node", "two"), "expected a whole number >= 1"),
])
def test_bad_input_is_named(args, message):
    base = ["llama-3-8b", "--seq", "4096"]
    if "--gpu" not in args:
        base += ["--gpu", "h100"]
    status, out, err = run(*base, *args)
    assert status != 0 and message in err and out == ""
