"""The threaded batch loader: samples decoded in parallel straight into preallocated batch buffers.

A :class:`BatchPipeline` takes :class:`~mxrec.sampler.BatchPlan` s and a
*sample loader* -- ``load(position, epoch, data_slot, label_slot) -> record
id``, which decodes, augments and writes one record into its slot -- and runs
the loader on a pool of threads. The codecs and OpenCV release the GIL, so
threads scale without the copies and start-up cost of processes.

* Each batch is cut into chunks of slots, one task per chunk; up to
  ``prefetch`` batches are in flight, so at most ``prefetch`` batch buffers
  are being written at any time.
* Buffers are recycled, but only when nothing outside the pipeline still
  refers to them: a batch the caller keeps (or any view of it) is never
  overwritten; a new buffer is allocated instead.
* Results do not depend on the thread count: the loader derives each
  sample's random stream from ``(epoch, position)``, not from the thread.
* A broken record (:data:`BROKEN_RECORD_ERRORS`) is, with
  ``on_broken="skip"``, counted in :attr:`BatchPipeline.skipped`, reported
  with a warning, and its slot moved to the end of the batch and filled with
  a copy of a good sample of the same batch, counted in ``pad``; with
  ``on_broken="error"`` it stops iteration with that error. Any other error
  in a loader also reaches the caller. Nothing waits forever: every task
  finishes, successfully or not.
"""

from __future__ import annotations

import sys
import warnings
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Literal

import numpy as np

from mxrec.errors import HeaderError, ImageDecodeError, ParameterError
from mxrec.train.sampler import EMPTY_SLOT, BatchPlan
from mxrec.train.timing import WAIT, StageClock

BROKEN_RECORD_ERRORS = (ImageDecodeError, HeaderError)
SampleLoader = Callable[[int, int, np.ndarray, np.ndarray], int]
OnBroken = Literal["skip", "error"]


class BrokenRecordWarning(UserWarning):
    """A record whose image could not be decoded was skipped."""


@dataclass
class LoadedBatch:
    """A finished batch: ``data`` (B, ...), ``label`` (B, label_width), ``index`` (B,) int64 record ids, ``pad``."""

    data: np.ndarray
    label: np.ndarray
    index: np.ndarray
    pad: int


class _Buffers:
    """One batch's arrays. Reusable when nothing but this object refers to them."""

    __slots__ = ("data", "index", "label")

    def __init__(self, batch_size: int, sample_shape: tuple[int, ...], dtype: np.dtype, label_width: int,
                 label_dtype: np.dtype) -> None:
        self.data = np.empty((batch_size, *sample_shape), dtype)
        self.label = np.empty((batch_size, label_width), label_dtype)
        self.index = np.empty(batch_size, np.int64)

    def unreferenced(self) -> bool:
        # 2 = this object's attribute + getrefcount's own argument.
        getrefcount = sys.getrefcount
        return getrefcount(self.data) == 2 and getrefcount(self.label) == 2 and getrefcount(self.index) == 2


