"""What the image datasets share: a sample's decoding, label, transforms, broken-record rule and epoch.

:class:`ImageSamples` is the base of :class:`~mxrec.torch.datasets.ImageRecordDataset` and
:class:`~mxrec.torch.datasets.ImageRecordIterable` (a template base: the datasets add how samples are
ordered and batched). Random transforms from :mod:`mxrec.transforms` get a stream keyed by ``(seed, epoch,
record)``; the epoch lives in shared memory (:class:`SharedEpoch`), so ``set_epoch`` reaches persistent
``DataLoader`` workers.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from mxrec.datasets.opening import DatasetSpec
from mxrec.datasets.samples import open_samples
from mxrec.errors import ParameterError
from mxrec.format.header import label_array, unpack_header
from mxrec.image.codec import decode_pixels, to_rgb
from mxrec.io.shared_downloads import shared_downloads
from mxrec.storage.filesystem import StorageOptions
from mxrec.train.pipeline import OnBroken, check_on_broken, load_decodable, report_skipped
from mxrec.transforms.augmenters import Transform
from mxrec.transforms.rng import SampleRandom

TRANSFORM_STREAM = 0x746F7263  # keys the per-sample streams of dataset transforms
LABEL_DTYPES = ("float32", "int64")
Index = str | os.PathLike | bool | None


def apply_transform(transform: Callable | None, value: Any, rng: SampleRandom) -> Any:
    """``transform(value, rng)`` for mxrec's transforms (they draw from the sample's stream), else
    ``transform(value)``."""
    if transform is None:
        return value
    return transform(value, rng) if isinstance(transform, Transform) else transform(value)


class SharedEpoch:
    """The epoch, in shared memory: ``set_epoch`` in the main process reaches persistent ``DataLoader`` workers."""

    def __init__(self) -> None:
        self.cell = torch.zeros(1, dtype=torch.int64).share_memory_()

    def get(self) -> int:
        return int(self.cell[0])

    def set(self, epoch: int) -> None:
        self.cell[0] = int(epoch)


class ImageSamples:
    """Decoding, labelling, broken-record handling and the epoch, shared by the image datasets (their base).

    Opens the samples of ``path`` (:func:`~mxrec.datasets.samples.open_samples`: every record, or a face set's
    faces; ``path`` may be a mixture file, or a dataset already opened, read as it is); every other parameter is
    keyword-only and means what the datasets document.
    """

    def __init__(self, path: DatasetSpec, *, index: Index = None, flag: int = 1, transform: Callable | None = None,
                 target_transform: Callable | None = None, seed: int = 0, on_broken: OnBroken = "skip",
                 label_dtype: str = "float32", storage_options: StorageOptions = None,
                 cache_dir: str | None = None, layout: str = "auto") -> None:
        if flag not in (0, 1):
            raise ParameterError(f"flag must be 1 (colour) or 0 (grey), not {flag!r}")
        check_on_broken(on_broken)
        if label_dtype not in LABEL_DTYPES:
            raise ParameterError(f"label_dtype must be one of {LABEL_DTYPES}, not {label_dtype!r}")
        samples = open_samples(path, index=index, layout=layout, storage_options=storage_options, cache_dir=cache_dir)
        self.reader, self.faces = samples.records, samples.faces
        self.downloads = shared_downloads(cache_dir, storage_options)  # (shared by DataLoader workers)
        self.flag, self.seed = flag, seed
        self.transform, self.target_transform = transform, target_transform
        self.on_broken, self.label_dtype = on_broken, label_dtype
        self.skipped: list[str] = []
        self._epoch = SharedEpoch()

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
        rng = SampleRandom(TRANSFORM_STREAM, self.seed, epoch, position)
        return apply_transform(self.transform, img, rng), apply_transform(self.target_transform, label, rng)

    def sample(self, position: int, payload: bytes | memoryview | None = None, epoch: int | None = None) -> Any:
        """``(image, label)`` of record ``position``; a broken one is skipped or raised as ``on_broken`` says."""
        epoch = self.epoch if epoch is None else epoch

        def attempt(at: int) -> Any:
            data = payload if at == position and payload is not None else self.reader.view(at)
            return self.decode(data, at, epoch)

        return self._first_decodable(position, attempt)

    def _first_decodable(self, position: int, work: Callable[[int], Any]) -> Any:
        """``work(position)``; a broken record is raised, or skipped for the next one that works (``on_broken``)."""
        result, skipped = load_decodable(position, len(self.reader), work, on_broken=self.on_broken,
                                         describe=self.reader.describe)
        report_skipped(skipped, self.reader.describe, self.skipped, stacklevel=4)
        return result
