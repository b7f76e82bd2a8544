"""Duplicate images, by content hash: within one dataset, and shared between two (train/val leakage).

Two records hold the same image when the image bytes after their IRHeaders
are identical (same SHA-1, see :mod:`mxrec.doctor.contents`). The same picture
encoded twice (re-compressed, resized) has different bytes and is not found
here. In a shard set both run over the whole set (a record repeated in
another shard is a duplicate too). A duplicate whose labels differ from its original's is called out: one
of the two labels is wrong.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence

from mxrec.doctor.contents import RecordContent
from mxrec.doctor.report import Check, Problem


def _label_note(record: RecordContent, original: RecordContent) -> str:
    if record.labels == original.labels:
        return ""
    return f" with different labels ({_labels_text(record)} vs {_labels_text(original)})"


def _labels_text(record: RecordContent) -> str:
    labels = record.labels or ()
    return f"{labels[0]:g}" if len(labels) == 1 else "[" + ", ".join(f"{v:g}" for v in labels) + "]"


#: A shard set's records: ``(shard file, the set's position of the shard's first record, its records)`` per
#: shard; problems name a record ``"shard: key"`` and give its position in the whole set.
ShardContents = Sequence[tuple[str, int, list[RecordContent]]]
#: ``(name, position, record)`` of a record holding an image.
Named = tuple[object, "int | None", RecordContent]


def _images(contents: list[RecordContent], shard: str | None = None, first: int = 0) -> Iterator[Named]:
    """Each record holding an image, named by its key (and ``shard``, in a set whose positions start at
    ``first`` in that shard)."""
    for record in contents:
        if record.digest is not None and not record.layout_record:
            yield ((record.name if shard is None else f"{shard}: {record.name}"),
                   None if record.at is None else first + record.at, record)


def _set_images(shards: ShardContents) -> Iterator[Named]:
    for shard, first, contents in shards:
        yield from _images(contents, shard, first)


def check_duplicates(contents: list[RecordContent]) -> Check:
    """The ``duplicates`` check: records whose image bytes repeat an earlier record's."""
    return _duplicates(_images(contents))


def check_set_duplicates(shards: ShardContents) -> Check:
    """The ``duplicates`` check over a whole shard set: a record repeated in another shard is found too."""
    return _duplicates(_set_images(shards))


def _duplicates(images: Iterator[Named]) -> Check:
    first: dict[bytes, tuple[object, RecordContent]] = {}
    problems = []
    groups: set[bytes] = set()
    conflicting = 0
    for name, position, record in images:
        original_name, original = first.setdefault(record.digest, (name, record))
        if original is not record:
            note = _label_note(record, original)
            conflicting += bool(note)
            groups.add(record.digest)
            problems.append(Problem(name, f"same image bytes as {original_name}{note}", position))
    details = {"images": len(first) + len(problems), "distinct_images": len(first),
               "duplicate_groups": len(groups), "extra_copies": len(problems), "conflicting_labels": conflicting}
    summary = (f"{len(problems)} extra cop(ies) in {len(groups)} group(s) of identical images"
               + (f", {conflicting} with different labels" if conflicting else "")
               if problems else f"{len(first)} image(s), no two identical")
    return Check("duplicates", not problems, summary, problems, details=details)


def check_leakage(contents: list[RecordContent], other: list[RecordContent],
                  other_path: str | os.PathLike) -> Check:
    """The ``leakage`` check: records whose image also appears in the ``other`` dataset."""
    return _leakage(_images(contents), other, other_path)


def check_set_leakage(shards: ShardContents, other: list[RecordContent], other_path: str | os.PathLike) -> Check:
    """The ``leakage`` check of a whole shard set against the ``other`` dataset."""
    return _leakage(_set_images(shards), other, other_path)


def _leakage(images: Iterator[Named], other: list[RecordContent], other_path: str | os.PathLike) -> Check:
    other_path = os.fspath(other_path)
    in_other: dict[bytes, tuple[object, RecordContent]] = {}
    for name, _, record in _images(other):
        in_other.setdefault(record.digest, (name, record))
    problems = []
    for name, position, record in images:
        match = in_other.get(record.digest)
        if match is not None:
            problems.append(Problem(name, f"same image as {match[0]} in {other_path}{_label_note(record, match[1])}",
                                    position))
    details = {"against": other_path, "other_records": len(other), "shared_images": len(problems)}
    summary = (f"{len(problems)} image(s) also in {other_path}" if problems
               else f"no image shared with {other_path} ({len(other)} records)")
    return Check("leakage", not problems, summary, problems, details=details)
