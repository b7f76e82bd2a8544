"""Whether an image's bytes are sound: :func:`inspect_image` classifies them as sound or as one of :data:`FAULT_KINDS`.

Without decoding only the headers are read (:mod:`mxrec.image.headers`),
microseconds per image, which finds empty and zero-size images, damaged
headers, and bytes in no known image format (``unrecognised``: a text file
stored by pass-through packing). With ``decode=True`` the bytes are decoded completely, the only way
to see damage inside the compressed data. JPEGs are then decoded with
simplejpeg (libjpeg-turbo, the decoder inside OpenCV and MXNet too) in strict
mode, which turns every libjpeg warning ("Corrupt JPEG data: ...",
"Premature end of JPEG file") into an error, silently. A JPEG or PNG that
fails is ``truncated`` when it breaks the truncation rule
(:func:`~mxrec.image.headers.truncation`), else ``corrupt``. Formats other
than JPEG and PNG are decoded with OpenCV (which prints libpng's complaints
about damaged PNGs on stderr).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from mxrec.errors import ImageDecodeError, TruncatedImageError
from mxrec.image.codec import opencv, require_simplejpeg
from mxrec.image.headers import Shape, image_shape, truncation
from mxrec.image.signatures import image_format

#: What can be wrong with an image's bytes. ``unrecognised``: bytes in no known image format (a text file
#: named ``.jpg``, stored by pass-through packing); with ``decode`` only when OpenCV cannot decode them either.
FAULT_KINDS = ("empty", "zero-size", "truncated", "corrupt", "unrecognised")


@dataclass(frozen=True, slots=True)
class ImageFacts:
    """What :func:`inspect_image` found: format, shape (None if unknown), and a fault kind with its reason."""

    format: str
    shape: Shape | None
    fault: str | None = None
    reason: str | None = None


@functools.lru_cache(maxsize=4096)
def sound_image(fmt: str, shape: Shape | None) -> ImageFacts:
    """The facts of a sound image: one shared object for each format and shape (datasets repeat a few sizes)."""
    return ImageFacts(fmt, shape)


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
        if fmt == "other":
            return ImageFacts(fmt, None, "unrecognised", f"{len(data)} bytes in no known image format (they start "
                              f"{bytes(data[:8])!r}); --decode tries OpenCV on them")
        return sound_image(fmt, shape)
    if fmt == "jpeg":
        try:
            require_simplejpeg().decode_jpeg(data, "GRAY" if shape[2] == 1 else "BGR")
        except ValueError as exc:  # strict mode: any libjpeg warning or error
            return ImageFacts(fmt, shape, "truncated" if truncation(data) else "corrupt", f"libjpeg-turbo: {exc}")
        return sound_image(fmt, shape)
    if fmt == "png" and truncation(data):
        return ImageFacts(fmt, shape, "truncated", "PNG ends before its IEND chunk")
    pixels = opencv().imdecode(np.frombuffer(data, np.uint8), -1)
    if pixels is None and fmt == "other":
        return ImageFacts(fmt, shape, "unrecognised", f"{len(data)} bytes in no known image format (they start "
                          f"{bytes(data[:8])!r}), and OpenCV cannot decode them")
    if pixels is None:
        return ImageFacts(fmt, shape, "corrupt", f"OpenCV cannot decode these {len(data)} bytes")
    height, width = pixels.shape[:2]
    return sound_image(fmt, (height, width, 1 if pixels.ndim == 2 else pixels.shape[2]))
