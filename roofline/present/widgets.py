"""The book's explorers (chapter 1's decode explorer, and every later one): each pre-renders its frames
with the book's charts and hands them to :func:`roofline.present.frames.frame_explorer`, which links the
controls to the frames in the browser, so they work live and on the static page.
"""

from __future__ import annotations

import math
from typing import Sequence

import matplotlib
import matplotlib.pyplot as plt
import numpy as np

from roofline.core.hardware import Hardware, get_hardware
from roofline.workloads.inference import compute_bound_batch, decode_step, prefill
from roofline.workloads.memory import fit_summary, fit_verdict, kv_cache_capacity_tokens, training_footprint
from roofline.core.model import Model, load_model
from roofline.present.plot import PALETTE, legend_below, memory_bars, roofline_chart, style
from roofline.workloads.memory import fits_in_hbm, weight_bytes
from roofline.workloads.quantization import check_math
from roofline.core.roof import Roof, as_roof, attainable_flops, predict
from roofline.core.units import dtype_bytes, fmt
from roofline.present.frames import Blitter, FrameExplorer, frame_explorer, png_bytes
from roofline.present.tables import misfit
from roofline.core.calibration import get_roof
from roofline.core.cluster_roof import ROOF_KINDS
from roofline.parallel.cluster import PART_ORDER
from roofline.parallel.context_parallel import plan_context_parallel
from roofline.parallel.data_parallel import data_parallel_step
from roofline.parallel.moe import expert_parallel_step
from roofline.parallel.tensor_parallel import weights_per_gpu
from roofline.parallel.pipeline import bubble_fraction, simulate
from roofline.parallel.tensor_parallel import decode_by_degree
from roofline.present.plot import PART_COLORS, deployment_frontier_chart, pipeline_timeline_chart, timing_bars
from roofline.serving.capacity import check_context, serving_capacity
from roofline.serving.deployment import Deployment, Workload, frontier, sustain
from roofline.serving.speculative import load_draft, speculate
from roofline.workloads import tiling
from roofline.workloads.training import plan_training

__all__ = ["FrameExplorer", "frame_explorer", "png_bytes", "Blitter",  # the mechanism, re-exported
           "decode_explorer", "memory_explorer", "recompute_explorer", "serving_explorer", "attention_explorer",
           "quantization_explorer", "tp_explorer", "moe_explorer", "data_parallel_explorer"]


def decode_explorer(model: Model | str = "llama-3-8b", hardware: Hardware | str = "h100-sxm", *,
                    batches: Sequence[int] | None = None,
                    contexts: Sequence[int] = (0, 2048, 8192, 32768), accounting: str = "text",
                    dtype: str = "bf16") -> FrameExplorer:
    """Chapter 1's batch slider: the decode step of ``model`` as a point under ``hardware``'s roof.

    Every (batch, context) pair is computed in one vectorized call; each frame shows the point,
    the path it travels as the batch grows, and the numbers beside it. By default the batches are
    the powers of two up to 1024 plus the two batches either side of the ridge at no context, so
    that the crossing shows. Given a GPU (not a bare roof), a frame whose weights and KV cache do not
    fit in its HBM says so, and its point is drawn hollow.
    """

    m = load_model(model)
    roof = as_roof(hardware, dtype)
    if batches is None:
        cross = compute_bound_batch(m, roof, dtype=dtype, accounting=accounting)
        batches = sorted({*(2**i for i in range(11)), *((cross - 1, cross) if cross and cross > 1 else ())})
    batches = [int(x) for x in batches]
    hw = None if isinstance(hardware, Roof) else get_hardware(hardware)
    kv_tokens = None if hw is None else (kv_cache_capacity_tokens(m, hw, dtype=dtype) or 0)
    b = np.asarray(batches, dtype=float)[None, :]
    c = np.asarray(contexts, dtype=float)[:, None]
    step = decode_step(m, b, c, dtype=dtype, accounting=accounting)
    pred = predict(step, roof)
    intensity = np.broadcast_to(step.intensity, pred.time.shape)
    flops_s = np.broadcast_to(pred.achieved_flops, pred.time.shape)
    tokens_s = b / pred.time
    bound = pred.bound

    figures: dict[int, tuple] = {}

    def frame(batch, context):
        j, i = list(batches).index(batch), list(contexts).index(context)
        if i not in figures:
            fig = roofline_chart(roof, intensity=(0.5, 3e3), title=f"{m.title} decode on {roof.label}")
            ax = fig.axes[0]
            ax.plot(intensity[i], flops_s[i] / 1e12, ".-", color="#999999", lw=1, ms=5, zorder=3,
                    label=f"batch {batches[0]} to {batches[-1]}")
            (point,) = ax.plot([], [], "D", ms=10, color=PALETTE["vermillion"], mec="black", zorder=6)
            legend_below(ax)
            figures[i] = (fig, point, Blitter(fig, [point]))
        fig, point, blitter = figures[i]
        point.set_data([intensity[i, j]], [flops_s[i, j] / 1e12])
        head = f"<b>batch {batch}, context {context:,} tokens</b>: "
        if kv_tokens is not None and batch * context > kv_tokens:
            point.set_markerfacecolor("none")
            need = m.params * dtype_bytes(dtype) + batch * context * m.kv_bytes_per_token(dtype)
            most = kv_tokens // context if context else 0
            html = head + (
                f"<b>does not fit</b>: the weights and the KV cache need {fmt(need, 'B')}, the {hw.short} holds "
                f"{fmt(hw.usable_capacity, 'B')} usable; at this context at most {most:,} sequences fit. "
                f"The hollow point is what the roofline would allow if the memory were there."
            )
            return blitter.png(), html
        point.set_markerfacecolor(PALETTE["vermillion"])
        html = head + (
            f"intensity {intensity[i, j]:,.1f} FLOP/B, "
            f"{bound[i, j]}-bound, {fmt(flops_s[i, j], 'FLOP/s')} attainable, "
            f"{fmt(pred.time[i, j], 's')} per step, <b>{tokens_s[i, j]:,.0f} tokens/s</b>, "
            f"{fmt(100 * pred.utilization[i, j], '%', 3)} of peak"
        )
        return blitter.png(), html

    try:
        explorer = frame_explorer([("batch", batches), ("context", [(f"{x:,}", x) for x in contexts])], frame,
                                  f"{m.name} decode on {roof.label}: batch {batches[0]}..{batches[-1]}, "
                                  f"context {contexts[0]}..{contexts[-1]}, {len(batches) * len(contexts)} frames")
    finally:
        for fig, *_ in figures.values():
            plt.close(fig)
    return explorer


# Footprint parts that are not model state (weights, gradients, optimizer).
_NOT_STATE = ("activations", "recompute working set", "logits")


def _set_bar(rects, total_text, footprint, limit: float) -> None:
    """Redraw a one-bar :func:`~roofline.present.plot.memory_bars` chart for ``footprint``: each part's rectangle
    after the last, and the total at the bar's end (at the axis edge, with an arrow, past ``limit`` GB)."""
    left = 0.0
    for rect, part in zip(rects, footprint.parts):
        width = float(footprint.parts[part]) / 1e9
        rect.set_x(left)
        rect.set_width(width)
        left += width
    clipped = left > limit
    total_text.xy = (min(left, limit), total_text.xy[1])
    total_text.set_text(f"{left:,.0f} GB →" if clipped else f"{left:,.1f} GB")
    total_text.set_horizontalalignment("right" if clipped else "left")
    total_text.xyann = (-4, 12) if clipped else (4, 0)


