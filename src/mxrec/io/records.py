"""The reader contract: what every dataset of records offers, wherever and however it is stored.

:class:`Records` is the one interface the consumers (the iterators, the PyTorch
datasets, Ray, the doctor, packing) are written against. It is implemented by

* :class:`~mxrec.io.local_reader.LocalRecordReader`: a local ``.rec``, memory-mapped;
* :class:`~mxrec.io.remote_reader.RemoteRecordReader`: a ``.rec`` at a URL, read with ranged requests;
* :class:`~mxrec.datasets.shard_set.ShardSetReader`: several ``.rec`` files read as one;
* :class:`~mxrec.datasets.subset.RecordSubset`: some records of another :class:`Records`.

:func:`~mxrec.io.opener.RecordReader` opens one file (the local or the remote
reader, chosen by the path); :func:`~mxrec.datasets.shard_set.open_dataset`
opens anything that names a dataset.

Positions run ``0..len - 1``. :meth:`Records.fetch` is the one read path for
many records, local or remote: a consumer hands it a batch's positions and
gets the payloads, as cheaply as the storage allows (views into the mapping of
a local file, coalesced ranged reads of a remote one). How a dataset likes to
be ordered is the reader's to say too (:meth:`Records.epoch_order`: global
shuffles where random access is cheap, small blocks in a wide window where every jump
costs a request), and it gets ready for the reads an epoch plans when it is
given the plan (:meth:`Records.follow`), so no consumer asks where the bytes
live; what reading cost the storage so far, :meth:`Records.io_stats` says
(:class:`IOStats`). Every reader carries the :class:`~mxrec.storage.settings.Storage`
it was opened with (:attr:`Records.storage`), so whoever takes it reads with
the same settings.

Every implementation pickles to paths, options and parsed indexes (no open
file, mapping or connection) and opens again, lazily, where it is unpickled:
readers cross into ``DataLoader`` workers and Ray tasks, under fork and spawn.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, fields

import numpy as np

from mxrec.errors import HeaderError, RecordFormatError, RecordKeyError, RecordPositionError
from mxrec.format.header import IRHEADER_SIZE, IRHeader, unpack, unpack_header
from mxrec.io.order import DEFAULT_SHUFFLE_WINDOW, EpochOrder, ReadPlan, ShuffledOrder, window_of
from mxrec.storage.settings import Storage

#: Remote data is block-shuffled by default, in blocks of about this many bytes (one ranged request each) ...
REMOTE_BLOCK_BYTES = 256 << 10
#: ... and of at least this many records (an epoch makes at most records / this many requests).
MIN_BLOCK_RECORDS = 10
_BATCH = 4096  # records per read_batch when the default __iter__ walks a dataset


def blocks_of(num_records: int, nbytes: int, block_bytes: int = REMOTE_BLOCK_BYTES) -> int:
    """Records per shuffle block of about ``block_bytes`` bytes (at least :data:`MIN_BLOCK_RECORDS`), for
    ``num_records`` records in ``nbytes`` bytes: the one block rule (a reader's default, MXNet's
    ``shuffle_chunk_size``)."""
    if not num_records:
        return 0
    return min(num_records, max(MIN_BLOCK_RECORDS, round(block_bytes * num_records / max(nbytes, 1))))


def gather(starts: np.ndarray, positions: Sequence[int] | np.ndarray,
           fetch_part: Callable[[int, np.ndarray], list], path: str) -> list:
    """The records at ``positions`` of datasets laid end to end (part ``n`` holds positions ``starts[n]`` to
    ``starts[n + 1] - 1``), in that order: one ``fetch_part(n, local positions)`` per part touched (a shard set's
    shards, a mixture's sources)."""
    at = np.asarray(positions, dtype=np.int64)
    total = int(starts[-1])
    at = np.where(at < 0, at + total, at)
    if at.size and (at.min() < 0 or at.max() >= total):
        raise RecordPositionError(f"{path}: record position out of range for {total} records")
    numbers = np.searchsorted(starts, at, side="right") - 1
    out: list = [None] * len(at)
    for number in np.unique(numbers).tolist():
        slots = np.flatnonzero(numbers == number)
        for slot, record in zip(slots.tolist(), fetch_part(number, at[slots] - starts[number]), strict=True):
            out[slot] = record
    return out


@dataclass(frozen=True)
class IOStats:
    """What a reader asked of its storage so far, in this process: ranged ``requests`` and the ``bytes`` they
    brought (remote files), and the block cache's ``cache_hits``/``cache_misses`` (blocks). All zero for a
    local file: it is memory-mapped, and reading it makes no requests. ``later - earlier`` is what was done
    in between; ``a + b`` adds two readers' counts."""

    requests: int = 0
    bytes: int = 0
    cache_hits: int = 0
    cache_misses: int = 0

    def __add__(self, other: IOStats) -> IOStats:
        return IOStats(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))

    def __sub__(self, other: IOStats) -> IOStats:
        return IOStats(*(getattr(self, f.name) - getattr(other, f.name) for f in fields(self)))


