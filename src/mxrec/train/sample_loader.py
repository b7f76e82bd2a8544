"""One record into its batch slot: ``ImageRecordIter``'s per-sample work, reusable on its own.

:class:`RecordSampleLoader` reads record ``position`` of a reader
(:func:`~mxrec.datasets.shard_set.open_dataset`'s, or a face set's faces), writes its label(s), decodes its image
(into a per-thread reused buffer), runs MXNet's default augmenter
(:class:`~mxrec.train.augment.DefaultAugmenter`) and writes the result,
mirrored and normalised (:class:`~mxrec.train.normalize.SlotWriter`), into a
slot of a preallocated batch. Every random choice comes from the stream keyed
by ``(seed, epoch, position)``, so results do not depend on which thread or
process loads the sample.

:class:`~mxrec.train.record_iter.ImageRecordIter` runs :meth:`RecordSampleLoader.load`
on its pipeline threads. :meth:`RecordSampleLoader.load_batch` fills a whole
batch in the calling thread -- what a ``DataLoader`` worker needs to produce a
ready-made batch tensor (no per-sample arrays, no collate copy).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from mxrec.errors import ListFileError, ParameterError
from mxrec.format.header import unpack_header
from mxrec.format.seeds import stream_key
from mxrec.image.codec import DecodeBuffers, decode_pixels, decode_pixels_scaled, jpeg_size
from mxrec.io.records import Records
from mxrec.train.augment import AugmentParams, DefaultAugmenter
from mxrec.train.dataiter import AUGMENT_STREAM
from mxrec.train.normalize import NormalizeParams, SlotWriter
from mxrec.train.timing import StageClock
from mxrec.transforms.rng import SampleRandom


class RecordSampleLoader:
    """Decode, augment, normalise and label records of ``reader`` into batch slots.

    ``dtype`` and ``mean_image`` as :class:`~mxrec.train.normalize.SlotWriter`;
    ``labels`` maps record ids to label arrays (from a ``.lst``, named by
    ``labels_source`` in errors) instead of the record headers' labels;
    ``identities``: the records are an InsightFace set's faces, labelled with
    their identity (a face's label, or the first of face2rec2's ``[class,
    aligned]``). ``view(position)`` gets a record's bytes (default:
    ``reader.view``; a remote iterator passes its prefetched batches).
    ``fast_decode``: decode a JPEG reduced (libjpeg-turbo's 1/2, 1/4, 1/8 scales) when the augmentation
    resizes it (``resize``), or crops a box that stays at least the output size (``random_resized_crop``),
    at a size the reduced image still reaches (:meth:`DefaultAugmenter.reduced_decode_size`): same random
    draws and output sizes, pixels close to a full decode's.
    """

    def __init__(self, reader: Records, augment: AugmentParams, normalize: NormalizeParams, *,
                 dtype: str | np.dtype = "float32", label_width: int = 1, labels: dict[int, np.ndarray] | None = None,
                 labels_source: str = "", seed: int = 0, seed_aug: int | None = None,
                 mean_image: np.ndarray | None = None, identities: bool = False,
                 view: Callable[[int], memoryview] | None = None, fast_decode: bool = False) -> None:
        self.reader = reader
        self.fast_decode = fast_decode
        self.clock: StageClock | None = None  # set to time each stage (:mod:`mxrec.train.timing`)
        self._view = reader.view if view is None else view
        self._identities = identities
        self.shape = tuple(augment.data_shape)  # (C, H, W) of a sample
        self.channels = augment.data_shape[0]
        self.label_width = label_width
        self._writer = SlotWriter(normalize, self.channels, dtype, mean_image)
        self.dtype = self._writer.dtype
        self._augmenter = DefaultAugmenter(augment)
        self._decode_buffers = DecodeBuffers()  # each image goes into its batch slot before the next decode
        self._random = augment.is_random or normalize.is_random
        self._aug_key = stream_key(AUGMENT_STREAM, *((0, seed) if seed_aug is None else (1, seed_aug)))
        self._labels = labels
        self._labels_source = labels_source

    def describe(self, position: int) -> str:
        """``file: record key`` for messages."""
        return self.reader.describe(position)

    def load(self, position: int, epoch: int, data: np.ndarray, label: np.ndarray) -> int:
        """Write record ``position`` into ``data`` (C, H, W) and ``label`` (label_width,); return its header id."""
        clock = self.clock
        started = clock.now() if clock is not None else 0
        view = self._view(position)
        header, start = unpack_header(view)
        self._fill_label(header, label, position)
        if clock is not None:
            started = clock.lap("fetch", started, len(view))
        img, source = self._decode(view[start:], epoch, position)
        if clock is not None:
            started = clock.lap("decode", started)
        rng = SampleRandom(self._aug_key, epoch, position) if self._random else None
        img = self._augmenter(img, rng, source)
        if clock is not None:
            started = clock.lap("augment", started)
        self._writer.write(img, data, rng)
        if clock is not None:
            clock.lap("write", started)
        return header.id

    def _decode(self, payload: memoryview, epoch: int, position: int) -> tuple[np.ndarray, tuple[int, int] | None]:
        """The image, and its full ``(height, width)`` when ``fast_decode`` decoded it reduced (else ``None``)."""
        if self.fast_decode:
            size = jpeg_size(payload)
            # a copy of the sample's stream: the augmenter draws the same numbers from its own
            ahead = SampleRandom(self._aug_key, epoch, position) if self._random else None
            target = None if size is None else self._augmenter.reduced_decode_size(*size, ahead)
            if target is not None:
                return decode_pixels_scaled(payload, self.channels, *target, buffers=self._decode_buffers), size
        return decode_pixels(payload, self.channels, buffers=self._decode_buffers), None

    def load_batch(self, positions: Sequence[int] | np.ndarray, epoch: int, data: np.ndarray,
                   label: np.ndarray) -> np.ndarray:
        """Fill ``data[i]``/``label[i]`` with record ``positions[i]``; return the header ids (int64)."""
        load = self.load
        ids = np.empty(len(positions), np.int64)
        for slot, position in enumerate(np.asarray(positions, np.int64).tolist()):
            ids[slot] = load(position, epoch, data[slot], label[slot])
        return ids

    def _fill_label(self, header: Any, out: np.ndarray, position: int) -> None:
        width = self.label_width
        if self._labels is not None:
            labels = self._labels.get(header.id)
            if labels is None:
                raise ListFileError(self._labels_source, None,
                                    f"no line for record id {header.id} ({self.describe(position)})")
            out[:] = labels
        elif self._identities:
            out[0] = header.label if header.flag == 0 else header.label[0]
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
