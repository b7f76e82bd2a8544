"""The threaded batch loader: samples decoded in parallel straight into preallocated batch buffers.

A :class:`BatchPipeline` takes :class:`~mxrec.train.sampler.BatchPlan` s and a
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
* A broken record (:data:`BROKEN_RECORD_ERRORS`) follows mxrec's one rule,
  :func:`load_decodable`, shared with :mod:`mxrec.torch`: with
  ``on_broken="skip"`` the next record that decodes takes its place (the
  batch stays full, ``pad`` is unchanged), and it is counted in
  :attr:`BatchPipeline.skipped` and reported with a
  :class:`BrokenRecordWarning`; with ``on_broken="error"`` it stops
  iteration with that error, naming the record. Any other error in a loader
  also reaches the caller. Nothing waits forever: every task finishes,
  successfully or not.
"""

from __future__ import annotations

import sys
import warnings
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

import numpy as np

from mxrec.errors import HeaderError, ImageDecodeError, ParameterError
from mxrec.train.sampler import EMPTY_SLOT, BatchPlan
from mxrec.train.timing import WAIT, StageClock

BROKEN_RECORD_ERRORS = (ImageDecodeError, HeaderError)
"""The errors that make a record *broken*: its image does not decode, or its payload is too short for its header."""
SampleLoader = Callable[[int, int, np.ndarray, np.ndarray], int]
OnBroken = Literal["skip", "error"]
ON_BROKEN = ("skip", "error")
T = TypeVar("T")


class ChunkLoader(Protocol):
    """A sample loader that writes a chunk of slots at once (:class:`~mxrec.train.sample_loader.RecordSampleLoader`):
    ``staging(capacity)`` is the calling thread's staging area, ``stage(staged, k, position, epoch, label_slot) ->
    record id`` prepares sample ``k`` of the chunk (and writes its label), ``finish(staged, data, n)`` writes the
    ``n`` staged samples into ``data`` (the chunk's slots)."""

    def staging(self, capacity: int) -> Any: ...

    def stage(self, staged: Any, k: int, position: int, epoch: int, label: np.ndarray) -> int: ...

    def finish(self, staged: Any, data: np.ndarray, n: int) -> None: ...


class BrokenRecordWarning(UserWarning):
    """A record whose image could not be decoded was skipped."""


def check_on_broken(on_broken: object) -> None:
    """Raise :class:`~mxrec.errors.ParameterError` unless ``on_broken`` is ``"skip"`` or ``"error"``."""
    if on_broken not in ON_BROKEN:
        raise ParameterError(f"on_broken must be 'skip' or 'error', not {on_broken!r}")


def check_pipeline(num_threads: int, prefetch: int, on_broken: object) -> None:
    """Raise :class:`~mxrec.errors.ParameterError` for a thread count or prefetch below 1, or a wrong ``on_broken``."""
    if num_threads < 1:
        raise ParameterError(f"preprocess_threads must be >= 1, got {num_threads}")
    if prefetch < 1:
        raise ParameterError(f"prefetch_buffer must be >= 1, got {prefetch}")
    check_on_broken(on_broken)


def load_decodable(position: int, count: int, load: Callable[[int], T], *, on_broken: OnBroken,
                   describe: Callable[[int], str]) -> tuple[T, list[tuple[int, Exception]]]:
    """``load(position)``, with mxrec's one rule for broken records (iterators and PyTorch datasets alike).

    Parameters
    ----------
    position
        The record to load, ``0 <= position < count``.
    count
        The number of records (positions wrap around after the last).
    load
        Loads one record by position; raises one of :data:`BROKEN_RECORD_ERRORS` for a broken record.
    on_broken
        ``"error"``: a broken record raises its error, the message naming the record (``describe``).
        ``"skip"``: the next record that loads is used in its place (``position + 1``, ``+ 2``, ... wrapping).
    describe
        Names a record (key and file) in messages.

    Returns
    -------
    tuple
        ``load``'s result and the ``(position, error)`` of each broken record skipped on the way; the caller
        reports those (:func:`report_skipped`).
    """
    skipped: list[tuple[int, Exception]] = []
    for attempt in range(count):
        at = (position + attempt) % count
        try:
            return load(at), skipped
        except BROKEN_RECORD_ERRORS as exc:
            if on_broken == "error":
                raise type(exc)(f"{describe(at)}: {exc}") from exc
            skipped.append((at, exc))
    raise ImageDecodeError(f"{describe(position)}: no record decodes (all {count} are broken)")


def report_skipped(skipped: list[tuple[int, Exception]], describe: Callable[[int], str], into: list[str],
                   stacklevel: int) -> None:
    """Warn (:class:`BrokenRecordWarning`) about each skipped record and append its name to ``into``."""
    for position, exc in skipped:
        what = describe(position)
        into.append(what)
        warnings.warn(f"{what}: broken record skipped, the next record is used in its place ({exc})",
                      BrokenRecordWarning, stacklevel=stacklevel + 1)


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

    def __init__(self, data: np.ndarray, label: np.ndarray, index: np.ndarray) -> None:
        self.data, self.label, self.index = data, label, index

    @classmethod
    def allocate(cls, batch_size: int, sample_shape: tuple[int, ...], dtype: np.dtype, label_width: int,
                 label_dtype: np.dtype) -> _Buffers:
        return cls(np.empty((batch_size, *sample_shape), dtype), np.empty((batch_size, label_width), label_dtype),
                   np.empty(batch_size, np.int64))

    def unreferenced(self) -> bool:
        # 2 = this object's attribute + getrefcount's own argument.
        getrefcount = sys.getrefcount
        return getrefcount(self.data) == 2 and getrefcount(self.label) == 2 and getrefcount(self.index) == 2


