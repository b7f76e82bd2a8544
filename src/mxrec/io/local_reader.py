"""The fast reader: random access to the records of a local ``.rec`` file.

:class:`LocalRecordReader` (opened by :func:`~mxrec.io.opener.RecordReader` for a
path) maps the file into memory once and serves records by
position (``reader[i]``) or by key (``reader.read_key(k)``) straight from the
mapping: one copy per record (or none, with :meth:`LocalRecordReader.view`), no
seek, no file position. Having no position, it is safe to share between
threads, and a forked child can go on using the mapping it inherited. Pickled,
it carries only its path and index, and maps the file again on first use in the
receiving process, so it works in ``DataLoader`` workers under fork and spawn.

A URL (``s3://``, ``http://``, ``memory://``...) is read by
:class:`~mxrec.io.remote_reader.RemoteRecordReader`, the same contract
(:class:`~mxrec.io.records.Records`) with coalesced ranged requests; ``file://``
URLs and plain paths stay on the mapping.

The record offsets come from the ``.idx`` beside the file when there is one, or
else from one scan of the file (:func:`mxrec.format.framing.record_offsets`). Keys are
the ``.idx`` keys, or the record positions ``0..n-1`` after a scan. ``.idx``
offsets outside the file are rejected on open; whether an offset really starts
a record is checked when that record is read (its part header is parsed anyway),
so opening costs no pass over the data. ``mxrec verify`` checks every offset.

When the file has checksums (its ``NAME.checksums`` sidecar, or those a
shard set's manifest lists: :mod:`mxrec.format.checksums`), each block is
checked the first time a record in it is read (:mod:`mxrec.io.checksummed`): a
damaged block is a :class:`~mxrec.errors.ChecksumError` naming the bytes and the
records, never a wrong record.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterator, Sequence
from typing import Literal

import numpy as np

from mxrec.errors import ClosedFileError, IndexFileError, RecordFormatError, RecordPositionError
from mxrec.format import framing
from mxrec.format.checksums import BlockChecksums
from mxrec.format.idx import Index, IntKeys, KeyType, index_path_for
from mxrec.io.checksummed import local_verifier, records_between
from mxrec.io.index import check_offset_range, read_index, resolve_index
from mxrec.io.keys import KeyStore, check_duplicates_rule
from mxrec.io.records import Records
from mxrec.storage.filesystem import StorageOptions, local_path, storage_of
from mxrec.storage.memory_map import map_file, prefault, release

_unpack_part_header = framing.PART_HEADER.unpack_from
_MAGIC = framing.MAGIC
_FULL_LIMIT = framing.FULL_LIMIT
_ITER_BLOCK = 4096  # records whose headers iteration reads at once
_PREFAULT_SPAN = 256 << 20  # bytes fetch maps ahead at most (an .idx may skip records: their bytes are not wanted)


class LocalRecordReader(Records):
    """Random access to the records of a local ``.rec`` file, by position or by key.

    ``reader[i]`` is the record at position ``i`` (``.idx`` order, or file
    order after a scan); ``len(reader)`` counts records; iterating yields every
    payload in position order. :func:`~mxrec.io.opener.RecordReader` opens
    this reader for a local path and the remote one for a URL.

    Parameters
    ----------
    path
        The local ``.rec`` file (a path or a ``file://`` URL).
    index, key_type, duplicates, strict
        As :func:`~mxrec.io.opener.RecordReader` takes them (the ``.idx``, how its keys read, the rule for a
        repeated key, and whether a scan steps over damaged framing, keeping the first fault in :attr:`damage`).
    checksums
        The file's checksums; ``None`` (default): its sidecar
        ``NAME.checksums`` if there is one; ``True``: the sidecar is required;
        ``False``: none are checked.
    storage
        The storage settings the dataset was opened with (carried for whoever
        reads it: a local file needs none).

    Raises
    ------
    RecordFormatError
        The framing is damaged (with ``strict=True``).
    ChecksumError
        The checksums are malformed or belong to another version of the file.
    IndexFileError
        The ``.idx`` is malformed, disagrees with the ``.rec``, or is missing
        with ``index=True``.
    OptionError
        ``duplicates`` is neither ``"error"`` nor ``"last"``.
    """

    def __init__(self, path: str | os.PathLike, index: str | os.PathLike | bool | None = None,
                 key_type: KeyType = int, *, duplicates: Literal["error", "last"] = "error",
                 strict: bool = True, checksums: BlockChecksums | bool | None = None,
                 storage: StorageOptions = None) -> None:
        self.path = local_path(path)
        self.storage = storage_of(storage)
        check_duplicates_rule(duplicates)
        if index is True:
            index = index_path_for(self.path)
            if not os.path.exists(index):
                raise IndexFileError(index, f"no .idx beside {self.path} (index=True asks for it)")
        if isinstance(index, str):
            index = local_path(index)
        self.index_path: str | None = None if index is False else resolve_index(self.path, index)
        self.key_type = key_type
        self.duplicates = duplicates
        self.strict = strict
        self.damage: RecordFormatError | None = None
        self._closed = False
        self._buf: mmap.mmap | bytes | None = map_file(self.path)
        try:
            if self.index_path is not None:
                parsed = read_index(self.index_path, key_type, allow_duplicates=duplicates == "last")
                check_offset_range(parsed.offsets, parsed.keys, len(self._buf), self.path, self.index_path)
            else:
                parsed = self._scan()
            self.keys: IntKeys | list = parsed.keys
            self.offsets: np.ndarray = parsed.offsets
            self._verifier = local_verifier(self.path, len(self._buf), checksums, self._records_between)
        except BaseException:
            self.close()
            raise
        self._key_store = KeyStore(parsed.keys)
        self._table = memoryview(parsed.offsets)  # item access gives ints, faster than numpy's
        self._pending_check = self._check if self._verifier is not None else None

    def _scan(self) -> Index:
        try:
            offsets = framing.record_offset_array(self._buf, path=self.path)
        except RecordFormatError as exc:
            if self.strict:
                raise
            spans, faults = framing.salvage_spans(self._buf, self.path)
            self.damage = faults[0] if faults else exc
            offsets = [span.offset for span in spans]
        return Index(IntKeys(range(len(offsets))), np.asarray(offsets, dtype=np.int64), increasing=True)

    # -- state -------------------------------------------------------------

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_buf"] = None
        del state["_table"], state["_pending_check"]
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._table = memoryview(self.offsets)
        self._pending_check = self._check if self._verifier is not None else None

    def _records_between(self, start: int, end: int) -> str:
        return records_between(self.offsets, self.keys, start, end)

    def _check(self, buf: mmap.mmap | bytes, start: int, end: int, position: int = -1) -> None:
        """Check the cells under bytes ``[start, end)`` (the record at ``position``, when given) not checked yet;
        once all are, reading checks no more."""
        verifier = self._verifier
        verifier.check_mapped(buf, start, end, position)
        if not verifier.unchecked:
            self._pending_check = None

    def _buffer(self) -> mmap.mmap | bytes:
        """The mapping, made on first use after unpickling."""
        if self._buf is None:
            if self._closed:
                raise ClosedFileError(f"{self.path}: reader is closed")
            self._buf = map_file(self.path)
        return self._buf

    def close(self) -> None:
        """Release the mapping. Idempotent. Reading afterwards raises :class:`ClosedFileError`."""
        release(self._buf)
        self._buf = None
        self._closed = True

    def __del__(self) -> None:
        release(self.__dict__.get("_buf"))

    # -- reading -----------------------------------------------------------

    def __len__(self) -> int:
        return len(self._table)

    def __getitem__(self, position: int) -> bytes:
        buf, start, end = self._whole_part(position)
        return buf[start:end] if end >= 0 else self._decode(buf, position)

    def _whole_part(self, position: int) -> tuple[mmap.mmap | bytes, int, int]:
        """The mapping and where in it the record at ``position`` lies when it is one whole part (the fast path of
        ``[]`` and :meth:`view`), else ``(mapping, -1, -1)``: :meth:`_decode` reads it the careful way."""
        buf = self._buf if self._buf is not None else self._buffer()
        try:
            offset = self._table[position]
        except IndexError:
            raise self._out_of_range(position) from None
        magic, lrec = _unpack_part_header(buf, offset)
        end = offset + 8 + lrec
        if magic == _MAGIC and lrec < _FULL_LIMIT and end + (-lrec & 3) <= len(buf):
            if self._pending_check is not None:
                self._pending_check(buf, offset, end, position)
            return buf, offset + 8, end
        return buf, -1, -1

    read = __getitem__

    def _out_of_range(self, position: object) -> RecordPositionError:
        return RecordPositionError(f"{self.path}: record {position} out of range for {len(self._table)} records")

    def _decode(self, buf: mmap.mmap | bytes, position: int) -> bytes:
        """The record at ``position`` the careful way: multi-part records, and errors that name the key."""
        offset = self._table[position]
        try:
            payload, after = framing.decode_record(buf, offset, self.path)
        except RecordFormatError as exc:
            if self._pending_check is not None:  # damaged bytes are named as such, before what they broke
                self._pending_check(buf, offset, min(len(buf), max(offset, exc.offset) + 8))
            if self.index_path is not None and not framing.is_record_start(buf, offset):
                raise IndexFileError(
                    self.index_path, f"key {self.keys[position]!r}: offset {offset} is not the start of a "
                    f"record in {self.path}: {exc.reason}", key=self.keys[position]) from None
            raise
        if self._pending_check is not None:
            self._pending_check(buf, offset, after, position)
        return payload

    def view(self, position: int) -> memoryview:
        """The record at ``position`` without a copy (a copy only for multi-part records).

        The view points into the file mapping: keep the reader open while you use it.
        """
        buf, start, end = self._whole_part(position)
        return memoryview(buf)[start:end] if end >= 0 else memoryview(self._decode(buf, position))

    def __iter__(self) -> Iterator[bytes]:
        buf = self._buffer()
        size = len(buf)
        words = np.frombuffer(buf, dtype="<u4", count=size // 4) if size else np.empty(0, np.uint32)
        try:
            # Part headers are read a block at a time with numpy; the loop only slices.
            for first in range(0, len(self.offsets), _ITER_BLOCK):
                offsets = self.offsets[first:first + _ITER_BLOCK]
                at = offsets // 4
                lrec = words[at + 1].astype(np.int64)
                ends = offsets + 8 + lrec
                whole = (words[at] == _MAGIC) & (lrec < _FULL_LIMIT) & (ends + (-lrec & 3) <= size)
                if self._pending_check is not None and len(offsets):
                    self._pending_check(buf, int(offsets.min()), int(np.minimum(ends, size).max()))
                for position, (start, end, ok) in enumerate(
                        zip((offsets + 8).tolist(), ends.tolist(), whole.tolist(), strict=True), first):
                    yield buf[start:end] if ok else self._decode(buf, position)
        finally:
            del words

    def fetch(self, positions: Sequence[int] | np.ndarray) -> list[bytes | memoryview]:
        """Views of the records at ``positions``, in that order (no copy; keep the reader open while you use them).

        Consecutive positions of records stored in order (a converter's block) have their pages mapped in one call
        first (:func:`~mxrec.storage.memory_map.prefault`): whoever copies the views then copies at ``cp``'s speed.
        """
        at = np.asarray(positions, dtype=np.int64)
        count = len(at)
        if count > 1 and self._buf is not None and at[-1] - at[0] == count - 1 and 0 <= at[0] < at[-1] < len(self):
            start, stop = self._table[int(at[0])], self._table[int(at[-1])]
            if start < stop <= start + _PREFAULT_SPAN:
                prefault(self._buf, start, stop)
        view = self.view
        return [view(p) for p in at.tolist()]

    def read_batch(self, positions: Sequence[int] | np.ndarray) -> list[bytes]:
        """The records at ``positions``, in that order."""
        read = self.__getitem__
        return [read(p) for p in np.asarray(positions, dtype=np.int64).tolist()]

    def position(self, key: object) -> int:
        """Position of the record with ``key`` (the last one when duplicates are allowed)."""
        return self._key_store.position_in(self.index_path or self.path, key)

    @property
    def nbytes(self) -> int:
        """Size of the ``.rec`` file in bytes."""
        return len(self._buffer())

    def __repr__(self) -> str:
        return f"LocalRecordReader({self.path!r}, {len(self)} records, index={self.index_path!r})"
