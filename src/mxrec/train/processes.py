"""Worker processes that build whole batches into shared memory: ``ImageRecordIter(preprocess_processes=N)``.

:class:`~mxrec.train.pipeline.BatchPipeline`'s threads share one GIL, and on small images the per-sample Python
(header, label, augmentation draws, staging) held under it is the whole cost, so more threads stop helping past
a core or two. A :class:`ProcessPipeline` has the same interface (``start``, ``cancel``, ``close``, iteration,
``skipped``, ``clock``) and runs the same per-batch code in ``N`` worker processes:

* **A worker opens nothing itself.** It is sent a :class:`RecordBatchRecipe` once, at start: the dataset *value*
  (the :class:`~mxrec.io.records.Records` that :func:`~mxrec.datasets.opening.open_dataset` gave the parent:
  a ``.rec``, a shard set, a mixture or a face set's faces, all of which pickle as the handful of names and
  offsets that reopen them), the loader's parameters and seeds. So a worker reads exactly the records the parent
  would, under the same names in messages, whatever the start method.
* **Batch ``b`` of an epoch is built by worker ``b mod N``**, whole, by the very code the threads run
  (:meth:`~mxrec.train.pipeline.BatchPipeline.fill`, with ``preprocess_threads`` threads of the worker's own,
  its records fetched a batch at a time by :class:`~mxrec.train.prefetch.BatchPrefetcher`). Every random
  choice comes from the stream keyed by ``(seed, epoch, record)`` (:mod:`mxrec.transforms.rng`), never from the
  worker or thread, so the batches are byte-identical to the threaded iterator's. A remote dataset's workers
  open their own connections; each follows the epochs' read plan (:meth:`~mxrec.io.records.Records.follow`),
  reading the shuffle blocks ahead along the order, and since their batches draw from the same blocks they share
  the downloads (:mod:`mxrec.io.shared_downloads`, or the dataset's block cache): each block is downloaded once.
* **Memory is bounded**: each worker writes into a ring of ``K = max(2, ceil(prefetch / N))`` batch slots in
  :mod:`multiprocessing.shared_memory` (data, labels and record ids of one batch each); batch ``b`` uses slot
  ``(b // N) mod K`` of its worker and is only sent once batch ``b - N*K``, the slot's previous occupant, has
  been handed out. The parent hands batches out **strictly in order**, copying each out of its slot (one
  ``memcpy``; a batch the caller keeps is its own, as with threads), and reports broken records as the threads
  do (:func:`~mxrec.train.pipeline.report_skipped`).
* **Restarts** (``reset()``, ``load_state_dict()``) bump a generation counter shared with the workers: queued
  batches of the old generation are skipped unbuilt, late results of it are dropped.
* **Errors** raised in a worker reach the caller at the batch they belong to, as the same exception (its class
  and message: the file, offset or record key), with the worker's traceback as a note. A worker that dies is a
  :class:`WorkerError`.
* **Nothing is left behind.** Workers are daemon processes that ignore ``SIGINT`` (Ctrl-C is the parent's to
  handle); :meth:`ProcessPipeline.close` (also on ``with`` exit, on garbage collection and at interpreter exit,
  through :func:`weakref.finalize`) tells them to stop, waits a bounded time, then terminates them and unlinks
  the shared memory. A worker whose parent died (even by ``SIGKILL``) notices within :data:`PARENT_CHECK_S`
  seconds and exits. Every wait is bounded.

The start method is ``fork`` where the platform has it (fast: nothing is pickled but the recipe), else
``spawn``; both are supported (``preprocess_start_method``). With ``spawn``, the recipe (your own ``aug_list``
steps included) must pickle.
"""

from __future__ import annotations

import contextlib
import math
import multiprocessing
import os
import pickle
import queue
import signal
import threading
import traceback
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from multiprocessing.shared_memory import SharedMemory
from typing import Any

import numpy as np

