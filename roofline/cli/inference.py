"""``roofline decode`` and ``roofline prefill``: one step's roofline estimate, part by part (chapter 1),
in narrower formats (chapter 6), on a measured roof (the appendices), and split over GPUs: ``--tp``
(chapter 8), ``--ep`` (chapter 10, :func:`roofline.cli.serving.expert_parallel`), ``prefill --cp``
(chapter 11)."""

from __future__ import annotations

import json

from roofline.cli.output import routing_fields, routing_line, tp_lines
from roofline.cli.parser import GPUS_PER_NODE, UsageError, at, need_links, moe_routing, one_split
from roofline.cli.serving import expert_parallel
from roofline.core.calibration import get_roof
from roofline.core.cost import Breakdown
from roofline.core.formats import Formats, formats as make_formats
from roofline.core.hardware import Hardware, get_hardware
from roofline.core.model import Model, load_model
from roofline.core.roof import predict
from roofline.core.units import fmt
from roofline.parallel.context_parallel import context_parallel_prefill
from roofline.parallel.tensor_parallel import check_tp, predict_tp, shard_model, tp_decode_step, tp_prefill
from roofline.present.tables import breakdown_table, operations_table
from roofline.workloads.inference import OPTIONS, decode_step, prefill
from roofline.workloads.memory import inference_footprint
from roofline.workloads.quantization import check_math

__all__ = ["run_decode", "run_prefill"]


def run_decode(args) -> str:
    """``roofline decode MODEL --gpu GPU``: one decode step of ``--batch`` sequences at ``--context`` tokens."""
    return _run(args)


def run_prefill(args) -> str:
    """``roofline prefill MODEL --gpu GPU --tokens N``: one prefill of ``--batch`` prompts."""
    return _run(args)


def _roof(args, h: Hardware):
    """The roof ``--roof`` asks for, at one GPU's kernels: the chip's datasheet (the :class:`Hardware` itself) or
    the calibrated roof of our measurement, launched ``--launch``, carried to another chip only when asked."""
    return at("--roof", get_roof, h, args.roof, scope="chip", launch=args.launch, carry=args.carry_h200_efficiencies)


def _run(args) -> str:
    if args.roof == "datasheet":
        for flag, given in (("--carry-h200-efficiencies", args.carry_h200_efficiencies),
                            ("--launch", args.launch != "graph")):
            if given:
                raise UsageError(f"{flag} applies to the calibrated roof only: give --roof calibrated with it, or "
                                 f"leave {flag} out", flag)
    m, h = at("model", load_model, args.model), at("--gpu", get_hardware, args.gpu, args.catalog)
    one_split(args)
    assumed = moe_routing(args, m)
    if args.ep > 1:
        return expert_parallel(args, m, h, assumed)
    kernels = [flag for flag, given in (("--attention", args.attention != OPTIONS["attention"][0]),
                                        ("--lm-head", getattr(args, "lm_head", "all") != "all")) if given]
    if args.accounting == "text" and kernels:
        raise UsageError(f"{' and '.join(kernels)} choose{'s' if len(kernels) == 1 else ''} kernels, which only the "
                         "refined accounting counts: drop --accounting text (a kernel option asks for the refined "
                         f"count by default) or leave {' and '.join(kernels)} out", kernels[0])
    accounting = args.accounting or ("text" if args.timing == "step" and not kernels else "refined")
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
    f = at("--math-dtype" if args.math_dtype else "--weights-dtype", make_formats, **formats)
    at("--math-dtype" if args.math_dtype else "--dtype", check_math, h, f)
    settings = {"model": m.name, "batch": args.batch, "accounting": accounting, "dtype": args.dtype,
                "weights_dtype": f.weights, "kv_dtype": f.kv, "attention": args.attention,
                **routing_fields(m, args.batch * getattr(args, "tokens", 1), args.routing, assumed)}
    if args.math_dtype is not None or args.embeddings_dtype is not None:
        settings.update(math_dtype=f.math, embeddings_dtype=f.embeddings or f.weights)
    if args.tp > 1:
        return _tensor_parallel(args, m, h, accounting, formats, options)
    if args.command == "decode":
        b = at("--context", decode_step, m, args.batch, args.context, accounting=accounting, routing=args.routing,
               **formats, **options)
        fit = at("--context", _fit, m, h, args.batch, args.context + 1, f)  # the cache after the step
        return _workload("decode", b, h, args.batch, args.json, {**settings, "context": args.context}, fit, args)
    if args.cp > 1:
        return _context_parallel(args, m, h)
    b = at("--tokens", prefill, m, args.tokens, args.batch, accounting=accounting, routing=args.routing,
           **formats, **options)
    fit = at("--tokens", _fit, m, h, args.batch, args.tokens, f)
    return _workload("prefill", b, h, args.tokens * args.batch, args.json, {**settings, "tokens": args.tokens}, fit,
                     args)


