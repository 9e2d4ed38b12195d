"""The decode explorer and the figure helpers."""

import ipywidgets
import numpy as np
import pytest

import roofline as rl
from roofline.workloads import memory
from roofline.present import plot, tables, widgets
from roofline.core.calibration import calibrated_roof
from roofline.core.records import load_layers, load_measurement


@pytest.fixture(scope="module")
def explorer():
    return widgets.decode_explorer("llama-3-8b", "h100-sxm", batches=(1, 16, 256), contexts=(0, 8192))


def test_explorer_has_two_controls_over_one_frame_per_combination(explorer):
    batch, context = explorer.controls
    assert [o[1] for o in batch.options] == [1, 16, 256] and [o[1] for o in context.options] == [0, 8192]
    assert sorted(explorer.frames) == [(i, j) for i in range(3) for j in range(2)]
    assert explorer.children[:2] == (batch, context)
    assert repr(explorer).startswith("FrameExplorer(llama-3-8b decode on H100 SXM")


def test_frames_differ_and_readouts_follow_the_package(explorer):
    images = [explorer.png(k) for k in explorer.frames]
    assert len(set(images)) == len(images), "two slider positions show the same picture"
    assert all(img[:8] == b"\x89PNG\r\n\x1a\n" for img in images)
    pred = rl.predict(rl.decode_step("llama-3-8b", 16, 8192), "h100-sxm")
    text = explorer.text((1, 1))
    assert f"{16 / pred.time:,.0f} tokens/s" in text and "batch 16, context 8,192" in text


def test_sliders_are_linked_in_the_browser_to_markers_that_pick_one_frame(explorer):
    """Each control drives a stack of marker boxes; the explorer's CSS shows the frame whose classes
    match every marker present, and hides all others."""
    import re

    targets = {(l.source[0].model_id, l.source[1], l.target[0].model_id, l.target[1]) for l in explorer.links}
    for control, marker in zip(explorer.controls, explorer.markers):
        assert (control.model_id, "index", marker.model_id, "selected_index") in targets
        assert len(marker.children) == len(control.options)
        assert marker.selected_index == control.index
    style = next(c.value for c in explorer.children if isinstance(c, ipywidgets.HTML))
    hides = re.findall(r"\.rl-m(\d)-(\d)\) \.rl-frame:not\(\.rl-c(\d)-(\d)\) \{visibility: hidden\}", style)
    assert sorted(hides) == sorted((str(l), str(i), str(l), str(i)) for l, n in enumerate((3, 2)) for i in range(n))
    for k, f in explorer.frames.items():
        assert f.layout.grid_area == "1 / 1"  # stacked in one cell: the box is as tall as the tallest frame
    # apply the rules as a browser would, for every slider setting: exactly the frame of that setting shows
    for setting in explorer.frames:
        present = {f"rl-m{level}-{i}" for level, i in enumerate(setting)}
        shown = [k for k, f in explorer.frames.items()
                 if not any(f"rl-m{ml}-{mi}" in present and f"rl-c{cl}-{ci}" not in f._dom_classes
                            for ml, mi, cl, ci in hides)]
        assert shown == [setting]


def test_frame_explorer_rejects_bad_controls():
    with pytest.raises(ValueError, match="at least one"):
        widgets.frame_explorer([], lambda: (b"", ""), "nothing")
    with pytest.raises(ValueError, match="has no options"):
        widgets.frame_explorer([("batch", [])], lambda b: (b"", ""), "nothing")


def test_charts_label_their_axes_with_units(tmp_path):
    fig = plot.roofline_chart(["h100-sxm", "a100-sxm-80gb"])
    ax = fig.axes[0]
    assert "FLOP per byte" in ax.get_xlabel() and "TFLOP/s" in ax.get_ylabel()
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    fig2 = plot.ridge_chart(["v100-sxm2", "h100-sxm"])
    assert "(fp16)" in fig2.axes[0].get_xticklabels()[0].get_text()  # V100 has no bf16
    fig3 = plot.tiers_chart(rl.bandwidth_tiers("h100-sxm"))
    assert "GB/s" in fig3.axes[0].get_xlabel()