def memory_explorer(model: Model | str = "llama-3-8b", *, gpus: int = 8, zero_stage: int = 3,
                    micro_batches: Sequence[int] = (1, 2, 4, 8),
                    seqs: Sequence[int] = (1024, 2048, 4096, 8192, 16384, 32768),
                    policies: Sequence[str] = ("none", "selective", "full"), flash: bool = False,
                    capacities: Sequence[str] = ("h100-sxm", "h200-sxm")) -> FrameExplorer:
    """Chapter 2's sliders: micro-batch, sequence length and recompute policy against HBM capacity.

    Each frame is one stacked bar of per-GPU training memory (model state under ZeRO ``zero_stage``
    on ``gpus`` GPUs, activations, logits) with the capacities of ``capacities`` marked, and a line
    saying which GPUs it fits on.
    """

    m = load_model(model)
    gpus_hw = [get_hardware(c) for c in capacities]
    grid = {(b, s, p): training_footprint(m, s, b, gpus=gpus, zero_stage=zero_stage, recompute=p, flash=flash)
            for b in micro_batches for s in seqs for p in policies}
    first = next(iter(grid.values()))
    limit = 2 * max(h.usable_capacity for h in gpus_hw) / 1e9  # longer bars are clipped, their totals still shown
    fig = memory_bars({"per GPU": first}, capacities, xmax=limit,
                      title=f"{m.title}, {gpus} GPUs, ZeRO-{zero_stage}, {'flash' if flash else 'explicit'} attention")
    fig.set_size_inches(7, 3.8)
    rects = list(fig.axes[0].patches)
    total_text = fig.axes[0].texts[0]  # the total, drawn before the capacity labels
    blitter = None

    def frame(b, s, p):
        nonlocal blitter
        fp = grid[(b, s, p)]
        _set_bar(rects, total_text, fp, limit)
        if blitter is None:
            blitter = Blitter(fig, rects + [total_text])
        verdict = fit_summary(float(fp.total), gpus_hw, host=float(fp.host))
        state = sum(float(v) for k, v in fp.parts.items() if k not in _NOT_STATE)
        terms = [f"model state {fmt(state, 'B')}", f"activations {fmt(float(fp['activations']), 'B')}"]
        if float(fp["recompute working set"]) > 0:
            terms.append(f"one layer's recompute working set {fmt(float(fp['recompute working set']), 'B')}")
        terms.append(f"fp32 logits {fmt(float(fp['logits']), 'B')}")
        html = (f"<b>micro-batch {b}, {s:,} tokens, recompute: {p}</b>: {fmt(float(fp.total), 'B')} per GPU = "
                f"{' + '.join(terms)}; <b>{verdict}</b>")
        return blitter.png(), html

    try:
        explorer = frame_explorer(
            [("micro-batch", micro_batches), ("sequence", [(f"{s:,}", s) for s in seqs]), ("recompute", policies)],
            frame, f"{m.name} training memory: micro-batch x sequence x recompute, "
                   f"{len(micro_batches) * len(seqs) * len(policies)} frames")
    finally:
        plt.close(fig)
    return explorer


# The explorer's policies: a label for the control, the recompute policy, whether activations are offloaded.
RECOMPUTE_CHOICES = (("none", "none", False), ("selective", "selective", False), ("full", "full", False),
                     ("every 2", "every-2", False), ("every 4", "every-4", False),
                     ("offload", "none", True), ("offload + full", "full", True))


def recompute_explorer(model: Model | str = "llama-3-8b", *, gpus: int = 8, zero_stage: int = 3, achieved: float = 0.5,
                       micro_batches: Sequence[int] = (1, 2, 4),
                       seqs: Sequence[int] = (2048, 4096, 8192, 16384, 32768),
                       choices=RECOMPUTE_CHOICES, capacities: Sequence[str] = ("h100-sxm", "h200-sxm"),
                       hardware: str = "h100-sxm") -> FrameExplorer:
    """Chapter 3's sliders: sequence length, micro-batch and policy (checkpoint spacing and offloading
    among them). Each frame is the per-GPU memory bar of :func:`~roofline.workloads.training.plan_training`
    against the capacities of ``capacities``, and a readout of the step on ``hardware``: FLOPs, time,
    MFU and HFU with the GPU running its FLOPs at ``achieved`` of peak."""

    m = load_model(model)
    gpus_hw = [get_hardware(c) for c in capacities]
    grid = {(b, s, label): plan_training(m, hardware, seq=s, micro_batch=b, gpus=gpus, zero_stage=zero_stage,
                                         recompute=policy, offload=offload, achieved=achieved)
            for b in micro_batches for s in seqs for label, policy, offload in choices}
    first = next(iter(grid.values()))
    limit = 2 * max(h.usable_capacity for h in gpus_hw) / 1e9
    fig = memory_bars({"per GPU": first.footprint}, capacities, xmax=limit,
                      title=f"{m.title}, {gpus} GPUs, ZeRO-{zero_stage}, flash attention")
    fig.set_size_inches(7, 3.8)
    rects = list(fig.axes[0].patches)
    total_text = fig.axes[0].texts[0]
    blitter = None

    def frame(s, b, label):
        nonlocal blitter
        plan = grid[(b, s, label)]
        fp = plan.footprint
        _set_bar(rects, total_text, fp, limit)
        if blitter is None:
            blitter = Blitter(fig, rects + [total_text])
        verdict = fit_summary(float(fp.total), gpus_hw, host=float(fp.host))
        extra = plan.hardware_flops / plan.model_flops - 1
        hidden = ("all of it hidden behind the compute" if plan.offload_exposed == 0
                  else f"{fmt(plan.offload_exposed, 's')} of it not hidden")
        offload = f"; {fmt(plan.offload_bytes, 'B')} sent to host memory, {hidden}" if plan.offload else ""
        html = (f"<b>micro-batch {b}, {s:,} tokens, {label}</b>: {fmt(float(fp.total), 'B')} per GPU "
                f"(activations {fmt(float(fp['activations']), 'B')}, working set "
                f"{fmt(float(fp['recompute working set']), 'B')}); <b>{verdict}</b>. "
                f"Per step: {fmt(plan.model_flops, 'FLOP')} of model FLOPs, {extra:.0%} more run on the "
                f"{plan.hardware.short}{offload}; at {achieved:.1%} of peak, {fmt(plan.time, 's')}, "
                f"<b>MFU {plan.mfu:.1%}, HFU {plan.hfu:.1%}</b>")
        return blitter.png(), html

    try:
        explorer = frame_explorer(
            [("sequence", [(f"{s:,}", s) for s in seqs]), ("micro-batch", micro_batches),
             ("policy", [c[0] for c in choices])],
            frame, f"{m.name} training step: sequence x micro-batch x policy, "
                   f"{len(micro_batches) * len(seqs) * len(choices)} frames", start=[min(1, len(seqs) - 1), 0, 0])
    finally:
        plt.close(fig)
    return explorer


def serving_explorer(models: Sequence[str] = ("llama-2-7b", "llama-3-8b", "gemma-2-9b"),
                     gpus: Sequence[str] = ("h100-sxm", "h200-sxm"),
                     contexts: Sequence[int] = (1000, 2000, 4000, 8000), kv_dtypes: Sequence[str] = ("bf16", "fp8"),
                     block_sizes: Sequence[int] = (16, 256)) -> FrameExplorer:
    """Chapter 5's serving planner on sliders: model, GPU, context, KV format and block size.

    Each frame is one bar of the server's HBM at the largest batch that fits (weights, the cache the
    tokens fill, the empty ends of the last blocks, what is left), and a line with the largest batch,
    the time per output token and the throughput (:func:`roofline.serving.serving_capacity`, datasheet roof).
    A context past a model's trained length says so instead.
    """

    hws = [get_hardware(g) for g in gpus]
    top = 1.05 * max(h.usable_capacity for h in hws) / 1e9
    colors = (PALETTE["blue"], PALETTE["orange"], PALETTE["vermillion"], "#dddddd")
    names = ("weights", "KV cache in use", "paging waste (last blocks)", "free")
    with plt.rc_context({"font.size": 10}):
        fig, ax = plt.subplots(figsize=(7, 2.4), layout="constrained")
        rects = [ax.barh(0, 1, left=0, color=c, label=n, edgecolor="white")[0] for c, n in zip(colors, names)]
        line = ax.axvline(1, color="black", lw=1.5, label="usable HBM")
        ax.set_xlim(0, top)
        ax.set_yticks([])
        ax.set_xlabel("server HBM (GB)")
        ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.02), ncol=3, fontsize=9.5, frameon=False)
    blitter = None

    def frame(model, gpu, context, kv, block):
        nonlocal blitter
        m, h = load_model(model), get_hardware(gpu)
        head = f"<b>{m.title} on one {h.short}, {context:,} tokens, {kv} KV, blocks of {block}</b>: "
        try:
            check_context(m, context)
        except ValueError:
            plan = None
        else:
            plan = serving_capacity(m, h, context, kv_dtype=kv, block_size=block)
        if plan is None:
            parts = (0.0, 0.0, 0.0, 0.0)
        else:
            used = plan.batch * (plan.kv_per_sequence - plan.waste_per_sequence)
            waste = plan.batch * plan.waste_per_sequence
            parts = (plan.weights, used, waste, plan.usable - plan.weights - used - waste)
        left = 0.0
        for rect, part in zip(rects, parts):
            rect.set_x(left / 1e9)
            rect.set_width(max(part, 0.0) / 1e9)
            left += max(part, 0.0)
        line.set_xdata([h.usable_capacity / 1e9] * 2)
        if blitter is None:
            blitter = Blitter(fig, [*rects, line])
        if plan is None:
            html = head + (f"beyond the {m.max_position_embeddings:,} tokens {m.title} was trained for "
                           "(max_position_embeddings); pick a shorter context")
        elif not plan.fits:
            html = head + plan.verdict()
        else:
            html = head + (f"<b>{plan.max_batch:,} sequences fit</b> ({fmt(plan.kv_per_sequence, 'B')} each, "
                           f"{fmt(plan.batch * plan.waste_per_sequence, 'B')} in all left empty in last blocks); "
                           f"at that batch {fmt(plan.step_time, 's')} per output token, "
                           f"<b>{fmt(plan.tokens_per_s, 'tokens/s')}</b>, {plan.bound}-bound, "
                           f"compute {fmt(100 * plan.utilization, '%', 2)} busy")
        return blitter.png(), html

    try:
        explorer = frame_explorer(
            [("model", [(load_model(m).title, m) for m in models]), ("GPU", [(h.short, h.key) for h in hws]),
             ("context", [(f"{c:,}", c) for c in contexts]), ("KV format", list(kv_dtypes)),
             ("block size", list(block_sizes))],
            frame, f"serving planner: {len(models)} models x {len(hws)} GPUs x {len(contexts)} contexts x "
                   f"{len(kv_dtypes)} KV formats x {len(block_sizes)} block sizes")
    finally:
        plt.close(fig)
    return explorer


