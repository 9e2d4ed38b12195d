"""The frame mechanism behind every explorer: sliders that work with and without a kernel.

The mechanism: render one frame (a PNG and a few numbers) per combination of slider positions ahead of
time and show them all at once, stacked in one grid cell, so the box is as tall as the tallest frame
and never changes size. Which frame is visible is decided in the browser, by CSS: each control
is tied by ``jslink`` from its ``index`` to a ``Stack`` of empty marker boxes (class ``rl-m{control}-{position}``),
and one rule per (control, position) hides the frames that do not match the marked position. The
links and the rules live in the browser, so the sliders work in a live notebook and on the static
HTML page alike (where myst-nb has embedded the widget state), and a slider step only flips
``visibility``: every frame's image is decoded once, up front, so no step shows a blank frame.
(The previous design put the frames themselves in nested ``Stack`` widgets, which re-create the child's
view, and its image, on every step: the box collapsed and blanked for a frame.)

Frames travel inside the page, so they are stored as differences: frames that share most of their
pixels (the same chart with the point moved) share one base picture, and each carries only a
transparent overlay of the pixels where it differs, drawn over the base in the same grid cell.
"""

from __future__ import annotations

import io
import itertools
from typing import Callable, Sequence

import ipywidgets as W
import numpy as np
from PIL import Image

__all__ = ["FrameExplorer", "frame_explorer", "png_bytes", "Blitter", "explorer_css", "EXPLORER_CLASS"]


class FrameExplorer(W.VBox):
    """A VBox of controls over stacked frames, with a short, stable ``repr``.

    ``controls`` are the sliders; ``frames`` maps a tuple of option indices (one per control, in the
    controls' order) to that frame's ``VBox([HTML, Image])``; ``markers`` holds one ``Stack`` of
    marker boxes per control, and ``links`` the browser-side links from controls to markers. The
    default widget repr would spell out every frame's PNG bytes; this one names what it shows, so
    that nbval compares something a reader would recognise.
    """

    def __init__(self, summary: str, controls=(), frames=None, markers=(), links=(), **kwargs):
        super().__init__(**kwargs)
        self._summary = summary
        self.controls, self.markers, self.links = tuple(controls), tuple(markers), tuple(links)
        self.frames = dict(frames or {})

    def __repr__(self) -> str:
        return f"FrameExplorer({self._summary})"

    def text(self, index: tuple[int, ...]) -> str:
        """The HTML beside the frame at ``index`` (one option index per control)."""
        return self.frames[index].children[0].value

    def png(self, index: tuple[int, ...]) -> bytes:
        """The frame at ``index`` as one PNG: its base picture with its overlay drawn on top."""
        layers = [Image.open(io.BytesIO(img.value)).convert("RGBA") for img in self.frames[index].children[1].children]
        picture = layers[0]
        for layer in layers[1:]:
            picture = Image.alpha_composite(picture, layer)
        buf = io.BytesIO()
        picture.convert("RGB").save(buf, format="PNG")
        return buf.getvalue()


EXPLORER_CLASS = "roofline-explorer"


def _layers(pngs: Sequence[bytes], worth: float = 0.3) -> list[tuple[int, bytes | None]]:
    """For each frame, (index of its base among the frames, overlay PNG or None if it is a base).

    A frame's overlay holds exactly its pixels that differ from the nearest earlier base (of its
    size), fully opaque, on transparency. A frame becomes a base itself when there is none, or when
    that overlay would weigh more than ``worth`` times the frame's own PNG.
    """
    bases: list[int] = []
    pixels = [np.asarray(Image.open(io.BytesIO(png)).convert("RGBA")) for png in pngs]
    layers = []
    for k, px in enumerate(pixels):
        best, differs = None, None
        for b in bases:
            if pixels[b].shape == px.shape:
                d = (pixels[b] != px).any(axis=-1)
                if differs is None or d.sum() < differs.sum():
                    best, differs = b, d
        if best is not None:
            overlay = np.zeros_like(px)
            overlay[differs] = px[differs]
            buf = io.BytesIO()
            Image.fromarray(overlay, "RGBA").save(buf, format="PNG", optimize=True)
            if len(buf.getvalue()) <= worth * len(pngs[k]):
                layers.append((best, buf.getvalue()))
                continue
        bases.append(k)
        layers.append((k, None))
    return layers


def explorer_css(option_counts: Sequence[int]) -> str:
    """The rules that show one frame: for each control and position, hide the frames of other
    positions while that position's marker is present. Scoped to the explorer's own box."""
    rules = [f".{EXPLORER_CLASS} .rl-picture > * {{grid-area: 1 / 1}}"]  # a base and its overlay, superposed
    for level, count in enumerate(option_counts):
        for i in range(count):
            rules.append(f".{EXPLORER_CLASS}:has(.rl-m{level}-{i}) .rl-frame:not(.rl-c{level}-{i}) "
                         "{visibility: hidden}")
    return "\n".join(rules)


