"""``mxrec verify --engine ray``: the doctor's per-record work on Ray tasks, the checks as locally.

:func:`~mxrec.doctor.verify.verify_dataset` does three things: it walks the framing (and reads the
``.idx``) on the driver, gathers the facts of every intact record (header, labels, image format and
shape, faults, a SHA-1 of the image bytes; with ``decode`` every image decoded), and runs the checks on
those facts. The second step is the one that grows with the data: :class:`RayContentScan` does it on
Ray tasks, each mapping the file and handling a run of records of about equal bytes with
:func:`~mxrec.doctor.contents.span_contents` (the function a local scan's threads run), and returns the
facts in file order. The report is therefore the same as a local one, check for check. A task whose
worker dies is retried by Ray (reading is idempotent). ``against`` (another dataset for the leakage
check) is scanned locally.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import ray

from mxrec.doctor.contents import RecordContent, mark_meta_record, span_contents
from mxrec.doctor.report import Report
from mxrec.doctor.verify import verify_dataset
from mxrec.format import framing
from mxrec.format.idx import KeyType
from mxrec.io.mapping import map_file, release
from mxrec.ray.session import default_tasks, ray_session, task_errors
from mxrec.ray.source import split_ranges


def _contents_task(rec_path: str, spans: Sequence[framing.RecordSpan], first: int, keys: dict | None,
                   decode: bool) -> list[RecordContent]:
    buf = map_file(rec_path)
    try:
        return span_contents(buf, spans, first, keys, decode)
    finally:
        release(buf)


class RayContentScan:
    """A :data:`~mxrec.doctor.contents.ContentScan` that runs on Ray tasks (``tasks``: default 4 per CPU).

    Pass it as ``verify_dataset(..., scan=RayContentScan())`` inside a Ray session, or use
    :func:`verify_dataset_ray`.
    """

    def __init__(self, tasks: int | None = None) -> None:
        self.tasks = tasks

    def __call__(self, rec_path: str, spans: list[framing.RecordSpan], keys_by_offset: dict | None, *,
                 decode: bool = False, progress: Callable[[int, int], None] | None = None) -> list[RecordContent]:
        rec_path = os.path.abspath(rec_path)
        tasks = self.tasks or default_tasks()
        remote = ray.remote(_contents_task)
        sizes = np.fromiter((span.end - span.offset for span in spans), np.int64, len(spans))
        pending: dict[Any, int] = {}
        for lo, hi in split_ranges(sizes, tasks):
            part = spans[lo:hi]
            keys = None if keys_by_offset is None else {s.offset: keys_by_offset[s.offset] for s in part
                                                        if s.offset in keys_by_offset}
            pending[remote.remote(rec_path, part, lo, keys, decode)] = lo
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
        contents = [content for lo in sorted(found) for content in found[lo]]
        mark_meta_record(contents)
        return contents


def verify_dataset_ray(rec_path: str | os.PathLike, idx_path: str | os.PathLike | None = None,
                       key_type: KeyType = int, *, address: str | None = None, tasks: int | None = None,
                       **options: Any) -> Report:
    """:func:`~mxrec.doctor.verify.verify_dataset` with the per-record work on a Ray cluster.

    ``options`` are :func:`~mxrec.doctor.verify.verify_dataset`'s; ``address`` names the cluster if this
    process is not connected yet; ``tasks``: Ray tasks for the scan (default: 4 per cluster CPU).
    """
    with ray_session(address):
        return verify_dataset(rec_path, idx_path, key_type, scan=RayContentScan(tasks), **options)
