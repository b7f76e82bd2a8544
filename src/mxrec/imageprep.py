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

How a JPEG is decoded: im2rec calls OpenCV, whose JPEG decoder is
libjpeg-turbo with its accurate integer IDCT and smooth ("fancy") chroma
upsampling. simplejpeg wraps the same library with the same defaults and
decodes about 7% faster, with identical pixels (checked on every image of
the benchmark photo set and by the golden tests), so it is used wherever
OpenCV would do nothing more than that decode: an 8-bit baseline or
progressive JPEG with 1 or 3 components, read as colour or grey (``color`` 1
or 0), whose EXIF orientation OpenCV would not apply
(:attr:`JpegHeader.orientation` is 1). Every other file, and any file
libjpeg-turbo only decodes with a warning (OpenCV accepts those, im2rec
packed them), goes to OpenCV as before, as does everything when simplejpeg
is not installed.

``fast`` (opt-in, not im2rec) trades exactness for speed. Differences below
are from ``benchmarks/bench_pack.py`` on its 5 000 photos (shorter sides
256-500 px, quality 95 output), comparing the decoded records with im2rec's,
in grey levels: mean over all pixels (worst image's mean; largest single
pixel).

* A JPEG at least twice (4x, 8x) as large as the shorter-side ``resize``
  target is decoded at 1/2 (1/4, 1/8) scale by libjpeg-turbo's scaled IDCT,
  then resized to the size im2rec would produce; a 1/2-scale decode costs
  about half of a full one. The DCT scaling filters differently from a
  bilinear downscale, and fine detail shows it: resize 128, 3.5 (9.8; 150).
* Any other JPEG that simplejpeg may decode (as above) is decoded with
  libjpeg-turbo's fast integer IDCT and plain chroma upsampling, about 15%
  faster than the exact decode (some 8% of a whole resize-256 pack): resize
  256, 1.4 (2.3; 28), as large as the error of im2rec's own quality-95
  encoding (1.4 on average against the resized pixels it encodes).

Geometry (sizes, crops, EXIF rotation) is always im2rec's.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from types import ModuleType

import numpy as np

from mxrec.codec import decode_image, encode_image, opencv
from mxrec.errors import ImageDecodeError, OptionError

COLOR_MODES = (-1, 0, 1)
ENCODINGS = (".jpg", ".png")
REDUCTION_FACTORS = (8, 4, 2)
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_SOF_MARKERS = frozenset({0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF})
_STANDALONE_MARKERS = frozenset({0x01, *range(0xD0, 0xD8)})
_SOS, _EOI, _APP1 = 0xDA, 0xD9, 0xE1
# Frames simplejpeg decodes exactly as OpenCV: baseline, extended and progressive Huffman, 8-bit, grey or YCbCr/RGB.
_PLAIN_FRAMES = frozenset({0xC0, 0xC1, 0xC2})
_EXIF_ORIENTATION = 0x0112
_TIFF_SHORT = 3


def is_jpeg(data: bytes | memoryview) -> bool:
    """Whether ``data`` starts with a JPEG start-of-image marker."""
    return len(data) >= 3 and data[0] == 0xFF and data[1] == 0xD8 and data[2] == 0xFF


@dataclass(frozen=True)
class JpegFrame:
    """A JPEG's start-of-frame header: which coding process (SOF marker), sample precision, size, components."""

    marker: int
    precision: int
    height: int
    width: int
    components: int


@dataclass(frozen=True)
class JpegHeader:
    """What a JPEG's segments before its first scan say, read in one pass by :func:`jpeg_header`.

    ``frame``: the first frame header, ``None`` when missing, cut or of zero
    size. ``scan``: where the first start-of-scan marker is, ``None`` when the
    headers end before one. ``orientation``: the EXIF orientation (1-8) that
    OpenCV applies when it decodes the image as colour or grey, 1 for none.
    OpenCV takes the first APP1 segment, skips its 6-byte ``Exif\\0\\0``
    header and reads the rest as TIFF, looking for the Orientation tag in the
    first image directory; 1 when there is no APP1 segment or no such tag,
    ``None`` when the segment is not a well-formed EXIF block (then only
    OpenCV knows what it will do).
    """

    frame: JpegFrame | None
    scan: int | None
    orientation: int | None


def jpeg_header(data: bytes | memoryview) -> JpegHeader | None:
    """The headers of a JPEG (see :class:`JpegHeader`), or ``None`` when ``data`` is not a JPEG."""
    if not is_jpeg(data):
        return None
    frame = scan = None
    orientation: int | None = 1
    seen_app1 = False
    pos = 2
    while pos + 4 <= len(data) and data[pos] == 0xFF:
        marker = data[pos + 1]
        if marker == 0xFF:  # fill byte
            pos += 1
            continue
        if marker in _STANDALONE_MARKERS:
            pos += 2
            continue
        if marker == _SOS:
            scan = pos
            break
        if marker == _EOI:
            break
        (length,) = struct.unpack_from(">H", data, pos + 2)
        if marker in _SOF_MARKERS and frame is None and pos + 10 <= len(data):
            precision, height, width, components = struct.unpack_from(">BHHB", data, pos + 4)
            if height and width:
                frame = JpegFrame(marker, precision, height, width, components)
        elif marker == _APP1 and not seen_app1:
            seen_app1 = True
            orientation = _exif_orientation(bytes(data[pos + 4:pos + 2 + length]))
        pos += 2 + length
    return JpegHeader(frame, scan, orientation)


