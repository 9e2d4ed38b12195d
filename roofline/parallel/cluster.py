"""One training step on a cluster, for any layout: tensor x context x pipeline x data (x expert) parallelism
(chapters 7 to 11; appendix C).

:class:`TrainLayout` names the whole layout: the degrees ``tp``, ``cp``, ``pp``, ``dp`` and ``ep`` (expert
parallelism is carved out of ``dp x cp``, as Megatron-Core does), sequence parallelism, the micro-batch and
the global batch (gradient accumulation follows), the recomputation policy, the attention kernel, the ZeRO
stage, whether the gradient reduction overlaps the backward pass, and the pipeline schedule (1F1B, or
interleaved 1F1B with ``chunks`` model chunks per GPU). :func:`check_layout` refuses what cannot run, naming
the constraint. :func:`price_step` prices one step of it under a :class:`~roofline.core.cluster_roof.ClusterRoof`:
the datasheet's (a floor) or a calibrated one (an estimate; :func:`roofline.core.calibration.get_roof`).

What one GPU does for one micro-batch, per layer, from the model's own linears:

- **matmuls**: every linear of the layer at ``m = micro_batch * seq / cp`` rows, split over ``tp``
  (column-parallel: its outputs; row-parallel ``o_proj``/``down_proj``: its inputs; keys and values over at
  most the KV heads), each at the rate a matmul of its FLOPs reaches; the backward pass twice the forward's
  (one product for the input's gradient, one for the weight's). A mixture-of-experts layer runs its local
  experts (``num_experts / ep``) on ``tokens * experts_per_token / tp`` rows shared among them: **dropless
  routing with a balanced load** is the assumption (every token reaches its experts, none is dropped for want of
  capacity, and every expert takes its share of the rows; imbalance, which makes the busiest GPU the step's pace,
  is not modelled), each expert a matmul of its own, except where a block-scaled fp8 recipe's forward products
  have a grouped kernel's measurement of their shape (:func:`grouped_expert_forward`: DeepGEMM's grouped
  matmuls of DeepSeek-V3's expert shapes, read by the rows each expert takes): one grouped call a projection.
- **fp8** (``dtype='fp8'``, a recipe of :mod:`roofline.core.fp8`): the linear layers' products the recipe runs
  in fp8 on the roof's fp8 curve for its scaling (fp8 operands, a bf16 output), the others on the bf16 roof;
  the casts of each input, output gradient and weight (once a step where the recipe caches them) as
  memory-bound kernels at the quantization kernels' rate, in their own part ('fp8 casts'), with the amax
  all-reduces; the fp8 weight copies the recipe keeps, and its fp8-saved inputs, in memory; under FSDP, the
  weights gathered in fp8 where the recipe casts before the gather. Attention, the head and the router stay in
  bf16.
- **attention**: flash attention, causal (half the square), at the benchmarks' forward-and-backward rate for
  that sequence length (the backward 2.5 times the forward), of the kernel the layout names where the roof
  holds its curves (``attention_kernel``: FlashAttention-3 or cuDNN on Hopper); or the explicit kernel of Megatron-LM's 2021-22
  runs (``attention='standard'``): two batched matmuls over the whole square, and the memory-bound passes over
  the scores at the HBM rate: 13 bytes per score forward (write the scores, the fused scale-mask-softmax
  reads and writes them, dropout reads them and writes the kept values and a one-byte mask, the value
  product reads them) and 21 backward (the same passes in reverse, with the gradient of the probabilities
  written and read twice).
- **memory-bound kernels**: the norms (read and write the hidden state), the residual adds (read two, write
  one, and a one-byte dropout mask where the model trains with dropout), the activation (GELU: read and write
  the MLP's width; a gated unit: read two, write one), rotary embeddings on queries and keys; replicated over
  the tensor-parallel group unless sequence parallelism splits them; the backward pass moves twice the
  forward's bytes. Each kernel takes at least its launch. Where the roof holds a measured kernel's rate for a
  kind (``ClusterRoof.kernel_rates``: the activation forward and backward, the cross-entropy; Megatron-Core's
  fused kernels on Hopper), that kind runs at it instead of the memory-bound bandwidth.
- **tensor-parallel exchanges**: two all-reduces of the layer's ``tokens x hidden`` activations forward and two
  backward; with sequence parallelism, two all-gathers and two reduce-scatters each way. Not overlapped.
- **expert all-to-all** (``ep > 1``, :func:`expert_exchange_seconds`): DeepEP's normal kernels, as DeepSeek-V3
  and Megatron-Core's flex dispatcher run them: each token sent once to each GPU (inside a node) or node (across
  nodes, then forwarded over NVLink) that holds one of its experts, the expected number of them under uniform
  routing and any group limit the router has (DeepSeek-V3: at most 4 nodes); forward a dispatch and a combine,
  backward the same two along the opposite routes; dispatches in fp8 where the recipe says so (DeepSeek-V3's), the
  rest in bf16; at DeepEP's measured bandwidths where the roof holds them
  (:meth:`~roofline.core.cluster_roof.ClusterRoof.ep_exchange_time`), never above the links'. Not overlapped
  with compute.
- **context-parallel exchanges**: the ring passes each rank's keys and values ``cp - 1`` times forward (and
  keys, values and their gradients backward) behind the attention kernel: only what the kernel cannot hide
  shows. The all-to-all method (``cp_method='all_to_all'``) exchanges queries, keys, values and outputs.
- **recomputation**: ``selective`` reruns the attention kernel's forward in the backward pass; ``full`` reruns
  the whole forward, exchanges included.

Per step, on the slowest stage (``L/pp`` layers, and the embedding on the first, the final norm, output head
and cross-entropy on the last): ``m`` micro-batches of forward and backward, the pipeline's bubble
``(pp - 1)/chunks`` of an average stage's micro-batch, ``2 (m chunks + pp - 1)`` point-to-point messages of one
micro-batch's activations (split over ``tp``, Megatron's scatter-gather), the data-parallel reduction of the
stage's gradients over ``dp x cp`` shown as far as the last micro-batch's backward pass cannot hide it, and at
least its last 25 MB bucket (all of it without ``overlap_grad_reduce``; with ZeRO-3, FSDP's full sharding, two
gathers of the weights and a reduce-scatter of the gradients for every micro-batch, each behind that micro-batch's
compute; with ``reshard_after_forward=False`` the weights gathered once a step behind the first micro-batch's
forward pass and kept, whole, to the last backward pass, the gradients accumulated whole and reduce-scattered once
behind it; with hybrid sharding, ``shard_group``, the gathers and scatters inside each group and the gradient
shards all-reduced across the groups),
the tied embedding's gradient summed between the first and last stage, the multi-token-prediction modules a
model's config trains (DeepSeek-V3's ``num_nextn_predict_layers``) on the last stage with the output head (each
a decoder layer, a ``2 hidden -> hidden`` projection and the shared head with its loss, their FLOPs counted in the
step's; under 1F1B this makes the last stage the slowest: DeepSeek-V3's 2.5 layers there gain an expert layer and
a second head, so it matters, where a layout that moved layers off that stage would not), and the
optimizer's pass over the GPU's share of the parameters at the HBM rate (38 bytes a parameter in bf16: Adam
reads weights, gradients and two moments and writes three, the gradient norm reads the gradients, the
bf16 copy of the weights is written; 52 in fp16, which also unscales the gradients and copies them to fp32).

Not modelled: stragglers and failures, uneven stages beyond the embedding, the head and the multi-token-prediction
modules, expert imbalance and token dropping, hybrid sharding with expert parallelism, offloading, the zero-bubble
schedules (which split the weight gradient from the input gradient to fill the bubble) and DeepSeek-V3's DualPipe
(which runs two micro-batches at once so that each one's all-to-alls hide behind the other's compute, and feeds the
pipeline from both ends: pricing it needs the share of each all-to-all a concurrent micro-batch's compute covers,
which no microbenchmark here measures), both refused by name.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Mapping, NamedTuple

from roofline.core.checks import count, unknown_name
from roofline.core.calibration import get_roof, roof_kind
from roofline.core.cluster_roof import FP8_DISPATCH_BYTES, ClusterRoof
from roofline.core.fp8 import DEFAULT_FP8_RECIPE, FP8_RECIPES, FP8Recipe, fp8_recipe
from roofline.core.hardware import Hardware, get_hardware
from roofline.core.model import Model, NotModelledError, load_model, param_count
from roofline.core.network import MAX_GPUS
from roofline.core.policies import RECOMPUTES, ZERO_STAGES, recompute_policy
from roofline.core.routing import exchange_units
from roofline.core.units import fmt
from roofline.parallel.pipeline import in_flight
from roofline.parallel.tensor_parallel import check_tp, linear_shard
from roofline.workloads.memory import activation_bytes, korthikanti_bytes, state_bytes
from roofline.workloads.training import training_flops_per_token

__all__ = ["TrainLayout", "StepPrice", "Search", "check_layout", "price_step", "search", "SCHEDULES", "ATTENTIONS",
           "CP_METHODS", "OPTIMIZER_BYTES", "GRAD_DTYPES", "STANDARD_SCORE_BYTES", "ATTENTION_KERNELS"]

SCHEDULES = ("1f1b", "interleaved")
ATTENTIONS = ("flash", "standard")
ATTENTION_KERNELS = ("fa2", "fa3", "cudnn")
"""The flash-attention kernels a layout may name: FlashAttention-2 (the roofs' own curves), FlashAttention-3 and
cuDNN's fused attention (Transformer Engine's choice on Hopper), where the roof holds their curves."""
CP_METHODS = ("ring", "all_to_all")
OPTIMIZER_BYTES: Mapping[str, float] = MappingProxyType({"bf16": 38.0, "fp16": 52.0, "fp8": 38.0})
GRAD_DTYPES = ("bf16", "fp16")
STANDARD_SCORE_BYTES: Mapping[str, float] = MappingProxyType({"forward": 13.0, "backward": 21.0})
_CE_BYTES = 36.0  # vocabulary-parallel cross-entropy in fp32: about nine passes of 4 bytes over the logits


@dataclass(frozen=True)
class TrainLayout:
    """A training layout: parallel degrees, batch, recomputation, kernels, sharding and schedule.

    ``global_batch`` is in sequences (``None``: one micro-batch per data-parallel rank). ``sequence_parallel``
    ``None`` means on wherever ``tp > 1``. ``chunks`` is the interleaved schedule's model chunks per GPU (1 for
    1F1B). ``grad_dtype`` is the format the gradients are reduced in; ``dtype`` the matmuls': 'bf16', 'fp16', or
    'fp8' with ``fp8_recipe`` naming how (:data:`~roofline.core.fp8.FP8_RECIPES`; the linear layers' matmuls in
    fp8, the rest in bf16).

    FSDP as PyTorch runs it: ``zero_stage=3`` is FSDP's full sharding; ``reshard_after_forward=False`` keeps the
    gathered weights from the forward pass to the backward (FSDP1's ``SHARD_GRAD_OP``, FSDP2's
    ``reshard_after_forward=False``, Llama 3's choice); ``shard_group`` shards the model state over groups of that
    many data-parallel ranks and replicates it across groups (hybrid sharding, HSDP; ``None``: all ``dp x cp``).
    ``attention_kernel`` names the flash-attention kernel (:data:`ATTENTION_KERNELS`; ``None``: the roof's own,
    FlashAttention-2's curves on the calibrated roofs).
    """

    seq: int
    tp: int = 1
    cp: int = 1
    pp: int = 1
    dp: int = 1
    ep: int = 1
    micro_batch: int = 1
    global_batch: int | None = None
    recompute: str = "selective"
    sequence_parallel: bool | None = None
    schedule: str = "1f1b"
    chunks: int = 1
    zero_stage: int = 1
    attention: str = "flash"
    cp_method: str = "ring"
    overlap_grad_reduce: bool = True
    dtype: str = "bf16"
    grad_dtype: str = "bf16"
    gpus_per_node: int = 8
    reshard_after_forward: bool = True
    shard_group: int | None = None
    fp8_recipe: str | None = None
    attention_kernel: str | None = None

    @property
    def recipe(self) -> FP8Recipe | None:
        """The fp8 recipe of an fp8 layout (``fp8_recipe``, or :data:`~roofline.core.fp8.DEFAULT_FP8_RECIPE` where
        none is named); ``None`` for a bf16 or fp16 one."""
        if self.dtype != "fp8":
            return None
        return fp8_recipe(DEFAULT_FP8_RECIPE if self.fp8_recipe is None else self.fp8_recipe)

    @property
    def gpus(self) -> int:
        return self.tp * self.cp * self.pp * self.dp

    @property
    def sp(self) -> bool:
        return self.tp > 1 if self.sequence_parallel is None else bool(self.sequence_parallel)

    @property
    def batch(self) -> int:
        """Sequences per step."""
        return self.dp * self.micro_batch if self.global_batch is None else self.global_batch

    @property
    def micro_batches(self) -> int:
        """Micro-batches each pipeline runs per step (gradient accumulation when ``pp == 1``)."""
        return self.batch // (self.dp * self.micro_batch)

    @property
    def schedule_text(self) -> str:
        """The pipeline schedule as a clause to append: '' without a pipeline, ', 1F1B' or ', interleaved x4'."""
        return "" if self.pp == 1 else (", 1F1B" if self.schedule == "1f1b" else f", interleaved x{self.chunks}")

    def describe(self) -> str:
        """The layout in the command line's shorthand: 'TP 8 x PP 16 x DP 64, micro-batch 1 (32 a step), ...'."""
        parts = [f"TP {self.tp}"] + [f"{k} {v}" for k, v in (("CP", self.cp), ("PP", self.pp)) if v > 1] + [f"DP {self.dp}"]
        if self.ep > 1:
            parts.append(f"EP {self.ep}")
        return (" x ".join(parts) + f", micro-batch {self.micro_batch} ({self.micro_batches} a step){self.schedule_text}, "
                f"recompute {self.recompute}{', SP' if self.sp and self.tp > 1 else ''}, {self.sharding_text}"
                + (f", fp8 {self.recipe.name}" if self.recipe is not None else ""))

    @property
    def shards(self) -> int:
        """The data-parallel ranks the model state is sharded over: ``shard_group``, or all ``dp x cp``."""
        return self.dp * self.cp if self.shard_group is None else self.shard_group

    @property
    def sharding_text(self) -> str:
        """The sharding in the command line's words: 'ZeRO-1', 'ZeRO-3 (FSDP)', 'ZeRO-3 (FSDP, kept gathered to
        the backward pass, hybrid over 8)'."""
        notes = []
        if self.zero_stage == 3:
            notes.append("FSDP")
            if not self.reshard_after_forward:
                notes.append("kept gathered to the backward pass")
        if self.shard_group is not None:
            notes.append(f"hybrid over {self.shard_group}")
        return f"ZeRO-{self.zero_stage}" + (f" ({', '.join(notes)})" if notes else "")

    def prose(self) -> str:
        """The layout as a phrase for running text, where :meth:`describe` is the command line's shorthand:
        '16 pipeline stages, 128-way data parallelism, 64-way expert parallelism and no tensor parallelism,
        120 micro-batches of 1 sequence a step on the 1F1B schedule, no recomputation and ZeRO-1'."""
        def listed(items: list[str]) -> str:
            return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
        degrees = []
        if self.pp > 1:
            degrees.append(f"{self.pp:,} pipeline stages")
        degrees.append(f"{self.dp:,}-way data parallelism" if self.dp > 1 else "no data parallelism")
        if self.ep > 1:
            degrees.append(f"{self.ep:,}-way expert parallelism")
        if self.cp > 1:
            degrees.append(f"{self.cp:,}-way context parallelism")
        if self.tp > 1:
            degrees.append(f"{self.tp:,}-way tensor parallelism" + (" with sequence parallelism" if self.sp else ""))
        else:
            degrees.append("no tensor parallelism")
        n = self.micro_batches
        batches = (f"{n:,}{' accumulated' if self.pp == 1 and n > 1 else ''} micro-batch{'es' if n > 1 else ''} "
                   f"of {self.micro_batch:,} sequence{'s' if self.micro_batch > 1 else ''} a step")
        if self.pp > 1:
            batches += (" on the 1F1B schedule" if self.schedule == "1f1b"
                        else f" on the interleaved schedule of {self.chunks:,} chunks per GPU")
        recompute = {"none": "no recomputation"}.get(self.recompute, f"{self.recompute} recomputation")
        zero = self.sharding_text if self.zero_stage else "no ZeRO sharding"
        return f"{listed(degrees)}, {batches}, {recompute} and {zero}"


def _positive(name: str, value) -> int:
    return count(name, value)


def check_layout(model: Model | str, layout: TrainLayout) -> Model:
    """Refuse a layout that cannot run, naming the constraint it breaks; return the model."""
    m = load_model(model)
    if not isinstance(layout, TrainLayout):
        raise TypeError(f"layout must be a TrainLayout, got {type(layout).__name__}")
    for name in ("seq", "tp", "cp", "pp", "dp", "ep", "micro_batch", "chunks", "gpus_per_node"):
        _positive(name, getattr(layout, name))
    if layout.global_batch is not None:
        _positive("global_batch", layout.global_batch)
    for name, value, allowed in (("recompute", layout.recompute, RECOMPUTES), ("attention", layout.attention, ATTENTIONS),
                                 ("cp_method", layout.cp_method, CP_METHODS)):
        if value not in allowed:
            raise unknown_name(name, value, allowed)
    if layout.schedule not in SCHEDULES:
        if str(layout.schedule).lower().replace("-", "").replace("_", "") in ("dualpipe", "dualpipev"):
            raise ValueError(f"schedule {layout.schedule!r} (DeepSeek-V3's DualPipe) is not priced: it runs two "
                             "micro-batches' forward and backward passes at once so that each one's expert all-to-all "
                             "hides behind the other's compute, and feeds the pipeline from both ends; this model "
                             "overlaps neither; use '1f1b' or 'interleaved' (the all-to-all then shows in full)")
        if str(layout.schedule).replace("_", "-").startswith("zero"):
            raise ValueError("schedule 'zero-bubble' is not priced: it splits each backward pass into the input's and "
                             "the weights' gradients to fill the bubble, which this model does not separate; "
                             "use '1f1b' or 'interleaved'")
        raise unknown_name("schedule", layout.schedule, SCHEDULES)
    if isinstance(layout.zero_stage, bool) or layout.zero_stage not in ZERO_STAGES:
        raise ValueError(f"zero_stage must be 0, 1, 2 or 3, got {layout.zero_stage!r}")
    if not isinstance(layout.reshard_after_forward, bool):
        raise TypeError(f"reshard_after_forward must be True or False, got {layout.reshard_after_forward!r}")
    if not layout.reshard_after_forward and layout.zero_stage != 3:
        raise ValueError(f"reshard_after_forward applies to ZeRO-3 (FSDP) only: stage {layout.zero_stage} keeps the "
                         "weights whole on every GPU; give zero_stage=3 with it")
    if layout.shard_group is not None:
        _positive("shard_group", layout.shard_group)
        n_dp = layout.dp * layout.cp
        if layout.zero_stage == 0:
            raise ValueError("shard_group (hybrid sharding) needs a ZeRO stage of 1 or more: stage 0 shards nothing")
        if n_dp % layout.shard_group:
            raise ValueError(f"shard_group ({layout.shard_group}) must divide the data-parallel ranks dp x cp "
                             f"({layout.dp} x {layout.cp} = {n_dp}): each group holds one whole copy of the model state")
        if layout.ep > 1:
            raise NotModelledError("hybrid sharding (shard_group) with expert parallelism is not priced yet")
    if layout.dtype not in OPTIMIZER_BYTES:
        raise unknown_name("dtype", layout.dtype, OPTIMIZER_BYTES)
    if layout.grad_dtype not in GRAD_DTYPES:
        raise unknown_name("grad_dtype", layout.grad_dtype, GRAD_DTYPES)
    if layout.attention_kernel is not None:
        if layout.attention_kernel not in ATTENTION_KERNELS:
            raise unknown_name("attention_kernel", layout.attention_kernel, ATTENTION_KERNELS)
        if layout.attention != "flash":
            raise ValueError(f"attention_kernel ({layout.attention_kernel!r}) names a flash-attention kernel: give "
                             f"attention='flash' with it, got {layout.attention!r}")
    if layout.fp8_recipe is not None:
        if layout.dtype != "fp8":
            raise ValueError(f"fp8_recipe ({layout.fp8_recipe!r}) needs dtype 'fp8', got dtype {layout.dtype!r}")
        fp8_recipe(layout.fp8_recipe)
    L, tp, cp, pp = m.num_layers, layout.tp, layout.cp, layout.pp
    if layout.sequence_parallel and tp == 1:
        raise ValueError("sequence_parallel splits the norms and residuals over the tensor-parallel group: it needs "
                         "tp > 1 (left out, it is on wherever tp > 1)")
    if m.num_heads % tp:
        raise ValueError(f"tp ({tp}) must divide the attention heads ({m.num_heads}) of {m.name}")
    if m.intermediate_size % tp:
        raise ValueError(f"tp ({tp}) must divide the MLP width ({m.intermediate_size:,}) of {m.name}")
    if pp > L:
        raise ValueError(f"pp ({pp}) must be at most the layers ({L}) of {m.name}: each stage holds at least one")
    if layout.gpus > MAX_GPUS:
        name, value = max((("dp", layout.dp), ("pp", pp), ("cp", cp), ("tp", tp)), key=lambda kv: kv[1])
        raise ValueError(f"{name} ({value:,}) makes {layout.gpus:,} GPUs (tp x cp x pp x dp), more than the "
                         f"{MAX_GPUS:,} of the largest cluster priced (roofline.core.network.MAX_GPUS)")
    if layout.schedule == "1f1b" and layout.chunks != 1:
        raise ValueError(f"chunks must be 1 for the '1f1b' schedule, got {layout.chunks}; use schedule='interleaved'")
    if layout.schedule == "interleaved":
        if pp == 1:
            raise ValueError("the interleaved schedule needs pp > 1")
        if -(-L // pp) % layout.chunks:
            raise ValueError(f"chunks ({layout.chunks}) must divide the layers per stage ({-(-L // pp)}, of {L} over {pp})")
    if layout.sp and tp > 1 and (layout.seq // cp) % tp:
        raise ValueError(f"sequence parallelism needs tp ({tp}) to divide each rank's tokens (seq/cp = {layout.seq // cp})")
    if cp > 1:
        if layout.cp_method == "ring" and layout.seq % (2 * cp):
            raise ValueError(f"the ring's zigzag split needs 2 x cp ({2 * cp}) to divide seq ({layout.seq:,})")
        if layout.cp_method == "all_to_all" and (m.num_heads // tp) % cp:
            raise ValueError(f"all-to-all context parallelism needs cp ({cp}) to divide the heads per tensor-parallel "
                             f"rank ({m.num_heads // tp})")
        if layout.seq // cp < 128:
            raise ValueError(f"cp ({cp}) leaves {layout.seq // cp} tokens per rank; give each rank at least 128")
    if layout.ep > 1:
        if m.moe is None:
            raise ValueError(f"ep ({layout.ep}) needs a mixture-of-experts model; {m.name} is dense")
        if layout.ep > m.moe.num_experts:
            raise ValueError(f"ep ({layout.ep}) exceeds the experts ({m.moe.num_experts}) of {m.name}")
        if m.moe.num_experts % layout.ep:
            raise ValueError(f"ep ({layout.ep}) must divide the experts ({m.moe.num_experts}) of {m.name}")
        if (layout.dp * cp) % layout.ep:
            raise ValueError(f"ep ({layout.ep}) must divide dp x cp ({layout.dp * cp}): experts are spread over the "
                             "data- and context-parallel ranks")
    if layout.batch % (layout.dp * layout.micro_batch):
        raise ValueError(f"global_batch ({layout.batch}) must be a multiple of dp x micro_batch "
                         f"({layout.dp} x {layout.micro_batch} = {layout.dp * layout.micro_batch})")
    if layout.schedule == "interleaved" and layout.micro_batches % pp:
        raise ValueError(f"the interleaved schedule needs the micro-batches per pipeline ({layout.micro_batches}) to be "
                         f"a multiple of pp ({pp})")
    return m


@dataclass(frozen=True)
class StepPrice:
    """One step of a layout under one roof: seconds, where they go, and bytes per GPU.

    ``parts`` holds seconds that add to ``time``: compute by kind ('matmuls', 'attention', 'memory-bound',
    'recompute'), the exposed exchanges ('tensor-parallel', 'context-parallel', 'expert all-to-all',
    'pipeline sends', 'data-parallel'), 'bubble' and 'optimizer'. ``hidden`` holds communication that ran
    behind compute. ``memory``: bytes per GPU on the fullest stage; ``fits`` against the usable HBM.
    """

    model: Model
    layout: TrainLayout
    roof: ClusterRoof
    parts: Mapping[str, float]
    hidden: Mapping[str, float]
    memory: float
    memory_parts: Mapping[str, float]
    model_flops: float
    hardware_flops: float

    @property
    def time(self) -> float:
        return float(sum(self.parts.values()))

    @property
    def fits(self) -> bool:
        return self.memory <= self.roof.hardware.usable_capacity

    @property
    def tokens_per_s(self) -> float:
        return self.layout.batch * self.layout.seq / self.time

    @property
    def mfu(self) -> float:
        return self.model_flops / (self.time * self.layout.gpus * self.roof.peak_flops)

    @property
    def hfu(self) -> float:
        return self.hardware_flops / (self.time * self.layout.gpus * self.roof.peak_flops)

    @property
    def compute(self) -> float:
        return sum(self.parts[k] for k in ("matmuls", "attention", "memory-bound", "fp8 casts", "recompute"))

    @property
    def exposed(self) -> float:
        return sum(self.parts[k] for k in ("tensor-parallel", "context-parallel", "expert all-to-all",
                                           "pipeline sends", "data-parallel"))


@dataclass
class _Phase:
    """Seconds of one micro-batch on one GPU, by kind, for the forward and the backward pass."""

    fwd: dict = field(default_factory=dict)
    bwd: dict = field(default_factory=dict)

    def add(self, phase: str, kind: str, t: float, times: float = 1.0):
        d = self.fwd if phase == "fwd" else self.bwd
        d[kind] = d.get(kind, 0.0) + float(t) * times

    def scaled(self, k: float) -> "_Phase":
        return _Phase({a: b * k for a, b in self.fwd.items()}, {a: b * k for a, b in self.bwd.items()})

    def plus(self, other: "_Phase") -> "_Phase":
        out = _Phase(dict(self.fwd), dict(self.bwd))
        for a, b in other.fwd.items():
            out.add("fwd", a, b)
        for a, b in other.bwd.items():
            out.add("bwd", a, b)
        return out

    @property
    def total(self) -> float:
        return sum(self.fwd.values()) + sum(self.bwd.values())


def _gemms(roof: ClusterRoof, linears, rows: float, tp: int, kv_heads: int, split: bool = True, copies: float = 1.0):
    t = 0.0
    for lin in linears:
        n, k = linear_shard(lin, tp, kv_heads) if split else (lin.out_features, lin.in_features)
        flops = 2.0 * rows * n * k
        t += roof.gemm_time(flops, 2.0 * (rows * k + k * n + rows * n))
    return t * copies


# linears that read the same input as the one before them (q, k and v; gate and up): one cast of that input
_SHARED_INPUT = frozenset({"k_proj", "v_proj", "up_proj", "kv_a_proj_with_mqa", "expert.up_proj", "shared.up_proj",
                           "shared_expert_gate"})


@dataclass
class _FP8Linears:
    """The linears of one layer under an fp8 recipe, one micro-batch on one GPU: the seconds of their products
    forward and backward, and the elements their casts convert (inputs and weights forward, output gradients
    and the second casts of the inputs backward), with the casts' count."""

    roof: ClusterRoof
    recipe: object
    sp: bool
    fwd: float = 0.0
    bwd: float = 0.0
    cast_fwd: float = 0.0
    cast_bwd: float = 0.0
    casts_fwd: int = 0
    casts_bwd: int = 0
    weights: float = 0.0

    def _product(self, matmul: str, flops: float, fp8_bytes: float, bf16_bytes: float) -> float:
        if self.recipe.runs_fp8(matmul):
            return self.roof.scaled_gemm_time(flops, fp8_bytes, self.recipe.gemm)
        return self.roof.high.gemm_time(flops, bf16_bytes)

    def add(self, linears, rows: float, tp: int, kv_heads: int, split: bool = True, copies: float = 1.0,
            forward: Mapping | None = None):
        """Add ``linears`` at ``rows`` rows, ``copies`` of each (the local experts); ``forward`` maps a linear's
        name to the seconds of its forward product, one copy, where a grouped kernel prices it instead."""
        r, rc = self.recipe, self.recipe.casts
        for lin in linears:
            n, k = linear_shard(lin, tp, kv_heads) if split else (lin.out_features, lin.in_features)
            flops = 2.0 * rows * n * k
            column = k == lin.in_features  # its input whole on every GPU of the group, its output split
            fwd = self._product("forward", flops, rows * k + k * n + 2 * rows * n, 2 * (rows * k + k * n + rows * n))
            if forward is not None and lin.name in forward:
                fwd = forward[lin.name]
            bwd = (self._product("data-gradient", flops, rows * n + k * n + 2 * rows * k, 2 * (rows * n + k * n + rows * k))
                   + self._product("weight-gradient", flops, rows * k + rows * n + 2 * k * n,
                                   2 * (rows * k + rows * n + k * n)))
            self.fwd += fwd * copies
            self.bwd += bwd * copies
            self.weights += k * n * copies
            if lin.name not in _SHARED_INPUT:  # the input, cast once forward (the rest of its casts backward)
                x = rows * k / (tp if column and self.sp and split else 1) * copies
                self.cast_fwd += x
                self.cast_bwd += x * (rc - 1)
                self.casts_fwd += r.kernels
                self.casts_bwd += r.kernels * (rc - 1)
            dy = rows * n / (tp if not column and self.sp and split else 1) * copies
            self.cast_bwd += dy * rc
            self.casts_bwd += r.kernels * rc


def _expert_rows(m: Model, lay: TrainLayout) -> float:
    """Rows each of one GPU's local experts takes a micro-batch under balanced routing: the GPU's
    ``micro_batch x seq / (cp x tp)`` tokens, ``experts_per_token`` copies each, shared by the ``num_experts / ep``
    experts it holds."""
    e = m.moe
    return lay.micro_batch * lay.seq / lay.cp / lay.tp * e.experts_per_token * lay.ep / e.num_experts


def grouped_expert_forward(m: Model, roof: ClusterRoof, recipe, rows: float, local: int) -> dict:
    """The forward products of one GPU's ``local`` experts, ``rows`` rows each, as one grouped kernel a projection
    (the gate and up projections side by side, ``2 x width`` wide, then the down projection), where ``roof`` holds
    a grouped curve of that shape and those rows (:meth:`~roofline.core.cluster_roof.ClusterRoof.grouped_gemm_time`,
    DeepGEMM's block-scaled kernels) and the fp8 ``recipe`` scales by blocks and runs the forward product in fp8:
    ``{linear name: seconds of one expert's product}`` (the grouped call's seconds shared evenly; the gate and up
    projections half each). Empty where nothing is covered: each expert is then priced as a matmul of its own.

    Worked by hand, DeepSeek-V3 at EP 64 (4 experts a GPU, 8,192 rows each at 4,096 tokens, top 8): the gate and up
    projections are one call of ``2 x 4 x 8,192 x 4,096 x 7,168 = 1.924e12`` FLOPs at 1,346 TFLOP/s (mbx300),
    1.430 ms, 0.179 ms each a projection of an expert; the down projection ``0.962e12`` FLOPs at 1,214 TFLOP/s
    (mbx301), 0.792 ms, 0.198 ms an expert."""
    if (m.moe is None or recipe is None or recipe.gemm != "blockwise" or not recipe.runs_fp8("forward")
            or not roof.grouped_gemm or local < 1):
        return {}
    h, width = m.hidden_size, m.moe.expert_intermediate_size
    out = {}
    up = roof.grouped_gemm_time(local, rows, 2 * width, h)
    if up is not None:
        out["expert.gate_proj"] = out["expert.up_proj"] = up / 2 / local
    down = roof.grouped_gemm_time(local, rows, h, width)
    if down is not None:
        out["expert.down_proj"] = down / local
    return out


def _exchange_geometry(m: Model, lay: TrainLayout) -> tuple[int, int, float]:
    """Where one GPU's expert all-to-all goes: ``(GPUs of the group in a node, parts a token is sent to at most
    once each, copies of a token sent)``; the parts are the group's GPUs inside a node, its nodes across them."""
    e = m.moe
    k = min(lay.ep, max(1, lay.gpus_per_node // lay.tp))
    parts = lay.ep if k >= lay.ep or lay.ep % k else lay.ep // k
    return k, parts, exchange_units(e.num_experts, e.experts_per_token, parts, e.groups, e.groups_per_token)


def moe_terms(model: Model | str, layout: TrainLayout, roof: ClusterRoof) -> dict:
    """What the step model used for a mixture of experts' layers under ``roof``, in words with the numbers it
    priced (``train`` prints them): ``'experts'``, the routing (dropless, balanced), the experts a GPU and the rows
    each takes a micro-batch, and whether their forward products ran as grouped kernels
    (:func:`grouped_expert_forward`) or each as its own matmul; ``'expert all-to-all'`` (``ep > 1``), the copies of
    a token sent (:func:`~roofline.core.routing.exchange_units`), the formats and the rates, with the records they
    come from. Empty for a dense model.

    Worked by hand, Qwen3-30B-A3B at EP 8 inside a node of H100s (4,096 tokens, top 8 of 128): 16 experts a GPU,
    ``4,096 x 8 x 8 / 128 = 2,048`` rows each; a token to ``8 (1 - C(112,8)/C(128,8)) = 5.34`` GPUs."""
    m = load_model(model)
    e = m.moe
    if e is None:
        return {}
    lay = layout
    local = e.num_experts // lay.ep
    rows = _expert_rows(m, lay)
    grouped = grouped_expert_forward(m, roof, lay.recipe, rows, local) if lay.dtype == "fp8" else {}
    ids = roof.sources.get("grouped_gemm", ())
    out = {"experts": (f"dropless routing, every expert its share of the tokens (balanced): {local:,} expert"
                       f"{'s' if local > 1 else ''} a GPU, {rows:,.0f} rows each a micro-batch, "
                       + ("their forward products one grouped kernel a projection at DeepGEMM's measured rates ("
                          + (f"{ids[0]}-{ids[-1]}" if ids else "DeepGEMM") + ")" if grouped
                          else "each expert a matmul of its own"))}
    if lay.ep <= 1:
        return out
    k, parts, units = _exchange_geometry(m, lay)
    across = k < lay.ep
    where = "nodes" if across and parts < lay.ep else "GPUs"
    limit = (f", at most {e.groups_per_token} of {e.groups} expert groups (node-limited routing)"
             if e.groups_per_token is not None else "")
    dispatch = "fp8" if lay.recipe is not None and lay.recipe.fp8_dispatch else "bf16"
    if across:
        src = roof.sources.get("ep_rdma", ())
        rate = (f"DeepEP's internode bandwidths ({src[0]}-{src[-1]})" if roof.ep_rdma and src else
                "the measured all-to-all rate of the network port" if roof.calibrated else
                "the network port's datasheet rate (a floor)")
    else:
        src = roof.sources.get("ep_nvlink", ())
        rate = (f"DeepEP's intranode bandwidths ({', '.join(src)})" if roof.ep_nvlink else
                "the measured all-to-all over NVLink" if roof.calibrated else "NVLink's datasheet rate (a floor)")
    out["expert all-to-all"] = (f"a token sent once to each of the {units:.2f} {where} its experts sit on{limit}, "
                                + ("the dispatch in fp8, the combine in bf16" if dispatch == "fp8" else "dispatch and combine in bf16")
                                + f", at {rate}; not overlapped with "
                                "compute (DualPipe is not priced)")
    return out


def expert_exchange_seconds(m: Model, lay: TrainLayout, roof: ClusterRoof) -> tuple[float, float]:
    """Seconds of one MoE layer's expert all-to-alls for one micro-batch on one GPU, ``(forward, backward)``, as
    DeepEP's normal kernels run them (:meth:`~roofline.core.cluster_roof.ClusterRoof.ep_exchange_time`): each GPU
    sends its ``micro_batch x seq / (cp x tp)`` tokens once to each GPU (inside a node) or node (across) holding one
    of its experts (:func:`~roofline.core.routing.exchange_units`, balanced, dropless routing), ``hidden`` numbers a
    token. Forward a dispatch and a combine; backward the combine's gradients go out along the dispatch's routes and
    the dispatch's come back along the combine's. The dispatches in fp8 (one byte and a scale per 128) where the
    recipe dispatches in fp8 (DeepSeek-V3's), in bf16 otherwise; the combines in bf16.

    Worked by hand, DeepSeek-V3 at EP 64 over 8 nodes on H800s (4,096 tokens a GPU, a token to 4 nodes, 7,168 wide):
    the fp8 dispatch sends ``4,096 x 4 x 7,168 x 1.03125 = 121.1 MB`` at DeepEP's 51 GB/s (mb0100), 2.375 ms; the
    bf16 combine 234.9 MB at 50 GB/s (mb0101), 4.698 ms; 7.07 ms forward and the same backward."""
    if m.moe is None or lay.ep <= 1:
        return 0.0, 0.0
    k, _, units = _exchange_geometry(m, lay)
    tokens = lay.micro_batch * lay.seq / lay.cp / lay.tp
    row = tokens * units * m.hidden_size
    rec = lay.recipe
    out = row * (FP8_DISPATCH_BYTES if rec is not None and rec.fp8_dispatch else 2.0)
    back = row * 2.0
    one = roof.ep_exchange_time("dispatch", lay.ep, out, per_node=k) + roof.ep_exchange_time("combine", lay.ep, back,
                                                                                             per_node=k)
    return one, one


def _layer(m: Model, lay: TrainLayout, roof: ClusterRoof, moe: bool) -> tuple[_Phase, dict, float]:
    """One layer, one micro-batch, one GPU: the phase times, the recompute's seconds, and the attention
    kernel's forward seconds (what a ring can hide behind)."""
    tp, cp, s = lay.tp, lay.cp, lay.seq
    T = lay.micro_batch * s / cp  # tokens this GPU holds
    h = m.hidden_size
    kv = m.num_kv_heads
    heads = m.num_heads / tp
    kv_l = max(kv / tp, 1.0)
    dqk, dv = m.attention_head_dims
    ph = _Phase()
    hi = roof.high  # attention and what a recipe keeps in bf16
    # matmuls
    if lay.dtype == "fp8":
        lin = _FP8Linears(roof, lay.recipe, lay.sp and tp > 1)
        lin.add(m.attention_linears(), T, tp, kv)
        if moe:
            e = m.moe
            routed = T * e.experts_per_token / tp
            local = e.num_experts / lay.ep
            rows = _expert_rows(m, lay)
            lin.add(m.expert_linears(), rows, 1, kv, split=False, copies=local,
                    forward=grouped_expert_forward(m, roof, lay.recipe, rows, int(local)))
            lin.add(m.shared_expert_linears(), T, tp, kv)
            router = _gemms(hi, (m.router(),), T, 1, kv, split=False)
            lin.fwd += router
            lin.bwd += 2 * router
            width, act_rows = e.expert_intermediate_size, routed
        else:
            lin.add(m.dense_mlp_linears(), T, tp, kv)
            width, act_rows = m.intermediate_size / tp, T
        ph.add("fwd", "matmuls", lin.fwd)
        ph.add("bwd", "matmuls", lin.bwd)
        rec = lin.recipe
        ph.add("fwd", "fp8 casts", roof.cast_time(lin.cast_fwd * (rec.cast_bytes + rec.amax_bytes), lin.casts_fwd))
        ph.add("bwd", "fp8 casts", roof.cast_time(lin.cast_bwd * (rec.cast_bytes + rec.amax_bytes), lin.casts_bwd))
        if rec.amax_reduction == "cast" and tp > 1:  # one amax all-reduced over the group per cast
            k = min(tp, lay.gpus_per_node)
            one = roof.collective_time("all_reduce", tp, 4.0, per_node=k)
            ph.add("fwd", "fp8 casts", one * lin.casts_fwd / rec.kernels)
            ph.add("bwd", "fp8 casts", one * lin.casts_bwd / rec.kernels)
    else:
        att = _gemms(roof, m.attention_linears(), T, tp, kv)
        if moe:
            e = m.moe
            routed = T * e.experts_per_token / tp  # rows this GPU's experts take, shared among its local experts
            local = e.num_experts / lay.ep
            per_expert = _expert_rows(m, lay)
            mlp = (_gemms(roof, m.expert_linears(), per_expert, 1, kv, split=False, copies=local)
                   + _gemms(roof, m.shared_expert_linears(), T, tp, kv) + _gemms(roof, (m.router(),), T, 1, kv, split=False))
            width, act_rows = e.expert_intermediate_size, routed
        else:
            mlp = _gemms(roof, m.dense_mlp_linears(), T, tp, kv)
            width, act_rows = m.intermediate_size / tp, T
        ph.add("fwd", "matmuls", att + mlp)
        ph.add("bwd", "matmuls", att + mlp, 2)
    # attention kernel
    b = lay.micro_batch
    if lay.attention == "flash":
        fwd_flops = 2.0 * b * heads * s * s * (dqk + dv) / cp * 0.5
        t_fb = hi.flash_time(3.5 * fwd_flops, s, head_dim=int(round(dqk)), causal=True, kernel=lay.attention_kernel)
        a_fwd, a_bwd = t_fb / 3.5, t_fb * 2.5 / 3.5
    else:
        scores = b * heads * s * s / cp
        g = hi.gemm_time(2.0 * scores * dqk, 2.0 * (scores + 2 * b * heads * s * dqk / cp)) + \
            hi.gemm_time(2.0 * scores * dv, 2.0 * (scores + 2 * b * heads * s * dv / cp))
        a_fwd = g + roof.memory_time(STANDARD_SCORE_BYTES["forward"] * scores, 4)
        a_bwd = 2 * g + roof.memory_time(STANDARD_SCORE_BYTES["backward"] * scores, 6)
    ph.add("fwd", "attention", a_fwd)
    ph.add("bwd", "attention", a_bwd)
    # memory-bound kernels: bytes per token
    share = tp if lay.sp else 1
    dropout = m.family == "gpt2"
    replicated = m.norms_per_layer * 4 * h + 2 * (7 if dropout else 6) * h
    act = (6 if m.gated_mlp else 4) * width * act_rows / T
    rotary = 0.0 if m.position_embeddings or m.mla is not None else 4 * (heads + kv_l) * dqk
    permute = 4 * heads * dv if lay.attention == "standard" else 0.0
    per_token = replicated / share + act + rotary + permute
    kernels = m.norms_per_layer + 3 + (1 if rotary else 0)
    if "activation forward" in roof.kernel_rates:  # the activation at its own kernel's measured rates
        ph.add("fwd", "memory-bound", roof.memory_time((per_token - act) * T, kernels - 1)
               + roof.kernel_time("activation forward", act * T))
        ph.add("bwd", "memory-bound", roof.memory_time(2 * (per_token - act) * T, 2 * (kernels - 1))
               + roof.kernel_time("activation backward", 2 * act * T, 2))
    else:
        ph.add("fwd", "memory-bound", roof.memory_time(per_token * T, kernels))
        ph.add("bwd", "memory-bound", roof.memory_time(2 * per_token * T, 2 * kernels))
    # tensor-parallel exchanges
    msg = T * h * 2.0
    if tp > 1:
        k = min(tp, lay.gpus_per_node)
        if lay.sp:
            one = 2 * (roof.collective_time("all_gather", tp, msg, per_node=k)
                       + roof.collective_time("reduce_scatter", tp, msg, per_node=k))
        else:
            one = 2 * roof.collective_time("all_reduce", tp, msg, per_node=k)
        ph.add("fwd", "tensor-parallel", one)
        ph.add("bwd", "tensor-parallel", one)
    # expert all-to-all: dispatch and combine, forward and backward (DeepEP's normal kernels)
    if moe and lay.ep > 1:
        a2a_fwd, a2a_bwd = expert_exchange_seconds(m, lay, roof)
        ph.add("fwd", "expert all-to-all", a2a_fwd)
        ph.add("bwd", "expert all-to-all", a2a_bwd)
    # context-parallel exchanges
    if cp > 1:
        k = min(cp, max(1, lay.gpus_per_node // tp))
        if lay.cp_method == "ring":
            block = 2.0 * T * kv_l * dqk * 2.0
            send = roof.send_time(block, across_nodes=k < cp and tp * cp > lay.gpus_per_node)
            ph.add("fwd", "context-parallel", max(0.0, (cp - 1) * send - a_fwd))
            ph.add("bwd", "context-parallel", max(0.0, 2 * (cp - 1) * send - a_bwd))
        else:
            one = 4 * roof.collective_time("all_to_all", cp, T * h * 2.0 / tp, per_node=k)
            ph.add("fwd", "context-parallel", one)
            ph.add("bwd", "context-parallel", one)
    # recomputation in the backward pass
    if lay.recompute == "full":
        recompute = dict(ph.fwd)
    elif lay.recompute == "selective":
        recompute = {"attention": a_fwd}
    else:
        recompute = {}
    return ph, recompute, a_fwd


def _ends(m: Model, lay: TrainLayout, roof: ClusterRoof) -> tuple[_Phase, _Phase]:
    """The first stage's embedding and the last stage's final norm, output head and loss, one micro-batch."""
    tp = lay.tp
    T = lay.micro_batch * lay.seq / lay.cp
    h, V = m.hidden_size, m.vocab_size
    first, last = _Phase(), _Phase()
    tables = 2 if m.position_embeddings else 1
    first.add("fwd", "memory-bound", roof.memory_time(tables * 4 * T * h, tables))
    first.add("bwd", "memory-bound", roof.memory_time(tables * 6 * T * h, tables))
    share = tp if lay.sp else 1
    last.add("fwd", "memory-bound", roof.memory_time(4 * T * h / share, 1))
    last.add("bwd", "memory-bound", roof.memory_time(8 * T * h / share, 2))
    head = roof.high.gemm_time(2.0 * T * h * V / tp, 2.0 * (T * h + h * V / tp + T * V / tp))
    last.add("fwd", "matmuls", head)
    last.add("bwd", "matmuls", head, 2)
    ce = roof.kernel_time("cross-entropy", _CE_BYTES * T * V / tp, 10)
    last.add("fwd", "memory-bound", ce / 2)
    last.add("bwd", "memory-bound", ce / 2)
    if tp > 1:
        k = min(tp, lay.gpus_per_node)
        gather = roof.collective_time("all_gather", tp, T * h * 2.0, per_node=k) if lay.sp else 0.0
        small = 3 * roof.collective_time("all_reduce", tp, T * 4.0, per_node=k)
        last.add("fwd", "tensor-parallel", gather + small)
        last.add("bwd", "tensor-parallel", gather)
    return first, last


def _mtp(m: Model, lay: TrainLayout, roof: ClusterRoof, head: _Phase) -> tuple[_Phase, float]:
    """The multi-token-prediction modules of one micro-batch on the last stage, ``(phases, recompute seconds)``:
    each a decoder layer (with experts where the model has them), the projection of the two normalised inputs
    (``2 hidden -> hidden``, in bf16 like the head) with their two norms, and the shared output head with its
    norm and cross-entropy (``head``, the last stage's own)."""
    moe = m.moe is not None and m.moe.moe_layers(m.num_layers) > 0
    ph, re, _ = _layer(m, lay, roof, moe=moe)
    T = lay.micro_batch * lay.seq / lay.cp
    h, tp = m.hidden_size, lay.tp
    share = tp if lay.sp else 1
    proj = roof.high.gemm_time(2.0 * T * 2 * h * h / tp, 2.0 * (T * 2 * h + 2 * h * h / tp + T * h / tp))
    ph.add("fwd", "matmuls", proj)
    ph.add("bwd", "matmuls", proj, 2)
    ph.add("fwd", "memory-bound", roof.memory_time(2 * 4 * T * h / share, 2))
    ph.add("bwd", "memory-bound", roof.memory_time(2 * 8 * T * h / share, 4))
    one = ph.plus(head)
    return one.scaled(m.mtp_layers), float(sum(re.values())) * m.mtp_layers


def mtp_flops_per_token(model: Model | str, seq: int, recompute: str = "none") -> float:
    """Training FLOPs a token spends in the model's multi-token-prediction modules (DeepSeek-V3's
    ``num_nextn_predict_layers``; 0 without them): for each module, the weights a token meets (one decoder layer's
    linears, with its experts where the model has them; the ``2 hidden x hidden`` projection; the output head) at
    the policy's FLOPs a weight (6, 8 with full recomputation) and the layer's causal attention, ``seq x heads x
    (d_qk + d_v)`` forward, three passes (four recomputed).

    Worked by hand, DeepSeek-V3 at 4,096 tokens: a MoE layer's linears a token meets hold 0.187B (attention) +
    0.044B (shared expert) + 8 x 0.044B (routed) + 1.8M (router) = 0.585B weights, the projection 0.103B, the head
    0.927B: 1.615B, 6 x 1.615B = 9.69 GFLOPs; attention 4,096 x 128 x 320 x 3 = 0.503 GFLOPs; 10.19 GFLOPs a token,
    about 4% of the model's own (256 GFLOPs)."""
    m = load_model(model)
    if not m.mtp_layers:
        return 0.0
    policy = recompute_policy(recompute)
    layer = next((i for i in range(m.num_layers) if m.is_moe_layer(i)), 0)
    weights = sum(lin.in_features * lin.out_features for lin in m.token_linears(layer))
    weights += 2 * m.hidden_size * m.hidden_size + m.vocab_size * m.hidden_size
    attention = count("seq", seq) * m.num_heads * sum(m.attention_head_dims)
    return float(m.mtp_layers * (policy.param_flops * weights + attention * policy.attention_passes))


def _stage_params(m: Model, lay: TrainLayout) -> tuple[float, float, float]:
    """Parameters one GPU holds on the fullest stage: (dense share, expert share, embedding share)."""
    total = param_count(m)
    emb = m.vocab_size * m.hidden_size * (1 if m.tie_word_embeddings else 2) + m.position_embeddings * m.hidden_size
    experts = 0.0
    if m.moe is not None:
        per = sum(lin.in_features * lin.out_features for lin in m.expert_linears())
        experts = per * m.moe.num_experts * m.moe.moe_layers(m.num_layers)
    dense = total - emb - experts
    ends = emb if lay.pp == 1 else (m.vocab_size + m.position_embeddings) * m.hidden_size
    share = -(-m.num_layers // lay.pp) / m.num_layers  # the fullest stage
    return dense * share / lay.tp, experts * share / lay.ep, ends / lay.tp


def _layer_activations(m: Model, lay: TrainLayout) -> float:
    """Bytes one layer keeps for one micro-batch on one GPU."""
    try:
        rec = lay.recipe
        return activation_bytes(m, lay.seq // lay.cp, lay.micro_batch, recompute=lay.recompute, tp=lay.tp,
                                sequence_parallel=lay.sp, flash=lay.attention == "flash",
                                fp8_inputs=rec is not None and rec.fp8_saved_inputs)
    except NotModelledError:  # latent attention's saved tensors: a GPT layer of the same width stands in
        return korthikanti_bytes(lay.seq // lay.cp, lay.micro_batch, m.hidden_size, m.num_heads,
                                 recompute="selective" if lay.recompute == "none" and lay.attention == "flash"
                                 else lay.recompute, tp=lay.tp, sequence_parallel=lay.sp)


def _flops_per_token(m: Model, seq: int, recompute: str) -> float:
    """Training FLOPs per token: the weights' (:func:`~roofline.workloads.training.training_flops_per_token`) and
    causal attention's, ``2 * seq * heads * (d_qk + d_v) / 2`` per layer forward (the same count as
    ``attention_context`` gives, written with both head widths so that latent attention's differ),
    three passes, four when recomputed."""
    forward = seq * m.num_heads * sum(m.attention_head_dims) * m.num_layers
    return training_flops_per_token(m, recompute=recompute) + forward * (3 if recompute == "none" else 4)


def _check_roof(roof) -> ClusterRoof:
    if not isinstance(roof, ClusterRoof):
        raise TypeError(f"roof must be a ClusterRoof (roofline.core.calibration.get_roof(...)), "
                        f"got {type(roof).__name__}")
    return roof


def price_step(model: Model | str, layout: TrainLayout, roof: ClusterRoof) -> StepPrice:
    """Price one training step of ``model`` laid out as ``layout`` under ``roof`` (see the module's notes)."""
    m = check_layout(model, layout)
    return _price(m, layout, _check_roof(roof), {})


def _cached(cache: dict, key, build):
    if key not in cache:
        cache[key] = build()
    return cache[key]


def _layer_key(lay: TrainLayout) -> tuple:
    return (lay.tp, lay.cp, lay.seq, lay.micro_batch, lay.ep, lay.sp, lay.attention, lay.cp_method,
            lay.gpus_per_node, lay.recompute, lay.dtype, lay.fp8_recipe, lay.attention_kernel)


def _stage(m: Model, lay: TrainLayout, roof: ClusterRoof, cache: dict):
    """The slowest stage's micro-batch: its phases, its recomputation's seconds, and an average stage's
    micro-batch (the bubble's unit)."""
    layer_key = _layer_key(lay)
    L, pp = m.num_layers, lay.pp
    n_moe = m.moe.moe_layers(L) if m.moe is not None else 0
    # the fullest stage holds ceil(L/pp) layers; where pp does not divide L, the first and last stages hold
    # fewer (Llama 3's 126 layers over 16 stages: one fewer on each end) and the embedding and head with them
    full = -(-L // pp)
    dense_ph, dense_re, _ = _cached(cache, ("dense",) + layer_key, lambda: _layer(m, lay, roof, moe=False))
    per_layer_ph = dense_ph.scaled((L - n_moe) / L)
    per_layer_re = sum(dense_re.values()) * (L - n_moe) / L
    if n_moe:
        moe_ph, moe_re, _ = _cached(cache, ("moe",) + layer_key, lambda: _layer(m, lay, roof, moe=True))
        per_layer_ph = per_layer_ph.plus(moe_ph.scaled(n_moe / L))
        per_layer_re += sum(moe_re.values()) * n_moe / L
    first, last = _cached(cache, ("ends",) + layer_key, lambda: _ends(m, lay, roof))
    last_re = 0.0  # the multi-token-prediction layers' recomputation, on the last stage with the head
    if m.mtp_layers:
        mtp, last_re = _cached(cache, ("mtp",) + layer_key, lambda: _mtp(m, lay, roof, last))
        last = last.plus(mtp)
    if pp == 1:
        end, end_re = first.plus(last), last_re
    else:
        end, end_re = (first, 0.0) if first.total >= last.total + last_re else (last, last_re)
    short = (L - (pp - 2) * full) / 2 if pp > 2 and L % pp else full
    stage = per_layer_ph.scaled(full).plus(end) if short == full else None
    if stage is None:
        a, b = per_layer_ph.scaled(full), per_layer_ph.scaled(short).plus(end)
        stage = a if a.total + full * per_layer_re >= b.total + short * per_layer_re + end_re else b
        recompute = per_layer_re * full if stage is a else per_layer_re * short + end_re
    else:
        recompute = per_layer_re * full + end_re
    avg = (per_layer_ph.total + per_layer_re) * L / pp + (first.total + last.total + last_re) / pp
    return stage, recompute, avg


def backward_seconds(model: Model | str, layout: TrainLayout, roof: ClusterRoof) -> float:
    """Chapter 7: seconds of one micro-batch's backward pass on the slowest stage of ``layout`` under ``roof``
    (its matmuls, attention, memory-bound kernels and tensor-parallel exchanges; recomputation left out):
    the compute behind which :func:`price_step` hides the data-parallel reduction."""
    m = check_layout(model, layout)
    stage, _, _ = _stage(m, layout, _check_roof(roof), {})
    return float(sum(stage.bwd.values()))


def layer_seconds(model: Model | str, layout: TrainLayout, roof: ClusterRoof, phase: str = "forward") -> dict:
    """Chapter 8: seconds of one dense layer's ``phase`` ('forward' or 'backward') for one micro-batch on one GPU
    of ``layout`` under ``roof``, by kind ('matmuls', 'attention', 'memory-bound', 'tensor-parallel', ...): the
    pieces :func:`price_step` adds up, recomputation left out."""
    m = check_layout(model, layout)
    _check_roof(roof)
    if phase not in ("forward", "backward"):
        raise unknown_name("phase", phase, ("forward", "backward"))
    ph, _, _ = _layer(m, layout, roof, moe=False)
    return dict(ph.fwd if phase == "forward" else ph.bwd)


__all__ += ["backward_seconds", "layer_seconds", "grouped_expert_forward", "expert_exchange_seconds",
            "mtp_flops_per_token", "moe_terms"]


class TPLayerTimes(NamedTuple):
    """Chapter 8: one block's forward pass under a cluster roof: its matmuls and its two all-reduces
    (seconds, one GPU of the group)."""

    matmuls: float
    exchange: float

    @property
    def compute_share(self) -> float:
        """The share of the block a GPU spends in its matmuls when the all-reduces do not overlap them,
        ``matmuls / (matmuls + exchange)``."""
        return self.matmuls / (self.matmuls + self.exchange)

    @property
    def exchange_over_compute(self) -> float:
        """The all-reduces' time over the matmuls' (above 1, the exchange is the longer)."""
        return self.exchange / self.matmuls


def tp_layer_times(model: Model | str, tp, tokens, roof, *, gpus_per_node=8) -> TPLayerTimes:
    """Chapter 8: :func:`~roofline.parallel.tensor_parallel.layer_times` as this model prices it under ``roof``
    (:func:`layer_seconds`): one block's forward matmuls on ``tokens`` tokens over ``tp`` GPUs, each at the rate
    the roof gives a matmul of its size, against its two all-reduces of ``tokens x hidden`` bf16 activations (no
    sequence parallelism) at the roof's bus bandwidth for that message size, over NVLink inside a node and
    through each GPU's network port across nodes of ``gpus_per_node``. Under the datasheet roof the matmuls run
    at peak (the narrow key and value projections at the HBM rate) and the all-reduces take their transfer
    alone, with no latency."""
    m = check_tp(model, tp)
    t = count("tp", tp)
    tokens = count("tokens", tokens)
    g = count("gpus_per_node", gpus_per_node)
    lay = TrainLayout(seq=tokens, tp=t, recompute="none", sequence_parallel=False, zero_stage=0, gpus_per_node=g)
    s = layer_seconds(m, lay, roof)
    return TPLayerTimes(float(s["matmuls"]), float(s.get("tensor-parallel", 0.0)))


def tp_stack_time(model: Model | str, tp, tokens, roof, *, pp: int = 1, gpus_per_node=8) -> float:
    """Chapter 8, exercise 2: :func:`~roofline.parallel.tensor_parallel.stack_time` under a cluster roof: the
    forward pass of one pipeline stage's ``L / pp`` layers, each its :func:`tp_layer_times` matmuls plus
    all-reduces (no overlap)."""
    m = load_model(model)
    pp = count("pp", pp)
    lt = tp_layer_times(m, tp, tokens, roof, gpus_per_node=gpus_per_node)
    return float(m.num_layers / pp * (lt.matmuls + lt.exchange))


__all__ += ["TPLayerTimes", "tp_layer_times", "tp_stack_time"]


def _price(m: Model, lay: TrainLayout, roof: ClusterRoof, cache: dict) -> StepPrice:
    """:func:`price_step` of a checked layout; ``cache`` keeps the per-layer pieces a search shares."""
    if (lay.dtype == "fp8") != (roof.dtype == "fp8"):
        raise ValueError(f"dtype {lay.dtype!r} is priced under a roof of its own format, got the {roof.dtype} roof "
                         f"{roof.label!r}: get_roof(hardware, kind, {lay.dtype!r})")
    layer_key = _layer_key(lay)
    L, pp, v, mcount = m.num_layers, lay.pp, lay.chunks, lay.micro_batches
    full = -(-L // pp)
    stage, recompute, avg = _stage(m, lay, roof, cache)
    per_mb = stage.total + recompute
    parts: dict[str, float] = {}
    for d in (stage.fwd, stage.bwd):
        for k, t in d.items():
            parts[k] = parts.get(k, 0.0) + t * mcount
    parts["recompute"] = recompute * mcount
    parts["bubble"] = (pp - 1) / v * avg if pp > 1 else 0.0
    # pipeline sends: one micro-batch's boundary activations, split over the tensor-parallel group
    if pp > 1:
        msg = lay.micro_batch * lay.seq / lay.cp * m.hidden_size * 2.0 / lay.tp
        across = lay.tp * lay.cp * lay.dp >= lay.gpus_per_node
        parts["pipeline sends"] = 2 * (mcount * v + pp - 1) * roof.send_time(msg, across_nodes=across)
    # data-parallel reduction of this stage's gradients
    dense, experts, emb = _cached(cache, ("params", lay.tp, lay.pp, lay.ep), lambda: _stage_params(m, lay))
    n_dp = lay.dp * lay.cp
    k_dp = min(n_dp, max(1, lay.gpus_per_node // lay.tp))
    gbytes = 2.0 if lay.grad_dtype == "bf16" or lay.grad_dtype == "fp16" else 4.0
    hidden = {}
    comm = 0.0
    rec = lay.recipe
    if n_dp > 1:
        size = (dense + emb) * gbytes
        # the weights' gather: in fp8 where the recipe casts before it (the embedding and norms stay in bf16)
        wsize = (dense + experts) * 1.0 + emb * 2.0 if rec is not None and rec.fp8_all_gather else size
        s_dp = lay.shards
        k_s = min(s_dp, k_dp)  # members of a shard group in each node

        def gather(nbytes):  # the weights, gathered over a shard group
            return roof.collective_time("all_gather", s_dp, nbytes, per_node=k_s)

        def scatter(nbytes):  # the gradients, reduce-scattered over a shard group and summed across the groups
            return (roof.collective_time("reduce_scatter", s_dp, nbytes, per_node=k_s)
                    + roof.collective_time("all_reduce", n_dp // s_dp, nbytes / s_dp, per_node=max(1, k_dp // s_dp)))

        fwd_mb, bwd_mb = sum(stage.fwd.values()), stage.total - sum(stage.fwd.values())
        if lay.zero_stage == 3 and lay.reshard_after_forward:
            per = 2 * gather(wsize) + scatter(size)
            behind = per_mb if lay.overlap_grad_reduce else 0.0
            comm = mcount * max(0.0, per - behind)
            hidden["data-parallel"] = mcount * per - comm
        elif lay.zero_stage == 3:  # gathered once for the step, kept to the last backward pass, reduced once
            ag, rs = gather(wsize), scatter(size)

            def exposed(t, behind):
                return max(t - behind, min(1.0, 25e6 / max(size, 1.0)) * t) if lay.overlap_grad_reduce else t

            comm = exposed(ag, fwd_mb) + exposed(rs, bwd_mb)
            hidden["data-parallel"] = ag + rs - comm
        else:
            if s_dp == n_dp:
                t = roof.collective_time("all_reduce", n_dp, size, per_node=k_dp)
            else:  # hybrid: reduce-scatter in the group, all-reduce the shard across groups, gather in the group
                t = scatter(size) + gather(size)
            if experts and n_dp // lay.ep > 1:
                t += roof.collective_time("all_reduce", n_dp // lay.ep, experts * gbytes,
                                          per_node=max(1, k_dp // lay.ep))
            behind = bwd_mb if lay.overlap_grad_reduce else 0.0
            bucket = min(1.0, 25e6 / max(size, 1.0)) * t
            comm = max(t - behind, bucket) if lay.overlap_grad_reduce else t
            hidden["data-parallel"] = t - comm
    if m.tie_word_embeddings and pp > 1:  # the tied embedding's gradient, summed between first and last stage
        comm += roof.collective_time("all_reduce", 2, m.vocab_size * m.hidden_size / lay.tp * gbytes, per_node=1)
    parts["data-parallel"] = comm
    held = dense + experts + emb
    # ZeRO shards the dense weights' state over the dp x cp replicas, the experts' over the replicas of each
    # expert (dp x cp / ep)
    def sharded(stage: int) -> float:
        if lay.zero_stage < stage:
            return held
        return (dense + emb) / lay.shards + experts / max(1, n_dp // lay.ep)

    parts["optimizer"] = roof.memory_time(sharded(1) * OPTIMIZER_BYTES[lay.dtype], 10)
    copies = 0.0
    if rec is not None:
        # the weights' casts, once a step where the recipe caches them across micro-batches, and the amaxes of
        # each forward and backward pass all-reduced at once over the GPUs that share the scales
        linear = dense + experts
        times = 1 if rec.weight_cast == "step" else mcount
        cast = linear / lay.shards if rec.fp8_all_gather and lay.zero_stage == 3 else linear  # cast, then gathered
        weight_casts = roof.cast_time(times * cast * rec.bytes_per_operand_element,
                                      times * rec.kernels * rec.casts * 7 * full)
        amax = 0.0
        if rec.amax_reduction == "pass":
            group = lay.tp * lay.cp * lay.dp
            amax = 2 * mcount * roof.collective_time("all_reduce", group, 4.0 * 3 * 7 * full,
                                                     per_node=min(group, lay.gpus_per_node))
        parts["fp8 casts"] = parts.get("fp8 casts", 0.0) + weight_casts + amax
        # the cached fp8 weights (and transposes): sharded with the weights they copy under FSDP
        copies = rec.weight_copy_bytes * (linear / lay.shards if lay.zero_stage == 3 and lay.reshard_after_forward
                                          else linear)
    for k in ("matmuls", "attention", "memory-bound", "fp8 casts", "tensor-parallel", "context-parallel",
              "expert all-to-all", "pipeline sends"):
        parts.setdefault(k, 0.0)
    # memory per GPU: model state, activations in flight on the first stage, the last stage's fp32 logits
    per = state_bytes()
    # weights kept gathered to the backward pass are whole on the GPU at the end of the forward pass, and their
    # gradients, accumulated over the step's micro-batches before the one reduction, whole too
    kept = lay.zero_stage == 3 and not lay.reshard_after_forward
    state = {"weights": (held if kept else sharded(3)) * per["weights"],
             "gradients": (held if kept and mcount > 1 else sharded(2)) * per["gradients"],
             "optimizer": sharded(1) * per["optimizer"]}
    per_layer = _cached(cache, ("acts",) + layer_key, lambda: _layer_activations(m, lay))
    flight = float(in_flight(pp, mcount, v, lay.schedule)) if pp > 1 else 1.0
    acts = per_layer * full * flight
    # the last stage's layers (with the multi-token-prediction layers beside its own) and its logits (one set a head)
    extra = m.mtp_layers
    last_layers = full + extra if pp == 1 or not extra else \
        ((L - (pp - 2) * full) / 2 if pp > 2 and L % pp else full) + extra
    logits = lay.micro_batch * lay.seq / lay.cp * m.vocab_size / lay.tp * 4.0 * (1 + extra)
    if pp == 1:
        acts = per_layer * last_layers
    elif per_layer * last_layers + logits > acts:  # the last stage holds one micro-batch and the logits
        acts = per_layer * last_layers
    else:
        logits = 0.0
    mem_parts = {**state, "activations": acts, "logits": logits}
    if rec is not None:
        mem_parts["fp8 weights"] = copies
    tokens = lay.batch * lay.seq
    model_flops = _cached(cache, ("flops", lay.seq, "none"), lambda: _flops_per_token(m, lay.seq, "none")
                          + mtp_flops_per_token(m, lay.seq, "none")) * tokens
    hw_flops = _cached(cache, ("flops", lay.seq, lay.recompute),
                       lambda: _flops_per_token(m, lay.seq, lay.recompute)
                       + mtp_flops_per_token(m, lay.seq, lay.recompute)) * tokens
    return StepPrice(m, lay, roof, MappingProxyType(parts), MappingProxyType(hidden), float(sum(mem_parts.values())),
                     MappingProxyType(mem_parts), float(model_flops), float(hw_flops))


@dataclass(frozen=True)
class Search:
    """Every layout a search priced under its roof, the fitting ones ranked fastest first (``ranked``), how many
    were priced and how many the constraints refused, and the least memory per GPU of any layout priced."""

    model: Model
    roof: ClusterRoof
    seq: int
    ranked: tuple
    priced: int
    refused: int
    gpus: int
    leanest: float = math.inf

    @property
    def fitting(self) -> int:
        """How many of the layouts priced fit in the usable HBM."""
        return len(self.ranked)

    @property
    def best(self) -> StepPrice:
        """The fastest layout that fits; where none fits, an error that says how far the leanest is from fitting."""
        if not self.ranked:
            hw = self.roof.hardware
            raise ValueError(f"{self.model.title} fits on no layout of the {self.gpus:,} {hw.short}s at seq {self.seq:,}: "
                             f"the leanest of the {self.priced:,} priced needs {fmt(self.leanest, 'B')} per GPU against "
                             f"{fmt(hw.usable_capacity, 'B')} usable (more nodes, a shorter seq, or a smaller model)")
        return self.ranked[0]

    def floors(self, k: int | None = None) -> tuple[StepPrice, ...]:
        """The datasheet floor of each of the ``k`` fastest layouts (all with ``None``): the same layout priced
        under the datasheet roof of the search's chip in the layout's format (:func:`~roofline.core.calibration.get_roof`)."""
        return tuple(_price(self.model, p.layout, get_roof(self.roof.hardware, "datasheet", p.layout.dtype), {})
                     for p in self.ranked[:k])


def _divisors(n: int, most: int) -> list[int]:
    return [d for d in range(1, min(n, most) + 1) if n % d == 0]


def _powers_of_two(most: int) -> tuple:
    out, k = [], 1
    while k <= most:
        out.append(k)
        k *= 2
    return tuple(out)


def degree_grid(model: Model | str, seq: int, gpus_per_node: int = 8) -> dict:
    """The degrees :func:`search` tries unless told otherwise (and ``roofline plan`` always): tensor parallelism
    over every power of two up to a node's GPUs; context parallelism over powers of two up to 16 where the ring's
    zigzag split divides the sequence and each rank keeps at least 1,024 tokens; expert parallelism over the powers
    of two that divide the experts of a mixture of experts (1 for a dense model)."""
    m = load_model(model)
    seq, per_node = count("seq", seq), count("gpus_per_node", gpus_per_node)
    cps = tuple(c for c in _powers_of_two(16) if seq % (2 * c) == 0 and seq // c >= 1024) or (1,)
    eps = (1,) if m.moe is None else tuple(e for e in _powers_of_two(m.moe.num_experts) if m.moe.num_experts % e == 0)
    return {"tps": _powers_of_two(per_node), "cps": cps, "eps": eps}


def search(model: Model | str, roof: ClusterRoof, *, gpus: int, seq: int, global_batch: int, gpus_per_node: int = 8,
           tps=None, cps=None, pps=None, eps=None, micro_batches=(1, 2, 4, 8), recomputes=RECOMPUTES,
           chunks=(1, 2, 4), zero_stages=(0, 1, 3), attention: str = "flash", dtype: str | None = None,
           overlap_grad_reduce: bool = True, sequence_parallel: bool | None = None, dtypes=None,
           fp8_recipe: str | None = None) -> Search:
    """The training-layout planner: price every layout of ``gpus`` GPUs as ``tp x cp x pp x dp`` (``ep`` carved out
    of ``dp x cp``) over the given degrees (``None``: :func:`degree_grid`'s), micro-batches, recomputation policies,
    interleaving depths and ZeRO stages under ``roof``, for ``global_batch`` sequences of ``seq`` tokens; keep those
    that fit and rank them by step time. ``pps`` ``None`` tries every pipeline depth that divides the GPUs left after
    ``tp x cp``. A layout the constraints refuse is counted, not priced; when none is priced (no layout divides the
    global batch) the error says so. ``dtype`` is the matmuls' format (``None``: the roof's); ``dtypes`` searches
    several (``('bf16', 'fp8')``: bf16 and fp8 layouts side by side, each priced under the same chip's roof of its
    format, of the roof's kind; fp8 by ``fp8_recipe``, Transformer Engine's delayed scaling unless named)."""
    m = load_model(model)
    n = count("gpus", gpus)
    seq, batch, per_node = count("seq", seq), count("global_batch", global_batch), count("gpus_per_node", gpus_per_node)
    roof = _check_roof(roof)
    grid = degree_grid(m, seq, per_node)
    tps, cps, eps = (grid[k] if v is None else v for k, v in (("tps", tps), ("cps", cps), ("eps", eps)))
    tps, cps, eps, micro_batches, chunks = (tuple(count(name, x) for x in values) for name, values in (
        ("tps", tps), ("cps", cps), ("eps", eps), ("micro_batches", micro_batches), ("chunks", chunks)))
    pps = None if pps is None else tuple(count("pps", x) for x in pps)
    if dtypes is None:
        dtypes = (roof.dtype if dtype is None else dtype,)
    elif dtype is not None:
        raise ValueError("give dtype or dtypes, not both")
    dtypes = tuple(dict.fromkeys((dtypes,) if isinstance(dtypes, str) else dtypes))
    if not dtypes:
        raise ValueError("dtypes must name at least one format, such as ('bf16', 'fp8')")
    for d in dtypes:
        if d not in OPTIMIZER_BYTES:
            raise unknown_name("dtype", d, OPTIMIZER_BYTES)
    if fp8_recipe is not None:  # refused before anything is priced
        if fp8_recipe not in FP8_RECIPES:
            raise unknown_name("fp8_recipe", fp8_recipe, FP8_RECIPES)
        if "fp8" not in dtypes:
            raise ValueError(f"fp8_recipe ({fp8_recipe!r}) applies to fp8 layouts: dtypes must include 'fp8', "
                             f"got {dtypes}")
    roofs = {d: roof if roof.dtype == d else get_roof(roof.hardware, roof.kind, d) for d in dtypes}
    caches: dict = {d: {} for d in dtypes}
    fitting, priced, refused, leanest = [], 0, 0, math.inf
    for dtype in dtypes:
        roof_d, cache = roofs[dtype], caches[dtype]
        recipe = fp8_recipe if dtype == "fp8" else None
        for lay in _grid(m, n, seq, batch, per_node, tps, cps, pps, eps, micro_batches, recomputes, chunks,
                         zero_stages, attention, dtype, recipe, overlap_grad_reduce, sequence_parallel):
            try:
                check_layout(m, lay)
            except (ValueError, KeyError):
                refused += 1
                continue
            p = _price(m, lay, roof_d, cache)
            priced += 1
            leanest = min(leanest, p.memory)
            if p.fits:
                fitting.append(p)
    if not priced:
        raise ValueError(f"global_batch ({batch:,}) is not divisible by dp x micro_batch of any layout of the {n:,} GPUs")
    # ties (the same work per GPU split another way) go to the plainer layout: fewer splits, no interleaving
    fitting.sort(key=lambda p: (p.time, p.layout.tp * p.layout.cp * p.layout.pp, p.layout.ep, p.layout.chunks,
                                RECOMPUTES.index(p.layout.recompute), p.layout.zero_stage))
    return Search(m, roof, seq, tuple(fitting), priced, refused, n, leanest)


def _grid(m, n, seq, batch, per_node, tps, cps, pps, eps, micro_batches, recomputes, chunks, zero_stages, attention,
          dtype, recipe, overlap_grad_reduce, sequence_parallel):
    """Every layout :func:`search` tries for one format, in its order."""
    for tp in tps:
        for cp in cps:
            if n % (tp * cp):
                continue
            rest = n // (tp * cp)
            for pp in (pps if pps is not None else _divisors(rest, m.num_layers)):
                if rest % pp:
                    continue
                dp = rest // pp
                for ep in eps:
                    for mb in micro_batches:
                        if batch % (dp * mb):
                            continue
                        for rc in recomputes:
                            for v in (chunks if pp > 1 else (1,)):
                                for z in zero_stages:
                                    yield TrainLayout(seq=seq, tp=tp, cp=cp, pp=pp, dp=dp, ep=ep, micro_batch=mb,
                                                      global_batch=batch, recompute=rc,
                                                      schedule="interleaved" if v > 1 else "1f1b", chunks=v,
                                                      zero_stage=z, attention=attention, dtype=dtype,
                                                      grad_dtype="bf16" if dtype == "fp8" else dtype,
                                                      fp8_recipe=recipe, gpus_per_node=per_node,
                                                      overlap_grad_reduce=overlap_grad_reduce,
                                                      sequence_parallel=sequence_parallel)


OPEN_SETTINGS = ("micro_batch", "recompute", "chunks")
"""The settings a source may leave open, which :func:`open_layouts` fills in with every value that runs."""

OPEN_MICRO_BATCHES = (1, 2, 4, 8)
"""The micro-batches an open ``micro_batch`` tries (those that divide the global batch over the replicas)."""


def open_layouts(model: Model | str, layout: TrainLayout, open=()) -> tuple[TrainLayout, ...]:
    """The layouts ``layout`` stands for when the settings named in ``open`` (of :data:`OPEN_SETTINGS`) are left
    open, each checked by :func:`check_layout`; with nothing open, ``(layout,)`` once checked.

    - ``micro_batch``: each of :data:`OPEN_MICRO_BATCHES` (the global batch must be given: a micro-batch that
      changed the tokens of a step would not be the same run);
    - ``recompute``: none, selective and full;
    - ``chunks``: on a pipeline, every depth of interleaving that divides a stage's layers (with
      ``schedule='interleaved'`` two or more, else plain 1F1B too); where no depth runs at any micro-batch,
      plain 1F1B.

    A layout the constraints refuse is left out; when every one is, the first one's error is raised."""
    m = load_model(model)
    open = (open,) if isinstance(open, str) else tuple(open)
    for name in open:
        if name not in OPEN_SETTINGS:
            raise unknown_name("open", name, OPEN_SETTINGS)
    if not isinstance(layout, TrainLayout):
        raise TypeError(f"layout must be a TrainLayout, got {type(layout).__name__}")
    if "micro_batch" in open and layout.global_batch is None:
        raise ValueError("micro_batch 'auto' needs the global batch: with one micro-batch a replica, a larger "
                         "micro-batch would be a larger step, not the same run faster")
    mbs = OPEN_MICRO_BATCHES if "micro_batch" in open else (layout.micro_batch,)
    rcs = RECOMPUTES if "recompute" in open else (layout.recompute,)
    per_stage = -(-m.num_layers // layout.pp) if layout.pp > 0 else 1
    if "chunks" in open and layout.pp > 1:
        least = 2 if layout.schedule == "interleaved" else 1
        depths = tuple(c for c in range(least, per_stage + 1) if per_stage % c == 0) or (1,)
    else:
        depths = (layout.chunks,)

    def variants(chunk_options):
        for mb in mbs:
            for rc in rcs:
                for c in chunk_options:
                    sched = layout.schedule if "chunks" not in open else ("interleaved" if c > 1 else "1f1b")
                    yield replace(layout, micro_batch=mb, recompute=rc, chunks=c, schedule=sched)

    def runnable(chunk_options):
        out, first = [], None
        for lay in variants(chunk_options):
            try:
                check_layout(m, lay)
            except (ValueError, KeyError) as exc:
                first = first or exc
                continue
            out.append(lay)
        return out, first

    found, first = runnable(depths)
    if not found and "chunks" in open and layout.pp > 1:
        found, _ = runnable((1,))
    if not found:
        raise first
    return tuple(found)


def fastest_fitting(model: Model | str, layouts, roof: ClusterRoof) -> StepPrice:
    """The fastest of ``layouts`` under ``roof`` among those that fit in the usable HBM (the fastest of all where
    none fits; the first of equals): the choice a source's open settings are taken at."""
    m = load_model(model)
    roof = _check_roof(roof)
    layouts = tuple(layouts)
    if not layouts:
        raise ValueError("layouts must hold at least one layout")
    cache: dict = {}
    for lay in layouts:
        check_layout(m, lay)
    priced = [_price(m, lay, roof, cache) for lay in layouts]
    fitting = [p for p in priced if p.fits] or priced
    return min(fitting, key=lambda p: p.time)


def estimate_step(model: Model | str, hardware: Hardware | str, layout: TrainLayout, *,
                  roof: str | None = None, open=()) -> tuple[StepPrice, StepPrice | None]:
    """One training step of ``layout`` priced at the datasheet floor and under the chip's calibrated roof:
    ``(floor, estimate)``. ``roof`` is the kind of the estimate (:func:`~roofline.core.calibration.roof_kind`:
    ``None`` for the calibrated roof where the chip has one, 'datasheet' for the floor alone, when the estimate
    is ``None``). The layout's ``dtype`` picks the peak both divide by.

    ``open`` names the settings a source left open (:data:`OPEN_SETTINGS`): the layout priced is then the
    fastest of :func:`open_layouts` that fits, chosen under the estimate (under the floor where there is no
    estimate), and both prices are of that layout (``estimate.layout`` says what was picked). Appendix C's
    development checks and ``roofline train --micro-batch auto`` come through here."""
    m = load_model(model)
    hw = get_hardware(hardware)
    kind = roof_kind(hw, roof)
    candidates = open_layouts(m, layout, open)
    est_roof = get_roof(hw, kind, layout.dtype)
    chosen = fastest_fitting(m, candidates, est_roof) if len(candidates) > 1 else None
    picked = chosen.layout if chosen is not None else candidates[0]
    floor = _price(m, picked, get_roof(hw, "datasheet", layout.dtype), {})
    if kind != "calibrated":
        return floor, None
    return floor, (chosen if chosen is not None else _price(m, picked, est_roof, {}))


def fp8_training(model: Model | str, hardware: Hardware | str, layout: TrainLayout, recipes=None, *,
                 roof: str | None = None) -> dict:
    """Chapter 6: ``layout`` priced in bf16 and under each fp8 recipe of ``recipes`` (``None``: every recipe of
    :data:`~roofline.core.fp8.FP8_RECIPES`), everything else held: ``{'bf16': (floor, estimate), 'te-delayed':
    (floor, estimate), ...}`` through :func:`estimate_step` (``roof`` as there)."""
    if not isinstance(layout, TrainLayout):
        raise TypeError(f"layout must be a TrainLayout, got {type(layout).__name__}")
    names = tuple(FP8_RECIPES) if recipes is None else ((recipes,) if isinstance(recipes, str) else tuple(recipes))
    out = {"bf16": estimate_step(model, hardware, replace(layout, dtype="bf16", fp8_recipe=None, grad_dtype="bf16"),
                                 roof=roof)}
    for name in names:
        out[fp8_recipe(name).name] = estimate_step(model, hardware, replace(layout, dtype="fp8", fp8_recipe=name,
                                                                            grad_dtype="bf16"), roof=roof)
    return out


def fastest_recipe(priced: Mapping) -> str:
    """Chapter 6: the fp8 recipe of :func:`fp8_training`'s mapping whose step is shortest (under the estimate where
    there is one, else the floor; 'bf16' left out)."""
    names = [k for k in priced if k != "bf16"]
    if not names:
        raise ValueError("priced must hold at least one fp8 recipe beside 'bf16'")
    return min(names, key=lambda k: (priced[k][1] or priced[k][0]).time)


def fp8_speedup_bound(price: "StepPrice") -> float:
    """Chapter 6: the speed-up fp8 would give a bf16 step ``price`` if it halved the matmuls and added nothing:
    ``time / (time - matmuls / 2)``, Amdahl's bound for a part of the step run twice as fast."""
    if not isinstance(price, StepPrice):
        raise TypeError(f"price must be a StepPrice, got {type(price).__name__}")
    if price.layout.dtype == "fp8":
        raise ValueError("price must be of a bf16 or fp16 step: the bound is what fp8 could buy it")
    return price.time / (price.time - price.parts["matmuls"] / 2)


PART_ORDER = ("matmuls", "attention", "memory-bound", "fp8 casts", "recompute", "tensor-parallel", "context-parallel",
              "expert all-to-all", "pipeline sends", "data-parallel", "bubble", "optimizer")
"""The parts of a :class:`StepPrice`, in the order the book's figures stack them."""


def part_shares(price: StepPrice) -> dict:
    """Each part of ``price`` as a share of its step, in :data:`PART_ORDER`."""
    return {k: price.parts.get(k, 0.0) / price.time for k in PART_ORDER}


def part_gaps(floor: StepPrice, estimate: StepPrice) -> dict:
    """Seconds each part of ``estimate`` adds over the same part of ``floor`` (the same layout under the
    datasheet's roof), in :data:`PART_ORDER`; they add up to the difference of the two steps."""
    return {k: estimate.parts.get(k, 0.0) - floor.parts.get(k, 0.0) for k in PART_ORDER}


def token_rate_per_gpu(price: StepPrice, hidden=()) -> float:
    """Chapter 10: tokens a second each GPU trains under ``price``, with the parts named in ``hidden`` (for
    example ``('expert all-to-all',)``) taken out of the step as if they ran wholly behind compute: the batch's
    tokens over the remaining seconds and the GPUs."""
    if not isinstance(price, StepPrice):
        raise TypeError(f"price must be a StepPrice, got {type(price).__name__}")
    hidden = (hidden,) if isinstance(hidden, str) else tuple(hidden)
    for name in hidden:
        if name not in price.parts:
            raise unknown_name("hidden", name, price.parts)
    seconds = price.time - sum(price.parts[k] for k in hidden)
    return price.layout.batch * price.layout.seq / (seconds * price.layout.gpus)


__all__ += ["fp8_training", "fastest_recipe", "fp8_speedup_bound", "degree_grid", "estimate_step", "OPEN_SETTINGS", "OPEN_MICRO_BATCHES", "open_layouts", "fastest_fitting", "PART_ORDER", "part_shares", "part_gaps", "token_rate_per_gpu"]
