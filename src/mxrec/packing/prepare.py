"""What happens to one image file on its way into a record (im2rec's per-image transform).

:class:`ImageTransform` holds im2rec's pack options and turns a file's bytes
into the bytes stored after the ``IRHeader``:

* ``pass_through``: the file's bytes, untouched (nothing else applies).
  Empty and truncated files are refused (:func:`~mxrec.image.headers.truncation`) in every mode.
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
    ``quality`` (JPEG quality 1-100, default 95; or PNG compression level
    0-9, default 9, as :func:`mxrec.image.codec.encode_params`). im2rec passed
    its default 95 to PNG too, which OpenCV clamps to 9: the same bytes.
    Values outside those ranges (im2rec let OpenCV clamp them silently) are
    an error.

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

from dataclasses import dataclass

import numpy as np

from mxrec.errors import ImageDecodeError, OptionError
from mxrec.image.codec import decode_image, encode_image, opencv, simplejpeg
from mxrec.image.headers import JpegFrame, JpegHeader, jpeg_header, truncation
from mxrec.transforms.functional import centre_offsets, shorter_side_size

COLOR_MODES = (-1, 0, 1)
ENCODINGS = (".jpg", ".png")
#: Per encoding: the quality range accepted and the default.
QUALITY = {".jpg": (1, 100, 95), ".png": (0, 9, 9)}
REDUCTION_FACTORS = (8, 4, 2)
# Frames simplejpeg decodes exactly as OpenCV: baseline, extended and progressive Huffman, 8-bit, grey or YCbCr/RGB.
_PLAIN_FRAMES = frozenset({0xC0, 0xC1, 0xC2})


def cv2_size(height: int, width: int, target: int) -> tuple[int, int]:
    """``(width, height)`` (cv2's order) after im2rec's resize of the shorter side to ``target``."""
    new_height, new_width = shorter_side_size(height, width, target)
    return new_width, new_height


def center_square(img: np.ndarray) -> np.ndarray:
    """The central square of ``img`` (side = its shorter side), as im2rec's ``--center-crop``."""
    side = min(img.shape[:2])
    x, y = centre_offsets(img.shape[0], img.shape[1], side, side)
    return img[y:y + side, x:x + side]


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
    """im2rec's pack options for one image; :meth:`apply` turns file bytes into record bytes.

    Parameters
    ----------
    resize
        Scale the shorter side to this (0: keep the size).
    center_crop
        Crop the central square first.
    color
        ``cv2.imread``'s flag: ``1`` colour, ``0`` grey, ``-1`` as stored.
    encoding
        ``".jpg"`` or ``".png"``.
    quality
        JPEG quality 1-100 (default 95) or PNG compression level 0-9
        (default 9).
    pass_through
        Store the file's bytes untouched (nothing else applies).
    fast
        Not an im2rec option: faster JPEG decoding whose pixels differ slightly
        from im2rec's (see the module doc for how much).

    Raises
    ------
    OptionError
        A value outside its range.
    """

    resize: int = 0
    center_crop: bool = False
    color: int = 1
    encoding: str = ".jpg"
    quality: int | None = None  # the encoding's default (QUALITY)
    pass_through: bool = False
    fast: bool = False

    def __post_init__(self) -> None:
        if self.color not in COLOR_MODES:
            raise OptionError(f"color must be one of {COLOR_MODES}, not {self.color}")
        if self.encoding not in ENCODINGS:
            raise OptionError(f"encoding must be one of {ENCODINGS}, not {self.encoding!r}")
        if self.resize < 0:
            raise OptionError(f"resize must be 0 (keep the size) or a positive side length, not {self.resize}")
        low, high, default = QUALITY[self.encoding]
        if self.quality is None:
            object.__setattr__(self, "quality", default)
        elif not low <= self.quality <= high:
            what = "JPEG quality" if self.encoding == ".jpg" else "PNG compression level"
            raise OptionError(f"{what} must be {low}..{high} (default {default}), not {self.quality}")

    def apply(self, data: bytes, what: str = "image") -> bytes:
        """The bytes to store for an image file's ``data``.

        Parameters
        ----------
        data
            The image file's bytes.
        what
            Names the image in errors.

        Returns
        -------
        bytes
            The bytes to store (``data`` itself when passing through).

        Raises
        ------
        ImageDecodeError
            ``data`` is empty, truncated (see :func:`~mxrec.image.headers.truncation`; checked in pass-through
            too) or undecodable.
        MxrecError
            OpenCV cannot encode the result (for example a 16-bit PNG read with ``color=-1`` into JPEG).
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
            img = opencv().resize(img, cv2_size(*img.shape[:2], self.resize))
        return img

    def _decode_jpeg(self, data: bytes, header: JpegHeader | None) -> np.ndarray | None:
        """The pixels OpenCV would give, decoded by simplejpeg; ``None`` where only OpenCV decodes as OpenCV does."""
        frame = header.frame if header is not None else None
        if (self.color == -1 or frame is None or frame.marker not in _PLAIN_FRAMES or frame.precision != 8
                or frame.components not in (1, 3) or header.orientation != 1):
            return None
        jpeg = simplejpeg()
        if jpeg is None:
            return None
        try:
            img = jpeg.decode_jpeg(data, "BGR" if self.color == 1 else "GRAY",
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
        return cv2.resize(img, cv2_size(height, width, self.resize))
