"""``roofline serve`` (chapter 5: how many requests fit beside the weights, and how fast they decode; the
latency-throughput curve of chapter 12), ``roofline speculate`` (chapter 12) and the expert-parallel
``--ep`` of decode, prefill and serve (chapter 10)."""

from __future__ import annotations

import argparse
import json

from roofline.cli.output import routing_fields, routing_line, tp_lines
from roofline.cli.parser import GPUS_PER_NODE, UsageError, at, need_links, moe_routing, one_split
from roofline.core.hardware import Hardware, get_hardware
from roofline.core.model import Model, NotModelledError, load_model
from roofline.core.units import fmt
from roofline.parallel.moe import expert_parallel_batch, expert_parallel_step
from roofline.parallel.tensor_parallel import check_tp, weights_per_gpu
from roofline.serving.capacity import (ServingCapacity, check_context, expert_parallel_footprint, kv_replicas,
                                       largest_batch, latency_throughput, serving_capacity, time_to_first_token,
                                       tp_serving_capacity)
from roofline.workloads.memory import fit_verdict, inference_footprint
from roofline.serving.speculative import best_gamma, breakeven_alpha, speculate, stops_paying_batch

__all__ = ["run_serve", "run_speculate", "expert_parallel"]


def run_serve(args) -> str:
    """``roofline serve MODEL --gpu GPU --context N``: the largest batch that fits and its decode step."""
    m, h = at("model", load_model, args.model), at("--gpu", get_hardware, args.gpu, args.catalog)
    if args.input is not None or args.output is not None:
        from roofline.cli.deployment import run_workload  # the workload question (chapter 13)
        return run_workload(args, m, h)
    given = [f"--{f.replace('_', '-')}" for f in ("rate", "concurrency", "requests", "ttft_slo", "tpot_slo", "disaggregate",
                                                "plan") if getattr(args, f) not in (None, False)]
    given += [f"--{f.replace('_', '-')}" for f, v in (("pp", 1), ("dp_attention", 1), ("replicas", 1), ("prefix_hit", 0.0),
                                                    ("roof", "both"),
                                                    ("allreduce", "custom"), ("arrival", "poisson"),
                                                    ("runtime", "engines")) if getattr(args, f) != v]
    given += [f"--{f.replace('_', '-')}" for f in ("kv_policy", "max_batch", "max_num_tokens", "kv_fraction",
                                                    "head_dtype") if getattr(args, f) is not None]
    if given:
        raise UsageError(f"{given[0]} describes a workload on a deployment: give --input and --output too", given[0])
    if args.context is None:
        raise UsageError("--context is required (or --input and --output, for a workload on a deployment)", "--context")
    one_split(args)
    assumed = moe_routing(args, m)
    if args.ep > 1:
        return expert_parallel(args, m, h, assumed)
    return _tensor_parallel(args, m, h) if args.tp > 1 else _serve(args, m, h, assumed)


def run_speculate(args) -> str:
    """``roofline speculate MODEL --draft DRAFT --gpu GPU --alpha A``: speculative decoding's speed-up."""
    m, h = at("model", load_model, args.model), at("--gpu", get_hardware, args.gpu, args.catalog)
    return _speculate(args, m, h)


def _serve_text(p: ServingCapacity) -> str:
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


