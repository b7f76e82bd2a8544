"""Block checksums of a ``.rec`` file: CRC-32C per fixed-size block of its bytes, kept beside it, never inside it.

RecordIO has no checksum: a byte flipped on a disk or a store decodes as a wrong image, or fails far from its
cause. mxrec's writers record one CRC-32C (Castagnoli, as TFRecord uses per record) per block of
:data:`BLOCK_BYTES` bytes of the ``.rec`` (block ``n`` is bytes ``[n * B, min((n + 1) * B, size))``), and its
readers check each block the first time they read it. The ``.rec`` itself is untouched, so MXNet reads it byte for
byte as before. A single file keeps its checksums in a small sidecar, ``NAME.checksums`` beside ``NAME.rec`` (as
``NAME.idx``)::

    {"format": "mxrec-checksums", "version": 1, "algorithm": "crc32c", "rec_bytes": 3145800,
     "block_bytes": 1048576, "crc32c": "<base64 of the little-endian uint32 CRCs, one per block>"}

A shard set keeps each shard's in its manifest entry (``"checksums": {"block_bytes": ..., "crc32c": ...}``,
:mod:`mxrec.format.manifest`). Blocks lie on a fixed grid of the file's bytes, not on record boundaries, so that a
reader checks exactly the bytes it has, and the block cache's blocks (a multiple of the grid) check whole.

This module is the format (compute, parse, format, naming); checking as records are read is
:mod:`mxrec.io.checksummed`.
"""

from __future__ import annotations

import base64
import json
import os
from dataclasses import dataclass, field

import numpy as np

from mxrec.errors import ChecksumError, MxrecError
from mxrec.format.idx import sidecar_path

FORMAT = "mxrec-checksums"
VERSION = 1
ALGORITHM = "crc32c"
BLOCK_BYTES = 1 << 20
SUFFIX = ".checksums"


def crc32c(data: bytes | bytearray | memoryview, value: int = 0) -> int:
    """The CRC-32C of ``data``, continuing from ``value`` (the CRC of the bytes before it)."""
    import crc32c as backend

    return backend.crc32c(data, value)


def checksums_path(rec_path: str | os.PathLike) -> str:
    """The sidecar of ``rec_path``: ``data/train.rec`` -> ``data/train.checksums``."""
    return sidecar_path(rec_path, SUFFIX)


