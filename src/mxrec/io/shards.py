"""Sharded output: one dataset written as ``name_00000.rec/.idx``, ``name_00001.rec/.idx``, ...

A :class:`ShardLimit` caps each shard by records or by ``.rec`` bytes
(:func:`parse_shard_size` reads ``"10000"`` as records and ``"512MB"`` /
``"2GiB"`` as bytes). :class:`ShardedWriter` starts a new shard whenever the
next record would pass the cap (a record larger than a byte cap gets a shard
of its own; the rare record stored in several parts, see
:mod:`mxrec.format.framing`, may pass a byte cap by a few bytes). Every
shard is a plain RecordIO pair with its own ``.idx``.

The set is written with the one commit protocol (:class:`~mxrec.storage.commit.Commit`): every shard is
staged under a name no reader takes (``<name>.partial`` locally; for a URL each finished shard is spooled
locally and uploaded into the hidden staging folder at once, its spool files dropped), and only the whole job's
successful ``close`` publishes them: a marker at the manifest's place first, then the shards, ``.idx`` before
``.rec`` (and its checksums sidecar, ``name_00000.checksums``, before it), then the manifest
(:mod:`mxrec.format.manifest`, ``name.manifest.json``), last. Shards of an earlier,
larger set of the same name are removed after it. An exception or interrupt, also one inside ``close``, removes
whatever the job staged, published or spooled, retrying each removal; what cannot be removed stays behind the
marker, which no reader takes for a set, and is named on the error.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
from dataclasses import dataclass

from mxrec.errors import ManifestError, OptionError
from mxrec.format.checksums import BlockChecksums, checksums_path, compute
from mxrec.format.framing import encoded_size
from mxrec.format.manifest import Manifest, ShardEntry, manifest_path, marker_text, parse_manifest
from mxrec.io.checksummed import stage_sidecar, write_sidecar
from mxrec.io.writer import RecordWriter
from mxrec.storage.atomic import atomic_open
from mxrec.storage.commit import Commit, numbered_files
from mxrec.storage.files import read_bytes
from mxrec.storage.filesystem import StorageOptions, basename, check_writable, is_url, join, parent
from mxrec.storage.memory_map import mapped

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
                    written: list[tuple[str, str | None]] | None = None,
                    checksums: list[BlockChecksums | bool | None] | None = None) -> Manifest:
    """The manifest of finished shards ``(rec, idx)`` holding ``records`` each (with their ``checksums``: ``True``
    for a shard whose sidecar holds them), names relative to ``folder``.

    Sizes are read from ``written`` (where the bytes are now, e.g. local spool files of remote shards), by default
    from ``paths``.
    """
    entries = []
    for (rec, idx), (rec_now, idx_now), count, sums in zip(paths, written or paths, records,
                                                           checksums or [None] * len(paths), strict=True):
        entries.append(ShardEntry(
            rec=_relative(rec, folder), idx=None if idx is None else _relative(idx, folder), records=count,
            rec_bytes=os.path.getsize(rec_now), idx_bytes=None if idx_now is None else os.path.getsize(idx_now),
            checksums=sums))
    return Manifest(tuple(entries))


def add_manifest_checksums(path: str | os.PathLike, storage_options: StorageOptions = None) -> Manifest:
    """Compute the checksums of every shard a manifest lists, write each beside its shard (``NAME_00000.checksums``)
    and the manifest again, saying so (each shard read once, whole; the shards and their ``.idx`` are not touched).
    ``mxrec index --checksums-only SET.manifest.json``.

    Parameters
    ----------
    path
        The manifest (a path or URL).
    storage_options
        For URLs: the storage settings.

    Returns
    -------
    Manifest
        The manifest written.

    Raises
    ------
    ManifestError
        A shard differs from the manifest (its size).
    """
    path = os.fspath(path)
    manifest = read_manifest(path, storage_options)
    folder = parent(path)
    entries = []
    for number, entry in enumerate(manifest.shards):
        with mapped(join(folder, entry.rec), storage_options) as buf:
            if len(buf) != entry.rec_bytes:
                raise ManifestError(path, f"shard {number} ({entry.rec}) has {len(buf)} bytes, the manifest says "
                                          f"{entry.rec_bytes}")
            sums = compute(buf)
        write_sidecar(join(folder, checksums_path(entry.rec)), sums, storage_options)
        entries.append(dataclasses.replace(entry, checksums=True))
    updated = Manifest(tuple(entries))
    write_manifest(path, updated, storage_options)
    return updated


def shard_files(rec_path: str | os.PathLike, number: int) -> tuple[str, str, str]:
    """``(rec, idx, checksums)`` paths of shard ``number`` of ``rec_path``: :func:`shard_paths` and the sidecar."""
    rec, idx = shard_paths(rec_path, number)
    return rec, idx, checksums_path(rec)


def stale_shards(rec_path: str, count: int, storage_options: StorageOptions = None, *,
                 sidecars: bool = True) -> list[str]:
    """The files of the shard set now under ``rec_path``'s name that a new set of ``count`` shards does not
    overwrite: those its manifest lists, and the shards numbered from ``count`` on (an earlier, larger set's, or
    one whose manifest is gone), with their checksums sidecars; ``sidecars=False`` (the new shards have none):
    the sidecars of shards ``0..count-1`` too, which must not stand beside the new bytes."""
    names: set[str] = set()
    path = manifest_path(rec_path)
    with contextlib.suppress(ManifestError, OSError):
        folder = parent(path)
        names |= {join(folder, n) for e in read_manifest(path, storage_options).shards for n in e.files()}
    names |= set(numbered_files(lambda n: shard_files(rec_path, n), count, storage_options))
    if not sidecars and not is_url(rec_path):  # (remote: those the manifest lists; a request a shard otherwise)
        names |= {p for n in range(count) if os.path.lexists(p := shard_files(rec_path, n)[2])}
    written = {p for n in range(count) for p in shard_files(rec_path, n)[:3 if sidecars else 2]}
    return sorted(names - written)


def _relative(path: str, folder: str) -> str:
    return basename(path) if is_url(path) else os.path.relpath(path, folder)


@dataclass
class _Done:
    """A finished shard: its final names, records, sizes and checksums."""

    final: tuple[str, str]
    records: int
    sizes: tuple[int, int]
    checksums: bool  # in its sidecar


class ShardedWriter:
    """Write records across shards of ``rec_path`` capped by ``limit``; ``close`` publishes them all at once.

    Until then every shard lies under a name no reader takes (see the module docstring). ``close`` publishes them
    (:meth:`~mxrec.storage.commit.Commit.publish`): a marker at :attr:`manifest_path`, the shards, the manifest
    last, then the shards of an earlier, larger set of the same name are removed. An exception or interrupt (also
    one inside ``close``) removes everything this writer staged, published or spooled.
    """

    def __init__(self, rec_path: str | os.PathLike, limit: ShardLimit, *,
                 storage_options: StorageOptions = None) -> None:
        self.rec_path = os.fspath(rec_path).removeprefix("file://")
        check_writable(self.rec_path)
        self.limit = limit
        self.storage_options = storage_options
        self.manifest_path = manifest_path(self.rec_path)
        self.commit = Commit(self.manifest_path, storage_options)
        self._done: list[_Done] = []  # finished shards, still under names no reader takes
        self._staged: tuple[str, str] | None = None  # where the current shard's .rec and .idx are written
        self._current: RecordWriter | None = None
        self._closed = False

    @property
    def paths(self) -> list[tuple[str, str]]:
        """``(rec, idx)`` of every shard started so far."""
        started = len(self._done) + (self._current is not None)
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
                self._finish_shard()
            rec, idx = shard_paths(self.rec_path, len(self._done))
            staged_idx = self.commit.path_for(idx)  # (the .idx before the .rec: see the commit protocol)
            staged_rec = self.commit.path_for(rec)
            self._staged = (staged_rec, staged_idx)
            current = self._current = RecordWriter(staged_rec, staged_idx, sidecar=False)  # (its sums: below)
        return current.write(payload, key)

    def _finish_shard(self) -> None:
        """Close the current shard; a remote one is uploaded into the staging folder and its spool files dropped."""
        current, (rec, idx) = self._current, self._staged
        self._current = self._staged = None
        current.close()
        final = shard_paths(self.rec_path, len(self._done))
        sizes = (os.path.getsize(rec), os.path.getsize(idx))
        self.commit.finish(final[1])
        if current.checksums is not None:  # the shard's own sidecar, staged with it (published before its .rec)
            stage_sidecar(self.commit, final[0], current.checksums)
        self.commit.finish(final[0])
        self._done.append(_Done(final, len(current), sizes, current.checksums is not None))

    def close(self) -> None:
        """Publish every shard, then the manifest, then remove stale shards (see the class doc). Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._current is not None:
                self._finish_shard()
            folder = parent(self.manifest_path) or os.curdir
            manifest = Manifest(tuple(ShardEntry(_relative(d.final[0], folder), _relative(d.final[1], folder),
                                                 d.records, d.sizes[0], d.sizes[1], d.checksums or None)
                                      for d in self._done))
            stale = stale_shards(self.rec_path, len(self._done), self.storage_options,
                                 sidecars=all(d.checksums for d in self._done))
        except BaseException as exc:
            self._remove_everything(exc)
            raise
        names = [name for shard in manifest.shards for name in shard.files()]
        self.commit.publish(manifest=(self.manifest_path, marker_text(self.commit.job, names), manifest.to_json()),
                            stale=stale)


    def _remove_everything(self, cause: BaseException | None) -> None:
        """Remove what this writer staged, spooled and published (after an exception or interrupt)."""
        current = self._current
        self._current = self._staged = None
        self._closed = True
        if current is not None:
            current.abort()
        self.commit.abort(cause)

    def abort(self) -> None:
        """Stop and remove every shard written so far (staged, spooled or published); after a successful
        :meth:`close`, nothing."""
        self._remove_everything(None)

    def __len__(self) -> int:
        return sum(d.records for d in self._done) + (len(self._current) if self._current is not None else 0)

    def __enter__(self) -> ShardedWriter:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is not None:
            self._remove_everything(exc if isinstance(exc, BaseException) else None)
        else:
            self.close()
