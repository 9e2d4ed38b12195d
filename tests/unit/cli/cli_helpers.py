"""Running the command line, inside the test process (fast) or as a reader does (``python -m roofline``), shared by
the tests/unit/cli/test_cli_*.py modules."""

import contextlib
import io
import subprocess
import sys
from typing import NamedTuple

from roofline.cli import main


def in_process(*argv):
    """(exit status, stdout, stderr) of ``roofline ARGV`` run in this process; a traceback on stderr
    fails the calling test (bad input must get a one-line message, never a traceback)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(list(argv))
    assert "Traceback" not in err.getvalue()
    return status, out.getvalue(), err.getvalue()


class Ran(NamedTuple):
    """What a run of the command line gave, as :class:`subprocess.CompletedProcess` names it."""

    returncode: int
    stdout: str
    stderr: str


def run(*args, check_rc=None) -> Ran:
    """``roofline ARGS`` run in this process (:func:`in_process`), its result as a subprocess's; with
    ``check_rc`` the exit status must be that. The tests of what only a real process shows (closed streams,
    a full device, the environment, ``python -m roofline`` itself) use :func:`run_subprocess`."""
    status, out, err = in_process(*args)
    if check_rc is not None:
        assert status == check_rc, out + err
    return Ran(status, out, err)


def run_subprocess(*args, check_rc=None) -> subprocess.CompletedProcess:
    """``roofline ARGS`` in a subprocess, through ``python -m roofline``; a traceback fails the calling test."""
    proc = subprocess.run([sys.executable, "-m", "roofline", *args], capture_output=True, text=True, timeout=120)
    if check_rc is not None:
        assert proc.returncode == check_rc, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    return proc
