"""``roofline train`` (chapter 3: does a step fit, and how fast can it go), its data-parallel step across
nodes (chapter 7), ``--tp`` (chapter 8) and ``--cp`` (chapter 11), and ``roofline plan`` (chapter 9's
search over tensor, pipeline and data-parallel layouts)."""

from __future__ import annotations

import json

from roofline.cli.output import tp_lines
from roofline.cli.parser import AUTO, GPUS_PER_NODE, UsageError, at, layout_flags, need_links, one_split, wants_cluster
from roofline.core.calibration import get_roof, roof_kind
from roofline.core.cluster_roof import ClusterRoof
from roofline.core.hardware import Hardware, get_hardware, require_links
from roofline.core.model import Model, load_model
from roofline.core.policies import RECOMPUTES
from roofline.core.units import fmt
from roofline.parallel.cluster import TrainLayout, estimate_step, moe_terms, search
from roofline.parallel.context_parallel import plan_context_parallel
from roofline.parallel.data_parallel import data_parallel_step
from roofline.parallel.planner import cluster_size, plan as plan_layouts
from roofline.parallel.tensor_parallel import check_tp, tp_training_plan
from roofline.workloads.training import plan_training

__all__ = ["run_train", "run_plan"]


def run_train(args) -> str:
    """``roofline train MODEL --gpu GPU --seq N``: one training step's memory, time and MFU."""
    return _train(args, args.catalog)


def run_plan(args) -> str:
    """``roofline plan MODEL --gpu GPU --nodes N --seq S --global-batch B``: the fastest layouts that fit."""
    return _plan(args, args.catalog)


