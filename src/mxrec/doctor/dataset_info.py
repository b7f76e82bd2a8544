"""A summary of a ``.rec`` dataset: records, bytes, multi-part records, labels, payload kinds, index status, layout.

:func:`dataset_info` reads every record's framing and header once (not the
image bytes beyond their first four) and returns a :class:`DatasetInfo`. A
damaged file is summarised up to and around the damage; the faults are listed
rather than raised (``mxrec verify`` gives the full diagnosis). An InsightFace
face set (:mod:`mxrec.format.insightface`) is named as such, with its
identities, faces and image size; its labels are summarised over the faces.
"""

from __future__ import annotations

import array
import os
from collections import Counter
from dataclasses import asdict, dataclass, field

import numpy as np

from mxrec.datasets.face_set import read_face_set, read_property
from mxrec.doctor.check_recordio import check_index_entries
from mxrec.doctor.html import escape, fragment, key_values
from mxrec.errors import HeaderError, ImageDecodeError, LayoutError, MxrecError
from mxrec.format import framing
from mxrec.format.header import IRHEADER_SIZE, IRHeader, unpack_header
from mxrec.format.idx import KeyType
from mxrec.image.headers import image_shape
from mxrec.image.signatures import SIGNATURE_BYTES, image_format
from mxrec.io.index import resolve_index, try_read_index
from mxrec.io.opener import RecordReader
from mxrec.storage.filesystem import StorageOptions, local_or_none
from mxrec.storage.memory_map import mapped


@dataclass
class LabelSummary:
    """Labels found in the records' IRHeaders."""

    records_with_header: int = 0
    widths: dict = field(default_factory=dict)  # label width -> record count
    min: float | None = None
    max: float | None = None
    distinct_first_labels: int = 0
    integer_valued: bool = True
    layout_records: int = 0  # InsightFace header and identity records, left out (not samples)


@dataclass
class LayoutSummary:
    """How the records are laid out: ``plain`` (every record a sample) or an ``insightface`` face set."""

    kind: str = "plain"
    identities: int | None = None
    faces: int | None = None
    image_shape: tuple | None = None  # (height, width, channels) of the first face, from its image header
    property: tuple | None = None  # (identities, height, width) of InsightFace's property file beside the .rec
    problem: str | None = None  # why the face set is inconsistent (mxrec verify lists every problem)

    def text(self) -> str:
        if self.kind == "plain":
            return "plain (every record a sample)"
        if self.problem is not None:
            return f"InsightFace face set, inconsistent: {self.problem}"
        text = f"InsightFace face set: {self.identities} identities, {self.faces} faces"
        if self.image_shape is not None:
            height, width, channels = self.image_shape
            text += f", images {width}x{height}x{channels} (first face)"
        if self.property is not None:
            text += f"; property file: {self.property[0]} identities, {self.property[2]}x{self.property[1]}"
        return text


