"""``.idx`` files on disk: finding, reading, writing, and rebuilding one by scanning its ``.rec``.

The text format itself (parsing, formatting, the ``data.rec`` -> ``data.idx``
naming rule) is :mod:`mxrec.format.idx`; this module does the file I/O.

* :func:`resolve_index` is the one place that decides which ``.idx`` goes with
  a ``.rec``: the one given, else the one beside it if it exists, else none.
* :func:`read_index` raises on a malformed file; :func:`try_read_index` is for
  callers that carry on without one (the doctor, repair) and want the error.
* :func:`scan_index` / :func:`build_index` rebuild a lost or broken ``.idx``.

Every path may be a URL (:mod:`mxrec.io.filesystem`); an ``.idx`` written to
one is uploaded whole when complete.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

import numpy as np

from mxrec.errors import IndexFileError
from mxrec.format import framing
from mxrec.format.header import ID_OFFSET, IRHEADER_SIZE
from mxrec.format.idx import Index, KeyType, format_index, index_path_for, parse_index
from mxrec.io.atomic import atomic_open
from mxrec.io.filesystem import StorageOptions, exists, read_bytes
from mxrec.io.mapping import mapped

KEY_SOURCES = ("auto", "position", "id")


def resolve_index(rec_path: str | os.PathLike, idx_path: str | os.PathLike | None = None,
                  storage_options: StorageOptions = None) -> str | None:
    """The ``.idx`` of ``rec_path``: ``idx_path`` if given, else the one beside the ``.rec`` if it exists, else None."""
    if idx_path is not None:
        return os.fspath(idx_path)
    candidate = index_path_for(rec_path)
    return candidate if exists(candidate, storage_options) else None


def read_index(path: str | os.PathLike, key_type: KeyType = int, allow_duplicates: bool = True,
               storage_options: StorageOptions = None) -> Index:
    """Read and parse an ``.idx`` file; raises :class:`~mxrec.errors.IndexFileError` naming the bad line."""
    return parse_index(read_bytes(os.fspath(path), storage_options), key_type, path, allow_duplicates)


def try_read_index(path: str | os.PathLike, key_type: KeyType = int,
                   storage_options: StorageOptions = None) -> tuple[Index | None, IndexFileError | None]:
    """``(index, None)``, or ``(None, error)`` when the file does not parse (callers that can do without one)."""
    try:
        return read_index(path, key_type, storage_options=storage_options), None
    except IndexFileError as exc:
        return None, exc


def write_index(path: str | os.PathLike, keys: Iterable[object], offsets: Iterable[int],
                storage_options: StorageOptions = None) -> None:
    """Write an ``.idx`` file atomically (see :mod:`mxrec.io.atomic`)."""
    text = format_index(keys, offsets)
    with atomic_open(path, "w", encoding="utf-8", newline="", storage_options=storage_options) as f:
        f.write(text)


def scan_index(rec_path: str | os.PathLike, keys: str = "auto",
               storage_options: StorageOptions = None) -> tuple[Index, str]:
    """Build an index by scanning a ``.rec``; return it and the key source used.

    ``keys``: ``"position"`` numbers records 0, 1, ... in file order; ``"id"``
    uses each record's ``IRHeader.id`` (im2rec and InsightFace write the key
    there); ``"auto"`` uses the ids when every record has a header and the ids
    are unique, else positions. Raises :class:`RecordFormatError` at damaged
    framing (``mxrec verify --repair`` salvages such files).
    """
    if keys not in KEY_SOURCES:
        raise ValueError(f"keys must be one of {KEY_SOURCES}, not {keys!r}")
    rec_path = os.fspath(rec_path)
    with mapped(rec_path, storage_options) as buf:
        offsets = framing.record_offsets(buf, path=rec_path)
        if keys == "position":
            return Index(list(range(len(offsets))), np.array(offsets, dtype=np.int64), True), "position"
        ids = _header_ids(buf, offsets)
    if ids is not None and len(set(ids)) == len(ids):
        return Index(ids, np.array(offsets, dtype=np.int64)), "id"
    if keys == "id":
        why = "a record is too short for an IRHeader" if ids is None else "record ids are not unique"
        raise IndexFileError(rec_path, f"cannot key the index by record id: {why}")
    return Index(list(range(len(offsets))), np.array(offsets, dtype=np.int64), True), "position"


def _header_ids(buf: framing.Buffer, offsets: list[int]) -> list[int] | None:
    """``IRHeader.id`` of each record, or None if some record cannot hold a header."""
    ids = []
    id_at = framing.PART_HEADER_SIZE + ID_OFFSET
    for offset in offsets:
        _, lrec = framing.PART_HEADER.unpack_from(buf, offset)
        if lrec < framing.FULL_LIMIT:  # single part: the id is at a fixed place
            if lrec < IRHEADER_SIZE:
                return None
            ids.append(int.from_bytes(buf[offset + id_at:offset + id_at + 8], "little"))
            continue
        payload, _ = framing.decode_record(buf, offset)
        if len(payload) < IRHEADER_SIZE:
            return None
        ids.append(int.from_bytes(payload[ID_OFFSET:ID_OFFSET + 8], "little"))
    return ids


def build_index(rec_path: str | os.PathLike, idx_path: str | os.PathLike | None = None,
                keys: str = "auto", storage_options: StorageOptions = None) -> tuple[Index, str]:
    """Scan ``rec_path`` and write its ``.idx`` (default: beside it) atomically; see :func:`scan_index`."""
    index, source = scan_index(rec_path, keys, storage_options)
    write_index(idx_path if idx_path is not None else index_path_for(rec_path), index.keys, index.offsets,
                storage_options)
    return index, source
