"""Reading RecordIO datasets into Ray Data: :func:`read_recordio` and its ``Datasource``, :class:`RecordSource`.

What is read: anything mxrec opens as a dataset (:func:`~mxrec.datasets.shard_set.resolve_dataset`): one ``.rec``
or URL, a list, a glob, a brace range, a folder or prefix, a shard manifest (``NAME.manifest.json``), or
the ``.rec`` name a sharded pack was given; a mixture file; or a dataset already opened (``open_dataset``'s, a
shard set, a face set's faces, a :func:`~mxrec.datasets.mixture.mix`), whose ``.idx`` tables are taken as they are
(not read again) and whose storage settings go to the tasks (a mixture's rows: its sources' records once each,
class labels moved by its label offsets).
Rows are the records in dataset order (shard by shard, ``.idx`` order within a shard, as
:class:`~mxrec.io.local_reader.RecordReader` gives them):

===========  ===================================================================================
``key``      the ``.idx`` key (``int64``; ``uint64`` when a key needs it; ``string`` with ``key_type=str``),
             or the record's position in its shard when the shard has no ``.idx``
``flag``     ``uint32``, the IRHeader's label count (0: one scalar label)
``label``    by default (``label_width=None``) a ``list<float32>`` of every label (one value for a
             scalar label), as Ray's own readers read every column; ``label_width=1`` a ``float32``
             column, ``label_width=k > 1`` a ``(k,)`` tensor
``id``       ``uint64``, the IRHeader's id (im2rec: the ``.lst`` index); ``id2`` likewise
``data``     ``binary``, the bytes after the IRHeader (the encoded image)
``image``    instead of ``data`` with ``decode=True``: ``uint8`` pixels, HWC (HW for one channel), RGB
             unless ``bgr``; a tensor column (variable-shaped when the images differ in size)
===========  ===================================================================================

With ``header=False`` the rows are only ``key`` and ``data`` (the whole payload), for records that hold
no IRHeader. A ``label_width`` follows MXNet's ``ImageRecordIter``: every record must hold exactly that
many labels (a scalar counts as one), else the read fails naming the file and record.

How it is split: a shard with an ``.idx`` is cut by ``.idx`` position ranges of about equal bytes, so one
large ``.rec`` spreads over the whole cluster; a read task may also cover the end of one shard and the
start of the next. A shard without an ``.idx`` is read whole by one task, which scans it. The number of
read tasks is ``override_num_blocks`` (or Ray's choice from the data size); each task yields blocks of at
most ``DataContext.target_max_block_size`` bytes of records. Row counts come from the ``.idx`` files (or
a manifest), so ``count()`` is exact without reading a record; only shards with neither are counted by
reading them. The ``.idx`` files are read once, on the driver, when the dataset is created, and checked
as :class:`~mxrec.io.local_reader.RecordReader` checks them (duplicate keys, offsets outside the file).

Local paths must be visible to every node (a shared file system); URLs (``s3://``, ``gs://``, ``http://``,
...) are read by each task for itself: one ranged request for its records (a whole file without an
``.idx``), with ``storage_options`` (credentials, endpoint) sent along.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa
import ray
from ray.data import Dataset
from ray.data.block import BlockMetadata
from ray.data.datasource import Datasource, ReadTask
from ray.data.extensions import ArrowTensorArray, ArrowVariableShapedTensorArray

from mxrec.datasets.mixture import Mixture
from mxrec.datasets.opening import DatasetSpec, as_mixture, is_mixture
from mxrec.datasets.shard_set import Shard, ShardSetReader, resolve_dataset
from mxrec.datasets.subset import RecordSubset
from mxrec.errors import HeaderError, ManifestError, ParameterError, RecordFormatError
from mxrec.format import framing
from mxrec.format.header import label_array, shift_class_label, unpack_header
from mxrec.format.idx import IntKeys, KeyType
from mxrec.image.codec import decode_pixels, to_rgb
from mxrec.io.index import resolve_index
from mxrec.io.local_reader import LocalRecordReader
from mxrec.io.opener import RecordReader
from mxrec.io.records import Records
from mxrec.io.remote_reader import RemoteRecordReader, record_ends
from mxrec.storage.files import size as file_size
from mxrec.storage.filesystem import StorageOptions, absolute
from mxrec.storage.memory_map import mapped, mapped_range

_DEFAULT_BLOCK_BYTES = 128 << 20  # Ray Data's default target_max_block_size
_INT64_MAX = 2**63 - 1


def dataset_shards(paths: str | os.PathLike | Sequence[str | os.PathLike],
                   storage_options: StorageOptions = None) -> tuple[list[Shard], str | None]:
    """The shards ``paths`` names, in dataset order, and their manifest, if any, through mxrec's one dataset
    resolver (:func:`~mxrec.datasets.shard_set.resolve_dataset`: a ``.rec`` or URL, a list, a glob, a brace range, a
    manifest, a folder or prefix). Local paths are made absolute (workers do not share the driver's folder),
    and each shard's ``idx`` is the ``.idx`` it has, or None when it has none."""
    shards, manifest = resolve_dataset(paths, storage_options)
    found = []
    for shard in shards:
        rec = absolute(shard.rec)
        idx = resolve_index(rec, shard.idx, storage_options)
        found.append(Shard(rec, None if idx is None else absolute(idx), shard.records,
                           shard.rec_bytes))
    return found, manifest


@dataclass(frozen=True)
class _Shard:
    """A shard as the driver knows it: the ``.idx`` keys and offsets (None: no ``.idx``) and record extents; for a
    dataset handed in opened, the storage settings it reads with and the label offset a mixture gives its rows."""

    ref: Shard
    keys: np.ndarray | list | None  # int64 keys, or str keys
    offsets: np.ndarray | None
    extents: np.ndarray | None  # bytes from each record to the next record start (or the end of the file)
    size: int
    storage: StorageOptions = None
    label_offset: int = 0

    @property
    def records(self) -> int | None:
        return len(self.keys) if self.keys is not None else self.ref.records


def _load_shard(ref: Shard, manifest: str | None, key_type: KeyType, storage_options: StorageOptions) -> _Shard:
    if ref.idx is None:
        return _Shard(ref, None, None, None, file_size(ref.rec, storage_options))
    with RecordReader(ref.rec, ref.idx, key_type, storage_options=storage_options) as reader:  # its .idx checks
        keys = np.asarray(reader.keys) if isinstance(reader.keys, IntKeys) else list(reader.keys)
        offsets = reader.offsets
        size = reader.nbytes
    if ref.records is not None and ref.records != len(keys):
        raise ManifestError(manifest, f"{ref.rec}: the manifest says {ref.records} records, "
                                      f"its .idx {ref.idx} lists {len(keys)}")
    return _Shard(ref, keys, offsets, record_ends(offsets, size) - offsets, size)


def opened_shards(dataset: Records) -> list[_Shard]:
    """The shards of a dataset already opened, from its readers' own ``.idx`` tables (nothing read again): one file,
    a shard set, a face set's faces, or a mixture's sources (each shard with its source's label offset)."""
    if isinstance(dataset, Mixture):
        return [replace(shard, label_offset=shard.label_offset + offset)
                for source, offset in zip(dataset.sources, dataset.label_offsets, strict=True)
                for shard in opened_shards(source)]
    if isinstance(dataset, ShardSetReader):
        return [shard for n in range(len(dataset.shards)) for shard in opened_shards(dataset.shard(n))]
    if isinstance(dataset, RecordSubset):
        whole, = opened_shards(dataset.reader)
        at = dataset.positions
        keys = whole.keys[at] if isinstance(whole.keys, np.ndarray) else [whole.keys[p] for p in at.tolist()]
        return [replace(whole, keys=keys, offsets=whole.offsets[at], extents=whole.extents[at])]
    if isinstance(dataset, (LocalRecordReader, RemoteRecordReader)):
        rec = absolute(dataset.path)
        keys = np.asarray(dataset.keys) if isinstance(dataset.keys, IntKeys) else list(dataset.keys)
        offsets = np.asarray(dataset.offsets, np.int64)
        size = dataset.nbytes
        return [_Shard(Shard(rec, dataset.index_path), keys, offsets, record_ends(offsets, size) - offsets, size,
                       dataset.storage)]
    raise ParameterError(f"{dataset.path}: Ray reads the record files of a dataset; a {type(dataset).__name__} has "
                         "none of its own")


@dataclass(frozen=True)
class _Piece:
    """Part of one shard that a read task reads: ``.idx`` entries, or (keys and offsets None) all of it."""

    rec: str
    keys: np.ndarray | list | None
    offsets: np.ndarray | None
    end: int = 0  # where the last of these records ends
    records: int | None = None  # what a manifest promises for a whole shard read without an .idx
    storage_options: StorageOptions = None
    label_offset: int = 0  # a mixture's: added to each row's class label


@contextlib.contextmanager
def _piece_bytes(piece: _Piece) -> Iterator[tuple[framing.Buffer, int]]:
    """``(buffer, base)``: the bytes a task reads, where file offset ``o`` is ``buffer[o - base]``.

    A local file is mapped whole; from a remote one exactly the piece's byte range is fetched (one ranged
    request), or the whole file when the piece is a whole shard without an ``.idx``.
    """
    if piece.offsets is None:
        with mapped(piece.rec, piece.storage_options) as buf:
            yield buf, 0
        return
    with mapped_range(piece.rec, int(piece.offsets.min()), piece.end, piece.storage_options) as found:
        yield found


@dataclass(frozen=True)
class RowFormat:
    """How records become rows (see the module docstring for the columns)."""

    key_type: pa.DataType
    header: bool = True
    label_width: int | None = None
    decode: bool = False
    channels: int = 3
    bgr: bool = False

    def __post_init__(self) -> None:
        if self.label_width is not None and self.label_width < 1:
            raise ParameterError(f"label_width must be >= 1 or None (every label), not {self.label_width}")
        if self.decode and not self.header:
            raise ParameterError("decode=True needs header=True: the image is what follows the IRHeader")

    def block(self, recs: list[str], keys: list, payloads: list[bytes]) -> pa.Table:
        """The rows of these records (``recs[i]`` names the file of record ``i`` in errors)."""
        columns: dict[str, pa.Array] = {"key": pa.array(keys, self.key_type)}
        if not self.header:
            columns["data"] = pa.array(payloads, pa.binary())
            return pa.table(columns)
        flags, ids, id2s, labels, data = [], [], [], [], []
        for rec, key, payload in zip(recs, keys, payloads, strict=True):
            try:
                header, start = unpack_header(payload)
            except HeaderError as exc:
                raise HeaderError(f"{rec}: record {key!r}: {exc}") from None
            values = label_array(header)
            if self.label_width is not None and values.size != self.label_width:
                raise ParameterError(f"{rec}: record {key!r} holds {values.size} label(s) but label_width is "
                                     f"{self.label_width} (label_width=None reads every label)")
            flags.append(header.flag)
            ids.append(header.id)
            id2s.append(header.id2)
            labels.append(values)
            data.append(payload[start:])
        columns["flag"] = pa.array(flags, pa.uint32())
        columns["label"] = self._labels(labels)
        columns["id"] = pa.array(ids, pa.uint64())
        columns["id2"] = pa.array(id2s, pa.uint64())
        if self.decode:
            columns["image"] = image_column([self._decode(d, rec, key) for d, rec, key in zip(data, recs, keys,
                                                                                             strict=True)])
        else:
            columns["data"] = pa.array(data, pa.binary())
        return pa.table(columns)

    def _labels(self, labels: list[np.ndarray]) -> pa.Array:
        if self.label_width == 1:
            return pa.array(np.array([v[0] for v in labels], np.float32))
        if self.label_width is not None:
            return ArrowTensorArray.from_numpy(np.stack(labels) if labels else np.empty((0, self.label_width),
                                                                                        np.float32))
        lengths = np.fromiter((v.size for v in labels), np.int32, len(labels))
        offsets = pa.array(np.concatenate([[0], np.cumsum(lengths, dtype=np.int32)]).astype(np.int32))
        values = pa.array(np.concatenate(labels) if labels else np.empty(0, np.float32), pa.float32())
        return pa.ListArray.from_arrays(offsets, values)

    def _decode(self, data: bytes, rec: str, key: object) -> np.ndarray:
        img = decode_pixels(data, self.channels, what=f"{rec}: record {key!r}")
        return img if self.bgr else to_rgb(img)


def image_column(images: list[np.ndarray]) -> pa.Array:
    """Images as a Ray tensor column: fixed-shape when all have one shape, else variable-shaped."""
    if images and all(img.shape == images[0].shape and img.dtype == images[0].dtype for img in images):
        return ArrowTensorArray.from_numpy(np.stack(images))
    holder = np.empty(len(images), object)
    holder[:] = images
    return ArrowVariableShapedTensorArray.from_numpy(holder)


def read_pieces(pieces: list[_Piece], row_format: RowFormat, block_bytes: int) -> Iterator[pa.Table]:
    """The rows of ``pieces`` in order, in blocks of about ``block_bytes`` of records (a read task's body)."""
    recs: list[str] = []
    keys: list = []
    payloads: list[bytes] = []
    held = 0
    for piece in pieces:
        with _piece_bytes(piece) as (buf, base):
            if piece.offsets is None:
                offsets = framing.record_offsets(buf, path=piece.rec)
                if piece.records is not None and piece.records != len(offsets):
                    raise ManifestError(None, f"{piece.rec}: holds {len(offsets)} records, its manifest says "
                                              f"{piece.records}")
                positions = range(len(offsets))  # keys of a shard without an .idx, as RecordReader's
                piece_keys: Iterable = map(str, positions) if row_format.key_type == pa.string() else positions
            else:
                offsets = piece.offsets.tolist()
                piece_keys = piece.keys.tolist() if isinstance(piece.keys, np.ndarray) else piece.keys
            for key, offset in zip(piece_keys, offsets, strict=True):
                try:
                    payload = framing.decode_record(buf, offset - base, piece.rec)[0]
                except RecordFormatError as exc:
                    raise RecordFormatError(piece.rec, f"record {key!r}: {exc.reason}", offset=offset) from None
                if piece.label_offset:
                    payload = shift_class_label(payload, piece.label_offset)
                recs.append(piece.rec)
                keys.append(key)
                payloads.append(payload)
                held += len(payload)
                if held >= block_bytes:
                    yield row_format.block(recs, keys, payloads)
                    recs, keys, payloads, held = [], [], [], 0
    if payloads:
        yield row_format.block(recs, keys, payloads)


def split_ranges(sizes: np.ndarray, parts: int) -> list[tuple[int, int]]:
    """Cut positions ``0..len(sizes)`` into ``min(parts, len(sizes))`` non-empty ranges of about equal bytes."""
    count = min(parts, len(sizes))
    if count <= 0:
        return []
    total = np.cumsum(sizes, dtype=np.float64)
    targets = total[-1] * np.arange(1, count) / count
    cuts = (np.searchsorted(total, targets, side="left") + 1).tolist()
    bounds = [0]
    for k, cut in enumerate(cuts, 1):
        bounds.append(min(max(cut, bounds[-1] + 1), len(sizes) - (count - k)))
    bounds.append(len(sizes))
    return list(itertools.pairwise(bounds))


class RecordSource(Datasource):
    """A Ray Data ``Datasource`` over a RecordIO dataset (see the module docstring); use :func:`read_recordio`.

    The ``.idx`` files are read here, once, on the driver; :meth:`get_read_tasks` (which Ray calls several
    times) only cuts ranges. Each read task carries just its own keys and offsets.

    Parameters
    ----------
    paths
        The dataset, as :func:`read_recordio` takes it.
    key_type
        ``int`` or ``str`` ``.idx`` keys (an opened dataset's are its own).
    header
        ``False``: rows of ``key`` and the whole payload.
    label_width
        The labels each record must hold; ``None``: every label.
    decode, bgr
        An ``image`` column of pixels instead of ``data``; RGB unless ``bgr``.
    channels
        The images' channels: 1, 3 or 4.
    storage_options
        fsspec options for URLs, sent to the tasks too.

    Raises
    ------
    ParameterError
        ``storage_options`` given with a dataset already opened, ``label_width`` below 1, or ``decode``
        without ``header``.
    """

    def __init__(self, paths: DatasetSpec, *, key_type: KeyType = int,
                 header: bool = True, label_width: int | None = None, decode: bool = False, channels: int = 3,
                 bgr: bool = False, storage_options: StorageOptions = None) -> None:
        super().__init__()
        self.storage_options = storage_options
        if is_mixture(paths) and not isinstance(paths, Records):
            paths = as_mixture(paths, storage_options)
        if isinstance(paths, Records):
            if storage_options is not None:
                raise ParameterError(f"{paths.path}: an opened dataset is read with the storage settings it was "
                                     "opened with; give storage_options to open_dataset instead")
            self._shards = opened_shards(paths)
            key_type = str if any(isinstance(s.keys, list) and s.keys and isinstance(s.keys[0], str)
                                  for s in self._shards) else int
        else:
            shards, manifest = dataset_shards(paths, storage_options)
            self._shards = [_load_shard(shard, manifest, key_type, storage_options) for shard in shards]
        if key_type is str:
            arrow_key = pa.string()
        else:  # int64, unless an .idx holds keys beyond it (a .lst index may reach 2**64 - 1)
            large = any(isinstance(s.keys, list) and max(s.keys, default=0) > _INT64_MAX for s in self._shards)
            arrow_key = pa.uint64() if large else pa.int64()
        self.row_format = RowFormat(arrow_key, header, label_width, decode, channels, bgr)

    def estimate_inmemory_data_size(self) -> int:
        """The bytes of the records to read (Ray sizes the read tasks by them).

        Returns
        -------
        int
            The records' bytes, or the files' sizes where there is no ``.idx``.
        """
        return int(sum(int(s.extents.sum()) if s.extents is not None else s.size for s in self._shards))

    def get_name(self) -> str:
        """The name Ray shows for the read (``ReadRecordIO``).

        Returns
        -------
        str
            ``"RecordIO"``.
        """
        return "RecordIO"

    def get_read_tasks(self, parallelism: int, per_task_row_limit: int | None = None,
                       data_context: object | None = None) -> list[ReadTask]:
        """The read tasks: ``.idx`` position ranges of about equal bytes, in dataset order (see the module doc).

        Parameters
        ----------
        parallelism
            The read tasks wanted; a shard without an ``.idx`` gets one of its own.
        per_task_row_limit
            At most this many rows per task (Ray's ``limit``).
        data_context
            Ray Data's context (``target_max_block_size`` sizes the blocks); default: the current one.

        Returns
        -------
        list of ReadTask
            One per range, each with its rows, bytes and files.
        """
        context = data_context if data_context is not None else ray.data.DataContext.get_current()
        block_bytes = getattr(context, "target_max_block_size", None) or _DEFAULT_BLOCK_BYTES
        plans = self._plan(parallelism)
        tasks = []
        for pieces, rows, size in plans:
            metadata = BlockMetadata(num_rows=rows, size_bytes=int(size), exec_stats=None,
                                     input_files=tuple(dict.fromkeys(p.rec for p in pieces)))
            read_fn = functools.partial(read_pieces, pieces, self.row_format, block_bytes)
            tasks.append(ReadTask(read_fn, metadata, per_task_row_limit=per_task_row_limit))
        return tasks

    def _storage(self, shard: _Shard) -> StorageOptions:
        """The storage settings a shard is read with: its dataset's, when handed in opened."""
        return shard.storage if shard.storage is not None else self.storage_options

    def _plan(self, parallelism: int) -> list[tuple[list[_Piece], int | None, int]]:
        """``(pieces, rows or None, bytes)`` per read task, in dataset order.

        Shards without an ``.idx`` get a task each; the rest of ``parallelism`` is shared among the runs of
        consecutive shards with one, by bytes, and each run is cut into ranges that may cross its shards.
        """
        planned: list[tuple[int, int, list[_Piece], int | None, int]] = []  # (first shard, first position, ...)
        runs: list[list[int]] = []
        for n, shard in enumerate(self._shards):
            if shard.keys is None:
                piece = _Piece(shard.ref.rec, None, None, shard.size, shard.ref.records, self._storage(shard),
                               shard.label_offset)
                planned.append((n, 0, [piece], shard.ref.records, shard.size))
            elif runs and runs[-1][-1] == n - 1:
                runs[-1].append(n)
            else:
                runs.append([n])
        sizes = [np.concatenate([self._shards[n].extents for n in run]) for run in runs]
        total = sum(int(s.sum()) for s in sizes) or 1
        budget = max(len(runs), parallelism - len(planned))
        for run, run_sizes in zip(runs, sizes, strict=True):
            parts = max(1, round(budget * int(run_sizes.sum()) / total))
            planned += self._plan_run(run, run_sizes, parts)
        planned.sort(key=lambda plan: (plan[0], plan[1]))
        return [(pieces, rows, size) for _, _, pieces, rows, size in planned]

    def _plan_run(self, run: list[int], sizes: np.ndarray,
                  parts: int) -> list[tuple[int, int, list[_Piece], int | None, int]]:
        """Read tasks over consecutive indexed shards ``run`` (``sizes``: their record extents, in order)."""
        starts = np.cumsum([0] + [len(self._shards[n].keys) for n in run])
        planned = []
        for lo, hi in split_ranges(sizes, parts):
            pieces = []
            first = int(np.searchsorted(starts, lo, side="right")) - 1
            for k in range(first, len(run)):
                if starts[k] >= hi:
                    break
                begin, end = max(lo, int(starts[k])), min(hi, int(starts[k + 1]))
                if begin < end:
                    shard = self._shards[run[k]]
                    a, b = begin - int(starts[k]), end - int(starts[k])
                    offsets = shard.offsets[a:b].copy()
                    end = int((offsets + shard.extents[a:b]).max())
                    pieces.append(_Piece(shard.ref.rec, shard.keys[a:b], offsets, end, None, self._storage(shard),
                                         shard.label_offset))
            planned.append((run[first], lo - int(starts[first]), pieces, hi - lo, int(sizes[lo:hi].sum())))
        return planned


def read_recordio(paths: DatasetSpec, *,
                  override_num_blocks: int | None = None, key_type: KeyType = int, header: bool = True,
                  label_width: int | None = None, decode: bool = False, channels: int = 3, bgr: bool = False,
                  storage_options: StorageOptions = None, ray_remote_args: dict | None = None,
                  concurrency: int | None = None) -> Dataset:
    """A Ray Dataset of the records of ``paths`` (one ``.rec`` or a shard set; see the module docstring), or of a
    dataset already opened (``open_dataset``'s, a mixture: its sources' records once each, class labels moved by
    its label offsets), read with its own ``.idx`` tables and storage settings.

    Parameters
    ----------
    paths
        The dataset: anything mxrec opens as one, a mixture, or a dataset already opened.
    override_num_blocks
        The number of read tasks (default: Ray's choice from the data size); each yields one block, or more
        when it holds more than ``DataContext.target_max_block_size`` bytes.
    key_type
        ``int`` or ``str`` ``.idx`` keys.
    header
        ``False``: rows are ``key`` and the whole payload as ``data``.
    label_width
        ``None`` (default) reads every label of every record; ``k`` requires exactly ``k`` per record
        (MXNet's rule; ``1`` gives a plain ``float32`` column).
    decode
        An ``image`` column of pixels instead of ``data``.
    channels
        1, 3 or 4, with ``decode``.
    bgr
        With ``decode``: OpenCV's BGR order instead of RGB.
    storage_options
        Go to fsspec for URLs (credentials, endpoint), in the tasks too.
    ray_remote_args
        Go to ``ray.data.read_datasource``, as does ``concurrency``.
    concurrency
        How many read tasks run at once.

    Returns
    -------
    ray.data.Dataset
        The records as rows, in dataset order (the columns: the module docstring).

    Raises
    ------
    ParameterError
        As :class:`RecordSource` raises it.
    """
    source = RecordSource(paths, key_type=key_type, header=header, label_width=label_width, decode=decode,
                          channels=channels, bgr=bgr, storage_options=storage_options)
    return ray.data.read_datasource(source, override_num_blocks=override_num_blocks,
                                    ray_remote_args=ray_remote_args, concurrency=concurrency)
