"""EXIF orientation (issue 18 §2): every reader gives ``cv2.imdecode(buf, IMREAD_COLOR)``'s pixels, whichever decoder.

The JPEGs carry each of the eight orientation tags, written by pillow's EXIF
support (not by mxrec's marker walker). The stored frame is 24 x 40 (H x W),
so orientations 5-8 turn it to 40 x 24.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import cv2
import numpy as np
import pytest
from PIL import Image

import mxrec.image.codec as codec
from mxrec.format.header import IRHeader, pack
from mxrec.image.codec import DecodeBuffers, decode_pixels
from mxrec.image.headers import jpeg_shape
from mxrec.packing.prepare import ImageTransform
from testkit.cli import run_cli
from testkit.iterdata import gradient_image, write_records

ORIENTATIONS = range(1, 9)
HEIGHT, WIDTH = 24, 40


def exif_jpeg(orientation: int, grey: bool = False) -> bytes:
    """A 24 x 40 JPEG whose EXIF block (written by pillow) has Orientation ``orientation``."""
    bgr = gradient_image(HEIGHT, WIDTH, seed=orientation)
    image = Image.fromarray(bgr[..., 0] if grey else bgr[..., ::-1].copy())
    exif = Image.Exif()
    exif[0x0112] = orientation
    out = io.BytesIO()
    image.save(out, "JPEG", quality=92, exif=exif.tobytes())
    return out.getvalue()


def cv2_pixels(data: bytes, flag: int = cv2.IMREAD_COLOR) -> np.ndarray:
    return cv2.imdecode(np.frombuffer(data, np.uint8), flag)


@pytest.fixture(params=["simplejpeg", "opencv"])
def decoder(request) -> str:
    """Run a test with simplejpeg decoding JPEGs, then with OpenCV alone (simplejpeg not installed)."""
    if request.param == "opencv":
        request.getfixturevalue("without_simplejpeg")
    else:
        assert codec.simplejpeg() is not None
    return request.param


@pytest.mark.parametrize("orientation", ORIENTATIONS)
def test_decode_pixels_equals_cv2_imdecode(orientation, decoder):
    data = exif_jpeg(orientation)
    expected = cv2_pixels(data)
    assert expected.shape[:2] == ((WIDTH, HEIGHT) if orientation >= 5 else (HEIGHT, WIDTH))
    for buffers in (None, DecodeBuffers()):
        got = decode_pixels(memoryview(data), 3, buffers=buffers)
        assert got.shape == expected.shape and np.array_equal(got, expected), (orientation, decoder, buffers)
    grey = exif_jpeg(orientation, grey=True)
    assert np.array_equal(decode_pixels(grey, 1), cv2_pixels(grey, cv2.IMREAD_GRAYSCALE))
    assert np.array_equal(decode_pixels(data, 1), cv2_pixels(data, cv2.IMREAD_GRAYSCALE))


@pytest.mark.parametrize("orientation", ORIENTATIONS)
def test_raw_orientation_switch(orientation, decoder):
    data = exif_jpeg(orientation)
    raw = decode_pixels(data, 3, exif_orientation=False)
    assert raw.shape == (HEIGHT, WIDTH, 3)
    assert np.array_equal(raw, cv2_pixels(data, cv2.IMREAD_COLOR | cv2.IMREAD_IGNORE_ORIENTATION))


def test_orient_leaves_unknown_orientations_alone():
    img = gradient_image(3, 5, seed=0)
    for orientation in (None, 0, 1, 9, 65535):
        assert codec.orient(img, orientation) is img


@pytest.mark.parametrize("orientation", ORIENTATIONS)
def test_header_shape_is_the_oriented_shape(orientation):
    data = exif_jpeg(orientation)
    assert jpeg_shape(data) == cv2_pixels(data).shape


def _one_record_set(folder: Path, orientation: int) -> Path:
    return write_records(folder / f"o{orientation}.rec", [pack(IRHeader(0, float(orientation), 0, 0),
                                                               exif_jpeg(orientation))])


@pytest.mark.parametrize("orientation", ORIENTATIONS)
def test_every_reader_gives_the_oriented_pixels(tmp_path, orientation, decoder):
    from mxrec.torch import ImageRecordDataset
    from mxrec.train.image_iter import ImageIter
    from mxrec.train.record_iter import ImageRecordIter

    rec = _one_record_set(tmp_path, orientation)
    expected_rgb = cv2_pixels(exif_jpeg(orientation))[..., ::-1]
    chw = expected_rgb.transpose(2, 0, 1).astype(np.float32)
    shape = (3, *expected_rgb.shape[:2])

    record_iter = ImageRecordIter(path_imgrec=str(rec), data_shape=shape, batch_size=1)
    assert np.array_equal(next(iter(record_iter)).data[0][0], chw)
    record_iter.close()

    image_iter = ImageIter(1, shape, path_imgrec=str(rec))
    assert np.array_equal(next(iter(image_iter)).data[0][0], chw)
    image_iter.close()
    raw = ImageIter(1, (3, HEIGHT, WIDTH), path_imgrec=str(rec), exif_orientation=False)
    stored = cv2_pixels(exif_jpeg(orientation), cv2.IMREAD_COLOR | cv2.IMREAD_IGNORE_ORIENTATION)[..., ::-1]
    assert np.array_equal(next(iter(raw)).data[0][0], stored.transpose(2, 0, 1))
    raw.close()

    image, label = ImageRecordDataset(str(rec))[0]
    assert np.array_equal(np.asarray(image), expected_rgb) and label == orientation


def test_verify_and_stats_report_the_oriented_size(tmp_path):
    rec = write_records(tmp_path / "all.rec", [pack(IRHeader(0, 0.0, o, 0), exif_jpeg(o)) for o in ORIENTATIONS])
    stats = json.loads(run_cli("stats", rec, "--json", check=True).stdout)
    assert stats["shapes"] == {f"{WIDTH}x{HEIGHT}x3": 4, f"{HEIGHT}x{WIDTH}x3": 4}
    checks = json.loads(run_cli("verify", rec, "--json", check=True).stdout)["checks"]
    shapes = next(check for check in checks if check["name"] == "shapes")["details"]["shapes"]
    assert shapes == {f"{WIDTH}x{HEIGHT}x3": 4, f"{HEIGHT}x{WIDTH}x3": 4}


@pytest.mark.parametrize("orientation", ORIENTATIONS)
def test_packing_matches_im2rec(tmp_path, orientation, decoder):
    """im2rec reads with cv2.imread (orientation applied); pass-through stores the file's bytes as they are."""
    data = exif_jpeg(orientation)
    (tmp_path / "p.jpg").write_bytes(data)
    packed = ImageTransform(encoding=".png").apply(data)
    assert np.array_equal(cv2_pixels(packed, cv2.IMREAD_UNCHANGED), cv2.imread(str(tmp_path / "p.jpg")))
    assert ImageTransform(pass_through=True).apply(data) == data


def test_a_malformed_exif_block_is_left_to_opencv(decoder):
    """An Orientation entry of the wrong TIFF type: what OpenCV does with it is the answer, from either decoder."""
    import struct

    tiff = b"II*\x00" + struct.pack("<IH", 8, 1) + struct.pack("<HHIHH", 0x0112, 4, 1, 6, 0) + b"\0" * 4
    segment = b"Exif\0\0" + tiff
    plain = exif_jpeg(1)
    data = plain[:2] + b"\xff\xe1" + (len(segment) + 2).to_bytes(2, "big") + segment + plain[2:]
    assert np.array_equal(decode_pixels(data, 3), cv2_pixels(data))
