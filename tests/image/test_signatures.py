"""The one signature table: every format mxrec names, by the bytes it starts with; and the JPEG header walk."""

from __future__ import annotations

import numpy as np
import pytest

from mxrec.image.headers import jpeg_header, truncation
from mxrec.image.signatures import image_extension, image_format, is_jpeg

cv2 = pytest.importorskip("cv2")
PIXELS = np.full((6, 9, 3), 120, np.uint8)


@pytest.mark.parametrize("ext, kind", [(".jpg", "jpeg"), (".png", "png"), (".bmp", "bmp"), (".tif", "tiff"),
                                       (".webp", "webp")])
def test_what_opencv_writes_is_named_by_its_format(ext, kind):
    data = cv2.imencode(ext, PIXELS)[1].tobytes()
    assert image_format(data) == kind and image_extension(data) == ext


@pytest.mark.parametrize("data, kind, ext", [
    (b"GIF87a....", "gif", ".gif"), (b"GIF89a....", "gif", ".gif"), (b"", "empty", None),
    (b"RIFF\0\0\0\0WAVE", "other", None),  # a RIFF container that is not WebP
    (b"\x89PNG\r\n", "other", None),  # a PNG signature cut short
    (b"\xff\xd8\xfe", "other", None),  # SOI without a marker after it
])
def test_edge_cases(data, kind, ext):
    assert image_format(data) == kind and image_extension(data) == ext


def test_memoryviews_are_read_like_bytes():
    data = cv2.imencode(".png", PIXELS)[1].tobytes()
    assert image_format(memoryview(data)) == "png" and is_jpeg(memoryview(b"\xff\xd8\xff\xe0"))


def test_one_jpeg_walk_gives_frame_scan_and_orientation():
    data = cv2.imencode(".jpg", PIXELS)[1].tobytes()
    header = jpeg_header(data)
    assert (header.frame.height, header.frame.width, header.frame.components) == (6, 9, 3)
    assert header.frame.shape == (6, 9, 3) and header.orientation == 1 and header.problem is None
    assert data[header.scan:header.scan + 2] == b"\xff\xda"
    assert jpeg_header(b"\x89PNG\r\n\x1a\n") is None


def test_truncation_rule_wants_the_end_marker_after_the_scan():
    data = cv2.imencode(".jpg", PIXELS)[1].tobytes()
    assert truncation(data) is None
    assert "no end-of-image marker" in truncation(data[:-2])
    assert "no IEND chunk" in truncation(cv2.imencode(".png", PIXELS)[1].tobytes()[:-8])
    assert truncation(b"") == "empty file"