@dataclass
class DatasetInfo:
    """What :func:`dataset_info` found.

    Parameters
    ----------
    path
        The ``.rec``.
    bytes
        Its size.
    records
        The records framed, up to and around any damage.
    multipart_records
        Those stored in several parts.
    payload_bytes
        The records' bytes, framing left out.
    min_record, max_record
        The smallest and largest record (``None`` without records).
    payload_kinds
        Records per payload kind (``jpeg``, ``png``, ``empty``, ...).
    labels
        The labels of the records' IRHeaders.
    index_path
        The ``.idx``, ``None`` without one.
    index_status
        ``"missing"``, ``"ok"``, or what is wrong with the ``.idx``.
    index_entries
        The ``.idx``'s entries, ``None`` when missing or unreadable.
    faults
        The framing damage found, one line each.
    layout
        ``plain`` or an InsightFace face set.
    """

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
    layout: LayoutSummary = field(default_factory=LayoutSummary)

    @property
    def damaged(self) -> bool:
        """Whether the framing is damaged, the ``.idx`` unreadable or at odds with the ``.rec``, or the layout wrong."""
        return bool(self.faults) or self.index_status not in ("ok", "missing") or self.layout.problem is not None

    def to_dict(self) -> dict:
        """The summary for JSON (``mxrec info --json``).

        Returns
        -------
        dict
            Every field, and ``damaged``.
        """
        return asdict(self) | {"damaged": self.damaged}

    def rows(self) -> list[tuple[str, str]]:
        """The lines of the summary, as :meth:`format_text` prints them.

        Returns
        -------
        list of tuple of (str, str)
            ``(name, value)`` of each line.
        """
        rows = [
            ("file", self.path),
            ("size", f"{self.bytes} bytes"),
            ("records", f"{self.records} ({self.multipart_records} multi-part)"),
            ("payload bytes", f"{self.payload_bytes}"
             + (f" (record sizes {self.min_record}..{self.max_record})" if self.records else "")),
            ("payload kinds", ", ".join(f"{k} {v}" for k, v in sorted(self.payload_kinds.items())) or "-"),
        ]
        lab = self.labels
        if lab.records_with_header:
            widths = ", ".join(f"width {w}: {n}" for w, n in sorted(lab.widths.items()))
            kind = "integer-valued" if lab.integer_valued else "real-valued"
            rows.append(("labels", f"{lab.records_with_header} headers ({widths}); "
                                   f"range {lab.min:g}..{lab.max:g}, {lab.distinct_first_labels} distinct, {kind}"
                         + (f" (faces only; {lab.layout_records} header and identity records left out)"
                            if lab.layout_records else "")))
        else:
            rows.append(("labels", "no IRHeaders"))
        entries = "" if self.index_entries is None else f" ({self.index_entries} entries)"
        rows.append(("index", f"{self.index_path or '-'}: {self.index_status}{entries}"))
        rows.append(("layout", self.layout.text()))
        rows += [("damage", fault) for fault in self.faults]
        return rows

    def format_text(self) -> str:
        """The summary for people, as ``mxrec info`` prints it.

        Returns
        -------
        str
            One ``name: value`` line per row of :meth:`rows`.
        """
        return "\n".join(f"{name + ':':<19}{value}" for name, value in self.rows())

    def _repr_html_(self) -> str:
        """The summary as a table, in Jupyter; faults and a damaged index or layout marked."""
        flagged = {"damage"} | ({"index"} if self.index_status not in ("ok", "missing") else set()) | (
            {"layout"} if self.layout.problem is not None else set())
        verdict = "damaged" if self.damaged else "sound"
        return fragment(f"mxrec info: {os.path.basename(self.path) or self.path}", [
            f"<p>{escape(self.path)}: <b class=\"{'fail' if self.damaged else 'ok'}\">{verdict}</b></p>",
            key_values(self.rows(), element_id="info", flagged=sorted(flagged))])


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
    """Label statistics and payload kinds, gathered one record at a time (nothing kept per record but floats).

    ``samples``: the offsets of the records that are samples (an InsightFace
    set's faces); the labels of the others are left out. Default: all.
    """

    def __init__(self, buf: framing.Buffer, samples: set[int] | None = None) -> None:
        self._buf = buf
        self._samples = samples
        self.summary = LabelSummary()
        self.kinds: Counter = Counter()
        self._widths: Counter = Counter()
        # Every label value and each record's first one, gathered compactly; the statistics are taken at the end.
        self._values, self._firsts = array.array("d"), array.array("d")

    def add(self, span: framing.RecordSpan) -> None:
        header, rest, rest_length = _record_head(self._buf, span)
        self.kinds[image_format(rest) if rest_length else "empty"] += 1
        if header is None:
            return
        if self._samples is not None and span.offset not in self._samples:
            self.summary.layout_records += 1  # InsightFace: its labels are key ranges, not classes
            return
        label = header.label
        if header.flag == 0:
            self._values.append(label)
            self._firsts.append(label)
        elif len(label):
            self._values.extend(label.tolist())
            self._firsts.append(float(label[0]))
        self._widths[max(header.flag, 1)] += 1
        self.summary.records_with_header += 1

    def finish(self) -> tuple[LabelSummary, Counter]:
        summary = self.summary
        summary.widths = dict(self._widths)
        if self._values:
            values = np.frombuffer(self._values, np.float64)
            summary.min, summary.max = float(values.min()), float(values.max())
            summary.integer_valued = bool((values == np.round(values)).all())
            summary.distinct_first_labels = len(np.unique(np.frombuffer(self._firsts, np.float64)))
        return summary, self.kinds


