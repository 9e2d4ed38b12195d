"""Chapter 10's charts, tables and explorer: they draw and read out what roofline.parallel.moe computes."""

import numpy as np

import roofline as rl
from roofline.parallel import moe
from roofline.present import plot, tables, widgets


def test_explorer_readout_follows_the_package():
    e = widgets.moe_explorer("h200", batches=(8, 64), eps=(1, 8))
    assert len(e.frames) == 2 * 2 * 2 * 2 and "16 frames" in repr(e)
    # an fp8 model multiplies on the fp8 tensor cores (chapter 10, Fig. 35)
    s = moe.expert_parallel_step("deepseek-v3", "h200", 64, 4096, ep=8, tier="network", weights_dtype="fp8",
                                 kv_dtype="fp8", math_dtype="fp8")
    text = e.text((1, 1, 1, 1))
    assert "DeepSeek-V3, fp8, batch 64, 8 GPUs, InfiniBand" in text
    assert rl.fmt(s.time, "s") in text and rl.fmt(s.overlapped_time, "s") in text
    assert "no all-to-all" in e.text((0, 0, 0, 0))
    assert e.png((1, 1, 1, 1)) != e.png((1, 1, 1, 0))  # the all-to-all bar moves with the tier
    assert e.png((1, 1, 1, 1)) != e.png((1, 1, 0, 1))  # and is there with 8 GPUs, not with one
    # in its own colour, although the first frame (one GPU) has no all-to-all bar to choose the palette from
    import io
    from PIL import Image
    from roofline.present.plot import PALETTE

    def has(png, color):
        rgb = tuple(int(color.lstrip("#")[i:i + 2], 16) for i in (0, 2, 4))
        pixels = Image.open(io.BytesIO(png)).convert("RGB").get_flattened_data()
        return any(sum(abs(a - b) for a, b in zip(px, rgb)) < 30 for px in pixels)

    assert has(e.png((1, 1, 1, 1)), PALETTE["vermillion"]) and not has(e.png((1, 1, 0, 1)), PALETTE["vermillion"])


def test_tables_hold_the_packages_numbers():
    t = tables.moe_comparison_table({"MoE": "mixtral-8x7b", "dense": moe.dense_equivalent("mixtral-8x7b")}, "h200",
                                    batch=16, context=0, prompt=512)
    one = rl.predict(rl.decode_step("mixtral-8x7b", 16, 0, routing="uniform"), "h200").time
    assert t.rows[0][6] == rl.fmt(one, "s", 3) and t.rows[0][5] == t.rows[1][5]  # batch 1: the same step
    m = tables.moe_memory_table([("V3", "deepseek-v3", "fp8", 8)], "h200")
    assert m.rows[0][3] == rl.fmt(rl.parallel.tensor_parallel.weights_per_gpu("deepseek-v3", ep=8, weights_dtype="fp8"), "B", 3)


def test_charts_label_their_axes():
    t = np.array([1, 2, 4, 8])
    e = moe.expected_experts(8, 2, t)
    lo, hi = moe.expert_bounds(8, 2, t)
    for fig in (plot.experts_touched_chart(t, {"m": (e, lo, hi, 8)}, simulated={"m": ([1], [2])}),
                plot.moe_decode_chart(t, {"a": t * 1e-3, "band": (t * 1e-3, t * 2e-3)}),
                plot.all_to_all_chart(t, t * 1e-6, {"NVLink": t * 2e-6})):
        ax = fig.axes[0]
        assert ax.get_xlabel() and ax.get_ylabel() and ax.get_legend_handles_labels()[1]
