"""PyTorch adapters (the optional ``torch`` extra: ``pip install 'mxrec[torch]'``).

* :class:`RecordDataset`: map-style, ``ds[i]`` is the payload of record ``i``
  (Gluon's ``RecordFileDataset``).
* :class:`ImageRecordDataset`: map-style, ``ds[i]`` is ``(image, label)``,
  the image decoded to HWC RGB ``uint8`` (or HW grey with ``flag=0``), then
  ``transform`` and ``target_transform`` applied (Gluon's
  ``ImageRecordDataset``, with torchvision's two-transform convention).
* :class:`DistributedBatchSampler`: the batches of one rank for a map-style
  dataset and a plain ``DataLoader(ds, batch_sampler=...)``.
* :class:`ImageRecordIterable`: an ``IterableDataset`` yielding ``(image,
  label)`` in the same per-rank batches, split between ``DataLoader`` workers.
* :func:`torch_batches`: the batches of an :class:`~mxrec.train.record_iter.ImageRecordIter`
  as tensors sharing its buffers (no copy) -- the fast path.
* :class:`VerificationDataset`: an InsightFace verification set (``lfw.bin``), image by image.

Datasets open anything :func:`mxrec.io.shardset.open_dataset` does: a local or
remote ``.rec`` (``s3://...``, with ``storage_options`` and ``cache_dir``), a
shard set. Map-style datasets define ``__getitems__``, so a ``DataLoader``
fetches each batch of a remote dataset with coalesced ranged reads.

Distributed training. Ranks (``rank``/``world_size``, by default those of an
initialised ``torch.distributed``, else 0 and 1) consume one global order per
epoch in lock-step (:mod:`mxrec.train.sampler`): after every step the samples
all ranks consumed are a prefix of the order, and every rank has the same
number of batches (``drop_last``: drop the last incomplete step; otherwise it
is filled from the start of the order). Global shuffle by default for local
data, block shuffle (about 4 MiB blocks, 16 per window) for remote data;
``shuffle_block``/``shuffle_window`` set it. ``stick_to_shard=True`` gives each
rank a fixed contiguous part instead (DALI's mode, ``pad_last_batch``).
The iterable splits its rank's batches between ``DataLoader`` workers whole
(worker ``w`` of ``W`` loads batches ``w, w + W, ...``), so pass it the
``DataLoader``'s ``batch_size``; the loader's in-order round robin then
delivers exactly the lock-step batches, and no two workers share a sample.

Epochs: call ``set_epoch(e)`` before each epoch's ``iter(loader)``, as with
``DistributedSampler``. The epoch lives in shared memory, so it reaches
``DataLoader`` workers also when they are persistent (``persistent_workers=True``).
Random transforms from :mod:`mxrec.transforms` get a stream keyed by ``(seed,
epoch, record)``, so workers never repeat each other's augmentations.

Resuming: :class:`DistributedBatchSampler` and :class:`ImageRecordIterable`
have ``state_dict()``/``load_state_dict()`` (JSON-serialisable), which
torchdata's ``StatefulDataLoader`` saves and restores with the same layout.
To resume on another number of ranks (elastic), load a global position --
``position_after(epoch, steps)`` of the iterable, the sampler's own
``state_dict()``, or :func:`loader_position` of a ``StatefulDataLoader`` state
-- into the dataset or sampler before creating the new loader.

Broken records (an image that does not decode): ``on_broken="error"`` raises
naming the record; ``"skip"`` (default) warns, counts it in ``skipped`` and
yields the next decodable record of the dataset in its place, so every rank
still gets the same number of samples.

Labels: ``label_dtype="float32"`` (default, as Gluon) or ``"int64"`` (class ids
for ``CrossEntropyLoss``; a label that is not a whole number is an error).

InsightFace face sets (``layout="auto"``, the default, as the iterators): the
image datasets read the face records only (:func:`mxrec.io.insightface.read_face_set`),
each labelled with its identity; ``layout="plain"`` reads every record.

All of them work with ``DataLoader(num_workers > 0)`` under ``fork`` and
``spawn``: a reader pickles to its path and index and opens the file again,
lazily, in the worker; no open remote connection is ever pickled.
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from mxrec.errors import HeaderError, ImageDecodeError, MxrecError, ParameterError
from mxrec.format.header import label_array, unpack_header
from mxrec.image.codec import decode_pixels, to_rgb
from mxrec.io.filesystem import StorageOptions
from mxrec.io.insightface import read_face_set
from mxrec.io.shardset import open_dataset
from mxrec.io.subset import RecordSubset
from mxrec.train.augment import AugmentParams
from mxrec.train.dataiter import check_names, data_shape_of
from mxrec.train.loader import RecordSampleLoader
from mxrec.train.normalize import NormalizeParams
from mxrec.train.pipeline import BrokenRecordWarning, OnBroken
from mxrec.train.prefetch import read_ahead_window
from mxrec.train.record_iter import shuffle_block_for
from mxrec.train.sampler import DEFAULT_SHUFFLE_WINDOW, BatchSampler, resolve_parts
from mxrec.train.timing import StageClock
from mxrec.train.verification import load_verification_set
from mxrec.transforms.augmenters import Transform
from mxrec.transforms.rng import SampleRandom

try:
    import torch
    from torch.utils.data import Dataset, IterableDataset, Sampler, get_worker_info
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MxrecError(f"mxrec.torch needs PyTorch: pip install 'mxrec[torch]' ({exc})") from None

_TRANSFORM_STREAM = 0x746F7263  # keys the per-sample streams of dataset transforms
LABEL_DTYPES = ("float32", "int64")
_BROKEN = (ImageDecodeError, HeaderError)
Index = str | os.PathLike | bool | None


class RecordDataset(Dataset):
    """Record ``i`` of a dataset (``index`` as ``RecordReader``'s), through ``transform`` if given."""

    def __init__(self, path: Any, index: Index = None, transform: Callable[[bytes], Any] | None = None, *,
                 storage_options: StorageOptions = None, cache_dir: str | None = None) -> None:
        self.reader = open_dataset(path, index, storage_options=storage_options, cache_dir=cache_dir)
        self.transform = transform

    def __len__(self) -> int:
        return len(self.reader)

    def __getitem__(self, i: int) -> Any:
        payload = self.reader[i]
        return payload if self.transform is None else self.transform(payload)

    def __getitems__(self, indices: Sequence[int]) -> list[Any]:
        """A batch, fetched together (coalesced ranged reads for a remote dataset)."""
        payloads = self.reader.read_batch(indices)
        return payloads if self.transform is None else [self.transform(p) for p in payloads]


def _apply(transform: Callable | None, value: Any, rng: SampleRandom) -> Any:
    if transform is None:
        return value
    return transform(value, rng) if isinstance(transform, Transform) else transform(value)


class _SharedEpoch:
    """The epoch, in shared memory: ``set_epoch`` in the main process reaches persistent ``DataLoader`` workers."""

    def __init__(self) -> None:
        self.cell = torch.zeros(1, dtype=torch.int64).share_memory_()

    def get(self) -> int:
        return int(self.cell[0])

    def set(self, epoch: int) -> None:
        self.cell[0] = int(epoch)


class _ImageRecords:
    """Decoding, labelling, broken-record handling and the epoch, shared by the image datasets."""

    def __init__(self, path: Any, index: Index, flag: int, transform: Callable | None,
                 target_transform: Callable | None, seed: int, on_broken: OnBroken, label_dtype: str,
                 storage_options: StorageOptions, cache_dir: str | None, layout: str) -> None:
        if flag not in (0, 1):
            raise ParameterError(f"flag must be 1 (colour) or 0 (grey), not {flag!r}")
        if on_broken not in ("skip", "error"):
            raise ParameterError(f"on_broken must be 'skip' or 'error', not {on_broken!r}")
        if label_dtype not in LABEL_DTYPES:
            raise ParameterError(f"label_dtype must be one of {LABEL_DTYPES}, not {label_dtype!r}")
        reader = open_dataset(path, index, storage_options=storage_options, cache_dir=cache_dir)
        self.faces = read_face_set(reader, layout)
        self.reader = reader if self.faces is None else RecordSubset(reader, self.faces.positions)
        self.flag, self.seed = flag, seed
        self.transform, self.target_transform = transform, target_transform
        self.on_broken, self.label_dtype = on_broken, label_dtype
        self.skipped: list[str] = []
        self._epoch = _SharedEpoch()

    @property
    def epoch(self) -> int:
        return self._epoch.get()

    def set_epoch(self, epoch: int) -> None:
        """Use ``epoch``'s order and augmentations; reaches ``DataLoader`` workers, persistent ones too."""
        self._epoch.set(epoch)

    def _label(self, header: Any, position: int) -> Any:
        labels = label_array(header)
        if self.label_dtype == "int64":
            if not np.all(np.isfinite(labels)) or not np.all(labels == np.round(labels)):
                raise ParameterError(f"{self.reader.describe(position)}: label {labels.tolist()} is not a class id "
                                     "(a whole number); use label_dtype='float32'")
            labels = labels.astype(np.int64)
        if self.faces is not None:  # a face's identity: its label, or the first of face2rec2's [class, aligned]
            return labels[0]
        return labels[0] if header.flag == 0 else labels.copy()

    def decode(self, payload: bytes | memoryview, position: int, epoch: int) -> tuple[Any, Any]:
        """``(image, label)`` of one record's payload, transforms applied."""
        header, start = unpack_header(payload)
        img = decode_pixels(payload[start:], 3 if self.flag else 1, what=self.reader.describe(position))
        if self.flag:
            img = to_rgb(img)
        label = self._label(header, position)
        rng = SampleRandom(_TRANSFORM_STREAM, self.seed, epoch, position)
        return _apply(self.transform, img, rng), _apply(self.target_transform, label, rng)

    def sample(self, position: int, payload: bytes | memoryview | None = None, epoch: int | None = None) -> Any:
        """``(image, label)`` of record ``position``; a broken one is skipped or raised as ``on_broken`` says."""
        epoch = self.epoch if epoch is None else epoch

        def attempt(at: int) -> Any:
            data = payload if at == position and payload is not None else self.reader.view(at)
            return self.decode(data, at, epoch)

        return self._first_decodable(position, attempt)

    def _first_decodable(self, position: int, work: Callable[[int], Any]) -> Any:
        """``work(position)``; a broken record is raised, or skipped for the next one that works (``on_broken``)."""
        count = len(self.reader)
        for attempt in range(count):
            at = (position + attempt) % count
            try:
                return work(at)
            except _BROKEN as exc:
                if self.on_broken == "error":
                    raise type(exc)(f"{self.reader.describe(at)}: {exc}") from exc
                self.skipped.append(self.reader.describe(at))
                warnings.warn(f"{self.reader.describe(at)}: broken record skipped, the next record is used in its "
                              f"place ({exc})", BrokenRecordWarning, stacklevel=4)
        raise ImageDecodeError(f"{self.reader.path}: no record decodes")


class ImageRecordDataset(_ImageRecords, Dataset):
    """``ds[i]`` = ``(image, label)`` of record ``i``: HWC RGB ``uint8`` (``flag=0``: HW grey), label(s).

    See the module docstring for ``on_broken``, ``label_dtype`` and remote datasets.

    ``preprocess``: ``ImageRecordIter``'s augmentation and normalisation
    parameters (``data_shape`` required; ``random_resized_crop``,
    ``min_random_area``, ``rand_mirror``, ``mean_r``, ``std_r``, ...,
    ``label_width``), done as :class:`~mxrec.train.record_iter.ImageRecordIter`
    does them (:class:`~mxrec.train.loader.RecordSampleLoader`), into ``dtype``
    (``float32``, ``uint8``, ...) CHW tensors; ``transform`` does not apply.
    Then a ``DataLoader`` batch is made whole by one worker, straight into a
    tensor in shared memory, with no per-sample arrays and no collate copy:
    pass ``collate_fn=mxrec.torch.batch_collate``. This is the fast path of
    the map-style datasets; ``dtype="uint8"`` (normalise on the GPU) is
    faster still, and :func:`torch_batches` over an ``ImageRecordIter``
    (threads, batch buffers reused) fastest. ``fast_decode=True`` (with
    ``preprocess``) decodes JPEGs reduced where ``resize`` or a random-resized
    crop allows, as the iterator's ``fast_decode``.
    """

    def __init__(self, path: Any, index: Index = None, *, flag: int = 1, transform: Callable | None = None,
                 target_transform: Callable | None = None, seed: int = 0, on_broken: OnBroken = "skip",
                 label_dtype: str = "float32", storage_options: StorageOptions = None,
                 cache_dir: str | None = None, layout: str = "auto", preprocess: dict[str, Any] | None = None,
                 dtype: str = "float32", fast_decode: bool = False) -> None:
        super().__init__(path, index, flag, transform, target_transform, seed, on_broken, label_dtype,
                         storage_options, cache_dir, layout)
        self.preprocess = None if preprocess is None else _preprocess_params(preprocess)
        if fast_decode and self.preprocess is None:
            raise ParameterError("fast_decode needs preprocess (the resize it may decode reduced for)")
        self.dtype = dtype
        self.fast_decode = fast_decode
        self._clock: StageClock | None = None
        self._loader: RecordSampleLoader | None = None
        self._payloads: dict[int, bytes] = {}  # a remote batch's records, fetched together
        if self.preprocess is not None:
            self._sample_loader()  # checks dtype and the parameters now, not in a worker

    def __len__(self) -> int:
        return len(self.reader)

    def __getitem__(self, i: int) -> tuple[Any, Any]:
        if not -len(self) <= i < len(self):
            raise IndexError(f"record {i} out of range for {len(self)} records")
        if self.preprocess is not None:
            data, label = self._batch([i % len(self)])
            return data[0], label[0]
        return self.sample(i % len(self))

    def __getitems__(self, indices: Sequence[int]) -> Any:
        """A batch: its records fetched together (coalesced ranged reads when remote), then decoded.

        With ``preprocess``: ``(data, label)`` tensors of the whole batch (use :func:`batch_collate`).
        """
        positions = [int(i) % len(self) for i in indices]
        if self.preprocess is not None:
            return self._batch(positions)
        payloads = self.reader.read_batch(positions) if self.reader.is_remote else [None] * len(positions)
        return [self.sample(p, payload) for p, payload in zip(positions, payloads, strict=True)]

    def _sample_loader(self) -> RecordSampleLoader:
        """The per-process loader (made where it is used: it holds per-thread buffers, which do not pickle)."""
        if self._loader is None:
            augment, normalize, label_width = self.preprocess
            self._loader = RecordSampleLoader(self.reader, augment, normalize, dtype=self.dtype,
                                              label_width=label_width, seed=self.seed,
                                              identities=self.faces is not None, view=self._view,
                                              fast_decode=self.fast_decode)
            self._loader.clock = self._clock
        return self._loader

    def attach_clock(self, clock: StageClock | None) -> None:
        """Time each stage of the ``preprocess`` path into ``clock`` (:mod:`mxrec.train.timing`), in this
        process only (``DataLoader`` workers make their own loader, untimed)."""
        if self.preprocess is None:
            raise ParameterError("stage timing needs preprocess (the mxrec loader path)")
        self._clock = clock
        self._sample_loader().clock = clock

    def _view(self, position: int) -> memoryview:
        payload = self._payloads.get(position)
        return self.reader.view(position) if payload is None else memoryview(payload)

    def _batch(self, positions: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        loader = self._sample_loader()
        epoch = self.epoch
        data = _batch_tensor((len(positions), *loader.shape), loader.dtype)
        labels = np.empty((len(positions), loader.label_width), np.float32)
        if self.reader.is_remote:
            self._payloads = dict(zip(positions, self.reader.read_batch(positions), strict=True))
        try:
            frames, label_rows = data.numpy(), labels
            for slot, position in enumerate(positions):
                self._load_slot(loader, position, epoch, frames[slot], label_rows[slot])
        finally:
            self._payloads = {}
        if self.label_dtype == "int64":
            if not np.all(labels == np.round(labels)):
                raise ParameterError(f"{self.reader.path}: labels {labels[labels != np.round(labels)][:4].tolist()} "
                                     "are not class ids (whole numbers); use label_dtype='float32'")
            labels = labels.astype(np.int64)
        label = torch.from_numpy(labels)
        return data, (label[:, 0] if loader.label_width == 1 else label)

    def _load_slot(self, loader: RecordSampleLoader, position: int, epoch: int, data: np.ndarray,
                   label: np.ndarray) -> None:
        """Record ``position`` into a slot; a broken one is skipped (the next decodable record) or raised."""
        self._first_decodable(position, lambda at: loader.load(at, epoch, data, label))

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_loader": None, "_payloads": {}, "_clock": None}


def batch_collate(batch: Any) -> Any:
    """``DataLoader``'s ``collate_fn`` for datasets whose ``__getitems__`` returns a whole batch: it is ready."""
    return batch


def _preprocess_params(params: dict[str, Any]) -> tuple[AugmentParams, NormalizeParams, int]:
    """``(augment, normalise, label_width)`` from ``ImageRecordIter``-style parameters (checked, with hints)."""
    augment_names, normalize_names = AugmentParams.names(), NormalizeParams.names()
    check_names(params, (*augment_names, *normalize_names, "label_width"), "preprocess")
    if "data_shape" not in params:
        raise ParameterError("preprocess: data_shape (channels, height, width) is required")
    augment = AugmentParams(**{**{k: v for k, v in params.items() if k in augment_names},
                               "data_shape": data_shape_of(params["data_shape"])})
    normalize = NormalizeParams(**{k: v for k, v in params.items() if k in normalize_names})
    return augment, normalize, int(params.get("label_width", 1))


def _batch_tensor(shape: tuple[int, ...], dtype: np.dtype) -> torch.Tensor:
    """An uninitialised tensor; in a ``DataLoader`` worker, in shared memory, so that passing it on copies nothing
    (the loader would copy a plain tensor into shared memory)."""
    dtype = getattr(torch, np.dtype(dtype).name)
    if get_worker_info() is None:
        return torch.empty(shape, dtype=dtype)
    storage = torch.UntypedStorage._new_shared(math.prod(shape) * torch.empty((), dtype=dtype).element_size())
    return torch.empty(0, dtype=dtype).set_(storage, 0, shape)


def _batch_sampler(num_records: int, reader: Any, batch_size: int, shuffle: bool, seed: int, rank: int | None,
                   world_size: int | None, drop_last: bool, shuffle_block: int | None, shuffle_window: int,
                   stick_to_shard: bool, pad_last_batch: bool) -> BatchSampler:
    world, part = resolve_parts(world_size, rank)
    block = shuffle_block_for(reader, shuffle_block) if reader is not None else (shuffle_block or 0)
    return BatchSampler(num_records, batch_size, shuffle=shuffle, seed=seed, num_parts=world, part_index=part,
                        last_batch="discard" if drop_last else "wrap", shuffle_block=block,
                        shuffle_window=shuffle_window, stick_to_shard=stick_to_shard, pad_last_batch=pad_last_batch)


class DistributedBatchSampler(Sampler):
    """This rank's batches (lists of positions) of a map-style dataset: ``DataLoader(ds, batch_sampler=this)``.

    ``dataset`` is the dataset (or its length). See the module docstring for
    the order, ``set_epoch``, and resuming (``state_dict`` is the global
    position after the batches this sampler has handed to the loader).
    """

    def __init__(self, dataset: Any, batch_size: int, *, shuffle: bool = True, seed: int = 0,
                 rank: int | None = None, world_size: int | None = None, drop_last: bool = False,
                 shuffle_block: int | None = None, shuffle_window: int = DEFAULT_SHUFFLE_WINDOW,
                 stick_to_shard: bool = False, pad_last_batch: bool = True) -> None:
        count = dataset if isinstance(dataset, int) else len(dataset)
        self.sampler = _batch_sampler(count, getattr(dataset, "reader", None), batch_size, shuffle, seed, rank,
                                      world_size, drop_last, shuffle_block, shuffle_window, stick_to_shard,
                                      pad_last_batch)
        self.epoch = 0
        self._start = 0  # records of the epoch's order consumed before this run (a resumed position)
        self._taken = 0  # batches handed out in this run

    def set_epoch(self, epoch: int) -> None:
        """Use ``epoch``'s order; a position loaded for this very epoch is kept."""
        if epoch != self.epoch:
            self.epoch, self._start, self._taken = epoch, 0, 0

    def __len__(self) -> int:
        return self.sampler.batches_per_epoch(start=self._start)

    def __iter__(self) -> Iterator[list[int]]:
        if self._taken:  # a new pass over the same epoch after a finished one starts it again
            self._start, self._taken = 0, 0
        plans, _ = self.sampler.epoch(self.epoch, start=self._start)
        for plan in plans:
            self._taken += 1
            yield plan.positions.tolist()

    def state_dict(self) -> dict:
        """The global position after the batches handed out (JSON-serialisable)."""
        return self.sampler.state(self.epoch, self._start + self._taken * self.sampler.step)

    def load_state_dict(self, state: dict) -> None:
        """Continue from a position saved with this or another number of ranks / batch size."""
        self.epoch, self._start, _ = self.sampler.restore(state)
        self._taken = 0


class ImageRecordIterable(_ImageRecords, IterableDataset):
    """``(image, label)`` pairs of this rank's lock-step batches, split between ``DataLoader`` workers.

    Pass the ``DataLoader``'s ``batch_size`` (see the module docstring); ``len``
    is this rank's samples per epoch. ``drop_last`` drops the last incomplete
    step of every epoch instead of filling it from the start of the order.
    """

    def __init__(self, path: Any, index: Index = None, *, batch_size: int = 1, flag: int = 1,
                 transform: Callable | None = None, target_transform: Callable | None = None, shuffle: bool = True,
                 seed: int = 0, rank: int | None = None, world_size: int | None = None, drop_last: bool = False,
                 shuffle_block: int | None = None, shuffle_window: int = DEFAULT_SHUFFLE_WINDOW,
                 stick_to_shard: bool = False, pad_last_batch: bool = True, on_broken: OnBroken = "skip",
                 label_dtype: str = "float32", storage_options: StorageOptions = None,
                 cache_dir: str | None = None, layout: str = "auto") -> None:
        super().__init__(path, index, flag, transform, target_transform, seed, on_broken, label_dtype,
                         storage_options, cache_dir, layout)
        self.sampler = _batch_sampler(len(self.reader), self.reader, batch_size, shuffle, seed, rank, world_size,
                                      drop_last, shuffle_block, shuffle_window, stick_to_shard, pad_last_batch)
        read_ahead_window(self.reader, self.sampler.shuffle_block if shuffle else 0, self.sampler.shuffle_window)
        self.rank, self.world_size = self.sampler.part_index, self.sampler.num_parts
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.drop_last = drop_last
        self._resume: dict | None = None  # where the next pass starts: {"start": records, "skip": samples}
        self._pass_start = 0
        self._yielded = 0  # samples this copy has yielded in the current pass

    def _worker(self) -> tuple[int, int]:
        info = get_worker_info()
        return (0, 1) if info is None else (info.id, info.num_workers)

    def plans(self, worker: int = 0, num_workers: int = 1, start: int = 0) -> list:
        """The batch plans worker ``worker`` of ``num_workers`` loads this epoch, from record ``start`` of the order."""
        plans, _ = self.sampler.epoch(self.epoch, start=start)
        return plans[worker::num_workers]

    def positions(self, worker: int = 0, num_workers: int = 1) -> np.ndarray:
        """The record positions worker ``worker`` of ``num_workers`` reads this epoch, in order."""
        plans = self.plans(worker, num_workers)
        return np.concatenate([p.positions for p in plans]) if plans else np.empty(0, np.int64)

    def __len__(self) -> int:
        return self.sampler.batches_per_epoch() * self.batch_size

    def __iter__(self) -> Iterator[tuple[Any, Any]]:
        worker, num_workers = self._worker()
        resume, self._resume = self._resume, None
        start, skip = (resume["start"], resume["skip"]) if resume else (0, 0)
        self._pass_start, self._yielded = start, 0
        epoch = self.epoch
        for plan in self.plans(worker, num_workers, start):
            positions = plan.positions.tolist()
            if skip >= len(positions):
                skip -= len(positions)
                self._yielded += len(positions)
                continue
            positions = positions[skip:]
            self._yielded += skip
            skip = 0
            payloads = self.reader.read_batch(positions) if self.reader.is_remote else [None] * len(positions)
            for position, payload in zip(positions, payloads, strict=True):
                sample = self.sample(position, payload, epoch)
                self._yielded += 1
                yield sample

    def position_after(self, epoch: int, steps: int) -> dict:
        """The global position after ``steps`` batches per rank of ``epoch`` (of this pass), for an elastic resume."""
        start = self._pass_start if epoch == self.epoch else 0
        return self.sampler.state(epoch, start + steps * self.sampler.step)

    def state_dict(self) -> dict:
        """This copy's position (in a ``DataLoader`` worker: that worker's), JSON-serialisable."""
        worker, num_workers = self._worker()
        state = self.sampler.state(self.epoch, self._pass_start)
        state.update(worker=worker, num_workers=num_workers, yielded=self._yielded)
        return state

    def load_state_dict(self, state: dict) -> None:
        """Continue from :meth:`state_dict` (same layout) or from a global position (any number of ranks)."""
        epoch, consumed, _ = self.sampler.restore(state)
        self.set_epoch(epoch)
        skip = 0
        if "worker" in state:
            worker, num_workers = self._worker()
            layout = (state.get("worker"), state.get("num_workers"), state.get("num_parts"), state.get("batch_size"))
            if layout != (worker, num_workers, self.world_size, self.batch_size):
                raise ParameterError(f"this state is one DataLoader worker's ({layout}); to resume with another "
                                     "layout load loader_position(state) into the dataset before making the loader")
            skip = int(state["yielded"])
        self._resume = {"start": consumed, "skip": skip}


def loader_position(loader_state: dict) -> dict:
    """The global position in a torchdata ``StatefulDataLoader`` state, for a resume with another layout.

    Over a :class:`DistributedBatchSampler`: the sampler's position. Over an
    :class:`ImageRecordIterable`: the batches the loader had delivered,
    converted to records of the epoch's order. Load the result into a new
    sampler or iterable (any number of ranks or workers) before making its loader.
    """
    states: list[dict] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("format") == "mxrec-epoch-position":
                states.append(node)
                return
            for value in node.values():
                walk(value)

    walk(loader_state)
    if not states:
        raise ParameterError("no mxrec position in this loader state")
    sampler_states = [state for state in states if "worker" not in state]
    if sampler_states:  # a DistributedBatchSampler's: already global
        return dict(sampler_states[0])
    snapshot = loader_state.get("_snapshot", {})
    steps = int(snapshot.get("_snapshot_step", 0)) + int(loader_state.get("_steps_since_snapshot", 0))
    if "_num_yielded" in loader_state:  # a loader without workers
        steps = int(loader_state["_num_yielded"])
    state = {k: v for k, v in states[0].items() if k not in ("worker", "num_workers", "yielded")}
    state["consumed"] = int(state["consumed"]) + steps * int(state["batch_size"]) * (
        1 if state.get("stick_to_shard") else int(state["num_parts"]))
    return state


def torch_batches(batches: Any) -> Iterator[tuple[torch.Tensor, torch.Tensor, int]]:
    """``(data, label, pad)`` tensors for each batch of an mxrec iterator, sharing its memory (no copy).

    The iterator never overwrites a batch buffer that a tensor still refers
    to, so the tensors stay valid for as long as they are kept.
    """
    for batch in batches:
        yield torch.from_numpy(batch.data[0]), torch.from_numpy(batch.label[0]), batch.pad


class VerificationDataset(Dataset):
    """An InsightFace verification set (``lfw.bin``, ...): ``ds[i]`` is image ``i``, through ``transform`` if given.

    Images are HWC RGB ``uint8`` (:func:`mxrec.train.verification.load_verification_set`,
    which unpickles safely); images ``2k`` and ``2k + 1`` form pair ``k`` and
    ``ds.issame[k]`` (a bool tensor) says whether they show one person. Keep
    ``DataLoader(shuffle=False)`` so the embeddings come back in pair order.
    Transforms from :mod:`mxrec.transforms` work as in the other datasets.
    """

    def __init__(self, path: str | os.PathLike, *, image_size: tuple[int, int] | None = None,
                 transform: Callable | None = None) -> None:
        self.verification = load_verification_set(path, image_size)
        self.issame = torch.from_numpy(self.verification.issame)
        self.transform = transform

    def __len__(self) -> int:
        return 2 * len(self.verification)

    def __getitem__(self, i: int) -> Any:
        return _apply(self.transform, self.verification.images[i], SampleRandom(_TRANSFORM_STREAM, 0, 0, i))
