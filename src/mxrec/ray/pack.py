"""``mxrec pack --engine ray``: a ``.lst`` and its image folder packed on a Ray cluster, as a shard set.

The ``.lst`` is read and checked on the driver (:func:`~mxrec.packing.job.read_pack_list`: bad lines,
repeated indices and paths leaving the root fail before any image is read), cut into ``blocks`` runs of
consecutive entries, and each run becomes one write task of a :class:`PackSink`: the task packs each
image with :func:`~mxrec.packing.job.record_or_reason` -- the very function a local pack uses, so every
record is byte-identical to a local ``mxrec pack`` of the same image with the same options, and every
skipped image has the same reason -- and writes the records, keyed by their ``.lst`` index, in ``.lst``
order, as the sink's shards. The job commits as any :class:`~mxrec.ray.datasink.RecordSink` does: shards
``NAME_00000.rec`` ... in ``.lst`` order and ``NAME.manifest.json`` written last; without ``shard_limit``
each task writes one shard.

Differences from a local pack: the output is always a shard set (one shard per task, or per
``shard_limit``); image paths in skip reasons are absolute (the root is made absolute on the driver,
since workers do not share its working directory); with ``strict`` the job stops at the first bad image
any task meets, which need not be the first in ``.lst`` order. The image root and the output folder must
be visible to every node.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import ray
from ray.data.block import Block, BlockAccessor
from ray.data.datasource.datasink import WriteResult

from mxrec.errors import PackError
from mxrec.format.lst import ListEntry
from mxrec.image.codec import opencv
from mxrec.io.shards import ShardLimit
from mxrec.packing.job import (
    ImageNote,
    PackResult,
    find_prefix_lists,
    nothing_packed,
    read_pack_list,
    record_or_reason,
    take_outcome,
)
from mxrec.packing.prepare import ImageTransform
from mxrec.ray.datasink import Notes, RecordSink
from mxrec.ray.datasource import split_ranges
from mxrec.ray.session import ProgressTally, default_tasks, job_context, ray_session, run_reporting
from mxrec.storage.filesystem import absolute

_TALLY_EVERY = 16  # images a task packs between two progress reports


@dataclass(frozen=True)
class PackJob:
    """What every pack task does with its ``.lst`` entries (sent to the tasks with the sink)."""

    lst_path: str
    root: str
    transform: ImageTransform
    pack_label: bool = False
    strict: bool = False


class PackSink(RecordSink):
    """A :class:`~mxrec.ray.datasink.RecordSink` whose rows are ``.lst`` entries, packed by the write tasks.

    Rows: ``position`` (in the ``.lst``), ``index``, ``labels``, ``path``. Each task keeps its notes as a
    local pack does (:func:`~mxrec.packing.job.take_outcome`: skipped images, pass-through files that are no
    image; with ``job.strict`` the first stops the job with :class:`~mxrec.errors.PackError`) and returns
    them; :attr:`result` gathers them in ``.lst`` order. A job that packed nothing fails as a local one does,
    before anything is committed. ``tally``: a :class:`~mxrec.ray.session.ProgressTally` the tasks report
    packed images to.
    """

    exact_shards = True  # skipped images do not shorten a shard: N records per shard, as a local pack

    def __init__(self, path: str | os.PathLike, job: PackJob, images: int, *, shard_size: ShardLimit | None = None,
                 tally: Any = None) -> None:
        super().__init__(path, shard_size=shard_size)
        self.job = job
        self.images = images
        self.tally = tally
        self.result = PackResult(job.lst_path, [], root=job.root)

    def records(self, block: Block, notes: Notes) -> Iterator[tuple[object, bytes]]:
        job = self.job
        if not job.transform.pass_through:
            # Ray runs one task per CPU in each worker process: OpenCV's own pool would oversubscribe them.
            opencv().setNumThreads(1)
        table = BlockAccessor.for_block(block).to_arrow()
        kept = PackResult(job.lst_path, [], root=job.root)
        unreported = 0
        columns = (table[name].to_pylist() for name in ("position", "index", "labels", "path"))
        for position, index, labels, path in zip(*columns, strict=True):
            notes.setdefault("order", position)  # the task's first .lst line: its place in the set
            entry = ListEntry(index, tuple(labels), path)
            outcome = record_or_reason(entry, job.root, job.transform, job.pack_label)
            payload = take_outcome(entry, outcome, job.transform, kept, strict=job.strict)
            if payload is not None:
                yield index, payload
            unreported += 1
            if self.tally is not None and unreported == _TALLY_EVERY:
                self.tally.add.remote(unreported)
                unreported = 0
        if self.tally is not None and unreported:
            self.tally.add.remote(unreported)
        notes.setdefault("skipped", []).extend(kept.skipped)
        notes.setdefault("not_images", []).extend(kept.not_images)

    def on_write_complete(self, write_result: WriteResult) -> None:
        returns = sorted(write_result.write_returns, key=lambda r: r["order"])
        self.result.skipped = [note for r in returns for note in r.get("skipped", ())]
        self.result.not_images = [note for r in returns for note in r.get("not_images", ())]
        if not any(count for r in returns for _, _, count, _ in r["shards"]):
            raise nothing_packed(self.result, self.images)
        super().on_write_complete(write_result)


def _entry_blocks(entries: list[ListEntry], ranges: list[tuple[int, int]]) -> list[pa.Table]:
    """The entries as tables of consecutive ``.lst`` lines, one per ``(first, stop)`` range."""
    tables = []
    for lo, hi in ranges:
        run = entries[lo:hi]
        tables.append(pa.table({
            "position": pa.array(range(lo, hi), pa.int64()),
            "index": pa.array([e.index for e in run], pa.uint64()),
            "labels": pa.array([list(e.labels) for e in run], pa.list_(pa.float64())),
            "path": pa.array([e.path for e in run], pa.string()),
        }))
    return tables


def pack_list_ray(lst_path: str | os.PathLike, root: str | os.PathLike, rec_path: str | os.PathLike | None = None,
                  transform: ImageTransform | None = None, *, pack_label: bool = False, strict: bool = False,
                  shard_limit: ShardLimit | None = None, blocks: int | None = None, address: str | None = None,
                  progress: Callable[[int, int], None] | None = None,
                  on_skip: Callable[[ImageNote], None] | None = None,
                  on_warning: Callable[[ImageNote], None] | None = None) -> PackResult:
    """:func:`mxrec.packing.job.pack_list` on a Ray cluster (see the module docstring); returns what it wrote.

    A failed or interrupted job leaves no manifest and no shard.

    Parameters
    ----------
    lst_path, root
        The ``.lst`` and the folder its paths are relative to (visible to every node), as for
        :func:`~mxrec.packing.job.pack_list`.
    rec_path
        Names the shard set: ``NAME_00000.rec`` ... and ``NAME.manifest.json``; default: the ``.lst`` path
        with ``.rec``.
    transform
        What to do to each image; default: ``ImageTransform()``, im2rec's.
    pack_label, strict
        As for :func:`~mxrec.packing.job.pack_list`; with ``strict`` the job stops at the first bad image any
        task meets.
    shard_limit
        At most this many records or bytes per shard; default: one shard per task.
    blocks
        Pack tasks (default: 4 per cluster CPU, at most one per image; with a ``shard_limit`` of N records,
        one task per N images, so that the shards are a local pack's).
    address
        The cluster, if this process is not connected yet (see :func:`~mxrec.ray.ray_session`).
    progress
        Called as ``progress(done, total)`` as images are packed.
    on_skip, on_warning
        Called with the note of each skipped image, and of each stored file that is no image, in ``.lst``
        order, once the job is done.

    Returns
    -------
    PackResult
        Records written, images skipped and why, the shards and the manifest.

    Raises
    ------
    PackError
        With ``strict``, on the first bad image a task meets; when the ``.lst`` has no entries, and when
        nothing could be packed.
    ClusterError
        Nothing answers at ``address``.
    """
    lst_path = os.fspath(lst_path)
    rec_path = os.fspath(rec_path) if rec_path is not None else os.path.splitext(lst_path)[0] + ".rec"
    transform = transform if transform is not None else ImageTransform()
    root = absolute(root)
    entries = read_pack_list(lst_path, root)
    if not entries:
        raise PackError(f"{lst_path}: no entries, nothing to pack")
    with ray_session(address):
        if blocks is None and shard_limit is not None and shard_limit.records is not None:
            size = shard_limit.records  # one full shard per task: the shards of a local pack
            ranges = [(lo, min(lo + size, len(entries))) for lo in range(0, len(entries), size)]
        else:
            ranges = split_ranges(np.ones(len(entries)), blocks or default_tasks())
        tally = ProgressTally.start() if progress is not None else None
        job = PackJob(lst_path, root, transform, pack_label, strict)
        sink = PackSink(rec_path, job, len(entries), shard_size=shard_limit, tally=tally)
        with job_context():
            dataset = ray.data.from_arrow(_entry_blocks(entries, ranges))
            manifest = sink.run(lambda: run_reporting(lambda: dataset.write_datasink(sink), tally, len(entries),
                                                      progress))
    result = sink.result
    for notes, callback in ((result.skipped, on_skip), (result.not_images, on_warning)):
        for note in notes if callback is not None else ():
            callback(note)
    folder = os.path.dirname(sink.manifest_path)
    result.records = manifest.records
    result.outputs = [(os.path.join(folder, e.rec), os.path.join(folder, e.idx)) for e in manifest.shards]
    result.manifest = sink.manifest_path
    return result


def pack_prefix_ray(prefix: str | os.PathLike, root: str | os.PathLike, transform: ImageTransform | None = None,
                    *, address: str | None = None, **options: Any) -> list[PackResult]:
    """Pack every ``.lst`` matching ``prefix`` on a Ray cluster, in one session, each beside its ``.lst``.

    Parameters
    ----------
    prefix
        ``PREFIX.lst``, ``PREFIX_train.lst``, ... are packed (``mxrec pack --engine ray PREFIX ROOT``).
    root
        The images' folder, visible to every node.
    transform
        What to do to each image, as for :func:`pack_list_ray`.
    address
        The cluster, if this process is not connected yet.
    **options
        :func:`pack_list_ray`'s other options (``strict``, ``shard_limit``, ``blocks``, ...).

    Returns
    -------
    list of PackResult
        One per ``.lst``.
    """
    with ray_session(address):
        return [pack_list_ray(lst, root, None, transform, **options) for lst in find_prefix_lists(prefix)]
