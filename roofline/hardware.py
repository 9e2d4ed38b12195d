"""Accelerators: datasheet figures with their sources (chapter 1).

The catalog lives in ``roofline/data/hardware.toml``; every figure there carries a source. A
:class:`Hardware` is what the datasheet promises, and nothing else: the roofs built from it, and from
measurements, live in :mod:`roofline.roof`.
"""

from __future__ import annotations

import tomllib
import re
from dataclasses import dataclass, field, replace
from functools import cache
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Mapping

from ._check import unknown_name
from .units import DTYPE_BYTES, SCALE

__all__ = [
    "CatalogError",
    "CONTEXT_RESERVE",
    "Source",
    "Figure",
    "Link",
    "Hardware",
    "get_hardware",
    "hardware_names",
    "load_catalog",
]


@dataclass(frozen=True)
class Source:
    """Where a figure comes from: a document's title, its address and date."""

    key: str
    title: str
    url: str
    date: str


@dataclass(frozen=True)
class Figure:
    """One datasheet figure in SI base units, with its source and an optional note."""

    value: float
    unit: str  # SI unit after conversion: 'FLOP/s', 'B/s', 'B', 'W'
    source: Source
    note: str = ""
    given: str = ""  # as written in the data file, e.g. '3.35 TB/s'


@dataclass(frozen=True)
class Link:
    """One interconnect tier of a GPU: NVLink, PCIe, the network."""

    tier: str  # 'scale_up', 'host' or 'network'
    name: str
    bytes_per_s: float
    direction: str  # 'bidirectional' or 'each way', as the source states it
    figure: Figure

    @property
    def each_way(self) -> float:
        """Bytes per second in one direction (half a bidirectional figure)."""
        return self.bytes_per_s / 2 if self.direction == "bidirectional" else self.bytes_per_s


@dataclass(frozen=True)
class Hardware:
    """One accelerator as its datasheet describes it. Figures in SI base units."""

    key: str
    name: str
    vendor: str
    architecture: str
    year: int
    form_factor: str
    memory_type: str
    hbm_bandwidth: float
    hbm_capacity: float
    dense_flops: Mapping[str, float]
    l2_bytes: float | None = None
    power_w: float | None = None
    interconnect: Mapping[str, Link] = field(default_factory=dict)
    figures: Mapping[str, Figure] = field(default_factory=dict, repr=False)
    aliases: tuple[str, ...] = ()
    short: str = ""  # a label for charts, e.g. 'H100 SXM'
    sparse_flops: Mapping[str, float] = field(default_factory=dict)  # 2:4 structured-sparsity peaks, if given
    hbm_total: float | None = None  # bytes the device reports to a program (None: not given, the marketing figure)
    reserve: float = 0.0  # bytes kept for the CUDA context and library workspaces

    @property
    def usable_capacity(self) -> float:
        """Bytes a workload can have: the device's own total less the reserve (chapter 2).

        An H100 SXM sold as "80 GB" reports 85.0e9 bytes; less the 1 GiB reserve, 83.97e9. Footprints are
        compared with this, never with the marketing figure (:attr:`hbm_capacity`).
        """
        return (self.hbm_total if self.hbm_total is not None else self.hbm_capacity) - self.reserve

    def peak_flops(self, dtype: str = "bf16") -> float:
        """Dense peak FLOP/s for ``dtype``; an error if the chip has no such format."""
        if dtype not in DTYPE_BYTES:
            raise unknown_name("dtype", dtype, DTYPE_BYTES)
        try:
            return self.dense_flops[dtype]
        except KeyError:
            raise ValueError(
                f"{self.name} has no dense {dtype} peak in the catalog (it supports: "
                f"{', '.join(self.dense_flops)})"
            ) from None

    def roof(self, dtype: str = "bf16"):
        """The datasheet :class:`~roofline.roof.Roof`: dense peak for ``dtype`` and HBM bandwidth."""
        from .roof import as_roof  # roof.py builds on this module; the method is a convenience

        return as_roof(self, dtype)

    def ridge_point(self, dtype: str = "bf16") -> float:
        """Datasheet ridge point, FLOP per byte of HBM traffic."""
        return self.peak_flops(dtype) / self.hbm_bandwidth

    def source(self, path: str) -> Figure:
        """The figure behind a field, e.g. ``h.source('dense.bf16')`` or ``h.source('hbm_bandwidth')``."""
        try:
            return self.figures[path]
        except KeyError:
            raise unknown_name("figure", path, self.figures) from None

    def with_(self, **changes) -> "Hardware":
        """A copy with some figures changed, for what-if questions (``hbm_bandwidth=4e12``)."""
        return replace(self, **changes)


# ---------------------------------------------------------------------------------------------
# Loading and validating the catalog

