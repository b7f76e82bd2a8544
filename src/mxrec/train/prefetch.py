"""Records fetched a batch at a time, ahead of decoding: the iterators' one read path.

The pipeline decodes one sample per call (``load(position, ...)``); a remote
reader must not be asked one record per request. A :class:`BatchPrefetcher`
sits between them: :meth:`BatchPrefetcher.plans` passes the batch plans
through to the pipeline and, as the pipeline takes each plan (up to its
``prefetch`` batches ahead), starts one ``reader.fetch`` of all the plan's
records on a small thread pool (:meth:`mxrec.io.records.Records.fetch`: views
of a local mapping, coalesced ranged reads of a remote file).
:meth:`BatchPrefetcher.payload` then hands each sample its bytes, waiting for
that fetch if it is still running. Records are dropped once every slot that
asked for them has been served, or by :meth:`BatchPrefetcher.clear` when the
iterator restarts. A block-shuffled remote reader keeps the blocks of its
shuffle windows in memory itself (:meth:`mxrec.io.records.Records.follow`,
told how far ahead :func:`lookahead` fetches).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from mxrec.io.records import Records
from mxrec.train.sampler import EMPTY_SLOT, BatchPlan

FETCH_THREADS = 2  # batches fetched at once (each fetch is itself concurrent ranged reads)


def lookahead(batch_size: int, prefetch: int) -> int:
    """Records fetched before the batch being consumed is done: the pipeline's ``prefetch`` batches, the one it
    fills and the one the fetch threads start next."""
    return (prefetch + 2) * batch_size


class PlanFetch:
    """One plan's records, fetched once: by a fetch thread, or by the first sample that needs them when no fetch
    thread has started yet (a local fetch is then done in place, with no hand-over between threads)."""

    def __init__(self, reader: Records, positions: list[int]) -> None:
        self._reader, self._positions = reader, positions
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._started = False
        self._records: dict[int, bytes | memoryview] = {}
        self._error: BaseException | None = None

    def run(self) -> None:
        """Fetch the records, unless another thread has started to."""
        with self._lock:
            if self._started:
                return
            self._started = True
        try:
            self._records = dict(zip(self._positions, self._reader.fetch(self._positions), strict=True))
        except BaseException as exc:
            self._error = exc
        finally:
            self._done.set()

    def record(self, position: int) -> bytes | memoryview:
        """The payload of ``position``, fetched here if no thread has started, else when that fetch is done."""
        if not self._done.is_set():  # once done (the usual case), no lock and no wait
            self.run()
            self._done.wait()
        if self._error is not None:
            raise self._error
        return self._records[position]


class BatchPrefetcher:
    """Fetches each plan's records with one ``fetch`` as the pipeline takes the plan (see the module docstring)."""

    def __init__(self, reader: Records, threads: int = FETCH_THREADS) -> None:
        self.reader = reader
        self._threads = threads
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._pending: dict[int, list] = {}  # position -> [its PlanFetch, slots still to serve]

    def plans(self, plans: Iterable[BatchPlan]) -> Iterator[BatchPlan]:
        """The same plans; taking one starts the fetch of its records."""
        for plan in plans:
            slots = [p for p in plan.positions.tolist() if p != EMPTY_SLOT]
            if slots:
                unique = np.unique(slots).tolist()
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(self._threads, thread_name_prefix="mxrec-fetch")
                fetch = PlanFetch(self.reader, unique)
                self._pool.submit(fetch.run)
                with self._lock:
                    for position in slots:
                        entry = self._pending.get(position)
                        if entry is None:
                            self._pending[position] = [fetch, 1]
                        else:
                            entry[1] += 1
            yield plan

    def payload(self, position: int) -> bytes | memoryview:
        """The bytes of record ``position`` (one of the slots of a plan taken through :meth:`plans`)."""
        with self._lock:
            entry = self._pending.get(position)
            if entry is None:  # not planned (cannot happen through the pipeline): fetch it alone
                fetch = None
            else:
                fetch = entry[0]
                entry[1] -= 1
                if entry[1] == 0:
                    del self._pending[position]
        if fetch is None:
            return self.reader.view(position)
        return fetch.record(position)

    def clear(self) -> None:
        """Forget every fetch (the batches they were for will not be loaded)."""
        with self._lock:
            self._pending.clear()

    def close(self) -> None:
        self.clear()
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
