"""Bytes of one remote file, fetched the way object stores want: few large ranged reads, retried, checked.

:class:`RemoteFile` is the only code that moves a remote ``.rec``'s bytes to this
process. It never reads one record at a time:

* :meth:`RemoteFile.read_ranges` takes every byte range a batch needs, sorts
  them and merges neighbours (gaps up to ``policy.max_gap`` bytes are read and thrown
  away, merged reads stay under ``policy.max_request`` bytes: :func:`coalesce`), then
  fetches the merged ranges concurrently through the request layer
  (:func:`mxrec.storage.remote.read_ranges`: every answer checked for its status,
  length and range, transient failures retried under the request policy, anything
  else raising an error naming the URL and the byte range);
* with a :class:`~mxrec.storage.block_cache.BlockCache`, reads go through fixed-size
  blocks on local disk: cached blocks cost no request, missing neighbours are
  fetched together, so an epoch over cached data makes no request at all;
* :meth:`RemoteFile.open` gives a file object over the same checked reads, for
  code that wants a stream (a ``.lst``, a Parquet footer).

A :class:`RemoteFile` pickles to its URL, storage settings, size and version only; the
file system (connections, event loop) is made again, lazily, in each process,
and looked up again after a ``fork`` (the process id is checked on every use),
so a file read in a parent goes on working in its forked children. Threads of
one process that need the same cache block at once share one download, and so
do processes (``DataLoader`` workers): :meth:`~mxrec.storage.block_cache.BlockCache.claim`.
:attr:`RemoteFile.requests` counts the requests this object made (each attempt one), :attr:`RemoteFile.bytes_fetched`
the bytes they brought.
"""

from __future__ import annotations

import io
import os
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from typing import IO, Any

from mxrec.errors import ModeError, RemoteError
from mxrec.storage import remote
from mxrec.storage.block_cache import BlockCache
from mxrec.storage.filesystem import StorageOptions, storage_of


def coalesce(ranges: Sequence[tuple[int, int]], max_gap: int = 256 << 10,
             max_request: int = 64 << 20) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
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


