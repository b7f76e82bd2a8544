"""A summary of a ``.rec`` dataset: records, bytes, multi-part records, labels, payload kinds, index status.

:func:`dataset_info` reads every record's framing and header once (not the
image bytes beyond their first four) and returns a :class:`DatasetInfo`. A
damaged file is summarised up to and around the damage; the faults are listed
rather than raised (``mxrec verify`` gives the full diagnosis).
"""

from __future__ import annotations

import array
import os
from collections import Counter
from dataclasses import asdict, dataclass, field

import numpy as np

from mxrec.doctor.check_recordio import check_index_entries
from mxrec.errors import HeaderError
from mxrec.format import framing
from mxrec.format.header import IRHEADER_SIZE, IRHeader, unpack_header
from mxrec.image.signatures import SIGNATURE_BYTES, image_format
from mxrec.io.index import resolve_index, try_read_index
from mxrec.io.mapping import map_file, release


@dataclass
class LabelSummary:
    """Labels found in the records' IRHeaders."""

    records_with_header: int = 0
    widths: dict = field(default_factory=dict)  # label width -> record count
    min: float | None = None
    max: float | None = None
    distinct_first_labels: int = 0
    integer_valued: bool = True
    meta_record: bool = False  # InsightFace-style header record at position 0


@dataclass
class DatasetInfo:
    """What :func:`dataset_info` found."""

    path: str
    bytes: int
    records: int
    multipart_records: int
    payload_bytes: int
    min_record: int | None
    max_record: int | None
    payload_kinds: dict
    labels: LabelSummary
    index_path: str | None
    index_status: str  # "missing", "ok", or what is wrong
    index_entries: int | None
    faults: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)

    def format_text(self) -> str:
        lines = [
            f"file:              {self.path}",
            f"size:              {self.bytes} bytes",
            f"records:           {self.records} ({self.multipart_records} multi-part)",
            f"payload bytes:     {self.payload_bytes}"
            + (f" (record sizes {self.min_record}..{self.max_record})" if self.records else ""),
            "payload kinds:     " + (", ".join(f"{k} {v}" for k, v in sorted(self.payload_kinds.items()))
                                     or "-"),
        ]
        lab = self.labels
        if lab.records_with_header:
            widths = ", ".join(f"width {w}: {n}" for w, n in sorted(lab.widths.items()))
            kind = "integer-valued" if lab.integer_valued else "real-valued"
            lines.append(f"labels:            {lab.records_with_header} headers ({widths}); "
                         f"range {lab.min:g}..{lab.max:g}, {lab.distinct_first_labels} distinct, {kind}"
                         + ("; meta record at position 0" if lab.meta_record else ""))
        else:
            lines.append("labels:            no IRHeaders")
        entries = "" if self.index_entries is None else f" ({self.index_entries} entries)"
        lines.append(f"index:             {self.index_path or '-'}: {self.index_status}{entries}")
        for fault in self.faults:
            lines.append(f"damage:            {fault}")
        return "\n".join(lines)


def _record_head(buf: framing.Buffer, span: framing.RecordSpan) -> tuple[IRHeader | None, bytes, int]:
    """The record's IRHeader (None if too short for one), the first bytes after it, and its rest's length."""
    if span.parts > 1:
        payload = framing.decode_record(buf, span.offset)[0]
    else:
        data = span.offset + framing.PART_HEADER_SIZE
        flag = int.from_bytes(buf[data:data + 4], "little") if span.length >= IRHEADER_SIZE else 0
        payload = buf[data:data + min(span.length, IRHEADER_SIZE + 4 * flag + SIGNATURE_BYTES)]
    try:
        header, start = unpack_header(payload)
    except HeaderError:
        return None, payload[:SIGNATURE_BYTES], span.length
    return header, bytes(payload[start:start + SIGNATURE_BYTES]), span.length - start


