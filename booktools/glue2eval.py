"""Convert a chapter's prose from ``{glue:text}`name``` to ``{eval}`name```, in place.

``python -m booktools.glue2eval chapters/NN-name.ipynb ...``, then re-execute the chapter
(``python -m booktools.notebooks chapters/NN-name.ipynb``) and commit both.

Why: JupyterLab's MyST renderer (jupyterlab-myst) evaluates ``{eval}`` against the live kernel but does
not render glue roles, so a reader running the notebook saw raw ``{glue:text}`...``` in every
sentence with a number. ``roofline.present.glue.glue`` now binds the formatted text to the name in the kernel
as well as gluing it, and the book build resolves ``{eval}`name``` from the glued output
(``booktools.evalrole``); so the one change a chapter needs is in its markdown.

Converted, in markdown cells only: ``{glue:text}`name```, ``{glue}`name```, ``{glue:}`name``` and
``{glue:any}`name``` (all show a glued string as its text). Refused, with the cell and the role named
and nothing written: a format spec (``name:.2f``: glue the text already formatted), a name from another
notebook (``path::name``), ``{glue:md}`` and the glue directives (``{glue:figure}`` and friends), and a
name that is not a Python identifier.

Two more changes make the chapter read in JupyterLab as on the site: a hidden glue cell that comes after
the first markdown cell using one of its names moves up above it (Run All evaluates a cell's prose when
it reaches it; this reads the committed outputs, so convert an executed notebook), and a glue name that
the code also uses as a variable is glued under ``name_text`` instead (``glue`` never overwrites a
variable). Both are printed.
"""

from __future__ import annotations

import ast
import builtins
import keyword
import re
import sys
from pathlib import Path

__all__ = ["convert_source", "convert_notebook", "clashes", "rename_glue_names", "hoist_glue_cells", "ConversionError"]

_EVAL = re.compile(r"\{eval\}`([^`]+)`")

# {glue:text}`x`, {glue}`x`, {glue:}`x`, {glue:any}`x`; the body up to the closing backtick
_CONVERTIBLE = re.compile(r"\{glue(?::text|:any|:)?\}`([^`]*)`")
# any other glue role or directive: left for a person to rewrite
_OTHER_GLUE = re.compile(r"^[`:]{3,}\{glue(?::[a-z-]*)?\}.*$|\{glue:(?!text\}|any\}|\})[a-z-]*\}(?:`[^`]*`)?", re.M)


class ConversionError(ValueError):
    """A glue form the converter will not rewrite; the message names each one and where it is."""


def _check_name(body: str) -> str | None:
    """Why ``body`` cannot become ``{eval}`body```, or None when it can."""
    if "::" in body:
        return "a name glued in another notebook (path::name); glue it in this one"
    if ":" in body:
        return "a format spec; glue the text already formatted (roofline.present.glue.glue takes digits, unit)"
    if not body.isidentifier() or keyword.iskeyword(body) or hasattr(builtins, body):
        return "not a Python identifier that the kernel can evaluate (or a keyword or builtin)"
    return None


def convert_source(text: str, where: str = "") -> tuple[str, int]:
    """(``text`` with every convertible glue role written as ``{eval}``, how many were rewritten).

    Raises :class:`ConversionError` naming every glue form it will not rewrite.
    """
    problems = []
    for m in _CONVERTIBLE.finditer(text):
        why = _check_name(m.group(1))
        if why:
            problems.append(f"{where}{m.group(0)}: {why}")
    for m in _OTHER_GLUE.finditer(text):
        problems.append(f"{where}{m.group(0)}: no {{eval}} form; rewrite it by hand")
    if problems:
        raise ConversionError("\n".join(problems))
    return _CONVERTIBLE.subn(lambda m: f"{{eval}}`{m.group(1)}`", text)


def clashes(nb) -> list[str]:
    """Names the notebook's code both glues (a literal name in ``glue``/``glue_text``) and uses as a
    variable, function or import: ``roofline.present.glue.glue`` refuses to bind those (it would replace the
    variable), so the variable needs another name before the chapter is executed."""
    glued, bound = set(), set()
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        try:
            tree = ast.parse(cell.source)
        except SyntaxError:  # IPython magics: not ours to check
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                bound.add(node.id)
            elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                bound.add(node.name)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                bound.update((a.asname or a.name).split(".")[0] for a in node.names)
            elif (isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None))
                  in ("glue", "glue_text") and node.args and isinstance(node.args[0], ast.Constant)):
                glued.add(node.args[0].value)
    return sorted(glued & bound)


