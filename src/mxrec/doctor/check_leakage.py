"""Duplicate images, by content hash: within one dataset, and shared between two (train/val leakage).

Two records hold the same image when the image bytes after their IRHeaders
are identical (same SHA-1, see :mod:`mxrec.doctor.contents`). The same picture
encoded twice (re-compressed, resized) has different bytes and is not found
here. A duplicate whose labels differ from its original's is called out: one
of the two labels is wrong.
"""

from __future__ import annotations

import os

from mxrec.doctor.contents import RecordContent
from mxrec.doctor.report import Check, Problem


def _label_note(record: RecordContent, original: RecordContent) -> str:
    if record.labels == original.labels:
        return ""
    return f" with different labels ({_labels_text(record)} vs {_labels_text(original)})"


def _labels_text(record: RecordContent) -> str:
    labels = record.labels or ()
    return f"{labels[0]:g}" if len(labels) == 1 else "[" + ", ".join(f"{v:g}" for v in labels) + "]"


def _with_images(contents: list[RecordContent]) -> list[RecordContent]:
    return [c for c in contents if c.digest is not None and not c.layout_record]


def check_duplicates(contents: list[RecordContent]) -> Check:
    """The ``duplicates`` check: records whose image bytes repeat an earlier record's."""
    first: dict[bytes, RecordContent] = {}
    problems = []
    groups: set[bytes] = set()
    conflicting = 0
    for record in _with_images(contents):
        original = first.setdefault(record.digest, record)
        if original is not record:
            note = _label_note(record, original)
            conflicting += bool(note)
            groups.add(record.digest)
            problems.append(Problem(record.name, f"same image bytes as {original.name}{note}"))
    details = {"images": len(first) + len(problems), "distinct_images": len(first),
               "duplicate_groups": len(groups), "extra_copies": len(problems), "conflicting_labels": conflicting}
    summary = (f"{len(problems)} extra cop(ies) in {len(groups)} group(s) of identical images"
               + (f", {conflicting} with different labels" if conflicting else "")
               if problems else f"{len(first)} image(s), no two identical")
    return Check("duplicates", not problems, summary, problems, details=details)


def check_leakage(contents: list[RecordContent], other: list[RecordContent],
                  other_path: str | os.PathLike) -> Check:
    """The ``leakage`` check: records whose image also appears in the ``other`` dataset."""
    other_path = os.fspath(other_path)
    in_other: dict[bytes, RecordContent] = {}
    for record in _with_images(other):
        in_other.setdefault(record.digest, record)
    problems = []
    for record in _with_images(contents):
        match = in_other.get(record.digest)
        if match is not None:
            problems.append(Problem(record.name, f"same image as {match.name} in {other_path}"
                                    f"{_label_note(record, match)}"))
    details = {"against": other_path, "other_records": len(other), "shared_images": len(problems)}
    summary = (f"{len(problems)} image(s) also in {other_path}" if problems
               else f"no image shared with {other_path} ({len(other)} records)")
    return Check("leakage", not problems, summary, problems, details=details)
