"""A fault-injecting HTTP/1.1 proxy on 127.0.0.1, between a real client and one of :mod:`testkit.servers`.

The servers' own :class:`~testkit.servers.FaultPlan` answers badly *from inside the server*; real networks fail
between the two: a load balancer answers 503 without asking the back end, a connection is reset half way through a
body, a head arrives cut short, a link is slow or stalls for ten seconds. :class:`FaultProxy` does those things to
real traffic at the HTTP level (it parses request and response heads and relays bodies as raw bytes), so a real
client (s3fs/aiobotocore on aiohttp, fsspec's HTTP file system on aiohttp, fsspec's WebHDFS on requests) meets
them as it would in the field.

Faults (:class:`ProxyFault`, ``kind``):

- ``status``: answer with a 5xx (503 by default) instead of forwarding, with the body the upstream kind sends (S3:
  an XML ``<Error><Code>SlowDown</Code>`` or ``InternalError`` document; WebHDFS: a JSON ``RemoteException``; HTTP:
  a small HTML page). The connection stays open (as S3 keeps it), unless the client sent ``Expect: 100-continue``
  and so never sent its body: then it is closed after the answer.
- ``reset``: forward the head and ``after`` body bytes, then reset the connection (``SO_LINGER`` 0, close: RST);
  ``after=None``: reset before any byte of the response.
- ``truncate``: forward the head (full Content-Length) and only ``after`` body bytes (default half), then close
  cleanly (FIN).
- ``cut_head``: send only the start of the response head, then FIN: ``after`` bytes of it, or up to header
  ``header`` (its line not sent), or ``value_chars`` characters into its value, or up to ``value_before`` inside its
  value. http.client (requests) takes EOF in the head for its end, so a WebHDFS 307 arrives with a short or no
  ``Location``.
- ``stall``: hold the response ``seconds`` (at most :data:`~testkit.servers.MAX_DELAY`) before the head
  (``after=None``) or after ``after`` body bytes, then go on normally.

For a response without body bytes (HEAD, 204, 304, Content-Length 0), ``reset`` and ``truncate`` act before the
head (RST, or FIN, with no response at all), and a mid-body stall holds the head.

Every fault is armed either deterministically (:class:`ProxyFaultPlan`, ``proxy.faults``: "the next N matching
requests", or every one with ``n=None``) or at random from a seeded :class:`FaultProfile` (``proxy.use_profile``,
named presets in :data:`PROFILES`). Both filter requests by the fields of :class:`ProxiedRequest`.

Every request is recorded in ``proxy.log`` (a :class:`ProxyLog`) when its head has been read, before anything is
forwarded, so once a client call has returned its requests are in the log; ``status``, ``sent`` and the rest are
filled in as the answer goes out.

Connections: HTTP/1.1 keep-alive towards the client (the proxy keeps the client's connection even when the upstream
closes after each response, as werkzeug behind moto does, and reconnects upstream), one upstream connection per
client connection, request bodies by Content-Length or chunked, response bodies by Content-Length, chunked or
close. ``Expect: 100-continue`` is answered by the proxy itself (``100 Continue`` at once, the ``Expect`` header not
forwarded), so an upload costs no client-side wait. The whole request body is read before it is forwarded (test
bodies are small), which is what lets a request be re-sent once on a fresh upstream connection if the reused one
turns out to be closed. A faulted connection is closed.

Builders: :class:`S3Proxy`, :class:`HTTPProxy` and :class:`WebHDFSProxy` (a name node proxy and a data node proxy,
the 307 ``Location`` rewritten from the data node to its proxy, so both legs see faults); fixtures ``s3_proxy``,
``http_proxy`` and ``webhdfs_proxy`` in :mod:`testkit.fixtures`.

What the clients make of each fault (s3fs 2026.9 / aiobotocore 3.10 / aiohttp 3.14, boto3 1.43 / urllib3 2.8,
fsspec WebHDFS on requests 2.34, retries off; ``tests/testkit_tests/test_proxy.py`` pins these down):

- 5xx: s3fs ``OSError`` (``__cause__`` botocore ``ClientError``; SlowDown is errno EBUSY); boto3 ``ClientError``;
  fsspec HTTP ``aiohttp.ClientResponseError``; WebHDFS name node 503 ``requests.HTTPError``, 500 ``RuntimeError``
  (fsspec maps a 500 RemoteException so); a data node error of any status: *no error*, its body comes back as
  file bytes.
- reset mid-body: aiohttp ``ClientPayloadError`` (s3fs and fsspec HTTP alike: s3fs reads bodies outside botocore);
  boto3 ``ResponseStreamingError``; requests ``ChunkedEncodingError`` (wrapping ``ConnectionResetError``).
- truncated body: as a reset mid-body (aiohttp ``ClientPayloadError``/``ContentLengthError``, boto3
  ``ResponseStreamingError``, requests ``ChunkedEncodingError``, wrapping ``IncompleteRead``).
- reset before the head: aiohttp re-sends an idempotent request once by itself (so one such fault goes unseen),
  then ``ClientOSError``, which s3fs reports as botocore ``EndpointConnectionError``; boto3
  ``ConnectionClosedError``; requests ``ConnectionError("Connection aborted.")``.
- cut head: aiohttp (re-sent once, then) ``ServerDisconnectedError``, botocore ``ConnectionClosedError`` in s3fs;
  http.client takes EOF for the end of the head, so boto3 and requests raise only when the status line is cut
  (``BadStatusLine``); a head cut before ``Content-Length`` gives them an empty body and *no error*, and a WebHDFS
  307 cut before ``Location`` makes fsspec return the redirect's empty body, cut inside it (Hadoop puts ``offset``
  last) makes the data node serve from offset 0.
- stall past the read timeout: s3fs botocore ``ReadTimeoutError`` before the head, ``FSTimeoutError`` mid-body;
  boto3 ``ReadTimeoutError``; fsspec HTTP ``FSTimeoutError``; requests ``ReadTimeout`` before the head but
  ``ConnectionError`` mid-body. fsspec's WebHDFS sets no timeout at all.
"""

from __future__ import annotations

import contextlib
import dataclasses
import email.utils
import hashlib
import html
import itertools
import json
import random
import secrets
import socket
import struct
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from testkit.servers import (
    _RANGE_RE,
    _S3_ERROR_CODES,
    _S3_ERROR_MESSAGES,
    LOOPBACK,
    MAX_DELAY,
    S3_ACCESS_KEY,
    S3_SECRET_KEY,
    STOP_TIMEOUT,
    HTTPServer,
    RequestLog,
    S3Server,
    WebHDFSServer,
)

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]

#: Linux's SIOCOUTQNSD: bytes written to a socket and not sent yet, which an RST would discard (what was sent over
#: loopback is already in the peer's receive queue; SIOCOUTQ would also count bytes merely waiting for a delayed ACK)
_OUTQ_NOT_SENT = 0x894B if sys.platform.startswith("linux") else None

KINDS = ("s3", "http", "webhdfs")
"""The upstream kinds a proxy knows how to imitate in its error answers."""

FAULT_KINDS = ("status", "reset", "truncate", "cut_head", "stall")

IO_TIMEOUT = 30.0
"""Seconds any one socket read or write may block (an idle keep-alive client connection is dropped after it)."""

CONNECT_TIMEOUT = 10.0
"""Seconds to connect to the upstream server."""

HEAD_LIMIT = 64 * 1024
"""Largest request or response head accepted."""

BODY_LIMIT = 1 << 30
"""Largest request body relayed (it is held in memory)."""

DRAIN_TIMEOUT = 2.0
"""Seconds a reset waits for the bytes already written to reach the client before the RST discards the rest."""

_PIECE = 64 * 1024
_WEBHDFS_PREFIX = "/webhdfs/v1"
#: query parameters that differ from run to run, left out of a request's identity for a profile's draws
_VOLATILE_QUERY = frozenset({"uploadid", "namenoderpcaddress", "x-amz-date", "x-amz-signature", "x-amz-credential",
                             "x-amz-security-token", "x-amz-expires"})
_READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class _ProtocolError(Exception):
    """Malformed HTTP from either side."""


class _Truncated(Exception):
    """EOF before a message was complete."""


class _Stopping(Exception):
    """``stop()`` was called while a connection waited."""


