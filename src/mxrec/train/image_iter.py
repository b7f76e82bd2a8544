"""``mx.image.ImageIter`` without MXNet: images from a ``.rec`` or from files, through Python augmenters."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from mxrec.datasets.face_set import check_layout_name
from mxrec.datasets.samples import open_samples
from mxrec.errors import ParameterError
from mxrec.format.header import unpack_header
from mxrec.format.seeds import stream_key
from mxrec.image.codec import decode_pixels, to_rgb
from mxrec.io.lists import read_list
from mxrec.io.order import ShuffledOrder
from mxrec.storage.files import read_bytes
from mxrec.storage.filesystem import StorageOptions, join
from mxrec.train.dataiter import (
    AUGMENT_STREAM,
    OTHER_LOADERS_NAMES,
    BatchIter,
    DataDesc,
    check_names,
    data_shape_of,
)
from mxrec.train.pipeline import BatchPipeline, OnBroken
from mxrec.train.prefetch import BatchPrefetcher, lookahead
from mxrec.train.sampler import (
    DEFAULT_SHUFFLE_WINDOW,
    NO_LEFTOVER,
    BatchSampler,
    LastBatch,
    resolve_parts,
)
from mxrec.transforms.augmenters import CREATE_AUGMENTER_OPTIONS, Transform, create_augmenter
from mxrec.transforms.rng import SampleRandom

_LAST_BATCH_HANDLES: dict[str, LastBatch] = {"pad": "wrap", "discard": "discard", "roll_over": "roll_over"}
_LABEL_DTYPES = ("float32", "float64", "int32", "int64")


class ImageIter(BatchIter):
    """``mx.image.ImageIter``: images from a ``.rec`` or from files, through a list of Python augmenters.

    Each image is decoded to RGB ``uint8`` HWC, passed through ``aug_list``, and
    written CHW into a float32 batch. Augmenters from :mod:`mxrec.transforms`
    and your own :class:`~mxrec.transforms.steps.Step` objects draw from the
    sample's random stream, keyed by ``(seed, epoch, record)`` (the same
    augmentation whatever ``preprocess_threads``, and after a resume); other
    callables are called as ``aug(img)``. Every path may be a URL.

    Differences from MXNet: ``shuffle`` draws from ``seed`` (MXNet uses
    Python's global ``random``); ``num_parts`` ranks take turns in one global
    order with equal batch counts (:mod:`mxrec.train.sampler`; MXNet gives each
    a contiguous ``N // num_parts`` records and never reads the remainder).
    A JPEG's EXIF orientation is applied, as in every mxrec reader and in
    MXNet's ``ImageRecordIter`` (MXNet's ``ImageIter`` decodes with
    ``mx.image.imdecode``, which ignores it).

    Parameters
    ----------
    batch_size
        Samples per batch.
    data_shape
        ``(3, height, width)`` of each output image.
    label_width
        Labels per sample.
    path_imgrec
        A dataset (anything :func:`~mxrec.datasets.opening.open_dataset` opens, or one opened):
        labels come from the record headers, or from ``path_imglist`` /
        ``imglist`` by record key.
    path_imglist
        A ``.lst``: the labels of ``path_imgrec``'s records, or, without
        ``path_imgrec``, the image files to read (under ``path_root``).
    path_root
        The folder the image files of ``path_imglist`` / ``imglist`` are under.
    path_imgidx
        The ``.idx`` of ``path_imgrec`` (default: the one beside it).
    shuffle
        Shuffle each epoch, from ``seed``.
    part_index, num_parts
        This rank and the number of ranks; left at ``None`` they come from an
        initialised ``torch.distributed`` (else 0 and 1).
    aug_list
        The augmenters (transforms, steps, callables), applied in order to RGB
        images; default: :func:`~mxrec.transforms.create_augmenter` with
        ``data_shape`` and ``**kwargs``.
    imglist
        ``[[label(s)..., path], ...]`` instead of a ``.lst`` (keys 1, 2, ...).
    data_name, label_name
        The names in ``provide_data`` / ``provide_label``.
    dtype
        The label type: ``"float32"``, ``"float64"``, ``"int32"`` or ``"int64"``.
    last_batch_handle
        ``"pad"`` (fill from the start of the epoch), ``"discard"`` or
        ``"roll_over"`` (carry the remainder into the next epoch).
    seed
        *mxrec*: seed of the shuffle and the augmentations.
    preprocess_threads
        *mxrec*: threads that decode and augment.
    prefetch_buffer
        *mxrec*: batches loaded ahead.
    on_broken
        *mxrec*: as :class:`~mxrec.train.record_iter.RecordIterParams`' (the next
        record that decodes replaces a broken one, or ``"error"``).
    layout
        *mxrec*: as :class:`~mxrec.train.record_iter.RecordIterParams`' (an
        InsightFace face set is read as its face records, labelled with their
        identity).
    shuffle_block, shuffle_window, stick_to_shard, pad_last_batch, storage_options, cache_dir
        *mxrec*: as :class:`~mxrec.train.record_iter.RecordIterParams`'.
    exif_orientation
        *mxrec*: ``False`` keeps a JPEG's pixels as stored, as MXNet's
        ``ImageIter`` gives them (default ``True``: turned as its EXIF tag says).
    **kwargs
        :func:`~mxrec.transforms.create_augmenter` options (``resize``,
        ``rand_crop``, ``rand_mirror``, ``mean``, ``std``, ...) when ``aug_list``
        is not given.

    Raises
    ------
    ParameterError
        A parameter is unknown, out of range, or conflicts with another.
    """

    def __init__(self, batch_size: int, data_shape: Sequence[int], label_width: int = 1,
                 path_imgrec: str | None = None, path_imglist: str | None = None, path_root: str | None = None,
                 path_imgidx: str | None = None, shuffle: bool = False, part_index: int | None = None,
                 num_parts: int | None = None,
                 aug_list: list[Callable] | None = None, imglist: list | None = None, data_name: str = "data",
                 label_name: str = "softmax_label", dtype: str = "float32", last_batch_handle: str = "pad", *,
                 seed: int = 0, preprocess_threads: int = 1, prefetch_buffer: int = 2, on_broken: OnBroken = "skip",
                 layout: str = "auto", shuffle_block: int | None = None, shuffle_window: int = DEFAULT_SHUFFLE_WINDOW,
                 stick_to_shard: bool = False, pad_last_batch: bool = True, storage_options: StorageOptions = None,
                 cache_dir: str | None = None, exif_orientation: bool = True, **kwargs: Any) -> None:
        data_shape = data_shape_of(data_shape)
        if data_shape[0] != 3:
            raise ParameterError(f"ImageIter decodes colour images: data_shape must have 3 channels, got {data_shape}")
        if last_batch_handle not in _LAST_BATCH_HANDLES:
            raise ParameterError(f"last_batch_handle must be one of {tuple(_LAST_BATCH_HANDLES)}, "
                                 f"not {last_batch_handle!r}")
        if dtype not in _LABEL_DTYPES:
            raise ParameterError(f"dtype (the label type) must be one of {_LABEL_DTYPES}, not {dtype!r}")
        if not (path_imgrec or path_imglist or isinstance(imglist, list)):
            raise ParameterError("ImageIter needs path_imgrec, path_imglist or imglist")
        check_layout_name(layout)
        if aug_list is None:
            check_names(kwargs, CREATE_AUGMENTER_OPTIONS, "ImageIter", hints=OTHER_LOADERS_NAMES)
            aug_list = create_augmenter(data_shape, **kwargs)
        elif kwargs:
            check_names(kwargs, (), "ImageIter (with aug_list)", hints=OTHER_LOADERS_NAMES)
        self.data_shape = data_shape
        self.label_width = label_width
        self.label_dtype = np.dtype(dtype)
        self.aug_list = list(aug_list)
        self._takes_rng = [isinstance(aug, Transform) for aug in self.aug_list]
        self.seed = seed
        self._aug_key = stream_key(AUGMENT_STREAM, 2, seed)
        self.path_root = path_root or ""
        self.storage_options = storage_options
        self.exif_orientation = exif_orientation
        samples = open_samples(path_imgrec, index=path_imgidx or None, layout=layout, storage_options=storage_options,
                               cache_dir=cache_dir) if path_imgrec else None
        self._samples = samples  # (closed with the iterator when opened for it)
        self._reader = None if samples is None else samples.records  # every record, or a face set's faces
        self.faces = None if samples is None else samples.faces
        self._entries = self._image_list(path_imglist, imglist)
        self._prefetcher = None if self._reader is None else BatchPrefetcher(self._reader)
        self._keys = list(self._entries) if self._reader is None else list(self._reader.keys)
        num_parts, part_index = resolve_parts(num_parts, part_index)
        order = (ShuffledOrder(len(self._keys), shuffle, seed, (shuffle_block or 0) if shuffle else 0, shuffle_window)
                 if self._reader is None else  # (an image list)
                 self._reader.epoch_order(shuffle=shuffle, seed=seed, shuffle_block=shuffle_block,
                                          shuffle_window=shuffle_window))
        sampler = BatchSampler(len(self._keys), batch_size, num_parts=num_parts, part_index=part_index,
                               last_batch=_LAST_BATCH_HANDLES[last_batch_handle], stick_to_shard=stick_to_shard,
                               pad_last_batch=pad_last_batch, order=order)
        if self._reader is not None:
            self._reader.follow(sampler.read_plan(lookahead(batch_size, prefetch_buffer)))
        pipeline = BatchPipeline(self._load_sample, num_records=len(self._keys), batch_size=batch_size,
                                 sample_shape=data_shape,
                                 dtype=np.dtype(np.float32), label_width=label_width, label_dtype=self.label_dtype,
                                 num_threads=preprocess_threads,
                                 prefetch=prefetch_buffer, on_broken=on_broken, describe=self.describe)
        label_shape = (batch_size,) if label_width == 1 else (batch_size, label_width)
        super().__init__(sampler, pipeline, [DataDesc(data_name, (batch_size, *data_shape))],
                         [DataDesc(label_name, label_shape)])

    @staticmethod
    def _image_list(path_imglist: str | None, imglist: list | None) -> dict | None:
        """``{key: (labels, path)}`` from a ``.lst`` (keys: its indices) or ``imglist`` (keys: 1, 2, ...)."""
        if path_imglist:
            return {e.index: (np.array(e.labels, np.float64), e.path) for e in read_list(path_imglist)}
        if isinstance(imglist, list):
            entries = {}
            for key, item in enumerate(imglist, 1):
                *labels, path = item
                if len(labels) == 1 and not np.isscalar(labels[0]):
                    labels = list(labels[0])
                entries[key] = (np.array(labels, np.float64), path)
            return entries
        return None

    def hard_reset(self) -> None:
        """Reset, forgetting any records carried over by ``roll_over``."""
        next_epoch = bool(self._delivered or self._exhausted)
        self._leftover_out = NO_LEFTOVER
        self._restart(next_epoch=next_epoch)
        self._leftover_in = NO_LEFTOVER

    def describe(self, position: int) -> str:
        """Where a sample comes from, for messages.

        Parameters
        ----------
        position
            A sample number.

        Returns
        -------
        str
            ``file: record key`` for a ``.rec``, else the image file's path.
        """
        if self._reader is not None:
            return self._reader.describe(position)
        return self._image_path(self._entries[self._keys[position]][1])

    def _image_path(self, name: str) -> str:
        return join(self.path_root, name)

    def _load_sample(self, position: int, epoch: int, data: np.ndarray, label: np.ndarray) -> int:
        key = self._keys[position]
        if self._reader is not None:
            view = self._record_view(position)
            header, start = unpack_header(view)
            buf = view[start:]
            labels = header.label if self._entries is None else self._entries[key][0]
        else:
            labels, name = self._entries[key]
            buf = read_bytes(self._image_path(name), self.storage_options)
        labels = np.atleast_1d(np.asarray(labels, np.float64))
        if labels.size < self.label_width:
            raise ParameterError(f"{self.describe(position)}: {labels.size} label(s), label_width is "
                                 f"{self.label_width}")
        img = to_rgb(decode_pixels(buf, 3, exif_orientation=self.exif_orientation))
        rng = SampleRandom(self._aug_key, epoch, position)
        for aug, takes_rng in zip(self.aug_list, self._takes_rng, strict=True):
            img = aug(img, rng) if takes_rng else aug(img)
        img = np.asarray(img)
        if img.shape != (*self.data_shape[1:], 3):
            raise ParameterError(f"{self.describe(position)}: the augmenters made a {img.shape} image; data_shape "
                                 f"{self.data_shape} needs {(*self.data_shape[1:], 3)}")
        np.copyto(data, img.transpose(2, 0, 1), casting="unsafe")
        label[:] = labels[:self.label_width]
        return int(key) if isinstance(key, (int, np.integer)) else position

    def close(self) -> None:
        """Stop the loading threads, and close the dataset if it was opened for the iterator (one handed in
        opened stays open)."""
        super().close()
        if self._samples is not None:
            self._samples.close()
