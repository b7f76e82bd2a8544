"""The ``.lst`` check: the image list a ``.rec`` was packed from agrees with the files and with the ``.rec``.

Reported per ``.lst`` line: lines that do not parse (too few fields, an index
or label that is not a number, an empty label or path), an index used twice,
an image path that does not exist under the image root, an index with no
record whose IRHeader id is that index, and labels that differ from the
record's. Reported per record: a record id that no line lists, and an id used
by more than one record. im2rec stores the ``.lst`` index as the record's
header id and only the first label unless ``--pack-label`` is given, so a
record with a scalar label (``flag`` 0) is compared with the line's first
label, and a record with a label array with all of them, as float32.
"""

from __future__ import annotations

import os

import numpy as np

from mxrec.doctor.contents import RecordContent
from mxrec.doctor.report import Check, Problem
from mxrec.errors import ListFileError
from mxrec.format.lst import ListEntry, parse_list_line


def read_list_lines(lst_path: str | os.PathLike) -> tuple[list[tuple[int, ListEntry]], list[Problem]]:
    """``([(line number, entry)], [problem per unparseable line])``; blank lines are skipped."""
    entries, problems = [], []
    with open(lst_path, "rb") as f:
        for number, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                problems.append(Problem(f"line {number}", f"not UTF-8 text: {exc.reason} at column {exc.start}"))
                continue
            if not line.strip():
                continue
            try:
                entries.append((number, parse_list_line(line, lst_path, number)))
            except ListFileError as exc:
                problems.append(Problem(f"line {number}", exc.reason))
    return entries, problems


def labels_agree(entry: ListEntry, record: RecordContent) -> bool:
    """Whether ``record`` holds the labels im2rec would have stored for ``entry`` (NaN matches NaN)."""
    expected = np.asarray(entry.labels[:1] if record.flag == 0 else entry.labels, dtype=np.float32)
    held = np.asarray(record.labels, dtype=np.float32)
    return expected.shape == held.shape and np.array_equal(expected, held, equal_nan=True)


def _text(labels: tuple[float, ...]) -> str:
    return ", ".join(f"{v:g}" for v in labels)


def check_list(lst_path: str | os.PathLike, contents: list[RecordContent],
               root: str | os.PathLike | None = None) -> Check:
    """The ``lst`` check of ``lst_path`` (image paths relative to ``root``, default: the ``.lst``'s folder)."""
    lst_path = os.fspath(lst_path)
    root = os.path.dirname(os.path.abspath(lst_path)) if root is None else os.fspath(root)
    entries, problems = read_list_lines(lst_path)
    records = [c for c in contents if c.record_id is not None and not c.layout_record]
    by_id: dict[int, RecordContent] = {}
    for record in records:
        first = by_id.setdefault(record.record_id, record)
        if first is not record:
            problems.append(Problem(record.name, f"record id {record.record_id} is also the id of {first.name}",
                                    record.at))
    seen: dict[int, int] = {}
    missing_files = 0
    for number, entry in entries:
        where = f"line {number}"
        if entry.index in seen:
            problems.append(Problem(where, f"index {entry.index} is already on line {seen[entry.index]}"))
            continue
        seen[entry.index] = number
        if not os.path.exists(os.path.join(root, entry.path)):
            missing_files += 1
            problems.append(Problem(where, f"{entry.path}: no such file under {root}"))
        record = by_id.get(entry.index)
        if record is None:
            problems.append(Problem(where, f"index {entry.index}: no record has this id"))
        elif not labels_agree(entry, record):
            problems.append(Problem(where, f"index {entry.index}: labels {_text(entry.labels)} but record "
                                    f"{record.name} holds {_text(record.labels)}", record.at))
    unlisted = [r for r in by_id.values() if r.record_id not in seen]
    problems.extend(Problem(r.name, f"record id {r.record_id} is not in the .lst", r.at) for r in unlisted)
    details = {"lines": len(entries), "root": root, "records_with_id": len(records),
               "missing_files": missing_files, "records_not_listed": len(unlisted)}
    summary = (f"{len(entries)} line(s) against {len(records)} record(s)"
               + (f": {len(problems)} problem(s)" if problems else ": every line matches its record and file"))
    return Check("lst", not problems, summary, problems, details=details)
