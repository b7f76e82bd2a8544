"""What an image file's headers say, read without decoding: size, channels, JPEG coding, EXIF orientation, truncation.

:func:`jpeg_header` walks a JPEG's marker segments up to its first scan, once:
the frame header (coding process, precision, size, components), where the
first scan starts, and the EXIF orientation OpenCV would apply. It is the one
JPEG marker walker: the pack job uses it to choose a decoder, the doctor to
read sizes. :func:`png_shape` reads a PNG's ``IHDR``; :func:`image_shape`
dispatches. Shapes are ``(height, width, channels)`` of the image as the
readers decode it: a JPEG's size after its EXIF orientation (5-8 swap height
and width, as ``cv2.imdecode(buf, IMREAD_COLOR)`` does), and the channels
``cv2.imdecode(buf, -1)`` (MXNet's ``unpack_img`` with ``iscolor=-1``) gives: 1
for a grey image, 3 for colour JPEGs (CMYK ones included), 3 or 4 for PNG.

:func:`truncation` is the one rule for a cut-off file: libjpeg reports a
cut-off JPEG only as a warning ("Premature end of JPEG file") and OpenCV then
returns the image with its missing rows grey, so the decoder alone would call
it sound. A JPEG must have its end-of-image marker after its first scan (an
EXIF thumbnail's own marker, earlier in the file, does not count) and a PNG
its ``IEND`` chunk.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from mxrec.errors import ImageDecodeError, TruncatedImageError
from mxrec.image.signatures import PNG_SIGNATURE, image_format, is_jpeg

# JPEG markers: start-of-frame (SOF0..SOF15 except DHT, JPG, DAC), and those without a length field.
SOF_MARKERS = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
_STANDALONE_MARKERS = frozenset(range(0xD0, 0xD8)) | {0x01}
# What jpeg_header does at each marker (indexed by the byte after 0xFF): skip its segment (0), or something else.
_SKIP, _STANDALONE, _SCAN, _END, _SOF, _APP1 = range(6)
_MARKER_ACTIONS = tuple(_STANDALONE if m in _STANDALONE_MARKERS else _SCAN if m == 0xDA else _END if m == 0xD9
                        else _SOF if m in SOF_MARKERS else _APP1 if m == 0xE1 else _SKIP for m in range(256))
# A marker as the walk reads it: 0xFF, the marker, the segment length; what it reads when fewer than 4 bytes are left.
_MARKER = struct.Struct(">BBH")
_NO_MARKER = (0, 0, 0)
_CODE_LENGTH = struct.Struct(">BH")  # the marker and the segment length, after fill bytes
_FRAME = struct.Struct(">B2xBHHB")  # from the SOF marker: the marker, (length), precision, height, width, components
# Makes a named tuple from a tuple of its fields without the call to its Python-level __new__ (the walk's hot path).
_new_tuple = tuple.__new__
JPEG_EOI = b"\xff\xd9"
# The IEND chunk's type and its CRC, which is the same in every PNG: a PNG ends with these 8 bytes.
PNG_IEND = b"IEND\xaeB`\x82"
# PNG colour type -> channels OpenCV returns with IMREAD_UNCHANGED (grey+alpha becomes BGRA).
_PNG_CHANNELS = {0: 1, 2: 3, 3: 3, 4: 4, 6: 4}
_EXIF_ORIENTATION = 0x0112
_TIFF_SHORT = 3
# An EXIF APP1 segment's start (``Exif\0\0``, the TIFF byte order mark) -> its u32, u16 and directory entry
# (tag, type, count) readers.
_EXIF_STRUCTS = {b"Exif\0\0" + mark: (struct.Struct(order + "I"), struct.Struct(order + "H"),
                                      struct.Struct(order + "HHI"))
                 for mark, order in ((b"II*\0", "<"), (b"MM\0*", ">"))}
#: The EXIF orientations that turn an image by a quarter (its height and width swap).
TURNING_ORIENTATIONS = frozenset((5, 6, 7, 8))

Shape = tuple[int, int, int]


class JpegFrame(NamedTuple):
    """A JPEG's start-of-frame header: which coding process (SOF marker), sample precision, size, components."""

    marker: int
    precision: int
    height: int
    width: int
    components: int

    @property
    def shape(self) -> Shape:
        """``(height, width, channels)`` as OpenCV decodes it (grey: 1, anything else: 3)."""
        return self.height, self.width, 1 if self.components == 1 else 3


