"""Shared fixtures: the golden files, and running the ``mxrec`` command line as a user would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).parent
GOLDEN = TESTS / "data" / "golden"
SRC = TESTS.parent / "src"


@pytest.fixture
def golden() -> Path:
    """``tests/data/golden``: files written by real MXNet 1.9.1 (see its README)."""
    return GOLDEN


def run_mxrec(*args: str | os.PathLike, check: bool = False) -> subprocess.CompletedProcess:
    """Run ``python -m mxrec ARGS`` in a fresh interpreter, importing this checkout's ``src``."""
    env = dict(os.environ, PYTHONPATH=str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    result = subprocess.run([sys.executable, "-m", "mxrec", *map(str, args)], capture_output=True, text=True,
                            env=env, timeout=600)
    if check and result.returncode != 0:
        raise AssertionError(f"mxrec {args} exited {result.returncode}:\n{result.stdout}\n{result.stderr}")
    return result


@pytest.fixture
def mxrec_cli():
    """``mxrec_cli(*args)`` runs the command line in a subprocess and returns the CompletedProcess."""
    return run_mxrec
