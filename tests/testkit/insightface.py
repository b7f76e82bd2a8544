"""Small InsightFace face sets and verification sets, laid out as InsightFace's own tools write them.

:func:`make_face_set` writes ``train.rec``/``train.idx`` (and the
``property`` file) the way ``dataset_merge.py`` does (faces under keys 1..,
scalar labels; then one identity record per identity, ``[start, end)``; the
header record under key 0 written physically last) or ``face2rec2.py`` does
(faces labelled ``[class, aligned]``; the header record between the faces
and the identity records). It writes through :mod:`mxrec.recordio`'s
``MXIndexedRecordIO.write_idx``, the call those tools make on MXNet's, so
the bytes are MXNet's. Each face is a small JPEG whose pixels encode its
key, so a test can tell which face came out of an iterator.

:func:`make_verification_bin` writes an ``lfw.bin``-style pickle of
``(encoded images, issame)`` in the forms found in the wild: ``bytes`` from
Python 3, ``cv2.imencode`` arrays, and Python 2's ``str`` opcodes.
"""

from __future__ import annotations

import pickle
import struct
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

import mxrec.recordio as recordio

FACE_SIZE = 24  # InsightFace's faces are 112x112; small ones keep the tests fast


def face_image(key: int, size: int = FACE_SIZE) -> np.ndarray:
    """A flat BGR face stand-in whose grey level tells ``key % 60`` back (:func:`key_of_face`): 8 + 4 * (key % 60)."""
    return np.full((size, size, 3), 8 + 4 * (key % 60), np.uint8)


def face_jpeg(key: int, size: int = FACE_SIZE) -> bytes:
    return cv2.imencode(".jpg", face_image(key, size), [cv2.IMWRITE_JPEG_QUALITY, 100])[1].tobytes()


def key_of_face(pixels: np.ndarray) -> int:
    """The ``key % 60`` of a decoded face (any channel order, CHW or HWC, any dtype scaled 0..255)."""
    return round((float(np.mean(pixels)) - 8) / 4)


@dataclass
class FaceSetFiles:
    """Where :func:`make_face_set` wrote, and what: faces per identity, their keys, the header's [A, B]."""

    rec: Path
    idx: Path
    identities: list[int]  # faces of each identity
    face_keys: list[list[int]]  # per identity
    identity_start: int  # A
    end: int  # B

    @property
    def faces(self) -> int:
        return sum(self.identities)

    def label_of(self, key: int) -> int:
        return next(i for i, keys in enumerate(self.face_keys) if key in keys)


def make_face_set(folder: Path, identities: list[int] = (3, 1, 4, 2), *, writer: str = "dataset_merge",
                  size: int = FACE_SIZE, property_file: bool = True) -> FaceSetFiles:
    """An InsightFace ``train.rec``/``.idx`` in ``folder`` with ``identities[i]`` faces of identity ``i``."""
    folder.mkdir(parents=True, exist_ok=True)
    rec, idx = folder / "train.rec", folder / "train.idx"
    out = recordio.MXIndexedRecordIO(str(idx), str(rec), "w")
    key = 1
    face_keys = []
    for label, count in enumerate(identities):
        face_keys.append(list(range(key, key + count)))
        for _ in range(count):
            if writer == "face2rec2":  # item.label = [label, aligned]: flag 2
                header = recordio.IRHeader(0, [float(label), 1.0], key, 0)
            else:
                header = recordio.IRHeader(0, label, key, 0)
            out.write_idx(key, recordio.pack(header, face_jpeg(key, size)))
            key += 1
    identity_start = key
    end = identity_start + len(identities)
    header0 = recordio.pack(recordio.IRHeader(2, [float(identity_start), float(end)], 0, 0), b"")
    if writer == "face2rec2":
        out.write_idx(0, header0)
    for keys in face_keys:
        bounds = [float(keys[0]), float(keys[-1] + 1)] if keys else [float(key), float(key)]
        out.write_idx(key, recordio.pack(recordio.IRHeader(2, bounds, key, 0), b""))
        key += 1
    if writer != "face2rec2":
        out.write_idx(0, header0)
    out.close()
    if property_file:
        (folder / "property").write_text(f"{len(identities)},{size},{size}")
    return FaceSetFiles(rec, idx, list(identities), face_keys, identity_start, end)


def rewrite_records(files: FaceSetFiles, replace: dict[int, bytes], drop: tuple[int, ...] = ()) -> None:
    """Write the set again in its file order with the payloads of some keys replaced and some keys left out."""
    reader = recordio.MXIndexedRecordIO(str(files.idx), str(files.rec), "r")
    keys = list(reader.keys)
    payloads = {k: reader.read_idx(k) for k in keys}
    reader.close()
    out = recordio.MXIndexedRecordIO(str(files.idx), str(files.rec), "w")
    for k in keys:
        if k not in drop:
            out.write_idx(k, replace.get(k, payloads[k]))
    out.close()


def identity_record(key: int, start: float, end: float) -> bytes:
    return recordio.pack(recordio.IRHeader(2, [start, end], key, 0), b"")


def _py2_pickle(images: list[bytes], issame: list[bool]) -> bytes:
    """What Python 2's ``pickle.dump((bins, issame_list), f, protocol=2)`` wrote: images as ``str`` opcodes."""
    out = bytearray(b"\x80\x02]q\x00(")
    for data in images:
        out += (b"U" + bytes([len(data)]) if len(data) < 256 else b"T" + struct.pack("<I", len(data))) + data
    out += b"e]q\x01(" + b"".join(b"\x88" if same else b"\x89" for same in issame) + b"e\x86q\x02."
    return bytes(out)


def make_verification_bin(path: Path, pairs: int = 3, *, form: str = "bytes", size: int = FACE_SIZE,
                          protocol: int = pickle.HIGHEST_PROTOCOL) -> tuple[list[bytes], list[bool]]:
    """An ``lfw.bin``-style set of ``pairs`` pairs; ``form``: ``bytes``, ``arrays`` (cv2.imencode) or ``py2``.

    Image ``i`` is :func:`face_jpeg` of key ``i``; pair ``k`` is the same person when ``k`` is even.
    """
    images = [face_jpeg(i, size) for i in range(2 * pairs)]
    issame = [k % 2 == 0 for k in range(pairs)]
    if form == "py2":
        data = _py2_pickle(images, issame)
    elif form == "arrays":
        encoded = [np.frombuffer(img, np.uint8).copy() for img in images]
        data = pickle.dumps((encoded, np.array(issame)), protocol=protocol)
    else:
        data = pickle.dumps((images, issame), protocol=protocol)
    path.write_bytes(data)
    return images, issame