def _kib(nbytes: float) -> str:
    """An on-chip size as the vendors print it: KiB below a MiB, else MiB."""
    return f"{nbytes / 2**20:g} MiB" if nbytes >= 2**20 else f"{nbytes / 2**10:g} KiB"


def attention_explorer(hardware: Hardware | str = "h100-sxm", *, heads: int = 32, kv_heads: int = 8,
                       seqs: Sequence[int] = (1024, 2048, 4096, 8192, 16384, 32768, 65536),
                       head_dims: Sequence[int] = (64, 128, 256),
                       on_chips: Sequence[float] | None = None, live_scores: int = 2) -> FrameExplorer:
    """Chapter 4's sliders: sequence length, head dimension and on-chip memory per SM against the
    roofline, for explicit and flash attention's causal forward pass (one sequence, one layer).

    Each frame places both variants under ``hardware``'s datasheet roof and says what each moves, its
    intensity, its time under the kernel rule and the memory it allocates (with the verdict against the
    GPU's capacity). The flash kernel's traffic is counted as Dao et al. count it, with nothing from the
    L2, so that the on-chip slider shows its effect. ``on_chips`` defaults to 64 KiB, the GPU's shared
    memory per SM, 1 MiB and 16 MiB.
    """

    hw = get_hardware(hardware)
    roof = as_roof(hw)
    if on_chips is None:
        if hw.shared_memory_per_sm is None:
            raise ValueError(f"the catalog gives no shared memory per SM for the {hw.short}; pass on_chips (bytes)")
        on_chips = sorted({64 * 2**10, hw.shared_memory_per_sm, 2**20, 16 * 2**20})
    explicit, flash = {}, {}
    for s_ in seqs:
        for d in head_dims:
            e = tiling.explicit_attention(s_, d, heads, kv_heads=kv_heads, live_scores=live_scores)
            explicit[(s_, d)] = (e, float(predict(e.breakdown, roof, timing="kernel").time))
            for m in on_chips:
                f = tiling.flash_attention(s_, d, heads, kv_heads=kv_heads, on_chip=m)
                flash[(s_, d, m)] = (f, float(predict(f.breakdown, roof, timing="kernel").time))
    fig = roofline_chart(roof, intensity=(1, 1e5), title=f"Causal attention forward on the {hw.short}, {heads} heads")
    ax = fig.axes[0]
    (p_exp,) = ax.plot([], [], "o", ms=10, color=PALETTE["vermillion"], mec="black", zorder=6, label="explicit")
    (p_fl,) = ax.plot([], [], "D", ms=10, color=PALETTE["blue"], mec="black", zorder=6, label="flash")
    legend_below(ax)
    blitter = None

    def frame(s_, d, on_chip):
        nonlocal blitter
        (e, t_exp), (f, t_fl) = explicit[(s_, d)], flash[(s_, d, on_chip)]
        i_exp, i_fl = e.flops / e.bytes, f.flops / f.bytes
        p_exp.set_data([i_exp], [float(attainable_flops(i_exp, roof)) / 1e12])
        p_fl.set_data([i_fl], [float(attainable_flops(i_fl, roof)) / 1e12])
        if blitter is None:
            blitter = Blitter(fig, [p_exp, p_fl])
        html = (f"<b>{s_:,} tokens, head dimension {d}, {_kib(on_chip)} on chip</b>: "
                f"<b>explicit</b> moves {fmt(e.bytes, 'B')}, intensity {i_exp:,.0f} FLOP/B, "
                f"{fmt(t_exp, 's')}, peak memory {fmt(e.peak_bytes, 'B')} ({fit_verdict(e.peak_bytes, hw)}); "
                f"<b>flash</b> (blocks of {f.block:,.0f} rows) moves {fmt(f.bytes, 'B')}, intensity {i_fl:,.0f} FLOP/B, "
                f"{fmt(t_fl, 's')}, peak memory {fmt(f.peak_bytes, 'B')}: "
                + (f"<b>flash is {t_exp / t_fl:,.1f}x faster</b>" if t_fl <= t_exp else
                   f"<b>flash is {t_fl / t_exp:,.1f}x slower</b> (too little on chip for a head this wide)"))
        return blitter.png(), html

    try:
        explorer = frame_explorer(
            [("sequence", [(f"{x:,}", x) for x in seqs]), ("head dim", list(head_dims)),
             ("on chip", [(_kib(x), x) for x in on_chips])],
            frame, f"attention on {hw.short}: sequence x head dim x on-chip memory, "
                   f"{len(seqs) * len(head_dims) * len(on_chips)} frames",
            start=[list(seqs).index(16384) if 16384 in seqs else 0,
                   list(head_dims).index(128) if 128 in head_dims else 0,
                   list(on_chips).index(hw.shared_memory_per_sm) if hw.shared_memory_per_sm in on_chips else 0])
    finally:
        plt.close(fig)
    return explorer