def rename_glue_names(nb, names: list[str]) -> dict[str, str]:
    """Give each glue name in ``names`` (a name the code also uses as a variable) a new one, ``name_text``
    (or ``name_text2``...), in the glue calls' first argument and in the prose's ``{eval}`` roles; the
    variable keeps its name, so the code is untouched otherwise. Returns {old: new}."""
    taken = set()
    for cell in nb.cells:
        taken |= set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", cell.source))
    renamed = {}
    for old in names:
        new, k = f"{old}_text", 1
        while new in taken:
            k += 1
            new = f"{old}_text{k}"
        taken.add(new)
        renamed[old] = new
        call = re.compile(rf"""(\bglue(?:_text)?\(\s*)(["']){re.escape(old)}\2""")
        role = re.compile(rf"\{{eval\}}`{re.escape(old)}`")
        for cell in nb.cells:
            if cell.cell_type == "code":
                cell.source = call.sub(lambda m: f"{m.group(1)}{m.group(2)}{new}{m.group(2)}", cell.source)
            elif cell.cell_type == "markdown":
                cell.source = role.sub(f"{{eval}}`{new}`", cell.source)
    return renamed


def _names(source: str, kind) -> set[str]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, kind)}


def hoist_glue_cells(nb) -> tuple[int, list[str]]:
    """Move each hidden glue cell above the first markdown cell that uses one of its names.

    On the site a glued name may be used anywhere in its page; in JupyterLab a markdown cell is
    evaluated when Run All reaches it, so a number glued in the cell below would read as a NameError.
    A cell moves only when it is tagged ``remove-cell`` (the page does not change) and no code cell it
    jumps over assigns a name it reads. Returns (cells moved, what could not be moved), using the glued
    outputs of the executed notebook to know which cell glues what.
    """
    moved, problems = 0, []
    for _ in range(len(nb.cells) ** 2):  # each pass moves one cell up; a bound in case of a cycle
        where = {}
        for j, cell in enumerate(nb.cells):
            for output in cell.get("outputs", []):
                name = output.get("metadata", {}).get("scrapbook", {}).get("name")
                if name:
                    where[name] = j
        late = next(((i, where[n], n) for i, cell in enumerate(nb.cells) if cell.cell_type == "markdown"
                     for n in _EVAL.findall(cell.source) if where.get(n, -1) > i), None)
        if late is None:
            return moved, problems
        i, j, name = late
        cell = nb.cells[j]
        reads = _names(cell.source, ast.Load)
        blocked = sorted(reads & set().union(*(_names(c.source, ast.Store) for c in nb.cells[i:j]
                                               if c.cell_type == "code")))
        if "remove-cell" not in cell.metadata.get("tags", []) or blocked:
            why = f"it reads {', '.join(blocked)}, assigned in between" if blocked else "it is not a remove-cell"
            problems.append(f"cell {i} uses {{eval}}`{name}`, glued by cell {j} below it, which cannot move up ({why})")
            # stop: a later pass would find the same cell again
            return moved, problems
        nb.cells.insert(i, nb.cells.pop(j))
        moved += 1
    return moved, problems


def convert_notebook(path: str | Path) -> int:
    """Rewrite the markdown cells of the notebook at ``path`` in place; return how many roles changed.

    Nothing is written when a cell holds a form that cannot be converted (:class:`ConversionError`).
    """
    import nbformat

    path = Path(path)
    nb = nbformat.read(path, as_version=4)
    problems, changed, total = [], [], 0
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "markdown":
            continue
        try:
            new, n = convert_source(cell.source, where=f"{path.name}, cell {index}: ")
        except ConversionError as err:
            problems.append(str(err))
            continue
        if n:
            changed.append((cell, new))
            total += n
    if problems:
        raise ConversionError("\n".join(problems))
    for cell, new in changed:
        cell.source = new
    moved, late = hoist_glue_cells(nb)  # before renaming: it reads the glued outputs' (old) names
    renamed = rename_glue_names(nb, clashes(nb))
    if total or moved or renamed:
        nbformat.write(nb, path)
    if moved:
        print(f"{path.name}: {moved} hidden glue cell{'s' if moved != 1 else ''} moved above the prose that first reads it")
    for old, name in renamed.items():
        print(f"{path.name}: glue name {old!r} is also a variable of the code: glued as {name!r} now")
    if late:
        raise ConversionError("converted and saved, but in JupyterLab a number would be read before it is glued:\n"
                              + "\n".join(late))
    return total


def main(argv: list[str]) -> int:
    if not argv or any(a.startswith("-") for a in argv):
        print("usage: python -m booktools.glue2eval NOTEBOOK.ipynb ...  (then re-execute it: "
              "python -m booktools.notebooks NOTEBOOK.ipynb)", file=sys.stderr)
        return 2
    status = 0
    for name in argv:
        try:
            n = convert_notebook(name)
        except (ConversionError, FileNotFoundError) as err:
            print(f"{name}:\n{err}", file=sys.stderr)
            status = 1
            continue
        print(f"{name}: {n} glue role{'s' if n != 1 else ''} now {{eval}}", flush=True)
    return status


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
