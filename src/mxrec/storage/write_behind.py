"""Writes done behind the caller's back: one thread runs them, in order, while the caller prepares the next.

A conversion is half Python (framing records, building headers) and half
copying bytes into the page cache (``writev``, a Parquet writer's C++, a
CRC), and the second half releases the GIL. With both on one thread a
conversion runs at the sum of the two; with the copying on a
:class:`WriteBehind` thread it runs at the larger of the two
(``benchmarks/bench_convert.py``: ``.rec -> webdataset`` went from 41% to
about 70% of ``cp``'s speed on two cores).

At most ``depth`` calls wait at a time, so memory stays bounded: the caller
blocks in :meth:`WriteBehind.submit` until the oldest is done. The first
error a call raises is raised again to the caller (at its next ``submit``,
``wait`` or ``close``); after it, the calls still queued are not run.
Whatever a call reads (views of a mapped file, say) must stay unchanged until
:meth:`WriteBehind.wait` returns.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any


class WriteBehind:
    """Run the calls given to :meth:`submit` on one background thread, in order, at most ``depth`` waiting."""

    def __init__(self, depth: int = 2) -> None:
        self.depth = depth
        self._pool: ThreadPoolExecutor | None = None  # started by the first call
        self._pending: deque[Future] = deque()
        self._failed = False

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        """Queue ``fn(*args)``; first wait for the oldest call while ``depth`` are waiting (raising its error)."""
        while len(self._pending) >= self.depth:
            self._settle_oldest()
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="mxrec-write-behind")
        self._pending.append(self._pool.submit(self._run, fn, args))

    def _run(self, fn: Callable[..., Any], args: tuple) -> None:
        if self._failed:  # an earlier write failed: the output is broken, later ones would only add to it
            return
        try:
            fn(*args)
        except BaseException:
            self._failed = True
            raise

    @property
    def waiting(self) -> int:
        """Calls queued or running, or done but not yet waited for (their errors not yet raised)."""
        return len(self._pending)

    def _settle_oldest(self) -> None:
        self._pending.popleft().result()

    def wait(self) -> None:
        """Return when every queued call is done; raise the first error one of them raised."""
        while self._pending:
            self._settle_oldest()

    def close(self) -> None:
        """:meth:`wait`, then stop the thread."""
        try:
            self.wait()
        finally:
            self.cancel()

    def finish(self, *files: Any) -> None:
        """:meth:`close`, then close ``files`` (those the calls wrote to), also when a call failed."""
        try:
            self.close()
        finally:
            for file in files:
                file.close()

    def abandon(self, *files: Any) -> None:
        """:meth:`cancel`, then close ``files``: for an output being discarded."""
        self.cancel()
        for file in files:
            file.close()

    def cancel(self) -> None:
        """Drop the calls not started, wait for the one running, stop the thread (for an output being discarded)."""
        self._failed = True
        pool, self._pool = self._pool, None
        self._pending.clear()
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