def quantization_explorer(model: Model | str = "llama-3-8b", hardware: Hardware | str = "h100-sxm", *,
                          context: int = 4096, prompt: int = 4096,
                          weights: Sequence = (("bf16", "bf16"), ("fp8", "fp8"), ("int8", "int8"),
                                               ("int4, g128", "int4-g128")),
                          maths: Sequence[str] = ("bf16", "fp8"), kvs: Sequence[str] = ("bf16", "fp8"),
                          batches: Sequence[int] = (1, 16, 64, 256)) -> FrameExplorer:
    """Chapter 6's sliders: weight format, math format, KV-cache format and decode batch.

    Each frame draws the roof of the math format with two points, one decode step (``batch`` sequences
    of ``context`` cached tokens) and one prefill (``prompt`` tokens), and reads out the memory held
    (weights and KV cache against the GPU's usable HBM), the decode and prefill times and what bounds
    them. Quantized weights keep the embedding table, output head and norms in bf16, as in
    :data:`roofline.workloads.quantization.SCHEMES`.
    """
    m, h = load_model(model), get_hardware(hardware)
    weights = [w if isinstance(w, tuple) else (w, w) for w in weights]
    for math_format in maths:
        check_math(h, math_format)
    b = np.asarray(batches, dtype=float)
    results = {}
    for _, w in weights:
        emb = None if w == "bf16" else "bf16"
        for mf in maths:
            for kv in kvs:
                kw = dict(weights_dtype=w, math_dtype=mf, kv_dtype=kv, embeddings_dtype=emb)
                step = decode_step(m, b, context, **kw)
                dec = predict(step, h)
                pre_work = prefill(m, prompt, **kw)
                pre = predict(pre_work, h)
                held = weight_bytes(m, **kw) + b * m.kv_cache_bytes(context, kv)
                results[w, mf, kv] = (step, dec, pre_work, pre, weight_bytes(m, **kw), held)

    figures: dict[str, tuple] = {}

    def frame(w, mf, kv, batch):
        step, dec, pre_work, pre, wb, held = results[w, mf, kv]
        j = list(batches).index(batch)
        if mf not in figures:
            roof = Roof(f"{h.short}, {mf} math", h.peak_flops(mf), h.hbm_bandwidth, "datasheet", mf)
            fig = roofline_chart(roof, intensity=(0.5, 1e5), title=f"{m.title} on the {h.short}")
            ax = fig.axes[0]
            (d,) = ax.plot([], [], "D", ms=10, color=PALETTE["vermillion"], mec="black", zorder=6,
                           label=f"decode step, {context:,} tokens of context")
            (p,) = ax.plot([], [], "s", ms=9, color=PALETTE["green"], mec="black", zorder=6,
                           label=f"prefill of {prompt:,} tokens")
            legend_below(ax)
            figures[mf] = (fig, d, p, Blitter(fig, [d, p]))
        fig, d, p, blitter = figures[mf]
        fits = fits_in_hbm(held[j], h)
        d.set_data([np.asarray(step.intensity)[j]], [np.asarray(dec.achieved_flops)[j] / 1e12])
        d.set_markerfacecolor(PALETTE["vermillion"] if fits else "none")
        p.set_data([pre_work.intensity], [pre.achieved_flops / 1e12])
        t = np.asarray(dec.time)[j]
        verdict = "fits" if fits else f"<b>does not fit by {fmt(held[j] - h.usable_capacity, 'B')}</b>"
        # a batch that does not fit has no decode step to time (its point is drawn hollow)
        decode = (f"decode step {fmt(t, 's')}, {fmt(t / batch, 's')} per token, {np.asarray(dec.bound)[j]}-bound"
                  if fits else "no decode step at this batch")
        # one prompt's prefill holds the weights and that prompt's cache: where even that is over, no time either
        one = wb + m.kv_cache_bytes(prompt, kv)
        prefill_text = (f"prefill {fmt(pre.time, 's')}, {pre.bound}-bound" if fits_in_hbm(one, h)
                        else f"no prefill either: one prompt does not fit by {fmt(one - h.usable_capacity, 'B')}")
        html = (f"<b>weights {w}, math {mf}, KV cache {kv}, batch {batch}</b>: "
                f"memory {fmt(held[j], 'B')} (weights {fmt(wb, 'B')}, KV cache {fmt(held[j] - wb, 'B')}), {verdict} "
                f"in the {fmt(h.usable_capacity, 'B')} usable on the {h.short}; "
                f"{decode}; {prefill_text}.")
        return blitter.png(), html

    try:
        explorer = frame_explorer([("weights", weights), ("math", list(maths)), ("KV cache", list(kvs)),
                                   ("batch", list(batches))], frame,
                                  f"{m.name} on {h.short}: weights {', '.join(x for x, _ in weights)}; math "
                                  f"{', '.join(maths)}; KV {', '.join(kvs)}; batch {batches[0]}..{batches[-1]}, "
                                  f"{len(weights) * len(maths) * len(kvs) * len(batches)} frames")
    finally:
        for fig, *_ in figures.values():
            plt.close(fig)
    return explorer


def data_parallel_explorer(models: Sequence[str] = ("llama-3-8b", "llama-3-70b"), hardware: Hardware | str = "h100-sxm", *,
                           per_node: Sequence[int] = (4, 8), nodes: Sequence[int] = (1, 4, 32),
                           layouts: Sequence[tuple] = (("DDP", 0, False), ("ZeRO-1", 1, False), ("ZeRO-2", 2, False),
                                                       ("ZeRO-3", 3, False), ("FSDP hybrid", 3, True)),
                           tokens: Sequence[int] = (512, 2048, 8192), achieved: float = 0.5,
                           recompute: str = "full") -> FrameExplorer:
    """Chapter 7's sliders: model, GPUs per node, nodes, ZeRO stage (or FSDP hybrid sharding) and tokens per
    GPU. Each frame draws two bars, memory per GPU against the usable HBM and the step split into compute and
    exposed communication; the readout adds the link time and the MFU (:func:`~roofline.parallel.data_parallel.data_parallel_step`,
    one sequence per GPU, the GPU's FLOPs at ``achieved`` of peak). A layout that does not fit has no step: its
    frame draws no step bar and says by how much it does not fit, and its readout gives no time and no MFU
    (:func:`~roofline.present.tables.misfit`)."""

    hw = get_hardware(hardware)
    grid = {(m, g, n, label, t): data_parallel_step(m, hw, nodes=n, gpus_per_node=g, zero_stage=stage, hybrid=hybrid,
                                                    seq=t, achieved=achieved, recompute=recompute)
            for m in models for g in per_node for n in nodes for label, stage, hybrid in layouts for t in tokens}
    mem_max = 1.15 * max(hw.usable_capacity, *(float(s.footprint.total) for s in grid.values())) / 1e9
    time_max = 1.3 * max(s.time for s in grid.values()) * 1e3
    time_min = 0.5 * min(s.compute for s in grid.values()) * 1e3
    with plt.rc_context({"font.size": 10}):
        fig, (ax_m, ax_t) = plt.subplots(2, 1, figsize=(7, 3.4), layout="constrained")
    mem = ax_m.barh([0], [1], color=PALETTE["blue"], edgecolor="black", linewidth=0.4)[0]
    ax_m.axvline(hw.usable_capacity / 1e9, color="black", ls="--", lw=1)
    ax_m.annotate(f"{hw.short}: {hw.usable_capacity / 1e9:,.0f} GB usable", (hw.usable_capacity / 1e9, 0.55),
                  ha="center", fontsize=9, backgroundcolor="white")
    ax_m.set_xscale("log")
    ax_m.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax_m.set_xlim(1, mem_max)
    ax_m.set_ylim(-0.6, 0.9)
    ax_m.set_yticks([])
    ax_m.set_xlabel("memory per GPU (GB, log scale)")
    compute = ax_t.barh([0], [1], left=[time_min / 2], color=PALETTE["sky"], edgecolor="black",
                        linewidth=0.4, label="compute")[0]
    exposed = ax_t.barh([0], [0], color=PALETTE["vermillion"], edgecolor="black", linewidth=0.4,
                        label="exposed communication")[0]
    ax_t.set_xscale("log")
    ax_t.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax_t.set_xlim(time_min, time_max)
    ax_t.set_ylim(-0.6, 0.6)
    ax_t.set_yticks([])
    ax_t.set_xlabel("step time (ms, log scale)")
    ax_t.legend(loc="upper right", fontsize=9, ncol=2)
    # where the layout does not fit there is no step to draw: the bars go and this note says why
    note = ax_t.text(math.sqrt(time_min * time_max), 0, "", ha="center", va="center", fontsize=10,
                     color=PALETTE["vermillion"], fontweight="bold")
    blitter = None

    def frame(m, g, n, label, t):
        nonlocal blitter
        s = grid[(m, g, n, label, t)]
        over = misfit(s)
        mem.set_width(float(s.footprint.total) / 1e9)
        compute.set_width(s.compute * 1e3 - time_min / 2)
        exposed.set_x(s.compute * 1e3)
        exposed.set_width(s.exposed * 1e3)
        compute.set_visible(not over)
        exposed.set_visible(not over)
        note.set_text(f"{over}: no step" if over else "")
        if blitter is None:
            blitter = Blitter(fig, [mem, compute, exposed, note])
        head = f"<b>{s.model.title}, {n} node{'s' if n > 1 else ''} x {g} = {s.gpus} GPUs, {label}, {t:,} tokens per GPU</b>: "
        if over:
            html = (head + f"{fmt(float(s.footprint.total), 'B')} per GPU, <b>{over}</b> in the "
                    f"{fmt(hw.usable_capacity, 'B')} usable on the {hw.short}: no step to time")
        else:
            html = (head + f"{fmt(float(s.footprint.total), 'B')} per GPU ({fit_verdict(float(s.footprint.total), hw)}); "
                    f"compute {fmt(s.compute, 's')}, link busy {fmt(s.communication, 's')}, exposed {fmt(s.exposed, 's')}; "
                    f"<b>MFU {s.mfu:.1%}</b> (kernels at {achieved:.0%} of peak, exposed time added)")
        return blitter.png(), html

    # the page opens on a layout that fits (the first, in the slider's order, at the other sliders' start)
    first_fit = next((i for i, (label, _, _) in enumerate(layouts)
                      if not misfit(grid[(models[0], per_node[-1], nodes[min(1, len(nodes) - 1)], label, tokens[0])])), 0)
    try:
        explorer = frame_explorer(
            [("model", [(load_model(m).title, m) for m in models]), ("GPUs per node", per_node), ("nodes", nodes),
             ("layout", [l[0] for l in layouts]), ("tokens per GPU", [(f"{t:,}", t) for t in tokens])],
            frame, f"data-parallel step: model x GPUs per node x nodes x layout x tokens, {len(grid)} frames",
            start=[0, len(per_node) - 1, min(1, len(nodes) - 1), first_fit, 0])
    finally:
        plt.close(fig)
    return explorer


