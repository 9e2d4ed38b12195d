"""Figures for the book and for slides. Each helper draws; none computes a formula of its own.

Colours are the Okabe-Ito palette (safe for the common colour-vision deficiencies); figures have a
solid white background so that they read the same in the book's light and dark themes.
:func:`save` writes every figure to ``figures/`` as SVG and PNG, with no timestamps, so a rebuild
that changes nothing changes no file.
"""

from __future__ import annotations

from contextlib import contextmanager
import os
from pathlib import Path
from typing import Iterable, Sequence

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
from numpy.typing import ArrayLike

from roofline.core.checks import number
from roofline.core.hardware import Hardware, get_hardware
from roofline.core.network import Tier
from roofline.core.roof import Roof, as_roof, attainable_flops
from roofline.core.units import fmt
from roofline.parallel.cluster import part_shares
from roofline.workloads import quantization as q

__all__ = ["PALETTE", "style", "roofline_chart", "ridge_chart", "tiers_chart", "memory_bars", "memory_curves", "save",
           "figures_folder", "measured_roofline_chart", "measured_vs_predicted_chart", "calibration_chart", "ratio_chart",
           "timing_parts", "timing_bars", "kv_bytes_chart", "capacity_chart", "serving_throughput_chart", "sweep_chart",
           "frontier_chart", "recompute_throughput_chart", "tile_traffic_chart", "attention_sweep_chart", "speedup_chart", "quality_chart",
           "matmul_throughput_chart", "tp_layer_chart", "tp_decode_chart", "tp_memory_chart",
           "experts_touched_chart", "moe_decode_chart", "all_to_all_chart",
           "pipeline_timeline_chart", "bubble_chart", "stage_memory_chart", "plan_frontier_chart", "legend_below", "collective_bytes_chart", "exposure_chart", "zero_tradeoff_chart"]

# Okabe & Ito, "Color Universal Design" (2008)
PALETTE = {
    "blue": "#0072B2",
    "orange": "#E69F00",
    "green": "#009E73",
    "vermillion": "#D55E00",
    "sky": "#56B4E9",
    "purple": "#CC79A7",
    "yellow": "#F0E442",
    "black": "#000000",
}
_CYCLE = [PALETTE[c] for c in ("blue", "orange", "green", "vermillion", "purple", "sky", "black")]

_RC = {
    "figure.facecolor": "white",
    "axes.facecolor": "white",
    "savefig.facecolor": "white",
    "axes.edgecolor": "#333333",
    "axes.labelcolor": "#111111",
    "text.color": "#111111",
    "xtick.color": "#333333",
    "ytick.color": "#333333",
    "axes.grid": True,
    "grid.color": "#dddddd",
    "grid.linewidth": 0.6,
    "axes.spines.top": False,
    "axes.spines.right": False,
    # Sizes for a figure about 7 inches wide shown at the page's width: labels near 10 pt as displayed.
    "font.size": 11,
    "axes.titlesize": 12,
    "axes.labelsize": 11,
    "xtick.labelsize": 10,
    "ytick.labelsize": 10,
    "legend.fontsize": 10,
    "legend.frameon": False,
    "axes.prop_cycle": matplotlib.cycler(color=_CYCLE),
    "svg.hashsalt": "roofline",  # stable element ids in SVG output
    "svg.fonttype": "none",
}

# Where figures for slides go: the book's figures/, found from the working directory.
BOOK_MARKER = "_toc.yml"  # the file that marks a Jupyter Book's root


def figures_folder(start: str | Path | None = None) -> Path:
    """Where :func:`save` writes when no folder is given: ``$ROOFLINE_FIGURES`` if set, else the
    ``figures/`` folder of the book that holds ``start`` (default: the working directory, which for a
    chapter is ``chapters/``), found by walking up to the folder with ``_toc.yml``; a chapter opened
    outside the book (a copy in a reader's own folder) saves into ``figures/`` beside itself."""
    if os.environ.get("ROOFLINE_FIGURES"):
        return Path(os.environ["ROOFLINE_FIGURES"])
    here = Path(start if start is not None else Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / BOOK_MARKER).is_file():
            return folder / "figures"
    return here / "figures"


@contextmanager
def style():
    """The book's matplotlib style, as a context manager.

    A notebook's inline backend switches interactive mode on when the first figure is made; if that
    happens inside the context, leaving it must not switch it off again, or later cells would stop
    showing their figures.
    """
    with plt.rc_context(_RC):
        yield
        interactive = matplotlib.is_interactive()
    matplotlib.interactive(interactive)


@contextmanager
def _chart(width: float, height: float, *, ax=None, nrows: int = 1, ncols: int = 1, **subplots):
    """Every chart's frame: the book's :func:`style`, and a new figure ``width`` x ``height`` inches with
    constrained layout (``nrows`` x ``ncols`` axes, ``subplots`` passed on), or the figure of ``ax`` when a
    caller draws into its own axes. Yields ``(figure, axes)``."""
    with style():
        if ax is None:
            fig, ax = plt.subplots(nrows, ncols, figsize=(width, height), layout="constrained", **subplots)
        else:
            fig = ax.figure
        yield fig, ax


def _label(ax, *, xlabel: str | None = None, ylabel: str | None = None, title: str | None = None,
           legend: int | None = None) -> None:
    """Every chart's finish: axis labels, the title when one is given, and the legend below the axes in
    ``legend`` columns (none when ``legend`` is None)."""
    if xlabel is not None:
        ax.set_xlabel(xlabel)
    if ylabel is not None:
        ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    if legend is not None:
        legend_below(ax, ncol=legend)


def _log_axis(ax, which: str, major=None, minor=None) -> None:
    """A log-scaled ``which`` ('x' or 'y') axis whose ticks read as plain numbers: ``major`` and ``minor``
    format the ticks (:func:`_plain`, :func:`_thousands`, :func:`_two_five`), None keeps matplotlib's."""
    getattr(ax, f"set_{which}scale")("log")
    axis = getattr(ax, f"{which}axis")
    if major is not None:
        axis.set_major_formatter(matplotlib.ticker.FuncFormatter(major))
    if minor is not None:
        axis.set_minor_formatter(matplotlib.ticker.FuncFormatter(minor))


def _roofs(roofs) -> list[Roof]:
    if isinstance(roofs, (Roof, Hardware, str)):
        roofs = [roofs]
    return [as_roof(r) for r in roofs]


def roofline_chart(roofs, points: Sequence[dict] = (), *, intensity=(0.1, 1e4), ax=None, title=None,
                   annotate_ridge=True, traffic: str = "HBM"):
    """Log-log roofline: one roof per entry of ``roofs``, and work as labelled points under them.

    ``points`` are dicts with ``intensity``, ``flops_per_s`` (achieved or attainable), ``label`` and
    optional ``color``, ``marker``, ``size``, ``hollow`` (drawn as a ring, over a point that shares its place) and ``legend`` (a legend entry instead of a label beside the point). ``traffic`` names the memory the bytes cross, for the x axis
    ('HBM' on a GPU, 'memory' for a CPU's DRAM). Returns the figure.
    """
    roofs = _roofs(roofs)
    with _chart(7, 4.4, ax=ax) as (fig, ax):
        x = np.geomspace(*intensity, 400)
        for i, r in enumerate(roofs):
            color = _CYCLE[i % len(_CYCLE)]
            y = attainable_flops(x, r) / 1e12
            # datasheet roofs solid, measured dashed; a second or third roof of the same kind gets its own
            # dash pattern, so that two roofs that coincide (the H100's and H200's compute) both show
            patterns = ("-", (0, (6, 2)), (0, (2, 1.5))) if r.kind == "datasheet" else ("--", (0, (1, 1.5)), "-.")
            same_kind = sum(q.kind == r.kind for q in roofs[:i])
            ax.plot(x, y, ls=patterns[min(same_kind, 2)], color=color, lw=2.2 if i == 0 else 1.6, zorder=2 + i,
                    label=f"{r.label}: {fmt(r.peak_flops, 'FLOP/s', 4)}, {fmt(r.bandwidth, 'B/s')}"
                          + (f", ridge {r.ridge_point:,.0f}" if annotate_ridge else ""))
            if annotate_ridge and intensity[0] < r.ridge_point < intensity[1]:
                ax.plot([r.ridge_point], [r.peak_flops / 1e12], "o", color=color, ms=5)
                ax.axvline(r.ridge_point, color=color, lw=0.8, ls=":", zorder=1)
        for p in points:  # a point with a "legend" entry is named in the legend rather than beside it
            color = p.get("color", PALETTE["vermillion"])
            if p.get("hollow"):  # a ring around the spot, so that a point drawn at the same place shows inside
                ax.plot([p["intensity"]], [p["flops_per_s"] / 1e12], p.get("marker", "D"), ms=p.get("size", 14),
                        mfc="none", mec=color, mew=2.2, zorder=6, label=p.get("legend"))
            else:
                ax.plot([p["intensity"]], [p["flops_per_s"] / 1e12], p.get("marker", "D"), ms=p.get("size", 8),
                        color=color, mec="black", mew=0.6, zorder=5, label=p.get("legend"))
            if p.get("label"):
                ax.annotate(p["label"], (p["intensity"], p["flops_per_s"] / 1e12), textcoords="offset points",
                            xytext=p.get("offset", (8, -4)), fontsize=9.5, ha=p.get("ha", "left"))
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(*intensity)
        top = max(r.peak_flops for r in roofs) / 1e12
        ax.set_ylim(top * 1e-4, top * 2.5)
        _label(ax, xlabel=f"arithmetic intensity (FLOP per byte of {traffic} traffic)",
                   ylabel="attainable throughput (TFLOP/s)", title=title, legend=1)
    return fig


def _plain(v, _pos=None) -> str:
    """A tick label with no trailing zeros or exponent: 0.5, 10, 200."""
    return f"{v:g}"


def _thousands(v, _pos=None) -> str:
    """A tick label in whole units with thousands separated: 4,096."""
    return f"{v:,.0f}"


def _two_five(v, _pos=None) -> str:
    """A minor tick label on a log axis, shown only at 2 and 5 of each decade."""
    return f"{v:g}" if f"{v:g}"[0] in "25" else ""


def legend_below(ax, ncol: int = 1):
    """The legend under the axes, outside the data, so that no entry reads as a point or hides one."""
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, -0.17), ncol=ncol, fontsize=9.5,
                  frameon=False)


