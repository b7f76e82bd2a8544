"""Shared fixtures: the golden files, and running the ``mxrec`` command line as a user would."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from testkit import GOLDEN
from testkit.cli import run_mxrec

pytest_plugins = ["testkit.fixtures", "testkit.ray_cluster"]


@pytest.fixture
def golden() -> Path:
    """``tests/data/golden``: files written by real MXNet 1.9.1 (see its README)."""
    return GOLDEN


@pytest.fixture
def mxrec_cli():
    """``mxrec_cli(*args)`` runs the command line in a subprocess and returns the CompletedProcess."""
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