class RemoteFile:
    """One remote file: its size and version, and ranged reads (see the module docstring).

    ``storage`` is a :class:`~mxrec.storage.settings.Storage` (or plain fsspec options); ``size``/``version`` may be
    given (from a manifest, or a previous open) to save the request that asks for them.
    """

    def __init__(self, url: str, storage: StorageOptions = None, *, size: int | None = None,
                 version: str | None = None, cache: BlockCache | None = None) -> None:
        self.url, self.storage, self.cache = url, storage_of(storage), cache
        self.policy = self.storage.policy
        self._size, self.version = size, version
        self.counter = remote.Counter()
        self._inflight_pid = 0
        self._inflight_lock = threading.Lock()
        self._inflight: dict[int, Future] = {}

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_inflight_pid"] = 0
        state["_inflight_lock"] = None
        state["_inflight"] = {}
        return state

    @property
    def requests(self) -> int:
        """Requests made so far in this process (each attempt counts)."""
        return self.counter.requests

    @property
    def bytes_fetched(self) -> int:
        """Bytes the reads brought so far in this process."""
        return self.counter.bytes

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

    def stat(self) -> remote.RemoteInfo:
        """Ask the store for the file's size and version tag (one request an attempt)."""
        info = remote.stat(self.url, self.storage)
        if info.is_dir:
            raise RemoteError(self.url, "is a folder, not a file")
        if info.size is None:
            raise RemoteError(self.url, "the store did not report the file's size")
        self._size, self.version = info.size, info.version
        return info

    # -- fetching ------------------------------------------------------------

    def fetch(self, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        """Exactly the bytes of each ``(start, end)``: one request per range, concurrent, retried, checked.

        Ranges must lie inside the file (an end past it is an error naming the
        file's expected size: the remote file is shorter than its index says).
        """
        if not ranges:
            return []
        size = self.size
        for start, end in ranges:
            if not 0 <= start <= end <= size:
                raise RemoteError(self.url, f"bytes {start}..{end} lie outside the file ({size} bytes)")
        return remote.read_ranges(self.url, ranges, self.storage, size=size, counter=self.counter)

    def read_ranges(self, ranges: Sequence[tuple[int, int]], *, fresh: bool = False,
                    max_gap: int | None = None) -> list[bytes | memoryview]:
        """The bytes of each ``(start, end)``, in the order given, with as few requests as the layout allows.

        ``fresh`` bypasses the cache (to fetch again bytes that failed a check). A range read from one cached
        block is a view of its mapping (no copy). ``max_gap`` replaces the policy's (``0``: never read bytes
        between the ranges, as for blocks each read once, whose neighbours are read on their own).
        """
        if self.cache is not None and not fresh:
            return self._read_cached(ranges)
        gap = self.policy.max_gap if max_gap is None else max_gap
        merged, where = coalesce(ranges, gap, self.policy.max_request)
        datas = self.fetch(merged)
        return [datas[m][off:off + end - start] for (m, off), (start, end) in zip(where, ranges, strict=True)]

    def forget(self, start: int, end: int) -> None:
        """Drop the cached blocks that hold bytes ``[start, end)`` (they failed a check): read again, they are
        fetched again."""
        if self.cache is None or end <= start:
            return
        file_id = self.cache.file_id(self.url, self.size, self.version)
        for number in range(start // self.cache.block_size, (end - 1) // self.cache.block_size + 1):
            self.cache.drop(file_id, number)

    def read(self, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` (a copy)."""
        return bytes(self.read_ranges([(start, end)])[0])

    def read_all(self) -> bytes:
        """The whole file in one request (for small files: an ``.idx``, a manifest), checked against its size (the
        one given, the one the answer states, or a ``stat``); sets :attr:`size`."""
        data = remote.read_whole(self.url, self.storage, size=self._size, counter=self.counter)
        self._size = len(data)
        return data

    def open(self, mode: str = "rb", **kwargs: Any) -> IO:
        """A read-only file object over this file's checked, retried ranged reads (``"rb"``, or ``"r"`` with
        ``encoding``/``newline``)."""
        if mode not in ("rb", "r", "rt"):
            raise ModeError(f"{self.url}: remote files open for reading only ('rb' or 'r'), not {mode!r}")
        stream = io.BufferedReader(_RawRemote(self), buffer_size=1 << 20)
        return stream if mode == "rb" else io.TextIOWrapper(stream, **kwargs)

    def chunks(self, start: int = 0, end: int | None = None, chunk: int = 16 << 20) -> Iterator[tuple[int, bytes]]:
        """``(offset, bytes)`` of ``[start, end)`` in consecutive reads of ``chunk`` bytes (a sequential scan)."""
        end = self.size if end is None else end
        for at in range(start, end, chunk):
            yield at, self.read(at, min(end, at + chunk))

    # -- through the block cache -------------------------------------------------

    def _read_cached(self, ranges: Sequence[tuple[int, int]]) -> list[bytes | memoryview]:
        """Through the cache: cached blocks cost nothing, a block another thread is fetching is waited for (never
        fetched twice at once), the missing rest is fetched in runs of consecutive blocks."""
        cache = self.cache
        size = self.size
        file_id = cache.file_id(self.url, size, self.version)
        bs = cache.block_size
        wanted = sorted({n for start, end in ranges if end > start for n in range(start // bs, (end - 1) // bs + 1)})
        blocks: dict[int, bytes | memoryview] = {}
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
            claimed = [n for n in mine if cache.claim(file_id, n)]  # the others: another process downloads them
            try:
                self._fetch_blocks(claimed, file_id, blocks)
            finally:
                for n in claimed:
                    cache.release(file_id, n)
            for n in mine:
                if n not in blocks:
                    cache.wait(file_id, n)
                    data = cache.get(file_id, n, cache.block_length(size, n))
                    if data is not None:
                        blocks[n] = data
                    else:  # its download failed there, or it was evicted already: fetch it here
                        self._fetch_blocks([n], file_id, blocks)
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
        out: list[bytes | memoryview] = []
        for start, end in ranges:
            parts = [blocks[n][max(start - n * bs, 0):end - n * bs] for n in range(start // bs, (end - 1) // bs + 1)]
            out.append(b"" if end <= start else parts[0] if len(parts) == 1 else b"".join(parts))
        return out

    def _fetch_blocks(self, numbers: list[int], file_id: str, blocks: dict[int, bytes | memoryview]) -> None:
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
            view = memoryview(data)
            for k, n in enumerate(run):
                block = view[k * bs:(k + 1) * bs]
                cache.put(file_id, n, block)
                blocks[n] = block

    def __repr__(self) -> str:
        return f"RemoteFile({self.url!r}, size={self._size})"


class _RawRemote(io.RawIOBase):
    """:class:`RemoteFile`'s bytes as a raw, seekable stream (``io.BufferedReader`` reads it in large pieces)."""

    def __init__(self, file: RemoteFile) -> None:
        self.file = file
        self.position = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.position, io.SEEK_END: self.file.size}[whence]
        self.position = max(0, base + offset)
        return self.position

    def tell(self) -> int:
        return self.position

    def readinto(self, buffer: Any) -> int:
        end = min(self.file.size, self.position + len(buffer))
        if end <= self.position:
            return 0
        data = self.file.read(self.position, end)
        buffer[:len(data)] = data
        self.position = end
        return len(data)

    @property
    def name(self) -> str:
        return self.file.url
