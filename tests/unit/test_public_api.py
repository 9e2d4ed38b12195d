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


@pytest.mark.parametrize("face", sorted(p for p in PACKAGE.glob("*/__init__.py")))
def test_every_package_face_names_each_of_its_modules(face):
    """A floor's ``__init__`` is where a newcomer reads what the floor holds: it names every module in it."""
    text = face.read_text(encoding="utf-8")
    package = face.parent.name
    modules = sorted(p.stem for p in face.parent.glob("*.py") if p.stem != "__init__")
    missing = [m for m in modules if f":mod:`~roofline.{package}.{m}`" not in text]
    assert missing == [], f"roofline/{package}/__init__.py does not name {missing}"


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


def test_parameters_that_take_arrays_say_so():
    """A public function's parameter that its body broadcasts (``checks.broadcast(name=...)``) or turns into
    an array (``np.asarray(name)`` and the like) is annotated ``ArrayLike``: a reader outside the book sees
    from the signature that ``decode_step(model, batch=np.arange(1, 257))`` is meant."""
    import ast

    calls = {"asarray", "atleast_1d", "broadcast_arrays", "asanyarray", "array"}
    missing = []
    for path in sorted((ROOT / "roofline").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        functions = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
        functions += [m for c in tree.body if isinstance(c, ast.ClassDef) and not c.name.startswith("_")
                      for m in c.body if isinstance(m, ast.FunctionDef)]
        for fn in functions:
            if fn.name.startswith("_"):
                continue
            params = {a.arg: a for a in fn.args.args + fn.args.kwonlyargs + fn.args.posonlyargs}
            arrays = set()
            for node in ast.walk(fn):
                if not isinstance(node, ast.Call):
                    continue
                if isinstance(node.func, ast.Attribute) and node.func.attr in calls and getattr(node.func.value, "id", "") == "np":
                    arrays |= {a.id for a in node.args if isinstance(a, ast.Name)}
                if isinstance(node.func, ast.Name) and node.func.id == "broadcast":
                    arrays |= {k.value.id for k in node.keywords if isinstance(k.value, ast.Name)}
            for name in sorted(arrays & set(params)):
                annotation = params[name].annotation
                if annotation is None or not any(t in ast.unparse(annotation) for t in ("ArrayLike", "ndarray", "Sequence")):
                    missing.append(f"{path.relative_to(ROOT)}:{fn.lineno} {fn.name}({name})")
    assert missing == [], "parameters that take arrays without an ArrayLike annotation"


def test_no_test_id_is_longer_than_a_hundred_characters(request):
    """tests/conftest.py shortens long parameters (a huge number, a catalog's TOML) to their start and a hash."""
    hook = request.config.pluginmanager.hook.pytest_make_parametrize_id
    short = hook(config=request.config, val="9" * 200_000, argname="value")
    assert short.startswith("9" * 20 + "~") and len(short) == 29
    assert short != hook(config=request.config, val="9" * 199_999, argname="value")  # still unique
    ids = [item.nodeid.split("[", 1)[1][:-1] for item in request.session.items if "[" in item.nodeid]
    assert [i for i in ids if len(i) > 100] == []