class JpegHeader(NamedTuple):
    """What a JPEG's segments before its first scan say, read in one pass by :func:`jpeg_header`.

    ``frame``: the first frame header, ``None`` when there is none before the
    first scan or the data ends inside it. ``scan``: where the first
    start-of-scan marker is, ``None`` when the headers end before one.
    ``orientation``: the EXIF orientation (1-8) that OpenCV applies when it
    decodes the image as colour or grey, 1 for none. OpenCV takes the first
    APP1 segment, skips its 6-byte ``Exif\\0\\0`` header and reads the rest as
    TIFF, looking for the Orientation tag in the first image directory; 1 when
    there is no APP1 segment or no such tag, ``None`` when the segment is not a
    well-formed EXIF block (then only OpenCV knows what it will do).
    ``problem``: why the walk stopped before the first scan, as
    ``(kind, reason)`` with kind ``"truncated"`` (the data ran out) or
    ``"corrupt"``; ``None`` when it reached the scan.

    Both are named tuples (immutable, and cheap to make: one per image).
    """

    frame: JpegFrame | None
    scan: int | None
    orientation: int | None
    problem: tuple[str, str] | None = None


def jpeg_header(data: bytes | memoryview) -> JpegHeader | None:
    """The headers of a JPEG (see :class:`JpegHeader`), or ``None`` when ``data`` is not a JPEG."""
    if not is_jpeg(data):
        return None
    size = len(data)
    frame = None
    orientation: int | None = 1
    seen_app1 = False
    at = 2  # where the next marker is: its 0xFF
    read_marker, actions = _MARKER.unpack_from, _MARKER_ACTIONS  # locals: used once per segment
    while True:
        # The usual case in one read: 0xFF, the marker, the segment length (garbage for a marker without one).
        fill, marker, length = read_marker(data, at) if at + 4 <= size else _NO_MARKER
        if fill != 0xFF or marker == 0xFF:  # the end of the data, no marker, or fill bytes before one
            if at >= size:
                missing = "its image data" if frame is not None else "its frame header"
                return JpegHeader(frame, None, orientation,
                                  ("truncated", f"JPEG ends at byte {size}, before {missing}"))
            if data[at] != 0xFF:
                return JpegHeader(frame, None, orientation,
                                  ("corrupt", f"JPEG byte {at}: expected a marker, found 0x{data[at]:02x}"))
            while at < size and data[at] == 0xFF:  # fill bytes may precede a marker
                at += 1
            if at + 3 > size:
                return JpegHeader(frame, None, orientation, ("truncated", f"JPEG ends at byte {size}, inside a marker"))
            marker, length = _CODE_LENGTH.unpack_from(data, at)
            at -= 1  # the marker's own 0xFF
        action = actions[marker]
        if action:  # not a segment to skip
            if action == _STANDALONE:
                at += 2
                continue
            if action in (_SCAN, _END):
                if frame is None:
                    reason = f"JPEG has no frame header before marker 0xff{marker:02x} at byte {at}"
                    return JpegHeader(None, at if action == _SCAN else None, orientation, ("corrupt", reason))
                if action == _SCAN:
                    return _new_tuple(JpegHeader, (frame, at, orientation, None))
                return JpegHeader(frame, None, orientation,
                                  ("corrupt", f"JPEG ends (marker 0xffd9 at byte {at}) before any image data"))
        if length < 2:
            return JpegHeader(frame, None, orientation,
                              ("corrupt", f"JPEG marker 0xff{marker:02x} at byte {at} has length {length}"))
        if action:
            if action == _SOF and frame is None:
                if at + 10 > size:
                    return JpegHeader(None, None, orientation,
                                      ("truncated", f"JPEG ends at byte {size}, inside its frame header"))
                frame = _new_tuple(JpegFrame, _FRAME.unpack_from(data, at + 1))
            elif action == _APP1 and not seen_app1:
                seen_app1 = True
                orientation = _exif_orientation(memoryview(data)[at + 4:at + 2 + length])
        at += length + 2


