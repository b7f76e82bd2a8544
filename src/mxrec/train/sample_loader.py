"""One record into its batch slot: ``ImageRecordIter``'s per-sample work, reusable on its own.

:class:`RecordSampleLoader` reads record ``position`` of a reader
(:func:`~mxrec.datasets.shard_set.open_dataset`'s, or a face set's faces), writes its label(s), decodes its image
(into a per-thread reused buffer), runs the augmentation steps -- MXNet's default augmenter
(:class:`~mxrec.train.augment.DefaultAugmenter`), or the caller's own
(:class:`~mxrec.transforms.steps.Step` objects) -- and writes the result,
mirrored and normalised (:class:`~mxrec.train.normalize.SlotWriter`), into a
slot of a preallocated batch. Every random choice comes from the stream keyed
by ``(seed, epoch, position)``, so results do not depend on which thread or
process loads the sample.

:class:`~mxrec.train.record_iter.ImageRecordIter`'s pipeline threads load a chunk of slots at a time: each
sample is decoded and augmented into a per-thread staging array (:meth:`RecordSampleLoader.stage`), then the
chunk is mirrored-and-normalised into its slots with a few whole-chunk numpy calls
(:meth:`RecordSampleLoader.finish`, :class:`~mxrec.train.normalize.StagedImages`): the per-sample Python, held
under the GIL, is what limits the threads on small images. :meth:`RecordSampleLoader.load` does one sample;
:meth:`RecordSampleLoader.load_batch` fills a whole batch in the calling thread -- what a ``DataLoader`` worker
needs to produce a ready-made batch tensor (no per-sample arrays, no collate copy).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from mxrec.errors import ListFileError, ParameterError
from mxrec.format.header import unpack_header
from mxrec.format.seeds import extend_key, stream_key
from mxrec.image.codec import DecodeBuffers, decode_pixels, decode_pixels_scaled, jpeg_size
from mxrec.io.records import Records
from mxrec.train.augment import AugmentParams, DefaultAugmenter
from mxrec.train.dataiter import AUGMENT_STREAM
from mxrec.train.normalize import NormalizeParams, SlotWriter, StagedImages
from mxrec.train.timing import StageClock
from mxrec.transforms.rng import SampleRandom
from mxrec.transforms.steps import Step, StepList


class RecordSampleLoader:
    """Decode, augment, normalise and label records of ``reader`` into batch slots.

    ``dtype`` and ``mean_image`` as :class:`~mxrec.train.normalize.SlotWriter`;
    ``labels`` maps record ids to label arrays (from a ``.lst``, named by
    ``labels_source`` in errors) instead of the record headers' labels;
    ``identities``: the records are an InsightFace set's faces, labelled with
    their identity (a face's label, or the first of face2rec2's ``[class,
    aligned]``). ``view(position)`` gets a record's bytes (default:
    ``reader.view``; a remote iterator passes its prefetched batches).
    ``steps``: the augmentation (:class:`~mxrec.transforms.steps.Step` objects, on BGR(A) ``uint8`` images
    as decoded, ending at ``augment.data_shape``'s size) instead of ``augment``'s default augmenter.
    ``fast_decode``: decode a JPEG reduced (libjpeg-turbo's 1/2, 1/4, 1/8 scales) where the first step allows
    (:meth:`~mxrec.transforms.steps.Step.reduced_decode`: ``resize``, or a random-resized crop whose box stays
    at least the output size): the draws are made first, for the full-size image, and applied to the reduced
    one: same random choices and output sizes, pixels close to a full decode's.
    """

    def __init__(self, reader: Records, augment: AugmentParams, normalize: NormalizeParams, *,
                 dtype: str | np.dtype = "float32", label_width: int = 1, labels: dict[int, np.ndarray] | None = None,
                 labels_source: str = "", seed: int = 0, seed_aug: int | None = None,
                 mean_image: np.ndarray | None = None, identities: bool = False,
                 view: Callable[[int], memoryview] | None = None, fast_decode: bool = False,
                 steps: Sequence[Step] | None = None) -> None:
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
        self._steps = DefaultAugmenter(augment) if steps is None else StepList(steps)
        self._own_steps = steps is not None  # the caller's: their output is checked
        self._size = self.shape[1:]  # (H, W)
        self._out_shape = self._size if self.channels == 1 else (*self._size, self.channels)
        self._decode_buffers = DecodeBuffers()  # each image goes into its batch slot before the next decode
        self._random = self._steps.random or normalize.is_random
        self._aug_key = stream_key(AUGMENT_STREAM, *((0, seed) if seed_aug is None else (1, seed_aug)))
        self._epoch_keys: dict[int, int] = {}  # epoch -> stream_key(aug_key, epoch): mixed once an epoch
        self._labels = labels
        self._labels_source = labels_source

    def describe(self, position: int) -> str:
        """``file: record key`` for messages."""
        return self.reader.describe(position)

    def load(self, position: int, epoch: int, data: np.ndarray, label: np.ndarray) -> int:
        """Write record ``position`` into ``data`` (C, H, W) and ``label`` (label_width,); return its header id."""
        staged = self.staging(1)
        record_id = self.stage(staged, 0, position, epoch, label)
        self.finish(staged, data[None], 1)
        return record_id

    def staging(self, capacity: int) -> StagedImages:
        """This thread's staging for a chunk of up to ``capacity`` samples (:meth:`stage`, then :meth:`finish`)."""
        return self._writer.staged(capacity, self._size)

    def stage(self, staged: StagedImages, k: int, position: int, epoch: int, label: np.ndarray) -> int:
        """Decode and augment record ``position`` into image ``k`` of ``staged`` and write its ``label``
        (label_width,); return its header id. :meth:`finish` writes the chunk into its batch slots."""
        clock = self.clock
        started = clock.now() if clock is not None else 0
        view = self._view(position)
        header, start = unpack_header(view)
        self._fill_label(header, label, position)
        if clock is not None:
            started = clock.lap("fetch", started, len(view))
        rng = self._stream(epoch, position) if self._random else None
        img, params, rng = self._decode(view[start:], epoch, position, rng)
        if clock is not None:
            started = clock.lap("decode", started)
        img = self._steps(img, rng) if params is None else self._steps.apply(img, params)
        if self._own_steps and (img.shape != self._out_shape or img.dtype != np.uint8):
            raise ParameterError(f"{self.describe(position)}: the augmentation steps made a {img.dtype} image of "
                                 f"shape {img.shape}; data_shape {self.shape} needs uint8 of shape {self._out_shape} "
                                 "(end the steps with a crop or resize to the output size)")
        if clock is not None:
            started = clock.lap("augment", started)
        staged.put(k, img, rng)
        if clock is not None:
            clock.lap("write", started)
        return header.id

    def finish(self, staged: StagedImages, data: np.ndarray, n: int) -> None:
        """Write the first ``n`` images :meth:`stage` put in ``staged`` into ``data`` (``(n, C, H, W)``)."""
        clock = self.clock
        started = clock.now() if clock is not None else 0
        staged.write(data, n)
        if clock is not None:
            clock.lap("write", started, count=0)  # the samples were counted as they were staged

    def _stream(self, epoch: int, position: int) -> SampleRandom:
        """The sample's random stream: ``SampleRandom(aug_key, epoch, position)``, its epoch's part mixed once."""
        key = self._epoch_keys.get(epoch)
        if key is None:
            key = self._epoch_keys[epoch] = stream_key(self._aug_key, epoch)
        return SampleRandom.from_key(extend_key(key, position))

    def _decode(self, payload: memoryview, epoch: int, position: int,
                rng: SampleRandom | None) -> tuple[np.ndarray, list[Any] | None, SampleRandom | None]:
        """The image, the steps' draws for it (``None``: not drawn yet), and the stream the rest of the sample
        draws from.

        With ``fast_decode`` and a JPEG whose size its headers give, the steps draw for that size before the
        image is decoded, reduced when their first step allows; else they draw as they run, after decoding.
        """
        steps, channels, buffers = self._steps, self.channels, self._decode_buffers
        if self.fast_decode:
            size = jpeg_size(payload)
            if size is not None:
                shape = size if channels == 1 else (*size, channels)
                params = steps.draw(rng, shape)
                reduced = steps.reduced_decode(params, shape)
                if reduced is not None:
                    target, params = reduced
                    return decode_pixels_scaled(payload, channels, *target, buffers=buffers), params, rng
                img = decode_pixels(payload, channels, buffers=buffers)
                if img.shape == shape:
                    return img, params, rng
                # the headers were wrong about the size: the draws again, from a new copy of the stream
                return img, None, self._stream(epoch, position) if self._random else None
        return decode_pixels(payload, channels, buffers=buffers), None, rng

    def load_batch(self, positions: Sequence[int] | np.ndarray, epoch: int, data: np.ndarray,
                   label: np.ndarray) -> np.ndarray:
        """Fill ``data[i]``/``label[i]`` with record ``positions[i]``; return the header ids (int64)."""
        positions = np.asarray(positions, np.int64).tolist()
        staged, stage = self.staging(len(positions)), self.stage
        ids = np.empty(len(positions), np.int64)
        for slot, position in enumerate(positions):
            ids[slot] = stage(staged, slot, position, epoch, label[slot])
        self.finish(staged, data, len(positions))
        return ids

    def _fill_label(self, header: Any, out: np.ndarray, position: int) -> None:
        width = self.label_width
        if self._labels is not None:
            labels = self._labels.get(header.id)
            if labels is None:
                raise ListFileError(self._labels_source,
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
