"""What each record of an image dataset holds: key, IRHeader, labels, and facts about its image bytes.

:func:`scan_contents` reads every intact record once and returns one
:class:`RecordContent` per record: the header fields and labels, the image's
format, shape and any fault (:func:`mxrec.image.inspect.inspect_image`), and a
SHA-1 of the image bytes for duplicate detection. With ``decode=True`` every
image is decoded. The work is spread over a thread pool (the decoders and the
hash release the GIL), so a decoding scan runs on all cores; ``progress`` is
called as ``progress(done, total)`` as records finish.

The checks built on these facts (labels, images, duplicates, ``.lst``) live in
the ``check_*`` modules; :mod:`mxrec.doctor.stats` summarises them.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from mxrec.datasets.opening import DatasetSpec, as_mixture, dataset_files, is_mixture
from mxrec.errors import HeaderError
from mxrec.format import framing
from mxrec.format.header import label_array, unpack_header
from mxrec.format.idx import Index, KeyType
from mxrec.format.insightface import HEADER_KEY, FaceLayout, header_layout, resolve_layout
from mxrec.image.inspect import ImageFacts, inspect_image
from mxrec.io.index import resolve_index, try_read_index
from mxrec.storage.filesystem import StorageOptions
from mxrec.storage.memory_map import mapped

RECORDS_PER_TASK = 32  # records one pool task handles: enough to make the hand-off cost negligible
#: Another way to collect the facts of a file's intact records (``mxrec.ray``: on a cluster):
#: ``gather(spans, keys_by_offset, decode=..., progress=...)`` returns one :class:`RecordContent` per span, in
#: order, as :func:`span_contents` makes them.
ContentGather = Callable[..., "list[RecordContent]"]
# Label tuples seen, shared between records (class labels repeat; a dict lookup is atomic under the GIL).
_SHARED_LABELS: dict[tuple, tuple] = {}
_SHARED_LABELS_MAX = 1 << 16


@dataclass(slots=True)
class RecordContent:
    """One intact record: where it is, its key, its header fields, and what its image bytes are."""

    position: int  # among the intact records, in file order
    offset: int  # byte offset of its first part
    key: object  # its .idx key; its position when there is no .idx; None when the .idx does not list it
    header_fault: str | None = None  # why the payload holds no IRHeader
    flag: int = 0
    record_id: int | None = None
    labels: tuple[float, ...] | None = None  # the header's label(s); one value when flag is 0
    image: ImageFacts | None = None  # the bytes after the header
    image_bytes: int = 0
    digest: bytes | None = None  # SHA-1 of the image bytes, when there are any
    layout_record: bool = False  # an InsightFace header or identity record (key ranges, no image): not a sample
    #: Its position in the dataset as a reader opened on the same ``.idx`` numbers the records (the ``.idx``
    #: entry listing it; its position among the intact records when there is no ``.idx``); ``None`` when the
    #: ``.idx`` does not list it. :attr:`~mxrec.doctor.report.Problem.position` is this number.
    at: int | None = None

    @property
    def name(self) -> object:
        """How problems name the record: its key, or ``"byte N"`` when it has none."""
        return self.key if self.key is not None else f"byte {self.offset}"


@dataclass
class Overview:
    """What pages show of the samples (every record but an InsightFace set's header and identity records), one
    value per sample in arrays: position (:attr:`RecordContent.at`, -1 where none), first label (NaN without a
    header), image width and height (0 where unknown), and whether the labels are a face set's identities."""

    at: np.ndarray  # int64
    labels: np.ndarray  # float64
    widths: np.ndarray  # int32
    heights: np.ndarray  # int32
    faces: bool = False

    def __len__(self) -> int:
        return len(self.at)


def overview(contents: Sequence[RecordContent], faces: bool = False) -> Overview:
    """The :class:`Overview` of the samples among ``contents``; ``faces``: they are a face set's faces."""
    samples = [c for c in contents if not c.layout_record]
    shapes = [c.image.shape if c.image is not None and c.image.shape is not None and not c.image.fault else (0, 0)
              for c in samples]
    return Overview(np.array([-1 if c.at is None else c.at for c in samples], np.int64),
                    np.array([c.labels[0] if c.labels else np.nan for c in samples], np.float64),
                    np.array([s[1] for s in shapes], np.int32), np.array([s[0] for s in shapes], np.int32), faces)


def available_cores() -> int:
    """CPU cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def read_record_content(payload: bytes, position: int, offset: int, key: object,
                        decode: bool = False) -> RecordContent:
    """The facts about one record's payload."""
    content = RecordContent(position, offset, key)
    try:
        header, start = unpack_header(payload)
    except HeaderError as exc:
        content.header_fault = str(exc)
        return content
    content.flag = header.flag
    content.record_id = header.id
    labels = (float(header.label),) if header.flag == 0 else tuple(label_array(header).tolist())
    content.labels = _SHARED_LABELS.setdefault(labels, labels) if len(_SHARED_LABELS) < _SHARED_LABELS_MAX else labels
    image = payload[start:]
    content.image_bytes = len(image)
    content.image = inspect_image(image, decode)
    if image:
        content.digest = hashlib.sha1(image, usedforsecurity=False).digest()
    return content


def _payload(buf: framing.Buffer, span: framing.RecordSpan) -> bytes:
    if span.parts == 1:
        start = span.offset + framing.PART_HEADER_SIZE
        return buf[start:start + span.length]
    return framing.decode_record(buf, span.offset)[0]


def span_contents(buf: framing.Buffer, spans: Sequence[framing.RecordSpan], first_position: int,
                  keys: Sequence | None = None, decode: bool = False) -> list[RecordContent]:
    """One :class:`RecordContent` per span of consecutive intact records, the first at ``first_position``.

    ``keys``: each span's ``.idx`` key (default: its position). The unit of work of a scan, on a thread of
    :func:`scan_contents` or elsewhere (``mxrec.ray`` runs it on Ray tasks).
    """
    positions = range(first_position, first_position + len(spans))
    return [read_record_content(_payload(buf, span), position, span.offset, key, decode)
            for span, position, key in zip(spans, positions, positions if keys is None else keys, strict=True)]


def scan_contents(buf: framing.Buffer, spans: list[framing.RecordSpan], keys_by_offset: OffsetKeys | None = None, *,
                  decode: bool = False, workers: int | None = None, layout: str = "auto",
                  progress: Callable[[int, int], None] | None = None,
                  gather: ContentGather | None = None) -> list[RecordContent]:
    """One :class:`RecordContent` per span (intact records of ``buf``), in order.

    ``keys_by_offset`` (:func:`offset_keys`) names records by their ``.idx``
    keys; without it records are keyed by position. ``workers`` defaults to
    every available core. ``layout`` (:data:`~mxrec.format.insightface.LAYOUTS`):
    unless ``"plain"``, the header and identity records of an InsightFace face
    set are marked as :attr:`RecordContent.layout_record` (:func:`mark_layout_records`).
    ``gather`` collects the records' facts instead of this process's threads (see :data:`ContentGather`).
    """
    resolve_layout(layout)
    workers = available_cores() if workers is None else max(1, workers)

    def task(first: int) -> list[RecordContent]:
        part = spans[first:first + RECORDS_PER_TASK]
        keys = None if keys_by_offset is None else keys_by_offset.keys_at([span.offset for span in part])
        return span_contents(buf, part, first, keys, decode)

    firsts = range(0, len(spans), RECORDS_PER_TASK)
    batches: dict[int, list[RecordContent]] = {}
    done = 0

    def finished(first: int, batch: list[RecordContent]) -> None:
        nonlocal done
        batches[first] = batch
        done += len(batch)
        if progress is not None:
            progress(done, len(spans))

    if gather is not None:
        contents = gather(spans, keys_by_offset, decode=decode, progress=progress)
    elif workers == 1:
        for first in firsts:
            finished(first, task(first))
    else:
        pool = ThreadPoolExecutor(workers, thread_name_prefix="mxrec-scan")
        try:
            futures = {pool.submit(task, first): first for first in firsts}
            for future in as_completed(futures):
                finished(futures[future], future.result())
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
    if gather is None:
        contents = [content for first in firsts for content in batches[first]]
    number_records(contents, keys_by_offset)
    if layout != "plain":
        mark_layout_records(contents)
    return contents


def number_records(contents: list[RecordContent], keys_by_offset: OffsetKeys | None) -> None:
    """Set each record's :attr:`RecordContent.at`: its ``.idx`` entry, or its position without an ``.idx``."""
    if keys_by_offset is None:
        for c in contents:
            c.at = c.position
        return
    entries = keys_by_offset.entries_at([c.offset for c in contents])
    for c, entry in zip(contents, entries, strict=True):
        c.at = entry


def find_face_layout(contents: list[RecordContent]) -> FaceLayout | None:
    """The layout the record under ``.idx`` key 0 declares, if it is an InsightFace header record."""
    for c in contents:
        if c.key == HEADER_KEY and type(c.key) is int and c.labels is not None:
            return header_layout(c.flag, c.labels, c.image_bytes)
    return None


def mark_layout_records(contents: list[RecordContent]) -> FaceLayout | None:
    """Mark the header and identity records of an InsightFace face set (not samples); return its layout, if any."""
    layout = find_face_layout(contents)
    if layout is not None:
        for c in contents:
            if type(c.key) is int and (c.key == HEADER_KEY or layout.identity_start <= c.key < layout.end):
                c.layout_record = True
    return layout


class OffsetKeys:
    """The ``.idx`` key of each record offset (the first key listed there): two sorted arrays, searched in bulk.

    (A dict of ten million offsets would take about a gigabyte.)
    """

    def __init__(self, index: Index) -> None:
        order = np.argsort(index.offsets, kind="stable")  # equal offsets keep file order: the first key first
        self._offsets = index.offsets[order]
        self._positions = order
        self._keys = index.keys

    def keys_at(self, offsets: Sequence[int]) -> list:
        """The key at each of ``offsets``; None where the ``.idx`` lists none."""
        keys = self._keys
        return [None if entry is None else keys[entry] for entry in self.entries_at(offsets)]

    def entries_at(self, offsets: Sequence[int]) -> list[int | None]:
        """The number of the (first) ``.idx`` entry listing each of ``offsets``: the position a reader opened on
        the ``.idx`` gives that record; None where the ``.idx`` lists none."""
        query = np.asarray(offsets, np.int64)
        if not len(self._offsets):
            return [None] * len(query)
        at = np.minimum(np.searchsorted(self._offsets, query), len(self._offsets) - 1)
        found = self._offsets[at] == query
        return [int(p) if ok else None for p, ok in zip(self._positions[at].tolist(), found.tolist(), strict=True)]

    def __len__(self) -> int:
        """The ``.idx`` entries: the positions a reader opened on it numbers."""
        return len(self._offsets)


def offset_keys(index: Index) -> OffsetKeys:
    """The keys of a parsed ``.idx`` by record offset (see :class:`OffsetKeys`)."""
    return OffsetKeys(index)


def looks_like_image_dataset(contents: list[RecordContent]) -> bool:
    """Whether at least half the records are an IRHeader followed by bytes of a known image format."""
    samples = [c for c in contents if not c.layout_record]
    images = sum(1 for c in samples if c.image is not None and c.image.format not in ("other", "empty"))
    return bool(samples) and images * 2 >= len(samples)


class FileContents(NamedTuple):
    """What :func:`read_contents` found: one :class:`RecordContent` per intact record, and the damage stepped over."""

    records: list[RecordContent]
    damage: list[str]  # framing faults (file and byte offset) and an unreadable .idx (file and line), as messages


def read_contents(rec_path: DatasetSpec, idx_path: str | os.PathLike | None = None, key_type: KeyType = int,
                  *, decode: bool = False, workers: int | None = None, layout: str = "auto",
                  progress: Callable[[int, int], None] | None = None,
                  storage_options: StorageOptions = None) -> FileContents:
    """:func:`scan_contents` over every intact record of a dataset (stepping over damaged framing).

    ``rec_path`` is a file or URL, or a shard set (:func:`mxrec.datasets.shard_set.resolve_dataset`): then the
    shards' records follow each other, positions running across them (an InsightFace face layout is one
    file's, so shards are read as plain). Keys come from the ``.idx`` (default: beside the file, if present
    and readable), else positions. An opened dataset is read from its files, with its storage settings
    (:func:`~mxrec.datasets.opening.dataset_files`); a mixture's sources follow each other, their class labels
    moved by the mixture's label offsets (the records once each, not an epoch's shares).
    """
    if is_mixture(rec_path):
        mixture = as_mixture(rec_path, storage_options)
        records, damage = [], []
        for source, offset, first in zip(mixture.sources, mixture.label_offsets, mixture.starts.tolist(),
                                         strict=False):
            found = read_contents(source, key_type=key_type, decode=decode, workers=workers, layout=layout,
                                  progress=progress)
            for content in found.records:
                content.position += len(records)
                content.at = None if content.at is None else content.at + first
                if offset and content.labels and not content.layout_record:
                    content.labels = (content.labels[0] + offset, *content.labels[1:])
            records.extend(found.records)
            damage.extend(found.damage)
        return FileContents(records, damage)
    shards, manifest, storage_options = dataset_files(rec_path, storage_options)
    if len(shards) == 1 and manifest is None:
        return _file_contents(shards[0].rec, idx_path, key_type, decode, workers, layout, progress,
                              storage_options)[0]
    records: list[RecordContent] = []
    damage: list[str] = []
    numbered = 0  # the positions the shards before this one number, in a reader of the whole set
    for shard in shards:
        found, count = _file_contents(shard.rec, shard.idx, key_type, decode, workers, "plain", progress,
                                      storage_options)
        for content in found.records:
            content.position += len(records)
            if content.at is not None:
                content.at += numbered
        records.extend(found.records)
        damage.extend(found.damage)
        numbered += count
    return FileContents(records, damage)


def _file_contents(rec_path: str, idx_path: str | os.PathLike | None, key_type: KeyType, decode: bool,
                   workers: int | None, layout: str, progress: Callable[[int, int], None] | None,
                   storage_options: StorageOptions) -> tuple[FileContents, int]:
    """The file's contents, and the positions a reader of it numbers."""
    idx_path = resolve_index(rec_path, idx_path, storage_options)
    keys = None
    damage = []
    if idx_path is not None:
        index, error = try_read_index(idx_path, key_type, storage_options)
        keys = None if index is None else offset_keys(index)
        if error is not None:  # an unreadable .idx names nothing: keys are positions
            damage.append(f"{error} (records are named by position)")
    with mapped(rec_path, storage_options) as buf:
        spans, faults = framing.salvage_spans(buf, rec_path)
        records = scan_contents(buf, spans, keys, decode=decode, workers=workers, layout=layout, progress=progress)
    return FileContents(records, [str(f) for f in faults] + damage), len(spans) if keys is None else len(keys)
