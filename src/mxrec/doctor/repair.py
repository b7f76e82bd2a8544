"""Repairing a damaged dataset: a clean copy of every intact record and a fresh ``.idx``, never in place.

:func:`repair_dataset` walks the ``.rec`` past damage with the resync rule
(:func:`mxrec.format.framing.salvage_spans`), writes every intact record, in file
order, to a new ``.rec`` (:class:`~mxrec.io.writer.RecordWriter` with
``atomic=True``: nothing appears under the output name unless it finished) and
writes a fresh ``.idx``. The :class:`RepairResult` says exactly what was left
behind: each dropped byte range of the input with the framing fault found
there, and each ``.idx`` entry that could not be kept.

Keys: when the input has a readable ``.idx``, every record keeps the key(s)
that the ``.idx`` maps to it. A key listed more than once keeps MXNet's
meaning (the last line wins); its earlier lines are dropped. An entry whose
offset is not an intact record is dropped. A kept record that no key points at
gets a new key (the next integer after the largest key, or
``"recovered-<offset>"`` for non-integer keys), listed in ``new_keys``.
Without a readable ``.idx`` the new one is built as ``mxrec index`` builds it
(:func:`mxrec.io.index.build_index`: record ids if unique, else positions).
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field

from mxrec.errors import MxrecError, RecordFormatError
from mxrec.format import framing
from mxrec.format.idx import Index, KeyType, index_path_for
from mxrec.io.index import build_index, resolve_index, try_read_index, write_index
from mxrec.io.writer import RecordWriter
from mxrec.storage.memory_map import map_file, release


@dataclass
class DroppedRange:
    """Bytes ``[start, end)`` of the input that belong to no intact record, and the fault(s) found there."""

    start: int
    end: int
    reason: str


@dataclass
class DroppedKey:
    """An ``.idx`` entry of the input that the repaired ``.idx`` does not keep."""

    key: object
    offset: int
    reason: str


@dataclass
class RepairResult:
    """What :func:`repair_dataset` wrote and what it left behind."""

    source: str
    rec_path: str
    idx_path: str
    records: int
    key_source: str  # "index" (the input's keys), "id" or "position" (see build_index)
    dropped_ranges: list[DroppedRange] = field(default_factory=list)
    dropped_keys: list[DroppedKey] = field(default_factory=list)
    new_keys: list[tuple[object, int]] = field(default_factory=list)  # (new key, offset in the input)

    @property
    def dropped_bytes(self) -> int:
        return sum(r.end - r.start for r in self.dropped_ranges)

    def to_dict(self) -> dict:
        return asdict(self) | {"dropped_bytes": self.dropped_bytes}

    def format_text(self, max_items: int = 10) -> str:
        lines = [f"repaired copy: {self.rec_path} + {self.idx_path}: {self.records} intact record(s) kept, "
                 f"keys from {self.key_source}"]
        if not self.dropped_ranges and not self.dropped_keys:
            lines.append("  nothing dropped")
        items = ([f"  dropped bytes {r.start}..{r.end} ({r.end - r.start} bytes): {r.reason}"
                  for r in self.dropped_ranges]
                 + [f"  dropped key {k.key!r} (offset {k.offset}): {k.reason}" for k in self.dropped_keys]
                 + [f"  new key {key!r} for the record at byte {offset} (no key of the old .idx pointed at it)"
                    for key, offset in self.new_keys])
        lines += items[:max_items]
        if len(items) > max_items:
            lines.append(f"  ... and {len(items) - max_items} more (--json lists all)")
        return "\n".join(lines)


def dropped_ranges(spans: list[framing.RecordSpan], faults: list[RecordFormatError],
                   size: int) -> list[DroppedRange]:
    """The gaps between intact records, each with the faults found in it (or at its end)."""
    gaps = []
    at = 0
    for start, end in [(s.offset, s.end) for s in spans] + [(size, size)]:
        if start > at:
            gaps.append((at, start))
        at = end
    ranges = []
    for start, end in gaps:
        reasons = [f"at byte {f.offset}: {f.reason}" for f in faults if start <= f.offset <= end]
        ranges.append(DroppedRange(start, end, "; ".join(reasons) or "no record starts here"))
    return ranges


def assign_keys(index: Index, spans: list[framing.RecordSpan]) -> tuple[dict, list[DroppedKey], list]:
    """``({record offset: [keys]}, dropped entries, [(new key, offset)])`` for the kept records."""
    starts = {s.offset for s in spans}
    last_offset: dict = {}
    for key, offset in zip(index.keys, index.offsets.tolist(), strict=True):
        last_offset[key] = offset
    dropped = []
    keys_at: dict = {}
    for line, (key, offset) in enumerate(zip(index.keys, index.offsets.tolist(), strict=True), 1):
        if last_offset[key] != offset or keys_at.get(offset, []).count(key):
            dropped.append(DroppedKey(key, offset, f"entry {line} is listed again later for this key "
                                      "(the last entry wins, as in MXNet)"))
        elif offset not in starts:
            dropped.append(DroppedKey(key, offset, "offset is not the start of an intact record"))
        else:
            keys_at.setdefault(offset, []).append(key)
    integer_keys = all(isinstance(k, int) for k in last_offset)
    next_key = max(last_offset, default=-1) + 1 if integer_keys else None
    new_keys = []
    for span in spans:
        if span.offset not in keys_at:
            if next_key is not None:
                key, next_key = next_key, next_key + 1
            else:
                key = f"recovered-{span.offset}"
            keys_at[span.offset] = [key]
            new_keys.append((key, span.offset))
    return keys_at, dropped, new_keys


def _same_file(a: str, b: str) -> bool:
    if os.path.exists(a) and os.path.exists(b):
        return os.path.samefile(a, b)
    return os.path.abspath(a) == os.path.abspath(b)


def repair_dataset(rec_path: str | os.PathLike, out_path: str | os.PathLike,
                   idx_path: str | os.PathLike | None = None, key_type: KeyType = int) -> RepairResult:
    """Write every intact record of ``rec_path`` to ``out_path`` with a fresh ``.idx`` beside it; see the module doc.

    ``idx_path`` is the input's ``.idx`` (default: beside it, if present).
    The input is never modified; ``out_path`` must name other files.
    """
    rec_path, out_path = os.fspath(rec_path), os.fspath(out_path)
    out_idx = index_path_for(out_path)
    idx_path = resolve_index(rec_path, idx_path)
    inputs = [rec_path] + ([idx_path] if idx_path is not None else [])
    for target in (out_path, out_idx):
        if any(_same_file(target, source) for source in inputs):
            raise MxrecError(f"{target}: is an input file; repair writes a copy and never changes its input")
    # An unreadable .idx is as good as none: the keys are rebuilt from the records.
    index = None if idx_path is None else try_read_index(idx_path, key_type)[0]
    if os.path.exists(out_idx):
        os.unlink(out_idx)  # a stale .idx must never sit beside the new .rec
    buf = map_file(rec_path)
    try:
        spans, faults = framing.salvage_spans(buf, rec_path)
        new_offsets = {}
        with RecordWriter(out_path, atomic=True) as writer:
            for span in spans:
                new_offsets[span.offset] = writer.write(framing.decode_record(buf, span.offset, rec_path)[0])
        size = len(buf)
    finally:
        release(buf)
    result = RepairResult(rec_path, out_path, out_idx, len(spans), "index",
                          dropped_ranges=dropped_ranges(spans, faults, size))
    if index is None:
        _, result.key_source = build_index(out_path, out_idx)
        return result
    keys_at, result.dropped_keys, result.new_keys = assign_keys(index, spans)
    lines = [(key, new_offsets[s.offset]) for s in spans for key in keys_at[s.offset]]
    write_index(out_idx, [k for k, _ in lines], [o for _, o in lines])
    return result
