"""``roofline serve MODEL --gpu G --input I --output O``: what a deployment sustains for a workload, and with
``--plan`` the layouts that meet the targets (chapter 13). A thin layer over
:func:`roofline.serving.deployment.serving_pair` and :func:`roofline.serving.deployment.plan_serving`."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace

from roofline.cli.parser import UsageError, at, need_links
from roofline.core.calibration import get_roof, roof_kind
from roofline.core.hardware import Hardware
from roofline.core.model import Model
from roofline.core.units import fmt
from roofline.measured.serving import trtllm_bench_deployment
from roofline.serving.deployment import (CHUNK_TOKENS, Deployment, Sustained, Workload, plan_serving, serving_pair,
                                         smallest_slice)

__all__ = ["run_workload"]

_FLAGS = {"input_tokens": "--input", "output_tokens": "--output", "rate": "--rate", "concurrency": "--concurrency",
          "prefix_hit": "--prefix-hit", "requests": "--requests", "tp": "--tp", "pp": "--pp", "ep": "--ep",
          "dp_attention": "--dp-attention", "replicas": "--replicas", "disaggregate": "--disaggregate",
          "ttft_slo": "--ttft-slo", "tpot_slo": "--tpot-slo", "max_gpus": "--max-gpus",
          "allreduce": "--allreduce", "max_batch": "--max-batch", "max_tokens": "--max-num-tokens",
          "kv_fraction": "--kv-fraction", "head_dtype": "--head-dtype", "arrival": "--arrival"}


_ALLREDUCE_WORDS = {"custom": "the engines' custom one-shot/two-shot kernels up to 8 MiB, NCCL past it (their default)",
                    "nccl": "NCCL's ring"}


def _flags(default: str) -> dict:
    """The flags :func:`~roofline.cli.parser.at` blames for the deployment model's errors, ``default`` when the
    message names no argument."""
    return {**_FLAGS, "": default}


def _check_unused(args) -> None:
    if args.input is None or args.output is None:
        given = "--input" if args.input is not None else "--output"
        raise UsageError(f"{given} needs {'--output' if given == '--input' else '--input'} too: a workload is a prompt "
                         "length and an answer length", "--output" if given == "--input" else "--input")
    for flag in ("context", "batch", "prompt"):
        if getattr(args, flag, None) is not None:
            raise UsageError(f"--{flag} belongs to the one-server question (chapter 5); with --input and --output the "
                             "batch follows from the workload", f"--{flag}")
    if args.curve:
        raise UsageError("--curve belongs to the one-server question (chapter 5); with --input and --output the "
                         "frontier is chapter 13's (roofline.serving.deployment.frontier)", "--curve")
    if args.gpus != 1:
        raise UsageError("--gpus pools memory for the one-server question; a deployment is --tp, --pp, "
                         "--dp-attention and --replicas", "--gpus")


def _deployment(args, m: Model | None = None, h: Hardware | None = None, w: Workload | None = None) -> Deployment:
    """The deployment the flags describe. ``--runtime trtllm-bench`` takes TensorRT-LLM's benchmark's defaults
    (:func:`roofline.measured.serving.trtllm_bench_deployment`, as chapter 13's table does) for every runtime
    setting not given; the engines' defaults otherwise."""
    budget = {None: CHUNK_TOKENS, "none": None}.get(args.max_num_tokens, args.max_num_tokens)
    d = at(_flags("--tp"), Deployment, tp=args.tp, pp=args.pp, ep=args.ep, dp_attention=args.dp_attention,
           replicas=args.replicas, weights_dtype=args.weights_dtype, kv_dtype=args.kv_dtype,
           math_dtype=args.math_dtype, disaggregate=args.disaggregate, kv_policy=args.kv_policy or "grow",
           allreduce=args.allreduce, max_batch=args.max_batch, max_tokens=budget,
           kv_fraction=1.0 if args.kv_fraction is None else args.kv_fraction, head_dtype=args.head_dtype)
    if args.runtime == "trtllm-bench" and m is not None:
        d = at(_flags("--tp"), trtllm_bench_deployment, m, h, w, d, max_batch=args.max_batch,
               max_tokens=None if args.max_num_tokens is None else budget)
        d = replace(d, **{k: v for k, v in (("kv_policy", args.kv_policy), ("kv_fraction", args.kv_fraction),
                                            ("head_dtype", args.head_dtype)) if v is not None})
        if args.max_num_tokens == "none":
            d = replace(d, max_tokens=None)
    return d


def _workload(args) -> Workload:
    return at(_flags("--input"), Workload, args.input, args.output, rate=args.rate, concurrency=args.concurrency,
                 prefix_hit=args.prefix_hit, requests=args.requests, arrival=args.arrival)


def _lines(r: Sustained, name: str) -> list[str]:
    if not r.fits:
        return [f"  {name}: does not fit: the weights take {fmt(r.memory_per_gpu, 'B')} of "
                f"{fmt(r.usable_per_gpu, 'B')} usable per GPU"]
    if r.output_tokens_per_s == 0:
        return [f"  {name}: no batch meets the targets (one sequence alone: TTFT {fmt(r.ttft_s, 's')}, "
                f"TPOT {fmt(r.tpot_s, 's')})"]
    lat = ("the offered rate is past capacity: queues grow without bound" if not r.sustained else
           f"TTFT {fmt(r.ttft_s, 's')}, TPOT {fmt(r.tpot_s, 's')}")
    out = [f"  {name}: {r.output_tokens_per_s:,.0f} output tokens/s ({r.output_tokens_per_s_per_gpu:,.0f} per GPU), "
           f"{r.total_tokens_per_s:,.0f} with the prompts; {lat}",
           f"    batch {r.batch:,.0f} per replica (most that fit {r.max_batch:,}), set by {r.limit}; "
           f"{fmt(r.memory_per_gpu, 'B')} of {fmt(r.usable_per_gpu, 'B')} per GPU; a decode step is {r.bound}-bound"]
    if r.deployment.disaggregate:
        out.append(f"    each prompt's KV cache takes {fmt(r.kv_transfer_s, 's')} to reach the decode pool")
    out += [f"    {n}" for n in r.notes]
    return out


def _pair(args, m: Model, h: Hardware, d: Deployment, w: Workload) -> str:
    at("--roof", roof_kind, h, None if args.roof == "both" else args.roof)
    if d.disaggregate is not None:  # the cache crosses the network when the two pools span nodes
        need_links(args, h, d.gpus, f"serve --disaggregate {d.disaggregate[0]}:{d.disaggregate[1]}",
                   per_node=d.gpus_per_node)
    pair = at(_flags("--tp"), serving_pair, m, h, w, d, ttft_slo=args.ttft_slo, tpot_slo=args.tpot_slo)
    top = pair.ceiling
    if top.fits and top.output_tokens_per_s == 0 and top.limit == "slo":  # not even the datasheet meets a target
        if args.ttft_slo is not None and top.ttft_s is not None and top.ttft_s > args.ttft_slo:
            raise UsageError(f"--ttft-slo {fmt(args.ttft_slo, 's')} is below one prompt's prefill alone: even the "
                             f"datasheet ceiling takes {fmt(top.ttft_s, 's')} to a first token", "--ttft-slo")
        if args.tpot_slo is not None and top.tpot_s is not None and top.tpot_s > args.tpot_slo:
            raise UsageError(f"--tpot-slo {fmt(args.tpot_slo, 's')} is below one sequence's decode step: even the "
                             f"datasheet ceiling takes {fmt(top.tpot_s, 's')} a token", "--tpot-slo")
    shown = {"datasheet": [("ceiling", pair.ceiling)], "calibrated": [("estimate", pair.estimate)],
             "both": [("ceiling", pair.ceiling)] + ([("estimate", pair.estimate)] if pair.estimate else [])}[args.roof]
    lead = shown[-1][1]
    if args.json:
        out = {"workload": "serve", **lead.as_dict()}
        out.update({name: r.as_dict() for name, r in shown})
        if args.roof == "both" and pair.estimate is None:
            out["estimate"] = None
        return json.dumps(out, indent=2)
    load = (f"{w.rate:g} requests/s" if w.load == "rate" else f"{w.concurrency:,} clients" if w.load == "concurrency"
            else "offline" + (f", {w.requests:,} requests at once" if w.requests else ", steady state"))
    cache = f", {w.prefix_hit:.0%} of each prompt cached" if w.prefix_hit else ""
    lines = [f"serving {m.name} on {d.gpus} × {h.short} ({d.label()}), prompts of {w.input_tokens:,} and answers of "
             f"{w.output_tokens:,} tokens, {load}{cache}"]
    picked = "trtllm-bench's rule and defaults" if args.runtime == "trtllm-bench" else "the engines' defaults"
    lines.append(f"  runtime ({picked} where not given): step budget "
                 + ("none (whole prompts)" if d.max_tokens is None else f"{d.max_tokens:,} tokens")
                 + ", sequences " + ("by memory alone" if d.max_batch is None else f"at most {d.max_batch:,}")
                 + f", cache {'reserved for the whole answer' if d.kv_policy == 'reserve' else 'growing with the answer'}"
                 + f" in {d.kv_fraction:.0%} of the HBM the weights leave"
                 + (f", head in {d.head_dtype}" if d.head_dtype else "")
                 + (f", {w.arrival} arrivals" if w.load == "rate" else ""))
    for name, r in shown:
        lines += _lines(r, f"{name} ({r.roof})")
    if args.roof == "both" and pair.estimate is None:
        lines.append(f"  ({h.short} has no calibrated roof: the ceiling alone)")
    lines.append("  (ceiling: datasheet roof, everything overlapped, the cache growing into all the HBM left; "
                 "estimate: calibrated roof, kernel by kernel"
                 + (f"; all-reduces: {_ALLREDUCE_WORDS[d.allreduce]}" if d.tp > 1 else "") + ")")
    return "\n".join(lines)


def _plan(args, m: Model, h: Hardware, w: Workload) -> str:
    layout = [f"--{f.replace('_', '-')}" for f, default in (("tp", 1), ("pp", 1), ("ep", 1), ("dp_attention", 1),
                                                           ("replicas", 1), ("disaggregate", None))
              if getattr(args, f) != default]
    if layout:
        raise UsageError(f"{layout[0]} sets one layout; --plan searches every layout of up to --max-gpus GPUs (leave "
                         f"{' and '.join(layout)} out, or leave --plan out to price that layout)", layout[0])
    kind = at("--roof", roof_kind, h, None if args.roof == "both" else args.roof)
    d = _deployment(args)
    roof = at("--math-dtype", get_roof, h, kind, d.math)
    rows = at(_flags("--max-gpus"), plan_serving, m, h, w, roof, max_gpus=args.max_gpus, ttft_slo=args.ttft_slo,
                 tpot_slo=args.tpot_slo, weights_dtype=args.weights_dtype, kv_dtype=args.kv_dtype,
                 math_dtype=args.math_dtype, kv_policy=d.kv_policy, allreduce=args.allreduce,
                 max_batch=d.max_batch, max_tokens=d.max_tokens, kv_fraction=d.kv_fraction, head_dtype=d.head_dtype)
    best = smallest_slice(rows)
    targets = ", ".join(f"{k} {fmt(v, 's')}" for k, v in (("TTFT", args.ttft_slo), ("TPOT", args.tpot_slo)) if v) or "no targets"
    if best is None:
        fastest = min((r for r in rows if r.capacity.fits and r.capacity.tpot_s), key=lambda r: r.capacity.tpot_s, default=None)
        why = ("no layout fits" if fastest is None else
               f"the fastest, {fastest.deployment.label()}, gives TTFT {fmt(fastest.capacity.ttft_s, 's')} and TPOT "
               f"{fmt(fastest.capacity.tpot_s, 's')} for one sequence")
        raise UsageError(f"no layout of up to {args.max_gpus} GPUs meets {targets}: {why}",
                         "--tpot-slo" if args.tpot_slo else "--ttft-slo" if args.ttft_slo else "--max-gpus")
    if args.json:
        return json.dumps({"workload": "serve", "plan": True, "model": m.name, "gpu": h.key, "roof": roof.label,
                           "smallest_slice": best.deployment.label(),
                           "layouts": [{**r.capacity.as_dict(), "meets": r.meets, "gpus_needed": r.gpus,
                                        "replicas": r.replicas} for r in rows]}, indent=2)
    lines = [f"layouts of {m.name} on {h.short}, up to {args.max_gpus} GPUs a replica, {targets} ({roof.label}):",
             f"  {'layout':<34} {'tokens/s/GPU':>12} {'TTFT':>9} {'TPOT':>9} {'batch':>7} {'GPUs':>5}"]
    for r in [r for r in rows if r.meets][:12]:
        c = r.capacity
        lines.append(f"  {r.deployment.label():<34} {r.tokens_per_s_per_gpu:>12,.0f} {fmt(c.ttft_s, 's'):>9} "
                     f"{fmt(c.tpot_s, 's'):>9} {c.batch:>7,.0f} {r.gpus:>5}")
    lines.append(f"smallest slice that meets them: {best.deployment.label()}, {best.gpus} GPU"
                 f"{'s' if best.gpus > 1 else ''}" + (f" ({best.replicas} replicas for the rate)" if best.replicas > 1 else ""))
    return "\n".join(lines)


def run_workload(args: argparse.Namespace, m: Model, h: Hardware) -> str:
    """The workload question: ``--plan`` ranks layouts; otherwise the given deployment's ceiling and
    estimate."""
    _check_unused(args)
    w = _workload(args)
    if m.max_position_embeddings and w.input_tokens + w.output_tokens > m.max_position_embeddings:
        longer = "--input" if w.input_tokens >= w.output_tokens else "--output"
        raise UsageError(f"--input + --output = {w.input_tokens + w.output_tokens:,} tokens is past {m.name}'s context "
                         f"of {m.max_position_embeddings:,}", longer)
    if args.plan:
        return _plan(args, m, h, w)
    return _pair(args, m, h, _deployment(args, m, h, w), w)
