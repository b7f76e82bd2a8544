"""Writing a Ray Dataset as a RecordIO shard set: :func:`write_recordio` and its ``Datasink``, :class:`RecordSink`.

For ``write_recordio(ds, "out/train.rec")`` the result is ``out/train_00000.rec`` + ``.idx``,
``out/train_00001.rec`` ..., and ``out/train.manifest.json`` (:mod:`mxrec.format.manifest`), in dataset
order. What each row becomes:

* ``data`` (required): the record's bytes -- after the IRHeader when the row has a header, else the
  whole payload;
* a header when the rows have a ``label`` column (or ``header=True``): ``IRHeader(flag, label, id, id2)``
  packed as MXNet packs it: a scalar label (or one value with ``flag`` 0) is stored in the header, an
  array as ``flag`` float32 labels after it. ``id``/``id2`` default to 0. The rows :func:`read_recordio`
  gives are written back byte for byte (with ``label_width=None`` for multi-label records);
* ``key``: the ``.idx`` key (integers, or strings when no ``shard_size`` is given); without a ``key``
  column each shard's records are keyed ``0..n-1``, like any ``.rec`` written without keys.

How a job commits, with the one commit protocol (:class:`~mxrec.storage.commit.Commit`): every write task
(one per block, or per bundle of blocks) writes its records with :class:`~mxrec.io.writer.RecordWriter` (or
:class:`~mxrec.io.shards.ShardedWriter` when ``shard_size`` caps the shards) into the hidden staging folder
``.NAME.staging-<job id>/``, under names unique to the task *attempt*: Ray re-runs a task whose worker died
with the same task index, and the dead attempt's files must not be taken for the retry's. When every task has
succeeded, the driver (``on_write_complete``) publishes exactly the shards the tasks returned, in task order,
behind a marker, the manifest last, and removes the staging folder with whatever dead attempts left there;
shards of an older set of the same name that the new set does not overwrite are removed after the new manifest
is in place. A job that fails, or whose driver is interrupted, leaves no manifest and no shard under a final
name: at most the staging folder, whose name says it is unfinished (and which :meth:`RecordSink.abort`
removes), or files the cleanup could not remove behind the marker, named on the error.

Every node must see the output folder (a shared file system).
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa
from ray.data import Dataset, Datasink
from ray.data.block import Block, BlockAccessor
from ray.data.datasource.datasink import WriteResult

from mxrec.errors import MissingFolderError, OptionError, PackError, ParameterError
from mxrec.format.checksums import BlockChecksums, checksums_path
from mxrec.format.header import IRHeader, pack
from mxrec.format.manifest import Manifest, manifest_path, marker_text
from mxrec.io.checksummed import stage_sidecar
from mxrec.io.opener import RecordReader
from mxrec.io.shards import (
    ShardedWriter,
    ShardLimit,
    describe_shards,
    parse_shard_size,
    read_manifest,
    shard_paths,
    stale_shards,
)
from mxrec.io.writer import RecordWriter
from mxrec.ray.session import task_errors
from mxrec.storage.commit import Commit
from mxrec.storage.filesystem import local_or_none

Notes = dict[str, Any]  # what a write task reports beyond its shards (see RecordSink.records)
# a task's shard: .rec and .idx in staging, records, checksums (True: in the sidecar beside the staged .rec)
Staged = tuple[str, str, int, BlockChecksums | bool | None]


def _shard_limit(shard_size: ShardLimit | int | str | None) -> ShardLimit | None:
    if shard_size is None or isinstance(shard_size, ShardLimit):
        return shard_size
    if isinstance(shard_size, int):
        return ShardLimit(records=shard_size)
    return parse_shard_size(shard_size)


class RecordSink(Datasink):
    """A Ray Data ``Datasink`` writing a RecordIO shard set at ``path`` (see the module docstring).

    One sink writes one job: :attr:`manifest` holds the result once the job has completed.

    Parameters
    ----------
    path
        The ``.rec`` name of the set (``NAME_00000.rec`` ... and ``NAME.manifest.json`` beside it), in a
        folder every node sees.
    shard_size
        At most this many records (an int, or ``"10000"``) or bytes (``"512MB"``) per shard; by default each
        write task writes one shard.
    header
        Pack an IRHeader from the ``label``/``flag``/``id``/``id2`` columns; default: when there is a
        ``label`` column.

    Raises
    ------
    OptionError
        ``path`` is a URL.
    """

    def __init__(self, path: str | os.PathLike, *, shard_size: ShardLimit | int | str | None = None,
                 header: bool | None = None) -> None:
        local = local_or_none(path)
        if local is None:
            raise OptionError(f"{os.fspath(path)}: write_recordio writes to a folder every node sees (local or shared "
                              "file system); URLs are not supported as outputs")
        self.rec_path = os.path.abspath(local)
        self.limit = _shard_limit(shard_size)
        self.header = header
        self.manifest_path = manifest_path(self.rec_path)
        self.commit = Commit(self.manifest_path)
        self.job_id = self.commit.job
        self.staging = self.commit.staging
        self.manifest: Manifest | None = None
        self.returns: list[dict] = []

    #: Whether a ``shard_size`` of N records gives shards of exactly N (the last one fewer), as a local
    #: writer does, even where tasks wrote fewer records than they were given (:meth:`_recut`).
    exact_shards = False

    # -- on the driver ---------------------------------------------------------------------------------------

    def on_write_start(self, schema: pa.Schema | None = None) -> None:
        """Make the staging folder, on the driver before the write tasks start.

        Parameters
        ----------
        schema
            The rows' schema (unused: every row is checked as it is written).

        Raises
        ------
        MissingFolderError
            The output folder does not exist.
        """
        folder = os.path.dirname(self.staging)
        if not os.path.isdir(folder):
            raise MissingFolderError(f"{folder}: no such folder (for {self.rec_path})")
        self.commit.staging_folder()

    def on_write_complete(self, write_result: WriteResult) -> None:
        """Publish the shards the tasks returned, in task order, the manifest last; set :attr:`manifest`.

        Parameters
        ----------
        write_result
            What every write task returned (:meth:`write`).
        """
        self.returns = sorted(write_result.write_returns, key=lambda r: r["order"])
        staged = [(os.path.join(self.staging, rec), os.path.join(self.staging, idx), count, sums)
                  for r in self.returns for rec, idx, count, sums in r["shards"] if count > 0]
        if self.exact_shards:
            staged = self._recut(staged)
        self.manifest = self._commit(staged)

    def _recut(self, staged: list[Staged]) -> list[Staged]:
        """Shards of exactly ``limit.records`` records (the last one fewer), as one local writer cuts them.

        The tasks' shards are kept when they already are; otherwise (a task wrote fewer records than it was
        given entries: skipped images) every record is copied, in order and with its key, into new shards.
        """
        if self.limit is None or self.limit.records is None:
            return staged
        if all(count == self.limit.records for _, _, count, _ in staged[:-1]):
            return staged
        with ShardedWriter(os.path.join(self.staging, f"exact-{uuid.uuid4().hex[:8]}.rec"), self.limit) as writer:
            for rec, idx, _, _ in staged:
                with RecordReader(rec, idx) as reader:
                    for key, payload in zip(reader.keys, reader, strict=True):
                        writer.write(payload, key)
        return [(os.path.join(self.staging, e.rec), os.path.join(self.staging, e.idx), e.records, e.checksums)
                for e in read_manifest(writer.manifest_path).shards]

    def on_write_failed(self, error: Exception) -> None:
        """Remove everything the job wrote (:meth:`abort`).

        Parameters
        ----------
        error
            Why the job failed (raised by Ray itself).
        """
        self.abort()

    def run(self, job: Callable[[], object]) -> Manifest:
        """Run ``job``, which writes a dataset into this sink (``ds.write_datasink(sink)``); return the manifest.

        On any failure, Ctrl-C included, everything the job wrote is removed and the error raised (an mxrec
        error from a task as itself).

        Parameters
        ----------
        job
            Writes the dataset into this sink.

        Returns
        -------
        Manifest
            The manifest of the set written.

        Raises
        ------
        PackError
            Ray finished the write without calling :meth:`on_write_complete`.
        """
        self.on_write_start()
        try:
            with task_errors():
                job()
        except BaseException:
            self.abort()
            raise
        if self.manifest is None:
            raise PackError(f"{self.rec_path}: Ray finished the write without calling on_write_complete")
        return self.manifest

    def abort(self) -> None:
        """Remove everything this job wrote (its staging folder). Safe to call more than once."""
        self.commit.abort()
        shutil.rmtree(self.staging, ignore_errors=True)

    def _commit(self, staged: list[Staged]) -> Manifest:
        """Publish the staged shards behind a marker, the manifest last, then clear away what it does not list
        (the staging folder with dead attempts' files and empty shards, an older set's later shards)."""
        finals = [shard_paths(self.rec_path, number) for number in range(len(staged))]
        for (rec, idx, _, sums), (final_rec, final_idx) in zip(staged, finals, strict=True):
            self.commit.adopt(idx, final_idx)  # (the .idx, then the checksums, before the data: the commit protocol)
            if sums is True:
                self.commit.adopt(checksums_path(rec), checksums_path(final_rec))
            elif sums is not None:
                stage_sidecar(self.commit, final_rec, sums)
            self.commit.adopt(rec, final_rec)
        folder = os.path.dirname(self.manifest_path)
        manifest = describe_shards(finals, [count for _, _, count, _ in staged], folder,
                                   written=[(rec, idx) for rec, idx, _, _ in staged],
                                   checksums=[sums is not None or None for *_, sums in staged])
        names = [name for shard in manifest.shards for name in shard.files()]
        self.commit.publish(manifest=(self.manifest_path, marker_text(self.job_id, names), manifest.to_json()),
                            stale=stale_shards(self.rec_path, len(finals),
                                               sidecars=all(sums is not None for *_, sums in staged)))
        return manifest

    # -- in the write tasks ------------------------------------------------------------------------------------

    def write(self, blocks: Iterable[Block], ctx: Any) -> dict:
        """Write this task's rows as shards in the staging folder (in a write task).

        Parameters
        ----------
        blocks
            The task's blocks of rows.
        ctx
            Ray's task context (its ``task_idx`` names the task's files).

        Returns
        -------
        dict
            The task (``task``, ``order``), its shards' names, record counts and checksums (``shards``), and
            the notes :meth:`records` added.

        Raises
        ------
        MissingFolderError
            The staging folder is gone (the job was aborted).
        OptionError
            String keys with a ``shard_size``.
        """
        if not os.path.isdir(self.staging):  # the job was aborted (or on_write_start never ran here)
            raise MissingFolderError(f"{self.staging}: the staging folder of this write is gone")
        base = os.path.join(self.staging, f"{ctx.task_idx:05d}-{uuid.uuid4().hex[:8]}.rec")
        notes: Notes = {}
        writer: RecordWriter | ShardedWriter | None = None
        try:
            for block in blocks:
                for key, payload in self.records(block, notes):
                    if writer is None:
                        writer = self._open(base, key)
                    writer.write(payload, key)
        except BaseException:
            if writer is not None:
                writer.abort()
            raise
        if writer is None:
            shards = []
        elif isinstance(writer, ShardedWriter):
            writer.close()
            shards = [(e.rec, e.idx, e.records, e.checksums) for e in read_manifest(writer.manifest_path).shards]
        else:
            writer.close()
            shards = [(os.path.basename(writer.path), os.path.basename(writer.index_path), len(writer),
                       writer.checksums)]
        return {"task": ctx.task_idx, "order": ctx.task_idx, "shards": shards, **notes}

    def _open(self, base: str, first_key: object) -> RecordWriter | ShardedWriter:
        """The writer of one task, for keys of the first key's type (strings, else integers)."""
        if self.limit is None:
            return RecordWriter(base, index=True, key_type=str if isinstance(first_key, str) else int, atomic=True,
                                sidecar=False)  # (the driver stages its sums beside the shard it publishes)
        if isinstance(first_key, str):
            raise OptionError(f"write_recordio: shard_size needs integer keys, not strings like {first_key!r}")
        return ShardedWriter(base, self.limit)

    def records(self, block: Block, notes: Notes) -> Iterator[tuple[object, bytes]]:
        """The records of the rows of ``block``.

        Parameters
        ----------
        block
            A block of rows.
        notes
            What the task reports beyond its shards: subclasses may add to it (``notes["order"]`` places the
            task's shards in the set; by default the task index does).

        Yields
        ------
        tuple of (object, bytes)
            ``(key, payload)`` for each row.

        Raises
        ------
        ParameterError
            The rows have no ``data`` column, or a row with ``flag`` 0 has several labels.
        """
        batch = BlockAccessor.for_block(block).to_batch_format("numpy")
        if "data" not in batch:
            raise ParameterError(f"write_recordio: the rows need a 'data' column (the record bytes); they have "
                                 f"{sorted(batch)}")
        data = batch["data"]
        keys = batch.get("key")
        with_header = self.header if self.header is not None else "label" in batch
        labels, flags, ids, id2s = (batch.get(name) for name in ("label", "flag", "id", "id2"))
        for row in range(len(data)):
            key = None if keys is None else keys[row].item() if isinstance(keys[row], np.generic) else keys[row]
            body = bytes(data[row])
            if not with_header:
                yield key, body
                continue
            label = 0.0 if labels is None else _header_label(labels[row], None if flags is None else flags[row], key)
            header = IRHeader(0, label, 0 if ids is None else int(ids[row]), 0 if id2s is None else int(id2s[row]))
            yield key, pack(header, body)


