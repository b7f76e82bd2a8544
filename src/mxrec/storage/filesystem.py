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
import errno
import os
import posixpath
import socket
import threading
from collections.abc import Callable, Mapping
from typing import IO, Any

from mxrec.errors import MissingExtraError, RemoteAccessError, RemoteError, RemoteNotFoundError, missing_extra

StorageOptions = Mapping[str, Any] | None

#: The ``pip install`` extra that brings each protocol's back-end.
EXTRAS = {"s3": "s3", "s3a": "s3", "gs": "gcs", "gcs": "gcs", "http": "http", "https": "http", "webhdfs": "hdfs",
          "hdfs": "pyarrow (and a local Hadoop client)"}  # mxrec's extra per protocol (missing_extra's words)

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
        raise missing_extra(f"{url}: reading {protocol(url)}:// URLs needs its fsspec back-end",
                            EXTRAS.get(protocol(url), "the fsspec package for it"), exc) from None
    except ValueError as exc:
        raise RemoteError(url, f"not a usable URL: {exc}") from None
    except OSError as exc:  # pyarrow's HDFS client: a JVM or libhdfs that cannot be loaded (one line a path tried)
        first = _first_line(str(exc))
        if "libjvm" in first or "libhdfs" in first or "JAVA_HOME" in first:
            raise RemoteError(url, f"cannot use {scheme}:// here: no Java VM or Hadoop client ({first}; set "
                                   "JAVA_HOME to a Java installation and HADOOP_HOME or ARROW_LIBHDFS_DIR to "
                                   "Hadoop's libhdfs, or use webhdfs://)") from None
        raise remote_error(url, exc, "connecting") from None
    if own_retries:
        fs.retries = 1
    with _lock:
        _filesystems[key] = fs
    return fs, path


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and what lies under it: its cause and context, and the exceptions it wraps (``reason``, ``args``).

    Back-ends wrap the fault that matters (s3fs an ``OSError`` around botocore's ``ClientError``, requests a
    ``ConnectionError`` around urllib3's errors around ``ConnectionRefusedError``).
    """
    seen: list[BaseException] = []
    todo = [exc]
    while todo and len(seen) < 16:
        current = todo.pop(0)
        if any(current is s for s in seen):
            continue
        seen.append(current)
        wrapped = [current.__cause__, current.__context__, getattr(current, "reason", None),
                   getattr(current, "last_attempt", None), *getattr(current, "args", ())]
        todo += [w for w in wrapped if isinstance(w, BaseException)]
    return seen


def _own_status(exc: BaseException) -> int | None:
    if type(exc).__module__.startswith("aiohttp.http_exceptions"):  # aiohttp's own parse errors: a "code" 400
        return None  # that is no answer of the server (a cut body: ContentLengthError)
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


def _status(exc: BaseException) -> int | None:
    """The HTTP status carried by a back-end's exception or by one it wraps, if any."""
    return next((s for s in map(_own_status, _chain(exc)) if s is not None), None)


class ShortReadError(RemoteError):
    """A ranged read returned fewer bytes than asked: a truncated body (worth fetching again)."""


class RangeNotHonouredError(RemoteError):
    """A server answered a ranged read with more bytes than asked (the whole file): it ignores ``Range``."""


#: errno values of transient faults: s3fs raises ``OSError(EBUSY)`` for 503 SlowDown / ServiceUnavailable (and 409
#: OperationAborted), ``OSError(EREMOTEIO)`` for 500 InternalError; the rest are dropped or refused connections.
_TRANSIENT_ERRNOS = {getattr(errno, name) for name in ("EBUSY", "EREMOTEIO", "ETIMEDOUT", "ECONNRESET",
                                                        "ECONNABORTED", "ECONNREFUSED", "EPIPE", "EAGAIN",
                                                        "ENETUNREACH", "EHOSTUNREACH") if hasattr(errno, name)}
_TRANSIENT_NAMES = ("Timeout", "Connection", "Connector", "Incomplete", "Payload", "Disconnected", "Reset",
                    "Chunked", "ProtocolError", "ReadError", "EndpointConnection", "SlowDown", "Throttl",
                    "ServerError", "RetryError", "TransportError")
_PERMANENT = (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError, MissingExtraError)


def is_transient(exc: BaseException) -> bool:
    """Whether a failed request is worth trying again: 5xx/408/429, throttling, timeouts, dropped or short answers.

    Judged by what the back-ends really raise, looking through their wrapping (:func:`_chain`): s3fs's
    ``OSError(EBUSY)`` (503 SlowDown) and ``OSError(EREMOTEIO)`` (500 InternalError) over botocore's
    ``ClientError``; aiohttp's ``ClientResponseError`` (``status``) and connection errors (fsspec HTTP, gcsfs);
    gcsfs's ``HttpError`` (``code``); requests' ``HTTPError`` and ``ConnectionError`` (WebHDFS).
    """
    if isinstance(exc, ShortReadError):
        return True
    if isinstance(exc, (RangeNotHonouredError, *_PERMANENT)):
        return False
    status = _status(exc)
    if status is not None:
        return status >= 500 or status in (408, 429)
    chain = _chain(exc)
    if any(isinstance(e, (TimeoutError, ConnectionError, asyncio.TimeoutError)) for e in chain):
        return True
    if any(isinstance(e, OSError) and e.errno in _TRANSIENT_ERRNOS for e in chain):
        return True
    names = " ".join(cls.__name__ for e in chain for cls in type(e).__mro__)
    text = str(exc)
    return any(n in names for n in _TRANSIENT_NAMES) or any(
        s in text for s in ("SlowDown", "reduce your request rate", "reset by peer", "timed out"))


def _first_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[0].strip() if lines else ""


def _connection_failure(exc: BaseException) -> str | None:
    """What kept the request from reaching the server (refused, no route, no such host), or ``None``."""
    chain = _chain(exc)
    if any(_own_status(e) is not None for e in chain):
        return None  # the server answered
    for e in chain:
        if isinstance(e, socket.gaierror):
            return f"cannot connect: the host name does not resolve ({e.strerror or e}); is there a network?"
    for e in chain:
        if isinstance(e, (ConnectionRefusedError, ConnectionAbortedError)) or (
                isinstance(e, OSError) and e.errno in (errno.ECONNREFUSED, errno.ENETUNREACH, errno.EHOSTUNREACH)):
            return f"cannot connect: {e.strerror or _first_line(str(e))}"
    names = " ".join(cls.__name__ for e in chain for cls in type(e).__mro__)
    if any(n in names for n in ("ClientConnectorError", "NewConnectionError", "EndpointConnectionError",
                                "ConnectTimeout", "ServerTimeoutError")):
        return f"cannot connect: {_first_line(str(chain[-1])) or type(chain[-1]).__name__}"
    return None


def remote_error(url: str, exc: BaseException, what: str = "read") -> RemoteError:
    """An mxrec error naming ``url`` for what a back-end raised while doing ``what``: one line, the real cause."""
    if isinstance(exc, RemoteError):
        return exc
    detail = f"{type(exc).__name__}: {_first_line(str(exc))}".strip()
    status = _status(exc)
    if status is not None and str(status) not in detail:  # s3fs's OSError says "Please reduce...", not "503"
        detail += f" (HTTP {status})"
    unreachable = _connection_failure(exc)  # (fsspec's HTTP info says FileNotFoundError for a refused connection)
    if unreachable is not None:
        return RemoteError(url, f"{what} failed: {unreachable}")
    if isinstance(exc, FileNotFoundError) or status == 404:
        return RemoteNotFoundError(url, f"{what}: no such file, bucket or object ({detail})")
    if isinstance(exc, PermissionError) or status in (401, 403):
        return RemoteAccessError(url, f"{what}: access denied: check the credentials (environment, fsspec "
                                      f"configuration or storage_options) ({detail})")
    return RemoteError(url, f"{what} failed: {detail}")


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


def _info(path: str, storage_options: StorageOptions, fs_path: str | None = None) -> dict | None:
    """The file system's ``info`` on ``path`` (or on ``fs_path`` in its file system), ``None`` when nothing is
    there; any other failure raises an error naming ``path``.

    (fsspec's own ``exists``/``isdir`` answer ``False`` for every failure: an unreachable server would read as a
    missing file.)
    """
    fs, own_path = filesystem(path, storage_options)
    fs_path = own_path if fs_path is None else fs_path
    try:
        return fs.info(fs_path)
    except Exception as exc:
        error = remote_error(path, exc, "asking for the file")
        if isinstance(error, RemoteNotFoundError):
            return None
        raise error from None


def exists(path: str, storage_options: StorageOptions = None) -> bool:
    """Whether a file exists there (a remote check costs one request)."""
    if not is_url(path):
        return os.path.exists(local_path(path))
    return _info(path, storage_options) is not None


def isdir(path: str, storage_options: StorageOptions = None) -> bool:
    """Whether ``path`` is a folder (for object stores: a prefix with objects under it)."""
    if not is_url(path):
        return os.path.isdir(local_path(path))
    info = _info(path, storage_options)
    return info is not None and info.get("type") == "directory"


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
    if not found:  # fsspec's listing answers "nothing" for an unreachable server too: ask where the pattern starts
        fixed = fs_path[:min((fs_path.find(c) for c in "*?[" if c in fs_path), default=len(fs_path))]
        _info(pattern, storage_options, posixpath.dirname(fixed) or fs_path)
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