from mxrec.errors import MxrecError, ParameterError
from mxrec.image.codec import opencv
from mxrec.io.order import ReadPlan
from mxrec.io.records import Records
from mxrec.train.augment import AugmentParams
from mxrec.train.normalize import NormalizeParams
from mxrec.train.pipeline import BatchPipeline, LoadedBatch, report_skipped
from mxrec.train.prefetch import BatchPrefetcher
from mxrec.train.sample_loader import RecordSampleLoader
from mxrec.train.sampler import BatchPlan
from mxrec.train.timing import WAIT, StageClock

PARENT_CHECK_S = 1.0
"""How often an idle worker checks that its parent is alive, and the parent that its workers are."""
STOP_WAIT_S = 5.0
"""How long :meth:`ProcessPipeline.close` waits for a worker to finish its batch and stop before terminating it."""
START_METHODS = ("fork", "spawn", "forkserver")


class WorkerError(MxrecError, RuntimeError):
    """A worker process of ``ImageRecordIter(preprocess_processes=...)`` died (killed, or out of memory)."""


def default_start_method() -> str:
    """``"fork"`` where the platform has it, else ``"spawn"``."""
    return "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"


@dataclass(frozen=True)
class RecordBatchRecipe:
    """What a worker needs to build batches of records, sent once (pickled): it opens nothing itself.

    ``reader``: the dataset's records (or a face set's faces), as opened in the parent;
    ``loader_options``: :class:`~mxrec.train.sample_loader.RecordSampleLoader`'s keywords (``view`` aside);
    ``pipeline_options``: :class:`~mxrec.train.pipeline.BatchPipeline`'s (``load``, ``chunks``, ``describe``
    and ``prefetch`` aside); ``read_plan``: the epochs' reads, which the worker's reader follows (a remote
    dataset's shuffle blocks read ahead, shared with the other workers when the plan says where).
    """

    reader: Records
    augment: AugmentParams
    normalize: NormalizeParams
    loader_options: dict[str, Any] = field(default_factory=dict)
    pipeline_options: dict[str, Any] = field(default_factory=dict)
    read_plan: ReadPlan | None = None

    def open(self) -> RecordBatches:
        """The batch builder, in the worker."""
        return RecordBatches(self)


class RecordBatches:
    """A worker's batch builder: :meth:`fill` loads one plan into given arrays (records fetched per batch)."""

    def __init__(self, recipe: RecordBatchRecipe) -> None:
        opencv()  # imported before the threads start: a spawned worker's threads would each find it half-imported
        self.reader = recipe.reader
        if recipe.read_plan is not None:
            self.reader.follow(recipe.read_plan)
        self._prefetcher = BatchPrefetcher(self.reader)
        payload = self._prefetcher.payload
        loader = RecordSampleLoader(self.reader, recipe.augment, recipe.normalize,
                                    view=lambda position: memoryview(payload(position)), **recipe.loader_options)
        self._pipeline = BatchPipeline(loader.load, chunks=loader, describe=self.reader.describe, prefetch=1,
                                       **recipe.pipeline_options)

    def fill(self, plan: BatchPlan, data: np.ndarray, label: np.ndarray,
             index: np.ndarray) -> list[tuple[int, Exception]]:
        """:meth:`~mxrec.train.pipeline.BatchPipeline.fill`, with the plan's records fetched together first."""
        fetching = next(iter(self._prefetcher.plans([plan])))  # (taking the plan starts its fetch)
        return self._pipeline.fill(fetching, data, label, index)

    def close(self) -> None:
        self._pipeline.close()
        self._prefetcher.close()
        self.reader.close()


