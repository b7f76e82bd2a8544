"""The record model's bookkeeping: exact header bytes for every label bit pattern, payload facts, the report."""

from __future__ import annotations

import pickle
import struct
from collections import Counter

import numpy as np
import pytest

from mxrec.format.header import IRHEADER, IRHeader, pack
from mxrec.interop.record import Payload, Record, Report, inspect_payload
from testkit.datasets import clean_jpeg, photo, png

# float32 bit patterns: zeros, one, the largest and smallest, infinities, quiet and signalling NaNs of both signs.
SPECIAL_BITS = [0x00000000, 0x80000000, 0x3F800000, 0x7F7FFFFF, 0x00000001, 0x80000001, 0x7F800000, 0xFF800000,
                0x7FC00000, 0xFFC00000, 0x7FC01234, 0x7F800001, 0x7FBFFFFF, 0xFF800001, 0xFFFFFFFF]


def label_bits(count: int, seed: int) -> list[int]:
    rng = np.random.default_rng(seed)
    return SPECIAL_BITS + rng.integers(0, 2**32, count, dtype=np.uint64).tolist()


def test_struct_gives_back_every_non_nan_float32():
    """Record.from_bytes rebuilds the header from its fields without checking unless the label is a NaN: IRHeader's
    integers and any float32 but a NaN come back from unpack + pack bit for bit."""
    for bits in label_bits(200_000, 0):
        head = struct.pack("<IIQQ", 0, bits, 2**64 - 1, bits)
        fields = IRHEADER.unpack(head)
        if fields[1] == fields[1]:
            assert IRHEADER.pack(*fields) == head, hex(bits)


@pytest.mark.parametrize("flag", [0, 1, 3])
def test_from_bytes_gives_back_the_bytes_read_for_every_label(flag):
    payload = b"\xff\xd8\xffpayload"
    for bits in label_bits(5_000, flag):
        labels = struct.pack(f"<{flag}I", *label_bits(flag + 3, bits)[-flag:]) if flag else b""
        record_bytes = struct.pack("<IIQQ", flag, bits, bits, 7) + labels + payload
        record = Record.from_bytes(bits, memoryview(record_bytes))
        assert record.to_bytes() == record_bytes, hex(bits)
        assert bytes(record.data) == payload and record.key == str(bits) and not record.raw
        label = struct.unpack("<f", struct.pack("<I", bits))[0]
        if label == label:
            assert record.head is None, hex(bits)  # the fields are enough
        elif record.head is None:
            assert IRHEADER.pack(flag, label, bits, 7) + labels == record_bytes[:24 + 4 * flag]


def test_a_nan_the_fields_change_keeps_its_header_bytes():
    head = struct.pack("<IIQQ", 0, 0x7F800001, 1, 2)  # a signalling NaN: struct makes it quiet
    record = Record.from_bytes("k", head + b"x")
    assert struct.pack("<f", record.label) != head[4:8]
    assert record.head == head and record.header_bytes() == head and record.verbatim_head() == head


@pytest.mark.parametrize("label, expected", [(3.0, 3), (0.0, 0), (-0.0, 0), (2.5, -1), (-1.0, -1), (1e30, int(1e30)),
                                             (float("inf"), -1), (float("-inf"), -1), (float("nan"), -1), (7, 7)])
def test_class_label(label, expected):
    record = Record("k", b"", label=label)
    assert record.class_label == expected and type(record.class_label) is int
    assert Record("k", b"", raw=True, label=label).class_label == -1
    assert Record("k", b"", flag=1, label=label, labels=np.zeros(1, "<f4")).class_label == -1


def test_payload_facts():
    sound, picture = clean_jpeg(0), png(photo(2, 20, 10))
    assert inspect_payload(memoryview(sound)) == Payload("jpeg", "jpg", 48, 64)
    assert inspect_payload(picture) == Payload("png", "png", 10, 20)
    assert inspect_payload(b"") == Payload("empty", "bin", 0, 0, "empty payload")
    assert inspect_payload(b"hello") == Payload("other", "bin", 0, 0, "not an image (no known image signature)")
    assert inspect_payload(sound[:-2]) == Payload(
        "jpeg", "jpg", 0, 0, f"truncated JPEG ({len(sound) - 2} bytes, no end-of-image marker after the image data)")
    assert inspect_payload(picture[:20]) == Payload("png", "png", 0, 0, "truncated PNG (20 bytes, no IEND chunk)")
    no_frame = b"\xff\xd8\xff\xda\x00\x02\xff\xd9"
    assert inspect_payload(no_frame) == Payload(
        "jpeg", "jpg", 0, 0, "broken jpeg: JPEG has no frame header before marker 0xffda at byte 2")
    assert inspect_payload(b"GIF89a" + bytes(10)) == Payload("gif", "gif")
    assert [p.broken for p in map(inspect_payload, (sound, b"", b"hello", sound[:-2], no_frame))] == [
        False, False, False, True, True]
    with pytest.raises(AttributeError):
        inspect_payload(sound).height = 1  # type: ignore[misc]


def test_report_counts_with_its_public_types():
    report = Report()
    jpeg = clean_jpeg(3)
    records = [Record.from_bytes(0, pack(IRHeader(0, 2.0, 0, 0), jpeg)), Record.from_bytes(1, b"raw"),
               Record.from_bytes(2, pack(IRHeader(0, [1.0, 2.0], 2, 0), b"")),
               Record.from_bytes(3, pack(IRHeader(0, 2.0, 3, 0), jpeg[:-2])),
               Record.from_bytes(4, pack(IRHeader(0, 0.5, 4, 0), b"text"))]
    for record in records:
        report.add(record)
    assert (report.records, report.payload_bytes, report.raw_records) == (5, 2 * len(jpeg) - 2 + 3 + 4, 1)
    assert type(report.kinds) is Counter and report.kinds == {"jpeg": 2, "other": 2, "empty": 1}
    assert type(report.classes) is Counter and report.classes == {2: 2}
    assert (report.problem_count, report.broken) == (4, 1)
    assert [key for key, _ in report.problems] == ["1", "2", "3", "4"]
    assert type(report.raw_records) is int
    again = pickle.loads(pickle.dumps(report))
    again.merge(report)
    assert (again.records, again.kinds, again.classes) == (10, {"jpeg": 4, "other": 4, "empty": 2}, {2: 4})