# ----------------------------------------------------------------------------------------------------------------
# the log


@dataclass
class ProxiedRequest:
    """One request as the proxy handled it.

    ``path`` is the percent-decoded URL path without the query, as the servers log it (for WebHDFS without the
    ``/webhdfs/v1`` prefix). ``role`` is the proxy's role (``"s3"``, ``"http"``, ``"namenode"``, ``"datanode"``);
    ``connection`` numbers the client connections of a proxy and ``sequence`` the requests on one (keep-alive shows
    as several sequences on a connection). ``status`` is the status line the client was sent (None if none reached
    it: a reset or a cut before the status line), ``upstream_status`` what the upstream answered (None if the
    request was not forwarded), ``length`` the response's Content-Length, ``sent`` the body bytes handed to the
    client's socket, ``delay`` the seconds of latency and stall added. ``fault`` is the kind of the injected fault
    (see :data:`FAULT_KINDS`) and ``detail`` says exactly what was done; ``error`` notes trouble the proxy met
    (upstream unreachable, client gone).
    """

    role: str
    method: str
    path: str
    query: dict[str, str] = field(default_factory=dict)
    range: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    op: str | None = None
    bucket: str | None = None
    key: str | None = None
    connection: int = 0
    sequence: int = 0
    status: int | None = None
    upstream_status: int | None = None
    length: int | None = None
    sent: int = 0
    fault: str | None = None
    detail: str | None = None
    delay: float = 0.0
    error: str | None = None
    time: float = field(default_factory=time.monotonic)

    @property
    def has_range(self) -> bool:
        return self.range is not None

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

    @property
    def access(self) -> str:
        """``"read"`` (GET, HEAD) or ``"write"`` (PUT, POST, DELETE: uploads, renames, deletes)."""
        return "read" if self.method in _READ_METHODS else "write"


_FIELDS = frozenset(f.name for f in dataclasses.fields(ProxiedRequest))
_DERIVED = frozenset({"has_range", "byte_range", "access"})
_SPECIAL = frozenset({"path_contains", "match"})
_RESPONSE_FIELDS = frozenset({"status", "upstream_status", "length", "sent", "fault", "detail", "delay", "error",
                              "time"})
_LOG_CRITERIA = _FIELDS | _DERIVED | _SPECIAL
_FAULT_CRITERIA = _LOG_CRITERIA - _RESPONSE_FIELDS


def _check_criteria(where: Mapping[str, Any], allowed: frozenset[str]) -> None:
    """A misspelt criterion must fail loudly in the test, not silently match nothing."""
    unknown = set(where) - allowed
    if unknown:
        extra = ""
        if unknown & _RESPONSE_FIELDS:
            extra = " (a fault is chosen before the response exists: only request fields can select it)"
        raise TypeError(f"unknown request field(s) {sorted(unknown)}{extra}; known: {sorted(allowed)}")


def _matches(record: ProxiedRequest, where: Mapping[str, Any]) -> bool:
    for name, wanted in where.items():
        if name == "path_contains":
            if wanted not in record.path:
                return False
            continue
        if name == "match":
            if not wanted(record):
                return False
            continue
        actual = getattr(record, name)
        if callable(wanted):
            if not wanted(actual):
                return False
        elif actual != wanted:
            return False
    return True


