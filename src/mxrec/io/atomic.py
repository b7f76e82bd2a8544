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


class PartialFile:
    """One output written under :attr:`path` (``<target>.partial``) until :meth:`commit` moves it to ``target``.

    For writers whose life is not one ``with`` block (:class:`~mxrec.io.writer.RecordWriter`,
    sharded output); :func:`atomic_path` is the same for a block.
    """

    def __init__(self, target: str | os.PathLike) -> None:
        self.target = os.fspath(target)
        self.path = partial_path(self.target)

    def commit(self) -> None:
        """Move the finished file into place."""
        os.replace(self.path, self.target)

    def discard(self) -> None:
        """Remove the unfinished file (if it exists)."""
        discard(self.path)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[str]:
    """Yield a temporary path to write; on success it is renamed to ``path``, on failure removed."""
    output = PartialFile(path)
    try:
        yield output.path
        output.commit()
    except BaseException:
        output.discard()
        raise


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "w", **kwargs: Any) -> Iterator[IO]:
    """``open`` for writing, atomically (see the module docstring)."""
    with atomic_path(path) as tmp, open(tmp, mode, **kwargs) as f:
        yield f
