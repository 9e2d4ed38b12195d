"""Running the command line inside the test process, shared by the tests/unit/cli/test_cli_*.py modules."""

import contextlib
import io

from roofline.cli import main


def in_process(*argv):
    """(exit status, stdout, stderr) of ``roofline ARGV`` run in this process; a traceback on stderr
    fails the calling test (bad input must get a one-line message, never a traceback)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(list(argv))
    assert "Traceback" not in err.getvalue()
    return status, out.getvalue(), err.getvalue()