class BatchPipeline:
    """Loads batches on ``num_threads`` threads, keeping ``prefetch`` batches in flight.

    ``num_records`` is the number of positions (a broken record's replacement is searched among them);
    ``describe(position)`` names a record in warnings and errors (its key and file). With ``chunks`` (a
    :class:`ChunkLoader`) each task stages its slots' samples and writes them with one ``finish`` call instead
    of calling ``load`` for each.
    """

    def __init__(self, load: SampleLoader, *, num_records: int, batch_size: int, sample_shape: tuple[int, ...],
                 dtype: np.dtype, label_width: int, label_dtype: str | np.dtype = "float32", num_threads: int,
                 prefetch: int, on_broken: OnBroken = "skip",
                 describe: Callable[[int], str] = str, chunks: ChunkLoader | None = None) -> None:
        check_pipeline(num_threads, prefetch, on_broken)
        self._load = load
        self._chunks = chunks
        self.num_records = num_records
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
            skipped: list[tuple[int, Exception]] = []
            for future in futures:
                skipped.extend(future.result())
            if clock is not None:
                clock.lap(WAIT, started)
        except BaseException:
            self._handed_out.append(buffers)
            self.cancel()
            raise
        report_skipped(skipped, self._describe, self.skipped, stacklevel=2)
        # The batch refers to the buffers before they join the recycling queue, so they are not reused under it.
        batch = LoadedBatch(buffers.data, buffers.label, buffers.index, plan.pad)
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

    def fill(self, plan: BatchPlan, data: np.ndarray, label: np.ndarray,
             index: np.ndarray) -> list[tuple[int, Exception]]:
        """Load ``plan`` into the given batch arrays now, on this pipeline's threads (what a worker process of
        :mod:`mxrec.train.processes` does with each batch it is given).

        Parameters
        ----------
        plan
            The batch's slots.
        data, label, index
            ``(batch_size, *sample_shape)``, ``(batch_size, label_width)`` and ``(batch_size,)`` arrays.

        Returns
        -------
        list
            The ``(position, error)`` of each broken record skipped (:func:`report_skipped` reports them).

        Raises
        ------
        Exception
            The first error of a slot (every slot's task has finished by then).
        """
        buffers = _Buffers(data, label, index)
        chunks = [(start, min(start + self._chunk, len(plan))) for start in range(0, len(plan), self._chunk)]
        if self.num_threads == 1:
            return [broken for start, stop in chunks for broken in self._load_slots(plan, buffers, start, stop)]
        if self._executor is None:
            self._executor = ThreadPoolExecutor(self.num_threads, thread_name_prefix="mxrec-load")
        futures = [self._executor.submit(self._load_slots, plan, buffers, start, stop) for start, stop in chunks]
        wait(futures)
        return [broken for future in futures for broken in future.result()]

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
        return _Buffers.allocate(self.batch_size, self.sample_shape, self.dtype, self.label_width, self.label_dtype)

    def _load_slots(self, plan: BatchPlan, buffers: _Buffers, start: int, stop: int) -> list[tuple[int, Exception]]:
        """Load slots ``start..stop-1`` of ``plan``; return the broken records skipped (position, error)."""
        if self._chunks is not None:
            return self._load_chunk(plan, buffers, start, stop)
        skipped: list[tuple[int, Exception]] = []
        data, label, index = buffers.data, buffers.label, buffers.index
        load, count, on_broken, describe = self._load, self.num_records, self.on_broken, self._describe
        positions, epochs = plan.positions[start:stop].tolist(), plan.epochs[start:stop].tolist()
        for slot, position, epoch in zip(range(start, stop), positions, epochs, strict=True):
            if position == EMPTY_SLOT:
                data[slot] = 0
                label[slot] = 0
                index[slot] = -1
                continue
            try:
                index[slot] = load(position, epoch, data[slot], label[slot])
            except BROKEN_RECORD_ERRORS:  # the rare path: the one rule, from this record on
                record_id, broken = load_decodable(
                    position, count, lambda at, e=epoch, s=slot: load(at, e, data[s], label[s]),
                    on_broken=on_broken, describe=describe)
                index[slot] = record_id
                skipped.extend(broken)
        return skipped

    def _load_chunk(self, plan: BatchPlan, buffers: _Buffers, start: int, stop: int) -> list[tuple[int, Exception]]:
        """:meth:`_load_slots` with a :class:`ChunkLoader`: every slot staged, then written at once."""
        skipped: list[tuple[int, Exception]] = []
        data, label, index = buffers.data, buffers.label, buffers.index
        chunks, count, on_broken, describe = self._chunks, self.num_records, self.on_broken, self._describe
        staged, stage = chunks.staging(self._chunk), chunks.stage
        positions, epochs = plan.positions[start:stop].tolist(), plan.epochs[start:stop].tolist()
        empty = []
        for k, (position, epoch) in enumerate(zip(positions, epochs, strict=True)):
            slot = start + k
            if position == EMPTY_SLOT:
                empty.append(slot)
                continue
            try:
                index[slot] = stage(staged, k, position, epoch, label[slot])
            except BROKEN_RECORD_ERRORS:  # the rare path: the one rule, from this record on
                record_id, broken = load_decodable(
                    position, count, lambda at, k=k, e=epoch, s=slot: stage(staged, k, at, e, label[s]),
                    on_broken=on_broken, describe=describe)
                index[slot] = record_id
                skipped.extend(broken)
        if len(empty) < stop - start:
            chunks.finish(staged, data[start:stop], stop - start)
        for slot in empty:  # staged images of earlier chunks were written there: cleared
            data[slot] = 0
            label[slot] = 0
            index[slot] = -1
        return skipped
