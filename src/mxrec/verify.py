"""Checking a dataset: the runner of every check ``mxrec verify`` makes, and the RecordIO-level checks.

:func:`verify_recordio` checks the file format only; :func:`verify_dataset`
adds the checks of what the records hold. Both return a
:class:`~mxrec.checks.Report`; neither raises on a damaged file (damage is what
they report) nor changes any file (``mxrec verify --repair`` writes a clean
copy elsewhere, see :mod:`mxrec.repair`). A check marked ``warning`` is reported
but does not fail the report.

RecordIO checks (this module)
    ``framing``   every record from the first byte to the last: magic, cflag
                  order, lengths, truncation, trailing bytes. After a fault the
                  walk resumes at the next record boundary (resync rule), so
                  every fault is listed, not only the first.
    ``padding``   (warning) padding bytes that are not zero. Readers ignore
                  them; dmlc-core always writes zeros.
    ``index``     (when an ``.idx`` exists) parses; keys unique; every offset
                  is the start of an intact record inside the file; every
                  record is listed.

Content checks (:func:`verify_dataset`, on the intact records; records are
named by ``.idx`` key, by position when there is no ``.idx``, or ``byte N``
when the ``.idx`` does not list them)
    ``labels``     :func:`mxrec.doctor_labels.check_labels` (class ids contiguous over both sets with ``against``)
    ``balance``    (warning) :func:`mxrec.doctor_labels.check_balance`
    ``images``     :func:`mxrec.doctor_images.check_images` (``decode``: every image decoded, on all cores)
    ``shapes``     :func:`mxrec.doctor_images.check_shapes`
    ``duplicates`` :func:`mxrec.doctor_leakage.check_duplicates`
    ``leakage``    (with ``against``) :func:`mxrec.doctor_leakage.check_leakage`
    ``lst``        (with ``lst``) :func:`mxrec.doctor_list.check_list`

The labels, balance, images, shapes and duplicates checks apply to image
datasets (records holding an IRHeader and an image); ``dataset_kind="auto"``
runs them when at least half the records are such, and otherwise reports a
passing ``content`` check saying they were skipped.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from mxrec import framing
from mxrec.checks import Check, Problem, Report
from mxrec.contents import looks_like_image_dataset, offset_keys, read_contents, scan_contents
from mxrec.doctor_images import check_images, check_shapes
from mxrec.doctor_labels import check_balance, check_labels, class_counts, labelled_records
from mxrec.doctor_leakage import check_duplicates, check_leakage
from mxrec.doctor_list import check_list
from mxrec.errors import IndexFileError
from mxrec.index import Index, KeyType, index_path_for, read_index
from mxrec.mapping import map_file, release

__all__ = ["Check", "Problem", "Report", "check_framing", "check_index", "check_padding", "verify_dataset",
           "verify_recordio"]

DATASET_KINDS = ("auto", "image", "raw")


def check_framing(buf: framing.Buffer, path: str) -> tuple[Check, list[framing.RecordSpan]]:
    """The ``framing`` check; also returns the intact records it found."""
    spans, faults = framing.salvage_spans(buf, path)
    problems = [Problem(f.offset, f.reason) for f in faults]
    multipart = sum(1 for s in spans if s.parts > 1)
    details = {"records": len(spans), "multipart_records": multipart, "bytes": len(buf),
               "faults": len(faults)}
    if faults:
        summary = f"{len(faults)} fault(s); {len(spans)} intact record(s) outside the damage"
    else:
        summary = f"{len(spans)} record(s), {multipart} multi-part, {len(buf)} bytes"
    return Check("framing", not faults, summary, problems, details=details), spans


def check_padding(buf: framing.Buffer, spans: list[framing.RecordSpan]) -> Check:
    """The ``padding`` check (a warning)."""
    problems = [Problem(at, "padding bytes are not zero")
                for span in spans for at in framing.nonzero_padding(buf, span)]
    summary = f"{len(problems)} part(s) with non-zero padding" if problems else "all padding bytes are zero"
    return Check("padding", not problems, summary, problems, warning=True)


def read_index_check(idx_path: str, key_type: KeyType = int) -> tuple[Index | None, Check | None]:
    """Parse the ``.idx``; on failure return the failed ``index`` check instead."""
    try:
        return read_index(idx_path, key_type), None
    except IndexFileError as exc:
        return None, Check("index", False, f"{idx_path} cannot be parsed", [Problem(exc.line, exc.reason)])
    except UnicodeDecodeError as exc:
        return None, Check("index", False, f"{idx_path} is not UTF-8 text", [Problem(exc.start, str(exc))])


def check_index(idx_path: str, spans: list[framing.RecordSpan], file_size: int,
                key_type: KeyType = int) -> Check:
    """The ``index`` check: the ``.idx`` against the intact records found by the framing walk."""
    index, failed = read_index_check(idx_path, key_type)
    return failed if index is None else check_index_entries(index, spans, file_size)


def check_index_entries(index: Index, spans: list[framing.RecordSpan], file_size: int) -> Check:
    """The ``index`` check of a parsed ``.idx``."""
    starts = {s.offset for s in spans}
    problems = []
    seen: set = set()
    for key, offset in zip(index.keys, index.offsets.tolist(), strict=False):
        if key in seen:
            problems.append(Problem(key, "duplicate key: listed more than once"))
        seen.add(key)
        if offset >= file_size:
            problems.append(Problem(key, f"offset {offset} is past the end of the file ({file_size} bytes)"))
        elif offset not in starts:
            problems.append(Problem(key, f"offset {offset} is not the start of an intact record"))
    listed = set(index.offsets.tolist())
    unlisted = [s.offset for s in spans if s.offset not in listed]
    problems.extend(Problem(off, "record is not listed in the index") for off in unlisted)
    details = {"entries": len(index), "unique_keys": len(seen), "unlisted_records": len(unlisted)}
    summary = (f"{len(index)} entries, {len(problems)} problem(s)" if problems
               else f"{len(index)} entries, every one a record start; every record listed")
    return Check("index", not problems, summary, problems, details=details)


def default_index_path(rec_path: str | os.PathLike, idx_path: str | os.PathLike | None = None) -> str | None:
    """``idx_path`` if given, else the ``.idx`` beside ``rec_path`` if it exists, else None."""
    if idx_path is not None:
        return os.fspath(idx_path)
    candidate = index_path_for(rec_path)
    return candidate if os.path.exists(candidate) else None


def verify_recordio(rec_path: str | os.PathLike, idx_path: str | os.PathLike | None = None,
                    key_type: KeyType = int) -> Report:
    """Check the framing of ``rec_path`` and, if there is one, its ``.idx`` (default: beside it)."""
    return verify_dataset(rec_path, idx_path, key_type, dataset_kind="raw")


def verify_dataset(rec_path: str | os.PathLike, idx_path: str | os.PathLike | None = None,
                   key_type: KeyType = int, *, dataset_kind: str = "auto", decode: bool = False,
                   lst: str | os.PathLike | None = None, root: str | os.PathLike | None = None,
                   against: str | os.PathLike | None = None, num_classes: int | None = None,
                   label_kind: str = "auto", min_class_samples: int = 5, max_imbalance: float = 10.0,
                   workers: int | None = None, progress: Callable[[int, int], None] | None = None) -> Report:
    """Run every check on ``rec_path`` (and its ``.idx``, default: beside it, if present); see the module doc.

    ``dataset_kind``: ``"auto"``, ``"image"`` (always run the content checks) or
    ``"raw"`` (RecordIO checks only, plus ``lst``/``against`` when given).
    ``decode`` decodes every image on ``workers`` threads (default: all cores),
    calling ``progress(done, total)``. ``lst`` (image paths relative to
    ``root``, default: the ``.lst``'s folder) and ``against`` (another ``.rec``)
    add their checks. ``num_classes``, ``label_kind`` (``"auto"``, ``"class"``,
    ``"value"``), ``min_class_samples`` and ``max_imbalance`` tune the label checks.
    """
    if dataset_kind not in DATASET_KINDS:
        raise ValueError(f"dataset_kind must be one of {DATASET_KINDS}, not {dataset_kind!r}")
    rec_path = os.fspath(rec_path)
    idx_path = default_index_path(rec_path, idx_path)
    report = Report(rec_path)
    contents = None
    buf = map_file(rec_path)
    try:
        framing_check, spans = check_framing(buf, rec_path)
        report.checks.append(framing_check)
        report.checks.append(check_padding(buf, spans))
        keys = None
        if idx_path is not None:
            index, failed = read_index_check(idx_path, key_type)
            report.checks.append(failed if index is None else check_index_entries(index, spans, len(buf)))
            keys = None if index is None else offset_keys(index)
        if dataset_kind != "raw" or lst is not None or against is not None:
            contents = scan_contents(buf, spans, keys, decode=decode, workers=workers, progress=progress)
    finally:
        release(buf)
    if contents is None:
        return report
    other = None if against is None else read_contents(against, key_type=key_type, workers=workers)
    if dataset_kind == "image" or (dataset_kind == "auto" and looks_like_image_dataset(contents)):
        companion_ids = () if other is None else class_counts(labelled_records(other))
        report.checks += [
            check_labels(contents, num_classes, label_kind, companion_ids),
            check_balance(contents, num_classes, label_kind, min_class_samples, max_imbalance),
            check_images(contents, decode),
            check_shapes(contents),
            check_duplicates(contents),
        ]
    elif dataset_kind == "auto":
        report.checks.append(Check("content", True, "fewer than half the records hold an IRHeader and an image: "
                                   "label and image checks skipped (--kind image runs them)"))
    if other is not None:
        report.checks.append(check_leakage(contents, other, against))
    if lst is not None:
        report.checks.append(check_list(lst, contents, root))
    return report
