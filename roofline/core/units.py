"""Units and number formats (chapter 1).

Inside the package every quantity is a plain float in SI base units: FLOP, bytes, seconds, bytes per
second. Decimal prefixes throughout (1 GB = 1e9 bytes), as datasheets and the text use them.
Formatting happens only at the edge, in :func:`fmt` and :class:`Quantity`.
"""

from __future__ import annotations

import decimal
import math
import re
from dataclasses import dataclass

import numpy as np

from roofline.core.checks import unknown_name

__all__ = ["DTYPE_BYTES", "SCALE_FORMATS", "GroupFormat", "group_format", "dtype_bytes", "bits_per_element",
           "Quantity", "fmt", "SCALE"]
__all__ += ["CONVERTIBLE", "SCALES"]

# Bytes per element of each number format the book uses.
DTYPE_BYTES: dict[str, float] = {
    "fp64": 8,
    "fp32": 4,
    "tf32": 4,  # stored as fp32; the tensor cores read 19 bits of it
    "bf16": 2,
    "fp16": 2,
    "fp8": 1,
    "int8": 1,
    "int4": 0.5,
    "fp4": 0.5,  # E2M1, Blackwell's 4-bit float; stored in blocks that share a scale (chapter 6)
}

# Formats a group's scale can be stored in (chapter 6): 'e8m0' is the power-of-two scale of the OCP
# microscaling (MX) formats, one byte of exponent and no mantissa.
SCALE_FORMATS: dict[str, float] = {"fp32": 4, "fp16": 2, "bf16": 2, "fp8": 1, "e8m0": 1}

# Quantized formats named as the industry names them, as group-wise formats (chapter 6).
_NAMED_GROUPS = {"mxfp4": "fp4-g32-e8m0", "nvfp4": "fp4-g16-fp8"}

_GROUP = re.compile(r"^(?P<base>int8|int4|fp8|fp4)-g(?P<group>[1-9][0-9]*)(?:-(?P<scale>fp32|fp16|bf16|fp8|e8m0))?"
                    r"(?P<zero>-zp)?$")


@dataclass(frozen=True)
class GroupFormat:
    """A quantized format whose elements share one scale per ``group`` of consecutive elements (chapter 6).

    Written ``'int4-g128'``: int4 elements, one fp16 scale per 128 of them (GPTQ's and AWQ's usual
    setting). A scale format may follow (``'fp4-g32-e8m0'``: the OCP MXFP4 format), and ``-zp`` adds a
    zero point per group stored in the element format itself (asymmetric quantization, as GPTQ and AWQ
    checkpoints pack them: ``'int4-g128-zp'``). ``'mxfp4'`` and ``'nvfp4'`` are names for
    ``'fp4-g32-e8m0'`` and ``'fp4-g16-fp8'`` (NVFP4's one fp32 scale per tensor is left out: it is a
    few bytes per matrix).
    """

    base: str
    group: int
    scale: str = "fp16"
    zero_point: bool = False

    @property
    def bits(self) -> float:
        """Bits per element, the scales and zero points included: ``b + (s + z) / g``."""
        base = 8 * DTYPE_BYTES[self.base]
        extra = 8 * SCALE_FORMATS[self.scale] + (base if self.zero_point else 0)
        return base + extra / self.group

    @property
    def bytes(self) -> float:
        return self.bits / 8

    @property
    def name(self) -> str:
        return f"{self.base}-g{self.group}-{self.scale}" + ("-zp" if self.zero_point else "")


def group_format(name: str) -> GroupFormat | None:
    """The :class:`GroupFormat` a name such as ``'int4-g128'`` spells, or None for a plain format."""
    if not isinstance(name, str):
        return None
    match = _GROUP.match(_NAMED_GROUPS.get(name, name))
    if match is None:
        return None
    return GroupFormat(match["base"], int(match["group"]), match["scale"] or "fp16", bool(match["zero"]))


