"""``convert``: a dataset from one format to another, streamed, in parallel, complete or absent.

The work is cut into tasks: ranges of the ``.idx`` positions of a ``.rec``
source (or of an InsightFace set's faces), or files of a foreign source. A
task streams its records (a block at a time: memory does not grow with the
dataset) into shards of its own under a staging folder, rotating at the shard
limit. Tasks run here (one), in worker processes (``workers``), or as Ray
tasks (``engine="ray"``, each converting a range of the ``.idx``). The output
is made with the one commit protocol (:class:`~mxrec.storage.commit.Commit`):
the tasks write into its hidden staging folder beside the output (for a URL,
on their own disk, then uploaded into the hidden staging folder there); when
every task is done the staged shards are published in order behind a marker,
the set's manifest last. On any error, Ctrl-C or SIGTERM the staging folder
and whatever was already moved are removed (what cannot be, stays behind the
marker and is named on the error): nothing that looks whole is left (a crash
leaves only the hidden staging folder ``.NAME.staging-JOB``, or the marker).

Records are carried exactly (:mod:`mxrec.interop.record`): ``.rec -> X ->
.rec`` gives the same ``.rec`` and ``.idx`` bytes when the ``.idx`` lists the
records in file order, as MXNet's writers make them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import multiprocessing
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import numpy as np

from mxrec.datasets.opening import open_dataset
from mxrec.errors import MxrecError, OptionError
from mxrec.format.checksums import BlockChecksums, checksums_path, format_sidecar
from mxrec.format.framing import encoded_size
from mxrec.format.idx import index_path_for
from mxrec.format.manifest import Manifest, ShardEntry, manifest_path, marker_text
from mxrec.interop import parquet, tfrecord, webdataset
from mxrec.interop.record import Payload, Record, Report
from mxrec.interop.sets import (
    FORMATS,
    SUFFIXES,
    BufferStream,
    SetManifest,
    infer_format,
    manifest_name,
    parse_set_manifest,
    resolve_set,
)
from mxrec.io.lists import LABELS_SUFFIX, read_label_names, write_label_names
from mxrec.io.shards import ShardLimit, parse_shard_size, shard_paths, stale_shards
from mxrec.io.writer import RecordWriter
from mxrec.packing.extract import dataset_stem, extract_records
from mxrec.packing.prepare import ImageTransform
from mxrec.storage import remote
from mxrec.storage.commit import Commit, numbered_files
from mxrec.storage.files import open_input, read_bytes
from mxrec.storage.filesystem import StorageOptions, basename, is_url, join, parent, uninterrupted
from mxrec.storage.memory_map import mapped

MODULES: dict[str, ModuleType] = {"webdataset": webdataset, "parquet": parquet, "tfrecord": tfrecord}
DEFAULT_SHARD_BYTES = 1 << 30  # foreign shards: about 1 GiB each unless told otherwise
TASKS_PER_WORKER = 4
_BLOCK = 256  # records read at once from a .rec
# Bytes of .rec records written with one writev (views of the source held until then; a file system takes
# 64 KB writes at two thirds of the speed of 1 MB ones).
_WRITE_BLOCK = 8 << 20
_RECORD_OVERHEAD = 512  # bytes a foreign format adds per record, for byte limits (a tar header, say)
INSIGHTFACE_MODES = ("all", "faces")

Progress = Callable[[int, int], None]


@dataclass
class ConvertResult:
    """What :func:`convert` wrote: the files in order, the manifest (a sharded output), and the :class:`Report`."""

    source_format: str
    target_format: str
    files: list[str]
    manifest: str | None
    report: Report

    @property
    def records(self) -> int:
        return self.report.records


@dataclass
class Task:
    """One unit of work: records ``start:stop`` of the source (positions, or file numbers for a foreign source)."""

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
    checksums: BlockChecksums | None = None  # a .rec shard's block checksums (its manifest entry, or sidecar)


@dataclass
class TaskResult:
    number: int
    shards: list[StagedShard] = field(default_factory=list)
    report: Report = field(default_factory=Report)


# -- reading --------------------------------------------------------------------------------------


def face_positions(spec: Any, storage_options: StorageOptions) -> np.ndarray:
    """The reader positions of an InsightFace set's faces, in key order; :class:`OptionError` for a plain set."""
    from mxrec.datasets.face_set import read_face_set

    reader = open_dataset(spec, storage_options=storage_options, duplicates="last")  # the layout needs int keys
    try:
        faces = read_face_set(reader)
    finally:
        reader.close()
    if faces is None:
        raise OptionError(f"{spec}: insightface='faces' asks for the faces of an InsightFace set, but this "
                          "dataset has no InsightFace header record")
    return faces.positions


