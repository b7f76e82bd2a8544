"""The one record model every format maps to and from: a key, the IRHeader (exactly), and the payload bytes.

A ``.rec`` record is either an image record (a packed ``IRHeader``, the
float32 labels when ``flag > 0``, then the payload) or, when its bytes cannot
hold an ``IRHeader``, a *raw* record whose whole bytes are the payload.
:class:`Record` keeps the header fields as numbers a foreign format can
store (``flag``, ``label``, ``id``, ``id2``, ``labels``) and rebuilds the
header bytes from them; :meth:`Record.exact_fields` says whether that gives
back the very bytes read (it does unless a label is a NaN with a payload),
and a format stores the header bytes verbatim when it does not.

:func:`inspect_payload` says what a payload holds (``jpeg``, ``png``, ...,
``other``, ``empty``: the signature table), its size from its headers, and
what is wrong with it; :class:`Report` counts
the kinds and lists what is not a sound image (non-image payloads, cut-off or
malformed images): such records are carried as bytes and reported, never
dropped.
"""

from __future__ import annotations

import math
import struct
from collections import Counter
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from mxrec.errors import HeaderError, ImageDecodeError
from mxrec.format.header import IRHEADER, IRHEADER_SIZE
from mxrec.image.headers import image_shape, jpeg_header, truncation
from mxrec.image.signatures import match_signature

_F32 = struct.Struct("<f")
MAX_PROBLEMS = 1000  # problems a Report lists one by one (all are counted)