def ridge_chart(names: Iterable[str], dtype: str = "bf16", fallback: str = "fp16"):
    """Two panels across generations: compute and bandwidth growth, and the ridge point they imply.

    A chip without ``dtype`` (the V100 has no bf16) is drawn with ``fallback`` and says so.
    """
    hws = [get_hardware(n) for n in names]
    labels, flops, bw = [], [], []
    for h in hws:
        d = dtype if dtype in h.dense_flops else fallback
        labels.append(h.short.replace(" ", "\n") + ("" if d == dtype else f"\n({d})"))
        flops.append(h.peak_flops(d))
        bw.append(h.hbm_bandwidth)
    flops, bw = np.array(flops), np.array(bw)
    ridge = flops / bw
    with _chart(7.5, 3.9, nrows=1, ncols=2) as (fig, (a, b)):
        x = np.arange(len(hws))
        peak = "16-bit" if dtype in ("bf16", "fp16") else dtype  # the format the line draws, named
        a.plot(x, flops / flops[0], "o-", color=PALETTE["blue"], label=f"dense {peak} peak FLOP/s")
        a.plot(x, bw / bw[0], "s-", color=PALETTE["orange"], label="HBM bandwidth")
        a.set_yscale("log")
        a.set_ylabel(f"relative to {hws[0].short} (×, log scale)")
        a.set_xticks(x, labels, fontsize=9.5)
        a.set_title("compute outgrows bandwidth", fontsize=11)
        a.set_ylim(top=max(flops / flops[0]) * 1.8)
        a.legend(fontsize=9.5)
        for xi, (f, m) in enumerate(zip(flops / flops[0], bw / bw[0])):
            box = dict(boxstyle="square,pad=0.1", facecolor="white", edgecolor="none")
            a.annotate(f"{f:.1f}×", (xi, f), textcoords="offset points", xytext=(-6, 6), ha="right", va="bottom",
                       fontsize=9.5, color=PALETTE["blue"], bbox=box, zorder=6)
            a.annotate(f"{m:.1f}×", (xi, m), textcoords="offset points", xytext=(6, -6), ha="left", va="top",
                       fontsize=9.5, color=PALETTE["orange"], bbox=box, zorder=6)
        bars = b.bar(x, ridge, color=[PALETTE["sky"]] * len(hws), edgecolor="black", linewidth=0.6)
        for bar, r in zip(bars, ridge):
            b.annotate(f"{r:,.0f}", (bar.get_x() + bar.get_width() / 2, r), textcoords="offset points",
                       xytext=(0, 3), ha="center", fontsize=9.5)
        b.set_xticks(x, labels, fontsize=9.5)
        b.set_ylabel("ridge point (FLOP per byte)")
        b.set_title("ridge point: FLOPs owed per byte", fontsize=11)
        b.set_ylim(0, ridge.max() * 1.18)
    return fig


def tiers_chart(tiers: Sequence[Tier]):
    """Horizontal bars, log scale: bytes per second one way per GPU for each tier, fastest on top."""
    with _chart(7, 0.55 * len(tiers) + 1.2) as (fig, ax):
        y = np.arange(len(tiers))[::-1]
        values = np.array([t.each_way for t in tiers]) / 1e9
        ax.barh(y, values, color=[_CYCLE[i % len(_CYCLE)] for i in range(len(tiers))], edgecolor="black", linewidth=0.6)
        for yi, t, v in zip(y, tiers, values):
            ax.annotate(fmt(t.each_way, "B/s"), (v, yi), textcoords="offset points", xytext=(4, -3), fontsize=9.5)
        ax.set_yticks(y, [f"{t.name}\n{t.note}" for t in tiers], fontsize=9.5)
        ax.set_xscale("log")
        ax.set_xlim(values.min() / 3, values.max() * 6)
        ax.set_xlabel("bandwidth per GPU, one direction (GB/s, log scale)")
        ax.grid(axis="y", visible=False)
    return fig


def measured_roofline_chart(roofs, series: dict, *, intensity=(0.3, 1e4), title=None, floor=None,
                            traffic: str = "HBM"):
    """Roofs (datasheet solid, measured dashed) with measured work as dots (appendix).

    ``series`` maps a legend label to ``(intensity, flops_per_s)`` arrays, or to a dict with those
    keys and optional ``color``, ``marker`` and ``line`` (join the dots). Colours default to the
    Okabe-Ito palette after the roofs' own. ``floor`` sets the bottom of the y axis in FLOP/s.
    """
    fig = roofline_chart(roofs, intensity=intensity, title=title, traffic=traffic)
    ax = fig.axes[0]
    dots = [c for c in ("vermillion", "green", "purple", "sky", "black", "yellow")]
    with style():
        for i, (label, s) in enumerate(series.items()):
            s = s if isinstance(s, dict) else {"intensity": s[0], "flops_per_s": s[1]}
            color = s.get("color", PALETTE[dots[i % len(dots)]])
            ax.plot(np.asarray(s["intensity"]), np.asarray(s["flops_per_s"]) / 1e12, s.get("marker", "o"),
                    ls="-" if s.get("line", True) else "none", lw=0.8, ms=5, color=color, mec="black", mew=0.4,
                    label=label, zorder=5)
        if floor is not None:
            ax.set_ylim(bottom=floor / 1e12)
        legend_below(ax)
    return fig


def measured_vs_predicted_chart(x: ArrayLike, measured, predicted: dict, *, xlabel: str, ylabel: str, title=None,
                                logx=True, logy=False, scale=1.0, ax=None):
    """Measured values as dots and the roofline's predictions as lines against ``x`` (appendix).

    ``measured`` is an array, or a dict of label -> array for several measured series;
    ``predicted`` maps a label ('datasheet roof', 'measured roof') to an array. Values are divided
    by ``scale`` for display (1e-3 shows seconds as ms).
    """
    x = np.asarray(x)
    measured = measured if isinstance(measured, dict) else {"measured": measured}
    with _chart(6.2, 3.9, ax=ax) as (fig, ax):
        lines = ("-", "--", ":", "-.")
        for i, (label, y) in enumerate(predicted.items()):
            ax.plot(x, np.asarray(y) / scale, lines[i % len(lines)], color=_CYCLE[i % len(_CYCLE)], lw=1.8,
                    label=f"predicted, {label}")
        dots = ("vermillion", "black", "green", "purple")
        for i, (label, y) in enumerate(measured.items()):
            ax.plot(x, np.asarray(y) / scale, "o", ms=6, color=PALETTE[dots[i % len(dots)]], mec="black", mew=0.5,
                    label=label, zorder=5)
        if logx:
            ax.set_xscale("log", base=2)
            ax.set_xticks(x, [f"{v:,.0f}" for v in x], fontsize=9.5)
            ax.minorticks_off()
        if logy:
            ax.set_yscale("log")
        _label(ax, xlabel=xlabel, ylabel=ylabel, title=title, legend=2)
    return fig


def save(fig, name: str, folder: str | Path | None = None) -> None:
    """Write ``fig`` as ``name.svg`` and ``name.png`` into ``folder`` (default :func:`figures_folder`: the
    book's ``figures/``, for slides)."""
    folder = Path(folder) if folder is not None else figures_folder()
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"{name}.svg", folder / f"{name}.png"]
    with style():
        fig.savefig(paths[0], metadata={"Date": None, "Creator": None})
        fig.savefig(paths[1], dpi=150, metadata={"Software": None})


def memory_bars(footprints, capacities=("h100-sxm", "h200-sxm"), *, title=None, ax=None, xmax=None):
    """Stacked horizontal bars of per-GPU memory, one bar per labelled footprint, with each GPU's
    HBM capacity as a vertical line (chapter 2). ``footprints`` maps a label to a
    :class:`roofline.workloads.memory.Footprint` of scalars. ``xmax`` (GB) clips longer bars; their total is
    still printed, at the edge, with an arrow."""
    labels = list(footprints)
    parts = list(dict.fromkeys(p for f in footprints.values() for p in f.parts))
    colors = dict(zip(parts, _CYCLE + [PALETTE["yellow"], "#777777"]))
    with _chart(7.5, 0.42 * len(labels) + 2.0, ax=ax) as (fig, ax):
        y = np.arange(len(labels))[::-1]
        left = np.zeros(len(labels))
        for part in parts:
            widths = np.array([float(footprints[l].parts.get(part, 0.0)) for l in labels]) / 1e9
            ax.barh(y, widths, left=left, color=colors[part], edgecolor="black", linewidth=0.4, label=part)
            left += widths
        limit = xmax or max(left.max(), max(get_hardware(c).usable_capacity for c in capacities) / 1e9) * 1.15
        for yi, total in zip(y, left):
            label = f"{total:,.1f} GB" if total <= limit else f"{total:,.0f} GB →"
            ax.annotate(label, (min(total, limit), yi), textcoords="offset points", xytext=(4, 0) if total <= limit else (-4, 12),
                        ha="left" if total <= limit else "right", va="center", fontsize=9.5, zorder=6,
                        bbox=dict(boxstyle="square,pad=0.15", facecolor="white", edgecolor="none"))
        for i, name in enumerate(capacities):
            h = get_hardware(name)
            ax.axvline(h.usable_capacity / 1e9, color="black", ls=("--", ":", "-.")[i % 3], lw=1, zorder=1)
            # two short lines, so that the labels of two nearby capacities (84 and 149 GB) do not run together
            ax.annotate(f"{h.short}\n{h.usable_capacity / 1e9:,.1f} GB usable", (h.usable_capacity / 1e9, y.max() + 1.0),
                        fontsize=9.5, ha="center", va="center", backgroundcolor="white", linespacing=1.1)
        ax.set_yticks(y, labels, fontsize=9.5)
        ax.set_xlabel("memory per GPU (GB)")
        ax.set_xlim(0, limit)
        ax.set_ylim(y.min() - 0.6 - (0.9 if len(labels) == 1 else 0), y.max() + 1.55)
        ax.grid(axis="y", visible=False)
        legend_below(ax, ncol=4)
        _label(ax, title=title)
    return fig


