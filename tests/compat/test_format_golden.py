"""The .rec framing and the IRHeader against files written by real MXNet 1.9.1 (golden/seq, golden/headers)."""

from __future__ import annotations

import hashlib
import json

import cv2
import numpy as np
import pytest

import mxrec.recordio as recordio
from mxrec.errors import RecordFormatError, TruncatedRecordError
from mxrec.format import framing
from mxrec.format.header import IRHeader, pack, unpack
from mxrec.storage.memory_map import map_file


def golden_payloads(golden):
    """seq.rec's payloads, read by mxrec and checked against the sha256 list MXNet's generator wrote."""
    data = (golden / "seq" / "seq.rec").read_bytes()
    payloads, offset = [], 0
    while offset < len(data):
        payload, offset = framing.decode_record(data, offset)
        payloads.append(payload)
    return payloads


def test_reads_every_golden_payload_exactly(golden):
    expected = json.loads((golden / "seq" / "seq_payloads.json").read_text())
    payloads = golden_payloads(golden)
    assert [len(p) for p in payloads] == [e["length"] for e in expected]
    assert [hashlib.sha256(p).hexdigest() for p in payloads] == [e["sha256"] for e in expected]


def test_random_payloads_match_mxnet_generator(golden):
    # The README says how MXNet's generator made them: RandomState(12345).randint(0, 256, N).
    payloads = golden_payloads(golden)
    assert payloads[4] == np.random.RandomState(12345).randint(0, 256, 1000).astype(np.uint8).tobytes()


def test_writes_golden_file_byte_for_byte(golden):
    payloads = golden_payloads(golden)
    assert b"".join(framing.encode_record(p) for p in payloads) == (golden / "seq" / "seq.rec").read_bytes()


def test_each_single_record_file_byte_for_byte(golden):
    singles = sorted((golden / "seq").glob("single_*.rec"))
    assert len(singles) == 13
    for path in singles:
        data = path.read_bytes()
        payload, end = framing.decode_record(data, 0, str(path))
        assert end == len(data)
        assert framing.encode_record(payload) == data, path.name


DAMAGED = {
    # name: (records readable before the fault, error class, offset of the fault, words in the message)
    "bad_magic_record2.rec": (2, RecordFormatError, 20, "bad magic"),
    "end_part_first.rec": (0, RecordFormatError, 0, "cannot start with a part of cflag 3"),
    "length_beyond_eof.rec": (0, TruncatedRecordError, 0, "1000 data bytes"),
    "lone_start_part.rec": (0, TruncatedRecordError, 12, "multi-part record that starts at byte 0"),
    "truncated_in_data.rec": (12, TruncatedRecordError, 1216, "ends inside the data"),
    "truncated_in_header.rec": (12, TruncatedRecordError, 1216, "inside a part header"),
    "truncated_in_padding.rec": (2, TruncatedRecordError, 20, "inside the padding"),
}


@pytest.mark.parametrize("name", sorted(DAMAGED))
def test_damaged_files_fail_at_the_right_byte(golden, name):
    good, error, offset, words = DAMAGED[name]
    path = golden / "seq" / "damaged" / name
    data = path.read_bytes()
    at, count = 0, 0
    with pytest.raises(error) as info:
        while at < len(data):
            _, at = framing.decode_record(data, at, str(path))
            count += 1
    assert count == good
    assert info.value.offset == offset
    assert words in str(info.value) and name in str(info.value)
    with pytest.raises(error):
        framing.record_offsets(data, path=str(path))


def test_empty_file_and_nonzero_padding_read_cleanly(golden):
    assert framing.record_offsets(b"") == []
    data = (golden / "seq" / "damaged" / "nonzero_padding.rec").read_bytes()
    first, at = framing.decode_record(data, 0)
    second, end = framing.decode_record(data, at)
    assert (first, second, end) == (b"q", b"rs", len(data))
    spans = framing.salvage_spans(data)[0]
    assert [framing.nonzero_padding(data, s) for s in spans] == [[0], [12]]


def test_golden_files_scan_identically_through_mmap(golden):
    buf = map_file(golden / "seq" / "seq.rec")
    try:
        assert framing.record_offsets(buf) == framing.record_offsets(bytes(buf))
        assert len(framing.record_offsets(buf)) == 14
    finally:
        buf.close()


