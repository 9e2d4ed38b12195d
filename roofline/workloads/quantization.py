"""Quantization: number formats priced in the three budgets, and the quality they cost (chapter 6).

A narrower format buys memory (fewer bytes to hold), bandwidth (fewer bytes to move) and, when the
math itself runs narrower, compute (a higher tensor-core peak). The roofline prices all three; it
cannot see the fourth column, the model's quality, which :data:`PUBLISHED` carries from the papers'
own tables, each row with its source.

The formats themselves live in :mod:`roofline.core.units` (bytes per element, group-wise scales included:
``'int4-g128'``) and :mod:`roofline.core.formats` (which tensor is stored in which format, and the format
of the math). This module adds what chapter 6 derives from them:

- :func:`float_range`: the largest and smallest numbers a floating-point layout holds (E4M3's 448);
- :func:`crossover_batch`: the decode batch at which a format's step turns compute-bound, in closed form;
- :func:`check_math`: refuse a math format the chip has no tensor cores for (fp8 on an A100);
- :data:`SCHEMES` and :func:`serving_point`: the deployments compared in the chapter's table;
- :func:`dequantization_budget`: the vector work a weight-only kernel may spend per weight unseen;
- :func:`measured_fp8_speedup`: what the shipped H200 record says fp8 matmuls gain over bf16.
"""

from __future__ import annotations

import math
from types import MappingProxyType
from typing import NamedTuple

import numpy as np

from roofline.core.checks import number, unknown_name
from roofline.core.formats import Formats, formats
from roofline.core.hardware import Hardware, get_hardware, hardware_names
from roofline.workloads.inference import decode_step, prefill
from roofline.core.model import Model, load_model
from roofline.core.roof import predict
from roofline.core.units import DTYPE_BYTES, SCALE_FORMATS, dtype_bytes
from roofline.workloads.memory import weight_bytes  # re-exported: chapter 6 counts the weights in each format

__all__ = ["FloatRange", "float_range", "FLOAT_LAYOUTS", "INTEGER_LEVELS", "group_size_for_overhead", "chips_with",
           "check_math", "Crossover", "crossover_batch", "SCHEMES", "scheme", "weight_bytes", "max_batch",
           "ServingPoint", "serving_point", "decode_speedup", "dequantization_budget", "Published", "PUBLISHED",
           "published", "formats_of", "relative_change", "MeasuredFp8", "measured_fp8_speedup"]


# --------------------------------------------------------------------------------------------------------------
# Formats: what a layout of bits can hold
# --------------------------------------------------------------------------------------------------------------

class FloatRange(NamedTuple):
    """What a floating-point layout holds: its largest finite value, smallest normal and smallest subnormal."""

    exponent_bits: int
    mantissa_bits: int
    max: float
    min_normal: float
    min_subnormal: float

    @property
    def binades(self) -> float:
        """Powers of two between the smallest normal and the largest value: the dynamic range at full precision."""
        return math.log2(self.max / self.min_normal)


def float_range(exponent_bits: int, mantissa_bits: int, specials: str = "ieee") -> FloatRange:
    """The range of a float with a sign bit, ``exponent_bits`` and ``mantissa_bits`` (bias ``2**(e-1) - 1``).

    ``specials`` says what the top exponent is spent on: ``'ieee'`` keeps it for infinities and NaNs
    (bf16, fp16, fp8 E5M2); ``'nan'`` uses it for numbers except the one all-ones mantissa that
    means NaN (fp8 E4M3 of the OCP/NVIDIA convention, which so reaches 448 instead of 240);
    ``'none'`` has no special values at all (fp4 E2M1). ``float_range(4, 3, 'nan').max == 448``.
    """
    e = number("exponent_bits", exponent_bits, integer=True)
    m = number("mantissa_bits", mantissa_bits, integer=True, strict=False)
    if specials not in ("ieee", "nan", "none"):
        raise ValueError(f"specials must be 'ieee', 'nan' or 'none', got {specials!r}")
    bias = 2 ** (e - 1) - 1
    top = 2**e - 2 if specials == "ieee" else 2**e - 1  # the largest exponent field that holds numbers
    largest_mantissa = 2 - 2.0 ** (1 - m) if specials == "nan" else 2 - 2.0 ** -m
    return FloatRange(int(e), int(m), 2.0 ** (top - bias) * largest_mantissa, 2.0 ** (1 - bias), 2.0 ** (1 - bias - m))


