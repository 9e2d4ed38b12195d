"""`roofline` itself (roofline.cli.main): errors and their status, JSON errors, a reader's own catalog,
closed pipes and full disks, and the fuzz, run the way a reader runs it (in a subprocess, through
``python -m roofline``) or in process."""

import contextlib
import io
import json
import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from roofline.cli import main

from cli_helpers import in_process, run, run_subprocess


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
    assert "--gpu" in run_subprocess("decode", "llama-3-8b", check_rc=2).stderr  # as a reader types it
    assert "--tokens" in run("prefill", "llama-3-8b", "--gpu", "h100", check_rc=2).stderr


def test_not_modelled_is_said_plainly():
    proc = run("decode", "deepseek-v3", "--gpu", "h100", "--accounting", "refined", check_rc=1)
    assert "not modelled" in proc.stderr and "latent attention" in proc.stderr
    assert run("decode", "mixtral-8x7b", "--gpu", "h100", check_rc=0).stdout


# --- hostile input: no traceback, a clear message, status 2 -------------------------------------

HUGE = "1" + "0" * 400


@pytest.mark.parametrize("args", [
    ("decode", "llama-3-8b", "--gpu", "h100", "--batch", HUGE),
    ("decode", "llama-3-8b", "--gpu", "h100", "--context", HUGE),
    ("prefill", "llama-3-8b", "--gpu", "h100", "--tokens", HUGE),
])
def test_huge_numbers_exit_2_with_a_short_message(args):
    proc = run(*args, check_rc=2)
    assert "no larger than 9,007,199,254,740,992" in proc.stderr and "(401 characters)" in proc.stderr
    # the 401 digits are not echoed back: the error line is short, whatever the usage above it (which grows with
    # every flag a chapter adds)
    assert HUGE[:30] not in proc.stderr and len(proc.stderr.strip().splitlines()[-1]) < 300


def test_a_config_with_a_huge_layer_count_is_refused(tmp_path):
    cfg = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 160, "num_attention_heads": 4,
           "vocab_size": 1000}
    path = tmp_path / "huge.json"
    path.write_text(json.dumps(cfg)[:-1] + ', "num_hidden_layers": ' + HUGE + "}")
    proc = run("params", str(path), check_rc=2)
    assert "'num_hidden_layers' must be a positive integer (at most 2**53), got an integer of 401 digits" in proc.stderr


