"""The RecordIO-level checks of ``mxrec verify``: ``framing``, ``padding`` (a warning) and ``index``.

``framing``   every record from the first byte to the last: magic, cflag
              order, lengths, truncation, trailing bytes. After a fault the
              walk resumes at the next record boundary (resync rule), so
              every fault is listed, not only the first.
``padding``   (warning) padding bytes that are not zero. Readers ignore
              them; dmlc-core always writes zeros.
``index``     (when an ``.idx`` exists) parses; keys unique; every offset
              is the start of an intact record inside the file; every
              record is listed.
"""

from __future__ import annotations

from mxrec.doctor.report import Check, Problem
from mxrec.format import framing
from mxrec.format.idx import Index, KeyType
from mxrec.io.filesystem import StorageOptions
from mxrec.io.index import try_read_index


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


def read_index_check(idx_path: str, key_type: KeyType = int,
                     storage_options: StorageOptions = None) -> tuple[Index | None, Check | None]:
    """Parse the ``.idx``; on failure return the failed ``index`` check instead."""
    index, error = try_read_index(idx_path, key_type, storage_options)
    if error is not None:
        return None, Check("index", False, f"{idx_path} cannot be parsed", [Problem(error.line, error.reason)])
    return index, None


def check_index_entries(index: Index, spans: list[framing.RecordSpan], file_size: int) -> Check:
    """The ``index`` check of a parsed ``.idx``."""
    starts = {s.offset for s in spans}
    problems = []
    seen: set = set()
    duplicates = past_end = not_starts = 0
    for key, offset in zip(index.keys, index.offsets.tolist(), strict=True):
        if key in seen:
            problems.append(Problem(key, "duplicate key: listed more than once"))
            duplicates += 1
        seen.add(key)
        if offset >= file_size:
            problems.append(Problem(key, f"offset {offset} is past the end of the file ({file_size} bytes)"))
            past_end += 1
        elif offset not in starts:
            problems.append(Problem(key, f"offset {offset} is not the start of an intact record"))
            not_starts += 1
    listed = set(index.offsets.tolist())
    unlisted = [s.offset for s in spans if s.offset not in listed]
    problems.extend(Problem(off, "record is not listed in the index") for off in unlisted)
    details = {"entries": len(index), "unique_keys": len(seen), "unlisted_records": len(unlisted),
               "duplicate_keys": duplicates, "offsets_past_end": past_end, "offsets_not_record_starts": not_starts}
    summary = (f"{len(index)} entries, {len(problems)} problem(s)" if problems
               else f"{len(index)} entries, every one a record start; every record listed")
    return Check("index", not problems, summary, problems, details=details)
