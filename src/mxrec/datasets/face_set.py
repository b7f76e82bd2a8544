"""InsightFace face sets on disk: which records of a reader are the faces, and whose.

The layout itself is described (and checked) in :mod:`mxrec.format.insightface`.

:func:`read_face_set` is what every reader of training samples asks
(``ImageRecordIter``, ``ImageIter``, the PyTorch datasets): given a
:class:`~mxrec.io.records.Records` it returns the positions of the face
records in key order and the identity of each, or ``None`` for a plain
dataset. It reads the header record (key 0) and the identity records only, a
few thousand to a few hundred thousand small records, never the faces.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mxrec.datasets.subset import RecordSubset
from mxrec.errors import HeaderError, LayoutError, ParameterError
from mxrec.format.header import label_array, unpack_header
from mxrec.format.insightface import HEADER_KEY, FaceLayout, header_layout, key_range, layout_problems, resolve_layout
from mxrec.io.records import Records


@dataclass(frozen=True)
class FaceSet:
    """The face records of an InsightFace set, as a reader sees them.

    ``positions[i]`` is the reader position of face ``i`` (faces in key order,
    keys ``1 .. A-1``); ``labels[i]`` its identity: the number (from 0) of the
    identity record whose range holds it. In a consistent set that is each
    face record's own label too (``mxrec verify`` checks it), which is what
    the iterators hand out, as InsightFace's loaders do.

    Parameters
    ----------
    layout
        How the set's records are laid out.
    positions
        ``int64``: the reader position of each face.
    labels
        ``int64``: the identity of each face.
    ranges
        ``(identities, 2)`` ``int64``: the ``[start, end)`` face keys of each identity.
    """

    layout: FaceLayout
    positions: np.ndarray  # int64
    labels: np.ndarray  # int64
    ranges: np.ndarray  # (identities, 2) int64: [start, end) face keys of each identity

    def __len__(self) -> int:
        return len(self.positions)


def _record_facts(reader: Records, position: int, payload: bytes | None = None
                  ) -> tuple[int, list[float], int] | None:
    """``(flag, labels, image bytes)`` of the record at ``position`` (or of its ``payload``, already read);
    ``None`` if it holds no IRHeader."""
    payload = reader[position] if payload is None else payload
    try:
        header, start = unpack_header(payload)
    except HeaderError:
        return None
    return header.flag, label_array(header).tolist(), len(payload) - start


def read_face_set(reader: Records, layout: str = "auto") -> FaceSet | None:
    """The faces of an InsightFace set read by ``reader``; ``None`` for a plain dataset.

    The layout needs the integer ``.idx`` keys (InsightFace always ships an
    ``.idx``): without one a set is plain.

    Parameters
    ----------
    reader
        An open dataset (:func:`~mxrec.datasets.shard_set.open_dataset`).
    layout
        ``"auto"`` (an InsightFace set when the record under key 0 is a header
        record), ``"insightface"`` (it must be one) or ``"plain"`` (always
        ``None``).

    Returns
    -------
    FaceSet or None
        The faces' reader positions and identities, or ``None``.

    Raises
    ------
    LayoutError
        An inconsistent layout (a face or identity record missing, ranges that
        leave faces out or overlap), naming the first problem (``mxrec verify``
        lists them all); or no face set with ``layout="insightface"``.
    """
    resolve_layout(layout)
    if layout == "plain":
        return None
    index_path = reader.index_path  # a shard set has one .idx per shard: never a face set
    where = index_path or reader.path
    usable = index_path is not None and all(type(k) is int for k in reader.keys[:1])
    header_at = _first_position(reader.keys, HEADER_KEY) if usable else -1
    facts = _record_facts(reader, header_at) if header_at >= 0 else None
    faces = None if facts is None else header_layout(*facts)
    if faces is None:
        if layout == "insightface":
            why = ("its keys are not integers from an .idx (the layout is found through them)" if not usable
                   else f"no record under key {HEADER_KEY}" if header_at < 0 else
                   f"key {HEADER_KEY} is no header record (flag 2, labels [first identity key, end], no image)")
            raise LayoutError(f"{where}: not an InsightFace face set: {why}")
        return None
    keys = KeyPositions(reader)  # only now: sorting millions of keys is for face sets, not every plain set
    ranges = {}
    found = [(key, at) for key, at in zip(faces.identity_keys, keys.positions(faces.identity_keys).tolist(),
                                          strict=True) if at >= 0]
    # one batch: a remote set's identity records (one per identity, 85 742 on MS1M) arrive in a few coalesced reads
    payloads = reader.read_batch([at for _, at in found])
    for (key, at), payload in zip(found, payloads, strict=True):
        identity = _record_facts(reader, at, payload)
        ranges[key] = None if identity is None else key_range(*identity)
    problems = layout_problems(faces, keys.keys, ranges)
    if problems:
        where_key, what = problems[0]
        more = f" (and {len(problems) - 1} more problems: mxrec verify lists them)" if len(problems) > 1 else ""
        raise LayoutError(f"{where}: {where_key}: {what}{more}")
    bounds = np.array([ranges[key] for key in faces.identity_keys], dtype=np.int64).reshape(-1, 2)
    labels = np.repeat(np.arange(len(bounds), dtype=np.int64), bounds[:, 1] - bounds[:, 0])
    return FaceSet(faces, keys.positions(faces.face_keys), labels, bounds)


def _first_position(keys: Sequence, key: int) -> int:
    """The position of the first ``key`` in ``keys``, ``-1`` if absent: one C-speed scan, no dict or sort."""
    try:
        return keys.index(key)
    except ValueError:
        return -1


class KeyPositions:
    """Reader positions of integer ``.idx`` keys, found by binary search (no dict of millions of keys)."""

    def __init__(self, reader: Records) -> None:
        self.keys = np.asarray(reader.keys, dtype=np.int64)
        self._order = np.argsort(self.keys, kind="stable")
        self._sorted = self.keys[self._order]

    def positions(self, wanted: Sequence[int]) -> np.ndarray:
        """The position of each key in ``wanted`` (int64), ``-1`` where it is absent."""
        if isinstance(wanted, range):
            wanted = np.arange(wanted.start, wanted.stop, dtype=np.int64)
        wanted = np.asarray(wanted, dtype=np.int64)
        if not len(self._sorted):
            return np.full(len(wanted), -1, np.int64)
        at = np.minimum(np.searchsorted(self._sorted, wanted), len(self._sorted) - 1)
        return np.where(self._sorted[at] == wanted, self._order[at], -1).astype(np.int64)


def check_layout_name(layout: str) -> str:
    """``layout`` if it is one of the layouts, else :class:`~mxrec.errors.ParameterError` (for the iterators)."""
    try:
        return resolve_layout(layout)
    except ValueError as exc:
        raise ParameterError(str(exc)) from None


PROPERTY_FILE = "property"  # InsightFace's "identities,height,width" beside train.rec


def read_property(folder: str | os.PathLike) -> tuple[int, int, int] | None:
    """``(identities, height, width)`` from the ``property`` file in ``folder``; ``None`` when there is none.

    Raises :class:`~mxrec.errors.LayoutError` naming the file when it does not hold three integers.
    """
    path = os.path.join(os.fspath(folder), PROPERTY_FILE)
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read().strip()
    try:
        identities, height, width = (int(v) for v in text.split(","))
    except ValueError:
        raise LayoutError(f"{path}: expected 'identities,height,width', got {text[:80]!r}") from None
    return identities, height, width


@dataclass(frozen=True)
class Samples:
    """``records``: one record per sample; ``faces``: the face set they are the faces of, or ``None``; ``owned``:
    the dataset was opened for these samples (:func:`~mxrec.datasets.samples.open_samples` from a spec), so
    :meth:`close` closes it; a dataset the caller opened stays open for the caller's other uses."""

    records: Records
    faces: FaceSet | None
    owned: bool = False

    def close(self) -> None:
        """Close the records if they were opened for these samples (``owned``)."""
        if self.owned:
            self.records.close()


def samples_of(reader: Records, layout: str = "auto") -> Samples:
    """The samples of an opened dataset: its face records (a :class:`~mxrec.datasets.subset.RecordSubset`) when it
    is an InsightFace face set, else every record.

    Parameters
    ----------
    reader
        The dataset.
    layout
        ``"auto"``, ``"insightface"`` (it must be a face set) or ``"plain"`` (every record).

    Returns
    -------
    Samples
        The samples, and the face set they are the faces of.

    Raises
    ------
    ParameterError
        ``layout`` is not one of those.
    LayoutError
        ``layout="insightface"`` and the dataset is no face set, or a broken one.
    """
    check_layout_name(layout)
    faces = read_face_set(reader, layout)
    return Samples(reader if faces is None else RecordSubset(reader, faces.positions), faces)
