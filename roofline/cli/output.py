"""What the command line writes: a command's text or JSON, an error (a line on stderr, or one JSON object
on stdout), and a closed pipe (quietly, as other Unix tools end)."""

from __future__ import annotations

import json
import os
import sys
from typing import Sequence

from roofline.core.hardware import Hardware
from roofline.core.model import Model
from roofline.core.routing import experts_touched
from roofline.core.units import fmt

__all__ = ["wants_json", "tp_lines", "report", "write", "quiet_stdout", "EXIT_BROKEN_PIPE", "routing_fields",
           "routing_line"]


def routing_fields(m: Model, tokens, routing: str | None, assumed: bool) -> dict:
    """The JSON fields that say how a mixture of experts was priced: ``routing`` (the routing used),
    ``routing_assumed`` (true where ``--routing`` was not given and the uniform expectation was taken) and
    ``experts_read_per_layer`` (distinct routed experts a MoE layer reads for the step's ``tokens``, of
    ``experts``). Empty for a dense model."""
    if m.moe is None:
        return {}
    return {"routing": routing, "routing_assumed": assumed,
            "experts_read_per_layer": float(experts_touched(m, tokens, routing or "uniform")),
            "experts": m.moe.num_experts}


def routing_line(fields: dict) -> list[str]:
    """The text of :func:`routing_fields` (among other fields): one line naming the routing, and whether it was
    assumed; nothing for a dense model."""
    if "experts_read_per_layer" not in fields:
        return []
    read, experts = fields["experts_read_per_layer"], fields["experts"]
    how = {"uniform": "independent uniform choices: the expected count",
           "best": "every token to the same experts: a lower bound",
           "worst": "as many experts as the tokens reach: an upper bound"}[fields["routing"]]
    lines = [f"routing: {fields['routing']} ({how}), {read:,.2f} of {experts} experts read per MoE layer"]
    if fields["routing_assumed"]:
        lines.append("  assumed, as no --routing was given; --routing best or worst gives the bounds")
    return lines


def wants_json(argv: Sequence[str]) -> bool:
    """Whether ``--json`` (or an abbreviation argparse would accept, ``--js``) is among the arguments; ``--json=1``
    counts too, so that argparse's refusal of it is reported as JSON."""
    return any(a.split("=", 1)[0].startswith("--j") and "--json".startswith(a.split("=", 1)[0])
               for a in argv if isinstance(a, str))


def report(status: int, message: str, argument: str | None, as_json: bool, usage: str = "") -> int:
    """Print an error the way the caller asked for (a line on stderr, or one JSON object on stdout); the status.

    It never raises: a closed or failing stream (``2>&-``, ``>&-``, a closed pipe) loses the message, not the
    status."""
    try:
        # one write each, so that a notebook capturing the streams never splits a message
        if as_json:
            sys.stdout.write(json.dumps({"error": message, "argument": argument, "status": status}, indent=2) + "\n")
        else:
            sys.stderr.write(usage + (message if message.startswith("roofline") else f"roofline: error: {message}") + "\n")
        if sys.stdout is not None:
            sys.stdout.flush()
    except Exception:  # noqa: BLE001 - a closed stream (None), a closed pipe, a full disk: keep the status
        quiet_stdout()
    return status


def quiet_stdout() -> None:
    """After a closed pipe, point stdout at /dev/null so that the exit flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # stdout is not a real file (a test's capture)
        pass


# The exit status of a program a closed pipe ended: 128 + SIGPIPE, what a shell reports for `yes | head -1`.
EXIT_BROKEN_PIPE = 141


def write(out: str) -> int:
    """Print a command's answer and a newline; the exit status: 0, or 141 after a closed pipe (nothing more
    printed), or 2 when the output cannot be written (a full disk), with a one-line message."""
    try:
        if sys.stdout is None:  # started with stdout closed (`roofline hardware >&-`)
            raise OSError(9, "stdout is closed")
        sys.stdout.write(out + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        quiet_stdout()
        return EXIT_BROKEN_PIPE
    except (OSError, ValueError) as exc:  # a full disk, a device that refuses the write, a closed file object
        quiet_stdout()
        return report(2, f"cannot write the output: {getattr(exc, 'strerror', None) or exc}", None, False)
    return 0


def tp_lines(head: str, time: float, work: str, comm, tokens_per_s_per_gpu: float, mfu: float | None,
             memory: float, fits: bool, h: Hardware) -> str:
    """The text of every ``--tp`` command: the step as one GPU's work plus the collectives, the rate per GPU
    (and the MFU of a training step), and the memory per GPU against the usable HBM."""
    verdict = (f"memory per GPU {fmt(memory, 'B')}, within the {fmt(h.usable_capacity, 'B')} usable" if fits else
               f"DOES NOT FIT: {fmt(memory, 'B')} per GPU, more than the {fmt(h.usable_capacity, 'B')} usable; "
               "the times assume it fit")
    lines = [head + ":",
             f"  step {fmt(time, 's')} = {work}",
             f"  + {comm.step.collectives:,} collectives over NVLink {fmt(comm.comm_time, 's')} "
             f"({fmt(comm.comm_latency, 's')} of it latency; {fmt(comm.comm_bytes, 'B')} sent per GPU), not overlapped",
             f"  {fmt(tokens_per_s_per_gpu, 'tokens/s')} per GPU" + (f", MFU {mfu:.1%}" if mfu is not None else ""),
             "  " + verdict]
    return "\n".join(lines)