def test_saved_figures_are_byte_for_byte_reproducible(tmp_path):
    for run in ("a", "b"):
        plot.save(plot.roofline_chart("h100-sxm"), "roof", tmp_path / run)
    for ext in ("svg", "png"):
        assert (tmp_path / "a" / f"roof.{ext}").read_bytes() == (tmp_path / "b" / f"roof.{ext}").read_bytes()


def test_frame_explorer_with_one_control_and_png_bytes():
    import io

    import matplotlib.pyplot as plt

    drawn = {}

    def frame(value):
        fig, ax = plt.subplots(figsize=(2, 1))
        ax.plot([0, 1], [0, value])
        ax.set_ylim(0, 3)
        png = widgets.png_bytes(fig)
        plt.close(fig)
        drawn[value] = png
        return png, f"value {value}"

    e = widgets.frame_explorer([("value", [1, 2, 3])], frame, "three lines", start=[1])
    (slider,) = e.controls
    assert len(e.frames) == 3 and len(e.links) == 1 and slider.index == 1 and e.markers[0].selected_index == 1
    assert e.text((2,)) == "value 3"
    # each frame, base and overlay put together, is the picture drawn, to the pixel
    from PIL import Image

    rgb = lambda png: np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))
    for k, value in enumerate([1, 2, 3]):
        assert np.array_equal(rgb(e.png((k,))), rgb(drawn[value])), value
    assert repr(e) == "FrameExplorer(three lines)"


def test_three_controls_pick_among_all_combinations():
    import io

    from PIL import Image

    seen = []

    def frame(a, b, c):
        seen.append((a, b, c))
        buf = io.BytesIO()
        Image.new("RGB", (4, 4), (a, b, c)).save(buf, format="PNG")
        return buf.getvalue(), f"{a}-{b}-{c}"

    e = widgets.frame_explorer([("a", [1, 2]), ("b", [3, 4, 5]), ("c", [6, 7])], frame, "grid")
    assert len(seen) == 12 and len(set(seen)) == 12 and len(e.links) == 3 and len(e.markers) == 3
    assert e.text((0, 2, 1)) == "1-5-7"
    with pytest.raises(ValueError, match="start must hold one option index per control"):
        widgets.frame_explorer([("a", [1, 2])], frame, "bad start", start=[2])


def test_frames_are_small_palette_pngs_that_keep_the_point_visible(explorer):
    """Frames travel inside the page, so they are palette PNGs; the vermillion point must survive."""
    import io

    from PIL import Image

    base = explorer.frames[0, 0].children[1].children[0]
    image = Image.open(io.BytesIO(base.value))
    assert image.mode == "P" and len(image.getcolors()) <= 128
    target = tuple(int(plot.PALETTE["vermillion"].lstrip("#")[k:k + 2], 16) for k in (0, 2, 4))
    # batch 16 at 8,192 tokens of context: a frame that fits, so its point is filled
    rgb = np.asarray(Image.open(io.BytesIO(explorer.png((1, 1)))).convert("RGB"), dtype=int)
    assert (np.abs(rgb - target).sum(axis=-1) < 30).sum() > 20, "the moving point is gone from the frame"


def test_blitter_rejects_a_palette_png_cannot_hold():
    import matplotlib.pyplot as plt

    fig = plt.figure()
    try:
        with pytest.raises(ValueError, match="between 2 and 256"):
            widgets.Blitter(fig, [], colors=1000)
    finally:
        plt.close(fig)


