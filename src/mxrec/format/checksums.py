"""Checksums of a ``.rec`` file: CRC-32C per cell of its bytes, kept beside it, never inside it.

RecordIO has no checksum: a byte flipped on a disk or a store decodes as a wrong image, or fails far from its
cause. mxrec's writers record one CRC-32C (Castagnoli, as TFRecord uses per record) per *cell* of the ``.rec``'s
bytes, and its readers check each cell the first time they read it. The cells tile the file, each byte in exactly
one. Two layouts (``version`` of the sidecar):

* **version 2, record cells** (what mxrec writes): a cell per record, from the record's first part header to the
  next record's (its padding included; the first cell starts at byte 0, the last ends at the end of the file).
  Every read of whole records (a record, a shuffle block of them) is then whole cells: a reader checks exactly the
  bytes it fetched, whatever the block size or the order. The cells' lengths are stored with the CRCs, so the
  checksums need no ``.idx`` to be checked.
* **version 1, a byte grid** (what mxrec 0.x wrote; still read): cell ``n`` is bytes ``[n * B, min((n + 1) * B,
  size))`` of ``block_bytes`` ``B`` (1 MiB). A read of records is rounded out to whole cells, so a 256 KiB shuffle
  block costs the 1 MiB around it.

The ``.rec`` itself is untouched, so MXNet reads it byte for byte as before. A single file keeps its checksums in a
sidecar, ``NAME.checksums`` beside ``NAME.rec`` (as ``NAME.idx``)::

    {"format": "mxrec-checksums", "version": 2, "algorithm": "crc32c", "rec_bytes": 3145800, "cells": "records",
     "lengths": "<base64 of the little-endian uint32 cell lengths>", "crc32c": "<base64 of the uint32 CRCs>"}

    {"format": "mxrec-checksums", "version": 1, "algorithm": "crc32c", "rec_bytes": 3145800,
     "block_bytes": 1048576, "crc32c": "<base64 of the little-endian uint32 CRCs, one per block>"}

A shard set keeps each shard's in its manifest entry (the same fields less ``format``, ``version`` and
``rec_bytes``: :mod:`mxrec.format.manifest`). Record cells cost 8 bytes a record (about 11 in base64), a third to
half of what the ``.idx`` line of the record takes.

This module is the format (compute, parse, format, naming); checking as records are read is
:mod:`mxrec.io.checksummed`.
"""

from __future__ import annotations

import base64
import json
import os
from dataclasses import dataclass, field

import numpy as np
from crc32c import crc32c as _crc32c

from mxrec.errors import ChecksumError, MxrecError
from mxrec.format.framing import CFLAG_START, LENGTH_BITS, LENGTH_MASK, MAGIC, PART_HEADER, PART_HEADER_SIZE
from mxrec.format.idx import sidecar_path

FORMAT = "mxrec-checksums"
VERSION = 2
#: Sidecar versions read: 1 (a byte grid), 2 (record cells).
VERSIONS = (1, 2)
ALGORITHM = "crc32c"
#: The ``cells`` field of record cells.
RECORD_CELLS = "records"
SUFFIX = ".checksums"


def crc32c(data: bytes | bytearray | memoryview, value: int = 0) -> int:
    """The CRC-32C of ``data``, continuing from ``value`` (the CRC of the bytes before it)."""
    return _crc32c(data, value)


def checksums_path(rec_path: str | os.PathLike) -> str:
    """The sidecar of ``rec_path``: ``data/train.rec`` -> ``data/train.checksums``."""
    return sidecar_path(rec_path, SUFFIX)


def _b64(array: np.ndarray) -> str:
    return base64.b64encode(array.astype("<u4").tobytes()).decode("ascii")