def _serve(args: argparse.Namespace, m: Model, h: Hardware, assumed: bool = False) -> str:
    at("--context", check_context, m, args.context)
    at("--gpus", kv_replicas, m, args.gpus)
    plan = at("--batch" if args.batch else "--context", serving_capacity, m, h, args.context, gpus=args.gpus,
               weights_dtype=args.weights_dtype, kv_dtype=args.kv_dtype, math_dtype=args.math_dtype,
               block_size=args.block_size, batch=args.batch, routing=args.routing)
    prompt = args.prompt or args.context
    formats = dict(gpus=args.gpus, weights_dtype=args.weights_dtype, kv_dtype=args.kv_dtype, math_dtype=args.math_dtype,
                   routing=args.routing)
    routed = routing_fields(m, max(plan.batch, 1), args.routing, assumed) if plan.step_time is not None else {}
    ttft = curve = None
    if plan.step_time is not None:  # it fits and its decode is modelled
        try:
            ttft = at("--prompt", time_to_first_token, m, h, prompt, **formats)
            if args.curve:
                curve = at("--context", latency_throughput, m, h, args.context, prompt=prompt, **formats)
        except NotModelledError:
            ttft = curve = None
    if args.json:
        out = {"gpu": h.key, **plan.as_dict(), **routed, "prompt": prompt, "ttft": ttft}
        if args.curve:
            out["curve"] = None if curve is None else {k: (v.tolist() if hasattr(v, "tolist") else v)
                                                       for k, v in curve.items()}
        return json.dumps(out, indent=2)
    text = _serve_text(plan)
    head, verdict = text.rsplit("\n", 1)
    head = "\n".join([head, *("  " + line for line in routing_line(routed))])
    if ttft is None:
        return "\n".join([head, verdict])
    lines = [head, f"  time to first token: {fmt(ttft, 's')} (a prompt of {prompt:,} tokens prefilled alone)"]
    if curve is not None:
        lines.append("  latency against throughput (decode at each batch):")
        lines.append(f"    {'batch':>7}  {'time per output token':>21}  {'tokens/s':>16}  bound")
        for b, t, tps, bound in zip(curve["batch"], curve["tpot"], curve["tokens_per_s"], curve["bound"]):
            lines.append(f"    {int(b):>7,}  {fmt(t, 's'):>21}  {fmt(tps, 'tokens/s'):>16}  {bound}")
    return "\n".join([*lines, verdict])


def _speculate(args: argparse.Namespace, m: Model, h: Hardware) -> str:
    draft = args.draft
    at("--context", check_context, m, args.context)
    assumed = moe_routing(args, m)
    moe = {"routing": args.routing} if m.moe is not None else {}
    plan = at("--draft", speculate, m, draft, h, args.alpha, args.gamma, batch=args.batch, context=args.context, **moe)
    even = breakeven_alpha(m, draft, h, args.gamma, batch=args.batch, context=args.context, **moe)
    best, best_speed = best_gamma(m, draft, h, args.alpha, batch=args.batch, context=args.context, **moe)
    stop = stops_paying_batch(m, draft, h, args.alpha, args.gamma, context=args.context, **moe)
    routing = routing_fields(m, args.batch * (args.gamma + 1), args.routing, assumed)
    room = largest_batch(m, h, max(args.context, 1))
    held = inference_footprint(m, args.batch, args.context + 1)  # the target's weights and cache after the step
    fits = bool(held.fits(h))
    if args.json:
        return json.dumps({"gpu": h.key, **plan.as_dict(), "breakeven_alpha": even, "best_gamma": best,
                           "best_gamma_speedup": best_speed, "stops_paying_batch": stop,
                           "largest_batch": room, "fits": fits, "resident_bytes": float(held.total), **routing}, indent=2)
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
    verdict = fit_verdict(float(held.total), h)
    memory = (f"memory: the target's weights and KV cache, {fmt(float(held.total), 'B')}, {verdict}" if fits else
              f"DOES NOT FIT: batch {args.batch:,} at {args.context:,} tokens holds {fmt(float(held.total), 'B')}, "
              f"{verdict}; the times above assume it fit")
    return "\n".join([f"speculative decoding of {where}", *(f"  {k.ljust(width)}  {v}" for k, v in rows),
                      f"  (roof: {plan.roof}, datasheet; text accounting; the draft's own memory not counted)",
                      *(f"  {line}" for line in routing_line(routing)), memory])


