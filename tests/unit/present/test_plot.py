"""Every figure of roofline.present.plot, drawn small with the arguments the chapters pass, and checked as a
reader would: axis labels and their units, the title, one series per input with its legend entry, log axes
where promised, and a value drawn where it is cheap to know it independently. (conftest.py closes every figure
after each test.)"""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import roofline as rl  # noqa: E402
from roofline.measured.compare import Comparison  # noqa: E402
from roofline.present import plot  # noqa: E402
from roofline.core.calibration import calibrated_roof
from roofline.core.records import load_layers, load_measurement

H100_BF16, H100_HBM = 989.4e12, 3.35e12  # the H100 SXM's datasheet: dense bf16 FLOP/s, HBM bytes/s


# --- what a reader reads off a figure ----------------------------------------------------------------------

def legend(fig) -> list[str]:
    """Every legend entry shown: each axes' legend, then the figure's own."""
    out = []
    for ax in fig.axes:
        if ax.get_legend() is not None:
            out += [t.get_text() for t in ax.get_legend().get_texts()]
    for lg in fig.legends:
        out += [t.get_text() for t in lg.get_texts()]
    return out


def named(ax) -> dict:
    """The labelled lines of an axes (a series with a legend entry), by label."""
    return {l.get_label(): l for l in ax.lines if not l.get_label().startswith("_")}


def hlines(ax) -> list[float]:
    """Heights of the horizontal lines drawn across the axes (axhline)."""
    return [float(l.get_ydata()[0]) for l in ax.lines
            if list(l.get_xdata()) == [0, 1] and len(l.get_ydata()) == 2 and l.get_ydata()[0] == l.get_ydata()[1]]


def vlines(ax) -> list[float]:
    """Positions of the vertical lines drawn up the axes (axvline)."""
    return [float(l.get_xdata()[0]) for l in ax.lines
            if list(l.get_ydata()) == [0, 1] and len(l.get_xdata()) == 2 and l.get_xdata()[0] == l.get_xdata()[1]]


def texts(ax) -> list[str]:
    return [t.get_text() for t in ax.texts]


def ticks(axis) -> list[str]:
    return [t.get_text() for t in axis.get_majorticklabels()]


def bars(ax) -> list:
    """Every bar drawn, container by container."""
    return [p for c in ax.containers for p in c]


# --- the helpers -------------------------------------------------------------------------------------------

def test_palette_is_okabe_ito_and_style_sets_white_backgrounds():
    assert plot.PALETTE["vermillion"] == "#D55E00" and plot.PALETTE["blue"] == "#0072B2" and len(plot.PALETTE) == 8
    with plot.style():
        assert matplotlib.rcParams["figure.facecolor"] == "white" and matplotlib.rcParams["svg.fonttype"] == "none"
    assert matplotlib.rcParams["svg.hashsalt"] != "roofline"  # the style does not leak out of its context