_REQUIRED = ("name", "vendor", "architecture", "year", "form_factor", "memory_type", "hbm_bandwidth", "hbm_capacity", "dense")
_FIGURE_UNITS = {
    "hbm_bandwidth": "B/s",
    "hbm_capacity": "B",
    "hbm_total": "B",
    "reserve": "B",
    "l2": "B",
    "llc": "B",
    "power": "W",
}
_TIERS = ("scale_up", "host", "network")


# Bytes set aside for what no footprint formula sees: the CUDA context (about 0.5 GB with PyTorch) and
# library workspaces (cuBLAS, NCCL). An assumption, not a datasheet figure; an entry may set its own `reserve`.
CONTEXT_RESERVE = 2**30


class CatalogError(ValueError):
    """A malformed hardware catalog entry; the message names the entry and the field."""


# "1,979 with sparsity", "4.5 PFLOPS with sparsity", "9 POPS with sparsity": the number a note quotes
_WITH_SPARSITY = re.compile(r"(\d[\d,]*(?:\.\d+)?)\s*(?:([PTG])(?:FLOP|OP)S?(?:/s)?)?\s+with\s+sparsity", re.I)
_PREFIX = {"P": 1e15, "T": 1e12, "G": 1e9}


def _check_dense_note(where: str, fig: Figure) -> None:
    """A dense figure whose note quotes a figure 'with sparsity' must be half of that figure (within 1%)."""
    for number, prefix in _WITH_SPARSITY.findall(fig.note):
        quoted = float(number.replace(",", ""))
        quoted *= _PREFIX[prefix.upper()] if prefix else fig.value / float(fig.given.split()[0])
        if abs(quoted / fig.value - 2) > 0.02:
            raise CatalogError(
                f"{where}: a sparse figure where a dense one belongs? the note quotes {number} with sparsity, "
                f"which is {quoted / fig.value:.3g}x the value {fig.given}; a dense peak is half the sparse one")


def _figure(where: str, raw, sources: Mapping[str, Source], expect: str) -> Figure:
    if not isinstance(raw, dict):
        raise CatalogError(f"{where}: expected a table {{value, unit, source}}, got {raw!r}")
    for key in ("value", "unit", "source"):
        if key not in raw:
            raise CatalogError(f"{where}: missing '{key}'")
    value, unit = raw["value"], raw["unit"]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise CatalogError(f"{where}: value must be a number, got {value!r}")
    if not value > 0:
        raise CatalogError(f"{where}: value must be positive, got {value!r} (leave a figure out rather than set it to 0)")
    if unit not in SCALE:
        raise CatalogError(f"{where}: unknown unit {unit!r}; expected one of {', '.join(SCALE)}")
    scale, si = SCALE[unit]
    if si != expect:
        raise CatalogError(f"{where}: unit {unit!r} is a {si} figure, expected {expect}")
    if raw["source"] not in sources:
        raise CatalogError(f"{where}: source {raw['source']!r} is not in [sources]")
    note = raw.get("note", "")
    if raw.get("sparse", False):
        raise CatalogError(f"{where}: a sparse figure where a dense one belongs; give the dense peak")
    return Figure(float(value) * scale, si, sources[raw["source"]], note, f"{value:g} {unit}")


