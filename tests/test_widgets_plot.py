"""The decode explorer and the figure helpers."""

import numpy as np
import pytest

import roofline as rl
from roofline import plot, widgets


@pytest.fixture(scope="module")
def explorer():
    return widgets.decode_explorer("llama-3-8b", "h100-sxm", batches=(1, 16, 256), contexts=(0, 8192))


def test_explorer_has_two_controls_over_nested_frames(explorer):
    batch, context, stack = explorer.children
    assert [o[1] for o in batch.options] == [1, 16, 256] and [o[1] for o in context.options] == [0, 8192]
    assert len(stack.children) == 2 and all(len(s.children) == 3 for s in stack.children)
    assert repr(explorer).startswith("FrameExplorer(llama-3-8b decode on H100 SXM")


def test_frames_differ_and_readouts_follow_the_package(explorer):
    _, _, stack = explorer.children
    frames = [panel for inner in stack.children for panel in inner.children]
    images = [p.children[1].value for p in frames]
    assert len(set(images)) == len(images), "two slider positions show the same picture"
    assert all(img[:8] == b"\x89PNG\r\n\x1a\n" for img in images)
    pred = rl.predict(rl.decode_step("llama-3-8b", 16, 8192), "h100-sxm")
    text = stack.children[1].children[1].children[0].value
    assert f"{16 / pred.time:,.0f} tokens/s" in text and "batch 16, context 8,192" in text


def test_sliders_are_linked_in_the_browser(explorer):
    batch, context, stack = explorer.children
    targets = {(l.source[0].model_id, l.source[1], l.target[0].model_id, l.target[1]) for l in explorer.links}
    assert (context.model_id, "index", stack.model_id, "selected_index") in targets
    for inner in stack.children:
        assert (batch.model_id, "index", inner.model_id, "selected_index") in targets


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
    import matplotlib.pyplot as plt

    def frame(value):
        fig, ax = plt.subplots(figsize=(2, 1))
        ax.plot([0, 1], [0, value])
        png = widgets.png_bytes(fig)
        plt.close(fig)
        return png, f"value {value}"

    e = widgets.frame_explorer([("value", [1, 2, 3])], frame, "three lines")
    slider, stack = e.children
    assert len(stack.children) == 3 and len(e.links) == 1
    assert stack.children[2].children[0].value == "value 3"
    assert repr(e) == "FrameExplorer(three lines)"


def test_three_controls_nest_three_levels():
    seen = []

    def frame(a, b, c):
        seen.append((a, b, c))
        return b"png", f"{a}-{b}-{c}"

    e = widgets.frame_explorer([("a", [1, 2]), ("b", [3, 4, 5]), ("c", [6, 7])], frame, "grid")
    *controls, body = e.children
    assert len(seen) == 12 and len(set(seen)) == 12 and len(e.links) == 1 + 2 + 6
    # outermost follows c, then b, innermost a: body[c][b][a]
    assert body.children[1].children[2].children[0].children[0].value == "1-5-7"


def test_frames_are_small_palette_pngs_that_keep_the_point_visible(explorer):
    """Frames travel inside the page, so they are palette PNGs; the vermillion point must survive."""
    import io

    from PIL import Image

    _, _, stack = explorer.children
    image = Image.open(io.BytesIO(stack.children[0].children[0].children[1].value))
    assert image.mode == "P" and len(image.getcolors()) <= 128
    target = tuple(int(plot.PALETTE["vermillion"].lstrip("#")[k:k + 2], 16) for k in (0, 2, 4))
    rgb = np.asarray(image.convert("RGB"), dtype=int)
    assert (np.abs(rgb - target).sum(axis=-1) < 30).sum() > 20, "the moving point is gone from the frame"


def test_blitter_rejects_a_palette_png_cannot_hold():
    import matplotlib.pyplot as plt

    fig = plt.figure()
    try:
        with pytest.raises(ValueError, match="between 2 and 256"):
            widgets.Blitter(fig, [], colors=1000)
    finally:
        plt.close(fig)


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
    assert f"{100 * (flops / 989.4e12) / time:.2g}% of peak" in text


def test_memory_readout_is_state_plus_activations_plus_logits():
    from roofline.units import fmt

    m = rl.load_model("llama-3-8b")
    e = widgets.memory_explorer(m, gpus=8, zero_stage=3, micro_batches=(1,), seqs=(4096,), policies=("full",))
    (text,) = _html(e)
    s, state = 4096, 16 * m.params / 8  # ZeRO-3 over 8 GPUs shards all 16 bytes per parameter
    acts = 32 * s * 4096 * 2  # full recomputation keeps each layer's bf16 input
    logits = s * 128_256 * 4
    assert f"{fmt(state + acts + logits, 'B')} per GPU" in text
    assert f"activations {fmt(acts, 'B')}" in text and f"model state {fmt(state, 'B')}" in text
    total = state + acts + logits  # 19.2 GB: fits on both GPUs the explorer marks
    fits = [h.short for h in map(rl.get_hardware, ("h100-sxm", "h200-sxm")) if total <= h.hbm_capacity]
    assert len(fits) == 2 and f"fits on {', '.join(fits)}" in text
