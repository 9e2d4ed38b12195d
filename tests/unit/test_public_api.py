"""The public API as a reader outside the book meets it: every module says what it offers (``__all__``,
current), the API page documents every public module, and the top level keeps the chapters' names."""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

import pytest

import roofline as rl

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "roofline"


def public_modules() -> list[str]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__main__" or any(p.startswith("_") and p != "__init__" for p in parts):
            continue
        if parts[-1] == "__init__":
            continue  # a package's face: documented through its modules
        out.append(".".join(parts))
    return out


@pytest.mark.parametrize("name", public_modules())
def test_every_module_lists_what_it_defines_in_all(name):
    module = importlib.import_module(name)
    assert hasattr(module, "__all__"), f"{name} has no __all__"
    missing = [n for n in module.__all__ if not hasattr(module, n)]
    assert missing == [], f"{name}.__all__ names what it does not have: {missing}"
    assert len(set(module.__all__)) == len(module.__all__), f"{name}.__all__ repeats a name"
    defined = [n for n, obj in vars(module).items()
               if not n.startswith("_") and (inspect.isfunction(obj) or inspect.isclass(obj))
               and getattr(obj, "__module__", None) == name]
    unlisted = [n for n in defined if n not in module.__all__]
    assert unlisted == [], f"{name} defines public names that its __all__ leaves out: {unlisted}"


def test_the_api_page_documents_every_public_module():
    page = (ROOT / "chapters" / "reference" / "api.md").read_text(encoding="utf-8")
    documented = re.findall(r"^\.\. automodule:: (\S+)$", page, flags=re.M)
    assert sorted(documented) == sorted(public_modules())
    assert len(documented) == len(set(documented)), "a module documented twice"


def test_the_top_level_keeps_the_chapters_vocabulary():
    for name in ("ridge_point", "decode_step", "prefill", "predict", "get_hardware", "load_model", "Roof",
                 "UnknownNameError", "NotModelledError", "fmt", "training_step", "mfu"):
        assert name in rl.__all__ and hasattr(rl, name), name
    assert [n for n in rl.__all__ if not hasattr(rl, n)] == []


def test_an_unknown_name_is_one_error_a_caller_can_catch_from_the_top():
    with pytest.raises(rl.UnknownNameError, match="h100-sxm"):
        rl.get_hardware("h100-sx")
    with pytest.raises(KeyError):  # and still a KeyError, as a mapping's lookup would raise
        rl.load_model("llama-3-8")


def test_importing_the_package_needs_numpy_alone():
    import subprocess
    import sys

    code = ("import sys, roofline; heavy = [m for m in ('matplotlib', 'ipywidgets', 'PIL') if m in sys.modules]; "
            "print(','.join(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == ""
