"""The package's floors: arrows point down only, no circles, no private name taken from another room.

The order is declared here, once. A module may import from its own subpackage (without a circle) and
from any subpackage below it; the top-level face (``roofline/__init__.py``, what ``import roofline``
runs) may import from the core and the workloads only, so that the package alone needs numpy; only the
presentation imports matplotlib, ipywidgets or PIL. Every import is read, at module level and inside
functions alike.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

LAYERS = ("core", "workloads", "parallel", "serving", "measured", "present", "cli")
"""The floors, from the ground up."""

FACE_MAY_IMPORT = ("core", "workloads")
"""What ``roofline/__init__.py`` may import: the vocabulary, and nothing that needs more than numpy."""

DRAWING = ("matplotlib", "ipywidgets", "PIL")
"""Third-party packages for pictures and sliders: the presentation's, and no floor's below it."""


def modules(package: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` under ``package`` (a package's face is its name)."""
    out = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def imports(name: str, path: Path, known: dict[str, Path]):
    """``(target, names, line)`` for every import in the file, relative ones resolved; ``target`` is the
    module imported (a submodule when ``from package import submodule``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, (), node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            plain = []
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                if sub in known:
                    yield sub, (), node.lineno
                else:
                    plain.append(alias.name)
            if plain:
                yield source, tuple(plain), node.lineno


def floor(name: str) -> str | None:
    """The subpackage a module of ``roofline`` stands in (None for the top-level face and ``__main__``)."""
    parts = name.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else None


def problems(package: Path) -> list[str]:
    """Every breach of the floors in ``package``, one line each (empty when the house is sound)."""
    top = package.name
    known = modules(package)
    found, edges = [], {n: set() for n in known}
    for name, path in known.items():
        here = floor(name)
        for target, names, line in imports(name, path, known):
            where = f"{path.relative_to(package.parent)}:{line}"
            root = target.split(".")[0]
            if root in DRAWING and here not in ("present", "cli"):
                found.append(f"{where}: {name} imports {root}, which only the presentation may")
            if root != top:
                continue
            if target not in known:
                found.append(f"{where}: {name} imports {target}, which is not a module of {top}")
                continue
            if target != name:
                edges[name].add(target)
            for n in names:
                if n.startswith("_") and not n.startswith("__"):
                    found.append(f"{where}: {name} takes the private name {n} from {target}")
            if any(p.startswith("_") and p != "__main__" for p in target.split(".")[1:]) and floor(target) != here:
                found.append(f"{where}: {name} imports the private module {target}")
            there = floor(target)
            if name == top:
                if there not in FACE_MAY_IMPORT:
                    found.append(f"{where}: the top-level face imports {target}; it may import only "
                                 f"{', '.join(FACE_MAY_IMPORT)}")
            elif name == f"{top}.__main__":
                continue
            elif target == top:
                found.append(f"{where}: {name} imports the top-level face {top}; import the module that defines the name")
            elif here is None or there is None:
                found.append(f"{where}: {name} or {target} stands in no floor of {LAYERS}")
            elif LAYERS.index(there) > LAYERS.index(here):
                found.append(f"{where}: an arrow up, {here} -> {there} ({name} imports {target})")
    found += [f"a circle: {' -> '.join(c)}" for c in circles(edges)]
    return found


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each as a closed path of names."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group) + [sorted(group)[0]])

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_the_package_has_no_circle_no_arrow_up_and_no_private_import():
    assert problems(ROOT / "roofline") == []


def test_every_module_stands_on_a_declared_floor():
    names = modules(ROOT / "roofline")
    outside = [n for n in names if floor(n) is None and n not in ("roofline", "roofline.__main__")]
    assert outside == []
    assert {floor(n) for n in names} - {None} == set(LAYERS)


def _house(tmp_path: Path, files: dict[str, str]) -> Path:
    pkg = tmp_path / "roofline"
    for rel, text in {"__init__.py": "", **{f"{layer}/__init__.py": "" for layer in LAYERS}, **files}.items():
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text(text)
    return pkg


@pytest.mark.parametrize("files, expected", [
    ({"core/a.py": "from roofline.core.b import x\n", "core/b.py": "def f():\n    from roofline.core import a\n"},
     "a circle: roofline.core.a -> roofline.core.b -> roofline.core.a"),
    ({"core/a.py": "def f():\n    from roofline.workloads.w import y\n", "workloads/w.py": "y = 1\n"},
     "an arrow up, core -> workloads"),
    ({"parallel/p.py": "from ..workloads.w import _hidden\n", "workloads/w.py": "_hidden = 1\n"},
     "takes the private name _hidden from roofline.workloads.w"),
    ({"workloads/w.py": "import matplotlib.pyplot as plt\n"}, "imports matplotlib, which only the presentation may"),
    ({"__init__.py": "from roofline.present.p import x\n", "present/p.py": "x = 1\n"},
     "the top-level face imports roofline.present.p"),
    ({"serving/s.py": "import roofline as rl\n"}, "imports the top-level face roofline"),
])
def test_the_guard_finds_each_kind_of_breach(tmp_path, files, expected):
    found = problems(_house(tmp_path, files))
    assert any(expected in line for line in found), found


def test_a_sound_house_passes_the_guard(tmp_path):
    pkg = _house(tmp_path, {"core/a.py": "x = 1\n", "workloads/w.py": "from roofline.core.a import x\n",
                            "present/p.py": "import matplotlib\nfrom ..workloads import w\n"})
    assert problems(pkg) == []
