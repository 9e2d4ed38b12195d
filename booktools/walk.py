"""The rooms a command-line request walks through, in order: ``python -m booktools.walk serve MODEL ...``.

Runs ``roofline ARGS`` in this process under a profiler hook and records every call from one module of the
package into another. It prints each call the command line makes into the package, in order, with the rooms
(modules) that call then enters, first entries only, in the order entered, each with its floor
(``tests/unit/test_layering.py`` declares the floors: core 1, workloads 2, parallel 3, serving 4, measured 5,
present 6, cli 7); then two counts: the calls from a room into one on a higher floor (the walk climbing back: a
function handed down and called back), and the calls into ``measured``, the floor where the model is checked
against measurements, which a question about a chip or a run should not need. Nothing is timed; what runs is the command itself, so its output is printed too.
"""

from __future__ import annotations

import contextlib
import io
import sys
import threading

FLOORS = ("core", "workloads", "parallel", "serving", "measured", "present", "cli")


def floor(module: str) -> int | None:
    """The floor of a module of the package (1 for the core ... 7 for the command line), None outside it."""
    parts = module.split(".")
    if parts[0] != "roofline" or len(parts) < 2 or parts[1] not in FLOORS:
        return None
    return FLOORS.index(parts[1]) + 1


def walk(argv: list[str]) -> tuple[list[tuple[str, list[str]]], int, int, str]:
    """``(descents, climbs, measured, output)``: each call the command line makes into the package with the rooms
    it enters in order, the calls into a higher floor, the calls into ``measured``, and what the command printed."""
    from roofline.cli import main

    descents: list[tuple[str, list[str]]] = []
    counts = {"climbs": 0, "measured": 0}

    def hook(frame, event, arg):
        if event != "call":
            return
        callee = frame.f_globals.get("__name__", "")
        caller_frame = frame.f_back
        caller = caller_frame.f_globals.get("__name__", "") if caller_frame is not None else ""
        fc, fr = floor(callee), floor(caller)
        if fc is None or fr is None or callee == caller:
            return
        if fc > fr:
            counts["climbs"] += 1
        if callee.startswith("roofline.measured"):
            counts["measured"] += 1
        room = callee.removeprefix("roofline.")
        if fr == 7 and fc < 7:  # the command line calls down into the package: a new descent
            descents.append((f"{frame.f_code.co_name}", [room]))
        elif fc < 7 and descents and descents[-1][1][-1] != room:
            if room not in descents[-1][1]:
                descents[-1][1].append(room)

    out = io.StringIO()
    sys.setprofile(hook)
    threading.setprofile(hook)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            main(argv)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    return descents, counts["climbs"], counts["measured"], out.getvalue()


def report(argv: list[str]) -> str:
    """The walk as text: the command, each descent and its rooms (with floors), and the two counts."""
    descents, climbs, measured, output = walk(argv)
    lines = [f"roofline {' '.join(argv)}", ""]
    shown: list[list] = []  # the same call into the same rooms, again and again (formatting), is one line
    for name, rooms in descents:
        if shown and shown[-1][0] == name and shown[-1][1] == rooms:
            shown[-1][2] += 1
        else:
            shown.append([name, rooms, 1])
    for i, (name, rooms, times) in enumerate(shown, 1):
        path = " > ".join(f"{r} ({floor('roofline.' + r)})" for r in rooms)
        lines.append(f"{i:3d}. {name}{f' (x{times})' if times > 1 else ''}: {path}")
    lines += ["", f"calls from the command line into the package: {len(descents)}",
              f"calls into a higher floor (a function handed down and called back): {climbs}",
              f"calls into measured/: {measured}"]
    return "\n".join(lines) + "\n\n" + output


if __name__ == "__main__":
    print(report(sys.argv[1:]))
