"""Every public figure and table has a test here that calls it: a new one in ``plot.__all__`` or
``tables.__all__`` without a test fails this file, naming it."""

import inspect
import re
import types
from pathlib import Path

from roofline.present import plot, tables

HERE = Path(__file__).resolve().parent

# Names a test need not call, with the reason. Empty: the helpers (style, save, figures_folder, legend_below,
# timing_parts) and the constants (PALETTE, Table) are tested too.
EXEMPT: dict[str, str] = {}


def _test_texts() -> str:
    return "\n".join(p.read_text() for p in sorted(HERE.glob("test_*.py")) if p.name != Path(__file__).name)


def untested(module, alias: str, text: str) -> list[str]:
    """The public names of ``module`` that no test text uses: a function must be called (``alias.name(``),
    anything else named (``alias.name``)."""
    missing = []
    for name in module.__all__:
        if name in EXEMPT:
            continue
        obj = getattr(module, name)
        called = inspect.isfunction(obj) or inspect.isclass(obj)
        pattern = rf"\b{alias}\.{re.escape(name)}" + (r"\s*\(" if called else r"\b")
        if not re.search(pattern, text):
            missing.append(name)
    return missing


def test_every_figure_is_called_by_a_test():
    assert untested(plot, "plot", _test_texts()) == [], "figures with no test that draws them"


def test_every_table_is_called_by_a_test():
    assert untested(tables, "tables", _test_texts()) == [], "tables with no test that builds them"


def test_the_check_names_a_new_function_without_a_test():
    def brand_new_chart():
        pass

    fake = types.SimpleNamespace(__all__=["roofline_chart", "brand_new_chart", "PALETTE"],
                                 roofline_chart=plot.roofline_chart, brand_new_chart=brand_new_chart, PALETTE={})
    assert untested(fake, "plot", "plot.roofline_chart(x)\nplot.PALETTE['blue']") == ["brand_new_chart"]
    assert untested(fake, "plot", "plot.roofline_chart(1)\nplot.brand_new_chart") == ["brand_new_chart", "PALETTE"]
    assert untested(fake, "plot", "plot.roofline_chart(1) plot.brand_new_chart (2) plot.PALETTE") == []


def test_exemptions_name_real_functions_and_say_why():
    for name, reason in EXEMPT.items():
        assert name in plot.__all__ or name in tables.__all__, name
        assert len(reason) > 20, f"{name}: say why it needs no test"
