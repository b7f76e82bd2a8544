"""Shard sets, and :func:`open_files`: record files opened as one dataset wherever and however they are stored.

A dataset may be one ``.rec`` or many shards; :func:`open_files` (behind
:func:`~mxrec.datasets.opening.open_dataset`, the one entry point) accepts

* one ``.rec`` path or URL (``data/train.rec``, ``s3://b/train.rec``),
* a list of them (in that order),
* a glob (``s3://b/train-*.rec``, sorted by name),
* a brace range (``train-{00000..00015}.rec``, zero-padding kept),
* a shard manifest (``train.manifest.json``, :mod:`mxrec.format.manifest`),
  or the prefix/``.rec`` name ``mxrec pack --shard-size`` was given
  (``data/train`` or ``data/train.rec`` when only the shards exist),
* a folder or bucket prefix: its manifest if it holds exactly one, else every
  ``.rec`` in it, sorted,

and returns a :class:`~mxrec.io.local_reader.LocalRecordReader` (one local file), a
:class:`~mxrec.io.remote_reader.RemoteRecordReader` (one remote file) or a
:class:`ShardSetReader` -- all :class:`~mxrec.io.records.Records`: ``len``,
``fetch``/``[i]``/``read_batch``, ``keys``, ``position``/``read_key``,
``header``, iteration, ``describe``, pickling to paths and indexes.

In a :class:`ShardSetReader` positions run ``0..N-1`` across the shards in
shard order. Opened from a manifest, shards are opened lazily, on first use,
and checked against it: a missing shard, a shard whose record count differs,
or (local shards, checked at open; remote ones, by :meth:`ShardSetReader.check`
and by every read, which must get exactly the bytes the manifest promises) a
size that differs raises :class:`~mxrec.errors.ManifestError` naming the
shard and the manifest. Keys are the shards' ``.idx`` keys, which must not
repeat across shards for look-ups by key (positions always work).
"""

from __future__ import annotations

import bisect
import fnmatch
import os
import re
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from mxrec.errors import (
    DuplicateKeyError,
    IncompleteSetError,
    ManifestError,
    OptionError,
    RecordFormatError,
    RecordKeyError,
    RecordPositionError,
    RemoteNotFoundError,
)
from mxrec.format.checksums import SUFFIX as CHECKSUMS_SUFFIX
from mxrec.format.checksums import BlockChecksums, checksums_path
from mxrec.format.header import IRHeader
from mxrec.format.idx import KeyType
from mxrec.format.manifest import MANIFEST_SUFFIX, Manifest, manifest_path, parse_manifest
from mxrec.io.opener import RecordReader
from mxrec.io.order import ReadPlan
from mxrec.io.records import IOStats, Records, blocks_of, gather
from mxrec.io.remote_reader import RemoteRecordReader, warn_global_shuffle, window_for
from mxrec.io.shuffle_window import Pieces, ShuffleWindow
from mxrec.storage.block_cache import BlockCache
from mxrec.storage.files import exists, glob, isdir, listdir, listing, read_bytes
from mxrec.storage.filesystem import StorageOptions, basename, is_pattern, is_url, join, local_path, parent, storage_of

_BRACE = re.compile(r"\{(\d+)\.\.(\d+)\}")
_NOT_SHARDS = (".idx", ".lst", ".json", ".partial", ".labels", CHECKSUMS_SUFFIX)


@dataclass(frozen=True)
class Shard:
    """One shard: its ``.rec``, its ``.idx`` (None: the one beside the ``.rec``), and what the manifest says: its
    records, bytes and checksums (``None``: its sidecar, if it has one; ``False``: none)."""

    rec: str
    idx: str | None = None
    records: int | None = None
    rec_bytes: int | None = None
    checksums: BlockChecksums | bool | None = None


def expand_braces(pattern: str) -> list[str]:
    """``train-{00000..00002}.rec`` -> ``train-00000.rec``, ``train-00001.rec``, ``train-00002.rec`` (all ranges)."""
    match = _BRACE.search(pattern)
    if match is None:
        return [pattern]
    first, last = match.group(1), match.group(2)
    width = len(first) if first.startswith("0") or len(first) == len(last) else 0
    step = 1 if int(last) >= int(first) else -1
    names = [pattern[:match.start()] + str(n).zfill(width) + pattern[match.end():]
             for n in range(int(first), int(last) + step, step)]
    return [name for expanded in names for name in expand_braces(expanded)]