def test_frames_share_a_base_picture_and_carry_small_overlays(explorer):
    """The six frames are one chart with the point moved (and, per context, its path): at most one base
    picture per context, and overlays that weigh a fraction of the frames they complete."""
    pictures = [f.children[1].children for f in explorer.frames.values()]
    bases = {p[0].model_id: len(p[0].value) for p in pictures}
    overlays = [len(p[1].value) for p in pictures if len(p) > 1]
    assert 1 <= len(bases) <= 2 and len(overlays) == 6 - len(bases)
    full = sum(len(explorer.png(k)) for k in explorer.frames)
    assert sum(bases.values()) + sum(overlays) < 0.5 * full
    assert max(overlays) <= 0.3 * min(bases.values())
def _readouts(explorer):
    """Readouts by context (rows) and batch (columns)."""
    batch, context = explorer.controls
    return [[explorer.text((i, j)) for i in range(len(batch.options))] for j in range(len(context.options))]


def test_decode_explorer_shows_the_ridge_crossing_and_what_does_not_fit():
    cross = rl.compute_bound_batch("llama-3-8b", "h100-sxm")
    e = widgets.decode_explorer("llama-3-8b", "h100-sxm", contexts=(0, 32768))
    batch, _ = e.controls
    options = [o[1] for o in batch.options]
    assert cross - 1 in options and cross in options, "the batch slider must step across the ridge"
    text = _readouts(e)
    assert "memory-bound" in text[0][options.index(cross - 1)] and "compute-bound" in text[0][options.index(cross)]
    # batch 1024 at 32,768 tokens of context needs terabytes of KV cache: the readout says so
    big = text[1][options.index(1024)]
    assert "does not fit" in big and "tokens/s" not in big
    fits = memory.kv_cache_capacity_tokens("llama-3-8b", "h100-sxm") // 32768
    assert f"at most {fits:,} sequences fit" in big
    assert all("e+" not in t for row in text for t in row), "a readout printed a number in e-notation"


def test_memory_explorer_readout_adds_up_and_reads_as_english():
    e = widgets.memory_explorer("llama-3-8b", gpus=8, zero_stage=3, micro_batches=(1, 8), seqs=(2048, 32768),
                                policies=("none", "full"))
    texts = [e.text(k) for k in e.frames]
    for t in texts:
        assert "fp32 logits" in t and ("fits on both" in t or "fits on the" in t or "fits on neither" in t)
        assert "fits on none" not in t and "'s HBM" not in t
    fp = memory.training_footprint("llama-3-8b", 32768, 8, gpus=8, zero_stage=3, recompute="full", flash=False)
    big = next(t for t in texts if "micro-batch 8, 32,768 tokens, recompute: full" in t)
    assert rl.fmt(float(fp["logits"]), "B") in big and rl.fmt(float(fp["recompute working set"]), "B") in big


def test_tiers_table_measures_every_tier_against_hbm():
    h100 = rl.get_hardware("h100-sxm")
    tiers = rl.bandwidth_tiers(h100)
    table = tables.tiers_table(tiers)
    col = table.column(f"slower than {tiers[0].name}")
    assert col == tuple(rl.fmt(tiers[0].each_way / t.each_way, "×", 2) for t in tiers)
    assert col[0] == "1.0×" and col[-1] == rl.fmt(h100.hbm_bandwidth / h100.interconnect["network"].each_way, "×", 2)
# --- the readouts beside the sliders, checked against the formulas they print -------------------


def _html(widget):
    """Every HTML readout inside an explorer, whatever the nesting."""
    out = []
    if hasattr(widget, "value") and isinstance(widget.value, str) and widget.__class__.__name__ == "HTML":
        out.append(widget.value)
    for child in getattr(widget, "children", ()):
        out += _html(child)
    return out


