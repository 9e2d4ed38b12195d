"""Accelerators: datasheet figures with their sources (chapter 1).

The catalog lives in ``roofline/data/hardware.toml``; every figure there carries a source. A
:class:`Hardware` is what the datasheet promises, and nothing else: the roofs built from it, and from
measurements, live in :mod:`roofline.core.roof`.
"""

from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass, field, replace
from functools import cache
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Mapping

from roofline.core.checks import number, unknown_name
from roofline.core.units import DTYPE_BYTES, SCALE

__all__ = [
    "CatalogError",
    "CONTEXT_RESERVE",
    "Source",
    "Spec",
    "Link",
    "Hardware",
    "get_hardware",
    "hardware_names",
    "load_catalog",
    "MissingLinkError",
    "require_links",
    "TIER_WORDS",
]


@dataclass(frozen=True)
class Source:
    """Where a figure comes from: a document's title, its address and date."""

    key: str
    title: str
    url: str
    date: str


@dataclass(frozen=True)
class Spec:
    """One datasheet figure (a spec) in SI base units, with its source and an optional note."""

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
    figure: Spec

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
    shared_memory_per_sm: float | None = None  # bytes of shared memory one SM can give its blocks (chapter 4)
    power_w: float | None = None
    interconnect: Mapping[str, Link] = field(default_factory=dict)
    figures: Mapping[str, Spec] = field(default_factory=dict, repr=False)
    aliases: tuple[str, ...] = ()
    short: str = ""  # a label for charts, e.g. 'H100 SXM'
    sparse_flops: Mapping[str, float] = field(default_factory=dict)  # 2:4 structured-sparsity peaks, if given
    hbm_total: float | None = None  # bytes the device reports to a program (None: not given, the marketing figure)
    reserve: float = 0.0  # bytes kept for the CUDA context and library workspaces
    host_memory: float | None = None  # bytes of host DRAM per GPU in its usual server (chapter 3's offloading budget)

    @property
    def usable_capacity(self) -> float:
        """Bytes a workload can have: the device's own total less the reserve (chapter 2).

        An H100 SXM sold as "80 GB" reports 85.0e9 bytes; less the 1 GiB reserve, 83.97e9. Footprints are
        compared with this, never with the marketing figure (:attr:`hbm_capacity`).
        """
        return (self.hbm_total if self.hbm_total is not None else self.hbm_capacity) - self.reserve

    def __post_init__(self):
        # a Hardware built by hand or changed by with_() obeys the catalog's rules for its figures
        number("hbm_bandwidth", self.hbm_bandwidth)
        number("hbm_capacity", self.hbm_capacity)
        if not isinstance(self.dense_flops, Mapping) or not self.dense_flops:
            raise TypeError(f"dense_flops must map dtypes to dense peaks, got {self.dense_flops!r}")
        for dtype, peak in self.dense_flops.items():
            if dtype not in DTYPE_BYTES:
                raise unknown_name("dtype", dtype, DTYPE_BYTES)
            number(f"dense_flops[{dtype!r}]", peak)
        if not isinstance(self.interconnect, _Links) or self.interconnect._hw is not None:
            # built by hand, or a copy by with_(): its own links, so that a missing tier names this GPU
            object.__setattr__(self, "interconnect", _Links(dict(self.interconnect)))
        self.interconnect._hw = self

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

    def ridge_point(self, dtype: str = "bf16") -> float:
        """Datasheet ridge point, FLOP per byte of HBM traffic."""
        return self.peak_flops(dtype) / self.hbm_bandwidth

    def source(self, path: str) -> Spec:
        """The figure behind a field, e.g. ``h.source('dense.bf16')`` or ``h.source('hbm_bandwidth')``."""
        try:
            return self.figures[path]
        except KeyError:
            raise unknown_name("figure", path, self.figures) from None

    def link(self, tier: str, *, name: str = "tier") -> Link:
        """The catalog's link on ``tier`` ('scale_up', 'host' or 'network'); a :class:`MissingLinkError` naming the
        tier, the tiers the entry gives and where to add it when the catalog gives none (``name``: the argument
        that asked for the tier, named in the message)."""
        try:
            return self.interconnect[tier]
        except KeyError:
            raise _missing(self, tier, name) from None

    def with_(self, **changes) -> "Hardware":
        """A copy with some figures changed, for what-if questions (``hbm_bandwidth=4e12``)."""
        return replace(self, **changes)


