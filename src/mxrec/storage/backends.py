"""What each back-end needs so that one attempt is one request, bounded in time, and its answer is checked.

:func:`configure` gives a back-end the policy's time-outs and takes its own retries away (mxrec's request layer,
:mod:`mxrec.storage.remote`, retries instead: layers of retries multiply). :func:`range_reader` gives, per
file system, the :class:`RangeReader` that reads bytes and checks the answer before it is used:

* **S3** (s3fs): ``GetObject`` through s3fs's client; the body must have the ``Content-Length`` the answer states
  and the ``Content-Range`` must be the range asked for.
* **HTTP(S)** (fsspec's aiohttp session): the status must be 206 for a range (200 with more bytes: the server
  ignores ``Range``), ``Content-Range`` the range asked for, the body as long as announced; sizes come from a
  ``HEAD`` whose failures keep their status (fsspec's own ``info`` turns a 503 into "not found").
* **WebHDFS** (fsspec's requests session): ``OPEN`` with an explicit offset and length, the name node's redirect
  followed by hand, once, and only when its ``Location`` is whole (the same path, ``op=OPEN``, the same offset and
  length): a redirect cut short, or without a ``Location``, is an incomplete answer, never data. The data node's
  answer must be 200 and exactly as long as asked. No read-ahead: the bytes moved are the bytes asked for.
* **any other** file system: ``cat_file`` with the length checked.

Every reader raises what the request layer classifies (:mod:`mxrec.storage.faults`): the back-end's own errors,
or :class:`~mxrec.storage.faults.ShortReadError`, :class:`~mxrec.storage.faults.IncompleteAnswerError` and
:class:`~mxrec.storage.faults.RangeNotHonouredError` for answers that fail a check.
"""

from __future__ import annotations

import asyncio
import functools
import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from mxrec.storage.faults import IncompleteAnswerError, RangeNotHonouredError, ShortReadError
from mxrec.storage.settings import RequestPolicy

_CONTENT_RANGE = re.compile(r"^\s*bytes\s+(\d+)-(\d+)/(\d+|\*)\s*$")


def configure(protocol: str, options: dict[str, Any], policy: RequestPolicy) -> dict[str, Any]:
    """fsspec options for ``protocol`` with the policy's time-outs, connections for its requests in flight, and
    without the back-end's own retries.

    Options the caller set win: an explicit ``config_kwargs={"retries": ...}`` for S3, or a ``timeout`` in
    ``client_kwargs`` for HTTP, is kept.

    Parameters
    ----------
    protocol
        The URL scheme (``"s3"``).
    options
        The caller's fsspec options (not changed).
    policy
        Where the time-outs come from.

    Returns
    -------
    dict
        The options to make the file system with.
    """
    options = dict(options)
    if protocol in ("s3", "s3a"):
        config = dict(options.get("config_kwargs", {}))
        # (botocore's "max_attempts" counts retries, the first request not included: 1 would mean two requests)
        config.setdefault("retries", {"total_max_attempts": 1, "mode": "standard"})
        config.setdefault("connect_timeout", policy.connect_timeout)
        config.setdefault("read_timeout", policy.read_timeout)
        # (botocore opens 10 connections by default: the policy's requests in flight would queue behind them)
        config.setdefault("max_pool_connections", policy.in_flight)
        options["config_kwargs"] = config
    elif protocol in ("http", "https"):
        import aiohttp

        client = dict(options.get("client_kwargs", {}))
        client.setdefault("timeout", aiohttp.ClientTimeout(total=None, sock_connect=policy.connect_timeout,
                                                           sock_read=policy.read_timeout))
        options["client_kwargs"] = client
    return options


def prepare(fs: Any, protocol: str, policy: RequestPolicy) -> None:
    """Settle what :func:`configure` cannot say with options, on a new file system ``fs``.

    s3fs retries some errors itself (``fs.retries`` attempts): one. fsspec's WebHDFS calls requests without a
    time-out (a stalled name node would hang forever): every request of its session gets the policy's, and a 5xx
    answer raises ``requests.HTTPError`` with its status (fsspec would raise a bare ``RuntimeError`` for a 500).
    """
    if protocol in ("s3", "s3a"):
        fs.retries = 1
    elif protocol == "webhdfs":
        session = fs.session
        request = session.request
        timeout = (policy.connect_timeout, policy.read_timeout)

        @functools.wraps(request)
        def bounded(method: str, url: str, **kwargs: Any) -> Any:
            kwargs.setdefault("timeout", timeout)
            answer = request(method, url, **kwargs)
            if answer.status_code >= 500:  # fsspec turns a 500's RemoteException into a RuntimeError: no status
                answer.raise_for_status()
            return answer

        session.request = bounded


# -- checks shared by the readers ----------------------------------------------------------------------------


