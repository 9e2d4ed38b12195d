"""The command line under hostile input (issue 33): every numeric flag of every command given huge, zero,
negative and non-finite values, and the program run with its streams closed.

Each case must end with exit status 0, 1 or 2, print no traceback, write under ``--json`` one object a strict parser
reads (``json.loads`` with ``parse_constant`` refusing ``NaN`` and ``Infinity``) whose error, if any, names the flag
given the hostile value (the only one), and stay under 1 GiB of address
space and 10 seconds. Those two are limits, not timings: the cases run in a child process whose address space is
capped with ``resource.setrlimit(RLIMIT_AS)`` (an allocation past it is a ``MemoryError`` there, or the child's
death, never the machine's), each case under a 10-second alarm in the child and the child under a subprocess
timeout of 10 seconds a case.

The grid is derived from the parser, not listed by hand: every command of :func:`roofline.cli.parser.build_parser`,
every option of it whose type reads a number (``whole``, ``fraction``, ``acceptance``, ``int``), each with
:data:`VALUES`; a command's required arguments are filled from :data:`REQUIRED` (a new required argument without an
entry there fails :func:`test_every_required_argument_has_a_value`). Every (command, flag, value) runs with
``--json``; the text form runs on a deterministic third of them (the cases whose index in the sorted grid is a
multiple of 3, so each flag meets several values in both forms). The whole grid is a few hundred in-process calls
in one child, about 15 to 30 seconds on two cores. The closed-stream cases start one ``python -m roofline`` each, as
a shell would with ``>&-`` and ``2>&-``.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from roofline.cli.parser import build_parser

MEMORY_LIMIT = 2**30  # bytes of address space the child may map, all cases together
CASE_SECONDS = 10

VALUES = ("1e308", "1" + "0" * 400, str(2**53), "0", "-1", "nan", "inf", "-inf")
"""Huge (the largest float, a 401-digit integer, 2**53: the largest whole number the flags take), zero, negative
and non-finite."""

REQUIRED = {"model": "llama-3-8b", "gpu": "h100", "draft": "llama-3.2-1b", "alpha": "0.8", "tokens": "512",
            "seq": "2048", "nodes": "1", "global_batch": "16", "context": "1024", "name": "h100"}
"""A valid value for each argument some command requires (by its ``dest``), so that the flag under test is the
only hostile one."""

MOE = {"--ep", "--routing"}  # flags that mean something on a mixture of experts only: tried on one

WORKLOAD = {"--input": "512", "--output": "64"}
"""``serve`` asks one of two questions: a server at ``--context`` (chapter 5), or a workload of ``--input`` and
``--output`` on a deployment (chapter 13); a flag of the second group is tried with a valid workload."""


def _subcommands():
    return build_parser()._subparsers._group_actions[0].choices


def _reads_a_number(action) -> bool:
    if action.type is None or not action.option_strings:
        return False
    for probe in ("1", "0.5"):
        try:
            value = action.type(probe)
        except Exception:  # noqa: BLE001 - argparse types raise their own kinds
            continue
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return False


def _base(name, parser, flag):
    """The command's required arguments, valid, leaving out the flag under test."""
    argv = [name]
    for action in parser._actions:
        positional = not action.option_strings and action.nargs is None
        if not (positional or action.required) or flag in action.option_strings:
            continue
        value = REQUIRED[action.dest]
        if action.dest == "model" and flag in MOE:
            value = "mixtral-8x7b"
        argv += [value] if positional else [action.option_strings[-1], value]
    if name == "serve":
        group = next((g.title for g in parser._action_groups for a in g._group_actions if flag in a.option_strings), "")
        if group.startswith("a workload") or flag in WORKLOAD:
            argv += [x for f, v in WORKLOAD.items() if f != flag for x in (f, v)]
        else:
            argv += ["--context", REQUIRED["context"]]
    return argv