def dtype_bytes(dtype: str) -> float:
    """Bytes per element of ``dtype`` ('bf16' -> 2), the scales of a group-wise format included
    ('int4-g128' -> 0.515625: four bits, and one fp16 scale per 128 elements)."""
    try:
        return DTYPE_BYTES[dtype]
    except (KeyError, TypeError):
        pass
    g = group_format(dtype)
    if g is None:
        raise unknown_name("dtype", dtype, [*DTYPE_BYTES, "int4-g128", "int4-g128-zp", "mxfp4", "nvfp4"]) from None
    return g.bytes


def bits_per_element(dtype: str) -> float:
    """Bits per stored element of ``dtype``, scales and zero points included ('int4-g128' -> 4.125)."""
    return 8 * dtype_bytes(dtype)


# Unit strings accepted in the data files, as multiples of the SI base unit.
SCALE: dict[str, tuple[float, str]] = {
    "PFLOP/s": (1e15, "FLOP/s"),
    "TFLOP/s": (1e12, "FLOP/s"),
    "GFLOP/s": (1e9, "FLOP/s"),
    "TB/s": (1e12, "B/s"),
    "GB/s": (1e9, "B/s"),
    "Gb/s": (1e9 / 8, "B/s"),
    "TB": (1e12, "B"),
    "GB": (1e9, "B"),
    "MB": (1e6, "B"),
    "MiB": (2**20, "B"),
    "GiB": (2**30, "B"),
    "B": (1.0, "B"),
    "W": (1.0, "W"),
}

# Units that take a decimal prefix when none is forced; everything else is printed as it is.
_PREFIXED = {"s", "B", "B/s", "FLOP", "FLOP/s", "W", "b/s"}
# Units written against the number, with no space.
_TIGHT = {"%", "×"}

# Beyond these (after the prefix), a number prints in scientific notation, which a reader can read at any size.
_SCIENTIFIC = (1e15, 1e-9)

_PREFIXES = [(1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""), (1e-3, "m"), (1e-6, "µ"), (1e-9, "n")]


# Display units a value in its base unit converts to with ``convert=True`` (chapters 1 to 6): a fraction
# shown in percent, bytes in binary multiples.
CONVERTIBLE: dict[str, float] = {"%": 1 / 100, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}

# Scales a count is shown in with ``per=`` when the prose writes the scale's word after the number
# ("{eval}`params` billion parameters", "batches of {eval}`tokens` M tokens", "... x 10^24 FLOP"):
# the number printed is the count divided by the scale, and no unit is added for it.
SCALES: dict[str, float] = {"thousand": 1e3, "million": 1e6, "billion": 1e9, "trillion": 1e12, "1e24": 1e24,
                            "Mi": 2.0**20}


def _converted(value: float, unit: str) -> float:
    """``value`` (a fraction, or bytes) in the display ``unit`` of :data:`CONVERTIBLE`."""
    if unit not in CONVERTIBLE:
        raise ValueError(f"convert=True needs a unit of {', '.join(map(repr, CONVERTIBLE))} "
                         f"(a fraction shown in %, bytes in binary multiples), got {unit!r}")
    return value * 100 if unit == "%" else value / CONVERTIBLE[unit]


