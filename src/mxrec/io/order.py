"""The order an epoch reads a dataset's records in, and the reads that order asks of the storage.

An :class:`EpochOrder` gives, for each epoch, the positions one epoch visits, in order, drawn from ``(seed,
epoch)`` only: every process that asks gets the same order, and each epoch gets a new one. A dataset says how it
likes to be ordered (:meth:`mxrec.io.records.Records.epoch_order`): :class:`ShuffledOrder` for one dataset (every
record once, in file order, globally shuffled, or block-shuffled); a weighted mixture of datasets has its own
(:mod:`mxrec.datasets.mixture`). The sampler (:mod:`mxrec.train.sampler`) cuts the order into this rank's
batches, and hands the dataset the :class:`ReadPlan` the order implies (:meth:`EpochOrder.read_plan`): the
dataset is *given* the plan by whoever reads it, and a sampler never changes the dataset it samples.

Block shuffle (``shuffle_block`` records per block, ``shuffle_window`` blocks open at a time): the positions are
cut into blocks of consecutive records and the blocks put in a random order; block number ``j`` of that order is
read while the epoch is between block-time ``j`` and ``j + shuffle_window``, its records at random times inside
that span (then the records are sorted by their times). So a *sliding* window of ``shuffle_window`` blocks is
open at any moment: one block opens and about one closes each ``shuffle_block`` records, every batch draws from
all the open blocks, and a reader fetches one new block at a time, each once, with one ranged request (MXNet's
``shuffle_chunk_*`` idea, without its bursts). The first window's blocks all open at the start (block ``j`` is
read until ``j + shuffle_window``), so the first batches draw from a whole window too; the records of the last
window are mixed among themselves. Every record appears exactly
once per epoch. ``shuffle_block=0`` is the full global shuffle; ``shuffle_window=0`` asks for the default width
(:func:`window_of`: about :data:`WINDOW_BYTES` of records).

:func:`mixing` measures what an order gives a batch: the distinct labels per batch against a global shuffle's.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field, replace

import numpy as np

from mxrec.errors import ParameterError
from mxrec.format.seeds import stream_key
from mxrec.storage.block_cache import BlockCache

#: Separates block-shuffle draws from the global permutation of the same seed.
BLOCK_STREAM = 0x626C6B
#: ``shuffle_window`` when none is given: sized by :func:`window_of`.
DEFAULT_SHUFFLE_WINDOW = 0
#: The default window holds about this many bytes of records (the blocks open at once, in memory).
WINDOW_BYTES = 128 << 20
#: Blocks read at once where an epoch reads the records in file order (no mixing to keep: fewer, larger requests).
FILE_ORDER_BLOCKS = 16
#: Bytes a record is taken to hold where the dataset's size is not known.
RECORD_BYTES_GUESS = 16 << 10


def window_of(shuffle_block: int, record_bytes: float | None = None, window_bytes: int = WINDOW_BYTES) -> int:
    """Blocks of ``shuffle_block`` records open at once by default: as many as fit in ``window_bytes``.

    Parameters
    ----------
    shuffle_block
        Records per block.
    record_bytes
        Mean bytes per record (default :data:`RECORD_BYTES_GUESS`).
    window_bytes
        Bytes of records the window holds.

    Returns
    -------
    int
        Blocks per window, at least 1.
    """
    per_block = max(1, shuffle_block) * (record_bytes or RECORD_BYTES_GUESS)
    return max(1, round(window_bytes / max(per_block, 1)))


def epoch_order(num_records: int, *, shuffle: bool, seed: int, epoch: int, shuffle_block: int = 0,
                shuffle_window: int = 1) -> np.ndarray:
    """Record positions ``0..num_records-1`` for ``epoch``: in order, or shuffled from ``(seed, epoch)``.

    ``shuffle_block > 1`` block-shuffles (see the module docstring); otherwise the shuffle is global.

    Parameters
    ----------
    num_records
        Records to order.
    shuffle
        Shuffle (else file order).
    seed, epoch
        What the shuffle is drawn from.
    shuffle_block, shuffle_window
        Records per block and blocks per window of a block shuffle (``0``: a global shuffle).

    Returns
    -------
    numpy.ndarray
        ``int64`` positions, each once.
    """
    if not shuffle:
        return np.arange(num_records, dtype=np.int64)
    if shuffle_block <= 1 or shuffle_block >= num_records:
        return np.random.default_rng(stream_key(seed, epoch)).permutation(num_records).astype(np.int64)
    rng = np.random.default_rng(stream_key(BLOCK_STREAM, seed, epoch, shuffle_block, shuffle_window))
    count = -(-num_records // shuffle_block)
    window = shuffle_window if shuffle_window >= 1 else window_of(shuffle_block)
    if window >= count:  # every block open at once: a global shuffle
        return rng.permutation(num_records).astype(np.int64)
    opens = np.empty(count, np.float64)
    opens[rng.permutation(count)] = np.arange(count)  # block-time at which each block of the file opens
    opened = opens[np.arange(num_records) // shuffle_block]
    head = opened < window  # the first window's blocks all open at once, the j-th read until j + window
    times = np.where(head, 0.0, opened) + np.where(head, opened + window, window) * rng.random(num_records)
    tail = times >= count  # the last window: its records mixed among themselves
    times[tail] = count + window * rng.random(int(tail.sum()))
    return np.argsort(times, kind="stable").astype(np.int64)


@dataclass(frozen=True)
class Mixing:
    """Distinct labels per batch of an order (``per_batch``), a global shuffle's (``global_per_batch``, expected),
    and their ``ratio`` (1.0: as mixed as a global shuffle)."""

    per_batch: float
    global_per_batch: float
    batch_size: int

    @property
    def ratio(self) -> float:
        return self.per_batch / self.global_per_batch if self.global_per_batch else 1.0


def expected_distinct(counts: np.ndarray, batch_size: int) -> float:
    """Distinct labels expected in a batch of ``batch_size`` records drawn at random without replacement from
    records whose labels occur ``counts`` times (a global shuffle's batch).

    Parameters
    ----------
    counts
        Records per label.
    batch_size
        Records per batch.

    Returns
    -------
    float
        The expected number of distinct labels.
    """
    counts = np.asarray(counts, dtype=np.int64)
    total = int(counts.sum())
    b = min(batch_size, total)

    def log_falling(n: int) -> float:  # log(n (n-1) ... (n-b+1)), -inf when fewer than b remain
        return math.lgamma(n + 1) - math.lgamma(n - b + 1) if n >= b else -math.inf

    whole = log_falling(total)
    absent = {int(c): math.exp(log_falling(total - int(c)) - whole) for c in np.unique(counts)}
    return float(sum(1.0 - absent[int(c)] for c in counts))


def mixing(labels: np.ndarray, order: np.ndarray, batch_size: int = 64) -> Mixing:
    """How well ``order`` mixes ``labels``: the mean distinct labels per full batch against a global shuffle's.

    Parameters
    ----------
    labels
        The label of each record, by position.
    order
        Positions in the order read (an epoch's order).
    batch_size
        Records per batch.

    Returns
    -------
    Mixing
        The two figures and their ratio.

    Raises
    ------
    ParameterError
        ``batch_size`` below 1, or an order with fewer records than a batch.
    """
    labels = np.asarray(labels)
    order = np.asarray(order, dtype=np.int64)
    full = len(order) // batch_size if batch_size >= 1 else 0
    if full == 0:
        raise ParameterError(f"mixing needs batch_size >= 1 and at least one full batch, got {len(order)} records "
                             f"in batches of {batch_size}")
    _, codes = np.unique(labels, return_inverse=True)
    batches = np.sort(codes[order[:full * batch_size]].reshape(full, batch_size), axis=1)
    per_batch = float(np.mean(1 + np.count_nonzero(np.diff(batches, axis=1), axis=1)))
    return Mixing(per_batch, expected_distinct(np.bincount(codes), batch_size), batch_size)


@dataclass(frozen=True)
class ReadPlan:
    """The reads an epoch's order will make, for the dataset to get ready for them.

    The order visits the records in blocks of ``shuffle_block`` consecutive positions, ``shuffle_window`` blocks at
    a time (``0``: no blocks), or in a global random order (``scattered``: about a request per remote record); the
    reader works ``lookahead`` records of the order ahead of the one in use. ``order``, when given, is the order
    itself: a remote reader finds in it which blocks come next and reads them ahead. A mixture's plan has one
    plan per source in ``parts``. ``shared_blocks``: where processes reading the same plan at once (``DataLoader``
    workers) leave the shuffle blocks they download, so each block is downloaded by one of them
    (:meth:`shared_through`).
    """

    shuffle_block: int = 0
    shuffle_window: int = 1
    lookahead: int = 0
    scattered: bool = False
    parts: tuple[ReadPlan, ...] = field(default=())
    order: EpochOrder | None = None
    shared_blocks: BlockCache | None = None

    def shared_through(self, folder: str, max_bytes: int) -> ReadPlan:
        """This plan, and its parts', with their :attr:`shared_blocks` in ``folder``.

        Parameters
        ----------
        folder
            A local folder the processes reading this plan at once share.
        max_bytes
            The most it holds (the least recently used blocks are removed beyond it).

        Returns
        -------
        ReadPlan
            The same reads, their shuffle blocks shared through ``folder``.
        """
        store = BlockCache(folder, max_bytes)
        return self._sharing(store)

    def _sharing(self, store: BlockCache) -> ReadPlan:
        return replace(self, shared_blocks=store, parts=tuple(p._sharing(store) for p in self.parts))


class EpochOrder(ABC):
    """The positions each epoch visits, from ``(seed, epoch)`` only (see the module docstring)."""

    #: Positions one epoch visits.
    length: int

    @abstractmethod
    def __call__(self, epoch: int) -> np.ndarray:
        """The positions of ``epoch``, in order (``int64``)."""

    @abstractmethod
    def settings(self) -> dict:
        """What the orders are drawn from (JSON-serialisable): equal settings give equal orders, so a saved
        position is resumed only on the same orders."""

    @abstractmethod
    def read_plan(self, lookahead: int) -> ReadPlan:
        """The :class:`ReadPlan` of a reader that works ``lookahead`` records ahead in this order."""


@dataclass(frozen=True)
class ShuffledOrder(EpochOrder):
    """Every one of ``length`` records once an epoch: in file order, globally shuffled, or block-shuffled.

    Parameters
    ----------
    length
        Records in the dataset.
    shuffle
        Shuffle (else file order).
    seed
        What the shuffles are drawn from (with the epoch).
    shuffle_block, shuffle_window
        A block shuffle (``shuffle_block=0``: global; ``shuffle_window=0``: :func:`window_of`'s width).

    Raises
    ------
    ParameterError
        A negative block or window.
    """

    length: int
    shuffle: bool = False
    seed: int = 0
    shuffle_block: int = 0
    shuffle_window: int = 1

    def __post_init__(self) -> None:
        if self.shuffle_block < 0 or self.shuffle_window < 0:
            raise ParameterError(f"need shuffle_block >= 0 and shuffle_window >= 0, got {self.shuffle_block}, "
                                 f"{self.shuffle_window}")
        if self.shuffle_window == 0:
            object.__setattr__(self, "shuffle_window", window_of(self.shuffle_block))

    def __call__(self, epoch: int) -> np.ndarray:
        return epoch_order(self.length, shuffle=self.shuffle, seed=self.seed, epoch=epoch,
                           shuffle_block=self.shuffle_block, shuffle_window=self.shuffle_window)

    def settings(self) -> dict:
        return {"num_records": self.length, "shuffle": self.shuffle, "seed": self.seed,
                "shuffle_block": self.shuffle_block, "shuffle_window": self.shuffle_window}

    def read_plan(self, lookahead: int) -> ReadPlan:
        if not self.shuffle:  # in file order: each read a run of blocks, once, one after another, read ahead
            block = self.shuffle_block * FILE_ORDER_BLOCKS
            return ReadPlan(block, 1, lookahead, order=self) if block else ReadPlan(0, 1, lookahead)
        if self.shuffle_block <= 1 or self.shuffle_block >= self.length:
            return ReadPlan(0, 1, lookahead, scattered=True)
        return ReadPlan(self.shuffle_block, self.shuffle_window, lookahead, order=self)