# The floating-point layouts of chapter 6: (exponent bits, mantissa bits, special values).
FLOAT_LAYOUTS = MappingProxyType({
    "bf16": (8, 7, "ieee"),
    "fp16": (5, 10, "ieee"),
    "fp8 E4M3": (4, 3, "nan"),
    "fp8 E5M2": (5, 2, "ieee"),
    "fp4 E2M1": (2, 1, "none"),
})

# Integer formats: the largest magnitude a symmetric quantizer uses (levels either side of zero).
INTEGER_LEVELS = MappingProxyType({"int8": 127, "int4": 7})


def group_size_for_overhead(fraction: float, base: str = "int4", scale: str = "fp16", reference: str = "bf16",
                            zero_point: bool = False) -> float:
    """The group size below which the scales (and zero points) cost more than ``fraction`` of what the
    narrower format saves against ``reference``: overhead ``(s + z) / g`` equals ``fraction * (r - b)``.

    For int4 with fp16 scales against bf16, a tenth of the twelve bits saved is 1.2 bits, reached at a
    group of about 13 elements.
    """
    fraction = number("fraction", fraction)
    if scale not in SCALE_FORMATS:
        raise unknown_name("scale format", scale, SCALE_FORMATS)
    saved = 8 * (dtype_bytes(reference) - dtype_bytes(base))
    if saved <= 0:
        raise ValueError(f"{base} saves nothing against {reference}")
    extra = 8 * SCALE_FORMATS[scale] + (8 * dtype_bytes(base) if zero_point else 0)
    return extra / (fraction * saved)


# --------------------------------------------------------------------------------------------------------------
# Hardware support: the math format needs tensor cores; storage does not
# --------------------------------------------------------------------------------------------------------------

def chips_with(dtype: str, catalog=None) -> list[str]:
    """Catalog keys of the accelerators with a dense tensor-core peak for ``dtype`` ('fp8': H100, H200...)."""
    if dtype not in DTYPE_BYTES:
        raise unknown_name("dtype", dtype, DTYPE_BYTES)
    return [k for k in hardware_names(catalog) if dtype in get_hardware(k, catalog).dense_flops]


def check_math(hardware: Hardware | str, f: Formats | str) -> None:
    """Refuse a math format ``hardware`` has no peak for, saying what it has and which chips have it.

    Storage formats are never refused: weights or a KV cache in fp8 or int4 are read and converted to
    the math format in the kernel, on any chip. Only the math needs the tensor cores.
    """
    h = get_hardware(hardware)
    math_format = f.math if isinstance(f, Formats) else f
    if math_format in h.dense_flops:
        return
    others = [get_hardware(k).short for k in chips_with(math_format)] if math_format in DTYPE_BYTES else []
    where = f"; chips in the catalog with {math_format}: {', '.join(others)}" if others else ""
    raise ValueError(f"the {h.short} has no {math_format} tensor cores (its math formats: {', '.join(h.dense_flops)})"
                     f"{where}. To store weights or the KV cache in {math_format} and compute in bf16, set "
                     f"the weights or KV format instead of the math format")


# --------------------------------------------------------------------------------------------------------------
# The crossover batch: where a format's decode step turns compute-bound
# --------------------------------------------------------------------------------------------------------------

class Crossover(NamedTuple):
    """The decode batch at which a step turns compute-bound, and the three numbers of its law.

    A decode step of ``B`` sequences reads ``W`` bytes of weights once and ``k`` bytes per sequence
    (its KV cache), and does ``f`` FLOPs per sequence. It is compute-bound once
    ``B f / P >= (W + B k) / BW``, that is from ``B* = (W / BW) / (f / P - k / BW)`` on; with no cache
    and every parameter in one format of ``w`` bytes, ``B* = ridge * w / 2``. When ``f / P <= k / BW``
    the cache's traffic grows as fast as the math and the step never crosses: ``batch`` is None.
    """

    batch: float | None
    weight_bytes: float
    flops_per_sequence: float
    kv_bytes_per_sequence: float
    peak_flops: float
    bandwidth: float

    @property
    def first_compute_bound(self) -> int | None:
        """The smallest whole batch at or past the crossover."""
        return None if self.batch is None else int(math.ceil(self.batch - 1e-9))