def _exif_orientation(segment: bytes) -> int | None:
    """The Orientation tag of an APP1 segment's first TIFF image directory, as OpenCV reads it (see JpegHeader)."""
    if not segment.startswith(b"Exif\0\0"):
        return None
    tiff = segment[6:]
    order = {b"II*\0": "<", b"MM\0*": ">"}.get(tiff[:4])
    if order is None:
        return None
    try:
        (directory,) = struct.unpack_from(order + "I", tiff, 4)
        (count,) = struct.unpack_from(order + "H", tiff, directory)
        for entry in range(directory + 2, directory + 2 + 12 * count, 12):
            tag, kind, values = struct.unpack_from(order + "HHI", tiff, entry)
            if tag == _EXIF_ORIENTATION:
                if kind != _TIFF_SHORT or values != 1:
                    return None
                (orientation,) = struct.unpack_from(order + "H", tiff, entry + 8)
                return orientation
    except struct.error:  # a directory running past the segment
        return None
    return 1


def truncation(data: bytes, header: JpegHeader | None = None) -> str | None:
    """Why ``data`` is an empty or cut-off image file, or ``None``.

    OpenCV decodes a truncated JPEG without complaint (the missing rows come
    out grey), so im2rec packed such files; here a JPEG must have an
    end-of-image marker after its first scan (an EXIF thumbnail's own marker,
    earlier in the file, does not count) and a PNG its ``IEND`` chunk. Other
    formats are left to the decoder. ``header``: :func:`jpeg_header` of
    ``data`` when already read.
    """
    if not data:
        return "empty file"
    if is_jpeg(data):
        scan = (header or jpeg_header(data)).scan
        if scan is None or data.rfind(b"\xff\xd9", scan) < 0:  # from the end: the marker is normally last
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


def _simplejpeg() -> ModuleType | None:
    """The ``simplejpeg`` module, or ``None`` without it (then OpenCV decodes, giving the same pixels more slowly)."""
    try:
        import simplejpeg
    except ImportError:
        return None
    return simplejpeg


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
    """im2rec's pack options for one image; :meth:`apply` turns file bytes into record bytes.

    ``fast`` is not an im2rec option: faster JPEG decoding whose pixels differ
    slightly from im2rec's (see the module doc for how much).
    """

    resize: int = 0
    center_crop: bool = False
    color: int = 1
    encoding: str = ".jpg"
    quality: int = 95
    pass_through: bool = False
    fast: bool = False

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
        header = jpeg_header(data)
        problem = truncation(data, header)
        if problem is not None:
            raise ImageDecodeError(f"{what}: {problem}")
        if self.pass_through:
            return data
        img = self._decode(data, header, what)
        return encode_image(img, self.encoding, self.quality)

    def _decode(self, data: bytes, header: JpegHeader | None, what: str) -> np.ndarray:
        """Decode, crop and resize as im2rec does (or, with ``fast``, nearly so)."""
        frame = header.frame if header is not None else None
        if self.fast and self.resize and self.color != -1 and frame is not None:
            factor = reduction_factor(frame.height, frame.width, self.resize)
            if factor > 1:
                return self._decode_reduced(data, frame, factor, what)
        img = self._decode_jpeg(data, header)
        if img is None:
            img = decode_image(data, self.color, what=what)
        if self.center_crop:
            img = center_square(img)
        if self.resize:
            img = opencv().resize(img, shorter_side_size(*img.shape[:2], self.resize))
        return img

    def _decode_jpeg(self, data: bytes, header: JpegHeader | None) -> np.ndarray | None:
        """The pixels OpenCV would give, decoded by simplejpeg; ``None`` where only OpenCV decodes as OpenCV does."""
        frame = header.frame if header is not None else None
        if (self.color == -1 or frame is None or frame.marker not in _PLAIN_FRAMES or frame.precision != 8
                or frame.components not in (1, 3) or header.orientation != 1):
            return None
        simplejpeg = _simplejpeg()
        if simplejpeg is None:
            return None
        try:
            img = simplejpeg.decode_jpeg(data, "BGR" if self.color == 1 else "GRAY",
                                         fastdct=self.fast, fastupsample=self.fast)
        except ValueError:  # a libjpeg warning (strict mode): OpenCV decodes such files anyway, as im2rec did
            return None
        return img if self.color == 1 else img.reshape(img.shape[:2])

    def _decode_reduced(self, data: bytes, frame: JpegFrame, factor: int, what: str) -> np.ndarray:
        """Decode at 1/``factor`` scale, then resize to the size a full decode would give."""
        cv2 = opencv()
        img = cv2.imdecode(np.frombuffer(data, np.uint8), _reduced_flag(self.color, factor))
        if img is None:
            raise ImageDecodeError(f"{what}: {len(data)} bytes are not a decodable image")
        height, width = frame.height, frame.width
        if (img.shape[0] > img.shape[1]) != (height > width) and img.shape[0] != img.shape[1]:
            height, width = width, height  # EXIF rotation turned the frame by 90 degrees
        if self.center_crop:
            img = center_square(img)
            height = width = min(height, width)
        return cv2.resize(img, shorter_side_size(height, width, self.resize))
