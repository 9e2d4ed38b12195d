"""The memory budget: model state, activations, ZeRO sharding, KV cache (chapter 2).

Sources:

- Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training Trillion Parameter Models", SC 2020
  (arXiv:1910.02054): 16 bytes per parameter for mixed-precision Adam, and the per-GPU model state of
  ZeRO stages 1, 2 and 3.
- Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models", MLSys 2023
  (arXiv:2205.05198): a GPT layer stores ``s b h (34 + 5 a s / h)`` bytes of activations, with
  selective and full recomputation, tensor and sequence parallelism.

Activations are derived tensor by tensor, from what each operation saves for its backward pass
(:func:`saved_tensors`), for both a GPT layer (which reproduces the paper's closed form exactly) and a
Llama layer (RMSNorm, grouped-query attention, RoPE, SwiGLU). Sizes are in bytes, decimal.

What this module does not see: the CUDA context and library workspaces, allocator fragmentation,
temporary buffers inside kernels, communication buffers. Chapter 2 says which is which.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping

import numpy as np
from numpy.typing import ArrayLike

from roofline.core.checks import broadcast, number, unknown_name
from roofline.core.hardware import Hardware, get_hardware
from roofline.core.model import Model, load_model, param_count
from roofline.core.policies import MATMUL_OUTPUTS, RECOMPUTES, recompute_policy, zero_stage
from roofline.core.units import dtype_bytes, fmt
from roofline.workloads.inference import build_step

__all__ = [
    "RECIPES",
    "Footprint",
    "SavedTensor",
    "model_state",
    "state_bytes",
    "zero_model_state",
    "saved_tensors",
    "activation_bytes",
    "korthikanti_bytes",
    "inference_footprint",
    "kv_bytes_per_new_token",
    "training_footprint",
    "kv_cache_capacity_tokens",
    "recompute_working_set",
    "layer_activations",
    "checkpoint_memory",
    "optimal_checkpoint_spacing",
    "offloaded_bytes",
    "weight_bytes",
    "fits_in_hbm",
    "fits_in_host",
    "fit_verdict",
    "fit_summary",
    "KORTHIKANTI_CONFIGS", "FitsOnItsHardware"]

# Bytes per parameter of each training recipe's model state.
RECIPES: Mapping[str, Mapping[str, float]] = MappingProxyType({
    # everything in fp32: weights, gradients, Adam momentum and variance
    "fp32-adam": MappingProxyType({"weights": 4, "gradients": 4, "momentum": 4, "variance": 4}),
    # the ZeRO paper's mixed precision: bf16 weights and gradients, fp32 master copy and Adam states
    "mixed-adam": MappingProxyType({"weights": 2, "gradients": 2, "master": 4, "momentum": 4, "variance": 4}),
    # bf16 throughout, no master copy (needs care: stochastic rounding or Kahan summation)
    "bf16-adam": MappingProxyType({"weights": 2, "gradients": 2, "momentum": 2, "variance": 2}),
    # mixed precision with 8-bit Adam states (Dettmers et al., 8-bit Optimizers via Block-wise Quantization, 2022)
    "mixed-adam-8bit": MappingProxyType({"weights": 2, "gradients": 2, "master": 4, "momentum": 1, "variance": 1}),
})

# The GPT configurations of Korthikanti et al., Table 3: name -> (hidden, heads, layers, tensor parallel).
KORTHIKANTI_CONFIGS: Mapping[str, tuple[int, int, int, int]] = MappingProxyType({
    "22B": (6144, 64, 48, 8), "175B": (12288, 96, 96, 8), "530B": (20480, 128, 105, 8), "1T": (25600, 160, 128, 8),
})


@dataclass(frozen=True)
class Footprint:
    """Bytes resident on one GPU, part by part; ``total`` is their sum."""

    parts: Mapping[str, float | np.ndarray]
    host: float | np.ndarray = 0.0  # bytes parked in host memory for this GPU (offloading, chapter 3); not in total

    def __post_init__(self):
        checked = {k: number(f"bytes of {k}", v, strict=False) for k, v in self.parts.items()}
        object.__setattr__(self, "parts", MappingProxyType(checked))
        object.__setattr__(self, "host", number("host", self.host, strict=False))

    def __getitem__(self, part: str):
        try:
            return self.parts[part]
        except KeyError:
            raise unknown_name("part", part, self.parts) from None

    @property
    def total(self):
        return sum(self.parts.values())

    @property
    def model_state(self):
        """Bytes of the parts that are model state: weights, gradients, the master copy and the optimizer's
        moments (the parts of :data:`RECIPES`), without activations, working sets, logits or KV cache."""
        state = {k for recipe in RECIPES.values() for k in recipe}
        return sum(v for k, v in self.parts.items() if k in state)

    def fits(self, hardware: Hardware | str):
        """True where the total fits in the GPU's usable HBM (:attr:`~roofline.core.hardware.Hardware.usable_capacity`:
        the device's own total less the CUDA context's reserve) and what it parks in host memory fits the
        host's share per GPU (:func:`fits_in_host`); broadcasts over array parts."""
        out = np.logical_and(fits_in_hbm(self.total, hardware), fits_in_host(self.host, hardware))
        return out if np.ndim(out) else bool(out)

    def spare(self, hardware: Hardware | str):
        """Usable HBM left over (negative: the bytes by which the footprint does not fit)."""
        return get_hardware(hardware).usable_capacity - np.asarray(self.total)

    def subtotal(self, *parts: str):
        """The named parts together (chapter 2: what one more sequence adds, its activations and logits)."""
        out = 0.0
        for part in parts:
            out = out + self[part]
        return out

    def share(self, *parts: str):
        """The named parts' share of the total (chapter 2: the optimizer's master copy and Adam states)."""
        return self.subtotal(*parts) / self.total

    def without(self, *parts: str):
        """The total less the named parts (chapter 3: the model state is what is left once the
        activations, the working set and the logits are taken out)."""
        out = self.total
        for part in parts:
            out = out - self[part]
        return out


