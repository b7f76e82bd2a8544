"""The order an epoch reads a dataset's records in, and the reads that order asks of the storage.

An :class:`EpochOrder` gives, for each epoch, the positions one epoch visits, in order, drawn from ``(seed,
epoch)`` only: every process that asks gets the same order, and each epoch gets a new one. A dataset says how it
likes to be ordered (:meth:`mxrec.io.records.Records.epoch_order`): :class:`ShuffledOrder` for one dataset (every
record once, in file order, globally shuffled, or block-shuffled); a weighted mixture of datasets has its own
(:mod:`mxrec.datasets.mixture`). The sampler (:mod:`mxrec.train.sampler`) cuts the order into this rank's
batches, and hands the dataset the :class:`ReadPlan` the order implies (:meth:`EpochOrder.read_plan`): the
dataset is *given* the plan by whoever reads it, and a sampler never changes the dataset it samples.

Block shuffle (``shuffle_block`` records per block, ``shuffle_window`` blocks per window): the positions are cut
into blocks of consecutive records, the blocks put in a random order, and the records of each run of
``shuffle_window`` consecutive blocks (in that order) shuffled among themselves. A batch then draws from at most
about ``shuffle_window`` places of the file, which a remote reader fetches with that many ranged reads instead of
one per record (MXNet's ``shuffle_chunk_*`` idea). Every record appears exactly once per epoch.
``shuffle_block=0`` is the full global shuffle.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import numpy as np

from mxrec.errors import ParameterError
from mxrec.format.seeds import stream_key

#: Separates block-shuffle draws from the global permutation of the same seed.
BLOCK_STREAM = 0x626C6B
DEFAULT_SHUFFLE_WINDOW = 8


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
    blocks = rng.permutation(-(-num_records // shuffle_block))
    order = np.empty(num_records, np.int64)
    filled = 0
    window = max(1, shuffle_window)
    for first in range(0, len(blocks), window):
        chosen = blocks[first:first + window]
        records = (chosen[:, None] * shuffle_block + np.arange(shuffle_block)).ravel()
        records = records[records < num_records]
        rng.shuffle(records)
        order[filled:filled + len(records)] = records
        filled += len(records)
    return order


@dataclass(frozen=True)
class ReadPlan:
    """The reads an epoch's order will make, for the dataset to get ready for them.

    The order visits the records in blocks of ``shuffle_block`` consecutive positions, ``shuffle_window`` blocks at
    a time (``0``: no blocks), or in a global random order (``scattered``: about a request per remote record); the
    reader works ``lookahead`` records of the order ahead of the one in use. A mixture's plan has one plan per
    source in ``parts``.
    """

    shuffle_block: int = 0
    shuffle_window: int = 1
    lookahead: int = 0
    scattered: bool = False
    parts: tuple[ReadPlan, ...] = field(default=())


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
        A block shuffle (``shuffle_block=0``: global).

    Raises
    ------
    ParameterError
        A negative block or a window below 1.
    """

    length: int
    shuffle: bool = False
    seed: int = 0
    shuffle_block: int = 0
    shuffle_window: int = 1

    def __post_init__(self) -> None:
        if self.shuffle_block < 0 or self.shuffle_window < 1:
            raise ParameterError(f"need shuffle_block >= 0 and shuffle_window >= 1, got {self.shuffle_block}, "
                                 f"{self.shuffle_window}")

    def __call__(self, epoch: int) -> np.ndarray:
        return epoch_order(self.length, shuffle=self.shuffle, seed=self.seed, epoch=epoch,
                           shuffle_block=self.shuffle_block, shuffle_window=self.shuffle_window)

    def settings(self) -> dict:
        return {"num_records": self.length, "shuffle": self.shuffle, "seed": self.seed,
                "shuffle_block": self.shuffle_block, "shuffle_window": self.shuffle_window}

    def read_plan(self, lookahead: int) -> ReadPlan:
        if not self.shuffle:  # in file order: each block read once, one after another
            return ReadPlan(self.shuffle_block, 1, lookahead)
        if self.shuffle_block <= 1 or self.shuffle_block >= self.length:
            return ReadPlan(0, 1, lookahead, scattered=True)
        return ReadPlan(self.shuffle_block, self.shuffle_window, lookahead)