class ProxyLog(RequestLog):
    """Thread-safe list of :class:`ProxiedRequest` (one proxy's, or a :class:`WebHDFSProxy` pair's).

    Filter as :class:`~testkit.servers.RequestLog` does, on any field of :class:`ProxiedRequest` plus
    ``has_range``, ``access`` (``"read"``/``"write"``), ``path_contains`` (a substring of ``path``) and ``match``
    (a predicate on the whole record)::

        proxy.log.count(fault="reset")
        proxy.log.filter(method="GET", path_contains="x.rec", status=lambda s: s and s >= 500)
    """

    def filter(self, **where: Any) -> list[ProxiedRequest]:  # type: ignore[override]
        _check_criteria(where, _LOG_CRITERIA)
        return [r for r in self.records if _matches(r, where)]  # type: ignore[arg-type]

    def since(self, mark: int, **where: Any) -> list[ProxiedRequest]:  # type: ignore[override]
        _check_criteria(where, _LOG_CRITERIA)
        return [r for r in self.records[mark:] if _matches(r, where)]  # type: ignore[arg-type]

    def faults(self) -> list[str | None]:
        """The ``fault`` of every request in order (None for a clean one): what a profile did, to compare runs."""
        return [r.fault for r in self.records]  # type: ignore[attr-defined]

    def summary(self) -> str:
        lines = []
        for r in self.records:
            assert isinstance(r, ProxiedRequest)
            extra = f" range={r.range}" if r.range else ""
            extra += f" op={r.op}" if r.op else ""
            extra += f" fault={r.detail}" if r.fault else ""
            extra += f" error={r.error}" if r.error else ""
            lines.append(f"{r.role}#{r.connection}.{r.sequence} {r.method} {r.path} -> {r.status}"
                         f" (upstream {r.upstream_status}, {r.sent} B){extra}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<ProxyLog {len(self)} requests>"


# ----------------------------------------------------------------------------------------------------------------
# faults


@dataclass(frozen=True)
class ProxyFault:
    """What to do to one response; see the module docstring for each ``kind``.

    Positions: ``after`` counts body bytes (``reset``, ``truncate``, ``stall``) or head bytes (``cut_head``);
    ``fraction`` (in [0, 1)) gives the position as a share of the body (or head) instead, which is how profiles
    place theirs. A position is clipped so the fault always bites: at most one byte short of the whole body.
    """

    kind: str
    status: int = 503
    code: str | None = None
    after: int | None = None
    fraction: float | None = None
    header: str | None = None
    value_chars: int | None = None
    value_before: str | None = None
    seconds: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {self.kind!r}; known: {FAULT_KINDS}")
        if self.kind == "status" and not 400 <= self.status <= 599:
            raise ValueError(f"an injected answer needs a 4xx or 5xx status, got {self.status}")
        if not 0 <= self.seconds <= MAX_DELAY:
            raise ValueError(f"a stall must be within [0, {MAX_DELAY}] s, got {self.seconds}")
        if self.after is not None and self.after < 0:
            raise ValueError(f"after must be >= 0, got {self.after}")
        if self.fraction is not None and not 0 <= self.fraction < 1:
            raise ValueError(f"fraction must be in [0, 1), got {self.fraction}")
        if self.kind == "cut_head" and self.header is None and (self.value_chars, self.value_before) != (None, None):
            raise ValueError("value_chars and value_before cut inside a header: name it with header=")
        if self.value_chars is not None and self.value_before is not None:
            raise ValueError("give value_chars or value_before, not both")

    def describe(self) -> str:
        if self.kind == "status":
            return f"status:{self.status}" + (f":{self.code}" if self.code else "")
        where = self._where()
        if self.kind == "stall":
            return f"stall:{self.seconds:g}s@{where}"
        return f"{self.kind}@{where}"

    def _where(self) -> str:
        if self.kind == "cut_head" and self.header is not None:
            if self.value_chars is not None:
                return f"{self.header}+{self.value_chars}"
            if self.value_before is not None:
                return f"{self.header}<{self.value_before!r}"
            return f"before-{self.header}"
        if self.fraction is not None:
            return f"{self.fraction:.3f}"
        if self.after is None:
            return "half" if self.kind in ("truncate", "cut_head") else "head"
        return str(self.after)


@dataclass
class _Armed:
    fault: ProxyFault
    remaining: int | None  # None: until clear()
    where: dict[str, Any]


class ProxyFaultPlan:
    """Deterministic faults, first armed first served: "the next ``n`` matching requests get fault F".

    ``n=None`` arms a fault for every matching request until :meth:`clear`. Criteria are request fields of
    :class:`ProxiedRequest` (``method="GET"``, ``key="x.rec"``, ``op="OPEN"``, ``role="datanode"``,
    ``has_range=True``, ``access="read"``, ``path_contains="x.rec"``, ``match=lambda r: ...``). A request consumes
    at most one fault; a plan's fault wins over a profile's.

    Mind client retries: botocore retries 5xx and connection errors (up to 5 times in its legacy mode, s3fs's
    default), s3fs also retries payload errors, fsspec HTTP and WebHDFS do not retry at all.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._armed: list[_Armed] = []

    def arm(self, fault: ProxyFault, n: int | None = 1, **where: Any) -> None:
        _check_criteria(where, _FAULT_CRITERIA)
        if n is not None and n < 1:
            raise ValueError(f"a fault must apply to at least one request, got n={n}")
        with self._lock:
            self._armed.append(_Armed(fault, n, where))

    def fail_next(self, n: int | None = 1, status: int = 503, *, code: str | None = None, **where: Any) -> None:
        """Answer the next ``n`` matching requests with ``status`` (not forwarded); ``code`` overrides S3's code."""
        self.arm(ProxyFault("status", status=status, code=code), n, **where)

    def fail_always(self, status: int = 503, *, code: str | None = None, **where: Any) -> None:
        """Answer every matching request with ``status`` until :meth:`clear` (a 5xx storm, or a per-path 404)."""
        self.fail_next(None, status, code=code, **where)

    def reset_next(self, n: int | None = 1, *, after: int | None = 0, **where: Any) -> None:
        """Forward the head and ``after`` body bytes, then RST; ``after=None``: RST before the response."""
        self.arm(ProxyFault("reset", after=after), n, **where)

    def truncate_next(self, n: int | None = 1, *, keep: int | None = None, **where: Any) -> None:
        """Forward the head and ``keep`` body bytes (default half), then FIN, the Content-Length unchanged."""
        self.arm(ProxyFault("truncate", after=keep), n, **where)

    def cut_head_next(self, n: int | None = 1, *, keep: int | None = None, header: str | None = None,
                      value_chars: int | None = None, value_before: str | None = None, **where: Any) -> None:
        """Send only the start of the response head, then FIN; no body.

        ``keep``: that many bytes of the head. ``header`` alone: everything before that header's line (if the
        response has no such header, everything but the final blank line). With ``value_chars``: that many
        characters into its value; with ``value_before``: its value up to that substring (the whole value, line end
        left off, if the substring is absent). With neither ``keep`` nor ``header``: half the head.
        """
        if keep is not None and header is not None:
            raise ValueError("give keep or header, not both")
        self.arm(ProxyFault("cut_head", after=keep, header=header, value_chars=value_chars,
                            value_before=value_before), n, **where)

    def stall_next(self, n: int | None = 1, seconds: float = 1.0, *, after: int | None = None,
                   **where: Any) -> None:
        """Hold the response ``seconds``: before the head (``after=None``) or after ``after`` body bytes."""
        self.arm(ProxyFault("stall", seconds=seconds, after=after), n, **where)

    def delay_next(self, n: int | None = 1, seconds: float = 0.5, **where: Any) -> None:
        """:class:`~testkit.servers.FaultPlan`'s name for a stall before the head."""
        self.stall_next(n, seconds, **where)

    def clear(self) -> None:
        with self._lock:
            self._armed.clear()

    @property
    def pending(self) -> list[tuple[ProxyFault, int | None]]:
        """``(fault, remaining)`` still armed; ``remaining`` None for one armed until :meth:`clear`."""
        with self._lock:
            return [(a.fault, a.remaining) for a in self._armed]

    def take(self, record: ProxiedRequest) -> ProxyFault | None:
        """The fault for ``record`` (consuming one use of it), or None. Called by the proxies."""
        with self._lock:
            for armed in self._armed:
                if _matches(record, armed.where):
                    if armed.remaining is not None:
                        armed.remaining -= 1
                        if armed.remaining == 0:
                            self._armed.remove(armed)
                    return armed.fault
        return None


@dataclass(frozen=True)
class FaultProfile:
    """Random faults at per-request probabilities, reproducible for a seed (see :meth:`FaultProxy.use_profile`).

    Each request covered draws at most one fault: an answer with one of ``statuses`` (``p_5xx``), a reset
    (``p_reset``), a truncated body (``p_truncate``), a cut head (``p_cut_head``) or a stall of ``stall_seconds``
    (one in ``stall_every`` requests on average; ``stall_at`` ``"head"``, ``"body"`` or ``"either"``). The position
    of a reset, truncation, cut or mid-body stall is drawn too. ``latency`` (seconds) is added before every covered
    response and ``bandwidth`` (bytes/s, shared by all connections of the proxy) caps covered response bodies.
    ``only="read"`` or ``"write"`` limits the profile to GET/HEAD or to PUT/POST/DELETE requests.

    ``PROFILES["transient_mix"].replace(stall_seconds=0.2)`` keeps a soak run within seconds.
    """

    p_5xx: float = 0.0
    statuses: tuple[int, ...] = (503,)
    p_reset: float = 0.0
    p_truncate: float = 0.0
    p_cut_head: float = 0.0
    stall_every: int | None = None
    stall_seconds: float = 10.0
    stall_at: str = "head"
    latency: float = 0.0
    bandwidth: int | None = None
    only: str | None = None

    def __post_init__(self) -> None:
        for name in ("p_5xx", "p_reset", "p_truncate", "p_cut_head"):
            if not 0 <= getattr(self, name) <= 1:
                raise ValueError(f"{name} must be a probability, got {getattr(self, name)}")
        if self.stall_every is not None and self.stall_every < 1:
            raise ValueError(f"stall_every must be >= 1, got {self.stall_every}")
        if self._total() > 1 + 1e-9:
            raise ValueError(f"the fault probabilities add up to {self._total():.3f} > 1")
        if not self.statuses or any(not 400 <= s <= 599 for s in self.statuses):
            raise ValueError(f"statuses must be 4xx/5xx codes, got {self.statuses}")
        if not 0 <= self.stall_seconds <= MAX_DELAY:
            raise ValueError(f"stall_seconds must be within [0, {MAX_DELAY}], got {self.stall_seconds}")
        if not 0 <= self.latency <= MAX_DELAY:
            raise ValueError(f"latency must be within [0, {MAX_DELAY}], got {self.latency}")
        if self.stall_at not in ("head", "body", "either"):
            raise ValueError(f"stall_at must be 'head', 'body' or 'either', got {self.stall_at!r}")
        if self.only not in (None, "read", "write"):
            raise ValueError(f"only must be None, 'read' or 'write', got {self.only!r}")
        if self.bandwidth is not None and self.bandwidth <= 0:
            raise ValueError(f"bandwidth must be > 0 bytes/s, got {self.bandwidth}")

    def _total(self) -> float:
        return self.p_5xx + self.p_reset + self.p_truncate + self.p_cut_head + self._p_stall()

    def _p_stall(self) -> float:
        return 1.0 / self.stall_every if self.stall_every else 0.0

    def replace(self, **changes: Any) -> FaultProfile:
        return dataclasses.replace(self, **changes)

    def covers(self, record: ProxiedRequest) -> bool:
        return self.only is None or record.access == self.only

    def draw(self, rng: random.Random) -> ProxyFault | None:
        """One request's fault. Always takes the same four draws from ``rng``, so sequences stay aligned."""
        u, position, pick, place = rng.random(), rng.random(), rng.random(), rng.random()
        edge = 0.0
        kind = None
        for name, p in (("status", self.p_5xx), ("reset", self.p_reset), ("truncate", self.p_truncate),
                        ("cut_head", self.p_cut_head), ("stall", self._p_stall())):
            edge += p
            if u < edge:
                kind = name
                break
        if kind is None:
            return None
        if kind == "status":
            return ProxyFault("status", status=self.statuses[int(pick * len(self.statuses))])
        if kind == "stall":
            at_head = self.stall_at == "head" or (self.stall_at == "either" and place < 0.5)
            return ProxyFault("stall", seconds=self.stall_seconds, fraction=None if at_head else position)
        return ProxyFault(kind, fraction=position)


PROFILES: dict[str, FaultProfile] = {
    "clean": FaultProfile(),
    "latency": FaultProfile(latency=0.05),
    "slow_link": FaultProfile(latency=0.02, bandwidth=4 << 20),
    "storm_5xx": FaultProfile(p_5xx=0.5, statuses=(503,)),
    "resets": FaultProfile(p_reset=0.2),
    "truncations": FaultProfile(p_truncate=0.2),
    "cut_heads": FaultProfile(p_cut_head=0.2),
    "stalls": FaultProfile(stall_every=10, stall_seconds=2.0, stall_at="either"),
    "transient_mix": FaultProfile(p_5xx=0.2, statuses=(503, 500), p_reset=0.05, p_truncate=0.05, stall_every=50,
                                  stall_seconds=10.0),
}
"""Named profiles. ``clean``: nothing. ``latency``: 50 ms before each response. ``slow_link``: 20 ms and 4 MiB/s.
``storm_5xx``: half the requests answered 503. ``resets``/``truncations``/``cut_heads``: 20 % of responses reset,
truncated or cut in the head, at a random place. ``stalls``: one request in 10 held 2 s, before the head or mid-body.
``transient_mix``: 20 % answered 503 or 500, 5 % reset, 5 % truncated, a 10 s stall in 50 requests (before the
head). Adjust with ``.replace(...)`` or ``use_profile(name, **changes)``."""


def _signature(record: ProxiedRequest) -> str:
    """A request's identity for a profile's draws: what it asks for, not when, nor on which run."""
    query = sorted((k, v) for k, v in record.query.items() if k.lower() not in _VOLATILE_QUERY)
    return json.dumps([record.role, record.method, record.path, record.op, record.range, query])


class _ProfileRun:
    """A profile in use: its seed, its criteria, how often each request has been seen, its bandwidth bucket."""

    def __init__(self, profile: FaultProfile, seed: int, where: Mapping[str, Any], stopping: threading.Event) -> None:
        _check_criteria(where, _FAULT_CRITERIA)
        self.profile = profile
        self.seed = seed
        self.where = dict(where)
        self._lock = threading.Lock()
        self._seen: dict[str, int] = {}
        self.bucket = _TokenBucket(profile.bandwidth, stopping) if profile.bandwidth else None

    def covers(self, record: ProxiedRequest) -> bool:
        return self.profile.covers(record) and _matches(record, self.where)

    def decide(self, record: ProxiedRequest) -> ProxyFault | None:
        """The fault for ``record``: drawn from the seed, the request's signature and how often it was seen.

        Keying the draws by request rather than by arrival order keeps a run reproducible when a client sends
        requests concurrently (s3fs and fsspec HTTP gather reads): the same requests get the same faults
        whatever order they arrive in, and a retry (the same request again) draws afresh.
        """
        signature = _signature(record)
        with self._lock:
            occurrence = self._seen.get(signature, 0)
            self._seen[signature] = occurrence + 1
        digest = hashlib.blake2b(f"{self.seed}\0{signature}\0{occurrence}".encode(), digest_size=8).digest()
        return self.profile.draw(random.Random(int.from_bytes(digest, "big")))


# ----------------------------------------------------------------------------------------------------------------
# wire helpers


class _TokenBucket:
    """Bytes per second, shared by whoever holds the bucket; starts empty, so a cap holds from the first byte.

    Tokens may go negative: each sender takes what it needs and sleeps off its own debt, so several connections
    sharing a bucket get the rate between them.
    """

    BURST = 0.05  # seconds of credit that may build up while idle

    def __init__(self, rate: float, stopping: threading.Event) -> None:
        if rate <= 0:
            raise ValueError(f"bandwidth must be > 0 bytes/s, got {rate}")
        self.rate = float(rate)
        self.capacity = max(1024.0, self.rate * self.BURST)
        self.piece = int(min(_PIECE, max(1024.0, self.rate / 50)))
        self._tokens = 0.0
        self._stamp = time.monotonic()
        self._lock = threading.Lock()
        self._stopping = stopping

    def consume(self, n: int) -> None:
        with self._lock:
            now = time.monotonic()
            self._tokens = min(self.capacity, self._tokens + (now - self._stamp) * self.rate) - n
            self._stamp = now
            debt = -self._tokens
        if debt > 0 and self._stopping.wait(debt / self.rate):
            raise _Stopping


class _Stream:
    """A socket with a read buffer: heads, lines and pieces, each read bounded by the socket's timeout."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._buf = bytearray()

    def _fill(self) -> bool:
        data = self.sock.recv(_PIECE)
        if not data:
            return False
        self._buf += data
        return True

    def read_head(self) -> bytes | None:
        """A message head up to and including its blank line; None on EOF before its first byte."""
        while True:
            while self._buf[:2] == b"\r\n":  # RFC 9112: ignore empty lines before a request line
                del self._buf[:2]
            end = self._buf.find(b"\r\n\r\n")
            if end >= 0:
                head = bytes(self._buf[:end + 4])
                del self._buf[:end + 4]
                return head
            if len(self._buf) > HEAD_LIMIT:
                raise _ProtocolError(f"head larger than {HEAD_LIMIT} bytes")
            if not self._fill():
                if self._buf:
                    raise _Truncated(f"EOF after {len(self._buf)} bytes of a head")
                return None

    def read_line(self) -> bytes:
        """One line with its line end; b"" on EOF."""
        while True:
            end = self._buf.find(b"\n")
            if end >= 0:
                line = bytes(self._buf[:end + 1])
                del self._buf[:end + 1]
                return line
            if len(self._buf) > HEAD_LIMIT:
                raise _ProtocolError("line too long")
            if not self._fill():
                line = bytes(self._buf)
                self._buf.clear()
                return line

    def read_some(self, limit: int) -> bytes:
        """Up to ``limit`` bytes (at least one); b"" on EOF."""
        if not self._buf and not self._fill():
            return b""
        piece = bytes(self._buf[:limit])
        del self._buf[:limit]
        return piece


@dataclass
class _Head:
    """A request or response head: its first line and its header lines in order, names as sent."""

    start: str
    headers: list[tuple[str, str]]

    @classmethod
    def parse(cls, raw: bytes) -> _Head:
        lines = raw.decode("latin-1").split("\r\n")
        headers: list[tuple[str, str]] = []
        for line in lines[1:]:
            if not line:
                continue
            if line[0] in " \t" and headers:  # obsolete line folding
                name, value = headers[-1]
                headers[-1] = (name, f"{value} {line.strip()}")
                continue
            name, sep, value = line.partition(":")
            if not sep or not name.strip():
                raise _ProtocolError(f"bad header line {line[:80]!r}")
            headers.append((name.strip(), value.strip()))
        return cls(lines[0], headers)

    def get(self, name: str) -> str | None:
        lowered = name.lower()
        for key, value in self.headers:
            if key.lower() == lowered:
                return value
        return None

    def remove(self, name: str) -> None:
        lowered = name.lower()
        self.headers = [(k, v) for k, v in self.headers if k.lower() != lowered]

    def replace(self, name: str, transform: Callable[[str], str]) -> None:
        lowered = name.lower()
        self.headers = [(k, transform(v) if k.lower() == lowered else v) for k, v in self.headers]

    def tokens(self, name: str) -> set[str]:
        """The comma-separated tokens of every ``name`` header, lower-cased (``Connection``, ``Transfer-Encoding``)."""
        lowered = name.lower()
        return {t.strip().lower() for k, v in self.headers if k.lower() == lowered for t in v.split(",")}

    def render(self) -> bytes:
        return (self.start + "\r\n" + "".join(f"{k}: {v}\r\n" for k, v in self.headers) + "\r\n").encode("latin-1")


def _content_length(head: _Head) -> int | None:
    value = head.get("Content-Length")
    if value is None:
        return None
    try:
        length = int(value)
    except ValueError:
        raise _ProtocolError(f"bad Content-Length {value!r}") from None
    if length < 0:
        raise _ProtocolError(f"negative Content-Length {length}")
    return length


def _request_framing(head: _Head) -> tuple[str, int]:
    if "chunked" in head.tokens("Transfer-Encoding"):
        return ("chunked", 0)
    length = _content_length(head) or 0
    return ("length", length) if length else ("none", 0)


def _response_framing(method: str, status: int, head: _Head) -> tuple[str, int]:
    """RFC 9112 section 6.3: how the body of this response ends."""
    if method == "HEAD" or 100 <= status < 200 or status in (204, 304):
        return ("none", 0)
    if "chunked" in head.tokens("Transfer-Encoding"):
        return ("chunked", 0)
    length = _content_length(head)
    if length is None:
        return ("close", 0)
    return ("length", length) if length else ("none", 0)


def _pieces(stream: _Stream, framing: str, length: int) -> Iterator[bytes]:
    """A message body as raw wire bytes (chunk lines included), in pieces of at most 64 KiB."""
    if framing == "length":
        left = length
        while left:
            piece = stream.read_some(min(left, _PIECE))
            if not piece:
                raise _Truncated(f"EOF with {left} of {length} body bytes missing")
            left -= len(piece)
            yield piece
    elif framing == "chunked":
        while True:
            line = stream.read_line()
            if not line.endswith(b"\n"):
                raise _Truncated("EOF inside a chunked body")
            try:
                size = int(line.split(b";")[0].strip() or b"x", 16)
            except ValueError:
                raise _ProtocolError(f"bad chunk size line {line[:40]!r}") from None
            yield line
            if size == 0:
                while True:
                    trailer = stream.read_line()
                    if not trailer.endswith(b"\n"):
                        raise _Truncated("EOF inside a chunked body's trailers")
                    yield trailer
                    if trailer in (b"\r\n", b"\n"):
                        return
            left = size + 2  # the data and its CRLF
            while left:
                piece = stream.read_some(min(left, _PIECE))
                if not piece:
                    raise _Truncated("EOF inside a chunk")
                left -= len(piece)
                yield piece
    elif framing == "close":
        while piece := stream.read_some(_PIECE):
            yield piece


def _wants_close(head: _Head, version: str) -> bool:
    connection = head.tokens("Connection")
    if "close" in connection:
        return True
    return version.upper() == "HTTP/1.0" and "keep-alive" not in connection


def _reset(sock: socket.socket) -> None:
    """Close with an RST, after the bytes already written have left (a reset discards unsent ones)."""
    if fcntl is not None and _OUTQ_NOT_SENT is not None:
        deadline = time.monotonic() + DRAIN_TIMEOUT
        with contextlib.suppress(OSError):
            while time.monotonic() < deadline:
                pending = struct.unpack("i", fcntl.ioctl(sock.fileno(), _OUTQ_NOT_SENT, b"\0\0\0\0"))[0]
                if pending <= 0:
                    break
                time.sleep(0.002)
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.close()


def _finish(sock: socket.socket) -> None:
    """Close cleanly (FIN)."""
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_WR)
    with contextlib.suppress(OSError):
        sock.close()


def _clip(position: int, total: int) -> int:
    return max(0, min(position, total - 1))


# ----------------------------------------------------------------------------------------------------------------
# error bodies in each upstream's own format


def _error_body(kind: str, status: int, code: str | None,
                record: ProxiedRequest) -> tuple[bytes, list[tuple[str, str]]]:
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = "Error"
    if kind == "s3":
        code = code or _S3_ERROR_CODES.get(status) or ("ServiceUnavailable" if status >= 500 else "InvalidRequest")
        message = _S3_ERROR_MESSAGES.get(code, phrase)
        request_id = secrets.token_hex(8).upper()
        host_id = secrets.token_urlsafe(48)
        body = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{html.escape(code)}</Code><Message>'
                f"{html.escape(message)}</Message><Resource>{html.escape(record.path)}</Resource>"
                f"<RequestId>{request_id}</RequestId><HostId>{host_id}</HostId></Error>").encode()
        return body, [("x-amz-request-id", request_id), ("x-amz-id-2", host_id), ("Content-Type", "application/xml"),
                      ("Server", "AmazonS3")]
    if kind == "webhdfs":
        exception, package = {503: ("RetriableException", "org.apache.hadoop.ipc")}.get(
            status, (code or "IOException", "java.io"))
        message = f"{phrase}: the name node is busy, try again" if status == 503 else phrase
        body = json.dumps({"RemoteException": {"exception": exception, "javaClassName": f"{package}.{exception}",
                                               "message": message}}).encode()
        return body, [("Cache-Control", "no-cache"), ("Content-Type", "application/json;charset=utf-8")]
    body = (f"<html>\r\n<head><title>{status} {phrase}</title></head>\r\n<body>\r\n<center><h1>{status} {phrase}"
            "</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n").encode()
    return body, [("Server", "nginx"), ("Content-Type", "text/html")]


# ----------------------------------------------------------------------------------------------------------------
# the proxy


class FaultProxy:
    """An HTTP/1.1 proxy on 127.0.0.1 (port 0) in front of ``upstream`` (``"http://127.0.0.1:PORT"``).

    ``kind`` (``"s3"``, ``"http"`` or ``"webhdfs"``) says what the upstream is, so injected answers look like its
    own and log records get ``bucket``/``key`` (S3) or ``op`` and a prefix-less ``path`` (WebHDFS); ``role`` names
    the proxy in its log records (default: ``kind``; ``"namenode"``/``"datanode"`` in a :class:`WebHDFSProxy`).

    Knobs, all changeable while it runs: ``faults`` (a :class:`ProxyFaultPlan`), :meth:`use_profile`, ``latency``
    (seconds before every response, or a function of the :class:`ProxiedRequest` returning them), ``bandwidth``
    (bytes/s for response bodies, None for no cap; ``bandwidth_scope="shared"``, the default, puts every connection
    of this proxy behind one link of that capacity, ``"connection"`` gives each connection its own), and
    ``rewrite_location`` (a function applied to every response's ``Location``).

    ``errors`` collects the tracebacks of unexpected exceptions in connection threads (a proxy bug, not a fault);
    a test can assert it stays empty.
    """

    def __init__(self, upstream: str | None = None, *, kind: str = "http", role: str | None = None,
                 log: ProxyLog | None = None, faults: ProxyFaultPlan | None = None,
                 latency: float | Callable[[ProxiedRequest], float] = 0.0, bandwidth: int | None = None,
                 bandwidth_scope: str = "shared", rewrite_location: Callable[[str], str] | None = None) -> None:
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
        if bandwidth_scope not in ("shared", "connection"):
            raise ValueError(f"bandwidth_scope must be 'shared' or 'connection', got {bandwidth_scope!r}")
        self.upstream = upstream
        self.kind = kind
        self.role = role or kind
        self.log = log if log is not None else ProxyLog()
        self.faults = faults if faults is not None else ProxyFaultPlan()
        self.latency = latency
        self.bandwidth_scope = bandwidth_scope
        self.rewrite_location = rewrite_location
        self.errors: list[str] = []
        self._bandwidth: int | None = None
        self._bucket: _TokenBucket | None = None
        self._profile: _ProfileRun | None = None
        self._stopping = threading.Event()
        self._listener: socket.socket | None = None
        self._accept_thread: threading.Thread | None = None
        self._links_lock = threading.Lock()
        self._links: dict[int, tuple[threading.Thread, _Link]] = {}
        self._numbers = itertools.count()
        self.bandwidth = bandwidth

    # -- knobs

    @property
    def bandwidth(self) -> int | None:
        return self._bandwidth

    @bandwidth.setter
    def bandwidth(self, rate: int | None) -> None:
        if rate is not None and rate <= 0:
            raise ValueError(f"bandwidth must be > 0 bytes/s, got {rate}")
        self._bandwidth = rate
        self._bucket = _TokenBucket(rate, self._stopping) if rate else None

    def use_profile(self, profile: FaultProfile | str, *, seed: int = 0, where: Mapping[str, Any] | None = None,
                    **changes: Any) -> FaultProfile:
        """Inject ``profile``'s random faults (a :class:`FaultProfile` or a name in :data:`PROFILES`) from now on.

        ``changes`` adjust its fields (``stall_seconds=0.2``); ``where`` limits it to matching requests (criteria as
        in :class:`ProxyFaultPlan`). The same seed and the same requests give the same faults: each request's draw
        is keyed by the seed, what it asks for (role, method, path, Range, query) and how many times it was asked
        before, not by arrival order, so concurrent clients reproduce too. Replaces any profile in use (its counts
        start over). Returns the profile used.
        """
        chosen = PROFILES[profile] if isinstance(profile, str) else profile
        if changes:
            chosen = chosen.replace(**changes)
        self._profile = _ProfileRun(chosen, seed, where or {}, self._stopping)
        return chosen

    def clear_profile(self) -> None:
        self._profile = None

    @property
    def profile(self) -> FaultProfile | None:
        run = self._profile
        return run.profile if run else None

    def reset(self) -> None:
        """Clear the log and errors, disarm every fault, drop the profile, latency and bandwidth: a fresh start."""
        self.log.clear()
        self.faults.clear()
        self.errors.clear()
        self._profile = None
        self.latency = 0.0
        self.bandwidth = None

    # -- lifecycle

    @property
    def running(self) -> bool:
        return self._listener is not None

    def start(self) -> FaultProxy:
        if self.running:
            return self
        if not self.upstream:
            raise RuntimeError(f"{type(self).__name__}: no upstream to forward to")
        self._upstream_address()  # fail now on a malformed upstream, not in a connection thread
        self._stopping = threading.Event()
        self.bandwidth = self._bandwidth  # a fresh bucket tied to the fresh event
        if self._profile is not None:
            run = self._profile
            self._profile = _ProfileRun(run.profile, run.seed, run.where, self._stopping)
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            listener.bind((LOOPBACK, 0))
            listener.listen(64)
            listener.settimeout(0.05)
        except BaseException:
            listener.close()
            raise
        self._listener = listener
        self._accept_thread = threading.Thread(target=self._accept_loop, name=f"testkit-proxy-{self.role}:{self.port}",
                                               daemon=True)
        self._accept_thread.start()
        return self

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """Stop accepting, shut every connection down (stalls and bandwidth waits end at once), join every thread."""
        listener = self._listener
        if listener is None:
            return
        self._stopping.set()
        thread = self._accept_thread
        if thread is not None:
            thread.join(timeout)
        with self._links_lock:
            links = list(self._links.values())
        for _, link in links:
            link.shutdown()
        deadline = time.monotonic() + timeout
        for link_thread, _ in links:
            link_thread.join(max(0.0, deadline - time.monotonic()))
        listener.close()
        self._listener = None
        leftover = [t for t, _ in links if t.is_alive()]
        if thread is not None and thread.is_alive():
            raise RuntimeError(f"{thread.name}: accept loop still running {timeout} s after stop()")
        if leftover:
            warnings.warn(f"proxy {self.role}: {len(leftover)} connection thread(s) outlived stop()", stacklevel=2)

    def __enter__(self) -> Any:
        if not self.running:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._listener is None:
            raise RuntimeError(f"{type(self).__name__} is not started")
        return int(self._listener.getsockname()[1])

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` of the proxy (no trailing slash)."""
        return f"http://{LOOPBACK}:{self.port}"

    def __repr__(self) -> str:
        where = f":{self.port}" if self.running else " (stopped)"
        return f"<FaultProxy {self.role}{where} -> {self.upstream}>"

    # -- internals

    def _upstream_address(self) -> tuple[str, int]:
        assert self.upstream
        parts = urlsplit(self.upstream if "//" in self.upstream else f"http://{self.upstream}")
        if parts.scheme != "http" or not parts.hostname or not parts.port:
            raise ValueError(f"upstream must be http://host:port, got {self.upstream!r}")
        return parts.hostname, parts.port

    def _accept_loop(self) -> None:
        listener = self._listener
        assert listener is not None
        while not self._stopping.is_set():
            try:
                sock, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                break
            number = next(self._numbers)
            link = _Link(self, sock, number)
            name = f"{threading.current_thread().name}#{number}"
            thread = threading.Thread(target=self._serve, args=(link,), name=name, daemon=True)
            with self._links_lock:
                self._links[number] = (thread, link)
            thread.start()

    def _serve(self, link: _Link) -> None:
        try:
            link.run()
        except Exception:
            self.errors.append(traceback.format_exc())
        finally:
            link.close()
            with self._links_lock:
                self._links.pop(link.number, None)

    def _describe(self, method: str, target: str, head: _Head, link: _Link, sequence: int) -> ProxiedRequest:
        parts = urlsplit(target)
        path = unquote(parts.path)
        record = ProxiedRequest(role=self.role, method=method, path=path,
                                query=dict(parse_qsl(parts.query, keep_blank_values=True)), range=head.get("Range"),
                                headers=dict(head.headers), connection=link.number, sequence=sequence)
        if self.kind == "webhdfs":
            record.op = record.query.get("op", "").upper() or None
            if path.startswith(_WEBHDFS_PREFIX):
                record.path = path[len(_WEBHDFS_PREFIX):] or "/"
        elif self.kind == "s3":
            segments = path.lstrip("/").split("/", 1)
            record.bucket = segments[0] or None
            record.key = segments[1] if len(segments) > 1 and segments[1] else None
        return record

    def _choose(self, record: ProxiedRequest) -> tuple[ProxyFault | None, float, list[_TokenBucket]]:
        """The fault, the latency and the bandwidth buckets for one request."""
        fault = self.faults.take(record)
        run = self._profile
        latency = self.latency(record) if callable(self.latency) else self.latency
        buckets = [b for b in (self._bucket,) if b is not None and self.bandwidth_scope == "shared"]
        if run is not None and run.covers(record):
            drawn = run.decide(record)  # drawn even when the plan's fault wins, so the profile's sequence holds
            fault = fault or drawn
            latency += run.profile.latency
            if run.bucket is not None:
                buckets.append(run.bucket)
        if not 0 <= latency <= MAX_DELAY:
            raise ValueError(f"latency must be within [0, {MAX_DELAY}] s, got {latency}")
        return fault, latency, buckets


class _Link:
    """One client connection and the upstream connection that serves it."""

    def __init__(self, proxy: FaultProxy, sock: socket.socket, number: int) -> None:
        self.proxy = proxy
        self.number = number
        self.client: socket.socket | None = sock
        sock.settimeout(IO_TIMEOUT)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.client_in = _Stream(sock)
        self.upstream: socket.socket | None = None
        self.upstream_in: _Stream | None = None
        self._bucket: _TokenBucket | None = None
        self._bucket_rate: int | None = None

    # -- sockets

    def shutdown(self) -> None:
        """Called from ``stop()``: unblock whatever this connection's thread is waiting on."""
        for sock in (self.client, self.upstream):
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._close_upstream()
        if self.client is not None:
            _finish(self.client)
            self.client = None

    def _close_upstream(self) -> None:
        """Close the upstream connection with a FIN, reading off what the server still sends until it closes too.

        Closing a socket with unread bytes sends an RST, and the server's handler thread would die on
        ``ConnectionResetError`` (printing a traceback) instead of seeing a clean end of its keep-alive connection.
        """
        sock, self.upstream, self.upstream_in = self.upstream, None, None
        if sock is None:
            return
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_WR)
            sock.settimeout(DRAIN_TIMEOUT)
            deadline = time.monotonic() + DRAIN_TIMEOUT
            left = BODY_LIMIT
            while left > 0 and time.monotonic() < deadline and (data := sock.recv(_PIECE)):
                left -= len(data)
        with contextlib.suppress(OSError):
            sock.close()

    def _connect(self) -> None:
        sock = socket.create_connection(self.proxy._upstream_address(), timeout=CONNECT_TIMEOUT)
        sock.settimeout(IO_TIMEOUT)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.upstream = sock
        self.upstream_in = _Stream(sock)

    def _wait(self, seconds: float) -> None:
        if seconds > 0 and self.proxy._stopping.wait(min(seconds, MAX_DELAY)):
            raise _Stopping

    def _send(self, data: bytes, record: ProxiedRequest | None = None, buckets: Sequence[_TokenBucket] = ()) -> None:
        """Write to the client; body bytes (``record`` given) count in ``record.sent`` and pass the buckets."""
        assert self.client is not None
        if record is None:
            self.client.sendall(data)
            return
        buckets = [*buckets, *self._connection_bucket()]
        step = min((b.piece for b in buckets), default=len(data)) or 1
        for start in range(0, len(data), step):
            piece = data[start:start + step]
            for bucket in buckets:
                bucket.consume(len(piece))
            record.sent += len(piece)  # counted before the write: once the client has the bytes, the log has them
            self.client.sendall(piece)

    def _connection_bucket(self) -> list[_TokenBucket]:
        rate = self.proxy.bandwidth
        if rate is None or self.proxy.bandwidth_scope != "connection":
            return []
        if self._bucket is None or self._bucket_rate != rate:
            self._bucket = _TokenBucket(rate, self.proxy._stopping)
            self._bucket_rate = rate
        return [self._bucket]

    # -- requests

    def run(self) -> None:
        sequence = 0
        while not self.proxy._stopping.is_set():
            try:
                raw = self.client_in.read_head()
            except (OSError, _Truncated, _ProtocolError):
                return
            if raw is None:
                return
            try:
                keep = self._exchange(raw, sequence)
            except (OSError, _Stopping, _Truncated, _ProtocolError):
                return
            sequence += 1
            if not keep:
                return

    def _exchange(self, raw: bytes, sequence: int) -> bool:
        """Handle one request; True if the client connection may carry another."""
        try:
            head = _Head.parse(raw)
            method, target, version = head.start.split(" ", 2)
        except (_ProtocolError, ValueError):
            self._send(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            return False
        proxy = self.proxy
        record = proxy._describe(method, target, head, self, sequence)
        fault, latency, buckets = proxy._choose(record)
        if fault is not None:
            record.fault = fault.kind
            record.detail = fault.describe()
        proxy.log.append(record)

        framing = _request_framing(head)
        expect = framing[0] != "none" and "100-continue" in head.tokens("Expect")
        client_close = _wants_close(head, version)

        if fault is not None and fault.kind == "status":
            if expect:  # the body was never sent: the connection cannot carry another request
                client_close = True
            else:
                for _ in _pieces(self.client_in, *framing):
                    pass
            record.delay = latency
            self._wait(latency)
            self._answer(record, fault, method, client_close)
            return not client_close

        if expect:
            self._send(b"HTTP/1.1 100 Continue\r\n\r\n")
        body = bytearray()
        try:
            for piece in _pieces(self.client_in, *framing):
                body += piece
                if len(body) > BODY_LIMIT:
                    raise _ProtocolError(f"request body larger than {BODY_LIMIT} bytes")
        except _Truncated as exc:
            record.error = f"client: {exc}"
            return False
        head.remove("Expect")
        try:
            response = self._forward(head.render() + bytes(body))
        except (OSError, _Truncated, _ProtocolError) as exc:
            record.error = f"upstream: {type(exc).__name__}: {exc}"
            self._close_upstream()
            record.status = 502
            message = f"proxy could not reach the upstream: {exc}\n".encode()
            self._send(b"HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\nConnection: close\r\n"
                       + f"Content-Length: {len(message)}\r\n\r\n".encode() + message)
            return False
        return self._relay(record, method, response, fault, latency, buckets, client_close)

    def _forward(self, request: bytes) -> _Head:
        """Send the request upstream and read the final response head (interim 1xx dropped).

        A reused upstream connection may have been closed by the server meanwhile; then the request is sent once
        more on a fresh one, which is safe since no byte of an answer came back.
        """
        for attempt in (0, 1):
            fresh = self.upstream is None
            if fresh:
                self._connect()
            assert self.upstream is not None and self.upstream_in is not None
            try:
                self.upstream.sendall(request)
                while True:
                    raw = self.upstream_in.read_head()
                    if raw is None:
                        raise _Truncated("upstream closed the connection without answering")
                    response = _Head.parse(raw)
                    status = _status_of(response)
                    if not 100 <= status < 200 or status == 101:
                        return response
            except (ConnectionError, _Truncated):
                self._close_upstream()
                if fresh or attempt:
                    raise
        raise AssertionError("unreachable")

    def _relay(self, record: ProxiedRequest, method: str, response: _Head, fault: ProxyFault | None, latency: float,
               buckets: list[_TokenBucket], client_close: bool) -> bool:
        """Pass the response on, doing ``fault`` to it; True if the client connection may carry another request."""
        status = _status_of(response)
        version = response.start.split(" ", 1)[0]
        record.upstream_status = status
        record.length = _content_length(response)
        framing = _response_framing(method, status, response)
        upstream_close = framing[0] == "close" or _wants_close(response, version)
        keep = not client_close and framing[0] != "close"
        if keep and "close" in response.tokens("Connection"):
            # the upstream closes after each answer (werkzeug does); the client's connection stays, as S3's would
            response.remove("Connection")
        if self.proxy.rewrite_location is not None and response.get("Location") is not None:
            response.replace("Location", self.proxy.rewrite_location)

        kind = fault.kind if fault is not None else None
        bodiless = framing[0] == "none"
        at_head = fault is not None and fault.after is None and fault.fraction is None
        stall_head = kind == "stall" and (bodiless or at_head)
        delay = latency + (fault.seconds if stall_head and fault is not None else 0.0)
        record.delay = delay
        self._wait(delay)

        if kind in ("reset", "truncate") and (bodiless or (kind == "reset" and at_head)):
            assert fault is not None and self.client is not None
            what = "RST" if kind == "reset" else "FIN"
            record.detail = f"{fault.describe()}: {what} before the head" + (" (no body)" if bodiless else "")
            self._drain(framing)
            client, self.client = self.client, None
            (_reset if kind == "reset" else _finish)(client)
            return False

        rendered = response.render()
        if kind == "cut_head":
            assert fault is not None and self.client is not None
            cut, what = _head_cut(rendered, response, fault)
            record.detail = f"{fault.describe()}: {cut} of {len(rendered)} head bytes ({what})"
            if cut > len(response.start):
                record.status = status
            self._send(rendered[:cut])
            self._drain(framing)
            client, self.client = self.client, None
            _finish(client)
            return False

        record.status = status
        self._send(rendered)
        if bodiless:
            if upstream_close:
                self._close_upstream()
            return keep
        assert self.upstream_in is not None
        pieces: Iterator[bytes] | list[bytes] = _pieces(self.upstream_in, *framing)
        total = framing[1] if framing[0] == "length" else None
        cut: int | None = None
        if kind in ("reset", "truncate") or (kind == "stall" and not stall_head):
            assert fault is not None
            if total is None:  # chunked or close-delimited: read it all to know where "half" is
                pieces = list(pieces)
                total = sum(len(p) for p in pieces)
            if fault.fraction is not None:
                cut = int(fault.fraction * total)
            elif fault.after is not None:
                cut = fault.after
            else:
                cut = total // 2
            cut = _clip(cut, total)
            record.detail = f"{fault.describe()}: after {cut} of {total} body bytes"

        sent = 0
        try:
            for piece in pieces:
                if cut is not None and sent + len(piece) >= cut:
                    assert fault is not None
                    self._send(piece[:cut - sent], record, buckets)
                    if kind == "stall":
                        self._wait(fault.seconds)
                        record.delay += fault.seconds
                        self._send(piece[cut - sent:], record, buckets)
                        sent += len(piece)
                        cut = None
                        continue
                    for _ in pieces:  # let the upstream finish its answer before its connection closes
                        pass
                    client, self.client = self.client, None
                    assert client is not None
                    (_reset if kind == "reset" else _finish)(client)
                    self._close_upstream()
                    return False
                self._send(piece, record, buckets)
                sent += len(piece)
        except _Truncated as exc:  # the upstream's own answer was cut short: pass that on
            record.error = f"upstream: {exc}"
            self._close_upstream()
            return False
        if upstream_close:
            self._close_upstream()
        return keep

    def _drain(self, framing: tuple[str, int]) -> None:
        """Read and drop the rest of an upstream answer that is not passed on, then close that connection."""
        if self.upstream_in is not None:
            with contextlib.suppress(OSError, _Truncated, _ProtocolError):
                for _ in _pieces(self.upstream_in, *framing):
                    pass
        self._close_upstream()

    def _answer(self, record: ProxiedRequest, fault: ProxyFault, method: str, close: bool) -> None:
        """An injected status answer, in the upstream kind's own format; no body bytes for HEAD."""
        body, headers = _error_body(self.proxy.kind, fault.status, fault.code, record)
        try:
            phrase = HTTPStatus(fault.status).phrase
        except ValueError:
            phrase = "Error"
        lines = [f"HTTP/1.1 {fault.status} {phrase}", f"Date: {email.utils.formatdate(usegmt=True)}",
                 *(f"{k}: {v}" for k, v in headers), f"Content-Length: {len(body)}"]
        if close:
            lines.append("Connection: close")
        record.status = fault.status
        record.length = len(body)
        self._send(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        if method != "HEAD":
            self._send(body, record)


def _status_of(head: _Head) -> int:
    parts = head.start.split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        raise _ProtocolError(f"bad status line {head.start[:80]!r}")
    return int(parts[1])


def _head_cut(rendered: bytes, head: _Head, fault: ProxyFault) -> tuple[int, str]:
    """Where to cut a rendered response head for a ``cut_head`` fault, and a few words on what that leaves out."""
    last = len(rendered) - 1  # always at least the final line end is missing
    if fault.header is None:
        if fault.fraction is not None:
            return _clip(int(fault.fraction * len(rendered)), len(rendered)), "a share of the head"
        if fault.after is not None:
            return _clip(fault.after, len(rendered)), "a byte count"
        return len(rendered) // 2, "half the head"
    wanted = fault.header.lower()
    offset = len(head.start) + 2
    for name, value in head.headers:
        line = f"{name}: {value}\r\n"
        if name.lower() == wanted:
            value_start = offset + len(name) + 2
            if fault.value_chars is not None:
                return min(value_start + fault.value_chars, value_start + len(value)), f"inside {name}"
            if fault.value_before is not None:
                found = value.find(fault.value_before)
                if found < 0:
                    return value_start + len(value), f"{name} whole, its line end cut"
                return value_start + found, f"{name} before {fault.value_before!r}"
            return offset, f"before {name}"
        offset += len(line)
    return min(last, len(rendered) - 2), f"no {fault.header} header: all but the final line end"


# ----------------------------------------------------------------------------------------------------------------
# builders for testkit's servers


class S3Proxy(FaultProxy):
    """A :class:`FaultProxy` in front of an :class:`~testkit.servers.S3Server` (``kind="s3"``).

    :meth:`storage_options` are the server's, with this proxy's endpoint. Requests through the proxy reach moto as
    well, so they also land in the server's own log.
    """

    def __init__(self, server: S3Server, **kwargs: Any) -> None:
        super().__init__(None, kind="s3", **kwargs)
        self.server = server

    def start(self) -> S3Proxy:
        self.upstream = self.server.endpoint_url
        super().start()
        return self

    @property
    def endpoint_url(self) -> str:
        return self.url

    def storage_options(self, *, retries: bool = True, **extra: Any) -> dict[str, Any]:
        """``storage_options`` for s3fs through this proxy (no instance or listings cache, as the server's).

        ``retries=False`` makes botocore try once (``total_max_attempts=1``: its ``max_attempts`` counts retries,
        not attempts), so a fault is raised rather than absorbed; s3fs's own retry loop around botocore
        (``S3FileSystem.retries``, a class attribute, not an option) is set by :meth:`filesystem`. aiohttp below
        both still re-sends an idempotent request once when its connection fails before a response head.
        """
        options = self.server.storage_options(endpoint_url=self.url)
        if not retries:
            options["config_kwargs"] = {"s3": {"addressing_style": "path"}, "retries": {"total_max_attempts": 1}}
        options.update(extra)
        return options

    def filesystem(self, *, retries: bool = True, **extra: Any) -> Any:
        """A fresh ``s3fs.S3FileSystem`` through this proxy; ``retries=False``: one attempt by botocore and s3fs."""
        import s3fs

        fs = s3fs.S3FileSystem(**self.storage_options(retries=retries, **extra))
        if not retries:
            fs.retries = 1
        return fs

    def client(self, attempts: int = 1, **config: Any) -> Any:
        """A boto3 (synchronous botocore on urllib3) S3 client through this proxy, making ``attempts`` in all.

        ``config``: more ``botocore.config.Config`` arguments (``read_timeout=0.5``...).
        """
        import boto3
        from botocore.config import Config

        return boto3.session.Session().client(
            "s3", endpoint_url=self.url, region_name=self.server.region, aws_access_key_id=S3_ACCESS_KEY,
            aws_secret_access_key=S3_SECRET_KEY, use_ssl=False,
            config=Config(s3={"addressing_style": "path"},
                          retries={"total_max_attempts": attempts, "mode": "standard"}, **config))


class HTTPProxy(FaultProxy):
    """A :class:`FaultProxy` in front of an :class:`~testkit.servers.HTTPServer` (``kind="http"``)."""

    def __init__(self, server: HTTPServer, **kwargs: Any) -> None:
        super().__init__(None, kind="http", **kwargs)
        self.server = server

    def start(self) -> HTTPProxy:
        self.upstream = self.server.url
        super().start()
        return self

    def url_for(self, relative: str) -> str:
        """The URL of the server's ``root/relative`` through this proxy."""
        return self.url + self.server.url_for(relative)[len(self.server.url):]


class WebHDFSProxy:
    """A proxy pair for a :class:`~testkit.servers.WebHDFSServer`: one before the name node, one before the data
    node, the name node's 307 ``Location`` rewritten to point at the data node's proxy, so reads and writes meet
    faults on both legs.

    The two share one :class:`ProxyLog` and one :class:`ProxyFaultPlan` (select a leg with ``role="namenode"`` or
    ``role="datanode"``); :meth:`use_profile`, ``latency`` and ``bandwidth`` apply to both (each has its own
    bandwidth bucket). :meth:`filesystem_kwargs` point fsspec's WebHDFS at the name node proxy, with no
    ``data_proxy`` needed.
    """

    def __init__(self, server: WebHDFSServer) -> None:
        self.server = server
        self.log = ProxyLog()
        self.faults = ProxyFaultPlan()
        self.namenode = FaultProxy(None, kind="webhdfs", role="namenode", log=self.log, faults=self.faults,
                                   rewrite_location=self._rewrite)
        self.datanode = FaultProxy(None, kind="webhdfs", role="datanode", log=self.log, faults=self.faults)

    def _rewrite(self, location: str) -> str:
        source = self.server.datanode_url
        if location.startswith(source):
            return self.datanode.url + location[len(source):]
        return location

    @property
    def proxies(self) -> tuple[FaultProxy, FaultProxy]:
        return (self.namenode, self.datanode)

    def start(self) -> WebHDFSProxy:
        self.datanode.upstream = f"http://{LOOPBACK}:{self.server.datanode_port}"
        self.namenode.upstream = f"http://{LOOPBACK}:{self.server.port}"
        self.datanode.start()
        try:
            self.namenode.start()
        except BaseException:
            self.datanode.stop()
            raise
        return self

    def stop(self) -> None:
        try:
            self.namenode.stop()
        finally:
            self.datanode.stop()

    def __enter__(self) -> WebHDFSProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def reset(self) -> None:
        for proxy in self.proxies:
            proxy.reset()

    @property
    def running(self) -> bool:
        return self.namenode.running and self.datanode.running

    @property
    def port(self) -> int:
        """The name node proxy's port: the one clients are pointed at."""
        return self.namenode.port

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT/webhdfs/v1`` of the name node proxy."""
        return f"{self.namenode.url}{_WEBHDFS_PREFIX}"

    @property
    def errors(self) -> list[str]:
        return [*self.namenode.errors, *self.datanode.errors]

    @property
    def latency(self) -> float | Callable[[ProxiedRequest], float]:
        return self.namenode.latency

    @latency.setter
    def latency(self, value: float | Callable[[ProxiedRequest], float]) -> None:
        for proxy in self.proxies:
            proxy.latency = value

    @property
    def bandwidth(self) -> int | None:
        return self.datanode.bandwidth

    @bandwidth.setter
    def bandwidth(self, rate: int | None) -> None:
        for proxy in self.proxies:
            proxy.bandwidth = rate

    def use_profile(self, profile: FaultProfile | str, *, seed: int = 0, where: Mapping[str, Any] | None = None,
                    **changes: Any) -> FaultProfile:
        """:meth:`FaultProxy.use_profile` on both legs (``where={"role": "datanode"}`` limits it to one)."""
        chosen = self.namenode.use_profile(profile, seed=seed, where=where, **changes)
        self.datanode.use_profile(chosen, seed=seed, where=where)
        return chosen

    def clear_profile(self) -> None:
        for proxy in self.proxies:
            proxy.clear_profile()

    def filesystem_kwargs(self, **extra: Any) -> dict[str, Any]:
        """Arguments for ``fsspec.filesystem("webhdfs", **kwargs)`` (or ``storage_options``) through the proxies."""
        kwargs: dict[str, Any] = {"host": LOOPBACK, "port": self.namenode.port, "user": self.server.user,
                                  "skip_instance_cache": True}
        kwargs.update(extra)
        return kwargs

    def filesystem(self, **extra: Any) -> Any:
        """A fresh fsspec WebHDFS filesystem through the proxies (needs fsspec and requests)."""
        import fsspec

        return fsspec.filesystem("webhdfs", **self.filesystem_kwargs(**extra))
