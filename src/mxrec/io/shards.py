"""Sharded output: one dataset written as ``name_00000.rec/.idx``, ``name_00001.rec/.idx``, ...

A :class:`ShardLimit` caps each shard by records or by ``.rec`` bytes
(:func:`parse_shard_size` reads ``"10000"`` as records and ``"512MB"`` /
``"2GiB"`` as bytes). :class:`ShardedWriter` starts a new shard whenever the
next record would pass the cap (a record larger than a byte cap gets a shard
of its own; the rare record stored in several parts, see
:mod:`mxrec.format.framing`, may pass a byte cap by a few bytes). Every
shard is a plain RecordIO pair with its own ``.idx``.

All shards are written under ``<name>.partial`` and renamed only when the
whole job closes successfully, so an interrupted job leaves no shard that
looks finished, not even the early ones.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from mxrec.errors import OptionError
from mxrec.format.framing import encoded_size
from mxrec.io.atomic import PartialFile
from mxrec.io.writer import RecordWriter

_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
_SIZE = re.compile(r"\s*(\d+)\s*([a-zA-Z]*)\s*")


@dataclass(frozen=True)
class ShardLimit:
    """At most ``records`` records, or at most ``bytes`` bytes of ``.rec``, per shard (exactly one is set)."""

    records: int | None = None
    bytes: int | None = None

    def __post_init__(self) -> None:
        if (self.records is None) == (self.bytes is None):
            raise OptionError("a shard limit needs exactly one of records or bytes")
        if (self.records or self.bytes or 0) < 1:
            raise OptionError(f"a shard limit must be positive, not {self.records or self.bytes}")


def parse_shard_size(text: str) -> ShardLimit:
    """``"10000"`` -> 10000 records; ``"512MB"``, ``"2GiB"``, ``"64M"`` -> bytes (K/M/G/T alone are binary)."""
    match = _SIZE.fullmatch(text)
    unit = match.group(2).lower() if match else None
    if match is None or unit not in _UNITS:
        raise OptionError(f"shard size {text!r}: expected a record count (10000) or a size (512MB, 2GiB)")
    number = int(match.group(1))
    if not unit:
        return ShardLimit(records=number)
    return ShardLimit(bytes=number * _UNITS[unit])


def shard_paths(rec_path: str | os.PathLike, number: int) -> tuple[str, str]:
    """``(rec, idx)`` paths of shard ``number`` of ``rec_path``: ``name_00003.rec``, ``name_00003.idx``."""
    stem, ext = os.path.splitext(os.fspath(rec_path))
    return f"{stem}_{number:05d}{ext or '.rec'}", f"{stem}_{number:05d}.idx"


class ShardedWriter:
    """Write records across shards of ``rec_path`` capped by ``limit``; ``close`` publishes them all at once."""

    def __init__(self, rec_path: str | os.PathLike, limit: ShardLimit) -> None:
        self.rec_path = os.fspath(rec_path)
        self.limit = limit
        self._done_shards = 0  # shards completed and closed (still under their partial names)
        self._done_records = 0
        self._current: RecordWriter | None = None
        self._closed = False

    @property
    def paths(self) -> list[tuple[str, str]]:
        """``(rec, idx)`` of every shard started so far."""
        started = self._done_shards + (self._current is not None)
        return [shard_paths(self.rec_path, n) for n in range(started)]

    def _full(self, writer: RecordWriter, payload_length: int) -> bool:
        if len(writer) == 0:
            return False
        if self.limit.records is not None:
            return len(writer) >= self.limit.records
        return writer.tell() + encoded_size(payload_length) > self.limit.bytes

    def write(self, payload: bytes, key: object = None) -> int:
        """Append one record (``.idx`` key ``key``) to the current shard; return its offset there."""
        current = self._current
        if current is None or self._full(current, len(payload)):
            if current is not None:
                self._current = None
                current.close()
                self._done_shards += 1
                self._done_records += len(current)
            rec, idx = (PartialFile(path) for path in shard_paths(self.rec_path, self._done_shards))
            current = self._current = RecordWriter(rec.path, idx.path)
        return current.write(payload, key)

    def _stop(self) -> bool:
        """Close the current shard; whether this call did (False when already closed)."""
        if self._closed:
            return False
        self._closed = True
        if self._current is not None:
            self._current.close()
        return True

    def close(self) -> None:
        """Finish every shard and move them all into place. Idempotent."""
        if self._stop():
            for paths in self.paths:
                for path in paths:
                    PartialFile(path).commit()

    def abort(self) -> None:
        """Stop and remove every shard written so far."""
        if self._stop():
            for paths in self.paths:
                for path in paths:
                    PartialFile(path).discard()

    def __len__(self) -> int:
        return self._done_records + (len(self._current) if self._current is not None else 0)

    def __enter__(self) -> ShardedWriter:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is not None:
            self.abort()
        else:
            self.close()
