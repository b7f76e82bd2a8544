"""Where a file lives: plain local paths and fsspec URLs, the file system behind each, and what remote errors mean.

Every path mxrec takes may be a local path, ``file://...``, or an fsspec URL
(``s3://``, ``gs://``, ``http(s)://``, ``webhdfs://``, ``hdfs://``,
``memory://``...). This module owns that distinction:

* :func:`is_url` says whether a path needs fsspec (``file://`` and plain
  paths do not: they stay on the memory-mapped fast path, see :func:`local_path`).
* :func:`filesystem` turns a URL into ``(fs, path)``, with credentials and
  endpoints the usual way: the environment (``AWS_ACCESS_KEY_ID``,
  ``AWS_ENDPOINT_URL``, ``GOOGLE_APPLICATION_CREDENTIALS``...), fsspec's own
  configuration (``~/.config/fsspec/*.json``, ``FSSPEC_<PROTOCOL>_<OPTION>``),
  and ``storage_options`` given in the Python API, which win. One file-system
  object per process and options (never shared across ``fork``). A missing
  back-end raises :class:`~mxrec.errors.MissingExtraError` naming the extra.
  S3 clients are made without botocore's and s3fs's own retries (unless
  ``config_kwargs={"retries": ...}`` is given): mxrec's bounded retries
  (:mod:`mxrec.storage.remote_file`) replace them, where the layers would otherwise
  multiply (measured: 25 requests and 40 s per failed read with s3fs's defaults).
* :func:`remote_error` turns what a back-end raised into an mxrec error naming
  the URL; :func:`is_transient` says which failures are worth retrying
  (5xx answers, dropped connections, timeouts, short bodies).
* small helpers that work on both kinds of path: :func:`join`, :func:`parent`,
  :func:`exists`, :func:`read_bytes`, :func:`open_input`, :func:`glob`.
"""

from __future__ import annotations

import asyncio
import os
import posixpath
import threading
from collections.abc import Mapping
from typing import IO, Any

from mxrec.errors import MissingExtraError, RemoteAccessError, RemoteError, RemoteNotFoundError

StorageOptions = Mapping[str, Any] | None

#: The ``pip install`` extra that brings each protocol's back-end.
EXTRAS = {"s3": "mxrec[s3]", "s3a": "mxrec[s3]", "gs": "mxrec[gcs]", "gcs": "mxrec[gcs]", "http": "mxrec[http]",
          "https": "mxrec[http]", "webhdfs": "mxrec[hdfs]", "hdfs": "pyarrow (and a local Hadoop client)"}

_filesystems: dict[tuple, Any] = {}
_HOST_FREE = ("s3", "s3a", "gs", "gcs", "http", "https", "memory", "az", "abfs", "abfss")
_filesystems_pid = [os.getpid()]
_lock = threading.Lock()


def is_url(path: str | os.PathLike) -> bool:
    """Whether ``path`` names a file that fsspec must reach (any ``scheme://`` except ``file://``)."""
    if not isinstance(path, str):
        return False
    scheme, sep, _ = path.partition("://")
    return bool(sep) and scheme.isidentifier() and scheme.lower() not in ("file", "local")


def local_path(path: str | os.PathLike) -> str:
    """A local path as ``open`` takes it: ``file:///x`` -> ``/x``; anything else unchanged."""
    path = os.fspath(path)
    for prefix in ("file://", "local://"):
        if path.startswith(prefix):
            return path[len(prefix):]
    return path


def protocol(url: str) -> str:
    """The scheme of ``url`` in lower case (``"s3"``); ``"file"`` for a local path."""
    return url.partition("://")[0].lower() if is_url(url) else "file"


def _key(options: StorageOptions) -> tuple:
    return tuple(sorted((k, repr(v)) for k, v in (options or {}).items()))


def filesystem(url: str, storage_options: StorageOptions = None) -> tuple[Any, str]:
    """``(fs, path)`` for ``url``: the fsspec file system and the path it takes.

    File-system objects are kept per process (a child after ``fork`` makes its
    own: an event loop or a connection pool must never be shared).
    """
    import fsspec.core

    pid = os.getpid()
    scheme = protocol(url)
    # a file system object serves every bucket (s3, gs...) or URL (http), but one host for hdfs/webhdfs and the like
    host = "" if scheme in _HOST_FREE else url.partition("://")[2].partition("/")[0]
    key = (scheme, host, _key(storage_options))
    with _lock:
        if _filesystems_pid[0] != pid:
            _filesystems.clear()
            _filesystems_pid[0] = pid
        fs = _filesystems.get(key)
    if fs is not None:
        return fs, fs._strip_protocol(url)
    options = dict(storage_options or {})
    own_retries = key[0] in ("s3", "s3a") and "retries" not in options.get("config_kwargs", {})
    if own_retries:  # mxrec retries (source.py); botocore's and s3fs's retries on top would multiply
        options["config_kwargs"] = {**options.get("config_kwargs", {}), "retries": {"max_attempts": 1,
                                                                                     "mode": "standard"}}
    try:
        fs, path = fsspec.core.url_to_fs(url, **options)
    except ImportError as exc:
        extra = EXTRAS.get(protocol(url))
        hint = f"pip install '{extra}'" if extra and extra.startswith("mxrec[") else f"{extra or 'its back-end'}"
        raise MissingExtraError(f"{url}: reading {protocol(url)}:// URLs needs {hint} ({exc})") from None
    except ValueError as exc:
        raise RemoteError(url, f"not a usable URL: {exc}") from None
    if own_retries:
        fs.retries = 1
    with _lock:
        _filesystems[key] = fs
    return fs, path


