"""The tasks of ``convert``: each streams its part of the source into shards of its own under the staging folder.

A task (:class:`Task`, picklable: it runs here, in a worker process or as a Ray
task) reads records ``start:stop`` of the source a block at a time (memory does
not grow with the dataset) and writes them through the target format's writer
(:mod:`mxrec.interop.formats`) into the shared staging of the output
(:class:`~mxrec.storage.commit.Commit`), a new shard whenever the limit is
reached. It publishes nothing: :func:`mxrec.interop.job.publish` does, once
every task is done.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mxrec.datasets.opening import open_dataset
from mxrec.errors import MxrecError, ParameterError
from mxrec.format.checksums import BlockChecksums
from mxrec.format.framing import encoded_size
from mxrec.interop.formats import RECORDIO, get_format
from mxrec.interop.record import Payload, Record, Report
from mxrec.io.records import Records
from mxrec.io.shards import ShardLimit
from mxrec.io.writer import RecordWriter
from mxrec.packing.prepare import ImageTransform
from mxrec.storage import remote
from mxrec.storage.atomic import SPOOL_ENV
from mxrec.storage.filesystem import StorageOptions, join, uninterrupted

BLOCK = 256  # records read at once from a .rec
# Bytes of .rec records written with one writev (views of the source held until then; a file system takes
# 64 KB writes at two thirds of the speed of 1 MB ones).
_WRITE_BLOCK = 8 << 20
_RECORD_OVERHEAD = 512  # bytes a foreign format adds per record, for byte limits (a tar header, say)


@dataclass(kw_only=True)
class Task:
    """One unit of work: records ``start:stop`` of the source (positions, or file numbers for a foreign source).

    ``spec``: what the records come from: a ``.rec`` spec or an opened dataset (which pickles to what reopens
    it), or a foreign set's files.
    """

    number: int
    source_format: str
    spec: Any
    start: int
    stop: int
    target_format: str
    staging: str
    limit: ShardLimit | None
    indexed: bool = True
    key_base: int = 0
    faces: bool = False
    class_names: dict[int, str] | None = None
    transform: ImageTransform | None = None
    storage_options: StorageOptions = None
    upload: str | None = None  # a URL folder the task puts its finished shards in (Ray tasks, a URL output)


@dataclass
class StagedShard:
    path: str
    idx: str | None
    records: int
    rec_bytes: int = 0
    idx_bytes: int | None = None
    checksums: BlockChecksums | None = None  # a .rec shard's checksums (its manifest entry, or sidecar)


@dataclass
class TaskResult:
    number: int
    shards: list[StagedShard] = field(default_factory=list)
    report: Report = field(default_factory=Report)


# -- reading --------------------------------------------------------------------------------------


def face_positions(spec: Any, storage_options: StorageOptions) -> np.ndarray:
    """The reader positions of an InsightFace set's faces, in key order; :class:`ParameterError` for a plain set."""
    from mxrec.datasets.face_set import read_face_set

    opened = isinstance(spec, Records)
    reader = spec if opened else open_dataset(spec, storage_options=storage_options, duplicates="last")  # int keys
    try:
        faces = read_face_set(reader)
    finally:
        if not opened:
            reader.close()
    if faces is None:
        raise ParameterError(f"{spec}: insightface='faces' asks for the faces of an InsightFace set, but this "
                          "dataset has no InsightFace header record")
    return faces.positions


def record_key(key: object) -> str:
    """A record's key as text: a mixture's ``(source, key)`` as ``SOURCE-KEY``."""
    return "-".join(map(str, key)) if isinstance(key, tuple) else str(key)


def open_source(spec: Any, storage_options: StorageOptions) -> Records:
    """The dataset of a ``.rec`` source: an opened one as it is, else opened with text keys (the last of a
    duplicated key, as MXNet's reader takes it)."""
    if isinstance(spec, Records):
        return spec
    return open_dataset(spec, key_type=str, duplicates="last", storage_options=storage_options)


def _rec_records(task: Task) -> Iterator[Record]:
    reader = open_source(task.spec, task.storage_options)
    try:
        keys = reader.keys
        positions: Sequence[int] = (face_positions(task.spec, task.storage_options)[task.start:task.stop].tolist()
                                    if task.faces else range(task.start, task.stop))
        for first in range(0, len(positions), BLOCK):
            block = positions[first:first + BLOCK]
            # the contract's read path: views of the mapping for local files, one coalesced read per block remote
            for position, data in zip(block, reader.fetch(block), strict=True):
                yield Record.from_bytes(record_key(keys[position]), data)
    finally:
        if reader is not task.spec:  # (an opened dataset is its owner's to close)
            reader.close()


def _foreign_records(task: Task) -> Iterator[Record]:
    declared = get_format(task.source_format)
    position = task.key_base
    for path in task.spec[task.start:task.stop]:
        for record in declared.records(path, task.storage_options):
            if record.key is None:  # a sample of another tool: key and id are its position
                record.key = str(position)
                record.id = position
            position += 1
            yield record


def task_records(task: Task) -> Iterator[Record]:
    """The records of ``task``'s part of the source, in order."""
    return _rec_records(task) if task.source_format == RECORDIO else _foreign_records(task)


# -- writing --------------------------------------------------------------------------------------


