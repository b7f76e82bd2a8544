"""The image-record header (``IRHeader``) that MXNet puts at the front of a payload.

Layout of a packed payload, little-endian, struct format ``IfQQ``::

    offset  size      field
    0       4         flag   u32: 0 for a scalar label, else the number of float32 labels that follow
    4       4         label  f32: the scalar label (0.0 when flag > 0)
    8       8         id     u64: the record id (im2rec: the .lst index)
    16      8         id2    u64: a second id (im2rec writes 0)
    24      4 * flag  labels f32[flag], present only when flag > 0
    24+4*flag ...     the rest of the payload (usually encoded image bytes)

:func:`pack` follows MXNet's rule: a scalar label (any ``numbers.Number``) forces
``flag`` to 0 whatever the caller passed; anything else is turned into a flat
float32 array whose size becomes ``flag`` (an empty array gives ``flag`` 0 and
label 0.0). :func:`unpack` returns the label as a Python float when ``flag`` is
0, else as a read-only float32 array of ``flag`` values.

InsightFace face sets keep a *header record* under key 0 and one *identity
record* per identity whose labels hold key ranges (:mod:`mxrec.format.insightface`);
they unpack like any other.
"""

from __future__ import annotations

import numbers
import struct
from typing import Any, NamedTuple

import numpy as np

from mxrec.errors import HeaderError

IRHEADER_FORMAT = "<IfQQ"
#: The fixed part of the IRHeader as a struct: ``IRHEADER.unpack_from(payload) -> (flag, label, id, id2)``.
IRHEADER = struct.Struct(IRHEADER_FORMAT)
IRHEADER_SIZE = IRHEADER.size  # 24
_LABEL = struct.Struct("<f")
ID_OFFSET = 8  # where the u64 id field starts


class IRHeader(NamedTuple):
    """Header of an image record: ``flag``, ``label``, ``id``, ``id2`` (as ``mxnet.recordio.IRHeader``).

    Attributes
    ----------
    flag
        0 for a scalar label, else the number of float32 label values stored after the header.
    label
        The scalar label (0 when ``flag`` > 0), or the label array once unpacked.
    id
        The record's id (u64).
    id2
        A second id (u64).
    """

    flag: int
    label: Any
    id: int
    id2: int


def pack(header: IRHeader | tuple, s: bytes) -> bytes:
    """Pack a header and a payload into one record payload (as ``mxnet.recordio.pack``).

    A scalar label is stored in the header and forces ``flag`` to 0; any other
    label becomes a float32 array stored after the header, with ``flag`` set to
    its size and the header's own label field set to 0.

    Parameters
    ----------
    header
        The :class:`IRHeader` (or a 4-tuple ``flag, label, id, id2``).
    s
        The payload bytes that follow the header.

    Returns
    -------
    bytes
        The record payload.
    """
    header = IRHeader(*header)
    label = header.label
    if isinstance(label, numbers.Number):
        return IRHEADER.pack(0, label, header.id, header.id2) + bytes(s)
    labels = np.asarray(label, dtype=np.float32).ravel()
    return IRHEADER.pack(labels.size, 0.0, header.id, header.id2) + labels.astype("<f4").tobytes() + bytes(s)


def unpack(s: bytes) -> tuple[IRHeader, bytes]:
    """Split a record payload into its ``IRHeader`` and the remaining bytes (as ``mxnet.recordio.unpack``).

    Parameters
    ----------
    s
        A record payload.

    Returns
    -------
    tuple
        The :class:`IRHeader` (its ``label`` a float32 array when ``flag > 0``)
        and the bytes after the header and labels.

    Raises
    ------
    HeaderError
        ``s`` is shorter than the header and the labels it declares.
    """
    header, start = unpack_header(s)
    return header, s[start:]


def unpack_header(s: bytes | memoryview) -> tuple[IRHeader, int]:
    """Parse the header (and label array) at the front of ``s``; return it and where the rest begins."""
    if len(s) < IRHEADER_SIZE:
        raise HeaderError(
            f"payload of {len(s)} bytes is shorter than the {IRHEADER_SIZE}-byte IRHeader")
    flag, label, id_, id2 = IRHEADER.unpack_from(s)
    if flag == 0:
        return IRHeader(0, label, id_, id2), IRHEADER_SIZE
    end = IRHEADER_SIZE + 4 * flag
    if len(s) < end:
        raise HeaderError(
            f"IRHeader declares {flag} float32 labels ({4 * flag} bytes) but only "
            f"{len(s) - IRHEADER_SIZE} bytes follow the header (id {id_})")
    labels = np.frombuffer(s, dtype="<f4", count=flag, offset=IRHEADER_SIZE)
    return IRHeader(flag, labels, id_, id2), end


def label_array(header: IRHeader) -> np.ndarray:
    """The header's label(s) as a 1-D float32 array (length 1 for a scalar label)."""
    if header.flag == 0:
        return np.array([header.label], dtype=np.float32)
    return np.asarray(header.label, dtype=np.float32)


def shift_class_label(payload: bytes | memoryview, offset: int) -> memoryview:
    """``payload`` with its class label moved up by ``offset``: the scalar label when ``flag`` is 0, else the first
    of its labels (mixing datasets whose classes each number from 0, :mod:`mxrec.datasets.mixture`).

    Parameters
    ----------
    payload
        A record payload with an IRHeader.
    offset
        Added to the class label.

    Returns
    -------
    memoryview
        A new payload (over a buffer of its own: one copy); the rest (the image) unchanged.

    Raises
    ------
    HeaderError
        ``payload`` has no IRHeader (or one that declares more labels than it holds).
    """
    if len(payload) < IRHEADER_SIZE or (int.from_bytes(payload[:4], "little") and len(payload) < IRHEADER_SIZE + 4):
        unpack_header(payload)  # (raises, saying what is wrong)
    out = bytearray(payload)  # one copy, and only one: this runs for every sample of a mixed source
    at = 4 if out[0:4] == b"\0\0\0\0" else IRHEADER_SIZE  # the scalar label, or the first of the array
    _LABEL.pack_into(out, at, _LABEL.unpack_from(out, at)[0] + offset)
    return memoryview(out)
