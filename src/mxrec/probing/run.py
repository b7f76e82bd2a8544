"""Run the user's own loader briefly and record everything the checks and the advice need.

:func:`probe` is the entry point (``mxrec.probe``). It takes

* a dataset (a local ``.rec``, a URL, a shard set) and ``ImageRecordIter``'s parameters: it runs an
  :class:`~mxrec.train.record_iter.ImageRecordIter` with the stage timers of :mod:`mxrec.train.timing`
  attached, so the breakdown is the real pipeline's;
* a ``torch.utils.data.DataLoader`` (over an ``mxrec.torch`` dataset or any other; workers, fork or
  spawn as configured): its batches are timed as the training loop sees them, and the stages are timed in
  this process for an ``ImageRecordDataset`` with ``preprocess`` (in the run itself without workers, else
  over a few extra batches);
* a dataset with ``records=True``: a bare record read (``read_batch`` of ``batch_size`` records), storage only.

The first ``warmup`` batches are not measured (threads starting, caches filling). The run stops after
``batches`` batches or ``seconds`` seconds, whichever comes first. ``step_time`` (seconds) simulates a training
step consuming each batch, so "input-bound or not" is answered for that speed. Each batch's dtype, shape, pad,
labels and per-channel values (of its first samples) are recorded for :mod:`~mxrec.probing.checks`; the
machine is sampled by :mod:`~mxrec.probing.machine`.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mxrec.datasets.opening import dataset_name, hold_dataset
from mxrec.datasets.samples import open_samples
from mxrec.errors import ParameterError
from mxrec.format.header import unpack_header
from mxrec.image.headers import image_shape
from mxrec.io.records import IOStats
from mxrec.probing.labels import DatasetLabels, dataset_labels
from mxrec.probing.machine import MachineRecord, MachineSampler
from mxrec.train.record_iter import ImageRecordIter
from mxrec.train.sampler import resolve_parts
from mxrec.train.timing import STAGES, WAIT, StageClock

DEFAULT_BATCHES = 50
DEFAULT_SECONDS = 20.0
IMAGE_SAMPLE = 32  # records whose stored image size is read
VALUE_SAMPLES = 4  # samples of each batch whose values are recorded


@dataclass
class BatchFacts:
    """What one batch looked like: container, dtype, shapes, pad, labels, per-channel sums of its first samples."""

    container: str
    dtype: str
    shape: tuple[int, ...]
    label_dtype: str
    label_shape: tuple[int, ...]
    pad: int
    labels: np.ndarray
    contiguous: bool
    pinned: bool | None
    channel_sum: np.ndarray
    channel_sumsq: np.ndarray
    channel_min: np.ndarray
    channel_max: np.ndarray
    values: int  # values per channel summed


@dataclass
class ProbeRun:
    """The raw measurements of one run (checks and advice are derived from it)."""

    dataset: str
    mode: str  # "iterator", "loader" or "records"
    params: dict[str, Any]
    warmup: int
    step_time: float
    batch_times: list[tuple[float, int, int]] = field(default_factory=list)  # (end time, samples, bytes)
    seconds: float = 0.0
    stages: dict = field(default_factory=dict)  # StageClock.snapshot()
    stages_where: str = "run"  # "run", or "side" (measured in this process beside a worker loader)
    machine: MachineRecord | None = None
    batches: list[BatchFacts] = field(default_factory=list)
    images: dict[str, Any] = field(default_factory=dict)
    remote: dict[str, Any] | None = None
    threads: int = 1
    prefetch: int = 1
    sample: np.ndarray | None = None  # up to 8 samples of the first batch, as produced
    epoch_batches: int | None = None  # batches per epoch (pad is allowed on the last only)
    batch_indices: list[int] = field(default_factory=list)  # each probed batch's number in its epoch
    #: The dataset's labels (:func:`~mxrec.probing.labels.dataset_labels`), to compare the batches' with; or
    #: ``None``, and then :attr:`labels_note` says why.
    dataset_labels: DatasetLabels | None = None
    labels_note: str = ""
    shuffle_block: int | None = None  # records per shuffle block read (0: a global shuffle); None: no shuffle
    shuffle_window: int | None = None  # blocks open at once of that block shuffle

    @property
    def samples(self) -> int:
        return sum(n for _, n, _ in self.batch_times)

    @property
    def images_per_second(self) -> float:
        return self.samples / self.seconds if self.seconds > 0 else 0.0


def _params_path(params: dict[str, Any]) -> str:
    return dataset_name(params.get("path_imgrec", ""))


def _batch_facts(data: Any, label: Any, pad: int) -> BatchFacts:
    container = "numpy"
    pinned = None
    contiguous = True
    if not isinstance(data, np.ndarray):  # a torch tensor
        container = f"torch.{type(data).__name__}"
        contiguous = bool(data.is_contiguous())
        pinned = bool(data.is_pinned()) if hasattr(data, "is_pinned") else None
        data = data.detach().cpu().numpy() if hasattr(data, "detach") else np.asarray(data)
    else:
        contiguous = data.flags.c_contiguous
    label_array = label if isinstance(label, np.ndarray) else np.asarray(
        label.detach().cpu().numpy() if hasattr(label, "detach") else label)
    real = max(len(data) - pad, 1)
    head = np.asarray(data[:min(VALUE_SAMPLES, real)], np.float64)
    # (N, C, H, W): statistics per channel; anything else as one channel
    per_channel = head.transpose(1, 0, 2, 3).reshape(head.shape[1], -1) if head.ndim == 4 else head.reshape(1, -1)
    return BatchFacts(container, str(data.dtype), tuple(data.shape), str(label_array.dtype),
                      tuple(label_array.shape), pad, label_array[:real].copy(), contiguous, pinned,
                      per_channel.sum(axis=1), (per_channel ** 2).sum(axis=1), per_channel.min(axis=1),
                      per_channel.max(axis=1), per_channel.shape[1])


def stored_images(reader: Any, count: int = IMAGE_SAMPLE) -> dict[str, Any]:
    """Median encoded size and pixel size of ``count`` records spread over ``reader`` (from the headers only)."""
    total = len(reader)
    if not total:
        return {}
    positions = np.unique(np.linspace(0, total - 1, min(count, total)).astype(np.int64)).tolist()
    sizes, shapes, formats = [], [], set()
    for payload in reader.read_batch(positions):
        _, start = unpack_header(payload)
        image = memoryview(payload)[start:]
        sizes.append(len(image))
        try:
            shape = image_shape(image)
        except Exception:  # a damaged header is verify's business, not the probe's
            shape = None
        if shape is not None:
            shapes.append(shape[:2])
            formats.add("jpeg" if bytes(image[:2]) == b"\xff\xd8" else "png")
    out: dict[str, Any] = {"sampled": len(positions), "median_bytes": int(np.median(sizes)),
                           "formats": sorted(formats)}
    if shapes:
        heights, widths = zip(*shapes, strict=True)
        out["median_height"], out["median_width"] = int(np.median(heights)), int(np.median(widths))
        out["sizes"] = [[int(h), int(w)] for h, w in shapes]
    return out


def _remote_counters(before: IOStats, after: IOStats) -> dict[str, Any] | None:
    """Ranged requests, bytes and block-cache lookups between two :meth:`~mxrec.io.records.Records.io_stats`,
    or ``None`` when the reader never asked its storage for anything (a local file)."""
    if not (after.requests or after.cache_hits or after.cache_misses):
        return None
    delta = after - before
    return {"requests": delta.requests, "bytes": delta.bytes, "cache_hits": delta.cache_hits,
            "cache_misses": delta.cache_misses, "cached": bool(after.cache_hits or after.cache_misses)}


def _stop(run: ProbeRun, started: float, batches: int | None, seconds: float | None) -> bool:
    if batches is not None and len(run.batch_times) >= batches:
        return True
    return seconds is not None and time.perf_counter() - started >= seconds


def _limits(batches: int | None, seconds: float | None) -> tuple[int | None, float | None]:
    if batches is not None and batches < 1:
        raise ParameterError(f"batches must be >= 1, got {batches}")
    if seconds is not None and seconds <= 0:
        raise ParameterError(f"seconds must be > 0, got {seconds}")
    if batches is None and seconds is None:
        return DEFAULT_BATCHES, DEFAULT_SECONDS
    return batches, seconds


def _run_iterator(dataset: Any, params: dict[str, Any], batches: int | None, seconds: float | None, warmup: int,
                  step_time: float) -> ProbeRun:
    params = {**params, "path_imgrec": dataset}
    run = ProbeRun(dataset_name(dataset), "iterator", params, warmup, step_time)
    clock = StageClock()
    with ImageRecordIter(**params) as it:
        run.threads, run.prefetch = it.params.preprocess_threads, it.params.prefetch_buffer
        run.images = stored_images(it.reader)
        p = it.params
        plan = it.reader.epoch_order(shuffle=True, seed=p.seed, shuffle_block=p.shuffle_block,
                                     shuffle_window=p.shuffle_window,
                                     chunk_megabytes=p.shuffle_chunk_size).read_plan(0) if p.shuffle else None
        run.shuffle_block = plan.shuffle_block if plan is not None else None
        run.shuffle_window = plan.shuffle_window if plan is not None else None
        run.dataset_labels, run.labels_note = _iterator_labels(p)
        run.epoch_batches = it.num_batches
        it.attach_clock(clock)
        sampler = MachineSampler(_params_path(params))

        number = -1  # the batch's number in its epoch

        def next_batch() -> Any:
            nonlocal number
            try:
                batch = it.next()
                number += 1
            except StopIteration:
                it.reset()
                batch, number = it.next(), 0
            run.batch_indices.append(number)
            return batch

        for _ in range(warmup):
            batch = next_batch()
            run.batches.append(_batch_facts(batch.data[0], batch.label[0], batch.pad))
            if run.sample is None:
                run.sample = batch.data[0][:8].copy()
        clock.reset()
        io0 = it.reader.io_stats()
        sampler.start()
        started = time.perf_counter()
        while not _stop(run, started, batches, seconds):
            batch = next_batch()
            data = batch.data[0]
            run.batch_times.append((time.perf_counter() - started, len(data) - batch.pad, data.nbytes))
            run.batches.append(_batch_facts(data, batch.label[0], batch.pad))
            if run.sample is None:
                run.sample = data[:8].copy()
            if step_time:
                time.sleep(step_time)
        run.seconds = time.perf_counter() - started
        run.machine = sampler.stop()
        run.stages = clock.snapshot()
        run.remote = _remote_counters(io0, it.reader.io_stats())
    return run


def _iterator_labels(p: Any) -> tuple[DatasetLabels | None, str]:
    """The labels of the samples an iterator with parameters ``p`` reads, from a reader of its own (the
    iterator's reads through its shuffle window, where a spread read would fetch whole blocks)."""
    if p.path_imglist:
        return None, f"the labels come from {p.path_imglist}, not the headers"
    num_parts, part_index = resolve_parts(p.num_parts, p.part_index)
    if num_parts > 1:
        return None, f"part {part_index} of {num_parts} is read"
    samples = open_samples(p.path_imgrec, index=p.path_imgidx or None, layout=p.layout,
                           storage_options=p.storage_options, cache_dir=p.cache_dir)
    try:
        return dataset_labels(samples.records, samples.faces), ""
    finally:
        samples.close()


def _run_loader(loader: Any, batches: int | None, seconds: float | None, warmup: int, step_time: float) -> ProbeRun:
    dataset = loader.dataset
    reader = getattr(dataset, "reader", None)
    run = ProbeRun(str(getattr(reader, "path", type(dataset).__name__)), "loader",
                   {"num_workers": loader.num_workers, "batch_size": loader.batch_size,
                    "multiprocessing_context": str(getattr(loader, "multiprocessing_context", None) or "default"),
                    "pin_memory": loader.pin_memory}, warmup, step_time)
    run.threads = max(loader.num_workers, 1)
    run.prefetch = (loader.prefetch_factor or 2) * max(loader.num_workers, 1) if loader.num_workers else 1
    if reader is not None:
        run.images = stored_images(reader)
        run.dataset_labels = dataset_labels(reader, getattr(dataset, "faces", None))
    else:
        run.labels_note = f"{type(dataset).__name__} is not an mxrec dataset"
    timed = getattr(dataset, "preprocess", None) is not None and hasattr(dataset, "attach_clock")
    clock = StageClock()
    if timed and loader.num_workers == 0:
        dataset.attach_clock(clock)
    sampler = MachineSampler(str(reader.path) if reader is not None else None)
    iterator = iter(loader)

    def next_batch() -> Any:
        nonlocal iterator
        waited = time.perf_counter_ns()
        try:
            batch = next(iterator)
        except StopIteration:
            iterator = iter(loader)
            batch = next(iterator)
        clock.lap(WAIT, waited)
        return batch

    def split(batch: Any) -> tuple[Any, Any]:
        if isinstance(batch, dict):
            values = list(batch.values())
            return values[0], values[1] if len(values) > 1 else np.zeros(0)
        return batch[0], batch[1]

    for _ in range(warmup):
        data, label = split(next_batch())
        run.batches.append(_batch_facts(data, label, 0))
        if run.sample is None:
            run.sample = np.asarray(data[:8])
    clock.reset()
    sampler.start()
    started = time.perf_counter()
    while not _stop(run, started, batches, seconds):
        data, label = split(next_batch())
        nbytes = data.numel() * data.element_size() if hasattr(data, "numel") else np.asarray(data).nbytes
        run.batch_times.append((time.perf_counter() - started, len(data), nbytes))
        run.batches.append(_batch_facts(data, label, 0))
        if run.sample is None:
            run.sample = np.asarray(data[:8])
        if step_time:
            time.sleep(step_time)
    run.seconds = time.perf_counter() - started
    run.machine = sampler.stop()
    del iterator
    if timed and loader.num_workers:  # the workers' loaders are not timed: time a few batches here
        side = StageClock()
        dataset.attach_clock(side)
        size = loader.batch_size or 1
        for start in range(0, min(len(dataset), 2 * size), size):
            dataset.__getitems__(list(range(start, min(start + size, len(dataset)))))
        dataset.attach_clock(None)
        run.stages = side.snapshot()
        for thread, stages in clock.snapshot().items():  # the consumer's waits, from the run itself
            if WAIT in stages:
                run.stages.setdefault(thread, {})[WAIT] = stages[WAIT]
        run.stages_where = "side"
    else:
        if timed:
            dataset.attach_clock(None)
        run.stages = clock.snapshot()
    run.epoch_batches = len(loader) if hasattr(loader, "__len__") else None
    return run


def _run_records(dataset: Any, params: dict[str, Any], batches: int | None, seconds: float | None,
                 warmup: int) -> ProbeRun:
    batch_size = int(params.get("batch_size", 256))
    run = ProbeRun(dataset_name(dataset), "records", {"batch_size": batch_size}, warmup, 0.0)
    held = hold_dataset(dataset, storage_options=params.get("storage_options"), cache_dir=params.get("cache_dir"))
    reader = held.records
    try:
        total = len(reader)
        if not total:
            raise ParameterError(f"{reader.path}: no records to read")
        run.images = stored_images(reader)
        clock = StageClock()
        positions = itertools.cycle(range(0, total, batch_size))
        sampler = MachineSampler(dataset_name(dataset))

        def read() -> tuple[int, int]:
            start = next(positions)
            began = clock.now()
            payloads = reader.read_batch(list(range(start, min(start + batch_size, total))))
            nbytes = sum(len(p) for p in payloads)
            clock.lap("fetch", began, nbytes)
            return len(payloads), nbytes

        for _ in range(warmup):
            read()
        clock.reset()
        io0 = reader.io_stats()
        sampler.start()
        started = time.perf_counter()
        while not _stop(run, started, batches, seconds):
            count, nbytes = read()
            run.batch_times.append((time.perf_counter() - started, count, nbytes))
        run.seconds = time.perf_counter() - started
        run.machine = sampler.stop()
        run.stages = clock.snapshot()
        run.remote = _remote_counters(io0, reader.io_stats())
    finally:
        held.close()
    return run


def run_probe(dataset: Any, *, batches: int | None = None, seconds: float | None = None, warmup: int = 2,
              step_time: float = 0.0, records: bool = False, **params: Any) -> ProbeRun:
    """Measure one configuration (see the module docstring); :func:`mxrec.probing.probe` adds checks and advice."""
    batches, seconds = _limits(batches, seconds)
    if warmup < 0 or step_time < 0:
        raise ParameterError("warmup and step_time must be >= 0")
    if hasattr(dataset, "dataset") and hasattr(dataset, "num_workers"):  # a torch DataLoader
        if params:
            raise ParameterError(f"a DataLoader is probed as configured; parameters {sorted(params)} do not apply")
        return _run_loader(dataset, batches, seconds, warmup, step_time)
    if records:
        return _run_records(dataset, params, batches, seconds, warmup)
    return _run_iterator(dataset, params, batches, seconds, warmup, step_time)


def stage_seconds(run: ProbeRun) -> dict[str, float]:
    """Seconds per stage summed over the loading threads (``wait``: the consumer's), and ``bytes`` fetched."""
    totals = dict.fromkeys((*STAGES, WAIT), 0.0)
    fetched = 0
    for stages in run.stages.values():
        for stage, (seconds, count) in stages.items():
            if stage == "bytes":
                fetched += count
            else:
                totals[stage] = totals.get(stage, 0.0) + seconds
    totals["bytes"] = float(fetched)
    return totals


def stage_samples(run: ProbeRun) -> int:
    """Samples the stage timers counted (``decode`` laps; the run's samples for a bare record read)."""
    if run.mode == "records":
        return run.samples
    return sum(stages.get("decode", (0.0, 0))[1] for stages in run.stages.values())