def crossover_batch(model: Model | str, hardware: Hardware | str, context=0, *, dtype: str = "bf16",
                    weights_dtype: str | None = None, kv_dtype: str | None = None, math_dtype: str | None = None,
                    embeddings_dtype: str | None = None, accounting: str = "text") -> Crossover:
    """The crossover batch of :class:`Crossover`, from two decode steps (batch 1 and 2) of the package's own
    accounting: bytes and FLOPs are affine in the batch, so two points give ``W``, ``k`` and ``f`` exactly.

    Llama 3 8B on an H100 at no context: about 295 in bf16, a quarter of that with int4 weights.
    """
    m, h = load_model(model), get_hardware(hardware)
    kw = dict(dtype=dtype, weights_dtype=weights_dtype, kv_dtype=kv_dtype, math_dtype=math_dtype,
              embeddings_dtype=embeddings_dtype, accounting=accounting)
    one, two = decode_step(m, 1, context, **kw), decode_step(m, 2, context, **kw)
    check_math(h, one.formats)
    k = float(two.bytes - one.bytes)
    w = float(one.bytes) - k
    f = float(one.flops)
    peak, bw = h.peak_flops(one.formats.math), h.hbm_bandwidth
    slope = f / peak - k / bw
    return Crossover((w / bw) / slope if slope > 0 else None, w, f, k, peak, bw)


# --------------------------------------------------------------------------------------------------------------
# Deployments: the chapter's schemes, their memory and their times
# --------------------------------------------------------------------------------------------------------------

SCHEMES = MappingProxyType({
    "bf16": MappingProxyType({}),
    "W8A16 (int8)": MappingProxyType({"weights_dtype": "int8", "embeddings_dtype": "bf16"}),
    "W4A16 (int4, g128)": MappingProxyType({"weights_dtype": "int4-g128", "embeddings_dtype": "bf16"}),
    "W8A8 (fp8)": MappingProxyType({"weights_dtype": "fp8", "math_dtype": "fp8", "embeddings_dtype": "bf16"}),
    "bf16, fp8 KV": MappingProxyType({"kv_dtype": "fp8"}),
    "W4A16, fp8 KV": MappingProxyType({"weights_dtype": "int4-g128", "embeddings_dtype": "bf16", "kv_dtype": "fp8"}),
})
"""The deployments chapter 6 compares, as format settings for :func:`~roofline.workloads.inference.decode_step`.

Weight-only schemes quantize the decoder layers' matmul weights and keep the embedding table, the
output head and the norms in bf16; int8 weights carry one scale per output row, a few bytes per
matrix, left out. W8A8 multiplies fp8 weights by fp8 activations on fp8 tensor cores (the output head
too, in this count). Activations between kernels stay bf16 throughout.
"""


def scheme(name: str) -> dict:
    """The format settings of a deployment in :data:`SCHEMES` (close matches named when unknown)."""
    try:
        return dict(SCHEMES[name])
    except (KeyError, TypeError):
        raise unknown_name("scheme", name, SCHEMES) from None


