"""Decoding the image inside a record for the training pipelines, as fast as the codecs allow.

JPEG goes to libjpeg-turbo through ``simplejpeg`` when it is installed (it
decodes straight to BGR or grey and releases the GIL); anything else, and any
JPEG ``simplejpeg`` rejects, goes to OpenCV (:func:`mxrec.codec.decode_image`).
That is MXNet's own split: ``ImageRecordIter`` decodes JPEG with TurboJPEG and
falls back to ``cv::imdecode``, which also accepts truncated JPEGs (the missing
rows come out grey). Both decoders use libjpeg-turbo's accurate integer DCT
and fancy upsampling, so the pixels are the same either way.

``channels`` follows ``data_shape[0]``: 1 decodes to grey (HW), 3 to BGR
(HWC), 4 keeps the file's channels and requires four (BGRA).

A training loop decodes an image, writes it into a batch and forgets it. For
that case :class:`DecodeBuffers` gives each thread memory to decode into that
is reused from image to image: writing into memory already mapped avoids the
page faults of a fresh array on every image, which made decoding about a
third faster on the benchmark machine.
"""

from __future__ import annotations

import threading

import numpy as np

from mxrec.codec import decode_image
from mxrec.errors import ImageDecodeError

try:  # optional: libjpeg-turbo without OpenCV's overhead
    import simplejpeg
except ImportError:  # pragma: no cover - exercised only without simplejpeg
    simplejpeg = None

_JPEG_START = b"\xff\xd8"
_SIMPLEJPEG_SPACE = {1: "GRAY", 3: "BGR"}
_IMREAD_FLAG = {1: 0, 3: 1, 4: -1}


class DecodeBuffers:
    """Per-thread output memory for :func:`decode_pixels`, reused from one image to the next.

    An image decoded into it stays valid only until the same thread decodes the
    next one: use it where each image is consumed (copied into a batch) at once.
    """

    def __init__(self) -> None:
        self._local = threading.local()

    def take(self, size: int) -> np.ndarray:
        """This thread's buffer, at least ``size`` bytes long (its first ``size`` bytes)."""
        buf = getattr(self._local, "buf", None)
        if buf is None or buf.size < size:
            buf = self._local.buf = np.empty(max(size, 1 << 20), np.uint8)
        return buf[:size]


def decode_pixels(buf: bytes | memoryview, channels: int = 3, *, what: str = "image",
                  buffers: DecodeBuffers | None = None) -> np.ndarray:
    """Decode ``buf`` to ``uint8`` pixels with ``channels`` channels (HW for 1, HWC BGR(A) for 3 and 4).

    With ``buffers``, a JPEG is decoded into this thread's reusable buffer (see
    :class:`DecodeBuffers`). Raises :class:`ImageDecodeError`, naming ``what``,
    when the bytes are not an image or (for 4 channels) the image has no alpha
    channel.
    """
    if channels not in _IMREAD_FLAG:
        raise ImageDecodeError(f"{what}: cannot decode to {channels} channels (1, 3 or 4)")
    space = _SIMPLEJPEG_SPACE.get(channels)
    if simplejpeg is not None and space is not None and buf[:2] == _JPEG_START:
        try:
            if buffers is None:
                img = simplejpeg.decode_jpeg(buf, colorspace=space)
            else:
                height, width = simplejpeg.decode_jpeg_header(buf)[:2]
                img = simplejpeg.decode_jpeg(buf, colorspace=space, buffer=buffers.take(height * width * channels))
        except ValueError:
            pass  # damaged or unusual JPEG: OpenCV decides, as MXNet's fallback does
        else:
            return img[..., 0] if channels == 1 else img
    img = decode_image(buf, _IMREAD_FLAG[channels], what=what)
    if channels == 4 and (img.ndim != 3 or img.shape[2] != 4):
        found = 1 if img.ndim == 2 else img.shape[2]
        raise ImageDecodeError(f"{what}: data_shape asks for 4 channels but the image has {found}")
    return img
