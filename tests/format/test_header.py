"""IRHeader pack/unpack and pack_img/unpack_img against real MXNet 1.9.1 output."""

from __future__ import annotations

import numpy as np
import pytest

import mxrec.recordio as recordio
from mxrec.errors import HeaderError, ImageDecodeError
from mxrec.format.header import IRHeader, label_array, pack, unpack, unpack_header


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