# What each interconnect tier is, in the words the errors use.
TIER_WORDS = {"scale_up": "GPU to GPU inside a node: NVLink, Infinity Fabric",
              "host": "GPU to CPU: PCIe",
              "network": "between nodes, per GPU: InfiniBand, Ethernet"}


class MissingLinkError(ValueError, KeyError):
    """A link a computation needs and the catalog does not give the GPU; the message names the tiers missing, the
    tiers the entry gives, and the table to add them to. A ``ValueError`` (bad input) and a ``KeyError`` (a
    missing key of :attr:`Hardware.interconnect`) both."""

    def __str__(self) -> str:  # KeyError would print the message inside quotes
        return str(self.args[0])


def _given(hw: Hardware) -> str:
    return ("gives only " + ", ".join(map(repr, hw.interconnect)) if hw.interconnect
            else "gives no interconnect at all (no [gpus." + hw.key + ".interconnect] table)")


def _missing(hw: Hardware, tier: str, name: str) -> MissingLinkError:
    if tier not in TIER_WORDS:
        return MissingLinkError(f"{name} must be one of {', '.join(map(repr, TIER_WORDS))}, got {tier!r}")
    start = (f"{name} must be one of {', '.join(map(repr, hw.interconnect))} for the {hw.short}, got {tier!r}"
             if hw.interconnect else f"{name} {tier!r} needs a link the {hw.short} does not have")
    return MissingLinkError(f"{start}: its catalog entry {_given(hw)}; add {tier} ({TIER_WORDS[tier]}) under "
                            f"[gpus.{hw.key}.interconnect] to price it")


def require_links(hardware: Hardware | str, needs, what: str) -> None:
    """Check, before anything is priced, that the catalog gives ``hardware`` every link ``what`` needs: ``needs``
    lists tiers, each a name ('network') or a tuple of names any one of which will do (``("scale_up", "host")``:
    NVLink, or PCIe where a card has none). A :class:`MissingLinkError` names every need not met, what each tier
    is, the tiers the entry gives and where to add them."""
    hw = get_hardware(hardware)
    unmet = []
    for need in needs:
        options = (need,) if isinstance(need, str) else tuple(need)
        for tier in options:
            if tier not in TIER_WORDS:
                raise unknown_name("tier", tier, TIER_WORDS)
        if not any(t in hw.interconnect for t in options):
            unmet.append(" or ".join(f"{t!r} ({TIER_WORDS[t]})" for t in options))
    if unmet:
        raise MissingLinkError(f"{what} needs {' and '.join(unmet)} on the {hw.short}, and its catalog entry "
                               f"{_given(hw)}; add {'them' if len(unmet) > 1 else 'it'} under "
                               f"[gpus.{hw.key}.interconnect]")


# ---------------------------------------------------------------------------------------------
# Loading and validating the catalog

_REQUIRED = ("name", "vendor", "architecture", "year", "form_factor", "memory_type", "hbm_bandwidth", "hbm_capacity", "dense")
_FIGURE_UNITS = {
    "hbm_bandwidth": "B/s",
    "hbm_capacity": "B",
    "hbm_total": "B",
    "reserve": "B",
    "host_memory": "B",
    "l2": "B",
    "llc": "B",
    "shared_memory_per_sm": "B",
    "power": "W",
}
_TIERS = ("scale_up", "host", "network")