def _header_label(value: object, flag: object, key: object) -> float | np.ndarray:
    """The label to pack: a scalar when the value is one, or one value with ``flag`` 0; else a float32 array."""
    if np.ndim(value) == 0:
        return float(value)
    values = np.asarray(value, np.float32).ravel()
    if flag is not None and int(flag) == 0:
        if values.size != 1:
            raise ParameterError(f"write_recordio: record {key!r} has flag 0 (one scalar label) but "
                                 f"{values.size} labels")
        return float(values[0])
    return values


def write_recordio(ds: Dataset, path: str | os.PathLike, *, shard_size: ShardLimit | int | str | None = None,
                   header: bool | None = None, ray_remote_args: dict | None = None,
                   concurrency: int | None = None) -> Manifest:
    """Write ``ds`` as a RecordIO shard set at ``path`` (see the module docstring); return its manifest.

    The manifest is ``NAME.manifest.json`` beside ``NAME_00000.rec``. On any failure, Ctrl-C included,
    this job's files are removed and the error is raised (an mxrec error from a task as itself).

    Parameters
    ----------
    ds
        The rows to write.
    path
        The set's ``.rec`` name, as for :class:`RecordSink`.
    shard_size
        Records or bytes per shard at most (:class:`RecordSink`); default: a shard per write task.
    header
        Pack IRHeaders from the label columns; default: when there is a ``label`` column.
    ray_remote_args
        Go to ``Dataset.write_datasink``, as does ``concurrency``.
    concurrency
        How many write tasks run at once.

    Returns
    -------
    Manifest
        ``NAME.manifest.json``'s content: the shards, their records and checksums.

    Raises
    ------
    OptionError
        ``path`` is a URL, or string keys are given with a ``shard_size``.
    MissingFolderError
        The output folder does not exist.
    ParameterError
        The rows have no ``data`` column, or a row with ``flag`` 0 has several labels.
    """
    sink = RecordSink(path, shard_size=shard_size, header=header)
    return sink.run(lambda: ds.write_datasink(sink, ray_remote_args=ray_remote_args, concurrency=concurrency))
