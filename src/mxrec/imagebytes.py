"""Encoded image bytes: which format they are, how large the image is, and whether they decode whole.

:func:`image_shape` reads the size from the file header alone (the JPEG frame
header, the PNG ``IHDR`` chunk), microseconds per image, no decoder needed.
:func:`inspect_image` classifies one image's bytes as sound or as one of the
:data:`FAULT_KINDS`; with ``decode=True`` it decodes them completely, which is
the only way to see damage inside the compressed data.

Shapes are ``(height, width, channels)`` as ``cv2.imdecode(buf, -1)`` (MXNet's
``unpack_img`` with ``iscolor=-1``) gives them: 1 channel for a grey image, 3
for colour JPEGs (CMYK ones included), 3 or 4 for PNG.

Truncation: libjpeg reports a cut-off JPEG only as a warning ("Premature end of
JPEG file") and OpenCV then returns the image with its missing part grey, so
OpenCV alone would call a truncated JPEG sound. JPEGs are therefore decoded
with simplejpeg (libjpeg-turbo, the decoder inside OpenCV and MXNet too) in
strict mode, which turns every libjpeg warning ("Corrupt JPEG data: ...") into
an error, silently; such a JPEG is ``truncated`` when it does not end with the
end-of-image marker, else ``corrupt``. A PNG that decodes but lacks its
``IEND`` chunk is truncated too. Formats other than JPEG and PNG are decoded
with OpenCV (which prints libpng's complaints about damaged PNGs on stderr).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from types import ModuleType

import numpy as np

from mxrec.codec import opencv
from mxrec.errors import ImageDecodeError, MxrecError, TruncatedImageError
from mxrec.info import PAYLOAD_SIGNATURES

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
PNG_IEND_CHUNK = b"\0\0\0\0IEND\xaeB`\x82"
JPEG_EOI = b"\xff\xd9"

#: What can be wrong with an image's bytes.
FAULT_KINDS = ("empty", "zero-size", "truncated", "corrupt")

# JPEG markers: start-of-frame (SOF0..SOF15 except DHT, JPG, DAC), and those without a length field.
_SOF_MARKERS = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
_STANDALONE_MARKERS = frozenset(range(0xD0, 0xD8)) | {0x01}
_SOS, _EOI = 0xDA, 0xD9
# PNG colour type -> channels OpenCV returns with IMREAD_UNCHANGED (grey+alpha becomes BGRA).
_PNG_CHANNELS = {0: 1, 2: 3, 3: 3, 4: 4, 6: 4}

Shape = tuple[int, int, int]


def image_format(data: bytes) -> str:
    """``"jpeg"``, ``"png"``, ``"gif"``, ``"bmp"``, ``"webp"``, ``"other"``, or ``"empty"`` for no bytes."""
    if not data:
        return "empty"
    for signature, kind in PAYLOAD_SIGNATURES.items():
        if data.startswith(signature):
            return kind
    return "other"


def jpeg_shape(data: bytes) -> Shape:
    """``(height, width, channels)`` from a JPEG's frame header; raises :class:`ImageDecodeError`."""
    if not data.startswith(b"\xff\xd8"):
        raise ImageDecodeError("not a JPEG: no start-of-image marker")
    size = len(data)
    at = 2
    while True:
        if at >= size:
            raise TruncatedImageError(f"JPEG ends at byte {size}, before its frame header")
        if data[at] != 0xFF:
            raise ImageDecodeError(f"JPEG byte {at}: expected a marker, found 0x{data[at]:02x}")
        while at < size and data[at] == 0xFF:  # fill bytes may precede a marker
            at += 1
        if at + 3 > size:
            raise TruncatedImageError(f"JPEG ends at byte {size}, inside a marker")
        marker = data[at]
        at += 1
        if marker in _STANDALONE_MARKERS:
            continue
        if marker in (_SOS, _EOI):
            raise ImageDecodeError(f"JPEG has no frame header before marker 0xff{marker:02x} at byte {at - 2}")
        length = int.from_bytes(data[at:at + 2], "big")
        if marker in _SOF_MARKERS:
            if at + 8 > size:
                raise TruncatedImageError(f"JPEG ends at byte {size}, inside its frame header")
            height, width, components = struct.unpack_from(">HHB", data, at + 3)
            return height, width, 1 if components == 1 else 3
        if length < 2:
            raise ImageDecodeError(f"JPEG marker 0xff{marker:02x} at byte {at - 2} has length {length}")
        at += length


