"""The blocks a block-shuffled epoch is reading now, kept in memory: each block's bytes fetched once an epoch, and
fetched *ahead*, along the epoch's order, as far as a memory budget allows.

A block shuffle (:mod:`mxrec.io.order`) reads the records in blocks of ``shuffle_block`` consecutive positions, a
sliding window of ``shuffle_window`` blocks open at a time, so every block is read within one stretch of the epoch
and never again. A :class:`ShuffleWindow` keeps the bytes of the blocks being read -- one block is the byte range
its records span in their file, fetched with one ranged request -- and a thread that needs a block another thread
is fetching waits for that download instead of starting its own, so the fetch threads of an iterator never
download a block twice.

Given the epoch's order (:class:`~mxrec.io.order.ReadPlan` ``order``: :meth:`ShuffleWindow.planned`), the window
knows when each block is first and last needed. It finds which epoch a batch belongs to from the positions asked
for (a batch is a run of the order: the epoch whose order holds them together), then

* reads ahead: the blocks next to open, in the order they open, with up to ``in_flight`` ranged requests open at
  once, while the blocks held and being fetched stay within ``budget`` bytes (the blocks in use are never dropped
  for the budget: the read-ahead stops instead);
* drops a block once the epoch is past its last record (less ``slack`` records, for fetch threads that run a
  little out of order), never before: each block is fetched once an epoch.

Without the order (or before the epoch is found) a block is fetched when first asked for and the least recently
used one dropped once more than ``capacity`` are held. One window is shared by the shards of a set (blocks are
named by file) and belongs to one process: pickled, it arrives empty.

Processes that read the same plan at once (``DataLoader`` workers, each with its window, each reading ahead along
the same order) would each download every block. Given a :class:`~mxrec.storage.block_cache.BlockCache` as
:attr:`ShuffleWindow.shared` (the plan's ``shared_blocks``), a block, read ahead or asked for, is looked for there
first (by its exact length), and downloaded by the one process that claims it; the others wait for that download
and map the block from local disk.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from mxrec.errors import OptionError, RemoteError
from mxrec.io.order import EpochOrder
from mxrec.storage.block_cache import BlockCache

#: ``(file, bytes, fetch)`` of each piece of one block: where its records lie (a block may straddle two shards).
Pieces = list[tuple[str, int, Callable[[], bytes]]]

_SEARCH = 8  # epochs tried at most, beyond the current and the next, to place a batch (a resumed run)
_SEARCH_LIMIT = 256  # ... and in all, before the window gives up and reads on demand
_POOL_THREADS = 128  # threads of the process-wide pool read-ahead requests run on (each window bounds its own)
_pool: tuple[int, ThreadPoolExecutor] | None = None
_pool_lock = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    """The process's read-ahead threads (made again in a forked child)."""
    global _pool
    with _pool_lock:
        if _pool is None or _pool[0] != os.getpid():
            _pool = (os.getpid(), ThreadPoolExecutor(_POOL_THREADS, thread_name_prefix="mxrec-ahead"))
        return _pool[1]


@dataclass
class _Epoch:
    """One epoch's order seen by blocks: when each block is first and last needed (order indices), and the blocks
    in the order they open."""

    epoch: int
    rank: np.ndarray  # order index of each position
    first: np.ndarray  # per block
    last: np.ndarray
    queue: list[int]  # blocks by first use
    next: int = 0  # first entry of queue not yet considered for read-ahead

    @classmethod
    def of(cls, order: EpochOrder, epoch: int, shuffle_block: int) -> _Epoch:
        positions = order(epoch)
        rank = np.empty(len(positions), np.int64)
        rank[positions] = np.arange(len(positions))
        starts = np.arange(0, len(rank), shuffle_block)
        first = np.minimum.reduceat(rank, starts)
        last = np.maximum.reduceat(rank, starts)
        return cls(epoch, rank, first, last, np.argsort(first, kind="stable").tolist())

    def span(self, positions: np.ndarray) -> tuple[int, int] | None:
        """The order indices ``positions`` lie between, if they lie together in this epoch's order."""
        if not len(positions) or positions.max() >= len(self.rank) or positions.min() < 0:
            return None
        r = self.rank[positions]
        lo, hi = int(r.min()), int(r.max())
        return (lo, hi) if hi - lo < 2 * len(positions) + 64 else None


