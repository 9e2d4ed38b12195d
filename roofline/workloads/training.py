"""Training arithmetic: FLOPs per token, MFU and HFU, model-state memory (chapters 1 and 2), and the
training step that chapter 3 prices policy by policy (:func:`training_step`, :func:`plan_training`).

Kaplan and colleagues (arXiv:2001.08361, 2020): a dense transformer costs about
6N FLOPs per token to train, 2N forward and 4N backward (gradients with respect to both inputs and
weights). That rule leaves out attention's quadratic term; ``attention_context`` adds it back.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from roofline.core.checks import number
from roofline.core.cost import Breakdown
from roofline.core.hardware import Hardware, get_hardware, require_links
from roofline.workloads.inference import prefill
from roofline.workloads.memory import (FitsOnItsHardware, Footprint, layer_activations, model_state, offloaded_bytes,
                                       training_footprint)
from roofline.core.model import Model, NotModelledError, load_model, param_count
from roofline.core.network import data_parallel_bytes, gpu_count
from roofline.core.ops import attention_flops
from roofline.core.policies import RECOMPUTE, recompute_policy
from roofline.core.roof import Prediction, predict

__all__ = [
    "RECOMPUTE",
    "training_flops_per_token",
    "mfu",
    "hfu",
    "tokens_per_s_at_mfu",
    "model_state_bytes",
    "gradient_sync_tokens",
    "MFU_REPORTS",
    "MfuReport",
    "PUBLISHED",
    "PHASES",
    "training_step",
    "TrainingPlan",
    "plan_training",
    "offload_hiding_seq",
    "best_plan",
    "layer_forward_flops",
    "fitting_plans",
    "FrontierPoint",
    "frontier", "check_dense"]



def training_flops_per_token(model: Model | str | float, *, recompute: str = "none", attention_context=None):
    """FLOPs to train on one token: 6N (8N with full recomputation; selective adds only attention).

    ``model`` is a :class:`Model`, a shipped model's name, or a parameter count N. For a
    mixture-of-experts model N is the active count, the weights each token meets. With
    ``attention_context`` (tokens per sequence, needs a Model) the causal attention products are
    added: forward ``2 * context * width * layers`` per token, times 3 for forward and backward
    (times 4 when recomputed, selectively or fully). The policies are :data:`roofline.core.policies.RECOMPUTE`.
    """
    policy = recompute_policy(recompute)
    flops = policy.param_flops * param_count(model, active=True)
    if attention_context is not None:
        if not isinstance(model, (Model, str)):
            raise TypeError("attention_context needs the model's shape: pass a Model or a model name, not a count")
        m = load_model(model)
        context = number("attention_context", attention_context, integer=True)
        forward = attention_flops(context, context, m.attention_width, m.num_layers, causal="half") / context
        flops = flops + forward * policy.attention_passes
    return flops


def mfu(tokens_per_s, model, gpus, hardware: Hardware | str, *, dtype: str = "bf16", attention_context=None):
    """Model FLOPs Utilization: the FLOPs the model needs (6N per token) over what the GPUs could do.

    ``tokens_per_s`` is the whole job's throughput over ``gpus`` GPUs.
    """
    tokens_per_s = number("tokens_per_s", tokens_per_s)
    gpus = number("gpus", gpus, integer=True)
    peak = get_hardware(hardware).peak_flops(dtype)
    need = training_flops_per_token(model, attention_context=attention_context)
    return _fraction_of_peak("MFU", tokens_per_s * need / (gpus * peak), tokens_per_s, gpus)


def hfu(tokens_per_s, model, gpus, hardware: Hardware | str, *, recompute: str = "full", dtype: str = "bf16",
        attention_context=None):
    """Hardware FLOPs Utilization: counts the FLOPs the hardware actually ran, recomputation included.

    HFU >= MFU always; the gap is the price of recomputing activations (chapter 3).
    """
    tokens_per_s = number("tokens_per_s", tokens_per_s)
    gpus = number("gpus", gpus, integer=True)
    peak = get_hardware(hardware).peak_flops(dtype)
    ran = training_flops_per_token(model, recompute=recompute, attention_context=attention_context)
    return _fraction_of_peak("HFU", tokens_per_s * ran / (gpus * peak), tokens_per_s, gpus)


def _fraction_of_peak(what: str, value, tokens_per_s, gpus):
    """A utilization, or an error where it exceeds 1 (more FLOP/s than the GPUs' peak), as
    :func:`tokens_per_s_at_mfu` refuses an MFU above 1."""
    if np.any(np.asarray(value) > 1 + 1e-9):  # a rounding error's worth above 1 is 1
        worst = float(np.max(value))
        raise ValueError(f"tokens_per_s {tokens_per_s!r} on gpus {gpus!r} implies an {what} of {worst:,.3g}, above 1: "
                         "more FLOP/s than the GPUs' peak; check tokens_per_s (the whole job's), gpus, the model and dtype")
    return value


def tokens_per_s_at_mfu(mfu_: ArrayLike, model, hardware: Hardware | str, *, gpus=1, dtype: str = "bf16", attention_context=None):
    """Training throughput (tokens/s over ``gpus`` GPUs) that a given MFU implies: MFU backed out."""
    mfu_ = number("mfu", mfu_)
    if np.any(np.asarray(mfu_) > 1):
        raise ValueError(f"mfu is a fraction of peak and cannot exceed 1, got {mfu_!r}")
    gpus = number("gpus", gpus, integer=True)
    peak = get_hardware(hardware).peak_flops(dtype)
    return mfu_ * gpus * peak / training_flops_per_token(model, attention_context=attention_context)


def model_state_bytes(model, recipe: str = "mixed-adam"):
    """Memory for weights, gradients and optimizer state before any activation (16 B/param for
    mixed precision with Adam: 128.5 GB for Llama 3 8B). The recipes, and the footprint part by
    part, are in :mod:`roofline.workloads.memory` (chapter 2)."""
    return model_state(model, recipe).total


@dataclass(frozen=True)
class MfuReport:
    """A published MFU and the run it was measured on: GPUs and the sequence length of that stage."""

    mfu: float
    gpus: int
    seq: int
    source: str


_LLAMA3 = "Grattafiori and colleagues, the Llama 3 paper (arXiv:2407.21783, 2024), section 3.3.2, Table 4"

# Reported MFU, one entry per stage of a run, each with the sequence length it ran at: the same MFU
# implies fewer tokens per second at long sequences, where attention adds FLOPs per token.
MFU_REPORTS = {
    "Llama 3 405B, 8,192 H100s, 8,192-token sequences": MfuReport(
        0.43, 8192, 8192, f"{_LLAMA3}: TP 8, CP 1, PP 16, DP 64, 430 TFLOP/s per GPU, 43% BF16 MFU"),
    "Llama 3 405B, 16,384 H100s, 8,192-token sequences": MfuReport(
        0.41, 16384, 8192, f"{_LLAMA3}: TP 8, CP 1, PP 16, DP 128, 400 TFLOP/s per GPU, 41% BF16 MFU"),
    "Llama 3 405B, 16,384 H100s, 131,072-token sequences": MfuReport(
        0.38, 16384, 131072, f"{_LLAMA3}: long-context stage, TP 8, CP 16, PP 16, DP 8, 380 TFLOP/s per GPU, "
                             "38% BF16 MFU"),
}


def gradient_sync_tokens(model, hardware: Hardware | str, gpus, link: str = "network", *, zero_stage: int = 0,
                         dtype: str = "bf16"):
    """Chapter 1's network roofline: the tokens each GPU must process per training step for the step's
    arithmetic, at peak, to take as long as its data-parallel gradient exchange over ``link``.

    The same max(compute, communication) argument as the HBM roofline, with the link in place of HBM:
    compute takes ``6 N t / P_peak`` for ``t`` tokens per GPU, the ring all-reduce of bf16 gradients
    ``2 (G-1)/G * 2N / B_link`` (:func:`roofline.core.network.data_parallel_bytes`). They are equal at
    ``t* = 2 (G-1)/G * 2 P_peak / (6 B_link)``: N cancels, so the threshold is a property of the link
    and the chip, a ridge point of the network. Below ``t*`` the exchange cannot hide behind the
    arithmetic even with perfect overlap. ``link`` is an interconnect level of the GPU ('scale_up' for
    NVLink, 'network' for InfiniBand, 'host' for PCIe).
    """
    hw = get_hardware(hardware)
    hw.link(link, name="link")
    n = param_count(model)
    sent = data_parallel_bytes(n, gpus, zero_stage=zero_stage)
    return sent * hw.peak_flops(dtype) / (hw.interconnect[link].each_way * training_flops_per_token(n))


# --------------------------------------------------------------------------------------------
# Chapter 3: the training step, kernel by kernel, and what each recompute policy costs in it

# Published figures chapter 3 compares with, each with its source (checked against the papers' abstracts).
PUBLISHED = {
    "korthikanti_memory_reduction": (5.0, "Korthikanti et al. 2022 (arXiv:2205.05198), abstract: activation memory "
                                          "reduced 5x by sequence parallelism with selective recomputation"),
    "korthikanti_overhead_cut": (0.90, "same abstract: execution-time overhead of recomputation cut by over 90%"),
    "korthikanti_530b_mfu_selective": (0.542, "same abstract: MFU of a 530B GPT on 2,240 A100s with their method"),
    "korthikanti_530b_mfu_full": (0.421, "same abstract: MFU of the same run with full recomputation"),
    "korthikanti_530b_gpus": (2240, "same abstract: the A100s of that run"),
    "palm_mfu": (0.462, "Chowdhery et al. 2022 (arXiv:2204.02311), PaLM 540B on 6,144 TPU v4 chips: model FLOPs utilization"),
    "palm_hfu": (0.578, "same paper: hardware FLOPs utilization, rematerialization included"),
    "chen_memory_before": (48e9, "Chen et al. 2016 (arXiv:1604.06174), abstract: a 1,000-layer residual network, 48 GB"),
    "chen_memory_after": (7e9, "same abstract: 7 GB with sublinear checkpointing"),
    "chen_time_overhead": (0.30, "same abstract: about 30% more running time"),
}

PHASES = ("forward", "backward", "recompute")

_OUTSIDE_LAYERS = frozenset({"embedding", "final_norm", "lm_head", "sample"})
_ATTENTION_CORE = frozenset({"attention", "scores", "softmax", "pv"})  # what selective recomputation reruns
_ELEMENTWISE_REBUILT = frozenset({"attn_norm", "rope", "mlp_norm", "act"})  # what 'matmul-outputs' reruns


# What a causal model needs of explicit attention's score and value products: the rest is the masked half of
# the square, which the kernel computes and the model throws away (hardware FLOPs, never model FLOPs).
_SQUARE_PRODUCTS = frozenset({"scores", "pv"})


def _phase(op, phase: str, factor: float, needed: float = 1.0):
    """``op`` run ``factor`` times its forward work, all of it in the part ``phase``. A backward matmul is
    two launches of the forward's size (the gradients of the input and of the weight). For explicit
    attention's square products, only the ``needed`` share of the FLOPs (the causal triangle) is ``phase``
    work; the rest goes to the part 'masked', FLOPs the GPU runs and the model does not need."""
    count = op.count * 2 if (phase == "backward" and op.kind == "matmul") else op.count
    flops, reads, writes = op.flops * factor, op.reads * factor, op.writes * factor
    split_flops = {phase: flops}
    if op.name in _SQUARE_PRODUCTS and needed < 1 and phase != "recompute":
        split_flops = {phase: flops * needed, "masked": flops * (1 - needed)}
    return op._replace(name=op.name if phase == "forward" else f"{op.name} ({phase})", flops=flops, reads=reads,
                       writes=writes, count=count, split=(split_flops, {phase: reads}, {phase: writes}))


def check_dense(m: Model, what: str) -> None:
    if m.moe is not None or m.mla is not None:
        raise NotModelledError(f"{what} counts a dense decoder layer's saved tensors; {m.name} has "
                               f"{'experts' if m.moe is not None else 'latent attention'}, which it does not model yet")


def training_step(model: Model | str, seq, micro_batch=1, *, recompute: str = "none", attention: str = "flash",
                  dtype: str = "bf16") -> Breakdown:
    """One micro-batch of training, kernel by kernel, in three parts (chapter 3): the forward pass (the
    refined prefill's kernels over every token, logits included, no KV cache written), the backward pass
    (every kernel's work twice over: the gradients of its inputs and of its weights) and what the policy
    runs again: nothing for 'none', the attention core for 'selective', every layer's forward for
    'full' and 'every-K', the norms, RoPE and the activation function (elementwise kernels: bytes, no
    FLOPs) for 'matmul-outputs' (with explicit attention, the attention core too).

    Model FLOPs are ``forward + backward``; hardware FLOPs (``step.flops``) add ``recompute`` and, with
    explicit attention, ``masked``. This is the book's one definition of model FLOPs (MFU's, after PaLM,
    Chowdhery et al. 2022, appendix B): the FLOPs of one forward and one backward pass of the model, whatever
    the implementation, with causal attention counted as the model needs it, the triangle of token pairs
    (each query against itself and the keys before it), not the whole square. PaLM's formula counts the
    whole square; ours halves attention's share of it. So flash and explicit attention have the same model
    FLOPs; explicit attention's masked half is hardware work, like recomputation. A flash kernel's backward
    recomputes its scores inside the kernel; like Korthikanti et al., this count does not add them.
    """
    policy = recompute_policy(recompute)
    m = load_model(model)
    seq = number("seq", seq, integer=True)
    micro_batch = number("micro_batch", micro_batch, integer=True)
    check_dense(m, "training_step")
    fwd = prefill(m, seq, micro_batch, accounting="refined", attention=attention, dtype=dtype)
    forward = [op for op in fwd.ops if op.name not in ("sample", "kv_write")]
    needed = 1.0
    if attention == "explicit":  # the causal triangle of the square the explicit products compute
        causal = prefill(m, seq, micro_batch, accounting="refined", attention="flash", dtype=dtype).op("attention").flops
        needed = float(causal) / float(sum(op.flops for op in forward if op.name in _SQUARE_PRODUCTS))
    ops = ([_phase(op, "forward", 1, needed) for op in forward]
           + [_phase(op, "backward", 2, needed) for op in forward])
    if policy.every:
        ops += [_phase(op, "recompute", 1) for op in forward if op.name not in _OUTSIDE_LAYERS]
    elif policy.name == "selective" or (policy.name == "matmul-outputs" and attention == "explicit"):
        # an explicit softmax output is not a matmul's: 'matmul-outputs' rebuilds it, and the core with it
        ops += [_phase(op, "recompute", 1) for op in forward if op.name in _ATTENTION_CORE]
    if policy.name == "matmul-outputs":  # the elementwise work it rebuilds: bytes, no FLOPs in this count
        ops += [_phase(op, "recompute", 1) for op in forward if op.name in _ELEMENTWISE_REBUILT]
    return Breakdown.from_ops(f"training step of {m.title}, recompute {policy.name}", ops, fwd.formats, order=PHASES)


@dataclass(frozen=True)
class TrainingPlan(FitsOnItsHardware):
    """What one GPU does in one training step of one micro-batch under a policy (chapter 3, and the
    ``roofline train`` command): memory by component, FLOPs, the time and the utilizations.

    ``time`` is the compute time (the roofline floor of :attr:`step` under ``timing``, or the hardware
    FLOPs at the ``achieved`` fraction of peak), overlapped with the data-parallel traffic of the step
    (``network_time``), plus what offloading cannot hide behind the compute (``offload_exposed``).
    """

    model: Model
    hardware: Hardware
    gpus: int
    seq: int
    micro_batch: int
    recompute: str
    zero_stage: int
    offload: bool
    achieved: float | None
    footprint: Footprint
    step: Breakdown
    prediction: Prediction
    compute_time: float
    network_time: float
    network_link: str
    offload_bytes: float
    offload_time: float
    offload_exposed: float

    @property
    def tokens(self) -> int:
        return self.seq * self.micro_batch

    @property
    def model_flops(self):
        """The FLOPs the model needs: forward and backward, no recomputation."""
        return self.step["forward"].flops + self.step["backward"].flops

    @property
    def hardware_flops(self):
        """The FLOPs the GPU runs: the model's plus what the policy recomputes."""
        return self.step.flops

    @property
    def time(self):
        return max(self.compute_time, self.network_time) + self.offload_exposed

    @property
    def peak(self) -> float:
        return self.hardware.peak_flops(self.step.formats.math)

    @property
    def mfu(self):
        return self.model_flops / (self.time * self.peak)

    @property
    def hfu(self):
        return self.hardware_flops / (self.time * self.peak)

    @property
    def tokens_per_s(self):
        """Tokens per second on this GPU."""
        return self.tokens / self.time


def _link(hw: Hardware, gpus: int) -> str:
    """The link the data-parallel traffic crosses: the scale-up link inside a node of eight, else the network."""
    if gpus <= 8 and "scale_up" in hw.interconnect:
        return "scale_up"
    if "network" in hw.interconnect:
        return "network"
    if gpus > 1 and not hw.interconnect:  # nothing to send the gradients over
        require_links(hw, [("scale_up", "host")] if gpus <= 8 else ["network"], f"data parallelism over {gpus:,} GPUs")
    return next(iter(hw.interconnect), "")


def plan_training(model: Model | str, hardware: Hardware | str, *, seq, micro_batch=1, gpus=1, recompute: str = "none",
                  zero_stage: int = 0, offload: bool = False, achieved=None, timing: str = "step",
                  attention: str = "flash", recipe: str = "mixed-adam") -> TrainingPlan:
    """Does a training step fit on each of ``gpus`` GPUs, and how fast can it go (chapter 3)?

    ``recompute`` is 'none', 'selective', 'full', 'matmul-outputs' or 'every-K'; ``zero_stage`` shards the model state over
    the ``gpus`` data-parallel GPUs; ``offload`` keeps the saved activations in host memory, sent over
    the GPU's host link (PCIe) layer by layer in the forward pass and fetched back in the backward pass.
    ``achieved`` is the fraction of peak the GPU's FLOPs run at (the HFU it would reach with nothing
    exposed); without it the compute time is the roofline floor of the step under ``timing``.
    One micro-batch per step: the data-parallel traffic (:func:`~roofline.core.network.data_parallel_bytes`)
    is sent once per micro-batch, over NVLink inside a node of eight, over the network beyond.
    """
    m, hw = load_model(model), get_hardware(hardware)
    check_dense(m, "plan_training")
    gpus = gpu_count("gpus", gpus)
    seq = int(number("seq", seq, integer=True))
    micro_batch = int(number("micro_batch", micro_batch, integer=True))
    policy = recompute_policy(recompute)
    if not isinstance(offload, bool):
        raise TypeError(f"offload must be True or False, got {offload!r}")
    if achieved is not None:
        achieved = float(number("achieved", achieved))
        if achieved > 1:
            raise ValueError(f"achieved is a fraction of peak and cannot exceed 1, got {achieved!r}")
    flash = attention == "flash"
    footprint = training_footprint(m, seq, micro_batch, gpus=gpus, zero_stage=zero_stage, recipe=recipe,
                                   recompute=policy.name, flash=flash, offload=offload)
    step = training_step(m, seq, micro_batch, recompute=policy.name, attention=attention)
    prediction = predict(step, hw, timing=timing)
    peak = hw.peak_flops(step.formats.math)
    rate = peak if achieved is None else achieved * peak
    compute = float(prediction.time) if achieved is None else float(step.flops) / rate
    link = _link(hw, gpus)
    sent = data_parallel_bytes(param_count(m), gpus, zero_stage=zero_stage) if gpus > 1 else 0.0
    network = sent / hw.interconnect[link].each_way if sent else 0.0
    host_bytes = exposed = host_time = 0.0
    if offload:
        require_links(hw, ["host"], "offload")
        per_layer_bytes = float(offloaded_bytes(m, seq, micro_batch, recompute=policy.name, flash=flash))
        host_bytes = per_layer_bytes * m.num_layers
        per_layer = per_layer_bytes / hw.interconnect["host"].each_way
        host_time = per_layer * m.num_layers
        layer_forward = layer_forward_flops(m, seq) * seq * micro_batch / rate
        # out in the forward pass behind the next layer's forward; back in the backward pass behind the
        # layer after it (its backward, and its recomputation when there is one)
        layer_backward = layer_forward * (3 if policy.every else 2)
        exposed = m.num_layers * (max(0.0, per_layer - layer_forward) + max(0.0, per_layer - layer_backward))
    return TrainingPlan(m, hw, gpus, seq, micro_batch, policy.name, zero_stage, offload, achieved, footprint, step,
                        prediction, compute, network, link, host_bytes, host_time, exposed)


def layer_forward_flops(model: Model | str, seq):
    """Forward FLOPs of one layer per token at ``seq`` tokens per sequence (chapter 3): ``2 N_layer`` for
    the matmuls and ``2 s d`` for causal attention (half the square). Llama 3 8B at 4,096 tokens:
    about 470 MFLOP."""
    m = load_model(model)
    return 2 * m.layer_matmul_params + attention_flops(seq, seq, m.attention_width, causal="half") / seq


def offload_hiding_seq(model: Model | str, hardware: Hardware | str, *, recompute: str = "none", achieved=1.0,
                       flash: bool = True, link: str = "host"):
    """The sequence length from which offloading a layer's kept activations over ``link`` hides behind
    the next layer's forward pass (chapter 3); ``inf`` if it never does, 1 if it always does.

    Per token and per layer the transfer takes ``A_tok(s) / B_link`` (``A_tok`` the bytes the policy
    keeps, constant in ``s`` with a flash kernel) and the forward pass ``(2 N_layer + 2 s d) / (achieved
    P_peak)`` (:func:`layer_forward_flops`); the attention term grows with ``s``, so past the returned
    length the transfer is the shorter. The micro-batch cancels. Where the kept bytes grow with ``s``
    faster than the FLOPs (explicit attention's scores), no length is long enough: ``inf``.
    """
    m, hw = load_model(model), get_hardware(hardware)
    check_dense(m, "offload_hiding_seq")
    achieved = float(number("achieved", achieved))
    hw.link(link, name="link")
    ratio = achieved * hw.peak_flops("bf16") / hw.interconnect[link].each_way  # FLOPs per byte sent
    # a(s) = a0 + a1 s per token per layer (a1 = 0 but for explicit attention's score-sized tensors)
    a1_2, a1_1 = (float(layer_activations(m, s, 1, recompute=recompute, flash=flash)[0]) / m.num_layers / s
                  for s in (2, 1))
    a1 = a1_2 - a1_1
    a0 = a1_1 - a1
    f1 = float(layer_forward_flops(m, 2) - layer_forward_flops(m, 1))  # f(s) = f0 + f1 s per token per layer
    f0 = float(layer_forward_flops(m, 1)) - f1
    # hides when f0 + f1 s >= ratio (a0 + a1 s)
    slope = f1 - ratio * a1
    gap = ratio * a0 - f0
    if slope < 0 or (slope == 0 and gap > 0):
        return float("inf")  # the transfer outgrows the compute, or never falls behind it
    if gap <= 0:
        return 1
    return int(np.ceil(gap / slope))


def best_plan(model: Model | str, hardware: Hardware | str, *, seq, micro_batch=1, policies=None, **kwargs):
    """The fastest plan that fits, among ``policies`` (default: none, selective, full, every-2,
    every-4 and every-8, each with and without offloading), for one sequence length and micro-batch (chapter 3).
    None when nothing fits. ``kwargs`` go to :func:`plan_training` (gpus, zero_stage, achieved...).
    A tie in time goes to the plan without offloading, then to the smaller footprint."""
    if policies is None:
        policies = [(p, o) for p in ("none", "selective", "full", "every-2", "every-4", "every-8")
                    for o in (False, True)]
    plans = [plan_training(model, hardware, seq=seq, micro_batch=micro_batch, recompute=p, offload=o, **kwargs)
             for p, o in policies]
    fitting = [p for p in plans if p.fits]
    if not fitting:
        return None
    return min(fitting, key=lambda p: (round(p.time, 12), p.offload, float(p.footprint.total)))


@dataclass(frozen=True)
class FrontierPoint:
    """One policy on the memory/FLOPs plane: the activation bytes on the GPU at the peak (kept tensors
    plus the recompute working set), the FLOPs the GPU runs beyond the model's (recomputation, and explicit
    attention's masked half) as a fraction of the model's, the bytes sent to host memory (0 without offloading)."""

    label: str
    recompute: str
    attention: str
    offload: bool
    memory: float
    extra_flops: float
    host_bytes: float


def frontier(model: Model | str, seq, micro_batch=1, *, spacings=None) -> list[FrontierPoint]:
    """Every policy's activation memory against its extra FLOPs for one micro-batch (chapter 3's
    frontier): no recomputation and selective recomputation with explicit attention, no recomputation
    with a flash kernel, the matmuls' outputs kept with a flash kernel, checkpoints every ``k`` layers for each ``k`` of ``spacings`` (default 1 to L;
    ``k = 1`` is full recomputation), and offloading with and without full recomputation."""
    m = load_model(model)
    check_dense(m, "frontier")
    spacings = range(1, m.num_layers + 1) if spacings is None else spacings
    cases = [("no recompute, explicit attention", "none", "explicit", False),
             ("selective, explicit attention", "selective", "explicit", False),
             ("no recompute, flash", "none", "flash", False),
             ("matmul outputs, flash", "matmul-outputs", "flash", False)]
    cases += [("full (every layer)" if k == 1 else f"every {k} layers", f"every-{k}", "flash", False) for k in spacings]
    cases += [("offload, no recompute", "none", "flash", True), ("offload + full", "full", "flash", True)]
    points = []
    for label, policy, attention, offload in cases:
        step = training_step(m, seq, micro_batch, recompute=policy, attention=attention)
        fp = training_footprint(m, seq, micro_batch, recompute=policy, flash=attention == "flash", offload=offload)
        host = float(fp.host)
        model_flops = step["forward"].flops + step["backward"].flops
        extra = (step.flops - model_flops) / model_flops  # recomputed, and explicit attention's masked half
        points.append(FrontierPoint(label, policy, attention, offload,
                                    float(fp["activations"] + fp["recompute working set"]), float(extra), host))
    return points


def fitting_plans(model: Model | str, hardware: Hardware | str, *, seq, max_micro_batch: int = 64, **kwargs):
    """The plans of micro-batch 1, 2, ... that fit, up to the first that does not (memory grows with the
    micro-batch, so none after it would); ``kwargs`` go to :func:`plan_training`. Chapter 3 reads the
    largest micro-batch each policy allows from it."""
    out = []
    for b in range(1, int(number("max_micro_batch", max_micro_batch, integer=True)) + 1):
        plan = plan_training(model, hardware, seq=seq, micro_batch=b, **kwargs)
        if not plan.fits:
            break
        out.append(plan)
    return out


# --------------------------------------------------------------------------------------------------------------
# Chapter 3's quoted ratios, as functions (the notebook only calls, picks and glues)
# --------------------------------------------------------------------------------------------------------------

def recompute_overhead(step: Breakdown) -> float:
    """The FLOPs a policy reruns as a fraction of the model's (chapter 3): the ``recompute`` part of a
    :func:`training_step` over its ``forward`` and ``backward`` parts (full: about a third)."""
    if not isinstance(step, Breakdown) or "recompute" not in step.parts:
        raise TypeError(f"step must be a training_step Breakdown with a 'recompute' part, got {type(step).__name__}")
    return step["recompute"].flops / (step["forward"].flops + step["backward"].flops)


__all__ += ["recompute_overhead"]


def mfu_ceiling(step: Breakdown) -> float:
    """The highest MFU a policy allows even at HFU 1 (chapter 3): the model's FLOPs (forward and
    backward) over all the FLOPs the step runs, recomputation included."""
    if not isinstance(step, Breakdown) or "forward" not in step.parts:
        raise TypeError(f"step must be a training_step Breakdown, got {type(step).__name__}")
    return (step["forward"].flops + step["backward"].flops) / step.flops


__all__ += ["mfu_ceiling"]


def full_recompute_extra() -> float:
    """The law's extra work of full recomputation (chapter 3): a step is ``6N`` FLOPs per token, rerunning
    the forward adds ``2N``, so ``8N / 6N - 1``, a third."""
    return 8 / 6 - 1


__all__ += ["full_recompute_extra"]


def forward_share(step: Breakdown, op: str) -> float:
    """One op's share of a training step's forward FLOPs (chapter 3: the output head's)."""
    if not isinstance(step, Breakdown) or "forward" not in step.parts:
        raise TypeError(f"step must be a training_step Breakdown, got {type(step).__name__}")
    return step.op(op).flops / step["forward"].flops


__all__ += ["forward_share"]


def layer_forward_flops_terms(model: Model | str) -> tuple:
    """The two terms of :func:`layer_forward_flops` per token (chapter 3): ``(2 N_layer, 2 d)``, so that
    ``f(s) = 2 N_layer + 2 d s``."""
    m = load_model(model)
    return 2 * m.layer_matmul_params, 2 * m.attention_width


__all__ += ["layer_forward_flops_terms"]


def offload_intensity(model: Model | str, seq, *, recompute: str = "none", flash: bool = True) -> float:
    """FLOPs of a layer's forward per byte it keeps (chapter 3), per token at ``seq`` tokens: what the
    host link's ridge is compared with to see whether offloading hides (:func:`offload_hiding_seq`)."""
    from roofline.workloads.memory import kept_bytes_per_token_layer

    seq = number("seq", seq, integer=True)
    return layer_forward_flops(model, seq) / kept_bytes_per_token_layer(model, seq, recompute=recompute, flash=flash)


__all__ += ["offload_intensity"]


def micro_batches_to_hide(plan: TrainingPlan) -> int:
    """The micro-batch count at which a plan's compute covers its network time (chapter 3): the
    step's network time over its compute time, rounded up."""
    if not isinstance(plan, TrainingPlan):
        raise TypeError(f"plan must be a TrainingPlan, got {type(plan).__name__}")
    return int(np.ceil(plan.network_time / plan.compute_time))


__all__ += ["micro_batches_to_hide"]


def flops_by_micro_batch(plans, what: str = "mfu", max_micro_batch: int = 64) -> np.ndarray:
    """FLOP/s per GPU of each plan, placed at its micro-batch (1 to ``max_micro_batch``; NaN where no plan
    fits), chapter 3's throughput chart: ``what`` ('mfu': the model's FLOP/s; 'hfu': the hardware's)
    times the peak."""
    if what not in ("mfu", "hfu"):
        raise ValueError(f"what must be 'mfu' or 'hfu', got {what!r}")
    n = int(number("max_micro_batch", max_micro_batch, integer=True))
    y = np.full(n, np.nan)
    for p in plans:
        if not 1 <= p.micro_batch <= n:
            raise ValueError(f"a plan's micro-batch {p.micro_batch} is outside 1 to max_micro_batch={n}")
        y[p.micro_batch - 1] = getattr(p, what) * p.peak
    return y


__all__ += ["flops_by_micro_batch"]


def sequence_compute_time(model: Model | str, hardware: Hardware | str, tokens, *, dtype: str = "bf16") -> float:
    """Seconds one GPU needs at its dense peak to train on ``tokens`` tokens (chapter 1): the 6N(+attention)
    FLOPs per token of :func:`training_flops_per_token` times ``tokens``, over the peak."""
    tokens = number("tokens", tokens, integer=True)
    return training_flops_per_token(model) * tokens / get_hardware(hardware).peak_flops(dtype)


__all__ += ["sequence_compute_time"]


def non_embedding_params(model: Model | str) -> int:
    """Parameters outside the embedding table (chapter 1: what 6N should count, the table being a lookup)."""
    m = load_model(model)
    return m.params - m.embedding_params


__all__ += ["non_embedding_params"]


def embedding_overcount(model: Model | str) -> float:
    """How much counting the embedding table in 6N overstates MFU (chapter 1): embedding parameters over
    the rest."""
    m = load_model(model)
    return m.embedding_params / non_embedding_params(m)


__all__ += ["embedding_overcount"]


def _shown(x) -> str:
    return f"{int(x):,}" if np.ndim(x) == 0 else str(np.asarray(x))


def step_tokens(global_batch, seq):
    """Tokens one training step processes: ``global_batch`` sequences of ``seq`` tokens (chapters 7 and 9;
    Llama 3 70B's 512 sequences of 8,192 tokens are 4,194,304). At most 2**53, past which a count is no
    longer exact in a float."""
    b = number("global_batch", global_batch, integer=True)
    s = number("seq", seq, integer=True)
    tokens = b * s
    if np.any(np.asarray(tokens) > 2**53):
        raise ValueError(f"global_batch x seq must be at most 2**53 tokens a step (a count past which a float "
                         f"no longer holds every whole number), got {_shown(b)} x {_shown(s)}")
    return int(tokens) if np.ndim(tokens) == 0 else tokens


__all__ += ["step_tokens"]
