"""Real S3, HTTP and WebHDFS servers on 127.0.0.1 for tests, each with a request log and fault knobs.

Remote-dataset code is judged by what goes over the wire ("one epoch made 7 ranged GETs on train.rec",
"re-opening hit the cache: 0 GETs"), so every server records each request it receives in a :class:`RequestLog`
*before* it answers: once a client call has returned, its requests are in the log, with no race.

Each server binds 127.0.0.1 on a free port (port 0), so it is never reachable from outside this machine and parallel
runs do not collide. ``start()`` returns once the socket is listening; ``stop()`` shuts the accept loop down, closes
open connections and joins every thread with a timeout; all of them are context managers.

Fault knobs (:class:`FaultPlan`, ``server.faults``) make the next N matching requests fail with a status, arrive
truncated, or arrive late, so retry and error paths can be tested against a real client.

Client-side caches hide requests. For honest counts:

- s3fs: ``S3Server.storage_options()`` already passes ``skip_instance_cache=True`` (a fresh filesystem, not one cached
  from an earlier test) and ``use_listings_cache=False`` (``ls``/``info`` ask the server every time). Reads through
  ``fs.open`` go through a read-ahead cache of ``default_block_size`` (50 MiB by default, so a small object is fetched
  whole by the first read): pass ``default_cache_type="none"`` to make every ``read(n)`` one ranged GET, or a small
  ``default_block_size`` to count blocks. ``fs.cat_file(path, start, end)`` is always exactly one ranged GET.
  Opening a file costs one HEAD (its size), unless ``size=`` is passed.
- fsspec HTTP: see :class:`HTTPServer`. WebHDFS: see :class:`WebHDFSServer`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import email.utils
import hashlib
import html
import itertools
import json
import os
import posixpath
import re
import secrets
import shutil
import socket
import socketserver
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlsplit

LOOPBACK = "127.0.0.1"
"""The only address these servers bind."""

STOP_TIMEOUT = 10.0
"""Seconds ``stop()`` waits for the accept loop and for each connection thread."""

MAX_DELAY = 30.0
"""Upper bound on an injected delay, so a mistaken knob cannot hang a test run."""

_RANGE_RE = re.compile(r"^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$")


# ----------------------------------------------------------------------------------------------------------------
# request log


@dataclass
class LoggedRequest:
    """One request as a server saw it.

    ``path`` is the percent-decoded URL path without the query (``/bucket/key`` for S3, ``/x.rec`` for HTTP, the
    HDFS path such as ``/data/x.rec`` for WebHDFS). ``status`` and ``length`` (the response's Content-Length) are
    filled in when the response starts; ``fault`` names the injected fault that answered it, if any.
    """

    role: str
    method: str
    path: str
    query: dict[str, str] = field(default_factory=dict)
    range: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    status: int | None = None
    length: int | None = None
    fault: str | None = None
    bucket: str | None = None
    key: str | None = None
    op: str | None = None
    time: float = field(default_factory=time.monotonic)

    @property
    def byte_range(self) -> tuple[int | None, int | None] | None:
        """The ``Range`` header as ``(first, last)`` (inclusive; ``None`` for an open end), or None if absent."""
        if self.range is None:
            return None
        match = _RANGE_RE.match(self.range)
        if not match:
            return None
        first, last = match.groups()
        return (int(first) if first else None, int(last) if last else None)


_CRITERIA = frozenset(f.name for f in dataclasses.fields(LoggedRequest)) | {"byte_range"}


def _check_criteria(where: Mapping[str, Any]) -> None:
    """A misspelt criterion must fail loudly in the test, not silently match nothing."""
    unknown = set(where) - _CRITERIA
    if unknown:
        raise TypeError(f"unknown request field(s) {sorted(unknown)}; known: {sorted(_CRITERIA)}")


def _matches(record: LoggedRequest, where: Mapping[str, Any]) -> bool:
    for name, wanted in where.items():
        actual = getattr(record, name)
        if callable(wanted):
            if not wanted(actual):
                return False
        elif actual != wanted:
            return False
    return True


class RequestLog:
    """Thread-safe list of :class:`LoggedRequest`, appended by the server threads, read by the test.

    Filter with keyword criteria on any field; a value is compared with ``==``, a callable is used as a predicate::

        log.count(method="GET", key="train.rec")
        log.filter(method="GET", range=lambda r: r is not None)
        mark = log.mark(); ...; log.since(mark, method="GET")
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: list[LoggedRequest] = []

    def append(self, record: LoggedRequest) -> None:
        with self._lock:
            self._records.append(record)

    def clear(self) -> None:
        with self._lock:
            self._records.clear()

    @property
    def records(self) -> list[LoggedRequest]:
        """A snapshot copy, safe to iterate while the server keeps serving."""
        with self._lock:
            return list(self._records)

    def __len__(self) -> int:
        with self._lock:
            return len(self._records)

    def __iter__(self) -> Iterator[LoggedRequest]:
        return iter(self.records)

    def filter(self, **where: Any) -> list[LoggedRequest]:
        _check_criteria(where)
        return [r for r in self.records if _matches(r, where)]

    def count(self, **where: Any) -> int:
        return len(self.filter(**where))

    def mark(self) -> int:
        """A position to pass to :meth:`since`, to count one phase (an epoch) without clearing the log."""
        return len(self)

    def since(self, mark: int, **where: Any) -> list[LoggedRequest]:
        _check_criteria(where)
        return [r for r in self.records[mark:] if _matches(r, where)]

    def summary(self) -> str:
        """One line per request, for assertion messages."""
        lines = []
        for r in self.records:
            extra = f" range={r.range}" if r.range else ""
            extra += f" op={r.op}" if r.op else ""
            extra += f" fault={r.fault}" if r.fault else ""
            lines.append(f"{r.role} {r.method} {r.path} -> {r.status}{extra}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<RequestLog {len(self)} requests>"


# ----------------------------------------------------------------------------------------------------------------
# fault injection


@dataclass
class Fault:
    """One armed fault; see :class:`FaultPlan`."""

    kind: str  # "fail", "truncate" or "delay"
    remaining: int | None  # None: forever
    where: dict[str, Any]
    status: int = 503
    keep: int | None = None
    seconds: float = 0.0

    def describe(self) -> str:
        if self.kind == "fail":
            return f"fail:{self.status}"
        if self.kind == "truncate":
            return f"truncate:keep={'half' if self.keep is None else self.keep}"
        return f"delay:{self.seconds}"


class FaultPlan:
    """Faults a server injects into the requests that match, first armed first served.

    Criteria are those of :meth:`RequestLog.filter` (``method="GET"``, ``key="train.rec"``, ``path="/x.rec"``,
    ``op="OPEN"``, ``role="datanode"``...). A request consumes at most one fault; the log records which.

    Mind client retries: botocore and s3fs retry 5xx answers, so ``fail_next(2)`` on S3 is absorbed (a retry test),
    while a status the client does not retry (403, 404) or more failures than its retries surface as errors.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._faults: list[Fault] = []

    def fail_next(self, n: int = 1, status: int = 503, **where: Any) -> None:
        """Answer the next ``n`` matching requests with ``status`` and a short error body in the protocol's format."""
        self._arm(Fault("fail", n, where, status=status))

    def fail_always(self, status: int = 404, **where: Any) -> None:
        """Answer every matching request with ``status`` until :meth:`clear` (say, a per-path 404)."""
        self._arm(Fault("fail", None, where, status=status))

    def truncate_next(self, n: int = 1, keep: int | None = None, **where: Any) -> None:
        """Send the full Content-Length but only ``keep`` body bytes (default half), then close the connection."""
        self._arm(Fault("truncate", n, where, keep=keep))

    def delay_next(self, n: int = 1, seconds: float = 0.5, **where: Any) -> None:
        """Hold the next ``n`` matching requests ``seconds`` (at most :data:`MAX_DELAY`) before answering normally."""
        if not 0 <= seconds <= MAX_DELAY:
            raise ValueError(f"delay must be within [0, {MAX_DELAY}] s, got {seconds}")
        self._arm(Fault("delay", n, where, seconds=seconds))

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()

    @property
    def pending(self) -> list[Fault]:
        with self._lock:
            return list(self._faults)

    def _arm(self, fault: Fault) -> None:
        _check_criteria(fault.where)
        if fault.remaining is not None and fault.remaining < 1:
            raise ValueError(f"a fault must apply to at least one request, got n={fault.remaining}")
        if fault.kind == "fail" and not 400 <= fault.status <= 599:
            raise ValueError(f"an injected failure needs a 4xx or 5xx status, got {fault.status}")
        with self._lock:
            self._faults.append(fault)

    def take(self, record: LoggedRequest) -> Fault | None:
        """The fault that answers ``record`` (consuming one use of it), or None. Called by the servers."""
        with self._lock:
            for fault in self._faults:
                if _matches(record, fault.where):
                    if fault.remaining is not None:
                        fault.remaining -= 1
                        if fault.remaining == 0:
                            self._faults.remove(fault)
                    return fault
        return None


def _truncated_length(fault: Fault, length: int) -> int:
    keep = length // 2 if fault.keep is None else fault.keep
    return max(0, min(keep, length - 1)) if length else 0


# ----------------------------------------------------------------------------------------------------------------
# thread and connection management shared by every server


class _ConnectionTracking:
    """Mixin for a ``ThreadingMixIn`` server: remembers open connections so ``stop()`` can close and join them.

    ``ThreadingMixIn`` with daemon threads forgets its handler threads; a client's idle keep-alive connection would
    then keep one blocked in ``recv`` after the test ended.
    """

    daemon_threads = True
    block_on_close = False

    def _init_tracking(self) -> None:
        self._conn_lock = threading.Lock()
        self._conns: dict[socket.socket, threading.Thread] = {}

    def process_request_thread(self, request: socket.socket, client_address: Any) -> None:
        with self._conn_lock:
            self._conns[request] = threading.current_thread()
        try:
            super().process_request_thread(request, client_address)  # type: ignore[misc]
        finally:
            with self._conn_lock:
                self._conns.pop(request, None)

    def close_connections(self, timeout: float) -> list[threading.Thread]:
        """Shut every open connection down and join its thread; returns the threads still alive after ``timeout``."""
        with self._conn_lock:
            items = list(self._conns.items())
        for sock, _ in items:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        deadline = time.monotonic() + timeout
        for _, thread in items:
            thread.join(max(0.0, deadline - time.monotonic()))
        return [thread for _, thread in items if thread.is_alive()]


class _TrackingHTTPServer(_ConnectionTracking, ThreadingHTTPServer):
    """stdlib threading HTTP server that knows its owner (for log, faults and state) and its connections."""

    allow_reuse_address = False  # port 0 is always fresh; never steal a port another process holds

    def __init__(self, owner: Any, handler: type[BaseHTTPRequestHandler]) -> None:
        self._init_tracking()
        self.owner = owner
        super().__init__((LOOPBACK, 0), handler)


class _Served:
    """A socketserver whose accept loop runs in a daemon thread, stopped with bounded waits."""

    def __init__(self, server: socketserver.BaseServer, name: str) -> None:
        self.server = server
        self.thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        self.server.serve_forever(poll_interval=0.05)

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        if self.thread.is_alive():
            # shutdown() waits without a timeout for serve_forever to notice; run it aside so a wedged loop is
            # reported rather than hanging the test session.
            stopper = threading.Thread(target=self.server.shutdown, daemon=True)
            stopper.start()
            stopper.join(timeout)
        self.thread.join(timeout)
        leftover: list[threading.Thread] = []
        if isinstance(self.server, _ConnectionTracking):
            leftover = self.server.close_connections(timeout)
        self.server.server_close()
        if self.thread.is_alive():
            raise RuntimeError(f"{self.thread.name}: accept loop still running {timeout} s after shutdown")
        if leftover:
            warnings.warn(f"{self.thread.name}: {len(leftover)} connection thread(s) outlived stop()", stacklevel=3)


class _ServerBase:
    """Start/stop/context-manager protocol, the log and the fault plan common to every server here."""

    role = "server"

    def __init__(self) -> None:
        self.log = RequestLog()
        self.faults = FaultPlan()
        self._served: list[_Served] = []

    @property
    def running(self) -> bool:
        return bool(self._served)

    def start(self) -> _ServerBase:
        raise NotImplementedError

    def stop(self) -> None:
        served, self._served = self._served, []
        errors = []
        for item in served:
            try:
                item.stop()
            except RuntimeError as exc:
                errors.append(exc)
        if errors:
            raise errors[0]

    def reset(self) -> None:
        """Clear the log and disarm every fault: a fresh start for the next test."""
        self.log.clear()
        self.faults.clear()

    def __enter__(self) -> Any:
        if not self.running:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The port of the (first) server: the one clients are pointed at (WebHDFS: the name node)."""
        return self._port(0)

    def _port(self, number: int) -> int:
        self._require_running()
        return self._served[number].port

    def _require_running(self) -> None:
        if not self._served:
            raise RuntimeError(f"{type(self).__name__} is not started")


# ----------------------------------------------------------------------------------------------------------------
# shared request handler for the stdlib-based servers


class _Handler(BaseHTTPRequestHandler):
    """HTTP/1.1 keep-alive handler that logs each request, applies faults, and sends bodies from bytes or files."""

    protocol_version = "HTTP/1.1"
    timeout = 30  # an idle keep-alive connection is dropped after this (socket timeout)
    # the head and the body go out in separate writes: with Nagle's algorithm the body waits for the client's
    # delayed ACK of the head, about 40 ms per request on a keep-alive connection
    disable_nagle_algorithm = True
    server_version = "testkit"
    role = "http"
    max_body = 1 << 30

    server: _TrackingHTTPServer

    # -- hooks for subclasses

    def _error_payload(self, status: int, message: str) -> tuple[bytes, str]:
        return (f"{status} {message}\n".encode(), "text/plain; charset=utf-8")

    def _describe(self, record: LoggedRequest) -> None:
        """Fill protocol-specific fields (op, key...) of a fresh record."""

    # -- plumbing

    def log_message(self, format: str, *args: Any) -> None:  # the request log replaces stderr chatter
        pass

    def _begin(self) -> tuple[LoggedRequest, Fault | None]:
        parts = urlsplit(self.path)
        record = LoggedRequest(
            role=self.role,
            method=self.command,
            path=unquote(parts.path),
            query=dict(parse_qsl(parts.query, keep_blank_values=True)),
            range=self.headers.get("Range"),
            headers=dict(self.headers.items()),
        )
        self._describe(record)
        owner = self.server.owner
        fault = owner.faults.take(record)
        if fault is not None:
            record.fault = fault.describe()
        owner.log.append(record)
        self._record = record
        if fault is not None and fault.kind == "delay":
            time.sleep(fault.seconds)
            fault = None
        return record, fault

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            chunks = []
            total = 0
            while True:
                line = self.rfile.readline(1 << 16)
                size = int(line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline(1 << 16) not in (b"\r\n", b"\n", b""):
                        pass
                    break
                total += size
                if total > self.max_body:
                    raise ValueError("request body too large")
                chunks.append(self.rfile.read(size))
                self.rfile.readline(1 << 16)
            return b"".join(chunks)
        length = int(self.headers.get("Content-Length") or 0)
        if length > self.max_body:
            raise ValueError("request body too large")
        return self.rfile.read(length) if length else b""

    def _send(
        self,
        status: int,
        body: bytes | tuple[Path, int, int] = b"",
        headers: Iterable[tuple[str, str]] = (),
        *,
        content_type: str = "application/octet-stream",
        fault: Fault | None = None,
    ) -> None:
        """Send a response; ``body`` is bytes or ``(file, offset, length)``. No body bytes for HEAD or 1xx/204/304."""
        length = len(body) if isinstance(body, bytes) else body[2]
        record = self._record
        record.status = status
        record.length = length
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(length))
        for name, value in headers:
            self.send_header(name, value)
        send = length
        if fault is not None and fault.kind == "truncate":
            send = _truncated_length(fault, length)
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        if self.command == "HEAD" or status in (204, 304) or status < 200:
            return
        if isinstance(body, bytes):
            self.wfile.write(body[:send])
        else:
            path, offset, _ = body
            with open(path, "rb") as f:
                f.seek(offset)
                while send > 0:
                    chunk = f.read(min(send, 1 << 16))
                    if not chunk:
                        break
                    self.wfile.write(chunk)
                    send -= len(chunk)
        self.wfile.flush()

    def _send_error(self, status: int, message: str, headers: Iterable[tuple[str, str]] = ()) -> None:
        payload, content_type = self._error_payload(status, message)
        self._send(status, payload, headers, content_type=content_type)

    def _dispatch(self) -> None:
        record, fault = self._begin()
        try:
            body = self._read_body() if self.command in ("PUT", "POST") else b""
        except ValueError as exc:  # malformed chunking, or over max_body
            self.close_connection = True
            self._send_error(400, f"bad request body: {exc}")
            return
        if fault is not None and fault.kind == "fail":
            self._send_error(fault.status, f"injected fault ({fault.describe()})")
            return
        try:
            self._handle(record, body, fault)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as exc:  # a server bug must answer 500, not hang the client
            if record.status is None:
                self.close_connection = True
                self._send_error(500, f"testkit server error: {type(exc).__name__}: {exc}")
            else:
                raise

    def _handle(self, record: LoggedRequest, body: bytes, fault: Fault | None) -> None:
        raise NotImplementedError

    do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _dispatch


def _inside(root: Path, relative: str) -> Path | None:
    """``root/relative`` if it stays inside ``root`` (no ``..`` or symlink escape), else None."""
    clean = posixpath.normpath("/" + relative).lstrip("/")
    candidate = (root / clean) if clean else root
    try:
        resolved = candidate.resolve()
    except OSError:
        return None
    if resolved != root and root not in resolved.parents:
        return None
    return candidate


# ----------------------------------------------------------------------------------------------------------------
# HTTP with Range


def parse_range(header: str, size: int) -> tuple[int, int] | str | None:
    """Resolve a ``Range`` header against a ``size``-byte file, as RFC 9110 says for a single byte range.

    Returns ``(start, stop)`` (stop exclusive) for a satisfiable range, ``"unsatisfiable"`` for one that lies past
    the end (the server answers 416), or None when the header is to be ignored (not bytes, malformed, several
    ranges): the server then answers 200 with the whole file, which RFC 9110 allows.
    """
    match = _RANGE_RE.match(header)
    if not match:
        return None
    first, last = match.groups()
    if first == "" and last == "":
        return None
    if first == "":  # suffix: the last n bytes
        n = int(last)
        if n == 0 or size == 0:
            return "unsatisfiable"
        return (max(0, size - n), size)
    start = int(first)
    if last != "" and int(last) < start:
        return None
    if start >= size:
        return "unsatisfiable"
    stop = size if last == "" else min(int(last) + 1, size)
    return (start, stop)


class _RangeHandler(_Handler):
    role = "http"

    def _handle(self, record: LoggedRequest, body: bytes, fault: Fault | None) -> None:
        owner: HTTPServer = self.server.owner
        if self.command not in ("GET", "HEAD"):
            self._send_error(405, "method not allowed", [("Allow", "GET, HEAD")])
            return
        target = _inside(owner.root_resolved, record.path)
        if target is None or not target.exists():
            self._send_error(404, f"not found: {record.path}")
            return
        if target.is_dir():
            self._send(200, _listing(target, record.path), content_type="text/html; charset=utf-8", fault=fault)
            return
        stat = target.stat()
        size = stat.st_size
        headers = [
            ("Accept-Ranges", "bytes" if owner.honour_range else "none"),
            ("Last-Modified", email.utils.formatdate(stat.st_mtime, usegmt=True)),
            ("ETag", f'"{size:x}-{stat.st_mtime_ns:x}"'),
        ]
        wanted = parse_range(record.range, size) if record.range is not None and owner.honour_range else None
        if wanted == "unsatisfiable":
            self._send_error(416, "range not satisfiable", [*headers, ("Content-Range", f"bytes */{size}")])
        elif wanted is None:
            self._send(200, (target, 0, size), headers, fault=fault)
        else:
            start, stop = wanted  # type: ignore[misc]
            headers.append(("Content-Range", f"bytes {start}-{stop - 1}/{size}"))
            self._send(206, (target, start, stop - start), headers, fault=fault)


def _listing(directory: Path, url_path: str) -> bytes:
    """A plain HTML index whose relative links fsspec's ``HTTPFileSystem.ls`` understands."""
    names = sorted(p.name + ("/" if p.is_dir() else "") for p in directory.iterdir())
    base = url_path if url_path.endswith("/") else url_path + "/"
    items = "".join(f'<li><a href="{html.escape(quote(base + n))}">{html.escape(n)}</a></li>\n' for n in names)
    return f"<!DOCTYPE html>\n<html><body><ul>\n{items}</ul></body></html>\n".encode()


class HTTPServer(_ServerBase):
    """Serves the files under ``root`` read-only over HTTP/1.1, honouring single byte ranges.

    ``Range: bytes=a-b``, ``a-`` and ``-n`` get 206 with Content-Range; a range past the end gets 416 with
    ``Content-Range: bytes */size``; anything else is ignored (200, whole file). HEAD gives Content-Length and
    ``Accept-Ranges: bytes``, which is what fsspec needs to know the size and read by ranges. Directories get an
    HTML index. Files may be added under ``root`` while the server runs.

    With fsspec's ``HTTPFileSystem`` (aiohttp), an open file's ``read(n)`` at offset ``o`` that misses its ``"bytes"``
    cache is one GET of ``Range: bytes=o-(o + n + block_size - 1)`` (clipped to the size; ``block_size`` defaults to
    5 MiB, so a small file arrives in one GET whatever is read). For exactly one GET per ``read(n)``, open with
    ``cache_type="none"`` (and a non-zero ``block_size``); ``fs.cat_file(url, start, end)`` is always one GET.
    Two things fetch the whole file without a Range: ``f.read()`` at offset 0 on a file larger than ``block_size``,
    and ``block_size=0`` (streaming). Opening costs one HEAD unless ``size=`` is passed; without a Content-Length on
    HEAD fsspec falls back to a streaming, whole-file read. Pass ``skip_instance_cache=True`` to
    ``fsspec.filesystem("http", ...)``; the instance cache shares sessions (and listings) between tests otherwise.

    ``honour_range=False`` makes a server that ignores ``Range`` (as RFC 9110 allows, and some do): every GET is
    answered 200 with the whole file.
    """

    role = "http"

    def __init__(self, root: str | os.PathLike[str], *, honour_range: bool = True) -> None:
        super().__init__()
        self.root = Path(root)
        self.root_resolved = self.root.resolve()
        self.honour_range = honour_range

    def start(self) -> HTTPServer:
        if self.running:
            return self
        self.root.mkdir(parents=True, exist_ok=True)
        self.root_resolved = self.root.resolve()
        server = _TrackingHTTPServer(self, _RangeHandler)
        self._served = [_Served(server, f"testkit-http:{server.server_address[1]}")]
        return self

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` (no trailing slash)."""
        return f"http://{LOOPBACK}:{self.port}"

    def url_for(self, relative: str) -> str:
        """The URL of ``root/relative``."""
        return f"{self.url}/{quote(relative.lstrip('/'))}"

    def put(self, relative: str, data: bytes) -> str:
        """Write ``data`` to ``root/relative`` (making folders) and return its URL."""
        target = _inside(self.root_resolved, relative)
        if target is None:
            raise ValueError(f"{relative!r} escapes the served folder")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        return self.url_for(relative)


# ----------------------------------------------------------------------------------------------------------------
# WebHDFS


class _HdfsError(Exception):
    def __init__(self, status: int, exception: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.exception = exception


_JAVA_PACKAGES = {
    "FileNotFoundException": "java.io",
    "IOException": "java.io",
    "IllegalArgumentException": "java.lang",
    "UnsupportedOperationException": "java.lang",
}


def _remote_exception(exception: str, message: str) -> bytes:
    package = _JAVA_PACKAGES.get(exception, "org.apache.hadoop.fs")
    payload = {"RemoteException": {"exception": exception, "javaClassName": f"{package}.{exception}",
                                   "message": message}}
    return json.dumps(payload).encode()


class _WebHDFSHandler(_Handler):
    """Name node (``role="namenode"``) or data node (``role="datanode"``) of :class:`WebHDFSServer`."""

    role = "namenode"
    PREFIX = "/webhdfs/v1"

    def _error_payload(self, status: int, message: str) -> tuple[bytes, str]:
        exception = {404: "FileNotFoundException", 400: "IllegalArgumentException", 403: "IOException",
                     503: "RetriableException"}.get(status, "IOException")
        return _remote_exception(exception, message), "application/json"

    def _describe(self, record: LoggedRequest) -> None:
        record.op = record.query.get("op", "").upper() or None
        if record.path.startswith(self.PREFIX):
            record.path = record.path[len(self.PREFIX):] or "/"
        else:
            record.path = "!" + record.path  # not a WebHDFS URL; answered 404 below

    def _json(self, payload: Any, status: int = 200, headers: Iterable[tuple[str, str]] = ()) -> None:
        self._send(status, json.dumps(payload).encode(), headers, content_type="application/json")

    def _handle(self, record: LoggedRequest, body: bytes, fault: Fault | None) -> None:
        owner: WebHDFSServer = self.server.owner
        if record.path.startswith("!"):
            self._send_error(404, f"not a WebHDFS path: {record.path[1:]}")
            return
        try:
            if self.role == "namenode":
                self._namenode(owner, record, fault)
            else:
                self._datanode(owner, record, body, fault)
        except _HdfsError as exc:
            self._send(exc.status, _remote_exception(exc.exception, str(exc)), content_type="application/json")

    # -- name node: metadata, and redirects for data

    def _namenode(self, owner: WebHDFSServer, record: LoggedRequest, fault: Fault | None) -> None:
        op, path, q = record.op, record.path, record.query
        allowed = _NAMENODE_OPS.get(op or "")
        if allowed is None:
            raise _HdfsError(400, "IllegalArgumentException", f'Invalid value for webhdfs parameter "op": {op}')
        if self.command != allowed:
            raise _HdfsError(400, "IllegalArgumentException", f"Invalid HTTP method {self.command} for op={op}")
        local = owner._local(path)
        if op in ("OPEN", "GETFILECHECKSUM"):
            if not local.is_file():
                raise _HdfsError(404, "FileNotFoundException", f"File does not exist: {path}")
            self._redirect(owner, path, q)
        elif op == "CREATE":
            if local.is_dir():
                raise _HdfsError(403, "FileAlreadyExistsException", f"{path} already exists as a directory")
            if local.exists() and q.get("overwrite", "false").lower() != "true":
                raise _HdfsError(403, "FileAlreadyExistsException", f"{path} for client already exists")
            self._redirect(owner, path, q)
        elif op == "APPEND":
            if not local.is_file():
                raise _HdfsError(404, "FileNotFoundException", f"File does not exist: {path}")
            self._redirect(owner, path, q)
        elif op == "GETFILESTATUS":
            if not local.exists():
                raise _HdfsError(404, "FileNotFoundException", f"File does not exist: {path}")
            self._json({"FileStatus": owner._status(local, "")})
        elif op == "LISTSTATUS":
            if not local.exists():
                raise _HdfsError(404, "FileNotFoundException", f"File {path} does not exist.")
            if local.is_dir():
                statuses = [owner._status(child, child.name) for child in sorted(local.iterdir())]
            else:
                statuses = [owner._status(local, "")]
            self._json({"FileStatuses": {"FileStatus": statuses}})
        elif op == "GETCONTENTSUMMARY":
            if not local.exists():
                raise _HdfsError(404, "FileNotFoundException", f"File does not exist: {path}")
            self._json({"ContentSummary": owner._summary(local)})
        elif op == "GETHOMEDIRECTORY":
            self._json({"Path": f"/user/{q.get('user.name', owner.user)}"})
        elif op == "MKDIRS":
            self._json({"boolean": owner._mkdirs(path)})
        elif op == "RENAME":
            destination = q.get("destination")
            if not destination:
                raise _HdfsError(400, "IllegalArgumentException", "RENAME needs a destination")
            self._json({"boolean": owner._rename(path, destination)})
        elif op == "DELETE":
            self._json({"boolean": owner._delete(path, q.get("recursive", "false").lower() == "true")})
        elif op in ("SETPERMISSION", "SETOWNER", "SETTIMES"):
            if not local.exists():
                raise _HdfsError(404, "FileNotFoundException", f"File does not exist: {path}")
            self._send(200)
        elif op == "SETREPLICATION":
            self._json({"boolean": local.is_file()})

    def _redirect(self, owner: WebHDFSServer, path: str, query: Mapping[str, str]) -> None:
        """The name node's 307 to a data node, as real HDFS does for OPEN, CREATE and APPEND.

        The query is in the name node's order, not the client's: ``op`` first, then the user (``doas``,
        ``user.name``), ``namenoderpcaddress``, and the other parameters sorted by name, so ``offset`` comes late
        (``?op=OPEN&user.name=u&namenoderpcaddress=h:p&length=n&offset=o``). A Location cut short on the way (see
        ``testkit.proxy``) then loses the offset but keeps the op, as it would with a real cluster.
        """
        params = dict(query)
        first = [("op", params.pop("op", ""))]
        first += [(name, params.pop(name)) for name in ("doas", "user.name") if name in params]
        first.append(("namenoderpcaddress", f"{LOOPBACK}:{owner.port}"))
        params.pop("namenoderpcaddress", None)
        location = owner.datanode_url + self.PREFIX + quote(path) + "?" + "&".join(
            f"{quote(k, safe='.')}={quote(v, safe='')}" for k, v in [*first, *sorted(params.items())])
        self._send(307, b"", [("Location", location)])

    # -- data node: bytes

    def _datanode(self, owner: WebHDFSServer, record: LoggedRequest, body: bytes, fault: Fault | None) -> None:
        op, path, q = record.op, record.path, record.query
        local = owner._local(path)
        if op == "OPEN" and self.command == "GET":
            if not local.is_file():
                raise _HdfsError(404, "FileNotFoundException", f"File does not exist: {path}")
            size = local.stat().st_size
            offset = _int_param(q, "offset", 0)
            length = _int_param(q, "length", None)
            if offset > size:
                raise _HdfsError(403, "IOException", f"Offset={offset} out of the range [0, {size}); OPEN, path={path}")
            stop = size if length is None else min(size, offset + length)
            self._send(200, (local, offset, stop - offset), fault=fault)
        elif op == "GETFILECHECKSUM" and self.command == "GET":
            digest = hashlib.md5(local.read_bytes()).hexdigest()
            self._json({"FileChecksum": {"algorithm": "MD5-of-0MD5-of-0CRC32", "bytes": digest, "length": 16}})
        elif op == "CREATE" and self.command == "PUT":
            if local.exists() and q.get("overwrite", "false").lower() != "true":
                raise _HdfsError(403, "FileAlreadyExistsException", f"{path} for client already exists")
            owner._ensure_parent(path)
            local.write_bytes(body)
            self._send(201, b"", [("Location", f"hdfs://{LOOPBACK}:{owner.port}{quote(path)}")])
        elif op == "APPEND" and self.command == "POST":
            if not local.is_file():
                raise _HdfsError(404, "FileNotFoundException", f"File does not exist: {path}")
            with open(local, "ab") as f:
                f.write(body)
            self._send(200)
        else:
            raise _HdfsError(400, "IllegalArgumentException", f"data node does not serve {self.command} op={op}")


_NAMENODE_OPS = {
    "OPEN": "GET", "GETFILESTATUS": "GET", "LISTSTATUS": "GET", "GETCONTENTSUMMARY": "GET",
    "GETFILECHECKSUM": "GET", "GETHOMEDIRECTORY": "GET",
    "CREATE": "PUT", "MKDIRS": "PUT", "RENAME": "PUT", "SETPERMISSION": "PUT", "SETOWNER": "PUT",
    "SETREPLICATION": "PUT", "SETTIMES": "PUT",
    "APPEND": "POST",
    "DELETE": "DELETE",
}


def _int_param(query: Mapping[str, str], name: str, default: int | None) -> Any:
    if name not in query:
        return default
    try:
        value = int(query[name])
    except ValueError:
        raise _HdfsError(400, "IllegalArgumentException", f"{name}={query[name]!r} is not a number") from None
    if value < 0:
        raise _HdfsError(400, "IllegalArgumentException", f"{name}={value} is negative")
    return value


class _DataNodeHandler(_WebHDFSHandler):
    role = "datanode"


class WebHDFSServer(_ServerBase):
    """A WebHDFS name node and data node (two ports) over a local folder ``root``, which is HDFS's ``/``.

    Implements what ``fsspec.implementations.webhdfs.WebHDFS`` calls: GETFILESTATUS, LISTSTATUS, GETCONTENTSUMMARY,
    GETFILECHECKSUM, GETHOMEDIRECTORY, MKDIRS, RENAME, DELETE, SET* (accepted, no effect), and the data operations
    the way real HDFS does them: the name node answers OPEN/CREATE/APPEND with a 307 to the data node port, which
    moves the bytes. fsspec reads a block with ``OPEN&offset=&length=`` (not following the redirect automatically,
    it GETs the ``Location`` itself) and writes with CREATE (an empty PUT to the data node), then APPEND (a POST per
    flushed block). Errors are JSON ``RemoteException``s, which fsspec maps: FileNotFoundException (404) ->
    FileNotFoundError, IllegalArgumentException (400) -> ValueError, other 400/401/403/404/500 -> RuntimeError, other
    statuses (503) -> ``requests.HTTPError``.

    Log records have ``role`` ``"namenode"`` or ``"datanode"``, ``op`` the upper-case operation, and ``path`` the
    HDFS path (``/data/x.rec``). ``datanode_host`` is the host name put in redirects; leave it at 127.0.0.1 unless
    a test exercises the client's ``data_proxy`` mapping (see :meth:`filesystem_kwargs`), since fsspec applies
    ``data_proxy`` by plain string replacement on the Location URL.

    Reads through an fsspec file go through a ``"readahead"`` cache (``WebHDFS._open`` drops ``cache_type``): a
    ``read(n)`` at offset ``o`` that misses it is one OPEN of ``[o, o + n + block_size)``, ``block_size`` being 4 MiB
    unless passed to ``fs.open``; opening costs one GETFILESTATUS. ``fs.cat_file(path, start, end)`` is one OPEN.

    Client quirks seen with fsspec 2026.9: ``WebHDFile._fetch_range`` does not check the data node's status, so a
    data node error body comes back as file bytes (cut to the requested length), and append mode (``"ab"``) fails
    before sending anything (``_initiate_upload`` sets no upload location). Neither is this server's doing.
    """

    role = "webhdfs"

    def __init__(self, root: str | os.PathLike[str], *, user: str = "test", datanode_host: str = LOOPBACK) -> None:
        super().__init__()
        self.root = Path(root)
        self.root_resolved = self.root.resolve()
        self.user = user
        self.datanode_host = datanode_host
        self._fs_lock = threading.Lock()

    def start(self) -> WebHDFSServer:
        if self.running:
            return self
        self.root.mkdir(parents=True, exist_ok=True)
        self.root_resolved = self.root.resolve()
        namenode = _TrackingHTTPServer(self, _WebHDFSHandler)
        try:
            datanode = _TrackingHTTPServer(self, _DataNodeHandler)
        except BaseException:
            namenode.server_close()
            raise
        port = namenode.server_address[1]
        self._served = [_Served(namenode, f"testkit-namenode:{port}"),
                        _Served(datanode, f"testkit-datanode:{datanode.server_address[1]}")]
        return self

    @property
    def datanode_port(self) -> int:
        return self._port(1)

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT/webhdfs/v1`` of the name node."""
        return f"http://{LOOPBACK}:{self.port}/webhdfs/v1"

    @property
    def datanode_url(self) -> str:
        """The data node's base URL as redirects advertise it."""
        return f"http://{self.datanode_host}:{self.datanode_port}"

    def filesystem_kwargs(self, **extra: Any) -> dict[str, Any]:
        """Arguments for ``fsspec.filesystem("webhdfs", **kwargs)`` (or ``storage_options``) to reach this server."""
        kwargs: dict[str, Any] = {"host": LOOPBACK, "port": self.port, "user": self.user, "skip_instance_cache": True}
        if self.datanode_host != LOOPBACK:
            kwargs["data_proxy"] = {self.datanode_url: f"http://{LOOPBACK}:{self.datanode_port}"}
        kwargs.update(extra)
        return kwargs

    def filesystem(self, **extra: Any) -> Any:
        """A fresh ``fsspec`` WebHDFS filesystem on this server (needs fsspec and requests)."""
        import fsspec

        return fsspec.filesystem("webhdfs", **self.filesystem_kwargs(**extra))

    def local_path(self, hdfs_path: str) -> Path:
        """Where HDFS ``hdfs_path`` lives on disk, to arrange or inspect files directly."""
        return self._local(hdfs_path)

    # -- the file system behind the protocol (called from handler threads)

    def _local(self, path: str) -> Path:
        local = _inside(self.root_resolved, path)
        if local is None:
            raise _HdfsError(403, "AccessControlException", f"{path} escapes the file system root")
        return local

    def _status(self, local: Path, suffix: str) -> dict[str, Any]:
        st = local.stat()
        is_dir = local.is_dir()
        return {
            "accessTime": int(st.st_atime * 1000),
            "blockSize": 0 if is_dir else 134217728,
            "childrenNum": sum(1 for _ in local.iterdir()) if is_dir else 0,
            "fileId": st.st_ino,
            "group": "supergroup",
            "length": 0 if is_dir else st.st_size,
            "modificationTime": int(st.st_mtime * 1000),
            "owner": self.user,
            "pathSuffix": suffix,
            "permission": f"{st.st_mode & 0o777:o}",
            "replication": 0 if is_dir else 1,
            "storagePolicy": 0,
            "type": "DIRECTORY" if is_dir else "FILE",
        }

    def _summary(self, local: Path) -> dict[str, Any]:
        files = dirs = length = 0
        if local.is_file():
            files, length = 1, local.stat().st_size
        else:
            for _, dirnames, filenames in os.walk(local):
                dirs += len(dirnames)
                files += len(filenames)
            dirs += 1
            length = sum(p.stat().st_size for p in local.rglob("*") if p.is_file())
        return {"directoryCount": dirs, "fileCount": files, "length": length, "quota": -1,
                "spaceConsumed": length, "spaceQuota": -1}

    def _ensure_parent(self, path: str) -> None:
        parent = self._local(posixpath.dirname(posixpath.normpath("/" + path)))
        with self._fs_lock:
            if parent.exists() and not parent.is_dir():
                raise _HdfsError(403, "ParentNotDirectoryException", f"parent of {path} is a file")
            parent.mkdir(parents=True, exist_ok=True)

    def _mkdirs(self, path: str) -> bool:
        local = self._local(path)
        with self._fs_lock:
            for ancestor in [local, *local.parents]:
                inside = ancestor == self.root_resolved or self.root_resolved in ancestor.parents
                if inside and ancestor.exists() and not ancestor.is_dir():
                    raise _HdfsError(403, "ParentNotDirectoryException", f"{ancestor} is not a directory")
            local.mkdir(parents=True, exist_ok=True)
        return True

    def _rename(self, source: str, destination: str) -> bool:
        """HDFS rename: False (not an error) when the source is missing, the target exists or has no parent."""
        src = self._local(source)
        dst = self._local(destination)
        with self._fs_lock:
            if not src.exists() or src.resolve() == self.root_resolved:
                return False
            if dst.is_dir():
                dst = dst / src.name
            if dst.exists() or not dst.parent.is_dir():
                return False
            if src.is_dir() and (dst.resolve() == src.resolve() or src.resolve() in dst.resolve().parents):
                return False
            os.rename(src, dst)
        return True

    def _delete(self, path: str, recursive: bool) -> bool:
        local = self._local(path)
        with self._fs_lock:
            if not local.exists() or local.resolve() == self.root_resolved:
                return False
            if local.is_dir():
                if any(local.iterdir()):
                    if not recursive:
                        raise _HdfsError(403, "PathIsNotEmptyDirectoryException",
                                         f"`{path} is non empty': Directory is not empty")
                    shutil.rmtree(local)
                else:
                    local.rmdir()
            else:
                local.unlink()
        return True


# ----------------------------------------------------------------------------------------------------------------
# S3 (moto's server mode)


UNTRACKED_HEADER = "X-Testkit-Untracked"
"""Requests carrying this header (the helpers' own setup calls) are served but not logged nor faulted."""

S3_ACCESS_KEY = "testing"
S3_SECRET_KEY = "testing"
S3_REGION = "us-east-1"

_S3_ERROR_CODES = {403: "AccessDenied", 404: "NoSuchKey", 500: "InternalError", 503: "SlowDown"}
#: The messages S3 itself sends with those codes (what a client sees: nothing in them names the status).
_S3_ERROR_MESSAGES = {"AccessDenied": "Access Denied", "NoSuchKey": "The specified key does not exist.",
                      "InternalError": "We encountered an internal error. Please try again.",
                      "SlowDown": "Please reduce your request rate.",
                      "ServiceUnavailable": "Service is unable to handle request.",
                      "InvalidRequest": "Invalid Request"}


class _S3Recorder:
    """WSGI middleware in front of moto: logs each request, applies faults, then lets moto answer."""

    def __init__(self, app: Callable[..., Any], owner: S3Server) -> None:
        self.app = app
        self.owner = owner

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("HTTP_" + UNTRACKED_HEADER.upper().replace("-", "_")):
            return self.app(environ, start_response)
        record = self._record(environ)
        fault = self.owner.faults.take(record)
        if fault is not None:
            record.fault = fault.describe()
        self.owner.log.append(record)
        if fault is not None and fault.kind == "delay":
            time.sleep(fault.seconds)
            fault = None
        if fault is not None and fault.kind == "fail":
            return self._fail(record, fault, environ, start_response)

        truncate = fault is not None and fault.kind == "truncate"

        def recording_start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            record.status = int(status.split()[0])
            for name, value in headers:
                if name.lower() == "content-length":
                    record.length = int(value)
            if truncate:
                headers = [*headers, ("Connection", "close")]
            return start_response(status, headers, exc_info)

        body = self.app(environ, recording_start_response)
        if not truncate or environ["REQUEST_METHOD"] == "HEAD":
            return body
        return self._truncated(body, record, fault)  # type: ignore[arg-type]

    @staticmethod
    def _truncated(body: Iterable[bytes], record: LoggedRequest, fault: Fault) -> Iterator[bytes]:
        keep = _truncated_length(fault, record.length or 0)
        sent = 0
        try:
            for chunk in body:
                piece = chunk[: max(0, keep - sent)]
                if piece:
                    yield piece
                    sent += len(piece)
                if sent >= keep:
                    break
        finally:
            close = getattr(body, "close", None)
            if close is not None:
                close()

    def _fail(self, record: LoggedRequest, fault: Fault, environ: dict[str, Any],
              start_response: Callable[..., Any]) -> list[bytes]:
        status = fault.status
        code = _S3_ERROR_CODES.get(status, "ServiceUnavailable" if status >= 500 else "InvalidRequest")
        request_id = secrets.token_hex(8).upper()
        payload = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code><Message>'
                   f"{_S3_ERROR_MESSAGES[code]}</Message><Resource>{html.escape(record.path)}</Resource>"
                   f"<RequestId>{request_id}</RequestId><HostId>{secrets.token_urlsafe(32)}</HostId>"
                   "</Error>").encode()
        body = b"" if environ["REQUEST_METHOD"] == "HEAD" else payload
        record.status = status
        record.length = len(body)
        try:
            reason = HTTPStatus(status).phrase
        except ValueError:
            reason = "Error"
        start_response(f"{status} {reason}", [("Content-Type", "application/xml"),
                                              ("Content-Length", str(len(body))),
                                              ("x-amz-request-id", request_id),
                                              ("X-Testkit-Fault", fault.describe())])
        return [body]

    @staticmethod
    def _record(environ: dict[str, Any]) -> LoggedRequest:
        raw = environ.get("RAW_URI") or environ.get("REQUEST_URI") or environ.get("PATH_INFO", "/")
        parts = urlsplit(raw)
        path = unquote(parts.path)
        query = dict(parse_qsl(environ.get("QUERY_STRING", ""), keep_blank_values=True))
        headers = {k[5:].replace("_", "-").title(): v for k, v in environ.items()
                   if k.startswith("HTTP_") and isinstance(v, str)}
        host = environ.get("HTTP_HOST", "").rsplit(":", 1)[0]
        bucket: str | None
        key: str | None
        if host and not host[0].isdigit() and host not in ("localhost",) and "." in host:
            # virtual-hosted style: bucket.host
            bucket = host.split(".", 1)[0]
            key = path.lstrip("/") or None
        else:
            segments = path.lstrip("/").split("/", 1)
            bucket = segments[0] or None
            key = segments[1] if len(segments) > 1 and segments[1] else None
        return LoggedRequest(role="s3", method=environ["REQUEST_METHOD"], path=path, query=query,
                             range=environ.get("HTTP_RANGE"), headers=headers, bucket=bucket, key=key)


class S3Server(_ServerBase):
    """moto's S3 in server mode on 127.0.0.1, behind a request recorder.

    Equivalent to ``moto.server.ThreadedMotoServer("127.0.0.1", 0)``, but built from its parts (moto's WSGI
    ``DomainDispatcherApplication`` served by werkzeug's threaded server) so a recording middleware can sit in front
    and ``stop()`` is bounded. werkzeug closes the connection after every response, so there are no idle keep-alive
    threads to clean up, and a truncated response ends in EOF, which botocore reports as an incomplete read.

    moto keeps its state in this process's global backends: buckets outlive tests, so each test takes a fresh
    bucket (:meth:`create_bucket`). Do not combine with ``moto.mock_aws`` in the same test.

    Log records have ``role="s3"``, ``bucket`` and ``key`` (None for bucket-level calls such as ListObjectsV2, a GET
    with ``query["list-type"] == "2"``). The helpers' own calls (:meth:`create_bucket`, :meth:`put_object`...) carry
    :data:`UNTRACKED_HEADER` and are neither logged nor faulted.
    """

    role = "s3"

    def __init__(self, region: str = S3_REGION) -> None:
        super().__init__()
        self.region = region
        self._client: Any = None
        self._names = itertools.count()

    def start(self) -> S3Server:
        if self.running:
            return self
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
        from werkzeug.serving import ThreadedWSGIServer

        class QuietHandler(MotoRequestHandler):
            def log_request(self, *args: Any, **kwargs: Any) -> None:
                pass

        class Server(_ConnectionTracking, ThreadedWSGIServer):
            allow_reuse_address = False

            def __init__(self, *args: Any, **kwargs: Any) -> None:
                self._init_tracking()
                super().__init__(*args, **kwargs)

        app = _S3Recorder(DomainDispatcherApplication(create_backend_app), self)
        server = Server(LOOPBACK, 0, app, QuietHandler)
        self._served = [_Served(server, f"testkit-s3:{server.server_address[1]}")]
        try:
            self.client().list_buckets()  # builds moto's S3 app now, so the first test does not pay for it
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        self._client = None
        super().stop()

    @property
    def endpoint_url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def storage_options(self, **extra: Any) -> dict[str, Any]:
        """``storage_options`` for ``fsspec``/``s3fs.S3FileSystem``: this endpoint, test keys, no SSL, honest counts.

        Includes ``skip_instance_cache=True`` and ``use_listings_cache=False`` (see the module docstring); pass
        e.g. ``default_cache_type="none"`` or ``default_block_size=...`` through ``extra``.
        """
        options: dict[str, Any] = {
            "key": S3_ACCESS_KEY,
            "secret": S3_SECRET_KEY,
            "endpoint_url": self.endpoint_url,
            "use_ssl": False,
            "client_kwargs": {"region_name": self.region},
            "config_kwargs": {"s3": {"addressing_style": "path"}},
            "skip_instance_cache": True,
            "use_listings_cache": False,
        }
        options.update(extra)
        return options

    def env(self) -> dict[str, str]:
        """Environment variables that point a subprocess's boto3/s3fs at this server, to merge into ``os.environ``.

        ``AWS_CONFIG_FILE`` and ``AWS_SHARED_CREDENTIALS_FILE`` point at a file that does not exist, so a
        developer's own AWS profile cannot leak in; 127.0.0.1 is added to ``NO_PROXY``.
        """
        missing = os.path.join(os.sep, "nonexistent", "testkit-no-aws-config")
        no_proxy = ",".join(filter(None, [os.environ.get("NO_PROXY", ""), LOOPBACK, "localhost"]))
        return {
            "AWS_ENDPOINT_URL": self.endpoint_url,
            "AWS_ENDPOINT_URL_S3": self.endpoint_url,
            "AWS_ACCESS_KEY_ID": S3_ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": S3_SECRET_KEY,
            "AWS_DEFAULT_REGION": self.region,
            "AWS_REGION": self.region,
            "AWS_CONFIG_FILE": missing,
            "AWS_SHARED_CREDENTIALS_FILE": missing,
            "AWS_EC2_METADATA_DISABLED": "true",
            "NO_PROXY": no_proxy,
            "no_proxy": no_proxy,
        }

    def client(self, *, tracked: bool = False) -> Any:
        """A boto3 S3 client on this server; untracked (not logged, not faulted) unless ``tracked=True``."""
        import boto3
        from botocore.config import Config

        if not tracked and self._client is not None:
            return self._client
        client = boto3.session.Session().client(
            "s3", endpoint_url=self.endpoint_url, region_name=self.region, aws_access_key_id=S3_ACCESS_KEY,
            aws_secret_access_key=S3_SECRET_KEY, use_ssl=False,
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1, "mode": "standard"}))
        if not tracked:
            def mark_untracked(request: Any, **_: Any) -> None:
                request.headers[UNTRACKED_HEADER] = "1"

            client.meta.events.register("before-send.s3", mark_untracked)
            self._client = client
        return client

    def create_bucket(self, name: str | None = None) -> str:
        """Create a bucket (a unique name if none is given) and return its name."""
        self._require_running()
        name = name or f"testkit-{next(self._names)}-{secrets.token_hex(4)}"
        kwargs: dict[str, Any] = {"Bucket": name}
        if self.region != "us-east-1":
            kwargs["CreateBucketConfiguration"] = {"LocationConstraint": self.region}
        self.client().create_bucket(**kwargs)
        return name

    def put_object(self, bucket: str, key: str, data: bytes) -> str:
        """Store ``data`` at ``bucket/key``; returns the fsspec path ``bucket/key``."""
        self.client().put_object(Bucket=bucket, Key=key, Body=data)
        return f"{bucket}/{key}"

    def get_object(self, bucket: str, key: str) -> bytes:
        return self.client().get_object(Bucket=bucket, Key=key)["Body"].read()

    def list_keys(self, bucket: str, prefix: str = "") -> list[str]:
        keys: list[str] = []
        for page in self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            keys.extend(item["Key"] for item in page.get("Contents", []))
        return keys

    def delete_bucket(self, bucket: str) -> None:
        """Delete every object in ``bucket`` and the bucket itself."""
        client = self.client()
        for key in self.list_keys(bucket):
            client.delete_object(Bucket=bucket, Key=key)
        client.delete_bucket(Bucket=bucket)