def speculation_explorer(target: Model | str = "llama-3-70b", drafts: Sequence[str] = ("llama-3.2-1b", "llama-3-8b"),
                         hardware: Hardware | str = "h200-sxm", *, gpus: int = 8, context: int = 2048,
                         alphas: Sequence[float] = (0.05, 0.1, 0.3, 0.6, 0.7, 0.8, 0.9), gammas: Sequence[int] = (2, 4, 8),
                         batches: Sequence[int] = (1, 32, 256)) -> FrameExplorer:
    """Chapter 12's sliders: draft model, acceptance rate, draft length and batch.

    Each frame draws the time per output token of plain decoding (its kernels and its all-reduces) beside
    speculation's, split into the draft's steps and the verify step (per token generated), with the target
    and the draft each split ``gpus`` ways by tensor parallelism on ``hardware`` (datasheet kernels, the
    all-reduces priced as chapter 8 prices them), and reads out the tokens per verify step, the speed-up and
    the share of FLOPs spent on tokens plain decoding would not compute
    (:func:`roofline.serving.speculative.speculate` with ``tp=gpus``). The time axis is scaled to each
    batch's longest bar.
    """

    h = get_hardware(hardware)
    m = load_model(target)
    plans = {(d, a, g): speculate(m, d, h, alpha=a, gamma=g, batch=np.asarray(batches, dtype=float),
                                  context=context, tp=gpus) for d in drafts for a in alphas for g in gammas}
    figures: dict = {}

    def figure(j):
        if j not in figures:
            top = 1.15e3 * max(max(float(np.asarray(p.decode_time)[j]), float(np.asarray(p.time_per_token)[j]))
                               for p in plans.values())
            with plt.rc_context({"font.size": 10}):
                fig, ax = plt.subplots(figsize=(7, 2.8), layout="constrained")
                kernels = ax.barh(1, 1, color=PALETTE["blue"], label="plain step: kernels")[0]
                exchange = ax.barh(1, 1, left=1, color=PALETTE["vermillion"], label="plain step: all-reduces")[0]
                draft = ax.barh(0, 1, color=PALETTE["orange"], label="draft steps, per token")[0]
                check = ax.barh(0, 1, left=1, color=PALETTE["green"], label="verify step, per token")[0]
                ax.set_yticks([0, 1], ["speculative", "plain"])
                ax.set_xlim(0, top)
                ax.set_xlabel(f"time per output token at batch {batches[j]} (ms)")
                ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.02), ncol=2, fontsize=9.5, frameon=False)
            bars = (kernels, exchange, draft, check)
            figures[j] = (fig, bars, Blitter(fig, list(bars)))
        return figures[j]

    def frame(d, a, g, batch):
        p = plans[d, a, g]
        j = list(batches).index(batch)
        fig, (kernels, exchange, draft, check), blitter = figure(j)
        e = float(p.tokens_per_step)
        t0, td, tv, x0 = (float(np.asarray(x)[j]) for x in (p.decode_time, p.draft_time, p.verify_time, p.decode_exchange))
        kernels.set_width((t0 - x0) * 1e3)
        exchange.set_x((t0 - x0) * 1e3)
        exchange.set_width(x0 * 1e3)
        draft.set_width(g * td / e * 1e3)
        check.set_x(g * td / e * 1e3)
        check.set_width(tv / e * 1e3)
        speed = float(np.asarray(p.speedup)[j])
        verdict = "pays" if speed > 1 else "<b>does not pay</b>"
        html = (f"<b>{m.title}, draft {load_draft(d).title}, α {a:g}, γ {g}, batch {batch}</b>: {e:.2f} tokens per "
                f"verify step; {fmt((g * td + tv) / e, 's')} per token against {fmt(t0, 's')} plain "
                f"({fmt(x0, 's')} of it in all-reduces), <b>{speed:.2f}×</b>, speculation {verdict}; "
                f"{fmt(100 * float(np.asarray(p.wasted)[j]), '%', 2)} of its FLOPs beyond plain decoding's")
        return blitter.png(), html

    try:
        explorer = frame_explorer(
            [("draft", [(load_draft(d).title, d) for d in drafts]), ("α", list(alphas)), ("γ", list(gammas)),
             ("batch", list(batches))], frame,
            f"speculative decoding of {m.name} on {gpus} × {h.short} (tensor parallel): {len(drafts)} drafts x "
            f"{len(alphas)} acceptance rates x {len(gammas)} draft lengths x {len(batches)} batches",
            start=[0, list(alphas).index(0.8) if 0.8 in alphas else 0, 1 if len(gammas) > 1 else 0, 0])
    finally:
        for fig, _, _ in figures.values():
            plt.close(fig)
    return explorer


__all__ += ["speculation_explorer"]


def tp_explorer(models: Sequence[str] = ("llama-3-8b", "llama-3-70b", "llama-3.1-405b"),
                hardware: Hardware | str = "h100-sxm", *, degrees: Sequence[int] = (1, 2, 4, 8, 16),
                batches: Sequence[int] = (1, 64), contexts: Sequence[int] = (1024, 32768),
                tiers: Sequence = (("NVLink in a node, InfiniBand across nodes", None),)) -> FrameExplorer:
    """Chapter 8's sliders: model, tensor-parallel degree, decode batch, context and, when ``tiers`` names
    more than one, the pricing of the all-reduces (``tier=`` of :func:`roofline.core.collectives.collective_cost`:
    None, the default and the chapter's, prices a group that spans nodes hierarchically, NVLink inside
    each node of eight and InfiniBand between; a tier name puts every byte on that tier).

    Each frame draws the decode step at every degree as a bar split into compute (one GPU's share of the
    kernels) and the collectives, the chosen degree outlined, and reads out the memory per GPU against the
    usable HBM, the time per output token, the tokens per second per GPU and the collectives' share.
    """

    hw = get_hardware(hardware)
    tiers = [x if isinstance(x, tuple) else (x, x) for x in tiers]
    titles = {m: load_model(m).title for m in models}
    rows = {(m, b, c, tier): decode_by_degree(m, hw, degrees, batch=b, context=c, tier=tier)
            for m in models for b in batches for c in contexts for _, tier in tiers}
    figures: dict = {}

    def frame(model, t, batch, context, tier=tiers[0][1]):
        points = rows[model, batch, context, tier]
        key = (model, batch, context, tier)
        if key not in figures:
            with style():
                fig, ax = plt.subplots(figsize=(7, 3.4), layout="constrained")
            pos = np.arange(len(degrees))
            # a degree that does not fit gets no bar: it has no step to time
            compute = np.array([p.compute if p.fits else 0.0 for p in points]) * 1e3
            comm = np.array([p.comm if p.fits else 0.0 for p in points]) * 1e3
            ax.bar(pos, compute, color=PALETTE["blue"], label="compute and HBM (one GPU's kernels)")
            ax.bar(pos, comm, bottom=compute, color=PALETTE["vermillion"], label="collectives")
            ax.set_xticks(pos, [f"t = {d}" if p.fits else f"t = {d}\n(does not fit)" for d, p in zip(degrees, points)])
            ax.set_ylabel("time per output token (ms)")
            ax.set_ylim(0, max([p.time for p in points if p.fits] or [1e-3]) * 1e3 * 1.08)
            where = f", {dict((v, k) for k, v in tiers)[tier]}" if len(tiers) > 1 else ""
            ax.set_title(f"{titles[model]}, batch {batch}, {context:,} tokens{where}", fontsize=11)
            legend_below(ax, ncol=2)
            outline = ax.add_patch(plt.Rectangle((0, 0), 0, 0, fill=False, lw=2.5, ec="black"))
            figures[key] = (fig, ax, outline, Blitter(fig, [outline]))
        fig, ax, outline, blitter = figures[key]
        j = list(degrees).index(t)
        p = points[j]
        outline.set_bounds(j - 0.45, 0, 0.9, (p.compute + p.comm) * 1e3 if p.fits else 0.0)
        fits = "fits" if p.fits else "<b>does not fit</b>"
        html = (f"<b>{titles[model]}, t = {t}, batch {batch}, {context:,} tokens</b>: per GPU {fmt(p.weights_per_gpu, 'B')} of "
                f"weights and {fmt(p.kv_per_gpu, 'B')} of KV cache, {fits} in the {fmt(hw.usable_capacity, 'B')} usable "
                f"on the {hw.short}")
        if not p.fits:  # no time or rate for a layout that cannot run
            return blitter.png(), html + "; no time per token for a layout that does not fit."
        html += (f"; {fmt(p.time, 's')} per output token "
                + (f"({fmt(p.comm, 's')} of it in {2 * load_model(model).num_layers + 2} collectives), " if t > 1
                   else "(one GPU: no collectives), ")
                + f"{fmt(p.tokens_per_s_per_gpu, 'tokens/s')} per GPU.")
        return blitter.png(), html

    controls = [("model", [(titles[m], m) for m in models]), ("t", list(degrees)), ("batch", list(batches)),
                ("context", [(f"{c:,}", c) for c in contexts])]
    if len(tiers) > 1:
        controls.append(("all-reduces over", tiers))
    frames = len(models) * len(degrees) * len(batches) * len(contexts) * len(tiers)
    try:
        with plt.rc_context({"figure.max_open_warning": 0}):  # one chart per model, batch, context and tier
            explorer = frame_explorer(controls, frame,
                                      f"tensor parallelism on {hw.short}: {len(models)} models, t {degrees[0]}..{degrees[-1]}, "
                                      f"{frames} frames")
    finally:
        for fig, *_ in figures.values():
            plt.close(fig)
    return explorer


