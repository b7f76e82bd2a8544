"""Where a file lives: plain local paths and fsspec URLs, and the file system behind each.

Every path mxrec takes may be a local path, ``file://...``, or an fsspec URL
(``s3://``, ``gs://``, ``http(s)://``, ``webhdfs://``, ``hdfs://``,
``memory://``...). This module owns that distinction:

* :func:`is_url` says whether a path needs fsspec (``file://`` and plain
  paths do not: they stay on the memory-mapped fast path, see :func:`local_path`).
* :func:`filesystem` turns a URL into ``(fs, path)``, with credentials and
  endpoints the usual way: the environment (``AWS_ACCESS_KEY_ID``,
  ``AWS_ENDPOINT_URL``, ``GOOGLE_APPLICATION_CREDENTIALS``...), fsspec's own
  configuration (``~/.config/fsspec/*.json``, ``FSSPEC_<PROTOCOL>_<OPTION>``),
  and the options of a :class:`~mxrec.storage.settings.Storage` (or plain
  ``storage_options``) given in the Python API, which win. One file-system
  object per process, options and time-outs (never shared across ``fork``). A missing
  back-end raises :class:`~mxrec.errors.MissingExtraError` naming the extra.
  The file systems are made with the request policy's time-outs and without
  their own retries (:mod:`mxrec.storage.backends`): the request layer
  (:mod:`mxrec.storage.remote`) retries instead, where the layers would otherwise
  multiply (measured: 25 requests and 40 s per failed read with s3fs's defaults).
* path arithmetic that works on both kinds of path: :func:`join`, :func:`parent`, :func:`basename`,
  :func:`absolute`, :func:`shown`, :func:`is_pattern`; and :func:`local_or_none`, for what only a file on this
  machine has (its disk, a file read or written beside it without a request), so that no caller asks
  :func:`is_url` itself.

Operations on files (existence, reads, listings, uploads, moves) are :mod:`mxrec.storage.files` (any path) and
:mod:`mxrec.storage.remote` (URLs).
"""

from __future__ import annotations

import os
import posixpath
import threading
from collections.abc import Callable, Mapping
from typing import Any

from mxrec.errors import RemoteError, missing_extra
from mxrec.storage.backends import configure, prepare
from mxrec.storage.faults import first_line, remote_error
from mxrec.storage.settings import Storage

#: What every function that reaches storage takes: a :class:`~mxrec.storage.settings.Storage`, or plain fsspec
#: options (the older keyword; the request policy then comes from the environment), or ``None``.
StorageOptions = Storage | Mapping[str, Any] | None

#: The ``pip install`` extra that brings each protocol's back-end.
EXTRAS = {"s3": "s3", "s3a": "s3", "gs": "gcs", "gcs": "gcs", "http": "http", "https": "http", "webhdfs": "hdfs",
          "hdfs": "pyarrow (and a local Hadoop client)"}  # mxrec's extra per protocol (missing_extra's words)

_filesystems: dict[tuple, Any] = {}
_HOST_FREE = ("s3", "s3a", "gs", "gcs", "http", "https", "memory", "az", "abfs", "abfss")
_filesystems_pid = [os.getpid()]
# A forked child's copies of its parent's file systems: kept, never used and never closed. Dropped, their
# finalizers would close the parent's sessions on an event loop this process does not run (aiohttp then prints
# "Task exception was never retrieved ... attached to a different loop" in every DataLoader worker).
_inherited: list[Any] = []
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


def local_or_none(path: str | os.PathLike) -> str | None:
    """The local path ``open`` takes for ``path``; ``None`` for a URL.

    For what only a file on this machine has: its disk, a file written or read beside it without a request.

    Parameters
    ----------
    path
        A local path, a ``file://`` URL or a URL.

    Returns
    -------
    str or None
        :func:`local_path` of ``path``, or ``None`` when fsspec must reach it (:func:`is_url`).
    """
    path = os.fspath(path)
    return None if is_url(path) else local_path(path)


def is_pattern(path: str) -> bool:
    """Whether ``path`` (local or a URL: no scheme holds these) is a glob pattern: holds ``*``, ``?`` or ``[``."""
    return any(c in path for c in "*?[")


def protocol(url: str) -> str:
    """The scheme of ``url`` in lower case (``"s3"``); ``"file"`` for a local path."""
    return url.partition("://")[0].lower() if is_url(url) else "file"


def storage_of(storage: StorageOptions) -> Storage:
    """The :class:`~mxrec.storage.settings.Storage` that ``storage`` stands for (plain options, or ``None``, with
    the environment's policy and cache)."""
    return Storage.of(storage)