class FitsOnItsHardware:
    """For a plan that holds a ``footprint`` (a :class:`Footprint`) and the ``hardware`` it runs on:
    whether it fits, and the usable HBM it leaves (negative: by how much it does not fit)."""

    @property
    def fits(self) -> bool:
        return bool(self.footprint.fits(self.hardware))

    @property
    def spare(self) -> float:
        """Usable HBM left over (negative: by how much it does not fit)."""
        return float(self.footprint.spare(self.hardware))


def _recipe(recipe: str) -> Mapping[str, float]:
    try:
        return RECIPES[recipe]
    except (KeyError, TypeError):
        raise unknown_name("recipe", recipe, RECIPES) from None


def state_bytes(recipe: str = "mixed-adam") -> Mapping[str, float]:
    """Bytes per parameter of a recipe's model state in the three groups ZeRO shards one stage at a time:
    'optimizer' (stage 1: the master copy and the optimizer's moments), 'gradients' (stage 2) and 'weights'
    (stage 3). Mixed-precision Adam: 12, 2 and 2, the 16 bytes a parameter of chapter 2."""
    parts = _recipe(recipe)
    return MappingProxyType({"weights": float(parts.get("weights", 0.0)), "gradients": float(parts.get("gradients", 0.0)),
                             "optimizer": float(sum(v for k, v in parts.items() if k not in ("weights", "gradients")))})


def model_state(model: Model | str | float, recipe: str = "mixed-adam") -> Footprint:
    """Weights, gradients and optimizer state before any activation: 16 B/param for mixed Adam."""
    n = param_count(model)
    return Footprint({k: n * v for k, v in _recipe(recipe).items()})


def zero_model_state(model: Model | str | float, gpus, stage: int, recipe: str = "mixed-adam") -> Footprint:
    """Per-GPU model state under ZeRO ``stage`` over ``gpus`` data-parallel GPUs.

    Stage 1 shards the optimizer state (master weights and Adam moments), stage 2 the gradients as
    well, stage 3 the weights too. Stage 0 is plain data parallelism: every GPU holds everything.
    """
    shards = zero_stage(stage).shards
    gpus = number("gpus", gpus, integer=True, minimum=1, strict=False)
    full = model_state(model, recipe).parts
    return Footprint({k: v / gpus if k in shards else v for k, v in full.items()})


# --------------------------------------------------------------------------------------------
# Activations, tensor by tensor


@dataclass(frozen=True)
class SavedTensor:
    """One tensor a layer keeps for its backward pass.

    Its size is ``per_token`` elements per token (``s b`` tokens) plus ``per_score`` elements per
    query-key pair (``s^2 b`` pairs; ``per_score`` is the number of heads for a score-sized tensor),
    times ``bytes_per_element``. ``where`` is 'attention' or 'mlp' or
    'norm', for selective recomputation, which drops the attention core's score-sized tensors.

    ``matmul_output`` marks the output of a matmul (a projection, the attention kernel, the MLP's gate or
    up), what the 'matmul-outputs' policy keeps. ``linear_input`` marks the input of a linear layer: 'own' where
    only that layer's weight gradient reads it (an fp8 recipe that saves its inputs in fp8 keeps one byte an
    element instead), 'shared' where another kernel reads it too (the attention kernel's output, which the
    projection after it takes: the recipe keeps an fp8 copy beside it). ``rebuild_flops`` is what rebuilding one element costs
    from the tensors before it in the layer (``2 x`` the matmul's inner dimension for a matmul's output,
    a few FLOPs for an elementwise one, infinite for the layer's input, which only the layers below can
    rebuild), plus ``rebuild_flops_per_key`` per key a query sees (the attention core's outputs); see
    :meth:`rebuild_intensity`. The elementwise counts are round figures (a norm about 2 to 7 FLOPs per
    element, SiLU about 5): chapter 3's rule needs only that they sit far below the ridge.
    """

    name: str
    per_token: float
    bytes_per_element: float
    where: str
    per_score: float = 0.0
    sharded_by_tp: bool = True  # False for tensors that tensor parallelism replicates (norm inputs, dropout masks after the block)
    matmul_output: bool = False
    rebuild_flops: float = 0.0
    rebuild_flops_per_key: float = 0.0
    linear_input: str = ""  # 'own': kept only for a linear's weight gradient; 'shared': also read by another kernel

    def nbytes(self, seq, micro_batch):
        """Bytes of this tensor for ``micro_batch`` sequences of ``seq`` tokens (broadcasts)."""
        return (seq * micro_batch * self.per_token + seq * seq * micro_batch * self.per_score) * self.bytes_per_element

    @property
    def kept_with_matmul_outputs(self) -> bool:
        """Whether the 'matmul-outputs' policy keeps this tensor: a matmul's output, or the layer's input."""
        return self.matmul_output or self.rebuild_flops == float("inf")

    def rebuild_intensity(self, seq):
        """FLOPs it takes to rebuild this tensor per byte it would keep (chapter 3), for sequences of ``seq``
        tokens: ``(rebuild_flops + rebuild_flops_per_key x (seq + 1)/2) / bytes_per_element``, a causal query
        seeing ``(seq + 1)/2`` keys on average. Infinite for the layer's input."""
        keys = (number("seq", seq, integer=True) + 1) / 2
        return (self.rebuild_flops + self.rebuild_flops_per_key * keys) / self.bytes_per_element


