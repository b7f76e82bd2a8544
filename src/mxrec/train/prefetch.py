"""Remote records fetched a batch at a time, ahead of decoding: the iterators' bridge to remote readers.

The pipeline decodes one sample per call (``load(position, ...)``); a remote
reader must not be asked one record per request. A :class:`BatchPrefetcher`
sits between them: :meth:`BatchPrefetcher.plans` passes the batch plans
through to the pipeline and, as the pipeline takes each plan (up to its
``prefetch`` batches ahead), starts one ``reader.read_batch`` of all the plan's
records on a small thread pool -- coalesced ranged reads, see
:mod:`mxrec.storage.remote_file`. :meth:`BatchPrefetcher.payload` then hands each
sample its bytes, waiting for that fetch if it is still running. Records are
dropped once every slot that asked for them has been served, or by
:meth:`BatchPrefetcher.clear` when the iterator restarts.

:func:`read_ahead_window` gives a remote reader that is read in a
block-shuffled order an in-memory window of file blocks
(:class:`~mxrec.storage.block_cache.MemoryBlocks`), unless it already has a disk cache:
the batches of one shuffle window then share the blocks fetched for the
first of them, so each block is fetched once per epoch (per process: ranks and
``DataLoader`` workers each fetch what they read; a shared ``cache_dir``
fetches it once per machine).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

from mxrec.io.records import Records
from mxrec.train.sampler import EMPTY_SLOT, BatchPlan

FETCH_THREADS = 2  # batches fetched at once (each fetch is itself concurrent ranged reads)


class BatchPrefetcher:
    """Fetches each plan's records with one ``fetch`` as the pipeline takes the plan (see the module docstring)."""

    def __init__(self, reader: Records, threads: int = FETCH_THREADS) -> None:
        self.reader = reader
        self._threads = threads
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._pending: dict[int, list] = {}  # position -> [future of {position: bytes}, slots still to serve]

    def _fetch(self, positions: list[int]) -> dict[int, bytes | memoryview]:
        return dict(zip(positions, self.reader.fetch(positions), strict=True))

    def plans(self, plans: Iterable[BatchPlan]) -> Iterator[BatchPlan]:
        """The same plans; taking one starts the fetch of its records."""
        for plan in plans:
            slots = [p for p in plan.positions.tolist() if p != EMPTY_SLOT]
            if slots:
                unique = np.unique(slots).tolist()
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(self._threads, thread_name_prefix="mxrec-fetch")
                future: Future = self._pool.submit(self._fetch, unique)
                with self._lock:
                    for position in slots:
                        entry = self._pending.get(position)
                        if entry is None:
                            self._pending[position] = [future, 1]
                        else:
                            entry[1] += 1
            yield plan

    def payload(self, position: int) -> bytes | memoryview:
        """The bytes of record ``position`` (one of the slots of a plan taken through :meth:`plans`)."""
        with self._lock:
            entry = self._pending.get(position)
            if entry is None:  # not planned (cannot happen through the pipeline): fetch it alone
                future = None
            else:
                future = entry[0]
                entry[1] -= 1
                if entry[1] == 0:
                    del self._pending[position]
        if future is None:
            return self.reader.view(position)
        return future.result()[position]

    def clear(self) -> None:
        """Forget every fetch (the batches they were for will not be loaded)."""
        with self._lock:
            self._pending.clear()

    def close(self) -> None:
        self.clear()
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
