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

A model is a shipped name (``roofline params --help`` lists them) or the path of any Hugging Face
``config.json``. Bad input exits with status 2 and a one-line message; a question the package does
not model yet (a mixture-of-experts step with many tokens, latent attention) exits with status 1.
With ``--json`` an error is one JSON object on stdout, ``{"error": ..., "argument": ...}``, with the
same status. ``--catalog PATH`` (or the ``ROOFLINE_CATALOG`` variable) reads a reader's own hardware
catalog instead of the shipped one. A closed pipe (``roofline hardware | head -1``) ends the program
quietly, as it ends other Unix tools.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from typing import Sequence

from roofline.core.cost import Breakdown
from roofline.core.hardware import CatalogError, Hardware, get_hardware, hardware_names
from roofline.core.formats import formats as make_formats
from roofline.workloads.inference import ACCOUNTINGS, OPTIONS, decode_step, prefill
from roofline.measured import calibrated_roof_for
from roofline.workloads.memory import inference_footprint
from roofline.core.model import Model, NotModelledError, load_model, model_names
from roofline.parallel.moe import ROUTINGS, expert_parallel_batch, expert_parallel_step, weights_per_gpu
from roofline.core.roof import TIMINGS, predict
from roofline.serving.capacity import (VLLM_BLOCK_SIZE, ServingPlan, check_context, kv_replicas, largest_batch,
                                       latency_throughput, serving_plan, time_to_first_token)
from roofline.serving.speculative import DRAFTS, breakeven_alpha, best_gamma, speculate, stops_paying_batch
from roofline.present.tables import Table, breakdown_table, operations_table
from roofline.core.policies import recompute_policy
from roofline.workloads.quantization import check_math, weight_bytes
from roofline.workloads.training import plan_training
from roofline.core.units import DTYPE_BYTES, dtype_bytes, fmt

__all__ = ["main", "build_parser", "UsageError"]


# The largest count the command line takes: 2**53, past which a float no longer holds every whole number.
_LARGEST = 2**53


def _whole(minimum: int):
    """An argparse type: a whole number no smaller than ``minimum`` (and no larger than 2**53)."""

    def parse(text: str) -> int:
        shown = text if len(text) <= 40 else f"{text[:20]}...{text[-10:]} ({len(text):,} characters)"
        try:
            value = int(text.replace("_", "").replace(",", ""))
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number >= {minimum}, got {shown!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected a whole number >= {minimum}, got {shown!r}")
        if value > _LARGEST:
            raise argparse.ArgumentTypeError(f"expected a whole number no larger than {_LARGEST:,} (2**53), got {shown!r}")
        return value

    parse.__name__ = "whole number"
    return parse


def _storage_format(text: str) -> str:
    """An argparse type: a storage format, plain ('int4') or group-wise ('int4-g128', 'mxfp4'; chapter 6)."""
    try:
        dtype_bytes(text)
    except KeyError as exc:
        raise argparse.ArgumentTypeError(str(exc.args[0] if exc.args else exc)) from None
    return text


_storage_format.__name__ = "storage format"


class UsageError(Exception):
    """Bad input to the command line: the message, and the argument at fault (None if no single one)."""

    def __init__(self, message: str, argument: str | None = None, usage: str = ""):
        super().__init__(message)
        self.message, self.argument, self.usage = message, argument, usage


class _Parser(argparse.ArgumentParser):
    """An argument parser that raises :class:`UsageError` rather than printing and exiting, so that
    ``main`` reports every error one way (plain or JSON)."""

    def error(self, message: str):
        found = re.match(r"argument ([^:]+): ", message)
        argument = found.group(1).split("/")[0] if found else None
        if argument is None and (required := re.search(r"arguments are required: (.+)$", message)):
            argument = required.group(1).split(", ")[0]
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
            p.add_argument("--batch", type=_whole(1), default=1, help="sequences decoded together (default 1)")
            p.add_argument("--context", type=_whole(0), default=0, help="cached tokens per sequence (default 0)")
        else:
            p.add_argument("--tokens", type=_whole(1), required=True, help="prompt tokens per sequence")
            p.add_argument("--batch", type=_whole(1), default=1, help="sequences (default 1)")
            _cp_flags(p, methods=False)
        p.add_argument("--accounting", choices=ACCOUNTINGS, default=None,
                       help="the first-order count ('text') or the refined one, kernel by kernel "
                            "(default: text under --timing step, refined otherwise)")
        p.add_argument("--dtype", default="bf16", choices=list(DTYPE_BYTES),
                       help="format of everything: weights, activations, KV cache, math (default bf16)")
        p.add_argument("--weights-dtype", type=_storage_format, metavar="FORMAT",
                       help="store the layers' weights narrower: int8, fp8, int4, or group-wise as int4-g128 "
                            "(one fp16 scale per 128 weights), int4-g128-zp (and a zero point), mxfp4 (W4A16: int4-g128)")
        p.add_argument("--kv-dtype", type=_storage_format, metavar="FORMAT", help="format of the KV cache (fp8, int4-g128...)")
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
        p.add_argument("--roof", choices=("datasheet", "measured"), default="datasheet",
                       help="datasheet peaks, or the roof calibrated from the H200's microbenchmarks (default datasheet)")
        p.add_argument("--launch", choices=("graph", "eager"), default="graph",
                       help="with --roof measured: kernels replayed from a CUDA graph or launched from Python")
        p.add_argument("--carry-h200-efficiencies", action="store_true",
                       help="with --roof measured on another GPU: assume the H200's measured efficiencies")
        p.add_argument("--ops", action="store_true", help="list the operations (kernels): FLOPs, bytes, bound, time")
        _tp_flag(p)
        p.add_argument("--json", action="store_true", help="print one JSON object")
        _moe_flags(p)
    p = sub.add_parser("serve", help="how many requests fit beside the weights, and how fast they decode",
                       description=f"Shipped models: {models}; or the path of a config.json. The largest batch whose "
                                   "KV cache fits, and at that batch the decode step (datasheet roof). Chapter 5.")
    p.add_argument("model", help="a shipped model name or the path of a Hugging Face config.json")
    p.add_argument("--gpu", required=True, help="an accelerator key or alias, e.g. h100-sxm")
    p.add_argument("--context", type=_whole(1), required=True,
                   help="tokens of context per request (at most the model's max_position_embeddings)")
    p.add_argument("--weights-dtype", default="bf16", type=_storage_format, metavar="FORMAT",
                   help="format of the weights (default bf16; int8, int4-g128, mxfp4...)")
    p.add_argument("--kv-dtype", type=_storage_format, metavar="FORMAT", help="format of the KV cache (default: the weights')")
    p.add_argument("--math-dtype", choices=list(DTYPE_BYTES),
                   help="format the matmuls compute in (default bf16: weights stored narrower are widened first); "
                        "refused where the chip has no tensor cores for it")
    p.add_argument("--block-size", type=_whole(1), default=VLLM_BLOCK_SIZE,
                   help=f"tokens per KV block, paged attention (default {VLLM_BLOCK_SIZE}, vLLM's; 1: no rounding)")
    p.add_argument("--gpus", type=_whole(1), default=1,
                   help="GPUs serving one copy of the model, memory and bandwidth pooled, all-reduces not counted "
                        "(chapter 5; default 1)")
    _tp_flag(p)
    p.add_argument("--batch", type=_whole(1), help="time the decode at this batch instead of the largest that fits")
    p.add_argument("--prompt", type=_whole(1),
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
    p.add_argument("--alpha", type=_acceptance, required=True, help="acceptance rate of a draft token, in [0, 1)")
    p.add_argument("--gamma", type=_whole(1), default=4, help="draft tokens per verify step (default 4)")
    p.add_argument("--batch", type=_whole(1), default=1, help="sequences decoded together (default 1)")
    p.add_argument("--context", type=_whole(0), default=2048, help="cached tokens per sequence (default 2048)")
    p.add_argument("--json", action="store_true", help="print one JSON object")

    _train_parser(sub, models)
    _plan_parser(sub, models)
    for p in sub.choices.values():
        p.add_argument("--catalog", metavar="PATH", default=os.environ.get("ROOFLINE_CATALOG") or None,
                       help="a hardware catalog TOML to use instead of the shipped one "
                            "(default: $ROOFLINE_CATALOG if set)")
    return parser


# --- the commands ------------------------------------------------------------------------------

def _hardware_list(as_json: bool, catalog=None) -> str:
    entries = [get_hardware(k, catalog) for k in hardware_names(catalog)]
    if as_json:
        return json.dumps([{"key": h.key, "name": h.name, "year": h.year, "hbm_bandwidth": h.hbm_bandwidth,
                            "hbm_capacity": h.hbm_capacity, "hbm_usable": h.usable_capacity,
                            "dense_flops": dict(h.dense_flops)} for h in entries], indent=2)
    rows = tuple((h.key, h.name, str(h.year), fmt(h.hbm_bandwidth, "B/s"), fmt(h.hbm_capacity, "B"),
                  fmt(h.usable_capacity, "B"), ", ".join(h.dense_flops)) for h in entries)
    table = Table(("key", "name", "year", "HBM bandwidth", "HBM sold as", "HBM usable", "dense formats"), rows)
    return f"{table!r}\n\n`roofline hardware KEY` shows every figure of one entry with its source."


def _hardware_one(h: Hardware, as_json: bool) -> str:
    if as_json:
        return json.dumps({"key": h.key, "name": h.name, "vendor": h.vendor, "architecture": h.architecture,
                           "year": h.year, "aliases": list(h.aliases), "hbm_usable": h.usable_capacity,
                           "reserve": h.reserve,
                           "figures": {path: {"value": f.value, "unit": f.unit, "given": f.given, "note": f.note,
                                              "source": {"title": f.source.title, "url": f.source.url,
                                                         "date": f.source.date}}
                                       for path, f in h.figures.items()}}, indent=2)
    lines = [f"{h.name} ({h.vendor} {h.architecture}, {h.year}, {h.form_factor}, {h.memory_type})"]
    if h.aliases:
        lines.append(f"aliases: {', '.join(h.aliases)}")
    sources: dict[str, int] = {}
    rows = []
    for path, f in h.figures.items():
        number = sources.setdefault(f.source.key, len(sources) + 1)
        shown = f.given
        if path.startswith("interconnect."):
            link = h.interconnect[path.split(".", 1)[1]]
            shown = f"{f.given} {link.direction} ({link.name})"
        rows.append((path, shown, f"[{number}]", f.note))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines.append("")
    for r in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(r[:3], widths)) + ("  " + r[3] if r[3] else ""))
    lines += ["", "sources:"]
    for key, number in sources.items():
        s = next(f.source for f in h.figures.values() if f.source.key == key)
        lines.append(f"  [{number}] {s.title} ({s.date}) {s.url}")
    lines.append("")
    total = "the device's total" if h.hbm_total is not None else "the marketing figure (no device total given)"
    lines.append(f"HBM usable: {fmt(h.usable_capacity, 'B')} = {total} less {fmt(h.reserve, 'B')} kept for the "
                 f"CUDA context and workspaces (sold as {fmt(h.hbm_capacity, 'B')})")
    lines.append("ridge points (dense peak / HBM bandwidth): " + ", ".join(
        f"{d} {h.ridge_point(d):,.0f} FLOP/B" for d in h.dense_flops))
    return "\n".join(lines)


