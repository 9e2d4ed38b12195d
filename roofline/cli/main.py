"""The ``roofline`` command line: quick numbers from the catalogs without opening the book.

::

    roofline hardware                      # the catalog, one line per accelerator
    roofline hardware h100-sxm             # every figure of one entry, with its source
    roofline params llama-3-70b --json     # total and active parameters
    roofline ridge h100-sxm --dtype fp8    # FLOP per byte where compute becomes the limit
    roofline decode llama-3-8b --gpu h100-sxm --batch 8 --context 4096
    roofline prefill llama-3-8b --gpu h100-sxm --tokens 2048
    roofline serve llama-3-8b --gpu h100-sxm --context 8192 --kv-dtype fp8
    roofline serve llama-3-8b --gpu h200 --context 8192 --curve   # TTFT and the latency-throughput curve
    roofline speculate llama-3-70b --draft llama-3.2-1b --gpu h200 --alpha 0.8 --gamma 4
    roofline train llama-3-8b --gpu h100-sxm --gpus 8 --seq 4096 --recompute full --zero 3
    roofline decode llama-3-70b --gpu h100-sxm --context 1024 --tp 8   # split over 8 GPUs, all-reduces counted
    roofline rules llama-3-70b --gpu h100 --nodes 8 --seq 8192 --global-batch 512   # every rule of thumb

A model is a shipped name (``roofline params --help`` lists them) or the path of any Hugging Face
``config.json``. Bad input exits with status 2 and a one-line message; a question the package does
not model yet (latent attention kernel by kernel) exits with status 1. A mixture-of-experts step of more
than one token is priced at the uniform-routing expectation unless ``--routing`` names another, and the
output says that it assumed it.
With ``--json`` an error is one JSON object on stdout, ``{"error": ..., "argument": ...}``, with the
same status. ``--catalog PATH`` (or the ``ROOFLINE_CATALOG`` variable) reads a reader's own hardware
catalog instead of the shipped one. A closed pipe (``roofline hardware | head -1``) ends the program
quietly, as it ends other Unix tools.
"""

from __future__ import annotations

import json
import re
import sys
import warnings
from typing import Sequence

from roofline.cli import catalog, inference, rules, serving, training
from roofline.cli.output import report, wants_json, write
from roofline.cli.parser import HelpRequested, UsageError, at, build_parser
from roofline.core.hardware import CatalogError, hardware_names
from roofline.core.model import NotModelledError

__all__ = ["main", "COMMANDS", "finite"]

COMMANDS = {
    "hardware": catalog.run_hardware,
    "params": catalog.run_params,
    "ridge": catalog.run_ridge,
    "decode": inference.run_decode,
    "prefill": inference.run_prefill,
    "serve": serving.run_serve,
    "speculate": serving.run_speculate,
    "train": training.run_train,
    "plan": training.run_plan,
    "rules": rules.run_rules,
}
"""Each command's handler: parsed arguments in, the text (or JSON) to print out."""


_NOT_FINITE = re.compile(r"(?<![\w.])-?(?:nan|inf)(?![\w])")


def _reject_constant(name: str):
    raise ValueError(name)


def finite(out: str, as_json: bool, warned: bool) -> None:
    """Refuse an answer that is not a finite number anywhere (``Infinity`` or ``NaN`` in JSON, ``inf s`` or
    ``nan`` in text): a ``ValueError`` saying so, reported with status 2, rather than a number no reader (nor a
    strict JSON parser such as jq) can use. ``warned``: numpy warned on the way (an overflow, 0/0)."""
    if as_json:
        try:
            json.loads(out, parse_constant=_reject_constant)
            return
        except ValueError:
            pass
        bad = re.search(r'"([^"]+)":\s*-?(?:Infinity|NaN)', out)
        where = f" ({bad.group(1)})" if bad else ""
    elif _NOT_FINITE.search(out) is None:
        return
    else:
        where = ""
    raise ValueError(f"the answer is not a finite number{where}"
                     + (" (the arithmetic overflowed or divided zero by zero)" if warned else "")
                     + ": an input is too extreme for the model to mean anything (a catalog figure, a fraction of "
                       "peak, a count); give values within a chip's and a model's range")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 fine, 1 not modelled, 2 bad input).

    A closed pipe returns 141 (128 + SIGPIPE, as a shell reports for a tool that signal ended)
    with nothing printed; a closed stdout (``>&-``) returns 2 with a line on stderr, a closed stderr
    (``2>&-``) keeps the status of the error it could not print. ``--help`` prints the help and returns 0
    (under ``--json``, as ``{"help": TEXT}``).
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    as_json = wants_json(argv)
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.catalog is not None:
            at("--catalog", hardware_names, args.catalog)  # a bad catalog is named as such, whatever the command
        with warnings.catch_warnings(record=True) as caught:  # no RuntimeWarning reaches a reader
            warnings.simplefilter("always", RuntimeWarning)
            out = COMMANDS[args.command](args)
        finite(out, as_json, bool(caught))
    except HelpRequested as exc:
        return write(json.dumps({"help": exc.text}, indent=2) if as_json else exc.text.rstrip("\n"))
    except UsageError as exc:
        return report(2, exc.message, exc.argument, as_json, usage=exc.usage)
    except NotModelledError as exc:
        return report(1, f"roofline: not modelled: {exc}", None, as_json)
    except CatalogError as exc:
        return report(2, str(exc), "--catalog", as_json)
    except (KeyError, ValueError, TypeError, OverflowError, RecursionError) as exc:
        # what at() did not place: an unknown name with close matches, a malformed config.json
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        return report(2, str(message), None, as_json)
    return write(out)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
