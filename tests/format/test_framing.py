"""The byte format against files written by real MXNet 1.9.1, property tests, and damaged input."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mxrec.errors import RecordFormatError, RecordTooLargeError, TruncatedRecordError
from mxrec.format import framing

MAGIC = framing.MAGIC_BYTES


@pytest.mark.parametrize("payload, layout", [
    (b"", [(0, 0)]),
    (MAGIC + MAGIC + b"ABCDEFGH" + MAGIC, [(1, 0), (2, 0), (2, 8), (3, 0)]),
    (b"x" + MAGIC + b"yz", [(0, 7)]),
    (b"abcd" + MAGIC + b"e", [(1, 4), (3, 1)]),
    (MAGIC * 3, [(1, 0), (2, 0), (2, 0), (3, 0)]),
    (b"abcde" + MAGIC, [(0, 9)]),
])
def test_part_layout(payload, layout):
    data = framing.encode_record(payload)
    parts, offset = [], 0
    while offset < len(data):
        cflag, length = framing.read_part_header(data, offset, len(data))
        parts.append((cflag, length))
        offset += 8 + length + framing.padding(length)
    assert parts == layout
    assert len(data) % 4 == 0


payload_pieces = st.lists(st.one_of(st.binary(max_size=9), st.just(MAGIC), st.just(MAGIC[:3])), max_size=12)


@settings(max_examples=400, deadline=None)
@given(payload_pieces, st.integers(0, 3))
def test_round_trip_with_magic_anywhere(pieces, shift):
    payload = b"\x00" * shift + b"".join(pieces)
    data = framing.encode_record(payload)
    assert framing.decode_record(data, 0) == (payload, len(data))
    assert framing.record_span(data, 0).length == len(payload)
    cuts = [i for i in range(0, len(payload) - 3, 4) if payload[i:i + 4] == MAGIC]
    assert framing.aligned_magic_offsets(payload) == cuts
    assert len(data) == framing.encoded_size(len(payload), len(cuts))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=40) | st.just(MAGIC * 2), max_size=8), st.integers(0, 400))
def test_resync_lands_on_record_boundaries(payloads, start):
    """From any offset, the resync rule finds the next record start (never a middle part)."""
    data = b"".join(framing.encode_record(p) for p in payloads)
    starts = framing.record_offsets(data)
    found = framing.find_record_start(data, start)
    later = [s for s in starts if s >= start]
    assert found == (later[0] if later else -1)


def test_vector_and_byte_scans_agree_around_threshold():
    rng = np.random.default_rng(3)
    for size in (framing.VECTOR_SCAN_FROM - 5, framing.VECTOR_SCAN_FROM, 3 * framing.VECTOR_SCAN_FROM + 3):
        payload = bytearray(rng.integers(0, 256, size, dtype=np.uint8).tobytes())
        for at in (0, 5, 8, size - 4):
            payload[at:at + 4] = MAGIC
        expected = [i for i in range(0, size - 3, 4) if payload[i:i + 4] == MAGIC]
        assert framing.aligned_magic_offsets(bytes(payload)) == expected
        assert framing.decode_record(framing.encode_record(bytes(payload)), 0)[0] == payload


def test_record_too_large_is_rejected_before_any_work():
    big = memoryview(np.zeros(framing.MAX_LENGTH + 1, dtype=np.uint8))  # pages never touched
    with pytest.raises(RecordTooLargeError, match="2\\*\\*29 - 1"):
        framing.record_chunks(big)


def test_invalid_cflag_and_middle_part_order():
    bad_flag = framing.part_header(5, 0)
    with pytest.raises(RecordFormatError, match="invalid cflag 5"):
        framing.decode_record(bad_flag, 0)
    start_then_full = framing.part_header(1, 0) + framing.part_header(0, 0)
    with pytest.raises(RecordFormatError, match="has no end part"):
        framing.decode_record(start_then_full, 0)


def test_salvage_keeps_every_intact_record_around_damage():
    payloads = [b"alpha", MAGIC * 2 + b"beta", b"gamma" * 10, b"delta", b"epsilon"]
    records = [framing.encode_record(p) for p in payloads]
    garbage = b"\xde\xad\xbe\xef" * 3
    broken_magic = b"\x00" + records[2][1:]
    data = records[0] + garbage + records[1] + broken_magic + records[3] + records[4][:-3]
    spans, faults = framing.salvage_spans(data, "x.rec")
    recovered = [framing.decode_record(data, s.offset)[0] for s in spans]
    assert recovered == [payloads[0], payloads[1], payloads[3]]
    r2_at = len(records[0]) + len(garbage) + len(records[1])
    r4_at = r2_at + len(broken_magic) + len(records[3])
    assert [f.offset for f in faults] == [len(records[0]), r2_at, r4_at]
    assert isinstance(faults[-1], TruncatedRecordError)