class Records(ABC):
    """A dataset of records (see the module docstring).

    Attributes every implementation sets: ``path`` (what messages name: the
    file, URL or manifest), ``index_path`` (the one ``.idx`` its keys come
    from, ``None`` after a scan or for a shard set), ``damage`` (the first
    framing fault a non-strict scan stepped over, or ``None``), ``keys``
    (the ``.idx`` keys in position order, or ``0..n-1`` after a scan) and
    ``storage`` (the :class:`~mxrec.storage.settings.Storage` it was opened with).
    """

    path: str
    index_path: str | None
    damage: RecordFormatError | None
    keys: Sequence
    storage: Storage

    # -- what an implementation provides ----------------------------------------

    @abstractmethod
    def __len__(self) -> int:
        """The number of records."""

    @abstractmethod
    def fetch(self, positions: Sequence[int] | np.ndarray) -> list[bytes | memoryview]:
        """The payloads of the records at ``positions``, in that order: the read path for a batch.

        Local files give views into their mapping (valid while the reader is
        open), remote ones bytes fetched with coalesced ranged reads.

        Parameters
        ----------
        positions
            Record positions, in any order (a position may repeat).

        Returns
        -------
        list of bytes or memoryview
            One payload per position.
        """

    @abstractmethod
    def view(self, position: int) -> memoryview:
        """The record at ``position``, without a copy where the storage allows it.

        Parameters
        ----------
        position
            Which record (positions run from 0).

        Returns
        -------
        memoryview
            Its payload.
        """

    @abstractmethod
    def position(self, key: object) -> int:
        """The position of the record stored under ``key``.

        Parameters
        ----------
        key
            A key of the ``.idx`` (of ``key_type``).

        Returns
        -------
        int
            Its position.

        Raises
        ------
        RecordKeyError
            No record is stored under ``key``.
        """

    @property
    @abstractmethod
    def nbytes(self) -> int:
        """Bytes of the ``.rec`` file(s)."""

    @abstractmethod
    def close(self) -> None:
        """Release files and mappings. Idempotent."""

    # -- derived: implementations may do them faster --------------------------------

    def __getitem__(self, position: int) -> bytes:
        """The record at ``position`` (a copy)."""
        return bytes(self.fetch([position])[0])

    def read(self, position: int) -> bytes:
        """The record at ``position`` (as ``reader[position]``).

        Parameters
        ----------
        position
            Which record, as for :meth:`view`.

        Returns
        -------
        bytes
            A copy of its payload.
        """
        return self[position]

    def read_batch(self, positions: Sequence[int] | np.ndarray) -> list[bytes]:
        """The records at ``positions``, in that order, as ``bytes`` (:meth:`fetch`, copied).

        Parameters
        ----------
        positions
            Record positions.

        Returns
        -------
        list of bytes
            One payload per position.
        """
        return [p if isinstance(p, bytes) else bytes(p) for p in self.fetch(positions)]

    def __iter__(self) -> Iterator[bytes]:
        """Every record, in position order."""
        for first in range(0, len(self), _BATCH):
            yield from self.read_batch(range(first, min(len(self), first + _BATCH)))

    def header(self, position: int) -> IRHeader:
        """The ``IRHeader`` of the record at ``position`` (copies only the header bytes).

        Parameters
        ----------
        position
            The record whose header is read.

        Returns
        -------
        IRHeader
            Its header.

        Raises
        ------
        HeaderError
            The record is too short for its header (the message names it).
        """
        view = self.view(position)
        try:
            flag = int.from_bytes(view[:4], "little") if len(view) >= 4 else 0
            return unpack_header(bytes(view[:IRHEADER_SIZE + 4 * flag]))[0]
        except HeaderError as exc:
            raise HeaderError(f"{self.describe(position)}: {exc}") from None
        finally:
            view.release()

    def unpack(self, position: int) -> tuple[IRHeader, bytes]:
        """The record at ``position``, split into its header and the rest.

        Parameters
        ----------
        position
            The record to split.

        Returns
        -------
        tuple of (IRHeader, bytes)
            ``(header, rest)``.
        """
        return unpack(self[position])

    def read_key(self, key: object) -> bytes:
        """The record stored under ``key`` (:meth:`position`, then the read).

        Parameters
        ----------
        key
            A key of the ``.idx``.

        Returns
        -------
        bytes
            A copy of its payload.
        """
        return self[self.position(key)]

    def __contains__(self, key: object) -> bool:
        try:
            self.position(key)
        except RecordKeyError:
            return False
        return True

    def describe(self, position: int) -> str:
        """Where a record is, for messages.

        Parameters
        ----------
        position
            The record to name.

        Returns
        -------
        str
            ``file: record key``.
        """
        return f"{self.path}: record {self.keys[position]!r}"

    def default_shuffle_block(self) -> int:
        """Records per shuffle block when none is given.

        Returns
        -------
        int
            ``0`` (a global shuffle) where random access is cheap, as here; blocks of about
            :data:`REMOTE_BLOCK_BYTES` where every jump costs a request.
        """
        return 0

    def epoch_order(self, *, shuffle: bool, seed: int = 0, shuffle_block: int | None = None,
                    shuffle_window: int = DEFAULT_SHUFFLE_WINDOW, chunk_megabytes: float = 0) -> EpochOrder:
        """The order epochs read this dataset in (:class:`~mxrec.io.order.EpochOrder`): every record once.

        Parameters
        ----------
        shuffle
            Shuffle (else file order).
        seed
            What the shuffles are drawn from, with the epoch.
        shuffle_block
            Records per block of a block shuffle (``0``: a global shuffle); default: MXNet's
            ``chunk_megabytes`` (``shuffle_chunk_size``) when given, else :meth:`default_shuffle_block`.
        shuffle_window
            Blocks mixed at a time; ``0``: as many as hold about :data:`~mxrec.io.order.WINDOW_BYTES` of this
            dataset's records (:func:`~mxrec.io.order.window_of`).
        chunk_megabytes
            MXNet's ``shuffle_chunk_size``: blocks of about this many MB.

        Returns
        -------
        EpochOrder
            The order.
        """
        if shuffle_block is None:
            shuffle_block = (blocks_of(len(self), self.nbytes, round(chunk_megabytes * (1 << 20)))
                             if chunk_megabytes > 0 else self.default_shuffle_block())
        if shuffle_window == 0:
            shuffle_window = window_of(shuffle_block, self.nbytes / max(len(self), 1))
        return ShuffledOrder(len(self), shuffle, seed, shuffle_block, shuffle_window)

    def follow(self, plan: ReadPlan, *, origin: int = 0) -> None:
        """Get ready for the reads an epoch will make.

        Local files need nothing; remote ones keep the blocks being read in memory, so each is fetched once per
        epoch.

        Parameters
        ----------
        plan
            The reads (:class:`~mxrec.io.order.ReadPlan`).
        origin
            The number, in the order's numbering, of this dataset's position 0 (a shard's first position in its
            set).
        """
        return None

    def io_stats(self) -> IOStats:
        """Requests, bytes and block-cache lookups made so far in this process.

        Returns
        -------
        IOStats
            The counts; all zero for a local file, as here.
        """
        return IOStats()

    def __enter__(self) -> Records:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