class BatchPipeline:
    """Loads batches on ``num_threads`` threads, keeping ``prefetch`` batches in flight.

    ``describe(position)`` names a record in warnings and errors (its key and file).
    """

    def __init__(self, load: SampleLoader, *, batch_size: int, sample_shape: tuple[int, ...], dtype: np.dtype,
                 label_width: int, label_dtype: str | np.dtype = "float32", num_threads: int, prefetch: int,
                 on_broken: OnBroken = "skip",
                 describe: Callable[[int], str] = str) -> None:
        if num_threads < 1:
            raise ParameterError(f"preprocess_threads must be >= 1, got {num_threads}")
        if prefetch < 1:
            raise ParameterError(f"prefetch_buffer must be >= 1, got {prefetch}")
        if on_broken not in ("skip", "error"):
            raise ParameterError(f"on_broken must be 'skip' or 'error', not {on_broken!r}")
        self._load = load
        self.batch_size = batch_size
        self.sample_shape = tuple(sample_shape)
        self.dtype = np.dtype(dtype)
        self.label_width = label_width
        self.label_dtype = np.dtype(label_dtype)
        self.num_threads = num_threads
        self.prefetch = prefetch
        self.on_broken = on_broken
        self._describe = describe
        self._chunk = max(1, -(-batch_size // (2 * num_threads)))
        self._executor: ThreadPoolExecutor | None = None
        self._plans: Iterator[BatchPlan] = iter(())
        self._in_flight: deque[tuple[BatchPlan, _Buffers, list[Future]]] = deque()
        self._handed_out: deque[_Buffers] = deque()
        self.skipped: list[str] = []
        self.clock: StageClock | None = None  # set to time the consumer's waits (:mod:`mxrec.train.timing`)

    # -- control -----------------------------------------------------------------------

    def start(self, plans: Iterator[BatchPlan] | list[BatchPlan]) -> None:
        """Drop whatever is in flight and start loading ``plans``."""
        self.cancel()
        self._plans = iter(plans)
        self._top_up()

    def cancel(self) -> None:
        """Stop loading: pending tasks are cancelled, running ones are waited for."""
        in_flight, self._in_flight = self._in_flight, deque()
        for _, _, futures in in_flight:
            for future in futures:
                future.cancel()
        for _, buffers, futures in in_flight:
            for future in futures:
                if not future.cancelled():
                    future.exception()  # wait; errors of abandoned batches are not the caller's concern
            self._handed_out.append(buffers)
        self._plans = iter(())

    def close(self) -> None:
        """Cancel and shut the threads down. Idempotent."""
        self.cancel()
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None

    def __del__(self) -> None:
        executor = self.__dict__.get("_executor")
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)

    # -- loading -------------------------------------------------------------------------

    def __iter__(self) -> BatchPipeline:
        return self

    def __next__(self) -> LoadedBatch:
        if not self._in_flight:
            raise StopIteration
        plan, buffers, futures = self._in_flight.popleft()
        clock = self.clock
        started = clock.now() if clock is not None else 0
        try:
            broken: list[tuple[int, Exception]] = []
            for future in futures:
                broken.extend(future.result())
            if clock is not None:
                clock.lap(WAIT, started)
        except BaseException:
            self._handed_out.append(buffers)
            self.cancel()
            raise
        pad = plan.pad
        if broken:
            pad = self._replace_broken(plan, buffers, broken)
        # The batch refers to the buffers before they join the recycling queue, so they are not reused under it.
        batch = LoadedBatch(buffers.data, buffers.label, buffers.index, pad)
        self._handed_out.append(buffers)
        self._top_up()
        return batch

    def _top_up(self) -> None:
        while len(self._in_flight) < self.prefetch:
            plan = next(self._plans, None)
            if plan is None:
                return
            buffers = self._buffers()
            executor = self._executor
            if executor is None:
                executor = self._executor = ThreadPoolExecutor(self.num_threads, thread_name_prefix="mxrec-load")
            futures = [executor.submit(self._load_slots, plan, buffers, start, min(start + self._chunk, len(plan)))
                       for start in range(0, len(plan), self._chunk)]
            self._in_flight.append((plan, buffers, futures))

    def _buffers(self) -> _Buffers:
        """A free buffer set: the oldest handed-out one nobody refers to any more, or a new one."""
        handed_out = self._handed_out
        for _ in range(len(handed_out)):
            buffers = handed_out.popleft()
            if buffers.unreferenced():
                return buffers
            handed_out.append(buffers)
        # Keep the list from growing without bound when the caller holds on to every batch.
        while len(handed_out) > self.prefetch + 2:
            handed_out.popleft()
        return _Buffers(self.batch_size, self.sample_shape, self.dtype, self.label_width, self.label_dtype)

    def _load_slots(self, plan: BatchPlan, buffers: _Buffers, start: int, stop: int) -> list[tuple[int, Exception]]:
        """Load slots ``start..stop-1`` of ``plan``; return the broken ones (slot, error)."""
        broken = []
        data, label, index = buffers.data, buffers.label, buffers.index
        load = self._load
        positions, epochs = plan.positions[start:stop].tolist(), plan.epochs[start:stop].tolist()
        for slot, position, epoch in zip(range(start, stop), positions, epochs, strict=True):
            if position == EMPTY_SLOT:
                data[slot] = 0
                label[slot] = 0
                index[slot] = -1
                continue
            try:
                index[slot] = load(position, epoch, data[slot], label[slot])
            except BROKEN_RECORD_ERRORS as exc:
                if self.on_broken == "error":
                    raise type(exc)(f"{self._describe(position)}: {exc}") from exc
                broken.append((slot, exc))
        return broken

    def _replace_broken(self, plan: BatchPlan, buffers: _Buffers, broken: list[tuple[int, Exception]]) -> int:
        """Move broken slots to the end, fill them with copies of good samples; return the new ``pad``."""
        for slot, exc in broken:
            what = self._describe(int(plan.positions[slot]))
            self.skipped.append(what)
            warnings.warn(f"{what}: broken record skipped ({exc})", BrokenRecordWarning, stacklevel=3)
        bad = {slot for slot, _ in broken}
        real = len(plan) - plan.pad
        good = [s for s in range(len(plan)) if s not in bad]
        order = good + sorted(bad)
        for array in (buffers.data, buffers.label, buffers.index):
            array[:] = array[order]
        good_real = sum(1 for s in good if s < real)
        if good:
            for i, slot in enumerate(range(len(good), len(plan))):
                for array in (buffers.data, buffers.label, buffers.index):
                    array[slot] = array[i % len(good)]
        else:
            buffers.data[:] = 0
            buffers.label[:] = 0
            buffers.index[:] = -1
        return len(plan) - good_real
