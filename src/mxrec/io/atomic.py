"""Atomic output: a file appears under its final name only once it is complete.

Everything mxrec writes goes first to ``<name>.partial`` beside the target and
is renamed into place (``os.replace``, atomic on POSIX) when the writing code
finishes without an exception; on an exception, Ctrl-C included, the partial
file is removed. A crash can leave a ``.partial`` file behind, never a
truncated file under the real name.

Remote outputs (a URL, see :mod:`mxrec.io.filesystem`) take their own path,
:class:`RemoteOutput`: the bytes are written to a local spool file (in
``$MXREC_SPOOL_DIR`` or the system's temporary folder) and uploaded by
``commit``. On object stores (S3, GCS, Azure, memory) an upload becomes
visible only once complete, so it goes straight to the final name; elsewhere
(HDFS) it goes to ``<name>.partial`` and is renamed. An exception (or a
crash) before ``commit`` uploads nothing; the bytes are those a local write
would have made. :func:`output_for` picks the right kind for a target.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from typing import IO, Any

from mxrec.io.filesystem import StorageOptions, basename, filesystem, is_url, remote_error

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


ATOMIC_UPLOAD_PROTOCOLS = ("s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl", "memory")
SPOOL_ENV = "MXREC_SPOOL_DIR"


class RemoteOutput:
    """One remote output: written to the local spool file :attr:`path`, uploaded to ``target`` by :meth:`commit`."""

    def __init__(self, target: str, storage_options: StorageOptions = None) -> None:
        self.target = target
        self.storage_options = storage_options
        fd, self.path = tempfile.mkstemp(prefix="mxrec-upload-", suffix="-" + basename(target),
                                         dir=os.environ.get(SPOOL_ENV) or None)
        os.close(fd)

    def commit(self) -> None:
        """Upload the finished file under its final name (see the module docstring), then drop the spool file."""
        fs, path = filesystem(self.target, self.storage_options)
        try:
            if self.target.partition("://")[0].lower() in ATOMIC_UPLOAD_PROTOCOLS:
                fs.put_file(self.path, path)
            else:
                partial = path + PARTIAL_SUFFIX
                fs.put_file(self.path, partial)
                if fs.exists(path):
                    fs.rm_file(path)
                fs.mv(partial, path)
        except Exception as exc:
            raise remote_error(self.target, exc, "upload") from None
        finally:
            discard(self.path)

    def discard(self) -> None:
        """Forget the unfinished file: nothing is uploaded."""
        discard(self.path)


def output_for(target: str | os.PathLike, storage_options: StorageOptions = None) -> PartialFile | RemoteOutput:
    """The complete-or-absent output for ``target``: a :class:`PartialFile`, or a :class:`RemoteOutput` for a URL."""
    target = os.fspath(target)
    if is_url(target):
        return RemoteOutput(target, storage_options)
    return PartialFile(target.removeprefix("file://"))


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, storage_options: StorageOptions = None) -> Iterator[str]:
    """Yield a temporary path to write; on success it is renamed to (or uploaded as) ``path``, on failure removed."""
    output = output_for(path, storage_options)
    try:
        yield output.path
        output.commit()
    except BaseException:
        output.discard()
        raise


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "w", storage_options: StorageOptions = None,
                **kwargs: Any) -> Iterator[IO]:
    """``open`` for writing, atomically (see the module docstring)."""
    with atomic_path(path, storage_options) as tmp, open(tmp, mode, **kwargs) as f:
        yield f