def test_a_closed_pipe_ends_quietly():
    # the reader of the output goes away before it is written, as `roofline hardware --json | head -c1` does
    proc = subprocess.Popen([sys.executable, "-m", "roofline", "hardware", "h100", "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=120) in (0, 141)  # 141 = 128 + SIGPIPE, as a shell reports `yes | head -1`
    assert stderr == ""


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
def test_a_full_device_is_a_message_not_a_traceback():
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "roofline", "hardware"], stdout=full, stderr=subprocess.PIPE,
                              text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip() == "roofline: error: cannot write the output: No space left on device"


def _closed(*args, stdout=subprocess.PIPE, stderr=subprocess.PIPE):
    """``python -m roofline ARGS`` with stdout or stderr closed (None: the shell's ``>&-`` / ``2>&-``)."""
    fds = {1: stdout, 2: stderr}
    closing = [fd for fd, s in fds.items() if s is None]
    preexec = (lambda: [os.close(fd) for fd in closing]) if closing else None
    return subprocess.run([sys.executable, "-m", "roofline", *args], stdout=stdout or subprocess.DEVNULL,
                          stderr=stderr or subprocess.DEVNULL, preexec_fn=preexec, timeout=120)


@pytest.mark.parametrize("args, closed, status", [
    (("hardware",), "stdout", 2),                        # `roofline hardware >&-`: nothing can be written
    (("hardware",), "both", 2),
    (("hardware", "no-such-chip"), "stderr", 2),         # the error path keeps its status with stderr gone
    (("decode", "mixtral-8x7b", "--gpu", "h100", "--batch", "8", "--routing", "bogus"), "stderr", 2),
    (("hardware", "no-such-chip", "--json"), "stdout", 2),  # the JSON error had nowhere to go: only the status
    (("hardware", "--help"), "stdout", 2),
    (("hardware",), "stderr", 0),
])
def test_closed_streams_give_a_status_never_a_traceback(args, closed, status):
    out = None if closed in ("stdout", "both") else subprocess.PIPE
    err = None if closed in ("stderr", "both") else subprocess.PIPE
    proc = _closed(*args, stdout=out, stderr=err)
    assert proc.returncode == status
    if err is not None:
        text = proc.stderr.decode()
        assert "Traceback" not in text
        if "--json" not in args and closed == "stdout":
            assert text.strip() == "roofline: error: cannot write the output: stdout is closed"
        elif closed == "stdout":
            assert text == ""


def test_help_under_json_is_json_and_json_with_a_value_is_a_json_error():
    proc = run("hardware", "--help", "--json", check_rc=0)
    assert json.loads(proc.stdout)["help"].startswith("usage: roofline hardware")
    assert run("hardware", "--help", check_rc=0).stdout.startswith("usage: roofline hardware")
    proc = run("hardware", "--json=1", check_rc=2)
    error = json.loads(proc.stdout)
    assert error["argument"] == "--json" and "--json is a switch and takes no value, got '1'" in error["error"]


@pytest.mark.parametrize("content, message", [
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ('{"model_type": ["llama"]}', "'model_type' must be a string"),
])
def test_malformed_configs_exit_2(tmp_path, content, message):
    path = tmp_path / "config.json"
    path.write_text(content)
    assert message in run("params", str(path), check_rc=2).stderr


@pytest.mark.parametrize("args, message", [
    ((".",), "'.' is a directory with no config.json in it"),
    (("no/such/config.json",), "not found: its folder does not exist either"),
])
def test_path_like_models_say_what_is_wrong_with_the_path(args, message):
    assert message in run("params", *args, check_rc=2).stderr


# --- results that cannot be: said, with the numbers still given ---------------------------------


# --- errors as JSON -------------------------------------------------------------------------------

@pytest.mark.parametrize("args, status, argument, message", [
    (("decode", "llama-3-8b", "--gpu", "h100", "--batch", "x"), 2, "--batch", "expected a whole number"),
    (("decode", "llama-3-8b"), 2, "--gpu", "required"),
    (("ridge", "a100-sxm"), 2, "gpu", "did you mean 'a100-sxm-40gb' or 'a100-sxm-80gb'"),
    (("ridge", "v100", "--dtype", "bf16"), 2, "--dtype", "no dense bf16 peak"),
    (("params", "lama-3-8b"), 2, "model", "did you mean"),
    (("decode", "deepseek-v3", "--gpu", "h100", "--accounting", "refined"), 1, None, "not modelled"),
])
def test_json_errors_are_one_object_with_the_argument(args, status, argument, message):
    proc = run(*args, "--json", check_rc=status)
    data = json.loads(proc.stdout)
    assert set(data) == {"error", "argument", "status"}
    assert data["argument"] == argument and data["status"] == status and message in data["error"]
    assert proc.stderr == ""


# --- a reader's own catalog ---------------------------------------------------------------------

MY_CHIP = """
[sources.my-sheet]
title = "My chip's datasheet"
url = "https://example.com/my-chip.pdf"
date = "2026-01"

[gpus.my-chip]
name = "My Chip"
aliases = ["mine"]
vendor = "Me"
architecture = "Mine"
year = 2026
form_factor = "card"
memory_type = "HBM3e"
hbm_bandwidth = { value = 4, unit = "TB/s", source = "my-sheet" }
hbm_capacity = { value = 141, unit = "GB", source = "my-sheet" }

[gpus.my-chip.dense]
bf16 = { value = 1000, unit = "TFLOP/s", source = "my-sheet" }
"""


def test_catalog_flag_and_variable_on_every_command(tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text(MY_CHIP)
    assert json.loads(run("ridge", "mine", "--catalog", str(path), "--json", check_rc=0).stdout)["ridge_point"] == 250
    assert "my-chip" in run("hardware", "--catalog", str(path), check_rc=0).stdout
    assert "My Chip" in run("hardware", "my-chip", "--catalog", str(path), check_rc=0).stdout
    assert run("params", "llama-3-8b", "--catalog", str(path), check_rc=0).stdout
    for command in (("decode",), ("prefill", "--tokens", "128")):
        data = json.loads(run(*command, "llama-3-8b", "--gpu", "mine", "--catalog", str(path), "--json", check_rc=0).stdout)
        assert data["gpu"] == "my-chip" and data["ridge_point"] == 250
    env = {**os.environ, "ROOFLINE_CATALOG": str(path)}
    proc = subprocess.run([sys.executable, "-m", "roofline", "ridge", "mine"], capture_output=True, text=True, env=env,
                          timeout=120)
    assert proc.returncode == 0 and "250.0 FLOP per byte" in proc.stdout


def test_a_bad_catalog_names_the_entry_and_the_field(tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text(MY_CHIP.replace("value = 4,", "value = inf,"))
    proc = run("hardware", "--catalog", str(path), check_rc=2)
    assert proc.stderr.strip() == "roofline: error: [gpus.my-chip] hbm_bandwidth: expected a positive finite number, got inf"
    data = json.loads(run("ridge", "mine", "--catalog", str(path), "--json", check_rc=2).stdout)
    assert data["argument"] == "--catalog" and "[gpus.my-chip] hbm_bandwidth" in data["error"]
    assert "no such file" in run("ridge", "h100", "--catalog", str(tmp_path / "absent.toml"), check_rc=2).stderr


# --- the fuzz: random arguments never give a traceback --------------------------------------------

WORDS = ["hardware", "params", "ridge", "decode", "prefill", "--gpu", "--batch", "--context", "--tokens", "--dtype",
         "--accounting", "--json", "--catalog", "--help", "h100", "a100-sxm", "mi300x", "v100", "llama-3-8b",
         "mixtral-8x7b", "deepseek-v3", "qwen2-7b", "bf16", "fp8", "int4", "refined", "text", ".", "/", "-", "--",
         "0", "1", "-1", "1.5", "1e9", "nan", "inf", "1_000", "1,024", HUGE, "9007199254740993", "\x00", "é", "[]"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(argv=st.lists(st.one_of(st.sampled_from(WORDS), st.text(max_size=12),
                               st.integers(-10**20, 10**20).map(str), st.floats().map(str)), max_size=8))
def test_fuzz_the_argument_parser(memory_cap, argv):
    out, err = io.StringIO(), io.StringIO()
    # every number a flag takes is bounded (tests/unit/cli/test_adversarial.py tries each at its largest); the cap
    # makes a draw that still asked for more than 1 GiB fail here, not in the OOM killer
    with memory_cap(2**30), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(argv)  # --help too returns, never exits
    assert status in (0, 1, 2), (argv, status, err.getvalue())
    assert "Traceback" not in err.getvalue()
    if any(a == "--json" for a in argv):
        got = json.loads(out.getvalue())
        assert (got["status"] == status) if status else True


# --- answers that stop meaning anything are refused, never printed as Infinity or NaN --------------

@pytest.mark.parametrize("figure, replaced, message", [
    ('bf16 = { value = 1000, unit = "TFLOP/s"', 'bf16 = { value = 1e-320, unit = "TFLOP/s"',
     "[gpus.my-chip] dense.bf16: expected a figure between 1 and 1e+24 FLOP/s"),
    ('value = 141, unit = "GB"', 'value = 1e30, unit = "GB"', "[gpus.my-chip] hbm_capacity: expected a figure between"),
])
def test_catalog_figures_out_of_any_chips_range_are_refused(tmp_path, figure, replaced, message):
    path = tmp_path / "mine.toml"
    path.write_text(MY_CHIP.replace(figure, replaced))
    for command in (("decode", "llama-3-8b", "--gpu", "mine"), ("serve", "llama-3-8b", "--gpu", "mine", "--context",
                                                                "1024", "--curve")):
        status, out, _ = in_process(*command, "--catalog", str(path), "--json")
        assert status == 2 and message in json.loads(out)["error"]


def test_a_fraction_of_peak_too_small_to_mean_anything_is_refused():
    status, out, _ = in_process("train", "llama-3-8b", "--gpu", "h100", "--seq", "4096", "--achieved", "5e-324",
                                "--json")
    error = json.loads(out)
    assert status == 2 and error["argument"] == "--achieved" and "at least 1e-06" in error["error"]
    status, out, _ = in_process("train", "llama-3-8b", "--gpu", "h100", "--seq", "4096", "--achieved", "1e-6", "--json")
    assert status == 0 and json.loads(out, parse_constant=pytest.fail)["time_s"] > 1e5


@pytest.mark.parametrize("out, as_json", [('{"time_s": Infinity}', True), ('{"a": {"ttft": NaN}}', True),
                                           ("step inf s", False), ("utilization nan%", False)])
def test_a_non_finite_answer_is_an_error(out, as_json):
    from roofline.cli.main import finite
    with pytest.raises(ValueError, match="not a finite number"):
        finite(out, as_json, False)
    finite('{"time_s": 1.0, "name": "Infinity"}', True, False)  # a word in a string is not a number
    finite("information about infinity", False, False)



@pytest.mark.parametrize("flags, argument", [
    (("--carry-h200-efficiencies",), "--carry-h200-efficiencies"),
    (("--launch", "eager"), "--launch"),
])
def test_measured_roof_options_without_the_measured_roof_are_refused(flags, argument):
    status, out, _ = in_process("decode", "llama-3-8b", "--gpu", "h100", *flags, "--json")
    error = json.loads(out)
    assert status == 2 and error["argument"] == argument
    assert argument in error["error"] and "--roof calibrated" in error["error"]


@pytest.mark.parametrize("args, argument, message", [
    (("train", "llama-3-8b", "--gpu", "h100", "--seq", "4096", "--gpus", "9007199254740992", "--zero", "3"), "--gpus",
     "--gpus must be at most 1,048,576"),
    (("train", "llama-3-8b", "--gpu", "h100", "--seq", "4096", "--nodes", "2", "--gpus-per-node", "1000"),
     "--gpus-per-node", "--gpus-per-node must be at most 576"),
    (("train", "llama-3-8b", "--gpu", "h100", "--seq", "4096", "--nodes", "9007199254740992"), "--nodes",
     "--nodes must be at most 1,048,576"),
])
def test_gpu_counts_are_checked_against_the_fabric(args, argument, message):
    status, out, _ = in_process(*args, "--json")
    error = json.loads(out)
    assert status == 2 and error["argument"] == argument and message in error["error"]


@pytest.mark.parametrize("value", ["\u0663", "\u0661\u0662", "-0", "+1", "\uff11"])
def test_whole_number_flags_take_ascii_digits_only(value):
    status, out, _ = in_process("decode", "llama-3-8b", "--gpu", "h100", "--context", value, "--json")
    assert status == 2 and "in the digits 0-9" in json.loads(out)["error"]
    assert in_process("decode", "llama-3-8b", "--gpu", "h100", "--context", "1_024")[0] == 0


def test_at_blames_the_flag_a_message_names_and_says_it():
    from roofline.cli.parser import UsageError, at, layout_flags
    from roofline.core.model import load_model

    def fail(message):
        raise ValueError(message)

    with pytest.raises(UsageError) as got:
        at("--roof", fail, "roof 'x' has no data")
    assert (got.value.argument, got.value.message) == ("--roof", "--roof 'x' has no data")
    names = {"input_tokens": "--input", "tp": "--tp", "": "--max-gpus"}
    with pytest.raises(UsageError) as got:
        at(names, fail, "input_tokens + output_tokens = 9 is past the context")
    assert (got.value.argument, got.value.message) == ("--input", "--input + output_tokens = 9 is past the context")
    with pytest.raises(UsageError) as got:
        at(names, fail, "the replica's tp (3) must divide the heads")
    assert got.value.argument == "--tp"
    with pytest.raises(UsageError) as got:
        at(names, fail, "nothing named here")
    assert got.value.argument == "--max-gpus"
    m = load_model("llama-3-8b")
    with pytest.raises(UsageError) as got:
        at(layout_flags({"seq": "--seq"}, m, 4096), fail, "Llama 3 8B fits on no layout of the 8 H100s at seq 4,096")
    assert got.value.argument == "--nodes"
    with pytest.raises(UsageError) as got:
        at(layout_flags({"seq": "--seq"}, m, 10**6), fail, "Llama 3 8B fits on no layout of the 8 H100s")
    assert got.value.argument == "--seq"  # past the trained context, the sequence is at fault first