def _rec_records(task: Task) -> Iterator[Record]:
    reader = open_dataset(task.spec, key_type=str, duplicates="last", storage_options=task.storage_options)
    try:
        keys = reader.keys
        positions: Sequence[int] = (face_positions(task.spec, task.storage_options)[task.start:task.stop].tolist()
                                    if task.faces else range(task.start, task.stop))
        for first in range(0, len(positions), _BLOCK):
            block = positions[first:first + _BLOCK]
            # the contract's read path: views of the mapping for local files, one coalesced read per block remote
            for position, data in zip(block, reader.fetch(block), strict=True):
                yield Record.from_bytes(keys[position], data)
    finally:
        reader.close()


@contextlib.contextmanager
def open_foreign(path: str, storage_options: StorageOptions = None) -> Iterator[BufferStream]:
    """A file of a foreign set, mapped (a remote one through a local copy), to read as views: no copy."""
    with mapped(path, storage_options) as buffer:
        yield BufferStream(buffer)


def _foreign_records(task: Task) -> Iterator[Record]:
    module = MODULES[task.source_format]
    position = task.key_base
    for path in task.spec[task.start:task.stop]:
        with open_foreign(path, task.storage_options) as stream:
            for record in module.read_records(stream, path):
                if record.key is None:  # a sample of another tool: key and id are its position
                    record.key = str(position)
                    record.id = position
                position += 1
                yield record


def count_records(path: str, source_format: str, storage_options: StorageOptions = None) -> int:
    """Records of one file of a foreign set: a Parquet footer, or the tar or TFRecord headers walked (a remote file is
    read for it). Tasks over several files need these counts first: a sample without a key of its own is keyed by
    its position in the set."""
    if source_format == "parquet":
        with open_input(path, "rb", storage_options) as stream:
            return parquet.count_records(stream)
    with open_foreign(path, storage_options) as stream:
        return MODULES[source_format].count_records(stream, path)


def task_records(task: Task) -> Iterator[Record]:
    """The records of ``task``'s part of the source, in order."""
    return _rec_records(task) if task.source_format == "recordio" else _foreign_records(task)


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
        if task.target_format == "recordio":
            path, idx = stem + ".rec", (stem + ".idx" if task.indexed else None)
            self.writer = RecordWriter(path, idx, key_type=str, write_behind=True, sidecar=False)
        else:
            module = MODULES[task.target_format]
            path = stem + SUFFIXES[task.target_format][0]
            idx = path + module.INDEX_SUFFIX if module.INDEX_SUFFIX else None
            self.writer = module.Writer(path, task.class_names)
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
        recordio = self.task.target_format == "recordio"
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
            if progress is not None and pending >= _BLOCK:
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
    local = tempfile.mkdtemp(prefix="mxrec-convert-", dir=os.environ.get("MXREC_SPOOL_DIR") or None)
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


# -- planning -------------------------------------------------------------------------------------


def _ranges(total: int, pieces: int, multiple: int = 1) -> list[tuple[int, int]]:
    """``pieces`` contiguous ranges over ``total`` items, boundaries on multiples of ``multiple``."""
    if total == 0:
        return [(0, 0)]
    step = max(multiple, math.ceil(math.ceil(total / max(1, pieces)) / multiple) * multiple)
    return [(start, min(total, start + step)) for start in range(0, total, step)]


def _rec_source(spec: Any, faces: bool, storage_options: StorageOptions) -> tuple[bool, int]:
    """Whether a ``.rec`` source (or its first shard) has an ``.idx``, and how many records a conversion takes from
    it (the faces only, with ``faces``): the dataset opened once."""
    reader = open_dataset(spec, key_type=str, duplicates="last", storage_options=storage_options)
    try:
        first = reader.shard(0) if hasattr(reader, "shard") else reader
        indexed, total = first.index_path is not None, len(reader)
    finally:
        reader.close()
    return indexed, len(face_positions(spec, storage_options)) if faces else total


# -- publishing -----------------------------------------------------------------------------------


