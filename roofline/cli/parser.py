"""The argument parser of ``roofline``: every command's flags, the flag types, and :class:`UsageError`.

The flag types (:func:`whole`, :func:`storage_format`, :func:`fraction`, :func:`acceptance`,
:func:`recompute`) turn a bad value into argparse's one-line message; :func:`at` turns a bad-input error a
package function raises into a :class:`UsageError` that names the flag at fault, so that ``main`` reports
every error one way (:mod:`roofline.cli.output`).
"""

from __future__ import annotations

import argparse
import os
import re
from typing import Mapping

from roofline.core.cluster_roof import ALLREDUCE_KINDS, ENGINE_ALLREDUCE, ROOF_KINDS
from roofline.core.hardware import CatalogError, require_links
from roofline.core.model import NotModelledError, model_names
from roofline.core.policies import recompute_policy
from roofline.core.roof import TIMINGS
from roofline.core.units import DTYPE_BYTES, dtype_bytes
from roofline.parallel.moe import ROUTINGS
from roofline.serving.capacity import VLLM_BLOCK_SIZE
from roofline.serving.deployment import ARRIVALS, CHUNK_TOKENS
from roofline.serving.speculative import DRAFTS
from roofline.core.fp8 import FP8_RECIPES
from roofline.workloads.inference import ACCOUNTINGS, OPTIONS

__all__ = ["UsageError", "HelpRequested", "build_parser", "whole", "whole_or_auto", "AUTO", "storage_format", "fraction", "cache_share", "budget", "acceptance", "recompute", "at",
           "positive", "share", "pool_split",
           "CLUSTER_FLAGS", "wants_cluster",
           "one_split", "GPUS_PER_NODE", "SMALLEST_FRACTION", "need_links", "moe_routing", "DEFAULT_ROUTING", "layout_flags"]


# The largest count the command line takes: 2**53, past which a float no longer holds every whole number.
_LARGEST = 2**53


def whole(minimum: int):
    """An argparse type: a whole number no smaller than ``minimum`` (and no larger than 2**53)."""

    def parse(text: str) -> int:
        shown = text if len(text) <= 40 else f"{text[:20]}...{text[-10:]} ({len(text):,} characters)"
        digits = text.strip().replace("_", "").replace(",", "")
        if not re.fullmatch(r"[0-9]+", digits):  # ASCII digits only: no sign (-0), no Arabic-Indic or other digits
            raise argparse.ArgumentTypeError(f"expected a whole number >= {minimum} in the digits 0-9, got {shown!r}")
        value = int(digits)
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected a whole number >= {minimum}, got {shown!r}")
        if value > _LARGEST:
            raise argparse.ArgumentTypeError(f"expected a whole number no larger than {_LARGEST:,} (2**53), got {shown!r}")
        return value

    parse.__name__ = "whole number"
    return parse


AUTO = "auto"
"""The value of ``--micro-batch``, ``--recompute`` and ``--chunks`` that leaves the setting open: ``train`` tries
every value that runs and takes the fastest that fits, and prints what it picked."""


def whole_or_auto(minimum: int):
    """An argparse type: :func:`whole`'s whole number, or ``auto`` (:data:`AUTO`)."""
    number_ = whole(minimum)

    def parse(text: str):
        if text.strip().lower() == AUTO:
            return AUTO
        try:
            return number_(text)
        except argparse.ArgumentTypeError as exc:
            raise argparse.ArgumentTypeError(str(exc).replace("expected a whole number", "expected auto or a whole "
                                                                                          "number", 1)) from None

    parse.__name__ = "whole number or auto"
    return parse


def storage_format(text: str) -> str:
    """An argparse type: a storage format, plain ('int4') or group-wise ('int4-g128', 'mxfp4'; chapter 6)."""
    try:
        dtype_bytes(text)
    except KeyError as exc:
        raise argparse.ArgumentTypeError(str(exc.args[0] if exc.args else exc)) from None
    return text


storage_format.__name__ = "storage format"


class UsageError(Exception):
    """Bad input to the command line: the message, and the argument at fault (None if no single one)."""

    def __init__(self, message: str, argument: str | None = None, usage: str = ""):
        super().__init__(message)
        self.message, self.argument, self.usage = message, argument, usage


class HelpRequested(Exception):
    """``--help`` was given: the help text, for ``main`` to print (as text, or as JSON under ``--json``)."""

    def __init__(self, text: str):
        super().__init__(text)
        self.text = text