# Bytes set aside for what no footprint formula sees: the CUDA context (about 0.5 GB with PyTorch) and
# library workspaces (cuBLAS, NCCL). An assumption, not a datasheet figure; an entry may set its own `reserve`.
CONTEXT_RESERVE = 2**30


class CatalogError(ValueError):
    """A malformed hardware catalog entry; the message names the entry and the field."""


class _Links(Mapping):
    """A GPU's links by tier, read-only; a missing tier is a :class:`MissingLinkError` that says which tiers the
    entry gives and where to add the one asked for (not a bare ``KeyError``)."""

    def __init__(self, links: dict):
        self._links = dict(links)
        self._hw: Hardware | None = None

    def __getitem__(self, tier):
        try:
            return self._links[tier]
        except (KeyError, TypeError):
            if self._hw is None:
                raise KeyError(tier) from None
            raise _missing(self._hw, tier, "tier") from None

    def __iter__(self):
        return iter(self._links)

    def __len__(self) -> int:
        return len(self._links)

    def __repr__(self) -> str:
        return repr(self._links)


# "1,979 with sparsity", "4.5 PFLOPS with sparsity", "9 POPS with sparsity": the number a note quotes
_WITH_SPARSITY = re.compile(r"(\d[\d,]*(?:\.\d+)?)\s*(?:([PTG])(?:FLOP|OP)S?(?:/s)?)?\s+with\s+sparsity", re.I)
_PREFIX = {"P": 1e15, "T": 1e12, "G": 1e9}


def _check_dense_note(where: str, fig: Spec) -> None:
    """A dense figure whose note quotes a figure 'with sparsity' must be half of that figure (within 1%)."""
    for written, prefix in _WITH_SPARSITY.findall(fig.note):
        quoted = float(written.replace(",", ""))
        quoted *= _PREFIX[prefix.upper()] if prefix else fig.value / float(fig.given.split()[0])
        if abs(quoted / fig.value - 2) > 0.02:
            raise CatalogError(
                f"{where}: a sparse figure where a dense one belongs? the note quotes {written} with sparsity, "
                f"which is {quoted / fig.value:.3g}x the value {fig.given}; a dense peak is half the sparse one")


def _where(key: str, field: str = "") -> str:
    """How an error names a place in the catalog: ``[gpus.h100-sxm] dense.bf16``."""
    return f"[gpus.{key}] {field}".rstrip()


def _text_field(where: str, value, *, allow_empty: bool = False) -> str:
    if not isinstance(value, str) or (not allow_empty and not value.strip()):
        raise CatalogError(f"{where}: expected {'a' if allow_empty else 'a non-empty'} string, got {_shown(value)}")
    return value


def _shown(value) -> str:
    """A value as an error message shows it: short, and with its type when that is the problem."""
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return text if isinstance(value, (int, float, str)) else f"a {type(value).__name__} {text}"


def _table(where: str, value, what: str) -> dict:
    if not isinstance(value, dict):
        raise CatalogError(f"{where}: expected {what}, got {_shown(value)}")
    return value


def _known_fields(where: str, raw: Mapping, known) -> None:
    """Refuse a field no rule reads (``bogus = 5``, a misspelt ``hbm_bandwith``): it would be ignored silently."""
    unknown = [k for k in raw if k not in known]
    if unknown:
        raise CatalogError(f"{where}: unknown field {unknown[0]!r}; expected one of {', '.join(known)}")


_FIGURE_FIELDS = ("value", "unit", "source", "note", "sparse")
_LINK_FIELDS = (*_FIGURE_FIELDS, "direction", "name")
_ENTRY_FIELDS = ("name", "short", "aliases", "vendor", "architecture", "year", "form_factor", "memory_type",
                 "hbm_bandwidth", "hbm_capacity", "hbm_total", "reserve", "host_memory", "l2", "llc", "shared_memory_per_sm",
                 "power", "dense", "sparse", "interconnect")