class _ShardRotation:
    """Writers for the shards of one task, a new one whenever the limit is reached."""

    def __init__(self, task: Task) -> None:
        self.task = task
        self.result = TaskResult(task.number)
        self.writer: Any = None
        self.records = 0
        self.bytes = 0
        self.pending: list[tuple[str, tuple[bytes, Any]]] = []  # .rec records not yet written: (key, pieces)
        self.pending_bytes = 0

    def _open(self) -> None:
        task = self.task
        number = len(self.result.shards)
        stem = os.path.join(task.staging, f"part-{task.number:05d}-{number:05d}")
        if task.target_format == RECORDIO:
            path, idx = stem + ".rec", (stem + ".idx" if task.indexed else None)
            self.writer = RecordWriter(path, idx, key_type=str, write_behind=True, sidecar=False)
        else:
            declared = get_format(task.target_format)
            path = stem + declared.suffix
            idx = path + declared.index_suffix if declared.index_suffix else None
            self.writer = declared.writer(path, task.class_names)
        self.result.shards.append(StagedShard(path, idx, 0))
        self.records = self.bytes = 0

    def _full(self, size: int) -> bool:
        limit = self.task.limit
        if limit is None or self.records == 0:
            return False
        if limit.records is not None:
            return self.records >= limit.records
        return self.bytes + size > limit.bytes

    def write(self, record: Record, payload: Payload) -> None:
        recordio = self.task.target_format == RECORDIO
        head = record.header_bytes() if recordio else b""
        size = encoded_size(len(head) + len(record.data)) if recordio else len(record.data) + _RECORD_OVERHEAD
        if self.writer is None or self._full(size):
            self.close()
            self._open()
        if recordio:  # the header and a view of the payload, not joined, written a block at a time
            self.pending.append((record.key, (head, record.data)))
            self.pending_bytes += size
            if self.pending_bytes >= _WRITE_BLOCK:
                self._write_pending()
        else:
            self.writer.write(record, payload)
        self.records += 1
        self.bytes += size
        self.result.shards[-1].records += 1

    def _write_pending(self) -> None:
        if self.pending:
            self.writer.write_pieces(self.pending)
            self.pending, self.pending_bytes = [], 0

    def close(self) -> None:
        """Close the shard being written (its last blocks written first)."""
        if self.writer is not None:
            self._write_pending()
            writer, self.writer = self.writer, None
            writer.close()
            if isinstance(writer, RecordWriter):
                self.result.shards[-1].checksums = writer.checksums

    def abort(self) -> None:
        self.pending, self.pending_bytes = [], 0
        if self.writer is not None:
            writer, self.writer = self.writer, None
            writer.abort()


def _transform(record: Record, transform: ImageTransform) -> str | None:
    """Re-encode ``record``'s image in place; why not, when it cannot be (the bytes are then carried as they are)."""
    if record.raw:
        return None
    try:
        record.data = transform.apply(bytes(record.data), f"record {record.key!r}")
    except MxrecError as exc:
        return str(exc)
    return None


def write_records(records: Iterable[Record], task: Task, progress: Callable[[int], None] | None = None) -> TaskResult:
    """Write ``records`` into ``task``'s staged shards; ``progress(n)`` is told of every ``n`` more records."""
    rotation = _ShardRotation(task)
    report = rotation.result.report
    pending = 0
    try:
        for record in records:
            failed = _transform(record, task.transform) if task.transform is not None else None
            payload = report.add(record)
            if failed is not None and payload.problem is None:  # broken beyond what the headers show
                report.note(record.key, f"kept as it was: {failed}")
            rotation.write(record, payload)
            pending += 1
            if progress is not None and pending >= BLOCK:
                progress(pending)
                pending = 0
    except BaseException:
        rotation.abort()
        raise
    rotation.close()
    if progress is not None and pending:
        progress(pending)
    return rotation.result


def run_task(task: Task, progress: Callable[[int], None] | None = None,
             records: Iterable[Record] | None = None) -> TaskResult:
    """Convert one task's records (``records``, or those of its part of the source) into its staged shards (in
    this process, a worker process, or a Ray task).

    With ``task.upload`` (a URL output; a Ray task's node may not see the driver's disk) the shards are written
    into a local folder of the task's own and uploaded into that URL folder when all are done.
    """
    records = task_records(task) if records is None else records
    if task.upload is None:
        return _sized(write_records(records, task, progress))
    local = tempfile.mkdtemp(prefix="mxrec-convert-", dir=os.environ.get(SPOOL_ENV) or None)
    try:
        result = _sized(write_records(records, dataclasses.replace(task, staging=local), progress))
        for shard in result.shards:
            for name in ("path", "idx"):
                staged = getattr(shard, name)
                if staged is not None:
                    uploaded = join(task.upload, os.path.basename(staged))
                    # a request in flight finishes before an interrupt's cleanup
                    uninterrupted(lambda staged=staged, uploaded=uploaded: remote.upload(staged, uploaded,
                                                                                         task.storage_options))
                    setattr(shard, name, uploaded)
        return result
    finally:
        shutil.rmtree(local, ignore_errors=True)


def _sized(result: TaskResult) -> TaskResult:
    """``result`` with the sizes of its (local, closed) shards, which the manifest lists."""
    for shard in result.shards:
        shard.rec_bytes = os.path.getsize(shard.path)
        shard.idx_bytes = None if shard.idx is None else os.path.getsize(shard.idx)
    return result


