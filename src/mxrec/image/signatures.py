"""Which image format a byte string holds, from its first bytes: the one signature table.

Every part of mxrec that names a payload's format (``mxrec info``'s payload
kinds, the doctor's image checks, ``extract``'s file extensions, the pack
job's JPEG test) asks this table.
"""

from __future__ import annotations

from typing import NamedTuple

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


class Signature(NamedTuple):
    """Bytes a format's files start with (``at`` bytes in), its name, and the file extension used for it."""

    magic: bytes
    kind: str
    extension: str
    at: int = 0


#: In the order tried. WebP is a RIFF container whose form type, at byte 8, is ``WEBP``.
SIGNATURES = (
    Signature(b"\xff\xd8\xff", "jpeg", ".jpg"),
    Signature(PNG_SIGNATURE, "png", ".png"),
    Signature(b"GIF87a", "gif", ".gif"),
    Signature(b"GIF89a", "gif", ".gif"),
    Signature(b"BM", "bmp", ".bmp"),
    Signature(b"II*\x00", "tiff", ".tif"),
    Signature(b"MM\x00*", "tiff", ".tif"),
    Signature(b"WEBP", "webp", ".webp", at=8),
)
#: The longest prefix :func:`match_signature` looks at: callers that read a payload's head read this much.
SIGNATURE_BYTES = 12


def match_signature(data: bytes | memoryview) -> Signature | None:
    """The signature ``data`` starts with, or ``None``."""
    head = bytes(data[:SIGNATURE_BYTES])
    for signature in SIGNATURES:
        if head.startswith(signature.magic, signature.at) and (signature.at == 0 or head.startswith(b"RIFF")):
            return signature
    return None


def image_format(data: bytes | memoryview) -> str:
    """``"jpeg"``, ``"png"``, ``"gif"``, ``"bmp"``, ``"tiff"``, ``"webp"``, ``"other"``, or ``"empty"`` for no bytes."""
    if not len(data):
        return "empty"
    signature = match_signature(data)
    return "other" if signature is None else signature.kind


def image_extension(data: bytes | memoryview) -> str | None:
    """The file extension of the image format ``data`` starts with, or ``None``."""
    signature = match_signature(data)
    return None if signature is None else signature.extension


def is_jpeg(data: bytes | memoryview) -> bool:
    """Whether ``data`` starts with a JPEG start-of-image marker (and the next marker's first byte)."""
    return len(data) >= 3 and data[0] == 0xFF and data[1] == 0xD8 and data[2] == 0xFF