def filesystem(url: str, storage_options: StorageOptions = None) -> tuple[Any, str]:
    """``(fs, path)`` for ``url``: the fsspec file system and the path it takes.

    File-system objects are kept per process, options and time-outs (a child after ``fork`` makes its own: an event
    loop or a connection pool must never be shared).
    """
    import fsspec.core

    pid = os.getpid()
    scheme = protocol(url)
    # a file system object serves every bucket (s3, gs...) or URL (http), but one host for hdfs/webhdfs and the like
    host = "" if scheme in _HOST_FREE else url.partition("://")[2].partition("/")[0]
    settings = storage_of(storage_options)
    key = (scheme, host, settings.options_key())
    with _lock:
        if _filesystems_pid[0] != pid:
            _inherited.extend(_filesystems.values())
            _filesystems.clear()
            _filesystems_pid[0] = pid
        fs = _filesystems.get(key)
    if fs is not None:
        return fs, fs._strip_protocol(url)
    options = configure(scheme, dict(settings.options), settings.policy)
    try:
        fs, path = fsspec.core.url_to_fs(url, **options)
    except ImportError as exc:
        raise missing_extra(f"{url}: reading {protocol(url)}:// URLs needs its fsspec back-end",
                            EXTRAS.get(protocol(url), "the fsspec package for it"), exc) from None
    except ValueError as exc:
        raise RemoteError(url, f"not a usable URL: {exc}") from None
    except OSError as exc:  # pyarrow's HDFS client: a JVM or libhdfs that cannot be loaded (one line a path tried)
        first = first_line(str(exc))
        if "libjvm" in first or "libhdfs" in first or "JAVA_HOME" in first:
            raise RemoteError(url, f"cannot use {scheme}:// here: no Java VM or Hadoop client ({first}; set "
                                   "JAVA_HOME to a Java installation and HADOOP_HOME or ARROW_LIBHDFS_DIR to "
                                   "Hadoop's libhdfs, or use webhdfs://)") from None
        raise remote_error(url, exc, "connecting") from None
    prepare(fs, scheme, settings.policy)
    with _lock:
        _filesystems[key] = fs
    return fs, path


#: Protocols mxrec only reads: an HTTP server takes no uploads (fsspec's HTTP file system would answer a PUT
#: with 405/501 only once the whole output had been made).
READ_ONLY_PROTOCOLS = ("http", "https")


def check_writable(path: str | os.PathLike) -> None:
    """Refuse, before any work, an output mxrec cannot write: an ``http(s)://`` URL (a read-only protocol)."""
    path = os.fspath(path)
    if protocol(path) in READ_ONLY_PROTOCOLS:
        raise RemoteError(path, f"cannot write to {protocol(path)}:// URLs: HTTP servers are read-only here; write "
                                "to a local path or to s3://, gs://, webhdfs://... and serve that")


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


def absolute(path: str | os.PathLike) -> str:
    """``path`` as another process or machine can use it: a local path made absolute, a URL as it is."""
    path = os.fspath(path)
    return path if is_url(path) else os.path.abspath(local_path(path))


def shown(path: str | os.PathLike) -> str:
    """``path`` as a message shows it: a local path relative to the current folder, a URL as it is."""
    path = os.fspath(path)
    return path if is_url(path) else os.path.relpath(local_path(path))


def uninterrupted(call: Callable[[], object]) -> None:
    """Run ``call`` (one request to a remote store) to its end, even when Ctrl-C or SIGTERM arrives meanwhile.

    A request in flight cannot be taken back: were the interrupt raised while it runs, the cleanup that follows
    could remove a staged or published shard before the request lands, leaving it there. So the request runs in
    a thread of its own, and an interrupt that arrives meanwhile is raised once it has finished.
    """
    outcome: list[BaseException | None] = []
    finished = threading.Event()  # (not Thread.join: interrupted, it takes a running thread for finished)

    def run() -> None:
        try:
            call()
            outcome.append(None)
        except BaseException as exc:  # handed to the calling thread
            outcome.append(exc)
        finally:
            finished.set()

    threading.Thread(target=run, name="mxrec-upload", daemon=True).start()
    interrupted: BaseException | None = None
    while not finished.is_set():
        try:
            finished.wait(0.05)
        except KeyboardInterrupt as exc:  # SIGTERM too (the command line raises it as one)
            interrupted = exc
    if interrupted is not None:
        raise interrupted
    if outcome and outcome[0] is not None:
        raise outcome[0]
