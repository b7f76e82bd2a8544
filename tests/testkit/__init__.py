"""Shared helpers for mxrec's tests, importable as ``testkit`` (pyproject puts ``tests/`` on the path).

* :mod:`testkit.cli`: run the ``mxrec`` command line in a fresh interpreter, as a user would.
* :mod:`testkit.datasets`: small generated image datasets, clean and with a fault of every kind.
* :mod:`testkit.iterdata`: record files for the iterator tests, rebuilt from the golden photos.

:data:`GOLDEN` is ``tests/data/golden``: files written by real MXNet 1.9.1 (see its README).
"""

from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
GOLDEN = TESTS / "data" / "golden"
SRC = TESTS.parent / "src"
