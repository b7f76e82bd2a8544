"""Batch iterators with MXNet's interface: ``ImageRecordIter`` and ``ImageIter``, yielding numpy batches.

Both iterate MXNet style (``it.next()``, ``it.reset()``, ``batch.data[0]``,
``batch.label[0]``, ``batch.pad``, ``batch.index``) and Python style
(``for batch in it``: each ``for`` loop over an exhausted iterator starts the
next epoch; an unfinished epoch continues where it stopped).

* :class:`ImageRecordIter` is ``mx.io.ImageRecordIter``: every MXNet parameter
  with its meaning (see :class:`RecordIterParams`,
  :class:`~mxrec.augment.AugmentParams`,
  :class:`~mxrec.normalize.NormalizeParams`), MXNet's default augmenter
  (:mod:`mxrec.augment`), output ``(batch, C, H, W)`` RGB in ``dtype``, labels
  ``(batch,)`` when ``label_width`` is 1 else ``(batch, label_width)``.
* :class:`ImageIter` is ``mx.image.ImageIter``: a ``.rec`` or image files from
  a ``.lst``/``imglist``, a list of Python augmenters (``aug_list``, by default
  :func:`mxrec.transforms.create_augmenter` with the extra keyword arguments),
  ``last_batch_handle`` ``"pad"``, ``"discard"`` or ``"roll_over"``.

Epochs, shuffling, sharding and last batches follow :mod:`mxrec.sampler`,
which documents where MXNet goes wrong and what happens here instead; decoding
runs on :mod:`mxrec.pipeline`'s threads. Every random choice for a sample comes
from a stream keyed by ``(seed_aug or seed, epoch, record)``
(:mod:`mxrec.rng`), so a run is reproducible whatever ``preprocess_threads``.

Unknown or misspelled parameter names raise
:class:`~mxrec.errors.ParameterError` (MXNet ignores them silently).
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import Any, NamedTuple

import numpy as np

from mxrec.augment import AugmentParams, DefaultAugmenter
from mxrec.decode import DecodeBuffers, decode_pixels
from mxrec.errors import ListFileError, ParameterError
from mxrec.header import unpack_header
from mxrec.lst import read_list
from mxrec.normalize import NormalizeParams, SlotWriter
from mxrec.pipeline import BatchPipeline, OnBroken
from mxrec.reader import RecordReader
from mxrec.rng import SampleRandom, stream_key
from mxrec.sampler import NO_LEFTOVER, BatchSampler, LastBatch, Leftover
from mxrec.transforms import CREATE_AUGMENTER_OPTIONS, Transform, create_augmenter

_AUGMENT_STREAM = 0x617567  # separates augmentation streams from any other use of the same seed


class DataDesc(NamedTuple):
    """Name and shape of one output, as ``mx.io.DataDesc`` (``name, shape = desc`` works)."""

    name: str
    shape: tuple[int, ...]


@dataclass
class DataBatch:
    """One batch, as ``mx.io.DataBatch``: ``data`` and ``label`` are lists of numpy arrays.

    The last ``pad`` samples are not new data of this epoch (repeats or empty
    slots): leave them out of metrics. ``index`` holds each sample's record id
    (``-1`` for an empty slot).
    """

    data: list[np.ndarray]
    label: list[np.ndarray]
    pad: int = 0
    index: np.ndarray | None = None
    provide_data: list[DataDesc] | None = None
    provide_label: list[DataDesc] | None = None
    bucket_key: object = None


def check_names(given: dict, known: Sequence[str], where: str) -> None:
    """Raise :class:`ParameterError` for the first name in ``given`` not in ``known``, suggesting a close match."""
    for name in given:
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ParameterError(f"{where}: unknown parameter {name!r}{hint}")


def _data_shape(value: Any) -> tuple[int, int, int]:
    try:
        shape = tuple(int(v) for v in value)
    except (TypeError, ValueError):
        raise ParameterError(f"data_shape must be (channels, height, width), got {value!r}") from None
    if len(shape) != 3 or min(shape) <= 0:
        raise ParameterError(f"data_shape must be 3 positive integers (channels, height, width), got {value!r}")
    return shape


class _BatchIter:
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

    @property
    def skipped(self) -> list[str]:
        """Records skipped so far because their image could not be decoded (``file: record key``)."""
        return self._pipeline.skipped

    @property
    def num_batches(self) -> int:
        """Batches per epoch."""
        return self._sampler.batches_per_epoch()

    def reset(self) -> None:
        """Go back to the start: the next batch is the first of a new epoch (new shuffle, new augmentations).

        Resetting before any batch of the current epoch was taken keeps it.
        """
        if self._delivered or self._exhausted:
            self._restart(next_epoch=True)

    def _restart(self, *, next_epoch: bool) -> None:
        """Drop the work in flight; go on to the next epoch (with a finished epoch's leftover) or redo this one."""
        self._pipeline.cancel()
        if next_epoch:
            self._leftover_in = self._leftover_out if self._exhausted else NO_LEFTOVER
            self.epoch += 1
        self._leftover_out = NO_LEFTOVER
        self._started = False
        self._delivered = 0
        self._exhausted = False
        self._current = None

    def next(self) -> DataBatch:
        """The next batch; ``StopIteration`` at the end of the epoch."""
        if not self._started:
            plans, self._leftover_out = self._sampler.epoch(self.epoch, self._leftover_in)
            self._pipeline.start(plans)
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

    def __iter__(self) -> _BatchIter:
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

    def __enter__(self) -> _BatchIter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- ImageRecordIter -----------------------------------------------------------------------

@dataclass(frozen=True)
class RecordIterParams:
    """``ImageRecordIter``'s own parameters (the augmenter's and normaliser's are in their modules).

    MXNet's meaning throughout. ``drop_last`` and ``on_broken`` are mxrec's
    additions: drop the last incomplete batch of each epoch (and cut parts
    down rather than pad them), and ``"skip"`` or ``"error"`` on a record
    whose image cannot be decoded. Accepted for compatibility with no effect
    here: ``verbose``, ``ctx``, ``device_id`` (numpy output, one way of
    threading), ``shuffle_chunk_size``, ``shuffle_chunk_seed`` (the shuffle
    is always global).
    """

    path_imgrec: str
    data_shape: tuple[int, int, int]
    batch_size: int
    path_imgidx: str = ""
    path_imglist: str = ""
    label_width: int = 1
    shuffle: bool = False
    seed: int = 0
    seed_aug: int | None = None
    num_parts: int = 1
    part_index: int = 0
    round_batch: bool = True
    drop_last: bool = False
    preprocess_threads: int = 4
    prefetch_buffer: int = 4
    dtype: str | None = None
    on_broken: OnBroken = "skip"
    data_name: str = "data"
    label_name: str = "softmax_label"
    aug_seq: str = "aug_default"
    mean_img: str = ""
    verbose: bool = True
    ctx: str = "gpu"
    device_id: int = 0
    shuffle_chunk_size: int = 0
    shuffle_chunk_seed: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "data_shape", _data_shape(self.data_shape))
        if not self.path_imgrec:
            raise ParameterError("path_imgrec is required")
        if self.label_width < 1:
            raise ParameterError(f"label_width must be >= 1, got {self.label_width}")
        if self.aug_seq != "aug_default":
            raise ParameterError(f"aug_seq: only MXNet's 'aug_default' augmenter exists, not {self.aug_seq!r}")
        if self.ctx not in ("gpu", "cpu"):
            raise ParameterError(f"ctx must be 'gpu' or 'cpu', not {self.ctx!r}")

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))


