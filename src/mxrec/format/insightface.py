"""InsightFace face sets, as pure functions: the layout of their records, and their verification-set files.

**Training sets.** An InsightFace ``train.rec``/``train.idx`` (written by its
``face2rec2.py`` and ``dataset_merge.py``; MS1M, Glint360K, WebFace and the
rest are distributed this way) holds three kinds of records, told apart by
their ``.idx`` keys:

* the *header record*, key 0: IRHeader ``flag`` 2, labels ``[A, B]``, no
  image. ``A`` is the key of the first identity record, one past the last
  face; ``B`` is one past the last identity record, the number of records;
* the *face records*, keys ``1 .. A-1``: a face image; the label is the
  identity's class, a scalar or the first of a label array (``face2rec2``
  stores ``[class, aligned]``);
* the *identity records*, keys ``A .. B-1``, one per identity in class order:
  labels ``[start, end)``, the keys of that identity's faces; no image.

InsightFace's own writers put the header record physically after the faces
(``face2rec2``: between the faces and the identity records;
``dataset_merge``: last), so it is found by key, never by position. Its
readers take the faces as keys ``1 .. A-1`` and the label from each face
record.

A consistent set (:func:`layout_problems`) has exactly ``B`` records under
keys ``0 .. B-1``; identity ranges that are contiguous (the first starts at
1, each starts where the previous one ends, the last ends at ``A``), so that
every face belongs to exactly one identity; and the faces of the ``i``-th
identity record (counting from 0) carry class ``i``, the class InsightFace
trains them as. The ranges are float32 labels, exact up to 2**24 keys.

**Verification sets.** ``lfw.bin``, ``cfp_fp.bin``, ``agedb_30.bin``, ... are
pickles of ``(images, issame)``: the encoded images (``bytes``, or uint8
numpy arrays as ``cv2.imencode`` returns them) of ``len(issame)`` pairs, and
one bool per pair. Unpickling a file from elsewhere can run any code it
names, so :func:`parse_verification_pickle` uses an unpickler that admits
only what these files hold: bytes, lists, tuples, bools, and numpy uint8 and
bool arrays and bool scalars. Anything else is refused before it is made.
"""

from __future__ import annotations

import io
import math
import os
import pickle
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mxrec.errors import OptionError, VerificationSetError

#: How a dataset's records are read: ``"auto"`` finds an InsightFace header record under key 0;
#: ``"insightface"`` requires one; ``"plain"``: every record is a sample.
LAYOUTS = ("auto", "insightface", "plain")
HEADER_KEY = 0
HEADER_FLAG = 2  # the header and identity records hold two labels


@dataclass(frozen=True)
class FaceLayout:
    """The layout a header record declares: faces under keys ``1 .. identity_start-1``, identities up to ``end``."""

    identity_start: int  # A: the first identity record's key, one past the last face's
    end: int  # B: one past the last identity record's key: the number of records

    @property
    def face_keys(self) -> range:
        return range(1, self.identity_start)

    @property
    def identity_keys(self) -> range:
        return range(self.identity_start, self.end)

    @property
    def faces(self) -> int:
        return len(self.face_keys)

    @property
    def identities(self) -> int:
        return len(self.identity_keys)


def key_range(flag: int, labels: Sequence[float], image_bytes: int) -> tuple[int, int] | None:
    """The ``[start, end)`` of keys a header or identity record holds; ``None`` if the record is no such record.

    Such a record has ``flag`` 2, no image, and two whole, non-negative labels in order.
    """
    if flag != HEADER_FLAG or image_bytes or len(labels) != 2:
        return None
    start, end = (float(v) for v in labels)
    if not (math.isfinite(start) and math.isfinite(end)) or start != int(start) or end != int(end):
        return None
    if not 0 <= start <= end:
        return None
    return int(start), int(end)


def header_layout(flag: int, labels: Sequence[float], image_bytes: int) -> FaceLayout | None:
    """The :class:`FaceLayout` that the record under key 0 declares, or ``None`` if it is no header record."""
    found = key_range(flag, labels, image_bytes)
    if found is None or found[0] < 1:
        return None
    return FaceLayout(*found)


def resolve_layout(layout: str) -> str:
    """Check a ``layout`` argument (one of :data:`LAYOUTS`)."""
    if layout not in LAYOUTS:
        raise OptionError(f"layout must be one of {LAYOUTS}, not {layout!r}")
    return layout


def _runs(values: np.ndarray) -> list[tuple[int, int]]:
    """Sorted integers as inclusive runs: [1, 2, 3, 7] -> [(1, 3), (7, 7)]."""
    if not len(values):
        return []
    breaks = np.flatnonzero(np.diff(values) != 1)
    starts = np.concatenate([[0], breaks + 1])
    ends = np.concatenate([breaks, [len(values) - 1]])
    return [(int(values[s]), int(values[e])) for s, e in zip(starts, ends, strict=True)]


def _keys_text(low: int, high: int) -> int | str:
    """Where a run of keys is: the key itself, or ``"keys low..high"``."""
    return low if low == high else f"keys {low}..{high}"