# The inputs MXNet's generator gave pack() (headers/README.txt), with the payload it unpacked back.
PACK_INPUTS = {
    "scalar_label": IRHeader(0, 3.0, 42, 0),
    "scalar_int_label": IRHeader(0, 7, 1, 0),
    "scalar_label_flag_ignored": IRHeader(99, -2.5, 5, 0),
    "np_float64_label": IRHeader(0, np.float64(0.1), 6, 0),
    "vector_label_5": IRHeader(0, [1.0, -2.5, 3.25, 0.1, 1000000.0], 7, 0),
    "vector_label_1": IRHeader(0, [9.0], 8, 0),
    "vector_label_empty": IRHeader(0, [], 9, 0),
    "vector_label_2d": IRHeader(0, np.arange(6.0).reshape(2, 3), 10, 0),
    "ids_set": IRHeader(0, 1.5, 1099511627781, 8589934601),
    "ids_max": IRHeader(0, 0.0, 2**64 - 1, 2**63),
    "empty_payload": IRHeader(0, 1.0, 0, 0),
    "vector_label_empty_payload": IRHeader(0, [4.0, 5.0, 6.0], 11, 0),
}


# name: (header, grey?, format, quality)
PACK_IMG_INPUTS = {
    "jpeg_q95": (IRHeader(0, 4.0, 100, 0), False, ".jpg", 95),
    "jpeg_q95_vector_label": (IRHeader(0, [1.0, 2.0, 3.0], 101, 0), False, ".jpg", 95),
    "png_default_q": (IRHeader(0, 5.0, 102, 0), False, ".png", 95),
    "png_q3": (IRHeader(0, 5.0, 103, 0), False, ".png", 3),
    "jpeg_gray_q90": (IRHeader(0, 6.0, 104, 0), True, ".jpg", 90),
}


@pytest.fixture
def expected(golden):
    return {case["name"]: case for case in json.loads((golden / "headers" / "expected.json").read_text())}


def check_unpacked(header, payload, case):
    want = case["unpack_header"]
    assert (header.flag, header.id, header.id2) == (want["flag"], want["id"], want["id2"])
    kind, _dtype, value = want["label"]
    if kind == "scalar":
        assert isinstance(header.label, float) and header.label == value
    else:
        assert isinstance(header.label, np.ndarray) and header.label.dtype == np.float32
        assert header.label.tolist() == value
    assert len(payload) == case["unpack_payload_len"]


@pytest.mark.parametrize("name", sorted(PACK_INPUTS))
def test_pack_matches_mxnet_bytes(golden, expected, name):
    case = expected[name]
    payload = bytes.fromhex(case["unpack_payload"])
    packed = pack(PACK_INPUTS[name], payload)
    assert packed == (golden / "headers" / f"{name}.bin").read_bytes()
    header, rest = unpack(packed)
    check_unpacked(header, rest, case)
    assert rest == payload


@pytest.mark.parametrize("name", sorted(PACK_IMG_INPUTS))
def test_pack_img_and_unpack_img_match_mxnet(golden, expected, name):
    header, grey, fmt, quality = PACK_IMG_INPUTS[name]
    img = np.load(golden / "headers" / "source_image_bgr.npy")
    if grey:
        img = cv2.cvtColor(img, cv2.COLOR_BGR2GRAY)
    packed = recordio.pack_img(header, img, quality=quality, img_fmt=fmt)
    golden_bytes = (golden / "headers" / f"{name}.bin").read_bytes()
    assert packed == golden_bytes
    for iscolor in (-1, 0, 1):
        got_header, pixels = recordio.unpack_img(golden_bytes, iscolor)
        check_unpacked(got_header, b"x" * expected[name]["unpack_payload_len"], expected[name])
        want = np.load(golden / "headers" / f"{name}.unpack_img_iscolor{iscolor}.npy")
        assert pixels.dtype == want.dtype and np.array_equal(pixels, want)


def test_headers_rec_reads_as_the_bin_files(golden, expected):
    reader = recordio.MXRecordIO(str(golden / "headers" / "headers.rec"), "r")
    names = list(expected)
    got = []
    while (record := reader.read()) is not None:
        got.append(record)
    assert got == [(golden / "headers" / f"{n}.bin").read_bytes() for n in names]