class LabelTally:
    """Label statistics and payload kinds, gathered one record at a time (nothing kept per record but floats)."""

    def __init__(self, buf: framing.Buffer) -> None:
        self._buf = buf
        self.summary = LabelSummary()
        self.kinds: Counter = Counter()
        self._widths: Counter = Counter()
        # Every label value and each record's first one, gathered compactly; the statistics are taken at the end.
        self._values, self._firsts = array.array("d"), array.array("d")
        self._meta_candidate = False
        self._meta_label: IRHeader | None = None

    def add(self, position: int, span: framing.RecordSpan) -> None:
        header, rest, rest_length = _record_head(self._buf, span)
        self.kinds[image_format(rest) if rest_length else "empty"] += 1
        if header is None:
            return
        if position == 0 and header.flag > 0 and rest_length == 0:
            # InsightFace: a header record whose label holds index ranges, not a class (if more records follow)
            self._meta_candidate = True
            self._meta_label = header
            return
        self._count(header)

    def _count(self, header: IRHeader) -> None:
        label = header.label
        if header.flag == 0:
            self._values.append(label)
            self._firsts.append(label)
        elif len(label):
            self._values.extend(label.tolist())
            self._firsts.append(float(label[0]))
        self._widths[max(header.flag, 1)] += 1
        self.summary.records_with_header += 1

    def finish(self, records: int) -> tuple[LabelSummary, Counter]:
        summary = self.summary
        if self._meta_candidate:
            if records > 1:
                summary.meta_record = True
            else:  # a lone record is data, not a header record
                self._count(self._meta_label)
        summary.widths = dict(self._widths)
        if self._values:
            values = np.frombuffer(self._values, np.float64)
            summary.min, summary.max = float(values.min()), float(values.max())
            summary.integer_valued = bool((values == np.round(values)).all())
            summary.distinct_first_labels = len(np.unique(np.frombuffer(self._firsts, np.float64)))
        return summary, self.kinds


def dataset_info(rec_path: str | os.PathLike, idx_path: str | os.PathLike | None = None) -> DatasetInfo:
    """Summarise ``rec_path`` (and its ``.idx``, default: beside it, if present), in one streaming pass."""
    rec_path = os.fspath(rec_path)
    idx_path = resolve_index(rec_path, idx_path)
    buf = map_file(rec_path)
    faults: list = []
    starts = array.array("q")
    records = multipart = payload_bytes = 0
    min_record = max_record = None
    try:
        tally = LabelTally(buf)
        for position, span in enumerate(framing.walk_spans(buf, faults, rec_path)):
            tally.add(position, span)
            starts.append(span.offset)
            records += 1
            multipart += span.parts > 1
            payload_bytes += span.length
            min_record = span.length if min_record is None or span.length < min_record else min_record
            max_record = span.length if max_record is None or span.length > max_record else max_record
        labels, kinds = tally.finish(records)
        size = len(buf)
    finally:
        release(buf)
    status, entries = "missing", None
    if idx_path is not None:
        index, error = try_read_index(idx_path)
        if index is None:
            status = f"unreadable: {error}"
        else:
            entries = len(index)
            found = check_index_entries(index, np.frombuffer(starts, np.int64) if starts else np.empty(0, np.int64),
                                        size).details
            wrong = [f"{n} {what}" for n, what in (
                (found["offsets_past_end"] + found["offsets_not_record_starts"], "offsets not at a record start"),
                (found["duplicate_keys"], "duplicate keys"), (found["unlisted_records"], "records not listed")) if n]
            status = "ok" if not wrong else "; ".join(wrong)
    return DatasetInfo(
        path=rec_path, bytes=size, records=records, multipart_records=multipart, payload_bytes=payload_bytes,
        min_record=min_record, max_record=max_record, payload_kinds=dict(kinds), labels=labels,
        index_path=None if idx_path is None else os.fspath(idx_path), index_status=status, index_entries=entries,
        faults=[str(f) for f in faults])