def check_length(url: str, data: bytes, start: int, end: int, *, whole_size: int | None = None) -> bytes:
    """``data`` if it holds exactly the bytes of ``[start, end)``; a long answer means ``Range`` was ignored."""
    if len(data) == end - start:
        return data
    if len(data) > end - start:
        whole = " (the whole file)" if whole_size is not None and len(data) == whole_size else ""
        raise RangeNotHonouredError(
            url, f"read bytes {start}..{end}: the server does not honour Range requests: it answered {len(data)} "
                 f"bytes{whole} where {end - start} were asked for; serve the file from a server that supports byte "
                 "ranges, or copy it here first")
    raise ShortReadError(url, f"bytes {start}..{end}: got {len(data)} bytes, asked for {end - start} (truncated "
                              "answer, or the file changed)")


def check_content_range(url: str, header: str | None, start: int, end: int) -> None:
    """The ``Content-Range`` of an answer must be the range asked for (when the server sends one)."""
    if header is None:
        return
    match = _CONTENT_RANGE.match(header)
    if not match or int(match.group(1)) != start or int(match.group(2)) != end - 1:
        raise IncompleteAnswerError(url, f"asked for bytes {start}..{end}, the answer says it holds "
                                         f"{header!r}")


def _stated_length(url: str, header: str | int | None, data: bytes) -> int | None:
    if header is None:
        return None
    length = int(header)
    if length != len(data):
        raise ShortReadError(url, f"got {len(data)} bytes where the answer announced {length}")
    return length


def _range_header(start: int, end: int) -> str:
    return f"bytes={start}-{end - 1}"


class RangeReader:
    """Reads of one file system, each one request whose answer is checked (see the module docstring).

    ``read_whole`` returns the bytes and the size the answer stated (``None`` when it stated none: the caller then
    asks for the size, so that a cut answer is never taken for the file). A reader whose whole reads cannot state
    a size (``states_size`` false: WebHDFS) is asked for the size first and the bytes as one range.
    """

    states_size = True

    def __init__(self, fs: Any) -> None:
        self.fs = fs

    def read(self, url: str, path: str, start: int, end: int, size: int | None = None) -> bytes:
        """Bytes ``[start, end)`` of the file ``path`` (``url`` and the file's ``size``, if known, for messages)."""
        return check_length(url, self.fs.cat_file(path, start=start, end=end), start, end, whole_size=size)

    def read_many(self, url: str, path: str, ranges: Sequence[tuple[int, int]], in_flight: int,
                  size: int | None = None) -> list[bytes | BaseException]:
        """Every range, at most ``in_flight`` at once; a failed one is its exception, in its place."""
        if len(ranges) == 1:
            return [_outcome(self.read, url, path, *ranges[0], size)]
        with ThreadPoolExecutor(min(in_flight, len(ranges)), thread_name_prefix="mxrec-read") as pool:
            return list(pool.map(lambda r: _outcome(self.read, url, path, *r, size), ranges))

    def read_whole(self, url: str, path: str) -> tuple[bytes, int | None]:
        """The whole file, and the size the answer stated."""
        return self.fs.cat_file(path), None


def _outcome(call: Any, *args: Any) -> Any:
    try:
        return call(*args)
    except Exception as exc:  # handed back in its place: the request layer retries or raises it
        return exc


class _AsyncReader(RangeReader):
    """A reader whose requests run on the file system's event loop (s3fs, fsspec HTTP), ``in_flight`` at once."""

    async def _read(self, url: str, path: str, start: int, end: int, size: int | None) -> bytes:
        raise NotImplementedError

    async def _read_whole(self, url: str, path: str) -> tuple[bytes, int | None]:
        raise NotImplementedError

    def _run(self, coroutine_function: Any, *args: Any) -> Any:
        from fsspec.asyn import sync

        return sync(self.fs.loop, coroutine_function, *args)

    def read(self, url: str, path: str, start: int, end: int, size: int | None = None) -> bytes:
        return self._run(self._read, url, path, start, end, size)

    def read_whole(self, url: str, path: str) -> tuple[bytes, int | None]:
        return self._run(self._read_whole, url, path)

    def read_many(self, url: str, path: str, ranges: Sequence[tuple[int, int]], in_flight: int,
                  size: int | None = None) -> list[bytes | BaseException]:
        async def all_of() -> list[bytes | BaseException]:
            gate = asyncio.Semaphore(in_flight)

            async def one(start: int, end: int) -> bytes:
                async with gate:
                    return await self._read(url, path, start, end, size)

            return await asyncio.gather(*(one(s, e) for s, e in ranges), return_exceptions=True)

        return self._run(all_of)