def test_save_writes_svg_and_png_into_the_folder_given(tmp_path):
    fig, ax = plt.subplots(figsize=(1.5, 1))  # small: the test is the files, not the picture
    ax.plot([0, 1], [0, 1])
    plot.save(fig, "roof", tmp_path / "out")
    assert (tmp_path / "out" / "roof.svg").read_text().lstrip().startswith("<?xml")
    assert (tmp_path / "out" / "roof.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_figures_folder_is_the_books_figures_or_the_environments(tmp_path, monkeypatch):
    monkeypatch.delenv("ROOFLINE_FIGURES", raising=False)
    (tmp_path / "book" / "chapters").mkdir(parents=True)
    (tmp_path / "book" / "_toc.yml").write_text("")
    assert plot.figures_folder(tmp_path / "book" / "chapters") == (tmp_path / "book" / "figures").resolve()
    # a chapter copied out of the book (JupyterLab on a reader's folder) still runs: figures/ beside it
    (tmp_path / "mine").mkdir()
    assert plot.figures_folder(tmp_path / "mine") == (tmp_path / "mine" / "figures").resolve()
    monkeypatch.setenv("ROOFLINE_FIGURES", str(tmp_path / "elsewhere"))
    assert plot.figures_folder(tmp_path) == tmp_path / "elsewhere"


def test_legend_below_puts_every_labelled_series_under_the_axes():
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.plot([1, 2], [1, 2], label="a")
    ax.plot([1, 2], [2, 1], label="b")
    ax.plot([1, 2], [1, 1])  # unlabelled: no entry
    plot.legend_below(ax, ncol=2)
    lg = ax.get_legend()
    assert [t.get_text() for t in lg.get_texts()] == ["a", "b"] and lg._ncols == 2
    assert lg.get_bbox_to_anchor().transformed(ax.transAxes.inverted()).y0 < 0  # below the axes
    fig2, ax2 = plt.subplots(figsize=(3, 2))
    plot.legend_below(ax2)
    assert ax2.get_legend() is None  # nothing labelled, no empty legend


# --- chapter 1 ---------------------------------------------------------------------------------------------

def test_roofline_chart_draws_each_roof_its_ridge_and_the_points():
    points = [{"intensity": 1.0, "flops_per_s": 3.35e12, "label": "decode, batch 1"},
              {"intensity": 1000.0, "flops_per_s": H100_BF16, "label": "prefill", "legend": "prefill (legend)"}]
    fig = plot.roofline_chart(["h100-sxm", "a100-sxm-80gb"], points, title="Datasheet roofs, dense bf16")
    ax = fig.axes[0]
    assert ax.get_title() == "Datasheet roofs, dense bf16"
    assert ax.get_xlabel() == "arithmetic intensity (FLOP per byte of HBM traffic)"
    assert ax.get_ylabel() == "attainable throughput (TFLOP/s)"
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    entries = legend(fig)
    assert len(entries) == 3  # two roofs and the point named in the legend
    assert entries[0].startswith("H100") and f"ridge {H100_BF16 / H100_HBM:,.0f}" in entries[0]
    assert entries[2] == "prefill (legend)"
    # the ridge: a vertical line where peak over bandwidth falls, one per roof
    assert vlines(ax) == pytest.approx([rl.ridge_point("h100-sxm"), rl.ridge_point("a100-sxm-80gb")])
    assert vlines(ax)[0] == pytest.approx(H100_BF16 / H100_HBM)
    # the roof itself: flat at the peak (TFLOP/s) right of the ridge, bandwidth x intensity left of it
    roof = ax.lines[0]
    x, y = roof.get_xdata(), roof.get_ydata()
    assert y[-1] == pytest.approx(H100_BF16 / 1e12) and y[0] == pytest.approx(0.1 * H100_HBM / 1e12)
    assert "decode, batch 1" in texts(ax) and "prefill" in texts(ax)
    dot = [l for l in ax.lines if list(l.get_xdata()) == [1.0]]
    assert dot and dot[0].get_ydata()[0] == pytest.approx(3.35)


def test_roofline_chart_rings_a_hollow_point_so_one_at_the_same_place_shows_inside():
    spot = {"intensity": 1.0, "flops_per_s": 3.35e12}
    fig = plot.roofline_chart("h100-sxm", [{**spot, "legend": "W8A16"}, {**spot, "legend": "W8A8", "hollow": True}])
    lines = {l.get_label(): l for l in fig.axes[0].lines}
    filled, ring = lines["W8A16"], lines["W8A8"]
    assert ring.get_markerfacecolor() == "none" and ring.get_markersize() > filled.get_markersize()
    assert ring.get_zorder() > filled.get_zorder()


def test_roofline_chart_names_the_traffic_and_can_leave_the_ridge_out():
    fig = plot.roofline_chart("h100-sxm", intensity=(10, 1e6), traffic="link", annotate_ridge=False)
    ax = fig.axes[0]
    assert ax.get_xlabel() == "arithmetic intensity (FLOP per byte of link traffic)"
    assert ax.get_xlim() == pytest.approx((10, 1e6)) and vlines(ax) == []
    assert "ridge" not in legend(fig)[0]


def test_ridge_chart_bars_are_each_chips_ridge_point():
    names = ["v100-sxm2", "a100-sxm-80gb", "h100-sxm"]
    fig = plot.ridge_chart(names)
    growth, ridge = fig.axes
    heights = [b.get_height() for b in bars(ridge)]
    assert heights == pytest.approx([rl.ridge_point("v100-sxm2", "fp16"), rl.ridge_point("a100-sxm-80gb"),
                                     rl.ridge_point("h100-sxm")])
    assert heights[2] == pytest.approx(H100_BF16 / H100_HBM)
    assert ridge.get_ylabel() == "ridge point (FLOP per byte)"
    assert [t.replace("\n", " ") for t in texts(ridge)] == [f"{h:,.0f}" for h in heights]
    assert growth.get_yscale() == "log" and "log scale" in growth.get_ylabel() and "V100" in growth.get_ylabel()
    assert legend(fig) == ["dense 16-bit peak FLOP/s", "HBM bandwidth"]
    flops, bw = named(growth)["dense 16-bit peak FLOP/s"], named(growth)["HBM bandwidth"]
    assert flops.get_ydata()[0] == bw.get_ydata()[0] == 1  # relative to the first chip
    assert bw.get_ydata()[2] == pytest.approx(H100_HBM / rl.get_hardware("v100-sxm2").hbm_bandwidth)
    assert len(ticks(ridge.xaxis)) == 3 and "(fp16)" in ticks(ridge.xaxis)[0]  # the V100 has no bf16


def test_tiers_chart_draws_one_bar_per_tier_at_its_bandwidth():
    tiers = rl.bandwidth_tiers("h100-sxm")
    fig = plot.tiers_chart(tiers)
    ax = fig.axes[0]
    widths = [b.get_width() for b in bars(ax)]
    assert widths == pytest.approx([t.each_way / 1e9 for t in tiers]) and widths[0] == pytest.approx(3350)
    assert [b.get_y() for b in bars(ax)] == sorted((b.get_y() for b in bars(ax)), reverse=True)  # fastest on top
    assert ax.get_xscale() == "log" and ax.get_xlabel() == "bandwidth per GPU, one direction (GB/s, log scale)"
    assert texts(ax) == [rl.fmt(t.each_way, "B/s") for t in tiers]
    assert len(ticks(ax.yaxis)) == len(tiers) and ticks(ax.yaxis)[0].startswith("HBM")


# --- chapter 2 ---------------------------------------------------------------------------------------------

def test_memory_bars_stack_each_footprints_parts_to_its_total():
    from roofline.workloads import memory

    setups = {"1 GPU": memory.training_footprint("llama-3-8b", 4096, 1),
              "8 GPUs, ZeRO-3": memory.training_footprint("llama-3-8b", 4096, 1, gpus=8, zero_stage=3)}
    fig = plot.memory_bars(setups, title="Llama 3 8B training memory per GPU")
    ax = fig.axes[0]
    parts = list(setups["1 GPU"].parts)
    assert legend(fig) == parts and len(ax.containers) == len(parts)
    assert ax.get_xlabel() == "memory per GPU (GB)" and ax.get_title() == "Llama 3 8B training memory per GPU"
    assert ticks(ax.yaxis) == list(setups)
    first = sum(c[0].get_width() for c in ax.containers)  # the top bar: the first footprint
    assert first == pytest.approx(16 * rl.load_model("llama-3-8b").params / 1e9
                                  + sum(float(setups["1 GPU"].parts[p]) for p in ("activations", "recompute working set",
                                                                                  "logits")) / 1e9)
    assert f"{first:,.1f} GB" in texts(ax)
    assert vlines(ax) == pytest.approx([rl.get_hardware(g).usable_capacity / 1e9 for g in ("h100-sxm", "h200-sxm")])


def test_memory_bars_clip_at_xmax_and_still_print_the_total():
    from roofline.workloads import memory

    fig = plot.memory_bars({"1 GPU": memory.training_footprint("llama-3-8b", 4096, 1)}, capacities=("h100-sxm",),
                           xmax=100)
    ax = fig.axes[0]
    assert ax.get_xlim() == (0, 100)
    total = float(memory.training_footprint("llama-3-8b", 4096, 1).total) / 1e9
    assert f"{total:,.0f} GB →" in texts(ax) and len(vlines(ax)) == 1


def test_memory_curves_one_line_per_curve_in_gb_log_log():
    seqs = np.array([1024, 2048, 4096])
    curves = {"explicit": seqs * 1e6, "flash": seqs * 1e5}
    fig = plot.memory_curves(seqs, curves, title="Llama 3 8B activations")
    ax = fig.axes[0]
    assert ax.get_title() == "Llama 3 8B activations"
    assert list(named(ax)) == list(curves) and legend(fig) == list(curves)
    assert named(ax)["explicit"].get_ydata() == pytest.approx(seqs * 1e6 / 1e9)
    assert ax.get_xscale() == ax.get_yscale() == "log" and ax.get_ylabel() == "memory (GB, log scale)"
    assert ax.get_xlabel() == "sequence length (tokens)" and ticks(ax.xaxis) == ["1k", "2k", "4k"]
    assert hlines(ax) == pytest.approx([rl.get_hardware(g).usable_capacity / 1e9 for g in ("h100-sxm", "h200-sxm")])


# --- chapter 3 ---------------------------------------------------------------------------------------------

def test_frontier_chart_puts_each_policy_at_its_extra_flops_and_memory():
    from roofline.workloads import training

    points = training.frontier("llama-3-8b", 4096, 1, spacings=[1, 2, 4])
    fig = plot.frontier_chart(points, capacity=20e9, title="Llama 3 8B, one sequence", annotate=(1, 4))
    ax = fig.axes[0]
    spaced = [p for p in points if p.recompute.startswith("every-")]
    others = [p for p in points if not p.recompute.startswith("every-")]
    label = r"checkpoint every $L_\mathrm{seg}$ layers ($L_\mathrm{seg}$ = 1: full)"
    assert legend(fig) == [label, *(p.label for p in others)]
    assert "matmul outputs, flash" in legend(fig)
    line = named(ax)[label]
    assert list(line.get_ydata()) == pytest.approx([p.memory / 1e9 for p in spaced])
    assert list(line.get_xdata()) == pytest.approx([100 * p.extra_flops for p in spaced])
    assert ax.get_yscale() == "log" and ax.get_ylabel() == "activations on the GPU (GB, log scale)"
    assert ax.get_xlabel() == "extra FLOPs (% of the model's forward and backward)"
    assert {r"$L_\mathrm{seg}$ = 1", r"$L_\mathrm{seg}$ = 4"} <= set(texts(ax)) and r"$L_\mathrm{seg}$ = 2" not in texts(ax)
    assert hlines(ax) == pytest.approx([20.0]) and ax.get_title() == "Llama 3 8B, one sequence"


def test_recompute_throughput_chart_one_line_per_series_in_tflops():
    fig = plot.recompute_throughput_chart([1, 2, 3], {"8B, none": [1e14, 2e14, np.nan], "8B, full": [1e14, 1.5e14, 2e14]},
                                          title="64 H100s")
    ax = fig.axes[0]
    assert legend(fig) == ["8B, none", "8B, full"] and ax.get_ylabel() == "TFLOP/s per GPU"
    assert ax.get_xlabel() == "micro-batch (sequences per GPU)" and ax.get_title() == "64 H100s"
    assert list(named(ax)["8B, full"].get_ydata()) == pytest.approx([100, 150, 200])
    assert ax.get_ylim()[0] == 0


# --- chapter 4 ---------------------------------------------------------------------------------------------

def test_tile_traffic_chart_draws_traffic_intensity_the_ridge_and_the_marks():
    from roofline.workloads import tiling

    tiles = np.array([16, 64, 256, 1024])
    traffic = tiling.tiled_matmul(4096, 4096, 4096, tiles)
    ridge = rl.ridge_point("h100-sxm")
    fig = plot.tile_traffic_chart(tiles, traffic.bytes, traffic.intensity, ridge=ridge, ridge_label="H100 SXM ridge",
                                  crossing=256, marks={"one SM": 64}, title="A 4,096-cubed bf16 product, tiled")
    left, right = fig.axes
    assert (left.get_ylabel(), right.get_ylabel()) == ("HBM traffic (GB)", "intensity (FLOP per HBM byte)")
    assert left.get_xlabel() == right.get_xlabel() == "square tile side (elements)"
    assert all(a.get_xscale() == a.get_yscale() == "log" for a in (left, right))
    assert legend(fig) == ["HBM traffic", "one SM", "H100 SXM ridge", "ridge crossed at a tile of 256"]
    assert hlines(right) == pytest.approx([H100_BF16 / H100_HBM])
    assert vlines(left) == vlines(right) == [64.0]
    assert list(named(left)["HBM traffic"].get_ydata()) == pytest.approx(np.asarray(traffic.bytes) / 1e9)
    # a tiled product's intensity is 2 m n k over the bytes it moves
    assert list(right.lines[0].get_ydata()) == pytest.approx(2 * 4096**3 / np.asarray(traffic.bytes))
    assert fig.get_suptitle() == "A 4,096-cubed bf16 product, tiled"


def test_attention_sweep_chart_four_panels_with_their_units():
    seqs = [1024, 4096]
    pred = {v: {"bytes": [1e9, 4e9], "peak": [2e9, 8e9], "time": [1e-3, 4e-3], "intensity": [100, 400]}
            for v in ("explicit", "flash")}
    meas = {"explicit": {"seqs": seqs, "peak": [2e9, np.nan], "time": [1.1e-3, np.nan]},
            "flash": {"seqs": seqs, "peak": [2e9, 8e9], "time": [1.2e-3, 4.4e-3]}}
    fig = plot.attention_sweep_chart(seqs, pred, meas, capacity=130e9, capacity_label="H200 usable",
                                     ridge=rl.ridge_point("h200-sxm"), ridge_label="H200 ridge", title="Causal attention")
    axes = fig.axes
    assert [a.get_ylabel() for a in axes] == ["HBM traffic (GB)", "peak memory (GB)", "time (ms)", "intensity (FLOP/byte)"]
    assert all(a.get_xlabel() == "sequence length (tokens)" and a.get_xscale() == a.get_yscale() == "log" for a in axes)
    assert legend(fig) == ["explicit, predicted", "explicit, measured", "flash, predicted", "flash, measured"]
    assert hlines(axes[1]) == pytest.approx([130.0]) and hlines(axes[3]) == pytest.approx([rl.ridge_point("h200-sxm")])
    t = named(axes[2])
    assert list(t["flash, measured"].get_ydata()) == pytest.approx([1.2, 4.4])  # ms
    assert list(t["explicit, measured"].get_xdata()) == [1024]  # the point that did not run is left out
    assert ticks(axes[0].xaxis) == ["1k", "4k"] and fig.get_suptitle() == "Causal attention"


# --- chapter 5 ---------------------------------------------------------------------------------------------

def test_kv_bytes_chart_one_bar_per_model_coloured_by_layout():
    rows = [("Llama 2 7B", "MHA", 524288.0), ("Llama 3 8B", "GQA", 131072.0), ("Gemma 2 9B", "GQA + sliding window",
                                                                                      172032.0)]
    fig = plot.kv_bytes_chart(rows, title="KV cache per token, bf16")
    ax = fig.axes[0]
    assert ax.get_title() == "KV cache per token, bf16"
    assert [b.get_width() for b in bars(ax)] == pytest.approx([524.288, 131.072, 172.032])
    assert legend(fig) == ["MHA", "GQA", "GQA + sliding window"]  # one entry per layout, not per model
    assert ticks(ax.yaxis) == ["Llama 2 7B", "Llama 3 8B", "Gemma 2 9B"]
    assert [b.get_y() for b in bars(ax)] == sorted((b.get_y() for b in bars(ax)), reverse=True)  # top to bottom
    assert ax.get_xscale() == "log" and ax.get_xlabel() == "KV cache per token of context (kB, log scale)"
    assert texts(ax) == ["524 kB", "131 kB", "172 kB"]
    # the model's own count: 2 (K and V) x 32 layers x 8 KV heads x 128 x 2 bytes
    assert rl.load_model("llama-3-8b").kv_bytes_per_token("bf16") == 2 * 32 * 8 * 128 * 2 == rows[1][2]


def test_capacity_chart_one_line_per_curve_dropping_batches_below_one():
    ctx = np.array([512, 1024, 2048])
    curves = {"Llama 3 8B, H200": (ctx, [400, 200, 100], "-"), "Llama 3 8B, H100": (ctx, [100, 50, 0], "--")}
    fig = plot.capacity_chart(curves, title="Largest batch")
    ax = fig.axes[0]
    assert ax.get_title() == "Largest batch"
    assert legend(fig) == list(curves)
    assert list(named(ax)["Llama 3 8B, H100"].get_xdata()) == [512, 1024]  # batch 0: the line ends
    assert named(ax)["Llama 3 8B, H200"].get_color() == named(ax)["Llama 3 8B, H100"].get_color()  # one model, one colour
    assert ax.get_xscale() == ax.get_yscale() == "log" and ax.get_ylabel() == "largest batch that fits (log scale)"
    assert ax.get_xlabel() == "context per sequence (tokens)" and ticks(ax.xaxis) == ["512", "1k", "2k"]


def test_serving_throughput_chart_each_curve_ends_at_its_wall():
    batches = np.array([1, 4, 16, 64])
    curves = {"H100": batches * 100.0, "H200": batches * 120.0}
    fig = plot.serving_throughput_chart(batches, curves, {"H100": 16, "H200": 64}, title="decode throughput")
    ax = fig.axes[0]
    assert ax.get_title() == "decode throughput"
    assert legend(fig) == ["H100", "H200"]
    assert list(named(ax)["H100"].get_xdata()) == [1, 4, 16]  # solid up to the wall
    assert "wall: batch 16" in texts(ax) and "wall: batch 64" in texts(ax)
    assert ax.get_xscale() == ax.get_yscale() == "log"
    assert ax.get_ylabel() == "tokens per second (log scale)"
    assert ax.get_xlabel() == "batch (sequences decoded together, log scale)"


def test_sweep_chart_draws_predicted_lines_and_measured_dots_in_ms():
    sweeps = {"batch 1": ([512, 2048], [5e-3, 6e-3], [4.8e-3, 5.5e-3]), "batch 16": ([512, 2048], [6e-3, 9e-3],
                                                                                   [5.5e-3, 8e-3])}
    fig = plot.sweep_chart(sweeps, xlabel="context per sequence (tokens, log scale)", title="Decode step")
    ax = fig.axes[0]
    assert ax.get_title() == "Decode step"
    assert legend(fig) == ["batch 1: predicted", "batch 1: measured", "batch 16: predicted", "batch 16: measured"]
    assert list(named(ax)["batch 16: measured"].get_ydata()) == pytest.approx([6, 9])
    assert ax.get_ylabel() == "time per decode step (ms)" and ax.get_xlabel() == "context per sequence (tokens, log scale)"
    assert ax.get_xscale() == ax.get_yscale() == "log" and ticks(ax.xaxis) == ["512", "2k"]


# --- chapter 6 ---------------------------------------------------------------------------------------------

def test_speedup_chart_one_curve_per_format_and_a_line_at_each_crossover():
    batches = np.array([1, 8, 64, 512])
    curves = {"W8A16 (int8)": [2.0, 1.9, 1.5, 1.0], "W8A8 (fp8)": [2.0, 2.0, 2.0, 2.0]}
    fig = plot.speedup_chart(batches, curves, marks={"W8A16 (int8)": 64, "W8A8 (fp8)": None}, title="Llama 3 8B")
    ax = fig.axes[0]
    assert ax.get_title() == "Llama 3 8B"
    assert legend(fig) == list(curves) and vlines(ax) == [64.0]
    assert list(named(ax)["W8A16 (int8)"].get_ydata()) == [2.0, 1.9, 1.5, 1.0]
    assert ax.get_xscale() == "log" and ax.get_ylabel() == "decode speedup over bf16"
    assert ax.get_xlabel() == "decode batch (sequences)" and ax.get_ylim()[0] == 0


def test_quality_chart_one_marker_series_per_group():
    pts = [{"x": 1.9, "y": 0.5, "group": "GPTQ paper", "label": ""},
           {"x": 3.2, "y": 12.0, "group": "GPTQ paper", "label": "GPTQ, 3 bits"},
           {"x": 1.95, "y": 0.1, "group": "FP8 paper", "label": ""}]
    fig = plot.quality_chart(pts, title="Quality lost", xlabel="predicted batch-1 decode speedup")
    ax = fig.axes[0]
    assert ax.get_title() == "Quality lost"
    assert legend(fig) == ["GPTQ paper", "FP8 paper"]
    assert list(named(ax)["GPTQ paper"].get_ydata()) == [0.5, 12.0]
    assert texts(ax) == ["GPTQ, 3 bits"] and hlines(ax) == [0.0]
    assert ax.get_xlabel() == "predicted batch-1 decode speedup" and ax.get_ylabel() == "quality lost (%)"


def test_matmul_throughput_chart_draws_each_series_and_its_datasheet_peak():
    ms = [1, 64, 4096]
    series = {"fp8": [5e12, 300e12, 1500e12], "bf16": [3e12, 200e12, 800e12]}
    h200 = rl.get_hardware("h200-sxm")
    peaks = {"fp8 dense peak": (h200.peak_flops("fp8"), "fp8"), "bf16 dense peak": (h200.peak_flops("bf16"), "bf16")}
    fig = plot.matmul_throughput_chart(ms, series, peaks=peaks, title="Measured matmuls")
    ax = fig.axes[0]
    assert ax.get_title() == "Measured matmuls"
    assert legend(fig) == ["fp8", "bf16", "fp8 dense peak", "bf16 dense peak"]
    assert hlines(ax) == pytest.approx([1978.9, 989.4], rel=1e-3)  # TFLOP/s: the H200's dense fp8 and bf16
    assert named(ax)["bf16 dense peak"].get_color() == named(ax)["bf16"].get_color()
    assert list(named(ax)["bf16"].get_ydata()) == pytest.approx([3, 200, 800])
    assert ax.get_ylabel() == "TFLOP/s" and ax.get_xscale() == "log" and "rows m" in ax.get_xlabel()


# --- appendices: measurements ------------------------------------------------------------------------------

def test_measured_roofline_chart_adds_one_series_per_measurement():
    sheet = rl.as_roof("h200-sxm")
    series = {"measured, n = k = 4096": ([10, 100, 1000], [40e12, 400e12, 700e12]),
              "per call": {"intensity": [10, 100], "flops_per_s": [20e12, 200e12], "marker": "s", "line": False}}
    fig = plot.measured_roofline_chart([sheet], series, title="bf16 matmuls", floor=1e12)
    ax = fig.axes[0]
    assert legend(fig)[1:] == list(series) and len(legend(fig)) == 3
    assert list(named(ax)["measured, n = k = 4096"].get_ydata()) == pytest.approx([40, 400, 700])
    assert named(ax)["per call"].get_linestyle() == "None"
    assert ax.get_ylim()[0] == pytest.approx(1.0) and ax.get_title() == "bf16 matmuls"
    assert ax.get_xscale() == ax.get_yscale() == "log" and "TFLOP/s" in ax.get_ylabel()
    assert vlines(ax) == pytest.approx([rl.ridge_point("h200-sxm")])


def test_measured_vs_predicted_chart_lines_for_predictions_dots_for_measurements():
    x = [1, 4, 16]
    fig = plot.measured_vs_predicted_chart(x, {"measured (CUDA graph)": [5e-3, 5.2e-3, 6e-3]},
                                           {"datasheet roof": [4e-3, 4.1e-3, 4.5e-3], "measured roof": [5e-3, 5e-3, 5.5e-3]},
                                           xlabel="batch", ylabel="time per decode step (ms)", scale=1e-3, logy=True,
                                           title="Llama 3 8B decode")
    ax = fig.axes[0]
    assert legend(fig) == ["predicted, datasheet roof", "predicted, measured roof", "measured (CUDA graph)"]
    assert list(named(ax)["measured (CUDA graph)"].get_ydata()) == pytest.approx([5, 5.2, 6])
    assert ax.get_xscale() == ax.get_yscale() == "log" and ticks(ax.xaxis) == ["1", "4", "16"]
    assert (ax.get_xlabel(), ax.get_ylabel(), ax.get_title()) == ("batch", "time per decode step (ms)", "Llama 3 8B decode")
    lin = plot.measured_vs_predicted_chart(x, [1, 2, 3], {"datasheet roof": [1, 2, 3]}, xlabel="x", ylabel="y", logx=False)
    assert lin.axes[0].get_xscale() == lin.axes[0].get_yscale() == "linear" and legend(lin)[-1] == "measured"


def test_calibration_chart_shows_the_sweeps_against_the_datasheet():
    rec, layers = load_measurement("h200-2026-11-29"), load_layers("h200-2026-11-29-layers")
    cal = calibrated_roof(rec, layers)
    h200 = rl.get_hardware("h200-sxm")
    fig = plot.calibration_chart(cal, h200, title="What the microbenchmarks reached")
    memory, compute = fig.axes
    assert memory.get_ylabel() == "bandwidth reached (TB/s)" and memory.get_xlabel() == "bytes one kernel moves"
    assert compute.get_ylabel() == "TFLOP/s reached" and fig.get_suptitle() == "What the microbenchmarks reached"
    assert all(a.get_xscale() == a.get_yscale() == "log" for a in (memory, compute))
    assert hlines(memory) == pytest.approx([4.8])  # the H200's HBM3e, 4.8 TB/s
    sweep = named(memory)["read sweep"]
    assert list(sweep.get_ydata()) == pytest.approx(np.asarray(cal.read_bytes) / np.asarray(cal.read_seconds) / 1e12)
    assert len(sweep.get_xdata()) == len(cal.read_bytes)
    assert legend(fig) == ["calibrated: bytes / time", "read sweep", "H200 datasheet", "bf16 matmul, best of the sweep",
                           "fp8 matmul, best of the sweep", "flash attention (causal)"]
    assert hlines(compute) == pytest.approx([h200.peak_flops("bf16") / 1e12, h200.peak_flops("fp8") / 1e12])


def test_ratio_chart_one_marker_per_point_and_the_band_shaded():
    floor = [Comparison("decode b1", 4e-3, 5e-3, "memory"), Comparison("prefill 2048", 0.1, 0.05, "compute")]
    est = [Comparison("decode b1", 5e-3, 5e-3, "memory"), Comparison("prefill 2048", 0.05, 0.05, "compute")]
    fig = plot.ratio_chart({"datasheet, step rule": floor, "calibrated, kernel rule": est})
    ax = fig.axes[0]
    assert legend(fig) == ["within 1.25x", "datasheet, step rule", "calibrated, kernel rule"]
    assert ticks(ax.yaxis) == ["b1", "prefill, 2048"]  # the first point on top
    d = named(ax)["datasheet, step rule"]
    assert d.get_xdata()[0] == pytest.approx(0.8)  # 4 ms predicted over 5 ms measured
    assert d.get_xdata()[1] == pytest.approx(1.6 / 1.02)  # a ratio of 2 is drawn at the edge, its value printed
    assert texts(ax) == ["2.00"]
    assert ax.get_xscale() == "log" and ax.get_xlabel() == "predicted / measured time"


def test_timing_parts_split_a_prediction_by_kind_of_kernel():
    step = rl.decode_step("llama-3-8b", 1, 2048, accounting="refined")
    whole = rl.predict(step, "h200-sxm")
    assert plot.timing_parts(whole) == {"the whole step": pytest.approx(float(whole.time))}
    for timing in ("kernel", "serial"):
        pred = rl.predict(step, "h200-sxm", timing=timing)
        parts = plot.timing_parts(pred)
        assert set(parts) == {"matmul", "attention", "elementwise", "launches"}
        assert sum(parts.values()) == pytest.approx(float(pred.time))
        matmuls = sum(float(max(t.compute, t.memory) if timing == "kernel" else t.compute + t.memory)
                      for t in pred.ops if t.op.kind == "matmul")
        assert parts["matmul"] == pytest.approx(matmuls)


def test_timing_bars_stack_to_each_predictions_time_in_ms():
    step = rl.decode_step("llama-3-8b", 1, 2048, accounting="refined")
    preds = {"datasheet, step": rl.predict(step, "h200-sxm"), "datasheet, kernel": rl.predict(step, "h200-sxm",
                                                                                                timing="kernel")}
    fig = plot.timing_bars(preds, title="Llama 3 8B decode")
    ax = fig.axes[0]
    assert ax.get_xlabel() == "predicted time (ms)" and ax.get_title() == "Llama 3 8B decode"
    assert ticks(ax.yaxis) == list(preds)
    y = {label: yi for yi, label in zip(ax.get_yticks(), ticks(ax.yaxis))}
    for label, p in preds.items():
        widths = [b.get_width() for b in bars(ax) if b.get_y() + b.get_height() / 2 == pytest.approx(y[label])]
        assert sum(widths) == pytest.approx(float(p.time) * 1e3)
    assert texts(ax) == [rl.fmt(float(p.time), "s") for p in preds.values()]
    assert legend(fig)[0] == "the whole step" and "matmul" in legend(fig) and len(set(legend(fig))) == len(legend(fig))


# --- chapter 7 ---------------------------------------------------------------------------------------------

def test_collective_bytes_chart_draws_each_collectives_multiple_of_the_buffer():
    groups = np.array([2, 4, 8, 16])
    series = {"all-reduce": 2 * (groups - 1) / groups, "all-gather": (groups - 1) / groups}
    fig = plot.collective_bytes_chart(groups, series, title="Bytes each GPU sends")
    ax = fig.axes[0]
    assert legend(fig) == list(series)
    # a ring all-reduce sends 2 (n - 1) / n buffers per GPU: 1.75 at 8 GPUs
    assert named(ax)["all-reduce"].get_ydata()[2] == pytest.approx(1.75)
    from roofline.core import collectives as col

    assert col.bytes_sent("all_reduce", groups, 1.0) == pytest.approx(series["all-reduce"])
    assert ax.get_xscale() == "log" and ax.get_ylabel() == "bytes sent per GPU / buffer size"
    assert ax.get_xlabel() == r"GPUs in the group, $G_\mathrm{coll}$" and ax.get_title() == "Bytes each GPU sends"


def test_exposure_chart_one_panel_per_case_compute_under_exposed_in_ms():
    toks = np.array([256, 1024, 4096])
    panels = {"one node": {"compute": [1e-3, 4e-3, 16e-3], "exposed": [2e-3, 1e-3, 0], "threshold": 2048},
              "16 nodes": {"compute": [1e-3, 4e-3, 16e-3], "exposed": [8e-3, 6e-3, 1e-3]}}
    fig = plot.exposure_chart(toks, panels, title="Llama 3 8B, DDP")
    axes = fig.axes
    assert [a.get_title() for a in axes] == list(panels) and fig.get_suptitle() == "Llama 3 8B, DDP"
    assert axes[0].get_ylabel() == "step time (ms)" and all(a.get_xlabel() == "tokens per GPU per step" for a in axes)
    assert all(a.get_xscale() == a.get_yscale() == "log" for a in axes)
    assert legend(fig) == ["compute", "exposed communication"]
    assert [len(a.collections) for a in axes] == [2, 2] and vlines(axes[0]) == [2048.0] and vlines(axes[1]) == []
    # the stack's top is compute plus exposed: 3 ms at 256 tokens on one node
    top = axes[0].collections[1].get_paths()[0].vertices
    assert top[:, 1].max() == pytest.approx(16.0)
    assert np.isclose(top[top[:, 0] == 256, 1], 3.0).any() and np.isclose(top[top[:, 0] == 1024, 1], 5.0).any()


def test_zero_tradeoff_chart_one_point_per_layout_and_the_capacity():
    pts = [{"memory": 120e9, "sent": 30e9, "label": "DDP"}, {"memory": 20e9, "sent": 45e9, "label": "ZeRO-3"}]
    fig = plot.zero_tradeoff_chart(pts, capacity=80e9, capacity_label="H100 usable HBM", title="Llama 3 70B")
    ax = fig.axes[0]
    assert ax.get_title() == "Llama 3 70B"
    dots = [(l.get_xdata()[0], l.get_ydata()[0]) for l in ax.lines if len(l.get_xdata()) == 1]
    assert dots == [(120, 30), (20, 45)]  # GB
    assert texts(ax) == ["DDP", "ZeRO-3", "H100 usable HBM"] and vlines(ax) == [80.0]
    assert ax.get_xscale() == "log" and ax.get_xlabel() == "memory per GPU (GB, log scale)"
    assert ax.get_ylabel() == "bytes each GPU sends per step (GB)" and ax.get_ylim() == pytest.approx((0, 45 * 1.15))


def test_zero_tradeoff_chart_keeps_nvlink_and_network_bytes_on_separate_axes():
    pts = [{"memory": 120e9, "scale_up": 30e9, "network": 4e9, "label": "DDP"},
           {"memory": 20e9, "scale_up": 45e9, "network": 6e9, "label": "ZeRO-3"}]
    fig = plot.zero_tradeoff_chart(pts, capacity=80e9, capacity_label="H100 usable HBM")
    top, bottom = fig.axes
    for ax, want in ((top, [(120, 30), (20, 45)]), (bottom, [(120, 4), (20, 6)])):
        assert [(l.get_xdata()[0], l.get_ydata()[0]) for l in ax.lines if len(l.get_xdata()) == 1] == want
    assert "NVLink" in top.get_ylabel() and "network" in bottom.get_ylabel()
    assert bottom.get_xlabel() == "memory per GPU (GB, log scale)"


# --- chapter 8 ---------------------------------------------------------------------------------------------

def test_tp_layer_chart_compute_solid_communication_dashed_in_ms():
    degrees = [2, 4, 8]
    series = {"matmuls": ([4e-3, 2e-3, 1e-3], "compute"), "all-reduces, NVLink": ([0.2e-3, 0.3e-3, 0.35e-3], "comm")}
    fig = plot.tp_layer_chart(degrees, series, title="One block of Llama 3 70B")
    ax = fig.axes[0]
    assert ax.get_title() == "One block of Llama 3 70B"
    assert legend(fig) == list(series)
    assert named(ax)["matmuls"].get_linestyle() == "-" and named(ax)["all-reduces, NVLink"].get_linestyle() == "--"
    assert list(named(ax)["matmuls"].get_ydata()) == pytest.approx([4, 2, 1])
    assert ax.get_xscale() == ax.get_yscale() == "log" and ticks(ax.xaxis) == ["2", "4", "8"]
    assert ax.get_ylabel() == "time per layer, forward (ms)" and ax.get_xlabel() == "tensor-parallel degree t (GPUs)"


def test_tp_decode_chart_two_panels_hollow_where_it_does_not_fit():
    degrees = [1, 2, 4]
    fig = plot.tp_decode_chart(degrees, {"70B": [np.nan, 20e-3, 11e-3], "8B": [6e-3, 3.5e-3, 2e-3]},
                               {"70B": [np.nan, 25, 22], "8B": [160, 140, 120]},
                               fits={"70B": [False, True, True], "8B": [True, True, True]}, title="Decode at batch 1")
    left, right = fig.axes
    assert left.get_ylabel() == "time per output token (ms)" and right.get_ylabel() == "tokens/s per GPU"
    assert left.get_xlabel() == right.get_xlabel() == "degree t (GPUs)"
    assert all(a.get_xscale() == a.get_yscale() == "log" for a in (left, right))
    assert legend(fig) == ["70B", "8B"] and fig.get_suptitle() == "Decode at batch 1"
    assert list(named(left)["8B"].get_ydata()) == pytest.approx([6, 3.5, 2])
    hollow = [l for l in left.lines if l.get_markerfacecolor() == "white"]
    assert [list(l.get_xdata()) for l in hollow] == [[1], []]  # 70B at t = 1 does not fit; 8B fits everywhere


def test_tp_memory_chart_stacks_weights_and_kv_room_to_the_capacity():
    cap = rl.get_hardware("h100-sxm").usable_capacity
    weights = [141e9, 70.5e9, 35.3e9]
    fig = plot.tp_memory_chart([1, 2, 4], weights, [cap - w for w in weights], [0, 12, 45], capacity=cap,
                               title="Llama 3 70B in bf16")
    ax = fig.axes[0]
    assert ax.get_title() == "Llama 3 70B in bf16"
    w_bars, room_bars = ax.containers
    assert [b.get_height() for b in w_bars] == pytest.approx([141, 70.5, 35.3])
    assert [b.get_height() for b in room_bars] == pytest.approx([0, cap / 1e9 - 70.5, cap / 1e9 - 35.3])
    assert [b.get_y() + b.get_height() for b in room_bars][1:] == pytest.approx([cap / 1e9] * 2)
    assert hlines(ax) == pytest.approx([cap / 1e9]) and legend(fig) == ["weights per GPU", "room for the KV cache"]
    assert ["does not fit", "batch 12", "batch 45"] == [t for t in texts(ax) if t != "usable HBM"]
    assert ax.get_ylabel() == "GB per GPU" and ticks(ax.xaxis) == ["t = 1", "t = 2", "t = 4"]


# --- chapter 9 ---------------------------------------------------------------------------------------------

def test_pipeline_timeline_chart_one_row_per_stage_and_the_bubble_shaded():
    from roofline.parallel import pipeline as pp

    demo = pp.simulate(4, 8, schedule="1f1b", forward=1.0, backward=2.0)
    fig = plot.pipeline_timeline_chart(demo, title="1F1B, p = 4 stages, n_mb = 8 micro-batches")
    ax = fig.axes[0]
    assert ticks(ax.yaxis) == [f"stage {s}" for s in range(4)]
    # 1F1B: m (f + b) of work plus (p - 1)(f + b) of bubble
    assert ax.get_xlim() == pytest.approx((0, (8 + 3) * 3.0)) and demo.makespan == pytest.approx(33.0)
    assert legend(fig) == ["forward", "backward", "idle (bubble)"]
    assert len(ax.collections) == 4 + 2 * 4  # the grey row under each stage, then its forwards and its backwards
    forwards = ax.collections[4].get_paths()  # stage 0's forward passes: one box each, one unit wide
    assert len(forwards) == 8
    assert ax.get_xlabel() == "time (one micro-batch's forward pass on one stage = 1)"
    assert ax.get_title() == "1F1B, p = 4 stages, n_mb = 8 micro-batches"


def test_bubble_chart_draws_each_schedules_bubble_in_percent():
    from roofline.parallel import pipeline as pp

    ms = np.array([4, 16, 64])
    series = {"GPipe and 1F1B": pp.bubble_fraction(16, ms), "interleaved, v = 2": pp.bubble_fraction(16, ms, 2,
                                                                                                     "interleaved")}
    fig = plot.bubble_chart(ms, series, threshold=0.05, title="Bubble fraction, p = 16 stages")
    ax = fig.axes[0]
    assert ax.get_title() == "Bubble fraction, p = 16 stages"
    assert legend(fig) == list(series)
    # (p - 1) / m of the ideal step: 15 / 4, 15 / 16, 15 / 64; interleaving v chunks divides it by v
    assert list(named(ax)["GPipe and 1F1B"].get_ydata()) == pytest.approx([375, 93.75, 23.4375])
    assert list(named(ax)["interleaved, v = 2"].get_ydata()) == pytest.approx([187.5, 46.875, 11.71875])
    assert hlines(ax) == pytest.approx([5.0]) and ax.get_xscale() == "log" and ticks(ax.xaxis) == ["4", "16", "64"]
    assert ax.get_ylabel() == "bubble (% of the ideal step)" and ax.get_xlabel() == r"micro-batches per step, $n_\mathrm{mb}$"


def test_stage_memory_chart_one_line_per_setting_in_gb_and_the_capacity():
    fig = plot.stage_memory_chart([2, 4, 8], {"recompute none": [300e9, 160e9, 90e9], "recompute full": [200e9, 100e9,
                                                                                                          50e9]},
                                  capacity=79e9, capacity_label="H100 usable HBM", title="Llama 3.1 405B")
    ax = fig.axes[0]
    assert ax.get_title() == "Llama 3.1 405B"
    assert legend(fig) == ["recompute none", "recompute full"]
    assert list(named(ax)["recompute full"].get_ydata()) == pytest.approx([200, 100, 50])
    assert hlines(ax) == pytest.approx([79.0]) and texts(ax) == ["H100 usable HBM"]
    assert ax.get_xscale() == ax.get_yscale() == "log" and ax.get_ylabel() == "memory per GPU (GB)"
    assert ax.get_xlabel() == "pipeline stages p"


def test_plan_frontier_chart_draws_every_layout_the_frontier_and_the_choice():
    from roofline.parallel import planner

    p = planner.plan("llama-3-8b", "h100", nodes=1, seq=2048, global_batch=8)
    fits = p.grid["fits"]
    front = [(x.time, x.memory) for x in p.frontier()]
    fig = plot.plan_frontier_chart(p.grid["time"][fits], p.grid["memory"][fits], front, (p.best.time, p.best.memory),
                                   capacity=rl.get_hardware("h100-sxm").usable_capacity, title="every layout that fits")
    ax = fig.axes[0]
    assert ax.get_title() == "every layout that fits"
    assert legend(fig) == ["a layout that fits", "frontier", "chosen (fastest)", "usable HBM"]
    assert len(ax.collections[0].get_offsets()) == int(fits.sum())
    assert list(named(ax)["frontier"].get_xdata()) == [t for t, _ in front]
    chosen = named(ax)["chosen (fastest)"]
    assert chosen.get_xdata()[0] == min(p.grid["time"][fits]) and chosen.get_ydata()[0] == pytest.approx(p.best.memory / 1e9)
    assert hlines(ax) == pytest.approx([rl.get_hardware("h100-sxm").usable_capacity / 1e9])
    assert ax.get_xlabel() == "predicted step time (s)" and ax.get_ylabel() == "memory per GPU (GB)"


# --- chapter 10 --------------------------------------------------------------------------------------------

def test_experts_touched_chart_shares_in_percent_of_all_experts():
    from roofline.parallel import moe

    t = np.array([1, 4, 16, 64])
    e = moe.expected_experts(8, 2, t)
    lo, hi = moe.expert_bounds(8, 2, t)
    fig = plot.experts_touched_chart(t, {"Mixtral 8x7B": (e, lo, hi, 8)}, simulated={"Mixtral 8x7B": ([1, 4], [2, 5])},
                                     title="Experts read per MoE layer")
    ax = fig.axes[0]
    assert ax.get_title() == "Experts read per MoE layer"
    assert legend(fig) == ["Mixtral 8x7B: between the bounds", "Mixtral 8x7B: expected, uniform routing",
                           "Mixtral 8x7B: random routing, mean"]
    expected = named(ax)["Mixtral 8x7B: expected, uniform routing"].get_ydata()
    # one token reads its top-2 of 8 experts: 25%; uniform routing, t tokens: 100 (1 - (1 - 2/8)^t) % in expectation
    assert expected[0] == pytest.approx(25.0) and list(expected) == pytest.approx(100 * (1 - (6 / 8) ** t))
    assert list(named(ax)["Mixtral 8x7B: random routing, mean"].get_ydata()) == pytest.approx([25, 62.5])
    assert ax.get_xscale() == "log" and ax.get_ylim() == (0, 102)
    assert ax.get_ylabel() == "experts read per layer (% of all)" and ax.get_xlabel() == "tokens in the step (decode batch)"


def test_moe_decode_chart_lines_and_a_band_in_ms():
    b = np.array([1, 8, 64])
    curves = {"Mixtral, uniform": b * 1e-3, "Mixtral, between the bounds": (b * 0.5e-3, b * 2e-3), "dense": b * 2e-3}
    fig = plot.moe_decode_chart(b, curves, title="Decode on an H200")
    ax = fig.axes[0]
    assert legend(fig) == list(curves)
    assert len(named(ax)) == 2 and len(ax.collections) == 1  # two lines, one band
    assert list(named(ax)["dense"].get_ydata()) == pytest.approx([2, 16, 128])
    assert ax.get_xscale() == ax.get_yscale() == "log" and ax.get_ylabel() == "decode step time (ms)"
    assert ax.get_xlabel() == "decode batch (sequences)" and ax.get_title() == "Decode on an H200"


def test_all_to_all_chart_compute_against_each_tier_in_microseconds():
    t = np.array([1, 16, 256])
    fig = plot.all_to_all_chart(t, t * 1e-6, {"over NVLink": t * 2e-7, "over InfiniBand": t * 3e-6}, title="DeepSeek-V3")
    ax = fig.axes[0]
    assert ax.get_title() == "DeepSeek-V3"
    assert legend(fig) == ["expert work of the layer, one GPU", "over NVLink", "over InfiniBand"]
    assert list(named(ax)["over InfiniBand"].get_ydata()) == pytest.approx([3, 48, 768])
    assert ax.get_xscale() == ax.get_yscale() == "log" and ax.get_ylabel() == "time per MoE layer (µs)"
    assert ax.get_xlabel() == "tokens per GPU in the step"


# --- chapter 11 --------------------------------------------------------------------------------------------

def test_attention_share_chart_fractions_in_percent_time_dashed():
    seqs = [8192, 131072, 2**20]
    curves = {"Llama 3 8B: FLOPs": [0.1, 0.5, 0.9], "Llama 3 8B: time": [0.15, 0.6, 0.95]}
    fig = plot.attention_share_chart(seqs, curves, title="Attention's share of a prefill")
    ax = fig.axes[0]
    assert ax.get_title() == "Attention's share of a prefill"
    assert legend(fig) == list(curves)
    assert list(named(ax)["Llama 3 8B: FLOPs"].get_ydata()) == pytest.approx([10, 50, 90])
    assert named(ax)["Llama 3 8B: time"].get_linestyle() == "--" and named(ax)["Llama 3 8B: FLOPs"].get_linestyle() == "-"
    assert ticks(ax.xaxis) == ["8k", "128k", "1M"] and ax.get_ylim() == (0, 100) and ax.get_xscale() == "log"
    assert ax.get_ylabel() == "attention's share (%)" and ax.get_xlabel() == "sequence length (tokens)"


def test_ring_hiding_chart_marks_where_each_tier_hides():
    blocks = np.array([256, 1024, 4096])
    compute = 4 * 8192 * blocks.astype(float) ** 2 / 2 / H100_BF16
    fig = plot.ring_hiding_chart(blocks, compute, {"NVLink": blocks * 1e-8, "InfiniBand": blocks * 1e-7},
                                 {"NVLink": 300, "InfiniBand": 3000}, title="ring step")
    ax = fig.axes[0]
    assert ax.get_title() == "ring step"
    assert legend(fig) == ["attention on the block", "send the block: NVLink", "send the block: InfiniBand"]
    assert list(named(ax)["attention on the block"].get_ydata()) == pytest.approx(compute * 1e3)
    assert vlines(ax) == [300.0, 3000.0] and texts(ax) == ["hides past\n300 tokens", "hides past\n3,000 tokens"]
    assert ax.get_xscale() == ax.get_yscale() == "log" and ticks(ax.xaxis) == ["256", "1k", "4k"]
    assert ax.get_ylabel() == "time per ring step, one layer (ms)"


# --- chapter 12 --------------------------------------------------------------------------------------------

def test_ttft_tpot_chart_decode_left_prefill_right_in_ms():
    tpot = {"H100, 8,192 tokens": ([1, 8, 64], [6e-3, 7e-3, 12e-3]), "H200, 8,192 tokens": ([1, 8, 128],
                                                                                          [5e-3, 6e-3, 14e-3])}
    prompts = np.array([128, 1024, 8192])
    ttft = {"H100": (prompts, prompts * 1e-5)}
    fig = plot.ttft_tpot_chart(tpot, ttft, title="the two clocks of a server")
    left, right = fig.axes
    assert legend(fig) == list(tpot) and fig.get_suptitle() == "the two clocks of a server"
    assert list(named(left)["H100, 8,192 tokens"].get_ydata()) == pytest.approx([6, 7, 12])
    assert list(named(right)["H100"].get_ydata()) == pytest.approx(prompts * 1e-2)
    # the legend is the left panel's: the prefill line of a GPU takes the colour of that GPU's decode line
    assert named(right)["H100"].get_color() == named(left)["H100, 8,192 tokens"].get_color()
    assert "wall: 64" in texts(left) and "wall: 128" in texts(left)
    assert left.get_ylabel() == "time per output token (ms)" and right.get_ylabel() == "time to first token (ms, log scale)"
    assert left.get_xscale() == right.get_xscale() == right.get_yscale() == "log" and left.get_yscale() == "linear"


def test_serving_frontier_chart_latency_against_throughput_and_the_roof():
    curves = {"2,048 tokens": ([200, 1500, 9000], [5e-3, 5.3e-3, 7e-3], [1, 8, 64])}
    fig = plot.serving_frontier_chart(curves, roof_tokens_per_s=60000, roof_label="compute roof", title="latency")
    ax = fig.axes[0]
    assert ax.get_title() == "latency"
    assert legend(fig) == ["2,048 tokens", "compute roof"] and vlines(ax) == [60000.0]
    assert list(named(ax)["2,048 tokens"].get_ydata()) == pytest.approx([5, 5.3, 7]) and texts(ax) == ["64"]
    assert ax.get_xscale() == ax.get_yscale() == "log"
    assert ax.get_xlabel() == "throughput (output tokens per second, log scale)"
    assert ax.get_ylabel() == "time per output token (ms, log scale)"


def test_batching_timeline_chart_one_step_line_per_policy_up_to_until():
    start = np.array([0.0, 1.0, 2.0, 3.0])
    series = {"static": (start, np.array([1.0, 1.0, 1.0, 1.0]), np.array([4, 4, 2, 1])),
              "continuous": (start, np.array([1.0, 1.0, 1.0, 1.0]), np.array([4, 4, 4, 4]))}
    fig = plot.batching_timeline_chart(series, capacity=4, until=2.5, title="a burst")
    ax = fig.axes[0]
    assert ax.get_title() == "a burst"
    assert legend(fig) == ["static", "continuous", "slots (4)"] and hlines(ax) == [4.0]
    static = named(ax)["static"]
    assert list(static.get_xdata()) == [0, 1, 2, 3] and list(static.get_ydata()) == [4, 4, 2, 2]  # steps before 2.5 s
    assert ax.get_xlim() == (0, 2.5) and ax.get_ylim() == pytest.approx((0, 4.4))
    assert ax.get_xlabel() == "time (s)" and ax.get_ylabel() == "sequences making a token"


def test_step_time_chart_durations_in_ms_within_the_window():
    start = np.array([9.0, 10.0, 11.0, 12.0, 13.5])
    dt = np.array([0.01, 0.02, 0.2, 0.02, 0.01])
    fig = plot.step_time_chart({"continuous": (start, dt)}, window=(10.0, 13.0), title="steady")
    ax = fig.axes[0]
    assert ax.get_title() == "steady"
    assert legend(fig) == ["continuous"]
    line = named(ax)["continuous"]
    assert list(line.get_xdata()) == [10, 11, 12] and list(line.get_ydata()) == pytest.approx([20, 200, 20])
    assert ax.get_yscale() == "log" and ax.get_ylabel() == "step duration (ms, log scale)" and ax.get_xlabel() == "time (s)"


def test_speculation_chart_one_panel_per_batch_one_line_per_draft_length():
    alphas = np.array([0.0, 0.5, 0.9])
    panels = {"batch 1": {"γ = 2": [0.8, 1.4, 2.2], "γ = 4": [0.7, 1.5, 3.0]}, "batch 64": {"γ = 2": [0.5, 0.9, 1.3],
                                                                                         "γ = 4": [0.4, 0.8, 1.5]}}
    fig = plot.speculation_chart(alphas, panels, title="Speculative decoding")
    axes = fig.axes
    assert [a.get_title() for a in axes] == list(panels) and fig.get_suptitle() == "Speculative decoding"
    assert legend(fig) == ["γ = 2", "γ = 4"]
    assert [len(named(a)) for a in axes] == [2, 2] and all(hlines(a) == [1.0] for a in axes)
    assert list(named(axes[1])["γ = 4"].get_ydata()) == [0.4, 0.8, 1.5]
    assert axes[0].get_ylabel() == "speed-up over plain decoding" and all(a.get_xlabel() == "acceptance rate α" for a in axes)



def test_ridge_chart_legend_names_the_format_it_draws():
    fig = plot.ridge_chart(["h100-sxm", "h200-sxm"], dtype="fp8", fallback="bf16")
    growth = fig.axes[0]
    assert named(growth)  # the two lines are there
    assert "fp8" in legend(fig)[0] and "16-bit" not in legend(fig)[0]
    assert "16-bit" in legend(plot.ridge_chart(["h100-sxm", "h200-sxm"]))[0]  # bf16, the chapter's figure


def test_quality_points_put_each_modelled_published_result_at_its_speedup_and_loss():
    from roofline.workloads import quantization as q

    groups = {r.source: r.source for r in q.PUBLISHED}
    pts = plot.quality_points("llama-3-8b", "h100-sxm", 1, 2048, groups=groups)
    modelled = [r for r in q.PUBLISHED if q.formats_of(r) is not None]
    assert len(pts) == len(modelled) > 0
    for p, r in zip(pts, modelled):
        assert p["y"] == pytest.approx(100 * q.relative_change(r))
        assert p["x"] == pytest.approx(q.decode_speedup("llama-3-8b", "h100-sxm", 1, 2048, **q.formats_of(r)))
        assert (p["label"] != "") == (q.relative_change(r) > 0.1)
    offsets = [p["offset"][1] for p in pts if p["label"]]
    assert offsets[:2] == [-10, 4]  # named points take turns below and above
    fig = plot.quality_chart(pts)
    assert fig.axes[0].get_ylabel() == "quality lost (%)"
    with pytest.raises(ValueError, match="groups names no group for source"):
        plot.quality_points("llama-3-8b", "h100-sxm", groups={})
