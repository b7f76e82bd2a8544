"""Image bytes: shapes read from file headers agree with OpenCV's decode; faults are classified right."""

from __future__ import annotations

import io

import cv2
import numpy as np
import pytest

from mxrec.errors import ImageDecodeError, TruncatedImageError
from mxrec.image.headers import image_shape, jpeg_shape, png_shape
from mxrec.image.inspect import inspect_image
from mxrec.image.signatures import image_format
from testkit.datasets import corrupt_scan_jpeg, jpeg, jpeg_with_aligned_magic, photo, png, zero_height_jpeg


def decoded_shape(data: bytes) -> tuple[int, int, int]:
    pixels = cv2.imdecode(np.frombuffer(data, np.uint8), -1)
    return (*pixels.shape[:2], 1 if pixels.ndim == 2 else pixels.shape[2])


def pil_bytes(array: np.ndarray, mode: str, fmt: str, **options) -> bytes:
    from PIL import Image

    out = io.BytesIO()
    image = Image.fromarray(array, mode) if mode in ("L", "RGB", "RGBA", "LA", "CMYK") else \
        Image.fromarray(array).convert(mode)
    image.save(out, fmt, **options)
    return out.getvalue()


def test_golden_photo_shapes_from_headers(golden):
    photos = sorted((golden / "im2rec" / "photos200").rglob("*.jpg"))
    assert len(photos) == 50
    for path in photos:
        data = path.read_bytes()
        assert jpeg_shape(data) == decoded_shape(data), path


SAMPLES = {
    "jpeg colour": lambda: jpeg(photo(1, 37, 23)),
    "jpeg grey": lambda: jpeg(photo(2, 30, 20, channels=1)),
    "jpeg progressive": lambda: cv2.imencode(".jpg", photo(3), [cv2.IMWRITE_JPEG_PROGRESSIVE, 1])[1].tobytes(),
    "jpeg with comment": lambda: jpeg_with_aligned_magic(photo(4)),
    "jpeg cmyk": lambda: pil_bytes(np.full((9, 13, 4), 100, np.uint8), "CMYK", "JPEG"),
    "png grey": lambda: png(photo(5, 21, 17, channels=1)),
    "png colour": lambda: png(photo(6, 21, 17)),
    "png bgra": lambda: png(np.dstack([photo(7, 21, 17), np.full((17, 21), 200, np.uint8)])),
    "png 16-bit": lambda: cv2.imencode(".png", photo(8, 11, 9).astype(np.uint16) * 257)[1].tobytes(),
    "png palette": lambda: pil_bytes(photo(9, 12, 10), "P", "PNG"),
    "png grey+alpha": lambda: pil_bytes(np.full((10, 12, 2), 90, np.uint8), "LA", "PNG"),
}


@pytest.mark.parametrize("name", list(SAMPLES))
def test_header_shape_matches_opencv(name):
    data = SAMPLES[name]()
    assert image_shape(data) == decoded_shape(data)
    assert inspect_image(data, decode=True).fault is None
    assert inspect_image(data, decode=True).shape == decoded_shape(data)


def test_formats():
    assert image_format(b"") == "empty"
    assert image_format(jpeg(photo(1))) == "jpeg" and image_format(png(photo(1))) == "png"
    assert image_format(b"GIF89a...") == "gif" and image_format(b"hello") == "other"
    assert image_shape(b"GIF89a...") is None


def test_malformed_headers_raise():
    data = jpeg(photo(1))
    with pytest.raises(ImageDecodeError, match="not a JPEG"):
        jpeg_shape(b"\x89PNG")
    with pytest.raises(TruncatedImageError, match="JPEG ends at byte 30, before its frame header"):
        jpeg_shape(data[:30])
    with pytest.raises(TruncatedImageError, match="JPEG ends at byte 4, inside a marker"):
        jpeg_shape(data[:4])
    sof = data.index(b"\xff\xc0")
    with pytest.raises(ImageDecodeError, match="no frame header before marker 0xffda"):
        jpeg_shape(data[:sof] + data[data.index(b"\xff\xda"):])
    with pytest.raises(TruncatedImageError, match="inside its IHDR chunk"):
        png_shape(png(photo(1))[:20])
    broken = bytearray(png(photo(1)))
    broken[12:16] = b"IDAT"
    with pytest.raises(ImageDecodeError, match="not IHDR"):
        png_shape(bytes(broken))


def test_fault_kinds():
    good = jpeg(photo(1))
    cases = {  # bytes: (fault without decoding, fault with decoding)
        b"": ("empty", "empty"),
        zero_height_jpeg(photo(1)): ("zero-size", "zero-size"),
        good[:4] + b"\x00\x01" + good[6:]: ("corrupt", "corrupt"),  # impossible segment length
        good[:len(good) // 2]: (None, "truncated"),
        good[:-2]: (None, "truncated"),  # only the end-of-image marker is missing
        corrupt_scan_jpeg(photo(1)): (None, "corrupt"),
        png(photo(1))[:-12]: (None, "truncated"),  # IEND chunk missing
        png(photo(1))[:-40]: (None, "truncated"),
        b"\xff\xd8\xff" + b"\x00" * 50: ("corrupt", "corrupt"),
        b"GIF89a" + b"\x00" * 40: (None, "corrupt"),
        good + b"trailing bytes after the end-of-image marker": (None, None),
        good: (None, None),
    }
    for data, (headers_only, decoded) in cases.items():
        assert inspect_image(data).fault == headers_only, data[:12]
        assert inspect_image(data, decode=True).fault == decoded, data[:12]