def _normalize_names() -> tuple[str, ...]:
    return tuple(f.name for f in fields(NormalizeParams))


def _rotate_list(value: Any) -> tuple[int, ...]:
    """MXNet takes ``rotate_list`` as a comma-separated string; a sequence of ints is accepted too."""
    if isinstance(value, str):
        value = [v for v in value.split(",") if v.strip()]
    try:
        return tuple(int(v) for v in value)
    except (TypeError, ValueError):
        raise ParameterError(f"rotate_list must be integers (or a comma-separated string), got {value!r}") from None


def labels_by_id(path_imglist: str | os.PathLike, label_width: int) -> dict[int, np.ndarray]:
    """``{index: first label_width labels}`` from a ``.lst`` (MXNet's ``ImageLabelMap``)."""
    labels = {}
    for number, entry in enumerate(read_list(path_imglist), 1):
        if len(entry.labels) < label_width:
            raise ListFileError(path_imglist, number, f"entry {entry.index} has {len(entry.labels)} label(s), "
                                                      f"label_width is {label_width}")
        labels[entry.index] = np.array(entry.labels[:label_width], np.float32)
    return labels


def mean_image_file(path: str, params: dict[str, Any]) -> np.ndarray:
    """The mean image for ``ImageRecordIter(**params)``: loaded from ``path`` (a ``.npy``), else computed and saved.

    Computed as MXNet does, over one pass of the records (of this part) through
    the same augmentation, and written atomically to ``path``. It is the mean of
    the output images (``(C, H, W)``, RGB, mirrored as the output is); MXNet
    stores it in its own NDArray format, which is not read here.
    """
    shape = _data_shape(params["data_shape"])
    if not os.path.exists(path):
        first_pass = {**params, "mean_img": "", "dtype": "uint8", "shuffle": False, "round_batch": False,
                      "drop_last": False}
        total = np.zeros(shape, np.float64)
        count = 0
        with ImageRecordIter(**first_pass) as it:
            for batch in it:
                real = batch.data[0][:len(batch.data[0]) - batch.pad]
                total += real.sum(axis=0, dtype=np.float64)
                count += len(real)
        mean = (total / max(count, 1)).astype(np.float32)
        partial = f"{path}.partial"
        with open(partial, "wb") as f:
            np.save(f, mean)
        os.replace(partial, path)
        return mean
    try:
        mean = np.load(path, allow_pickle=False)
    except (ValueError, OSError) as exc:
        raise ParameterError(f"mean_img {path}: not a .npy mean image ({exc}); MXNet's NDArray files are not "
                             "read: remove it to have it computed again") from None
    if mean.shape != shape:
        raise ParameterError(f"mean_img {path}: shape {mean.shape} does not match data_shape {shape}")
    return mean.astype(np.float32)


