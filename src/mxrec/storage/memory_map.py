"""Files as read-only in-memory buffers (``mmap``), shared by every reader.

A mapping has no file position, so any number of threads can read it at once,
and a forked child can go on using the mapping it inherited. :func:`mapped`
also takes a URL, for the tools that read every byte of a file (the doctor,
``mxrec index``): the remote file is copied once, in large ranged reads, to a
local temporary file that is mapped and removed afterwards.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import tempfile
from collections.abc import Iterator

from mxrec.storage.filesystem import StorageOptions, is_url, local_path


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


@contextlib.contextmanager
def mapped(path: str | os.PathLike, storage_options: StorageOptions = None) -> Iterator[mmap.mmap | bytes]:
    """The whole file, local or remote, as a read-only buffer for the duration of the block."""
    path = os.fspath(path)
    if not is_url(path):
        buf = map_file(local_path(path))
        try:
            yield buf
        finally:
            release(buf)
        return
    from mxrec.storage.remote_file import RemoteFile

    remote = RemoteFile(path, storage_options)
    with tempfile.TemporaryFile(prefix="mxrec-copy-", dir=os.environ.get("MXREC_SPOOL_DIR") or None) as f:
        for _, chunk in remote.chunks():
            f.write(chunk)
        f.flush()
        buf = b"" if remote.size == 0 else mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            yield buf
        finally:
            release(buf)
