"""Measurements as tables for the appendix: comparisons side by side, datasheet and measured ceilings."""

from __future__ import annotations

from typing import Mapping, Sequence

from ..roof import Roof
from ..tables import Table
from ..units import fmt
from .compare import CALIBRATION_BAND, Comparison

__all__ = [
    "comparison_table",
    "ceilings_table",
]

def comparison_table(columns: Mapping[str, Sequence[Comparison]], *, key: str = "label", title: str = "",
                     estimates: Sequence[str] = (), band: float = CALIBRATION_BAND, key_first: str | None = None):
    """A :class:`~roofline.tables.Table` of measured time and predicted/measured under each roof.

    ``columns`` maps a roof's name to the comparisons under it; all lists cover the same points in
    the same order. A floor's column marks '(!)' where the prediction exceeds the measurement (the bound
    broken); a column named in ``estimates`` marks '(!)' where the ratio is outside ``1/band .. band``.
    ``key_first`` names the roof whose ratio is the key column: it comes right after the point's name,
    the headers shorten to 'ratio, NAME roof' and the measured time goes last, so a long table keeps
    what matters in view and fits a page.
    """
    lists = list(columns.values())
    first = lists[0]
    for name, cs in columns.items():
        if [c.label for c in cs] != [c.label for c in first]:
            raise ValueError(f"comparisons under {name!r} do not cover the same points as the first column")
    unknown = [e for e in estimates if e not in columns]
    if unknown:
        raise ValueError(f"estimates names columns that are not there: {', '.join(map(repr, unknown))}")
    if key_first is not None and key_first not in columns:
        raise ValueError(f"key_first must be one of {', '.join(map(repr, columns))}, got {key_first!r}")

    def mark(name, c):
        bad = not (1 / band <= c.ratio <= band) if name in estimates else not c.obeys
        return f"{c.ratio:.2f}" + (" (!)" if bad else "")

    if key_first is not None:
        names = [key_first, *(n for n in columns if n != key_first)]
        header = ("point", *(f"ratio, {n} roof" for n in names), "measured time")
        rows = tuple((c.label, *(mark(n, columns[n][i]) for n in names), fmt(c.measured, "s"))
                     for i, c in enumerate(first))
        return Table(header, rows, title)
    header = ("point", "measured", *(f"predicted/measured, {n}" for n in columns))
    rows = tuple((c.label, fmt(c.measured, "s"), *(mark(n, cs[i]) for n, cs in columns.items()))
                 for i, c in enumerate(first))
    return Table(header, rows, title)


def ceilings_table(datasheet: Roof | Sequence[Roof], measured: Roof | Sequence[Roof], title: str = ""):
    """Datasheet and measured ceilings side by side, with the fraction of each the machine reached."""
    ds = [datasheet] if isinstance(datasheet, Roof) else list(datasheet)
    ms = [measured] if isinstance(measured, Roof) else list(measured)
    if len(ds) != len(ms):
        raise ValueError(f"datasheet and measured need as many roofs each, got {len(ds)} and {len(ms)}")
    rows = [("HBM bandwidth", fmt(ds[0].bandwidth, "B/s"), fmt(ms[0].bandwidth, "B/s"), f"{100 * ms[0].bandwidth / ds[0].bandwidth:.0f}%")]
    for d, m in zip(ds, ms):
        rows.append((f"dense {d.dtype} matmul", fmt(d.peak_flops, "FLOP/s", 4), fmt(m.peak_flops, "FLOP/s", 4),
                     f"{100 * m.peak_flops / d.peak_flops:.0f}%"))
        rows.append((f"ridge point, {d.dtype} (FLOP/B)", f"{d.ridge_point:,.0f}", f"{m.ridge_point:,.0f}",
                     f"{100 * m.ridge_point / d.ridge_point:.0f}%"))
    return Table(("ceiling", "datasheet", "measured", "measured / datasheet"), tuple(rows), title)