def _exif_orientation(segment: memoryview) -> int | None:
    """The Orientation tag of an APP1 segment's first TIFF image directory, as OpenCV reads it (see JpegHeader)."""
    structs = _EXIF_STRUCTS.get(bytes(segment[:10]))  # b"Exif\0\0" and the TIFF byte order mark
    if structs is None:
        return None
    u32, u16, entry_head = structs
    try:
        (directory,) = u32.unpack_from(segment, 10)
        directory += 6  # TIFF offsets count from the byte order mark
        (count,) = u16.unpack_from(segment, directory)
        for entry in range(directory + 2, directory + 2 + 12 * count, 12):
            tag, kind, values = entry_head.unpack_from(segment, entry)
            if tag == _EXIF_ORIENTATION:
                if kind != _TIFF_SHORT or values != 1:
                    return None
                (orientation,) = u16.unpack_from(segment, entry + 8)
                return orientation
    except struct.error:  # a directory running past the segment
        return None
    return 1


def jpeg_shape(data: bytes | memoryview) -> Shape:
    """``(height, width, channels)`` from a JPEG's frame header, turned by its EXIF orientation.

    Raises :class:`ImageDecodeError` (or :class:`TruncatedImageError`) when there is no frame header.
    """
    header = jpeg_header(data)
    if header is None:
        raise ImageDecodeError("not a JPEG: no start-of-image marker")
    if header.frame is None:
        kind, reason = header.problem or ("corrupt", "JPEG has no frame header")
        raise (TruncatedImageError if kind == "truncated" else ImageDecodeError)(reason)
    height, width, channels = header.frame.shape
    return (width, height, channels) if header.orientation in TURNING_ORIENTATIONS else (height, width, channels)


def png_shape(data: bytes | memoryview) -> Shape:
    """``(height, width, channels)`` from a PNG's ``IHDR`` chunk; raises :class:`ImageDecodeError`."""
    if bytes(data[:8]) != PNG_SIGNATURE:
        raise ImageDecodeError("not a PNG: no PNG signature")
    if len(data) < 33:
        raise TruncatedImageError(f"PNG ends at byte {len(data)}, inside its IHDR chunk")
    if data[12:16] != b"IHDR":
        raise ImageDecodeError(f"PNG's first chunk is {bytes(data[12:16])!r}, not IHDR")
    width, height, _depth, colour = struct.unpack_from(">IIBB", data, 16)
    if colour not in _PNG_CHANNELS:
        raise ImageDecodeError(f"PNG colour type {colour} is not valid")
    return height, width, _PNG_CHANNELS[colour]


def image_shape(data: bytes | memoryview, fmt: str | None = None) -> Shape | None:
    """The shape from the header of a JPEG or PNG (None for other formats); raises on a malformed header."""
    fmt = image_format(data) if fmt is None else fmt
    if fmt == "jpeg":
        return jpeg_shape(data)
    if fmt == "png":
        return png_shape(data)
    return None


def truncation(data: bytes | memoryview, header: JpegHeader | None = None) -> str | None:
    """Why ``data`` is an empty or cut-off image file, or ``None`` (see the module doc).

    Formats other than JPEG and PNG are left to the decoder. ``header``:
    :func:`jpeg_header` of ``data`` when already read.
    """
    if not len(data):
        return "empty file"
    if header is not None or is_jpeg(data):  # a header is only read from a JPEG
        scan = (header or jpeg_header(data)).scan
        if scan is not None and scan <= len(data) - 2 and data[-1] == 0xD9 and data[-2] == 0xFF:  # the usual end
            return None
        if scan is None or bytes(data).rfind(JPEG_EOI, scan) < 0:  # from the end: the marker is normally last
            return f"truncated JPEG ({len(data)} bytes, no end-of-image marker after the image data)"
    elif bytes(data[:8]) == PNG_SIGNATURE and data[-8:] != PNG_IEND and bytes(data).rfind(PNG_IEND) < 0:
        return f"truncated PNG ({len(data)} bytes, no IEND chunk)"
    return None