@dataclass(frozen=True, eq=False)
class BlockChecksums:
    """The CRC-32C of every block of a ``size``-byte file, blocks of ``block_bytes`` (see the module docstring).

    Parameters
    ----------
    size
        Bytes of the ``.rec``.
    block_bytes
        Bytes per block (the last one may be shorter).
    crcs
        One ``uint32`` per block.

    Raises
    ------
    MxrecError
        The number of CRCs does not match the size and block size.
    """

    size: int
    block_bytes: int
    crcs: np.ndarray = field(repr=False)

    def __post_init__(self) -> None:
        if self.block_bytes < 1 or self.size < 0:
            raise MxrecError(f"checksums: need block_bytes >= 1 and size >= 0, got {self.block_bytes}, {self.size}")
        if len(self.crcs) != self.count_for(self.size, self.block_bytes):
            raise MxrecError(f"checksums: {len(self.crcs)} CRCs for {self.size} bytes in blocks of "
                             f"{self.block_bytes} (expected {self.count_for(self.size, self.block_bytes)})")

    @staticmethod
    def count_for(size: int, block_bytes: int) -> int:
        """Blocks in a ``size``-byte file."""
        return -(-size // block_bytes)

    def __len__(self) -> int:
        return len(self.crcs)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, BlockChecksums) and (self.size, self.block_bytes) == (other.size, other.block_bytes)
                and np.array_equal(self.crcs, other.crcs))

    def span(self, number: int) -> tuple[int, int]:
        """The bytes ``(start, end)`` of block ``number``."""
        start = number * self.block_bytes
        return start, min(self.size, start + self.block_bytes)

    def covering(self, start: int, end: int) -> range:
        """The blocks holding bytes ``[start, end)``."""
        if end <= start:
            return range(0)
        return range(start // self.block_bytes, (end - 1) // self.block_bytes + 1)

    def mismatch(self, number: int, data: bytes | bytearray | memoryview) -> int | None:
        """``None`` when ``data`` (block ``number``'s bytes) has its CRC, else the CRC ``data`` has."""
        got = crc32c(data)
        return None if got == int(self.crcs[number]) else got

    def to_dict(self) -> dict:
        """The fields a sidecar or a manifest entry stores (``rec_bytes`` is the manifest's own field there)."""
        return {"algorithm": ALGORITHM, "block_bytes": self.block_bytes,
                "crc32c": base64.b64encode(self.crcs.astype("<u4").tobytes()).decode("ascii")}

    @classmethod
    def from_dict(cls, data: object, size: int, where: str | os.PathLike | None) -> BlockChecksums:
        """The checksums of a ``size``-byte file from :meth:`to_dict`'s fields.

        Raises
        ------
        ChecksumError
            The fields are malformed, or do not describe a file of ``size`` bytes.
        """
        try:
            if data.get("algorithm", ALGORITHM) != ALGORITHM:  # type: ignore[union-attr]
                raise ChecksumError(where, f"checksum algorithm {data.get('algorithm')!r} is not supported "
                                           f"(this is {ALGORITHM})")
            block_bytes = int(data["block_bytes"])  # type: ignore[index]
            crcs = np.frombuffer(base64.b64decode(data["crc32c"], validate=True), "<u4")  # type: ignore[index]
        except ChecksumError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ChecksumError(where, f"not a checksum table: {exc}") from None
        if block_bytes < 1 or len(crcs) != cls.count_for(size, block_bytes):
            raise ChecksumError(where, f"the checksums describe {len(crcs)} blocks of {block_bytes} bytes, but the "
                                       f".rec holds {size} bytes: they belong to another version of the file")
        return cls(size, block_bytes, crcs.astype(np.uint32))


def compute(buf: bytes | bytearray | memoryview, block_bytes: int = BLOCK_BYTES) -> BlockChecksums:
    """The block checksums of the whole of ``buf`` (a mapped ``.rec``, say).

    Parameters
    ----------
    buf
        The file's bytes.
    block_bytes
        Bytes per block.

    Returns
    -------
    BlockChecksums
        One CRC-32C per block.
    """
    view = memoryview(buf)
    size = len(view)
    crcs = [crc32c(view[start:start + block_bytes]) for start in range(0, size, block_bytes)]
    return BlockChecksums(size, block_bytes, np.asarray(crcs, dtype=np.uint32))


class Summer:
    """Block checksums built as a file's bytes arrive in order (:meth:`feed`), for a writer.

    Parameters
    ----------
    block_bytes
        Bytes per block.
    """

    def __init__(self, block_bytes: int = BLOCK_BYTES) -> None:
        self.block_bytes = block_bytes
        self.done = 0  # bytes summed so far (the file's first ``done`` bytes)
        self._crcs: list[int] = []
        self._partial = 0  # the CRC of the bytes of the block being summed

    def feed(self, data: bytes | bytearray | memoryview, start: int) -> None:
        """Sum ``data``, the file's bytes from ``start`` on; what lies before :attr:`done` is skipped.

        Raises
        ------
        MxrecError
            ``start`` lies after :attr:`done` (bytes would be missing).
        """
        if start > self.done:
            raise MxrecError(f"checksums: bytes {self.done}..{start} were never summed")
        view = memoryview(data)[self.done - start:]
        bs = self.block_bytes
        while len(view):
            room = bs - self.done % bs
            piece, view = view[:room], view[room:]
            self._partial = crc32c(piece, self._partial)
            self.done += len(piece)
            if self.done % bs == 0:
                self._crcs.append(self._partial)
                self._partial = 0

    def rollback(self, offset: int) -> None:
        """Forget the sums from ``offset`` on (a writer cut its file back there): summing resumes at the start of
        the block holding ``offset``."""
        if offset >= self.done:
            return
        self._crcs = self._crcs[:offset // self.block_bytes]
        self.done = len(self._crcs) * self.block_bytes
        self._partial = 0

    def result(self, size: int) -> BlockChecksums:
        """The checksums of the file, once its ``size`` bytes have all been fed.

        Raises
        ------
        MxrecError
            Not every byte was fed.
        """
        if self.done != size:
            raise MxrecError(f"checksums: {self.done} of {size} bytes summed")
        crcs = self._crcs + ([self._partial] if size % self.block_bytes else [])
        return BlockChecksums(size, self.block_bytes, np.asarray(crcs, dtype=np.uint32))


def format_sidecar(checksums: BlockChecksums) -> str:
    """The sidecar's JSON text for ``checksums``."""
    return json.dumps({"format": FORMAT, "version": VERSION, "rec_bytes": checksums.size,
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
    if data.get("version") != VERSION:
        raise ChecksumError(where, f"checksum file version {data.get('version')!r} is not supported "
                                   f"(this is {VERSION})")
    stated = data.get("rec_bytes")
    if not isinstance(stated, int) or stated < 0:
        raise ChecksumError(where, f"\"rec_bytes\" must be a size, not {stated!r}")
    if size is not None and stated != size:
        raise ChecksumError(where, f"describes a {stated}-byte .rec, but the .rec holds {size} bytes: it belongs to "
                                   "another version of the file (write it again: mxrec index --checksums)")
    return BlockChecksums.from_dict(data, stated, where)
