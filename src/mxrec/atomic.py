"""Atomic output: a file appears under its final name only once it is complete.

Everything mxrec writes goes first to ``<name>.partial`` beside the target and
is renamed into place (``os.replace``, atomic on POSIX) when the writing code
finishes without an exception; on an exception, Ctrl-C included, the partial
file is removed. A crash can leave a ``.partial`` file behind, never a
truncated file under the real name.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import IO, Any

PARTIAL_SUFFIX = ".partial"


def partial_path(path: str | os.PathLike) -> str:
    """Where ``path`` is written until it is complete."""
    return os.fspath(path) + PARTIAL_SUFFIX


def discard(path: str) -> None:
    """Remove ``path`` if it exists."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[str]:
    """Yield a temporary path to write; on success it is renamed to ``path``, on failure removed."""
    target = os.fspath(path)
    tmp = partial_path(target)
    try:
        yield tmp
        os.replace(tmp, target)
    except BaseException:
        discard(tmp)
        raise


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "w", **kwargs: Any) -> Iterator[IO]:
    """``open`` for writing, atomically (see the module docstring)."""
    with atomic_path(path) as tmp, open(tmp, mode, **kwargs) as f:
        yield f
