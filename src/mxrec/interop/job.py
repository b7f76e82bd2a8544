"""``convert``: a dataset from one format to another, streamed, in parallel, complete or absent.

Three steps, each a function:

1. :func:`plan`: what the source is (its format, records, index), where the output goes (:class:`OutputSet`),
   the shard limit, and the cut into tasks: ranges of the ``.idx`` positions of a ``.rec`` source (or of an
   InsightFace set's faces), or files of a foreign source.
2. :func:`run`: the tasks (:mod:`mxrec.interop.tasks`) here (one), in worker processes (``workers``), or as Ray
   tasks (``engine="ray"``); each streams its records into shards of its own in the output's staging.
3. :func:`publish`: the staged shards moved to their names in order behind a marker, the set's manifest last:
   the one commit protocol (:class:`~mxrec.storage.commit.Commit`). For a URL output the tasks write on their own
   disk and upload into the hidden staging folder there.

On any error, Ctrl-C or SIGTERM the staging folder and whatever was already moved are removed (what cannot be,
stays behind the marker and is named on the error): nothing that looks whole is left (a crash leaves only the
hidden staging folder ``.NAME.staging-JOB``, or the marker).

Records are carried exactly (:mod:`mxrec.interop.record`): ``.rec -> X -> .rec`` gives the same ``.rec`` and
``.idx`` bytes when the ``.idx`` lists the records in file order, as MXNet's writers make them. Formats come from
the registry (:mod:`mxrec.interop.formats`).
"""

from __future__ import annotations

import contextlib
import math
import multiprocessing
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mxrec.datasets.mixture import Mixture
from mxrec.errors import MxrecError, ParameterError
from mxrec.format.idx import index_path_for
from mxrec.format.manifest import Manifest, ShardEntry, marker_text
from mxrec.format.manifest import manifest_path as rec_manifest_path
from mxrec.interop.formats import FOLDER, RECORDIO, format_names, get_format
from mxrec.interop.record import Report
from mxrec.interop.sets import (
    META,
    SetManifest,
    data_folder,
    infer_format,
    manifest_path,
    parse_set_manifest,
    resolve_set,
)
from mxrec.interop.tasks import Task, TaskResult, face_positions, open_source, run_task
from mxrec.io.checksummed import stage_sidecar
from mxrec.io.lists import LABELS_SUFFIX, read_label_names, write_label_names
from mxrec.io.records import Records
from mxrec.io.shards import ShardLimit, parse_shard_size, shard_paths, stale_shards
from mxrec.packing.extract import dataset_stem, extract_records
from mxrec.packing.prepare import ImageTransform
from mxrec.storage.commit import Commit, numbered_files
from mxrec.storage.files import read_bytes
from mxrec.storage.filesystem import StorageOptions, basename, join, local_or_none, parent

MAX_SHARD_BYTES = 1 << 30  # foreign shards: about 1 GiB each at most unless told otherwise
# A folder output is cut into at least this many shards by default (fewer only when it has fewer records): WebDataset's
# loaders give each worker of each rank whole shards, and a worker without one finds no samples.
DEFAULT_SHARDS = 16
TASKS_PER_WORKER = 4
INSIGHTFACE_MODES = ("all", "faces")
ENGINES = ("local", "ray")

Progress = Callable[[int, int], None]


@dataclass
class ConvertResult:
    """What :func:`convert` wrote.

    Parameters
    ----------
    source_format, target_format
        The formats converted from and to.
    files
        The files written, in order.
    manifest
        The manifest of a sharded output (``None`` for one file).
    report
        What was carried (:class:`~mxrec.interop.record.Report`).
    notes
        Notes for the user (a set too small for many loader workers, say).
    """

    source_format: str
    target_format: str
    files: list[str]
    manifest: str | None
    report: Report
    notes: list[str] = field(default_factory=list)

    @property
    def records(self) -> int:
        """The records converted."""
        return self.report.records