def png_shape(data: bytes) -> Shape:
    """``(height, width, channels)`` from a PNG's ``IHDR`` chunk; raises :class:`ImageDecodeError`."""
    if not data.startswith(PNG_SIGNATURE):
        raise ImageDecodeError("not a PNG: no PNG signature")
    if len(data) < 33:
        raise TruncatedImageError(f"PNG ends at byte {len(data)}, inside its IHDR chunk")
    if data[12:16] != b"IHDR":
        raise ImageDecodeError(f"PNG's first chunk is {bytes(data[12:16])!r}, not IHDR")
    width, height, _depth, colour = struct.unpack_from(">IIBB", data, 16)
    if colour not in _PNG_CHANNELS:
        raise ImageDecodeError(f"PNG colour type {colour} is not valid")
    return height, width, _PNG_CHANNELS[colour]


def image_shape(data: bytes, fmt: str | None = None) -> Shape | None:
    """The shape from the header of a JPEG or PNG (None for other formats); raises on a malformed header."""
    fmt = image_format(data) if fmt is None else fmt
    if fmt == "jpeg":
        return jpeg_shape(data)
    if fmt == "png":
        return png_shape(data)
    return None


def jpeg_decoder() -> ModuleType:
    """The ``simplejpeg`` module, or a clear error if it is not installed."""
    try:
        import simplejpeg
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise MxrecError(f"decoding JPEGs strictly needs simplejpeg: pip install 'mxrec[image]' ({exc})") from None
    return simplejpeg


@dataclass(frozen=True, slots=True)
class ImageFacts:
    """What :func:`inspect_image` found: format, shape (None if unknown), and a fault kind with its reason."""

    format: str
    shape: Shape | None
    fault: str | None = None
    reason: str | None = None


def inspect_image(data: bytes, decode: bool = False) -> ImageFacts:
    """Classify one image's bytes; with ``decode`` decode them completely (JPEG strictly, see the module doc)."""
    fmt = image_format(data)
    if fmt == "empty":
        return ImageFacts(fmt, None, "empty", "no image bytes")
    try:
        shape = image_shape(data, fmt)
    except TruncatedImageError as exc:
        return ImageFacts(fmt, None, "truncated", str(exc))
    except ImageDecodeError as exc:
        return ImageFacts(fmt, None, "corrupt", str(exc))
    if shape is not None and (shape[0] == 0 or shape[1] == 0):
        return ImageFacts(fmt, shape, "zero-size", f"header declares a {shape[1]}x{shape[0]} image")
    if not decode:
        return ImageFacts(fmt, shape)
    if fmt == "jpeg":
        return _decode_jpeg(data, shape)
    if fmt == "png" and PNG_IEND_CHUNK not in data:
        return ImageFacts(fmt, shape, "truncated", "PNG ends before its IEND chunk")
    pixels = opencv().imdecode(np.frombuffer(data, np.uint8), -1)
    if pixels is None:
        return ImageFacts(fmt, shape, "corrupt", f"OpenCV cannot decode these {len(data)} bytes")
    return ImageFacts(fmt, _shape_of(pixels))


def _decode_jpeg(data: bytes, shape: Shape) -> ImageFacts:
    try:
        jpeg_decoder().decode_jpeg(data, "GRAY" if shape[2] == 1 else "BGR")
    except ValueError as exc:  # strict mode: any libjpeg warning or error
        kind = "corrupt" if data.endswith(JPEG_EOI) else "truncated"
        return ImageFacts("jpeg", shape, kind, f"libjpeg-turbo: {exc}")
    return ImageFacts("jpeg", shape)


def _shape_of(pixels: np.ndarray) -> Shape:
    height, width = pixels.shape[:2]
    return height, width, 1 if pixels.ndim == 2 else pixels.shape[2]
