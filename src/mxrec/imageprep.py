"""What happens to one image file on its way into a record (im2rec's per-image transform).

:class:`ImageTransform` holds im2rec's pack options and turns a file's bytes
into the bytes stored after the ``IRHeader``:

* ``pass_through``: the file's bytes, untouched (nothing else applies).
  Empty and truncated files are refused (:func:`truncation`) in every mode.
* Otherwise the image is decoded as ``cv2.imread(path, color)`` would (same
  OpenCV call on the same bytes, so the same EXIF rotation for ``color`` 0
  and 1 and none for -1), then:

  - ``center_crop``: the central square, of side the shorter side; the margin
    is ``(long - short) // 2`` from the top (or left);
  - ``resize``: the shorter side scaled to ``resize`` with ``cv2.resize``'s
    default bilinear filter; the longer side becomes
    ``long * resize // short`` (integer division, as im2rec), also when this
    enlarges the image;
  - encoded with ``cv2.imencode`` as ``encoding`` (``.jpg`` or ``.png``) with
    ``quality`` (JPEG quality, or PNG compression level, as
    :func:`mxrec.codec.encode_params`).

  With OpenCV 4.10 this gives im2rec's bytes exactly.

``reduced_decode`` (opt-in, not im2rec): when a JPEG is at least twice (4x,
8x) as large as the shorter-side ``resize`` target, it is decoded at 1/2
(1/4, 1/8) scale by libjpeg-turbo's scaled IDCT and then resized to the size
im2rec would produce. Decoding is most of the work and a 1/2-scale decode
costs about half of a full one (1/4: about a quarter), but the pixels differ
from im2rec's (the DCT scaling filters differently from a bilinear
downscale: under 3 grey levels per pixel on average, see the tests), so it
is off by default.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from mxrec.codec import decode_image, encode_image, opencv
from mxrec.errors import ImageDecodeError, OptionError

COLOR_MODES = (-1, 0, 1)
ENCODINGS = (".jpg", ".png")
REDUCTION_FACTORS = (8, 4, 2)
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_SOF_MARKERS = frozenset({0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF})
_STANDALONE_MARKERS = frozenset({0x01, *range(0xD0, 0xD8)})


def _jpeg_segments(data: bytes | memoryview) -> Iterator[tuple[int, int]]:
    """``(marker, position)`` of each JPEG segment up to and including the first start of scan."""
    pos = 2
    while pos + 4 <= len(data):
        if data[pos] != 0xFF:
            return
        marker = data[pos + 1]
        if marker == 0xFF:  # fill byte
            pos += 1
            continue
        yield marker, pos
        if marker in _STANDALONE_MARKERS:
            pos += 2
            continue
        if marker in (0xD9, 0xDA):  # end of image, start of scan: no more headers
            return
        (length,) = struct.unpack_from(">H", data, pos + 2)
        pos += 2 + length


def is_jpeg(data: bytes | memoryview) -> bool:
    """Whether ``data`` starts with a JPEG start-of-image marker."""
    return len(data) >= 3 and data[0] == 0xFF and data[1] == 0xD8 and data[2] == 0xFF


def jpeg_size(data: bytes | memoryview) -> tuple[int, int] | None:
    """``(height, width)`` from a JPEG's frame header, or ``None`` when ``data`` is not a readable JPEG."""
    if not is_jpeg(data):
        return None
    for marker, pos in _jpeg_segments(data):
        if marker in _SOF_MARKERS:
            if pos + 9 > len(data):
                return None
            height, width = struct.unpack_from(">HH", data, pos + 5)
            return (height, width) if height and width else None
    return None


def truncation(data: bytes) -> str | None:
    """Why ``data`` is an empty or cut-off image file, or ``None``.

    OpenCV decodes a truncated JPEG without complaint (the missing rows come
    out grey), so im2rec packed such files; here a JPEG must have an
    end-of-image marker after its first scan (an EXIF thumbnail's own marker,
    earlier in the file, does not count) and a PNG its ``IEND`` chunk. Other
    formats are left to the decoder.
    """
    if not data:
        return "empty file"
    if is_jpeg(data):
        scan = next((pos for marker, pos in _jpeg_segments(data) if marker == 0xDA), None)
        if scan is None or data.find(b"\xff\xd9", scan) < 0:
            return f"truncated JPEG ({len(data)} bytes, no end-of-image marker after the image data)"
    elif data.startswith(PNG_SIGNATURE) and data.rfind(b"IEND") < 0:
        return f"truncated PNG ({len(data)} bytes, no IEND chunk)"
    return None


