"""Running the ``mxrec`` command line: in this interpreter (:func:`run_cli`, the usual way to test what a command
does), or as a user would, ``python -m mxrec ARGS`` in a fresh interpreter (:func:`run_mxrec`, for what only a real
process shows: signals, a closed pipe, the entry point, what the interpreter prints at exit)."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import sys
from collections.abc import Iterator

from testkit import SRC


def mxrec_env() -> dict[str, str]:
    """The environment of a child interpreter that imports this checkout's ``src``."""
    return dict(os.environ, PYTHONPATH=str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", ""))


@contextlib.contextmanager
def sigint_handled() -> Iterator[None]:
    """Within the block SIGINT raises ``KeyboardInterrupt`` in this process, as a terminal's Ctrl-C does, and a
    child started in it can be interrupted so too.

    A shell starts a background job (``pytest ... &``) with SIGINT ignored, ``exec`` keeps an ignored signal
    ignored, and Python then installs no ``KeyboardInterrupt`` handler: a test sending SIGINT would wait for
    nothing. A handled signal is reset to the default by ``exec``, so a child started in the block handles it.
    """
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        yield
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def interruptible(args: list[str], **popen: object) -> subprocess.Popen:
    """``subprocess.Popen(args, **popen)`` for a test that sends the child SIGINT (see :func:`sigint_handled`)."""
    with sigint_handled():
        return subprocess.Popen(args, **popen)


def _checked(result: subprocess.CompletedProcess, check: bool) -> subprocess.CompletedProcess:
    if check and result.returncode != 0:
        raise AssertionError(f"mxrec {result.args} exited {result.returncode}:\n{result.stdout}\n{result.stderr}")
    return result


def run_mxrec(*args: str | os.PathLike, check: bool = False) -> subprocess.CompletedProcess:
    """Run ``python -m mxrec ARGS`` and return the CompletedProcess (``check``: raise on a non-zero exit)."""
    result = subprocess.run([sys.executable, "-m", "mxrec", *map(str, args)], capture_output=True, text=True,
                            env=mxrec_env(), timeout=600)
    return _checked(result, check)


def run_cli(*args: str | os.PathLike, check: bool = False) -> subprocess.CompletedProcess:
    """Run ``mxrec ARGS`` in this interpreter (:func:`mxrec.cli.main`), standard output and error captured.

    It answers as :func:`run_mxrec` does (a CompletedProcess: ``returncode``, ``stdout``, ``stderr``), and the exit
    code is the one ``python -m mxrec`` would exit with, argparse's own exits (``--help``, bad usage) included.
    """
    from mxrec.cli import main

    argv = [os.fspath(a) if isinstance(a, os.PathLike) else str(a) for a in args]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:  # as the interpreter turns it into an exit status
            if exc.code is None or isinstance(exc.code, int):
                code = exc.code or 0
            else:
                print(exc.code, file=sys.stderr)
                code = 1
    return _checked(subprocess.CompletedProcess(["mxrec", *argv], code, out.getvalue(), err.getvalue()), check)