def manifest_shards(path: str, storage_options: StorageOptions = None) -> tuple[list[Shard], Manifest]:
    """The shards a manifest lists, as paths or URLs beside it."""
    try:
        text = read_bytes(path, storage_options)
    except (FileNotFoundError, RemoteNotFoundError):
        raise ManifestError(path, "no such manifest") from None
    manifest = parse_manifest(text, path)
    folder = parent(path)
    shards = [Shard(join(folder, e.rec), None if e.idx is None else join(folder, e.idx), e.records, e.rec_bytes,
                    e.checksums if e.checksums is not None else False) for e in manifest.shards]
    return shards, manifest


def _is_shard(path: str) -> bool:
    return not path.endswith(_NOT_SHARDS) and not basename(path).startswith(".")


def _same(path: str) -> str:
    return path if is_url(path) else os.path.normpath(os.path.abspath(path))


def _refuse_unlisted(spec: str, found: list[str], storage_options: StorageOptions,
                     manifests: list[str] | None = None) -> None:
    """Refuse shards found by a glob or in a folder that a manifest there does not list, once it lists others.

    Such a file is a shard of an earlier, larger set (a pack re-run with fewer records) or of another set: read
    with the others, a set would hold records that are not its own, and look whole.
    """
    if manifests is None:
        folders = sorted({parent(p) for p in found})
        manifests = [m for folder in folders for m in glob(join(folder, "*" + MANIFEST_SUFFIX), storage_options)]
    listed: dict[str, str] = {}
    for path in manifests:
        try:
            shards = manifest_shards(path, storage_options)[0]
        except IncompleteSetError:
            raise  # a set being written (or whose writing failed) beside them: none of its files is taken
        except ManifestError:
            continue  # not a manifest mxrec can read: it speaks for no shard
        listed.update({_same(s.rec): path for s in shards})
    owners = {listed[_same(p)] for p in found if _same(p) in listed}
    if not owners:
        return
    stray = [p for p in found if _same(p) not in listed]
    if stray:
        more = f" (and {len(stray) - 1} more)" if len(stray) > 1 else ""
        raise ManifestError(sorted(owners)[0], f"{spec} takes {basename(stray[0])}{more}, which the manifest does "
                                               "not list: a shard of an earlier or another set; open the manifest "
                                               "to read the set it describes, or remove the stray shard")


def _listed(paths: list[str], storage_options: StorageOptions,
            listed: dict[str, int | None] | None = None) -> list[Shard]:
    """Shards of ``paths``; remote ones with what one listing of their folder says (``listed``, else listed here):
    the ``.rec``'s size (no request to ask it) and whether a checksums sidecar is there (none asked for if not)."""
    if not paths or not all(is_url(p) for p in paths):
        return [Shard(p) for p in paths]
    if listed is None:
        folders = sorted({parent(p) for p in paths})
        if len(folders) > 1:
            return [Shard(p) for p in paths]
        listed = listing(folders[0], storage_options)
    return [Shard(p, rec_bytes=listed.get(p), checksums=None if checksums_path(p) in listed else False)
            if p in listed else Shard(p) for p in paths]


def resolve_dataset(spec: str | os.PathLike | Sequence[str | os.PathLike],
                    storage_options: StorageOptions = None) -> tuple[list[Shard], str | None]:
    """The shards ``spec`` names (see the module docstring) and the manifest they came from, if any."""
    if not isinstance(spec, (str, os.PathLike)):
        paths = [os.fspath(p) for p in spec]
        if not paths:
            raise ManifestError(None, "an empty list of shards is not a dataset")
        return [Shard(local_path(p)) for p in paths], None
    spec = os.fspath(spec)
    if spec.endswith(MANIFEST_SUFFIX):
        return manifest_shards(spec, storage_options)[0], spec
    if _BRACE.search(spec):
        return _listed(expand_braces(spec), storage_options), None
    if is_pattern(spec):
        folder = parent(spec)
        if is_url(spec) and not is_pattern(folder):
            listed = listing(folder, storage_options)  # one listing: the shards, their sizes, sidecars, manifests
            found = [p for p in sorted(listed) if fnmatch.fnmatchcase(basename(p), basename(spec)) and _is_shard(p)]
            manifests = [p for p in sorted(listed) if p.endswith(MANIFEST_SUFFIX)]
        else:
            listed, found, manifests = None, [p for p in glob(spec, storage_options) if _is_shard(p)], None
        if not found:
            raise ManifestError(spec, "the pattern matches no .rec file")
        _refuse_unlisted(spec, found, storage_options, manifests)
        return _listed(found, storage_options, listed), None
    if spec.endswith(".rec") and not exists(spec, storage_options) and exists(manifest_path(spec), storage_options):
        return manifest_shards(manifest_path(spec), storage_options)[0], manifest_path(spec)
    if not spec.endswith(".rec"):
        candidate = manifest_path(spec)
        if exists(candidate, storage_options):
            return manifest_shards(candidate, storage_options)[0], candidate
        if isdir(spec, storage_options):
            files = listdir(spec, storage_options)
            manifests = [p for p in files if p.endswith(MANIFEST_SUFFIX)]
            if len(manifests) == 1:
                return manifest_shards(manifests[0], storage_options)[0], manifests[0]
            recs = [p for p in files if p.endswith(".rec")]
            if not recs:
                raise ManifestError(spec, "the folder holds no .rec file and no manifest")
            _refuse_unlisted(spec, recs, storage_options, manifests)
            return [Shard(p) for p in recs], None
    return [Shard(spec)], None