@dataclass(kw_only=True)
class OutputSet:
    """Where a conversion's shards go: a ``.rec`` (or its shards), or a folder of foreign shards named ``stem``
    (one file ``STEM.SUFFIX`` when ``one_file``), what is not data in its ``.mxrec/``."""

    format: str
    path: str  # the .rec, or the folder of a foreign set
    stem: str
    one_file: bool = False
    storage_options: StorageOptions = None

    def manifest(self) -> str:
        if self.format == RECORDIO:
            return rec_manifest_path(self.path)
        return manifest_path(self.path, self.stem)

    def shard(self, number: int) -> tuple[str, str]:
        """The data file of shard ``number`` and its index file."""
        if self.format == RECORDIO:
            return shard_paths(self.path, number)
        declared = get_format(self.format)
        name = declared.shard_name(self.stem, None if self.one_file else number)
        return join(self.path, name), join(join(self.path, META), name + declared.index_suffix)

    def old_files(self, count: int) -> list[str]:
        """The files of the set now under this name that a new set of ``count`` shards does not overwrite: those
        its manifest lists, and the shards numbered from ``count`` on."""
        if self.format == RECORDIO:
            return stale_shards(self.path, count, self.storage_options)
        listed: set[str] = set()
        with contextlib.suppress(MxrecError, OSError, ValueError):
            manifest = self.manifest()
            folder = data_folder(manifest)
            shards = parse_set_manifest(read_bytes(manifest, self.storage_options), manifest).shards
            listed = {join(folder, n) for shard in shards for n in (shard["path"], shard.get("index")) if n}
        if not self.one_file:
            listed |= set(numbered_files(self.shard, count, self.storage_options))
        return sorted(listed - {p for n in range(count) for p in self.shard(n)})


@dataclass(kw_only=True)
class Plan:
    """What :func:`plan` decided: the source, the output, and the tasks' ranges."""

    source_format: str
    target_format: str
    spec: Any  # a .rec spec or an opened dataset, or a foreign set's files
    total: int
    indexed: bool
    class_names: dict[int, str] | None
    out: OutputSet
    sharded: bool  # several shards and a manifest (a foreign output always has a manifest)
    limit: ShardLimit | None
    ranges: list[tuple[int, int]]
    bases: list[int]
    faces: bool = False
    transform: ImageTransform | None = None
    storage_options: StorageOptions = None

    def tasks(self, staging: str, upload: str | None) -> list[Task]:
        """The tasks, writing into ``staging`` (and uploading into ``upload``, a URL folder, when given)."""
        return [Task(number=n, source_format=self.source_format, spec=self.spec, start=start, stop=stop,
                     target_format=self.target_format, staging=staging, limit=self.limit, indexed=self.indexed,
                     key_base=base, faces=self.faces, class_names=self.class_names, transform=self.transform,
                     storage_options=self.storage_options, upload=upload)
                for n, ((start, stop), base) in enumerate(zip(self.ranges, self.bases, strict=True))]


# -- planning -------------------------------------------------------------------------------------


def _ranges(total: int, pieces: int, multiple: int = 1) -> list[tuple[int, int]]:
    """``pieces`` contiguous ranges over ``total`` items, boundaries on multiples of ``multiple``."""
    if total == 0:
        return [(0, 0)]
    step = max(multiple, math.ceil(math.ceil(total / max(1, pieces)) / multiple) * multiple)
    return [(start, min(total, start + step)) for start in range(0, total, step)]


def _rec_source(spec: Any, faces: bool, storage_options: StorageOptions) -> tuple[bool, int, int]:
    """Whether a ``.rec`` source (or its first shard) has an ``.idx``, how many records a conversion takes from
    it (the faces only, with ``faces``), and its bytes: the dataset opened once."""
    reader = open_source(spec, storage_options)
    try:
        first = reader.shard(0) if hasattr(reader, "shard") else reader
        # a mixture's keys are (source, key) pairs, kept in an .idx of the output
        indexed = isinstance(reader, Mixture) or first.index_path is not None
        total, nbytes = len(reader), reader.nbytes
    finally:
        if reader is not spec:
            reader.close()
    return indexed, len(face_positions(spec, storage_options)) if faces else total, nbytes