def memory_curves(x, curves, *, capacities=("h100-sxm", "h200-sxm"), xlabel="sequence length (tokens)",
                  title=None, ax=None):
    """Bytes against a swept quantity (log-log), one line per labelled curve, capacities as lines."""
    with _chart(7, 4.2, ax=ax) as (fig, ax):
        markers = "osD^v<>"
        for i, (label, y) in enumerate(curves.items()):
            ax.plot(x, np.asarray(y) / 1e9, marker=markers[i % len(markers)], ms=4, label=label)
        for i, name in enumerate(capacities):
            h = get_hardware(name)
            ax.axhline(h.usable_capacity / 1e9, color="black", ls=("--", ":", "-.")[i % 3], lw=1)
            ax.annotate(f"{h.short} {h.usable_capacity / 1e9:,.1f} GB usable", (x[0], h.usable_capacity / 1e9),
                        textcoords="offset points", xytext=(2, 3), fontsize=9.5)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(x, [f"{v / 1024:g}k" if v >= 1024 else f"{v:g}" for v in x])
        ax.minorticks_off()
        ax.set_xlabel(xlabel)
        ax.set_ylabel("memory (GB, log scale)")
        legend_below(ax)
        _label(ax, title=title)
    return fig


def calibration_chart(roof, datasheet: Hardware | str, *, title=None):
    """What a calibrated roof knows (appendix): bandwidth by bytes per kernel, and matmul and flash
    attention throughput by rows, each against the datasheet's ceiling."""
    h = get_hardware(datasheet)
    with _chart(7.0, 6.0, nrows=2, ncols=1) as (fig, (left, right)):
        xs = np.asarray(roof.read_bytes)
        grid = np.geomspace(xs[0] / 4, xs[-1] * 4, 200)
        left.plot(grid, grid / roof.memory_seconds(grid) / 1e12, "-", color=PALETTE["blue"], lw=1.6,
                  label="calibrated: bytes / time")
        left.plot(xs, xs / np.asarray(roof.read_seconds) / 1e12, "o", ms=4.5, color=PALETTE["vermillion"], mec="black",
                  mew=0.4, label="read sweep", zorder=5)
        left.axhline(h.hbm_bandwidth / 1e12, color="black", ls="--", lw=1, label=f"{h.short} datasheet")
        left.set_xscale("log")
        left.set_yscale("log")
        left.set_xlabel("bytes one kernel moves")
        left.set_ylabel("bandwidth reached (TB/s)")
        left.set_title("memory: latency, then bandwidth", fontsize=10)
        left.legend(loc="lower right", fontsize=8)
        for dtype, color in (("bf16", PALETTE["green"]), ("fp8", PALETTE["purple"])):
            if dtype in roof.matmul_rows:
                rows = np.asarray(roof.matmul_rows[dtype])
                right.plot(rows, np.asarray(roof.matmul_flops[dtype]) / 1e12, "o-", ms=4, lw=1.2, color=color,
                           mec="black", mew=0.4, label=f"{dtype} matmul, best of the sweep")
                right.axhline(h.peak_flops(dtype) / 1e12, color=color, ls="--", lw=1)
                right.annotate(f"{dtype} datasheet", (rows[0], h.peak_flops(dtype) / 1e12), textcoords="offset points",
                               xytext=(2, 3), fontsize=8, color=color)
        if roof.attention_tokens:
            right.plot(roof.attention_tokens, np.asarray(roof.attention_flops) / 1e12, "s-", ms=4, lw=1.2,
                       color=PALETTE["orange"], mec="black", mew=0.4, label="flash attention (causal)")
        right.set_xscale("log", base=2)
        right.set_yscale("log")
        right.set_xlabel("rows m (tokens), or sequence length")
        right.set_ylabel("TFLOP/s reached")
        right.set_title("compute: few rows are bound by reading the weights", fontsize=10)
        right.legend(loc="lower right", fontsize=8)
        if title:
            fig.suptitle(title, fontsize=11)
    return fig


def ratio_chart(series: dict, *, band: float = 1.25, title=None, xlim=(0.4, 1.6)):
    """Predicted over measured, point by point, one marker style per series (appendix). ``series`` maps
    a label to a list of :class:`~roofline.measured.Comparison`; all cover the same points. The band
    ``1/band .. band`` is shaded; points outside it are drawn at the edge with their value."""
    first = next(iter(series.values()))
    labels = [c.label.replace("decode ", "").replace("prefill ", "prefill, ") for c in first]
    y = np.arange(len(labels))[::-1]
    markers = ("o", "D", "s", "^")
    colors = (PALETTE["vermillion"], PALETTE["blue"], PALETTE["green"], PALETTE["purple"])
    with _chart(7.2, 0.18 * len(labels) + 1.3) as (fig, ax):
        ax.axvspan(1 / band, band, color="#e8f4ea", zorder=0, label=f"within {band:g}x")
        ax.axvline(1, color="black", lw=0.8)
        for i, (label, comps) in enumerate(series.items()):
            r = np.array([c.ratio for c in comps])
            shown = np.clip(r, xlim[0] * 1.02, xlim[1] / 1.02)
            ax.plot(shown, y, markers[i % 4], ms=5, color=colors[i % 4], mec="black", mew=0.4, ls="none", label=label,
                    zorder=5)
            for yi, ri, si in zip(y, r, shown):
                if ri != si:
                    ax.annotate(f"{ri:.2f}", (si, yi), textcoords="offset points", xytext=(4 if ri > 1 else -4, -3),
                                ha="left" if ri > 1 else "right", fontsize=8)
        ax.set_yticks(y, labels, fontsize=9)
        ax.set_xscale("log")
        ax.set_xlim(*xlim)
        ticks = [0.5, 0.67, 0.8, 1, 1.25, 1.5]
        ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
        ax.minorticks_off()
        ax.set_xlabel("predicted / measured time")
        ax.grid(axis="y", visible=False)
        ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=1, fontsize=8, frameon=False)
        _label(ax, title=title)
    return fig


# kinds of kernel as the timing charts group them
_KIND_GROUPS = (("matmul", ("matmul",), "blue"), ("attention", ("attention",), "orange"),
                ("elementwise", ("elementwise", "lookup"), "green"))


def timing_parts(prediction) -> dict:
    """A prediction's time split by kind of kernel, plus the launch floor's share (for :func:`timing_bars`).

    Under the kernel and serial rules each kernel's ``max(compute, memory)`` (kernel) or ``compute +
    memory`` (serial) goes to its kind and the rest of its time to 'launches'. Under the step rule the
    whole time is one piece, 'the whole step'.
    """
    if prediction.timing == "step":
        return {"the whole step": float(prediction.time)}
    out = {name: 0.0 for name, _, _ in _KIND_GROUPS}
    out["launches"] = 0.0
    for t in prediction.ops:
        work = float(np.maximum(t.compute, t.memory)) if prediction.timing == "kernel" else float(t.compute + t.memory)
        kind = next(name for name, kinds, _ in _KIND_GROUPS if t.op.kind in kinds)
        out[kind] += work
        out["launches"] += float(t.time) - work
    return out


def timing_bars(predictions: dict, *, title=None, xmax=None, ax=None):
    """Horizontal bars of predicted time (ms), one per labelled prediction, split by kind of kernel."""
    colors = {name: PALETTE[c] for name, _, c in _KIND_GROUPS}
    colors.update({"launches": PALETTE["purple"], "the whole step": "#999999"})
    labels = list(predictions)
    y = np.arange(len(labels))[::-1]
    with _chart(7, 0.5 * len(labels) + 1.4, ax=ax) as (fig, ax):
        seen = set()
        for yi, label in zip(y, labels):
            left = 0.0
            for part, t in timing_parts(predictions[label]).items():
                if t <= 0:
                    continue
                ax.barh(yi, t * 1e3, left=left, color=colors[part], edgecolor="black", linewidth=0.4,
                        label=part if part not in seen else None)
                seen.add(part)
                left += t * 1e3
            ax.annotate(fmt(float(predictions[label].time), "s"), (left, yi), textcoords="offset points", xytext=(4, -3),
                        fontsize=8)
        ax.set_yticks(y, labels, fontsize=8)
        ax.set_xlabel("predicted time (ms)")
        ax.set_xlim(0, xmax or max(float(p.time) for p in predictions.values()) * 1e3 * 1.18)
        ax.grid(axis="y", visible=False)
        ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8)
        if title:
            ax.set_title(title, fontsize=10)
    return fig


# --- chapter 5: the KV cache -------------------------------------------------------------------

_LAYOUT_COLORS = {"MHA": PALETTE["vermillion"], "GQA": PALETTE["blue"], "MQA": PALETTE["green"],
                  "MLA": PALETTE["purple"]}


def kv_bytes_chart(rows: Sequence[tuple[str, str, float]], *, title=None):
    """Horizontal bars of KV-cache bytes per token (kB, log scale), one per model, coloured by layout
    (chapter 5). ``rows`` holds (label, layout, bytes) triples, drawn top to bottom."""
    with _chart(7, 0.23 * len(rows) + 1.2) as (fig, ax):
        y = np.arange(len(rows))[::-1]
        seen = set()
        for yi, (label, layout, nbytes) in zip(y, rows):
            base = layout.split(" ")[0]
            name = base + (" + sliding window" if "sliding" in layout else "")
            ax.barh(yi, nbytes / 1e3, color=_LAYOUT_COLORS.get(base, PALETTE["black"]),
                    hatch="//" if "sliding" in layout else None, edgecolor="white",
                    label=None if name in seen else name)
            seen.add(name)
            ax.annotate(f"{nbytes / 1e3:,.0f} kB" if nbytes >= 1e4 else f"{nbytes / 1e3:,.1f} kB", (nbytes / 1e3, yi),
                        textcoords="offset points", xytext=(4, 0), va="center", fontsize=9.5)
        ax.set_yticks(y, [r[0] for r in rows], fontsize=9.5)
        ax.set_xscale("log")
        ax.set_xlim(right=ax.get_xlim()[1] * 3)
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(_thousands))
        _label(ax, xlabel="KV cache per token of context (kB, log scale)", title=title)
        ax.legend(loc="lower right", fontsize=9.5, frameon=True, framealpha=1, edgecolor="#dddddd")
    return fig