def _hardware(key: str, raw: dict, sources: Mapping[str, Source]) -> Hardware:
    where = f"hardware entry [{key}]"
    missing = [k for k in _REQUIRED if k not in raw]
    if missing:
        raise CatalogError(f"{where}: missing field(s) {', '.join(missing)}")
    figures: dict[str, Figure] = {}
    for name, si in _FIGURE_UNITS.items():
        if name in raw:
            figures[name] = _figure(f"{where} field '{name}'", raw[name], sources, si)
    dense: dict[str, float] = {}
    if not isinstance(raw["dense"], dict) or not raw["dense"]:
        raise CatalogError(f"{where} field 'dense': expected a table of dense peaks by dtype")
    for dtype, fig in raw["dense"].items():
        if dtype not in DTYPE_BYTES:
            raise CatalogError(f"{where} field 'dense.{dtype}': unknown dtype; expected one of {', '.join(DTYPE_BYTES)}")
        figures[f"dense.{dtype}"] = _figure(f"{where} field 'dense.{dtype}'", fig, sources, "FLOP/s")
        _check_dense_note(f"{where} field 'dense.{dtype}'", figures[f"dense.{dtype}"])
        dense[dtype] = figures[f"dense.{dtype}"].value
    sparse: dict[str, float] = {}
    if not isinstance(raw.get("sparse", {}), dict):
        raise CatalogError(f"{where} field 'sparse': expected a table of sparse peaks by dtype")
    for dtype, fig in raw.get("sparse", {}).items():
        here = f"{where} field 'sparse.{dtype}'"
        if dtype not in dense:
            raise CatalogError(f"{here}: a sparse peak needs the dense one beside it; add dense.{dtype}")
        f = _figure(here, fig, sources, "FLOP/s")
        if abs(f.value / dense[dtype] - 2) > 0.02:
            raise CatalogError(f"{here}: {f.given} is {f.value / dense[dtype]:.3g}x dense.{dtype}; "
                               "2:4 structured sparsity doubles the dense peak (expected 2x within 1%)")
        figures[f"sparse.{dtype}"] = f
        sparse[dtype] = f.value
    links: dict[str, Link] = {}
    for tier, fig in raw.get("interconnect", {}).items():
        if tier not in _TIERS:
            raise CatalogError(f"{where} field 'interconnect.{tier}': unknown tier; expected one of {', '.join(_TIERS)}")
        f = _figure(f"{where} field 'interconnect.{tier}'", fig, sources, "B/s")
        direction = fig.get("direction")
        if direction not in ("bidirectional", "each way"):
            raise CatalogError(f"{where} field 'interconnect.{tier}.direction': expected 'bidirectional' or 'each way', got {direction!r}")
        if "name" not in fig:
            raise CatalogError(f"{where} field 'interconnect.{tier}': missing 'name'")
        figures[f"interconnect.{tier}"] = f
        links[tier] = Link(tier, fig["name"], f.value, direction, f)
    if not isinstance(raw["year"], int):
        raise CatalogError(f"{where} field 'year': expected an integer, got {raw['year']!r}")
    return Hardware(
        key=key,
        name=raw["name"],
        vendor=raw["vendor"],
        architecture=raw["architecture"],
        year=raw["year"],
        form_factor=raw["form_factor"],
        memory_type=raw["memory_type"],
        hbm_bandwidth=figures["hbm_bandwidth"].value,
        hbm_capacity=figures["hbm_capacity"].value,
        dense_flops=MappingProxyType(dense),
        l2_bytes=figures["l2"].value if "l2" in figures else None,
        power_w=figures["power"].value if "power" in figures else None,
        interconnect=MappingProxyType(links),
        figures=MappingProxyType(figures),
        aliases=tuple(a.lower() for a in raw.get("aliases", ())),
        short=raw.get("short", key.upper()),
        sparse_flops=MappingProxyType(sparse),
        hbm_total=figures["hbm_total"].value if "hbm_total" in figures else None,
        reserve=figures["reserve"].value if "reserve" in figures else CONTEXT_RESERVE,
    )


def load_catalog(path: str | Path | None = None) -> dict[str, Hardware]:
    """Read and validate a hardware catalog (the package's own when ``path`` is None)."""
    if path is None:
        text = resources.files("roofline").joinpath("data/hardware.toml").read_text(encoding="utf-8")
    else:
        text = Path(path).read_text(encoding="utf-8")
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CatalogError(f"hardware catalog {path or 'roofline/data/hardware.toml'} is not valid TOML: {exc}") from None
    sources = {}
    for key, s in raw.get("sources", {}).items():
        missing = [k for k in ("title", "url", "date") if k not in s]
        if missing:
            raise CatalogError(f"source [{key}]: missing {', '.join(missing)}")
        sources[key] = Source(key, s["title"], s["url"], str(s["date"]))
    if not raw.get("gpus"):
        raise CatalogError("hardware catalog has no [gpus.*] entries")
    return {key: _hardware(key, entry, sources) for key, entry in raw["gpus"].items()}


@cache
def _catalog() -> Mapping[str, Hardware]:
    return MappingProxyType(load_catalog())


def hardware_names() -> list[str]:
    """Keys of the shipped catalog, e.g. ['a100-sxm-80gb', 'h100-sxm', ...]."""
    return sorted(_catalog())


def get_hardware(name: str | Hardware) -> Hardware:
    """Look up an accelerator by key or alias ('h100-sxm', 'H100'); close matches on a miss."""
    if isinstance(name, Hardware):
        return name
    if not isinstance(name, str):
        raise TypeError(f"hardware must be a name such as 'h100-sxm' or a Hardware, got {name!r}")
    catalog = _catalog()
    wanted = name.strip().lower()
    for key, hw in catalog.items():
        if wanted == key or wanted in hw.aliases:
            return hw
    raise unknown_name("hardware", name, list(catalog) + [a for h in catalog.values() for a in h.aliases])


def __getattr__(name: str):
    """``Roof`` and ``ridge_point`` moved to :mod:`roofline.roof`; the old import path keeps working."""
    if name in ("Roof", "ridge_point"):
        from . import roof

        return getattr(roof, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