@dataclass(slots=True)
class Record:
    """One record: ``key`` (the ``.idx`` key as text), its IRHeader fields, and ``data`` (the payload).

    Parameters
    ----------
    key
        The ``.idx`` key as text.
    data
        The payload (after the IRHeader and its labels).
    raw
        The record has no IRHeader: ``data`` is all of it.
    flag, label, id, id2
        The IRHeader fields.
    labels
        The ``flag`` float32 labels (``None`` when ``flag`` is 0).
    head
        The header bytes verbatim, set only when the fields do not rebuild them exactly.
    """

    key: str
    data: bytes | memoryview
    raw: bool = False
    flag: int = 0
    label: float = 0.0
    id: int = 0
    id2: int = 0
    labels: np.ndarray | None = None
    head: bytes | None = None

    @classmethod
    def from_bytes(cls, key: object, record: bytes | memoryview) -> Record:
        """Split a ``.rec`` record into its fields (a raw record when it holds no IRHeader).

        Parameters
        ----------
        key
            The record's key (kept as text).
        record
            The record as the ``.rec`` stores it.

        Returns
        -------
        Record
            The record; its ``data`` is a slice of ``record`` without a copy when ``record`` is a memoryview (of
            a mapped file, say).
        """
        if not isinstance(record, memoryview):
            record = memoryview(record)
        size = len(record)
        if size < IRHEADER_SIZE:
            return cls(str(key), record, raw=True)
        flag, label, id_, id2 = IRHEADER.unpack_from(record)
        end = IRHEADER_SIZE + 4 * flag
        if end > size:
            return cls(str(key), record, raw=True)
        labels = np.frombuffer(record, "<f4", flag, IRHEADER_SIZE).copy() if flag else None
        out = cls(str(key), record[end:], False, flag, label, id_, id2, labels)
        if label != label:  # only a NaN label may not rebuild its bytes (struct may give back another NaN pattern)
            head = bytes(record[:end])
            if not out.exact_fields(head):
                out.head = head
        return out

    @classmethod
    def from_head(cls, key: str, head: bytes, data: bytes | memoryview) -> Record:
        """A record from its IRHeader bytes as stored and its payload, not joined.

        Parameters
        ----------
        key
            The record's key.
        head
            The header and its labels, nothing more.
        data
            The payload, kept as it is (a view stays a view).

        Returns
        -------
        Record
            The record.
        """
        record = cls.from_bytes(key, head)
        if record.raw or len(record.data):  # not exactly one IRHeader: read the two as one record
            return cls.from_fields(key, bytes(data), head=head)
        record.data = data
        return record

    def header_bytes(self) -> bytes:
        """The IRHeader (and labels) as stored in the ``.rec``.

        Returns
        -------
        bytes
            The header bytes (empty for a raw record).
        """
        if self.raw:
            return b""
        if self.head is not None:
            return self.head
        labels = b"" if self.labels is None else np.asarray(self.labels, "<f4").tobytes()
        return IRHEADER.pack(self.flag, self.label, self.id, self.id2) + labels

    def exact_fields(self, head: bytes) -> bool:
        """Whether the fields rebuild ``head`` byte for byte.

        Parameters
        ----------
        head
            Header bytes as stored.

        Returns
        -------
        bool
            ``True`` when :meth:`header_bytes` (ignoring a kept ``head``) equals ``head``.
        """
        saved, self.head = self.head, None
        try:
            return self.header_bytes() == head
        finally:
            self.head = saved

    def to_bytes(self) -> bytes:
        """The record as the ``.rec`` stores it.

        Returns
        -------
        bytes
            The header, labels and payload.
        """
        return self.header_bytes() + self.data if not self.raw else bytes(self.data)

    def verbatim_head(self) -> bytes | None:
        """The header bytes when a format must store them as they are.

        Returns
        -------
        bytes or None
            The header bytes when the fields do not rebuild them, or a label is not finite (formats that carry
            labels as text or in float64 may not keep a NaN's bits); else ``None``.
        """
        if self.raw:
            return None
        if self.head is not None or not all(map(math.isfinite, self.label_values())) or not math.isfinite(
                self.label):
            return self.header_bytes()
        return None

    @classmethod
    def from_fields(cls, key: str | None, data: bytes, *, raw: bool = False, flag: int = 0, label: float = 0.0,
                    id: int = 0, id2: int = 0, labels: object = None, head: bytes | None = None) -> Record:
        """A record from what a format stored: ``head`` (the verbatim header bytes) wins over the fields.

        Parameters
        ----------
        key
            The record's key.
        data
            The payload.
        raw, flag, label, id, id2, labels, head
            As :class:`Record`'s (``labels`` any sequence of ``flag`` numbers).

        Returns
        -------
        Record
            The record.

        Raises
        ------
        HeaderError
            ``flag`` is not the number of ``labels``.
        """
        if head is not None:
            record = cls.from_bytes(key, head + data)
            record.key = key  # type: ignore[assignment]
            return record
        if raw:
            return cls(key, data, raw=True)  # type: ignore[arg-type]
        array = None if not flag else np.asarray(labels, "<f4").reshape(-1)
        if array is not None and array.size != flag:
            raise HeaderError(f"record {key!r}: flag {flag} but {array.size} labels")
        return cls(key, data, False, int(flag), f32(label), int(id), int(id2), array)  # type: ignore[arg-type]

    @property
    def class_label(self) -> int:
        """The integer class (a whole, non-negative scalar label), else -1 (the ``datasets`` ClassLabel "none")."""
        if self.raw or self.flag:
            return -1
        label = self.label
        if not 0 <= label < math.inf:  # negative, infinite or NaN
            return -1
        whole = int(label)
        return whole if whole == label else -1

    def label_values(self) -> list[float]:
        """The labels as numbers.

        Returns
        -------
        list of float
            ``[label]`` for a scalar, the ``flag`` labels otherwise (``[]`` when raw).
        """
        if self.raw:
            return []
        return [self.label] if not self.flag else np.asarray(self.labels, np.float32).tolist()


def foreign_record(data: bytes, label: object) -> Record:
    """A record for a sample another tool wrote (its key and id are given later): a scalar label, or a list of
    labels (``flag`` is then its size)."""
    if isinstance(label, (list, tuple, np.ndarray)):
        return Record.from_fields(None, data, flag=len(label), labels=label)
    return Record.from_fields(None, data, label=float(label) if label is not None else 0.0)  # type: ignore[arg-type]


def f32(value: float) -> float:
    """``value`` rounded to float32 (as the IRHeader stores labels)."""
    return _F32.unpack(_F32.pack(value))[0]


