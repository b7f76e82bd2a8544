"""mxrec's image steps as Ray Data ``map_batches`` callables, and feeding the ranks of a training job.

Each callable takes a batch of rows as :func:`~mxrec.ray.read_recordio` gives them (any batch format;
``batch_format="pyarrow"`` avoids a conversion) and returns the batch with its images processed:

* :class:`DecodeImages`: ``data`` (encoded bytes) -> ``image`` (pixels, HWC, RGB unless ``bgr``), decoded
  as the training pipelines decode (:func:`~mxrec.image.codec.decode_pixels`).
* :class:`TransformImages`: ``data`` -> ``data`` through an :class:`~mxrec.packing.prepare.ImageTransform`,
  im2rec's per-image step (decode, centre crop, resize, re-encode): the bytes a local ``mxrec pack`` of
  the same images with the same options would store. With :func:`~mxrec.ray.write_recordio` this
  re-encodes a whole dataset on the cluster.
* :class:`TrainImages`: ``data`` -> ``image`` as ``mx.io.ImageRecordIter`` prepares a sample: decode, MXNet's
  default augmenter (:class:`~mxrec.train.augment.AugmentParams`), then mirror, mean, std and dtype
  (:class:`~mxrec.train.normalize.NormalizeParams`) into a ``(C, H, W)`` array; ``label`` kept. A
  training-ready dataset.

A record that cannot be processed fails the batch with an error naming its key; Ray Data does not retry
such errors (a dying worker, however, is retried).

:func:`split_for_ranks` hands the ranks of a data-parallel job one iterator each
(``Dataset.streaming_split``): every rank gets the same number of rows, as a synchronous training step
needs. By default (``remainder="drop"``) the at most ``ranks - 1`` rows that do not divide evenly are left
out of each epoch, as Ray Train does; ``remainder="pad"`` repeats the first rows instead, as PyTorch's
``DistributedSampler`` does, so that no record is left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import pyarrow as pa
from ray.data import DataIterator, Dataset
from ray.data.block import BlockAccessor

from mxrec.errors import ImageDecodeError, ParameterError
from mxrec.format.seeds import stream_key
from mxrec.image.codec import decode_pixels, to_rgb
from mxrec.packing.prepare import ImageTransform
from mxrec.ray.datasource import image_column
from mxrec.train.augment import DefaultAugmenter
from mxrec.train.dataiter import AUGMENT_STREAM, data_shape_of
from mxrec.train.normalize import SlotWriter
from mxrec.train.params import preprocess_params
from mxrec.transforms.functional import entropy
from mxrec.transforms.rng import SampleRandom

Batch = Any  # a Ray Data batch: dict of numpy arrays, pyarrow Table or pandas DataFrame


def batch_table(batch: Batch) -> pa.Table:
    """Any Ray Data batch as a pyarrow Table."""
    if isinstance(batch, pa.Table):
        return batch
    return BlockAccessor.for_block(BlockAccessor.batch_to_block(batch)).to_arrow()


def _named(table: pa.Table) -> list[str]:
    """How each row is named in errors: ``record KEY`` (or ``row N`` without a key column)."""
    if "key" in table.column_names:
        return [f"record {key!r}" for key in table["key"].to_pylist()]
    return [f"row {n}" for n in range(table.num_rows)]


def _column(table: pa.Table, name: str, what: str) -> list:
    if name not in table.column_names:
        raise ParameterError(f"{what}: the rows have no {name!r} column (they have {table.column_names})")
    return table[name].to_pylist()


class DecodeImages:
    """``map_batches`` step: the ``data`` column decoded into an ``image`` column of pixels (``data`` dropped).

    Parameters
    ----------
    channels
        1 (grey, HW), 3 or 4.
    bgr
        Keep OpenCV's order (as MXNet's records hold) instead of RGB(A).

    Raises
    ------
    ParameterError
        ``channels`` is not 1, 3 or 4.
    """

    def __init__(self, channels: int = 3, *, bgr: bool = False) -> None:
        if channels not in (1, 3, 4):
            raise ParameterError(f"DecodeImages: channels must be 1, 3 or 4, not {channels}")
        self.channels = channels
        self.bgr = bgr

    def __call__(self, batch: Batch) -> pa.Table:
        table = batch_table(batch)
        images = []
        for data, name in zip(_column(table, "data", "DecodeImages"), _named(table), strict=True):
            img = decode_pixels(data, self.channels, what=name)
            images.append(img if self.bgr else to_rgb(img))
        return table.drop_columns(["data"]).append_column("image", image_column(images))


class TransformImages:
    """``map_batches`` step: each ``data`` through ``transform`` (im2rec's decode, crop, resize, re-encode).

    Parameters
    ----------
    transform
        The per-image step, as a local ``mxrec pack`` applies it.
    """

    def __init__(self, transform: ImageTransform) -> None:
        self.transform = transform

    def __call__(self, batch: Batch) -> pa.Table:
        table = batch_table(batch)
        out = [self.transform.apply(data, what=name)
               for data, name in zip(_column(table, "data", "TransformImages"), _named(table), strict=True)]
        position = table.column_names.index("data")
        return table.set_column(position, "data", pa.array(out, pa.binary()))


class TrainImages:
    """``map_batches`` step: encoded images -> training samples, as ``mx.io.ImageRecordIter`` makes them.

    Output rows: ``image`` ``(C, H, W)`` of ``dtype``, RGB, and the ``label``, ``key`` and ``id`` columns of
    the input (those it has).

    Parameters
    ----------
    data_shape
        ``(channels, height, width)``.
    dtype
        The images' dtype.
    seed
        Random choices a pure function of ``(seed, epoch, record id)``; ``None``: fresh for every batch, hence
        every epoch.
    epoch
        With a ``seed``: pass the epoch to get new random choices.
    label_width
        ``ImageRecordIter``'s: a ``label`` holding every label (:func:`~mxrec.ray.read_recordio`'s default)
        becomes ``float32``, one value per row for 1, ``(label_width,)`` for more, and a record with another
        count is an error naming it; ``None`` keeps the column as it is.
    **params
        ``ImageRecordIter``'s augmentation and normalisation parameters (``rand_crop``, ``rand_mirror``,
        ``resize``, ``mean_r``, ``std_r``, ...).

    Raises
    ------
    ParameterError
        ``label_width`` below 1, or a parameter ``ImageRecordIter`` refuses.
    """

    def __init__(self, data_shape: Sequence[int], *, dtype: str = "float32", seed: int | None = None,
                 epoch: int = 0, label_width: int | None = 1, **params: Any) -> None:
        self.data_shape = data_shape_of(data_shape)
        augment, normalize = preprocess_params({**params, "data_shape": self.data_shape}, "TrainImages")
        self.augmenter = DefaultAugmenter(augment)
        self.writer = SlotWriter(normalize, self.data_shape[0], dtype)  # per-thread scratch: made again by workers
        self.random = self.augmenter.random or normalize.is_random
        self.seed = seed
        self.epoch = epoch
        if label_width is not None and label_width < 1:
            raise ParameterError(f"TrainImages: label_width must be >= 1 or None, not {label_width}")
        self.label_width = label_width

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["writer"] = (self.writer.params, self.writer.channels, self.writer.dtype)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.writer = SlotWriter(*state["writer"])

    def __call__(self, batch: Batch) -> dict[str, np.ndarray]:
        table = batch_table(batch)
        names = _named(table)
        records = table["id"].to_pylist() if "id" in table.column_names else range(table.num_rows)
        key = stream_key(AUGMENT_STREAM, *((0, entropy()) if self.seed is None else (1, self.seed)))
        out = np.empty((table.num_rows, *self.data_shape), self.writer.dtype)
        for row, (data, name, record) in enumerate(zip(_column(table, "data", "TrainImages"), names, records,
                                                       strict=True)):
            rng = SampleRandom(key, self.epoch, record) if self.random else None
            img = decode_pixels(data, self.data_shape[0], what=name)
            try:
                self.writer.write(self.augmenter(img, rng), out[row], rng)
            except (ParameterError, ImageDecodeError) as exc:  # the augmenter's: say which record
                raise type(exc)(f"{name}: {exc}") from None
        kept = [column for column in ("label", "key", "id") if column in table.column_names]
        columns = BlockAccessor.for_block(table.select(kept)).to_batch_format("numpy")
        if "label" in columns and self.label_width is not None and pa.types.is_list(table.schema.field("label").type):
            columns["label"] = _fixed_labels(table["label"].to_pylist(), self.label_width, names)
        return {"image": out, **columns}


def _fixed_labels(labels: list[list[float]], width: int, names: list[str]) -> np.ndarray:
    """Every record's labels as ``float32``, ``(rows,)`` for width 1, else ``(rows, width)``; MXNet's rule."""
    for values, name in zip(labels, names, strict=True):
        if len(values) != width:
            raise ParameterError(f"{name}: {len(values)} label(s) but label_width is {width}")
    fixed = np.array(labels, np.float32).reshape(len(labels), width)
    return fixed[:, 0] if width == 1 else fixed


def split_for_ranks(ds: Dataset, ranks: int, *, remainder: Literal["drop", "pad"] = "drop",
                    locality_hints: list | None = None) -> list[DataIterator]:
    """One iterator per rank over ``ds``, each with the same number of rows (see the module docstring).

    The iterators must be consumed concurrently (one per training worker).

    Parameters
    ----------
    ds
        The dataset to split.
    ranks
        The ranks of the job.
    remainder
        ``"drop"``: leave out the rows that do not divide evenly; ``"pad"``: repeat the first rows instead.
        ``"pad"`` needs ``ds.count()``: free right after :func:`~mxrec.ray.read_recordio` (it comes from the
        ``.idx``), but after a ``map_batches`` it runs the pipeline -- pad the read dataset, then map it.
    locality_hints
        Go to ``Dataset.streaming_split``: the node of each rank's worker.

    Returns
    -------
    list of ray.data.DataIterator
        One per rank.

    Raises
    ------
    ParameterError
        ``ranks`` below 1, or ``remainder`` neither ``"drop"`` nor ``"pad"``.
    """
    if ranks < 1:
        raise ParameterError(f"split_for_ranks: ranks must be >= 1, not {ranks}")
    if remainder not in ("drop", "pad"):
        raise ParameterError(f"split_for_ranks: remainder must be 'drop' or 'pad', not {remainder!r}")
    if remainder == "pad":
        missing = -ds.count() % ranks
        if missing:
            ds = ds.union(ds.limit(missing))
    return ds.streaming_split(ranks, equal=True, locality_hints=locality_hints)