def _fit(m: Model, h: Hardware, batch: int, context: int, f: Formats) -> dict:
    """Whether the step's weights and KV cache fit in the GPU's usable HBM, and its context in the model's."""
    footprint = inference_footprint(m, batch, context, dtype=f.weights, kv_dtype=f.kv, embeddings_dtype=f.embeddings)
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
    pred = predict(b, _roof(args, h), timing=args.timing)
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
    return "\n\n".join(shown) + "\n\n" + "\n".join(lines + routing_line(settings) + _fit_lines(fit, h))



def _context_parallel(args, m: Model, h: Hardware) -> str:
    """``prefill --cp N``: one prompt's prefill spread over ``N`` GPUs (ring attention, chapter 11)."""
    if args.batch != 1 or args.dtype != "bf16" or args.weights_dtype or args.kv_dtype or args.math_dtype:
        raise UsageError("--cp spreads one bf16 prompt: leave --batch, --dtype and the other formats at their "
                         "defaults", "--cp")
    need_links(args, h, args.cp, f"prefill --cp {args.cp}")
    p = at("--cp", context_parallel_prefill, m, h, args.tokens, args.cp)
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


def _tensor_parallel(args, m: Model, h: Hardware, accounting: str, formats: dict, options: dict) -> str:
    """``decode --tp N`` and ``prefill --tp N``: one GPU's share of the step plus the collectives (chapter 8)."""
    t = args.tp
    at("--tp", check_tp, m, t, gpus_per_node=GPUS_PER_NODE)
    need_links(args, h, t, f"{args.command} --tp {t}")
    roof = _roof(args, h)
    if args.command == "decode":
        step = at("--context", tp_decode_step, m, t, args.batch, args.context, accounting=accounting, **formats,
                  **options)
        context = args.context + 1  # the cache after the step
    else:
        step = at("--tokens", tp_prefill, m, t, args.tokens, args.batch, accounting=accounting, **formats, **options)
        context = args.tokens
    comm = predict_tp(step, h, roof=None if roof is h else roof, timing=args.timing, gpus_per_node=GPUS_PER_NODE)
    time = float(comm.time)
    fit = _fit(shard_model(m, t), h, args.batch, context, step.work.formats)  # one GPU's shard and its cache
    memory, fits = fit["resident_bytes"], fit["fits"]
    out = {"workload": args.command, "model": m.name, "gpu": h.key, "tp": t,
           "batch": args.batch, "accounting": accounting, "timing": args.timing, "memory_bytes": memory, "fits": fits,
           "hbm_usable": h.usable_capacity, "compute_time_s": float(comm.compute_time), "step_tokens": int(step.tokens),
           "time_per_token_s": float(comm.time_per_token), "bound": str(comm.compute.bound),
           "collectives": step.collectives, "collective_bytes_per_gpu": float(comm.comm_bytes),
           "collective_time_s": float(comm.comm_time), "collective_latency_s": float(comm.comm_latency), "time_s": time}
    if args.json:
        return json.dumps(out, indent=2)
    head = f"{args.command} of {m.name}, tensor parallel over {t} × {h.short}"
    work = f"one GPU's kernels {fmt(comm.compute_time, 's')}, {comm.compute.bound}-bound"
    return tp_lines(head, time, work, comm, comm.tokens_per_s_per_gpu, None, memory, fits, h)

