"""Operations on a file wherever it lives: a local path goes to the operating system, a URL to the request layer.

The helpers callers use for small files and listings, local or remote alike: :func:`exists`, :func:`isdir`,
:func:`read_bytes`, :func:`size`, :func:`open_input`, :func:`remove_file`, :func:`glob`, :func:`listdir`,
:func:`listing`, :func:`walk`; :func:`local_file`, a path to hand a library that opens files itself; and
:func:`spooled_folder`, a folder of output files written locally wherever it goes. A remote one goes
through :mod:`mxrec.storage.remote` (retried, time-limited, checked); a remote :func:`open_input` reads through
:class:`~mxrec.storage.remote_file.RemoteFile`, so a stream (a ``.lst``, a Parquet footer) is retried and checked
range by range too.
"""

from __future__ import annotations

import contextlib
import glob as stdlib_glob
import os
import posixpath
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

from mxrec.errors import MxrecError
from mxrec.storage import remote
from mxrec.storage.atomic import SPOOL_ENV
from mxrec.storage.filesystem import StorageOptions, filesystem, is_url, join, local_path
from mxrec.storage.remote_file import RemoteFile


def exists(path: str, storage_options: StorageOptions = None) -> bool:
    """Whether a file (or folder) exists there (a remote check is one request an attempt; any failure but "not
    found" raises)."""
    if not is_url(path):
        return os.path.exists(local_path(path))
    return remote.exists(path, storage_options)


@contextlib.contextmanager
def local_file(path: str, storage_options: StorageOptions = None) -> Iterator[str]:
    """A local path to the file's bytes for the block: ``path`` itself when local, a remote one copied (through
    :func:`open_input`: retried and checked) into a temporary file, removed after."""
    if not is_url(path):
        yield local_path(path)
        return
    with tempfile.TemporaryDirectory(prefix="mxrec-copy-", dir=os.environ.get(SPOOL_ENV) or None) as folder:
        local = os.path.join(folder, posixpath.basename(path.rstrip("/")) or "file")
        with open_input(path, "rb", storage_options) as src, open(local, "wb") as dst:
            shutil.copyfileobj(src, dst, 8 << 20)
        yield local


def isdir(path: str, storage_options: StorageOptions = None) -> bool:
    """Whether ``path`` is a folder (for object stores: a prefix with objects under it)."""
    if not is_url(path):
        return os.path.isdir(local_path(path))
    return remote.kind(path, storage_options) == "directory"


def read_bytes(path: str, storage_options: StorageOptions = None) -> bytes:
    """The whole file; a remote one checked against its size (:func:`mxrec.storage.remote.read_whole`)."""
    if not is_url(path):
        with open(local_path(path), "rb") as f:
            return f.read()
    return remote.read_whole(path, storage_options)


def size(path: str, storage_options: StorageOptions = None) -> int:
    """The file's size in bytes (a remote one: one request, retried).

    Parameters
    ----------
    path
        A local path or a URL.
    storage_options
        Options for a URL's file system.

    Returns
    -------
    int
        Its size.

    Raises
    ------
    FileNotFoundError
        No file there (the request layer's errors for a URL that fails otherwise).
    """
    if not is_url(path):
        return os.path.getsize(local_path(path))
    return RemoteFile(path, storage_options).size


def open_input(path: str, mode: str = "rb", storage_options: StorageOptions = None, **kwargs: Any) -> IO:
    """``open`` for reading, local or remote (text modes take ``encoding``/``newline``)."""
    if not is_url(path):
        return open(local_path(path), mode, **kwargs)
    return RemoteFile(path, storage_options).open(mode, **kwargs)


def remove_file(path: str, storage_options: StorageOptions = None) -> None:
    """Remove the file ``path`` if it is there (a remote one retried under the policy)."""
    if is_url(path):
        remote.remove(path, storage_options)
    elif os.path.lexists(local_path(path)):
        os.unlink(local_path(path))


def glob(pattern: str, storage_options: StorageOptions = None) -> list[str]:
    """Files matching ``pattern``, sorted, as URLs when ``pattern`` is one."""
    if not is_url(pattern):
        return sorted(stdlib_glob.glob(local_path(pattern)))
    return remote.glob(pattern, storage_options)


