"""Shared fixtures: the golden files, and running the ``mxrec`` command line (in-process, or as a user would)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from testkit import GOLDEN
from testkit.cli import run_cli, run_mxrec

pytest_plugins = ["testkit.fixtures", "testkit.ray_cluster"]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the tests that drive Ray (``ray``): the README's test command runs them in one process of their own
    after the rest, which it runs in pytest-xdist workers (a Ray driver in an xdist worker that ran other tests
    first has been seen to take the worker down)."""
    for item in items:
        if item.nodeid.startswith("tests/ray/") or {"ray_cluster", "ray_local"} & set(item.fixturenames):
            item.add_marker(pytest.mark.ray)


@pytest.fixture
def golden() -> Path:
    """``tests/data/golden``: files written by real MXNet 1.9.1 (see its README)."""
    return GOLDEN


@pytest.fixture
def mxrec_cli():
    """``mxrec_cli(*args)`` runs the command line in this interpreter and returns a CompletedProcess
    (:func:`testkit.cli.run_cli`): what a command does, without a fresh interpreter for each call."""
    return run_cli


@pytest.fixture
def mxrec_process():
    """``mxrec_process(*args)`` runs ``python -m mxrec ARGS`` in a fresh interpreter (:func:`testkit.cli.run_mxrec`):
    for what only a real process shows (the entry point, signals, what the interpreter prints at exit)."""
    return run_mxrec


@pytest.fixture
def without_simplejpeg(monkeypatch: pytest.MonkeyPatch) -> Iterator[bool]:
    """mxrec as it behaves when simplejpeg is not installed (OpenCV decodes everything)."""
    from mxrec.image import codec

    monkeypatch.setitem(sys.modules, "simplejpeg", None)  # import simplejpeg -> ImportError
    codec.simplejpeg.cache_clear()
    assert codec.simplejpeg() is None
    yield True
    codec.simplejpeg.cache_clear()  # the next caller imports the real module again


@pytest.fixture
def im2rec(golden: Path) -> Path:
    """``golden/im2rec``: real ``tools/im2rec.py`` runs (lists, packed variants, their photos)."""
    return golden / "im2rec"


@pytest.fixture
def photos(im2rec: Path) -> Path:
    """The 200 photos (10 classes) that the golden im2rec runs packed."""
    return im2rec / "photos200"
