"""The JPEG marker walk (:func:`jpeg_header`) on hand-built headers: the usual layout and every irregular case.

The walk reads a marker, its code and its segment length in one go when the
bytes are the usual ``0xFF <marker> <length>``; fill bytes, the end of the
data and missing markers go through the careful path. Each case states the
exact :class:`JpegHeader` (frame, scan offset, orientation, problem) expected.
"""

from __future__ import annotations

import struct

import pytest

from mxrec.errors import ImageDecodeError
from mxrec.image.headers import JpegFrame, JpegHeader, jpeg_header, jpeg_shape, truncation

SOI = b"\xff\xd8"
EOI = b"\xff\xd9"


def segment(marker: int, body: bytes) -> bytes:
    return bytes((0xFF, marker)) + struct.pack(">H", len(body) + 2) + body


def sof(marker: int = 0xC0, height: int = 30, width: int = 50, components: int = 3, precision: int = 8) -> bytes:
    return segment(marker, struct.pack(">BHHB", precision, height, width, components) + bytes(3 * components))


APP0 = segment(0xE0, b"JFIF\0\x01\x01\0\0\x01\0\x01\0\0")
DQT = segment(0xDB, bytes(65))
DHT = segment(0xC4, bytes(29))
SOS = segment(0xDA, b"\x01\x01\x00\x00\x3f\x00")
SCAN_DATA = b"\x12\x34\xff\x00\x56"


def jpeg(*segments: bytes) -> bytes:
    """SOI, the segments, a little entropy-coded data and EOI."""
    return SOI + b"".join(segments) + SCAN_DATA + EOI


def at(data: bytes, piece: bytes) -> int:
    return data.index(piece)


def exif(order: str, *entries: tuple[int, int, int, int], offset: int = 8) -> bytes:
    """An APP1 EXIF segment whose first directory (at ``offset``) holds ``(tag, type, count, value)`` entries."""
    mark = b"II*\0" if order == "<" else b"MM\0*"
    tiff = mark + struct.pack(order + "I", offset) + bytes(offset - 8) + struct.pack(order + "H", len(entries))
    for tag, kind, count, value in entries:
        tiff += struct.pack(order + "HHIHH", tag, kind, count, value, 0)
    return segment(0xE1, b"Exif\0\0" + tiff + struct.pack(order + "I", 0))


FRAME = JpegFrame(0xC0, 8, 30, 50, 3)


def test_the_usual_layout():
    data = jpeg(APP0, DQT, sof(), DHT, SOS)
    assert jpeg_header(data) == JpegHeader(FRAME, at(data, SOS), 1, None)
    assert jpeg_header(memoryview(b"pad" + data)[3:]) == jpeg_header(data)
    assert truncation(data) is None


def test_fill_bytes_before_markers():
    data = jpeg(APP0, b"\xff\xff" + DQT, b"\xff" + sof(), b"\xff\xff\xff" + DHT, b"\xff" + SOS)
    assert jpeg_header(data) == JpegHeader(FRAME, at(data, SOS), 1, None)  # the scan's own 0xFF, after the fills
    head = SOI + b"\xff" + APP0 + b"\xff\xff" + sof()
    assert jpeg_header(head + SOS) == JpegHeader(FRAME, len(head), 1, None)


def test_standalone_markers_are_skipped():
    """RSTn and TEM have no length: the walk steps over the two bytes, with or without fill bytes before them."""
    data = jpeg(APP0, b"\xff\xd0", sof(), b"\xff\xd7\xff\x01", DHT, b"\xff\xff\xd3", SOS)
    assert jpeg_header(data) == JpegHeader(FRAME, at(data, SOS), 1, None)


