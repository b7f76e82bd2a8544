"""Atomic output: a file appears under its final name only once it is complete, and nothing else is clobbered.

Everything mxrec writes goes through :class:`PartialFile` (or :func:`atomic_path` /
:func:`atomic_open` for one ``with`` block). What it does depends on what the
output path names:

* a regular file, or nothing yet: the data goes to ``<name>.partial`` beside it
  and is renamed into place (``os.replace``, atomic on POSIX) when the writing
  code finishes without an exception; on an exception, Ctrl-C and SIGTERM
  included (the command line turns SIGTERM into the same exception), the
  partial file is removed. A crash can leave a ``.partial`` file behind, never
  a truncated file under the real name;
* a symbolic link: the same, done to the file the link points at (the partial
  file goes beside that file, in its folder), so the link stays a link and its
  target receives the data. A dangling link creates its target;
* a FIFO, a character or block device (``/dev/stdout``, ``/dev/null``, a named
  pipe): the data is written straight into it. There is nothing to rename and
  no ``.partial`` file; what was written before a failure has been consumed
  already and cannot be taken back;
* a directory: refused with :class:`~mxrec.errors.OutputPathError`, as is a
  path whose folder does not exist (the message names that folder, not the
  partial file).

An ``OSError`` raised while writing (``ENOSPC`` on a full disk or
``/dev/full``, ``EPIPE``) is raised again with the output's name on it.

Remote outputs (a URL, see :mod:`mxrec.storage.filesystem`) take their own path,
:class:`RemoteOutput`: the bytes are written to a local spool file (in
``$MXREC_SPOOL_DIR`` or the system's temporary folder) and uploaded by
``commit``. On object stores (S3, GCS, Azure, memory) an upload becomes
visible only once complete, so it goes straight to the final name; elsewhere
(HDFS) it goes to ``<name>.partial`` and is renamed. An exception (or a
crash) before ``commit`` uploads nothing; the bytes are those a local write
would have made. An ``http(s)://`` target is refused when the output is made,
before any work (:func:`~mxrec.storage.filesystem.check_writable`). :func:`output_for`
picks the right kind for a target.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterator
from typing import IO, Any

from mxrec.errors import OutputPathError
from mxrec.storage import remote
from mxrec.storage.filesystem import StorageOptions, basename, check_writable, is_url, protocol
from mxrec.storage.remote import OBJECT_STORES

PARTIAL_SUFFIX = ".partial"


def partial_path(path: str | os.PathLike) -> str:
    """Where a regular file ``path`` is written until it is complete."""
    return os.fspath(path) + PARTIAL_SUFFIX


def discard(path: str) -> None:
    """Remove ``path`` if it exists."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def is_stream_node(path: str | os.PathLike) -> bool:
    """Whether ``path`` (after symbolic links) is a FIFO or a device: written in place, never renamed."""
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode) or stat.S_ISBLK(mode)


def output_target(path: str | os.PathLike) -> str:
    """The file that writing ``path`` really changes: ``path`` itself, or the end of its chain of symbolic links.

    Raises :class:`~mxrec.errors.OutputPathError` for a directory or a missing folder.
    """
    path = os.fspath(path)
    target = os.path.realpath(path) if os.path.islink(path) else path
    if os.path.isdir(target):
        where = path if target == path else f"{path} (a link to {target})"
        raise OutputPathError(f"{where}: is a directory; give the name of a file to write")
    folder = os.path.dirname(target) or os.curdir
    if not os.path.isdir(folder):
        raise OutputPathError(f"{folder}: no such folder (to write {path}); make it first")
    return target


class PartialFile:
    """One output: written under :attr:`path` until :meth:`commit` puts it in place as :attr:`target`.

    For a regular file :attr:`path` is ``<target>.partial``; for a FIFO or a
    device it is the target itself and :meth:`commit` / :meth:`discard` do
    nothing (see the module docstring). For writers whose life is not one
    ``with`` block (:class:`~mxrec.io.writer.RecordWriter`, sharded output);
    :func:`atomic_path` is the same for a block.
    """

    def __init__(self, target: str | os.PathLike) -> None:
        self.requested = os.fspath(target)
        self.target = output_target(self.requested)
        self.in_place = is_stream_node(self.target)
        self.path = self.target if self.in_place else partial_path(self.target)

    def commit(self) -> None:
        """Move the finished file into place."""
        if not self.in_place:
            os.replace(self.path, self.target)

    def discard(self) -> None:
        """Remove the unfinished file (if it exists)."""
        if not self.in_place:
            discard(self.path)


def named(exc: OSError, path: str) -> OSError:
    """``exc`` with ``path`` as its file name, when it has none (a write error names no file)."""
    if exc.filename is not None or exc.errno is None:
        return exc
    return type(exc)(exc.errno, exc.strerror, path)


SPOOL_ENV = "MXREC_SPOOL_DIR"


class RemoteOutput:
    """One remote output: written to the local spool file :attr:`path`, uploaded to ``target`` by :meth:`commit`."""

    def __init__(self, target: str, storage_options: StorageOptions = None) -> None:
        check_writable(target)
        self.requested = self.target = target
        self.storage_options = storage_options
        fd, self.path = tempfile.mkstemp(prefix="mxrec-upload-", suffix="-" + basename(target),
                                         dir=os.environ.get(SPOOL_ENV) or None)
        os.close(fd)

    def commit(self) -> None:
        """Upload the finished file under its final name (see the module docstring), then drop the spool file."""
        try:
            if protocol(self.target) in OBJECT_STORES:
                remote.upload(self.path, self.target, self.storage_options)
            else:
                partial = self.target + PARTIAL_SUFFIX
                remote.upload(self.path, partial, self.storage_options)
                remote.move(partial, self.target, self.storage_options)
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
    except OSError as exc:
        output.discard()
        renamed = named(exc, output.requested)
        if renamed is exc:
            raise
        raise renamed from exc
    except BaseException:
        output.discard()
        raise


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "w", storage_options: StorageOptions = None,
                **kwargs: Any) -> Iterator[IO]:
    """``open`` for writing, atomically (see the module docstring)."""
    with atomic_path(path, storage_options) as tmp, open(tmp, mode, **kwargs) as f:
        yield f
