"""Sharded output: one dataset written as ``name_00000.rec/.idx``, ``name_00001.rec/.idx``, ...

A :class:`ShardLimit` caps each shard by records or by ``.rec`` bytes
(:func:`parse_shard_size` reads ``"10000"`` as records and ``"512MB"`` /
``"2GiB"`` as bytes). :class:`ShardedWriter` starts a new shard whenever the
next record would pass the cap (a record larger than a byte cap gets a shard
of its own; the rare record stored in several parts, see
:mod:`mxrec.format.framing`, may pass a byte cap by a few bytes). Every
shard is a plain RecordIO pair with its own ``.idx``.

All shards are written under names no reader takes (``<name>.partial``) and
published only when the whole job closes successfully, so an interrupted job
leaves no shard that looks finished, not even the early ones. The set's
manifest (:mod:`mxrec.format.manifest`, ``name.manifest.json``) is written
last; shards of an earlier, larger set of the same name are removed after it.
``rec_path`` may be a URL: each shard is spooled locally
(:class:`~mxrec.storage.atomic.RemoteOutput`), uploaded as
``<name>.<job>.partial`` as soon as it is finished (its spool files dropped),
and moved to its final name by ``close``, ``.rec`` before ``.idx``, the
manifest last. An exception or interrupt, also one inside ``close``, removes
whatever the job staged, published or spooled; a request in flight is let
finish first, so that the cleanup is not overtaken by it.
"""

from __future__ import annotations

import contextlib
import os
import re
import uuid
from dataclasses import dataclass

from mxrec.errors import ManifestError, OptionError
from mxrec.format.framing import encoded_size
from mxrec.format.manifest import Manifest, ShardEntry, manifest_path, parse_manifest
from mxrec.io.writer import RecordWriter
from mxrec.storage.atomic import (
    ATOMIC_UPLOAD_PROTOCOLS,
    PARTIAL_SUFFIX,
    PartialFile,
    RemoteOutput,
    atomic_open,
    output_for,
)
from mxrec.storage.filesystem import (
    StorageOptions,
    basename,
    check_writable,
    exists,
    filesystem,
    is_url,
    join,
    parent,
    protocol,
    read_bytes,
    remote_error,
    uninterrupted,
)

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


@dataclass
class _Done:
    """A finished shard: where its files are now (staged) and will be (final), its records and sizes."""

    output: tuple[PartialFile | RemoteOutput, PartialFile | RemoteOutput] | None  # local: the partial files
    staged: tuple[str, str]  # local: the partial files' paths; remote: the staged objects
    final: tuple[str, str]
    records: int
    sizes: tuple[int, int]