def max_batch(model: Model | str, hardware: Hardware | str, context: int, **formats_) -> int:
    """The most sequences of ``context`` tokens whose KV cache fits beside the weights in usable HBM (0: none)."""
    m, h = load_model(model), get_hardware(hardware)
    f = formats(formats_.get("dtype", "bf16"), **{k: v for k, v in formats_.items() if k != "dtype"})
    free = h.usable_capacity - weight_bytes(m, **formats_)
    per_sequence = m.kv_cache_bytes(number("context", context, integer=True), f.kv)
    return max(0, int(free // per_sequence))


class ServingPoint(NamedTuple):
    """One deployment on one GPU: what it holds and how fast it decodes and prefills (the step rule)."""

    weights: float  # bytes
    fits: bool
    max_batch: int
    decode_time_1: float  # seconds per token, batch 1
    decode_time_max: float | None  # seconds per token at the largest batch that fits
    decode_bound_max: str | None
    prefill_time: float  # seconds for one prompt of ``context`` tokens
    prefill_bound: str


def serving_point(model: Model | str, hardware: Hardware | str, context: int, **formats_) -> ServingPoint:
    """Memory, decode and prefill of ``model`` on one ``hardware`` with sequences of ``context`` tokens.

    Decode is timed with ``context`` cached tokens per sequence, at batch 1 and at :func:`max_batch`
    (time per token is the step's time over the batch); prefill processes one prompt of ``context``
    tokens. The first-order count and the step rule, as chapter 1's decode.
    """
    m, h = load_model(model), get_hardware(hardware)
    one = decode_step(m, 1, context, **formats_)
    check_math(h, one.formats)
    w = weight_bytes(m, **formats_)
    big = max_batch(m, h, context, **formats_)
    t1 = predict(one, h).time
    if big >= 1:
        p = predict(decode_step(m, big, context, **formats_), h)
        tmax, bound = p.time / big, str(p.bound)
    else:
        tmax, bound = None, None
    pre = predict(prefill(m, context, **formats_), h)
    return ServingPoint(w, big >= 1, big, t1, tmax, bound, pre.time, str(pre.bound))


def decode_speedup(model: Model | str, hardware: Hardware | str, batch=1, context=0, *, base: dict | None = None,
                   **formats_):
    """How many times faster a decode step runs in the given formats than in ``base`` (bf16 by default).

    Broadcasts over ``batch`` and ``context``. While both steps are memory-bound the ratio is about the
    ratio of the bytes they move; once both are compute-bound it is the ratio of the peaks.
    """
    m, h = load_model(model), get_hardware(hardware)
    b = predict(decode_step(m, batch, context, **(base or {})), h).time
    q = decode_step(m, batch, context, **formats_)
    check_math(h, q.formats)
    out = np.asarray(b) / np.asarray(predict(q, h).time)
    return out.item() if out.ndim == 0 else out


def equal_saving_context(model: Model | str, batch: int = 1, *, weights: str = "W4A16 (int4, g128)",
                         kv_dtype: str = "fp8") -> float:
    """Chapter 6, exercise 3: the context (tokens per sequence) at which a batch of ``batch`` sequences saves
    as many bytes per decode step from a narrower KV cache (``kv_dtype``, against bf16) as from the weight
    scheme ``weights`` of :data:`SCHEMES` (against bf16 weights): ``dW / (batch * dK)``, with ``dW`` the weight
    bytes saved and ``dK`` the cache bytes saved per token. Longer contexts favour the cache, shorter the
    weights. Llama 3 8B, W4A16 against an fp8 cache: 158,080 tokens for one sequence, 9,880 for sixteen."""
    m = load_model(model)
    batch = number("batch", batch, integer=True)
    saved_w = weight_bytes(m) - weight_bytes(m, **scheme(weights))
    saved_kv = m.kv_bytes_per_token() - m.kv_bytes_per_token(kv_dtype)
    if saved_kv <= 0:
        raise ValueError(f"kv_dtype must be narrower than bf16 to save cache bytes, got {kv_dtype!r}")
    return float(saved_w / (batch * saved_kv))


__all__ += ["equal_saving_context"]


def dequantization_budget(hardware: Hardware | str, weights: str = "int4-g128", *, vector: str = "fp32") -> float:
    """Vector-unit operations per weight that a batch-1 weight-only kernel can spend without being seen.

    Reading one weight takes ``bytes / bandwidth`` seconds; in that time the chip's ``vector`` units
    (the non-tensor peak, here fp32) do ``peak * bytes / bandwidth`` operations. Unpacking a 4-bit
    weight, converting it and applying its group's scale (and zero point) must fit in that, or the
    dequantization, not the memory, sets the time.
    """
    h = get_hardware(hardware)
    return h.peak_flops(vector) * dtype_bytes(weights) / h.hbm_bandwidth


def bf16_kept_params(model: Model | str) -> int:
    """Parameters a weight-only scheme of :data:`SCHEMES` keeps in bf16 (chapter 6): the embedding
    table, the output head (when untied) and the norm scales, ``embedding + lm_head + norms``."""
    m = load_model(model)
    return m.embedding_params + m.lm_head_params + m.norm_params


__all__ += ["bf16_kept_params"]


def bf16_kept_share(model: Model | str) -> float:
    """The fraction of all parameters a weight-only scheme keeps in bf16 (chapter 6):
    :func:`bf16_kept_params` over ``params``."""
    m = load_model(model)
    return bf16_kept_params(m) / m.params


__all__ += ["bf16_kept_share"]


def kv_room(model: Model | str, hardware: Hardware | str, **formats_) -> float:
    """Bytes of usable HBM left for the KV cache beside the weights in the given formats (chapter 6):
    ``usable capacity - weight bytes``, what :func:`max_batch` divides by the bytes of one sequence."""
    return get_hardware(hardware).usable_capacity - weight_bytes(model, **formats_)


__all__ += ["kv_room"]


def peak_ratio(hardware: Hardware | str, dtype: str = "fp8", base: str = "bf16") -> float:
    """How many times the datasheet's dense peak in ``dtype`` is that in ``base`` (chapter 6: fp8 against
    bf16, 2x on Hopper)."""
    h = get_hardware(hardware)
    return h.peak_flops(dtype) / h.peak_flops(base)


__all__ += ["peak_ratio"]


# --------------------------------------------------------------------------------------------------------------
# The bill: quality from the papers' own tables
# --------------------------------------------------------------------------------------------------------------

class Published(NamedTuple):
    """One result from a paper's own table: a quantized model's metric beside the paper's own baseline."""

    method: str  # the method as the paper names it
    scheme: str  # what is quantized, and to what
    weight_bits: float  # bits per weight the scheme stores (scales left out)
    model: str
    metric: str  # 'perplexity' (lower is better) or 'accuracy' (higher is better, in %)
    dataset: str
    baseline_label: str
    baseline: float
    value: float
    source: str  # the bibliography key
    where: str  # the table in the paper


PUBLISHED: tuple[Published, ...] = (
    # Dettmers et al. 2022, Table 1: C4 validation perplexity of fairseq-trained dense models
    Published("LLM.int8()", "W8A8 int8, outliers in fp16", 8, "13B (fairseq)", "perplexity", "C4",
              "32-bit float", 12.45, 12.45, "dettmers2022llmint8", "Table 1"),
    Published("LLM.int8()", "W8A8 int8, outliers in fp16", 8, "1.3B (fairseq)", "perplexity", "C4",
              "32-bit float", 15.91, 15.93, "dettmers2022llmint8", "Table 1"),
    Published("int8 absmax (naive)", "W8A8 int8", 8, "13B (fairseq)", "perplexity", "C4",
              "32-bit float", 12.45, 19.08, "dettmers2022llmint8", "Table 1"),
    # Xiao et al. 2023, Table 3 (OPT-175B) and Table 6 (LLaMA, WikiText-2)
    Published("SmoothQuant-O3", "W8A8 int8", 8, "OPT-175B", "accuracy", "7 zero-shot tasks (mean)",
              "FP16", 66.9, 66.8, "xiao2023smoothquant", "Table 3"),
    Published("W8A8 (naive)", "W8A8 int8", 8, "OPT-175B", "accuracy", "7 zero-shot tasks (mean)",
              "FP16", 66.9, 35.5, "xiao2023smoothquant", "Table 3"),
    Published("SmoothQuant", "W8A8 int8", 8, "LLaMA 7B", "perplexity", "WikiText-2",
              "FP16", 11.51, 11.56, "xiao2023smoothquant", "Table 6"),
    Published("SmoothQuant", "W8A8 int8", 8, "LLaMA 65B", "perplexity", "WikiText-2",
              "FP16", 6.17, 6.20, "xiao2023smoothquant", "Table 6"),
    # Frantar et al. 2023, Table 3: OPT on WikiText-2
    Published("GPTQ", "W4A16 int4", 4, "OPT-175B", "perplexity", "WikiText-2", "FP16", 8.34, 8.37,
              "frantar2023gptq", "Table 3"),
    Published("RTN", "W4A16 int4", 4, "OPT-175B", "perplexity", "WikiText-2", "FP16", 8.34, 10.54,
              "frantar2023gptq", "Table 3"),
    Published("GPTQ", "W3A16 int3", 3, "OPT-175B", "perplexity", "WikiText-2", "FP16", 8.34, 8.68,
              "frantar2023gptq", "Table 3"),
    Published("GPTQ", "W4A16 int4", 4, "OPT-13B", "perplexity", "WikiText-2", "FP16", 10.13, 10.31,
              "frantar2023gptq", "Table 3"),
    Published("GPTQ", "W3A16 int3", 3, "OPT-13B", "perplexity", "WikiText-2", "FP16", 10.13, 11.61,
              "frantar2023gptq", "Table 3"),
    # Lin et al. 2024, Table 4: Llama-2 on WikiText-2, group size 128
    Published("AWQ", "W4A16 int4, g128", 4, "Llama-2 7B", "perplexity", "WikiText-2", "FP16", 5.47, 5.60,
              "lin2024awq", "Table 4"),
    Published("RTN", "W4A16 int4, g128", 4, "Llama-2 7B", "perplexity", "WikiText-2", "FP16", 5.47, 5.73,
              "lin2024awq", "Table 4"),
    Published("AWQ", "W4A16 int4, g128", 4, "Llama-2 70B", "perplexity", "WikiText-2", "FP16", 3.32, 3.41,
              "lin2024awq", "Table 4"),
    Published("AWQ", "W4A16 int4, g128", 4, "LLaMA 7B", "perplexity", "WikiText-2", "FP16", 5.68, 5.78,
              "lin2024awq", "Table 4"),
    Published("AWQ", "W3A16 int3, g128", 3, "Llama-2 7B", "perplexity", "WikiText-2", "FP16", 5.47, 6.24,
              "lin2024awq", "Table 4"),
    Published("AWQ", "W3A16 int3, g128", 3, "Llama-2 70B", "perplexity", "WikiText-2", "FP16", 3.32, 3.74,
              "lin2024awq", "Table 4"),
    # Micikevicius et al. 2022, Table 5: post-training quantization of 16-bit-trained GPT-3-style models
    Published("fp8 E4M3 (post-training)", "W8A8 fp8", 8, "GPT-3 style 6.7B", "perplexity", "wikitext103",
              "16-bit float", 8.51, 8.41, "micikevicius2022fp8", "Table 5"),
    Published("int8 (post-training)", "W8A8 int8", 8, "GPT-3 style 6.7B", "perplexity", "wikitext103",
              "16-bit float", 8.51, 10.29, "micikevicius2022fp8", "Table 5"),
    Published("fp8 E4M3 (post-training)", "W8A8 fp8", 8, "GPT-3 style 1.3B", "perplexity", "wikitext103",
              "16-bit float", 10.19, 10.29, "micikevicius2022fp8", "Table 5"),
)
"""Quality against each paper's own baseline, copied from the tables named in ``where``. Perplexities
from different papers are not comparable with each other (different evaluation lengths and
tokenizers: SmoothQuant's table gives LLaMA 7B a WikiText-2 perplexity of 11.51, AWQ's 5.68); compare
each row only with its own baseline."""


def published(*, method: str | None = None, source: str | None = None) -> tuple[Published, ...]:
    """The rows of :data:`PUBLISHED`, optionally only one method's or one paper's."""
    rows = PUBLISHED
    if method is not None:
        if method not in {r.method for r in PUBLISHED}:
            raise unknown_name("method", method, {r.method for r in PUBLISHED})
        rows = tuple(r for r in rows if r.method == method)
    if source is not None:
        if source not in {r.source for r in PUBLISHED}:
            raise unknown_name("source", source, {r.source for r in PUBLISHED})
        rows = tuple(r for r in rows if r.source == source)
    return rows


_SCHEME_FORMATS = MappingProxyType({
    "W8A8 int8, outliers in fp16": {"weights_dtype": "int8", "math_dtype": "int8", "embeddings_dtype": "bf16"},
    "W8A8 int8": {"weights_dtype": "int8", "math_dtype": "int8", "embeddings_dtype": "bf16"},
    "W8A8 fp8": {"weights_dtype": "fp8", "math_dtype": "fp8", "embeddings_dtype": "bf16"},
    "W4A16 int4": {"weights_dtype": "int4", "embeddings_dtype": "bf16"},
    "W4A16 int4, g128": {"weights_dtype": "int4-g128", "embeddings_dtype": "bf16"},
})


def formats_of(row: Published) -> dict | None:
    """The format settings (for :func:`~roofline.workloads.inference.decode_step`) of a published row's scheme, or
    None where the package has no such format (3-bit weights). LLM.int8()'s fp16 outlier columns are
    left out: a few per matrix, they change the bytes little and the kernel's speed a lot, which the
    roofline does not see."""
    found = _SCHEME_FORMATS.get(row.scheme)
    return None if found is None else dict(found)


def relative_change(row: Published) -> float:
    """How much worse the quantized model is than its baseline, as a fraction (positive: worse).

    Perplexity: ``value / baseline - 1``; accuracy: ``1 - value / baseline``.
    """
    if row.metric == "perplexity":
        return row.value / row.baseline - 1
    return 1 - row.value / row.baseline


def absolute_change(row: Published) -> float:
    """The quantized model's metric less its baseline, in the metric's own units (chapter 6: perplexity
    points, or accuracy points in %); positive means a higher number, which is worse for perplexity."""
    if not isinstance(row, Published):
        raise TypeError(f"row must be a Published row of PUBLISHED, got {type(row).__name__}")
    return row.value - row.baseline


__all__ += ["absolute_change"]


def quality_text(row: Published, which: str = "value") -> str:
    """A published row's ``'value'`` or ``'baseline'`` as the chapter quotes it (chapter 6): an accuracy
    with one decimal and a percent sign ('66.9%'), a perplexity with two decimals ('12.45')."""
    if not isinstance(row, Published):
        raise TypeError(f"row must be a Published row of PUBLISHED, got {type(row).__name__}")
    if which not in ("value", "baseline"):
        raise ValueError(f"which must be 'value' or 'baseline', got {which!r}")
    v = getattr(row, which)
    return f"{v:.1f}%" if row.metric == "accuracy" else f"{v:.2f}"


__all__ += ["quality_text"]


# --------------------------------------------------------------------------------------------------------------
# What the H200 record says of fp8
# --------------------------------------------------------------------------------------------------------------

class MeasuredFp8(NamedTuple):
    """The fp8 and bf16 matmul ceilings of a record, and the ratio at each shape both were timed at."""

    fp8: float  # FLOP/s, the fastest fp8 product (median of its runs)
    fp8_shape: tuple
    bf16: float  # FLOP/s, the fastest bf16 product, any timing
    bf16_shape: tuple
    bf16_timing: str
    same_shape: tuple  # (m, n, k, fp8, bf16 timed per call, bf16 graph-timed) for each fp8 shape

    @property
    def ratio(self) -> float:
        return self.fp8 / self.bf16

    def row(self, m: int) -> tuple:
        """The row of :attr:`same_shape` whose fp8 product has ``m`` rows (chapter 6)."""
        found = [r for r in self.same_shape if r[0] == m]
        if not found:
            raise ValueError(f"m must be one of the fp8 shapes' rows {[r[0] for r in self.same_shape]}, got {m!r}")
        return found[0]

    def ratio_at(self, m: int, bf16: str = "per call") -> float:
        """fp8 over bf16 at the fp8 shape of ``m`` rows, the bf16 product timed ``'per call'`` (as the fp8
        one) or in a CUDA ``'graph'`` (chapter 6)."""
        if bf16 not in ("per call", "graph"):
            raise ValueError(f"bf16 must be 'per call' or 'graph', got {bf16!r}")
        r = self.row(m)
        return r[3] / r[4 if bf16 == "per call" else 5]

    def graph_over_call(self, m: int) -> float:
        """The bf16 product of the fp8 shape of ``m`` rows: its rate timed in CUDA graphs over its rate timed
        one call at a time (chapter 6). A graph only removes the launch, so this should be at least one; below
        one, the two sweeps differ by more than the launch (clocks, power, the kernel cuBLAS picked)."""
        r = self.row(m)
        return r[5] / r[4]

    def graph_slower(self) -> tuple:
        """The rows ``m`` of the fp8 shapes at which bf16 in CUDA graphs ran slower than bf16 one call at a
        time (chapter 6): where run-to-run variation outweighs the launch a graph saves."""
        return tuple(r[0] for r in self.same_shape if r[4] is not None and r[5] is not None and r[5] < r[4])

    def slower_than_graph(self) -> tuple:
        """The rows ``m`` at which fp8, timed one call at a time, ran slower than bf16 of the same shape in
        CUDA graphs (appendix A, exercise 4): small products, where the call's overhead outweighs the math."""
        return tuple(r[0] for r in self.same_shape if r[5] is not None and r[3] < r[5])

    def of_peak(self, hardware: Hardware | str) -> tuple[float, float]:
        """(fp8, bf16) ceilings as fractions of the datasheet's dense peaks of ``hardware`` (chapter 6)."""
        h = get_hardware(hardware)
        return self.fp8 / h.peak_flops("fp8"), self.bf16 / h.peak_flops("bf16")


def measured_fp8_speedup(record) -> MeasuredFp8:
    """fp8 against bf16 in a measurement record (:func:`roofline.core.records.load_measurement`): the two
    best medians, and for every shape the fp8 sweep covered, the bf16 products of the same shape timed
    the same way (one call at a time) and in CUDA graphs."""
    fp8 = list(record.gemm_fp8_per_call)
    if not fp8:
        raise ValueError(f"record {getattr(record, 'name', record)!r} has no fp8 matmuls")
    per_call = {(g.m, g.n, g.k): g.flops_per_s for g in record.gemm_per_call if g.dtype == "bf16"}
    graph = {(g.m, g.n, g.k): g.flops_per_s for g in record.gemm_graph if g.dtype == "bf16"}
    best8 = max(fp8, key=lambda g: g.flops_per_s)
    timed = [("per call", s, v) for s, v in per_call.items()] + [("graph", s, v) for s, v in graph.items()]
    timing, shape16, best16 = max(timed, key=lambda t: t[2])
    rows = tuple((g.m, g.n, g.k, g.flops_per_s, per_call.get((g.m, g.n, g.k)), graph.get((g.m, g.n, g.k)))
                 for g in sorted(fp8, key=lambda g: g.m))
    return MeasuredFp8(best8.flops_per_s, (best8.m, best8.n, best8.k), best16, shape16, timing, rows)


def launch_share(record, m: int) -> float:
    """An eager kernel launch's seconds as a fraction of the fp8 product of ``m`` rows' median time, in a
    measurement record (chapter 6): ``launch / (flops / flops_per_s)``."""
    g = [x for x in record.gemm_fp8_per_call if x.m == m]
    if not g:
        raise ValueError(f"m must be a row count the record's fp8 sweep timed "
                         f"{sorted(x.m for x in record.gemm_fp8_per_call)}, got {m!r}")
    return record.launch_overhead.eager_s_per_kernel / g[0].seconds


__all__ += ["launch_share"]


def output_byte_share(gemm, out_dtype: str = "bf16") -> float:
    """The share of a measured matmul's minimum bytes that is its ``m x n`` output in ``out_dtype``
    (chapter 6: an fp8 product still writes bf16), ``m n bytes(out) / min_bytes``."""
    for field in ("m", "n", "min_bytes"):
        if not hasattr(gemm, field):
            raise TypeError(f"gemm must be a measured Gemm with m, n and min_bytes, got {type(gemm).__name__}")
    return gemm.m * gemm.n * dtype_bytes(out_dtype) / gemm.min_bytes


__all__ += ["output_byte_share"]