def _params(m: Model, as_json: bool) -> str:
    record = {
        "name": m.name, "family": m.family, "total": m.params, "active": m.active_params,
        "layers": m.num_layers, "hidden_size": m.hidden_size, "kv_bytes_per_token_bf16": m.kv_bytes_per_token("bf16"),
    }
    if m.sliding_layers:
        record["sliding_window"] = m.sliding_window
        record["sliding_layers"] = len(m.sliding_layers)
    if m.moe is not None:
        record["experts"] = m.moe.num_experts
        record["experts_per_token"] = m.moe.experts_per_token
    if as_json:
        return json.dumps(record, indent=2)
    lines = [f"{m.title} ({m.family})",
             f"  total parameters   {m.params:>20,}",
             f"  active per token   {m.active_params:>20,}"]
    if m.moe is not None:
        lines.append(f"  experts            {m.moe.experts_per_token} of {m.moe.num_experts} routed per token"
                     + (" plus shared" if m.moe.shared_intermediate_size else ""))
    if m.mla is not None:
        lines.append(f"  attention          latent (MLA): {m.mla.latent_width} cached numbers per token per layer")
    else:
        lines.append(f"  attention          {m.num_heads} query heads, {m.num_kv_heads} KV heads of {m.head_dim}")
    if m.attention_softcap or m.final_softcap:
        caps = [f"scores at {m.attention_softcap:g}" if m.attention_softcap else "",
                f"final logits at {m.final_softcap:g}" if m.final_softcap else ""]
        lines.append(f"  soft-capping       tanh on {' and '.join(c for c in caps if c)}")
    if m.sliding_layers:
        local = len(m.sliding_layers)
        lines.append(f"  sliding window     {m.sliding_window:,} tokens on {local} of {m.num_layers} layers"
                     + ("" if local == m.num_layers else f" (local), {m.num_layers - local} global"))
    lines.append(f"  KV cache (bf16)    {m.kv_bytes_per_token('bf16'):>20,.0f} bytes per token"
                 + (f" (up to {m.sliding_window:,} tokens;\n                     "
                    f"{m.kv_bytes_per_token('bf16') * m.full_attention_layers / m.num_layers:,.0f} beyond)"
                    if m.sliding_layers else ""))
    return "\n".join(lines)


def _ridge(h: Hardware, dtype: str, as_json: bool) -> str:
    ridge = h.ridge_point(dtype)
    if as_json:
        return json.dumps({"gpu": h.key, "dtype": dtype, "peak_flops": h.peak_flops(dtype),
                           "hbm_bandwidth": h.hbm_bandwidth, "ridge_point": ridge}, indent=2)
    return (f"{h.name}: dense {dtype} {fmt(h.peak_flops(dtype), 'FLOP/s', 4)} / HBM {fmt(h.hbm_bandwidth, 'B/s')}"
            f" = {ridge:,.1f} FLOP per byte")


def _fit(m: Model, h: Hardware, batch: int, context: int, weights_dtype: str, kv_dtype: str,
         formats: dict | None = None) -> dict:
    """Whether the step's weights and KV cache fit in the GPU's usable HBM, and its context in the model's."""
    footprint = inference_footprint(m, batch, context, dtype=weights_dtype, kv_dtype=kv_dtype)
    if formats and formats.get("embeddings_dtype"):  # the embedding table and head in their own format (chapter 6)
        footprint = type(footprint)({"weights": weight_bytes(m, **formats), "kv_cache": footprint["kv_cache"]})
    limit = m.max_position_embeddings
    return {"fits": bool(footprint.fits(h)), "resident_bytes": footprint.total,
            "weights_bytes": footprint["weights"], "kv_cache_bytes": footprint["kv_cache"],
            "hbm_capacity": h.hbm_capacity, "hbm_usable": h.usable_capacity, "context_tokens": context, "max_position_embeddings": limit,
            "within_trained_context": None if limit is None else context <= limit}


def _fit_lines(fit: dict, h: Hardware) -> list[str]:
    """The table's words for :func:`_fit`: always the memory line, a warning where a limit is passed."""
    held = (f"weights {fmt(fit['weights_bytes'], 'B')} + KV cache {fmt(fit['kv_cache_bytes'], 'B')}"
            f" = {fmt(fit['resident_bytes'], 'B')}")
    hbm = f"the {fmt(fit['hbm_usable'], 'B')} of usable HBM on the {h.short}"
    lines = [f"memory: {held},\n  within {hbm}" if fit["fits"] else
             f"DOES NOT FIT: {held},\n  more than {hbm}; the times above assume it fit"]
    if fit["within_trained_context"] is False:
        lines.append(f"BEYOND THE MODEL'S CONTEXT: {fit['context_tokens']:,} tokens per sequence,\n"
                     f"  past the {fit['max_position_embeddings']:,} it was trained for (max_position_embeddings)")
    return lines


