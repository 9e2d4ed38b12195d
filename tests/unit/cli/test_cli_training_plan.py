"""`roofline plan`: the cluster model's search ranked by the calibrated estimate (or, under `--roof datasheet`,
by its floor), and chapter 9's first-order search (`--accounting text`), on the command line."""

import json

import pytest


from cli_helpers import in_process
from roofline.parallel.planner import plan


def run(*args):
    return in_process("plan", *args)


ARGS = ("llama-3-8b", "--gpu", "h100", "--gpus-per-node", "8", "--nodes", "2", "--seq", "4096",
        "--global-batch", "64", "--accounting", "text")


def test_json_is_the_package_plan():
    status, out, _ = run(*ARGS, "--top", "3", "--json")
    assert status == 0
    got = json.loads(out)
    want = plan("llama-3-8b", "h100", nodes=2, gpus_per_node=8, seq=4096, global_batch=64).top(3)
    assert got["gpus"] == 16 and len(got["layouts"]) == 3
    for g, w in zip(got["layouts"], want):
        assert (g["tp"], g["pp"], g["dp"], g["micro_batch"], g["recompute"], g["zero_stage"]) == \
            (w.tp, w.pp, w.dp, w.micro_batch, w.recompute, w.zero_stage)
        assert g["time_s"] == pytest.approx(w.time) and g["memory_bytes"] == pytest.approx(w.memory)
        assert g["memory_bytes"] <= got["hbm_usable"]
    times = [g["time_s"] for g in got["layouts"]]
    assert times == sorted(times)


def test_text_prints_the_layouts_with_time_split_and_mfu():
    status, out, _ = run(*ARGS, "--top", "2")
    assert status == 0
    best = plan("llama-3-8b", "h100", nodes=2, gpus_per_node=8, seq=4096, global_batch=64).best
    assert f"TP {best.tp} x PP {best.pp} x DP {best.dp}" in out
    assert "bubble" in out and "exposed communication" in out and f"MFU {best.mfu:.1%}" in out
    assert out.count("memory ") == 2


@pytest.mark.parametrize("args,argument,words", [
    (("llama-3-8b", "--gpu", "h100", "--nodes", "64", "--seq", "4096", "--global-batch", "1", "--accounting", "text"),
     "--global-batch", "divisible"),
    (("llama-3.1-405b", "--gpu", "h100", "--nodes", "1", "--seq", "8192", "--global-batch", "8"), "--nodes",
     "fits on no layout"),
    (("llama-3-8b", "--gpu", "h100", "--nodes", "0", "--seq", "4096", "--global-batch", "8"), "--nodes", "whole"),
    (("llama-3-8b", "--gpu", "h1000", "--nodes", "1", "--seq", "4096", "--global-batch", "8"), "--gpu", "h100"),
    (("llama-3-8b", "--gpu", "h100", "--nodes", "1", "--seq", "4096"), "--global-batch", "required"),
    (("mixtral-8x7b", "--gpu", "h100", "--nodes", "1", "--seq", "4096", "--global-batch", "8", "--accounting", "text"),
     None, "not modelled"),
])
def test_bad_input_names_the_argument(args, argument, words):
    status, out, err = run(*args, "--json")
    assert status in (1, 2)
    got = json.loads(out)
    assert got["argument"] == argument
    assert words in got["error"]


@pytest.mark.parametrize("flags, argument, message", [
    (("--nodes", "9007199254740992"), "--nodes", "--nodes must be at most 131,072 at 8 GPUs per node"),
    (("--nodes", "1", "--gpus-per-node", "100000"), "--gpus-per-node", "--gpus-per-node must be at most 576"),
    (("--nodes", "2", "--gpus-per-node", "9007199254740992"), "--gpus-per-node", "at most 576"),
])
def test_plan_answers_huge_clusters_at_once_naming_the_flag(flags, argument, message):
    import time
    start = time.perf_counter()
    status, out, _ = in_process("plan", "llama-3-8b", "--gpu", "h100", "--seq", "4096", "--global-batch", "512",
                                *flags, "--json")
    error = json.loads(out)
    assert status == 2 and error["argument"] == argument and message in error["error"]
    assert time.perf_counter() - start < 2


CAL = ("llama-3-8b", "--gpu", "h100", "--nodes", "2", "--seq", "4096", "--global-batch", "64")


def test_plan_ranks_by_the_calibrated_estimate_with_the_floor_beside():
    from roofline.core.calibration import get_roof
    from roofline.parallel.cluster import search

    status, out, _ = run(*CAL, "--top", "3", "--json")
    assert status == 0
    got = json.loads(out)
    want = search("llama-3-8b", get_roof("h100", "calibrated"), gpus=16, seq=4096, global_batch=64)
    assert got["roof"] == "calibrated" and got["layouts_fitting"] == want.fitting == len(want.ranked) >= 3
    for g, e, f in zip(got["layouts"], want.ranked, want.floors(3)):
        assert (g["tp"], g["cp"], g["pp"], g["dp"]) == (e.layout.tp, e.layout.cp, e.layout.pp, e.layout.dp)
        assert g["time_s"] == pytest.approx(e.time) and g["floor_time_s"] == pytest.approx(f.time)
        assert f.time <= e.time
    times = [g["time_s"] for g in got["layouts"]]
    assert times == sorted(times)


def test_plan_searches_experts_too():
    status, out, _ = run("mixtral-8x7b", "--gpu", "h100", "--nodes", "2", "--seq", "4096", "--global-batch", "64",
                         "--json")
    assert status == 0 and json.loads(out)["layouts"]


def test_plan_flags_of_the_first_order_search_ask_for_it_and_refuse_the_cluster_model():
    status, out, _ = run(*CAL, "--achieved", "0.5", "--accounting", "refined", "--json")
    assert status == 2 and json.loads(out)["argument"] == "--achieved"
    status, out, _ = run(*CAL, "--achieved", "0.5", "--roof", "calibrated", "--json")
    assert status == 2 and json.loads(out)["argument"] == "--roof"
    status, out, _ = run(*CAL, "--achieved", "0.5", "--json")  # --achieved asks for chapter 9's search
    assert status == 0 and json.loads(out)["accounting"] == "text"


def test_the_datasheet_roof_ranks_the_cluster_model_by_its_floor():
    from roofline.core.calibration import get_roof
    from roofline.parallel.cluster import search

    status, out, _ = run(*CAL, "--roof", "datasheet", "--top", "2", "--json")
    got = json.loads(out)
    want = search("llama-3-8b", get_roof("h100", "datasheet"), gpus=16, seq=4096, global_batch=64)
    assert status == 0 and got["roof"] == "datasheet" and got["accounting"] == "refined"
    assert [g["time_s"] for g in got["layouts"]] == pytest.approx([p.time for p in want.ranked[:2]])
    assert [g["floor_time_s"] for g in got["layouts"]] == [g["time_s"] for g in got["layouts"]]
    status, out, _ = run("llama-3-8b", "--gpu", "b200", "--nodes", "2", "--seq", "4096", "--global-batch", "64")
    assert status == 0 and "ranked by the datasheet floor (no calibrated roof for the B200)" in out