def capacity_chart(curves: dict, *, title=None, xlabel="context per sequence (tokens)"):
    """The largest batch against the context (log-log), one line per labelled curve (chapter 5).
    ``curves`` maps a label to ``(contexts, batches, style)``, ``style`` a matplotlib format such as
    '-' or '--'; a curve ends where the model's trained context ends."""
    with _chart(7, 4.6) as (fig, ax):
        colors = {}
        for label, (x, b, fmt_) in curves.items():
            model = label.split(",")[0]
            color = colors.setdefault(model, _CYCLE[len(colors) % len(_CYCLE)])
            x, b = np.asarray(x, dtype=float), np.asarray(b, dtype=float)
            keep = b >= 1
            ax.plot(x[keep], b[keep], fmt_, color=color, lw=1.8, label=label)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        every = sorted({float(v) for x, _, _ in curves.values() for v in np.asarray(x).ravel()})
        ticks = [t for t in every if np.log2(t).is_integer()] or every
        ax.set_xticks(ticks, [f"{t / 1024:g}k" if t >= 1024 else f"{t:g}" for t in ticks])
        ax.minorticks_off()
        ax.set_xlabel(xlabel)
        ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(_thousands))
        ax.set_ylabel("largest batch that fits (log scale)")
        ax.grid(True, which="major")
        _label(ax, title=title, legend=2)
    return fig


def serving_throughput_chart(batches: ArrayLike, curves: dict, walls: dict, *, title=None):
    """Decode tokens per second against the batch (log-log), one line per labelled curve, each ending
    at its capacity wall, marked with a bar and the batch (chapter 5). ``curves`` maps a label to
    tokens/s at ``batches``; ``walls`` maps the same label to the largest batch that fits."""
    with _chart(7, 4.4) as (fig, ax):
        x = np.asarray(batches, dtype=float)
        for i, (label, y) in enumerate(curves.items()):
            color = _CYCLE[i % len(_CYCLE)]
            wall = walls[label]
            y = np.asarray(y, dtype=float)
            ax.plot(x[x <= wall], y[x <= wall], "-", color=color, lw=2, label=label)
            ax.plot(x[x >= wall], y[x >= wall], ":", color=color, lw=1.2)
            at = np.interp(wall, x, y)
            ax.plot([wall], [at], "|", ms=18, mew=2.5, color=color)
            ax.annotate(f"wall: batch {wall:,}", (wall, at), textcoords="offset points", xytext=(-6, 8),
                        ha="right", fontsize=9.5, color=color)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ticks = [4**k for k in range(0, 8) if x.min() <= 4**k <= x.max()]
        ax.set_xticks(ticks, [f"{t:,}" for t in ticks])
        ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(_thousands))
        ax.yaxis.set_minor_locator(matplotlib.ticker.LogLocator(subs=(2, 5)))  # 200, 500, 2,000...: a decade
        ax.yaxis.set_minor_formatter(matplotlib.ticker.FuncFormatter(_thousands))  # is too coarse
        ax.set_xlabel("batch (sequences decoded together, log scale)")
        ax.set_ylabel("tokens per second (log scale)")
        ax.grid(True, which="major")
        _label(ax, title=title, legend=1)
    return fig


def sweep_chart(sweeps: dict, *, xlabel: str, ylabel: str = "time per decode step (ms)", title=None, scale=1e-3):
    """Measured points and predicted lines for several sweeps on one log-log chart (chapter 5).
    ``sweeps`` maps a label to ``(x, measured, predicted)``; values are divided by ``scale``."""
    with _chart(7, 4.4) as (fig, ax):
        for i, (label, (x, measured, predicted)) in enumerate(sweeps.items()):
            color = _CYCLE[i % len(_CYCLE)]
            ax.plot(x, np.asarray(predicted) / scale, "-", color=color, lw=1.8, label=f"{label}: predicted")
            ax.plot(x, np.asarray(measured) / scale, "o", ms=6, color=color, mec="black", mew=0.5,
                    label=f"{label}: measured", zorder=5)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        xs = sorted({float(v) for x, _, _ in sweeps.values() for v in x})
        ax.set_xticks(xs, [f"{v / 1024:g}k" if v >= 1024 else f"{v:g}" for v in xs], fontsize=9.5)
        ax.minorticks_off()
        ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(_plain))
        ax.yaxis.set_minor_locator(matplotlib.ticker.LogLocator(subs=(2, 5)))
        ax.yaxis.set_minor_formatter(matplotlib.ticker.FuncFormatter(_plain))
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(True, which="major")
        _label(ax, title=title, legend=2)
    return fig


def frontier_chart(points, *, capacity=None, title=None, annotate=(1, 4, 8)):
    """Chapter 3's frontier: activation memory on the GPU (log scale) against the extra FLOPs each policy
    runs, one marker per :class:`roofline.workloads.training.FrontierPoint`. Checkpoint spacings share one column
    (every spacing runs one extra forward pass); those in ``annotate`` are labelled with their spacing ``L_seg``.
    Offloading is drawn hollow: it buys its memory with host-link time, not FLOPs. ``capacity`` (bytes)
    draws a horizontal line, for example the room left beside the model state."""
    with _chart(7, 4.6) as (fig, ax):
        spaced = [p for p in points if p.recompute.startswith("every-")]
        others = [p for p in points if not p.recompute.startswith("every-")]
        ax.plot([100 * p.extra_flops for p in spaced], [p.memory / 1e9 for p in spaced], "o", ms=5,
                color=PALETTE["blue"], label=r"checkpoint every $L_\mathrm{seg}$ layers ($L_\mathrm{seg}$ = 1: full)")
        for p in spaced:
            k = int(p.recompute.split("-")[1])
            if k in annotate or k == max(int(q.recompute.split("-")[1]) for q in spaced):
                ax.annotate(rf"$L_\mathrm{{seg}}$ = {k}", (100 * p.extra_flops, p.memory / 1e9), textcoords="offset points",
                            xytext=(-8, -4 if k == 1 else 0), ha="right", va="center", fontsize=9.5)
        markers = {"explicit": "s", "flash": "D"}
        colors = [PALETTE["vermillion"], PALETTE["orange"], PALETTE["green"], "black", PALETTE["purple"], PALETTE["sky"]]
        for p, color in zip(others, colors):
            ax.plot(100 * p.extra_flops, p.memory / 1e9, markers[p.attention] if not p.offload else "o", ms=8,
                    color=color, markerfacecolor="white" if p.offload else color, markeredgewidth=1.6, label=p.label,
                    linestyle="none")
        if capacity is not None:
            ax.axhline(capacity / 1e9, color="black", ls="--", lw=1)
            ax.annotate("room beside the model state", (0, capacity / 1e9), textcoords="offset points",
                        xytext=(2, 3), fontsize=9.5)
        ax.set_yscale("log")
        ax.set_xlabel("extra FLOPs (% of the model's forward and backward)")
        ax.set_ylabel("activations on the GPU (GB, log scale)")
        ax.set_xlim(-3, None)
        legend_below(ax, ncol=2)
        _label(ax, title=title)
    return fig


def recompute_throughput_chart(micro_batches, series: dict, *, title=None, ylabel="TFLOP/s per GPU"):
    """Throughput against micro-batch (chapter 3): one line per labelled series of FLOP/s (NaN where the
    configuration does not fit, so the line stops there)."""
    with _chart(7, 4.2) as (fig, ax):
        styles = ["-", "--", ":", "-."]
        for i, (label, y) in enumerate(series.items()):
            y = np.asarray(y, dtype=float) / 1e12
            alone = np.count_nonzero(~np.isnan(y)) == 1  # one configuration fits: a larger marker, drawn on top
            ax.plot(micro_batches, y, marker="os^Dv"[i % 5], ms=10 if alone else 5, ls=styles[i % len(styles)],
                    label=label, zorder=3 + i, markeredgecolor="black" if alone else None)
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
        ax.set_xlabel("micro-batch (sequences per GPU)")
        ax.set_ylabel(ylabel)
        ax.set_ylim(0, None)
        legend_below(ax)
        _label(ax, title=title)
    return fig


def tile_traffic_chart(tiles: ArrayLike, bytes_moved: ArrayLike, intensity: ArrayLike, *, ridge: float, ridge_label: str, marks: dict = (),
                       crossing=None, title=None):
    """Chapter 4: a tiled matmul's HBM traffic (left) and intensity (right) against the square tile it
    holds on chip, log-log. ``marks`` maps a label to a tile (drawn as vertical lines on both panels);
    ``ridge`` is drawn across the right panel and ``crossing`` (a tile) marked where it is reached."""
    tiles = np.asarray(tiles, dtype=float)
    with _chart(7.2, 3.9, nrows=1, ncols=2) as (fig, (left, right)):
        left.plot(tiles, np.asarray(bytes_moved) / 1e9, color=PALETTE["blue"], lw=2, label="HBM traffic")
        right.plot(tiles, np.asarray(intensity), color=PALETTE["blue"], lw=2)
        right.axhline(ridge, color=PALETTE["vermillion"], ls="--", lw=1.2, label=ridge_label)
        if crossing is not None:
            i = int(np.argmin(np.abs(tiles - crossing)))
            right.plot([tiles[i]], [np.asarray(intensity)[i]], "o", ms=7, color=PALETTE["vermillion"], mec="black",
                       mew=0.6, zorder=5, label=f"ridge crossed at a tile of {crossing:,.0f}")
        styles = (":", "-.", (0, (5, 2)), (0, (1, 1)))
        for k, (label, tile) in enumerate(dict(marks).items()):
            for ax in (left, right):
                ax.axvline(tile, color="#555555", ls=styles[k % len(styles)], lw=1.1,
                           label=label if ax is left else None)
        for ax, ylabel in ((left, "HBM traffic (GB)"), (right, "intensity (FLOP per HBM byte)")):
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("square tile side (elements)")
            ax.set_ylabel(ylabel)
        handles, labels = [], []
        for ax in (left, right):
            h, l = ax.get_legend_handles_labels()
            handles += h
            labels += l
        fig.legend(handles, labels, loc="outside lower center", ncol=2, fontsize=9.5, frameon=False)
        if title:
            fig.suptitle(title, fontsize=12)
    return fig