def _workload(kind: str, b: Breakdown, h: Hardware, tokens: int, as_json: bool, settings: dict, fit: dict,
              args) -> str:
    if args.roof == "measured":
        roof = _at("--roof", calibrated_roof_for, h, mode=args.launch, carry=args.carry_h200_efficiencies)
    else:
        roof = h
    pred = predict(b, roof, timing=args.timing)
    if as_json:
        out = {
            "workload": kind, "model": settings["model"], "gpu": h.key, **{k: v for k, v in settings.items() if k != "model"},
            "timing": args.timing, "roof": pred.roof.label, "roof_kind": pred.roof.kind,
            "assumption": getattr(pred.roof, "assumption", ""),
            "flops": b.flops, "bytes": b.bytes, "intensity": b.intensity, "ridge_point": pred.roof.ridge_point,
            "bound": str(pred.bound), "compute_time_s": pred.compute_time, "memory_time_s": pred.memory_time,
            "launch_time_s": pred.launch_time, "time_s": pred.time, "step_tokens": tokens,
            "time_per_token_s": pred.time / tokens, "utilization": pred.utilization, **fit,
            "parts": {name: {"flops": c.flops, "bytes": c.bytes} for name, c in b.parts.items()},
        }
        if args.ops:
            out["ops"] = [{"name": t.op.name, "kind": t.op.kind, "launches": t.op.count, "flops": t.op.flops,
                           "bytes": t.op.bytes, "intensity": t.op.intensity, "bound": str(t.bound),
                           "compute_s": t.compute, "memory_s": t.memory, "launch_s": t.launch, "time_s": t.time}
                          for t in pred.ops]
        return json.dumps(out, indent=2)
    shown = []
    if args.ops:
        shown.append(repr(operations_table(pred)))
    else:
        shown.append(repr(breakdown_table({settings["accounting"]: b}, title=f"{b.name}, part by part")))
    rule = {"step": "the step rule (max over the whole step)", "kernel": "the kernel rule (each kernel's max, summed)",
            "serial": "the serial rule (no overlap)"}[args.timing]
    lines = [f"{kind} of {settings['model']} on {pred.roof.label},",
             f"  {rule}:",
             f"  predicted time {fmt(pred.time, 's')} ({fmt(pred.time / tokens, 's')} per token), {pred.bound}-bound;",
             f"  compute {fmt(pred.compute_time, 's')}, memory {fmt(pred.memory_time, 's')}"
             + (f", launches {fmt(pred.launch_time, 's')}" if pred.launch_time else "")]
    if getattr(pred.roof, "assumption", ""):
        lines.append(f"  assumption: {pred.roof.assumption}")
    return "\n\n".join(shown) + "\n\n" + "\n".join(lines + _fit_lines(fit, h))


def _serve_text(p: ServingPlan) -> str:
    """The plan as a few aligned lines."""
    where = f"{p.gpus} × {p.hardware}" if p.gpus > 1 else f"one {p.hardware}"
    paging = "no block rounding" if p.block_size in (None, 1) else f"blocks of {p.block_size} tokens"
    rows = [("usable HBM", fmt(p.usable, "B")),
            (f"weights ({p.weights_dtype})", fmt(p.weights, "B")),
            (f"KV cache per token ({p.kv_dtype})", f"{p.kv_per_token:,.0f} B"
             + (f" ({p.kv_copies} copies across the GPUs)" if p.kv_copies > 1 else "")),
            ("KV cache per sequence", fmt(p.kv_per_sequence, "B")
             + (f" ({fmt(p.waste_per_sequence, 'B')} of it empty in the last block)" if p.waste_per_sequence else "")),
            ("largest batch that fits", f"{p.max_batch:,}")]
    if p.step_time is not None:
        rows += [(f"decode step at batch {p.batch:,}", f"{fmt(p.step_time, 's')} (the time per output token)"),
                 ("throughput", fmt(p.tokens_per_s, "tokens/s")),
                 ("bound", f"{p.bound}, compute {fmt(100 * p.utilization, '%')} busy"),
                 ("KV cache share of the bytes read", fmt(100 * p.kv_read_share, "%"))]
    width = max(len(k) for k, _ in rows)
    lines = [f"serving {p.model} ({p.layout}) on {where}, {p.context:,} tokens per request, {paging}",
             *(f"  {k.ljust(width)}  {v}" for k, v in rows)]
    if p.step_time is not None:
        lines.append(f"  (roof: {p.roof}, datasheet; tensor-parallel all-reduces not counted)" if p.gpus > 1
                     else f"  (roof: {p.roof}, datasheet)")
    lines.append(("" if p.fits else "DOES NOT FIT: ") + p.verdict())
    return "\n".join(lines)


def _serve(args: argparse.Namespace, m: Model, h: Hardware) -> str:
    _at("--context", check_context, m, args.context)
    _at("--gpus", kv_replicas, m, args.gpus)
    plan = _at("--batch" if args.batch else "--context", serving_plan, m, h, args.context, gpus=args.gpus,
               weights_dtype=args.weights_dtype, kv_dtype=args.kv_dtype, math_dtype=args.math_dtype,
               block_size=args.block_size, batch=args.batch, routing=args.routing)
    prompt = args.prompt or args.context
    formats = dict(gpus=args.gpus, weights_dtype=args.weights_dtype, kv_dtype=args.kv_dtype, math_dtype=args.math_dtype)
    ttft = curve = None
    if plan.step_time is not None:  # it fits and its decode is modelled
        try:
            ttft = _at("--prompt", time_to_first_token, m, h, prompt, **formats)
            if args.curve:
                curve = _at("--context", latency_throughput, m, h, args.context, prompt=prompt, **formats)
        except NotModelledError:
            ttft = curve = None
    if args.json:
        out = {"gpu": h.key, **plan.as_dict(), "prompt": prompt, "ttft": ttft}
        if args.curve:
            out["curve"] = None if curve is None else {k: (v.tolist() if hasattr(v, "tolist") else v)
                                                       for k, v in curve.items()}
        return json.dumps(out, indent=2)
    text = _serve_text(plan)
    if ttft is None:
        return text
    head, verdict = text.rsplit("\n", 1)
    lines = [head, f"  time to first token: {fmt(ttft, 's')} (a prompt of {prompt:,} tokens prefilled alone)"]
    if curve is not None:
        lines.append("  latency against throughput (decode at each batch):")
        lines.append(f"    {'batch':>7}  {'time per output token':>21}  {'tokens/s':>16}  bound")
        for b, t, tps, bound in zip(curve["batch"], curve["tpot"], curve["tokens_per_s"], curve["bound"]):
            lines.append(f"    {int(b):>7,}  {fmt(t, 's'):>21}  {fmt(tps, 'tokens/s'):>16}  {bound}")
    return "\n".join([*lines, verdict])