class _Parser(argparse.ArgumentParser):
    """An argument parser that raises :class:`UsageError` rather than printing and exiting, so that
    ``main`` reports every error one way (plain or JSON), and :class:`HelpRequested` for ``--help``, so that
    ``main`` prints it through the same guarded write (``--help --json`` as JSON, ``--help >&-`` quietly).
    A value that reads as a negative number, infinite or not a number (``--rate -inf``) is a value, which the
    flag's type then refuses by name, not a flag argparse does not know."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = re.compile(r"^-(\d+\.?\d*(e[-+]?\d+)?|\.\d+(e[-+]?\d+)?|inf(inity)?|nan)$",
                                                   re.IGNORECASE)

    def print_help(self, file=None):
        raise HelpRequested(self.format_help())

    def error(self, message: str):
        found = re.match(r"argument ([^:]+): ", message)
        argument = found.group(1).split("/")[0] if found else None
        if argument is None and (required := re.search(r"arguments are required: (.+)$", message)):
            argument = required.group(1).split(", ")[0]
        if argument is not None and (given := re.search(r"ignored explicit argument (.+)$", message)):
            message = (f"argument {argument}: {argument} is a switch and takes no value, got {given.group(1)}: give "
                       f"{argument} alone")
        raise UsageError(f"{self.prog}: error: {message}", argument, self.format_usage())


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``roofline`` (exposed for the documentation and the tests)."""
    parser = _Parser(
        prog="roofline",
        description="Datasheet roofs, parameter counts and decode/prefill estimates from the roofline package.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("hardware", help="list the hardware catalog, or show one entry with its sources")
    p.add_argument("name", nargs="?", help="an accelerator key or alias, e.g. h100-sxm or H100")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")

    models = ", ".join(model_names())
    p = sub.add_parser("params", help="total and active parameters of a model",
                       description=f"Shipped models: {models}; or the path of a config.json.")
    p.add_argument("model", help="a shipped model name or the path of a Hugging Face config.json")
    p.add_argument("--json", action="store_true", help="print one JSON object")

    p = sub.add_parser("ridge", help="the datasheet ridge point of an accelerator")
    p.add_argument("gpu", help="an accelerator key or alias")
    p.add_argument("--dtype", default="bf16", choices=list(DTYPE_BYTES), help="number format of the peak (default bf16)")
    p.add_argument("--json", action="store_true", help="print one JSON object")

    for name, what in (("decode", "one decode step"), ("prefill", "one prefill")):
        p = sub.add_parser(name, help=f"the roofline estimate of {what}, part by part",
                           description=f"Shipped models: {models}; or the path of a config.json.")
        p.add_argument("model", help="a shipped model name or the path of a Hugging Face config.json")
        p.add_argument("--gpu", required=True, help="an accelerator key or alias, e.g. h100-sxm")
        if name == "decode":
            p.add_argument("--batch", type=whole(1), default=1, help="sequences decoded together (default 1)")
            p.add_argument("--context", type=whole(0), default=0, help="cached tokens per sequence (default 0)")
        else:
            p.add_argument("--tokens", type=whole(1), required=True, help="prompt tokens per sequence")
            p.add_argument("--batch", type=whole(1), default=1, help="sequences (default 1)")
            _cp_flags(p, methods=False)
        p.add_argument("--accounting", choices=ACCOUNTINGS, default=None,
                       help="the first-order count ('text') or the refined one, kernel by kernel "
                            "(default: text under --timing step with no kernel option such as "
                            "--attention explicit, refined otherwise)")
        p.add_argument("--dtype", default="bf16", choices=list(DTYPE_BYTES),
                       help="format of everything: weights, activations, KV cache, math (default bf16)")
        p.add_argument("--weights-dtype", type=storage_format, metavar="FORMAT",
                       help="store the layers' weights narrower: int8, fp8, int4, or group-wise as int4-g128 "
                            "(one fp16 scale per 128 weights), int4-g128-zp (and a zero point), mxfp4 (W4A16: int4-g128)")
        p.add_argument("--kv-dtype", type=storage_format, metavar="FORMAT", help="format of the KV cache (fp8, int4-g128...)")
        p.add_argument("--math-dtype", choices=list(DTYPE_BYTES),
                       help="format the matmuls compute in, whose peak the roof takes (fp8 or int8: W8A8); refused "
                            "on a chip without tensor cores for it (default: --dtype)")
        p.add_argument("--embeddings-dtype", choices=list(DTYPE_BYTES),
                       help="format of the embedding table, output head and norms (default: --weights-dtype; "
                            "weight-only checkpoints keep them in bf16)")
        p.add_argument("--attention", choices=OPTIONS["attention"], default="flash",
                       help="flash (never writes the scores) or explicit; refined accounting (default flash)")
        if name == "prefill":
            p.add_argument("--lm-head", choices=OPTIONS["lm_head"], default="all",
                           help="logits for all prompt tokens or only the last (default all)")
        p.add_argument("--timing", choices=TIMINGS, default="step",
                       help="step: max over the whole step (the text's); kernel: each kernel's max, summed, "
                            "at least its launch; serial: no overlap at all (default step)")
        p.add_argument("--roof", choices=ROOF_KINDS, default="datasheet",
                       help="datasheet peaks, or the roof calibrated from the H200's microbenchmarks (default datasheet)")
        p.add_argument("--launch", choices=("graph", "eager"), default="graph",
                       help="with --roof calibrated: kernels replayed from a CUDA graph or launched from Python")
        p.add_argument("--carry-h200-efficiencies", action="store_true",
                       help="with --roof calibrated on another GPU: assume the H200's measured efficiencies")
        p.add_argument("--ops", action="store_true", help="list the operations (kernels): FLOPs, bytes, bound, time")
        _tp_flag(p)
        p.add_argument("--json", action="store_true", help="print one JSON object")
        _moe_flags(p)
    p = sub.add_parser("serve", help="how many requests fit and how fast they decode; with --input and --output, what a "
                                     "deployment sustains for a workload (chapter 13)",
                       description=f"Shipped models: {models}; or the path of a config.json. With --context: the largest "
                                   "batch whose KV cache fits, and at that batch the decode step (datasheet roof; "
                                   "chapter 5). With --input and --output: the output tokens/s, TTFT and TPOT a "
                                   "deployment sustains for that workload under continuous batching, the datasheet "
                                   "ceiling beside the calibrated estimate; --plan ranks the layouts that meet "
                                   "--ttft-slo and --tpot-slo (chapter 13).")
    p.add_argument("model", help="a shipped model name or the path of a Hugging Face config.json")
    p.add_argument("--gpu", required=True, help="an accelerator key or alias, e.g. h100-sxm")
    p.add_argument("--context", type=whole(1),
                   help="tokens of context per request (at most the model's max_position_embeddings); required "
                        "unless --input and --output describe a workload")
    w = p.add_argument_group("a workload on a deployment (chapter 13)")
    w.add_argument("--input", type=whole(1), metavar="I", help="prompt tokens of each request")
    w.add_argument("--output", type=whole(1), metavar="O", help="answer tokens of each request")
    load = w.add_mutually_exclusive_group()
    load.add_argument("--rate", type=positive, metavar="R", help="requests per second offered to the deployment")
    load.add_argument("--concurrency", type=whole(1), metavar="C",
                      help="clients, each sending its next request when its answer is done")
    load.add_argument("--requests", type=whole(1), metavar="N",
                      help="an offline benchmark's requests, all issued at once (default: the steady state)")
    w.add_argument("--ttft-slo", type=positive, metavar="SECONDS", help="target time to first token")
    w.add_argument("--tpot-slo", type=positive, metavar="SECONDS", help="target time per output token")
    w.add_argument("--pp", type=whole(1), default=1, metavar="N", help="pipeline stages of a replica (default 1)")
    w.add_argument("--dp-attention", type=whole(1), default=1, metavar="N",
                   help="attention groups of a replica, each attending for its share of the batch (the KV cache "
                        "sharded by batch; default 1)")
    w.add_argument("--replicas", type=whole(1), default=1, metavar="N", help="copies of the replica (default 1)")
    w.add_argument("--disaggregate", type=pool_split, metavar="P:D",
                   help="prefill on P GPUs and decode on D, the KV cache sent between them (each a whole number "
                        "of replicas)")
    w.add_argument("--prefix-hit", type=share, default=0.0, metavar="H",
                   help="share of each prompt found in a prefix cache, at least 0 and below 1 (default 0)")
    w.add_argument("--kv-policy", choices=("grow", "reserve"),
                   help="what a sequence's cache holds: its tokens so far (grow, vLLM's) or its prompt and whole "
                        "answer from admission (reserve, TensorRT-LLM's default); default grow (reserve with "
                        "--runtime trtllm-bench)")
    w.add_argument("--max-batch", type=whole(1), metavar="N",
                   help="the runtime's cap on sequences in flight per replica (vLLM's --max-num-seqs, TensorRT-LLM's "
                        "--max_batch_size; default: memory alone, or trtllm-bench's rule with --runtime trtllm-bench)")
    w.add_argument("--max-num-tokens", type=budget, metavar="N",
                   help=f"the step's token budget, decode tokens and prompt chunks together, which chunked prefill cuts "
                        f"prompts to (vLLM's --max-num-batched-tokens, SGLang's --chunked-prefill-size, TensorRT-LLM's "
                        f"--max_num_tokens); default {CHUNK_TOKENS:,}, the engines' on 80 GB GPUs; 'none' for no "
                        "chunking")
    w.add_argument("--kv-fraction", type=cache_share, metavar="F",
                   help="share of the HBM left after the weights that the KV cache gets (default 1; 0.9 with "
                        "--runtime trtllm-bench, its free_gpu_memory_fraction)")
    w.add_argument("--head-dtype", type=storage_format, metavar="FORMAT",
                   help="format of the output head and embedding, which quantizers often leave in bf16 (default: the "
                        "weights'; bf16 with --runtime trtllm-bench)")
    w.add_argument("--arrival", choices=ARRIVALS, default="poisson",
                   help="how a rate's requests arrive: poisson, at random (benchmarks' default, vLLM's --burstiness 1), "
                        "or regular, evenly spaced (default poisson)")
    w.add_argument("--runtime", choices=RUNTIMES, default="engines",
                   help="engines: the serving engines' defaults (a cache that grows, the 8,192-token budget, every byte "
                        "of HBM left); trtllm-bench: TensorRT-LLM's benchmark as chapter 13's table runs it (the cache "
                        "reserved for the whole answer, 90%% of the free HBM, a bf16 head, its own caps on the batch and "
                        "the step's tokens unless --max-batch and --max-num-tokens are given)")
    w.add_argument("--allreduce", choices=ALLREDUCE_KINDS, default=ENGINE_ALLREDUCE,
                   help="how a tensor-parallel group all-reduces inside a node: custom, the one-shot/two-shot kernels "
                        "vLLM, SGLang and TensorRT-LLM decode with by default (NCCL past their 8 MiB buffer), or "
                        f"nccl, NCCL's ring always (default {ENGINE_ALLREDUCE}, the engines')")
    w.add_argument("--roof", choices=("both", *ROOF_KINDS), default="both",
                   help="the datasheet ceiling, the calibrated estimate, or both side by side (default; the "
                        "estimate's figures lead the JSON where the chip has a calibrated roof)")
    w.add_argument("--plan", action="store_true",
                   help="rank every layout of up to --max-gpus GPUs a replica that meets the targets, by output "
                        "tokens/s per GPU, and name the smallest slice")
    w.add_argument("--max-gpus", type=whole(1), default=8, metavar="N",
                   help="with --plan: the most GPUs a replica may take (default 8)")
    p.add_argument("--weights-dtype", default="bf16", type=storage_format, metavar="FORMAT",
                   help="format of the weights (default bf16; int8, int4-g128, mxfp4...)")
    p.add_argument("--kv-dtype", type=storage_format, metavar="FORMAT", help="format of the KV cache (default: the weights')")
    p.add_argument("--math-dtype", choices=list(DTYPE_BYTES),
                   help="format the matmuls compute in (default bf16: weights stored narrower are widened first); "
                        "refused where the chip has no tensor cores for it")
    p.add_argument("--block-size", type=whole(1), default=VLLM_BLOCK_SIZE,
                   help=f"tokens per KV block, paged attention (default {VLLM_BLOCK_SIZE}, vLLM's; 1: no rounding)")
    p.add_argument("--gpus", type=whole(1), default=1,
                   help="GPUs serving one copy of the model, memory and bandwidth pooled, all-reduces not counted "
                        "(chapter 5; default 1)")
    _tp_flag(p)
    p.add_argument("--batch", type=whole(1), help="time the decode at this batch instead of the largest that fits")
    p.add_argument("--prompt", type=whole(1),
                   help="prompt tokens whose prefill, alone, gives the time to first token (default: --context)")
    p.add_argument("--curve", action="store_true",
                   help="also print the latency-throughput curve: time per output token and tokens/s by batch (chapter 12)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    _moe_flags(p)

    p = sub.add_parser("speculate", help="speculative decoding: expected speed-up, and where it stops paying",
                       description=f"Target: a shipped model ({models}) or a config.json; draft: one of those or a "
                                   f"shipped draft ({', '.join(DRAFTS)}). Datasheet roof, text accounting. Chapter 12.")
    p.add_argument("model", help="the target model: a shipped name or the path of a Hugging Face config.json")
    p.add_argument("--draft", required=True, help=f"the draft model, smaller than the target (e.g. {DRAFTS[0]})")
    p.add_argument("--gpu", required=True, help="an accelerator key or alias, e.g. h200")
    p.add_argument("--alpha", type=acceptance, required=True, help="acceptance rate of a draft token, in [0, 1)")
    p.add_argument("--gamma", type=whole(1), default=4, help="draft tokens per verify step (default 4)")
    p.add_argument("--batch", type=whole(1), default=1, help="sequences decoded together (default 1)")
    p.add_argument("--context", type=whole(0), default=2048, help="cached tokens per sequence (default 2048)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--routing", choices=ROUTINGS, default=None, metavar="ROUTING",
                   help="for a mixture-of-experts target, how the verify step's tokens reach the experts: uniform "
                        "(the expectation), best or worst (the bounds); default uniform, and the output says it was assumed")

    _train_parser(sub, models)
    _plan_parser(sub, models)
    _rules_parser(sub, models)
    for p in sub.choices.values():
        p.add_argument("--catalog", metavar="PATH", default=os.environ.get("ROOFLINE_CATALOG") or None,
                       help="a hardware catalog TOML to use instead of the shipped one "
                            "(default: $ROOFLINE_CATALOG if set)")
    return parser


def _number_in(text: str, inside, expected: str) -> float:
    """``text`` as a float if ``inside(value)`` (nan is never inside), else argparse's one-line error."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not inside(value):
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text[:40]!r}")
    return value


def positive(text: str) -> float:
    """An argparse type: a positive finite number (a rate, seconds)."""
    return _number_in(text, lambda v: 0 < v < float("inf"), "a positive finite number, such as 0.05")


def share(text: str) -> float:
    """An argparse type: a share at least 0 and below 1 (a prefix cache's hit rate)."""
    return _number_in(text, lambda v: 0 <= v < 1, "a share at least 0 and below 1, such as 0.5")


def pool_split(text: str) -> tuple[int, int]:
    """An argparse type: 'P:D', the GPUs of a prefill pool and of a decode pool."""
    parts = text.split(":")
    if len(parts) != 2:
        raise argparse.ArgumentTypeError(f"expected P:D, prefill GPUs and decode GPUs, such as 4:12, got {text[:40]!r}")
    return whole(1)(parts[0]), whole(1)(parts[1])


RUNTIMES = ("engines", "trtllm-bench")
"""The runtimes ``serve --runtime`` takes its defaults from."""


def cache_share(text: str) -> float:
    """An argparse type: a share above 0 and at most 1 (the HBM left after the weights that the cache gets)."""
    return _number_in(text, lambda v: 0 < v <= 1, "a share above 0 and at most 1, such as 0.9")


def budget(text: str):
    """An argparse type: a step's token budget, a whole number of at least 1, or 'none' (no chunking)."""
    if text.strip().lower() == "none":
        return "none"
    try:
        return whole(1)(text)
    except argparse.ArgumentTypeError as exc:
        raise argparse.ArgumentTypeError(f"{exc} (or 'none': every prompt joins one step whole)") from None


def acceptance(text: str) -> float:
    """An argparse type: an acceptance rate in [0, 1)."""
    return _number_in(text, lambda v: 0 <= v < 1, "an acceptance rate at least 0 and below 1, such as 0.8")


def _moe_flags(p: argparse.ArgumentParser) -> None:
    """The two flags of chapter 10, the same on decode, prefill and serve."""
    p.add_argument("--routing", choices=ROUTINGS, default=None, metavar="ROUTING",
                   help="how a mixture of experts routes a step's tokens, one of uniform (independent uniform choices, the "
                        "expected experts read), best (all to the same k: the fewest bytes) or worst (as many experts "
                        "as possible: the most); default uniform, and the output says it was assumed")
    p.add_argument("--ep", type=whole(1), default=1, metavar="N",
                   help="expert parallelism: the routed experts spread over N GPUs, everything else copied, the batch "
                        "split N ways, two all-to-alls per MoE layer (NVLink within 8 GPUs a node, then InfiniBand); "
                        "text accounting, step rule, datasheet roof (default 1)")


DEFAULT_ROUTING = "uniform"
"""The routing a mixture of experts is priced with when ``--routing`` is not given: the expectation under
independent uniform choices (chapter 10), named as assumed in the output; ``best`` and ``worst`` are the bounds."""


def moe_routing(args, m) -> bool:
    """Fill in ``args.routing`` for a mixture of experts given none (:data:`DEFAULT_ROUTING`); whether it was
    assumed. A dense model keeps what was given (it reads every weight whatever the routing)."""
    if m.moe is None or args.routing is not None:
        return False
    args.routing = DEFAULT_ROUTING
    return True


def layout_flags(flags: Mapping[str, str], m, seq) -> dict:
    """The flags :func:`at` blames for the layout planner and the rules (``plan``, ``rules``, ``train`` on a
    cluster): ``flags`` (the package's argument names to the flags), and when the message names none of them
    ``--seq`` if the sequence is past the model's trained context, ``--nodes`` if no layout fits, else the model."""
    beyond = m.max_position_embeddings is not None and seq > m.max_position_embeddings
    return {**flags, "": "--seq"} if beyond else {**flags, "fits on no": "--nodes", "": "model"}


def at(argument: str | Mapping, call, /, *args, **kwargs):
    """Call ``call``; a bad-input error it raises becomes a :class:`UsageError` naming the flag at fault (a
    question not modelled passes through, exit 1; a bad catalog is ``--catalog``'s fault). ``argument`` is the
    flag to blame (its name without the dashes is the package's argument: ``--roof`` is ``roof``), or a mapping
    from the package's argument names (or phrases) to their flags, its entry ``""`` the flag to blame when the
    message names none of them. In that order:

    - a message that starts with one of the names blames its flag, and is reworded to say the flag;
    - "gpus must be at most ..." blames the flag the message names (``--gpus``), whatever ``argument`` says;
    - a message that names one of the names in its first words blames its flag (the longest name first);
    - else the default."""
    try:
        return call(*args, **kwargs)
    except NotModelledError:
        raise
    except CatalogError as exc:
        raise UsageError(str(exc), "--catalog") from None
    except (KeyError, ValueError, TypeError, OverflowError) as exc:
        raise _blame(exc, argument) from None


def _blame(exc: Exception, argument: str | Mapping) -> UsageError:
    message = str(exc.args[0] if isinstance(exc, KeyError) and exc.args else exc)
    if isinstance(argument, Mapping):
        names = dict(argument)
    else:
        names = {"": argument, **({argument[2:].replace("-", "_"): argument} if argument.startswith("--") else {})}
    default = names.pop("", None)
    ordered = sorted(names.items(), key=lambda kv: -len(kv[0]))
    for name, flag in ordered:
        if re.match(re.escape(name) + r"(?![\w-])", message):
            rest = message[len(name):]
            return UsageError(flag + rest if rest.startswith(" ") else message, flag)
    named = re.match(r"([a-z][a-z_]*) must be (?:at most|a whole number|a single|a finite)", message)
    flag = "--" + named.group(1).replace("_", "-") if named else None
    if flag is not None and flag in _flags():
        return UsageError(flag + message[len(named.group(1)):], flag)
    for name, flag in ordered:
        if f" {name} " in message[:60]:
            return UsageError(message, flag)
    return UsageError(message, default)


_FLAGS: set[str] = set()


def _flags() -> set[str]:
    """Every option string of every command (``--gpus``, ``--context``...), read once from the parser."""
    if not _FLAGS:
        for p in build_parser()._subparsers._group_actions[0].choices.values():
            _FLAGS.update(s for a in p._actions for s in a.option_strings if s.startswith("--"))
    return _FLAGS


def recompute(text: str) -> str:
    """An argparse type: a recompute policy, 'none', 'selective', 'full', 'matmul-outputs' or 'every-K', or
    'auto' (:data:`AUTO`: the cluster model tries none, selective and full)."""
    if text.strip().lower() == AUTO:
        return AUTO
    try:
        return recompute_policy(text).name
    except ValueError:
        shown = text if len(text) <= 40 else f"{text[:20]}...{text[-10:]}"
        raise argparse.ArgumentTypeError(f"expected none, selective, full, every-K (K a whole number >= 1: a "
                                         f"checkpoint every K layers) or auto, got {shown!r}") from None


# The smallest fraction of peak the command line takes: below a millionth of peak, times leave any horizon a
# reader means (5e-324 makes them infinite).
SMALLEST_FRACTION = 1e-6



def fraction(text: str) -> float:
    """An argparse type: a fraction of peak, at least :data:`SMALLEST_FRACTION` and at most 1."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not SMALLEST_FRACTION <= value <= 1:  # also refuses nan
        raise argparse.ArgumentTypeError(f"expected a fraction of peak at least {SMALLEST_FRACTION:g} and at most 1, "
                                         f"such as 0.5, got {text[:40]!r}")
    return value


def _train_parser(sub, models: str) -> None:
    p = sub.add_parser("train", help="does a training step fit, and how fast can it go (chapter 3)",
                       description=f"One micro-batch per GPU: memory per GPU against the usable HBM, FLOPs per "
                                   f"step, the step time, MFU and HFU. Shipped models: {models}; or the path of a "
                                   "config.json.")
    p.add_argument("model", help="a shipped model name or the path of a Hugging Face config.json")
    p.add_argument("--gpu", required=True, help="an accelerator key or alias, e.g. h100-sxm")
    p.add_argument("--gpus", type=whole(1), default=1, help="data-parallel GPUs the model state is sharded over (default 1)")
    p.add_argument("--seq", type=whole(1), required=True, help="tokens per sequence")
    p.add_argument("--micro-batch", type=whole_or_auto(1), default=1, metavar="{N,auto}",
                   help="sequences per GPU per micro-batch (default 1); auto (the cluster model, with --global-batch): "
                        "try 1, 2, 4 and 8 and take the fastest that fits, and say which")
    p.add_argument("--recompute", type=recompute, default="none",
                   metavar="{none,selective,full,matmul-outputs,every-K,auto}",
                   help="activation recomputation: none, selective (the attention core), full (every layer's "
                        "forward again), matmul-outputs (keep the matmuls' outputs, rebuild the elementwise "
                        "work) or every-K (a checkpoint every K layers) (default none); auto (the cluster model): "
                        "the fastest of none, selective and full that fits, said in the output")
    p.add_argument("--zero", type=int, choices=(0, 1, 2, 3), default=None,
                   help="ZeRO stage (default 0; 3 with --fsdp)")
    p.add_argument("--offload", action="store_true", help="keep the saved activations in host memory, over PCIe")
    p.add_argument("--attention", choices=OPTIONS["attention"], default="flash",
                   help="flash (never stores the scores) or explicit, the kernel of Megatron-LM's 2021-22 runs, "
                        "which writes the score matrix and passes over it in memory (default flash; the cluster "
                        "model prints which it assumed, since it moves a published comparison)")
    p.add_argument("--achieved", type=fraction, default=None, metavar="FRACTION",
                   help="the fraction of peak the GPU's FLOPs run at (e.g. 0.5); default: the roofline floor")
    p.add_argument("--timing", choices=TIMINGS, default="step", help="the floor's timing rule (default step)")
    dp = p.add_argument_group("data parallelism across nodes (chapter 7): either flag prices the step's collectives")
    dp.add_argument("--nodes", type=whole(1), default=None, help="nodes (default 1 when --gpus-per-node is given)")
    dp.add_argument("--gpus-per-node", type=whole(1), default=None,
                    help="GPUs per node on NVLink (default 8 when --nodes is given)")
    dp.add_argument("--hybrid", action="store_true", help="FSDP hybrid sharding: ZeRO-3 inside each node, replicas "
                                                         "across nodes (needs --zero 3)")
    dp.add_argument("--accumulation", type=whole(1), default=1, help="micro-batches per step (default 1)")
    _tp_flag(p)
    _cp_flags(p, methods=True)
    cl = p.add_argument_group("any layout on a cluster (the cluster model, appendix C): --pp, --ep, --dp, "
                              "--global-batch, --schedule, --chunks or --roof price the whole step, floor and estimate")
    cl.add_argument("--pp", type=whole(1), default=1, help="pipeline stages (default 1)")
    cl.add_argument("--ep", type=whole(1), default=1, help="expert parallelism, carved out of dp x cp (default 1); must divide the "
                    "experts. Routing is dropless and balanced; the all-to-all is priced as DeepEP's kernels count it "
                    "and at their measured rates where the roof holds them (train prints the terms it used)")
    cl.add_argument("--dp", type=whole(1), default=None,
                    help="data-parallel replicas (default: the GPUs over tp x cp x pp, or --gpus)")
    cl.add_argument("--global-batch", type=whole(1), default=None,
                    help="sequences per optimizer step, all GPUs together (default one micro-batch per replica)")
    cl.add_argument("--schedule", choices=("1f1b", "interleaved"), default=None, help="pipeline schedule (default 1f1b)")
    cl.add_argument("--chunks", type=whole_or_auto(1), default=None, metavar="{N,auto}",
                    help="model chunks per GPU, interleaved schedule; auto: every depth that divides a stage's layers "
                         "(with --schedule interleaved two or more, else plain 1F1B too), the fastest that fits")
    cl.add_argument("--sequence-parallel", choices=("on", "off"), default=None,
                    help="split norms and residuals over the tensor-parallel group (default on when --tp > 1)")
    cl.add_argument("--attention-kernel", choices=("fa2", "fa3", "cudnn"), default=None,
                    help="the flash-attention kernel: fa2 (FlashAttention-2, the default), fa3 (FlashAttention-3) or "
                         "cudnn (cuDNN's fused attention, which Transformer Engine picks on Hopper); each at its "
                         "published H100 speeds")
    cl.add_argument("--fsdp", choices=("full", "hybrid"), default=None,
                    help="PyTorch FSDP's names for ZeRO-3: full shards the weights, gradients and optimizer state over "
                         "every data-parallel rank; hybrid (HSDP) over the ranks of one node, replicated across nodes "
                         "(or over --shard-group ranks)")
    cl.add_argument("--reshard-after-forward", choices=("on", "off"), default=None,
                    help="with --fsdp or --zero 3: on (default) frees the gathered weights after the forward pass and "
                         "gathers them again for the backward; off keeps them to the backward pass, one gather a "
                         "step, as Llama 3 did (FSDP1's SHARD_GRAD_OP)")
    cl.add_argument("--shard-group", type=whole(1), default=None, metavar="N",
                    help="hybrid sharding over groups of N data-parallel ranks, replicated across groups "
                         "(torchtitan's data_parallel_shard_degree; with --zero 1 to 3 or --fsdp)")
    cl.add_argument("--no-overlap", action="store_true",
                    help="the gradient reduction waits for the backward pass, as in Megatron-LM's 2021-22 runs "
                         "(default: it overlaps the backward pass but for its last bucket; printed in the output)")
    cl.add_argument("--dtype", choices=("bf16", "fp16", "fp8"), default="bf16",
                    help="format of the matmuls (default bf16); fp8: the linear layers' matmuls in fp8 by --fp8-recipe, "
                         "attention, the output head and the optimizer in bf16")
    cl.add_argument("--fp8-recipe", choices=tuple(FP8_RECIPES), default=None,
                    help="with --dtype fp8: te-delayed (Transformer Engine, delayed scaling per tensor; the default), "
                         "te-current (current scaling per tensor), torchao-tensorwise (per tensor, fp8 all-gather "
                         "with FSDP), torchao-rowwise (a scale per row) or deepseek-blockwise (DeepSeek-V3's 1 x 128 "
                         "and 128 x 128 blocks)")
    cl.add_argument("--roof", choices=ROOF_KINDS, default=None,
                    help="datasheet floor only, or the calibrated estimate beside it (default calibrated where the "
                         "chip has one)")
    p.add_argument("--json", action="store_true", help="print one JSON object")


CLUSTER_FLAGS = ("pp", "ep", "dp", "global_batch", "schedule", "chunks", "sequence_parallel", "roof", "fsdp",
                 "reshard_after_forward", "shard_group", "fp8_recipe", "attention_kernel")


def wants_cluster(args) -> bool:
    """Whether ``train``'s flags ask for the cluster model: any of its own flags, --tp or --cp with --nodes
    or --gpus-per-node, or --tp and --cp together."""
    given = [f for f in CLUSTER_FLAGS if getattr(args, f, None) not in (None, 1)] + (["no_overlap"] if args.no_overlap else [])
    given += [f for f in ("micro_batch", "recompute", "chunks") if getattr(args, f, None) == AUTO]
    given += ["dtype"] if getattr(args, "dtype", None) == "fp8" else []
    nodes = args.nodes is not None or args.gpus_per_node is not None
    return bool(given) or (nodes and (args.tp > 1 or args.cp > 1)) or (args.tp > 1 and args.cp > 1)


def one_split(args) -> None:
    """Refuse two ways of splitting one model at once (--tp, --ep, --cp): each is priced on its own."""
    splits = [f"--{n}" for n in ("tp", "ep", "cp") if getattr(args, n, 1) > 1]
    if len(splits) > 1:
        raise UsageError(f"{' and '.join(splits)} together are not modelled yet: choose one way to split the model",
                         splits[-1])


def _plan_parser(sub, models: str) -> None:
    p = sub.add_parser("plan", help="search tensor, pipeline and data-parallel layouts for a cluster (chapter 9)",
                       description=f"Every layout of the cluster's GPUs as tensor x pipeline x data degrees, with a "
                                   f"micro-batch, a recomputation policy, a ZeRO stage and a pipeline schedule; those "
                                   f"that fit in usable memory, fastest first. Dense models: {models}.")
    p.add_argument("model", help="a shipped model name or the path of a Hugging Face config.json")
    p.add_argument("--gpu", required=True, help="an accelerator key or alias, e.g. h100-sxm")
    p.add_argument("--gpus-per-node", type=whole(1), default=8, help="GPUs per node on NVLink (default 8)")
    p.add_argument("--nodes", type=whole(1), required=True, help="nodes in the cluster")
    p.add_argument("--seq", type=whole(1), required=True, help="tokens per sequence")
    p.add_argument("--global-batch", type=whole(1), required=True, help="sequences per optimizer step, all GPUs together")
    p.add_argument("--top", type=whole(1), default=5, help="layouts to print (default 5)")
    p.add_argument("--achieved", type=fraction, default=None, metavar="FRACTION",
                   help="the fraction of peak the GPU's FLOPs run at (e.g. 0.5); default: the roofline floor")
    p.add_argument("--timing", choices=TIMINGS, default="step", help="the floor's timing rule (default step)")
    p.add_argument("--roof", choices=ROOF_KINDS, default=None,
                   help="the roof the cluster model's search over tensor, context, pipeline, data and expert "
                        "parallelism ranks by: calibrated (the estimate, the floor beside; the default where the chip "
                        "has a calibrated roof) or datasheet (the floor)")
    p.add_argument("--dtype", choices=("bf16", "fp8", "both"), default="bf16",
                   help="the matmuls' format the cluster model's search tries: bf16 (the default), fp8 (the linear "
                        "layers' matmuls by --fp8-recipe), or both, ranked together")
    p.add_argument("--fp8-recipe", choices=tuple(FP8_RECIPES), default=None,
                   help="with --dtype fp8 or both: the fp8 recipe (default te-delayed, Transformer Engine's delayed "
                        "scaling per tensor)")
    p.add_argument("--accounting", choices=ACCOUNTINGS, default=None,
                   help="refined: the cluster model (the default); text: chapter 9's first-order search over "
                        "tensor, pipeline and data parallelism, ranked by its floor (--achieved and --timing ask for it)")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def _rules_parser(sub, models: str) -> None:
    p = sub.add_parser("rules", help="every rule of thumb for a model on a cluster, beside the full model (all chapters)",
                       description=f"Each chapter's threshold in closed form (the ridge, the tokens per GPU at which "
                                   f"data parallelism and FSDP hide, the tensor-parallel width, the mixed FSDP x TP "
                                   f"optimum, decode's tensor-parallel bound, the attention crossover, the KV-bound "
                                   f"and compute-bound decode batches), with the chapter that derives it and, where "
                                   f"the package's full model answers the same question, its answer and why they "
                                   f"part. Dense models: {models}.")
    p.add_argument("model", help="a shipped model name or the path of a Hugging Face config.json")
    p.add_argument("--gpu", required=True, help="an accelerator key or alias, e.g. h100-sxm")
    p.add_argument("--nodes", type=whole(1), default=1, help="nodes in the cluster (default 1)")
    p.add_argument("--gpus-per-node", type=whole(1), default=8, help="GPUs per node on NVLink (default 8)")
    p.add_argument("--seq", type=whole(1), default=4096,
                   help="tokens per training sequence, and the decode context (default 4096)")
    p.add_argument("--global-batch", type=whole(1), default=None,
                   help="sequences per optimizer step, all GPUs together: runs the layout planner beside the "
                        "layout rules (default: none, one sequence per GPU)")
    p.add_argument("--batch", type=whole(1), default=64, help="sequences decoded together (default 64)")
    p.add_argument("--tp", type=whole(1), default=None,
                   help="the tensor degree the width rule asks about (default: the GPUs of a node)")
    p.add_argument("--json", action="store_true", help="print one JSON object")


GPUS_PER_NODE = 8  # an HGX/DGX node: the NVLink domain tensor parallelism stays inside

INSIDE = ("scale_up", "host")  # a link inside a node: NVLink, or PCIe on a card that has none


def need_links(args, h, gpus: int, what: str, *, per_node: int = GPUS_PER_NODE) -> None:
    """Before a command prices traffic between ``gpus`` GPUs (``what``: the flags that ask for it): the links the
    catalog must give ``h``, a link inside a node and, past ``per_node`` GPUs, the network, every one missing named
    at once, with the argument at fault (``--catalog`` for a reader's own catalog, else ``--gpu``)."""
    needs = ([INSIDE] if min(gpus, per_node) > 1 else []) + (["network"] if gpus > per_node else [])
    at("--catalog" if args.catalog else "--gpu", require_links, h, needs, what)


def _tp_flag(p) -> None:
    p.add_argument("--tp", type=whole(1), default=1, metavar="N",
                   help="tensor parallelism over N GPUs of one node (at most 8): a t-th of the heads, MLP and "
                        "vocabulary per GPU, the all-reduces priced on NVLink and added to the step (chapter 8; "
                        "default 1)")


def _cp_flags(p, *, methods: bool) -> None:
    p.add_argument("--cp", type=whole(1), default=1,
                   help="context-parallel GPUs one sequence is spread over (default 1: none); with train, the model "
                        "state is sharded over --gpus x --cp GPUs")
    if methods:
        p.add_argument("--cp-method", choices=("ring", "all-to-all"), default="ring",
                       help="ring attention (key/value blocks passed around, zig-zag split) or all-to-all "
                            "(DeepSpeed-Ulysses: heads split, cp at most the key/value heads) (default ring)")
