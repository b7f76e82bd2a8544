"""PyTorch adapters (the optional ``torch`` extra: ``pip install 'mxrec[torch]'``).

* :class:`RecordDataset`: map-style, ``ds[i]`` is the payload of record ``i``
  (Gluon's ``RecordFileDataset``).
* :class:`ImageRecordDataset`: map-style, ``ds[i]`` is ``(image, label)``,
  the image decoded to HWC RGB ``uint8`` (or HW grey with ``flag=0``), then
  ``transform`` and ``target_transform`` applied (Gluon's
  ``ImageRecordDataset``, with torchvision's two-transform convention).
* :class:`ImageRecordIterable`: an ``IterableDataset`` that shuffles globally
  per epoch, gives each rank an equal share (:func:`mxrec.train.sampler.shard`) and
  each ``DataLoader`` worker every ``num_workers``-th record of that share.
* :func:`torch_batches`: the batches of an :class:`~mxrec.train.record_iter.ImageRecordIter`
  as tensors sharing its buffers (no copy) -- the fast path.
* :class:`VerificationDataset`: an InsightFace verification set (``lfw.bin``), image by image.

All of them work with ``DataLoader(num_workers > 0)`` under ``fork`` and
``spawn``: a :class:`~mxrec.io.reader.RecordReader` pickles to its path and maps
the file again in the worker. Random transforms from :mod:`mxrec.transforms`
get a stream keyed by ``(seed, epoch, record)``, so workers never repeat each
other's augmentations; call :meth:`set_epoch` (before creating the
``DataLoader`` iterator) for new ones each epoch, as with PyTorch's
``DistributedSampler``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from mxrec.errors import MxrecError, ParameterError
from mxrec.format.header import label_array, unpack_header
from mxrec.image.codec import decode_pixels, to_rgb
from mxrec.io.reader import RecordReader
from mxrec.train.sampler import epoch_order, shard
from mxrec.train.verification import load_verification_set
from mxrec.transforms.augmenters import Transform
from mxrec.transforms.rng import SampleRandom

try:
    import torch
    from torch.utils.data import Dataset, IterableDataset, get_worker_info
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MxrecError(f"mxrec.torch needs PyTorch: pip install 'mxrec[torch]' ({exc})") from None

_TRANSFORM_STREAM = 0x746F7263  # keys the per-sample streams of dataset transforms


class RecordDataset(Dataset):
    """Record ``i`` of a ``.rec`` (``index`` as :class:`~mxrec.reader.RecordReader`), through ``transform`` if given."""

    def __init__(self, path: str | os.PathLike, index: str | os.PathLike | bool | None = None,
                 transform: Callable[[bytes], Any] | None = None) -> None:
        self.reader = RecordReader(path, index)
        self.transform = transform

    def __len__(self) -> int:
        return len(self.reader)

    def __getitem__(self, i: int) -> Any:
        payload = self.reader[i]
        return payload if self.transform is None else self.transform(payload)


def _apply(transform: Callable | None, value: Any, rng: SampleRandom) -> Any:
    if transform is None:
        return value
    return transform(value, rng) if isinstance(transform, Transform) else transform(value)


class _ImageRecords:
    """Decoding and labelling shared by the image datasets."""

    def __init__(self, path: str | os.PathLike, index: str | os.PathLike | bool | None, flag: int,
                 transform: Callable | None, target_transform: Callable | None, seed: int) -> None:
        if flag not in (0, 1):
            raise ParameterError(f"flag must be 1 (colour) or 0 (grey), not {flag!r}")
        self.reader = RecordReader(path, index)
        self.flag = flag
        self.transform = transform
        self.target_transform = target_transform
        self.seed = seed
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        """Use ``epoch``'s shuffle and augmentations (set it before iterating a ``DataLoader``)."""
        self.epoch = epoch

    def sample(self, position: int) -> tuple[Any, Any]:
        view = self.reader.view(position)
        header, start = unpack_header(view)
        what = f"{self.reader.path}: record {self.reader.keys[position]!r}"
        img = decode_pixels(view[start:], 3 if self.flag else 1, what=what)
        if self.flag:
            img = to_rgb(img)
        labels = label_array(header)
        label = labels[0] if header.flag == 0 else labels.copy()
        rng = SampleRandom(_TRANSFORM_STREAM, self.seed, self.epoch, position)
        return _apply(self.transform, img, rng), _apply(self.target_transform, label, rng)


class ImageRecordDataset(_ImageRecords, Dataset):
    """``ds[i]`` = ``(image, label)`` of record ``i``: HWC RGB ``uint8`` (``flag=0``: HW grey), float32 label(s)."""

    def __init__(self, path: str | os.PathLike, index: str | os.PathLike | bool | None = None, *, flag: int = 1,
                 transform: Callable | None = None, target_transform: Callable | None = None,
                 seed: int = 0) -> None:
        super().__init__(path, index, flag, transform, target_transform, seed)

    def __len__(self) -> int:
        return len(self.reader)

    def __getitem__(self, i: int) -> tuple[Any, Any]:
        if not -len(self) <= i < len(self):
            raise IndexError(f"record {i} out of range for {len(self)} records")
        return self.sample(i % len(self))


def _distributed_rank() -> tuple[int, int]:
    """``(rank, world_size)`` from ``torch.distributed`` when it is initialised, else ``(0, 1)``."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return 0, 1


class ImageRecordIterable(_ImageRecords, IterableDataset):
    """``(image, label)`` pairs in a global per-epoch shuffle, sharded by rank and by ``DataLoader`` worker.

    ``rank``/``world_size`` default to ``torch.distributed``'s (or 0/1). Every
    rank gets ``ceil(N / world_size)`` records (wrapping around to the start;
    ``drop_last`` gives ``floor`` instead), so all ranks run the same number
    of steps; worker ``w`` of ``W`` yields records ``w, w + W, ...`` of its
    rank's share.
    """

    def __init__(self, path: str | os.PathLike, index: str | os.PathLike | bool | None = None, *, flag: int = 1,
                 transform: Callable | None = None, target_transform: Callable | None = None, shuffle: bool = True,
                 seed: int = 0, rank: int | None = None, world_size: int | None = None,
                 drop_last: bool = False) -> None:
        super().__init__(path, index, flag, transform, target_transform, seed)
        default_rank, default_world = _distributed_rank()
        self.rank = default_rank if rank is None else rank
        self.world_size = default_world if world_size is None else world_size
        self.shuffle = shuffle
        self.drop_last = drop_last
        shard(np.empty(0, np.int64), self.world_size, self.rank)  # validates rank and world_size

    def positions(self, worker: int = 0, num_workers: int = 1) -> np.ndarray:
        """The record positions worker ``worker`` of ``num_workers`` reads this epoch, in order."""
        order = epoch_order(len(self.reader), shuffle=self.shuffle, seed=self.seed, epoch=self.epoch)
        share = shard(order, self.world_size, self.rank, drop_remainder=self.drop_last)
        return share[worker::num_workers]

    def __len__(self) -> int:
        return len(self.positions())

    def __iter__(self) -> Iterator[tuple[Any, Any]]:
        info = get_worker_info()
        worker, num_workers = (0, 1) if info is None else (info.id, info.num_workers)
        for position in self.positions(worker, num_workers).tolist():
            yield self.sample(position)


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
