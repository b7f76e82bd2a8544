"""Bytes of one remote file, fetched the way object stores want: few large ranged reads, retried, validated.

:class:`RemoteFile` is the only code that moves a remote file's bytes to this
process. It never reads one record at a time:

* :meth:`RemoteFile.read_ranges` takes every byte range a batch needs, sorts
  them and merges neighbours (gaps up to ``max_gap`` bytes are read and thrown
  away, merged reads stay under ``max_request`` bytes: :func:`coalesce`), then
  fetches the merged ranges concurrently with one ``cat_ranges`` call;
* every answer is checked for its exact length (a short or long body is
  fetched again), transient failures (5xx, dropped connections, timeouts) are
  retried ``retries`` times with exponential back-off, and anything else, or
  a failure that outlasts the retries, raises an error naming the URL and the
  byte range (:mod:`mxrec.storage.filesystem`);
* with a :class:`~mxrec.storage.block_cache.BlockCache`, reads go through fixed-size
  blocks on local disk: cached blocks cost no request, missing neighbours are
  fetched together, so an epoch over cached data makes no request at all.

A :class:`RemoteFile` pickles to its URL, options, size and version only; the
file system (connections, event loop) is made again, lazily, in each process,
and looked up again after a ``fork`` (the process id is checked on every use),
so a file read in a parent goes on working in its forked children. Threads of
one process that need the same cache block at once share one download.
:attr:`RemoteFile.requests` counts the ranged reads this object made, :attr:`RemoteFile.bytes_fetched` the
bytes they brought.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from mxrec.errors import RemoteError
from mxrec.storage.block_cache import BlockCache
from mxrec.storage.filesystem import (
    RangeNotHonouredError,
    ShortReadError,
    StorageOptions,
    filesystem,
    is_transient,
    remote_error,
)

DEFAULT_MAX_GAP = 256 << 10
DEFAULT_MAX_REQUEST = 64 << 20
DEFAULT_RETRIES = 5
BACKOFF_SECONDS = 0.1
MAX_BACKOFF_SECONDS = 4.0


def coalesce(ranges: Sequence[tuple[int, int]], max_gap: int = DEFAULT_MAX_GAP,
             max_request: int = DEFAULT_MAX_REQUEST) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """Merge byte ranges into few reads: ``(merged ranges, where each input range lies: (read, offset))``.

    Ranges closer than ``max_gap`` bytes are merged while the merged read stays
    within ``max_request`` bytes (a single larger range is read on its own).
    Overlapping and repeated ranges are read once.
    """
    order = sorted(range(len(ranges)), key=lambda i: ranges[i][0])
    merged: list[list[int]] = []
    where: list[tuple[int, int]] = [(0, 0)] * len(ranges)
    for i in order:
        start, end = ranges[i]
        if merged:
            last = merged[-1]
            if start - last[1] <= max_gap and max(end, last[1]) - last[0] <= max_request:
                last[1] = max(last[1], end)
                where[i] = (len(merged) - 1, start - last[0])
                continue
        merged.append([start, end])
        where[i] = (len(merged) - 1, 0)
    return [(s, e) for s, e in merged], where


@dataclass(frozen=True)
class RequestPolicy:
    """How a :class:`RemoteFile` asks: merge ranges closer than ``max_gap``, up to ``max_request`` bytes a read,
    and retry a transient failure ``retries`` times."""

    retries: int = DEFAULT_RETRIES
    max_gap: int = DEFAULT_MAX_GAP
    max_request: int = DEFAULT_MAX_REQUEST


class RemoteFile:
    """One remote file: its size and version, and ranged reads (see the module docstring).

    ``size``/``version`` may be given (from a manifest, or a previous open) to
    save the request that asks for them.
    """

    def __init__(self, url: str, storage_options: StorageOptions = None, *, size: int | None = None,
                 version: str | None = None, cache: BlockCache | None = None,
                 policy: RequestPolicy = RequestPolicy()) -> None:
        self.url, self.storage_options, self.cache, self.policy = url, dict(storage_options or {}), cache, policy
        self._size, self.version = size, version
        self.requests = 0
        self.bytes_fetched = 0
        self._fs: Any = None
        self._path: str | None = None
        self._pid = 0
        self._inflight_pid = 0
        self._inflight_lock = threading.Lock()
        self._inflight: dict[int, Future] = {}

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_fs"] = state["_path"] = None
        state["_pid"] = state["_inflight_pid"] = 0
        state["_inflight_lock"] = None
        state["_inflight"] = {}
        state["requests"] = state["bytes_fetched"] = 0
        return state

    def _filesystem(self) -> tuple[Any, str]:
        """The file system of this process: checked on every use, so nothing made before a ``fork`` (an event
        loop, a connection pool, a session) is used in the child."""
        if self._fs is None or self._pid != os.getpid():
            self._fs, self._path = filesystem(self.url, self.storage_options)
            self._pid = os.getpid()
        return self._fs, self._path

    def _flights(self) -> tuple[threading.Lock, dict[int, Future]]:
        """The blocks being fetched now by some thread of this process, and the lock that guards them."""
        if self._inflight_pid != os.getpid():  # a forked child: the parent's threads and lock are not here
            self._inflight_lock, self._inflight, self._inflight_pid = threading.Lock(), {}, os.getpid()
        return self._inflight_lock, self._inflight

    @property
    def size(self) -> int:
        """The file's size in bytes (one request the first time, unless it was given)."""
        if self._size is None:
            self.stat()
        return self._size

    def stat(self) -> dict:
        """Ask the store for the file's size and version tag (one request)."""
        fs, path = self._filesystem()
        info = self._with_retries(lambda: fs.info(path), "stat")
        if info.get("type") == "directory":
            raise RemoteError(self.url, "is a folder, not a file")
        size = info.get("size")
        if size is None:
            raise RemoteError(self.url, "the store did not report the file's size")
        self._size = int(size)
        version = next((info[k] for k in ("ETag", "etag", "generation", "mtime", "modificationTime",
                                          "LastModified", "last_modified") if info.get(k) is not None), None)
        self.version = None if version is None else str(version)
        return info

    # -- fetching ------------------------------------------------------------

    def _with_retries(self, call: Any, what: str) -> Any:
        for attempt in range(self.policy.retries + 1):
            try:
                return call()
            except Exception as exc:
                if attempt == self.policy.retries or not is_transient(exc):
                    raise remote_error(self.url, exc, what) from None
                time.sleep(min(MAX_BACKOFF_SECONDS, BACKOFF_SECONDS * 2 ** attempt))
        raise AssertionError("unreachable")

    def fetch(self, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        """Exactly the bytes of each ``(start, end)``: one request per range, concurrent, retried, length-checked.

        Ranges must lie inside the file (an end past it is an error naming the
        file's expected size: the remote file is shorter than its index says).
        """
        if not ranges:
            return []
        size = self.size
        for start, end in ranges:
            if not 0 <= start <= end <= size:
                raise RemoteError(self.url, f"bytes {start}..{end} lie outside the file ({size} bytes)")
        fs, path = self._filesystem()
        results: list[bytes | None] = [None] * len(ranges)
        pending = [i for i, (start, end) in enumerate(ranges) if start < end]
        for i, (start, end) in enumerate(ranges):
            if start == end:
                results[i] = b""
        for attempt in range(self.policy.retries + 1):
            if not pending:
                break
            self.requests += len(pending)
            try:
                answers = fs.cat_ranges([path] * len(pending), [ranges[i][0] for i in pending],
                                        [ranges[i][1] for i in pending], on_error="return")
            except Exception as exc:  # the whole call failed (a sync back-end raises the first error)
                answers = [exc] * len(pending)
            failed = []
            for i, answer in zip(pending, answers, strict=True):
                start, end = ranges[i]
                if isinstance(answer, BaseException):
                    error: BaseException = answer
                elif len(answer) > end - start:  # the first such answer says it all: no retry
                    whole = " (the whole file)" if len(answer) == size else ""
                    raise RangeNotHonouredError(
                        self.url, f"read bytes {start}..{end}: the server does not honour Range requests: it "
                                  f"answered {len(answer)} bytes{whole} where {end - start} were asked for; serve "
                                  "the file from a server that supports byte ranges, or copy it here first")
                elif len(answer) != end - start:
                    error = ShortReadError(self.url, f"bytes {start}..{end}: got {len(answer)} bytes, asked for "
                                                     f"{end - start} (truncated answer, or the file changed)")
                else:
                    results[i] = answer
                    self.bytes_fetched += len(answer)
                    continue
                if attempt == self.policy.retries or not is_transient(error):
                    raise remote_error(self.url, error, f"read bytes {start}..{end}")
                failed.append(i)
            pending = failed
            if pending:
                time.sleep(min(MAX_BACKOFF_SECONDS, BACKOFF_SECONDS * 2 ** attempt))
        return results  # type: ignore[return-value]

    def read_ranges(self, ranges: Sequence[tuple[int, int]], *, fresh: bool = False) -> list[bytes]:
        """The bytes of each ``(start, end)``, in the order given, with as few requests as the layout allows.

        ``fresh`` bypasses the cache (to fetch again bytes that failed a check).
        """
        if self.cache is not None and not fresh:
            return self._read_cached(ranges)
        merged, where = coalesce(ranges, self.policy.max_gap, self.policy.max_request)
        datas = self.fetch(merged)
        return [datas[m][off:off + end - start] for (m, off), (start, end) in zip(where, ranges, strict=True)]

    def read(self, start: int, end: int) -> bytes:
        return self.read_ranges([(start, end)])[0]

    def read_all(self) -> bytes:
        """The whole file in one request, retried (for small files: an ``.idx``, a manifest); sets :attr:`size`."""
        fs, path = self._filesystem()
        self.requests += 1
        data = self._with_retries(lambda: fs.cat_file(path), "read")
        if self._size is not None and len(data) != self._size:
            raise ShortReadError(self.url, f"got {len(data)} bytes, expected {self._size}")
        self._size = len(data)
        self.bytes_fetched += len(data)
        return data

    def chunks(self, start: int = 0, end: int | None = None, chunk: int = 16 << 20) -> Iterator[tuple[int, bytes]]:
        """``(offset, bytes)`` of ``[start, end)`` in consecutive reads of ``chunk`` bytes (a sequential scan)."""
        end = self.size if end is None else end
        for at in range(start, end, chunk):
            yield at, self.read(at, min(end, at + chunk))

    # -- through the block cache -------------------------------------------------

    def _read_cached(self, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        """Through the cache: cached blocks cost nothing, a block another thread is fetching is waited for (never
        fetched twice at once), the missing rest is fetched in runs of consecutive blocks."""
        cache = self.cache
        size = self.size
        file_id = cache.file_id(self.url, size, self.version)
        bs = cache.block_size
        wanted = sorted({n for start, end in ranges if end > start for n in range(start // bs, (end - 1) // bs + 1)})
        blocks: dict[int, bytes] = {}
        missing = []
        for n in wanted:
            data = cache.get(file_id, n, cache.block_length(size, n))
            if data is None:
                missing.append(n)
            else:
                blocks[n] = data
        lock, inflight = self._flights()
        mine: list[int] = []  # blocks this call fetches
        theirs: dict[int, Future] = {}  # blocks other threads are fetching
        with lock:
            for n in missing:
                if n in inflight:
                    theirs[n] = inflight[n]
                    continue
                data = cache.get(file_id, n, cache.block_length(size, n))  # fetched since the first look?
                if data is not None:
                    blocks[n] = data
                else:
                    inflight[n] = Future()
                    mine.append(n)
        try:
            self._fetch_blocks(mine, file_id, blocks)
        finally:
            with lock:
                for n in mine:
                    future = inflight.pop(n)
                    if n in blocks:
                        future.set_result(blocks[n])
                    else:
                        future.set_exception(RemoteError(self.url, f"block {n}: fetch failed in another thread"))
        for n, future in theirs.items():
            blocks[n] = future.result()
        out = []
        for start, end in ranges:
            parts = [blocks[n][max(start - n * bs, 0):end - n * bs] for n in range(start // bs, (end - 1) // bs + 1)]
            out.append(b"".join(parts) if end > start else b"")
        return out

    def _fetch_blocks(self, numbers: list[int], file_id: str, blocks: dict[int, bytes]) -> None:
        """Fetch blocks ``numbers`` (sorted) in runs of consecutive blocks, into ``blocks`` and the cache."""
        cache, size = self.cache, self.size
        bs = cache.block_size
        runs: list[list[int]] = []  # consecutive blocks, fetched as one read each
        for n in numbers:
            if runs and n == runs[-1][-1] + 1 and (len(runs[-1]) + 1) * bs <= max(self.policy.max_request, bs):
                runs[-1].append(n)
            else:
                runs.append([n])
        datas = self.fetch([(run[0] * bs, min(size, (run[-1] + 1) * bs)) for run in runs])
        for run, data in zip(runs, datas, strict=True):
            for k, n in enumerate(run):
                block = data[k * bs:(k + 1) * bs]
                cache.put(file_id, n, block)
                blocks[n] = block

    def __repr__(self) -> str:
        return f"RemoteFile({self.url!r}, size={self._size})"