def png_bytes(fig, dpi: int = 80) -> bytes:
    """The figure as PNG bytes (no timestamp, so the same figure gives the same bytes)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, metadata={"Software": None})
    return buf.getvalue()


class Blitter:
    """Render many frames of one figure fast: draw the static parts once, then only the movers.

    ``Blitter(fig, [point]).png()`` after each change of ``point``. About twenty times faster than
    a savefig per frame, which matters when a slider has dozens of positions.

    Frames are PNGs with a palette of ``colors`` colours (no dithering): a chart of a few flat colours
    and anti-aliased text looks the same, in a third of the bytes (every frame travels inside the HTML
    page). With 64 colours the vermillion point turned brown; 128 keep it. The palette is chosen for
    the first frame and kept for the rest, so a pixel that does not change keeps its exact colour and
    frame_explorer can store the later frames as small differences from the first.
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
        self._palette = None

    def png(self) -> bytes:
        canvas = self.fig.canvas
        canvas.restore_region(self.background)
        for a in self.movers:
            a.axes.draw_artist(a)
        width, height = canvas.get_width_height(physical=True)
        image = Image.frombuffer("RGBA", (width, height), canvas.buffer_rgba(), "raw", "RGBA", 0, 1).convert("RGB")
        if self._palette is None:  # chosen once; every frame, the first too, maps to its nearest colours
            self._palette = image.quantize(colors=self.colors, method=Image.Quantize.MEDIANCUT,
                                           dither=Image.Dither.NONE)
        image = image.quantize(palette=self._palette, dither=Image.Dither.NONE)
        buf = io.BytesIO()
        image.save(buf, format="PNG", optimize=True)
        return buf.getvalue()


def frame_explorer(controls: Sequence[tuple[str, Sequence]], frame: Callable[..., tuple[bytes, str]],
                   summary: str, *, start: Sequence[int] | None = None) -> FrameExplorer:
    """Controls over pre-rendered frames.

    ``controls`` holds ``(description, options)`` pairs, one per control; ``options`` are
    (label, value) pairs or plain values. ``frame(*values)`` returns ``(png, html)`` for one
    combination of values, in the order of the controls. Every combination is rendered, so keep the
    product of the option counts modest (it is the number of frames the page carries).
    """
    if not controls:
        raise ValueError("controls must hold at least one (description, options) pair")
    sliders = []
    for (description, options) in controls:
        options = [o if isinstance(o, tuple) else (str(o), o) for o in options]
        if not options:
            raise ValueError(f"control {description!r} has no options")
        # as wide as the page allows, up to 420 px: the readout stays on screen on a phone
        sliders.append(W.SelectionSlider(options=options, description=description, continuous_update=True,
                                         style={"description_width": "initial"},
                                         layout=W.Layout(width="100%", max_width="420px")))
    start = list(start or [0] * len(sliders))
    if len(start) != len(sliders) or not all(0 <= i < len(s.options) for i, s in zip(start, sliders)):
        raise ValueError(f"start must hold one option index per control, got {start}")

    indices = list(itertools.product(*(range(len(s.options)) for s in sliders)))
    drawn = [frame(*(s.options[i][1] for s, i in zip(sliders, index))) for index in indices]
    layers = _layers([png for png, _ in drawn])
    bases = {b: W.Image(value=drawn[b][0], format="png") for b, overlay in layers if overlay is None}
    cell = W.Layout(grid_area="1 / 1")  # stacked in one grid cell: the box is as big as the biggest
    frames = {}
    for index, (_, html), (b, overlay) in zip(indices, drawn, layers):
        pictures = [bases[b]] + ([W.Image(value=overlay, format="png", layout=cell)] if overlay else [])
        classes = ["rl-frame", *(f"rl-c{level}-{i}" for level, i in enumerate(index))]
        frames[index] = W.VBox([W.HTML(html), W.Box(pictures, _dom_classes=["rl-picture"], layout=W.Layout(display="grid"))],
                               _dom_classes=classes, layout=cell)
    markers, links = [], []
    for level, (slider, i) in enumerate(zip(sliders, start)):
        marks = [W.Box(_dom_classes=[f"rl-m{level}-{k}"]) for k in range(len(slider.options))]
        markers.append(W.Stack(marks, selected_index=i))
        links.append(W.jslink((slider, "index"), (markers[-1], "selected_index")))
        slider.index = i
    hidden = W.Layout(display="none")
    style = W.HTML(f"<style>{explorer_css([len(s.options) for s in sliders])}</style>", layout=hidden)
    body = W.Box(list(frames.values()), _dom_classes=["rl-frames"], layout=W.Layout(display="grid"))
    return FrameExplorer(summary, sliders, frames, markers, links,
                         children=[*sliders, body, W.Box(markers, layout=hidden), style],
                         _dom_classes=[EXPLORER_CLASS])