class S3Reader(_AsyncReader):
    """``GetObject`` through s3fs's client, checked against the answer's ``Content-Length`` and ``Content-Range``."""

    async def _get(self, path: str, **extra: Any) -> tuple[dict, bytes]:
        from s3fs.core import version_id_kw

        bucket, key, version = self.fs.split_path(path)
        answer = await self.fs._call_s3("get_object", Bucket=bucket, Key=key, **version_id_kw(version), **extra)
        try:
            return answer, await answer["Body"].read()
        finally:
            answer["Body"].close()

    async def _read(self, url: str, path: str, start: int, end: int, size: int | None) -> bytes:
        answer, data = await self._get(path, Range=_range_header(start, end))
        _stated_length(url, answer.get("ContentLength"), data)
        check_length(url, data, start, end, whole_size=size)
        check_content_range(url, answer.get("ContentRange"), start, end)
        return data

    async def _read_whole(self, url: str, path: str) -> tuple[bytes, int | None]:
        answer, data = await self._get(path)
        return data, _stated_length(url, answer.get("ContentLength"), data)


class HTTPReader(_AsyncReader):
    """GETs through fsspec's aiohttp session, their status, ``Content-Range`` and length checked."""

    async def _request(self, method: str, path: str, headers: dict[str, str]) -> tuple[Any, bytes]:
        fs = self.fs
        kwargs = dict(fs.kwargs)
        kwargs["headers"] = {**kwargs.get("headers", {}), "Accept-Encoding": "identity", **headers}
        session = await fs.set_session()
        async with session.request(method, fs.encode_url(path), **kwargs) as answer:
            if answer.status == 404:
                raise FileNotFoundError(path)
            answer.raise_for_status()  # (before reading: an error page is never data)
            data = b"" if method == "HEAD" else await answer.read()
            return answer, data

    async def _read(self, url: str, path: str, start: int, end: int, size: int | None) -> bytes:
        answer, data = await self._request("GET", path, {"Range": _range_header(start, end)})
        _stated_length(url, answer.headers.get("Content-Length"), data)
        check_length(url, data, start, end, whole_size=size)
        if answer.status != 206:
            raise IncompleteAnswerError(url, f"asked for bytes {start}..{end}, the server answered {answer.status} "
                                             "instead of 206 Partial Content")
        check_content_range(url, answer.headers.get("Content-Range"), start, end)
        return data

    async def _read_whole(self, url: str, path: str) -> tuple[bytes, int | None]:
        answer, data = await self._request("GET", path, {})
        return data, _stated_length(url, answer.headers.get("Content-Length"), data)

    def info(self, path: str) -> dict[str, Any]:
        """Size and version of ``path`` from one ``HEAD`` (a failure keeps its status)."""
        answer, _ = self._run(self._request, "HEAD", path, {})
        length = answer.headers.get("Content-Length")
        encoded = answer.headers.get("Content-Encoding", "identity") not in ("identity", "")
        return {"name": path, "type": "file", "size": None if length is None or encoded else int(length),
                "ETag": answer.headers.get("ETag"), "last_modified": answer.headers.get("Last-Modified")}


class WebHDFSReader(RangeReader):
    """``OPEN`` with explicit offset and length; the redirect followed by hand, once, when it is whole."""

    states_size = False

    def read(self, url: str, path: str, start: int, end: int, size: int | None = None) -> bytes:
        fs = self.fs
        answer = fs._call("OPEN", path=path, offset=start, length=end - start, redirect=False)
        if answer.status_code in (301, 302, 303, 307, 308):
            location = answer.headers.get("Location")
            self._check_location(url, path, location, start, end)
            answer = fs.session.get(fs._apply_proxy(location), allow_redirects=False)
            if answer.status_code != 200:  # an error page (503) or another redirect is never data
                answer.raise_for_status()
                raise IncompleteAnswerError(url, f"the data node answered {answer.status_code} to a read of bytes "
                                                 f"{start}..{end}")
        data = answer.content
        _stated_length(url, answer.headers.get("Content-Length"), data)
        return check_length(url, data, start, end, whole_size=size)

    @staticmethod
    def _check_location(url: str, path: str, location: str | None, start: int, end: int) -> None:
        """A redirect is followed only when its ``Location`` names this file, ``op=OPEN`` and the range asked for."""
        if not location:
            raise IncompleteAnswerError(url, f"read bytes {start}..{end}: the name node's redirect has no Location")
        parts = urlsplit(location)
        query = {k.lower(): v[-1] for k, v in parse_qs(parts.query).items()}
        wanted = {"op": "OPEN", "offset": str(start), "length": str(end - start)}
        wrong = {k: query.get(k) for k, v in wanted.items() if (query.get(k) or "").upper() != v.upper()}
        if wrong or not unquote(parts.path).endswith(path.rstrip("/")):
            raise IncompleteAnswerError(url, f"read bytes {start}..{end}: the name node's redirect is cut short or "
                                             f"names another read ({location!r})")


def range_reader(fs: Any, protocol: str) -> RangeReader:
    """The :class:`RangeReader` for a file system of ``protocol``."""
    if protocol in ("s3", "s3a"):
        return S3Reader(fs)
    if protocol in ("http", "https"):
        return HTTPReader(fs)
    if protocol == "webhdfs":
        return WebHDFSReader(fs)
    return RangeReader(fs)