def saved_tensors(model: Model | str | None = None, *, architecture: str = "llama", hidden=None, heads=None,
                  flash: bool = True, act_bytes: float = 2) -> tuple[SavedTensor, ...]:
    """What one decoder layer saves for backward, per the architecture.

    ``architecture='gpt'`` follows Korthikanti et al. exactly (LayerNorm, 4h GeLU MLP, dropout masks
    of one byte, explicit softmax); give ``hidden`` and ``heads``. ``architecture='llama'`` reads the
    shape from ``model``: RMSNorm, grouped-query attention (K and V are narrower than Q), RoPE (whose
    backward needs only the cached sines and cosines), SwiGLU, no dropout. ``flash`` replaces the
    score-sized tensors by the output and one fp32 log-sum-exp per query and head.
    """
    b, inf = act_bytes, float("inf")
    if architecture == "gpt":
        h = number("hidden", hidden, integer=True)
        number("heads", heads, integer=True)
        attn = [
            SavedTensor("layernorm 1 input", h, b, "norm", sharded_by_tp=False, rebuild_flops=inf),
            SavedTensor("QKV input", h, b, "attention", sharded_by_tp=False, rebuild_flops=7, linear_input="own"),
            SavedTensor("Q and K", 2 * h, b, "attention", matmul_output=True, rebuild_flops=2 * h),
            SavedTensor("V", h, b, "attention", matmul_output=True, rebuild_flops=2 * h),
            SavedTensor("attention output (projection input)", h, b, "attention", matmul_output=True,
                        rebuild_flops_per_key=4, linear_input="shared"),
            SavedTensor("dropout mask after projection", h, 1, "attention", sharded_by_tp=False, rebuild_flops=1),
        ]
        if flash:
            attn.append(SavedTensor("softmax statistics (fp32)", heads, 4, "attention", matmul_output=True,
                                    rebuild_flops_per_key=2 * h // heads))
        else:
            attn += [
                SavedTensor("softmax output", 0, b, "attention", per_score=heads, rebuild_flops=2 * h // heads + 5),
                SavedTensor("attention dropout mask", 0, 1, "attention", per_score=heads, rebuild_flops=1),
                SavedTensor("dropout output (PV input)", 0, b, "attention", per_score=heads, rebuild_flops=1),
            ]
        mlp = [
            SavedTensor("layernorm 2 input", h, b, "norm", sharded_by_tp=False, matmul_output=True,
                        rebuild_flops=2 * h + 2),
            SavedTensor("MLP input", h, b, "mlp", sharded_by_tp=False, rebuild_flops=7, linear_input="own"),
            SavedTensor("GeLU input", 4 * h, b, "mlp", matmul_output=True, rebuild_flops=2 * h),
            SavedTensor("second linear input", 4 * h, b, "mlp", rebuild_flops=8, linear_input="own"),
            SavedTensor("dropout mask after MLP", h, 1, "mlp", sharded_by_tp=False, rebuild_flops=1),
        ]
        return tuple(attn + mlp)
    if architecture != "llama":
        raise ValueError(f"architecture must be 'llama' or 'gpt', got {architecture!r}")
    if model is None:
        raise TypeError("the llama architecture needs a model (a Model or a shipped model's name)")
    m = load_model(model)
    h, q, kv, i = m.hidden_size, m.attention_width, m.num_kv_heads * m.head_dim, m.intermediate_size
    attn = [
        SavedTensor("RMSNorm 1 input", h, b, "norm", sharded_by_tp=False, rebuild_flops=inf),
        SavedTensor("RMSNorm 1 statistics (fp32)", 1, 4, "norm", sharded_by_tp=False, rebuild_flops=2 * h),
        SavedTensor("QKV input", h, b, "attention", sharded_by_tp=False, rebuild_flops=2, linear_input="own"),
        SavedTensor("Q after RoPE", q, b, "attention", matmul_output=True, rebuild_flops=2 * h + 3),
        SavedTensor("K after RoPE and V", 2 * kv, b, "attention", matmul_output=True, rebuild_flops=2 * h + 3),
        SavedTensor("attention output (o_proj input)", q, b, "attention", matmul_output=True,
                    rebuild_flops_per_key=4, linear_input="shared"),
    ]
    if flash:
        attn.append(SavedTensor("softmax statistics (fp32)", m.num_heads, 4, "attention", matmul_output=True,
                                rebuild_flops_per_key=2 * m.head_dim))
    else:
        attn.append(SavedTensor("softmax output", 0, b, "attention", per_score=m.num_heads,
                                rebuild_flops=2 * m.head_dim + 5))
    mlp = [
        SavedTensor("RMSNorm 2 input", h, b, "norm", sharded_by_tp=False, matmul_output=True, rebuild_flops=2 * q + 1),
        SavedTensor("RMSNorm 2 statistics (fp32)", 1, 4, "norm", sharded_by_tp=False, rebuild_flops=2 * h),
    ]
    if m.gated_mlp:
        mlp += [
            SavedTensor("gate/up input", h, b, "mlp", sharded_by_tp=False, rebuild_flops=2, linear_input="own"),
            SavedTensor("gate output (SiLU input)", i, b, "mlp", matmul_output=True, rebuild_flops=2 * h),
            SavedTensor("up output", i, b, "mlp", matmul_output=True, rebuild_flops=2 * h),
            SavedTensor("SiLU output", i, b, "mlp", rebuild_flops=5),
            SavedTensor("down_proj input", i, b, "mlp", rebuild_flops=6, linear_input="own"),
        ]
    else:  # a plain MLP (GPT-2, GPT-NeoX, Nemotron): up, the activation, down
        mlp += [
            SavedTensor("up input", h, b, "mlp", sharded_by_tp=False, rebuild_flops=2, linear_input="own"),
            SavedTensor("up output (activation input)", i, b, "mlp", matmul_output=True, rebuild_flops=2 * h),
            SavedTensor("down_proj input (activation output)", i, b, "mlp", rebuild_flops=8, linear_input="own"),
        ]
    return tuple(attn + mlp)


def _layer(layer, flash: bool) -> tuple:
    """The saved tensors of ``layer``: a tuple of :class:`SavedTensor`, or a model (its Llama layer)."""
    if isinstance(layer, (Model, str)):
        return saved_tensors(layer, flash=flash)
    if isinstance(layer, (tuple, list)) and layer and all(isinstance(t, SavedTensor) for t in layer):
        return tuple(layer)
    raise TypeError(f"layer must be a model (a Model or a shipped model's name) or the tuple saved_tensors() returns, "
                    f"got {type(layer).__name__}")


def activation_bytes(layer, seq, micro_batch, *, recompute: str = "none", tp: int = 1,
                     sequence_parallel: bool = False, flash: bool = True, fp8_inputs: bool = False):
    """Bytes of activations one layer keeps, from its saved tensors.

    ``recompute='selective'`` drops the score-sized tensors (recomputed in the backward pass);
    ``'matmul-outputs'`` keeps the layer's input and the matmuls' outputs (:class:`SavedTensor`'s
    ``matmul_output``) and rebuilds the rest; ``'full'`` keeps only the layer's input (``s b h`` elements; pass it as the first tensor's width).
    ``layer`` is a model (its layer's tensors, with a flash kernel unless ``flash=False``) or the tuple
    :func:`saved_tensors` returns (a GPT layer of Korthikanti et al., an explicit-attention layer).
    With tensor parallelism of degree ``tp`` the sharded tensors divide by ``tp``; sequence
    parallelism divides the rest too. ``fp8_inputs``: an fp8 recipe keeps the linear layers' inputs
    (:attr:`SavedTensor.linear_input`) in fp8, one byte an element, and beside a shared one an fp8 copy.
    """
    if recompute not in (*RECOMPUTES, MATMUL_OUTPUTS.name):
        raise ValueError(f"recompute must be one of {', '.join(map(repr, (*RECOMPUTES, MATMUL_OUTPUTS.name)))}, "
                         f"got {recompute!r}")
    s = number("seq", seq, integer=True)
    bsz = number("micro_batch", micro_batch, integer=True)
    tp = number("tp", tp, integer=True)
    tensors = _layer(layer, flash)
    if recompute == "full":  # only the layer's input (a per-token tensor) is kept
        return tensors[0].nbytes(s, bsz) / (tp if sequence_parallel else 1)
    total = 0.0
    for t in tensors:
        if recompute == "selective" and t.per_score:
            continue
        if recompute == MATMUL_OUTPUTS.name and not t.kept_with_matmul_outputs:
            continue
        nbytes = t.nbytes(s, bsz)
        if fp8_inputs and t.linear_input == "own":
            nbytes = nbytes / t.bytes_per_element
        elif fp8_inputs and t.linear_input == "shared":
            nbytes = nbytes * (1 + 1 / t.bytes_per_element)
        total = total + nbytes / (tp if (t.sharded_by_tp or sequence_parallel) else 1)
    return total


def korthikanti_bytes(seq, micro_batch, hidden, heads, *, recompute: str = "none", tp: int = 1,
                      sequence_parallel: bool = False):
    """The paper's closed forms for one GPT layer, in bytes (Korthikanti et al., Table 2).

    none: ``sbh(34 + 5as/h)``; with TP: ``sbh(10 + 24/t + 5as/(ht))``; with TP and SP:
    ``sbh/t (34 + 5as/h)``; selective drops the ``5as/h`` term; full keeps ``2sbh`` (``2sbh/t`` with SP).
    """
    if recompute not in RECOMPUTES:
        raise ValueError(f"recompute must be one of {', '.join(map(repr, RECOMPUTES))}, got {recompute!r}")
    s, b = number("seq", seq, integer=True), number("micro_batch", micro_batch, integer=True)
    h, a = number("hidden", hidden, integer=True), number("heads", heads, integer=True)
    t = number("tp", tp, integer=True)
    sbh = s * b * h
    score = 0 if recompute == "selective" else 5 * a * s / h
    if recompute == "full":
        return 2 * sbh / (t if sequence_parallel else 1)
    if sequence_parallel:
        return sbh / t * (34 + score)
    return sbh * (10 + 24 / t + score / t)


def recompute_working_set(layer, seq, micro_batch, *, recompute: str = "none", flash: bool = True):
    """Bytes the backward pass holds on top of the checkpoints while it recomputes one layer (chapter 2).

    Recomputation does not make a layer's activations vanish: when the backward pass reaches a layer it
    runs that layer's forward again and holds what the forward would have kept, for that one layer,
    until the layer's gradients are done. The extra is one layer's activations without recomputation
    minus what the policy keeps anyway: zero for ``'none'``, the score-sized tensors for
    ``'selective'`` (zero with a flash kernel), nearly a whole layer for ``'full'``.
    """
    kept = activation_bytes(layer, seq, micro_batch, recompute=recompute, flash=flash)
    return activation_bytes(layer, seq, micro_batch, flash=flash) - kept


def layer_activations(layer, seq, micro_batch, *, recompute: str = "none", flash: bool = True):
    """What every layer keeps and what the one being recomputed holds on top, for any policy (chapter 3):
    ``(kept, working)`` in bytes, summed over the model's layers for ``kept``.

    ``layer`` is a model (its Llama layer). For 'none', 'selective' and 'full' this is
    :func:`activation_bytes` times the layers and :func:`recompute_working_set`. For 'every-K' (Chen
    et al.'s segments) the checkpoints are the inputs of ``ceil(L/K)`` layers, and the backward pass
    rebuilds a whole segment at once: ``K`` layers' activations less the checkpoint it starts from,
    as :func:`checkpoint_memory` counts them. 'every-1' gives the same bytes as 'full'.
    """
    policy = recompute_policy(recompute)
    m = load_model(layer)
    tensors = saved_tensors(m, flash=flash)
    if policy.every <= 1:
        name = "full" if policy.every == 1 else policy.name
        return (m.num_layers * activation_bytes(tensors, seq, micro_batch, recompute=name),
                recompute_working_set(tensors, seq, micro_batch, recompute=name))
    checkpoint = activation_bytes(tensors, seq, micro_batch, recompute="full")
    whole = activation_bytes(tensors, seq, micro_batch)
    k = min(policy.every, m.num_layers)
    return -(-m.num_layers // k) * checkpoint, k * whole - checkpoint


def checkpoint_memory(layers, every, checkpoint, layer):
    """Chen et al.'s count for checkpoints every ``every`` layers (chapter 3): ``ceil(L/k) c`` bytes of
    checkpoints kept through the step, plus the segment being rebuilt, ``k A - c`` (its ``k`` layers'
    activations ``A`` each, less the checkpoint ``c`` it starts from, already counted). Broadcasts over
    ``every``. With ``c = A`` the minimum over ``k`` is near ``k = sqrt(L)``, about ``2 sqrt(L) A``.
    """
    layers = number("layers", layers, integer=True)
    every = number("every", every, integer=True)
    checkpoint = number("checkpoint", checkpoint)
    layer = number("layer", layer)
    k = np.minimum(every, layers)
    return -(-layers // k) * checkpoint + k * layer - checkpoint


def optimal_checkpoint_spacing(layers, checkpoint, layer) -> int:
    """The spacing ``k`` (layers per segment, 1 to L) that minimises :func:`checkpoint_memory`.

    The continuous optimum is ``k* = sqrt(L c / A)``: Chen et al.'s square root of L when a checkpoint
    costs as much as a layer's activations (``c = A``), much less when a layer keeps many times its
    input (a transformer layer: ``k*`` near 1). Found exactly over the whole numbers; the smallest ``k``
    wins a tie.
    """
    layers = number("layers", layers, integer=True)
    ks = np.arange(1, int(layers) + 1)
    return int(ks[np.argmin(checkpoint_memory(layers, ks, checkpoint, layer))])


def offloaded_bytes(model: Model | str, seq, micro_batch, *, recompute: str = "none", flash: bool = True):
    """Bytes per layer that offloading sends to host memory in the forward pass and fetches back in the
    backward pass (chapter 3): what the policy keeps of one layer (a checkpointed layer's input under
    'every-K', averaged over the segment's ``K`` layers)."""
    m = load_model(model)
    kept, _ = layer_activations(m, seq, micro_batch, recompute=recompute, flash=flash)
    return kept / m.num_layers


def training_footprint(model: Model | str, seq, micro_batch, *, gpus=1, zero_stage: int = 0,
                       recipe: str = "mixed-adam", recompute: str = "none", flash: bool = True,
                       offload: bool = False) -> Footprint:
    """Per-GPU training memory of a Llama-family model at the peak of the backward pass: model state
    (ZeRO-sharded), the activations every layer keeps, the working set of the one layer being
    recomputed (:func:`recompute_working_set`, zero without recomputation), and the logits in fp32
    for the loss.

    ``recompute`` is 'none', 'selective', 'full', 'matmul-outputs' or 'every-K' (:func:`layer_activations`). With
    ``offload`` the kept activations live in host memory (the footprint's ``host``, checked by
    :meth:`Footprint.fits` against the host's memory per GPU) and HBM holds two layers' worth in flight
    (one being written out or fetched while the next is computed; two checkpoints under 'every-K');
    the working set stays on the GPU.
    """
    m = load_model(model)
    state = zero_model_state(m, gpus, zero_stage, recipe).parts
    layers, working = layer_activations(m, seq, micro_batch, recompute=recompute, flash=flash)
    parked = layers if offload else 0.0  # everything kept lives in host memory
    if offload:  # two stored units in flight: layers, or checkpoints under 'every-K'
        every = recompute_policy(recompute).every
        units = -(-m.num_layers // min(every, m.num_layers)) if every > 1 else m.num_layers
        layers = min(2, units) * layers / units
    s, b = number("seq", seq, integer=True), number("micro_batch", micro_batch, integer=True)
    logits = s * b * m.vocab_size * 4
    return Footprint({**state, "activations": layers, "recompute working set": working, "logits": logits},
                     host=parked)


def fits_in_hbm(nbytes, hardware: Hardware | str):
    """True where ``nbytes`` fit in one GPU's usable HBM (:attr:`~roofline.core.hardware.Hardware.usable_capacity`:
    the device's own total less the CUDA context's reserve, not the capacity it is sold as). The one
    place the book decides "fits"; broadcasts over ``nbytes``. On an H100 SXM (84.0 GB usable) 80 GB fit and
    85 GB do not."""
    total = number("nbytes", nbytes, strict=False)
    out = np.asarray(total) <= get_hardware(hardware).usable_capacity
    return out if np.ndim(out) else bool(out)


def fits_in_host(nbytes, hardware: Hardware | str):
    """True where ``nbytes`` parked in host memory (offloading, chapter 3) fit the host's memory per GPU
    (:attr:`~roofline.core.hardware.Hardware.host_memory`, a server figure: 250 GB per GPU in a DGX H100 or
    H200, 2 TB for eight). Nothing parked always fits; a chip whose catalog entry gives no host memory leaves
    it unchecked (True). Broadcasts over ``nbytes``."""
    parked = number("nbytes", nbytes, strict=False)
    limit = get_hardware(hardware).host_memory
    out = np.asarray(parked) <= (np.inf if limit is None else limit)
    out = np.logical_or(out, np.asarray(parked) == 0)
    return out if np.ndim(out) else bool(out)


def _host_clause(host: float, h: Hardware, digits: int) -> str:
    if h.host_memory is None:
        return f"{fmt(host, 'B', digits)} in host memory (the catalog gives no host memory for the {h.short})"
    return f"{fmt(host, 'B', digits)} in host memory, of {fmt(h.host_memory, 'B', digits)} per GPU"


def fit_verdict(nbytes, hardware: Hardware | str, *, host=0.0, digits: int = 3) -> str:
    """A footprint against one GPU's HBM capacity, as words for a sentence (chapter 2):
    'fits on the H100 SXM with 15.8 GB to spare' or 'does not fit on the H100 SXM, by 48.5 GB'.
    With ``host`` bytes parked in host memory (offloading, chapter 3) the host's share per GPU is a budget
    too: 'fits on the H200 with 71.6 GB to spare, and 176 GB in host memory, of 250 GB per GPU' or
    'does not fit on the H200: 352 GB in host memory, over the 250 GB per GPU by 102 GB'.

    Computed from the usable capacity the catalog gives (the device's total less the CUDA context's
    reserve) and its host memory per GPU, so the words follow when a figure changes.
    """
    total = float(number("nbytes", nbytes, strict=False))
    host = float(number("host", host, strict=False))
    h = get_hardware(hardware)
    margin = h.usable_capacity - total
    if not fits_in_hbm(total, h):
        return f"does not fit on the {h.short}, by {fmt(-margin, 'B', digits)}"
    if not fits_in_host(host, h):
        return (f"does not fit on the {h.short}: {fmt(host, 'B', digits)} in host memory, over the "
                f"{fmt(h.host_memory, 'B', digits)} per GPU by {fmt(host - h.host_memory, 'B', digits)}")
    spare = f"fits on the {h.short} with {fmt(margin, 'B', digits)} to spare"
    return f"{spare}, and {_host_clause(host, h, digits)}" if host > 0 else spare


def fit_summary(nbytes, hardware, *, host=0.0, digits: int = 3) -> str:
    """A footprint against several GPUs' capacities in one English clause (the chapter 2 explorer):
    'fits on the H100 SXM and the H200', 'fits on the H200, not on the H100 SXM (over by 12.3 GB)',
    'fits on neither the H100 SXM nor the H200 (over the larger by 56.1 GB)'. With ``host`` bytes
    parked in host memory (chapter 3's offloading) the host's memory per GPU is checked first:
    'does not fit on the H100 SXM or the H200: 705 GB in host memory, over the 250 GB per GPU by 455 GB'."""
    total = float(number("nbytes", nbytes, strict=False))
    host = float(number("host", host, strict=False))
    hws = [get_hardware(h) for h in ([hardware] if isinstance(hardware, (str, Hardware)) else hardware)]
    if not hws:
        raise ValueError("hardware must name at least one GPU")
    if len(hws) == 1:
        return fit_verdict(total, hws[0], host=host, digits=digits)
    if host > 0:
        short = [h for h in hws if not fits_in_host(host, h)]
        if short:  # the host is over its budget, whatever the HBM says: name the smallest host's shortfall
            h = min(short, key=lambda x: x.host_memory)
            where = [f"the {x.short}" for x in short]
            where = where[0] if len(where) == 1 else ", ".join(where[:-1]) + " or " + where[-1]
            return (f"does not fit on {where}: {fmt(host, 'B', digits)} in host memory, over the "
                    f"{fmt(h.host_memory, 'B', digits)} per GPU by {fmt(host - h.host_memory, 'B', digits)}")
    names = [f"the {h.short}" for h in hws]
    fits = [n for n, h in zip(names, hws) if fits_in_hbm(total, h)]
    over = [(n, total - h.usable_capacity) for n, h in zip(names, hws) if not fits_in_hbm(total, h)]

    def join(items, word):
        return items[0] if len(items) == 1 else ", ".join(items[:-1]) + f" {word} " + items[-1]

    if not over:
        return "fits on " + ("both " if len(hws) == 2 else "all of ") + join(fits, "and")
    if not fits:
        lead = "neither " + join(names, "nor") if len(hws) == 2 else "none of " + join(names, "or")
        return f"fits on {lead} (over the largest by {fmt(min(o for _, o in over), 'B', digits)})"
    misses = "; ".join(f"over {n}'s capacity by {fmt(o, 'B', digits)}" for n, o in over)
    return f"fits on {join(fits, 'and')}, not on {join([n for n, _ in over], 'or')} ({misses})"


def weight_bytes(model: Model | str, *, dtype: str = "bf16", weights_dtype: str | None = None,
                 embeddings_dtype: str | None = None, kv_dtype: str | None = None, math_dtype: str | None = None) -> float:
    """Bytes of every parameter a GPU holds to serve ``model`` whole, each in its storage format (chapters 1,
    5, 6): the linear layers in ``weights_dtype`` (default ``dtype``), the embedding table and output head in
    ``embeddings_dtype`` (default: the weights' format), norms as the step counts them. Every routed expert
    of a mixture counts, not only those a step reads. ``kv_dtype`` and ``math_dtype`` are accepted (and
    checked) so that one format set serves a whole deployment; they do not change the weights.

    Llama 3 8B in bf16: 16.06 GB; in int4 with groups of 128 and bf16 embeddings: 5.70 GB; Mixtral 8x7B
    in bf16: 93.4 GB (a decode step at batch 1 reads 25.8 GB of it).
    """
    m = load_model(model)
    experts = m.moe.num_experts if m.moe is not None else None
    step = build_step(f"the weights of {m.name}", m, 1, 1, 0, decode=True, dtype=dtype, weights_dtype=weights_dtype,
                      kv_dtype=kv_dtype, math_dtype=math_dtype, accounting="text", omit=(), options={},
                      embeddings_dtype=embeddings_dtype, experts_read=experts)
    return float(step.bytes)


def inference_footprint(model: Model | str, batch: ArrayLike=1, context: ArrayLike=0, *, dtype: str = "bf16",
                        kv_dtype: str | None = None, embeddings_dtype: str | None = None) -> Footprint:
    """What one GPU holds to serve ``batch`` sequences of ``context`` tokens each: the weights and the
    KV cache (chapter 1). Activations and the runtime's own memory come on top; compare
    ``fits(hardware)`` with a margin. Broadcasts over ``batch`` and ``context``.

    ``dtype`` is the weights' storage format (``int4-g128``: chapter 6's group-wise format), ``kv_dtype``
    the cache's (default ``dtype``), and ``embeddings_dtype`` that of the embedding table, the output head
    and the norms (default ``dtype``; weight-only checkpoints keep them in bf16). Every parameter counts,
    every expert of a mixture included.

    Llama 3 8B, one sequence of 8,192 tokens in bf16: 16.06 GB of weights and 1.07 GB of KV cache.
    """

    m = load_model(model)
    batch = number("batch", batch, integer=True)
    context = number("context", context, integer=True, strict=False)
    broadcast(batch=batch, context=context)
    weights = weight_bytes(m, weights_dtype=dtype, embeddings_dtype=embeddings_dtype)
    return Footprint({"weights": weights, "kv_cache": batch * m.kv_cache_bytes(context, kv_dtype or dtype)})


def kv_bytes_per_new_token(model: Model | str, context: ArrayLike, dtype: str = "bf16"):
    """Bytes one more token adds to the KV cache of a sequence already holding ``context`` tokens: every
    layer's share, except that a sliding-window layer stops growing once ``context`` reaches its window
    (Gemma 2 9B in bf16: 344,064 B a token up to 4,096 tokens, 172,032 B beyond, its 21 global layers
    only). Broadcasts over ``context``."""
    m = load_model(model)
    context = number("context", context, integer=True, strict=False)
    out = np.asarray(m.kv_cache_bytes(np.asarray(context) + 1, dtype)) - m.kv_cache_bytes(context, dtype)
    return float(out) if np.ndim(out) == 0 else out


def kv_cache_capacity_tokens(model: Model | str, hardware: Hardware | str, *, dtype: str = "bf16",
                             kv_dtype: str | None = None, reserve: float = 0.0):
    """Tokens of KV cache (batch x context) that fit beside the weights in one GPU's HBM.

    The GPU's usable capacity already leaves out the CUDA context's reserve; ``reserve`` is bytes set
    aside for anything else (activations, a serving engine's workspace). None if the weights alone do not fit.
    """

    m, h = load_model(model), get_hardware(hardware)
    free = h.usable_capacity - m.params * dtype_bytes(dtype) - number("reserve", reserve, strict=False)
    if free <= 0:
        return None
    return int(free // m.kv_bytes_per_token(kv_dtype or dtype))


def activation_peak(model: Model | str, seq, micro_batch=1, *, recompute: str = "none", flash: bool = True):
    """The most activation bytes held at once under a policy (chapter 3): what every layer keeps plus the
    working set of the layer being recomputed, ``kept + working`` of :func:`layer_activations`."""
    kept, working = layer_activations(model, seq, micro_batch, recompute=recompute, flash=flash)
    return kept + working


__all__ += ["activation_peak"]


def per_layer_activations(model: Model | str, seq, micro_batch=1, *, flash: bool = True) -> tuple:
    """Chen et al.'s two numbers per layer (chapter 3): ``(c, A)``, the bytes of one layer's checkpoint
    (what full recomputation keeps) and of one layer's activations without recomputation, each the
    model's total over its ``num_layers``."""
    m = load_model(model)
    kept_full, _ = layer_activations(m, seq, micro_batch, recompute="full", flash=flash)
    kept_none, _ = layer_activations(m, seq, micro_batch, flash=flash)
    return kept_full / m.num_layers, kept_none / m.num_layers


__all__ += ["per_layer_activations"]


def continuous_checkpoint_spacing(layers, checkpoint, layer) -> float:
    """The continuous optimum of :func:`checkpoint_memory` (chapter 3): ``k* = sqrt(L c / A)``, Chen et
    al.'s ``sqrt(L)`` when a checkpoint costs as much as a layer's activations."""
    layers = number("layers", layers, integer=True)
    return float(np.sqrt(layers * number("checkpoint", checkpoint) / number("layer", layer)))


__all__ += ["continuous_checkpoint_spacing"]


def kept_bytes_per_token_layer(model: Model | str, seq, *, recompute: str = "none", flash: bool = True) -> float:
    """Bytes a policy keeps per token and per layer (chapter 3, what offloading sends over the host
    link): kept activations of one sequence over ``num_layers`` and ``seq``."""
    m = load_model(model)
    seq = number("seq", seq, integer=True)
    kept, _ = layer_activations(m, seq, 1, recompute=recompute, flash=flash)
    return kept / m.num_layers / seq


__all__ += ["kept_bytes_per_token_layer"]


def recipe_bytes_per_param(recipe: str = "mixed-adam") -> float:
    """Bytes of model state per parameter under a training recipe (chapter 2: 16 for mixed-precision Adam)."""
    return sum(_recipe(recipe).values())


__all__ += ["recipe_bytes_per_param"]


def binary_capacity(hardware: Hardware | str) -> float:
    """The bytes a datasheet's HBM capacity stands for when its "GB" are binary (chapter 2: the H100's
    "80 GB" are 80 GiB of DRAM): ``capacity / 1e9 x 2^30``."""
    return get_hardware(hardware).hbm_capacity / 1e9 * 2**30


__all__ += ["binary_capacity"]


def activation_token_budget(model: Model | str, hardware: Hardware | str, *, flash: bool = True) -> float:
    """Tokens whose activations (no recomputation, every layer) alone fill the GPU's usable HBM (chapter 2):
    ``usable / (L x bytes per token and layer)``."""
    m = load_model(model)
    per_token_layer = activation_bytes(saved_tensors(m, flash=flash), 1, 1)
    return get_hardware(hardware).usable_capacity / (m.num_layers * per_token_layer)


__all__ += ["activation_token_budget"]


def logits_bytes_per_token(model: Model | str) -> float:
    """Bytes of fp32 logits one token holds (chapter 2): ``4 x vocab_size``."""
    return 4 * load_model(model).vocab_size


__all__ += ["logits_bytes_per_token"]


def embedding_bytes(model: Model | str, dtype: str = "bf16") -> float:
    """Bytes of the embedding table in ``dtype`` (chapter 1): ``embedding_params x bytes``."""
    return load_model(model).embedding_params * dtype_bytes(dtype)


__all__ += ["embedding_bytes"]


def gpus_to_hold(nbytes, hardware: Hardware | str) -> int:
    """The fewest GPUs whose usable HBM together holds ``nbytes`` (chapter 2): ``ceil(bytes / usable)``."""
    return int(np.ceil(number("nbytes", nbytes, strict=False) / get_hardware(hardware).usable_capacity))


__all__ += ["gpus_to_hold"]


def selective_saving(model: Model | str, seq, micro_batch=1, *, flash: bool = False):
    """Activation bytes selective recomputation saves over every layer (chapter 2): ``L x (kept without
    recomputation - kept under 'selective')``; zero with a flash kernel, which keeps no scores anyway."""
    m = load_model(model)
    tensors = saved_tensors(m, flash=flash)
    return m.num_layers * (activation_bytes(tensors, seq, micro_batch)
                           - activation_bytes(tensors, seq, micro_batch, recompute="selective"))


__all__ += ["selective_saving"]


def kv_cache_capacity_sequences(model: Model | str, hardware: Hardware | str, context: int, **kwargs) -> int:
    """Sequences of ``context`` tokens whose KV cache fits beside the weights (chapter 1's explorer):
    :func:`kv_cache_capacity_tokens` divided by ``context``, rounded down."""
    context = int(number("context", context, integer=True))
    return kv_cache_capacity_tokens(model, hardware, **kwargs) // context


__all__ += ["kv_cache_capacity_sequences"]