def shorter_side_size(height: int, width: int, target: int) -> tuple[int, int]:
    """``(width, height)`` (cv2's order) after im2rec's resize of the shorter side to ``target``."""
    if height > width:
        return target, height * target // width
    return width * target // height, target


def center_square(img: np.ndarray) -> np.ndarray:
    """The central square of ``img`` (side = its shorter side), as im2rec's ``--center-crop``."""
    height, width = img.shape[:2]
    if height > width:
        margin = (height - width) // 2
        return img[margin:margin + width]
    margin = (width - height) // 2
    return img[:, margin:margin + height]


def reduction_factor(height: int, width: int, target: int) -> int:
    """The largest JPEG scale-down (8, 4, 2; else 1) that keeps the shorter side at least ``target``."""
    shorter = min(height, width)
    for factor in REDUCTION_FACTORS:
        if shorter // factor >= target:
            return factor
    return 1


def _reduced_flag(color: int, factor: int) -> int:
    cv2 = opencv()
    flags = {
        (1, 2): cv2.IMREAD_REDUCED_COLOR_2, (1, 4): cv2.IMREAD_REDUCED_COLOR_4, (1, 8): cv2.IMREAD_REDUCED_COLOR_8,
        (0, 2): cv2.IMREAD_REDUCED_GRAYSCALE_2, (0, 4): cv2.IMREAD_REDUCED_GRAYSCALE_4,
        (0, 8): cv2.IMREAD_REDUCED_GRAYSCALE_8,
    }
    return flags[color, factor]


@dataclass(frozen=True)
class ImageTransform:
    """im2rec's pack options for one image; :meth:`apply` turns file bytes into record bytes."""

    resize: int = 0
    center_crop: bool = False
    color: int = 1
    encoding: str = ".jpg"
    quality: int = 95
    pass_through: bool = False
    reduced_decode: bool = False

    def __post_init__(self) -> None:
        if self.color not in COLOR_MODES:
            raise OptionError(f"color must be one of {COLOR_MODES}, not {self.color}")
        if self.encoding not in ENCODINGS:
            raise OptionError(f"encoding must be one of {ENCODINGS}, not {self.encoding!r}")
        if self.resize < 0:
            raise OptionError(f"resize must be 0 (keep the size) or a positive side length, not {self.resize}")

    def apply(self, data: bytes, what: str = "image") -> bytes:
        """The bytes to store for an image file's ``data``; ``what`` names it in errors.

        Raises :class:`~mxrec.errors.ImageDecodeError` for empty, truncated
        (see :func:`truncation`; checked in pass-through too) or undecodable
        data, and :class:`~mxrec.errors.MxrecError` when OpenCV cannot encode
        the result (for example a 16-bit PNG read with ``color=-1`` into JPEG).
        """
        problem = truncation(data)
        if problem is not None:
            raise ImageDecodeError(f"{what}: {problem}")
        if self.pass_through:
            return data
        img = self._decode(data, what)
        return encode_image(img, self.encoding, self.quality)

    def _decode(self, data: bytes, what: str) -> np.ndarray:
        """Decode, crop and resize as im2rec does (or via a reduced JPEG decode when allowed)."""
        if self.reduced_decode and self.resize and self.color != -1:
            size = jpeg_size(data)
            if size is not None and reduction_factor(*size, self.resize) > 1:
                return self._decode_reduced(data, size, what)
        img = decode_image(data, self.color, what=what)
        if self.center_crop:
            img = center_square(img)
        if self.resize:
            img = opencv().resize(img, shorter_side_size(*img.shape[:2], self.resize))
        return img

    def _decode_reduced(self, data: bytes, size: tuple[int, int], what: str) -> np.ndarray:
        """Decode at 1/2, 1/4 or 1/8 scale, then resize to the size a full decode would give."""
        cv2 = opencv()
        factor = reduction_factor(*size, self.resize)
        img = cv2.imdecode(np.frombuffer(data, np.uint8), _reduced_flag(self.color, factor))
        if img is None:
            raise ImageDecodeError(f"{what}: {len(data)} bytes are not a decodable image")
        height, width = size
        if (img.shape[0] > img.shape[1]) != (height > width) and img.shape[0] != img.shape[1]:
            height, width = width, height  # EXIF rotation turned the frame by 90 degrees
        if self.center_crop:
            img = center_square(img)
            height = width = min(height, width)
        return cv2.resize(img, shorter_side_size(height, width, self.resize))