class Payload(NamedTuple):
    """What a payload is, read once from its headers (no decoding): kind, extension, size, and any problem.

    A named tuple: immutable, and cheap to make (one per record).
    """

    kind: str
    extension: str
    height: int = 0
    width: int = 0
    problem: str | None = None

    @property
    def broken(self) -> bool:
        """An image of a known format that is cut off or malformed (a non-image payload is not broken)."""
        return self.problem is not None and self.kind not in ("other", "empty")


_EMPTY = Payload("empty", "bin", problem="empty payload")
_OTHER = Payload("other", "bin", problem="not an image (no known image signature)")


def inspect_payload(data: bytes | memoryview) -> Payload:
    """The :class:`Payload` facts of ``data``: its kind from the signature table, its size from a JPEG's or PNG's
    header, and why it is not a sound image (empty, no image, cut off, malformed headers), if so."""
    signature = match_signature(data)  # one look at the signature table for the kind and the extension
    if signature is None:
        return _OTHER if len(data) else _EMPTY
    kind = signature.kind
    ext = signature.extension[1:]
    try:
        header = jpeg_header(data) if kind == "jpeg" else None
        cut = truncation(data, header)
        if cut is not None:
            return Payload(kind, ext, 0, 0, cut)
        frame = header.frame if header is not None else None
        if frame is not None:
            return Payload(kind, ext, frame.height, frame.width)
        shape = image_shape(data, kind)
    except ImageDecodeError as exc:  # mxrec.image raises only these for damaged headers
        return Payload(kind, ext, 0, 0, f"broken {kind}: {exc}")
    return Payload(kind, ext, *(shape[:2] if shape else (0, 0)))


@dataclass
class Report:
    """What a conversion carried: records, payload bytes, payload kinds, and the records that are not sound images.

    Parameters
    ----------
    records
        Records counted.
    payload_bytes
        Their payloads' bytes.
    kinds
        Records per payload kind.
    raw_records
        Records with no IRHeader.
    problems
        ``(key, reason)`` for the first :data:`MAX_PROBLEMS` records whose payload is no image or a broken one.
    problem_count
        All such records.
    broken
        Problems that are images of a known format, cut off or malformed.
    classes
        Records per class label (whole scalar labels).
    """

    records: int = 0
    payload_bytes: int = 0
    kinds: Counter = field(default_factory=Counter)
    raw_records: int = 0
    problems: list[tuple[str, str]] = field(default_factory=list)
    problem_count: int = 0
    broken: int = 0  # problems that are images of a known format, cut off or malformed
    classes: Counter = field(default_factory=Counter)  # records per class label (whole scalar labels)

    def add(self, record: Record) -> Payload:
        """Count ``record``.

        Parameters
        ----------
        record
            The record carried.

        Returns
        -------
        Payload
            What its payload is.
        """
        data = record.data
        payload = inspect_payload(data)
        self.records += 1
        self.payload_bytes += len(data)
        self.kinds[payload.kind] += 1
        if record.raw:
            self.raw_records += 1
        label = record.class_label
        if label >= 0:
            self.classes[label] += 1
        if payload.problem is not None:
            self.note(record.key, payload.problem, broken=payload.broken)
        return payload

    def note(self, key: str, problem: str, broken: bool = True) -> None:
        """List a record that is not a sound image (or could not be transformed).

        Parameters
        ----------
        key
            The record's key.
        problem
            What is wrong with it.
        broken
            Whether it is an image of a known format, cut off or malformed.
        """
        self.problem_count += 1
        self.broken += broken
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append((key, problem))

    def merge(self, other: Report) -> None:
        """Add the counts and problems of ``other`` (another task's report) to these.

        Parameters
        ----------
        other
            The report to add.
        """
        self.records += other.records
        self.payload_bytes += other.payload_bytes
        self.kinds.update(other.kinds)
        self.raw_records += other.raw_records
        self.problem_count += other.problem_count
        self.broken += other.broken
        self.classes.update(other.classes)
        self.problems.extend(other.problems[:max(0, MAX_PROBLEMS - len(self.problems))])