def moe_explorer(hardware: Hardware | str = "h200-sxm", *,
                 models: Sequence = (("Mixtral 8x7B, bf16", ("mixtral-8x7b", "bf16")),
                                     ("DeepSeek-V3, fp8", ("deepseek-v3", "fp8"))),
                 batches: Sequence[int] = (8, 32, 128, 512), eps: Sequence[int] = (1, 2, 4, 8),
                 tiers: Sequence = (("NVLink", "scale_up"), ("InfiniBand", "network")), context: int = 4096,
                 routing: str = "uniform") -> FrameExplorer:
    """Chapter 10's sliders: model (and its weights' format), decode batch, expert-parallel degree and
    the tier the all-to-alls cross. Each frame shows one GPU's decode step as three bars on a log scale
    (its compute time, its memory time, the step's all-to-alls) and reads out the memory it holds, the
    step with and without the all-to-alls hidden, and what bounds it (:func:`roofline.parallel.moe.expert_parallel_step`)."""

    h = get_hardware(hardware)
    figure = {}
    titles = {value: label for label, value in models}

    def frame(model, batch, ep, tier):
        name, wd = model
        m = load_model(name)
        # a model stored in fp8 multiplies in fp8 too (DeepSeek-V3's fp8 GEMMs), so its matmuls take the fp8 peak
        s = expert_parallel_step(m, h, batch, context, ep=ep, routing=routing, tier=tier, weights_dtype=wd, kv_dtype=wd,
                                 math_dtype=wd)
        held = weights_per_gpu(m, ep=ep, weights_dtype=wd) + batch // ep * float(m.kv_cache_bytes(context + 1, wd))
        if not figure:
            fig, ax = plt.subplots(figsize=(6.4, 2.9), layout="constrained")
            labels = ["compute", "memory", "all-to-alls"]
            colors = [PALETTE["blue"], PALETTE["orange"], PALETTE["vermillion"]]
            bars = ax.barh(labels, [1e-6] * 3, left=1e-6, color=colors, height=0.6)
            # a swatch of each colour at the bar's root, so a bar too short to see still shows; redrawn with
            # the bars, so that a frame with no all-to-all (one GPU) shows no all-to-all swatch either
            swatches = [ax.plot([1.25e-6], [y], "s", ms=9, color=color, mec="black", mew=0.5, zorder=6)[0]
                        for y, color in enumerate(colors)]
            ax.set_xscale("log")
            ax.set_xlim(1e-6, 1.0)
            ax.invert_yaxis()
            ax.set_xticks([1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0], ["1 µs", "10 µs", "100 µs", "1 ms", "10 ms", "100 ms", "1 s"])
            ax.set_xlabel(f"time per decode step, one GPU ({h.short})")
            ax.grid(True, axis="x")
            blitter = Blitter(fig, [*bars, *swatches])
            for bar in bars:  # the palette is chosen on the first picture: make it one with all three colours
                bar.set_width(1e-3)
            blitter.png()
            figure["f"] = (fig, bars, swatches, blitter)
        fig, bars, swatches, blitter = figure["f"]
        for bar, t in zip(bars, (s.compute_time, s.memory_time, s.communication_time)):
            bar.set_width(max(t, 1e-6) - 1e-6 + 1e-9)
        bars[2].set_visible(ep > 1)
        swatches[2].set_visible(ep > 1)
        fits = fits_in_hbm(held, h)
        verdict = "fits" if fits else "<b>does not fit</b>"
        where = "no all-to-all" if ep == 1 else f"{s.calls} all-to-alls of {fmt(s.all_to_all.bytes, 'B')} each"
        bound = "the all-to-alls" if s.communication_time > s.gpu_time else (
            "memory" if s.memory_time >= s.compute_time else "compute")
        html = (f"<b>{titles[model]}, batch {batch}, {ep} GPU{'s' if ep > 1 else ''}, {'NVLink' if tier == 'scale_up' else 'InfiniBand'}</b>: "
                f"each GPU holds {fmt(held, 'B')}, {verdict} in {fmt(h.usable_capacity, 'B')}; {where}; "
                f"step {fmt(s.time, 's')} in series, {fmt(s.overlapped_time, 's')} overlapped, "
                f"{fmt(s.time / batch * ep, 's')} of GPU time per token; longest: {bound}.")
        return blitter.png(), html

    try:
        explorer = frame_explorer([("model", list(models)), ("batch", list(batches)), ("expert-parallel GPUs", list(eps)),
                                   ("all-to-all over", list(tiers))], frame,
                                  f"MoE decode on {h.short}: {', '.join(x for x, _ in models)}; batch "
                                  f"{batches[0]}..{batches[-1]}; EP {eps[0]}..{eps[-1]}; "
                                  f"{len(models) * len(batches) * len(eps) * len(tiers)} frames")
    finally:
        for fig, *_ in figure.values():
            plt.close(fig)
    return explorer


# --- chapter 11: long sequences -----------------------------------------------------------------------------
__all__ += ["context_parallel_explorer"]


def memory_axis(total_gb: float, capacity_gb: float) -> float:
    """The end of an explorer's memory axis, in GB, for a bar of ``total_gb`` beside a GPU's usable
    ``capacity_gb``: twice the capacity while the bar fits under 95% of that, else the next round number
    (1, 2 or 5 times a power of ten) at or above 110% of the bar, so that no bar is ever cut off."""
    base = 2 * capacity_gb
    if total_gb <= 0.95 * base:
        return base
    need = 1.1 * total_gb
    power = 10.0 ** np.floor(np.log10(need))
    return float(next(power * k for k in (1, 2, 5, 10) if power * k >= need))


def duration(seconds: float) -> str:
    """A time as a reader says it: seconds (with their prefixes) below 1,000 s, then minutes, then hours
    (never "ks")."""
    s = float(seconds)
    if s < 1000:
        return fmt(s, "s")
    if s < 3 * 3600:
        return f"{s / 60:,.1f} min"
    return f"{s / 3600:,.1f} h"


__all__ += ["memory_axis", "duration"]