@dataclass(frozen=True, eq=False)
class BlockChecksums:
    """The CRC-32C of every cell of a ``size``-byte file (see the module docstring).

    Parameters
    ----------
    size
        Bytes of the ``.rec``.
    starts
        Where each cell starts (``int64``, increasing, the first 0); a cell ends where the next starts, the last at
        ``size``.
    crcs
        One ``uint32`` per cell.
    block_bytes
        The grid's cell size for version-1 checksums; ``None`` for record cells.

    Raises
    ------
    MxrecError
        The cells do not tile ``size`` bytes, or there is not one CRC per cell.
    """

    size: int
    starts: np.ndarray = field(repr=False)
    crcs: np.ndarray = field(repr=False)
    block_bytes: int | None = None

    def __post_init__(self) -> None:
        starts = self.starts
        if self.size < 0 or len(starts) != len(self.crcs):
            raise MxrecError(f"checksums: {len(self.crcs)} CRCs for {len(starts)} cells of {self.size} bytes")
        if len(starts) and (starts[0] != 0 or starts[-1] >= max(self.size, 1) or np.any(np.diff(starts) <= 0)):
            raise MxrecError(f"checksums: the cells do not tile the file's {self.size} bytes")
        if not len(starts) and self.size:
            raise MxrecError(f"checksums: no cell for {self.size} bytes")

    @classmethod
    def grid(cls, size: int, block_bytes: int, crcs: np.ndarray) -> BlockChecksums:
        """Version-1 checksums: cells of ``block_bytes`` (the last one may be shorter).

        Raises
        ------
        MxrecError
            The number of CRCs does not match the size and block size.
        """
        if block_bytes < 1:
            raise MxrecError(f"checksums: need block_bytes >= 1, got {block_bytes}")
        expected = -(-size // block_bytes)
        if len(crcs) != expected:
            raise MxrecError(f"checksums: {len(crcs)} CRCs for {size} bytes in blocks of {block_bytes} (expected "
                             f"{expected})")
        return cls(size, np.arange(0, size, block_bytes, dtype=np.int64), np.asarray(crcs, np.uint32), block_bytes)

    @property
    def unit(self) -> str:
        """What a cell is called in messages: ``"record cell"`` or ``"block"``."""
        return "block" if self.block_bytes else "record cell"

    def __len__(self) -> int:
        return len(self.crcs)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, BlockChecksums) and (self.size, self.block_bytes) == (other.size, other.block_bytes)
                and np.array_equal(self.starts, other.starts) and np.array_equal(self.crcs, other.crcs))

    def describe(self) -> str:
        """The layout in words, for reports: ``"1200 record cell(s)"`` or ``"3 block(s) of 1048576 bytes"``."""
        if self.block_bytes:
            return f"{len(self)} block(s) of {self.block_bytes} bytes"
        return f"{len(self)} record cell(s)"

    def span(self, number: int) -> tuple[int, int]:
        """The bytes ``(start, end)`` of cell ``number``."""
        start = int(self.starts[number])
        return start, int(self.starts[number + 1]) if number + 1 < len(self.starts) else self.size

    def covering(self, start: int, end: int) -> range:
        """The cells holding bytes ``[start, end)``."""
        if end <= start or not len(self.starts):
            return range(0)
        if self.block_bytes:
            return range(start // self.block_bytes, (end - 1) // self.block_bytes + 1)
        first = int(np.searchsorted(self.starts, start, side="right")) - 1
        return range(max(first, 0), int(np.searchsorted(self.starts, end - 1, side="right")))

    def mismatch(self, number: int, data: bytes | bytearray | memoryview) -> int | None:
        """``None`` when ``data`` (cell ``number``'s bytes) has its CRC, else the CRC ``data`` has."""
        got = crc32c(data)
        return None if got == int(self.crcs[number]) else got

    def to_dict(self) -> dict:
        """The fields a sidecar or a manifest entry stores (``rec_bytes`` is the manifest's own field there)."""
        if self.block_bytes:
            return {"algorithm": ALGORITHM, "block_bytes": self.block_bytes, "crc32c": _b64(self.crcs)}
        lengths = np.diff(np.append(self.starts, self.size))
        if len(lengths) and int(lengths.max()) >= 1 << 32:
            raise MxrecError(f"checksums: a record of {int(lengths.max())} bytes is too long for record cells")
        return {"algorithm": ALGORITHM, "cells": RECORD_CELLS, "lengths": _b64(lengths), "crc32c": _b64(self.crcs)}

    @classmethod
    def from_dict(cls, data: object, size: int, where: str | os.PathLike | None) -> BlockChecksums:
        """The checksums of a ``size``-byte file from :meth:`to_dict`'s fields (either layout).

        Raises
        ------
        ChecksumError
            The fields are malformed, or do not describe a file of ``size`` bytes.
        """
        try:
            if data.get("algorithm", ALGORITHM) != ALGORITHM:  # type: ignore[union-attr]
                raise ChecksumError(where, f"checksum algorithm {data.get('algorithm')!r} is not supported "
                                           f"(this is {ALGORITHM})")
            # (not validate=True: six times slower, and a manifest holds a table per shard; a damaged table
            # decodes to the wrong number of values, refused below, or to CRCs that fail, named as such)
            crcs = np.frombuffer(base64.b64decode(data["crc32c"]), "<u4")  # type: ignore[index]
            if data.get("cells") == RECORD_CELLS:  # type: ignore[union-attr]
                lengths = np.frombuffer(base64.b64decode(data["lengths"]), "<u4")  # type: ignore[index]
                block_bytes = None
            else:
                block_bytes = int(data["block_bytes"])  # type: ignore[index]
        except ChecksumError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ChecksumError(where, f"not a checksum table: {exc}") from None
        if block_bytes is not None:
            if block_bytes < 1 or len(crcs) != -(-size // block_bytes):
                raise ChecksumError(where, f"the checksums describe {len(crcs)} blocks of {block_bytes} bytes, but "
                                           f"the .rec holds {size} bytes: they belong to another version of the file")
            return cls.grid(size, block_bytes, crcs)
        total = int(lengths.sum(dtype=np.int64))
        if len(lengths) != len(crcs) or total != size or np.any(lengths == 0):
            raise ChecksumError(where, f"the checksums describe {len(lengths)} records of {total} bytes in all, but "
                                       f"the .rec holds {size} bytes: they belong to another version of the file")
        starts = np.concatenate(([0], np.cumsum(lengths[:-1], dtype=np.int64))) if len(lengths) else lengths
        return cls(size, starts.astype(np.int64), crcs.astype(np.uint32))


def compute(buf: bytes | bytearray | memoryview) -> BlockChecksums:
    """The record-cell checksums of the whole of ``buf`` (a mapped ``.rec``, say): a cell per record, found by the
    file's own framing.

    Parameters
    ----------
    buf
        The file's bytes.

    Returns
    -------
    BlockChecksums
        One CRC-32C per record.
    """
    summer = Summer()
    summer.feed(buf, 0)
    return summer.result(len(memoryview(buf)))


class Summer:
    """Record-cell checksums built as a file's bytes arrive in order (:meth:`feed`), for a writer.

    The cells are found in the bytes themselves: the summer follows the part headers (each gives where the next
    one is) and starts a cell at each part that starts a record (``cflag`` 0 or 1). Bytes that do not frame (a
    damaged file) end the search: the rest of the file is one cell.
    """

    def __init__(self) -> None:
        self.done = 0  # bytes summed so far (the file's first ``done`` bytes)
        self._starts: list[int] = []  # of the cells begun
        self._crcs: list[int] = []  # of the cells ended
        self._partial = 0  # the CRC of the open cell's bytes so far
        self._next: int | None = 0  # where the next part header is (None: the framing was lost)
        self._head = b""  # the bytes of a part header split between two feeds

    def feed(self, data: bytes | bytearray | memoryview, start: int) -> None:
        """Sum ``data``, the file's bytes from ``start`` on; what lies before :attr:`done` is skipped.

        Raises
        ------
        MxrecError
            ``start`` lies after :attr:`done` (bytes would be missing).
        """
        fed = self.done + len(self._head)
        if start > fed:
            raise MxrecError(f"checksums: bytes {fed}..{start} were never summed")
        view = memoryview(data).cast("B")[fed - start:]
        if self._head:  # a part header begun in the last feed
            need = PART_HEADER_SIZE - len(self._head)
            if len(view) < need:
                self._head += bytes(view)
                return
            header, self._head = self._head + bytes(view[:need]), b""
            self._part(header)
            self._partial = _crc32c(header, self._partial)
            self.done += PART_HEADER_SIZE
            view = view[need:]
        while len(view):
            if self.done == self._next:
                if len(view) < PART_HEADER_SIZE:
                    self._head = bytes(view)
                    return
                self._part(view)  # (then the header and its part are summed in one call)
            elif len(self._starts) == len(self._crcs):  # bytes that start no record, before any that does
                self._begin(self.done)
            room = len(view) if self._next is None else self._next - self.done
            piece, view = view[:room], view[room:]
            self._partial = _crc32c(piece, self._partial)
            self.done += len(piece)

    def _part(self, header: bytes | memoryview) -> None:
        """The part header at :attr:`done` (its first bytes in ``header``): where the next one is, and whether
        a record, so a cell, starts here."""
        magic, lrec = PART_HEADER.unpack_from(header)
        at = self.done
        if magic != MAGIC:
            self._next = None
        else:
            length = lrec & LENGTH_MASK
            self._next = at + PART_HEADER_SIZE + length + (-length & 3)
            if lrec >> LENGTH_BITS <= CFLAG_START:
                self._begin(at)
        if len(self._starts) == len(self._crcs):  # (no cell open yet: the file starts with a damaged part)
            self._begin(at)

    def _begin(self, offset: int) -> None:
        if len(self._starts) > len(self._crcs):  # (the open cell ends here)
            self._crcs.append(self._partial)
        self._starts.append(offset)
        self._partial = 0

    def rollback(self, offset: int) -> None:
        """Forget the sums from ``offset`` on (a writer cut its file back there, at a record's start): summing
        resumes at the start of the last cell that began before it."""
        if offset >= self.done + len(self._head):
            return
        kept = max(0, sum(1 for s in self._starts if s < offset) - 1)  # (the cell holding offset is summed again)
        resume = self._starts[kept] if self._starts else 0
        del self._starts[kept:]
        del self._crcs[kept:]
        self.done = resume
        self._next = resume
        self._partial = 0
        self._head = b""

    def result(self, size: int) -> BlockChecksums:
        """The checksums of the file, once its ``size`` bytes have all been fed.

        Raises
        ------
        MxrecError
            Not every byte was fed.
        """
        if self.done + len(self._head) != size:
            raise MxrecError(f"checksums: {self.done + len(self._head)} of {size} bytes summed")
        if self._head:  # a file that ends inside a part header
            self._partial = crc32c(self._head, self._partial)
        crcs = self._crcs + ([self._partial] if len(self._starts) > len(self._crcs) else [])
        return BlockChecksums(size, np.asarray(self._starts, np.int64), np.asarray(crcs, np.uint32))


def format_sidecar(checksums: BlockChecksums) -> str:
    """The sidecar's JSON text for ``checksums``."""
    version = 1 if checksums.block_bytes else VERSION
    return json.dumps({"format": FORMAT, "version": version, "rec_bytes": checksums.size,
                       **checksums.to_dict()}) + "\n"


def parse_sidecar(text: str | bytes, where: str | os.PathLike | None, size: int | None = None) -> BlockChecksums:
    """Parse a sidecar; ``size``, when given, must be the size it describes (the ``.rec``'s).

    Raises
    ------
    ChecksumError
        Not a sidecar, or one of another version of the file.
    """
    try:
        data = json.loads(text)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ChecksumError(where, f"not JSON: {exc}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ChecksumError(where, f"not an mxrec checksum file (no \"format\": \"{FORMAT}\")")
    if data.get("version") not in VERSIONS:
        raise ChecksumError(where, f"checksum file version {data.get('version')!r} is not supported "
                                   f"(this reads {', '.join(map(str, VERSIONS))})")
    stated = data.get("rec_bytes")
    if not isinstance(stated, int) or stated < 0:
        raise ChecksumError(where, f"\"rec_bytes\" must be a size, not {stated!r}")
    if size is not None and stated != size:
        raise ChecksumError(where, f"describes a {stated}-byte .rec, but the .rec holds {size} bytes: it belongs to "
                                   "another version of the file (write it again: mxrec index --checksums)")
    return BlockChecksums.from_dict(data, stated, where)
