"""``mxrec verify --engine ray``: the doctor's per-record work on Ray tasks, the checks as locally.

:func:`~mxrec.doctor.verify_dataset.verify_dataset` does three things: it walks the framing (and reads the
``.idx``) on the driver, gathers the facts of every intact record (header, labels, image format and
shape, faults, a SHA-1 of the image bytes; with ``decode`` every image decoded), and runs the checks on
those facts. The second step is the one that grows with the data: :class:`RayContentScan` does it on
Ray tasks, each handling a run of records of about equal bytes with
:func:`~mxrec.doctor.contents.span_contents` (the function a local scan's threads run) on the file mapped
(a local or shared path) or on exactly its byte range fetched (a URL), and hands the facts back in file
order. The report is therefore the same as a local one, check for check. A task whose worker dies is
retried by Ray (reading is idempotent). A shard set is checked shard by shard
(:func:`mxrec.doctor.sets.verify`), each shard's records on the cluster; ``against`` (another dataset
for the leakage check) is scanned locally.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import ray

from mxrec.doctor.contents import OffsetKeys, RecordContent, span_contents
from mxrec.doctor.report import Report
from mxrec.doctor.sets import ShardSetReport
from mxrec.doctor.sets import verify as verify_set
from mxrec.format import framing
from mxrec.format.idx import KeyType
from mxrec.ray.datasource import split_ranges
from mxrec.ray.session import default_tasks, ray_session, task_errors
from mxrec.storage.filesystem import StorageOptions, absolute
from mxrec.storage.memory_map import mapped_range


def _contents_task(rec_path: str, spans: Sequence[framing.RecordSpan], first: int, keys: list | None,
                   decode: bool, storage_options: StorageOptions) -> list[RecordContent]:
    """The facts of ``spans`` (positions from ``first``): the file mapped, or for a URL their bytes fetched."""
    with mapped_range(rec_path, spans[0].offset, spans[-1].end, storage_options) as (buf, base):
        if not base:  # (the file mapped whole)
            return span_contents(buf, spans, first, keys, decode)
        shifted = [framing.RecordSpan(s.offset - base, s.end - base, s.parts, s.length) for s in spans]
        contents = span_contents(buf, shifted, first, keys, decode)
    for content in contents:
        content.offset += base
    return contents


class RayContentScan:
    """Collects the facts of a file's records on Ray tasks.

    Pass it as ``verify_dataset(..., scan=RayContentScan())`` in a Ray session, or use
    :func:`verify_dataset_ray`.

    Parameters
    ----------
    tasks
        Ray tasks per file (default: 4 per cluster CPU).
    storage_options
        fsspec options for URLs; they reach the tasks.
    """

    def __init__(self, tasks: int | None = None, storage_options: StorageOptions = None) -> None:
        self.tasks = tasks
        self.storage_options = storage_options

    def __call__(self, rec_path: str, spans: list[framing.RecordSpan], keys_by_offset: OffsetKeys | None, *,
                 decode: bool = False, progress: Callable[[int, int], None] | None = None) -> list[RecordContent]:
        rec_path = absolute(rec_path)
        remote = ray.remote(_contents_task)
        sizes = np.fromiter((span.end - span.offset for span in spans), np.int64, len(spans))
        pending: dict[Any, int] = {}
        for lo, hi in split_ranges(sizes, self.tasks or default_tasks()):
            part = spans[lo:hi]
            keys = None if keys_by_offset is None else keys_by_offset.keys_at([span.offset for span in part])
            pending[remote.remote(rec_path, part, lo, keys, decode, self.storage_options)] = lo
        found: dict[int, list[RecordContent]] = {}
        done = 0
        try:
            with task_errors():
                while pending:
                    ready, _ = ray.wait(list(pending), num_returns=1)
                    batch = ray.get(ready[0])
                    found[pending.pop(ready[0])] = batch
                    done += len(batch)
                    if progress is not None:
                        progress(done, len(spans))
        finally:
            for ref in pending:  # an error or Ctrl-C: stop the rest
                ray.cancel(ref)
        return [content for lo in sorted(found) for content in found[lo]]


def verify_dataset_ray(spec: Any, idx_path: str | os.PathLike | None = None, key_type: KeyType = int, *,
                       address: str | None = None, tasks: int | None = None, storage_options: StorageOptions = None,
                       **options: Any) -> Report | ShardSetReport:
    """:func:`mxrec.doctor.sets.verify` (one file or a shard set) with the per-record work on a Ray cluster.

    Parameters
    ----------
    spec
        One file or a shard set, as :func:`~mxrec.doctor.sets.verify` takes it.
    idx_path
        One file's ``.idx``; default: the one beside it, if present.
    key_type
        ``int`` or ``str`` ``.idx`` keys.
    address
        Names the cluster if this process is not connected yet.
    tasks
        Ray tasks per file scanned (default: 4 per cluster CPU).
    storage_options
        fsspec options for URLs, sent to the tasks too.
    **options
        :func:`~mxrec.doctor.verify_dataset.verify_dataset`'s.

    Returns
    -------
    Report or ShardSetReport
        The report of the file, or of each shard and the set.

    Raises
    ------
    ManifestError
        ``idx_path`` or ``lst`` given for a shard set.
    ClusterError
        Nothing answers at ``address``.
    """
    with ray_session(address):
        return verify_set(spec, idx_path, key_type, storage_options=storage_options,
                          scan=RayContentScan(tasks, storage_options), **options)
