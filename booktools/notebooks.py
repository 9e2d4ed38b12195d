"""Execute the chapters top to bottom in a fresh kernel and strip what would change run to run.

``python -m booktools.notebooks chapters/*.ipynb`` (``make execute``). A committed chapter is then
exactly what a fresh kernel produces: execution counts 1, 2, 3..., outputs present, and no timings,
widget state with random ids, or interpreter patch versions in its metadata.
"""

from __future__ import annotations

import sys
from pathlib import Path

__all__ = ["execute", "clean"]

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
    """Run ``path`` in a fresh kernel from its own folder, then clean and save it."""
    import nbformat
    from nbclient import NotebookClient

    path = Path(path)
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", record_timing=False,
                            resources={"metadata": {"path": str(path.parent.resolve())}})
    client.execute()
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