# A source's date: a year, a month or a day, as ISO 8601 writes them ("2024", "2024-03", "2024-03-18").
_DATE = re.compile(r"(19|20|21)\d\d(-(0[1-9]|1[0-2])(-(0[1-9]|[12]\d|3[01]))?)?")


def _figure(where: str, raw, sources: Mapping[str, Source], expect: str, fields=_FIGURE_FIELDS) -> Spec:
    raw = _table(where, raw, "a table {value, unit, source}")
    _known_fields(where, raw, fields)
    for key in ("value", "unit", "source"):
        if key not in raw:
            raise CatalogError(f"{where}: missing '{key}'")
    value, unit = raw["value"], raw["unit"]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        hint = " (leave a figure out rather than set it to 0)" if value == 0 and not isinstance(value, bool) else ""
        raise CatalogError(f"{where}: expected a positive finite number, got {_shown(value)}{hint}")
    if not isinstance(unit, str) or unit not in SCALE:
        raise CatalogError(f"{where}: unknown unit {_shown(unit)}; expected one of {', '.join(SCALE)}")
    scale, si = SCALE[unit]
    if si != expect:
        raise CatalogError(f"{where}: unit {unit!r} is a {si} figure, expected {expect}")
    if not isinstance(raw["source"], str) or raw["source"] not in sources:
        raise CatalogError(f"{where}: source {_shown(raw['source'])} is not in [sources]")
    note = _text_field(f"{where}.note", raw.get("note", ""), allow_empty=True)
    sparse = raw.get("sparse", False)
    if not isinstance(sparse, bool):
        raise CatalogError(f"{where}.sparse: expected true or false, got {_shown(sparse)}")
    if sparse:
        raise CatalogError(f"{where}: a sparse figure where a dense one belongs; give the dense peak")
    si_value = float(value) * scale
    if not math.isfinite(si_value):
        raise CatalogError(f"{where}: expected a positive finite number, got {value:g} {unit}, which overflows")
    if not _PLAUSIBLE[0] <= si_value <= _PLAUSIBLE[1]:  # a figure no chip can have, whose answers mean nothing
        raise CatalogError(f"{where}: expected a figure between {_PLAUSIBLE[0]:g} and {_PLAUSIBLE[1]:g} {si}, got "
                           f"{value:g} {unit}; every answer computed from it would be out of any range a chip has")
    return Spec(si_value, si, sources[raw["source"]], note, f"{value:g} {unit}")


# The range a figure in SI units may take (FLOP/s, B/s, B, W): a billion times past any chip made either way, and
# narrow enough that no time, rate or capacity computed from it leaves the floats (1e-320 TFLOP/s, 1e30 GB).
_PLAUSIBLE = (1.0, 1e24)


# The years a datasheet figure can plausibly carry: the first GPUs with programmable shaders to a
# few decades ahead (a year outside is a typo: 20224, -2022, 22).
_YEARS = (1990, 2100)


