"""Image encoding and decoding: the bytes inside a record <-> numpy pixel arrays.

OpenCV (``opencv-python-headless``, libjpeg-turbo inside) does the work, so
pixels match what MXNet's ``unpack_img`` / ``pack_img`` give: decoded images
are BGR (or grey) ``uint8`` arrays, HWC. It is imported on first use; without
it these functions raise an error that says how to install it
(``pip install 'mxrec[image]'``). ``iscolor`` follows ``cv2.imdecode``'s flag:
``-1`` keeps the file's channels (``IMREAD_UNCHANGED``), ``0`` gives a 2-D grey
image, ``1`` gives 3-channel BGR.

The training pipelines decode with :func:`decode_pixels`: JPEG goes to
libjpeg-turbo through ``simplejpeg`` when it is installed (it decodes straight
to BGR or grey and releases the GIL); anything else, and any JPEG
``simplejpeg`` rejects, goes to OpenCV. That is MXNet's own split:
``ImageRecordIter`` decodes JPEG with TurboJPEG and falls back to
``cv::imdecode``, which also accepts truncated JPEGs (the missing rows come out
grey). Both decoders use libjpeg-turbo's accurate integer DCT and fancy
upsampling, so the pixels are the same either way. :func:`simplejpeg` is the
one way mxrec loads that optional module.

EXIF orientation: ``cv2.imdecode`` with a colour or grey flag turns the image
as its EXIF Orientation tag says (what MXNet's ``ImageRecordIter`` feeds its
augmenters); simplejpeg does not. :func:`decode_pixels` therefore reads the tag
with the one JPEG marker walker (:func:`~mxrec.image.headers.jpeg_header`) and
applies it with :func:`orient`, so the pixels equal
``cv2.imdecode(buf, IMREAD_COLOR)`` whichever decoder runs. Its
``exif_orientation=False`` gives the stored pixels unturned (as MXNet's
``mx.image.imdecode`` does) from either decoder.

A training loop decodes an image, writes it into a batch and forgets it. For
that case :class:`DecodeBuffers` gives each thread memory to decode into that
is reused from image to image: writing into memory already mapped avoids the
page faults of a fresh array on every image, which made decoding about a
third faster on the benchmark machine. Images under 128 KiB are decoded into
fresh arrays instead (:attr:`DecodeBuffers.REUSE_BYTES`): they come without
page faults, and passing a buffer costs more than that.
"""

from __future__ import annotations

import functools
import sys
import threading
from types import ModuleType

import numpy as np

from mxrec.errors import ImageDecodeError, MxrecError, import_extra, missing_extra
from mxrec.image.headers import TURNING_ORIENTATIONS, jpeg_header
from mxrec.image.signatures import is_jpeg

JPEG_FORMATS = (".jpg", ".jpeg")
PNG_FORMATS = (".png",)


def opencv() -> ModuleType:
    """The ``cv2`` module, or a clear error if it is not installed."""
    module = sys.modules.get("cv2")  # imported already: the per-image calls skip the import machinery
    if module is not None and not getattr(module.__spec__, "_initializing", False):
        return module
    # (While one thread imports cv2 it is in sys.modules half initialised -- "partially initialized module 'cv2'
    # has no attribute 'flip'"; the import waits for that thread's to finish.)
    return import_extra("cv2", "image encoding/decoding needs OpenCV (opencv-python-headless)", "image")


@functools.cache
def simplejpeg() -> ModuleType | None:
    """The ``simplejpeg`` module (libjpeg-turbo without OpenCV's overhead), or ``None`` when it is not installed.

    Without it OpenCV decodes every image, giving the same pixels more slowly.
    """
    try:
        import simplejpeg as module
    except ImportError:  # pragma: no cover - exercised only without the extra
        return None
    return module


def require_simplejpeg() -> ModuleType:
    """The ``simplejpeg`` module, or a clear error where nothing else will do (strict JPEG checks)."""
    module = simplejpeg()
    if module is None:  # pragma: no cover - exercised only without the extra
        raise missing_extra("decoding JPEGs strictly needs simplejpeg", "image")
    return module


def encode_params(img_fmt: str, quality: int) -> list[int]:
    """OpenCV ``imencode`` parameters for MXNet's ``quality`` argument.

    JPEG: quality 0-100. PNG: the same number is the compression level 0-9
    (MXNet passes it through unchanged; OpenCV clamps values above 9).
    """
    cv2 = opencv()
    fmt = img_fmt.lower()
    if fmt in JPEG_FORMATS:
        return [cv2.IMWRITE_JPEG_QUALITY, int(quality)]
    if fmt in PNG_FORMATS:
        return [cv2.IMWRITE_PNG_COMPRESSION, int(quality)]
    return []


def can_encode(img_fmt: str) -> bool:
    """Whether OpenCV can encode images as ``img_fmt`` (an extension: ``.png``, ``.jpg``, ``.webp``, ...)."""
    return bool(img_fmt) and bool(opencv().haveImageWriter("image" + img_fmt))