def dataset_info(rec_path: str | os.PathLike, idx_path: str | os.PathLike | None = None,
                 key_type: KeyType = int, storage_options: StorageOptions = None) -> DatasetInfo:
    """Summarise a dataset, as ``mxrec info`` prints it: records, bytes, multi-part records, labels, index status.

    One streaming pass over the framing and headers; nothing is kept per record but its offset and label values.

    Parameters
    ----------
    rec_path
        The ``.rec``, local or a URL.
    idx_path
        Its ``.idx``; default: the one beside it, if present.
    key_type
        Converts ``.idx`` keys (``int`` or ``str``).
    storage_options
        fsspec options for URLs.

    Returns
    -------
    DatasetInfo
        The summary; ``format_text()`` for people, ``to_dict()`` for JSON.
    """
    rec_path = os.fspath(rec_path)
    idx_path = resolve_index(rec_path, idx_path, storage_options)
    layout, faces = face_layout_summary(rec_path, idx_path, key_type, storage_options)
    faults: list = []
    starts = array.array("q")
    records = multipart = payload_bytes = 0
    min_record = max_record = None
    with mapped(rec_path, storage_options) as buf:
        tally = LabelTally(buf, faces)
        for span in framing.walk_spans(buf, faults, rec_path):
            tally.add(span)
            starts.append(span.offset)
            records += 1
            multipart += span.parts > 1
            payload_bytes += span.length
            min_record = span.length if min_record is None or span.length < min_record else min_record
            max_record = span.length if max_record is None or span.length > max_record else max_record
        labels, kinds = tally.finish()
        size = len(buf)
    status, entries = "missing", None
    if idx_path is not None:
        index, error = try_read_index(idx_path, key_type, storage_options)
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
        faults=[str(f) for f in faults], layout=layout)


def face_layout_summary(rec_path: str, idx_path: str | None, key_type: KeyType,
                        storage_options: StorageOptions = None) -> tuple[LayoutSummary, set | None]:
    """The layout of ``rec_path`` and, for a consistent InsightFace face set, the offsets of its faces.

    A damaged ``.idx`` leaves the layout unknown (``plain``): the index status reports it.
    """
    if idx_path is None:
        return LayoutSummary(), None
    try:
        with RecordReader(rec_path, idx_path, key_type, duplicates="last", strict=False,
                          storage_options=storage_options) as reader:
            faces = read_face_set(reader)
            if faces is None:
                return LayoutSummary(), None
            first = reader.unpack(int(faces.positions[0]))[1] if len(faces) else b""
            offsets = set(reader.offsets[faces.positions].tolist())
    except LayoutError as exc:
        return LayoutSummary("insightface", problem=str(exc)), None
    except (MxrecError, OSError):
        return LayoutSummary(), None
    try:
        shape = image_shape(first) if first else None
    except ImageDecodeError:
        shape = None
    try:
        local = local_or_none(rec_path)  # (the property file is read beside a local .rec only)
        prop = None if local is None else read_property(os.path.dirname(os.path.abspath(local)))
    except LayoutError as exc:
        return LayoutSummary("insightface", faces.layout.identities, faces.layout.faces, shape,
                             problem=str(exc)), offsets
    return LayoutSummary("insightface", faces.layout.identities, faces.layout.faces, shape, prop), offsets