@dataclass(frozen=True)
class SlotLayout:
    """Where one batch's data, labels and record ids lie in a shared-memory slot."""

    batch_size: int
    sample_shape: tuple[int, ...]
    dtype: str
    label_width: int
    label_dtype: str = "float32"

    def _parts(self) -> list[tuple[tuple[int, ...], np.dtype, int]]:
        parts, offset = [], 0
        for shape, dtype in (((self.batch_size, *self.sample_shape), np.dtype(self.dtype)),
                             ((self.batch_size, self.label_width), np.dtype(self.label_dtype)),
                             ((self.batch_size,), np.dtype(np.int64))):
            parts.append((shape, dtype, offset))
            offset += -(-math.prod(shape) * dtype.itemsize // 64) * 64  # each part 64-byte aligned
        return parts

    @property
    def nbytes(self) -> int:
        shape, dtype, offset = self._parts()[-1]
        return offset + math.prod(shape) * dtype.itemsize

    def views(self, buffer: memoryview) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(data, label, index)`` over ``buffer`` (a slot)."""
        return tuple(np.ndarray(shape, dtype, buffer=buffer, offset=offset)  # type: ignore[return-value]
                     for shape, dtype, offset in self._parts())

    def copy_out(self, buffer: memoryview) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Copies of ``(data, label, index)`` in ``buffer``: the slot is free again once this returns."""
        return tuple(view.copy() for view in self.views(buffer))  # type: ignore[return-value]


def _portable(exc: BaseException) -> tuple:
    """``exc`` as it can cross to the parent: pickled when it survives a round trip, else class and message."""
    try:
        data = pickle.dumps(exc)
        pickle.loads(data)
        return ("pickle", data)
    except Exception:  # an error whose constructor does not take its own args back: class and message
        return ("text", type(exc).__module__, type(exc).__qualname__, str(exc))


def _revive(portable: tuple) -> BaseException:
    """The exception :func:`_portable` described (same class and message)."""
    if portable[0] == "pickle":
        return pickle.loads(portable[1])
    _, module, qualname, message = portable
    try:
        cls = getattr(__import__(module, fromlist=[qualname]), qualname)
        exc = cls.__new__(cls)
        Exception.__init__(exc, message)
        str(exc)  # a class whose __str__ needs attributes its constructor would have set
        return exc
    except Exception:
        return MxrecError(f"{qualname}: {message}")


@contextlib.contextmanager
def _sigint_ignored() -> Iterator[None]:
    """``SIGINT`` ignored while a worker starts, so the worker inherits that (fork, and spawn: an ignored signal
    stays ignored across ``exec``, and Python then installs no handler of its own) before any of its code runs;
    off the main thread (where Python cannot change handlers) the worker's own first line does it."""
    previous = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or previous is None:  # (None: set outside Python)
        yield
        return
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _work(recipe: RecordBatchRecipe, layout: SlotLayout, slot_names: list[str], tasks: Any, results: Any,
          generation: Any) -> None:
    """A worker's loop: build each batch it is sent into its slot, until told to stop or the parent is gone."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: the parent handles it
    results.cancel_join_thread()  # never block exiting on results nobody will read (a dead parent)
    parent = multiprocessing.parent_process()
    slots = [SharedMemory(name) for name in slot_names]
    views = [layout.views(slot.buf) for slot in slots]
    builder = recipe.open()
    try:
        while True:
            try:
                task = tasks.get(timeout=PARENT_CHECK_S)
            except queue.Empty:
                if parent is not None and not parent.is_alive():
                    return
                continue
            if task is None:
                return
            gen, seq, slot, plan = task
            if gen != generation.value:  # dropped by a restart before it was built
                continue
            try:
                skipped = builder.fill(plan, *views[slot])
            except Exception as exc:
                results.put(("error", gen, seq, _portable(exc), traceback.format_exc()))
                continue
            results.put(("done", gen, seq, [(position, _portable(error)) for position, error in skipped], None))
    finally:
        builder.close()
        del views
        for slot in slots:
            slot.close()


def _shutdown(owner: int, processes: list, tasks: list, results: Any, slots: list[SharedMemory],
              generation: Any) -> None:
    """Stop the workers (bounded waits, then terminate) and free the shared memory -- in ``owner``, the process
    that started them: a forked child's copy of an unclosed pipeline, collected there, leaves them be. Idempotent."""
    if os.getpid() != owner:
        return
    generation.value += 1  # queued batches are skipped
    for task_queue, process in zip(tasks[:len(processes)], processes, strict=True):  # (a failed start: a queue more)
        if process.is_alive():
            task_queue.put(None)
    for process in processes:
        process.join(STOP_WAIT_S)
        if process.is_alive():
            process.terminate()
            process.join(STOP_WAIT_S)
        if process.is_alive():
            process.kill()
            process.join()
    for q in (*tasks, results):
        q.cancel_join_thread()
        q.close()
    for slot in slots:
        with contextlib.suppress(BufferError):  # a view still exported somewhere: the mapping goes with it
            slot.close()
        slot.unlink()
    processes.clear()
    slots.clear()


class ProcessPipeline:
    """:class:`~mxrec.train.pipeline.BatchPipeline`'s interface over ``processes`` worker processes (module
    docstring): batches built whole by ``recipe`` in shared-memory slots, handed out in order.

    Parameters
    ----------
    recipe
        Sent to each worker (pickled), which builds its batches with ``recipe.open().fill(plan, data, label,
        index)``.
    processes
        Worker processes, >= 1.
    batch_size, sample_shape, dtype, label_width, label_dtype
        The batches' arrays.
    prefetch
        Batches built ahead, at least 2 per worker.
    describe
        Names a record (a position) in the warnings about broken records.
    start_method
        ``"fork"``, ``"spawn"`` or ``"forkserver"``; ``None``: :func:`default_start_method`.

    Raises
    ------
    ParameterError
        ``processes`` < 1, ``prefetch`` < 1, or an unknown start method.
    """

    def __init__(self, recipe: RecordBatchRecipe, *, processes: int, batch_size: int,
                 sample_shape: tuple[int, ...], dtype: np.dtype | str, label_width: int,
                 label_dtype: str = "float32", prefetch: int, describe: Callable[[int], str] = str,
                 start_method: str | None = None) -> None:
        if processes < 1:
            raise ParameterError(f"a process pipeline needs preprocess_processes >= 1, got {processes}")
        if prefetch < 1:
            raise ParameterError(f"prefetch_buffer must be >= 1, got {prefetch}")
        method = default_start_method() if start_method is None else start_method
        if method not in START_METHODS or method not in multiprocessing.get_all_start_methods():
            raise ParameterError(f"preprocess_start_method must be one of "
                                 f"{', '.join(multiprocessing.get_all_start_methods())}, not {start_method!r}")
        self.recipe = recipe
        self.num_processes = processes
        self.start_method = method
        self.slots_per_worker = max(2, -(-prefetch // processes))
        self.layout = SlotLayout(batch_size, tuple(sample_shape), np.dtype(dtype).str, label_width, label_dtype)
        self._describe = describe
        self._processes: list = []
        self._slots: list[SharedMemory] = []  # worker w's slot k is _slots[w * slots_per_worker + k]
        self._tasks: list = []
        self._results: Any = None
        self._generation: Any = None
        self._finalizer: weakref.finalize | None = None
        self._plans: Iterator[BatchPlan] = iter(())
        self._pads: dict[int, int] = {}  # batch number -> its pad, for the batches sent and not handed out
        self._sent = 0
        self._next = 0
        self._arrived: dict[int, tuple] = {}
        self.skipped: list[str] = []
        self.clock: StageClock | None = None  # times the waits for batches (the workers' stages are not timed)

    @property
    def pids(self) -> list[int]:
        """The worker processes' ids (none before the first :meth:`start`)."""
        return [process.pid for process in self._processes]

    # -- control -----------------------------------------------------------------------

    def _launch(self) -> None:
        ctx = multiprocessing.get_context(self.start_method)
        n, k = self.num_processes, self.slots_per_worker
        self._generation = ctx.RawValue("q", 0)
        self._results = ctx.Queue()
        try:
            for _ in range(n * k):
                self._slots.append(SharedMemory(create=True, size=max(1, self.layout.nbytes)))
            for w in range(n):
                tasks = ctx.Queue()
                self._tasks.append(tasks)
                names = [slot.name for slot in self._slots[w * k:(w + 1) * k]]
                process = ctx.Process(target=_work, name=f"mxrec-worker-{w}", daemon=True,
                                      args=(self.recipe, self.layout, names, tasks, self._results, self._generation))
                with _sigint_ignored():  # from its first instruction on: a Ctrl-C during its start-up too
                    process.start()
                self._processes.append(process)
        finally:  # also when a start failed: what was made is stopped and freed with the pipeline
            self._finalizer = weakref.finalize(self, _shutdown, os.getpid(), self._processes, self._tasks,
                                               self._results, self._slots, self._generation)

    def start(self, plans: Iterator[BatchPlan] | list[BatchPlan]) -> None:
        """Drop whatever is in flight and start loading ``plans`` (the workers start on the first call)."""
        self.cancel()
        if self._finalizer is None:
            self._launch()
        self._plans = iter(plans)
        self._top_up()

    def cancel(self) -> None:
        """Stop loading: queued batches are skipped by the workers, results still to come are dropped."""
        if self._generation is not None:
            self._generation.value += 1
        self._plans = iter(())
        self._pads.clear()
        self._arrived.clear()
        self._next = self._sent

    def close(self) -> None:
        """Stop the workers and free the shared memory. Idempotent."""
        self.cancel()
        if self._finalizer is not None:
            self._finalizer()

    # -- loading -------------------------------------------------------------------------

    def __iter__(self) -> ProcessPipeline:
        return self

    def __next__(self) -> LoadedBatch:
        if self._next == self._sent:
            raise StopIteration
        seq = self._next
        clock = self.clock
        started = clock.now() if clock is not None else 0
        kind, _, _, payload, worker_traceback = self._wait_for(seq)
        if clock is not None:
            clock.lap(WAIT, started)
        if kind == "error":
            self.cancel()
            exc = _revive(payload)
            if hasattr(exc, "add_note"):
                exc.add_note(f"raised in worker process {seq % self.num_processes}:\n{worker_traceback}")
            raise exc
        n, k = self.num_processes, self.slots_per_worker
        data, label, index = self.layout.copy_out(self._slots[(seq % n) * k + (seq // n) % k].buf)
        self._next += 1
        pad = self._pads.pop(seq)
        report_skipped([(position, _revive(error)) for position, error in payload], self._describe, self.skipped,
                       stacklevel=2)
        self._top_up()
        return LoadedBatch(data, label, index, pad)

    def _wait_for(self, seq: int) -> tuple:
        """The result of batch ``seq`` of this generation, waiting for it (checking the workers are alive)."""
        arrived, generation = self._arrived, self._generation.value
        while seq not in arrived:
            try:
                result = self._results.get(timeout=PARENT_CHECK_S)
            except queue.Empty:
                dead = [p for p in self._processes if p.exitcode is not None]
                if dead:
                    self.cancel()
                    raise WorkerError(f"ImageRecordIter worker process {dead[0].name} (pid {dead[0].pid}) exited "
                                      f"with code {dead[0].exitcode}") from None
                continue
            if result[1] == generation:
                arrived[result[2]] = result
        return arrived.pop(seq)

    def _top_up(self) -> None:
        n, k = self.num_processes, self.slots_per_worker
        generation = self._generation.value
        while self._sent - self._next < n * k:
            plan = next(self._plans, None)
            if plan is None:
                return
            seq = self._sent
            self._pads[seq] = plan.pad
            self._tasks[seq % n].put((generation, seq, (seq // n) % k, plan))
            self._sent += 1