def expert_parallel(args: argparse.Namespace, m: Model, h: Hardware, assumed: bool = False) -> str:
    """decode, prefill or serve with ``--ep N``: one GPU's step and the all-to-alls (roofline.parallel.moe)."""
    if m.moe is None:
        raise UsageError(f"--ep: {m.name} has no experts; expert parallelism needs a mixture of experts", "--ep")
    if args.command == "serve" and (args.curve or args.prompt is not None or args.gpus > 1):
        raise UsageError("--ep prices one expert-parallel decode step; it does not combine with --curve, --prompt "
                         "or --gpus yet", "--ep")
    if args.command != "serve" and (args.timing != "step" or args.roof != "datasheet" or args.accounting == "refined"):
        raise UsageError("--ep is modelled with the text accounting, the step rule and the datasheet roof "
                         "(leave out --timing, --roof and --accounting refined)", "--ep")
    dtype = getattr(args, "dtype", None) or "bf16"
    wd = args.weights_dtype or dtype
    # serve keeps the cache in the weights' format unless told (chapter 5); decode and prefill in --dtype's
    kvd = args.kv_dtype or (wd if args.command == "serve" else dtype)
    need_links(args, h, args.ep, f"{args.command} --ep {args.ep}")
    per_gpu = at("--ep", weights_per_gpu, m, ep=args.ep, weights_dtype=wd)
    if args.command == "serve":
        most = at("--ep", expert_parallel_batch, m, h, args.context, ep=args.ep, weights_dtype=wd, kv_dtype=kvd,
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
        step = at("--ep" if batch % args.ep == 0 else "--batch", expert_parallel_step, m, h, batch, context,
                   ep=args.ep, routing=args.routing, prompt=prompt, dtype=dtype, weights_dtype=wd, kv_dtype=kvd,
                   math_dtype=getattr(args, "math_dtype", None))
    tokens = batch * (prompt or 1)
    out = {"workload": args.command, "model": m.name, "gpu": h.key, "ep": args.ep,
           **routing_fields(m, max(tokens, 1), args.routing, assumed), "batch": batch, "weights_per_gpu": per_gpu,
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
        held = expert_parallel_footprint(m, batch, context + (prompt or 1), ep=args.ep, weights_dtype=wd, kv_dtype=kvd)
        out.update(resident_bytes_per_gpu=held.total, fits=bool(held.fits(h)))
    if args.json:
        return json.dumps(out, indent=2)
    if args.command == "decode":
        what = f"decode at batch {batch:,}, {context:,} tokens of context"
    elif args.command == "prefill":
        what = f"prefill of {batch:,} × {args.tokens:,} tokens"
    else:
        what = f"serving at {context:,} tokens per request, batch {batch:,}"
    lines = [f"{m.name} on {args.ep} × {h.short}, expert-parallel, {args.routing} routing"
             + (" (assumed: no --routing given; best or worst gives the bounds)" if assumed else "") + f": {what}",
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


def _tensor_parallel(args, m: Model, h: Hardware) -> str:
    """``serve --tp N``: the server's memory over ``N`` GPUs and one tensor-parallel decode step (chapter 8)."""
    t = args.tp
    if args.curve or args.prompt is not None or args.gpus > 1:
        raise UsageError("--tp prices one tensor-parallel decode step; it does not combine with --curve, --prompt "
                         "or --gpus (chapter 5's pooled GPUs) yet", "--tp")
    at("--tp", check_tp, m, t, gpus_per_node=GPUS_PER_NODE)
    need_links(args, h, t, f"serve --tp {t}")
    p = at("--batch" if args.batch else "--context", tp_serving_capacity, m, h, args.context, tp=t,
           weights_dtype=args.weights_dtype, kv_dtype=args.kv_dtype, math_dtype=args.math_dtype,
           block_size=args.block_size, batch=args.batch, gpus_per_node=GPUS_PER_NODE)
    plan, comm = p.plan, p.prediction
    if comm is None:  # nothing fits
        if args.json:
            return json.dumps({"workload": "serve", "model": m.name, "gpu": h.key, "tp": t, "context": args.context,
                               "max_batch": p.max_batch, "fits": False, "hbm_usable": h.usable_capacity,
                               "weights_per_gpu": p.weights_per_gpu, "verdict": plan.verdict()}, indent=2)
        return "DOES NOT FIT: " + plan.verdict()
    out = {"workload": "serve", "model": m.name, "gpu": h.key, "tp": t, "context": args.context, "batch": p.batch,
           "max_batch": p.max_batch, "memory_bytes": p.memory_per_gpu, "fits": p.fits, "hbm_usable": h.usable_capacity,
           "compute_time_s": p.compute_time, "tokens_per_s": p.tokens_per_s,
           "tokens_per_s_per_gpu": p.tokens_per_s_per_gpu, "collectives": comm.step.collectives,
           "collective_bytes_per_gpu": float(comm.comm_bytes), "collective_time_s": p.collective_time,
           "collective_latency_s": float(comm.comm_latency), "time_s": p.time}
    if args.json:
        return json.dumps(out, indent=2)
    head = (f"serving {m.name} tensor parallel over {t} × {h.short}, {args.context:,} tokens per request: "
            f"{p.max_batch:,} sequences fit; at batch {p.batch:,}")
    work = f"one GPU's kernels {fmt(comm.compute_time, 's')}"
    return tp_lines(head, p.time, work, comm, p.tokens_per_s_per_gpu, None, p.memory_per_gpu, p.fits, h)