def context_parallel_explorer(models: Sequence[str] = ("llama-3-8b", "llama-3-70b"), hardware: Hardware | str = "h100-sxm",
                              *, seqs: Sequence[int] = (32768, 131072, 2**20), cps: Sequence[int] = (1, 8, 16, 64),
                              gpus: int = 64, recompute: str = "full", achieved: float = 0.5) -> FrameExplorer:
    """Chapter 11's sliders: model, sequence length, context-parallel degree, method (ring or all-to-all) and
    tier ('auto': the one the group crosses, NVLink inside a node and InfiniBand beyond; or 'IB' forced) for one training step (recomputation ``recompute``,
    model state ZeRO-3 over ``gpus`` GPUs, FLOPs at ``achieved`` x peak). Each frame shows the memory per GPU
    against the usable HBM and the step's compute beside the context-parallel traffic, hidden or exposed."""

    hw = get_hardware(hardware)
    tiers = [("auto", "crossed"), ("IB", "network")]  # auto: NVLink inside a node, InfiniBand beyond
    colors = {"model state": PALETTE["blue"], "activations": PALETTE["orange"], "logits": PALETTE["green"],
              "buffers": PALETTE["purple"], "compute": PALETTE["sky"], "traffic not hidden": PALETTE["vermillion"],
              "traffic hidden": "#dddddd"}
    cap = hw.usable_capacity / 1e9
    figures: dict = {}

    def figure(top):
        """One figure per memory axis: the usable HBM twice over, or wider for a plan that needs more."""
        if top not in figures:
            with style():
                fig, (ax_m, ax_t) = plt.subplots(2, 1, figsize=(7, 3.8), layout="constrained")
                memory = {k: ax_m.barh(0, 0.0, color=colors[k], edgecolor="black", lw=0.4, label=k)[0]
                          for k in ("model state", "activations", "logits", "buffers")}
                ax_m.axvline(cap, color="black", ls="--", lw=1)
                ax_m.set_xlim(0, top)
                ax_m.set_ylim(-0.6, 0.6)
                ax_m.set_yticks([])
                ax_m.set_xlabel(f"memory per GPU (GB); dashed: the {hw.short}'s {cap:,.0f} GB usable")
                ax_m.legend(loc="upper center", bbox_to_anchor=(0.5, -0.5), ncol=4, fontsize=9)
                timing = {"compute": ax_t.barh(0.5, 0.0, color=colors["compute"], edgecolor="black", lw=0.4,
                                               label="compute")[0],
                          "traffic not hidden": ax_t.barh(0.5, 0.0, color=colors["traffic not hidden"], edgecolor="black",
                                                          lw=0.4, label="traffic not hidden")[0],
                          "traffic hidden": ax_t.barh(-0.5, 0.0, color=colors["traffic hidden"], edgecolor="black",
                                                      lw=0.4, hatch="//", label="traffic hidden behind attention")[0]}
                ax_t.set_xlim(0, 100)
                ax_t.set_ylim(-1.1, 1.1)
                ax_t.set_yticks([])
                ax_t.set_xlabel("share of the training step (%)")
                ax_t.legend(loc="upper center", bbox_to_anchor=(0.5, -0.5), ncol=3, fontsize=9)
                refused_m = ax_m.text(0.5, 0.5, "refused", transform=ax_m.transAxes, ha="center", va="center")
                refused_t = ax_t.text(0.5, 0.5, "refused", transform=ax_t.transAxes, ha="center", va="center")
            movers = [*memory.values(), *timing.values(), refused_m, refused_t]
            figures[top] = (fig, memory, timing, refused_m, refused_t, Blitter(fig, movers))
        return figures[top]

    def frame(model, seq, cp, method, tier):
        try:
            plan = plan_context_parallel(model, hw, seq=seq, cp=cp, method=method, gpus=gpus, recompute=recompute,
                                         achieved=achieved, tier=None if tier == "crossed" else tier)
        except ValueError as exc:
            plan, refused = None, str(exc)
        total = float(plan.footprint.total) / 1e9 if plan is not None else 0.0
        fig, memory, timing, refused_m, refused_t, blitter = figure(memory_axis(total, cap))
        refused_m.set_visible(plan is None)
        refused_t.set_visible(plan is None)
        for r in memory.values():
            r.set_visible(plan is not None)
        for r in timing.values():  # a layout that does not fit has no step to time
            r.set_visible(plan is not None and bool(plan.fits))
        if plan is not None:
            fp = plan.footprint.parts
            state = sum(float(v) for k, v in fp.items() if k not in ("activations", "recompute working set",
                                                                      "logits", "context-parallel buffers"))
            parts = {"model state": state, "activations": float(fp["activations"]) + float(fp["recompute working set"]),
                     "logits": float(fp["logits"]), "buffers": float(fp["context-parallel buffers"])}
            left = 0.0
            for k, v in parts.items():  # the axis holds the whole bar (memory_axis)
                memory[k].set_x(left)
                memory[k].set_width(v / 1e9)
                left += v / 1e9
            compute = 100 * plan.compute_time / plan.time
            timing["compute"].set_width(compute)
            timing["traffic not hidden"].set_x(compute)
            timing["traffic not hidden"].set_width(100 * plan.exposed / plan.time)
            timing["traffic hidden"].set_width(min(100.0, 100 * (plan.comm_time - plan.exposed) / plan.time))
        name = load_model(model).title
        head = f"<b>{name}, {seq:,} tokens over {cp} GPU{'s' if cp > 1 else ''}, {method}</b>: "
        if plan is None:
            return blitter.png(), head + refused
        if not plan.fits:
            return blitter.png(), (head + f"{fmt(float(plan.footprint.total), 'B')} per GPU (<b>does not fit</b> in the "
                                   f"{fmt(hw.usable_capacity, 'B')} usable), so no step to time")
        traffic = (f"traffic {duration(plan.comm_time)} over {hw.interconnect[plan.tier].name}, "
                   + ("all hidden" if plan.exposed == 0 else f"{duration(plan.exposed)} exposed")) if cp > 1 else "no traffic"
        return blitter.png(), (head + f"{fmt(float(plan.footprint.total), 'B')} per GPU "
                               + "(fits)" + f"; step {duration(plan.time)}: compute {duration(plan.compute_time)}, {traffic}; "
                               f"MFU {plan.mfu:.0%}")

    try:
        explorer = frame_explorer(
            [("model", [(load_model(m).title.split()[-1], m) for m in models]), ("sequence", [(f"{s // 1024:,}k", s) for s in seqs]),
             ("cp", list(cps)), ("method", ["ring", "all-to-all"]), ("tier", tiers)],
            frame, f"context parallelism on the {hw.short}: model x sequence x degree x method x tier, "
                   f"{len(models) * len(seqs) * len(cps) * 2 * len(tiers)} frames",
            start=[len(models) - 1, list(seqs).index(131072) if 131072 in seqs else 0,
                   list(cps).index(8) if 8 in cps else 0, 0, 0])
    finally:
        for fig, *_ in figures.values():
            plt.close(fig)
    return explorer


def pipeline_explorer(stages: Sequence[int] = (2, 4, 8, 16), micro_batches: Sequence[int] = (16, 32, 64),
                      schedules: Sequence[tuple] = (("GPipe", ("gpipe", 1)), ("1F1B", ("1f1b", 1)),
                                                    ("interleaved, v = 2", ("interleaved", 2)),
                                                    ("interleaved, v = 4", ("interleaved", 4)))) -> FrameExplorer:
    """Chapter 9's sliders: schedule, stages p and micro-batches per step n_mb. Each frame draws the simulated step
    (:func:`roofline.parallel.pipeline.simulate`, backward twice the forward) and reads out its bubble against the
    closed form and the micro-batches the first stage holds. Every frame is drawn at one height, that of
    eight stages, so that the frames of two stages leave no blank band under them (all frames share one grid
    cell, as tall as the tallest)."""
    height = 0.5 * min(8, max(stages)) + 1.9

    def frame(schedule, p, m):
        kind, v = schedule
        t = simulate(p, m, v, kind, forward=1.0, backward=2.0)
        name = {"gpipe": "GPipe", "1f1b": "1F1B"}.get(kind, f"interleaved 1F1B, v = {v}")
        fig = pipeline_timeline_chart(t, title=rf"{name}, $p$ = {p}, $n_\mathrm{{mb}}$ = {m}", height=height)
        png = png_bytes(fig)
        plt.close(fig)
        html = (f"<b>{name}, p = {p} stages, n<sub>mb</sub> = {m} micro-batches</b>: the step lasts {t.makespan:g} forward-pass "
                f"units against {t.ideal:g} without a bubble; bubble {100 * t.bubble:.1f}% of the ideal "
                f"(closed form {100 * bubble_fraction(p, m, v, kind):.1f}%); the first stage holds "
                f"{t.peak_in_flight(0):g} micro-batches' activations at its peak.")
        return png, html

    return frame_explorer([("schedule", list(schedules)), ("p", list(stages)), ("micro-batches", list(micro_batches))], frame,
                          f"pipeline schedules: {len(schedules)} schedules, p {stages[0]}..{stages[-1]}, "
                          f"micro-batches {micro_batches[0]}..{micro_batches[-1]}, "
                          f"{len(schedules) * len(stages) * len(micro_batches)} frames")
__all__ += ["pipeline_explorer"]