def encode_image(img: np.ndarray, img_fmt: str = ".jpg", quality: int = 95) -> bytes:
    """Encode an HWC (or HW) ``uint8`` BGR image as ``img_fmt`` (``.jpg`` or ``.png``, or any OpenCV format)."""
    cv2 = opencv()
    try:
        ok, buf = cv2.imencode(img_fmt, img, encode_params(img_fmt, quality))
    except cv2.error:  # no encoder for the extension
        if can_encode(img_fmt):
            raise
        raise MxrecError(f"OpenCV cannot encode images as {img_fmt!r} (it writes .png, .jpg, .bmp, .tif, "
                         ".webp, ...)") from None
    if not ok:
        raise MxrecError(f"OpenCV could not encode a {getattr(img, 'shape', '?')} image as {img_fmt!r}")
    return buf.tobytes()


def decode_image(buf: bytes | memoryview | np.ndarray, iscolor: int = -1, *,
                 what: str = "image bytes") -> np.ndarray:
    """Decode encoded image bytes to a ``uint8`` array (BGR or grey, as OpenCV gives).

    Raises :class:`ImageDecodeError` (naming ``what``) when the bytes are empty
    or not a decodable image.
    """
    cv2 = opencv()
    data = np.frombuffer(buf, dtype=np.uint8) if not isinstance(buf, np.ndarray) else buf
    if data.size == 0:
        raise ImageDecodeError(f"{what}: empty, no image to decode")
    img = cv2.imdecode(data, iscolor)
    if img is None:
        raise ImageDecodeError(f"{what}: {data.size} bytes are not a decodable image "
                               f"(starts {bytes(data[:4]).hex()})")
    return img


_SIMPLEJPEG_SPACE = {1: "GRAY", 3: "BGR"}
_IMREAD_FLAG = {1: 0, 3: 1, 4: -1}


class DecodeBuffers:
    """Per-thread output memory for :func:`decode_pixels`, reused from one image to the next.

    An image decoded into it stays valid only until the same thread decodes the
    next one: use it where each image is consumed (copied into a batch) at once.
    Only images of at least :attr:`REUSE_BYTES` use it (:meth:`for_image`).
    """

    #: Smaller images are decoded into fresh arrays: those come from the heap without page faults, and handing
    #: simplejpeg a buffer costs more than that (about 0.5 us on a 32x32 image, 1.5 us at 64x64).
    REUSE_BYTES = 1 << 17

    def __init__(self) -> None:
        self._local = threading.local()

    def take(self, size: int) -> np.ndarray:
        """This thread's buffer, at least ``size`` bytes long (its first ``size`` bytes)."""
        buf = getattr(self._local, "buf", None)
        if buf is None or buf.size < size:
            buf = self._local.buf = np.empty(max(size, 1 << 20), np.uint8)
        return buf[:size]

    def for_image(self, size: int) -> np.ndarray | None:
        """The memory to decode an image of ``size`` bytes into: :meth:`take`'s, or ``None`` (a fresh array) for
        one smaller than :attr:`REUSE_BYTES`."""
        return None if size < self.REUSE_BYTES else self.take(size)


# EXIF orientation -> (swap rows and columns, then reverse rows, reverse columns): OpenCV's ExifTransform.
_ORIENTATIONS = {2: (False, False, True), 3: (False, True, True), 4: (False, True, False),
                 5: (True, False, False), 6: (True, False, True), 7: (True, True, True), 8: (True, True, False)}
_IMREAD_IGNORE_ORIENTATION = 128  # cv2.IMREAD_IGNORE_ORIENTATION, without importing OpenCV here


def orient(img: np.ndarray, orientation: int | None) -> np.ndarray:
    """Pixels as stored, turned and flipped the way EXIF ``orientation`` (1-8) says, as OpenCV's decoder does it.

    Orientation 1, ``None`` and values outside 1-8 leave ``img`` as it is
    (OpenCV ignores them too); any other returns a new contiguous array.
    """
    steps = _ORIENTATIONS.get(orientation)  # type: ignore[arg-type]
    if steps is None:
        return img
    transpose, rows, cols = steps
    if transpose:
        img = img.swapaxes(0, 1)
    return np.ascontiguousarray(img[::-1 if rows else 1, ::-1 if cols else 1])


