"""Sliders that work with and without a kernel (chapter 1's decode explorer, and every later one).

The mechanism: render one frame (a PNG and a few numbers) per slider position ahead of time, put the
frames in an ipywidgets ``Stack``, and ``jslink`` each control's ``index`` to the stack's
``selected_index``. The link lives in the browser, so moving a slider switches frames in a live
notebook and on the static HTML page alike, where myst-nb has embedded the widget state. Two
controls nest two stacks: the outer one follows the second control, each inner one the first.
"""

from __future__ import annotations

import io
from typing import Callable, Sequence

import ipywidgets as W
import matplotlib.pyplot as plt
import numpy as np
from PIL import Image

from .hardware import Hardware
from .inference import decode_step
from .model import Model, load_model
from .performance import as_roof, predict
from .plot import PALETTE, roofline_chart
from .units import fmt

__all__ = ["FrameExplorer", "frame_explorer", "decode_explorer", "png_bytes"]


class FrameExplorer(W.VBox):
    """A VBox of controls over a stack of frames, with a short, stable ``repr``.

    The default widget repr would spell out every frame's PNG bytes; this one names what it shows,
    so that nbval compares something a reader would recognise.
    """

    def __init__(self, summary: str, links=(), **kwargs):
        super().__init__(**kwargs)
        self._summary = summary
        self.links = tuple(links)  # the browser-side links from controls to stacks

    def __repr__(self) -> str:
        return f"FrameExplorer({self._summary})"


def png_bytes(fig, dpi: int = 80) -> bytes:
    """The figure as PNG bytes (no timestamp, so the same figure gives the same bytes)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, metadata={"Software": None})
    return buf.getvalue()


class Blitter:
    """Render many frames of one figure fast: draw the static parts once, then only the movers.

    ``Blitter(fig, [point]).png()`` after each change of ``point``. About twenty times faster than
    a savefig per frame, which matters when a slider has dozens of positions.

    Frames are PNGs with an adaptive palette of ``colors`` colours (no dithering): a chart of a few
    flat colours and anti-aliased text looks the same, in a third of the bytes (every frame travels
    inside the HTML page). With 64 colours the vermillion point turned brown; 128 keep it.
    """

    def __init__(self, fig, movers, dpi: int = 80, colors: int = 128):
        if not 2 <= colors <= 256:
            raise ValueError(f"colors must be between 2 and 256 (a PNG palette), got {colors}")
        self.fig, self.movers, self.colors = fig, list(movers), colors
        fig.set_dpi(dpi)
        for a in self.movers:
            a.set_animated(True)
        fig.canvas.draw()
        fig.set_layout_engine("none")
        self.background = fig.canvas.copy_from_bbox(fig.bbox)

    def png(self) -> bytes:
        canvas = self.fig.canvas
        canvas.restore_region(self.background)
        for a in self.movers:
            a.axes.draw_artist(a)
        width, height = canvas.get_width_height(physical=True)
        image = Image.frombuffer("RGBA", (width, height), canvas.buffer_rgba(), "raw", "RGBA", 0, 1).convert("RGB")
        image = image.quantize(colors=self.colors, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
        buf = io.BytesIO()
        image.save(buf, format="PNG", optimize=True)
        return buf.getvalue()


def frame_explorer(controls: Sequence[tuple[str, Sequence]], frame: Callable[..., tuple[bytes, str]],
                   summary: str, *, start: Sequence[int] | None = None) -> FrameExplorer:
    """Controls over pre-rendered frames.

    ``controls`` holds one or two ``(description, options)`` pairs; ``options`` are (label, value)
    pairs or plain values. ``frame(*values)`` returns ``(png, html)`` for one combination.
    """
    if not 1 <= len(controls) <= 2:
        raise ValueError(f"controls must hold one or two (description, options) pairs, got {len(controls)}")
    sliders = []
    for (description, options) in controls:
        options = [o if isinstance(o, tuple) else (str(o), o) for o in options]
        if not options:
            raise ValueError(f"control {description!r} has no options")
        sliders.append(W.SelectionSlider(options=options, description=description, continuous_update=True,
                                         style={"description_width": "initial"}, layout=W.Layout(width="420px")))
    start = list(start or [0] * len(sliders))
    first, second = sliders[0], sliders[1] if len(sliders) == 2 else None
    links = []

    def panel(*values):
        png, html = frame(*values)
        return W.VBox([W.HTML(html), W.Image(value=png, format="png")])

    def inner(other=()):
        stack = W.Stack([panel(v, *other) for _, v in first.options], selected_index=start[0])
        links.append(W.jslink((first, "index"), (stack, "selected_index")))
        return stack

    if second is None:
        body = inner()
    else:
        body = W.Stack([inner((v,)) for _, v in second.options], selected_index=start[1])
        links.append(W.jslink((second, "index"), (body, "selected_index")))
    for s, i in zip(sliders, start):
        s.index = i
    return FrameExplorer(summary, links, children=[*sliders, body])


def decode_explorer(model: Model | str = "llama-3-8b", hardware: Hardware | str = "h100-sxm", *,
                    batches: Sequence[int] = tuple(2**i for i in range(11)),
                    contexts: Sequence[int] = (0, 2048, 8192, 32768), accounting: str = "text",
                    dtype: str = "bf16") -> FrameExplorer:
    """Chapter 1's batch slider: the decode step of ``model`` as a point under ``hardware``'s roof.

    Every (batch, context) pair is computed in one vectorized call; each frame shows the point,
    the path it travels as the batch grows, and the numbers beside it.
    """
    m = load_model(model)
    roof = as_roof(hardware, dtype)
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
            fig = roofline_chart(roof, intensity=(0.5, 3e3), title=f"{m.name} decode on {roof.label}")
            ax = fig.axes[0]
            ax.plot(intensity[i], flops_s[i] / 1e12, ".-", color="#999999", lw=1, ms=5, zorder=3,
                    label=f"batch {batches[0]} to {batches[-1]}")
            (point,) = ax.plot([], [], "D", ms=10, color=PALETTE["vermillion"], mec="black", zorder=6)
            ax.legend(loc="lower right", fontsize=8, frameon=True, facecolor="white", edgecolor="none")
            figures[i] = (fig, point, Blitter(fig, [point]))
        fig, point, blitter = figures[i]
        point.set_data([intensity[i, j]], [flops_s[i, j] / 1e12])
        html = (
            f"<b>batch {batch}, context {context:,} tokens</b>: intensity {intensity[i, j]:,.1f} FLOP/B, "
            f"{bound[i, j]}-bound, {fmt(flops_s[i, j], 'FLOP/s')} attainable, "
            f"{fmt(pred.time[i, j], 's')} per step, <b>{tokens_s[i, j]:,.0f} tokens/s</b>, "
            f"{100 * pred.utilization[i, j]:.2g}% of peak"
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
