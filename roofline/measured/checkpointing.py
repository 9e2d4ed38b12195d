"""The measured H200 training runs with and without activation checkpointing, beside the package's
count (chapter 3).

``h200-2026-11-29-layers.json`` trained four Llama 3 8B decoder layers (no embedding, no logits; the
loss a mean of squares of the last output) at several lengths and micro-batches, once keeping every
activation and once with ``torch.utils.checkpoint`` around each layer. Its ``peak_extra_bytes`` is the
peak allocated beyond the weights and their gradients. This module predicts that peak from
:func:`roofline.workloads.memory.layer_activations` and names what the count leaves out, and it turns the timings
into MFU and HFU against the GPU's datasheet peak.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from roofline.core.hardware import Hardware, get_hardware
from roofline.workloads.memory import layer_activations
from roofline.core.model import Model, load_model
from roofline.core.ops import attention_flops
from roofline.core.records import LayersMeasurement, TrainRun, load_layers

__all__ = ["CheckpointRun", "checkpoint_runs", "CheckpointingEffect", "checkpointing_effects"]


@dataclass(frozen=True)
class CheckpointRun:
    """One measured training run beside its prediction (bytes, FLOPs, seconds)."""

    run: TrainRun
    kept: float  # activations every layer keeps through the step (checkpoints only, with checkpointing)
    working: float  # the layer being rebuilt, on top of the checkpoints (0 without checkpointing)
    temporaries: float  # an estimate of what the backward pass adds: see checkpoint_runs
    model_flops: float  # forward and backward: 6 x parameters x tokens + 3 x causal attention forward
    hardware_flops: float  # plus one forward pass of every layer when checkpointed
    peak: float  # the GPU's dense bf16 FLOP/s

    @property
    def predicted(self) -> float:
        """The count: kept activations plus the recompute working set."""
        return self.kept + self.working

    @property
    def measured(self) -> float:
        return self.run.peak_extra_bytes

    @property
    def gap(self) -> float:
        """Measured peak less the count."""
        return self.measured - self.predicted

    @property
    def mfu(self) -> float:
        return self.model_flops / self.run.seconds / self.peak

    @property
    def hfu(self) -> float:
        return self.hardware_flops / self.run.seconds / self.peak

    @property
    def floor_seconds(self) -> float:
        """The roofline floor: every FLOP the hardware runs at the datasheet peak."""
        return self.hardware_flops / self.peak

    @property
    def model_flops_per_s(self) -> float:
        """The model's FLOPs over the measured seconds (chapter 3): the FLOP/s that MFU divides by the peak."""
        return self.model_flops / self.run.seconds

    @property
    def unexplained_per_token_layer(self) -> float:
        """What the gap leaves once the backward pass's temporaries are taken out, per token and per layer
        (chapter 3): ``(gap - temporaries) / tokens / layers``."""
        return (self.gap - self.temporaries) / (self.run.tokens * self.run.batch) / self.run.layers


def checkpoint_runs(layers: LayersMeasurement | None = None, model: Model | str = "llama-3-8b",
                    hardware: Hardware | str = "h200-sxm") -> list[CheckpointRun]:
    """Every training run of a layer measurement with its prediction.

    ``temporaries`` estimates what the count of saved tensors cannot see: the gradients the SwiGLU
    backward holds at once (of the product, of the gate and of the up projection: three tensors of
    ``s b i`` values in bf16) and the last output, which the loss keeps (``s b h``). It is an estimate
    for the reader to weigh against the gap, not part of :attr:`CheckpointRun.predicted`.
    """
    layers = layers if layers is not None else load_layers()
    m, hw = load_model(model), get_hardware(hardware)
    peak = hw.peak_flops("bf16")
    out = []
    for r in layers.train:
        share = r.layers / m.num_layers
        kept, working = layer_activations(m, r.tokens, r.batch, recompute="full" if r.checkpoint else "none")
        tokens = r.tokens * r.batch
        temporaries = 2.0 * tokens * (3 * m.intermediate_size + m.hidden_size)
        attention = r.batch * attention_flops(r.tokens, r.tokens, m.attention_width, r.layers, causal="half")
        model_flops = 6 * r.layer_params * r.layers * tokens + 3 * attention
        again = (2 * r.layer_params * r.layers * tokens + attention) if r.checkpoint else 0.0
        out.append(CheckpointRun(r, float(kept) * share, float(working), temporaries, model_flops,
                                 model_flops + again, peak))
    return out


class CheckpointingEffect(NamedTuple):
    """One length and micro-batch measured with and without checkpointing (chapter 3)."""

    tokens: int
    batch: int
    hfu_without: float
    hfu_with: float
    time_ratio: float  # seconds with checkpointing over seconds without
    flop_ratio: float  # hardware FLOPs with checkpointing over the model's FLOPs

    @property
    def hfu_rose(self) -> bool:
        """Whether checkpointing raised HFU: it cost less time than the FLOPs it added (``time_ratio < flop_ratio``)."""
        return self.hfu_with > self.hfu_without

    @property
    def label(self) -> str:
        """The table's name for the run, e.g. '2,048 x 1'."""
        return f"{self.tokens:,} x {self.batch}"


def checkpointing_effects(runs: list[CheckpointRun]) -> list[CheckpointingEffect]:
    """Chapter 3: for every length and micro-batch measured both ways, HFU without and with checkpointing,
    and the time and FLOPs checkpointing multiplied, in the order of the runs without it."""
    pairs = {}
    for r in runs:
        pairs.setdefault((r.run.tokens, r.run.batch), {})[r.run.checkpoint] = r
    out = []
    for (tokens, batch), p in pairs.items():
        if set(p) == {False, True}:
            n, c = p[False], p[True]
            out.append(CheckpointingEffect(tokens, batch, n.hfu, c.hfu, c.run.seconds / n.run.seconds,
                                           c.hardware_flops / n.hardware_flops))
    return out
