"""``mx.io.ImageRecordIter`` without MXNet: every MXNet parameter with its meaning, numpy batches.

See :class:`RecordIterParams`, :class:`~mxrec.train.augment.AugmentParams`
and :class:`~mxrec.train.normalize.NormalizeParams` for the parameters;
MXNet's default augmenter is :mod:`mxrec.train.augment`; output is ``(batch,
C, H, W)`` RGB in ``dtype``, labels ``(batch,)`` when ``label_width`` is 1
else ``(batch, label_width)``. Epochs, shuffling, sharding and last batches
follow :mod:`mxrec.train.sampler`, which documents where MXNet goes wrong and
what happens here instead; decoding runs on :mod:`mxrec.train.pipeline`'s
threads, or, with ``preprocess_processes``, in :mod:`mxrec.train.processes`'
worker processes. Every random choice for a sample comes from a stream keyed by
``(seed_aug or seed, epoch, record)`` (:mod:`mxrec.transforms.rng`), so a run
is reproducible whatever ``preprocess_threads`` and ``preprocess_processes``.

``path_imgrec`` may be anything :func:`mxrec.datasets.opening.open_dataset` opens:
a local or remote ``.rec`` (``s3://...``), a shard set (glob, brace range,
manifest, folder), a mixture file, or a dataset already opened (``open_dataset``'s
or :func:`~mxrec.datasets.mixture.mix`'s), used as it is. Records are fetched a batch at a time (remote ones with
coalesced ranged reads) ahead of decoding (:mod:`mxrec.train.prefetch`).
``state_dict()``/``load_state_dict()`` save and resume the position in the
epoch, also on another number of ranks (:mod:`mxrec.train.sampler`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from mxrec.datasets.face_set import FaceSet, check_layout_name
from mxrec.datasets.samples import open_samples
from mxrec.errors import ListFileError, ParameterError
from mxrec.io.lists import read_list
from mxrec.io.records import Records
from mxrec.io.shared_downloads import SharedDownloads, shared_downloads
from mxrec.storage.atomic import atomic_open
from mxrec.train.augment import AugmentParams
from mxrec.train.dataiter import OTHER_LOADERS_NAMES, BatchIter, DataDesc, data_shape_of
from mxrec.train.normalize import NormalizeParams
from mxrec.train.params import check_aug_list, split_params
from mxrec.train.pipeline import BatchPipeline, OnBroken, check_pipeline
from mxrec.train.prefetch import BatchPrefetcher, lookahead
from mxrec.train.processes import ProcessPipeline, RecordBatchRecipe
from mxrec.train.sample_loader import RecordSampleLoader
from mxrec.train.sampler import DEFAULT_SHUFFLE_WINDOW, BatchSampler, LastBatch, resolve_parts
from mxrec.train.timing import StageClock


@dataclass(frozen=True)
class RecordIterParams:
    """``ImageRecordIter``'s own parameters (the augmenter's and normaliser's are in their modules).

    MXNet's meaning throughout, except for ``num_parts``/``part_index`` (ranks
    take turns in one global order, :mod:`mxrec.train.sampler`); the
    parameters MXNet does not have are marked *mxrec*.

    Parameters
    ----------
    path_imgrec
        The dataset: anything :func:`~mxrec.datasets.opening.open_dataset` opens (a
        local or remote ``.rec``, a shard set, a mixture file ``NAME.mix.json``), or
        a dataset already opened (a :class:`~mxrec.io.records.Records`, a
        :func:`~mxrec.datasets.mixture.mix`), read as it is.
    data_shape
        ``(channels, height, width)`` of each output image; channels 1, 3 or 4.
    batch_size
        Samples per batch.
    path_imgidx
        The ``.idx``; default: the one beside the ``.rec``, else a scan.
    path_imglist
        A ``.lst`` whose labels replace the record headers': the line whose index
        is the record's header id gives its ``label_width`` labels.
    label_width
        Labels per sample: labels are ``(batch,)`` when 1, else
        ``(batch, label_width)``.
    shuffle
        Shuffle the records each epoch (a new order per epoch, from ``seed``).
    seed
        Seed of the shuffle order, and of the augmentations when ``seed_aug`` is
        ``None``.
    seed_aug
        Seed of the augmentations.
    num_parts, part_index
        Number of ranks and this rank; every rank gets the same number of
        batches. Left unset, they come from an initialised
        ``torch.distributed`` (else 1 and 0).
    round_batch
        ``True``: the last batch of an epoch is filled from the start of the
        epoch (counted in ``pad``); ``False``: it keeps empty slots (zeros,
        index -1, counted in ``pad``).
    drop_last
        *mxrec*: drop each epoch's last incomplete step instead.
    preprocess_threads
        Threads that decode and augment (in each worker process, with ``preprocess_processes``).
    preprocess_processes
        *mxrec*: worker processes that build whole batches (:mod:`mxrec.train.processes`), for machines where
        the GIL binds (small images: the per-sample Python is the cost). ``0`` (default): threads only. With
        ``N`` > 0, batch ``b`` of an epoch is built by worker ``b mod N`` on ``preprocess_threads`` threads of
        its own (``N * preprocess_threads`` in all: on small images ``preprocess_threads=1`` and one process a
        core); the batches are byte-identical to the threads', and ``prefetch_buffer`` (at least 2 per worker)
        are built ahead in shared memory.
    preprocess_start_method
        *mxrec*: how the worker processes start: ``"fork"``, ``"spawn"`` or ``"forkserver"``; default
        ``"fork"`` where the platform has it, else ``"spawn"`` (which needs ``aug_list``'s steps to pickle).
    prefetch_buffer
        Batches loaded ahead.
    dtype
        Output type: ``"float32"`` (default), ``"uint8"`` (raw pixels, no
        normalisation: do it on the GPU), ``"int8"``, ``"float16"``,
        ``"float64"``.
    on_broken
        *mxrec*: on a record whose image cannot be decoded, ``"skip"`` uses the
        next record that decodes in its place, with a warning, counted in
        ``skipped`` (:func:`~mxrec.train.pipeline.load_decodable`);
        ``"error"`` raises.
    layout
        *mxrec*: :data:`~mxrec.format.insightface.LAYOUTS`. ``"auto"`` reads an
        InsightFace face set (header record under ``.idx`` key 0) as its face
        records only, each labelled with its identity (the face record's label,
        or its first label), and any other dataset record by record;
        ``"insightface"`` requires a face set; ``"plain"`` reads every record.
    data_name, label_name
        The names in ``provide_data`` / ``provide_label``.
    aug_seq
        The augmenter: only MXNet's ``"aug_default"`` exists (your own steps go in ``aug_list``).
    aug_list
        *mxrec*: your own augmentation, a list of :class:`~mxrec.transforms.steps.Step` objects, in place of
        MXNet's default augmenter (whose parameters then do not apply: start the list with
        :func:`~mxrec.train.augment.default_steps` to keep them). The steps get each decoded image as OpenCV's
        BGR(A) ``uint8`` and must end at ``data_shape``'s size; they draw from the sample's stream, keyed by
        ``(seed_aug or seed, epoch, record)``. Mirror, mean, std and ``dtype`` still apply.
    mean_img
        A ``.npy`` mean image, computed over the dataset on first use
        (:func:`mean_image_file`) and subtracted.
    verbose, ctx, device_id
        Accepted for compatibility; no effect (numpy output).
    shuffle_chunk_size
        MXNet's shuffle chunk (MB): sets the block size when ``shuffle_block``
        is not given.
    shuffle_chunk_seed
        Accepted for compatibility; no effect.
    shuffle_block
        *mxrec*: block shuffle, records per block. ``None``: a global shuffle
        for local data, blocks of about 256 KiB for remote data; ``0`` forces a
        global shuffle.
    shuffle_window
        *mxrec*: blocks open at once (a sliding window; ``0``: about 128 MiB of them).
    stick_to_shard, pad_last_batch
        *mxrec*: DALI-style fixed contiguous parts per rank, and whether a
        short part is padded with its last record.
    storage_options
        *mxrec*: fsspec options for remote data.
    cache_dir
        *mxrec*: local block cache for remote data (default
        ``$MXREC_CACHE_DIR``).
    fast_decode
        *mxrec*: decode JPEGs reduced, by libjpeg-turbo's scaled IDCT (1/2,
        1/4, 1/8), when ``resize`` or a random-resized crop scales them down
        anyway, or the first step of ``aug_list`` allows it
        (:meth:`~mxrec.transforms.steps.Step.reduced_decode`,
        :class:`~mxrec.train.sample_loader.RecordSampleLoader`).
    """

    path_imgrec: str | Records
    data_shape: tuple[int, int, int]
    batch_size: int
    path_imgidx: str = ""
    path_imglist: str = ""
    label_width: int = 1
    shuffle: bool = False
    seed: int = 0
    seed_aug: int | None = None
    num_parts: int | None = None
    part_index: int | None = None
    round_batch: bool = True
    drop_last: bool = False
    preprocess_threads: int = 4
    preprocess_processes: int = 0
    preprocess_start_method: str | None = None
    prefetch_buffer: int = 4
    dtype: str | None = None
    on_broken: OnBroken = "skip"
    layout: str = "auto"
    data_name: str = "data"
    label_name: str = "softmax_label"
    aug_seq: str = "aug_default"
    mean_img: str = ""
    verbose: bool = True
    ctx: str = "gpu"
    device_id: int = 0
    shuffle_chunk_size: int = 0
    shuffle_chunk_seed: int = 0
    shuffle_block: int | None = None
    shuffle_window: int = DEFAULT_SHUFFLE_WINDOW
    stick_to_shard: bool = False
    pad_last_batch: bool = True
    storage_options: dict | None = None
    cache_dir: str | None = None
    fast_decode: bool = False
    aug_list: tuple | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "data_shape", data_shape_of(self.data_shape))
        if not isinstance(self.path_imgrec, Records) and not self.path_imgrec:  # (an opened one may be empty)
            raise ParameterError("path_imgrec is required")
        if self.label_width < 1:
            raise ParameterError(f"label_width must be >= 1, got {self.label_width}")
        if self.aug_seq != "aug_default":
            raise ParameterError(f"aug_seq: only MXNet's 'aug_default' augmenter exists, not {self.aug_seq!r} (your "
                                 "own augmentation steps go in aug_list)")
        if self.ctx not in ("gpu", "cpu"):
            raise ParameterError(f"ctx must be 'gpu' or 'cpu', not {self.ctx!r}")
        check_layout_name(self.layout)
        if self.preprocess_processes < 0:
            raise ParameterError(f"preprocess_processes must be >= 0, got {self.preprocess_processes}")

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))


def labels_by_id(path_imglist: str | os.PathLike, label_width: int) -> dict[int, np.ndarray]:
    """``{index: first label_width labels}`` from a ``.lst`` (MXNet's ``ImageLabelMap``)."""
    labels = {}
    for number, entry in enumerate(read_list(path_imglist), 1):
        if len(entry.labels) < label_width:
            raise ListFileError(path_imglist, f"entry {entry.index} has {len(entry.labels)} label(s), "
                                              f"label_width is {label_width}", line=number)
        labels[entry.index] = np.array(entry.labels[:label_width], np.float32)
    return labels


def mean_image_file(path: str, params: dict[str, Any]) -> np.ndarray:
    """The mean image for ``ImageRecordIter(**params)``: loaded from ``path`` (a ``.npy``), else computed and saved.

    Computed as MXNet does, over one pass of the records (of this part) through
    the same augmentation, and written atomically to ``path``. It is the mean of
    the output images (``(C, H, W)``, RGB, mirrored as the output is); MXNet
    stores it in its own NDArray format, which is not read here.
    """
    shape = data_shape_of(params["data_shape"])
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
        with atomic_open(path, "wb") as f:
            np.save(f, mean)
        return mean
    try:
        mean = np.load(path, allow_pickle=False)
    except (ValueError, OSError) as exc:
        raise ParameterError(f"mean_img {path}: not a .npy mean image ({exc}); MXNet's NDArray files are not "
                             "read: remove it to have it computed again") from None
    if mean.shape != shape:
        raise ParameterError(f"mean_img {path}: shape {mean.shape} does not match data_shape {shape}")
    return mean.astype(np.float32)


class ImageRecordIter(BatchIter):
    """``mx.io.ImageRecordIter`` over any dataset (a local or remote ``.rec``, a shard set), numpy batches.

    ``ImageRecordIter(path_imgrec=..., data_shape=..., batch_size=..., ...)``;
    iterate it (each ``for`` over a finished epoch starts the next one) or use
    MXNet's ``reset()``/``next()``. Batches are ``(batch, C, H, W)`` RGB;
    ``batch.index`` holds the record header ids, ``batch.pad`` the padding slots.

    Parameters
    ----------
    **params
        MXNet's parameters, by keyword: :class:`RecordIterParams` (the
        iterator's own, ``aug_list`` among them: your own augmentation steps),
        :class:`~mxrec.train.augment.AugmentParams` (without ``data_shape``) and
        :class:`~mxrec.train.normalize.NormalizeParams`.
        ``path_imgrec``, ``data_shape`` and ``batch_size`` are required.

    Raises
    ------
    ParameterError
        A parameter is unknown, misspelled, out of range, or conflicts with
        another (MXNet ignores unknown ones silently).
    """

    def __init__(self, **params: Any) -> None:
        own, augment, normalize = split_params(params, (RecordIterParams, AugmentParams, NormalizeParams),
                                               "ImageRecordIter", hints=OTHER_LOADERS_NAMES)
        if "aug_list" in own:
            own["aug_list"] = check_aug_list(own["aug_list"], augment, "ImageRecordIter")
        missing = [name for name in ("path_imgrec", "data_shape", "batch_size") if name not in params]
        if missing:
            raise ParameterError(f"ImageRecordIter: missing required parameter(s) {', '.join(missing)}")
        p = self.params = RecordIterParams(**own)
        self.augment_params = AugmentParams(**augment)
        self.normalize_params = NormalizeParams(**normalize)
        channels, height, width = p.data_shape
        mean_image = mean_image_file(p.mean_img, params) if p.mean_img else None
        labels = labels_by_id(p.path_imglist, p.label_width) if p.path_imglist else None
        samples = open_samples(p.path_imgrec, index=p.path_imgidx or None, layout=p.layout,
                               storage_options=p.storage_options, cache_dir=p.cache_dir)
        self._samples = samples  # (closed with the iterator when opened for it)
        self._downloads: SharedDownloads | None = None  # the worker processes' shared blocks
        self._faces = samples.faces
        self._reader = samples.records  # every record, or a face set's faces
        if self._faces is not None and p.label_width != 1 and labels is None:
            samples.close()
            raise ParameterError(f"{self._reader.path} is an InsightFace face set: one label per face (its identity), "
                                 f"so label_width must be 1, not {p.label_width}")
        loader_options = dict(dtype=p.dtype or "float32", label_width=p.label_width, labels=labels,
                              labels_source=p.path_imglist, seed=p.seed, seed_aug=p.seed_aug, mean_image=mean_image,
                              identities=self._faces is not None, fast_decode=p.fast_decode, steps=p.aug_list)
        if not p.preprocess_processes:  # (worker processes fetch their batches' records themselves)
            self._prefetcher = BatchPrefetcher(self._reader)
        self._loader = RecordSampleLoader(self._reader, self.augment_params, self.normalize_params,
                                          view=self._record_view, **loader_options)
        self.dtype = self._loader.dtype
        num_parts, part_index = resolve_parts(p.num_parts, p.part_index)
        if p.drop_last:
            last_batch: LastBatch = "discard"
        else:
            last_batch = "wrap" if p.round_batch else "partial"
        order = self._reader.epoch_order(shuffle=p.shuffle, seed=p.seed, shuffle_block=p.shuffle_block,
                                         shuffle_window=p.shuffle_window, chunk_megabytes=p.shuffle_chunk_size)
        sampler = BatchSampler(len(self._reader), p.batch_size, num_parts=num_parts, part_index=part_index,
                               last_batch=last_batch, stick_to_shard=p.stick_to_shard,
                               pad_last_batch=p.pad_last_batch, order=order)
        read_plan = sampler.read_plan(lookahead(p.batch_size, p.prefetch_buffer))
        self._reader.follow(read_plan)
        pipeline_options = dict(num_records=len(self._reader), batch_size=p.batch_size, sample_shape=p.data_shape,
                                dtype=self.dtype, label_width=p.label_width, num_threads=p.preprocess_threads,
                                on_broken=p.on_broken)
        pipeline: BatchPipeline | ProcessPipeline
        if p.preprocess_processes:
            check_pipeline(p.preprocess_threads, p.prefetch_buffer, p.on_broken)  # here, not in a worker
            # (the workers read ahead along one order: with two or more, they share what they download)
            self._downloads = (shared_downloads(p.cache_dir, p.storage_options) if p.preprocess_processes > 1
                               else None)
            recipe = RecordBatchRecipe(self._reader, self.augment_params, self.normalize_params, loader_options,
                                       pipeline_options, read_plan if self._downloads is None
                                       else self._downloads.plan(read_plan))
            pipeline = ProcessPipeline(recipe, processes=p.preprocess_processes, batch_size=p.batch_size,
                                       sample_shape=p.data_shape, dtype=self.dtype, label_width=p.label_width,
                                       prefetch=p.prefetch_buffer, describe=self.describe,
                                       start_method=p.preprocess_start_method)
        else:
            pipeline = BatchPipeline(self._loader.load, prefetch=p.prefetch_buffer, describe=self.describe,
                                     chunks=self._loader, **pipeline_options)
        label_shape = (p.batch_size,) if p.label_width == 1 else (p.batch_size, p.label_width)
        super().__init__(sampler, pipeline, [DataDesc(p.data_name, (p.batch_size, channels, height, width))],
                         [DataDesc(p.label_name, label_shape)])

    @property
    def faces(self) -> FaceSet | None:
        """The face records read, for an InsightFace face set (:func:`~mxrec.datasets.face_set.read_face_set`)."""
        return self._faces

    def describe(self, position: int) -> str:
        """Where a sample comes from, for messages.

        Parameters
        ----------
        position
            The sample's number.

        Returns
        -------
        str
            ``file: record key``.
        """
        return self._reader.describe(position)

    @property
    def reader(self) -> Records:
        """The records read (every record of the dataset, or a face set's faces)."""
        return self._reader

    def attach_clock(self, clock: StageClock | None) -> None:
        """Time every stage of loading.

        With ``preprocess_processes``, only the waits for batches are timed (the stages run in the workers).

        Parameters
        ----------
        clock
            What the stages are timed into (:mod:`mxrec.train.timing`); ``None`` stops timing.
        """
        self._loader.clock = clock
        self._pipeline.clock = clock

    def close(self) -> None:
        """Stop the loading threads (or worker processes), and close the dataset if it was opened for the
        iterator (one handed in opened stays open)."""
        super().close()
        self._samples.close()
        if self._downloads is not None:
            self._downloads.remove()