def open_files(spec: str | os.PathLike | Sequence[str | os.PathLike], index: str | os.PathLike | bool | None = None,
               key_type: KeyType = int, *, duplicates: Literal["error", "last"] = "error", strict: bool = True,
               storage_options: StorageOptions = None,
               cache_dir: str | os.PathLike | BlockCache | None = None) -> Records:
    """Open a dataset of record files however it is stored: one ``.rec``, local or remote, or a set of shards
    (:func:`~mxrec.datasets.opening.open_dataset`, which takes a mixture too, is the one to call).

    Parameters
    ----------
    spec
        A ``.rec`` path or URL; a list of them; a glob (``"s3://b/train-*.rec"``);
        a brace range (``"train-{00000..00015}.rec"``); a manifest
        (``train.manifest.json``); the name a sharded pack was given
        (``data/train``); or the folder that holds a set.
    index
        For a single file, as :func:`~mxrec.io.opener.RecordReader`'s (an
        ``.idx`` path, ``True``, ``False`` or ``None``); a shard set takes only
        ``None``, ``True`` or ``False``.
    key_type
        Converts ``.idx`` keys (``int`` or ``str``).
    duplicates
        ``"error"`` or ``"last"``, as :func:`~mxrec.io.opener.RecordReader`'s.
    strict
        ``False`` skips damaged framing instead of raising.
    storage_options
        The storage settings (a :class:`~mxrec.storage.settings.Storage`, or fsspec options).
    cache_dir
        A local folder (or :class:`~mxrec.storage.block_cache.BlockCache`) that keeps
        fetched blocks of remote files; default: the storage settings'.

    Returns
    -------
    Records
        The file's reader, or a :class:`ShardSetReader` whose positions run
        ``0 .. N - 1`` across the shards.

    Raises
    ------
    ManifestError
        A shard is missing or differs from the manifest.
    OptionError
        ``index`` is a path but ``spec`` names a shard set.
    """
    storage_options = storage_of(storage_options)
    options = dict(storage_options=storage_options, cache_dir=BlockCache.from_setting(cache_dir, storage_options))
    if isinstance(spec, (str, os.PathLike)) and os.fspath(spec).endswith(".rec") and not _BRACE.search(
            os.fspath(spec)) and not is_pattern(os.fspath(spec)):
        path = os.fspath(spec)
        try:
            return RecordReader(path, index, key_type, duplicates=duplicates, strict=strict, **options)
        except (FileNotFoundError, RemoteNotFoundError):
            # the name a sharded pack was given: its shards exist, the .rec itself does not
            candidate = manifest_path(path)
            if index is not None or not exists(candidate, storage_options):
                raise
            spec = candidate
    shards, manifest = resolve_dataset(spec, storage_options)
    if len(shards) == 1 and manifest is None:
        return RecordReader(shards[0].rec, index, key_type, duplicates=duplicates, strict=strict, **options)
    if index not in (None, True, False):
        raise OptionError("index=PATH names the .idx of one file; a shard set takes index=None, True or False")
    return ShardSetReader(shards, manifest=manifest, index=index, key_type=key_type, duplicates=duplicates,
                          strict=strict, **options)