def _acceptance(text: str) -> float:
    """An argparse type: an acceptance rate in [0, 1)."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 <= value < 1:  # also refuses nan
        raise argparse.ArgumentTypeError(f"expected an acceptance rate at least 0 and below 1, such as 0.8, got {text[:40]!r}")
    return value


def _speculate(args: argparse.Namespace, m: Model, h: Hardware) -> str:
    draft = args.draft
    _at("--context", check_context, m, args.context)
    plan = _at("--draft", speculate, m, draft, h, args.alpha, args.gamma, batch=args.batch, context=args.context)
    even = breakeven_alpha(m, draft, h, args.gamma, batch=args.batch, context=args.context)
    best, best_speed = best_gamma(m, draft, h, args.alpha, batch=args.batch, context=args.context)
    stop = stops_paying_batch(m, draft, h, args.alpha, args.gamma, context=args.context)
    room = largest_batch(m, h, max(args.context, 1))
    if args.json:
        return json.dumps({"gpu": h.key, **plan.as_dict(), "breakeven_alpha": even, "best_gamma": best,
                           "best_gamma_speedup": best_speed, "stops_paying_batch": stop,
                           "largest_batch": room}, indent=2)
    rows = [("tokens per verify step", f"{plan.tokens_per_step:.3f} (gamma {plan.gamma}, alpha {plan.alpha:g})"),
            ("plain decode step", f"{fmt(plan.decode_time, 's')} ({plan.decode_bound}-bound)"),
            ("draft step", fmt(plan.draft_time, "s")),
            (f"verify step ({plan.gamma + 1} tokens)", f"{fmt(plan.verify_time, 's')} ({plan.verify_bound}-bound, "
                                                     f"{plan.verify_over_decode:.3f}× a decode step)"),
            ("time per output token", f"{fmt(plan.time_per_token, 's')} against {fmt(plan.decode_time, 's')}"),
            ("speed-up", f"{plan.speedup:.2f}×"),
            ("extra FLOPs per token", f"{fmt(100 * plan.wasted, '%')} of speculation's FLOPs are not plain decoding's"),
            ("break-even acceptance rate", "any" if even == 0.0 else ("none below 1" if even is None else f"{even:.3f}")),
            ("best gamma at this alpha", f"{best} ({best_speed:.2f}×)"),
            ("stops paying at batch", ("still pays at batch 4,096" if stop is None else f"{stop:,}")
             + f" ({room:,} sequences of {max(args.context, 1):,} tokens fit beside the weights)")]
    width = max(len(k) for k, _ in rows)
    where = f"{plan.target} with draft {plan.draft} on one {h.short}, batch {int(plan.batch):,}, {plan.context:,} tokens"
    return "\n".join([f"speculative decoding of {where}", *(f"  {k.ljust(width)}  {v}" for k, v in rows),
                      f"  (roof: {plan.roof}, datasheet; text accounting; the draft's own memory not counted)"])


# --- mixture of experts (chapter 10): --routing and --ep on decode, prefill and serve -------------

def _moe_flags(p: argparse.ArgumentParser) -> None:
    """The two flags of chapter 10, the same on decode, prefill and serve."""
    p.add_argument("--routing", choices=ROUTINGS, default=None, metavar="ROUTING",
                   help="how a mixture of experts routes a step's tokens, one of uniform (independent uniform choices, the "
                        "expected experts read), best (all to the same k) or worst (as many experts as possible); "
                        "needed at more than one token, no default")
    p.add_argument("--ep", type=_whole(1), default=1, metavar="N",
                   help="expert parallelism: the routed experts spread over N GPUs, everything else copied, the batch "
                        "split N ways, two all-to-alls per MoE layer (NVLink within 8 GPUs a node, then InfiniBand); "
                        "text accounting, step rule, datasheet roof (default 1)")


def _expert_parallel(args: argparse.Namespace, m: Model, h: Hardware) -> str:
    """decode, prefill or serve with ``--ep N``: one GPU's step and the all-to-alls (roofline.parallel.moe)."""
    if m.moe is None:
        raise UsageError(f"--ep: {m.name} has no experts; expert parallelism needs a mixture of experts", "--ep")
    if args.command == "serve" and (args.curve or args.prompt is not None or args.gpus > 1):
        raise UsageError("--ep prices one expert-parallel decode step; it does not combine with --curve, --prompt "
                         "or --gpus yet", "--ep")
    if args.routing is None:
        raise NotModelledError(f"{m.name} over {args.ep} expert-parallel GPUs: which experts each GPU reads depends "
                               "on the routing; name it with --routing uniform, best or worst")
    if args.command != "serve" and (args.timing != "step" or args.roof != "datasheet" or args.accounting == "refined"):
        raise UsageError("--ep is modelled with the text accounting, the step rule and the datasheet roof "
                         "(leave out --timing, --roof and --accounting refined)", "--ep")
    dtype = getattr(args, "dtype", None) or "bf16"
    wd = args.weights_dtype or dtype
    # serve keeps the cache in the weights' format unless told (chapter 5); decode and prefill in --dtype's
    kvd = args.kv_dtype or (wd if args.command == "serve" else dtype)
    per_gpu = _at("--ep", weights_per_gpu, m, ep=args.ep, weights_dtype=wd)
    if args.command == "serve":
        most = _at("--ep", expert_parallel_batch, m, h, args.context, ep=args.ep, weights_dtype=wd, kv_dtype=kvd,
                   block_size=args.block_size)
        batch = args.batch or most
        if batch > most:
            raise UsageError(f"batch {batch:,} does not fit: at {args.context:,} tokens at most {most:,} sequences do "
                             f"on {args.ep} expert-parallel GPUs", "--batch")
        context, prompt = args.context, None
    else:
        most = None
        batch = args.batch
        context, prompt = (args.context, None) if args.command == "decode" else (0, args.tokens)
    if batch < 1:
        step = None
    else:
        step = _at("--ep" if batch % args.ep == 0 else "--batch", expert_parallel_step, m, h, batch, context,
                   ep=args.ep, routing=args.routing, prompt=prompt, dtype=dtype, weights_dtype=wd, kv_dtype=kvd)
    out = {"workload": args.command, "model": m.name, "gpu": h.key, "ep": args.ep, "routing": args.routing,
           "batch": batch, "weights_per_gpu": per_gpu,
           "weights_per_gpu_tensor_parallel": weights_per_gpu(m, tp=args.ep, weights_dtype=wd)}
    if most is not None:
        out.update(context=args.context, max_batch=most)
    if step is not None:
        a2a = step.all_to_all
        out.update(flops_per_gpu=step.work.flops, bytes_per_gpu=step.work.bytes, compute_time_s=step.compute_time,
                   memory_time_s=step.memory_time, all_to_all_bytes_sent=a2a.bytes, all_to_all_time_s=a2a.time,
                   all_to_all_calls=step.calls, communication_time_s=step.communication_time, time_s=step.time,
                   overlapped_time_s=step.overlapped_time, tiers=list(a2a.tiers))
    if most is None and step is not None:  # decode and prefill: does one GPU hold its weights and its cache?
        kv = batch // args.ep * float(m.kv_cache_bytes(context + (prompt or 1), kvd))
        out.update(resident_bytes_per_gpu=per_gpu + kv, fits=bool(per_gpu + kv <= h.usable_capacity))
    if args.json:
        return json.dumps(out, indent=2)
    if args.command == "decode":
        what = f"decode at batch {batch:,}, {context:,} tokens of context"
    elif args.command == "prefill":
        what = f"prefill of {batch:,} × {args.tokens:,} tokens"
    else:
        what = f"serving at {context:,} tokens per request, batch {batch:,}"
    lines = [f"{m.name} on {args.ep} × {h.short}, expert-parallel, {args.routing} routing: {what}",
             f"  weights per GPU        {fmt(per_gpu, 'B')} (tensor-parallel over {args.ep}: "
             f"{fmt(out['weights_per_gpu_tensor_parallel'], 'B')})"]
    if most is not None:
        lines.append(f"  largest batch that fits  {most:,} ({most // args.ep:,} sequences a GPU)")
    if step is None:
        lines.append("DOES NOT FIT: no sequence fits beside the weights")
        return "\n".join(lines)
    if out.get("fits") is False:
        lines.append(f"DOES NOT FIT: {fmt(out['resident_bytes_per_gpu'], 'B')} a GPU (weights and its sequences' KV "
                     f"cache) is more than the {fmt(h.usable_capacity, 'B')} usable on the {h.short}; the times below "
                     "assume it fit")
    a2a = step.all_to_all
    names = {"scale_up": "NVLink", "host": "PCIe", "network": "the network"}
    where = " and ".join(dict.fromkeys(names[t] for t, b in zip(a2a.tiers, (a2a.scale_up_bytes, a2a.network_bytes))
                                       if b)) or names[a2a.tiers[0]]
    lines += [f"  one GPU's work         {fmt(step.work.flops, 'FLOP')}, {fmt(step.work.bytes, 'B')}: compute "
              f"{fmt(step.compute_time, 's')}, memory {fmt(step.memory_time, 's')}",
              f"  all-to-alls            {step.calls} (two per MoE layer), each {fmt(a2a.bytes, 'B')} sent per GPU "
              f"over {where} in {fmt(a2a.time, 's')}: {fmt(step.communication_time, 's')} in all",
              f"  step                   {fmt(step.time, 's')} with no overlap, {fmt(step.overlapped_time, 's')} "
              "with the all-to-alls hidden behind the work"]
    return "\n".join(lines)


