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
looks finished, not even the early ones. The set's manifest
(:mod:`mxrec.format.manifest`, ``name.manifest.json``) is written last.
``rec_path`` may be a URL: every shard is then spooled locally and uploaded
by ``close`` (:class:`~mxrec.storage.atomic.RemoteOutput`), ``.rec`` before
``.idx``, the manifest last.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from mxrec.errors import OptionError
from mxrec.format.framing import encoded_size
from mxrec.format.manifest import Manifest, ShardEntry, manifest_path, parse_manifest
from mxrec.io.writer import RecordWriter
from mxrec.storage.atomic import PartialFile, RemoteOutput, atomic_open, output_for
from mxrec.storage.filesystem import StorageOptions, basename, exists, filesystem, is_url, read_bytes, remote_error

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
        value = self.records if self.records is not None else self.bytes
        if value < 1:
            raise OptionError(f"a shard limit must be positive, not {value}")


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


def read_manifest(path: str | os.PathLike, storage_options: StorageOptions = None) -> Manifest:
    """Read and parse a shard-set manifest, local or at a URL (:class:`~mxrec.errors.ManifestError` names the file)."""
    return parse_manifest(read_bytes(os.fspath(path), storage_options), path)


def write_manifest(path: str | os.PathLike, manifest: Manifest, storage_options: StorageOptions = None) -> None:
    """Write a shard-set manifest atomically (uploaded whole for a URL)."""
    with atomic_open(path, "w", encoding="utf-8", newline="\n", storage_options=storage_options) as f:
        f.write(manifest.to_json())


def describe_shards(paths: list[tuple[str, str | None]], records: list[int], folder: str,
                    written: list[tuple[str, str | None]] | None = None) -> Manifest:
    """The manifest of finished shards ``(rec, idx)`` holding ``records`` each, names relative to ``folder``.

    Sizes are read from ``written`` (where the bytes are now, e.g. local spool files of remote shards), by default
    from ``paths``.
    """
    entries = []
    for (rec, idx), (rec_now, idx_now), count in zip(paths, written or paths, records, strict=True):
        entries.append(ShardEntry(
            rec=_relative(rec, folder), idx=None if idx is None else _relative(idx, folder), records=count,
            rec_bytes=os.path.getsize(rec_now), idx_bytes=None if idx_now is None else os.path.getsize(idx_now)))
    return Manifest(tuple(entries))


def _relative(path: str, folder: str) -> str:
    return basename(path) if is_url(path) else os.path.relpath(path, folder)


class ShardedWriter:
    """Write records across shards of ``rec_path`` capped by ``limit``; ``close`` publishes them all at once.

    The manifest (:attr:`manifest_path`) is written after every shard is in place.
    """

    def __init__(self, rec_path: str | os.PathLike, limit: ShardLimit, *,
                 storage_options: StorageOptions = None) -> None:
        self.rec_path = os.fspath(rec_path).removeprefix("file://")
        self.limit = limit
        self.storage_options = storage_options
        self.manifest_path = manifest_path(self.rec_path)
        self._counts: list[int] = []  # records of each shard completed and closed (still under partial names)
        self._outputs: list[tuple[PartialFile | RemoteOutput, PartialFile | RemoteOutput]] = []
        self._current: RecordWriter | None = None
        self._closed = False

    @property
    def paths(self) -> list[tuple[str, str]]:
        """``(rec, idx)`` of every shard started so far."""
        started = len(self._counts) + (self._current is not None)
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
                self._counts.append(len(current))
            rec, idx = (output_for(path, self.storage_options) for path in shard_paths(self.rec_path,
                                                                                         len(self._counts)))
            self._outputs.append((rec, idx))
            current = self._current = RecordWriter(rec.path, idx.path)
        return current.write(payload, key)

    def _stop(self) -> bool:
        """Close the current shard; whether this call did (False when already closed)."""
        if self._closed:
            return False
        self._closed = True
        if self._current is not None:
            self._current.close()
            self._counts.append(len(self._current))
            self._current = None
        return True

    def close(self) -> None:
        """Finish every shard, move them all into place, then write the manifest. Idempotent."""
        if self._stop():
            self._remove_old_manifest()  # an older set's manifest must never describe the new shards
            manifest = describe_shards(self.paths, self._counts, os.path.dirname(self.manifest_path),
                                       [(rec.path, idx.path) for rec, idx in self._outputs])
            for outputs in self._outputs:
                for output in outputs:
                    output.commit()
            write_manifest(self.manifest_path, manifest, self.storage_options)

    def _remove_old_manifest(self) -> None:
        if not is_url(self.manifest_path):
            if os.path.exists(self.manifest_path):
                os.unlink(self.manifest_path)
            return
        if exists(self.manifest_path, self.storage_options):
            fs, path = filesystem(self.manifest_path, self.storage_options)
            try:
                fs.rm_file(path)
            except Exception as exc:
                raise remote_error(self.manifest_path, exc, "removing the old manifest") from None

    def abort(self) -> None:
        """Stop and remove every shard written so far."""
        if self._stop():
            for outputs in self._outputs:
                for output in outputs:
                    output.discard()

    def __len__(self) -> int:
        return sum(self._counts) + (len(self._current) if self._current is not None else 0)

    def __enter__(self) -> ShardedWriter:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is not None:
            self.abort()
        else:
            self.close()