def attention_sweep_chart(seqs: ArrayLike, predicted: dict, measured: dict, *, capacity: float, capacity_label: str,
                          ridge: float, ridge_label: str, title=None):
    """Chapter 4: attention's HBM traffic, peak memory, time and intensity against sequence length,
    2 x 2 panels, log-log. ``predicted`` maps a variant ('explicit', 'flash') to a dict of arrays
    ``bytes``, ``peak``, ``time``, ``intensity`` over ``seqs``; ``measured`` maps the same variants to
    dicts of ``seqs``, ``peak`` and ``time`` (the H200's points). The peak panel draws ``capacity``,
    the intensity panel ``ridge``."""
    seqs = np.asarray(seqs, dtype=float)
    colors = {0: PALETTE["vermillion"], 1: PALETTE["blue"], 2: PALETTE["green"]}
    with _chart(7.2, 5.4, nrows=2, ncols=2) as (fig, axes):
        panels = (("bytes", "HBM traffic (GB)", 1e9), ("peak", "peak memory (GB)", 1e9),
                  ("time", "time (ms)", 1e-3), ("intensity", "intensity (FLOP/byte)", 1.0))
        for ax, (key, ylabel, scale) in zip(axes.flat, panels):
            for i, (variant, series) in enumerate(predicted.items()):
                ax.plot(seqs, np.asarray(series[key]) / scale, "-", color=colors[i % 3], lw=1.8,
                        label=f"{variant}, predicted")
                m = measured.get(variant)
                if m is not None and key in m:
                    ok = np.isfinite(np.asarray(m[key], dtype=float))
                    ax.plot(np.asarray(m["seqs"], dtype=float)[ok], np.asarray(m[key], dtype=float)[ok] / scale, "o",
                            ms=6, color=colors[i % 3], mec="black", mew=0.5, label=f"{variant}, measured", zorder=5)
            if key == "peak":
                ax.axhline(capacity / scale, color="black", ls="--", lw=1)
                ax.annotate(capacity_label, (seqs[0], capacity / scale), textcoords="offset points", xytext=(2, 3),
                            fontsize=9)
            if key == "intensity":
                ax.axhline(ridge, color="black", ls="--", lw=1)
                ax.annotate(ridge_label, (seqs[0], ridge), textcoords="offset points", xytext=(2, 3), fontsize=9)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xticks(seqs, [f"{v / 1024:g}k" if v >= 1024 else f"{v:g}" for v in seqs], fontsize=9)
            ax.minorticks_off()
            ax.set_xlabel("sequence length (tokens)")
            ax.set_ylabel(ylabel)
        handles, labels = axes.flat[1].get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside lower center", ncol=2, fontsize=9.5, frameon=False)
        if title:
            fig.suptitle(title, fontsize=12)
    return fig


def speedup_chart(batches, curves: dict, *, marks: dict | None = None, title=None, ylabel="decode speedup over bf16"):
    """Chapter 6: one speedup curve per format against the batch (log x), and a dotted line at the batch
    where each format's step turns compute-bound (``marks``: label -> batch, None for never)."""
    with _chart(7, 4.2) as (fig, ax):
        for i, (label, y) in enumerate(curves.items()):
            color = _CYCLE[i % len(_CYCLE)]  # and a dash pattern each, so that curves that coincide both show
            ax.plot(batches, y, ls=("-", (0, (5, 2)), "-.", (0, (1.5, 1.5)))[i % 4], color=color, lw=2.2, label=label)
            b = (marks or {}).get(label)
            if b is not None and batches[0] <= b <= batches[-1]:
                ax.axvline(b, color=color, lw=1, ls=":")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("decode batch (sequences)")
        ax.set_ylabel(ylabel)
        ax.set_ylim(bottom=0)
        _label(ax, title=title, legend=2)
    return fig


def quality_points(model, hardware, batch=1, context=0, *, groups: dict, named_above: float = 0.1) -> list[dict]:
    """Chapter 6's points for :func:`quality_chart`: each published result of
    :data:`roofline.workloads.quantization.PUBLISHED` whose formats the package models, at the decode speedup
    its formats buy ``model`` on ``hardware`` (``batch`` sequences, ``context`` tokens) and the quality it
    lost in percent. ``groups`` names each source's group (its key in the bibliography -> a legend entry);
    a result that lost more than ``named_above`` (a fraction) is named beside its point, the names taking
    turns above and below so that neighbours do not overlap."""

    points: list[dict] = []
    named = 0
    for row in q.PUBLISHED:
        formats = q.formats_of(row)
        if formats is None:
            continue
        if row.source not in groups:
            raise ValueError(f"groups names no group for source {row.source!r}; it names {', '.join(sorted(groups))}")
        lost = q.relative_change(row)
        label = f"{row.method}, {row.model}" if lost > named_above else ""
        points.append({"x": q.decode_speedup(model, hardware, batch, context, **formats), "y": 100 * lost,
                       "group": groups[row.source], "label": label, "offset": (8, 4 if named % 2 else -10)})
        named += bool(label)
    return points


__all__ += ["quality_points"]


def quality_chart(points: Sequence[dict], *, title=None, xlabel="predicted decode speedup", ylabel="quality lost (%)"):
    """Chapter 6: published methods as points, speed bought (x) against quality lost (y, percent).

    ``points`` are dicts with ``x``, ``y`` (percent), ``label``, and ``group`` (one colour and marker
    per group, named in the legend).
    """
    markers = "osD^vP"
    with _chart(7, 4.6) as (fig, ax):
        groups = list(dict.fromkeys(p["group"] for p in points))
        for i, g in enumerate(groups):
            mine = [p for p in points if p["group"] == g]
            ax.plot([p["x"] for p in mine], [p["y"] for p in mine], markers[i % len(markers)], ms=8,
                    color=_CYCLE[i % len(_CYCLE)], mec="black", mew=0.5, label=g, zorder=3)
            for p in mine:
                if p.get("label"):
                    ax.annotate(p["label"], (p["x"], p["y"]), textcoords="offset points", xytext=p.get("offset", (7, -3)),
                                fontsize=8.5)
        ax.axhline(0, color="#333333", lw=0.8)
        _label(ax, xlabel=xlabel, ylabel=ylabel, title=title, legend=2)
    return fig


def matmul_throughput_chart(m, series: dict, *, peaks: dict | None = None, title=None):
    """Measured matmul throughput (TFLOP/s) against the rows ``m`` of the product, one line per series, with
    each datasheet peak (``peaks``: label -> (FLOP/s, the series it caps)) dashed in that series' colour."""
    with _chart(7, 4.2) as (fig, ax):
        for i, (label, y) in enumerate(series.items()):
            color = _CYCLE[i % len(_CYCLE)]
            ax.plot(m, np.asarray(y, dtype=float) / 1e12, "o-", color=color, ms=4, lw=1.8, label=label)
        names = list(series)
        for label, (peak, of) in (peaks or {}).items():
            ax.axhline(peak / 1e12, color=_CYCLE[names.index(of) % len(_CYCLE)], lw=1, ls="--", label=label)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("rows m of the product (n = k = 8192)")
        ax.set_ylabel("TFLOP/s")
        ax.set_ylim(bottom=0)
        _label(ax, title=title, legend=2)
    return fig


# --- chapter 7: collectives and data parallelism -------------------------------------------------

def collective_bytes_chart(groups, series: dict, *, title=None):
    """Bytes each GPU sends, as a multiple of the buffer, against the group size (chapter 7): one line per
    labelled collective."""
    with _chart(7, 4.2) as (fig, ax):
        styles = ["-", "--", ":", "-.", (0, (4, 1, 1, 1))]
        for i, (label, y) in enumerate(series.items()):
            ax.plot(groups, y, marker="os^Dv"[i % 5], ms=5, ls=styles[i % len(styles)], label=label)
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(_thousands))
        ax.set_xlabel(r"GPUs in the group, $G_\mathrm{coll}$")
        ax.set_ylabel("bytes sent per GPU / buffer size")
        ax.set_ylim(0, None)
        legend_below(ax, ncol=2)
        _label(ax, title=title)
    return fig


def exposure_chart(tokens, panels: dict, *, title=None, capacity=None):
    """Step time split into compute and exposed communication against tokens per GPU (chapter 7): one
    panel per labelled case, each a dict with ``compute`` and ``exposed`` arrays (seconds). With ``capacity``
    (bytes per GPU) every panel's ``memory`` must fit in it: a step that does not fit is never drawn."""
    if capacity is not None:
        for label, d in panels.items():
            over = [t for t, m in zip(tokens, d["memory"]) if m > capacity]
            if over:
                raise ValueError(f"panel {label!r}: the step does not fit at {', '.join(f'{t:,}' for t in over)} "
                                 f"tokens per GPU ({max(d['memory']) / 1e9:.1f} GB against {capacity / 1e9:.1f} GB): "
                                 f"no step to draw there")
    with _chart(7.2, 3.9, nrows=1, ncols=len(panels), sharey=True, squeeze=False) as (fig, axes):
        for ax, (label, d) in zip(axes[0], panels.items()):
            compute, exposed = np.asarray(d["compute"]) * 1e3, np.asarray(d["exposed"]) * 1e3
            ax.stackplot(tokens, compute, exposed, labels=["compute", "exposed communication"],
                         colors=[_CYCLE[0], PALETTE["vermillion"]], alpha=0.85)
            if "threshold" in d:
                ax.axvline(d["threshold"], color="black", ls=":", lw=1)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(_thousands))
            ax.set_title(label, fontsize=10.5)
            ax.set_xlabel("tokens per GPU per step")
        axes[0][0].set_ylabel("step time (ms)")
        handles, labels = axes[0][0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside lower center", ncol=2)
        if title:
            fig.suptitle(title)
    return fig


def zero_tradeoff_chart(points, *, capacity=None, capacity_label="", title=None):
    """Memory per GPU against bytes each GPU sends per step (chapter 7): ``points`` are dicts with
    ``memory``, ``label``, optional ``offset`` and ``ha``, and either ``sent`` (bytes, one panel) or
    ``scale_up`` and ``network`` (bytes over NVLink and over the network: two panels, one per tier, so that
    bytes of links nine times apart in speed are never added on one axis); ``capacity`` a vertical line
    (bytes)."""
    tiers = [("scale_up", "over NVLink"), ("network", "over the network")] if "network" in points[0] else [("sent", "")]
    with _chart(7, 2.4 * len(tiers) + 0.9, nrows=len(tiers), ncols=1, sharex=True, squeeze=False) as (fig, axes):
        for ax, (key, where) in zip(axes[:, 0], tiers):
            for i, p in enumerate(points):
                ax.plot([p["memory"] / 1e9], [p[key] / 1e9], "os^Dv"[i % 5], ms=9, color=_CYCLE[i % len(_CYCLE)],
                        mec="black", mew=0.6, zorder=3)
                ax.annotate(p["label"], (p["memory"] / 1e9, p[key] / 1e9), textcoords="offset points",
                            xytext=p.get("offset", (8, 4)), fontsize=9.5, ha=p.get("ha", "left"))
            if capacity:
                ax.axvline(capacity / 1e9, color="black", ls="--", lw=1)
                ax.annotate(capacity_label, (capacity / 1e9, 0.03), xycoords=("data", "axes fraction"),
                            textcoords="offset points", xytext=(-4, 0), ha="right", fontsize=9.5)
            _log_axis(ax, "x", _thousands)
            ax.set_ylabel(f"GB each GPU sends\nper step {where}" if where else "bytes each GPU sends per step (GB)")
            ax.set_ylim(0, 1.15 * max(max(p[key] for p in points) / 1e9, 1e-9))
        axes[-1, 0].set_xlabel("memory per GPU (GB, log scale)")
        if title:
            axes[0, 0].set_title(title)
    return fig


# --- chapter 12: serving ------------------------------------------------------------------------

def ttft_tpot_chart(tpot: dict, ttft: dict, *, title=None):
    """Chapter 12, two panels. Left: time per output token against the batch, one line per label, each
    ending at its memory wall (``tpot`` maps a label to ``(batches, seconds)``). Right: time to first
    token against the prompt length (``ttft`` maps a label to ``(prompts, seconds)``)."""
    with _chart(7.2, 3.9, nrows=1, ncols=2) as (fig, (left, right)):
        for i, (label, (b, t)) in enumerate(tpot.items()):
            color = _CYCLE[i % len(_CYCLE)]
            left.plot(b, np.asarray(t) * 1e3, "-", color=color, lw=2, label=label)
            left.plot([b[-1]], [t[-1] * 1e3], "|", ms=16, mew=2.5, color=color)
            left.annotate(f"wall: {int(b[-1]):,}", (b[-1], t[-1] * 1e3), textcoords="offset points", xytext=(-4, 7),
                          ha="right", fontsize=9, color=color)
        for i, (label, (p, t)) in enumerate(ttft.items()):
            right.plot(p, np.asarray(t) * 1e3, "-o", ms=4, color=_CYCLE[i % len(_CYCLE)], lw=2, label=label)
        left.set_xscale("log", base=2)
        left.set_xlabel("decode batch (log scale)")
        left.set_ylabel("time per output token (ms)")
        left.set_ylim(bottom=0)
        right.set_xscale("log", base=2)
        right.set_yscale("log")
        right.set_xlabel("prompt tokens (log scale)")
        right.set_ylabel("time to first token (ms, log scale)")
        for ax in (left, right):
            ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v / 1024:g}k" if v >= 1024 else f"{v:g}"))
        right.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(_plain))
        left.set_title("decode", fontsize=11)
        right.set_title("prefill, one request", fontsize=11)
        if title:
            fig.suptitle(title)
        handles, labels = left.get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside lower center", ncol=2, fontsize=9.5, frameon=False)
    return fig