def grid():
    """Every (argv, as_json) case, sorted; see the module docstring for the sampling of the text form."""
    cases = []
    for name, parser in sorted(_subcommands().items()):
        for action in parser._actions:
            if _reads_a_number(action):
                flag = action.option_strings[-1]
                cases += [_base(name, parser, flag) + [flag, value] for value in VALUES]
    cases.sort()
    return [(argv, True) for argv in cases] + [(argv, False) for i, argv in enumerate(cases) if i % 3 == 0]


def test_every_required_argument_has_a_value_and_every_command_a_numeric_flag_or_none():
    flags = set()
    for name, parser in _subcommands().items():
        for action in parser._actions:
            if (not action.option_strings and action.nargs is None) or action.required:
                assert action.dest in REQUIRED, f"{name}: give REQUIRED a valid {action.dest}"
            if _reads_a_number(action):
                flags.add(action.option_strings[-1])
    # the parser, read: the flags a reader would list, found without listing them
    assert {"--batch", "--context", "--tokens", "--gpus", "--nodes", "--achieved", "--alpha", "--ep", "--cp",
            "--tp", "--zero", "--global-batch", "--block-size"} <= flags
    assert len(grid()) > 300


_CHILD = r"""
import contextlib, io, json, resource, signal, sys, traceback
resource.setrlimit(resource.RLIMIT_AS, (__LIMIT__, __LIMIT__))
from roofline.cli import main

class Overtime(BaseException):
    pass

def alarm(signum, frame):
    raise Overtime()

signal.signal(signal.SIGALRM, alarm)
cases = json.load(sys.stdin)
with open(sys.argv[1], "w") as log:
    for i, (argv, as_json) in enumerate(cases):
        argv = argv + (["--json"] if as_json else [])
        log.write(json.dumps({"start": i}) + "\n")
        log.flush()
        out, err = io.StringIO(), io.StringIO()
        problem = None
        signal.alarm(__SECONDS__)
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                status = main(argv)
        except Overtime:
            status, problem = None, "over the time limit"
        except BaseException:
            status, problem = None, traceback.format_exc(limit=-3)
        finally:
            signal.alarm(0)
        log.write(json.dumps({"case": i, "argv": argv, "status": status, "problem": problem,
                              "out": out.getvalue(), "err": err.getvalue()}) + "\n")
        log.flush()
"""


def _reject(name):
    raise ValueError(f"non-finite JSON constant {name}")


def _judge(record) -> str | None:
    """What is wrong with one case's result, or None."""
    if record["problem"]:
        return record["problem"]
    if record["status"] not in (0, 1, 2):
        return f"exit status {record['status']}"
    if "Traceback" in record["out"] + record["err"]:
        return "a traceback"
    if "--json" in record["argv"]:
        try:
            data = json.loads(record["out"], parse_constant=_reject)
        except ValueError as exc:
            return f"not strict JSON: {exc}"
        if record["status"] and (data.get("status") != record["status"] or not data.get("error")):
            return "a JSON error without its status or message"
        if record["status"] == 2 and data.get("argument") != record["argv"][-3]:  # [..., flag, value, "--json"]
            return f"the error names {data.get('argument')!r}, not the flag given the bad value"
    elif record["status"] and not record["err"].strip():
        return "an error with no message"
    return None


def _limits():
    import resource
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def test_every_numeric_flag_of_every_command_under_hostile_values(tmp_path):
    cases = grid()
    log = tmp_path / "cases.jsonl"
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[3]), os.environ.get("PYTHONPATH", "")])}
    code = _CHILD.replace("__LIMIT__", str(MEMORY_LIMIT)).replace("__SECONDS__", str(CASE_SECONDS))
    try:
        proc = subprocess.run([sys.executable, "-c", code, str(log)], input=json.dumps(cases), capture_output=True,
                              text=True, env=env, timeout=CASE_SECONDS * len(cases) + 60)
    except subprocess.TimeoutExpired:  # pragma: no cover - the per-case alarm fires first
        proc = None
    records = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    results = {r["case"]: r for r in records if "case" in r}
    started = [r["start"] for r in records if "start" in r]
    if len(results) < len(cases):  # the child died (memory) or hung: name the case it was in
        last = started[-1] if started else 0
        pytest.fail(f"the child stopped at case {last} ({cases[last]}): "
                    + ("timed out" if proc is None else f"exit {proc.returncode}, {proc.stderr[-2000:]}"))
    bad = [f"{' '.join(r['argv'])[:160]}: {why}" for r in results.values() if (why := _judge(r))]
    assert not bad, f"{len(bad)} of {len(cases)} cases:\n" + "\n".join(bad[:40])