class ImageRecordIter(_BatchIter):
    """``mx.io.ImageRecordIter`` over a local ``.rec``: ``ImageRecordIter(path_imgrec=..., data_shape=..., ...)``.

    Parameters are MXNet's (:class:`RecordIterParams`,
    :class:`~mxrec.augment.AugmentParams` without ``data_shape``,
    :class:`~mxrec.normalize.NormalizeParams`). ``dtype``: ``float32``
    (default), ``uint8`` (raw pixels, no normalisation: do it on the GPU),
    ``int8``, ``float16``, ``float64``. ``mean_img`` names a ``.npy`` mean
    image, computed on first use (:func:`mean_image_file`). Labels come from
    the record headers, or with ``path_imglist`` from the ``.lst`` line whose
    index is the record's header id. ``batch.index`` holds the header ids.
    """

    def __init__(self, **params: Any) -> None:
        iter_names, augment_names, normalize_names = (RecordIterParams.names(), AugmentParams.names(),
                                                      _normalize_names())
        check_names(params, (*iter_names, *augment_names, *normalize_names), "ImageRecordIter")
        if "rotate_list" in params:
            params["rotate_list"] = _rotate_list(params["rotate_list"])
        missing = [name for name in ("path_imgrec", "data_shape", "batch_size") if name not in params]
        if missing:
            raise ParameterError(f"ImageRecordIter: missing required parameter(s) {', '.join(missing)}")
        p = self.params = RecordIterParams(**{k: v for k, v in params.items() if k in iter_names})
        self.augment_params = AugmentParams(**{k: v for k, v in params.items() if k in augment_names})
        self.normalize_params = NormalizeParams(**{k: v for k, v in params.items() if k in normalize_names})
        channels, height, width = p.data_shape
        mean_image = mean_image_file(p.mean_img, params) if p.mean_img else None
        self._writer = SlotWriter(self.normalize_params, channels, p.dtype or "float32", mean_image)
        self.dtype = self._writer.dtype
        self._augmenter = DefaultAugmenter(self.augment_params)
        self._decode_buffers = DecodeBuffers()  # each image goes into its batch slot before the next decode
        self._random = self.augment_params.is_random or self.normalize_params.is_random
        self._aug_key = stream_key(_AUGMENT_STREAM, *((0, p.seed) if p.seed_aug is None else (1, p.seed_aug)))
        self._labels = labels_by_id(p.path_imglist, p.label_width) if p.path_imglist else None
        self._reader = RecordReader(p.path_imgrec, index=p.path_imgidx or None)
        if p.drop_last:
            last_batch: LastBatch = "discard"
        else:
            last_batch = "wrap" if p.round_batch else "partial"
        sampler = BatchSampler(len(self._reader), p.batch_size, shuffle=p.shuffle, seed=p.seed,
                               num_parts=p.num_parts, part_index=p.part_index, last_batch=last_batch)
        pipeline = BatchPipeline(self._load_sample, batch_size=p.batch_size, sample_shape=p.data_shape,
                                 dtype=self.dtype, label_width=p.label_width, num_threads=p.preprocess_threads,
                                 prefetch=p.prefetch_buffer, on_broken=p.on_broken, describe=self.describe)
        label_shape = (p.batch_size,) if p.label_width == 1 else (p.batch_size, p.label_width)
        super().__init__(sampler, pipeline, [DataDesc(p.data_name, (p.batch_size, channels, height, width))],
                         [DataDesc(p.label_name, label_shape)])

    def describe(self, position: int) -> str:
        """``file: record key`` for messages."""
        return f"{self._reader.path}: record {self._reader.keys[position]!r}"

    def _load_sample(self, position: int, epoch: int, data: np.ndarray, label: np.ndarray) -> int:
        view = self._reader.view(position)
        header, start = unpack_header(view)
        self._fill_label(header, label, position)
        img = decode_pixels(view[start:], self.params.data_shape[0], buffers=self._decode_buffers)
        rng = SampleRandom(self._aug_key, epoch, position) if self._random else None
        self._writer.write(self._augmenter(img, rng), data, rng)
        return header.id

    def _fill_label(self, header: Any, out: np.ndarray, position: int) -> None:
        width = self.params.label_width
        if self._labels is not None:
            labels = self._labels.get(header.id)
            if labels is None:
                raise ListFileError(self.params.path_imglist, None,
                                    f"no line for record id {header.id} ({self.describe(position)})")
            out[:] = labels
        elif header.flag > 0:
            if header.flag != width:
                raise ParameterError(f"{self.describe(position)}: the record has {header.flag} labels but "
                                     f"label_width is {width}")
            out[:] = header.label
        elif width != 1:
            raise ParameterError(f"{self.describe(position)}: the record has one label but label_width is {width} "
                                 "(pack multi-labels with im2rec --pack-label, or give path_imglist)")
        else:
            out[0] = header.label

    def close(self) -> None:
        super().close()
        self._reader.close()


