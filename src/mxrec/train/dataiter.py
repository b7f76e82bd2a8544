"""MXNet's ``DataIter`` protocol for numpy batches: :class:`DataBatch`, :class:`DataDesc`, and :class:`BatchIter`.

Iterators built on :class:`BatchIter` iterate MXNet style (``it.next()``,
``it.reset()``, ``batch.data[0]``, ``batch.label[0]``, ``batch.pad``,
``batch.index``) and Python style (``for batch in it``: each ``for`` loop over
an exhausted iterator starts the next epoch; an unfinished epoch continues
where it stopped). A :class:`~mxrec.train.sampler.BatchSampler` plans each
epoch's batches, a :class:`~mxrec.train.pipeline.BatchPipeline` loads them.
Unknown or misspelled parameter names raise :class:`~mxrec.errors.ParameterError`
(:func:`check_names`; MXNet ignores them silently).

:meth:`BatchIter.state_dict` is where the iterator stands (a JSON-serialisable
dict: the epoch, the records of its order consumed by the batches handed out so
far, and the settings that make the order); :meth:`BatchIter.load_state_dict`
continues from there -- also with another number of ranks or batch size (see
:mod:`mxrec.train.sampler`). Batches loaded ahead but not handed out do not count.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from mxrec.errors import ParameterError
from mxrec.train.pipeline import BatchPipeline
from mxrec.train.prefetch import BatchPrefetcher
from mxrec.train.sampler import NO_LEFTOVER, BatchSampler, Leftover

AUGMENT_STREAM = 0x617567  # separates augmentation streams from any other use of the same seed


class DataDesc(NamedTuple):
    """Name and shape of one output, as ``mx.io.DataDesc`` (``name, shape = desc`` works)."""

    name: str
    shape: tuple[int, ...]


@dataclass
class DataBatch:
    """One batch, as ``mx.io.DataBatch``: ``data`` and ``label`` are lists of numpy arrays.

    The last ``pad`` samples are not new data of this epoch (repeats or empty
    slots): leave them out of metrics. ``index`` holds each sample's record id
    (``-1`` for an empty slot). ``label`` may be left out (``None``), as in
    MXNet, and ``str(batch)`` reads as MXNet's: ``DataBatch: data shapes:
    [(2, 3)] label shapes: None``.
    """

    data: list[np.ndarray]
    label: list[np.ndarray] | None = None
    pad: int = 0
    index: np.ndarray | None = None
    provide_data: list[DataDesc] | None = None
    provide_label: list[DataDesc] | None = None
    bucket_key: object = None

    def __str__(self) -> str:
        data_shapes = [tuple(d.shape) for d in self.data] if self.data is not None else None
        label_shapes = [tuple(lab.shape) for lab in self.label] if self.label else None
        return f"{type(self).__name__}: data shapes: {data_shapes} label shapes: {label_shapes}"


#: Names other loaders (PyTorch's ``DataLoader``, torchvision) use, and what the iterators call them: the hint
#: for an unknown one, in place of a did-you-mean guess (``num_workers`` is not ``num_parts``).
OTHER_LOADERS_NAMES = {
    "num_workers": "{where} decodes and augments on threads: their number is preprocess_threads "
                   "(ImageRecordIter's worker processes, for where the GIL binds: preprocess_processes)",
    "prefetch_factor": "the batches loaded ahead are prefetch_buffer",
    "transform": "your own augmentation steps go in aug_list (mxrec.transforms.Step objects)",
    "transforms": "your own augmentation steps go in aug_list (mxrec.transforms.Step objects)",
}


def check_names(given: dict, known: Sequence[str], where: str, *, hints: dict[str, str] | None = None) -> None:
    """Raise :class:`ParameterError` for the first name in ``given`` not in ``known``, suggesting a close match
    (or the hint ``hints`` has for it: a template that may name ``{where}``)."""
    for name in given:
        if name not in known:
            if hints and name in hints:
                raise ParameterError(f"{where}: unknown parameter {name!r}; "
                                     f"{hints[name].format(where=where.split(' ')[0])}")
            close = difflib.get_close_matches(name, known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ParameterError(f"{where}: unknown parameter {name!r}{hint}")


def data_shape_of(value: Any) -> tuple[int, int, int]:
    try:
        shape = tuple(int(v) for v in value)
    except (TypeError, ValueError):
        raise ParameterError(f"data_shape must be (channels, height, width), got {value!r}") from None
    if len(shape) != 3 or min(shape) <= 0:
        raise ParameterError(f"data_shape must be 3 positive integers (channels, height, width), got {value!r}")
    return shape


class BatchIter:
    """Epoch bookkeeping shared by the iterators: a sampler plans batches, a pipeline loads them."""

    def __init__(self, sampler: BatchSampler, pipeline: BatchPipeline, provide_data: list[DataDesc],
                 provide_label: list[DataDesc]) -> None:
        self._sampler = sampler
        self._pipeline = pipeline
        self.provide_data = provide_data
        self.provide_label = provide_label
        self.batch_size = sampler.batch_size
        self.epoch = 0
        self._started = False
        self._delivered = 0
        self._exhausted = False
        self._current: DataBatch | None = None
        self._leftover_in: Leftover = NO_LEFTOVER
        self._leftover_out: Leftover = NO_LEFTOVER
        self._start = 0  # records of this epoch's sequence consumed before this run (a resumed position)

    @property
    def skipped(self) -> list[str]:
        """Records skipped so far because their image could not be decoded (``file: record key``)."""
        return self._pipeline.skipped

    @property
    def num_batches(self) -> int:
        """Batches per epoch."""
        return self._sampler.batches_per_epoch(len(self._leftover_in.positions), self._start)

    def state_dict(self) -> dict:
        """Where this iterator stands: resume with :meth:`load_state_dict` (JSON-serialisable)."""
        if self._exhausted:
            return self._sampler.state(self.epoch + 1, 0, self._leftover_out)
        consumed = self._start + self._delivered * self._sampler.step
        return self._sampler.state(self.epoch, consumed, self._leftover_in)

    def load_state_dict(self, state: dict) -> None:
        """Continue from a :meth:`state_dict` (of this iterator, or of one with another rank count or batch size)."""
        epoch, consumed, leftover = self._sampler.restore(state)
        self._drop_progress()
        self.epoch, self._start, self._leftover_in = epoch, consumed, leftover

    # An iterator over records sets this: each batch's records are fetched together as the pipeline takes it.
    _prefetcher: BatchPrefetcher | None = None

    def _prepare_restart(self) -> None:
        """Forget work prepared for the batches being dropped (prefetched records)."""
        if self._prefetcher is not None:
            self._prefetcher.clear()

    def _plans(self, plans: list) -> Any:
        """The plans as the pipeline should take them (with a prefetcher: wrapped to fetch ahead)."""
        return plans if self._prefetcher is None else self._prefetcher.plans(plans)

    def _record_view(self, position: int) -> memoryview:
        """The record at ``position``, from its prefetched batch."""
        assert self._prefetcher is not None, "only an iterator over records reads records"
        return memoryview(self._prefetcher.payload(position))

    def reset(self) -> None:
        """Go back to the start: the next batch is the first of a new epoch (new shuffle, new augmentations).

        Resetting before any batch of the current epoch was taken keeps it.
        """
        if self._delivered or self._exhausted:
            self._restart(next_epoch=True)

    def _restart(self, *, next_epoch: bool) -> None:
        """Drop the work in flight; go on to the next epoch (with a finished epoch's leftover) or redo this one."""
        if next_epoch:
            self._leftover_in = self._leftover_out if self._exhausted else NO_LEFTOVER
            self.epoch += 1
        self._drop_progress()
        self._start = 0

    def _drop_progress(self) -> None:
        """Drop the work in flight and forget how far the current epoch went."""
        self._pipeline.cancel()
        self._prepare_restart()
        self._leftover_out = NO_LEFTOVER
        self._started = False
        self._delivered = 0
        self._exhausted = False
        self._current = None

    def next(self) -> DataBatch:
        """The next batch; ``StopIteration`` at the end of the epoch."""
        if not self._started:
            plans, self._leftover_out = self._sampler.epoch(self.epoch, self._leftover_in, self._start)
            self._pipeline.start(self._plans(plans))
            self._started = True
        try:
            loaded = next(self._pipeline)
        except StopIteration:
            self._exhausted = True
            self._current = None
            raise
        self._delivered += 1
        label = loaded.label[:, 0] if self.provide_label[0].shape[1:] == () else loaded.label
        self._current = DataBatch([loaded.data], [label], loaded.pad, loaded.index,
                                  self.provide_data, self.provide_label)
        return self._current

    __next__ = next

    def __iter__(self) -> BatchIter:
        if self._exhausted:
            self.reset()
        return self

    def iter_next(self) -> bool:
        """Advance to the next batch (MXNet's ``DataIter.iter_next``); False at the end of the epoch."""
        try:
            self.next()
        except StopIteration:
            return False
        return True

    def getdata(self) -> list[np.ndarray]:
        return self._current.data

    def getlabel(self) -> list[np.ndarray]:
        return self._current.label

    def getpad(self) -> int:
        return self._current.pad

    def getindex(self) -> np.ndarray:
        return self._current.index

    def close(self) -> None:
        """Stop the loading threads. Idempotent."""
        self._current = None
        self._pipeline.close()
        if self._prefetcher is not None:
            self._prefetcher.close()

    def __enter__(self) -> BatchIter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
