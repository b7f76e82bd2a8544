"""The fast reader: random access to the records of a local ``.rec`` file.

:class:`RecordReader` maps the file into memory once and serves records by
position (``reader[i]``) or by key (``reader.read_key(k)``) straight from the
mapping: one copy per record (or none, with :meth:`RecordReader.view`), no
seek, no file position. Having no position, it is safe to share between
threads, and a forked child can go on using the mapping it inherited. Pickled,
it carries only its path and index, and maps the file again on first use in the
receiving process, so it works in ``DataLoader`` workers under fork and spawn.

The record offsets come from the ``.idx`` beside the file when there is one
(checked against the file on open: every offset must be a record start), or
else from one scan of the file (:func:`mxrec.framing.record_offsets`). Keys are
the ``.idx`` keys, or the record positions ``0..n-1`` after a scan.
"""

from __future__ import annotations

import array
import mmap
import os
from collections.abc import Iterator, Sequence
from typing import Literal

import numpy as np

from mxrec import framing
from mxrec.errors import (
    ClosedFileError,
    HeaderError,
    IndexFileError,
    RecordFormatError,
    RecordKeyError,
)
from mxrec.header import HEADER_SIZE, IRHeader, unpack, unpack_header
from mxrec.index import Index, KeyType, index_path_for, read_index
from mxrec.mapping import map_file, release