def serving_frontier_chart(curves: dict, *, roof_tokens_per_s: float | None = None, roof_label: str = "", title=None):
    """Chapter 12: time per output token against tokens per second, one line per label (a context),
    points at each batch, ending at the memory wall; ``roof_tokens_per_s`` draws the compute roof's limit.
    ``curves`` maps a label to ``(tokens_per_s, seconds per token, batches)``."""
    with _chart(7, 4.4) as (fig, ax):
        for i, (label, (tps, t, b)) in enumerate(curves.items()):
            color = _CYCLE[i % len(_CYCLE)]
            ax.plot(tps, np.asarray(t) * 1e3, "-o", ms=4, color=color, lw=2, label=label)
            ax.annotate(f"{int(b[-1]):,}", (tps[-1], t[-1] * 1e3), textcoords="offset points", xytext=(5, -4),
                        fontsize=9.5, color=color)
        if roof_tokens_per_s:
            ax.axvline(roof_tokens_per_s, color="black", lw=1.2, ls="--", label=roof_label or "compute roof")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(_thousands))
        ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(_plain))
        ax.yaxis.set_minor_formatter(matplotlib.ticker.FuncFormatter(_two_five))
        _label(ax, xlabel="throughput (output tokens per second, log scale)",
                   ylabel="time per output token (ms, log scale)", title=title, legend=2)
    return fig


def batching_timeline_chart(series: dict, *, capacity: int, until: float, title=None):
    """Chapter 12: sequences decoding in each step against time, one step line per policy. ``series``
    maps a label to ``(step starts, step times, sequences decoding)``; only steps before ``until`` s."""
    with _chart(7, 3.8) as (fig, ax):
        for i, (label, (start, dt, n)) in enumerate(series.items()):
            keep = start < until
            x = np.append(start[keep], start[keep][-1] + dt[keep][-1])
            ax.step(x, np.append(n[keep], n[keep][-1]), where="post", color=_CYCLE[i % len(_CYCLE)], lw=1.6, label=label)
        ax.axhline(capacity, color="black", lw=1, ls=":", label=f"slots ({capacity})")
        ax.set_xlim(0, until)
        ax.set_ylim(0, capacity * 1.1)
        _label(ax, xlabel="time (s)", ylabel="sequences making a token", title=title, legend=3)
    return fig


def step_time_chart(series: dict, *, window: tuple[float, float], title=None):
    """Chapter 12: the duration of each step against time, one line per policy (``series`` maps a label
    to ``(step starts, step times)``), within ``window`` seconds: prompts that join a step show as spikes."""
    with _chart(7, 3.8) as (fig, ax):
        lo, hi = window
        for i, (label, (start, dt)) in enumerate(series.items()):
            keep = (start >= lo) & (start < hi)
            ax.plot(start[keep], dt[keep] * 1e3, "-", color=_CYCLE[i % len(_CYCLE)], lw=1.3, label=label)
        _log_axis(ax, "y", _plain, _two_five)
        _label(ax, xlabel="time (s)", ylabel="step duration (ms, log scale)", title=title, legend=2)
    return fig


def speculation_chart(alphas, panels: dict, *, title=None):
    """Chapter 12: speculative speed-up against the acceptance rate, one panel per setting (a batch),
    one line per draft length. ``panels`` maps a panel title to ``{label: speed-ups at alphas}``."""
    with _chart(7.2, 3.9, nrows=1, ncols=len(panels), sharey=True) as (fig, axes):
        axes = np.atleast_1d(axes)
        for ax, (name, curves) in zip(axes, panels.items()):
            for i, (label, y) in enumerate(curves.items()):
                ax.plot(alphas, y, ls=("-", (0, (5, 2)), "-.", (0, (1.5, 1.5)))[i % 4], color=_CYCLE[i % len(_CYCLE)],
                        lw=2, label=label)
            ax.axhline(1, color="black", lw=1, ls=":")
            ax.set_title(name, fontsize=11)
            ax.set_xlabel("acceptance rate α")
        axes[0].set_ylabel("speed-up over plain decoding")
        if title:
            fig.suptitle(title)
        handles, labels = axes[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside lower center", ncol=len(labels), fontsize=9.5, frameon=False)
    return fig


__all__ += ["ttft_tpot_chart", "serving_frontier_chart", "batching_timeline_chart", "step_time_chart",
            "speculation_chart"]


def tp_layer_chart(degrees: ArrayLike, series: dict, *, title=None, ylabel="time per layer, forward (ms)"):
    """One block's compute against its two all-reduces as the tensor-parallel degree grows (chapter 8).
    ``series`` maps a label to ``(seconds at each degree, style)`` with style 'compute' (solid) or
    'comm' (dashed); log scales."""
    with _chart(7, 4.4) as (fig, ax):
        x = np.asarray(degrees, dtype=float)
        for i, (label, (y, kind)) in enumerate(series.items()):
            ax.plot(x, np.asarray(y) * 1e3, "-o" if kind == "compute" else "--s", color=_CYCLE[i % len(_CYCLE)],
                    lw=2, ms=5, label=label)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(x, [f"{v:g}" for v in x])
        ax.minorticks_off()
        ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(_plain))
        ax.yaxis.set_minor_locator(matplotlib.ticker.LogLocator(subs=(2, 5)))  # a decade or less: label 0.2, 0.5...
        ax.yaxis.set_minor_formatter(matplotlib.ticker.FuncFormatter(_plain))
        _label(ax, xlabel="tensor-parallel degree t (GPUs)", ylabel=ylabel, title=title, legend=2)
    return fig


def tp_decode_chart(degrees: ArrayLike, times: dict, per_gpu: dict, *, fits: dict | None = None, title=None):
    """Two panels against the tensor-parallel degree (chapter 8): the time per output token (left) and
    tokens per second per GPU (right), one line per model; hollow markers where the weights do not fit."""
    with _chart(7, 3.9, nrows=1, ncols=2) as (fig, (a1, a2)):
        x = np.asarray(degrees, dtype=float)
        for i, label in enumerate(times):
            color = _CYCLE[i % len(_CYCLE)]
            ok = np.asarray(fits[label] if fits else [True] * len(x), dtype=bool)
            for ax, y in ((a1, np.asarray(times[label]) * 1e3), (a2, np.asarray(per_gpu[label]))):
                ax.plot(x, y, "-", color=color, lw=1.8, label=label if ax is a1 else None)
                ax.plot(x[ok], y[ok], "o", color=color, ms=6)
                ax.plot(x[~ok], y[~ok], "o", color=color, mfc="white", ms=6)
        for ax in (a1, a2):
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xticks(x, [f"{v:g}" for v in x])
            ax.minorticks_off()
            ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(_plain))
            ax.set_xlabel("degree t (GPUs)")
        a1.set_ylabel("time per output token (ms)")
        a2.set_ylabel("tokens/s per GPU")
        if title:
            fig.suptitle(title, fontsize=12)
        handles, labels = a1.get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside lower center", ncol=min(3, len(labels)), fontsize=9.5, frameon=False)
    return fig