def _hardware(key: str, raw, sources: Mapping[str, Source]) -> Hardware:
    raw = _table(_where(key), raw, "a table of the chip's fields")
    _known_fields(_where(key), raw, _ENTRY_FIELDS)
    missing = [k for k in _REQUIRED if k not in raw]
    if missing:
        raise CatalogError(f"{_where(key)}: missing field(s) {', '.join(missing)}")
    text = {k: _text_field(_where(key, k), raw[k]) for k in ("name", "vendor", "architecture", "form_factor", "memory_type")}
    short = _text_field(_where(key, "short"), raw["short"]) if "short" in raw else key.upper()
    year = raw["year"]
    if isinstance(year, bool) or not isinstance(year, int):
        raise CatalogError(f"{_where(key, 'year')}: expected an integer, got {_shown(year)}")
    if not _YEARS[0] <= year <= _YEARS[1]:
        raise CatalogError(f"{_where(key, 'year')}: expected a year between {_YEARS[0]} and {_YEARS[1]}, got {year}")
    aliases = raw.get("aliases", [])
    if not isinstance(aliases, list):
        raise CatalogError(f"{_where(key, 'aliases')}: expected a list of strings such as [\"h100\"], got {_shown(aliases)}")
    seen: dict[str, int] = {}
    for i, alias in enumerate(aliases):
        _text_field(_where(key, f"aliases[{i}]"), alias)
        name = alias.strip().lower()
        if name in seen:
            raise CatalogError(f"{_where(key, f'aliases[{i}]')}: {alias!r} is given twice (aliases[{seen[name]}] "
                               "already); give each alias once")
        seen[name] = i
    figures: dict[str, Spec] = {}
    for name, si in _FIGURE_UNITS.items():
        if name in raw:
            figures[name] = _figure(_where(key, name), raw[name], sources, si)
    dense: dict[str, float] = {}
    if not isinstance(raw["dense"], dict) or not raw["dense"]:
        raise CatalogError(f"{_where(key, 'dense')}: expected a table of dense peaks by dtype, got {_shown(raw['dense'])}")
    for dtype, fig in raw["dense"].items():
        here = _where(key, f"dense.{dtype}")
        if dtype not in DTYPE_BYTES:
            raise CatalogError(f"{here}: unknown dtype; expected one of {', '.join(DTYPE_BYTES)}")
        figures[f"dense.{dtype}"] = _figure(here, fig, sources, "FLOP/s")
        _check_dense_note(here, figures[f"dense.{dtype}"])
        dense[dtype] = figures[f"dense.{dtype}"].value
    sparse: dict[str, float] = {}
    for dtype, fig in _table(_where(key, "sparse"), raw.get("sparse", {}), "a table of sparse peaks by dtype").items():
        here = _where(key, f"sparse.{dtype}")
        if dtype not in dense:
            raise CatalogError(f"{here}: a sparse peak needs the dense one beside it; add dense.{dtype}")
        f = _figure(here, fig, sources, "FLOP/s")
        if abs(f.value / dense[dtype] - 2) > 0.02:
            raise CatalogError(f"{here}: {f.given} is {f.value / dense[dtype]:.3g}x dense.{dtype}; "
                               "2:4 structured sparsity doubles the dense peak (expected 2x within 1%)")
        figures[f"sparse.{dtype}"] = f
        sparse[dtype] = f.value
    links: dict[str, Link] = {}
    tiers = _table(_where(key, "interconnect"), raw.get("interconnect", {}), "a table of links by tier")
    for tier, fig in tiers.items():
        here = _where(key, f"interconnect.{tier}")
        if tier not in _TIERS:
            raise CatalogError(f"{here}: unknown tier; expected one of {', '.join(_TIERS)}")
        f = _figure(here, fig, sources, "B/s", _LINK_FIELDS)
        direction = fig.get("direction")
        if direction not in ("bidirectional", "each way"):
            raise CatalogError(f"{here}.direction: expected 'bidirectional' or 'each way', got {_shown(direction)}")
        if "name" not in fig:
            raise CatalogError(f"{here}: missing 'name'")
        figures[f"interconnect.{tier}"] = f
        links[tier] = Link(tier, _text_field(f"{here}.name", fig["name"]), f.value, direction, f)
    total = figures["hbm_total"].value if "hbm_total" in figures else figures["hbm_capacity"].value
    reserve = figures["reserve"].value if "reserve" in figures else CONTEXT_RESERVE
    if reserve >= total:  # nothing left to allocate: every answer would say 'of -73.7 MB usable'
        field = "reserve" if "reserve" in figures else ("hbm_total" if "hbm_total" in figures else "hbm_capacity")
        raise CatalogError(f"[gpus.{key}] {field}: the memory a program can allocate ({total / 1e9:.3g} GB) must be "
                           f"more than the reserve kept for the runtime ({reserve / 1e9:.3g} GB"
                           f"{'' if 'reserve' in figures else ', the default'}); give the device's total, or a "
                           "smaller reserve")
    return Hardware(
        key=key,
        **text,
        year=year,
        hbm_bandwidth=figures["hbm_bandwidth"].value,
        hbm_capacity=figures["hbm_capacity"].value,
        dense_flops=MappingProxyType(dense),
        l2_bytes=figures["l2"].value if "l2" in figures else None,
        shared_memory_per_sm=figures["shared_memory_per_sm"].value if "shared_memory_per_sm" in figures else None,
        power_w=figures["power"].value if "power" in figures else None,
        interconnect=_Links(links),
        figures=MappingProxyType(figures),
        aliases=tuple(a.strip().lower() for a in aliases),
        short=short,
        sparse_flops=MappingProxyType(sparse),
        hbm_total=figures["hbm_total"].value if "hbm_total" in figures else None,
        reserve=reserve,
        host_memory=figures["host_memory"].value if "host_memory" in figures else None,
    )