@dataclass
class OutputSet:
    """Where a conversion's shards go: a ``.rec`` (or its shards), or a folder of foreign shards named ``stem``."""

    format: str
    path: str  # the .rec, or the folder of a foreign set
    stem: str
    storage_options: StorageOptions

    def manifest(self) -> str:
        if self.format == "recordio":
            return manifest_path(self.path)
        return join(self.path, manifest_name(self.stem))

    def shard(self, number: int) -> tuple[str, str]:
        if self.format == "recordio":
            return shard_paths(self.path, number)
        path = join(self.path, f"{self.stem}_{number:05d}{SUFFIXES[self.format][0]}")
        return path, path + MODULES[self.format].INDEX_SUFFIX

    def old_files(self, count: int) -> list[str]:
        """The files of the set now under this name that a new set of ``count`` shards does not overwrite: those
        its manifest lists, and the shards numbered from ``count`` on."""
        if self.format == "recordio":
            return stale_shards(self.path, count, self.storage_options)
        listed: set[str] = set()
        with contextlib.suppress(MxrecError, OSError, ValueError):
            folder = parent(self.manifest())
            shards = parse_set_manifest(read_bytes(self.manifest(), self.storage_options), self.manifest()).shards
            listed = {join(folder, n) for shard in shards for n in (shard["path"], shard.get("index")) if n}
        listed |= set(numbered_files(self.shard, count, self.storage_options))
        return sorted(listed - {p for n in range(count) for p in self.shard(n)})


def publish(target: OutputSet, results: list[TaskResult], sharded: bool, indexed: bool, commit: Commit,
            class_names: dict[int, str] | None, report: Report) -> tuple[list[str], str | None]:
    """Hand the staged shards to ``commit`` in task order, then publish them, the manifest last; return both."""
    staged = [shard for result in sorted(results, key=lambda r: r.number) for shard in result.shards]
    manifest = target.manifest() if sharded else None
    files: list[str] = []
    entries: list[ShardEntry] = []
    for number, shard in enumerate(staged):
        rec, idx = (target.path, index_path_for(target.path)) if manifest is None else target.shard(number)
        entries.append(ShardEntry(basename(rec), None if shard.idx is None else basename(idx), shard.records,
                                  shard.rec_bytes, shard.idx_bytes, shard.checksums))
        if manifest is None and shard.checksums is not None:  # one .rec: its checksums in a sidecar beside it
            sidecar = checksums_path(rec)
            with open(commit.path_for(sidecar), "w", encoding="utf-8", newline="\n") as f:
                f.write(format_sidecar(shard.checksums))
            commit.finish(sidecar)
        if shard.idx is not None:  # (the index before its data: see the commit protocol)
            commit.adopt(shard.idx, idx)
        commit.adopt(shard.path, rec)
        files.append(rec)
    if manifest is None:
        commit.publish()
        return files, None
    if target.format == "recordio":
        text = Manifest(tuple(entries)).to_json()
    else:
        shards = [{"path": e.rec, "records": e.records, "bytes": e.rec_bytes, **({"index": e.idx} if e.idx else {})}
                  for e in entries]
        text = SetManifest(target.format, shards, indexed, class_names, dict(report.kinds),
                           len(report.classes)).to_json()
    names = [basename(p) for p in commit.finals]
    commit.publish(manifest=(manifest, marker_text(commit.job, names), text), stale=target.old_files(len(staged)))
    return files, manifest


# -- running --------------------------------------------------------------------------------------


def _run_local(tasks: list[Task], workers: int, total: int, progress: Progress | None) -> list[TaskResult]:
    done = [0]

    def advance(count: int) -> None:
        done[0] += count
        if progress is not None:
            progress(done[0], total)

    if workers <= 1 or len(tasks) == 1:
        return [run_task(task, advance) for task in tasks]
    pool = multiprocessing.get_context("spawn").Pool(min(workers, len(tasks)))
    try:
        results = []
        for result in pool.imap_unordered(run_task, tasks):
            results.append(result)
            advance(result.report.records)
        pool.close()
    except BaseException:
        pool.terminate()
        raise
    finally:
        pool.join()
    return results


def _run_ray(tasks: list[Task], address: str | None, total: int, progress: Progress | None) -> list[TaskResult]:
    from mxrec.ray.session import ray_session, task_errors

    with ray_session(address) as ray, task_errors():
        remote = ray.remote(run_task)
        pending = [remote.remote(task) for task in tasks]
        results: list[TaskResult] = []
        try:
            while pending:
                ready, pending = ray.wait(pending, num_returns=1)
                results.extend(ray.get(ready))
                if progress is not None:
                    progress(sum(r.report.records for r in results), total)
        except BaseException:
            for ref in pending:
                ray.cancel(ref, force=True)
            raise
    return results