def decode_pixels(buf: bytes | memoryview, channels: int = 3, *, what: str = "image",
                  buffers: DecodeBuffers | None = None, exif_orientation: bool = True) -> np.ndarray:
    """Decode ``buf`` to ``uint8`` pixels with ``channels`` channels (HW for 1, HWC BGR(A) for 3 and 4).

    With 1 or 3 channels the pixels equal ``cv2.imdecode`` with the grey or
    colour flag, EXIF orientation applied, whichever decoder runs;
    ``exif_orientation=False`` leaves the image as stored (``mx.image.imdecode``).
    4 channels is ``IMREAD_UNCHANGED``, which never turns the image.
    With ``buffers``, a JPEG is decoded into this thread's reusable buffer (see
    :class:`DecodeBuffers`). Raises :class:`ImageDecodeError`, naming ``what``,
    when the bytes are not an image or (for 4 channels) the image has no alpha
    channel.
    """
    if channels not in _IMREAD_FLAG:
        raise ImageDecodeError(f"{what}: cannot decode to {channels} channels (1, 3 or 4)")
    space = _SIMPLEJPEG_SPACE.get(channels)
    jpeg = simplejpeg() if space is not None and is_jpeg(buf) else None
    header = jpeg_header(buf) if jpeg is not None and exif_orientation else None
    # a malformed EXIF block (orientation None): only OpenCV knows what it does with it
    orientation = 1 if header is None else header.orientation
    if jpeg is not None and orientation is not None:
        try:
            out = None
            if buffers is not None:
                frame = None if header is None or header.problem is not None else header.frame
                # the size from the headers already walked, else from libjpeg-turbo's (a second header parse)
                height, width = (frame.height, frame.width) if frame else jpeg.decode_jpeg_header(buf)[:2]
                out = buffers.for_image(height * width * channels)
            img = jpeg.decode_jpeg(buf, colorspace=space, buffer=out)
        except ValueError:
            pass  # damaged or unusual JPEG: OpenCV decides, as MXNet's fallback does
        else:
            return orient(img[..., 0] if channels == 1 else img, orientation)
    flag = _IMREAD_FLAG[channels]
    if not exif_orientation and flag >= 0:
        flag |= _IMREAD_IGNORE_ORIENTATION
    img = decode_image(buf, flag, what=what)
    if channels == 4 and (img.ndim != 3 or img.shape[2] != 4):
        found = 1 if img.ndim == 2 else img.shape[2]
        raise ImageDecodeError(f"{what}: data_shape asks for 4 channels but the image has {found}")
    return img


def to_rgb(img: np.ndarray) -> np.ndarray:
    """A decoded BGR(A) image as RGB(A), contiguous (grey images pass through): ``mx.image.imdecode``'s order."""
    if img.ndim == 2:
        return img
    if img.shape[2] == 4:
        return np.ascontiguousarray(img[..., [2, 1, 0, 3]])
    return np.ascontiguousarray(img[..., ::-1])


def jpeg_size(buf: bytes | memoryview) -> tuple[int, int] | None:
    """``(height, width)`` of a JPEG as :func:`decode_pixels` gives it (EXIF orientation applied: turning
    orientations swap the sides), from one walk of its headers; ``None`` when it is not a JPEG ``simplejpeg``
    reads, its headers are damaged, or its EXIF block is malformed (only OpenCV knows what it does with it)."""
    if simplejpeg() is None:
        return None
    header = jpeg_header(buf)
    if header is None or header.frame is None or header.problem is not None or header.orientation is None:
        return None
    height, width = header.frame.height, header.frame.width
    return (width, height) if header.orientation in TURNING_ORIENTATIONS else (height, width)


def decode_pixels_scaled(buf: bytes | memoryview, channels: int, min_height: int, min_width: int, *,
                         what: str = "image", buffers: DecodeBuffers | None = None) -> np.ndarray:
    """Like :func:`decode_pixels` (EXIF orientation applied), but a JPEG at the smallest of 1/8, 1/4, 1/2 scale
    (libjpeg-turbo's SIMD scaled IDCTs) that is at least ``min_height`` x ``min_width`` once oriented, else full
    size: the scaled IDCT skips most of the inverse transform, upsampling and colour conversion work (the
    entropy decoding stays).

    Anything but a JPEG ``simplejpeg`` reads (with a well-formed EXIF block) is decoded at full size.
    """
    space = _SIMPLEJPEG_SPACE.get(channels)
    jpeg = simplejpeg() if space is not None else None
    header = jpeg_header(buf) if jpeg is not None else None
    if header is not None and header.frame is not None and header.problem is None and header.orientation is not None:
        full_height, full_width = header.frame.height, header.frame.width
        if header.orientation in TURNING_ORIENTATIONS:  # the minimum is for the turned image
            min_height, min_width = min_width, min_height
        for divisor in (8, 4, 2, 1):  # libjpeg rounds scaled sizes up
            height, width = -(-full_height // divisor), -(-full_width // divisor)
            if height >= min_height and width >= min_width:
                break
        out = None if buffers is None else buffers.for_image(height * width * channels)
        try:
            img = jpeg.decode_jpeg(buf, colorspace=space, min_height=height, min_width=width, buffer=out)
        except ValueError:
            pass  # OpenCV decides, at full size
        else:
            return orient(img[..., 0] if channels == 1 else img, header.orientation)
    return decode_pixels(buf, channels, what=what, buffers=buffers)
