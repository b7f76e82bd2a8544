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
``checksums`` every block against its CRC-32C (:mod:`mxrec.format.checksums`:
              the sidecar ``NAME.checksums``, or what a manifest lists), each
              failing block named with its byte range and records; a file
              without checksums passes, saying so.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from mxrec.doctor.report import Check, Problem
from mxrec.errors import ChecksumError
from mxrec.format import framing
from mxrec.format.checksums import BlockChecksums
from mxrec.format.idx import Index, IntKeys, KeyType
from mxrec.io.index import try_read_index
from mxrec.storage.filesystem import StorageOptions


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


def check_checksums(buf: framing.Buffer, checksums: BlockChecksums | ChecksumError | None,
                    describe: Callable[[int, int], str]) -> Check:
    """The ``checksums`` check of the whole file ``buf`` against ``checksums`` (an error: a table that cannot be
    used; ``None``: none recorded); ``describe(start, end)`` names the records in a damaged cell."""
    if checksums is None:
        return Check("checksums", True, "none recorded (mxrec index --checksums adds them)", details={"blocks": 0})
    if isinstance(checksums, ChecksumError):
        return Check("checksums", False, "the checksum table cannot be used", [Problem(0, checksums.reason)])
    if checksums.size != len(buf):
        return Check("checksums", False, "the checksums belong to another version of the file",
                     [Problem(0, f"they describe {checksums.size} bytes, the file holds {len(buf)}")])
    view = memoryview(buf)
    problems = []
    for number in range(len(checksums)):
        start, end = checksums.span(number)
        got = checksums.mismatch(number, view[start:end])
        if got is not None:
            problems.append(Problem(start, f"bytes {start}..{end} fail their CRC-32C (expected "
                                           f"{int(checksums.crcs[number]):#010x}, read {got:#010x}): damaged data "
                                           f"in {describe(start, end)}"))
    details = {"blocks": len(checksums), "block_bytes": checksums.block_bytes, "damaged_blocks": len(problems)}
    summary = (f"{len(problems)} of {checksums.describe()} damaged" if problems
               else f"{checksums.describe()}, each as recorded")
    return Check("checksums", not problems, summary, problems, details=details)


def read_index_check(idx_path: str, key_type: KeyType = int,
                     storage_options: StorageOptions = None) -> tuple[Index | None, Check | None]:
    """Parse the ``.idx``; on failure return the failed ``index`` check instead."""
    index, error = try_read_index(idx_path, key_type, storage_options)
    if error is not None:
        return None, Check("index", False, f"{idx_path} cannot be parsed", [Problem(error.line, error.reason)])
    return index, None


def check_index_entries(index: Index, starts: np.ndarray, file_size: int) -> Check:
    """The ``index`` check of a parsed ``.idx`` against the intact records' ``starts`` (increasing offsets).

    Vectorised: sorted arrays, no set of every offset or key.
    """
    offsets = index.offsets
    repeated = _repeated_keys(index)
    past_end = offsets >= file_size
    not_starts = ~past_end & ~_members(offsets, starts)
    problems = []
    keys = index.keys
    for entry in np.flatnonzero(repeated | past_end | not_starts).tolist():
        key, offset = keys[entry], int(offsets[entry])
        if repeated[entry]:
            problems.append(Problem(key, "duplicate key: listed more than once", entry))
        if past_end[entry]:
            problems.append(Problem(key, f"offset {offset} is past the end of the file ({file_size} bytes)", entry))
        elif not_starts[entry]:
            problems.append(Problem(key, f"offset {offset} is not the start of an intact record", entry))
    unlisted = starts[~_members(starts, np.sort(offsets))].tolist()
    problems.extend(Problem(off, "record is not listed in the index") for off in unlisted)
    duplicates = int(repeated.sum())
    details = {"entries": len(index), "unique_keys": len(index) - duplicates, "unlisted_records": len(unlisted),
               "duplicate_keys": duplicates, "offsets_past_end": int(past_end.sum()),
               "offsets_not_record_starts": int(not_starts.sum())}
    summary = (f"{len(index)} entries, {len(problems)} problem(s)" if problems
               else f"{len(index)} entries, every one a record start; every record listed")
    return Check("index", not problems, summary, problems, details=details)


def _members(values: np.ndarray, sorted_pool: np.ndarray) -> np.ndarray:
    """Which of ``values`` occur in the increasing array ``sorted_pool``."""
    if not len(sorted_pool):
        return np.zeros(len(values), bool)
    at = np.minimum(np.searchsorted(sorted_pool, values), len(sorted_pool) - 1)
    return sorted_pool[at] == values


def _repeated_keys(index: Index) -> np.ndarray:
    """Which entries repeat a key listed before them."""
    repeated = np.zeros(len(index), bool)
    if not index.has_duplicates():
        return repeated
    if isinstance(index.keys, IntKeys):
        _, first = np.unique(index.keys.array, return_index=True)
        repeated[:] = True
        repeated[first] = False
        return repeated
    seen: set = set()
    for entry, key in enumerate(index.keys):
        repeated[entry] = key in seen
        seen.add(key)
    return repeated