def _train(args, catalog) -> str:
    if args.fsdp is not None and args.zero not in (None, 3):
        raise UsageError(f"--fsdp is ZeRO-3 (FSDP's full or hybrid sharding): give --zero 3 with it or leave --zero "
                         f"out, got --zero {args.zero}", "--fsdp")
    if args.zero is None:
        args.zero = 3 if args.fsdp is not None else 0
    if wants_cluster(args):
        return _train_cluster(args, catalog)
    one_split(args)
    if args.nodes is not None or args.gpus_per_node is not None or args.hybrid or args.accumulation > 1:
        for flag in ("tp", "cp"):
            if getattr(args, flag) > 1:
                raise UsageError(f"--{flag} does not combine with --nodes, --gpus-per-node, --hybrid or --accumulation "
                                 "yet: chapter 7's data-parallel step prices whole replicas", f"--{flag}")
        return _train_dp(args, catalog)
    m, h = at("model", load_model, args.model), at("--gpu", get_hardware, args.gpu, catalog)
    if args.tp > 1:
        return _tensor_parallel(args, m, h)
    if args.cp > 1:
        return _context_parallel(args, m, h)
    if args.gpus > 1:
        need_links(args, h, args.gpus, f"train --gpus {args.gpus}")
    if args.offload:
        at("--catalog" if args.catalog else "--gpu", require_links, h, ["host"], "train --offload")
    plan = at("--offload" if args.offload else "--seq", plan_training, m, h, seq=args.seq,
               micro_batch=args.micro_batch, gpus=args.gpus, recompute=args.recompute, zero_stage=args.zero,
               offload=args.offload, achieved=args.achieved, timing=args.timing, attention=args.attention)
    fp = plan.footprint
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
    held = (f"model state {fmt(float(fp.model_state), 'B')}, activations {fmt(float(fp['activations']), 'B')},\n  "
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
    lines += _beyond_context(m, plan.seq)
    lines.append(f"MFU {plan.mfu:.1%}, HFU {plan.hfu:.1%}, {rate:,.0f} tokens/s per GPU" if rate >= 100 else
                 f"MFU {plan.mfu:.1%}, HFU {plan.hfu:.1%}, {rate:.3g} tokens/s per GPU"
                 + ("" if plan.achieved is not None else "\n  (at the floor; --achieved 0.5 assumes the GPU runs its FLOPs at half its peak)"))
    return "\n".join(lines)


def _beyond_context(m: Model, seq: int) -> list[str]:
    """The line every training answer prints when a sequence is longer than the model was trained for (training
    at a longer context is how a context is extended: a warning, not a refusal)."""
    if m.max_position_embeddings is None or seq <= m.max_position_embeddings:
        return []
    return [f"BEYOND THE MODEL'S CONTEXT: {seq:,} tokens per sequence,\n  past the "
            f"{m.max_position_embeddings:,} it was trained for (max_position_embeddings)"]


def _plan(args, catalog) -> str:
    """``roofline plan``: the cluster model's search (the planner, :func:`roofline.parallel.cluster.search`), ranked
    by the calibrated estimate where the chip has a calibrated roof (``--roof``) and by the datasheet floor where
    not; or, with ``--accounting text`` (which ``--achieved`` and ``--timing`` ask for), chapter 9's first-order
    search ranked by its floor, the best layouts first."""
    m, h = at("model", load_model, args.model), at("--gpu", get_hardware, args.gpu, catalog)
    first_order = [f for f, given in (("--achieved", args.achieved is not None), ("--timing", args.timing != "step"))
                   if given]
    if args.accounting == "refined" and first_order:
        raise UsageError(f"{first_order[0]} applies to chapter 9's first-order search: give --accounting text with it",
                         first_order[0])
    if args.fp8_recipe is not None and args.dtype == "bf16":
        raise UsageError("--fp8-recipe applies to fp8 layouts: give --dtype fp8 or both with it", "--fp8-recipe")
    if args.accounting == "refined" or (args.accounting is None and not first_order):
        return _plan_cluster(args, m, h, at("--roof", roof_kind, h, args.roof))
    if args.dtype != "bf16":
        raise UsageError("--dtype fp8 and both are the cluster model's: chapter 9's first-order search (--accounting "
                         "text) counts bf16 alone; leave --dtype out", "--dtype")
    if args.roof == "calibrated":
        raise UsageError("--roof calibrated prices the cluster model; chapter 9's first-order search (--accounting "
                         "text) ranks by the datasheet floor alone: leave --roof out", "--roof")
    need_links(args, h, args.nodes * args.gpus_per_node, f"plan over {args.nodes:,} node{'s' if args.nodes > 1 else ''} "
          f"of {args.gpus_per_node} GPUs", per_node=args.gpus_per_node)
    flags = {"global_batch": "--global-batch", "gpus_per_node": "--gpus-per-node", "nodes": "--nodes",
             "seq": "--seq", "achieved": "--achieved"}
    result = at(layout_flags(flags, m, args.seq), plan_layouts, m, h, nodes=args.nodes, gpus_per_node=args.gpus_per_node,
                       seq=args.seq, global_batch=args.global_batch, achieved=args.achieved, timing=args.timing)
    top = result.top(args.top)
    if args.json:
        return json.dumps({
            "workload": "plan", "accounting": "text", "model": m.name, "gpu": h.key, "nodes": result.nodes,
            "beyond_trained_context": bool(_beyond_context(m, args.seq)),
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
    lines = [f"layouts for training {m.title} on {result.gpus:,} {h.short}s ({result.nodes:,} "
             f"node{'s' if result.nodes > 1 else ''} of {result.gpus_per_node}), {result.global_batch:,} sequences of {result.seq:,} tokens per step:",
             f"  {result.count:,} layouts priced, {len(result.ranked):,} fit in {fmt(h.usable_capacity, 'B')} "
             f"of usable HBM; chapter 9's first-order count, compute at {basis}"]
    for rank, x in enumerate(top, 1):
        lines.append(f"{rank}. {x.describe()}")
        lines.append(f"   memory {fmt(x.memory, 'B')} per GPU; step {fmt(x.time, 's')} = compute {fmt(x.compute, 's')}"
                     f" + bubble {fmt(x.bubble, 's')} + exposed communication {fmt(x.exposed, 's')}; MFU {x.mfu:.1%}")
    return "\n".join(lines + _beyond_context(m, args.seq))


def _train_dp(args, catalog) -> str:
    """``roofline train --nodes N --gpus-per-node G``: the data-parallel step of chapter 7."""
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
    m, h = at("model", load_model, args.model), at("--gpu", get_hardware, args.gpu, catalog)
    need_links(args, h, nodes * per_node, f"train over {nodes:,} node{'s' if nodes > 1 else ''} of {per_node} GPUs",
          per_node=per_node)
    step = at("--nodes", data_parallel_step, m, h, nodes=nodes, gpus_per_node=per_node, zero_stage=args.zero,
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


def _context_parallel(args, m: Model, h: Hardware) -> str:
    """``train --cp N``: one sequence's training step spread over ``N`` GPUs (chapter 11)."""
    if args.offload or args.attention != "flash":
        raise UsageError("--cp models flash attention kept on the GPU: drop --offload and --attention explicit", "--cp")
    need_links(args, h, args.cp, f"train --cp {args.cp}")
    plan = at("--cp", plan_context_parallel, m, h, seq=args.seq, cp=args.cp, method=args.cp_method,
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


def _tensor_parallel(args, m: Model, h: Hardware) -> str:
    """``train --tp N``: one GPU's step over its shard plus the tensor-parallel collectives (chapter 8)."""
    t = args.tp
    at("--tp", check_tp, m, t, gpus_per_node=GPUS_PER_NODE)
    need_links(args, h, max(t, args.gpus), f"train --tp {t}")
    gpus = args.gpus if args.gpus > 1 else t
    if gpus % t:
        raise UsageError(f"--gpus ({gpus}) must be a multiple of --tp ({t}): the GPUs form {t}-GPU "
                         "tensor-parallel groups", "--gpus")
    p = at("--offload" if args.offload else "--seq", tp_training_plan, m, h, tp=t, gpus=gpus, seq=args.seq,
           micro_batch=args.micro_batch, recompute=args.recompute, zero_stage=args.zero, offload=args.offload,
           achieved=args.achieved, timing=args.timing, attention=args.attention, gpus_per_node=GPUS_PER_NODE)
    comm = p.prediction
    out = {"workload": "train", "model": m.name, "gpu": h.key, "tp": t, "gpus": p.gpus,
           "data_parallel": p.data_parallel, "seq": args.seq, "micro_batch": args.micro_batch,
           "recompute": p.plan.recompute, "zero_stage": p.plan.zero_stage, "memory_bytes": p.memory_per_gpu,
           "fits": p.fits, "hbm_usable": h.usable_capacity, "compute_time_s": p.compute_time,
           "tokens_per_s_per_gpu": p.tokens_per_s_per_gpu, "mfu": p.mfu, "collectives": comm.step.collectives,
           "collective_bytes_per_gpu": float(comm.comm_bytes), "collective_time_s": p.collective_time,
           "collective_latency_s": float(comm.comm_latency), "time_s": p.time}
    if args.json:
        return json.dumps(out, indent=2)
    dp = p.data_parallel
    head = (f"training step of {m.title}, tensor parallel over {t} GPUs ({dp} data-parallel "
            f"group{'s' if dp > 1 else ''}), {args.seq:,} tokens x micro-batch {args.micro_batch} per group")
    work = f"one GPU's step {fmt(p.compute_time, 's')} (compute, and the data-parallel traffic overlapped)"
    return tp_lines(head, p.time, work, comm, p.tokens_per_s_per_gpu, p.mfu, p.memory_per_gpu, p.fits, h)


_LAYOUT_FLAGS = {"tp": "--tp", "cp": "--cp", "pp": "--pp", "ep": "--ep", "dp": "--dp", "chunks": "--chunks",
                 "global_batch": "--global-batch", "micro_batch": "--micro-batch", "seq": "--seq",
                 "schedule": "--schedule", "recompute": "--recompute", "attention": "--attention",
                 "the interleaved schedule": "--schedule", "sequence parallelism": "--sequence-parallel",
                 "sequence_parallel": "--sequence-parallel",
                 "all-to-all context parallelism": "--cp", "the ring's zigzag split": "--cp",
                 "zero_stage": "--zero", "shard_group": "--shard-group", "reshard_after_forward": "--reshard-after-forward",
                 "hybrid sharding": "--shard-group", "attention_kernel": "--attention-kernel"}


def _train_cluster(args, catalog) -> str:
    """``roofline train MODEL --gpu G --nodes N --tp T --pp P ...``: any layout, floor and estimate (appendix C)."""
    m, h = at("model", load_model, args.model), at("--gpu", get_hardware, args.gpu, catalog)
    for flag, bad in (("--offload", args.offload), ("--hybrid", args.hybrid), ("--achieved", args.achieved is not None),
                      ("--accumulation", args.accumulation > 1)):
        if bad and flag == "--hybrid":
            raise UsageError("--hybrid is chapter 7's data-parallel step; the cluster model's hybrid sharding is "
                             "--fsdp hybrid (or --shard-group N)", flag)
        if bad:
            raise UsageError(f"{flag} is not part of the cluster model: leave it out (use --global-batch for "
                             "accumulation)" if flag == "--accumulation" else
                             f"{flag} is not part of the cluster model: leave it out", flag)
    if not isinstance(args.recompute, str) or args.recompute not in (*RECOMPUTES, AUTO):
        raise UsageError("the cluster model prices --recompute none, selective, full or auto, not a checkpoint every "
                         "K layers", "--recompute")
    open_ = tuple(k for k, v in (("micro_batch", args.micro_batch), ("recompute", args.recompute),
                                 ("chunks", args.chunks)) if v == AUTO)
    if "micro_batch" in open_ and args.global_batch is None:
        raise UsageError("--micro-batch auto needs --global-batch: the micro-batch splits a step's sequences, and "
                         "without a global batch a larger one would be a larger step", "--micro-batch")
    if "chunks" in open_ and args.pp == 1:
        raise UsageError("--chunks auto needs a pipeline (--pp 2 or more): without one there is nothing to interleave",
                         "--chunks")
    per_node = args.gpus_per_node if args.gpus_per_node is not None else GPUS_PER_NODE
    split = args.tp * args.cp * args.pp
    if args.nodes is not None or args.gpus_per_node is not None:
        nodes, per_node = at({"nodes": "--nodes", "gpus_per_node": "--gpus-per-node", "": "--nodes"}, cluster_size,
                             args.nodes if args.nodes is not None else 1, per_node)
        total = nodes * per_node
        if args.gpus != 1 and args.gpus != total:
            raise UsageError(f"--gpus {args.gpus} disagrees with --nodes {nodes} x --gpus-per-node {per_node}; give one "
                             "or the other", "--gpus")
        if total % split:
            raise UsageError(f"--tp x --cp x --pp ({args.tp} x {args.cp} x {args.pp} = {split}) must divide the "
                             f"{total:,} GPUs of the cluster (--nodes x --gpus-per-node)", "--nodes")
        dp = total // split
        if args.dp is not None and args.dp != dp:
            raise UsageError(f"--dp {args.dp} disagrees with the cluster: {total:,} GPUs over tp x cp x pp = {split} "
                             f"leave {dp} replicas", "--dp")
    else:
        if args.dp is not None and args.gpus not in (1, args.dp, split * args.dp):
            raise UsageError(f"--dp {args.dp} and --gpus {args.gpus} disagree: --gpus is the data-parallel replicas, "
                             f"or all the GPUs (tp x cp x pp x dp = {split * args.dp}); give one of them", "--gpus")
        dp = args.dp if args.dp is not None else args.gpus
    need_links(args, h, split * dp, f"train on {split * dp:,} GPUs", per_node=per_node)
    if args.fp8_recipe is not None and args.dtype != "fp8":
        raise UsageError(f"--fp8-recipe applies to fp8 training: give --dtype fp8 with it, got --dtype {args.dtype}",
                         "--fp8-recipe")
    _fp8_peak(h, (args.dtype,))
    if args.reshard_after_forward is not None and args.zero != 3:
        raise UsageError(f"--reshard-after-forward applies to FSDP (--fsdp, or --zero 3): ZeRO-{args.zero} keeps the "
                         "weights whole on every GPU", "--reshard-after-forward")
    shard_group = args.shard_group
    if args.fsdp == "hybrid" and shard_group is None:  # the data-parallel ranks of one node
        shard_group = max(1, min(dp * args.cp, per_node // args.tp))
    chunks = 1 if args.chunks in (None, AUTO) else args.chunks
    schedule = args.schedule or ("interleaved" if chunks > 1 else "1f1b")
    layout = TrainLayout(seq=args.seq, tp=args.tp, cp=args.cp, pp=args.pp, dp=dp, ep=args.ep,
                         micro_batch=1 if args.micro_batch == AUTO else args.micro_batch, global_batch=args.global_batch,
                         recompute="none" if args.recompute == AUTO else args.recompute,
                         sequence_parallel=None if args.sequence_parallel is None else args.sequence_parallel == "on",
                         schedule=schedule, chunks=chunks, zero_stage=args.zero,
                         attention="standard" if args.attention == "explicit" else "flash",
                         cp_method=args.cp_method.replace("-", "_"), overlap_grad_reduce=not args.no_overlap,
                         dtype=args.dtype, grad_dtype="bf16" if args.dtype == "fp8" else args.dtype,
                         fp8_recipe=args.fp8_recipe, attention_kernel=args.attention_kernel, gpus_per_node=per_node,
                         reshard_after_forward=args.reshard_after_forward != "off", shard_group=shard_group)
    roof = at("--roof", roof_kind, h, args.roof)
    flags = dict(_LAYOUT_FLAGS, **({} if args.schedule else {"the interleaved schedule": "--chunks"}))
    floor, est = at(layout_flags(flags, m, args.seq), estimate_step, m, h, layout, roof=roof, open=open_)
    chosen = est or floor
    layout = chosen.layout  # the published settings, and those left open at the fastest that fits
    picked = {k: getattr(layout, k) for k in open_}
    if "chunks" in open_:
        picked["schedule"] = layout.schedule
    assumed = _assumed(args, layout, m, chosen.roof)
    if args.json:
        def one(p):
            return {"time_s": p.time, "mfu": p.mfu, "hfu": p.hfu, "tokens_per_s": p.tokens_per_s,
                    "parts_s": dict(p.parts), "hidden_s": dict(p.hidden)}
        return json.dumps({
            "workload": "train", "model": m.name, "gpu": h.key, "gpus": layout.gpus, "gpus_per_node": per_node,
            "layout": {"tp": layout.tp, "cp": layout.cp, "pp": layout.pp, "dp": layout.dp, "ep": layout.ep,
                       "micro_batch": layout.micro_batch, "global_batch": layout.batch,
                       "micro_batches": layout.micro_batches, "schedule": layout.schedule, "chunks": layout.chunks,
                       "recompute": layout.recompute, "sequence_parallel": layout.sp, "zero_stage": layout.zero_stage,
                       "attention": layout.attention, "overlap_grad_reduce": layout.overlap_grad_reduce,
                       "dtype": layout.dtype, "fp8_recipe": layout.recipe.name if layout.recipe else None,
                       "attention_kernel": layout.attention_kernel,
                       "reshard_after_forward": layout.reshard_after_forward,
                       "shard_group": layout.shards},
            "seq": layout.seq, "beyond_trained_context": bool(_beyond_context(m, layout.seq)), "roof": roof, "picked": picked, "assumed": assumed, "time_s": chosen.time, "mfu": chosen.mfu, "hfu": chosen.hfu,
            "tokens_per_s": chosen.tokens_per_s, "memory_bytes": chosen.memory, "hbm_usable": h.usable_capacity,
            "fits": chosen.fits, "memory_parts": dict(chosen.memory_parts),
            "floor": one(floor), "estimate": one(est) if est else None,
        }, indent=2)
    lines = [f"training step of {m.title} on {layout.gpus:,} {h.short}s ({per_node} per node), "
             f"{layout.batch:,} sequences of {layout.seq:,} tokens:", f"  {layout.describe()}"]
    if picked:
        lines.append("  picked (the fastest that fits, of the values left open): "
                     + ", ".join(_picked_text(k, v, layout) for k, v in picked.items() if k != "schedule"))
    lines.append("  assumed: " + "; ".join(assumed.values()))
    fit = "fits" if chosen.fits else "DOES NOT FIT; the times below assume it did"
    lines.append(f"memory per GPU {fmt(chosen.memory, 'B')} of {fmt(h.usable_capacity, 'B')} usable: {fit}")
    lines.append("  " + ", ".join(f"{k} {fmt(v, 'B')}" for k, v in chosen.memory_parts.items() if v))
    if est:
        lines.append(f"step time: calibrated estimate {fmt(est.time, 's')} (MFU {est.mfu:.1%}, HFU {est.hfu:.1%}); "
                     f"datasheet floor {fmt(floor.time, 's')} (MFU {floor.mfu:.1%})")
    else:
        lines.append(f"step time: datasheet floor {fmt(floor.time, 's')} (MFU {floor.mfu:.1%}, HFU {floor.hfu:.1%})")
    lines.append(f"where the {'estimate' if est else 'floor'}'s time goes:")
    for k, v in sorted(chosen.parts.items(), key=lambda kv: -kv[1]):
        if v > 0:
            hid = chosen.hidden.get(k, 0.0)
            lines.append(f"  {k:<18} {fmt(v, 's'):>9}" + (f"  (and {fmt(hid, 's')} hidden behind the backward pass)"
                                                         if hid > 0 else ""))
    rate = chosen.tokens_per_s
    lines.append(f"{fmt(rate, 'tokens/s')} for the whole cluster")
    return "\n".join(lines + _beyond_context(m, layout.seq))


_KERNEL_NAMES = {"fa2": "FlashAttention-2", "fa3": "FlashAttention-3", "cudnn": "cuDNN's fused kernel"}


def _fp8_peak(h: Hardware, dtypes) -> None:
    """Refuse --dtype fp8 on a chip whose catalog entry has no fp8 peak, naming the formats it has."""
    if "fp8" in dtypes and "fp8" not in h.dense_flops:
        raise UsageError(f"--dtype fp8: the {h.short} has no dense fp8 peak in the catalog (its formats: "
                         f"{', '.join(h.dense_flops)})", "--dtype")


def _picked_text(key: str, value, layout: TrainLayout) -> str:
    if key == "chunks":
        return "plain 1F1B" if layout.schedule == "1f1b" else f"interleaved x{value}"
    return f"{key.replace('_', '-')} {value}"


def _assumed(args, layout: TrainLayout, m: Model, roof: ClusterRoof) -> dict:
    """The defaults of ``train`` on a cluster that move a published comparison, in words, each with the flag that
    changes it (printed with every answer, and in the JSON's ``assumed``); for a mixture of experts, the terms the
    step model used for its experts and their all-to-all (:func:`~roofline.parallel.cluster.moe_terms`, under the
    roof of the answer printed), and the multi-token-prediction layers its config trains."""
    moe = dict(moe_terms(m, layout, roof))
    if m.mtp_layers:
        moe["mtp"] = (f"{m.mtp_layers} multi-token-prediction layer{'s' if m.mtp_layers > 1 else ''} trained on the "
                      "last stage with the output head, as the model's config has")
    return {**moe,
        "attention": ((f"flash attention, {_KERNEL_NAMES[layout.attention_kernel or 'fa2']} (--attention-kernel; "
                       "--attention explicit: the kernel of Megatron-LM's 2021-22 runs)")
                      if layout.attention == "flash" else "the explicit attention kernel of Megatron-LM's 2021-22 runs"),
        "overlap_grad_reduce": ("the gradient reduction overlaps the backward pass (--no-overlap: it waits)"
                                if layout.overlap_grad_reduce else "the gradient reduction waits for the backward pass"),
        **({"fp8_recipe": f"fp8 by {layout.recipe.title} (--fp8-recipe)" + (" [default]" if args.fp8_recipe is None
                                                                               else "")}
           if layout.recipe is not None else {}),
    }


def _plan_cluster(args, m: Model, h: Hardware, kind: str) -> str:
    """``roofline plan``: every layout of the cluster model, ranked under the roof of ``kind``: the calibrated
    estimate with the datasheet floor beside it, or the floor alone."""
    flags = layout_flags({"global_batch": "--global-batch", "gpus_per_node": "--gpus-per-node", "nodes": "--nodes",
                          "seq": "--seq"}, m, args.seq)
    nodes, per_node = at(flags, cluster_size, args.nodes, args.gpus_per_node)
    gpus = nodes * per_node
    need_links(args, h, gpus, f"plan over {nodes:,} node{'s' if nodes > 1 else ''} of {per_node} GPUs",
               per_node=per_node)
    dtypes = ("bf16", "fp8") if args.dtype == "both" else (args.dtype,)
    _fp8_peak(h, dtypes)
    result = at({**flags, "fp8": "--dtype"}, search, m, get_roof(h, kind, dtypes[0]), gpus=gpus, gpus_per_node=per_node,
                seq=args.seq, global_batch=args.global_batch, dtypes=dtypes, fp8_recipe=args.fp8_recipe)
    at(flags, lambda: result.best)  # none fits: the error says how far the leanest layout is from fitting
    top = list(zip(result.ranked[:args.top], result.floors(args.top)))
    if args.json:
        return json.dumps({
            "workload": "plan", "accounting": "refined", "model": m.name, "gpu": h.key, "roof": kind, "nodes": args.nodes,
            "beyond_trained_context": bool(_beyond_context(m, args.seq)),
            "gpus_per_node": args.gpus_per_node, "gpus": gpus, "seq": args.seq, "global_batch": args.global_batch,
            "hbm_usable": h.usable_capacity, "layouts_priced": result.priced, "layouts_fitting": result.fitting,
            "layouts": [{"tp": e.layout.tp, "cp": e.layout.cp, "pp": e.layout.pp, "dp": e.layout.dp, "ep": e.layout.ep,
                         "micro_batch": e.layout.micro_batch, "micro_batches": e.layout.micro_batches,
                         "schedule": e.layout.schedule, "chunks": e.layout.chunks, "recompute": e.layout.recompute,
                         "zero_stage": e.layout.zero_stage, "dtype": e.layout.dtype,
                         "fp8_recipe": e.layout.recipe.name if e.layout.recipe else None,
                         "memory_bytes": e.memory, "time_s": e.time, "mfu": e.mfu,
                         "floor_time_s": f.time, "floor_mfu": f.mfu, "parts_s": dict(e.parts)} for e, f in top],
        }, indent=2)
    lines = [f"layouts for training {m.title} on {gpus:,} {h.short}s ({nodes:,} node{'s' if nodes > 1 else ''} of "
             f"{per_node}), "
             f"{args.global_batch:,} sequences of {args.seq:,} tokens per step:",
             f"  {result.priced:,} layouts priced, {result.fitting:,} fit in {fmt(h.usable_capacity, 'B')} of usable "
             + ("HBM; ranked by the calibrated estimate, the datasheet floor beside" if kind == "calibrated" else
                "HBM; ranked by the datasheet floor" + ("" if args.roof else f" (no calibrated roof for the {h.short})"))]
    for rank, (e, f) in enumerate(top, 1):
        lines.append(f"{rank}. {e.layout.describe()}")
        step = (f"estimate {fmt(e.time, 's')} (MFU {e.mfu:.1%}), floor {fmt(f.time, 's')}" if kind == "calibrated"
                else f"floor {fmt(f.time, 's')} (MFU {f.mfu:.1%})")
        lines.append(f"   memory {fmt(e.memory, 'B')} per GPU; {step}; bubble {fmt(e.parts['bubble'], 's')}, "
                     f"exposed communication {fmt(e.exposed, 's')}")
    return "\n".join(lines + _beyond_context(m, args.seq))