class ShardSetReader(Records):
    """Several ``.rec`` files read as one dataset, positions running across them in order (see the module docstring).

    Made by :func:`open_files`, whose parameters of the same names these are. Each method of the
    :class:`~mxrec.io.records.Records` contract takes and returns what the contract's does; their docstrings say
    what the set adds.

    Parameters
    ----------
    shards
        The shards, in position order.
    manifest
        The manifest they are listed in (what messages name), or ``None``.
    index
        ``None``, ``True`` or ``False``: whether each shard's ``.idx`` is read.
    key_type
        What each shard's ``.idx`` keys convert to.
    duplicates
        What a shard does with a repeated key (``"error"`` also refuses a key in two shards).
    strict
        ``False``: a shard's damaged framing is stepped over.
    storage_options
        The storage settings every shard is read with.
    cache_dir
        The block cache the shards share, or ``None``.

    Raises
    ------
    ManifestError
        No shards, or a local shard's size differs from the manifest.
    """

    def __init__(self, shards: Sequence[Shard], *, manifest: str | None = None, index: bool | None = None,
                 key_type: KeyType = int, duplicates: Literal["error", "last"] = "error", strict: bool = True,
                 storage_options: StorageOptions = None, cache_dir: BlockCache | None = None) -> None:
        if not shards:
            raise ManifestError(manifest, "a shard set needs at least one shard")
        self.shards = list(shards)
        self.manifest = manifest
        self.path = manifest if manifest is not None else f"{self.shards[0].rec} (+{len(self.shards) - 1} shards)"
        self.index = index
        self.key_type = key_type
        self.duplicates = duplicates
        self.strict = strict
        self.storage = storage_of(storage_options)
        self.cache_dir = cache_dir
        self.index_path = None  # one .idx per shard
        self._remote = any(is_url(s.rec) for s in self.shards)
        self._readers: list[Records | None] = [None] * len(self.shards)
        self._window: ShuffleWindow | None = None  # see follow
        self._followed: tuple[ReadPlan, int] | None = None
        self._window_origin = 0
        self._positions: dict | None = None
        self._keys: list | None = None
        if manifest is not None and not self._remote:
            for number, shard in enumerate(self.shards):
                self._check_local_size(number, shard)
        self._starts: np.ndarray | None = None
        if all(s.records is not None for s in self.shards):
            self._count()

    @property
    def counts(self) -> list[int]:
        """Records in each shard (every shard without a manifest count opened, in parallel, the first time)."""
        return np.diff(self.starts).tolist()

    @property
    def starts(self) -> np.ndarray:
        """Where each shard's positions start, and the total last (see :attr:`counts`)."""
        if self._starts is None:
            self._count()
        return self._starts

    def _count(self) -> None:
        """Count the records: the manifest's counts, else the shards' ``.idx`` files, read ``in_flight`` at once."""
        unknown = [n for n, s in enumerate(self.shards) if s.records is None and self._readers[n] is None]
        if self._remote and len(unknown) > 1:
            with ThreadPoolExecutor(min(self.storage.policy.in_flight, len(unknown)),
                                    thread_name_prefix="mxrec-open") as pool:
                list(pool.map(self.shard, unknown))
        counts = [s.records if s.records is not None else len(self.shard(n)) for n, s in enumerate(self.shards)]
        self._starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)

    def _where(self, number: int) -> str:
        shard = self.shards[number]
        return f"shard {number} ({shard.rec})" + (f" listed in {self.manifest}" if self.manifest else "")

    def _check_local_size(self, number: int, shard: Shard) -> None:
        try:
            size = os.path.getsize(shard.rec)
        except FileNotFoundError:
            raise ManifestError(self.manifest, f"{self._where(number)} is missing") from None
        if shard.rec_bytes is not None and size != shard.rec_bytes:
            raise ManifestError(self.manifest, f"{self._where(number)} has {size} bytes, the manifest says "
                                               f"{shard.rec_bytes} (an unfinished or replaced shard)")

    def shard(self, number: int) -> Records:
        """The reader of one shard, opened (and checked against the manifest) on first use.

        Parameters
        ----------
        number
            The shard's number in the set.

        Returns
        -------
        Records
            Its reader.

        Raises
        ------
        ManifestError
            The shard is missing, or holds another number of records than the manifest says.
        """
        reader = self._readers[number]
        if reader is None:
            shard = self.shards[number]
            extra = {"size": shard.rec_bytes} if is_url(shard.rec) and shard.rec_bytes is not None else {}
            index = shard.idx if shard.idx is not None else self.index
            try:
                reader = RecordReader(shard.rec, index, self.key_type, duplicates=self.duplicates,
                                      strict=self.strict, storage_options=self.storage,
                                      cache_dir=self.cache_dir, checksums=shard.checksums, **extra)
            except (FileNotFoundError, RemoteNotFoundError) as exc:
                raise ManifestError(self.manifest or shard.rec, f"{self._where(number)} is missing: {exc}") from None
            if shard.records is not None and len(reader) != shard.records:
                raise ManifestError(self.manifest, f"{self._where(number)} holds {len(reader)} records, the "
                                                   f"manifest says {shard.records}")
            self._readers[number] = reader
            self._share_window(number, reader)
        return reader

    @property
    def damage(self) -> RecordFormatError | None:
        """The first framing fault a shard opened so far stepped over (``strict=False``), or ``None``."""
        return next((r.damage for r in self._readers if r is not None and r.damage is not None), None)

    def check(self) -> None:
        """Check every shard against the manifest now (remote shards: one size request each)."""
        for number, shard in enumerate(self.shards):
            if not is_url(shard.rec):
                self._check_local_size(number, shard)
                continue
            reader = self.shard(number)
            assert isinstance(reader, RemoteRecordReader)
            try:
                actual = reader.stored_size()
            except RemoteNotFoundError as exc:
                raise ManifestError(self.manifest or shard.rec, f"{self._where(number)} is missing: {exc}") from None
            if shard.rec_bytes is not None and actual != shard.rec_bytes:
                raise ManifestError(self.manifest, f"{self._where(number)} has {actual} bytes, the manifest says "
                                                   f"{shard.rec_bytes} (an unfinished or replaced shard)")

    def locate(self, position: int) -> tuple[int, int]:
        """Which shard holds a record.

        Parameters
        ----------
        position
            A set position; a negative one counts from the end.

        Returns
        -------
        tuple of (int, int)
            ``(shard number, position in that shard)``.

        Raises
        ------
        RecordPositionError
            ``position`` is out of range.
        """
        total = int(self.starts[-1])
        if position < 0:
            position += total
        if not 0 <= position < total:
            raise RecordPositionError(f"{self.path}: record {position} out of range for {total} records")
        number = bisect.bisect_right(self.starts, position) - 1
        return number, position - int(self.starts[number])

    # -- the RecordReader interface -------------------------------------------------

    def __len__(self) -> int:
        return int(self.starts[-1])

    def __getitem__(self, position: int) -> bytes:
        """The record at ``position``, read from its shard (also :meth:`read`).

        Parameters
        ----------
        position
            Which record of the set.

        Returns
        -------
        bytes
            A copy of its payload.
        """
        number, local = self.locate(position)
        return self.shard(number)[local]

    read = __getitem__

    def view(self, position: int) -> memoryview:
        """The record at ``position``, viewed in its shard.

        Parameters
        ----------
        position
            Where the record is in the set.

        Returns
        -------
        memoryview
            Its payload, as the shard's reader gives it.
        """
        number, local = self.locate(position)
        return self.shard(number).view(local)

    def fetch(self, positions: Sequence[int] | np.ndarray) -> list[bytes | memoryview]:
        """The records at ``positions``, in that order (one fetch per shard: coalesced when remote).

        Parameters
        ----------
        positions
            Positions in the set.

        Returns
        -------
        list of bytes or memoryview
            One payload per position, as the shards' readers give them.
        """
        return gather(self.starts, positions, lambda number, local: self.shard(number).fetch(local), self.path)

    def __iter__(self) -> Iterator[bytes]:
        for number in range(len(self.shards)):
            yield from self.shard(number)

    @property
    def keys(self) -> list:
        """Every shard's keys, in dataset order (opens every shard)."""
        if self._keys is None:
            self._keys = [key for number in range(len(self.shards)) for key in self.shard(number).keys]
        return self._keys

    def position(self, key: object) -> int:
        """Position of the record with ``key`` (opens every shard the first time).

        Parameters
        ----------
        key
            A key of one shard's ``.idx``.

        Returns
        -------
        int
            Its position in the set.

        Raises
        ------
        DuplicateKeyError
            The key is in two shards (with ``duplicates="error"``).
        RecordKeyError
            No shard has the key.
        """
        if self._positions is None:
            positions: dict = {}
            for number in range(len(self.shards)):
                start = int(self.starts[number])
                for local, k in enumerate(self.shard(number).keys):
                    if k in positions and self.duplicates == "error":
                        first = self.locate(positions[k])[0]
                        raise DuplicateKeyError(self.manifest, f"key {k!r} is in {self._where(first)} and in "
                                                f"{self._where(number)}: look records up by position", key=k)
                    positions[k] = start + local
            self._positions = positions
        try:
            return self._positions[key]
        except (KeyError, TypeError):
            raise RecordKeyError(self.path, key=key) from None

    def header(self, position: int) -> IRHeader:
        """The header of the record at ``position``, read from its shard.

        Parameters
        ----------
        position
            The set position of the record.

        Returns
        -------
        IRHeader
            Its header.
        """
        number, local = self.locate(position)
        return self.shard(number).header(local)

    @property
    def nbytes(self) -> int:
        """Bytes of every shard's ``.rec`` (from the manifest when it has them)."""
        if all(s.rec_bytes is not None for s in self.shards):
            return sum(s.rec_bytes for s in self.shards)  # type: ignore[misc]
        return sum(self.shard(n).nbytes for n in range(len(self.shards)))

    def describe(self, position: int) -> str:
        """Where a record is, for messages: as its shard's reader describes it.

        Parameters
        ----------
        position
            A position in the set.

        Returns
        -------
        str
            ``shard file: record key``.
        """
        number, local = self.locate(position)
        return self.shard(number).describe(local)

    def io_stats(self) -> IOStats:
        """The opened shards' requests and bytes.

        Returns
        -------
        IOStats
            Their sum, the block cache they share counted once.
        """
        total = sum((reader.io_stats() for reader in self._readers if reader is not None), IOStats())
        if self.cache_dir is not None:
            total = replace(total, cache_hits=self.cache_dir.hits, cache_misses=self.cache_dir.misses)
        return total

    def default_shuffle_block(self) -> int:
        """Records per shuffle block when none is given.

        Returns
        -------
        int
            ``0`` (a global shuffle) for local shards; blocks of :func:`~mxrec.io.records.blocks_of` when any
            shard is remote.
        """
        return blocks_of(len(self), self.nbytes) if self._remote else 0

    def follow(self, plan: ReadPlan, *, origin: int = 0) -> None:
        """Get ready for an epoch's reads: one in-memory window of shuffle blocks shared by every remote shard.

        Shards opened later join it too. A global shuffle of remote shards warns what it costs.

        Parameters
        ----------
        plan
            The reads, in the set's numbering of positions.
        origin
            The number, in the order's numbering, of the set's position 0.
        """
        if not self._remote or not len(self) or (plan, origin) == self._followed:
            return
        self._followed = (plan, origin)
        if plan.scattered:
            warn_global_shuffle(self.path, len(self))
        if plan.shuffle_block <= 0:
            self._window = None
            return
        self._window = window_for(plan, self.storage)
        self._window.locate_with(self._pieces)
        self._window_origin = origin
        for number, reader in enumerate(self._readers):
            self._share_window(number, reader)

    def _pieces(self, number: int) -> Pieces:
        """Where shuffle block ``number`` lies, in the remote shards opened so far (read-ahead opens none: a
        shard's first block is fetched when asked for)."""
        k = self._window.shuffle_block
        lo, hi = number * k - self._window_origin, (number + 1) * k - self._window_origin
        first = max(0, int(np.searchsorted(self.starts, lo, side="right")) - 1)
        found: Pieces = []
        for shard in range(first, len(self.shards)):
            if self.starts[shard] >= hi:
                break
            reader = self._readers[shard]
            if isinstance(reader, RemoteRecordReader):
                found += reader.pieces(number)
        return found

    def _share_window(self, number: int, reader: Records | None) -> None:
        if self._window is not None and isinstance(reader, RemoteRecordReader):
            reader.share_window(self._window, self._window_origin + int(self.starts[number]))

    def close(self) -> None:
        """Close every shard opened so far."""
        for reader in self._readers:
            if reader is not None:
                reader.close()

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_positions"] = None
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        if self._window is not None:  # (a window arrives without where its blocks are)
            self._window.locate_with(self._pieces)

    def __repr__(self) -> str:
        return f"ShardSetReader({self.path!r}, {len(self.shards)} shards, {len(self)} records)"
