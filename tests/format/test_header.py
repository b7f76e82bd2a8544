"""IRHeader pack/unpack and pack_img/unpack_img against real MXNet 1.9.1 output."""

from __future__ import annotations

import json

import cv2
import numpy as np
import pytest

import mxrec.recordio as recordio
from mxrec.errors import HeaderError, ImageDecodeError
from mxrec.format.header import IRHeader, label_array, pack, unpack, unpack_header

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


def test_mxnet_unittest_pack_unpack_all_sizes():
    # As MXNet's test_recordio.py: label sizes 1..254 x content lengths 0..254 (every 7th, to stay quick).
    for label_size in range(1, 255):
        label = np.arange(label_size, dtype=np.float32) * 0.5 - 3
        for length in range(0, 255, 7):
            content = bytes(range(length))
            header, rest = unpack(pack(IRHeader(0, label, label_size, 0), content))
            assert header.flag == label_size and np.array_equal(header.label, label)
            assert rest == content


def test_zero_dim_array_label_is_an_array_as_in_mxnet():
    header, _ = unpack(pack((0, np.array(2.5), 1, 0), b""))
    assert header.flag == 1 and header.label.tolist() == [2.5]
    assert label_array(unpack(pack((0, 2.5, 1, 0), b""))[0]).tolist() == [2.5]


def test_short_payloads_raise_clear_errors():
    with pytest.raises(HeaderError, match="shorter than the 24-byte IRHeader"):
        unpack(b"abc")
    truncated = pack((0, [1.0, 2.0, 3.0], 9, 0), b"")[:-4]
    with pytest.raises(HeaderError, match=r"declares 3 float32 labels .*\(id 9\)"):
        unpack_header(truncated)


def test_unpack_img_rejects_non_image_bytes():
    with pytest.raises(ImageDecodeError, match="record id 5"):
        recordio.unpack_img(pack((0, 1.0, 5, 0), b"not an image at all"))
    with pytest.raises(ImageDecodeError, match="empty"):
        recordio.unpack_img(pack((0, 1.0, 6, 0), b""))