def _status(exc: BaseException) -> int | None:
    """The HTTP status carried by a back-end's exception, if any."""
    for attr in ("status", "status_code", "code"):
        value = getattr(exc, attr, None)
        if isinstance(value, int) and 100 <= value <= 599:
            return value
    response = getattr(exc, "response", None)
    if isinstance(response, dict):  # botocore ClientError
        value = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if isinstance(value, int):
            return value
    value = getattr(response, "status_code", None)  # requests
    return value if isinstance(value, int) else None


class ShortReadError(RemoteError):
    """A ranged read returned fewer (or more) bytes than asked: a truncated body or a misbehaving server."""


_TRANSIENT_NAMES = ("Timeout", "Connection", "Incomplete", "Payload", "Disconnected", "Reset", "Chunked",
                    "ProtocolError", "ReadError", "EndpointConnection", "SlowDown", "Throttl", "ServerError")


def is_transient(exc: BaseException) -> bool:
    """Whether a failed request is worth trying again: 5xx/429, timeouts, dropped or short responses."""
    if isinstance(exc, ShortReadError):
        return True
    if isinstance(exc, (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError,
                        MissingExtraError)):
        return False
    status = _status(exc)
    if status is not None:
        return status >= 500 or status in (408, 429)
    if isinstance(exc, (TimeoutError, ConnectionError, asyncio.TimeoutError)):
        return True
    names = " ".join(cls.__name__ for cls in type(exc).__mro__)
    text = str(exc)
    return any(n in names for n in _TRANSIENT_NAMES) or any(
        s in text for s in ("503", "500 ", "502", "504", "SlowDown", "reset by peer", "timed out"))


def remote_error(url: str, exc: BaseException, what: str = "read") -> RemoteError:
    """An mxrec error naming ``url`` for what a back-end raised while doing ``what``."""
    if isinstance(exc, RemoteError):
        return exc
    detail = f"{type(exc).__name__}: {exc}".strip()
    status = _status(exc)
    if isinstance(exc, FileNotFoundError) or status == 404:
        return RemoteNotFoundError(url, f"{what}: no such file, bucket or object ({detail})")
    if isinstance(exc, PermissionError) or status in (401, 403):
        return RemoteAccessError(url, f"{what}: access denied: check the credentials (environment, fsspec "
                                      f"configuration or storage_options) ({detail})")
    return RemoteError(url, f"{what} failed: {detail}")


def join(base: str, name: str) -> str:
    """``name`` inside folder ``base``, for URLs and local paths alike."""
    if is_url(base):
        return base.rstrip("/") + "/" + name
    return os.path.join(local_path(base), name)


def parent(path: str) -> str:
    """The folder holding ``path`` (URL or local)."""
    if is_url(path):
        scheme, _, rest = path.partition("://")
        return f"{scheme}://{posixpath.dirname(rest.rstrip('/'))}"
    return os.path.dirname(local_path(path))


def basename(path: str) -> str:
    return posixpath.basename(path.rstrip("/")) if is_url(path) else os.path.basename(local_path(path))


def _ask(path: str, storage_options: StorageOptions, local: Any, remote: str) -> bool:
    """``local(path)`` for a local path, else the file system's method ``remote`` (one request)."""
    if not is_url(path):
        return bool(local(local_path(path)))
    fs, fs_path = filesystem(path, storage_options)
    try:
        return bool(getattr(fs, remote)(fs_path))
    except Exception as exc:
        raise remote_error(path, exc, f"asking {remote}") from None


def exists(path: str, storage_options: StorageOptions = None) -> bool:
    """Whether a file exists there (a remote check costs one request)."""
    return _ask(path, storage_options, os.path.exists, "exists")


def isdir(path: str, storage_options: StorageOptions = None) -> bool:
    """Whether ``path`` is a folder (for object stores: a prefix with objects under it)."""
    return _ask(path, storage_options, os.path.isdir, "isdir")


def read_bytes(path: str, storage_options: StorageOptions = None) -> bytes:
    """The whole file (one request for a remote one)."""
    if not is_url(path):
        with open(local_path(path), "rb") as f:
            return f.read()
    fs, fs_path = filesystem(path, storage_options)
    try:
        return fs.cat_file(fs_path)
    except Exception as exc:
        raise remote_error(path, exc) from None


def open_input(path: str, mode: str = "rb", storage_options: StorageOptions = None, **kwargs: Any) -> IO:
    """``open`` for reading, local or remote (text modes take ``encoding``/``newline``)."""
    if not is_url(path):
        return open(local_path(path), mode, **kwargs)
    fs, fs_path = filesystem(path, storage_options)
    try:
        return fs.open(fs_path, mode, **kwargs)
    except Exception as exc:
        raise remote_error(path, exc, "open") from None


def glob(pattern: str, storage_options: StorageOptions = None) -> list[str]:
    """Files matching ``pattern``, sorted, as URLs when ``pattern`` is one."""
    if not is_url(pattern):
        import glob as stdlib_glob

        return sorted(stdlib_glob.glob(local_path(pattern)))
    fs, fs_path = filesystem(pattern, storage_options)
    try:
        found = fs.glob(fs_path)
    except Exception as exc:
        raise remote_error(pattern, exc, "listing") from None
    return sorted(fs.unstrip_protocol(p) for p in found)


def listdir(folder: str, storage_options: StorageOptions = None) -> list[str]:
    """The files directly in ``folder``, sorted, as URLs when ``folder`` is one."""
    if not is_url(folder):
        folder = local_path(folder)
        return sorted(os.path.join(folder, n) for n in os.listdir(folder))
    fs, fs_path = filesystem(folder, storage_options)
    try:
        found = fs.ls(fs_path, detail=False)
    except Exception as exc:
        raise remote_error(folder, exc, "listing") from None
    return sorted(fs.unstrip_protocol(p) for p in found)
