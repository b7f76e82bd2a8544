"""Checking a dataset: the runner of every check ``mxrec verify`` makes.

:func:`verify_recordio` checks the file format only; :func:`verify_dataset`
adds the checks of what the records hold. Both return a
:class:`~mxrec.doctor.report.Report`; neither raises on a damaged file (damage is what
they report) nor changes any file (``mxrec verify --repair`` writes a clean
copy elsewhere, see :mod:`mxrec.doctor.repair`). A check marked ``warning`` is reported
but does not fail the report.

RecordIO checks (:mod:`mxrec.doctor.check_recordio`)
    ``framing``, ``padding`` (warning), ``index``, ``checksums``.

Content checks (:func:`verify_dataset`, on the intact records; records are
named by ``.idx`` key, by position when there is no ``.idx``, or ``byte N``
when the ``.idx`` does not list them)
    ``labels``     :func:`mxrec.doctor.check_labels.check_labels` (class ids contiguous over both sets with ``against``)
    ``balance``    (warning) :func:`mxrec.doctor.check_labels.check_balance`
    ``images``     :func:`mxrec.doctor.check_images.check_images` (``decode``: every image decoded, on all cores)
    ``shapes``     :func:`mxrec.doctor.check_images.check_shapes`
    ``duplicates`` :func:`mxrec.doctor.check_leakage.check_duplicates`
    ``leakage``    (with ``against``) :func:`mxrec.doctor.check_leakage.check_leakage`
    ``lst``        (with ``lst``) :func:`mxrec.doctor.check_lst.check_list`
    ``layout``     (an InsightFace face set) :func:`mxrec.doctor.check_layout.check_face_layout`

The labels, balance, images, shapes and duplicates checks apply to image
datasets (records holding an IRHeader and an image); ``dataset_kind="auto"``
runs them when at least half the records are such, and otherwise reports a
passing ``content`` check saying they were skipped.

An InsightFace face set (``layout="auto"`` finds its header record under
``.idx`` key 0; ``"insightface"`` requires one, ``"plain"`` never looks) gets
the ``layout`` check, and its header and identity records are left out of
the others: they are not samples.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable

import numpy as np

from mxrec.doctor.check_images import check_images, check_shapes
from mxrec.doctor.check_labels import check_balance, check_labels, class_counts, labelled_records
from mxrec.doctor.check_layout import check_face_layout
from mxrec.doctor.check_leakage import check_duplicates, check_leakage
from mxrec.doctor.check_lst import check_list
from mxrec.doctor.check_recordio import (
    check_checksums,
    check_framing,
    check_index_entries,
    check_padding,
    read_index_check,
)
from mxrec.doctor.contents import (
    OffsetKeys,
    find_face_layout,
    looks_like_image_dataset,
    number_records,
    offset_keys,
    overview,
    read_contents,
    scan_contents,
)
from mxrec.doctor.report import Check, Report
from mxrec.errors import ChecksumError, IndexFileError, OptionError
from mxrec.format.checksums import BlockChecksums, checksums_path
from mxrec.format.idx import Index, KeyType
from mxrec.format.insightface import resolve_layout
from mxrec.io.checksummed import find_checksums, records_between
from mxrec.io.index import check_offset_range, resolve_index
from mxrec.storage.filesystem import StorageOptions
from mxrec.storage.memory_map import mapped

__all__ = ["Report", "verify_dataset", "verify_recordio"]

#: Collects the facts of one file's records elsewhere (``mxrec.ray.RayContentScan``: on a cluster):
#: ``scan(rec_path, spans, keys_by_offset, decode=..., progress=...)``, a
#: :data:`~mxrec.doctor.contents.ContentGather` that is told the file.
ContentScan = Callable[..., list]

DATASET_KINDS = ("auto", "image", "raw")


def _opens(index: Index, size: int, rec_path: str, idx_path: str) -> bool:
    """Whether a reader opens ``rec_path`` with this ``.idx`` (every offset inside the file, 4-byte aligned)."""
    try:
        check_offset_range(index.offsets, index.keys, size, rec_path, idx_path)
    except IndexFileError:
        return False
    return True


def verify_recordio(rec_path: str | os.PathLike, idx_path: str | os.PathLike | None = None,
                    key_type: KeyType = int) -> Report:
    """Check the framing of ``rec_path`` and, if there is one, its ``.idx``: :func:`verify_dataset` on raw records.

    Parameters
    ----------
    rec_path, idx_path, key_type
        As for :func:`verify_dataset`.

    Returns
    -------
    Report
        The framing, padding and index checks.
    """
    return verify_dataset(rec_path, idx_path, key_type, dataset_kind="raw")


class _RecordNames:
    """How messages name the intact record at each position of ``offsets``: its ``.idx`` key, else ``byte N``."""

    def __init__(self, offsets: np.ndarray, keys: OffsetKeys | None) -> None:
        self.offsets, self.keys = offsets, keys

    def __getitem__(self, position: int) -> object:
        offset = int(self.offsets[position])
        key = None if self.keys is None else self.keys.keys_at([offset])[0]
        return key if key is not None else f"byte {offset}"


def _checksums(rec_path: str, size: int, given: BlockChecksums | bool | None,
               storage_options: StorageOptions) -> BlockChecksums | ChecksumError | None:
    """The checksums to check ``rec_path`` against: those given, its sidecar's, or an error saying why its sidecar
    cannot be used."""
    if given is False:
        return None
    if isinstance(given, BlockChecksums):
        return given
    try:
        found = find_checksums(rec_path, size, storage_options)
    except ChecksumError as exc:
        return exc
    if found is None and given is True:
        return ChecksumError(checksums_path(rec_path), "missing: the set's manifest says the shard's checksums are "
                                                       "there (mxrec index --checksums-only SET.manifest.json "
                                                       "writes them again)")
    return found


def verify_dataset(rec_path: str | os.PathLike, idx_path: str | os.PathLike | None = None,
                   key_type: KeyType = int, *, dataset_kind: str = "auto", layout: str = "auto",
                   decode: bool = False,
                   lst: str | os.PathLike | None = None, root: str | os.PathLike | None = None,
                   against: str | os.PathLike | None = None, num_classes: int | None = None,
                   label_kind: str = "auto", min_class_samples: int = 5, max_imbalance: float = 10.0,
                   workers: int | None = None, progress: Callable[[int, int], None] | None = None,
                   storage_options: StorageOptions = None, scan: ContentScan | None = None,
                   checksums: BlockChecksums | bool | None = None) -> Report:
    """Run every check of ``mxrec verify`` on a dataset and return the report (the checks: the module doc).

    Parameters
    ----------
    rec_path
        The ``.rec`` (a path or URL).
    idx_path
        Its ``.idx``; default: the one beside it, if present.
    key_type
        Converts ``.idx`` keys (``int`` or ``str``).
    dataset_kind
        ``"auto"``, ``"image"`` (always run the content checks) or ``"raw"``
        (RecordIO checks only, plus ``lst``/``against`` when given).
    layout
        ``"auto"``, ``"insightface"`` or ``"plain"`` (see the module doc).
    decode
        Decode every image (on ``workers`` threads) instead of reading headers
        only; libjpeg warnings count as faults.
    lst
        A ``.lst`` to check against the records (lines, files, indices, labels).
    root
        The folder ``lst`` paths are relative to; default: the ``.lst``'s folder.
    against
        Another ``.rec``: images present in both are reported (leakage).
    num_classes
        Class ids must lie in ``[0, num_classes)``.
    label_kind
        ``"auto"``, ``"class"`` or ``"value"``: whether the first label is a
        class id.
    min_class_samples
        Classes with fewer records are reported (balance, a warning).
    max_imbalance
        Largest ratio of the biggest to the smallest class before a warning.
    workers
        Threads for the content scan; default: all cores.
    progress
        Called as ``progress(done, total)`` during the content scan.
    storage_options
        fsspec options for URLs.
    scan
        Collects the records' facts elsewhere than on this process's threads, as
        ``scan(rec_path, spans, keys_by_offset, decode=..., progress=...)``
        (:class:`mxrec.ray.RayContentScan`: on a cluster); the checks are the
        same.
    checksums
        The file's checksums; ``None``: its sidecar ``NAME.checksums``, if
        any; ``False``: none are checked (a manifest that lists none).

    Returns
    -------
    Report
        One :class:`~mxrec.doctor.report.Check` per check; ``report.ok`` when
        every check passed, ``report.format_text()`` for people.
    """
    if dataset_kind not in DATASET_KINDS:
        raise OptionError(f"dataset_kind must be one of {DATASET_KINDS}, not {dataset_kind!r}")
    resolve_layout(layout)
    rec_path = os.fspath(rec_path)
    idx_path = resolve_index(rec_path, idx_path, storage_options)
    report = Report(rec_path)
    contents = None
    with mapped(rec_path, storage_options) as buf:
        framing_check, spans = check_framing(buf, rec_path)
        report.checks.append(framing_check)
        report.numbered = len(spans)
        report.checks.append(check_padding(buf, spans))
        keys = None
        if idx_path is not None:
            index, failed = read_index_check(idx_path, key_type, storage_options)
            if index is None:
                report.checks.append(failed)
            else:
                starts = np.array([s.offset for s in spans], np.int64)
                report.checks.append(check_index_entries(index, starts, len(buf)))
                if _opens(index, len(buf), rec_path, idx_path):
                    report.numbered, report.numbering = len(index), "index"
                else:  # a reader refuses this .idx: the records are numbered as a scan of the file finds them
                    for problem in report.checks[-1].problems:
                        problem.position = None
            keys = None if index is None else offset_keys(index)
        offsets = np.array([s.offset for s in spans], np.int64)
        names = _RecordNames(offsets, keys)
        report.checks.append(check_checksums(buf, _checksums(rec_path, len(buf), checksums, storage_options),
                                             lambda start, end: records_between(offsets, names, start, end)))
        if dataset_kind != "raw" or lst is not None or against is not None:
            gather = None if scan is None else functools.partial(scan, rec_path)
            contents = scan_contents(buf, spans, keys, decode=decode, workers=workers, layout=layout,
                                     progress=progress, gather=gather)
            if report.numbering == "scan":
                number_records(contents, None)
    if contents is None:
        return report
    other = None if against is None else read_contents(against, key_type=key_type, workers=workers,
                                                       storage_options=storage_options).records
    face_layout = None if layout == "plain" else find_face_layout(contents)
    if face_layout is not None or layout == "insightface":
        report.checks.append(check_face_layout(contents, face_layout, rec_path))
    if dataset_kind == "image" or (dataset_kind == "auto" and looks_like_image_dataset(contents)):
        companion_ids = () if other is None else class_counts(labelled_records(other))
        report.checks += [
            check_labels(contents, num_classes, label_kind, companion_ids),
            check_balance(contents, num_classes, label_kind, min_class_samples, max_imbalance),
            check_images(contents, decode),
            check_shapes(contents),
            check_duplicates(contents),
        ]
        report.samples = contents
        report.overview = overview(contents, faces=face_layout is not None)
    elif dataset_kind == "auto":
        report.checks.append(Check("content", True, "fewer than half the records hold an IRHeader and an image: "
                                   "label and image checks skipped (--kind image runs them)"))
    if other is not None:
        report.checks.append(check_leakage(contents, other, against))
    if lst is not None:
        report.checks.append(check_list(lst, contents, root))
    return report