def layout_problems(layout: FaceLayout, keys: Sequence[int] | np.ndarray, ranges: Mapping[int, tuple[int, int] | None],
                    face_labels: tuple[np.ndarray, np.ndarray] | None = None) -> list[tuple[object, str]]:
    """Everything inconsistent in a face set, as ``(where, what)``: ``where`` is a key (or ``"keys a..b"``).

    ``keys``: every key of the ``.idx``. ``ranges``: for each identity key
    present, the range its record holds, or ``None`` when the record holds no
    range (:func:`key_range`). ``face_labels``: ``(face keys, their first
    labels)`` to check the labels against the ranges (costs a read of every
    face record's header; without it the labels are not checked).
    """
    problems: list[tuple[object, str]] = []
    present = np.unique(np.asarray(keys, dtype=np.int64))
    where = f"the header record (key {HEADER_KEY}) says"
    outside = present[(present < 0) | (present >= layout.end)]
    problems += [(_keys_text(*run), f"outside the layout: {where} the records end at key {layout.end - 1}")
                 for run in _runs(outside)]
    inside = present[(present >= 0) & (present < layout.end)]
    missing = np.setdiff1d(np.arange(1, layout.end, dtype=np.int64), inside, assume_unique=True)
    for low, high in _runs(missing):
        kind = "face" if high < layout.identity_start else "identity" if low >= layout.identity_start \
            else "face or identity"
        problems.append((_keys_text(low, high), f"no {kind} record under this key: {where} faces are keys "
                                                f"1..{layout.identity_start - 1}, identities "
                                                f"{layout.identity_start}..{layout.end - 1}"))
    expected_start = 1
    identity_of = np.full(layout.identity_start, -1, dtype=np.int64)  # face key -> identity number
    for number, key in enumerate(layout.identity_keys):
        if key not in ranges:
            continue  # reported as missing
        found = ranges[key]
        if found is None:
            problems.append((key, "not an identity record: identity records hold two labels [start, end) of "
                                  "face keys and no image"))
            continue
        start, end = found
        if start != expected_start:
            gap = (f"faces {expected_start}..{start - 1} belong to no identity" if start > expected_start
                   else f"faces {start}..{expected_start - 1} belong to two identities")
            problems.append((key, f"range [{start}, {end}) does not start where the previous identity's ends "
                                  f"({expected_start}): {gap}"))
        if start == end:
            problems.append((key, f"range [{start}, {end}) holds no face"))
        if end > layout.identity_start:
            problems.append((key, f"range [{start}, {end}) reaches past the faces (they end at key "
                                  f"{layout.identity_start - 1})"))
        identity_of[max(start, 0):min(end, layout.identity_start)] = number
        expected_start = max(expected_start, end)
    if layout.identities and expected_start < layout.identity_start:
        problems.append((layout.identity_keys[-1], f"the identity ranges end at {expected_start}: faces "
                                                   f"{expected_start}..{layout.identity_start - 1} belong to no "
                                                   "identity"))
    if face_labels is not None:
        problems += _label_problems(face_labels, identity_of, layout)
    if len(present) != layout.end:  # last: the keys missing or outside, listed above, say more
        problems.append((HEADER_KEY, f"{where} {layout.end} records (faces 1..{layout.identity_start - 1}, "
                                     f"identities {layout.identity_start}..{layout.end - 1}), the .idx lists "
                                     f"{len(present)}"))
    merged: dict[object, list[str]] = {}  # one entry per place, as every check reports
    for where, what in problems:
        merged.setdefault(where, []).append(what)
    return [(where, "; ".join(whats)) for where, whats in merged.items()]


def _label_problems(face_labels: tuple[np.ndarray, np.ndarray], identity_of: np.ndarray,
                    layout: FaceLayout) -> list[tuple[object, str]]:
    face_keys, labels = (np.asarray(a) for a in face_labels)
    inside = (face_keys >= 1) & (face_keys < layout.identity_start)
    face_keys, labels = face_keys[inside], labels[inside].astype(np.float64)
    expected = identity_of[face_keys]
    wrong = (expected >= 0) & (labels != expected)
    problems = []
    for key, label, identity in zip(face_keys[wrong].tolist(), labels[wrong].tolist(), expected[wrong].tolist(),
                                    strict=True):
        problems.append((key, f"label {label:g}, but the face lies in the range of identity record "
                              f"{layout.identity_start + identity}, identity {identity}, whose faces are class "
                              f"{identity}"))
    return problems


# -- verification sets -----------------------------------------------------------------------------------

_ALLOWED_DTYPES = frozenset({np.dtype(np.uint8), np.dtype(np.bool_)})


def _dtype(spec: str | bytes, align: bool = False, copy: bool = True) -> np.dtype:
    dtype = np.dtype(spec.decode("latin1") if isinstance(spec, bytes) else spec)
    if dtype not in _ALLOWED_DTYPES:
        raise pickle.UnpicklingError(f"numpy arrays of {dtype} are not allowed (only uint8 images and bools)")
    return dtype