def calibrated_decode_explorer(model: Model | str, hardware: Hardware | str, calibrated, *,
                               batches: Sequence[int] = (1, 4, 16, 64, 256),
                               contexts: Sequence[int] = (512, 2048, 8192, 32768),
                               summary: str = "Decode time by rule and roof, for a batch and a context"
                               ) -> FrameExplorer:
    """Appendix B's sliders: batch and context. Each frame draws one decode step's time under the datasheet's
    three timing rules and the ``calibrated`` roof's kernel rule (:func:`roofline.present.plot.timing_bars`, one
    x-axis for all frames: 1.2 times the slowest calibrated estimate) and reads out the estimate, its tokens per
    second and the datasheet floor."""

    m, hw = load_model(model), get_hardware(hardware)
    if not hasattr(calibrated, "kernel_seconds"):
        raise TypeError(f"calibrated must be a CalibratedRoof (roofline.core.calibration.calibrated_roof), "
                        f"got {type(calibrated).__name__}")
    top = max(float(predict(decode_step(m, b, c, accounting="refined"), calibrated, timing="kernel").time)
              for b in batches for c in contexts)

    def frame(b, c):
        step = decode_step(m, b, c, accounting="refined")
        preds = {"datasheet, step": predict(step, hw), "datasheet, kernel": predict(step, hw, timing="kernel"),
                 "datasheet, serial": predict(step, hw, timing="serial"),
                 "calibrated, kernel": predict(step, calibrated, timing="kernel")}
        fig = timing_bars(preds, xmax=top * 1e3 * 1.2,
                          title=f"{m.title} decode on one {hw.short}: batch {b}, {c:,} tokens of context")
        png = png_bytes(fig)
        plt.close(fig)
        est = preds["calibrated, kernel"]
        html = (f"<b>batch {b}, context {c:,}</b>: estimated {fmt(est.time, 's')} per step, "
                f"{fmt(b / est.time, 'tokens/s')}; the datasheet floor is {fmt(preds['datasheet, step'].time, 's')}")
        return png, html

    return frame_explorer([("batch", batches), ("context", contexts)], frame, summary)


__all__ += ["calibrated_decode_explorer"]


def cluster_explorer(checks, *, summary: str = "Where a published run's step goes, under either roof") -> FrameExplorer:
    """Appendix C's controls: a development run and a roof (the datasheet's floor or the calibrated estimate).
    Each frame draws that run's step under that roof, stacked by part in seconds, with the published time as a
    dashed line (one x-axis per run, so that switching the roof moves the bar against a fixed scale), and reads
    out the step time, its ratio to the published one, the MFU and the memory per GPU."""

    checks = list(checks)
    if not checks:
        raise ValueError("checks must hold at least one development check (measured.development_checks())")

    def frame(i, kind):
        c = checks[i]
        price = getattr(c, kind)
        top = max(c.estimate.time, c.published_s) * 1.12
        with style():
            fig, ax = plt.subplots(figsize=(6.4, 3.4), layout="constrained")
            left = 0.0
            for k in PART_ORDER:
                t = price.parts.get(k, 0.0)
                if t > 0:
                    ax.barh(0, t, left=left, color=PART_COLORS[k], edgecolor="black", linewidth=0.4, label=k)
                    left += t
            ax.axvline(c.published_s, color="black", ls="--", lw=1.6, label="published", zorder=6)
            ax.set_xlim(0, top)
            ax.set_yticks([])
            ax.set_xlabel("seconds per step")
            ax.grid(axis="y", visible=False)
            ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.3), ncol=3, fontsize=9.5, frameon=False)
            ax.set_title(f"{c.run.label}: {'datasheet floor' if kind == 'floor' else 'calibrated estimate'}")
        png = png_bytes(fig)
        plt.close(fig)
        ratio = price.time / c.published_s
        html = (f"<b>{c.run.label}</b> on {c.estimate.layout.gpus:,} GPUs, {c.estimate.layout.prose()}: "
                f"{'floor' if kind == 'floor' else 'estimate'} {fmt(price.time, 's')} against "
                f"{fmt(c.published_s, 's')} published ({ratio:.2f}), MFU {100 * price.mfu:.0f}%, "
                f"{fmt(price.memory, 'B')} per GPU")
        return png, html

    return frame_explorer([("run", [(c.run.label, i) for i, c in enumerate(checks)]),
                           ("roof", [("calibrated", "estimate"), ("datasheet", "floor")])], frame, summary)


__all__ += ["cluster_explorer"]


def serving_scale_explorer(models: Sequence[str] = ("llama-3.1-8b", "llama-3.1-70b"),
                           gpus: Sequence[str] = ("h100-sxm", "h200-sxm"), *, degrees: Sequence[int] = (1, 2, 4, 8),
                           targets: Sequence[float] = (0.015, 0.03, 0.06), hits: Sequence[float] = (0.0, 0.5),
                           input_tokens: int = 2048, output_tokens: int = 256, dtype: str = "fp8") -> FrameExplorer:
    """Chapter 13's sliders: model, GPU, tensor-parallel degree, TPOT target and prefix hit rate.

    Each frame draws one replica's frontier at every degree (:func:`roofline.serving.deployment.frontier`,
    calibrated estimate solid, datasheet ceiling dashed) for ``input_tokens`` / ``output_tokens`` in
    ``dtype`` (weights, math and cache), the target as a dotted line and the chosen degree's operating point
    under it as a star, and reads out that point (:func:`roofline.serving.deployment.sustain` under the
    calibrated roof with ``tpot_slo``): output tokens/s per GPU, batch, TTFT and TPOT.
    """

    titles = {m: load_model(m).title for m in models}
    hws = {g: get_hardware(g) for g in gpus}
    roofs = {(g, k): get_roof(hws[g], k, dtype) for g in gpus for k in ROOF_KINDS}
    layout = {t: Deployment(tp=t, weights_dtype=dtype, kv_dtype=dtype, math_dtype=dtype) for t in degrees}
    figures: dict = {}

    def frame(model, gpu, t, target, hit):
        w = Workload(input_tokens, output_tokens, prefix_hit=hit)
        key = (model, gpu, hit)
        if key not in figures:
            curves = {f"TP {d}": (frontier(model, hws[gpu], w, layout[d], roofs[gpu, "datasheet"]),
                                  frontier(model, hws[gpu], w, layout[d], roofs[gpu, "calibrated"])) for d in degrees}
            with plt.rc_context({"figure.max_open_warning": 0}):
                fig = deployment_frontier_chart(curves, title=f"{titles[model]} on {hws[gpu].short}, "
                                                              f"{input_tokens:,} / {output_tokens:,} tokens, {100 * hit:.0f}% prefix hit")
            ax = fig.axes[0]
            line = ax.axvline(targets[0] * 1e3, color="black", lw=1.3, ls=":")
            (star,) = ax.plot([np.nan], [np.nan], marker="*", ms=16, color=PALETTE["yellow"], mec="black", mew=1.0, ls="none")
            ax.set_xlim(*ax.get_xlim())
            ax.set_ylim(*ax.get_ylim())
            figures[key] = (fig, line, star, Blitter(fig, [line, star]))
        fig, line, star, blitter = figures[key]
        s = sustain(model, hws[gpu], w, layout[t], roofs[gpu, "calibrated"], tpot_slo=target)
        line.set_xdata([target * 1e3, target * 1e3])
        head = f"<b>TP {t}</b>: "  # the target is on its slider: the line stays short enough not to wrap
        if s.batch > 0:
            star.set_data([s.tpot_s * 1e3], [s.output_tokens_per_s_per_gpu])
            star.set_visible(True)
            html = (head + f"{s.output_tokens_per_s_per_gpu:,.0f} tokens/s per GPU, batch {s.batch:,.0f}, "
                           f"TTFT {fmt(s.ttft_s, 's')}, TPOT {fmt(s.tpot_s, 's')}")
        elif not s.fits:
            star.set_visible(False)
            html = head + "the weights do not fit"
        else:
            star.set_visible(False)
            html = head + f"<b>missed</b>: one sequence alone takes {fmt(s.tpot_s, 's')} a token"
        return blitter.png(), html

    controls = [("model", [(titles[m], m) for m in models]), ("GPU", [(hws[g].short, g) for g in gpus]),
                ("t", list(degrees)), ("TPOT target", [(fmt(x, "s"), x) for x in targets]),
                ("prefix hit", [(f"{100 * h:.0f}%", h) for h in hits])]
    n = len(models) * len(gpus) * len(degrees) * len(targets) * len(hits)
    try:
        explorer = frame_explorer(controls, frame, f"serving at scale: {len(models)} models x {len(gpus)} GPUs x "
                                                   f"{len(degrees)} degrees x {len(targets)} targets x {len(hits)} hit rates, {n} frames",
                                  start=[len(models) - 1, 0, min(1, len(degrees) - 1), min(1, len(targets) - 1), 0])
    finally:
        for fig, *_ in figures.values():
            plt.close(fig)
    return explorer


__all__ += ["serving_scale_explorer"]