def test_decode_readout_prints_the_intensity_and_share_of_peak(explorer):
    m = rl.load_model("llama-3-8b")
    n, b, c = m.params, 16, 8192
    flops = b * 2 * n + b * 4 * c * 4096 * 32  # weights and attention over 8,192 cached tokens
    nbytes = 2 * n + b * c * 131_072  # weights once, every sequence's KV cache
    time = max(flops / 989.4e12, nbytes / 3.35e12)
    text = next(t for t in _html(explorer) if "batch 16, context 8,192" in t)
    assert f"intensity {flops / nbytes:,.1f} FLOP/B" in text
    assert f"{b / time:,.0f} tokens/s" in text
    assert f"{rl.fmt(100 * (flops / 989.4e12) / time, '%', 3)} of peak" in text


def test_memory_readout_is_state_plus_activations_plus_logits():
    from roofline.core.units import fmt

    m = rl.load_model("llama-3-8b")
    e = widgets.memory_explorer(m, gpus=8, zero_stage=3, micro_batches=(1,), seqs=(4096,), policies=("full",))
    (text,) = [e.text(k) for k in e.frames]
    s, state = 4096, 16 * m.params / 8  # ZeRO-3 over 8 GPUs shards all 16 bytes per parameter
    acts = 32 * s * 4096 * 2  # full recomputation keeps each layer's bf16 input
    logits = s * 128_256 * 4
    # and, while the backward pass rebuilds one layer, that layer's activations less its kept input
    working = memory.activation_bytes(m, s, 1, flash=False) - s * 4096 * 2  # the explorer's explicit attention
    assert f"{fmt(state + acts + working + logits, 'B')} per GPU" in text
    assert f"activations {fmt(acts, 'B')}" in text and f"model state {fmt(state, 'B')}" in text
    assert f"fp32 logits {fmt(logits, 'B')}" in text
    total = state + acts + working + logits  # about 20 GB: fits on both GPUs the explorer marks
    assert all(total <= h.usable_capacity for h in map(rl.get_hardware, ("h100-sxm", "h200-sxm")))
    assert "fits on both the H100 SXM and the H200" in text


def test_calibrated_decode_explorer_reads_out_the_calibrated_estimate():
    import roofline as rl

    cal = calibrated_roof(load_measurement("h200-2026-11-29"), load_layers("h200-2026-11-29-layers"))
    ex = widgets.calibrated_decode_explorer("llama-3-8b", "h200-sxm", cal, batches=(1, 16), contexts=(512,))
    assert sorted(ex.frames) == [(0, 0), (1, 0)]
    est = rl.predict(rl.decode_step("llama-3-8b", 16, 512, accounting="refined"), cal, timing="kernel")
    text = ex.text((1, 0))
    assert "batch 16, context 512" in text and rl.fmt(est.time, "s") in text
    assert rl.fmt(16 / est.time, "tokens/s") in text
    with pytest.raises(TypeError, match="calibrated must be a CalibratedRoof"):
        widgets.calibrated_decode_explorer("llama-3-8b", "h200-sxm", "h200-sxm")


def test_tp_explorer_names_models_and_prices_a_group_across_nodes_hierarchically():
    # chapter 8: model titles and formatted numbers on the sliders, t up to 16 (two nodes of eight)
    from roofline.parallel import tensor_parallel as tp

    e = widgets.tp_explorer(("llama-3-8b",), "h100-sxm", degrees=(8, 16), batches=(1,), contexts=(1024, 32768))
    model, degree, batch, context = e.controls
    assert [o[0] for o in model.options] == ["Llama 3 8B"] and [o[0] for o in context.options] == ["1,024", "32,768"]
    text = e.text((0, 1, 0, 0))
    assert text.startswith("<b>Llama 3 8B, t = 16") and "llama-3-8b" not in text
    hier = tp.decode_by_degree("llama-3-8b", "h100-sxm", (16,), batch=1, context=1024)[0]
    flat = tp.decode_by_degree("llama-3-8b", "h100-sxm", (16,), batch=1, context=1024, tier="network")[0]
    assert rl.fmt(hier.time, "s") in text and rl.fmt(flat.time, "s") != rl.fmt(hier.time, "s")
