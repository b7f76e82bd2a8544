"""Image encoding and decoding: the bytes inside a record <-> numpy pixel arrays.

OpenCV (``opencv-python-headless``, libjpeg-turbo inside) does the work, so
pixels match what MXNet's ``unpack_img`` / ``pack_img`` give: decoded images
are BGR (or grey) ``uint8`` arrays, HWC. It is imported on first use; without
it these functions raise an error that says how to install it
(``pip install 'mxrec[image]'``).

``iscolor`` follows ``cv2.imdecode``'s flag: ``-1`` keeps the file's channels
(``IMREAD_UNCHANGED``), ``0`` gives a 2-D grey image, ``1`` gives 3-channel BGR.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np

from mxrec.errors import ImageDecodeError, MxrecError

JPEG_FORMATS = (".jpg", ".jpeg")
PNG_FORMATS = (".png",)


def opencv() -> ModuleType:
    """The ``cv2`` module, or a clear error if it is not installed."""
    try:
        import cv2
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise MxrecError(
            "image encoding/decoding needs OpenCV: pip install 'mxrec[image]' "
            f"(or opencv-python-headless) ({exc})") from None
    return cv2


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


def encode_image(img: np.ndarray, img_fmt: str = ".jpg", quality: int = 95) -> bytes:
    """Encode an HWC (or HW) ``uint8`` BGR image as ``img_fmt`` (``.jpg`` or ``.png``, or any OpenCV format)."""
    cv2 = opencv()
    ok, buf = cv2.imencode(img_fmt, img, encode_params(img_fmt, quality))
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