def write_class_names(rec_path: str, names: dict[int, str] | None) -> None:
    """Write ``NAME.labels`` beside a local ``NAME.rec`` when the classes have names."""
    if names and not is_url(rec_path):
        write_label_names(os.path.splitext(rec_path)[0] + LABELS_SUFFIX, names)


def _class_names(source_format: str, spec: Any, given: dict[int, str] | None, foreign: Any) -> dict[int, str] | None:
    if given is not None:
        return given
    if foreign is not None and foreign.manifest is not None:
        return foreign.manifest.class_names
    if source_format == "recordio" and isinstance(spec, (str, os.PathLike)):
        candidate = os.path.splitext(os.fspath(spec))[0] + LABELS_SUFFIX
        if not is_url(candidate) and os.path.isfile(candidate):
            return read_label_names(candidate)
    return None


def convert(source: str | os.PathLike | Sequence[str | os.PathLike], target: str | os.PathLike, *,
            source_format: str | None = None, target_format: str | None = None,
            shard_size: ShardLimit | int | str | None = None, workers: int = 1, engine: str = "local",
            address: str | None = None, insightface: str = "all", class_names: dict[int, str] | None = None,
            transform: ImageTransform | None = None, storage_options: StorageOptions = None,
            progress: Progress | None = None) -> ConvertResult:
    """Convert a dataset between RecordIO, WebDataset, Parquet (Hugging Face), TFRecord and image folders.

    ``source``: a ``.rec`` or any shard set :func:`~mxrec.datasets.shard_set.open_dataset` opens, or a foreign set (a
    file, folder, glob, brace range, list, or ``NAME.convert.json``), local or at a URL. ``target``: a ``.rec``
    (one file, or shards with ``shard_size``), or for a foreign format a folder (shards ``NAME_00000.tar`` ...
    named after the source) or ``FOLDER/NAME.tar`` (``.parquet``, ``.tfrecord``). Formats are taken from the
    names unless given (``recordio``, ``webdataset``, ``parquet``, ``tfrecord``, ``folder``).

    ``shard_size``: records (``10000``) or bytes (``"1GB"``) per output shard (foreign outputs: 1 GiB by
    default). ``workers``: processes; ``engine="ray"`` runs the tasks on a Ray cluster (``address``; a local
    output must be a folder every node sees, a URL output is uploaded by the tasks themselves). ``insightface``:
    ``"all"`` (the default: every record, header and identity records included, so that the set converts back
    byte for byte) or ``"faces"`` (only the face records, which carry their identity labels). ``class_names``:
    the class names (default: the ``.labels`` beside a ``.rec``, or those a converted set's manifest keeps).
    ``transform``: re-encode images (``pack``'s ``--resize``/``--quality``); by default bytes are carried
    untouched. ``progress(done, total)`` is called as records are done. Non-image payloads and broken images are
    carried and listed in the result's report.
    """
    source_format = source_format or infer_format(source, storage_options)
    target = os.fspath(target)
    target_format = target_format or infer_format(target, storage_options, output=True)
    for fmt in (source_format, target_format):
        if fmt not in FORMATS:
            raise OptionError(f"unknown format {fmt!r}: one of {', '.join(FORMATS)}")
    if insightface not in INSIGHTFACE_MODES:
        raise OptionError(f"insightface must be one of {INSIGHTFACE_MODES}, not {insightface!r}")
    if engine not in ("local", "ray"):
        raise OptionError(f"engine must be 'local' or 'ray', not {engine!r}")
    if "folder" in (source_format, target_format):
        return _convert_folder(source, target, source_format, target_format, class_names, transform, workers,
                               progress)
    if insightface == "faces" and source_format != "recordio":
        raise OptionError("insightface='faces' applies to a .rec source")
    limit = parse_shard_size(str(shard_size)) if isinstance(shard_size, (int, str)) else shard_size
    if limit is None and target_format != "recordio":
        limit = ShardLimit(bytes=DEFAULT_SHARD_BYTES)

    foreign = None
    if source_format == "recordio":
        spec: Any = os.fspath(source) if isinstance(source, (str, os.PathLike)) else [os.fspath(p) for p in source]
        indexed, total = _rec_source(spec, insightface == "faces", storage_options)
    else:
        foreign = resolve_set(source, source_format, storage_options)
        spec = foreign.files
        indexed = foreign.manifest.indexed if foreign.manifest is not None else True
        counts = foreign.counts()
        if counts is None and (source_format == "parquet" or ((engine == "ray" or workers > 1) and len(spec) > 1)):
            counts = [count_records(path, source_format, storage_options) for path in spec]
        total = sum(counts) if counts is not None else 0
    names = _class_names(source_format, source, class_names, foreign)

    parallel = engine == "ray" or workers > 1
    sharded = target_format != "recordio" or limit is not None
    if target_format == "recordio" and not sharded:
        parallel = False  # one .rec is written in order by one writer
    if target_format == "recordio" and not target.endswith(".rec"):
        raise OptionError(f"{target}: a RecordIO output is a .rec file (its shards are named after it)")
    if target_format != "recordio" and target.endswith(SUFFIXES[target_format]):
        suffix = next(s for s in SUFFIXES[target_format] if target.endswith(s))
        out = OutputSet(target_format, parent(target), basename(target)[:-len(suffix)], storage_options)
    elif target_format == "recordio":
        out = OutputSet(target_format, target, dataset_stem(target), storage_options)
    else:
        if not is_url(target):
            os.makedirs(target, exist_ok=True)
        out = OutputSet(target_format, target, dataset_stem(source), storage_options)
    # One commit publishes the output. A local one: the tasks write into its hidden staging folder beside the
    # output. A URL: they write on their own disk and upload into the hidden staging folder beside it (a Ray task's
    # machine may not see this one's disk); the shards are moved to their names only when every one is there.
    commit = Commit(out.manifest() if sharded else out.path, storage_options)
    upload = commit.staging_folder() if is_url(out.path) else None

    pieces = (workers if engine == "local" else 0) * TASKS_PER_WORKER
    if engine == "ray":
        from mxrec.ray.session import default_tasks, ray_session

        with ray_session(address):
            pieces = default_tasks()
    if source_format == "recordio":
        multiple = limit.records if limit is not None and limit.records is not None else 1
        ranges = _ranges(total, pieces if parallel else 1, multiple)
        bases = [0] * len(ranges)
    elif parallel and counts is not None:
        ranges = [(n, n + 1) for n in range(len(spec))]
        bases = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(int).tolist() if counts else [0]
    else:
        ranges, bases = [(0, len(spec))], [0]

    staging = commit.staging_folder() if upload is None else upload  # (a URL output: tasks write locally first)
    try:
        tasks = [Task(n, source_format, spec, start, stop, target_format, staging, limit, indexed, base,
                      insightface == "faces", names, transform, storage_options, upload)
                 for n, ((start, stop), base) in enumerate(zip(ranges, bases, strict=True))]
        if engine == "ray":
            results = _run_ray(tasks, address, total, progress)
        else:
            results = _run_local(tasks, workers if parallel else 1, total, progress)
        report = Report()
        for result in sorted(results, key=lambda r: r.number):
            report.merge(result.report)
        files, manifest = publish(out, results, sharded, indexed, commit, names, report)
    except BaseException as exc:
        commit.abort(exc)  # (nothing after a publish: it cleans up after itself)
        raise
    if target_format == "recordio":
        write_class_names(target, names)
    return ConvertResult(source_format, target_format, files, manifest, report)


