"""``roofline serve --input --output``: a workload on a deployment, and ``--plan`` (chapter 13)."""

import json

import pytest

from roofline.core.hardware import get_hardware
from roofline.serving.deployment import serving_pair
from roofline.serving.deployment import Deployment, Workload

from cli_helpers import in_process as call


def test_the_json_leads_with_the_estimate_and_keeps_both():
    status, out, err = call("serve", "llama-3.1-70b", "--gpu", "h100", "--input", "2048", "--output", "256", "--tp", "4",
                            "--weights-dtype", "fp8", "--json")
    assert status == 0 and not err
    data = json.loads(out)
    pair = serving_pair("llama-3.1-70b", get_hardware("h100-sxm"), Workload(2048, 256), Deployment(tp=4, weights_dtype="fp8"))
    for key in ("output_tokens_per_s", "ttft_s", "tpot_s", "batch", "fits"):
        assert key in data
    assert data["output_tokens_per_s"] == pair.estimate.output_tokens_per_s
    assert data["ceiling"]["output_tokens_per_s"] == pair.ceiling.output_tokens_per_s
    assert data["estimate"]["tpot_s"] == pair.estimate.tpot_s and data["fits"] is True


def test_the_text_sets_the_ceiling_beside_the_estimate():
    status, out, _ = call("serve", "llama-3.1-8b", "--gpu", "h200", "--input", "1000", "--output", "1000",
                          "--weights-dtype", "fp8", "--requests", "3000", "--kv-policy", "reserve")
    assert status == 0
    assert "ceiling (H200 datasheet)" in out and "estimate (H200 calibrated)" in out
    assert "3,000 requests at once" in out and "waves of at most" in out


def test_a_chip_without_a_calibrated_roof_gives_the_ceiling_alone_and_refuses_calibrated():
    status, out, _ = call("serve", "llama-3.1-8b", "--gpu", "b200", "--input", "1000", "--output", "100")
    assert status == 0 and "no calibrated roof: the ceiling alone" in out
    status, out, err = call("serve", "llama-3.1-8b", "--gpu", "b200", "--input", "1000", "--output", "100",
                            "--roof", "calibrated")
    assert status == 2 and "--roof 'calibrated' has no data for the B200: microbenchmarks were gathered for the A100 80GB, H100 SXM, H200 and H800 SXM only; use the datasheet roof" in err


def test_a_rate_past_capacity_says_so():
    status, out, _ = call("serve", "llama-3.1-8b", "--gpu", "h100", "--input", "1000", "--output", "1000",
                          "--rate", "1000", "--json")
    data = json.loads(out)
    assert status == 0 and data["sustained"] is False and data["ttft_s"] is None


def test_disaggregation_prints_the_kv_transfer():
    status, out, _ = call("serve", "llama-3.1-8b", "--gpu", "h100", "--input", "4096", "--output", "256",
                          "--disaggregate", "2:6", "--weights-dtype", "fp8")
    assert status == 0 and "prefill 2 : decode 6" in out and "KV cache takes" in out


def test_the_plan_ranks_layouts_and_names_the_smallest_slice():
    status, out, _ = call("serve", "llama-3.1-70b", "--gpu", "h100", "--input", "2048", "--output", "256",
                          "--weights-dtype", "fp8", "--plan", "--tpot-slo", "0.03", "--json")
    data = json.loads(out)
    assert status == 0 and data["plan"] is True and data["smallest_slice"]
    met = [r for r in data["layouts"] if r["meets"]]
    assert met and all(r["tpot_s"] <= 0.03 * 1.001 for r in met)
    per_gpu = [r["output_tokens_per_s_per_gpu"] for r in met]
    assert per_gpu == sorted(per_gpu, reverse=True)


@pytest.mark.parametrize("argv,flag,words", [
    (("--input", "2048", "--output", "256", "--plan", "--tpot-slo", "0.0001"), "--tpot-slo", "no layout of up to 8 GPUs"),
    (("--input", "8000", "--output", "500"), "--input", "past llama-3-8b's context"),
    (("--input", "100"), "--output", "needs --output"),
    (("--rate", "3"), "--rate", "give --input and --output"),
    (("--input", "100", "--output", "10", "--rate", "0"), "--rate", "positive"),
    (("--input", "100", "--output", "10", "--prefix-hit", "1"), "--prefix-hit", "below 1"),
    (("--input", "100", "--output", "10", "--disaggregate", "3"), "--disaggregate", "P:D"),
    (("--input", "100", "--output", "10", "--tp", "3"), "--tp", "must divide"),
    (("--input", "100", "--output", "10", "--context", "100"), "--context", "one-server question"),
    (("--context", "100", "--allreduce", "nccl"), "--allreduce", "give --input and --output"),
    (("--input", "4096", "--output", "64", "--ttft-slo", "0.001"), "--ttft-slo", "below one prompt's prefill alone"),
    (("--input", "4096", "--output", "64", "--disaggregate", "1:1", "--ttft-slo", "0.001"), "--ttft-slo",
     "below one prompt's prefill alone"),
    (("--input", "4096", "--output", "64", "--tpot-slo", "0.0001"), "--tpot-slo", "below one sequence's decode step"),
    (("--input", "4096", "--output", "64", "--max-num-tokens", "0"), "--max-num-tokens", "whole number >= 1"),
    ((), "--context", "--context is required"),
])
def test_bad_workload_input_names_the_flag(argv, flag, words):
    status, out, err = call("serve", "llama-3-8b", "--gpu", "h100", *argv, "--json")
    assert status == 2
    data = json.loads(out)
    assert words in data["error"] and data["argument"] == flag