def _read_catalog_text(path: Path) -> str:
    """The text of a catalog file, or a CatalogError that says what is wrong with the path."""
    if path.is_dir():
        raise CatalogError(f"hardware catalog {str(path)!r} is a directory; give the path of a .toml file")
    if not path.exists():
        raise CatalogError(f"hardware catalog {str(path)!r}: no such file")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise CatalogError(f"hardware catalog {str(path)!r} is not UTF-8 text (byte {exc.start}: "
                           f"{exc.object[exc.start:exc.start + 1]!r}); TOML files are UTF-8") from None
    except OSError as exc:
        raise CatalogError(f"hardware catalog {str(path)!r} cannot be read: {exc.strerror or exc}") from None


def load_catalog(path: str | Path | None = None) -> dict[str, Hardware]:
    """Read and validate a hardware catalog (the package's own when ``path`` is None).

    Every figure must be a positive finite number with a known unit and a source listed under
    ``[sources]``; names are strings; ``aliases`` is a list of strings, none shared between two
    entries; ``year`` is a plausible year. Anything else is a :class:`CatalogError` that names the
    entry and the field, e.g. ``[gpus.my-chip] hbm_bandwidth: expected a positive finite number, got inf``.
    """
    if path is None:
        shown = "roofline/data/hardware.toml"
        text = resources.files("roofline").joinpath("data/hardware.toml").read_text(encoding="utf-8")
    else:
        if not isinstance(path, (str, Path)):
            raise TypeError(f"catalog must be the path of a TOML file, got {type(path).__name__} {path!r}")
        shown = str(path)
        text = _read_catalog_text(Path(path))
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CatalogError(f"hardware catalog {shown} is not valid TOML: {exc}") from None
    except RecursionError:
        raise CatalogError(f"hardware catalog {shown} is nested too deeply to read; a catalog nests tables four levels deep at most") from None
    try:
        return _validated(raw)
    except RecursionError:  # pragma: no cover - tomllib refuses deep nesting first
        raise CatalogError(f"hardware catalog {shown} is nested too deeply to read") from None


