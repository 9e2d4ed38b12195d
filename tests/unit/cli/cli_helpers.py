"""Running the command line inside the test process, shared by the tests/unit/cli/test_cli_*.py modules."""

import contextlib
import io
import subprocess
import sys

from roofline.cli import main


def in_process(*argv):
    """(exit status, stdout, stderr) of ``roofline ARGV`` run in this process; a traceback on stderr
    fails the calling test (bad input must get a one-line message, never a traceback)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(list(argv))
    assert "Traceback" not in err.getvalue()
    return status, out.getvalue(), err.getvalue()


def run(*args, check_rc=None):
    """``roofline ARGS`` in a subprocess, through ``python -m roofline``; a traceback fails the calling test."""
    proc = subprocess.run([sys.executable, "-m", "roofline", *args], capture_output=True, text=True, timeout=120)
    if check_rc is not None:
        assert proc.returncode == check_rc, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    return proc
