"""Local files as read-only in-memory buffers (``mmap``), shared by every reader.

A mapping has no file position, so any number of threads can read it at once,
and a forked child can go on using the mapping it inherited.
"""

from __future__ import annotations

import contextlib
import mmap
import os


def map_file(path: str | os.PathLike) -> mmap.mmap | bytes:
    """The whole file as a read-only buffer: an ``mmap``, or ``b""`` for an empty file."""
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            return b""
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)


def release(buf: mmap.mmap | bytes | None) -> None:
    """Close a buffer from :func:`map_file`; if views of it are still alive, leave it to them."""
    if isinstance(buf, mmap.mmap):
        with contextlib.suppress(BufferError):
            buf.close()