def test_the_frame_is_the_first_sof_after_dht_jpg_and_dac():
    """0xC4 (DHT), 0xC8 (JPG) and 0xCC (DAC) sit among the SOF codes but are no frame; a second SOF is ignored."""
    data = jpeg(DHT, segment(0xC8, b"x"), segment(0xCC, b"\x00\x11"), sof(0xC1, 7, 9, 1), sof(0xC0), SOS)
    header = jpeg_header(data)
    assert header == JpegHeader(JpegFrame(0xC1, 8, 7, 9, 1), at(data, SOS), 1, None)
    assert header.frame.shape == (7, 9, 1)


@pytest.mark.parametrize("marker", [0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF])
def test_every_sof_code_is_a_frame(marker):
    data = jpeg(APP0, DQT, DHT, sof(marker, 640, 480, 4, precision=12), SOS)
    assert jpeg_header(data) == JpegHeader(JpegFrame(marker, 12, 640, 480, 4), at(data, SOS), 1, None)
    assert jpeg_header(data).frame.shape == (640, 480, 3)  # CMYK decodes to BGR


@pytest.mark.parametrize("length", [0, 1])
def test_a_segment_length_below_two_is_corrupt(length):
    data = SOI + APP0 + b"\xff\xdb" + struct.pack(">H", length) + bytes(80) + sof() + SOS + EOI
    assert jpeg_header(data) == JpegHeader(None, None, 1,
                                           ("corrupt", f"JPEG marker 0xffdb at byte 20 has length {length}"))
    data = SOI + sof() + b"\xff\xff\xfe\x00" + bytes([length]) + SOS + EOI
    assert jpeg_header(data).problem == ("corrupt", f"JPEG marker 0xfffe at byte 22 has length {length}")


def test_no_marker_where_one_must_be():
    data = SOI + APP0 + b"\x00" + sof() + SOS + EOI
    assert jpeg_header(data) == JpegHeader(None, None, 1, ("corrupt", "JPEG byte 20: expected a marker, found 0x00"))
    data = SOI + sof() + b"\xfe\xff" + SOS + EOI
    assert jpeg_header(data).problem == ("corrupt", "JPEG byte 21: expected a marker, found 0xfe")


def test_end_of_image_or_scan_without_a_frame():
    data = SOI + APP0 + SOS + EOI
    assert jpeg_header(data) == JpegHeader(None, 20, 1,
                                           ("corrupt", "JPEG has no frame header before marker 0xffda at byte 20"))
    assert jpeg_header(SOI + APP0 + EOI + bytes(4)) == JpegHeader(
        None, None, 1, ("corrupt", "JPEG has no frame header before marker 0xffd9 at byte 20"))
    assert jpeg_header(SOI + sof() + EOI + bytes(4)) == JpegHeader(
        FRAME, None, 1, ("corrupt", "JPEG ends (marker 0xffd9 at byte 21) before any image data"))
    with pytest.raises(ImageDecodeError, match="no frame header before marker 0xffda"):
        jpeg_shape(data)


def test_headers_cut_at_every_byte():
    """Cut inside a marker, a segment, the frame header, or between segments: a "truncated" problem each time."""
    data = jpeg(APP0, exif(">", (0x0112, 3, 1, 6)), sof(), DHT, SOS)
    frame_at, scan = at(data, sof()), at(data, SOS)
    for cut in range(3, scan + 4):
        header = jpeg_header(data[:cut])
        assert (header.frame, header.scan, header.problem[0]) == (FRAME if cut >= frame_at + 10 else None, None,
                                                                  "truncated"), cut
        assert header == jpeg_header(memoryview(data)[:cut]), cut
    assert jpeg_header(data[:scan + 4]) == JpegHeader(FRAME, scan, 6, None)
    assert jpeg_header(data[:40]) == JpegHeader(None, None, None,
                                                ("truncated", "JPEG ends at byte 40, before its frame header"))
    assert jpeg_header(data[:frame_at + 3]) == JpegHeader(
        None, None, 6, ("truncated", f"JPEG ends at byte {frame_at + 3}, inside a marker"))
    assert jpeg_header(data[:frame_at + 9]) == JpegHeader(
        None, None, 6, ("truncated", f"JPEG ends at byte {frame_at + 9}, inside its frame header"))
    assert jpeg_header(data[:frame_at + 10]) == JpegHeader(
        FRAME, None, 6, ("truncated", f"JPEG ends at byte {frame_at + 10}, before its image data"))
    assert jpeg_header(data[:scan]) == JpegHeader(
        FRAME, None, 6, ("truncated", f"JPEG ends at byte {scan}, before its image data"))
    assert jpeg_header(data[:scan + 3]) == JpegHeader(
        FRAME, None, 6, ("truncated", f"JPEG ends at byte {scan + 3}, inside a marker"))
    assert jpeg_header(SOI + b"\xff") == JpegHeader(None, None, 1,
                                                    ("truncated", "JPEG ends at byte 3, inside a marker"))
    assert jpeg_header(SOI + b"\xff\xff\xff\xff") == JpegHeader(
        None, None, 1, ("truncated", "JPEG ends at byte 6, inside a marker"))
    assert truncation(data[:scan + 4]) == (f"truncated JPEG ({scan + 4} bytes, no end-of-image marker after the "
                                           "image data)")