# --- closed streams: the program run as a shell runs it with >&- or 2>&- -----------------------------------------

def _closed(argv, close, pipe_closed=False):
    """``python -m roofline ARGV`` with the file descriptors in ``close`` closed before it starts, under the
    memory and time limits; (status, stdout, stderr) of what is still open."""
    def start():
        _limits()
        for fd in close:
            os.close(fd)
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[3]), os.environ.get("PYTHONPATH", "")])}
    if pipe_closed:  # a reader that has gone (`roofline hardware | head -0`)
        read, write = os.pipe()
        os.close(read)
        proc = subprocess.run([sys.executable, "-m", "roofline", *argv], stdout=write, stderr=subprocess.PIPE,
                              text=True, env=env, timeout=60, preexec_fn=_limits)
        os.close(write)
        return proc.returncode, "", proc.stderr
    proc = subprocess.run([sys.executable, "-m", "roofline", *argv], capture_output=True, text=True, env=env,
                          timeout=60, preexec_fn=start)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.mark.parametrize("argv, close, status", [
    (["hardware"], (1,), 2),                                     # an answer with nowhere to go
    (["decode", "llama-3-8b", "--gpu", "h100", "--json"], (1,), 2),
    (["decode", "llama-3-8b", "--gpu", "h100", "--batch", "0"], (2,), 2),   # an error with nowhere to say it
    (["decode", "llama-3-8b", "--gpu", "h100", "--batch", "0", "--json"], (1,), 2),
    (["decode", "mixtral-8x7b", "--gpu", "h100", "--batch", "nan"], (1, 2), 2),
    (["hardware"], (2,), 0),
])
def test_closed_streams_give_a_status_and_no_traceback(argv, close, status):
    got, out, err = _closed(argv, close)
    assert got == status and "Traceback" not in out + err
    if 1 in close and 2 not in close and status == 2 and "--batch" not in argv:
        assert err.startswith("roofline: error: cannot write the output")


def test_a_closed_pipe_ends_quietly_with_the_status_a_shell_reports():
    status, _, err = _closed(["hardware"], (), pipe_closed=True)
    assert status == 141 and err == ""


@pytest.mark.parametrize("change, why", [
    ({"out": '{"time_s": Infinity}'}, "not strict JSON"),
    ({"out": '{"a": NaN}'}, "not strict JSON"),
    ({"status": 3}, "exit status 3"),
    ({"status": None, "problem": "MemoryError"}, "MemoryError"),
    ({"err": "Traceback (most recent call last):"}, "a traceback"),
    ({"status": 2, "out": '{"error": "x", "argument": "--context", "status": 2}'}, "names '--context'"),
    ({"status": 2, "out": '{"error": "", "argument": "--batch", "status": 2}'}, "without its status or message"),
])
def test_the_judge_catches_each_kind_of_failure(change, why):
    good = {"argv": ["decode", "llama-3-8b", "--gpu", "h100", "--batch", "0", "--json"], "status": 0,
            "problem": None, "out": '{"time_s": 1.0}', "err": ""}
    assert _judge(good) is None
    assert why in _judge({**good, **change})
    text = {**good, "argv": good["argv"][:-1], "status": 2, "out": "", "err": ""}
    assert _judge(text) == "an error with no message"