def fmt(value: float, unit: str = "", digits: int = 3, *, prefix: str | None = None, fixed: int | None = None,
        convert: bool = False, per: str | None = None) -> str:
    """Format ``value`` (SI base units) with a decimal prefix: ``fmt(4.794e-3, 's') == '4.79 ms'``.

    ``digits`` is the number of significant figures; ``fixed`` instead fixes the decimals after the
    prefix is chosen. ``prefix`` forces a prefix ('T' for TFLOP/s, '' for none). ``convert`` takes
    ``value`` in its base unit and shows it in ``unit``: a fraction in '%' (``fmt(0.25, '%', convert=True)
    == '25.0%'``), bytes in 'KiB', 'MiB' or 'GiB' (:data:`CONVERTIBLE`). ``per`` shows a count in one of
    the :data:`SCALES` whose word the prose writes: ``fmt(8.03e9, per='billion') == '8.03'``.
    """
    if isinstance(value, (str, bytes, bool, np.bool_)) or np.ndim(value) != 0 or np.iscomplexobj(value):
        raise TypeError(f"value must be a single real number, got {type(value).__name__} {value!r}"[:160])
    if not isinstance(unit, str):
        raise TypeError(f"unit must be a string such as 'B/s', got {unit!r}")
    if isinstance(digits, bool) or not isinstance(digits, int) or digits < 1:
        raise ValueError(f"digits must be a whole number >= 1, got {digits!r}")
    if fixed is not None and (isinstance(fixed, bool) or not isinstance(fixed, int) or fixed < 0):
        raise ValueError(f"fixed must be a whole number >= 0 or None, got {fixed!r}")
    if per is not None and per not in SCALES:
        raise ValueError(f"per must be one of {', '.join(map(repr, SCALES))} (a count shown in that scale), got {per!r}")
    if per is not None and (convert or prefix not in (None, "")):
        raise ValueError("per shows a count in a scale the prose names; it does not combine with convert or a prefix")
    if prefix is not None and prefix not in {p for _, p in _PREFIXES} | {""}:
        raise ValueError(f"prefix must be one of {', '.join(repr(p) for _, p in _PREFIXES)}, got {prefix!r}")
    try:
        value = float(value)
    except OverflowError:  # an integer past the largest float (10**400): its digits, in scientific notation
        text = f"{decimal.Decimal(int(value)):.{digits - 1}e}".replace("E", "e")
        return f"{text} {unit}".strip() if unit not in _TIGHT else text + unit
    except (TypeError, ValueError):
        raise TypeError(f"value must be a single real number, got {type(value).__name__} {value!r}"[:160]) from None
    if convert:
        value = _converted(value, unit)
    if per is not None:
        value = value / SCALES[per]
    if not math.isfinite(value):
        return f"{value} {unit}".strip()
    forced = prefix is not None
    if prefix is None:
        scale, prefix = 1.0, ""
        if value != 0 and unit in _PREFIXED:
            for s, p in _PREFIXES:
                if abs(value) >= s * 0.9995:
                    scale, prefix = s, p
                    break
            else:
                scale, prefix = _PREFIXES[-1]
    else:
        scale = dict((p, s) for s, p in _PREFIXES)[prefix]
    x = value / scale
    if x != 0 and not _SCIENTIFIC[1] <= abs(x) < _SCIENTIFIC[0]:  # past every prefix: 1.00e+30 s, never 31 digits
        if not forced:
            x, prefix = value, ""
        sep = "" if unit in _TIGHT else " "
        return f"{x:.{digits - 1}e}{sep}{prefix}{unit}".rstrip()
    if fixed is not None:
        text = f"{x:,.{fixed}f}"
    else:
        decimals = max(0, digits - 1 - int(math.floor(math.log10(abs(x))))) if x != 0 else 0
        text = f"{x:,.{decimals}f}"
    sep = "" if unit in _TIGHT or not (unit or prefix) else " "
    return f"{text}{sep}{prefix}{unit}"


@dataclass(frozen=True)
class Quantity:
    """A number with its display format, for gluing into prose.

    ``repr`` is the formatted text, so ``myst_nb.glue(name, Quantity(...))`` puts exactly that text
    into ``{eval}`name``` in the prose (``roofline.present.glue.glue``), and nbval compares it on every test run.
    """

    value: float
    unit: str = ""
    digits: int = 3
    prefix: str | None = None
    fixed: int | None = None
    suffix: str = ""
    convert: bool = False  # value in its base unit, shown in ``unit`` (a fraction in %, bytes in KiB): fmt's convert
    per: str | None = None  # a count shown in one of SCALES, the scale's word written in the prose: fmt's per

    def __repr__(self) -> str:
        return fmt(self.value, self.unit, self.digits, prefix=self.prefix, fixed=self.fixed,
                   convert=self.convert, per=self.per) + self.suffix

    __str__ = __repr__

    def __post_init__(self):
        fmt(self.value, self.unit, self.digits, prefix=self.prefix, fixed=self.fixed,
            convert=self.convert, per=self.per)  # the same checks, at once
        if not isinstance(self.suffix, str):
            raise TypeError(f"suffix must be a string, got {self.suffix!r}")

    def __float__(self) -> float:
        return float(self.value)