def listdir(folder: str, storage_options: StorageOptions = None) -> list[str]:
    """The files directly in ``folder``, sorted, as URLs when ``folder`` is one."""
    return sorted(listing(folder, storage_options))


def listing(folder: str, storage_options: StorageOptions = None) -> dict[str, int | None]:
    """What is directly in ``folder`` (as URLs when ``folder`` is one) with its size (``None``: a folder); a
    remote folder is listed once (:func:`mxrec.storage.remote.listing`)."""
    if not is_url(folder):
        folder = local_path(folder)
        found = {}
        for entry in os.scandir(folder):
            found[os.path.join(folder, entry.name)] = None if entry.is_dir() else entry.stat().st_size
        return found
    return remote.listing(folder, storage_options)


def _loops_back(parent: str, child: str) -> bool:
    """Whether directory ``child`` of ``parent`` is (a link to) ``parent`` or one of its ancestors."""
    real_parent, real_child = os.path.realpath(parent), os.path.realpath(child)
    return real_parent == real_child or real_parent.startswith(real_child.rstrip(os.sep) + os.sep)


def walk(root: str, recursive: bool = True, storage_options: StorageOptions = None) -> list[str]:
    """The files under the folder ``root``, as ``/``-separated paths relative to it, in ``os.walk``'s order with
    sorted names: a folder's files, then its sub-folders' (``recursive=False``: only its own files).

    Parameters
    ----------
    root
        A local folder or a URL.
    recursive
        Also the files in sub-folders (local symbolic links are followed, except those leading back up).
    storage_options
        For a URL: its storage settings.

    Returns
    -------
    list[str]
        The relative paths (a remote folder in one listing).

    Raises
    ------
    MxrecError
        A local ``root`` that is not a folder.
    """
    if is_url(root):
        base = filesystem(root, storage_options)[1].rstrip("/")
        found = remote.find(root, storage_options, recursive=recursive)
        relative = [path[len(base) + 1:] for path in found if path.startswith(base + "/")]
        # top-down, sorted: a folder's files, then its sub-folders (as os.walk with sorted names)
        return sorted(relative, key=lambda rel: (tuple(rel.split("/")[:-1]), rel.rsplit("/", 1)[-1]))
    root = local_path(root)
    if not os.path.isdir(root):
        raise MxrecError(f"{root}: not a directory")
    if not recursive:
        return [name for name in sorted(os.listdir(root)) if os.path.isfile(os.path.join(root, name))]
    out = []
    for path, dirs, names in os.walk(root, followlinks=True):
        dirs[:] = sorted(d for d in dirs if not _loops_back(path, os.path.join(path, d)))
        out += [os.path.relpath(os.path.join(path, name), root).replace(os.sep, "/") for name in sorted(names)
                if os.path.isfile(os.path.join(path, name))]
    return out


@dataclass
class SpooledFolder:
    """The local folder :func:`spooled_folder` gives: write into :attr:`path`; :attr:`last`, a file among those
    written, is uploaded after all the others (the one whose presence says the folder is complete)."""

    path: str
    last: str | None = None


@contextlib.contextmanager
def spooled_folder(out_dir: str, storage_options: StorageOptions = None) -> Iterator[SpooledFolder]:
    """A local folder to write the files of ``out_dir`` in: ``out_dir`` itself when it is local; for a URL a
    temporary folder (under ``$MXREC_SPOOL_DIR`` when set) whose files are uploaded into ``out_dir`` when the block
    ends without an error, :attr:`SpooledFolder.last` last, and removed.

    Parameters
    ----------
    out_dir
        The output folder, local or a URL.
    storage_options
        For a URL: its storage settings.

    Yields
    ------
    SpooledFolder
        The folder to write in.
    """
    if not is_url(out_dir):
        yield SpooledFolder(out_dir)
        return
    with tempfile.TemporaryDirectory(prefix="mxrec-spool-", dir=os.environ.get(SPOOL_ENV)) as local:
        folder = SpooledFolder(local)
        yield folder
        names = sorted(os.path.join(d, n) for d, _, found in os.walk(local) for n in found)
        if folder.last is not None:
            names = [name for name in names if name != folder.last] + [folder.last]
        for name in names:
            remote.upload(name, join(out_dir, os.path.relpath(name, local).replace(os.sep, "/")), storage_options)