def _at(argument: str, call, *args, **kwargs):
    """Call ``call``; a bad-input error it raises becomes a :class:`UsageError` naming ``argument``."""
    try:
        return call(*args, **kwargs)
    except NotModelledError:
        raise
    except CatalogError as exc:
        raise UsageError(str(exc), "--catalog") from None
    except (KeyError, ValueError, TypeError, OverflowError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
        raise UsageError(str(message), argument) from None


def _run(args: argparse.Namespace) -> str:
    catalog = args.catalog
    if catalog is not None:
        _at("--catalog", hardware_names, catalog)  # a bad catalog is named as such, whatever the command
    if args.command == "hardware":
        if args.name is None:
            return _hardware_list(args.json, catalog)
        return _hardware_one(_at("name", get_hardware, args.name, catalog), args.json)
    if args.command == "params":
        return _params(_at("model", load_model, args.model), args.json)
    if args.command == "ridge":
        return _at("--dtype", _ridge, _at("gpu", get_hardware, args.gpu, catalog), args.dtype, args.json)
    if args.command == "train":
        return _train(args, catalog)
    if args.command == "plan":
        return _plan(args, catalog)
    m, h = _at("model", load_model, args.model), _at("--gpu", get_hardware, args.gpu, catalog)
    if args.command == "speculate":
        return _speculate(args, m, h)
    _one_split(args)
    if args.ep > 1:
        return _expert_parallel(args, m, h)
    if args.command != "serve" and m.moe is not None and args.routing is None and args.batch * getattr(args, "tokens", 1) > 1:
        raise NotModelledError(f"{m.name} with more than one token in a step: which experts are read depends on the "
                               "routing; name it with --routing uniform (the expected count), best or worst")
    if args.command == "serve":
        return _tensor_parallel(args, m, h) if args.tp > 1 else _serve(args, m, h)
    accounting = args.accounting or ("text" if args.timing == "step" else "refined")
    options = {"attention": args.attention}
    if getattr(args, "lm_head", "all") != "all":
        options["lm_head"] = args.lm_head
    if accounting == "text":
        options = {k: v for k, v in options.items() if v != OPTIONS[k][0]}
    formats = {"dtype": args.dtype, "weights_dtype": args.weights_dtype, "kv_dtype": args.kv_dtype}
    if args.math_dtype is not None:
        formats["math_dtype"] = args.math_dtype
    if args.embeddings_dtype is not None:
        formats["embeddings_dtype"] = args.embeddings_dtype
    f = _at("--math-dtype" if args.math_dtype else "--weights-dtype", make_formats, **formats)
    _at("--math-dtype" if args.math_dtype else "--dtype", check_math, h, f)
    settings = {"model": m.name, "batch": args.batch, "accounting": accounting, "dtype": args.dtype,
                "weights_dtype": f.weights, "kv_dtype": f.kv, "attention": args.attention}
    if args.math_dtype is not None or args.embeddings_dtype is not None:
        settings.update(math_dtype=f.math, embeddings_dtype=f.embeddings or f.weights)
    if args.tp > 1:
        return _tensor_parallel(args, m, h, accounting=accounting, formats=formats, options=options)
    if args.command == "decode":
        b = _at("--context", decode_step, m, args.batch, args.context, accounting=accounting, routing=args.routing,
                **formats, **options)
        fit = _at("--context", _fit, m, h, args.batch, args.context + 1, f.weights, f.kv, formats)  # the cache after the step
        return _workload("decode", b, h, args.batch, args.json, {**settings, "context": args.context}, fit, args)
    if args.cp > 1:
        return _context_parallel(args, m, h)
    b = _at("--tokens", prefill, m, args.tokens, args.batch, accounting=accounting, routing=args.routing,
            **formats, **options)
    fit = _at("--tokens", _fit, m, h, args.batch, args.tokens, f.weights, f.kv, formats)
    return _workload("prefill", b, h, args.tokens * args.batch, args.json, {**settings, "tokens": args.tokens}, fit,
                     args)


# --- train (chapter 3) ----------------------------------------------------------------------------

def _recompute(text: str) -> str:
    """An argparse type: a recompute policy, 'none', 'selective', 'full' or 'every-K'."""
    try:
        return recompute_policy(text).name
    except ValueError:
        shown = text if len(text) <= 40 else f"{text[:20]}...{text[-10:]}"
        raise argparse.ArgumentTypeError(f"expected none, selective, full or every-K (K a whole number >= 1: a "
                                         f"checkpoint every K layers), got {shown!r}") from None


def _fraction(text: str) -> float:
    """An argparse type: a fraction of peak, above 0 and at most 1."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value <= 1:  # also refuses nan
        raise argparse.ArgumentTypeError(f"expected a fraction of peak above 0 and at most 1, such as 0.5, got {text[:40]!r}")
    return value


def _train_parser(sub, models: str) -> None:
    p = sub.add_parser("train", help="does a training step fit, and how fast can it go (chapter 3)",
                       description=f"One micro-batch per GPU: memory per GPU against the usable HBM, FLOPs per "
                                   f"step, the step time, MFU and HFU. Shipped models: {models}; or the path of a "
                                   "config.json.")
    p.add_argument("model", help="a shipped model name or the path of a Hugging Face config.json")
    p.add_argument("--gpu", required=True, help="an accelerator key or alias, e.g. h100-sxm")
    p.add_argument("--gpus", type=_whole(1), default=1, help="data-parallel GPUs the model state is sharded over (default 1)")
    p.add_argument("--seq", type=_whole(1), required=True, help="tokens per sequence")
    p.add_argument("--micro-batch", type=_whole(1), default=1, help="sequences per GPU per step (default 1)")
    p.add_argument("--recompute", type=_recompute, default="none", metavar="{none,selective,full,every-K}",
                   help="activation recomputation: none, selective (the attention core), full (every layer's "
                        "forward again) or every-K (a checkpoint every K layers) (default none)")
    p.add_argument("--zero", type=int, choices=(0, 1, 2, 3), default=0, help="ZeRO stage (default 0)")
    p.add_argument("--offload", action="store_true", help="keep the saved activations in host memory, over PCIe")
    p.add_argument("--attention", choices=OPTIONS["attention"], default="flash",
                   help="flash (never stores the scores) or explicit (default flash)")
    p.add_argument("--achieved", type=_fraction, default=None, metavar="FRACTION",
                   help="the fraction of peak the GPU's FLOPs run at (e.g. 0.5); default: the roofline floor")
    p.add_argument("--timing", choices=TIMINGS, default="step", help="the floor's timing rule (default step)")
    dp = p.add_argument_group("data parallelism across nodes (chapter 7): either flag prices the step's collectives")
    dp.add_argument("--nodes", type=_whole(1), default=None, help="nodes (default 1 when --gpus-per-node is given)")
    dp.add_argument("--gpus-per-node", type=_whole(1), default=None,
                    help="GPUs per node on NVLink (default 8 when --nodes is given)")
    dp.add_argument("--hybrid", action="store_true", help="FSDP hybrid sharding: ZeRO-3 inside each node, replicas "
                                                         "across nodes (needs --zero 3)")
    dp.add_argument("--accumulation", type=_whole(1), default=1, help="micro-batches per step (default 1)")
    _tp_flag(p)
    _cp_flags(p, methods=True)
    p.add_argument("--json", action="store_true", help="print one JSON object")


def _one_split(args) -> None:
    """Refuse two ways of splitting one model at once (--tp, --ep, --cp): each is priced on its own."""
    splits = [f"--{n}" for n in ("tp", "ep", "cp") if getattr(args, n, 1) > 1]
    if len(splits) > 1:
        raise UsageError(f"{' and '.join(splits)} together are not modelled yet: choose one way to split the model",
                         splits[-1])


def _train(args, catalog) -> str:
    _one_split(args)
    if args.nodes is not None or args.gpus_per_node is not None or args.hybrid or args.accumulation > 1:
        for flag in ("tp", "cp"):
            if getattr(args, flag) > 1:
                raise UsageError(f"--{flag} does not combine with --nodes, --gpus-per-node, --hybrid or --accumulation "
                                 "yet: chapter 7's data-parallel step prices whole replicas", f"--{flag}")
        return _train_dp(args, catalog)
    m, h = _at("model", load_model, args.model), _at("--gpu", get_hardware, args.gpu, catalog)
    if args.tp > 1:
        return _tensor_parallel(args, m, h)
    if args.cp > 1:
        return _context_parallel(args, m, h)
    plan = _at("--offload" if args.offload else "--seq", plan_training, m, h, seq=args.seq,
               micro_batch=args.micro_batch, gpus=args.gpus, recompute=args.recompute, zero_stage=args.zero,
               offload=args.offload, achieved=args.achieved, timing=args.timing, attention=args.attention)
    fp = plan.footprint
    state = {k: float(v) for k, v in fp.parts.items() if k not in ("activations", "recompute working set", "logits")}
    link = h.interconnect[plan.network_link].name if plan.network_link in h.interconnect else ""
    if args.json:
        return json.dumps({
            "workload": "train", "model": m.name, "gpu": h.key, "gpus": plan.gpus, "seq": plan.seq,
            "micro_batch": plan.micro_batch, "recompute": plan.recompute, "zero_stage": plan.zero_stage,
            "offload": plan.offload, "attention": args.attention, "achieved": plan.achieved, "timing": args.timing,
            "fits": plan.fits, "memory_bytes": float(fp.total), "hbm_usable": h.usable_capacity,
            "hbm_capacity": h.hbm_capacity, "spare_bytes": plan.spare,
            "memory_parts": {k: float(v) for k, v in fp.parts.items()},
            "model_flops": float(plan.model_flops), "hardware_flops": float(plan.hardware_flops),
            "compute_time_s": plan.compute_time, "network_time_s": plan.network_time,
            "network_link": plan.network_link if plan.network_time else None, "offload_bytes": plan.offload_bytes,
            "offload_time_s": plan.offload_time, "offload_exposed_s": plan.offload_exposed,
            "time_s": plan.time, "tokens_per_s": plan.tokens_per_s, "mfu": plan.mfu, "hfu": plan.hfu,
        }, indent=2)
    setup = (f"{plan.seq:,} tokens x micro-batch {plan.micro_batch} per GPU, {plan.gpus} GPU{'s' if plan.gpus > 1 else ''}, "
             f"ZeRO-{plan.zero_stage}, recompute {plan.recompute}" + (", offloaded" if plan.offload else ""))
    held = (f"model state {fmt(sum(state.values()), 'B')}, activations {fmt(float(fp['activations']), 'B')},\n  "
            + (f"recompute working set {fmt(float(fp['recompute working set']), 'B')}, "
               if float(fp["recompute working set"]) else "")
            + f"fp32 logits {fmt(float(fp['logits']), 'B')}")
    hbm = f"the {fmt(h.usable_capacity, 'B')} of usable HBM on the {h.short}"
    fit = (f"  fits within {hbm}, {fmt(plan.spare, 'B')} to spare" if plan.fits else
           f"  DOES NOT FIT: more than {hbm}, by {fmt(-plan.spare, 'B')}; the times below assume it fit")
    extra = plan.hardware_flops / plan.model_flops - 1
    basis = ("the roofline floor under the " + args.timing + " rule" if plan.achieved is None
             else f"every FLOP at {plan.achieved:.0%} of peak")
    lines = [f"training step of {m.title} on the {h.short}:\n  {setup}",
             f"memory per GPU: {fmt(float(fp.total), 'B')} =\n  {held}", fit,
             f"FLOPs per step: model {fmt(plan.model_flops, 'FLOP')}, hardware {fmt(plan.hardware_flops, 'FLOP')}"
             f" ({extra:.1%} recomputed)",
             f"step time {fmt(plan.time, 's')}: compute {fmt(plan.compute_time, 's')} ({basis})"
             + (f",\n  data-parallel traffic {fmt(plan.network_time, 's')} over {link}, overlapped" if plan.network_time else "")]
    if plan.offload:
        lines.append(f"  offload: {fmt(plan.offload_bytes, 'B')} each way over {h.interconnect['host'].name}, "
                     f"{fmt(plan.offload_time, 's')}; " + ("all of it hidden behind the compute" if not plan.offload_exposed
                                                          else f"{fmt(plan.offload_exposed, 's')} not hidden"))
    rate = plan.tokens_per_s
    if m.max_position_embeddings is not None and plan.seq > m.max_position_embeddings:
        lines.append(f"BEYOND THE MODEL'S CONTEXT: {plan.seq:,} tokens per sequence,\n  past the "
                     f"{m.max_position_embeddings:,} it was trained for (max_position_embeddings)")
    lines.append(f"MFU {plan.mfu:.1%}, HFU {plan.hfu:.1%}, {rate:,.0f} tokens/s per GPU" if rate >= 100 else
                 f"MFU {plan.mfu:.1%}, HFU {plan.hfu:.1%}, {rate:.3g} tokens/s per GPU"
                 + ("" if plan.achieved is not None else "\n  (at the floor; --achieved 0.5 assumes the GPU runs its FLOPs at half its peak)"))
    return "\n".join(lines)


def _plan_parser(sub, models: str) -> None:
    p = sub.add_parser("plan", help="search tensor, pipeline and data-parallel layouts for a cluster (chapter 9)",
                       description=f"Every layout of the cluster's GPUs as tensor x pipeline x data degrees, with a "
                                   f"micro-batch, a recomputation policy, a ZeRO stage and a pipeline schedule; those "
                                   f"that fit in usable memory, fastest first. Dense models: {models}.")
    p.add_argument("model", help="a shipped model name or the path of a Hugging Face config.json")
    p.add_argument("--gpu", required=True, help="an accelerator key or alias, e.g. h100-sxm")
    p.add_argument("--gpus-per-node", type=_whole(1), default=8, help="GPUs per node on NVLink (default 8)")
    p.add_argument("--nodes", type=_whole(1), required=True, help="nodes in the cluster")
    p.add_argument("--seq", type=_whole(1), required=True, help="tokens per sequence")
    p.add_argument("--global-batch", type=_whole(1), required=True, help="sequences per optimizer step, all GPUs together")
    p.add_argument("--top", type=_whole(1), default=5, help="layouts to print (default 5)")
    p.add_argument("--achieved", type=_fraction, default=None, metavar="FRACTION",
                   help="the fraction of peak the GPU's FLOPs run at (e.g. 0.5); default: the roofline floor")
    p.add_argument("--timing", choices=TIMINGS, default="step", help="the floor's timing rule (default step)")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def _plan(args, catalog) -> str:
    """``roofline plan``: chapter 9's search, the best layouts first."""
    from roofline.parallel.planner import plan

    m, h = _at("model", load_model, args.model), _at("--gpu", get_hardware, args.gpu, catalog)
    try:
        result = plan(m, h, nodes=args.nodes, gpus_per_node=args.gpus_per_node, seq=args.seq,
                      global_batch=args.global_batch, achieved=args.achieved, timing=args.timing)
    except NotModelledError:
        raise
    except (KeyError, ValueError, TypeError) as exc:
        message = str(exc.args[0] if isinstance(exc, KeyError) and exc.args else exc)
        argument = "--global-batch" if message.startswith("global_batch") else "--nodes" if "fits on no" in message \
            else "--seq" if message.startswith("seq") else "model"
        raise UsageError(message.replace("global_batch", "--global-batch", 1), argument) from None
    top = result.top(args.top)
    if args.json:
        return json.dumps({
            "workload": "plan", "model": m.name, "gpu": h.key, "nodes": result.nodes,
            "gpus_per_node": result.gpus_per_node, "gpus": result.gpus, "seq": result.seq,
            "global_batch": result.global_batch, "achieved": args.achieved, "timing": args.timing,
            "hbm_usable": h.usable_capacity, "layouts_priced": result.count, "layouts_fitting": len(result.ranked),
            "layouts": [{"tp": x.tp, "pp": x.pp, "dp": x.dp, "micro_batch": x.micro_batch,
                         "micro_batches": x.micro_batches, "schedule": x.schedule, "v": x.v, "recompute": x.recompute,
                         "zero_stage": x.zero_stage, "memory_bytes": x.memory, "compute_time_s": x.compute,
                         "bubble_time_s": x.bubble, "pipeline_comm_s": x.pipeline_comm, "data_comm_s": x.data_comm,
                         "time_s": x.time, "mfu": x.mfu, "tflops_per_gpu": x.tflops} for x in top],
        }, indent=2)
    basis = ("the roofline floor under the " + args.timing + " rule" if args.achieved is None
             else f"every FLOP at {args.achieved:.0%} of peak")
    lines = [f"layouts for training {m.title} on {result.gpus:,} {h.short}s ({result.nodes:,} nodes of "
             f"{result.gpus_per_node}), {result.global_batch:,} sequences of {result.seq:,} tokens per step:",
             f"  {result.count:,} layouts priced, {len(result.ranked):,} fit in {fmt(h.usable_capacity, 'B')} "
             f"of usable HBM; compute at {basis}"]
    for rank, x in enumerate(top, 1):
        lines.append(f"{rank}. {x.describe()}")
        lines.append(f"   memory {fmt(x.memory, 'B')} per GPU; step {fmt(x.time, 's')} = compute {fmt(x.compute, 's')}"
                     f" + bubble {fmt(x.bubble, 's')} + exposed communication {fmt(x.exposed, 's')}; MFU {x.mfu:.1%}")
    return "\n".join(lines)


def _train_dp(args, catalog) -> str:
    """``roofline train --nodes N --gpus-per-node G``: the data-parallel step of chapter 7."""
    from roofline.parallel.data_parallel import data_parallel_step

    nodes = args.nodes if args.nodes is not None else 1
    per_node = args.gpus_per_node if args.gpus_per_node is not None else 8
    if args.gpus != 1 and args.gpus != nodes * per_node:
        raise UsageError(f"--gpus {args.gpus} disagrees with --nodes {nodes} x --gpus-per-node {per_node}; give one or "
                         "the other", "--gpus")
    if args.offload:
        raise UsageError("--offload is priced by the chapter 3 step on one node; leave out --nodes, --gpus-per-node, --hybrid "
                         "and --accumulation to use it", "--offload")
    if args.hybrid and args.zero != 3:
        raise UsageError(f"--hybrid is ZeRO-3 inside each node: give --zero 3 with it, got --zero {args.zero}", "--hybrid")
    m, h = _at("model", load_model, args.model), _at("--gpu", get_hardware, args.gpu, catalog)
    step = _at("--nodes", data_parallel_step, m, h, nodes=nodes, gpus_per_node=per_node, zero_stage=args.zero,
               hybrid=args.hybrid, seq=args.seq, micro_batch=args.micro_batch, accumulation=args.accumulation,
               recompute=args.recompute, achieved=args.achieved, timing=args.timing, attention=args.attention)
    fp = step.footprint
    fits = bool(fp.fits(h))
    spare = float(fp.spare(h))
    if args.json:
        return json.dumps({
            "workload": "train", "model": m.name, "gpu": h.key, "nodes": step.nodes, "gpus_per_node": step.gpus_per_node,
            "gpus": step.gpus, "strategy": step.strategy, "zero_stage": step.zero_stage, "hybrid": step.hybrid,
            "seq": step.seq, "micro_batch": step.micro_batch, "accumulation": step.accumulation,
            "tokens_per_gpu": step.tokens, "recompute": step.recompute, "attention": args.attention,
            "achieved": step.achieved, "timing": args.timing, "fits": fits, "memory_bytes": float(fp.total),
            "hbm_usable": h.usable_capacity, "spare_bytes": spare, "memory_parts": {k: float(v) for k, v in fp.parts.items()},
            "model_flops": step.model_flops, "compute_time_s": step.compute, "communication_time_s": step.communication,
            "exposed_time_s": step.exposed, "time_s": step.time, "sent_nvlink_bytes": step.sent_scale_up,
            "sent_network_bytes": step.sent_network, "tokens_per_s": step.tokens_per_s, "mfu": step.mfu,
        }, indent=2)
    basis = ("the roofline floor under the " + args.timing + " rule" if step.achieved is None
             else f"every FLOP at {step.achieved:.0%} of peak")
    hbm = f"the {fmt(h.usable_capacity, 'B')} of usable HBM on the {h.short}"
    links = h.interconnect
    lines = [
        f"data-parallel training step of {m.title}, {step.strategy}:",
        f"  {step.nodes} node{'s' if step.nodes > 1 else ''} x {step.gpus_per_node} {h.short} = {step.gpus} GPUs; "
        f"{step.seq:,} tokens x micro-batch {step.micro_batch} x {step.accumulation} accumulated "
        f"= {step.tokens:,} tokens per GPU; recompute {step.recompute}",
        f"memory per GPU: {fmt(float(fp.total), 'B')}; " + (f"fits within {hbm}, {fmt(spare, 'B')} to spare" if fits
                                                             else f"DOES NOT FIT: more than {hbm}, by {fmt(-spare, 'B')}"),
        f"compute      {fmt(step.compute, 's')} ({basis})",
        f"communication {fmt(step.communication, 's')} of link time: each GPU sends {fmt(step.sent_scale_up, 'B')} over "
        f"{links['scale_up'].name if 'scale_up' in links else 'its host link'}"
        + (f" and {fmt(step.sent_network, 'B')} over {links['network'].name}" if step.sent_network else ""),
        f"exposed      {fmt(step.exposed, 's')} (what the compute does not hide)",
        f"step time    {fmt(step.time, 's')}: MFU {step.mfu:.1%}, {step.tokens_per_s:,.0f} tokens/s over all GPUs",
    ]
    return "\n".join(lines)


# --- --tp (chapter 8): every command's tensor-parallel variant, in one place --------------------------

_GPUS_PER_NODE = 8  # an HGX/DGX node: the NVLink domain tensor parallelism stays inside


def _tp_flag(p) -> None:
    p.add_argument("--tp", type=_whole(1), default=1, metavar="N",
                   help="tensor parallelism over N GPUs of one node (at most 8): a t-th of the heads, MLP and "
                        "vocabulary per GPU, the all-reduces priced on NVLink and added to the step (chapter 8; "
                        "default 1)")


def _tensor_parallel(args, m: Model, h: Hardware, *, accounting: str = "text", formats: dict | None = None,
                     options: dict | None = None) -> str:
    """decode, prefill, serve and train with ``--tp N``: one GPU's share of the step plus the collectives."""
    from roofline.parallel.tensor_parallel import (check_tp, predict_tp, shard_model, tp_decode_step, tp_prefill,
                                                   tp_training_step)

    t = args.tp
    if args.command == "serve" and (args.curve or args.prompt is not None or args.gpus > 1):
        raise UsageError("--tp prices one tensor-parallel decode step; it does not combine with --curve, --prompt "
                         "or --gpus (chapter 5's pooled GPUs) yet", "--tp")
    _at("--tp", check_tp, m, t, gpus_per_node=_GPUS_PER_NODE)
    shard = shard_model(m, t)
    out: dict = {"workload": args.command, "model": m.name, "gpu": h.key, "tp": t}
    if args.command == "train":
        gpus = args.gpus if args.gpus > 1 else t
        if gpus % t:
            raise UsageError(f"--gpus ({gpus}) must be a multiple of --tp ({t}): the GPUs form {t}-GPU "
                             "tensor-parallel groups", "--gpus")
        plan = _at("--offload" if args.offload else "--seq", plan_training, shard, h, seq=args.seq,
                   micro_batch=args.micro_batch, gpus=gpus // t, recompute=args.recompute, zero_stage=args.zero,
                   offload=args.offload, achieved=args.achieved, timing=args.timing, attention=args.attention)
        step = tp_training_step(m, t, args.seq, args.micro_batch, recompute=plan.recompute, attention=args.attention)
        comm = predict_tp(step, h, gpus_per_node=_GPUS_PER_NODE)
        time = plan.time + comm.comm_time
        memory, fits = float(plan.footprint.total), plan.fits
        peak = plan.peak
        out.update(gpus=gpus, data_parallel=gpus // t, seq=args.seq, micro_batch=args.micro_batch,
                   recompute=plan.recompute, zero_stage=plan.zero_stage, memory_bytes=memory, fits=fits,
                   hbm_usable=h.usable_capacity, compute_time_s=plan.time, tokens_per_s_per_gpu=plan.tokens / time / t,
                   mfu=float(plan.model_flops) / (time * peak))
        head = (f"training step of {m.title}, tensor parallel over {t} GPUs ({gpus // t} data-parallel "
                f"group{'s' if gpus // t > 1 else ''}), {args.seq:,} tokens x micro-batch {args.micro_batch} per group")
        work = f"one GPU's step {fmt(plan.time, 's')} (compute, and the data-parallel traffic overlapped)"
        tokens = plan.tokens
    elif args.command == "serve":
        from roofline.serving.capacity import serving_plan

        plan = _at("--batch" if args.batch else "--context", serving_plan, m, h, args.context, gpus=t,
                   weights_dtype=args.weights_dtype, kv_dtype=args.kv_dtype, math_dtype=args.math_dtype,
                   block_size=args.block_size, batch=args.batch)
        if plan.max_batch < 1:
            return ("" if plan.fits else "DOES NOT FIT: ") + plan.verdict()
        step = tp_decode_step(m, t, plan.batch, args.context, weights_dtype=args.weights_dtype,
                              kv_dtype=args.kv_dtype, math_dtype=args.math_dtype)
        comm = predict_tp(step, h, gpus_per_node=_GPUS_PER_NODE)
        time = float(comm.time)
        memory = float(shard.params * dtype_bytes(args.weights_dtype) + plan.kv_total / t)  # copies included
        fits = True
        out.update(context=args.context, batch=plan.batch, max_batch=plan.max_batch, memory_bytes=memory, fits=fits,
                   hbm_usable=h.usable_capacity, compute_time_s=float(comm.compute_time),
                   tokens_per_s=plan.batch / time, tokens_per_s_per_gpu=plan.batch / time / t)
        head = (f"serving {m.name} tensor parallel over {t} × {h.short}, {args.context:,} tokens per request: "
                f"{plan.max_batch:,} sequences fit; at batch {plan.batch:,}")
        work = f"one GPU's kernels {fmt(comm.compute_time, 's')}"
        tokens = plan.batch
    else:
        formats, options = formats or {}, options or {}
        if args.roof == "measured":
            roof = _at("--roof", calibrated_roof_for, h, mode=args.launch, carry=args.carry_h200_efficiencies)
        else:
            roof = None
        if args.command == "decode":
            step = _at("--context", tp_decode_step, m, t, args.batch, args.context, accounting=accounting,
                       **formats, **options)
            tokens, context = args.batch, args.context + 1
        else:
            step = _at("--tokens", tp_prefill, m, t, args.tokens, args.batch, accounting=accounting,
                       **formats, **options)
            tokens, context = args.tokens * args.batch, args.tokens
        comm = predict_tp(step, h, roof=roof, timing=args.timing, gpus_per_node=_GPUS_PER_NODE)
        time = float(comm.time)
        fit = _fit(shard, h, args.batch, context, step.work.formats.weights, step.work.formats.kv,
                   {k: v for k, v in formats.items() if k == "embeddings_dtype"})
        memory, fits = fit["resident_bytes"], fit["fits"]
        out.update(batch=args.batch, accounting=accounting, timing=args.timing, memory_bytes=memory, fits=fits,
                   hbm_usable=h.usable_capacity, compute_time_s=float(comm.compute_time), step_tokens=tokens,
                   time_per_token_s=time / tokens, bound=str(comm.compute.bound))
        head = f"{args.command} of {m.name}, tensor parallel over {t} × {h.short}"
        work = f"one GPU's kernels {fmt(comm.compute_time, 's')}, {comm.compute.bound}-bound"
    calls = step.collectives
    out.update(collectives=calls, collective_bytes_per_gpu=float(comm.comm_bytes), collective_time_s=float(comm.comm_time),
               collective_latency_s=float(comm.comm_latency), time_s=time)
    if args.json:
        return json.dumps(out, indent=2)
    verdict = (f"memory per GPU {fmt(memory, 'B')}, within the {fmt(h.usable_capacity, 'B')} usable" if fits else
               f"DOES NOT FIT: {fmt(memory, 'B')} per GPU, more than the {fmt(h.usable_capacity, 'B')} usable; "
               "the times assume it fit")
    lines = [head + ":",
             f"  step {fmt(time, 's')} = {work}",
             f"  + {calls:,} collectives over NVLink {fmt(comm.comm_time, 's')} "
             f"({fmt(comm.comm_latency, 's')} of it latency; {fmt(comm.comm_bytes, 'B')} sent per GPU), not overlapped",
             f"  {fmt(tokens / time / t, 'tokens/s')} per GPU" + (f", MFU {out['mfu']:.1%}" if "mfu" in out else ""),
             "  " + verdict]
    return "\n".join(lines)


# --- context parallelism (chapter 11): `train --cp N --cp-method ring|all-to-all`, `prefill --cp N` ---------

def _cp_flags(p, *, methods: bool) -> None:
    p.add_argument("--cp", type=_whole(1), default=1,
                   help="context-parallel GPUs one sequence is spread over (default 1: none); with train, the model "
                        "state is sharded over --gpus x --cp GPUs")
    if methods:
        p.add_argument("--cp-method", choices=("ring", "all-to-all"), default="ring",
                       help="ring attention (key/value blocks passed around, zig-zag split) or all-to-all "
                            "(DeepSpeed-Ulysses: heads split, cp at most the key/value heads) (default ring)")


def _context_parallel(args, m: Model, h: Hardware) -> str:
    """One sequence over ``--cp`` GPUs: a training step (``train``) or a prompt's prefill (``prefill``)."""
    from roofline.parallel.context_parallel import context_parallel_prefill, plan_context_parallel

    if args.command == "prefill":
        if args.batch != 1 or args.dtype != "bf16" or args.weights_dtype or args.kv_dtype or args.math_dtype:
            raise UsageError("--cp spreads one bf16 prompt: leave --batch, --dtype and the other formats at their "
                             "defaults", "--cp")
        p = _at("--cp", context_parallel_prefill, m, h, args.tokens, args.cp)
        if args.json:
            return json.dumps({"workload": "prefill", "model": m.name, "gpu": h.key, "tokens": p.tokens, "cp": p.cp,
                               "method": p.method, "tier": p.tier, "flops_per_gpu": float(p.step.flops),
                               "compute_time_s": p.compute_time, "transfer_time_s": p.comm_time,
                               "exposed_s": p.exposed, "time_s": p.time}, indent=2)
        hidden = ("all of it hidden behind the attention" if not p.exposed else f"{fmt(p.exposed, 's')} not hidden")
        return "\n".join([
            f"prefill of {m.name} on the {h.short}: {p.tokens:,} tokens over {p.cp} GPUs (ring attention, zig-zag)",
            f"per GPU: {fmt(float(p.step.flops), 'FLOP')}, {fmt(p.compute_time, 's')} of compute (roofline floor)",
            f"ring transfers: {fmt(p.comm_time, 's')} over {h.interconnect[p.tier].name}; {hidden}",
            f"time to first token {fmt(p.time, 's')}"])
    if args.offload or args.attention != "flash":
        raise UsageError("--cp models flash attention kept on the GPU: drop --offload and --attention explicit", "--cp")
    plan = _at("--cp", plan_context_parallel, m, h, seq=args.seq, cp=args.cp, method=args.cp_method,
               micro_batch=args.micro_batch, recompute=args.recompute, zero_stage=args.zero,
               gpus=args.gpus * args.cp, achieved=args.achieved, timing=args.timing)
    fp = plan.footprint
    if args.json:
        return json.dumps({
            "workload": "train", "model": m.name, "gpu": h.key, "seq": plan.seq, "cp": plan.cp,
            "cp_method": plan.method, "gpus": plan.gpus, "micro_batch": plan.micro_batch, "recompute": plan.recompute,
            "zero_stage": plan.zero_stage, "tier": plan.tier, "fits": plan.fits, "memory_bytes": float(fp.total),
            "hbm_usable": h.usable_capacity, "spare_bytes": plan.spare,
            "memory_parts": {k: float(v) for k, v in fp.parts.items()},
            "hardware_flops_per_gpu": float(plan.step.flops), "compute_time_s": plan.compute_time,
            "cp_traffic_time_s": plan.comm_time, "cp_exposed_s": plan.exposed, "time_s": plan.time,
            "tokens_per_s": plan.tokens_per_s, "mfu": plan.mfu}, indent=2)
    hbm = f"the {fmt(h.usable_capacity, 'B')} of usable HBM on the {h.short}"
    fit = (f"  fits within {hbm}, {fmt(plan.spare, 'B')} to spare" if plan.fits else
           f"  DOES NOT FIT: more than {hbm}, by {fmt(-plan.spare, 'B')}; the times below assume it fit")
    what = ("ring attention, zig-zag split" if plan.method == "ring" else "all-to-all attention (heads split)")
    traffic = (f"{fmt(plan.comm_time, 's')} over {h.interconnect[plan.tier].name}; "
               + ("all of it hidden behind the attention" if not plan.exposed else
                  (f"{fmt(plan.exposed, 's')} not hidden" if plan.method == "ring" else "not overlapped")))
    basis = "roofline floor" if args.achieved is None else f"every FLOP at {args.achieved:.0%} of peak"
    return "\n".join([
        f"training step of {m.title} on the {h.short}:\n  {plan.seq:,} tokens per sequence over cp {plan.cp} GPUs "
        f"({what}),\n  micro-batch {plan.micro_batch}, model state ZeRO-{plan.zero_stage} over {plan.gpus} GPUs, "
        f"recompute {plan.recompute}",
        f"memory per GPU: {fmt(float(fp.total), 'B')} (activations {fmt(float(fp['activations']), 'B')}, "
        f"buffers in flight {fmt(float(fp['context-parallel buffers']), 'B')})", fit,
        f"FLOPs per GPU: {fmt(float(plan.step.flops), 'FLOP')}; compute {fmt(plan.compute_time, 's')} ({basis})",
        f"context-parallel traffic: {traffic}",
        f"step time {fmt(plan.time, 's')}, MFU {plan.mfu:.1%}, {plan.tokens_per_s:,.0f} tokens/s per GPU"])


def _wants_json(argv: Sequence[str]) -> bool:
    """Whether ``--json`` (or an abbreviation argparse would accept, ``--js``) is among the arguments."""
    return any(a.startswith("--j") and "--json".startswith(a) for a in argv if isinstance(a, str))


def _report(status: int, message: str, argument: str | None, as_json: bool, usage: str = "") -> int:
    """Print an error the way the caller asked for (a line on stderr, or one JSON object on stdout)."""
    try:
        # one write each, so that a notebook capturing the streams never splits a message
        if as_json:
            sys.stdout.write(json.dumps({"error": message, "argument": argument, "status": status}, indent=2) + "\n")
        else:
            sys.stderr.write(usage + (message if message.startswith("roofline") else f"roofline: error: {message}") + "\n")
        sys.stdout.flush()
    except (BrokenPipeError, OSError):
        _quiet_stdout()
    return status


def _quiet_stdout() -> None:
    """After a closed pipe, point stdout at /dev/null so that the exit flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # stdout is not a real file (a test's capture)
        pass


# The exit status of a program a closed pipe ended: 128 + SIGPIPE, what a shell reports for `yes | head -1`.
EXIT_BROKEN_PIPE = 141


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 fine, 1 not modelled, 2 bad input).

    A closed pipe returns 141 (128 + SIGPIPE, as a shell reports for a tool that signal ended)
    with nothing printed.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    as_json = _wants_json(argv)
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        out = _run(args)
    except UsageError as exc:
        return _report(2, exc.message, exc.argument, as_json, usage=exc.usage)
    except NotModelledError as exc:
        return _report(1, f"roofline: not modelled: {exc}", None, as_json)
    except CatalogError as exc:
        return _report(2, str(exc), "--catalog", as_json)
    except (KeyError, ValueError, TypeError, OverflowError, RecursionError) as exc:
        # what _at did not place: an unknown name with close matches, a malformed config.json
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        return _report(2, str(message), None, as_json)
    try:
        sys.stdout.write(out + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        _quiet_stdout()
        return EXIT_BROKEN_PIPE
    except OSError as exc:  # a full disk, a device that refuses the write
        _quiet_stdout()
        sys.stderr.write(f"roofline: error: cannot write the output: {exc.strerror or exc}\n")
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
