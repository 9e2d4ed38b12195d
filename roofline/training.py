"""Training arithmetic: FLOPs per token, MFU and HFU, model-state memory (chapters 1 and 2).

Kaplan and colleagues (arXiv:2001.08361, 2020): a dense transformer costs about
6N FLOPs per token to train, 2N forward and 4N backward (gradients with respect to both inputs and
weights). That rule leaves out attention's quadratic term; ``attention_context`` adds it back.
"""

from __future__ import annotations

import numpy as np

from ._check import number
from .hardware import Hardware, get_hardware
from .memory import model_state
from .model import Model, load_model, param_count
from .network import data_parallel_bytes
from .ops import attention_flops
from .policies import RECOMPUTE, recompute_policy

__all__ = [
    "RECOMPUTE",
    "training_flops_per_token",
    "mfu",
    "hfu",
    "tokens_per_s_at_mfu",
    "model_state_bytes",
    "gradient_sync_tokens",
    "MFU_REPORTS",
]



def training_flops_per_token(model: Model | str | float, *, recompute: str = "none", attention_context=None):
    """FLOPs to train on one token: 6N (8N with full recomputation; selective adds only attention).

    ``model`` is a :class:`Model`, a shipped model's name, or a parameter count N. For a
    mixture-of-experts model N is the active count, the weights each token meets. With
    ``attention_context`` (tokens per sequence, needs a Model) the causal attention products are
    added: forward ``2 * context * width * layers`` per token, times 3 for forward and backward
    (times 4 when recomputed, selectively or fully). The policies are :data:`roofline.policies.RECOMPUTE`.
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


def tokens_per_s_at_mfu(mfu_, model, hardware: Hardware | str, *, gpus=1, dtype: str = "bf16", attention_context=None):
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
    part, are in :mod:`roofline.memory` (chapter 2)."""
    return model_state(model, recipe).total


# Reported MFU, for calibration: (low, high, source).
MFU_REPORTS = {
    "dense pretraining on H100s": (0.35, 0.45, "typical range for large dense runs, as chapter 1 states it"),
    "Llama 3 405B on 8,192-16,384 H100s": (
        0.38, 0.43, "Grattafiori and colleagues, the Llama 3 paper (arXiv:2407.21783, 2024), section 3.3.2, Table 4"),
}


def gradient_sync_tokens(model, hardware: Hardware | str, gpus, link: str = "network", *, zero_stage: int = 0,
                         dtype: str = "bf16"):
    """Chapter 1's network roofline: the tokens each GPU must process per training step for the step's
    arithmetic, at peak, to take as long as its data-parallel gradient exchange over ``link``.

    The same max(compute, communication) argument as the HBM roofline, with the link in place of HBM:
    compute takes ``6 N t / P_peak`` for ``t`` tokens per GPU, the ring all-reduce of bf16 gradients
    ``2 (G-1)/G * 2N / B_link`` (:func:`roofline.network.data_parallel_bytes`). They are equal at
    ``t* = 2 (G-1)/G * 2 P_peak / (6 B_link)``: N cancels, so the threshold is a property of the link
    and the chip, a ridge point of the network. Below ``t*`` the exchange cannot hide behind the
    arithmetic even with perfect overlap. ``link`` is an interconnect level of the GPU ('scale_up' for
    NVLink, 'network' for InfiniBand, 'host' for PCIe).
    """
    hw = get_hardware(hardware)
    if link not in hw.interconnect:
        raise ValueError(f"link must be one of {', '.join(map(repr, hw.interconnect))} for the {hw.short}, got {link!r}")
    n = param_count(model)
    sent = data_parallel_bytes(n, gpus, zero_stage=zero_stage)
    return sent * hw.peak_flops(dtype) / (hw.interconnect[link].each_way * training_flops_per_token(n))