def tp_memory_chart(degrees, weights: ArrayLike, kv_room: ArrayLike, batches, *, capacity: float, title=None):
    """Per-GPU memory against the tensor-parallel degree (chapter 8): stacked bars of the weights and the
    room left for the KV cache (bytes), up to the usable ``capacity``; each bar labelled with the
    largest batch that fits (``batches``; 0 where the weights alone do not fit)."""
    with _chart(7, 3.9) as (fig, ax):
        pos = np.arange(len(degrees))
        w = np.asarray(weights, dtype=float) / 1e9
        room = np.maximum(np.asarray(kv_room, dtype=float), 0) / 1e9
        ax.bar(pos, w, color=PALETTE["blue"], label="weights per GPU")
        ax.bar(pos, room, bottom=w, color=PALETTE["orange"], label="room for the KV cache")
        ax.axhline(capacity / 1e9, color="black", lw=1, ls=":")
        ax.annotate("usable HBM", (pos[-1] + 0.45, capacity / 1e9), textcoords="offset points", xytext=(4, 3),
                    ha="left", va="bottom", fontsize=9.5)  # beside the bars, not over the last one
        ax.set_xlim(-0.6, pos[-1] + 1.25)
        for p, top, b in zip(pos, np.maximum(w, capacity / 1e9), batches):
            ax.annotate("does not fit" if b == 0 else f"batch {b:,}", (p, top), textcoords="offset points",
                        xytext=(0, 14), ha="center", fontsize=9.5)
        ax.set_xticks(pos, [f"t = {d}" for d in degrees])
        ax.set_ylabel("GB per GPU")
        ax.set_ylim(0, max(w.max(), capacity / 1e9) * 1.25)
        _label(ax, title=title, legend=2)
    return fig


def experts_touched_chart(tokens, series: dict, *, simulated: dict | None = None, title=None):
    """Chapter 10: the share of a MoE layer's experts a step of ``tokens`` tokens touches, one model per
    colour: the expected share under uniform routing (line) between its two bounds (shaded), and the
    mean of a seeded random routing (dots). ``series`` maps a label to ``(expected, fewest, most, E)``
    (counts); ``simulated`` a label to ``(tokens, mean counts)``."""
    with _chart(7, 4.2) as (fig, ax):
        for i, (label, (expected, low, high, experts)) in enumerate(series.items()):
            color = _CYCLE[i % len(_CYCLE)]
            ax.fill_between(tokens, 100 * np.asarray(low) / experts, 100 * np.asarray(high) / experts, color=color,
                            alpha=0.15, lw=0, label=f"{label}: between the bounds")
            ax.plot(tokens, 100 * np.asarray(expected) / experts, color=color, lw=2.2,
                    ls=("-", (0, (5, 2)))[i % 2], label=f"{label}: expected, uniform routing")
            if simulated and label in simulated:
                t, mean = simulated[label]
                ax.plot(t, 100 * np.asarray(mean) / experts, "o", ms=6, color=color, mec="black", mew=0.5, zorder=5,
                        label=f"{label}: random routing, mean")
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(_plain))
        ax.set_xlabel("tokens in the step (decode batch)")
        ax.set_ylabel("experts read per layer (% of all)")
        ax.set_ylim(0, 102)
        _label(ax, title=title, legend=2)
    return fig


def moe_decode_chart(batches, curves: dict, *, title=None, ylabel="decode step time (ms)", scale=1e-3):
    """Chapter 10: decode step time against the batch for a MoE and its dense equivalents (log-log).
    ``curves`` maps a label to times in seconds; a label ending in 'bounds' with a pair of arrays is drawn
    as a shaded band."""
    with _chart(7, 4.4) as (fig, ax):
        styles = ("-", (0, (5, 2)), "-.", (0, (1.5, 1.5)))
        i = 0
        for label, y in curves.items():
            color = _CYCLE[i % len(_CYCLE)]
            if isinstance(y, tuple):
                ax.fill_between(batches, np.asarray(y[0]) / scale, np.asarray(y[1]) / scale, color=_CYCLE[0],
                                alpha=0.15, lw=0, label=label)
                continue
            ax.plot(batches, np.asarray(y) / scale, ls=styles[i % 4], color=color, lw=2.2, label=label)
            i += 1
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(_plain))
        ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(_plain))
        ax.set_xlabel("decode batch (sequences)")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="major")
        _label(ax, title=title, legend=2)
    return fig


def all_to_all_chart(tokens, compute: ArrayLike, tiers: dict, *, title=None, scale=1e-6):
    """Chapter 10: per MoE layer, one GPU's expert work (``compute``, seconds) against the layer's two
    all-to-alls on each tier (``tiers``: label -> seconds), against the tokens each GPU holds (log-log)."""
    with _chart(7, 4.4) as (fig, ax):
        ax.plot(tokens, np.asarray(compute) / scale, color=PALETTE["black"], lw=2.4, label="expert work of the layer, one GPU")
        for i, (label, y) in enumerate(tiers.items()):
            ax.plot(tokens, np.asarray(y) / scale, color=_CYCLE[i % len(_CYCLE)], lw=2.2,
                    ls=((0, (5, 2)), "-.", (0, (1.5, 1.5)))[i % 3], label=label)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(_plain))
        ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(_plain))
        ax.set_xlabel("tokens per GPU in the step")
        ax.set_ylabel("time per MoE layer (µs)")
        ax.grid(True, which="major")
        _label(ax, title=title, legend=1)
    return fig


# --- chapter 11: long sequences -----------------------------------------------------------------------------
__all__ += ["attention_share_chart", "ring_hiding_chart"]


def attention_share_chart(seqs, curves: dict, *, title=None):
    """Fractions against sequence length (log2 axis, 0 to 1): ``curves`` maps a label to one value per entry of
    ``seqs``; labels ending in 'time' are drawn dashed (chapter 11: attention's share of FLOPs and of time)."""
    with _chart(7, 4.2) as (fig, ax):
        colors = {}
        for label, y in curves.items():
            model = label.split(":")[0]
            colors.setdefault(model, _CYCLE[len(colors) % len(_CYCLE)])
            dashed = label.endswith("time")
            ax.plot(seqs, np.asarray(y) * 100, "--" if dashed else "-", marker="s" if dashed else "o", ms=4,
                    color=colors[model], label=label)
        ax.set_xscale("log", base=2)
        ax.set_xticks(seqs, [f"{v / 2**20:g}M" if v >= 2**20 else f"{v // 1024:,}k" for v in seqs], fontsize=9.5)
        ax.minorticks_off()
        ax.set_ylim(0, 100)
        ax.set_xlabel("sequence length (tokens)")
        ax.set_ylabel("attention's share (%)")
        legend_below(ax, ncol=2)
        _label(ax, title=title)
    return fig


def ring_hiding_chart(blocks, compute: ArrayLike, transfers: dict, thresholds: dict, *, title=None):
    """One ring step's attention (``compute``, seconds, one per block length) against the time to send the
    block over each tier (``transfers``: label -> seconds), log-log, with each tier's hiding block
    (``thresholds``: label -> tokens) marked where the lines cross (chapter 11)."""
    with _chart(7, 4.4) as (fig, ax):
        ax.plot(blocks, np.asarray(compute) * 1e3, "-", lw=2.2, color="black", label="attention on the block")
        for i, (label, t) in enumerate(transfers.items()):
            color = _CYCLE[i % len(_CYCLE)]
            ax.plot(blocks, np.asarray(t) * 1e3, "--", lw=1.8, color=color, label=f"send the block: {label}")
            x = thresholds[label]
            ax.axvline(x, color=color, lw=0.9, ls=":")
            ax.annotate(f"hides past\n{x:,.0f} tokens", (x, float(np.max(compute)) * 1e3), xytext=(4, 0),
                        textcoords="offset points", fontsize=9.5, color=color, va="top",
                        bbox=dict(boxstyle="square,pad=0.15", facecolor="white", edgecolor="none"))
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(blocks, [f"{v / 1024:g}k" if v >= 1024 else f"{v:g}" for v in blocks], fontsize=9.5)
        ax.minorticks_off()
        ax.set_xlabel("tokens per GPU (the block each ring step works on)")
        ax.set_ylabel("time per ring step, one layer (ms)")
        ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(_plain))
        legend_below(ax, ncol=1)
        _label(ax, title=title)
    return fig




# --------------------------------------------------------------------------------------------
# Chapter 9: pipeline schedules and the planner


def pipeline_timeline_chart(timeline, *, title=None, ax=None, height=None):
    """A simulated pipeline step (:class:`roofline.parallel.pipeline.Timeline`): one row per stage, forward passes
    light, backward passes dark, idle time (the bubble) shaded grey; chunks of an interleaved schedule
    carry their chunk's number.

    The figure is as tall as its stages need (half an inch each), or ``height`` inches whatever the stages: an
    explorer draws every frame at one height, so that a frame of few stages leaves no blank band under it
    (issue 52: chapter 9's explorer had one of about 550 px). Past eight stages every other row is named."""
    if height is not None:
        height = float(number("height", height))
    with _chart(7, height or 0.5 * timeline.p + 1.9, ax=ax) as (fig, ax):
        end = timeline.makespan
        for s in range(timeline.p):
            ax.broken_barh([(0, end)], (s - 0.4, 0.8), facecolors="#e6e6e6", edgecolor="none")
        for s in range(timeline.p):  # one call per stage and direction: thousands of slots stay fast
            for kind, color in (("F", PALETTE["sky"]), ("B", PALETTE["blue"])):
                spans = [(x.start, x.end - x.start) for x in timeline.slots if x.stage == s and x.kind == kind]
                ax.broken_barh(spans, (s - 0.4, 0.8), facecolors=color, edgecolor="white",
                               linewidth=0.6 if len(spans) <= 64 else 0.2)
        ax.set_ylim(timeline.p - 0.5, -0.5)
        every = max(1, timeline.p // 8)
        ax.set_yticks(range(0, timeline.p, every), [f"stage {s}" for s in range(0, timeline.p, every)])
        ax.set_xlim(0, end)
        ax.set_xlabel("time (one micro-batch's forward pass on one stage = 1)")
        ax.grid(False)
        handles = [matplotlib.patches.Patch(color=PALETTE["sky"], label="forward"),
                   matplotlib.patches.Patch(color=PALETTE["blue"], label="backward"),
                   matplotlib.patches.Patch(color="#e6e6e6", label="idle (bubble)")]
        fig.legend(handles=handles, loc="outside lower center", ncol=3)
        _label(ax, title=title)
    return fig


def bubble_chart(micro_batches: ArrayLike, series: dict, *, threshold=None, title=None):
    """Bubble fraction against micro-batches per step, one line per schedule (``series``: label -> fractions);
    log x; ``threshold`` draws a horizontal line (a target fraction)."""
    with _chart(7, 4.2) as (fig, ax):
        x = np.asarray(micro_batches, dtype=float)
        for i, (label, y) in enumerate(series.items()):
            ax.plot(x, 100 * np.asarray(y), "-o", ms=4, lw=2, color=_CYCLE[i % len(_CYCLE)], label=label)
        if threshold is not None:
            ax.axhline(100 * threshold, color="#777777", lw=1, ls=":")
        ax.set_xscale("log", base=2)
        ax.set_xticks(x, [f"{v:g}" for v in x])
        ax.minorticks_off()
        ax.set_xlabel(r"micro-batches per step, $n_\mathrm{mb}$")
        ax.set_ylabel("bubble (% of the ideal step)")
        ax.set_ylim(0, None)
        _label(ax, title=title, legend=2)
    return fig


def stage_memory_chart(stages: ArrayLike, series: dict, *, capacity: float, capacity_label: str = "", title=None):
    """Memory per GPU against the pipeline degree, one line per setting (``series``: label -> bytes), with the
    usable capacity as a horizontal line; log x."""
    with _chart(7, 4.2) as (fig, ax):
        x = np.asarray(stages, dtype=float)
        for i, (label, y) in enumerate(series.items()):
            ax.plot(x, np.asarray(y) / 1e9, "-o", ms=4, lw=2, color=_CYCLE[i % len(_CYCLE)], label=label)
        ax.axhline(capacity / 1e9, color=PALETTE["vermillion"], lw=1.2, ls="--")
        ax.annotate(capacity_label, (x[0], capacity / 1e9), textcoords="offset points", xytext=(0, -14), ha="left",
                    color=PALETTE["vermillion"], fontsize=9)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(x, [f"{v:g}" for v in x])
        ax.minorticks_off()
        ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(_plain))
        _label(ax, xlabel="pipeline stages p", ylabel="memory per GPU (GB)", title=title, legend=2)
    return fig