def _validated(raw: dict) -> dict[str, Hardware]:
    sources = {}
    for key, s in _table("[sources]", raw.get("sources", {}), "a table of [sources.KEY] tables").items():
        s = _table(f"[sources.{key}]", s, "a table {title, url, date}")
        missing = [k for k in ("title", "url", "date") if k not in s]
        if missing:
            raise CatalogError(f"[sources.{key}]: missing {', '.join(missing)}")
        title = _text_field(f"[sources.{key}] title", s["title"])
        url = _text_field(f"[sources.{key}] url", s["url"])
        _known_fields(f"[sources.{key}]", s, ("title", "url", "date"))
        if isinstance(s["date"], (dict, list, bool)) or not _DATE.fullmatch(str(s["date"])):
            raise CatalogError(f"[sources.{key}] date: expected a date such as \"2024\", \"2024-03\" or \"2024-03-18\", "
                               f"got {_shown(s['date'])}")
        sources[key] = Source(key, title, url, str(s["date"]))
    _known_fields("hardware catalog", raw, ("sources", "gpus"))
    gpus = _table("[gpus]", raw.get("gpus", {}), "a table of [gpus.KEY] tables")
    if not gpus:
        raise CatalogError("hardware catalog has no [gpus.*] entries")
    catalog = {}
    for key, entry in gpus.items():
        try:
            catalog[key] = _hardware(key, entry, sources)
        except CatalogError:
            raise
        except (TypeError, AttributeError, ValueError) as exc:  # a shape no rule above foresaw
            raise CatalogError(f"{_where(key)}: malformed entry ({exc})") from None
    owner: dict[str, str] = {}
    for key, hw in catalog.items():
        for name in (key.lower(), *hw.aliases):
            if name in owner and owner[name] != key:
                raise CatalogError(f"{_where(key, 'aliases')}: {name!r} already names [gpus.{owner[name]}]; "
                                   "a name must pick one entry")
            owner[name] = key
    return catalog


@cache
def _catalog() -> Mapping[str, Hardware]:
    return MappingProxyType(load_catalog())


@cache
def _catalog_at(path: str, mtime_ns: int, size: int) -> Mapping[str, Hardware]:
    return MappingProxyType(load_catalog(path))



def _resolve(catalog) -> Mapping[str, Hardware]:
    """The catalog to look names up in: the shipped one (None), a TOML file, or a loaded mapping."""
    if catalog is None:
        return _catalog()
    if isinstance(catalog, (str, Path)):
        path = Path(catalog)
        try:
            st = path.stat()
        except OSError:
            return load_catalog(path)  # raises the CatalogError that says what is wrong with the path
        return _catalog_at(str(path.resolve()), st.st_mtime_ns, st.st_size)
    if isinstance(catalog, Mapping) and all(isinstance(h, Hardware) for h in catalog.values()):
        return catalog
    raise TypeError(f"catalog must be the path of a TOML file or the result of load_catalog, got {type(catalog).__name__}")


def hardware_names(catalog=None) -> list[str]:
    """Keys of the catalog (the shipped one by default), e.g. ['a100-sxm-80gb', 'h100-sxm', ...]."""
    return sorted(_resolve(catalog))


def get_hardware(name: str | Hardware, catalog=None) -> Hardware:
    """Look up an accelerator by key or alias ('h100-sxm', 'H100'); close matches on a miss.

    ``catalog`` is a reader's own TOML file (or :func:`load_catalog`'s result) to look in instead of
    the shipped one; it is validated by the same rules.
    """
    if isinstance(name, Hardware):
        return name
    if not isinstance(name, str):
        raise TypeError(f"hardware must be a name such as 'h100-sxm' or a Hardware, got {name!r}")
    catalog = _resolve(catalog)
    wanted = name.strip().lower()
    for key, hw in catalog.items():
        if wanted == key.lower() or wanted in hw.aliases:
            return hw
    raise unknown_name("hardware", name, list(catalog) + [a for h in catalog.values() for a in h.aliases])



def scale_hardware(hardware: Hardware | str, **factors) -> Hardware:
    """A copy of ``hardware`` with some figures multiplied by a factor, for what-if questions (chapter 1's
    exercise: ``hbm_bandwidth=2``, twice the bandwidth, the rest as it is)."""
    hw = get_hardware(hardware)
    changes = {}
    for field, factor in factors.items():
        value = getattr(hw, field, None)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{field} is not a numeric figure of {hw.short} that can be scaled")
        if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not factor > 0:
            raise ValueError(f"the factor for {field} must be a positive number, got {factor!r}")
        changes[field] = factor * value
    return hw.with_(**changes)


__all__ += ["scale_hardware"]