def check_offsets(buf: mmap.mmap | bytes, offsets: np.ndarray, keys: Sequence,
                  path: str, index_path: str | None) -> np.ndarray:
    """Check that every offset is a record start; return the ``lrec`` word of each record.

    Raises :class:`IndexFileError` naming the first key whose offset is past the
    end, unaligned, or not at a part header that can open a record.
    """
    size = len(buf)
    if len(offsets) == 0:
        return np.empty(0, np.uint32)
    bad_range = (offsets < 0) | (offsets + framing.HEADER_SIZE > size) | (offsets % 4 != 0)
    if bad_range.any():
        i = int(np.flatnonzero(bad_range)[0])
        off = int(offsets[i])
        why = "is past the end of" if off + framing.HEADER_SIZE > size else "is not 4-byte aligned in"
        raise IndexFileError(
            index_path, f"key {keys[i]!r}: offset {off} {why} {path} ({size} bytes)", key=keys[i])
    words = np.frombuffer(buf, dtype="<u4", count=size // 4)
    try:
        at = offsets // 4
        magic = words[at]
        lrec = words[at + 1].copy()
    finally:
        del words
    bad = (magic != framing.MAGIC) | ((lrec >> framing.LENGTH_BITS) > framing.CFLAG_START)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise IndexFileError(
            index_path, f"key {keys[i]!r}: offset {int(offsets[i])} is not the start of a record in {path}",
            key=keys[i])
    return lrec


class RecordReader:
    """Random access to the records of a local ``.rec`` file.

    ``index``: ``None`` uses the ``.idx`` beside the file if it exists and scans
    otherwise; a path uses that ``.idx``; ``False`` always scans. ``key_type``
    converts ``.idx`` keys (``int`` by default, ``str`` for string keys).
    ``duplicates``: ``"error"`` (default) rejects an ``.idx`` with a repeated
    key; ``"last"`` keeps MXNet's rule (the last line wins for key look-ups).
    ``strict``: when ``False``, a scan that meets damaged framing skips over
    the damage (resync rule), keeps every intact record, and stores the first
    fault in :attr:`damage` instead of raising.

    ``reader[i]`` is the record at position ``i`` (``.idx`` order, or file
    order after a scan); ``len(reader)`` counts records; iterating yields every
    payload in position order.
    """

    def __init__(self, path: str | os.PathLike, index: str | os.PathLike | bool | None = None,
                 key_type: KeyType = int, *, duplicates: Literal["error", "last"] = "error",
                 strict: bool = True) -> None:
        self.path = os.fspath(path)
        if duplicates not in ("error", "last"):
            raise ValueError(f"duplicates must be 'error' or 'last', not {duplicates!r}")
        if index is None:
            candidate = index_path_for(self.path)
            index = candidate if os.path.exists(candidate) else False
        self.index_path: str | None = None if index is False or index is True else os.fspath(index)
        self.key_type = key_type
        self.duplicates = duplicates
        self.strict = strict
        self.damage: RecordFormatError | None = None
        self._closed = False
        self._buf: mmap.mmap | bytes | None = map_file(self.path)
        try:
            if self.index_path is not None:
                parsed = read_index(self.index_path, key_type, allow_duplicates=duplicates == "last")
            else:
                parsed = self._scan()
            self._set_index(parsed)
        except BaseException:
            self.close()
            raise

    def _scan(self) -> Index:
        try:
            offsets = framing.record_offsets(self._buf, path=self.path)
        except RecordFormatError as exc:
            if self.strict:
                raise
            spans, faults = framing.salvage_spans(self._buf, self.path)
            self.damage = faults[0] if faults else exc
            offsets = [span.offset for span in spans]
        return Index(list(range(len(offsets))), np.array(offsets, dtype=np.int64))

    def _set_index(self, parsed: Index) -> None:
        self.keys: list = parsed.keys
        self.offsets: np.ndarray = parsed.offsets
        self._positions: dict | None = None
        self._build_tables()

    def _build_tables(self) -> None:
        """Per-position data start and length (-1: multi-part), checked against the mapped file."""
        lrec = check_offsets(self._buf, self.offsets, self.keys, self.path, self.index_path)
        lengths = (lrec & framing.LENGTH_MASK).astype(np.int64)
        lengths[(lrec >> framing.LENGTH_BITS) != framing.CFLAG_FULL] = -1
        self._starts = array.array("q", (self.offsets + framing.HEADER_SIZE).tobytes())
        self._lengths = array.array("q", lengths.tobytes())

    # -- state -------------------------------------------------------------

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        for derived in ("_buf", "_starts", "_lengths", "_positions"):
            state[derived] = None
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)

    def _buffer(self) -> mmap.mmap | bytes:
        """The mapping, made on first use after unpickling."""
        if self._buf is None:
            if self._closed:
                raise ClosedFileError(f"{self.path}: reader is closed")
            self._buf = map_file(self.path)
            self._build_tables()
        return self._buf

    def close(self) -> None:
        """Release the mapping. Idempotent. Reading afterwards raises :class:`ClosedFileError`."""
        release(self._buf)
        self._buf = None
        self._closed = True
        self._starts = self._lengths = None

    def __enter__(self) -> RecordReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        release(self.__dict__.get("_buf"))

    # -- reading -----------------------------------------------------------

    def __len__(self) -> int:
        return len(self.offsets)

    def __getitem__(self, position: int) -> bytes:
        buf = self._buf if self._buf is not None else self._buffer()
        start = self._starts[position]
        length = self._lengths[position]
        if length >= 0:
            return buf[start:start + length]
        return framing.decode_record(buf, start - framing.HEADER_SIZE, self.path)[0]

    read = __getitem__

    def view(self, position: int) -> memoryview:
        """The record at ``position`` without a copy (a copy only for multi-part records).

        The view points into the file mapping: keep the reader open while you use it.
        """
        buf = self._buf if self._buf is not None else self._buffer()
        start = self._starts[position]
        length = self._lengths[position]
        if length >= 0:
            return memoryview(buf)[start:start + length]
        return memoryview(self[position])

    def __iter__(self) -> Iterator[bytes]:
        buf = self._buffer()
        for start, length in zip(self._starts, self._lengths, strict=False):
            if length >= 0:
                yield buf[start:start + length]
            else:
                yield framing.decode_record(buf, start - framing.HEADER_SIZE, self.path)[0]

    def read_batch(self, positions: Sequence[int] | np.ndarray) -> list[bytes]:
        """The records at ``positions``, in that order."""
        buf = self._buf if self._buf is not None else self._buffer()
        starts, lengths = self._starts, self._lengths
        out = []
        for p in np.asarray(positions, dtype=np.int64).tolist():
            start, length = starts[p], lengths[p]
            if length >= 0:
                out.append(buf[start:start + length])
            else:
                out.append(framing.decode_record(buf, start - framing.HEADER_SIZE, self.path)[0])
        return out

    def position(self, key: object) -> int:
        """Position of the record with ``key`` (the last one when duplicates are allowed)."""
        positions = self._positions
        if positions is None:
            positions = self._positions = {k: i for i, k in enumerate(self.keys)}
        try:
            return positions[key]
        except KeyError:
            raise RecordKeyError(self.index_path or self.path, key) from None

    def read_key(self, key: object) -> bytes:
        """The record stored under ``key``."""
        return self[self.position(key)]

    def __contains__(self, key: object) -> bool:
        try:
            self.position(key)
        except RecordKeyError:
            return False
        return True

    def header(self, position: int) -> IRHeader:
        """The ``IRHeader`` of the record at ``position`` (copies only the header bytes)."""
        view = self.view(position)
        try:
            flag = int.from_bytes(view[:4], "little") if len(view) >= 4 else 0
            return unpack_header(bytes(view[:HEADER_SIZE + 4 * flag]))[0]
        except HeaderError as exc:
            raise HeaderError(f"{self.path}: record {self.keys[position]!r}: {exc}") from None
        finally:
            view.release()

    def unpack(self, position: int) -> tuple[IRHeader, bytes]:
        """``(IRHeader, rest)`` of the record at ``position``."""
        return unpack(self[position])

    def __repr__(self) -> str:
        return f"RecordReader({self.path!r}, {len(self)} records, index={self.index_path!r})"
