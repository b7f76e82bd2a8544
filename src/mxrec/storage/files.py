"""Operations on a file wherever it lives: a local path goes to the operating system, a URL to the request layer.

The helpers callers use for small files and listings, local or remote alike: :func:`exists`, :func:`isdir`,
:func:`read_bytes`, :func:`open_input`, :func:`remove_file`, :func:`glob`, :func:`listdir`, :func:`listing`. A remote
one goes through :mod:`mxrec.storage.remote` (retried, time-limited, checked); a remote :func:`open_input` reads through
:class:`~mxrec.storage.remote_file.RemoteFile`, so a stream (a ``.lst``, a Parquet footer) is retried and checked
range by range too.
"""

from __future__ import annotations

import glob as stdlib_glob
import os
from typing import IO, Any

from mxrec.storage import remote
from mxrec.storage.filesystem import StorageOptions, is_url, local_path
from mxrec.storage.remote_file import RemoteFile


def exists(path: str, storage_options: StorageOptions = None) -> bool:
    """Whether a file (or folder) exists there (a remote check is one request an attempt; any failure but "not
    found" raises)."""
    if not is_url(path):
        return os.path.exists(local_path(path))
    return remote.exists(path, storage_options)


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