_NDARRAY = object()  # stands for numpy.ndarray in a pickle: only ever an argument of _reconstruct, never called


def _reconstruct(cls: object, shape: tuple, typecode: str | bytes) -> np.ndarray:
    if cls is not _NDARRAY:
        raise pickle.UnpicklingError(f"only plain numpy arrays are allowed, not {cls!r}")
    return np.ndarray.__new__(np.ndarray, shape, np.uint8)


def _frombuffer(buffer: bytes, dtype: np.dtype, shape: tuple, order: str) -> np.ndarray:
    """Protocol 5's way of pickling an array; ``dtype`` went through :func:`_dtype` already."""
    if np.dtype(dtype) not in _ALLOWED_DTYPES or order not in ("C", "F"):
        raise pickle.UnpicklingError(f"numpy arrays of {dtype} are not allowed (only uint8 images and bools)")
    return np.frombuffer(bytes(buffer), dtype=dtype).reshape(shape, order=order)


def _scalar(dtype: np.dtype, data: bytes | str) -> np.bool_:
    if dtype != np.dtype(np.bool_):
        raise pickle.UnpicklingError(f"numpy scalars of {dtype} are not allowed (only bools)")
    raw = data.encode("latin1") if isinstance(data, str) else data
    return np.frombuffer(raw, np.bool_, count=1)[0]


def _latin1(text: str, encoding: str = "latin1") -> bytes:
    if encoding not in ("latin1", "latin-1"):
        raise pickle.UnpicklingError(f"_codecs.encode with {encoding!r} is not allowed (bytes pickle as latin1)")
    return text.encode("latin1")


_ALLOWED_GLOBALS: dict[tuple[str, str], Any] = {
    ("_codecs", "encode"): _latin1,  # bytes in protocol-2 pickles written by Python 3
    ("builtins", "bytearray"): bytearray,
    ("__builtin__", "bytearray"): bytearray,  # its name in protocol-2 pickles
    ("numpy", "ndarray"): _NDARRAY,
    ("numpy", "dtype"): _dtype,
    **{(f"numpy.{core}.{module}", name): function for core in ("core", "_core")
       for module, name, function in (("multiarray", "_reconstruct", _reconstruct),
                                      ("multiarray", "scalar", _scalar), ("numeric", "_frombuffer", _frombuffer))},
}


class _VerificationUnpickler(pickle.Unpickler):
    """Makes only the objects of :data:`_ALLOWED_GLOBALS` (numpy arrays checked by dtype); refuses any other."""

    def find_class(self, module: str, name: str) -> Any:
        allowed = _ALLOWED_GLOBALS.get((module, name))
        if allowed is None:
            raise pickle.UnpicklingError(f"{module}.{name} is not allowed in a verification set")
        return allowed


def _image_bytes(item: object, index: int, where: str) -> bytes:
    if isinstance(item, (bytes, bytearray)):
        return bytes(item)
    if isinstance(item, np.ndarray) and item.dtype == np.uint8:
        return item.tobytes()
    raise VerificationSetError(f"{where}: image {index} is a {type(item).__name__}, not encoded image bytes")


def parse_verification_pickle(data: bytes, path: str | os.PathLike | None = None) -> tuple[list[bytes], np.ndarray]:
    """``(encoded images, issame)`` from the bytes of a verification set; see the module doc.

    ``issame[k]`` tells whether images ``2k`` and ``2k + 1`` show the same
    person. Raises :class:`~mxrec.errors.VerificationSetError` naming
    ``path`` for anything else, a forbidden object included.
    """
    where = os.fspath(path) if path is not None else "<verification set>"
    try:
        loaded = _VerificationUnpickler(io.BytesIO(data), encoding="bytes").load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, IndexError,
            KeyError, OverflowError, MemoryError) as exc:
        raise VerificationSetError(f"{where}: not a verification set pickle ({type(exc).__name__}: {exc})") from None
    if not isinstance(loaded, (tuple, list)) or len(loaded) != 2:
        raise VerificationSetError(f"{where}: expected a pair (images, issame), got a {type(loaded).__name__}")
    images, issame = loaded
    if not isinstance(images, (list, tuple)):
        raise VerificationSetError(f"{where}: the images are a {type(images).__name__}, not a list")
    if isinstance(issame, np.ndarray) and issame.dtype == np.bool_ and issame.ndim == 1:
        same = issame.copy()
    elif isinstance(issame, (list, tuple)) and all(isinstance(v, (bool, np.bool_)) for v in issame):
        same = np.array(issame, dtype=np.bool_)
    else:
        raise VerificationSetError(f"{where}: issame must be a list of bools, got a {type(issame).__name__}")
    if len(images) != 2 * len(same):
        raise VerificationSetError(f"{where}: {len(images)} images for {len(same)} pairs (2 images a pair)")
    return [_image_bytes(item, i, where) for i, item in enumerate(images)], same
