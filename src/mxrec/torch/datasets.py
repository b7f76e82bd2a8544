"""The PyTorch datasets: records, decoded images (map-style and per-rank iterable), verification pairs.

The user guide (distributed training, resuming, broken records, face sets, workers) is ``docs/torch.md``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset, IterableDataset, default_collate, get_worker_info

from mxrec.datasets.opening import open_dataset
from mxrec.errors import ParameterError, RecordPositionError
from mxrec.io.shared_downloads import shared_downloads
from mxrec.storage.filesystem import StorageOptions
from mxrec.torch.batches import batch_tensor
from mxrec.torch.image_samples import (
    TRANSFORM_STREAM,
    DatasetSpec,
    ImageSamples,
    Index,
    apply_transform,
)
from mxrec.torch.sampling import follow_batch, rank_sampler, worker_plan
from mxrec.train.face_pairs import load_verification_set
from mxrec.train.params import preprocess_params
from mxrec.train.pipeline import OnBroken
from mxrec.train.sample_loader import RecordSampleLoader
from mxrec.train.sampler import DEFAULT_SHUFFLE_WINDOW
from mxrec.train.timing import StageClock
from mxrec.transforms.rng import SampleRandom


class RecordDataset(Dataset):
    """Record ``i`` of a dataset, through ``transform`` if given.

    Parameters
    ----------
    path
        The dataset: a ``.rec`` (a path or URL), a shard set, a mixture file, or a dataset already opened.
    index
        Its ``.idx``, as ``RecordReader`` takes it.
    transform
        Applied to each record's payload.
    storage_options
        fsspec options for URLs.
    cache_dir
        A local folder that caches a remote dataset's blocks (shared by ``DataLoader`` workers).
    """

    def __init__(self, path: DatasetSpec, index: Index = None, *, transform: Callable[[bytes], Any] | None = None,
                 storage_options: StorageOptions = None, cache_dir: str | None = None) -> None:
        self.reader = open_dataset(path, index, storage_options=storage_options, cache_dir=cache_dir)
        self.transform = transform
        self.downloads = shared_downloads(cache_dir, storage_options)  # (shared by DataLoader workers)

    def __len__(self) -> int:
        return len(self.reader)

    def __getitem__(self, i: int) -> Any:
        payload = self.reader[i]
        return payload if self.transform is None else self.transform(payload)

    def __getitems__(self, indices: Sequence[int]) -> list[Any]:
        """A batch, fetched together (coalesced ranged reads for a remote dataset)."""
        follow_batch(self.reader, indices, self.downloads)
        payloads = self.reader.read_batch(indices)
        return payloads if self.transform is None else [self.transform(p) for p in payloads]


class ImageRecordDataset(ImageSamples, Dataset):
    """``ds[i]`` = ``(image, label)`` of record ``i``: HWC RGB ``uint8`` (``flag=0``: HW grey), label(s).

    See docs/torch.md for ``on_broken``, ``label_dtype`` and remote datasets.

    With ``preprocess``, a ``DataLoader`` batch is made whole by one worker, straight into a
    tensor in shared memory, with no per-sample arrays and no collate copy:
    pass ``collate_fn=mxrec.torch.batch_collate`` (the default collate is
    refused: it would stack the images with the labels). This is the fast path of
    the map-style datasets; ``dtype="uint8"`` (normalise on the GPU) is
    faster still, and :func:`torch_batches` over an ``ImageRecordIter``
    (threads, batch buffers reused) fastest.

    Parameters
    ----------
    path
        The dataset: a ``.rec`` (a path or URL), a shard set, a mixture file, or a dataset already opened (read
        as it is).
    index
        Its ``.idx``, as ``RecordReader`` takes it.
    flag
        ``1``: colour (HWC RGB); ``0``: grey (HW).
    transform
        Applied to each image (an :mod:`mxrec.transforms` step or any callable).
    target_transform
        Applied to each label.
    seed
        Keys the random transforms' streams, with the epoch and the record.
    on_broken
        An image that does not decode: ``"error"`` raises naming the record; ``"skip"`` warns, counts it in
        ``skipped`` and takes the next decodable record in its place.
    label_dtype
        ``"float32"`` (as Gluon) or ``"int64"`` (class ids for ``CrossEntropyLoss``).
    storage_options
        fsspec options for URLs.
    cache_dir
        A local folder that caches a remote dataset's blocks (shared by ``DataLoader`` workers).
    layout
        ``"auto"``: a face set's face records only, each labelled with its identity; ``"plain"``: every record.
    preprocess
        ``ImageRecordIter``'s augmentation and normalisation parameters (``data_shape`` required;
        ``random_resized_crop``, ``min_random_area``, ``rand_mirror``, ``mean_r``, ``std_r``, ...,
        ``label_width``; or ``aug_list``, your own augmentation steps, as the iterator's), done as
        :class:`~mxrec.train.record_iter.ImageRecordIter` does them
        (:class:`~mxrec.train.sample_loader.RecordSampleLoader`), into ``dtype`` CHW tensors; it takes no
        ``transform``. ``fast_decode: True`` among them decodes JPEGs reduced where ``resize`` or a
        random-resized crop allows, as the iterator's ``fast_decode``.
    dtype
        The ``preprocess`` tensors' dtype (``float32``, ``uint8``, ...).

    Raises
    ------
    ParameterError
        ``preprocess`` given with ``transform`` or ``target_transform``; ``flag``, ``on_broken`` or
        ``label_dtype`` not one of its values; ``preprocess`` parameters or ``dtype`` the loader refuses.
    """

    def __init__(self, path: DatasetSpec, index: Index = None, *, flag: int = 1, transform: Callable | None = None,
                 target_transform: Callable | None = None, seed: int = 0, on_broken: OnBroken = "skip",
                 label_dtype: str = "float32", storage_options: StorageOptions = None,
                 cache_dir: str | None = None, layout: str = "auto", preprocess: dict[str, Any] | None = None,
                 dtype: str = "float32") -> None:
        if preprocess is not None and (transform is not None or target_transform is not None):
            given = "transform=" if transform is not None else "target_transform="
            raise ParameterError(f"ImageRecordDataset: preprocess= makes the whole sample (decoding, ImageRecordIter's "
                                 f"augmentation, normalisation into dtype) and would ignore {given}: put your own "
                                 "augmentation steps in preprocess's aug_list (mxrec.transforms.Step objects), or "
                                 f"drop preprocess= to use {given}")
        super().__init__(path, index=index, flag=flag, transform=transform, target_transform=target_transform,
                         seed=seed, on_broken=on_broken, label_dtype=label_dtype, storage_options=storage_options,
                         cache_dir=cache_dir, layout=layout)
        self.preprocess = None if preprocess is None else (
            *preprocess_params(preprocess, "preprocess", extra=("label_width",), decode=True),
            int(preprocess.get("label_width", 1)))
        self.fast_decode = bool(preprocess.get("fast_decode", False)) if preprocess is not None else False
        aug_list = None if preprocess is None else preprocess.get("aug_list")
        self.aug_list = None if aug_list is None else tuple(aug_list)
        self.dtype = dtype
        self._clock: StageClock | None = None
        self._loader: RecordSampleLoader | None = None
        self._payloads: dict[int, bytes | memoryview] = {}  # a batch's records, fetched together
        if self.preprocess is not None:
            self._sample_loader()  # checks dtype and the parameters now, not in a worker

    def __len__(self) -> int:
        return len(self.reader)

    def __getitem__(self, i: int) -> tuple[Any, Any]:
        if not -len(self) <= i < len(self):
            raise RecordPositionError(f"record {i} out of range for {len(self)} records")
        if self.preprocess is not None:
            data, label = self._batch([i % len(self)])
            return data[0], label[0]
        return self.sample(i % len(self))

    def __getitems__(self, indices: Sequence[int]) -> Any:
        """A batch: its records fetched together (coalesced ranged reads when remote), then decoded.

        With ``preprocess``: ``(data, label)`` tensors of the whole batch (use :func:`batch_collate`).
        """
        follow_batch(self.reader, indices, self.downloads)
        positions = [int(i) % len(self) for i in indices]
        if self.preprocess is not None:
            _refuse_default_collate(sys._getframe(1))
            return self._batch(positions)
        payloads = self.reader.fetch(positions)
        return [self.sample(p, payload) for p, payload in zip(positions, payloads, strict=True)]

    def _sample_loader(self) -> RecordSampleLoader:
        """The per-process loader (made where it is used: it holds per-thread buffers, which do not pickle)."""
        if self._loader is None:
            augment, normalize, label_width = self.preprocess
            self._loader = RecordSampleLoader(self.reader, augment, normalize, dtype=self.dtype,
                                              label_width=label_width, seed=self.seed,
                                              identities=self.faces is not None, view=self._view,
                                              fast_decode=self.fast_decode, steps=self.aug_list)
            self._loader.clock = self._clock
        return self._loader

    def attach_clock(self, clock: StageClock | None) -> None:
        """Time each stage of the ``preprocess`` path, in this process only (``DataLoader`` workers make their own
        loader, untimed).

        Parameters
        ----------
        clock
            Receives the stage times (:mod:`mxrec.train.timing`); ``None`` stops the timing.

        Raises
        ------
        ParameterError
            The dataset has no ``preprocess``.
        """
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
        data = batch_tensor((len(positions), *loader.shape), loader.dtype)
        labels = np.empty((len(positions), loader.label_width), np.float32)
        self._payloads = dict(zip(positions, self.reader.fetch(positions), strict=True))
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


def _refuse_default_collate(caller: Any) -> None:
    """Raise :class:`~mxrec.errors.ParameterError` when ``caller`` is a ``DataLoader`` fetch that would hand the
    whole batch ``__getitems__`` returns to torch's default collate (which fails, stacking the images with the
    labels: "stack expects each tensor to be equal size"). Anything else calling is let be."""
    fetcher = caller.f_locals.get("self")
    if getattr(fetcher, "collate_fn", None) is default_collate and getattr(fetcher, "auto_collation", False):
        raise ParameterError("ImageRecordDataset(preprocess=...) makes each batch whole, as one (data, label) pair "
                             "of tensors, which the DataLoader's default collate_fn cannot take: pass "
                             "collate_fn=mxrec.torch.batch_collate to the DataLoader")


class ImageRecordIterable(ImageSamples, IterableDataset):
    """``(image, label)`` pairs of this rank's lock-step batches, split between ``DataLoader`` workers.

    ``len`` is this rank's samples per epoch (see docs/torch.md).

    Parameters
    ----------
    path
        The dataset, as :class:`ImageRecordDataset` takes it.
    index
        Its ``.idx``.
    batch_size
        The ``DataLoader``'s ``batch_size``: each worker loads whole batches.
    flag
        ``1``: colour, ``0``: grey.
    transform, target_transform
        Applied to each image and to each label.
    shuffle
        Shuffle each epoch's order.
    seed
        Seeds the shuffle and keys the random transforms' streams.
    rank, world_size
        This rank of so many (defaults: :class:`~mxrec.torch.sampling.DistributedBatchSampler`'s).
    drop_last
        Drop the last incomplete step of every epoch instead of filling it from the start of the order.
    shuffle_block
        Records per shuffled block (``0``: a global shuffle); default: by where the data lies.
    shuffle_window
        Blocks open at a time in a block shuffle.
    stick_to_shard
        A fixed contiguous part per rank (DALI's mode).
    pad_last_batch
        With ``stick_to_shard``: equal parts, by repeating a part's last record.
    on_broken
        ``"skip"`` or ``"error"`` for an image that does not decode (see :class:`ImageRecordDataset`).
    label_dtype
        ``"float32"`` or ``"int64"``.
    storage_options
        fsspec options for URLs.
    cache_dir
        A local cache of a remote dataset's blocks.
    layout
        ``"auto"`` (a face set's faces) or ``"plain"`` (every record).

    Raises
    ------
    ParameterError
        ``flag``, ``on_broken`` or ``label_dtype`` not one of its values, ``batch_size`` below 1, ``rank`` not in
        ``[0, world_size)``, or ``stick_to_shard`` over a mixture.
    """

    def __init__(self, path: DatasetSpec, index: Index = None, *, batch_size: int = 1, flag: int = 1,
                 transform: Callable | None = None, target_transform: Callable | None = None, shuffle: bool = True,
                 seed: int = 0, rank: int | None = None, world_size: int | None = None, drop_last: bool = False,
                 shuffle_block: int | None = None, shuffle_window: int = DEFAULT_SHUFFLE_WINDOW,
                 stick_to_shard: bool = False, pad_last_batch: bool = True, on_broken: OnBroken = "skip",
                 label_dtype: str = "float32", storage_options: StorageOptions = None,
                 cache_dir: str | None = None, layout: str = "auto") -> None:
        super().__init__(path, index=index, flag=flag, transform=transform, target_transform=target_transform,
                         seed=seed, on_broken=on_broken, label_dtype=label_dtype, storage_options=storage_options,
                         cache_dir=cache_dir, layout=layout)
        self.sampler = rank_sampler(len(self.reader), reader=self.reader, batch_size=batch_size, shuffle=shuffle,
                                    seed=seed, rank=rank, world_size=world_size, drop_last=drop_last,
                                    shuffle_block=shuffle_block, shuffle_window=shuffle_window,
                                    stick_to_shard=stick_to_shard, pad_last_batch=pad_last_batch)
        self.read_plan = self.sampler.read_plan(batch_size)
        self.reader.follow(self.read_plan)  # (this dataset reads its own sampler's batches)
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
        """The batches one ``DataLoader`` worker loads this epoch.

        Parameters
        ----------
        worker
            The worker, of ``num_workers``.
        num_workers
            The loader's workers.
        start
            The record of the epoch's order to start from.

        Returns
        -------
        list
            The worker's batch plans (:class:`~mxrec.io.order.ReadPlan`), in order.
        """
        plans, _ = self.sampler.epoch(self.epoch, start=start)
        return plans[worker::num_workers]

    def positions(self, worker: int = 0, num_workers: int = 1) -> np.ndarray:
        """The record positions one ``DataLoader`` worker reads this epoch.

        Parameters
        ----------
        worker
            Which worker (``0`` without workers).
        num_workers
            How many workers the loader has.

        Returns
        -------
        numpy.ndarray
            The positions, in order.
        """
        plans = self.plans(worker, num_workers)
        return np.concatenate([p.positions for p in plans]) if plans else np.empty(0, np.int64)

    def __len__(self) -> int:
        return self.sampler.batches_per_epoch() * self.batch_size

    def __iter__(self) -> Iterator[tuple[Any, Any]]:
        worker, num_workers = self._worker()
        self.reader.follow(worker_plan(self.read_plan, self.downloads))  # (in a worker: shares its downloads)
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
            payloads = self.reader.fetch(positions)
            for position, payload in zip(positions, payloads, strict=True):
                sample = self.sample(position, payload, epoch)
                self._yielded += 1
                yield sample

    def position_after(self, epoch: int, steps: int) -> dict:
        """The global position after some steps of an epoch, for an elastic resume.

        Parameters
        ----------
        epoch
            The epoch.
        steps
            Batches per rank of ``epoch`` (of this pass) done.

        Returns
        -------
        dict
            The position, for ``load_state_dict`` with any number of ranks.
        """
        start = self._pass_start if epoch == self.epoch else 0
        return self.sampler.state(epoch, start + steps * self.sampler.step)

    def state_dict(self) -> dict:
        """This copy's position (in a ``DataLoader`` worker: that worker's).

        Returns
        -------
        dict
            The position, JSON-serialisable.
        """
        worker, num_workers = self._worker()
        state = self.sampler.state(self.epoch, self._pass_start)
        state.update(worker=worker, num_workers=num_workers, yielded=self._yielded)
        return state

    def load_state_dict(self, state: dict) -> None:
        """Continue from :meth:`state_dict` (same layout) or from a global position (any number of ranks).

        Parameters
        ----------
        state
            The position.

        Raises
        ------
        ParameterError
            ``state`` is one worker's with another layout, or no position of this dataset's order.
        """
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


class VerificationDataset(Dataset):
    """An InsightFace verification set (``lfw.bin``, ...): ``ds[i]`` is image ``i``, through ``transform`` if given.

    Images are HWC RGB ``uint8`` (:func:`mxrec.train.face_pairs.load_verification_set`,
    which unpickles safely); images ``2k`` and ``2k + 1`` form pair ``k`` and
    ``ds.issame[k]`` (a bool tensor) says whether they show one person. Keep
    ``DataLoader(shuffle=False)`` so the embeddings come back in pair order.
    Transforms from :mod:`mxrec.transforms` work as in the other datasets.

    Parameters
    ----------
    path
        The ``.bin`` file.
    image_size
        ``(height, width)``, as :func:`~mxrec.train.face_pairs.load_verification_set` takes it; default: the images
        as they are.
    transform
        Applied to each image.

    Raises
    ------
    VerificationSetError
        Anything malformed or not allowed in the file, naming it (and the image).
    """

    def __init__(self, path: str | os.PathLike, *, image_size: tuple[int, int] | None = None,
                 transform: Callable | None = None) -> None:
        self.verification = load_verification_set(path, image_size)
        self.issame = torch.from_numpy(self.verification.issame)
        self.transform = transform

    def __len__(self) -> int:
        return 2 * len(self.verification)

    def __getitem__(self, i: int) -> Any:
        return apply_transform(self.transform, self.verification.images[i], SampleRandom(TRANSFORM_STREAM, 0, 0, i))
