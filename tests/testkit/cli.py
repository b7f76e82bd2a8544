"""Running the ``mxrec`` command line as a user would: ``python -m mxrec ARGS`` in a fresh interpreter."""

from __future__ import annotations

import os
import subprocess
import sys

from testkit import SRC


def mxrec_env() -> dict[str, str]:
    """The environment of a child interpreter that imports this checkout's ``src``."""
    return dict(os.environ, PYTHONPATH=str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def run_mxrec(*args: str | os.PathLike, check: bool = False) -> subprocess.CompletedProcess:
    """Run ``python -m mxrec ARGS`` and return the CompletedProcess (``check``: raise on a non-zero exit)."""
    result = subprocess.run([sys.executable, "-m", "mxrec", *map(str, args)], capture_output=True, text=True,
                            env=mxrec_env(), timeout=600)
    if check and result.returncode != 0:
        raise AssertionError(f"mxrec {args} exited {result.returncode}:\n{result.stdout}\n{result.stderr}")
    return result
