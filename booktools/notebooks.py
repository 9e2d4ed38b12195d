"""Execute the chapters top to bottom in a fresh kernel and strip what would change run to run.

``python -m booktools.notebooks chapters/*.ipynb`` (``make execute``). A committed chapter is then
exactly what a fresh kernel produces: execution counts 1, 2, 3..., outputs present, and no timings,
widget state with random ids, or interpreter patch versions in its metadata.

The prose's numbers are evaluated as JupyterLab evaluates them: when the run reaches a markdown
cell, its inline ``{eval}`name``` roles are sent to the kernel as ``user_expressions`` (what
jupyterlab-myst does when a markdown cell is run), and the answers are stored in the cell's metadata
under ``user_expressions``, where jupyterlab-myst reads them, so that a chapter opened in JupyterLab
shows its numbers before it is run. Each answer must be the text glued under that name by then: a
name used before the cell that glues it, or rebound by the notebook's code, stops the run
(:class:`ProseError`), since JupyterLab would show something other than the site.

Figures get their captions in JupyterLab too: after each figure cell (``mystnb.figure`` metadata, which
only the book build reads) the executor keeps a markdown cell tagged ``remove-cell`` (so the site
never shows it) holding a MyST figure with that name and caption; jupyterlab-myst numbers it, shows
"Figure N: caption" under the picture, and resolves ``{numref}`fig-...``` to it. These cells are
written from the metadata on every run (the metadata is the one to edit).
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

__all__ = ["execute", "clean", "evaluate_prose", "caption_cells", "ProseError", "EVAL_ROLE", "LAB_CAPTION"]

# an inline {eval}`expression` in a markdown cell (the names roofline.present.glue.glue binds)
EVAL_ROLE = re.compile(r"\{eval\}`([^`]+)`")
USER_EXPRESSIONS = "user_expressions"  # the cell metadata key jupyterlab-myst reads and writes
LAB_CAPTION = "lab_caption"  # under the cell metadata key "roofline": the figure a caption cell is for


def caption_cells(nb) -> None:
    """Rewrite, in place, the JupyterLab caption cell after every figure cell (and drop stale ones)."""
    import nbformat

    kept = [c for c in nb.cells if LAB_CAPTION not in c.metadata.get("roofline", {})]
    cells = []
    for cell in kept:
        cells.append(cell)
        figure = cell.metadata.get("mystnb", {}).get("figure", {}) if cell.cell_type == "code" else {}
        if figure.get("name"):
            caption = nbformat.v4.new_markdown_cell(
                f":::{{figure}}\n:label: {figure['name']}\n:no-subfigures:\n\n{figure.get('caption', '')}\n:::",
                metadata={"tags": ["remove-cell"], "roofline": {LAB_CAPTION: figure["name"]}})
            caption["id"] = f"caption-{figure['name']}"[:64]  # stable, so that re-running changes nothing
            cells.append(caption)
    nb.cells = cells


class ProseError(RuntimeError):
    """A markdown cell's {eval} would not show the glued text in JupyterLab."""


def glued_text(cell) -> dict[str, str]:
    """{name: text} glued by a code cell's outputs (``roofline.present.glue.glue``, through myst-nb)."""
    found = {}
    for output in cell.get("outputs", []):
        record = output.get("metadata", {}).get("scrapbook", {})
        plain = output.get("data", {}).get(record.get("mime_prefix", "") + "text/plain")
        if record.get("name") and plain is not None:
            found[record["name"]] = ast.literal_eval(plain)
    return found


def evaluate_prose(client, cell, index: int, glued: dict[str, str]) -> None:
    """Evaluate ``cell``'s {eval} roles in the kernel as jupyterlab-myst does; store the answers in its
    metadata, checked against ``glued`` (raises :class:`ProseError`)."""
    expressions = EVAL_ROLE.findall(cell.source)
    if not expressions:
        cell.metadata.pop(USER_EXPRESSIONS, None)
        return
    msg_id = client.kc.execute("", silent=True, store_history=False,
                               user_expressions={str(i): e for i, e in enumerate(expressions)})
    answers = client.wait_for_reply(msg_id)["content"]["user_expressions"]
    stored, problems = [], []
    for i, expression in enumerate(expressions):
        result = answers[str(i)]
        stored.append({"expression": expression, "result": result})
        if result["status"] != "ok":
            problems.append(f"{{eval}}`{expression}` fails in the kernel: {result.get('ename')}: {result.get('evalue')}"
                            + ("" if expression in glued else " (it is glued only in a later cell, or never)"))
        elif expression not in glued:
            problems.append(f"{{eval}}`{expression}` is not glued before this cell (the site would not find it)")
        elif result["data"].get("text/plain") != glued[expression]:
            problems.append(f"{{eval}}`{expression}` shows {result['data'].get('text/plain')!r} in the kernel but "
                            f"{glued[expression]!r} was glued: the notebook's code rebinds the name")
    if problems:
        raise ProseError(f"markdown cell {index}: " + "; ".join(problems))
    cell.metadata[USER_EXPRESSIONS] = stored

_VOLATILE_CELL_KEYS = ("execution", "ExecuteTime", "collapsed", "scrolled")


def clean(nb) -> None:
    """Remove volatile metadata from a notebook in place.

    Widget views go too: their model ids are random, and the widget state they point to is not kept
    (the book re-executes the notebooks and embeds fresh state); the text repr stays for nbval.
    """
    for cell in nb.cells:
        for key in _VOLATILE_CELL_KEYS:
            cell.metadata.pop(key, None)
        for output in cell.get("outputs", []):
            output.get("data", {}).pop("application/vnd.jupyter.widget-view+json", None)
    nb.metadata.pop("widgets", None)
    info = nb.metadata.get("language_info")
    if info:
        nb.metadata["language_info"] = {"name": info.get("name", "python")}


def execute(path: str | Path, timeout: int = 600) -> None:
    """Run ``path`` in a fresh kernel from its own folder, cell by cell (a markdown cell's {eval}
    roles evaluated when the run reaches it), then clean and save it. Nothing is saved on an error."""
    import nbformat
    from nbclient import NotebookClient

    path = Path(path)
    nb = nbformat.read(path, as_version=4)
    caption_cells(nb)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", record_timing=False,
                            resources={"metadata": {"path": str(path.parent.resolve())}})
    client.reset_execution_trackers()
    with client.setup_kernel():
        info = client.wait_for_reply(client.kc.kernel_info())
        nb.metadata["language_info"] = info["content"]["language_info"]
        glued: dict[str, str] = {}
        for index, cell in enumerate(nb.cells):
            if cell.cell_type == "code":
                client.execute_cell(cell, index, execution_count=client.code_cells_executed + 1)
                glued.update(glued_text(cell))
            elif cell.cell_type == "markdown":
                evaluate_prose(client, cell, index, glued)
    clean(nb)
    nbformat.write(nb, path)


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python -m booktools.notebooks NOTEBOOK.ipynb ...", file=sys.stderr)
        return 2
    for name in argv:
        print(f"executing {name}", flush=True)
        execute(name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