# -- ImageIter -------------------------------------------------------------------------------

_LAST_BATCH_HANDLES: dict[str, LastBatch] = {"pad": "wrap", "discard": "discard", "roll_over": "roll_over"}
_LABEL_DTYPES = ("float32", "float64", "int32", "int64")


class ImageIter(_BatchIter):
    """``mx.image.ImageIter``: images from a ``.rec`` or from files, through a list of Python augmenters.

    Sources: ``path_imgrec`` (labels from the record headers, or from
    ``path_imglist``/``imglist`` by record key), or image files named in
    ``path_imglist`` (a ``.lst``) or ``imglist`` (``[[label(s)..., path],
    ...]``) under ``path_root``. Each image is decoded to RGB ``uint8`` HWC,
    passed through ``aug_list`` (default: :func:`~mxrec.transforms.create_augmenter`
    with ``data_shape`` and the extra keyword arguments), and written CHW into
    a float32 batch. Augmenters from :mod:`mxrec.transforms` draw from the
    sample's random stream; other callables are called as ``aug(img)``.
    ``dtype`` is the label type. ``seed``, ``preprocess_threads``,
    ``prefetch_buffer`` and ``on_broken`` are mxrec's additions.

    Differences from MXNet: ``shuffle`` draws from ``seed`` (MXNet uses
    Python's global ``random``); ``num_parts`` gives equal parts as
    :func:`mxrec.sampler.shard` (MXNet gives each ``N // num_parts`` records
    and never reads the remainder; here ``"discard"`` does that and the other
    handles wrap around to ``ceil``).
    """

    def __init__(self, batch_size: int, data_shape: Sequence[int], label_width: int = 1,
                 path_imgrec: str | None = None, path_imglist: str | None = None, path_root: str | None = None,
                 path_imgidx: str | None = None, shuffle: bool = False, part_index: int = 0, num_parts: int = 1,
                 aug_list: list[Callable] | None = None, imglist: list | None = None, data_name: str = "data",
                 label_name: str = "softmax_label", dtype: str = "float32", last_batch_handle: str = "pad", *,
                 seed: int = 0, preprocess_threads: int = 1, prefetch_buffer: int = 2, on_broken: OnBroken = "skip",
                 **kwargs: Any) -> None:
        data_shape = _data_shape(data_shape)
        if data_shape[0] != 3:
            raise ParameterError(f"ImageIter decodes colour images: data_shape must have 3 channels, got {data_shape}")
        if last_batch_handle not in _LAST_BATCH_HANDLES:
            raise ParameterError(f"last_batch_handle must be one of {tuple(_LAST_BATCH_HANDLES)}, "
                                 f"not {last_batch_handle!r}")
        if dtype not in _LABEL_DTYPES:
            raise ParameterError(f"dtype (the label type) must be one of {_LABEL_DTYPES}, not {dtype!r}")
        if not (path_imgrec or path_imglist or isinstance(imglist, list)):
            raise ParameterError("ImageIter needs path_imgrec, path_imglist or imglist")
        if aug_list is None:
            check_names(kwargs, CREATE_AUGMENTER_OPTIONS, "ImageIter")
            aug_list = create_augmenter(data_shape, **kwargs)
        elif kwargs:
            check_names(kwargs, (), "ImageIter (with aug_list)")
        self.data_shape = data_shape
        self.label_width = label_width
        self.label_dtype = np.dtype(dtype)
        self.aug_list = list(aug_list)
        self._takes_rng = [isinstance(aug, Transform) for aug in self.aug_list]
        self.seed = seed
        self._aug_key = stream_key(_AUGMENT_STREAM, 2, seed)
        self.path_root = path_root or ""
        self._reader = RecordReader(path_imgrec, index=path_imgidx or None) if path_imgrec else None
        self._entries = self._image_list(path_imglist, imglist)
        if self._reader is not None:
            self._keys = list(self._reader.keys)
        else:
            self._keys = list(self._entries)
        sampler = BatchSampler(len(self._keys), batch_size, shuffle=shuffle, seed=seed, num_parts=num_parts,
                               part_index=part_index, last_batch=_LAST_BATCH_HANDLES[last_batch_handle])
        pipeline = BatchPipeline(self._load_sample, batch_size=batch_size, sample_shape=data_shape,
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
        key = self._keys[position]
        if self._reader is not None:
            return f"{self._reader.path}: record {key!r}"
        return os.path.join(self.path_root, self._entries[key][1])

    def _load_sample(self, position: int, epoch: int, data: np.ndarray, label: np.ndarray) -> int:
        key = self._keys[position]
        if self._reader is not None:
            header, start = unpack_header(view := self._reader.view(position))
            buf = view[start:]
            labels = header.label if self._entries is None else self._entries[key][0]
        else:
            labels, name = self._entries[key]
            with open(os.path.join(self.path_root, name), "rb") as f:
                buf = f.read()
        labels = np.atleast_1d(np.asarray(labels, np.float64))
        if labels.size < self.label_width:
            raise ParameterError(f"{self.describe(position)}: {labels.size} label(s), label_width is "
                                 f"{self.label_width}")
        img = np.ascontiguousarray(decode_pixels(buf, 3)[..., ::-1])  # RGB, as mx.image.imdecode
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
        super().close()
        if self._reader is not None:
            self._reader.close()