class ShuffleWindow:
    """Blocks of ``shuffle_block`` records in memory (see the module docstring): at most ``capacity`` of them
    without an order; with one (:meth:`planned`), read ahead within ``budget`` bytes."""

    def __init__(self, shuffle_block: int, capacity: int, *, order: EpochOrder | None = None,
                 budget: int = 0, in_flight: int = 16, slack: int = 0) -> None:
        if shuffle_block < 1 or capacity < 1 or in_flight < 1:
            raise OptionError(f"a shuffle window needs shuffle_block >= 1, capacity >= 1 and in_flight >= 1, got "
                              f"{shuffle_block}, {capacity} and {in_flight}")
        self.shuffle_block, self.capacity, self.order = shuffle_block, capacity, order
        self.budget, self.in_flight, self.slack = budget, in_flight, slack
        #: where processes reading this plan at once share the blocks they download (see the module docstring)
        self.shared: BlockCache | None = None
        self._locate: Callable[[int], Pieces] | None = None
        self._reset()

    @classmethod
    def sized(cls, shuffle_block: int, shuffle_window: int, lookahead: int) -> ShuffleWindow:
        """Room for every block a reader works on at once without knowing the order: the window's, those the
        next ``lookahead`` records of the order reach into, and one block for the records around its edge."""
        windows = -(-max(lookahead, 1) // (shuffle_block * shuffle_window)) + 1
        return cls(shuffle_block, windows * shuffle_window + 1)

    @classmethod
    def planned(cls, shuffle_block: int, shuffle_window: int, lookahead: int, order: EpochOrder, budget: int,
                in_flight: int) -> ShuffleWindow:
        """A window that reads ahead along ``order`` within ``budget`` bytes, ``in_flight`` requests at once.

        Parameters
        ----------
        shuffle_block, shuffle_window
            The block shuffle's records per block and blocks open at once.
        lookahead
            Records of the order the reader's fetches run ahead of the one in use.
        order
            The epochs' order (:class:`~mxrec.io.order.EpochOrder`).
        budget
            Bytes of blocks held and being read ahead at most (blocks in use excepted).
        in_flight
            Read-ahead requests open at once at most.

        Returns
        -------
        ShuffleWindow
            The window (give it where blocks are with :meth:`locate_with`).
        """
        fallback = cls.sized(shuffle_block, shuffle_window, lookahead).capacity
        return cls(shuffle_block, fallback, order=order, budget=budget, in_flight=in_flight,
                   slack=max(lookahead, 2 * shuffle_block))

    def locate_with(self, locate: Callable[[int], Pieces]) -> None:
        """Say where the blocks lie, for read-ahead.

        Parameters
        ----------
        locate
            ``locate(n)``: the :data:`Pieces` of block ``n`` of the order's numbering (none: not read ahead).
        """
        self._locate = locate

    def _reset(self) -> None:
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._blocks: OrderedDict[tuple[str, int], bytes] = OrderedDict()
        self._sizes: dict[tuple[str, int], int] = {}
        self._loaded: dict[tuple[str, int], int] = {}  # the epoch a held block was read for
        self._inflight: dict[tuple[str, int], Future] = {}
        self._held = 0  # bytes in _blocks
        self._ahead = 0  # read-ahead requests open
        self._ahead_bytes = 0
        self._current: _Epoch | None = None  # the epoch the latest batches belong to
        self._computed: dict[int, _Epoch] = {}
        self._searched = -1  # the last epoch tried
        self._low = 0  # the order index below which no fetch will ask (less slack)
        #: blocks read ahead, waited for and fetched on demand; the most bytes held and being read ahead at once
        self.stats = {"ahead": 0, "waited": 0, "demand": 0, "peak_bytes": 0}

    def __getstate__(self) -> dict:
        return {"shuffle_block": self.shuffle_block, "capacity": self.capacity, "order": self.order,
                "budget": self.budget, "in_flight": self.in_flight, "slack": self.slack, "shared": self.shared}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._locate = None
        self._reset()

    # -- where the epoch is ----------------------------------------------------------------------------------

    def _epoch(self, epoch: int) -> _Epoch:
        """Epoch ``epoch``'s plan (the last few computed are kept: the current one and the next)."""
        found = self._computed.get(epoch)
        if found is None:
            found = self._computed[epoch] = _Epoch.of(self.order, epoch, self.shuffle_block)
            for old in sorted(self._computed)[:-3]:
                if self._current is None or old != self._current.epoch:
                    del self._computed[old]
        return found

    def _place(self, positions: np.ndarray) -> tuple[_Epoch, int] | None:
        """The epoch ``positions`` (a batch, in the order's numbering) belong to, and the first order index they
        hold; ``None`` when no epoch near the current one holds them together (a wrapped last batch)."""
        current = self._current
        if current is not None:
            tried = [current.epoch, current.epoch + 1]
        elif self._searched >= _SEARCH_LIMIT:  # no epoch holds these batches: read on demand only
            return None
        else:  # not placed yet: the first epochs, then (a resumed run) a few more each batch
            tried = [0, 1, *range(max(2, self._searched + 1), max(2, self._searched + 1) + _SEARCH)]
        for epoch in tried:
            self._searched = max(self._searched, epoch)
            span = self._epoch(epoch).span(positions)
            if span is not None:
                return self._computed[epoch], span[0]
        return None

    def _advance(self, positions: np.ndarray) -> None:
        """Note a fetch of ``positions``: the epoch and where in it, blocks past their last use, read-ahead."""
        placed = self._place(positions)
        if placed is None:
            return
        epoch, lo = placed
        if self._current is not epoch:
            if self._current is not None and epoch.epoch < self._current.epoch:
                return  # a late fetch of the epoch before: it finds its blocks or fetches them
            self._current, self._low = epoch, 0
        self._low = max(self._low, lo - self.slack)
        now = epoch.epoch
        for key in [k for k, e in self._loaded.items()
                    if (e == now and epoch.last[k[1]] < self._low) or (e < now and lo > self.slack)]:
            self._drop(key)
        self._pump()

    def _drop(self, key: tuple[str, int]) -> None:
        if self._blocks.pop(key, None) is not None:
            self._held -= self._sizes.pop(key, 0)
        self._loaded.pop(key, None)

    def _keep(self, key: tuple[str, int], data: bytes) -> None:
        if key in self._blocks:
            return
        self._blocks[key] = data
        self._sizes[key] = len(data)
        self._held += len(data)
        self.stats["peak_bytes"] = max(self.stats["peak_bytes"], self._held + self._ahead_bytes)
        if self._current is not None:
            self._loaded[key] = self._current.epoch

    # -- read-ahead ------------------------------------------------------------------------------------------

    def _pump(self) -> None:
        """Start read-ahead requests for the next blocks to open, within the budget and ``in_flight`` (under the
        lock)."""
        if self._locate is None or self._current is None:
            return
        epoch = self._current
        while self._ahead < self.in_flight and epoch.next < len(epoch.queue):
            number = epoch.queue[epoch.next]
            if epoch.last[number] < self._low:
                epoch.next += 1
                continue
            pieces = []
            for owner, size, fetch in self._locate(number):
                key = (owner, number)
                if key in self._blocks:
                    self._loaded[key] = epoch.epoch  # held since an epoch before: kept for this one
                elif key not in self._inflight:
                    pieces.append((owner, size, fetch))
            size = sum(p[1] for p in pieces)
            if pieces and self._held + self._ahead_bytes + size > self.budget:
                return
            epoch.next += 1
            for owner, nbytes, fetch in pieces:
                key = (owner, number)
                future: Future = Future()
                self._inflight[key] = future
                self._ahead += 1
                self._ahead_bytes += nbytes
                _executor().submit(self._read_ahead, key, nbytes, fetch, future)

    def _shared_id(self, owner: str) -> str:
        """The name of ``owner``'s shuffle blocks in the shared store (blocks of this size, numbered as here)."""
        return BlockCache.file_id(owner, self.shuffle_block, "shuffle blocks")

    def _download(self, owner: str, numbers: list[int], fetch: Callable[[list[int]], list[bytes]],
                  size: Callable[[int], int] | None) -> dict[int, bytes | memoryview]:
        """Blocks ``numbers`` of ``owner``, fetched with one call of ``fetch`` -- with a shared store, those of
        them it holds mapped from it, those another process is downloading after that download, the rest fetched
        and left there (``size(n)``: block ``n``'s length, to take only a whole block from the store)."""
        shared = self.shared
        if shared is None or size is None:
            fetched = dict(zip(numbers, fetch(numbers), strict=True))
            for n, data in fetched.items():
                self._share(owner, n, data)
            return fetched
        file_id = self._shared_id(owner)
        found: dict[int, bytes | memoryview] = {}
        claimed: list[int] = []
        theirs: list[int] = []
        try:
            for n in numbers:
                data = shared.get(file_id, n, size(n))
                if data is not None:
                    found[n] = data
                elif shared.claim(file_id, n):
                    claimed.append(n)
                else:
                    theirs.append(n)
        except OSError:  # the folder cannot be used (full, not writable): these blocks are not shared
            claimed, theirs = [n for n in numbers if n not in found], []  # (releasing one not claimed: a no-op)
        try:  # (this process's downloads first, released before it waits for another's: no process waits in a ring)
            if claimed:
                for n, data in zip(claimed, fetch(claimed), strict=True):
                    found[n] = data
                    self._share(owner, n, data)
        finally:
            for n in claimed:
                shared.release(file_id, n)
        late = []
        for n in theirs:
            data = None
            with contextlib.suppress(OSError):
                shared.wait(file_id, n)
                data = shared.get(file_id, n, size(n))
            if data is None:  # its download failed in the other process: fetched here
                late.append(n)
            else:
                found[n] = data
        if late:
            for n, data in zip(late, fetch(late), strict=True):
                found[n] = data
                self._share(owner, n, data)
        return found

    def _share(self, owner: str, number: int, data: bytes) -> None:
        """Leave block ``number`` of ``owner`` in the shared store for the other processes, if there is one and
        it can take it."""
        if self.shared is not None:
            with contextlib.suppress(OSError):
                self.shared.put(self._shared_id(owner), number, data)

    def _read_ahead(self, key: tuple[str, int], nbytes: int, fetch: Callable[[], bytes], future: Future) -> None:
        try:
            data = self._download(key[0], [key[1]], lambda _: [fetch()], lambda _: nbytes)[key[1]]
        except BaseException as exc:  # the block is fetched again when asked for, and fails there if it must
            with self._lock:
                self._inflight.pop(key, None)
                self._ahead -= 1
                self._ahead_bytes -= nbytes
            future.set_exception(exc)
            return
        with self._lock:
            self._inflight.pop(key, None)
            self._ahead -= 1
            self._ahead_bytes -= nbytes
            self._keep(key, data)
            self.stats["ahead"] += 1
            self._pump()
        future.set_result(data)

    # -- reading ---------------------------------------------------------------------------------------------

    def blocks(self, owner: str, numbers: Sequence[int], fetch: Callable[[list[int]], list[bytes]],
               positions: np.ndarray | None = None, size: Callable[[int], int] | None = None) -> dict[int, bytes]:
        """The bytes of blocks ``numbers`` of file ``owner``; the missing ones (that no other thread is
        fetching) are fetched with one call of ``fetch(missing numbers)``. ``positions``: the records asked for,
        in the order's numbering (where the epoch is, for a planned window). ``size(n)``: the length of block
        ``n`` (without it, the shared store is not looked in, only left the blocks fetched)."""
        if self._pid != os.getpid():  # a forked child: the parent's threads, lock and downloads are not here
            self._reset()
        found: dict[int, bytes] = {}
        mine: list[int] = []
        theirs: dict[int, Future] = {}
        with self._lock:
            if self.order is not None and positions is not None:
                self._advance(np.asarray(positions, dtype=np.int64))
            for n in numbers:
                key = (owner, n)
                data = self._blocks.get(key)
                if data is not None:
                    self._blocks.move_to_end(key)
                    if self._current is not None and key in self._loaded:  # (read in an epoch before, again now)
                        self._loaded[key] = self._current.epoch
                    found[n] = data
                elif key in self._inflight:
                    theirs[n] = self._inflight[key]
                else:
                    self._inflight[key] = Future()
                    mine.append(n)
            self.stats["waited"] += len(theirs)
            self.stats["demand"] += len(mine)
        fetched: dict[int, bytes] = {}
        try:
            if mine:
                fetched = self._download(owner, mine, fetch, size)
        finally:
            with self._lock:
                for n in mine:
                    future = self._inflight.pop((owner, n))
                    if n in fetched:
                        self._keep((owner, n), fetched[n])
                        future.set_result(fetched[n])
                    else:
                        future.set_exception(RemoteError(owner, f"shuffle block {n}: its fetch failed in "
                                                                f"another thread"))
                self._bound()
        found.update(fetched)
        for n, future in theirs.items():
            try:
                found[n] = future.result()
            except Exception:  # a read-ahead that failed: fetch it here (retried, or raising what is wrong)
                found[n] = self.blocks(owner, [n], fetch, size=size)[n]
        return found

    def _bound(self) -> None:
        """Drop least recently used blocks beyond what may be held (under the lock): ``capacity`` blocks without
        an order; with one, blocks the epoch's plan does not place, once they pass twice the budget."""
        if self.order is None:
            while len(self._blocks) > self.capacity:
                self._drop(next(iter(self._blocks)))
            return
        unplaced = [k for k in self._blocks if k not in self._loaded]
        while len(unplaced) > self.capacity and self._held > 2 * self.budget:
            self._drop(unplaced.pop(0))

    def __repr__(self) -> str:
        return f"ShuffleWindow(shuffle_block={self.shuffle_block}, capacity={self.capacity}, budget={self.budget})"