def _output(source: Any, target: str, target_format: str, shard_size: Any,
            storage_options: StorageOptions) -> OutputSet:
    """Where the output goes: a ``.rec``; ``FOLDER/NAME.SUFFIX`` (one file unless ``shard_size`` is given, then
    shards named after it); or a folder (shards named after the source)."""
    if target_format == RECORDIO:
        if not target.endswith(".rec"):
            raise ParameterError(f"{target}: a RecordIO output is a .rec file (its shards are named after it)")
        return OutputSet(format=RECORDIO, path=target, stem=dataset_stem(target), storage_options=storage_options)
    suffixes = get_format(target_format).suffixes
    name = basename(target)
    if name.endswith(suffixes):
        stem = name[:-len(next(s for s in suffixes if name.endswith(s)))]
        return OutputSet(format=target_format, path=parent(target), stem=stem, one_file=shard_size is None,
                         storage_options=storage_options)
    if (local := local_or_none(target)) is not None:  # (a URL's folders need no making)
        os.makedirs(local, exist_ok=True)
    stem = dataset_stem(source.path if isinstance(source, Records) else source)
    return OutputSet(format=target_format, path=target, stem=stem, storage_options=storage_options)


def _limit(shard_size: Any, out: OutputSet, total: int | None, nbytes: int | None) -> ShardLimit | None:
    """The shard limit asked for, else: none for one file; :data:`DEFAULT_SHARDS` shards of a foreign set (of at
    most :data:`MAX_SHARD_BYTES` each) when its size is known, else :data:`MAX_SHARD_BYTES` per shard."""
    if shard_size is not None:
        return parse_shard_size(str(shard_size)) if isinstance(shard_size, (int, str)) else shard_size
    if out.format == RECORDIO or out.one_file:
        return None
    if total is None or nbytes is None or nbytes > DEFAULT_SHARDS * MAX_SHARD_BYTES:
        return ShardLimit(bytes=MAX_SHARD_BYTES)
    return ShardLimit(records=max(1, total // DEFAULT_SHARDS))  # (rounded down: never fewer shards)


def _pieces(workers: int, engine: str, address: str | None) -> int:
    """How many tasks to cut the work into."""
    if engine == "local":
        return workers * TASKS_PER_WORKER
    from mxrec.ray.session import default_tasks, ray_session

    with ray_session(address):
        return default_tasks()


def _class_names(source_format: str, spec: Any, given: dict[int, str] | None, foreign: Any) -> dict[int, str] | None:
    if given is not None:
        return given
    if foreign is not None and foreign.manifest is not None:
        return foreign.manifest.class_names
    if source_format == RECORDIO and isinstance(spec, (str, os.PathLike)):
        candidate = os.path.splitext(os.fspath(spec))[0] + LABELS_SUFFIX
        local = local_or_none(candidate)
        if local is not None and os.path.isfile(local):
            return read_label_names(local)
    return None


@dataclass(kw_only=True)
class _Source:
    """What :func:`plan` learns of the source: its spec, whether it has an ``.idx``, its records (and per file, for
    a foreign set when known), its bytes when known, and the foreign set it resolved to."""

    spec: Any
    indexed: bool
    total: int | None
    counts: list[int] | None = None
    nbytes: int | None = None
    foreign: Any = None


def _source(source: Any, source_format: str, faces: bool, parallel: bool,
            storage_options: StorageOptions) -> _Source:
    if source_format == RECORDIO:
        spec: Any = source if isinstance(source, Records) else (
            os.fspath(source) if isinstance(source, (str, os.PathLike)) else [os.fspath(p) for p in source])
        indexed, total, nbytes = _rec_source(spec, faces, storage_options)
        return _Source(spec=spec, indexed=indexed, total=total, nbytes=nbytes)
    foreign = resolve_set(source, source_format, storage_options)
    declared, manifest = get_format(source_format), foreign.manifest
    counts = foreign.counts()
    # a sample without a key of its own is keyed by its place in the set: tasks over files need the counts first
    if counts is None and (declared.counts_from_footer or (parallel and len(foreign.files) > 1)):
        counts = [declared.count(path, storage_options) for path in foreign.files]
    return _Source(spec=foreign.files, indexed=manifest.indexed if manifest is not None else True,
                   total=None if counts is None else sum(counts), counts=counts,
                   nbytes=None if manifest is None else sum(int(s["bytes"]) for s in manifest.shards), foreign=foreign)


def _cut(found: _Source, source_format: str, limit: ShardLimit | None,
         pieces: int) -> tuple[list[tuple[int, int]], list[int]]:
    """The tasks' ranges (positions of a ``.rec`` source, on multiples of a record limit; files of a foreign one)
    and the key each one's first sample without a key of its own takes."""
    if source_format == RECORDIO:
        multiple = limit.records if limit is not None and limit.records is not None else 1
        ranges = _ranges(found.total or 0, pieces, multiple)
        return ranges, [0] * len(ranges)
    if pieces > 1 and found.counts:
        bases = np.concatenate([[0], np.cumsum(found.counts)[:-1]]).astype(int).tolist()
        return [(n, n + 1) for n in range(len(found.spec))], bases
    return [(0, len(found.spec))], [0]


def plan(source: Any, target: str, *, source_format: str, target_format: str, shard_size: Any, workers: int,
         engine: str, address: str | None, faces: bool, class_names: dict[int, str] | None,
         transform: ImageTransform | None, storage_options: StorageOptions) -> Plan:
    """What to convert into what, and how the work is cut (see the module docstring); nothing is written."""
    out = _output(source, target, target_format, shard_size, storage_options)
    parallel = engine == "ray" or workers > 1
    found = _source(source, source_format, faces, parallel, storage_options)
    limit = _limit(shard_size, out, found.total, found.nbytes)
    parallel = parallel and limit is not None  # one file is written in order by one writer
    ranges, bases = _cut(found, source_format, limit, _pieces(workers, engine, address) if parallel else 1)
    return Plan(source_format=source_format, target_format=target_format, spec=found.spec, total=found.total or 0,
                indexed=found.indexed, class_names=_class_names(source_format, source, class_names, found.foreign),
                out=out, sharded=target_format != RECORDIO or limit is not None, limit=limit, ranges=ranges,
                bases=bases, faces=faces, transform=transform, storage_options=storage_options)


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


def run(tasks: list[Task], *, total: int, workers: int, engine: str, address: str | None,
        progress: Progress | None) -> list[TaskResult]:
    """Run the tasks here, in ``workers`` processes, or on Ray; their results in task order."""
    if engine == "ray":
        results = _run_ray(tasks, address, total, progress)
    else:
        results = _run_local(tasks, workers if len(tasks) > 1 else 1, total, progress)
    return sorted(results, key=lambda r: r.number)


# -- publishing -----------------------------------------------------------------------------------


def merged_report(results: list[TaskResult]) -> Report:
    """The reports of the tasks as one."""
    report = Report()
    for result in results:
        report.merge(result.report)
    return report


def publish(job: Plan, results: list[TaskResult], commit: Commit, report: Report) -> tuple[list[str], str | None]:
    """Hand the staged shards to ``commit`` in task order, then publish them, the manifest last; return both."""
    target = job.out
    staged = [shard for result in results for shard in result.shards]
    manifest = target.manifest() if job.sharded else None
    files: list[str] = []
    entries: list[ShardEntry] = []
    meta = "" if target.format == RECORDIO else META + "/"  # (a foreign set's index files are in its .mxrec/)
    for number, shard in enumerate(staged):
        rec, idx = (target.path, index_path_for(target.path)) if manifest is None else target.shard(number)
        entries.append(ShardEntry(basename(rec), None if shard.idx is None else meta + basename(idx), shard.records,
                                  shard.rec_bytes, shard.idx_bytes, shard.checksums is not None or None))
        if shard.checksums is not None:  # a .rec's checksums in a sidecar beside it (a set's manifest says so)
            stage_sidecar(commit, rec, shard.checksums)
        if shard.idx is not None:  # (the index before its data: see the commit protocol)
            commit.adopt(shard.idx, idx)
        commit.adopt(shard.path, rec)
        files.append(rec)
    if manifest is None:
        commit.publish()
        return files, None
    if target.format == RECORDIO:
        text = Manifest(tuple(entries)).to_json()
    else:
        shards = [{"path": e.rec, "records": e.records, "bytes": e.rec_bytes, **({"index": e.idx} if e.idx else {})}
                  for e in entries]
        text = SetManifest(target.format, shards, job.indexed, job.class_names, dict(report.kinds),
                           len(report.classes)).to_json()
    names = [basename(p) for p in commit.finals]
    commit.publish(manifest=(manifest, marker_text(commit.job, names), text), stale=target.old_files(len(staged)))
    return files, manifest


def write_class_names(rec_path: str, names: dict[int, str] | None) -> None:
    """Write ``NAME.labels`` beside a local ``NAME.rec`` when the classes have names."""
    local = local_or_none(rec_path)
    if names and local is not None:
        write_label_names(os.path.splitext(local)[0] + LABELS_SUFFIX, names)


def _notes(job: Plan, files: list[str], shard_size: Any) -> list[str]:
    """What the user should know about the output: a folder set of fewer shards than loaders' workers want."""
    if job.target_format == RECORDIO or job.out.one_file or len(files) >= DEFAULT_SHARDS:
        return []
    why = f"the set has {job.total} records" if shard_size is None else "the shard size given makes no more"
    return [f"{len(files)} shard(s), fewer than {DEFAULT_SHARDS} ({why}): a loader that splits shards over "
            f"workers x ranks (WebDataset's WebLoader, datasets' IterableDataset) leaves a worker without a shard "
            "idle, or finds no samples there; use at most that many workers x ranks"
            + (", or a smaller --shard-size" if shard_size is not None else "")]


def convert(source: str | os.PathLike | Sequence[str | os.PathLike] | Records, target: str | os.PathLike, *,
            source_format: str | None = None, target_format: str | None = None,
            shard_size: ShardLimit | int | str | None = None, workers: int = 1, engine: str = "local",
            address: str | None = None, insightface: str = "all", class_names: dict[int, str] | None = None,
            transform: ImageTransform | None = None, storage_options: StorageOptions = None,
            progress: Progress | None = None) -> ConvertResult:
    """Convert a dataset between RecordIO, the registered formats (:mod:`mxrec.interop.formats`: WebDataset,
    Parquet for Hugging Face, TFRecord, ArrayRecord) and image folders.

    Parameters
    ----------
    source
        A ``.rec`` or any dataset spec :func:`~mxrec.datasets.opening.open_dataset` opens, or a dataset already
        opened (its result, a shard set, a :func:`~mxrec.datasets.mixture.mix` mixture); or a foreign set (a
        file, folder, glob, brace range, list, or ``NAME.convert.json``), local or at a URL.
    target
        A ``.rec`` (one file, or shards with ``shard_size``); for a foreign format a folder (shards
        ``NAME_00000.tar`` ... named after the source, what is not data in its ``.mxrec/``) or
        ``FOLDER/NAME.tar`` (``.parquet``, ...: that one file, or shards ``NAME_00000.tar`` with ``shard_size``).
    source_format, target_format
        ``recordio``, a registered format's name, or ``folder`` (default: from the names).
    shard_size
        Records (``10000``) or bytes (``"1GB"``) per output shard. A folder output: :data:`DEFAULT_SHARDS`
        shards by default (of at most 1 GiB each), so loaders' workers each get shards.
    workers
        Worker processes.
    engine
        ``"local"``, or ``"ray"``: the tasks on a Ray cluster at ``address`` (a local output must be a folder every
        node sees; a URL output is uploaded by the tasks themselves).
    address
        The Ray cluster (``engine="ray"``).
    insightface
        ``"all"`` (every record, header and identity records included, so that the set converts back byte for
        byte) or ``"faces"`` (only the face records, with their identity labels).
    class_names
        The class names (default: the ``.labels`` beside a ``.rec``, or those a converted set's manifest keeps).
    transform
        Re-encode images (``pack``'s ``--resize``/``--quality``); by default bytes are carried untouched.
    storage_options
        For URLs: the storage settings.
    progress
        Called as ``progress(done, total)`` as records are done.

    Returns
    -------
    ConvertResult
        The files, the manifest, the report (non-image payloads and broken images are carried and listed there)
        and notes.

    Raises
    ------
    ParameterError
        A bad format, engine, ``insightface`` or output name.
    MissingExtraError
        The format's library is not installed (the error names the extra).
    """
    if not isinstance(source, Records):
        source_format = source_format or infer_format(source, storage_options)
    elif source_format not in (None, RECORDIO):
        raise ParameterError(f"{source.path}: an opened dataset is RecordIO, not {source_format!r}")
    source_format = source_format or RECORDIO
    target = os.fspath(target)
    target_format = target_format or infer_format(target, storage_options, output=True)
    for fmt in (source_format, target_format):
        if fmt not in format_names():
            raise ParameterError(f"unknown format {fmt!r}: one of {', '.join(format_names())}")
    if insightface not in INSIGHTFACE_MODES:
        raise ParameterError(f"insightface must be one of {INSIGHTFACE_MODES}, not {insightface!r}")
    if engine not in ENGINES:
        raise ParameterError(f"engine must be 'local' or 'ray', not {engine!r}")
    if FOLDER in (source_format, target_format):
        return _convert_folder(source, target, source_format, target_format, class_names, transform, workers,
                               progress)
    if insightface == "faces" and source_format != RECORDIO:
        raise ParameterError("insightface='faces' applies to a .rec source")
    job = plan(source, target, source_format=source_format, target_format=target_format, shard_size=shard_size,
               workers=workers, engine=engine, address=address, faces=insightface == "faces",
               class_names=class_names, transform=transform, storage_options=storage_options)
    # One commit publishes the output. A local one: the tasks write into its hidden staging folder beside the
    # output. A URL: they write on their own disk and upload into the hidden staging folder beside it (a Ray task's
    # machine may not see this one's disk); the shards are moved to their names only when every one is there.
    out = job.out
    commit = Commit(out.manifest() if job.sharded else out.path, storage_options)
    upload = commit.upload_folder()
    try:
        tasks = job.tasks(commit.staging_folder() if upload is None else upload, upload)
        results = run(tasks, total=job.total, workers=workers, engine=engine, address=address, progress=progress)
        report = merged_report(results)
        files, manifest = publish(job, results, commit, report)
    except BaseException as exc:
        commit.abort(exc)  # (nothing after a publish: it cleans up after itself)
        if target_format != RECORDIO:  # the .mxrec/ the staging was made in, when nothing else is there
            with contextlib.suppress(OSError):  # (a URL's folders are no folders: nothing to remove there)
                os.rmdir(join(out.path, META))
        raise
    if target_format == RECORDIO:
        write_class_names(target, job.class_names)
    return ConvertResult(source_format, target_format, files, manifest, report, _notes(job, files, shard_size))


def _convert_folder(source: Any, target: str, source_format: str, target_format: str,
                    class_names: dict[int, str] | None, transform: ImageTransform | None, workers: int,
                    progress: Progress | None) -> ConvertResult:
    """Image folders are ``mxrec list`` + ``pack`` one way and ``mxrec extract`` the other: the same code."""
    report = Report()
    if source_format == FOLDER and target_format == RECORDIO:
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
    if source_format == RECORDIO and target_format == FOLDER:
        extracted = extract_records(os.fspath(source), target, label_names=class_names, progress=progress)
        report.records = extracted.files
        for position, key, reason in extracted.skipped:
            report.note(str(key), f"record {position}: {reason}")
        return ConvertResult(source_format, target_format, [extracted.lst_path], None, report)
    raise ParameterError(f"an image folder converts to and from RecordIO only (not {source_format} -> "
                         f"{target_format}): go through a .rec")
