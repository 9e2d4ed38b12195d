"""Tables for the book: plain rows of formatted text, shown as HTML in a page and as aligned text
elsewhere (a terminal, nbval's comparison). No pandas needed.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from roofline.core.checks import number
from roofline.core.cost import Breakdown
from roofline.core.hardware import get_hardware
from roofline.workloads.memory import (KORTHIKANTI_CONFIGS, RECIPES, activation_bytes, fits_in_hbm,
                                       korthikanti_bytes, kv_cache_capacity_tokens, layer_activations, model_state,
                                       saved_tensors, weight_bytes)
from roofline.core.model import layer_components, load_model
from roofline.core.ops import matmul
from roofline.core.network import Tier
from roofline.core.policies import RECOMPUTES
from roofline.workloads.quantization import (FLOAT_LAYOUTS, INTEGER_LEVELS, PUBLISHED, SCHEMES, float_range,
                                             relative_change, scheme, serving_point)
from roofline.core.roof import Prediction, predict
from roofline.parallel.rules import keep_by_intensity
from roofline.workloads.training import best_plan, hfu, mfu, tokens_per_s_at_mfu, training_step
from roofline.core.roof import Roof
from roofline.core.units import bits_per_element, fmt, group_format
from roofline.measured.compare import CALIBRATION_BAND, Comparison
from roofline.core.calibration import roof_constants
from roofline.core.collectives import COLLECTIVES, collective_cost
from roofline.parallel.cluster import PART_ORDER
from roofline.parallel.context_parallel import long_context
from roofline.parallel.tensor_parallel import weights_per_gpu
from roofline.serving.capacity import attention_layout, sequence_kv_bytes
from roofline.workloads.inference import decode_step, prefill
from roofline.workloads.training import gradient_sync_tokens, training_flops_per_token

__all__ = ["fp8_training_table", "constants_table", "Table", "workload_table", "breakdown_table", "tiers_table", "hardware_table", "mfu_table", "mfu_calculator",
           "recipes_table", "saved_tensors_table", "footprint_table", "kv_capacity_table", "korthikanti_table",
           "matmul_intensity_table", "operations_table", "kv_layout_table", "serving_table", "recompute_table",
           "keep_table", "checkpoint_runs_table", "best_plan_table", "attention_table", "published_table", "formats_table", "quality_table",
           "quantized_serving_table", "moe_comparison_table", "moe_memory_table", "collectives_table", "data_parallel_table",
           "rule_cell", "rules_table"]


# --- a layout that does not fit shows no step time and no MFU (issue 52) ---------------------------------------

__all__ += ["misfit", "mfu_cell", "step_cell"]


def _memory_and_chip(step, hardware=None):
    """Bytes per GPU and the chip they must fit on, from any priced layout the book shows: a
    :class:`~roofline.parallel.cluster.StepPrice` (its roof's chip), a
    :class:`~roofline.parallel.data_parallel.DataParallelStep` (its chip) or a planner
    :class:`~roofline.parallel.planner.Layout` (which carries no chip: ``hardware`` names it)."""
    if hasattr(step, "footprint") and hasattr(step, "hardware"):  # DataParallelStep
        return float(step.footprint.total), step.hardware
    if hasattr(step, "roof") and hasattr(step, "memory"):  # StepPrice
        return float(step.memory), step.roof.hardware
    if hasattr(step, "memory") and hasattr(step, "fits"):  # planner Layout
        if hardware is None:
            raise ValueError("a planner Layout carries no chip: pass hardware= (the chip its memory must fit on)")
        return float(step.memory), get_hardware(hardware)
    raise TypeError(f"step must be a StepPrice, a DataParallelStep or a planner Layout, got {type(step).__name__}")


def misfit(step, hardware=None, digits: int = 3) -> str | None:
    """'does not fit by 52.1 GB' for a priced layout whose memory per GPU is over its chip's usable HBM
    (:func:`~roofline.workloads.memory.fits_in_hbm`, the book's one test of "fits"), ``None`` where it fits.

    A layout that does not fit has no step: the book prints this in place of its step time and its MFU
    (:func:`step_cell`, :func:`mfu_cell`, the tables and explorers of chapters 7 and 9, and
    :func:`roofline.present.glue.glue_layout`)."""
    memory, hw = _memory_and_chip(step, hardware)
    if fits_in_hbm(memory, hw):
        return None
    return f"does not fit by {fmt(memory - hw.usable_capacity, 'B', digits)}"


def mfu_cell(step, hardware=None) -> str:
    """A layout's MFU for a table cell ('45.0%'), or :func:`misfit`'s words where it does not fit."""
    return misfit(step, hardware) or f"{100 * step.mfu:.1f}%"


def step_cell(step, hardware=None) -> str:
    """A layout's step time for a table cell ('10.8 s'), or :func:`misfit`'s words where it does not fit."""
    return misfit(step, hardware) or fmt(step.time, "s")


@dataclass(frozen=True)
class Table:
    """Rows of cells under a header; the first column names the row."""

    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    title: str = ""
    wrap: tuple[str, ...] = ()  # columns of words (names, sources), which may wrap on the page

    LONG = 40  # rows beyond which the page shows the table in a box that scrolls

    def __post_init__(self):
        for r in self.rows:
            if len(r) != len(self.columns):
                raise ValueError(f"every row needs {len(self.columns)} cells, got {len(r)}: {r!r}")
        unknown = [c for c in self.wrap if c not in self.columns]
        if unknown:
            raise ValueError(f"wrap names columns the table lacks: {', '.join(map(repr, unknown))} "
                             f"(its columns: {', '.join(map(repr, self.columns))})")

    def __repr__(self) -> str:
        cells = [self.columns, *self.rows]
        widths = [max(len(str(row[i])) for row in cells) for i in range(len(self.columns))]
        lines = [self.title] if self.title else []
        for n, row in enumerate(cells):
            lines.append("  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(row, widths))))
            if n == 0:
                lines.append("  ".join("-" * w for w in widths))
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        words = {i for i, c in enumerate(self.columns) if c in self.wrap}

        def cell(tag, text, i):
            align = "left" if i == 0 or i in words else "right"
            # a number and its unit stay on one line; the row's name and columns of words may wrap
            wrap = "white-space:nowrap;" if tag == "td" and i > 0 and i not in words else ""
            return f'<{tag} style="text-align:{align};padding:0.25em 0.9em;{wrap}">{html.escape(str(text))}</{tag}>'

        head = "".join(cell("th", c, i) for i, c in enumerate(self.columns))
        body = "".join("<tr>" + "".join(cell("td", c, i) for i, c in enumerate(row)) + "</tr>" for row in self.rows)
        caption = f"<caption>{html.escape(self.title)}</caption>" if self.title else ""
        # The wrapper scrolls sideways when the table is wider than the page, so no column is ever cut
        # off; a long table also scrolls down inside a box, its header kept in view.
        tall = len(self.rows) > self.LONG
        if tall:
            head = head.replace('<th style="', '<th style="position:sticky;top:0;background:var(--pst-color-background, white);')
        box = "max-height:36em;overflow-y:auto;" if tall else ""
        return (f'<div class="roofline-table-wrap" style="overflow-x:auto;{box}max-width:100%">'
                f'<table class="roofline-table" style="border-collapse:collapse;font-variant-numeric:tabular-nums">'
                f"{caption}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>")

    def column(self, name: str) -> tuple[str, ...]:
        i = self.columns.index(name)
        return tuple(r[i] for r in self.rows)


def matmul_intensity_table(ms: Sequence[int], n: int, k: int, dtype: str = "bf16", title: str = "") -> Table:
    """Chapter 1: the arithmetic intensity of an ``(m x k) @ (k x n)`` product for each ``m``, in one
    vectorized call, beside the ridge points it would have to pass."""
    import numpy as np



    ms = np.asarray(ms)
    intensity = np.atleast_1d(matmul(ms, n, k, dtype=dtype).intensity)
    rows = tuple((f"{int(m):,}", f"{n:,} × {k:,}", f"{i:,.2f}") for m, i in zip(ms, intensity))
    return Table(("m (rows)", "n × k", f"intensity, {dtype} (FLOP/B)"), rows, title)


def _time_per(pred: Prediction, per: float) -> str:
    return fmt(pred.time / per, "s")


def workload_table(workloads: Mapping[str, tuple[Breakdown, object, float]], title: str = "") -> Table:
    """Side-by-side roofline numbers for named workloads: ``{label: (breakdown, roof, tokens)}``."""
    columns = ("quantity", *workloads)
    preds = {k: (predict(b, r), b, t) for k, (b, r, t) in workloads.items()}
    spec: Sequence[tuple[str, callable]] = (
        ("FLOPs", lambda p, b, t: fmt(b.flops, "FLOP", 4)),
        ("HBM bytes", lambda p, b, t: fmt(b.bytes, "B", 4)),
        ("intensity (FLOP/B)", lambda p, b, t: f"{b.intensity:,.4g}"),
        ("ridge point (FLOP/B)", lambda p, b, t: f"{p.roof.ridge_point:,.0f}"),
        ("bound", lambda p, b, t: p.bound),
        ("time for the math", lambda p, b, t: fmt(p.compute_time, "s")),
        ("time to move the bytes", lambda p, b, t: fmt(p.memory_time, "s")),
        ("predicted time", lambda p, b, t: fmt(p.time, "s")),
        ("tokens", lambda p, b, t: f"{t:,.0f}"),
        ("time per token", lambda p, b, t: _time_per(p, t)),
        ("utilization of peak", lambda p, b, t: f"{100 * p.utilization:.3g}%"),
    )
    rows = tuple((name, *(f(*preds[k]) for k in workloads)) for name, f in spec)
    return Table(columns, rows, title)


def breakdown_table(breakdowns: Mapping[str, Breakdown], title: str = "") -> Table:
    """Part by part FLOPs and bytes for several breakdowns side by side (e.g. two accountings)."""
    names = list(breakdowns)
    parts = list(next(iter(breakdowns.values())).parts)
    columns = ("part", *(f"{n} {q}" for n in names for q in ("FLOPs", "bytes")))
    rows = []
    for part in [*parts, "total"]:
        cells = []
        for n in names:
            c = breakdowns[n].total if part == "total" else breakdowns[n][part]
            cells += [fmt(c.flops, "FLOP", 4) if c.flops else "0", fmt(c.bytes, "B", 4) if c.bytes else "0"]
        rows.append((part, *cells))
    return Table(columns, tuple(rows), title)


def tiers_table(tiers: Sequence[Tier], title: str = "") -> Table:
    """The bandwidth hierarchy: each tier's rate per GPU and direction, how many times slower than the
    first tier (HBM) it is, and the document it comes from. Every tier is measured against the same
    first tier, so the chapter can quote any two of them without a second kind of comparison."""
    rows = []
    for i, t in enumerate(tiers):
        step = fmt(tiers[0].each_way / t.each_way, "×", 2)  # as chapter 1 glues its ratios
        rows.append((f"{t.name} ({t.note})", fmt(t.each_way, "B/s"), step, t.figure.source.title))
    first = tiers[0].name if tiers else "the first tier"
    return Table(("tier", "per GPU, one way", f"slower than {first}", "source"), tuple(rows), title, wrap=("source",))


def network_threshold_table(model, hardware, nodes: Sequence[int], *, gpus_per_node: int = 8, title: str = "") -> Table:
    """Chapter 1's network roofline beside chapter 7's two refinements of it: for data parallelism on each
    cluster of ``nodes`` nodes (one node over NVLink, more over the network), the tokens each GPU must process
    per step for its bf16 gradients' all-reduce to hide behind the arithmetic, every FLOP at peak:

    - set against the whole step's ``6N`` FLOPs a token over one flat ring (chapter 1's first-order count,
      :func:`~roofline.workloads.training.gradient_sync_tokens`);
    - set against the backward pass's ``4N`` only, which is all that can hide it, still over a flat ring:
      half as many tokens again;
    - the same, with the collective priced as the library schedules it across nodes, each node's share over
      NVLink and an eighth of the buffer per network port (:func:`~roofline.parallel.data_parallel.hiding_tokens`,
      chapter 7): lower by about the number of GPUs per node. On one node the two schedules are one."""
    from roofline.parallel.data_parallel import hiding_tokens

    hw = get_hardware(hardware)
    if isinstance(nodes, (int, np.integer)) or not len(nodes):
        raise TypeError(f"nodes must be a sequence of node counts, got {nodes!r}")
    rows = []
    for n in nodes:
        link = "scale_up" if n == 1 else "network"
        gpus = n * gpus_per_node
        where = f"{gpus:,} GPUs, " + ("one node (NVLink)" if n == 1 else f"{n:,} nodes (network)")
        first = gradient_sync_tokens(model, hw, gpus, link)
        flat = hiding_tokens(model, hw, nodes=n, gpus_per_node=gpus_per_node, tier=link)
        scheduled = hiding_tokens(model, hw, nodes=n, gpus_per_node=gpus_per_node)
        rows.append((where, *(fmt(t, fixed=0) for t in (first, flat, scheduled))))
    return Table(("cluster", "whole step, flat ring (chapter 1)", "backward pass only, flat ring",
                  "backward pass only, as scheduled (chapter 7)"), tuple(rows), title, wrap=("cluster",))


__all__ += ["network_threshold_table"]


def hardware_table(hardware: Sequence, dtype: str = "bf16", title: str = "", *, fallback: str | None = "fp16") -> Table:
    """Datasheet roofs side by side: dense peak, HBM bandwidth and capacity, ridge point.

    A chip without ``dtype`` (the V100 has no bf16) shows its ``fallback`` peak, marked as such;
    with ``fallback=None`` it is an error.
    """

    rows = []
    for h in map(get_hardware, hardware):
        d = dtype if (dtype in h.dense_flops or fallback is None) else fallback
        mark = "" if d == dtype else f" ({d})"
        rows.append((h.short, str(h.year), fmt(h.peak_flops(d), "FLOP/s", 4) + mark, fmt(h.hbm_bandwidth, "B/s"),
                     fmt(h.hbm_capacity, "B"), fmt(h.usable_capacity, "B"), f"{h.ridge_point(d):,.0f}"))
    return Table(("GPU", "year", f"dense {dtype}", "HBM bandwidth", "HBM (sold as)", "HBM usable", "ridge (FLOP/B)"),
                 tuple(rows), title)


def mfu_table(model, hardware, mfus: Sequence[float], *, attention_context=None, title: str = "") -> Table:
    """MFU backed out into training throughput: tokens/s per GPU at each MFU.

    ``attention_context`` adds a column that counts attention's FLOPs too: one sequence length for
    every row, or a sequence of them, one per MFU (each report at the length its run trained on), in
    which case a column names each row's length.
    """

    mfus = list(mfus)
    per_row = attention_context is not None and not np.isscalar(attention_context)
    if per_row:
        contexts = list(attention_context)
        if len(contexts) != len(mfus):
            raise ValueError(f"attention_context must be one sequence length, or one per MFU ({len(mfus)}), "
                             f"got {len(contexts)} lengths")
    else:
        contexts = [attention_context] * len(mfus)
    rows = []
    for u, ctx in zip(mfus, contexts):
        row = [f"{100 * u:.0f}%"]
        if per_row:
            row.append(f"{ctx:,}")
        row.append(f"{tokens_per_s_at_mfu(u, model, hardware):,.0f}")
        if ctx is not None:
            row.append(f"{tokens_per_s_at_mfu(u, model, hardware, attention_context=ctx):,.0f}")
        rows.append(tuple(row))
    if per_row:
        columns = ["MFU", "sequence", "6N only", "with attention"]  # tokens/s per GPU: the title says so
    else:
        columns = ["MFU", "tokens/s per GPU (6N)"]
        if attention_context is not None:
            columns.append(f"with attention at {attention_context:,} tokens")
    return Table(tuple(columns), tuple(rows), title)


def mfu_calculator(runs: Sequence[tuple], *, recompute: str = "full", title: str = "") -> Table:
    """MFU and HFU of training runs given as ``(model, gpus, hardware, tokens_per_s)`` tuples.

    ``tokens_per_s`` is the whole job's throughput; HFU assumes the ``recompute`` policy.
    """

    rows = []
    for model, gpus, hardware, tps in runs:
        m, h = load_model(model), get_hardware(hardware)
        rows.append((m.title, f"{gpus:,} × {h.short}", f"{tps:,.0f}",
                     f"{100 * mfu(tps, m, gpus, h):.1f}%", f"{100 * hfu(tps, m, gpus, h, recompute=recompute):.1f}%"))
    return Table(("model", "GPUs", "tokens/s (job)", "MFU", f"HFU ({recompute} recompute)"), tuple(rows), title)


def recipes_table(model, title: str = "") -> Table:
    """Model state per training recipe: bytes per parameter, part by part, and the model's total."""

    m = load_model(model)
    rows = []
    for name, parts in RECIPES.items():
        spelled = " + ".join(f"{v:g} {k}" for k, v in parts.items())
        rows.append((name, spelled, f"{sum(parts.values()):g}", fmt(model_state(m, name).total, "B", 4)))
    return Table(("recipe", "bytes per parameter", "total B/param", f"{m.title}"), tuple(rows), title)


def saved_tensors_table(tensors, seq: int, title: str = "") -> Table:
    """What one layer keeps for backward: each tensor's bytes per token (and per sequence of ``seq``)."""
    rows = []
    total = 0.0
    for t in tensors:
        per_seq = t.nbytes(seq, 1)
        total += per_seq
        shape = f"{t.per_token:,.0f} per token" if t.per_token else f"{t.per_score:g} x s x s"
        rows.append((t.name, shape, f"{t.bytes_per_element:g}", fmt(per_seq, "B", 3)))
    rows.append(("total", "", "", fmt(total, "B", 4)))
    return Table(("saved tensor", "elements", "bytes each", f"one sequence of {seq:,}"), tuple(rows), title)


def footprint_table(footprints: Mapping, capacities: Sequence[str] = ("h100-sxm", "h200-sxm"), title: str = "") -> Table:
    """Per-GPU memory of labelled footprints and each one's margin on each GPU, those first.

    The model state (weights, gradients, optimizer) is one column, so the table stays narrow enough
    for a page; the figure beside it in chapter 2 splits the state part by part. A margin reads
    '15.8 GB spare' or '48.5 GB over'.
    """

    hws = [get_hardware(c) for c in capacities]
    others = ("activations", "recompute working set", "logits")
    shown = [p for p in others if any(float(f.parts.get(p, 0.0)) > 0 for f in footprints.values())]
    rows = []
    for label, f in footprints.items():
        total = float(f.total)
        state = sum(float(v) for k, v in f.parts.items() if k not in others)
        cells = [fmt(state, "B", 3), *(fmt(float(f.parts.get(p, 0.0)), "B", 3) for p in shown)]
        margins = [f"{fmt(h.usable_capacity - total, 'B', 3)} spare" if total <= h.usable_capacity
                   else f"{fmt(total - h.usable_capacity, 'B', 3)} over" for h in hws]
        rows.append((label, fmt(total, "B", 3), *margins, *cells))
    names = {"recompute working set": "working set"}
    # the total and the margins, what a reader looks for, come first; the parts follow
    return Table(("setup", "total", *(h.short for h in hws), "model state", *(names.get(p, p) for p in shown)),
                 tuple(rows), title)


def kv_capacity_table(model, hardware: Sequence[str], contexts: Sequence[int], *, kv_dtype: str | None = None,
                      title: str = "") -> Table:
    """How many sequences of each context length fit in the KV cache beside the weights."""

    rows = []
    for name in hardware:
        h = get_hardware(name)
        tokens = kv_cache_capacity_tokens(model, h, kv_dtype=kv_dtype)
        rows.append((h.short, f"{tokens:,}" if tokens else "weights do not fit",
                     *(f"{tokens // c:,}" if tokens else "0" for c in contexts)))
    return Table(("GPU", "KV tokens", *(f"batch at {c:,}" for c in contexts)), tuple(rows), title)


def korthikanti_table(seq: int = 2048, micro_batch: int = 1, title: str = "") -> Table:
    """Activations per GPT layer on the configurations of Korthikanti et al., derived tensor by tensor,
    for each recompute policy, and whether the derivation equals the paper's closed form to the byte."""

    rows = []
    for name, (h, a, _, _) in KORTHIKANTI_CONFIGS.items():
        gpt = saved_tensors(architecture="gpt", hidden=h, heads=a, flash=False)
        ours = [activation_bytes(gpt, seq, micro_batch, recompute=p) for p in RECOMPUTES]
        paper = [korthikanti_bytes(seq, micro_batch, h, a, recompute=p) for p in RECOMPUTES]
        same = all(round(x) == round(y) for x, y in zip(ours, paper))
        rows.append((name, *(fmt(x, "B", 4) for x in ours), "yes" if same else "no"))
    return Table(("GPT layer", *RECOMPUTES, "equals the paper"), tuple(rows), title)


def operations_table(pred: Prediction, title: str = "") -> Table:
    """A prediction's kernels, one row each: launches, FLOPs, bytes, intensity, what binds it, its time."""
    rows = []
    for t in pred.ops:
        o = t.op
        rows.append((o.name, f"{o.count:,}", fmt(float(o.flops), "FLOP"), fmt(float(o.bytes), "B"),
                     f"{float(o.intensity):,.1f}", str(t.bound), fmt(float(t.time), "s")))
    return Table(("kernel", "launches", "FLOPs", "bytes", "FLOP/B", "bound", "time"), tuple(rows),
                 title or f"operations, timed under the {pred.timing} rule on {pred.roof.label}")


def kv_layout_table(models: Sequence[str], *, kv_dtype: str = "bf16", context: int = 8192, title: str = "") -> Table:
    """Chapter 5: each model's attention layout, what one token caches per layer (K and V: 2 x KV heads x
    head size; MLA: latent + rotary key), the bytes per token, and one sequence of ``context`` tokens (at
    most the model's trained context, shown beside it), sliding windows counted."""

    rows = []
    for name in models:
        m = load_model(name)
        if m.mla is not None:
            per_layer = f"{m.mla.kv_lora_rank} + {m.mla.qk_rope_head_dim}"
        else:
            per_layer = f"2 × {m.num_kv_heads} × {m.head_dim}"
        c = min(context, m.max_position_embeddings or context)
        rows.append((m.title, attention_layout(m).replace(" + sliding window", ", window"), per_layer,
                     f"{m.kv_bytes_per_token(kv_dtype):,.0f}",
                     f"{fmt(float(sequence_kv_bytes(m, c, kv_dtype, block_size=None)), 'B')} at {c:,}"))
    return Table(("model", "layout", "per layer", "bytes per token", "one sequence"), tuple(rows), title)


def serving_table(plans: Mapping, title: str = "") -> Table:
    """Chapter 5: serving plans side by side (:func:`roofline.serving.serving_capacity`): bytes per sequence,
    the largest batch, and the decode step at that batch."""
    rows = []
    for label, p in plans.items():
        timed = p.step_time is not None
        rows.append((label, fmt(p.kv_per_sequence, "B"), f"{p.max_batch:,}",
                     fmt(p.step_time, "s") if timed else "—", fmt(p.tokens_per_s, "tokens/s") if timed else "—",
                     fmt(100 * p.utilization, "%", 2) if timed else "—"))
    return Table(("setup", "KV per sequence", "largest batch", "time per output token", "throughput",
                  "compute busy"), tuple(rows), title)
def recompute_table(model, seqs: Sequence[int], policies: Sequence[tuple[str, str, str]], *,
                    micro_batch: int = 1, title: str = "") -> Table:
    """Chapter 3's policies side by side for one model: for each sequence length, each policy's
    activations kept through the step, the working set of the layer (or segment) being rebuilt, their sum
    (the peak), and the FLOPs it runs again as a share of the model's. ``policies`` holds
    (label, recompute, attention)."""
    m = load_model(model)
    rows = []
    for s in seqs:
        for label, policy, attention in policies:
            kept, working = layer_activations(m, s, micro_batch, recompute=policy, flash=attention == "flash")
            step = training_step(m, s, micro_batch, recompute=policy, attention=attention)
            model = step["forward"].flops + step["backward"].flops  # model FLOPs: no recomputation, causal attention
            extra = (step.flops - model) / model  # what is recomputed, and explicit attention's masked half
            rows.append((f"{s:,}", label, fmt(float(kept), "B", 3), fmt(float(working), "B", 3),
                         fmt(float(kept + working), "B", 3), f"{100 * extra:.1f}%"))
    return Table(("tokens", "policy", "kept", "working set", "peak", "extra FLOPs"), tuple(rows), title)


def keep_table(model, hardware, seq: int, *, flash: bool = True, title: str = "") -> Table:
    """What one layer could keep, tensor by tensor, and what the ridge rule and the 'matmul-outputs' policy
    keep (chapter 3): :func:`roofline.parallel.rules.keep_by_intensity`, bytes a token, the FLOPs per byte
    its rebuilding costs, and the two verdicts."""
    rows = []
    for k in keep_by_intensity(model, hardware, seq, flash=flash):
        rows.append((k.name, fmt(k.per_token, "B", 3), "the layer's input" if math.isinf(k.intensity)
                     else f"{k.intensity:,.0f}" if k.intensity >= 10 else f"{k.intensity:.1f}",
                     "keep" if k.by_rule else "rebuild", "keep" if k.by_policy else "rebuild"))
    return Table(("tensor", "bytes a token", "rebuild FLOP/B", "the ridge", "matmul outputs"), tuple(rows), title)


def checkpoint_runs_table(runs, title: str = "") -> Table:
    """The measured training runs with and without checkpointing beside the count (chapter 3):
    :func:`roofline.measured.checkpoint_runs`."""
    rows = []
    for c in runs:
        r = c.run
        rows.append((f"{r.tokens:,} x {r.batch}", "yes" if r.checkpoint else "no", fmt(c.measured, "B", 3),
                     fmt(c.predicted, "B", 3), fmt(c.gap, "B", 3), fmt(c.model_flops / r.seconds, "FLOP/s", 3),
                     f"{100 * c.mfu:.1f}%", f"{100 * c.hfu:.1f}%"))
    return Table(("tokens x batch", "checkpoints", "measured", "count", "gap", "model FLOP/s", "MFU", "HFU"),
                 tuple(rows), title)


def best_plan_table(model, hardware, seqs: Sequence[int], *, micro_batch: int = 1, title: str = "", **kwargs) -> Table:
    """The fastest policy that fits, sequence length by sequence length (chapter 3):
    :func:`roofline.workloads.training.best_plan` with ``kwargs`` (gpus, zero_stage, achieved...)."""
    rows = []
    for s in seqs:
        p = best_plan(model, hardware, seq=s, micro_batch=micro_batch, **kwargs)
        if p is None:
            rows.append((f"{s:,}", "nothing fits", "", "", "", ""))
            continue
        rows.append((f"{s:,}", p.recompute + (" + offload" if p.offload else ""), fmt(float(p.footprint.total), "B", 3),
                     fmt(p.time, "s", 3), f"{100 * p.mfu:.1f}%", f"{100 * p.hfu:.1f}%"))
    return Table(("tokens", "fastest policy that fits", "memory per GPU", "step time", "MFU", "HFU"), tuple(rows), title)


def attention_table(passes: Mapping[str, object], roof, title: str = "") -> Table:
    """Chapter 4: attention passes (:class:`roofline.workloads.tiling.AttentionIO`) side by side: FLOPs, HBM
    traffic, intensity, time under ``roof`` (kernel by kernel), peak memory allocated and what is kept
    for the backward pass."""
    rows = []
    for label, io in passes.items():
        p = predict(io.breakdown, roof, timing="kernel")
        rows.append((label, fmt(float(io.flops), "FLOP"), fmt(float(io.bytes), "B"), f"{float(io.intensity):,.0f}",
                     fmt(float(p.time), "s"), fmt(float(io.peak_bytes), "B"),
                     fmt(float(io.saved_bytes), "B") if float(io.saved_bytes) else "nothing"))
    return Table(("pass", "FLOPs", "HBM bytes", "FLOP/B", "time", "peak", "kept"), tuple(rows), title)


def published_table(reported: Sequence, title: str = "") -> Table:
    """Chapter 4: reported kernel throughput (:data:`roofline.workloads.tiling.PUBLISHED`), with FLOP/s turned
    into a fraction of the catalog's dense peak for the GPU and format it was measured on."""
    rows = []
    for r in reported:
        hw = get_hardware(r.hardware) if r.hardware else None
        if r.unit == "FLOP/s":
            shown, share = fmt(r.value, "FLOP/s"), f"{100 * r.value / hw.peak_flops(r.dtype):.0f}%"
        elif r.unit == "of peak":
            shown = f"{100 * r.value:.0f}%" + (f" to {100 * r.high:.0f}%" if r.high else "")
            share = shown
        else:
            shown, share = f"{r.value:g}x", "—"
        rows.append((r.kernel, r.what, f"{hw.short}, {r.dtype}" if hw else "—", shown, share))
    return Table(("kernel", "what was timed", "GPU, format", "reported, up to", "of peak"), tuple(rows), title)


def formats_table(formats=None, catalog=("a100-sxm-80gb", "h100-sxm", "b200"), title: str = "") -> Table:
    """Chapter 6: each number format's bits per element (scales included), range, and the chips among
    ``catalog`` whose tensor cores compute in it (their dense peak), in one table."""

    formats = formats or ("bf16", "fp16", "fp8 E4M3", "fp8 E5M2", "int8", "int4", "int4-g128", "int4-g128-zp",
                          "fp4 E2M1", "mxfp4")
    chips = [get_hardware(c) for c in catalog]
    rows = []
    for name in formats:
        key = name.split(" ")[0]
        g = group_format(key)
        base = g.base if g else key
        if name in FLOAT_LAYOUTS or (g and base == "fp4"):
            r = float_range(*FLOAT_LAYOUTS["fp4 E2M1" if base == "fp4" else name])
            span = (f"±{r.max:.3g}" if r.max >= 1e6 else f"±{r.max:g}"), f"{r.binades:.0f}"
        else:
            span = f"±{INTEGER_LEVELS[base]} steps", "—"
        peaks = [fmt(h.peak_flops(base), "FLOP/s", 3) if base in h.dense_flops else "—" for h in chips]
        rows.append((name, f"{bits_per_element(key):g}", *span, *peaks))
    return Table(("format", "bits per element", "largest value", "binades", *(f"{h.short} dense peak" for h in chips)),
                 tuple(rows), title)


def quality_table(rows=None, title: str = "") -> Table:
    """Chapter 6: the quality each method costs, from the papers' own tables, each beside its own baseline."""

    out = []
    for r in rows or PUBLISHED:
        shown = (lambda v: f"{v:.1f}%") if r.metric == "accuracy" else (lambda v: f"{v:.2f}")
        change = relative_change(r)
        out.append((r.method, r.scheme, r.model, f"{r.dataset} {r.metric}", shown(r.baseline),
                    shown(r.value), f"{100 * change:+.1f}%", f"{_author_year(r.source)}, {r.where}"))
    return Table(("method", "what is quantized", "model", "metric", "baseline", "quantized", "quality lost", "source"),
                 tuple(out), title, wrap=("what is quantized", "model", "metric", "source"))


def _author_year(key: str) -> str:
    """A bibliography key as a reader cites it: 'dettmers2022llmint8' -> 'Dettmers 2022' (the book's keys are
    the first author's surname, the year, a word of the title); a key of another form is kept as it is."""
    import re

    m = re.fullmatch(r"([a-z]+)(\d{4})[a-z0-9]*", key)
    return f"{m.group(1).capitalize()} {m.group(2)}" if m else key


def quantized_serving_table(models, hardware, context: int, schemes=None, title: str = "") -> Table:
    """Chapter 6: for each model and deployment (:data:`roofline.workloads.quantization.SCHEMES`) on one GPU, the
    weights held, the largest batch of ``context``-token sequences that fits, the decode step at batch 1
    (one request's time per output token) and, at that batch, the step divided by the batch (GPU time per
    token generated; each request still waits a whole step), and the time of one ``context``-token prefill (first-order count, step rule)."""

    h = get_hardware(hardware)
    rows = []
    for model in models:
        m = load_model(model)
        for name in schemes or SCHEMES:
            p = serving_point(m, h, context, **scheme(name))
            if not p.fits:
                rows.append((m.title, name, fmt(p.weights, "B", 3), "does not fit", "—", "—", "—"))
                continue
            rows.append((m.title, name, fmt(p.weights, "B", 3), f"{p.max_batch:,}", fmt(p.decode_time_1, "s", 3),
                         fmt(p.decode_time_max, "s", 3), fmt(p.prefill_time, "s", 3)))
    return Table(("model", "formats", "weights", "largest batch", "decode step, batch 1",
                  "step ÷ batch, largest batch", "prefill"), tuple(rows), title)


def collectives_table(hardware, size: float, groups: Sequence[tuple[str, int, int]], title: str = "") -> Table:
    """Chapter 7: each collective on a ``size``-byte buffer, for each labelled group ``(label, n, gpus_per_node)``:
    bytes each GPU sends and the time the alpha-beta model gives (:mod:`roofline.core.collectives`)."""

    columns = ("collective", f"sent per GPU, {groups[0][0]}", *(f"time, {label}" for label, _, _ in groups))
    rows = []
    for name in COLLECTIVES:
        sent = collective_cost(name, groups[0][1], size, hardware, gpus_per_node=groups[0][2]).bytes
        times = [fmt(collective_cost(name, n, size, hardware, gpus_per_node=g).time, "s") for _, n, g in groups]
        rows.append((name.replace("_", "-"), fmt(sent, "B"), *times))
    return Table(columns, tuple(rows), title)


def data_parallel_table(steps: Mapping, title: str = "") -> Table:
    """Chapter 7: labelled :class:`~roofline.parallel.data_parallel.DataParallelStep` results side by side: memory per GPU,
    bytes each GPU sends (NVLink and network), link time, exposed time and MFU. A layout that does not fit has
    no step: its exposed time is a dash and its MFU cell says by how much it does not fit (:func:`misfit`)."""
    columns = ("layout", "memory per GPU", "sent over NVLink", "sent over network", "link busy", "exposed", "MFU")
    rows = tuple((label, fmt(float(s.footprint.total), "B"), fmt(s.sent_scale_up, "B"), fmt(s.sent_network, "B"),
                  fmt(s.communication, "s"), "—" if misfit(s) else fmt(s.exposed, "s"), mfu_cell(s))
                 for label, s in steps.items())
    return Table(columns, rows, title)


def moe_comparison_table(models, hardware, *, batch: int = 64, context: int = 4096, prompt: int = 4096,
                         routing: str = "uniform", weights_dtype: str = "bf16", title: str = "") -> Table:
    """Chapter 10: MoE models (a sequence, or a mapping from row label to model) beside their dense
    equivalents on one GPU's roofline (memory not checked):
    total and active parameters, weights held, training FLOPs per token, decode at batch 1 and at
    ``batch`` (``routing`` for the experts read), and one ``prompt``-token prefill (text accounting, step rule)."""

    h = get_hardware(hardware)
    rows = []
    named = models.items() if isinstance(models, Mapping) else ((None, m) for m in models)
    for label, m in named:
        m = load_model(m)
        kw = dict(weights_dtype=weights_dtype, routing=routing)
        one = predict(decode_step(m, 1, context, **kw), h).time
        many = predict(decode_step(m, batch, context, **kw), h).time
        pre = predict(prefill(m, prompt, **kw), h).time
        rows.append((label or m.title, f"{m.params / 1e9:.1f}B", f"{m.active_params / 1e9:.1f}B",
                     fmt(weight_bytes(m, weights_dtype=weights_dtype), "B", 3),
                     fmt(training_flops_per_token(m), "FLOP", 3), fmt(one, "s", 3), fmt(many, "s", 3), fmt(pre, "s", 3)))
    return Table(("model", "parameters", "active", f"weights ({weights_dtype})", "training FLOP per token",
                  "decode, batch 1", f"decode, batch {batch}", f"prefill, {prompt:,} tokens"), tuple(rows), title)


def moe_memory_table(rows, hardware, title: str = "") -> Table:
    """Chapter 10: weights per GPU of MoE models split over GPUs by tensor and by expert parallelism.
    ``rows`` holds ``(label, model, weights_dtype, gpus)``; each row says what the weights leave of the
    GPU's usable HBM either way (:func:`roofline.parallel.tensor_parallel.weights_per_gpu`)."""

    h = get_hardware(hardware)
    out = []
    for label, model, dtype, gpus in rows:
        m = load_model(model)
        tp, ep = weights_per_gpu(m, tp=gpus, weights_dtype=dtype), weights_per_gpu(m, ep=gpus, weights_dtype=dtype)
        out.append((f"{label}, {dtype}", f"{gpus}", fmt(tp, "B", 3), fmt(ep, "B", 3),
                    fmt(h.usable_capacity - tp, "B", 3) if tp < h.usable_capacity else "does not fit",
                    fmt(h.usable_capacity - ep, "B", 3) if ep < h.usable_capacity else "does not fit"))
    return Table(("model, weights", "GPUs", "weights per GPU, TP", "weights per GPU, EP", "left for KV, TP",
                  "left for KV, EP"), tuple(out), title)


# --- chapter 11: long sequences -----------------------------------------------------------------------------
__all__ += ["long_context_table"]


def long_context_table(models: Sequence[str], seqs: Sequence[int], hardware="h100-sxm", title: str = "") -> Table:
    """For each model and sequence length: attention's share of a prefill's FLOPs and of its time, the training
    activations without and with full recomputation, the fp32 logits and the KV cache of one sequence
    (:func:`roofline.parallel.context_parallel.long_context`). Models of one family are named by their size alone."""

    rows = []
    # one family ("Llama 3 8B", "Llama 3 70B"): the title names it, the rows give only the size
    families = {load_model(name).title.rsplit(" ", 1)[0] for name in models}
    prefix = families.pop() + " " if len(families) == 1 else ""
    for name in models:
        for s in seqs:
            r = long_context(name, s, hardware)
            rows.append((r.model.title.removeprefix(prefix), f"{s / 2**20:g}M" if s >= 2**20 else f"{s // 1024:,}k", f"{r.attention_flops_share:.0%}",
                         f"{r.attention_time_share:.0%}", fmt(r.activations, "B", 3),
                         fmt(r.activations_full_recompute, "B", 3), fmt(r.logits, "B", 3), fmt(r.kv_cache, "B", 3)))
    return Table(("model", "tokens", "attention, FLOPs", "attention, time", "activations", "full recompute",
                  "logits", "KV cache"), tuple(rows), title)


def plan_table(layouts, title: str = "", *, hardware="h100-sxm") -> Table:
    """Chapter 9: the planner's layouts (:class:`~roofline.parallel.planner.Layout`), one column each, ranked
    (a page's width holds five): degrees, micro-batch, schedule, recomputation and ZeRO stage, memory per GPU,
    the step split into compute, bubble and exposed communication, and MFU, one row each. A layout that does
    not fit on ``hardware`` shows :func:`misfit`'s words in place of its step and MFU."""
    layouts = list(layouts)
    hw = get_hardware(hardware)
    spec = (("TP x PP x DP", lambda x: f"{x.tp} x {x.pp} x {x.dp}"),
            ("micro-batch (m)", lambda x: f"{x.micro_batch} ({x.micro_batches})"),
            ("schedule", lambda x: "1F1B" if x.v == 1 else f"interleaved, v = {x.v}"),
            ("recompute", lambda x: x.recompute),
            ("ZeRO", lambda x: str(x.zero_stage)),
            ("memory per GPU", lambda x: fmt(x.memory, "B")),
            ("compute", lambda x: fmt(x.compute, "s")),
            ("bubble", lambda x: fmt(x.bubble, "s")),
            ("exposed comm.", lambda x: fmt(x.exposed, "s")),
            ("step", lambda x: step_cell(x, hw)),
            ("MFU", lambda x: mfu_cell(x, hw)))
    columns = ("rank", *(str(i) for i in range(1, len(layouts) + 1)))
    return Table(columns, tuple((name, *(f(x) for x in layouts)) for name, f in spec), title)


def megatron_table(runs, title: str = "") -> Table:
    """Chapter 9: published runs beside the planner's best layout for the same model and cluster. ``runs`` holds
    ``(label, published dict with tp, pp, gpus, tflops, Layout)`` tuples."""
    columns = ("model", "GPUs", "published TP x PP", "published TFLOP/s per GPU", "planner's layout",
               "planner's bound, TFLOP/s per GPU", "published / bound")
    rows = tuple((label, f"{pub['gpus']:,}", f"{pub['tp']} x {pub['pp']}", f"{pub['tflops'] / 1e12:.0f}",
                  f"{x.tp} x {x.pp} x {x.dp}", f"{x.tflops / 1e12:.0f}", f"{100 * pub['tflops'] / x.tflops:.0f}%")
                 for label, pub, x in runs)
    return Table(columns, rows, title)


__all__ += ["plan_table", "megatron_table"]


# --- measurements (appendices A and B): comparisons side by side, datasheet and measured ceilings ---------------

__all__ += ["comparison_table", "ceilings_table"]


def comparison_table(columns: Mapping[str, Sequence[Comparison]], *, key: str = "label", title: str = "",
                     estimates: Sequence[str] = (), band: float = CALIBRATION_BAND, key_first: str | None = None):
    """A :class:`~roofline.present.tables.Table` of measured time and predicted/measured under each roof.

    ``columns`` maps a roof's name to the comparisons under it; all lists cover the same points in
    the same order. A floor's column marks '(!)' where the prediction exceeds the measurement (the bound
    broken); a column named in ``estimates`` marks '(!)' where the ratio is outside ``1/band .. band``.
    ``key_first`` names the roof whose ratio is the key column: it comes right after the point's name,
    the headers shorten to 'ratio, NAME roof' and the measured time goes last, so a long table keeps
    what matters in view and fits a page.
    """
    lists = list(columns.values())
    first = lists[0]
    for name, cs in columns.items():
        if [c.label for c in cs] != [c.label for c in first]:
            raise ValueError(f"comparisons under {name!r} do not cover the same points as the first column")
    unknown = [e for e in estimates if e not in columns]
    if unknown:
        raise ValueError(f"estimates names columns that are not there: {', '.join(map(repr, unknown))}")
    if key_first is not None and key_first not in columns:
        raise ValueError(f"key_first must be one of {', '.join(map(repr, columns))}, got {key_first!r}")

    def mark(name, c):
        bad = not (1 / band <= c.ratio <= band) if name in estimates else not c.obeys
        return f"{c.ratio:.2f}" + (" (!)" if bad else "")

    if key_first is not None:
        names = [key_first, *(n for n in columns if n != key_first)]
        header = ("point", *(f"ratio, {n} roof" for n in names), "measured time")
        rows = tuple((c.label, *(mark(n, columns[n][i]) for n in names), fmt(c.measured, "s"))
                     for i, c in enumerate(first))
        return Table(header, rows, title)
    header = ("point", "measured", *(f"predicted/measured, {n}" for n in columns))
    rows = tuple((c.label, fmt(c.measured, "s"), *(mark(n, cs[i]) for n, cs in columns.items()))
                 for i, c in enumerate(first))
    return Table(header, rows, title)


def ceilings_table(datasheet: Roof | Sequence[Roof], measured: Roof | Sequence[Roof], title: str = ""):
    """Datasheet and measured ceilings side by side, with the fraction of each the machine reached."""
    ds = [datasheet] if isinstance(datasheet, Roof) else list(datasheet)
    ms = [measured] if isinstance(measured, Roof) else list(measured)
    if len(ds) != len(ms):
        raise ValueError(f"datasheet and measured need as many roofs each, got {len(ds)} and {len(ms)}")
    rows = [("HBM bandwidth", fmt(ds[0].bandwidth, "B/s"), fmt(ms[0].bandwidth, "B/s"), f"{100 * ms[0].bandwidth / ds[0].bandwidth:.0f}%")]
    for d, m in zip(ds, ms):
        rows.append((f"dense {d.dtype} matmul", fmt(d.peak_flops, "FLOP/s", 4), fmt(m.peak_flops, "FLOP/s", 4),
                     f"{100 * m.peak_flops / d.peak_flops:.0f}%"))
        rows.append((f"ridge point, {d.dtype} (FLOP/B)", f"{d.ridge_point:,.0f}", f"{m.ridge_point:,.0f}",
                     f"{100 * m.ridge_point / d.ridge_point:.0f}%"))
    return Table(("ceiling", "datasheet", "measured", "measured / datasheet"), tuple(rows), title)


def rule_cell(value) -> str:
    """The Reference part's rules page (and ``roofline rules``): one rule's value, or the full model's, as a
    cell: a word as it is ("never"), nothing for no value, a count of 100 or more to the unit with thousands
    separated, a smaller value to three significant figures."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    v = float(number("value", value, minimum=-math.inf))
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


# What the figure after the slash is, rule by rule (issue 52: one phrase for the reader, the same for every
# example): either the full model's answer to the rule's own question, or the example's own quantity that
# the rule's threshold is set against. Keys are the start of a rule's name.
AFTER_THE_SLASH = {
    "max-to-sum band": "the full model: the kernel rule's time over the step rule's",
    "compute-bound decode batch": "the full model: the batch sweep at the example's context",
    "matmul outputs kept": "the full model: the tensor-by-tensor count",
    "KV-bound batch": "the full model: the largest batch that fits the example's GPUs",
    "data-parallel tokens per GPU": "the example: its own tokens per GPU",
    "FSDP tokens per GPU": "the full model: its threshold with all traffic behind the backward pass",
    "tensor-parallel hiding width": "the example: the model's own hidden size",
    "decode tensor-parallel bound": "the full model: the fastest degree of 1, 2, 4 and 8",
    "mixed FSDP x TP": "the full model: the planner's tensor degree",
    "mixing pays below": "the example: its own tokens per GPU",
    "attention-MLP crossover": "the full model: the exact pair-by-pair count",
}


def after_the_slash(rule) -> str:
    """What :func:`rules_table` puts after a rule's slash (:data:`AFTER_THE_SLASH`); '' for a rule with no
    second figure. A rule with a second figure and no phrase is an error, so the table never leaves one
    unexplained."""
    if rule.model_value is None:
        return ""
    for start, phrase in AFTER_THE_SLASH.items():
        if rule.name.startswith(start):
            return phrase
    raise KeyError(f"no phrase in AFTER_THE_SLASH says what follows the slash for the rule {rule.name!r}")


__all__ += ["AFTER_THE_SLASH", "after_the_slash"]


def rules_table(examples: Mapping[str, Sequence], title: str = "") -> Table:
    """The rules page: one row per rule of :func:`roofline.parallel.rules.rules_for` (its name, with its unit and
    the chapter that derives it) and one column per example (a label and that example's results, all from the
    same rules), each cell the rule's value and, where there is one, a second figure after a slash
    (``'2,164 / 65,536'``); the last column says what that figure is (:func:`after_the_slash`)."""
    lists = _example_rules(examples)
    rows = []
    for i, first in enumerate(lists[0]):
        cells = [rule_cell(r[i].value) + ("" if r[i].model_value is None else " / " + rule_cell(r[i].model_value))
                 for r in lists]
        seconds = [after_the_slash(r[i]) for r in lists]
        rows.append((_rule_label(first), *cells, next((x for x in seconds if x), "")))
    return Table(("rule", *examples, "after the slash"), tuple(rows), title, wrap=("after the slash",))


def _example_rules(examples) -> list[list]:
    """The examples' results as lists, checked: a mapping of labels to rules_for's results, the same rules in the
    same order for every example."""
    if not isinstance(examples, Mapping) or not examples:
        raise TypeError(f"examples must map a label to rules_for's results, got {type(examples).__name__}")
    lists = [list(v) for v in examples.values()]
    names = [r.name for r in lists[0]]
    for label, results in zip(examples, lists):
        if [r.name for r in results] != names:
            raise ValueError(f"examples must hold the same rules in the same order; {label!r} differs from "
                             f"{next(iter(examples))!r} (give every example the same tp and batch)")
    return lists


def _rule_label(rule) -> str:
    unit = f"{rule.unit}, " if rule.unit else ""
    return f"{rule.name} ({unit}chapter {rule.chapter})"


def calibrated_rules_table(examples: Mapping[str, Sequence], title: str = "") -> Table:
    """The rules page: the rate-bound rules only (those :func:`roofline.parallel.rules.rules_for` gave a
    calibrated value), one column per example, each cell the datasheet's value and, after an arrow, the
    same rule under the calibrated roof's rates (``'295 → 269'``)."""
    lists = _example_rules(examples)
    if not any(r.calibrated is not None for r in lists[0]):
        raise ValueError("no rule carries a calibrated value: call rules_for with roof=")
    rows = []
    for i, first in enumerate(lists[0]):
        if first.calibrated is None:
            continue
        rows.append((_rule_label(first), *(f"{rule_cell(r[i].value)} → {rule_cell(r[i].calibrated)}" for r in lists)))
    return Table(("rule", *examples), tuple(rows), title)


__all__ += ["calibrated_rules_table"]


def layer_table(models: Sequence, context: int, title: str = "") -> Table:
    """Chapter 2: one decoder layer piece by piece (:func:`roofline.core.model.layer_components`) for each
    model, its parameters and its forward FLOPs per token at ``context`` tokens (causal), with the layer's
    total as the last row."""
    models = [load_model(m) for m in models]
    if not models:
        raise ValueError("models must name at least one model")
    parts = [layer_components(m, context) for m in models]
    names = [c.name for c in parts[0]]
    for m, p in zip(models, parts):
        if [c.name for c in p] != names:
            raise ValueError(f"models must have the same pieces to share a table; {m.name}'s are "
                             f"{', '.join(c.name for c in p)}, not {', '.join(names)}")
    rows = []
    for i, name in enumerate(names):
        cells = []
        for p in parts:
            cells += [_params_text(p[i].params), fmt(p[i].flops, "FLOP")]
        rows.append((name, *cells))
    total = []
    for p in parts:
        total += [_params_text(sum(c.params for c in p)), fmt(sum(c.flops for c in p), "FLOP")]
    rows.append(("layer", *total))
    columns = ["piece"]
    for m in models:
        columns += [f"{m.title}: params", "FLOPs/token"]
    return Table(tuple(columns), tuple(rows), title)


__all__ += ["layer_table"]


def _params_text(n: int) -> str:
    """A count of parameters for a table cell: millions from a million up ('16.8M'), the count below it
    ('8,192'), nothing for none."""
    if not n:
        return ""
    return fmt(n, per="million") + "M" if n >= 1e6 else f"{n:,}"


def rule_check_table(rows: Mapping[str, object], *, rule: str = "rule", model: str = "full model",
                     title: str = "") -> Table:
    """Chapters 1, 5, 7, 8, 9 and 11, "The rule, by hand": one rule for a few cases, one row each (a label
    and a :class:`~roofline.parallel.rules.RuleResult`): the rule's value, the full model's answer to the
    same question (the planner's, the serving or training model's) and the result's reason, why the two
    part or that they agree. ``rule`` and ``model`` head the two value columns."""
    if not isinstance(rows, Mapping) or not rows:
        raise TypeError(f"rows must map a label to a RuleResult, got {type(rows).__name__}")
    bad = [label for label, r in rows.items() if not all(hasattr(r, a) for a in ("value", "model_value", "reason"))]
    if bad:
        raise TypeError(f"rows must map each label to a RuleResult (from roofline.parallel.rules); "
                        f"{', '.join(map(repr, bad))} {'is' if len(bad) == 1 else 'are'} not")
    body = tuple((label, rule_cell(r.value), rule_cell(r.model_value), r.reason) for label, r in rows.items())
    return Table(("case", rule, model, "why they part"), body, title, wrap=("case", "why they part"))


__all__ += ["rule_check_table"]


# --- appendix C: the cluster model against published runs ---------------------------------------------------

__all__ += ["cluster_roof_table", "development_table", "step_parts_table", "short_layout"]


def _ids_text(ids) -> str:
    ids = list(ids)
    if len(ids) > 2:
        return f"{ids[0]} to {ids[-1]} ({len(ids)} records)"
    return ", ".join(ids)


def _constant_text(c) -> str:
    return f"{100 * c.value:.0f}%" if c.unit == "%" else fmt(c.value, c.unit)


def cluster_roof_table(roofs, title: str = "") -> Table:
    """Appendix C: the constants of calibrated cluster roofs side by side, one value column and one source
    column per roof; each source names the records (their ids in ``microbenchmarks.json``) and where they were
    published (the title up to its first parenthesis)."""

    roofs = list(roofs)
    consts = [roof_constants(r) for r in roofs]
    columns = ("quantity", *(c for r in roofs for c in (r.hardware.short, f"{r.hardware.short}: from")))
    rows = []
    for i, first in enumerate(consts[0]):
        cells = []
        for cs in consts:
            c = cs[i]
            where = "; ".join(dict.fromkeys(s.split(" (")[0] for s in c.sources))
            cells += [_constant_text(c), f"{_ids_text(c.records)}: {where}" if c.records else where]
        rows.append((first.name, *cells))
    return Table(columns, tuple(rows), title, wrap=tuple(c for c in columns[2::2]))


def _id_runs(ids) -> str:
    """Record ids as runs of consecutive numbers: 'mb0266 to mb0269 and mbx139 to mbx144 (10 records)'."""
    ids = sorted(ids)
    runs: list[list[str]] = []
    for i in ids:
        prefix, num = i.rstrip("0123456789"), i[len(i.rstrip("0123456789")):]
        last = runs[-1][-1] if runs else None
        if last and last.rstrip("0123456789") == prefix and int(last[len(prefix):]) + 1 == int(num):
            runs[-1].append(i)
        else:
            runs.append([i])
    text = ", ".join(r[0] if len(r) == 1 else f"{r[0]} to {r[-1]}" for r in runs)
    return text + (f" ({len(ids)} records)" if len(ids) > 2 else "")


def constants_table(constants, title: str = "") -> Table:
    """Appendix C: constants of a roof (:class:`~roofline.core.calibration.RoofConstant`), each with its value and
    the records and sources it came from."""
    rows = tuple((c.name, _constant_text(c),
                  f"{_id_runs(c.records)}: " + "; ".join(dict.fromkeys(s.split(" (")[0] for s in c.sources)))
                 for c in constants)
    return Table(("quantity", "value", "from"), rows, title, wrap=("from",))


def _degree_list(layout) -> str:
    """A layout's degrees for a table cell: 'TP 8 · PP 8 · DP 1' (TP and DP always, CP and PP where above 1)."""
    return " · ".join(f"{k} {v}" for k, v in (("TP", layout.tp), ("CP", layout.cp), ("PP", layout.pp),
                                              ("DP", layout.dp)) if v > 1 or k in ("TP", "DP"))


def short_layout(layout) -> str:
    """A training layout in a few words for a table cell: 'TP 8 · PP 8 · DP 1, micro-batch 1, interleaved x3'."""
    degrees = _degree_list(layout)
    sched = layout.schedule_text
    return f"{degrees}, micro-batch {layout.micro_batch}{sched}"


def development_table(checks, title: str = "") -> Table:
    """Appendix C: every development run, its GPUs and the layout priced, the published step time, the
    datasheet floor, the calibrated estimate and estimate over published; '*' marks a run whose source
    leaves the micro-batch or the interleaving depth unstated (the model takes the fastest that fits).

    Every run here trained, so each is priced as published even where the model's count of its memory is over
    the chip's (a miss of the count, not of the run): its layout cell says so and by how much."""
    def over(c) -> str:
        gap = c.estimate.memory - c.estimate.roof.hardware.usable_capacity
        return "" if c.estimate.fits else f"; trained, though the model counts {fmt(gap, 'B')} over its memory"
    columns = ("run", "GPUs", "layout", "published", "floor", "estimate", "estimate / published")
    rows = tuple((c.run.label + (" *" if c.run.settings_unstated else ""), f"{c.estimate.layout.gpus:,}",
                  short_layout(c.estimate.layout) + over(c), fmt(c.published_s, "s"), fmt(c.floor.time, "s"),
                  fmt(c.estimate.time, "s"), f"{c.ratio:.2f}") for c in checks)
    return Table(columns, rows, title, wrap=("layout",))


def fp8_training_table(priced: Mapping, title: str = "") -> Table:
    """Chapter 6: one layout in bf16 and under each fp8 recipe (:func:`~roofline.parallel.cluster.fp8_training`'s
    mapping): the calibrated step, its speed-up over bf16, the matmuls, the casts and everything else, and memory
    per GPU with whether it fits."""
    from roofline.core.fp8 import FP8_RECIPES

    columns = ("format", "step", "speed-up", "matmuls", "fp8 casts", "everything else", "memory per GPU")
    base = priced["bf16"][1] or priced["bf16"][0]
    rows = []
    for name, (floor, est) in priced.items():
        p = est or floor
        other = p.time - p.parts["matmuls"] - p.parts["fp8 casts"]
        label = "bf16" if name == "bf16" else FP8_RECIPES[name].title
        if misfit(p):  # no step for a layout that does not fit: its memory, and by how much it is over
            rows.append((label, misfit(p), "—", "—", "—", "—", fmt(p.memory, "B")))
            continue
        rows.append((label, fmt(p.time, "s"), f"{base.time / p.time:.2f}×", fmt(p.parts["matmuls"], "s"),
                     fmt(p.parts["fp8 casts"], "s") if p.parts["fp8 casts"] else "none", fmt(other, "s"),
                     fmt(p.memory, "B")))
    return Table(columns, tuple(rows), title, wrap=("format",))


def step_parts_table(prices: Mapping, title: str = "") -> Table:
    """Appendix C: where one step's time goes under each labelled :class:`~roofline.parallel.cluster.StepPrice`,
    part by part (seconds and share of the step), parts that are zero under every price left out, then the
    total."""

    prices = dict(prices)
    columns = ("part", *prices)
    rows = []
    for k in PART_ORDER:
        if all(p.parts.get(k, 0.0) == 0 for p in prices.values()):
            continue
        rows.append((k, *(f"{fmt(p.parts.get(k, 0.0), 's')} ({100 * p.parts.get(k, 0.0) / p.time:.0f}%)"
                          for p in prices.values())))
    rows.append(("step", *(fmt(p.time, "s") for p in prices.values())))
    return Table(columns, tuple(rows), title)


# --- chapter 9: the calibrated estimate beside the planner's floor ---------------------------------------------

__all__ += ["cluster_plan_table", "megatron_estimate_table"]


def _degrees_text(layout) -> str:
    """'TP 8 · PP 16 · DP 48, interleaved x5, recompute full': degrees above one (TP and DP always), then the
    schedule and the recomputation."""
    degrees = _degree_list(layout)
    sched = layout.schedule_text
    return f"{degrees}{sched}, recompute {layout.recompute}"


def cluster_plan_table(plan, n: int = 5, title: str = "") -> Table:
    """Chapter 9: the ``n`` fastest layouts of a :func:`roofline.parallel.cluster.search` under a calibrated roof,
    one row each: the layout (degrees, micro-batch, schedule), recomputation and ZeRO stage, memory per GPU, the
    calibrated estimate of the step and the datasheet floor of the same layout, and the MFU of each."""
    columns = ("rank", "layout", "recompute, ZeRO", "memory per GPU", "estimate", "floor", "MFU, estimate",
               "MFU, floor")
    rows = tuple((str(i), short_layout(e.layout), f"{e.layout.recompute}, {e.layout.zero_stage}", fmt(e.memory, "B"),
                  step_cell(e), step_cell(f), mfu_cell(e), mfu_cell(f))
                 for i, (e, f) in enumerate(zip(plan.ranked[:n], plan.floors(n)), start=1))
    return Table(columns, rows, title, wrap=("layout",))


def megatron_estimate_table(searches, title: str = "") -> Table:
    """Chapter 9: Megatron-LM's GPT runs (:func:`roofline.measured.megatron_searches`), one column each: the
    published layout, its published step, floor and estimate; the calibrated search's best with full
    recomputation held and with recomputation free, each with its estimate and memory per GPU; and the
    published layout's estimate over each best."""
    searches = list(searches)
    spec = (("GPUs", lambda s: f"{s.published['gpus']:,}"),
            ("published layout", lambda s: _degrees_text(s.check.estimate.layout)),
            ("published step", lambda s: fmt(s.check.published_s, "s")),
            ("floor of that layout", lambda s: fmt(s.check.floor.time, "s")),
            ("estimate of that layout", lambda s: fmt(s.check.estimate.time, "s")),
            ("search's best, full recompute", lambda s: _degrees_text(s.best_full.layout)),
            ("its estimate (memory)", lambda s: f"{fmt(s.best_full.time, 's')} ({fmt(s.best_full.memory, 'B')})"),
            ("published over it", lambda s: f"{s.lead_full:.2f}"),
            ("search's best, either policy", lambda s: _degrees_text(s.best.layout)),
            ("its estimate (memory)", lambda s: f"{fmt(s.best.time, 's')} ({fmt(s.best.memory, 'B')})"),
            ("published over it", lambda s: f"{s.lead:.2f}"))
    columns = ("", *(s.label for s in searches))
    return Table(columns, tuple((name, *(f(s) for s in searches)) for name, f in spec), title,
                 wrap=tuple(s.label for s in searches))


def _mfu_pair(floor, estimate) -> str:
    """'50.6% / 40.0%': the MFU of a layout at its floor and under its estimate."""
    return f"{100 * floor.mfu:.1f}% / {100 * estimate.mfu:.1f}%"


# --- chapter 11: a published layout's settings under the floor and the estimate ----------------------

def published_settings_table(pairs, published_mfu: float, title: str = "") -> Table:
    """Chapter 11: settings of one published layout, one row each from ``(floor, estimate)`` pairs of
    :class:`~roofline.parallel.cluster.StepPrice` for the same layout: the setting (micro-batch, interleaving,
    recomputation, ZeRO stage), memory per GPU, the floor's and the estimate's step, their MFU, and the
    published MFU over the estimate's (above 1: the run beat the estimate)."""
    published_mfu = float(number("published_mfu", published_mfu))
    columns = ("setting", "memory per GPU", "step, floor", "step, estimate", "MFU, floor / estimate",
               "published MFU / estimate's")
    rows = []
    for floor, est in pairs:
        lay = est.layout
        setting = f"micro-batch {lay.micro_batch}{lay.schedule_text}, recompute {lay.recompute}, ZeRO-{lay.zero_stage}"
        if misfit(est):  # a setting that does not fit has no step and no MFU (:func:`misfit`)
            rows.append((setting, fmt(est.memory, "B"), misfit(est), misfit(est), "—", "—"))
            continue
        rows.append((setting, fmt(est.memory, "B"), fmt(floor.time, "s"), fmt(est.time, "s"),
                     _mfu_pair(floor, est), f"{published_mfu / est.mfu:.2f}"))
    return Table(columns, tuple(rows), title, wrap=("setting",))


__all__ += ["published_settings_table"]


# --- chapter 7: the calibrated estimate beside the floor ------------------------------------------------------

__all__ += ["estimate_beside_floor_table"]


def estimate_beside_floor_table(rows: Mapping, title: str = "") -> Table:
    """Chapter 7: one row per labelled ``(floor, estimate)`` pair of
    :class:`~roofline.parallel.cluster.StepPrice` (the same layout under the datasheet roof and the calibrated
    one, :func:`roofline.measured.estimate_step`): memory per GPU and whether it fits, the step at the floor
    and under the estimate, the data-parallel exchange each leaves exposed, and the MFU of each."""
    columns = ("layout", "memory per GPU", "step, floor", "step, estimate", "DP exposed, floor / estimate",
               "MFU, floor / estimate")
    out = []
    for label, (floor, est) in dict(rows).items():
        if misfit(est):  # no step, no MFU: the memory and by how much it is over
            out.append((label, fmt(est.memory, "B"), misfit(est), misfit(est), "—", "—"))
            continue
        out.append((label, fmt(est.memory, "B"), fmt(floor.time, "s"), fmt(est.time, "s"),
                    f"{fmt(floor.parts['data-parallel'], 's')} / {fmt(est.parts['data-parallel'], 's')}",
                    _mfu_pair(floor, est)))
    return Table(columns, tuple(out), title, wrap=("layout",))


# --- chapter 13: serving at scale

__all__ += ["sustained_table", "serving_dev_table", "serving_plan_table", "ep_decode_table"]


def _ms(x) -> str:
    return "—" if x is None else fmt(x, "s")


def sustained_table(rows: Mapping, title: str = "") -> Table:
    """Chapter 13: labelled :class:`~roofline.serving.deployment.Sustained` results side by side: output
    tokens/s per GPU, TTFT, TPOT, the batch per replica and what set it."""
    columns = ("", "tokens/s per GPU", "TTFT", "TPOT", "batch", "set by")
    body = tuple((label, f"{s.output_tokens_per_s_per_gpu:,.0f}", _ms(s.ttft_s), _ms(s.tpot_s), f"{s.batch:,.0f}",
                  s.limit) for label, s in rows.items())
    return Table(columns, body, title)


def serving_dev_table(checks, title: str = "") -> Table:
    """Chapter 13: the serving development set (:func:`~roofline.measured.serving.serving_dev_checks`), one row
    per run: the published output tokens/s of the whole group, the ceiling's and the estimate's ratios to
    it (the estimate's to three places, so that a miss just past the band does not read as inside it), the
    estimate's batch and the TensorRT-LLM release that ran it. Short headers, so that it fits a page's column."""
    columns = ("run", "release", "published", "ceiling ×", "estimate ×", "batch")
    body = tuple((c.run.label, c.run.version, f"{c.run.published:,.0f}", f"{c.ceiling_over_published:.2f}",
                  f"{c.estimate_over_published:.3f}" + ("" if c.within_band else " *"), f"{c.estimate.batch:,.0f}")
                 for c in checks)
    return Table(columns, body, title, wrap=("run",))


def ep_decode_table(checks, title: str = "") -> Table:
    """Chapter 13: DeepSeek-V3/R1 decoding at scale (:func:`~roofline.measured.serving.ep_decode_checks`), one row
    per published deployment: its sequences per GPU and cache length, the published output tokens/s per GPU,
    the ceiling, the estimate with the two-batch overlap and without it (tokens/s per GPU, one token a step),
    the estimate's ratio to published, and what binds the experts' grouped matmul."""
    columns = ("deployment", "batch", "cache", "published", "ceiling", "estimate", "no overlap", "estimate ×",
               "experts")
    body = tuple((c.run.label + (", MTP on" if c.run.mtp else ""), f"{c.run.batch_per_gpu:,}", f"{c.run.kv_length:,}",
                  f"{c.run.published_per_gpu:,.0f}", f"{c.per_gpu(c.ceiling):,.0f}", f"{c.per_gpu(c.estimate):,.0f}",
                  f"{c.per_gpu(c.added):,.0f}", f"{c.estimate_over_published:.2f}", c.estimate.expert_matmuls or "")
                 for c in checks)
    return Table(columns, body, title, wrap=("deployment", "experts"))


def serving_plan_table(rows, n: int = 6, title: str = "") -> Table:
    """Chapter 13: the first ``n`` of :func:`~roofline.serving.deployment.plan_serving`'s rows: the layout,
    its GPUs, output tokens/s per GPU under the targets, the batch per replica and the budget it spends most."""
    columns = ("layout", "GPUs", "tokens/s per GPU", "batch", "bound")
    body = tuple((r.deployment.label(), f"{r.deployment.replica_gpus}", f"{r.tokens_per_s_per_gpu:,.0f}",
                  f"{r.capacity.batch:,.0f}", r.capacity.bound if r.meets else "misses the targets") for r in list(rows)[:n])
    return Table(columns, body, title, wrap=("layout",))


# --- chapters 7 and 9: the chapter's verdicts beside the calibrated estimate, in one table each -----------------

__all__ += ["verdicts_table", "published_layouts_table"]


def _verdict_cell(cell, hardware=None) -> str:
    """A cell of :func:`verdicts_table`: None a dash, text as it is, ``(value, unit[, digits])`` a number with its
    unit (a fraction in '%'), a priced layout its MFU and ``('step', layout)`` its step time, or either way by how
    much it does not fit (:func:`mfu_cell`, :func:`step_cell`)."""
    if cell is None:
        return "—"
    if isinstance(cell, str):
        return cell
    if isinstance(cell, tuple) and len(cell) == 2 and cell[0] == "step":
        return step_cell(cell[1], hardware)
    if isinstance(cell, tuple):
        if len(cell) not in (2, 3):
            raise TypeError(f"a number cell is (value, unit) or (value, unit, digits), got {cell!r}")
        value, unit, *d = cell
        return fmt(float(number("cell", value)), unit, d[0] if d else 3, convert=unit == "%")
    if hasattr(cell, "mfu"):
        return mfu_cell(cell, hardware)
    raise TypeError(f"a cell is None, text, (value, unit[, digits]), a priced layout (its MFU) or ('step', a priced "
                    f"layout), got {type(cell).__name__}")


def verdicts_table(rows: Mapping[str, Sequence], columns: Sequence[str], title: str = "", *, hardware=None,
                   wrap: Sequence[str] = ()) -> Table:
    """Chapter 7: each claim of a chapter (a row, named by its label) priced several ways (the ``columns``: the
    chapter's own count, the cluster model's datasheet floor, its calibrated estimate, a published figure), so
    that one sentence can give the verdict and the numbers stay in the table. A cell is None (a dash), text, a
    number ``(value, unit[, digits])`` or a priced layout, shown as its MFU, or by how much it does not fit
    (a planner :class:`~roofline.parallel.planner.Layout` on ``hardware``, the chip it must fit on).

    The columns named in ``wrap`` hold words (layouts, say) that may wrap on the page; a number in one of them
    keeps its unit on its line (a no-break space between them), as a column that does not wrap does."""
    columns = tuple(columns)
    unknown = [c for c in wrap if c not in columns]
    if unknown:
        raise ValueError(f"wrap names columns the table lacks: {', '.join(map(repr, unknown))}")
    out = []
    for label, cells in dict(rows).items():
        cells = tuple(cells)
        if len(cells) != len(columns):
            raise ValueError(f"row {label!r} has {len(cells)} cells for {len(columns)} columns")
        out.append((label, *(_verdict_cell(c, hardware).replace(" ", "\u00a0")
                             if column in wrap and not isinstance(c, str) else _verdict_cell(c, hardware)
                             for c, column in zip(cells, columns))))
    return Table(("", *columns), tuple(out), title, wrap=("", *wrap))


def published_layouts_table(rows, title: str = "") -> Table:
    """Chapter 9: each published training run beside the first-order planner's best layout for the same model,
    GPUs and batch, and beside the calibrated estimate of the run's own layout. ``rows`` holds ``(label, published,
    planner Layout, published over estimate)``: ``published`` a dict with ``gpus``, ``tp``, ``pp`` and ``tflops``
    (model TFLOP/s per GPU, in FLOP/s); the last, the run's speed over the estimate's (above 1: the run was faster).
    The planner's bound is its best layout's rate, so 'published / bound' is at most one for a floor that holds."""
    columns = ("run", "GPUs", "published TP x PP", "published, TFLOP/s per GPU", "planner's best TP x PP x DP",
               "published / planner's bound", "published / estimate")
    out = []
    for label, pub, best, over in rows:
        if not best.fits:
            raise ValueError(f"{label}: the planner's best layout must be one that fits")
        out.append((label, f"{pub['gpus']:,}", f"{pub['tp']} x {pub['pp']}", f"{pub['tflops'] / 1e12:.0f}",
                    f"{best.tp} x {best.pp} x {best.dp}", f"{100 * pub['tflops'] / best.tflops:.0f}%",
                    f"{float(number('published over estimate', over)):.2f}"))
    return Table(columns, tuple(out), title)


__all__ += ["layout_cell"]


def layout_cell(step) -> str:
    """A priced training layout in a few words for a table cell, whichever model priced it: a planner
    :class:`~roofline.parallel.planner.Layout` as 'TP 4 · PP 1 · DP 16, ZeRO-3', a
    :class:`~roofline.parallel.cluster.StepPrice` as :func:`short_layout` gives its layout, with its ZeRO stage
    (chapter 9 sets the planner's choice beside the calibrated search's)."""
    if hasattr(step, "layout") and hasattr(step, "roof"):  # StepPrice
        return f"{short_layout(step.layout)}, ZeRO-{step.layout.zero_stage}"
    if all(hasattr(step, k) for k in ("tp", "pp", "dp", "zero_stage")):  # planner Layout
        return f"TP {step.tp} · PP {step.pp} · DP {step.dp}, ZeRO-{step.zero_stage}"
    raise TypeError(f"step must be a StepPrice or a planner Layout, got {type(step).__name__}")