def plan_frontier_chart(times: ArrayLike, memory: ArrayLike, frontier, chosen, *, capacity: float, title=None):
    """The planner's layouts that fit: step time against memory per GPU (grey dots), the frontier no other
    layout beats on both (line), the chosen layout marked, the usable capacity as a line."""
    with _chart(7, 4.4) as (fig, ax):
        ax.scatter(np.asarray(times), np.asarray(memory) / 1e9, s=8, color="#bbbbbb", label="a layout that fits")
        ft, fm = zip(*frontier)
        ax.plot(ft, np.asarray(fm) / 1e9, "-o", ms=4, lw=2, color=PALETTE["blue"], label="frontier")
        ax.plot([chosen[0]], [chosen[1] / 1e9], "*", ms=16, color=PALETTE["vermillion"], label="chosen (fastest)")
        ax.axhline(capacity / 1e9, color=PALETTE["vermillion"], lw=1, ls="--", label="usable HBM")
        _label(ax, xlabel="predicted step time (s)", ylabel="memory per GPU (GB)", title=title, legend=2)
    return fig


# --- appendix C: the cluster model against published runs ---------------------------------------------------

__all__ += ["development_chart", "step_parts_chart", "PART_COLORS"]

# one colour per part of a training step (roofline.parallel.cluster.PART_ORDER); communication in warm colours
PART_COLORS = {"matmuls": PALETTE["blue"], "attention": PALETTE["sky"], "memory-bound": PALETTE["green"],
               "fp8 casts": "#b5dfd1", "recompute": "#7fc7b0", "tensor-parallel": PALETTE["vermillion"], "context-parallel": "#f2a07b",
               "expert all-to-all": PALETTE["yellow"], "pipeline sends": PALETTE["purple"],
               "data-parallel": PALETTE["orange"], "bubble": "#999999", "optimizer": PALETTE["black"]}


def development_chart(checks, *, band: float = 0.25, title=None):
    """Appendix C: predicted against published step time, log-log, one point per development run: the calibrated
    estimate (circles) and the datasheet floor (triangles), with ``y = x`` and the band ``(1 - band) x .. (1 + band) x``
    shaded. Square and narrow, so that it reads in a phone's column."""
    published = np.array([c.published_s for c in checks])
    est = np.array([c.estimate.time for c in checks])
    floor = np.array([c.floor.time for c in checks])
    lo, hi = min(published.min(), floor.min()) / 1.5, max(published.max(), est.max()) * 1.5
    with _chart(5.6, 5.4) as (fig, ax):
        xs = np.geomspace(lo, hi, 50)
        ax.fill_between(xs, xs * (1 - band), xs * (1 + band), color="#e8f4ea", zorder=0,
                        label=f"within ±{100 * band:.0f}% of published")
        ax.plot(xs, xs, color="black", lw=0.9, label="predicted = published")
        ax.plot(published, est, "o", ms=7, color=PALETTE["blue"], mec="black", mew=0.5, ls="none",
                label="calibrated estimate", zorder=5)
        ax.plot(published, floor, "^", ms=7, color=PALETTE["vermillion"], mec="black", mew=0.5, ls="none",
                label="datasheet floor", zorder=4)
        _log_axis(ax, "x", _plain)
        _log_axis(ax, "y", _plain)
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        ax.set_aspect("equal")
        _label(ax, xlabel="published step time (s)", ylabel="predicted step time (s)", title=title)
        ax.legend(loc="upper left", fontsize=10)
    return fig


def step_parts_chart(prices: dict, *, title=None):
    """Appendix C: where the time of a step goes, one horizontal bar per labelled
    :class:`~roofline.parallel.cluster.StepPrice`, stacked by part as a share of its own step (runs of one second
    and of a hundred share one axis), the step's time written at the end of each bar."""

    labels = list(prices)
    y = np.arange(len(labels))[::-1]
    shares = {label: part_shares(prices[label]) for label in labels}
    shown = [k for k in PART_COLORS if any(s[k] > 0.005 for s in shares.values())]
    with _chart(6.4, 0.55 * len(labels) + 2.4) as (fig, ax):
        for yi, label in zip(y, labels):
            left = 0.0
            for k in shown:
                ax.barh(yi, 100 * shares[label][k], left=left, color=PART_COLORS[k], edgecolor="black", linewidth=0.4,
                        label=k if yi == y[0] else None)
                left += 100 * shares[label][k]
            ax.annotate(fmt(prices[label].time, "s"), (100, yi), textcoords="offset points", xytext=(4, -4), fontsize=10)
        ax.set_yticks(y, labels)
        ax.set_xlim(0, 118)
        ax.set_xticks([0, 20, 40, 60, 80, 100])
        ax.set_xlabel("share of the step (%)")
        ax.grid(axis="y", visible=False)
        legend_below(ax, ncol=3)
        if title:
            ax.set_title(title)
    return fig


# --- chapter 13: serving at scale

__all__ += ["deployment_frontier_chart", "serving_step_chart"]

_DASHED = (0, (4, 2.5))


def deployment_frontier_chart(curves: dict, *, targets: Sequence[float] = (), title=None, ax=None, legend: bool = True):
    """Chapter 13: output tokens per second per GPU against the time per output token, one colour per
    labelled layout, the calibrated estimate solid with a point per batch and the datasheet ceiling dashed.
    ``curves`` maps a label to ``(ceiling, estimate)``, each a :class:`~roofline.serving.deployment.Frontier`
    or None; ``targets`` (seconds) are drawn as dotted vertical lines, each labelled with its value."""
    with _chart(7, 4.6, ax=ax) as (fig, ax):
        for i, (label, (ceiling, estimate)) in enumerate(curves.items()):
            color = _CYCLE[i % len(_CYCLE)]
            if estimate is not None and len(estimate.batch):
                ax.plot(np.asarray(estimate.tpot_s) * 1e3, estimate.tokens_per_s_per_gpu, "-o", ms=3.5, lw=2,
                        color=color, label=label)
            if ceiling is not None and len(ceiling.batch):
                ax.plot(np.asarray(ceiling.tpot_s) * 1e3, ceiling.tokens_per_s_per_gpu, ls=_DASHED, lw=1.4,
                        color=color, label=None if estimate is not None else label)
        for t in targets:
            ax.axvline(t * 1e3, color="black", lw=1.1, ls=":")
            ax.annotate(f"target {fmt(t, 's')}", (t * 1e3, 0.02), xycoords=("data", "axes fraction"),
                        xytext=(3, 0), textcoords="offset points", fontsize=10, rotation=90, va="bottom")
        ax.plot([], [], color="#555555", lw=2, marker="o", ms=3.5, label="calibrated estimate")
        ax.plot([], [], color="#555555", lw=1.4, ls=_DASHED, label="datasheet ceiling")
        _log_axis(ax, "x", _plain, _two_five)
        _log_axis(ax, "y", _thousands)
        _label(ax, xlabel="time per output token (ms, log scale)",
               ylabel="output tokens/s per GPU (log scale)", title=title, legend=3 if legend else None)
    return fig


_STEP_COLORS = {"matmuls": PALETTE["blue"], "decode attention": PALETTE["sky"], "prefill attention": PALETTE["orange"],
                "memory-bound": PALETTE["green"], "output head": PALETTE["purple"],
                "tensor-parallel": PALETTE["vermillion"], "expert all-to-all": PALETTE["yellow"],
                "pipeline sends": PALETTE["black"]}


def serving_step_chart(steps: dict, *, title=None, xlabel="one decode step (ms)"):
    """Chapter 13: where one replica's step goes, one horizontal bar per labelled
    :class:`~roofline.serving.deployment.StepTime` of a calibrated roof, stacked by part in milliseconds,
    the step's time written at the end of each bar."""
    labels = list(steps)
    y = np.arange(len(labels))[::-1]
    shown = [k for k in _STEP_COLORS if any(steps[s].parts.get(k, 0.0) > 0 for s in labels)]
    with _chart(7, 0.5 * len(labels) + 2.2) as (fig, ax):
        for yi, label in zip(y, labels):
            left = 0.0
            for k in shown:
                v = steps[label].parts.get(k, 0.0) * 1e3
                ax.barh(yi, v, left=left, color=_STEP_COLORS[k], edgecolor="black", linewidth=0.4,
                        label=k if yi == y[0] else None)
                left += v
            ax.annotate(fmt(steps[label].seconds, "s"), (left, yi), textcoords="offset points", xytext=(4, -4), fontsize=10)
        ax.set_yticks(y, labels)
        ax.set_xlim(0, max(steps[s].seconds for s in labels) * 1e3 * 1.22)
        ax.grid(axis="y", visible=False)
        _label(ax, xlabel=xlabel, title=title, legend=3)
    return fig