def _convert_folder(source: Any, target: str, source_format: str, target_format: str,
                    class_names: dict[int, str] | None, transform: ImageTransform | None, workers: int,
                    progress: Progress | None) -> ConvertResult:
    """Image folders are ``mxrec list`` + ``pack`` one way and ``mxrec extract`` the other: the same code."""
    report = Report()
    if source_format == "folder" and target_format == "recordio":
        from mxrec.packing.job import pack_list
        from mxrec.packing.make_lists import make_lists

        prefix = os.path.splitext(target)[0]
        lists = make_lists(prefix, os.fspath(source), recursive=True, shuffle=False)
        packed = pack_list(lists[0], os.fspath(source), target, transform or ImageTransform(pass_through=True),
                           workers=workers, progress=progress)
        report.records = packed.records
        for note in packed.skipped:
            report.note(note.path, note.reason)
        for note in packed.not_images:
            report.note(note.path, note.reason, broken=False)
        return ConvertResult(source_format, target_format, [target], packed.manifest, report)
    if source_format == "recordio" and target_format == "folder":
        extracted = extract_records(os.fspath(source), target, label_names=class_names, progress=progress)
        report.records = extracted.files
        for position, key, reason in extracted.skipped:
            report.note(str(key), f"record {position}: {reason}")
        return ConvertResult(source_format, target_format, [extracted.lst_path], None, report)
    raise OptionError(f"an image folder converts to and from RecordIO only (not {source_format} -> {target_format}): "
                      "go through a .rec")