class ShardedWriter:
    """Write records across shards of ``rec_path`` capped by ``limit``; ``close`` publishes them all at once.

    Until then every shard lies under a name no reader takes (``<name>.partial`` locally; for a URL, each finished
    shard is uploaded at once as ``<name>.<job>.partial`` and its spool files dropped). ``close`` moves them under
    their final names, ``.rec`` before ``.idx``, then writes the manifest (:attr:`manifest_path`), last, and
    removes the shards of an earlier, larger set of the same name. An exception or interrupt (also one inside
    ``close``) removes everything this writer staged, published or spooled.
    """

    def __init__(self, rec_path: str | os.PathLike, limit: ShardLimit, *,
                 storage_options: StorageOptions = None) -> None:
        self.rec_path = os.fspath(rec_path).removeprefix("file://")
        check_writable(self.rec_path)
        self.limit = limit
        self.storage_options = storage_options
        self.manifest_path = manifest_path(self.rec_path)
        self.remote = is_url(self.rec_path)
        self.job = uuid.uuid4().hex[:8]
        self._done: list[_Done] = []  # finished shards, still under names no reader takes
        self._published: list[str] = []  # final names written by close (removed again if close is interrupted)
        self._outputs: tuple[PartialFile | RemoteOutput, PartialFile | RemoteOutput] | None = None  # current shard
        self._current: RecordWriter | None = None
        self._uploading: str | None = None  # the staged object being uploaded now
        self._closed = False
        self._committed = False  # the set is published: nothing is taken back any more

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
            rec, idx = (output_for(path, self.storage_options) for path in shard_paths(self.rec_path,
                                                                                         len(self._done)))
            self._outputs = (rec, idx)
            current = self._current = RecordWriter(rec.path, idx.path)
        return current.write(payload, key)

    def _finish_shard(self) -> None:
        """Close the current shard; a remote one is uploaded under its staged names and its spool files dropped."""
        current, outputs = self._current, self._outputs
        self._current = None
        current.close()
        final = shard_paths(self.rec_path, len(self._done))
        sizes = (os.path.getsize(outputs[0].path), os.path.getsize(outputs[1].path))
        if not self.remote:
            self._done.append(_Done(outputs, (outputs[0].path, outputs[1].path), final, len(current), sizes))
            self._outputs = None
            return
        staged = (f"{final[0]}.{self.job}{PARTIAL_SUFFIX}", f"{final[1]}.{self.job}{PARTIAL_SUFFIX}")
        fs, _ = filesystem(self.rec_path, self.storage_options)
        try:
            for output, target in zip(outputs, staged, strict=True):
                self._uploading = target  # (removed by abort if the upload was under way)
                try:
                    uninterrupted(lambda output=output, target=target: fs.put_file(output.path,
                                                                                    fs._strip_protocol(target)))
                except Exception as exc:
                    raise remote_error(target, exc, "upload") from None
        finally:
            for output in outputs:
                output.discard()  # the spool files, uploaded or not
            self._outputs = None
        self._done.append(_Done(None, staged, final, len(current), sizes))
        self._uploading = None

    def _stop(self) -> bool:
        """Finish the current shard; whether this call did (False when already closed)."""
        if self._closed:
            return False
        self._closed = True
        if self._current is not None:
            self._finish_shard()
        return True

    def close(self) -> None:
        """Publish every shard, then write the manifest, then remove stale shards (see the class doc). Idempotent."""
        if self._closed:
            return
        old: set[str] = set()
        try:
            self._stop()
            old = self._old_shards()
            self._remove_old_manifest()  # an older set's manifest must never describe the new shards
            self._published += sorted(old)  # from here on the older set is no set: removed, should this fail
            for shard in self._done:  # the .rec first: an .idx never appears before its data
                for staged, final in zip(shard.staged, shard.final, strict=True):
                    self._publish(staged, final)
            folder = parent(self.manifest_path) or os.curdir
            manifest = Manifest(tuple(ShardEntry(_relative(d.final[0], folder), _relative(d.final[1], folder),
                                                 d.records, d.sizes[0], d.sizes[1]) for d in self._done))
            self._published.append(self.manifest_path)
            if self.remote:
                uninterrupted(lambda: write_manifest(self.manifest_path, manifest, self.storage_options))
            else:
                write_manifest(self.manifest_path, manifest, self.storage_options)
        except BaseException:
            self._remove_everything()
            raise
        self._committed = True
        self._published.clear()
        self._remove_stale(old)

    def _publish(self, staged: str, final: str) -> None:
        self._published.append(final)
        if not self.remote:
            os.replace(staged, final)
            return
        fs, _ = filesystem(self.rec_path, self.storage_options)
        def move() -> None:
            if protocol(final) not in ATOMIC_UPLOAD_PROTOCOLS and fs.exists(fs._strip_protocol(final)):
                fs.rm_file(fs._strip_protocol(final))  # (HDFS renames onto no file; object stores replace)
            fs.mv(fs._strip_protocol(staged), fs._strip_protocol(final))

        try:
            uninterrupted(move)
        except Exception as exc:
            raise remote_error(final, exc, f"publishing {basename(staged)}") from None

    def _old_shards(self) -> set[str]:
        """The shard files of the set now under this name (its manifest's, and those numbered after ours)."""
        names: set[str] = set()
        with contextlib.suppress(ManifestError, OSError):
            old = read_manifest(self.manifest_path, self.storage_options)
            folder = parent(self.manifest_path)
            names |= {join(folder, name) for e in old.shards for name in (e.rec, e.idx) if name is not None}
        number = len(self._done)
        while True:  # numbered shards right after the new set's: an earlier, larger set without its manifest
            rec, idx = shard_paths(self.rec_path, number)
            there = {p for p in (rec, idx) if exists(p, self.storage_options)}
            if not there:
                break
            names |= there
            number += 1
        return names - {name for d in self._done for name in d.final}

    def _remove_stale(self, names: set[str]) -> None:
        for name in sorted(names):
            self._remove(name)

    def _remove(self, path: str) -> None:
        """Remove ``path`` if it is there (cleanup: a failure to remove is not raised)."""
        if not is_url(path):
            with contextlib.suppress(OSError):
                os.unlink(path)
            return
        with contextlib.suppress(Exception):
            fs, fs_path = filesystem(path, self.storage_options)
            fs.rm_file(fs_path)

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

    def _remove_everything(self) -> None:
        """Remove what this writer staged, spooled and published (after an exception or interrupt)."""
        current, outputs = self._current, self._outputs
        self._current = self._outputs = None
        self._closed = True
        if current is not None:
            current.abort()
        for output in outputs or ():
            output.discard()
        pending = [self._uploading] if self._uploading else []
        for name in [*self._published, *(n for d in self._done for n in d.staged), *pending]:
            self._remove(name)
        self._published.clear()
        self._done.clear()

    def abort(self) -> None:
        """Stop and remove every shard written so far (staged, spooled or published); after a successful
        :meth:`close`, nothing."""
        if not self._committed:
            self._remove_everything()

    def __len__(self) -> int:
        return sum(d.records for d in self._done) + (len(self._current) if self._current is not None else 0)

    def __enter__(self) -> ShardedWriter:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is not None:
            self.abort()
        else:
            self.close()