@pytest.mark.parametrize("order", ["<", ">"])
@pytest.mark.parametrize("orientation", range(1, 9))
def test_exif_orientation(order, orientation):
    app1 = exif(order, (0x010F, 2, 4, 0), (0x0110, 2, 4, 0), (0x0112, 3, 1, orientation))
    data = jpeg(APP0, app1, sof(), SOS)
    assert jpeg_header(data) == JpegHeader(FRAME, at(data, SOS), orientation, None)
    assert jpeg_shape(data) == ((50, 30, 3) if orientation >= 5 else (30, 50, 3))
    far = exif(order, (0x0112, 3, 1, orientation), offset=40)  # the directory after a gap
    assert jpeg_header(jpeg(far, sof(), SOS)).orientation == orientation


@pytest.mark.parametrize("app1, orientation", [
    (exif("<", (0x0112, 4, 1, 6)), None),  # a LONG, not a SHORT
    (exif("<", (0x0112, 3, 2, 6)), None),  # two values
    (exif("<", (0x010F, 2, 4, 0)), 1),  # no orientation tag
    (exif("<"), 1),  # an empty directory
    (segment(0xE1, b"http://ns.adobe.com/xap/1.0/\0<x/>"), None),  # XMP, not EXIF
    (segment(0xE1, b"Exif\0\0XX*\0\x08\0\0\0"), None),  # no TIFF byte order
    (segment(0xE1, b"Exif\0\0II*\0\xff\0\0\0"), None),  # the directory past the segment
    (segment(0xE1, b"Exif\0\0II*\0\x08\0\0\0\x02\0\x0f\x01\x02\0\x04\0\0\0"), None),  # entries past the segment
    (segment(0xE1, b"Exif\0\0II*\0\x08\0\0\0\x01\0\x0f\x01\x02\0\x04\0\0\0"), 1),  # the entry's value cut off
    (segment(0xE1, b"Exif\0\0II*\0\x08\0"), None),  # the directory offset cut off
    (segment(0xE1, b""), None),
])
def test_exif_odd_segments(app1, orientation):
    data = jpeg(app1, sof(), SOS)
    assert jpeg_header(data) == JpegHeader(FRAME, at(data, SOS), orientation, None)


def test_only_the_first_app1_counts():
    data = jpeg(exif("<", (0x0112, 3, 1, 8)), exif(">", (0x0112, 3, 1, 3)), sof(), SOS)
    assert jpeg_header(data).orientation == 8
    data = jpeg(segment(0xE1, b"XMP"), exif(">", (0x0112, 3, 1, 3)), sof(), SOS)
    assert jpeg_header(data).orientation is None


def test_headers_are_immutable_tuples():
    header = jpeg_header(jpeg(sof(), SOS))
    with pytest.raises(AttributeError):
        header.scan = 3  # type: ignore[misc]
    with pytest.raises(AttributeError):
        header.frame.height = 3  # type: ignore[misc]