def test_chapter_5_and_12_uses_of_serve_still_work():
    status, out, _ = call("serve", "llama-3-8b", "--gpu", "h100-sxm", "--context", "8192", "--kv-dtype", "fp8")
    assert status == 0 and "largest batch that fits" in out
    status, out, _ = call("serve", "llama-3-8b", "--gpu", "h200", "--context", "8192", "--curve")
    assert status == 0 and "latency against throughput" in out


def test_allreduce_takes_the_engines_custom_kernels_by_default_and_nccl_when_asked():
    argv = ("serve", "llama-3.1-8b", "--gpu", "h100", "--input", "1024", "--output", "128", "--tp", "8",
            "--weights-dtype", "fp8", "--concurrency", "1", "--roof", "calibrated")
    status, out, _ = call(*argv, "--json")
    custom = json.loads(out)
    status2, out2, _ = call(*argv, "--allreduce", "nccl", "--json")
    nccl = json.loads(out2)
    assert status == status2 == 0 and custom["allreduce"] == "custom" and nccl["allreduce"] == "nccl"
    assert custom["tpot_s"] < nccl["tpot_s"]  # one client's 16 KiB all-reduces: 5.7 us against NCCL's 30 us
    status, text, _ = call(*argv)
    assert "custom one-shot/two-shot kernels up to 8 MiB" in text
    status, _, err = call(*argv, "--allreduce", "mpi")
    assert status == 2 and "--allreduce" in err


def _published_argv(run):
    """``roofline serve`` as a reader types one published run's settings (the table's row, chapter 13)."""
    r = run.raw
    return ("serve", run.model, "--gpu", run.hardware.key, "--tp", str(run.tp), "--input", str(r["input_tokens"]),
            "--output", str(r["output_tokens"]), "--requests", str(r["num_requests"]), "--weights-dtype", "fp8",
            "--kv-dtype", "fp8", "--math-dtype", "fp8", "--runtime", "trtllm-bench", "--json")


def test_serve_with_each_published_runs_settings_prints_chapter_13s_row():
    from roofline.measured.serving import serving_dev_checks
    for check in serving_dev_checks():
        status, out, err = call(*_published_argv(check.run))
        assert status == 0 and not err, check.run.label
        data = json.loads(out)
        assert data["estimate"]["output_tokens_per_s"] == check.estimate.output_tokens_per_s, check.run.label
        assert data["ceiling"]["output_tokens_per_s"] == check.ceiling.output_tokens_per_s, check.run.label
        assert data["estimate"]["batch"] == check.estimate.batch
        assert data["max_batch_cap"] == check.run.deployment().max_batch


def test_runtime_flags_act_and_a_given_cap_overrides_trtllm_benchs_rule():
    base = ("serve", "llama-3.1-8b", "--gpu", "h100", "--input", "2048", "--output", "128", "--weights-dtype", "fp8",
            "--json")
    engines = json.loads(call(*base)[1])
    assert engines["max_num_tokens"] == 8192 and engines["kv_policy"] == "grow" and engines["kv_fraction"] == 1.0
    bench = json.loads(call(*base, "--runtime", "trtllm-bench")[1])
    assert bench["kv_policy"] == "reserve" and bench["kv_fraction"] == 0.9
    mine = json.loads(call(*base, "--runtime", "trtllm-bench", "--max-batch", "64", "--max-num-tokens", "4096")[1])
    assert mine["max_batch_cap"] == 64 and mine["max_num_tokens"] == 4096 and mine["batch"] <= 64
    whole = json.loads(call(*base, "--max-num-tokens", "none", "--concurrency", "1")[1])
    assert whole["max_num_tokens"] is None
    for argv, flag in ((("--max-num-tokens", "0"), "--max-num-tokens"), (("--kv-fraction", "1.5"), "--kv-fraction"),
                       (("--arrival", "bursty"), "--arrival"), (("--max-batch", "-3"), "--max-batch")):
        status, out, _ = call(*base, *argv)
        assert status == 2 and json.loads(out)["argument"] == flag
