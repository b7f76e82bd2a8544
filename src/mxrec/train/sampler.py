"""Epoch order: which records go into which batch, for every epoch, on every rank.

Pure functions of the record count and the settings, plus one small class that
carries leftovers from one epoch into the next (``roll_over``):

* :func:`epoch_order`: all record positions, in file order or in a global
  permutation drawn from ``(seed, epoch)``. The same seed gives the same
  order in every process; each epoch gets a new one.
* :func:`shard`: the slice of that order that part ``part_index`` of
  ``num_parts`` reads. Every part gets the same number of records: the
  order is cut into equal contiguous slices, padded by wrapping around to
  its start (or, with ``drop_remainder``, cut short), so every rank runs the
  same number of batches.
* :class:`BatchSampler`: cuts a part's order into :class:`BatchPlan` s of
  ``batch_size`` slots with one of four last-batch policies.

How this differs from MXNet's ``ImageRecordIter`` (see
``tests/data/golden/iter/epoch_semantics.json``):

* ``round_batch=True`` (``last_batch="wrap"``): MXNet fills the last batch
  from the start of the file but then starts the next epoch where the filler
  stopped, so epochs drift and get shorter (4, 3, 3, ... batches); here every
  epoch starts at its beginning and has the same number of batches.
* ``round_batch=False`` (``"partial"``): MXNet reports ``pad=0`` for the short
  last batch and leaves stale images from earlier batches in its empty slots;
  here ``pad`` counts the empty slots, which hold zeros and index ``-1``.
* shuffling without an ``.idx``: MXNet shuffles only within chunks of the
  file; here the reader scans the file once and the shuffle is global.
* ``num_parts``: MXNet's parts can differ in size by a record (and so in
  batch count, which stalls distributed training); here they are equal.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from mxrec.errors import ParameterError
from mxrec.transforms.rng import stream_key

LastBatch = Literal["wrap", "partial", "discard", "roll_over"]
LAST_BATCH_POLICIES = ("wrap", "partial", "discard", "roll_over")
EMPTY_SLOT = -1


def epoch_order(num_records: int, *, shuffle: bool, seed: int, epoch: int) -> np.ndarray:
    """Record positions ``0..num_records-1`` for ``epoch``: in order, or a permutation drawn from ``(seed, epoch)``."""
    if not shuffle:
        return np.arange(num_records, dtype=np.int64)
    return np.random.default_rng(stream_key(seed, epoch)).permutation(num_records).astype(np.int64)


def part_size(num_records: int, num_parts: int, *, drop_remainder: bool = False) -> int:
    """Records in each of ``num_parts`` equal parts: rounded up (wrapping around), or down with ``drop_remainder``."""
    if drop_remainder:
        return num_records // num_parts
    return -(-num_records // num_parts)


def shard(order: np.ndarray, num_parts: int, part_index: int, *, drop_remainder: bool = False) -> np.ndarray:
    """Part ``part_index`` of ``num_parts`` equal contiguous slices of ``order`` (see :func:`part_size`)."""
    check_parts(num_parts, part_index)
    if num_parts == 1:
        return order
    size = part_size(len(order), num_parts, drop_remainder=drop_remainder)
    if len(order) == 0:
        return order
    padded = np.resize(order, size * num_parts)  # repeats from the start when rounding up
    return padded[part_index * size:(part_index + 1) * size]


def check_parts(num_parts: int, part_index: int) -> None:
    """Raise :class:`ParameterError` unless ``0 <= part_index < num_parts``."""
    if num_parts < 1 or not 0 <= part_index < num_parts:
        raise ParameterError(f"need num_parts >= 1 and 0 <= part_index < num_parts, got "
                             f"num_parts={num_parts}, part_index={part_index}")


@dataclass(frozen=True)
class BatchPlan:
    """One batch to load: a record position per slot (``-1``: empty slot), the epoch each was drawn in, and ``pad``.

    ``pad`` counts the trailing slots that are not new records of this epoch:
    repeats from its start (``wrap``) or empty slots (``partial``).
    """

    positions: np.ndarray
    epochs: np.ndarray
    pad: int

    def __len__(self) -> int:
        return len(self.positions)


@dataclass(frozen=True)
class Leftover:
    """Records of an epoch's incomplete last batch that ``roll_over`` carries into the next epoch."""

    positions: np.ndarray
    epochs: np.ndarray


NO_LEFTOVER = Leftover(np.empty(0, np.int64), np.empty(0, np.int64))


class BatchSampler:
    """The batches of one part, epoch after epoch.

    ``last_batch`` says what happens to a last batch with fewer than
    ``batch_size`` records:

    * ``"wrap"``: filled with records from the start of the epoch's order
      (MXNet's ``round_batch=True``, ``ImageIter``'s ``"pad"``);
    * ``"partial"``: kept, its empty slots marked ``-1``;
    * ``"discard"``: dropped (and parts are cut down rather than padded);
    * ``"roll_over"``: its records open the next epoch's first batch (see
      :meth:`epoch`).
    """

    def __init__(self, num_records: int, batch_size: int, *, shuffle: bool = False, seed: int = 0,
                 num_parts: int = 1, part_index: int = 0, last_batch: LastBatch = "wrap") -> None:
        if batch_size < 1:
            raise ParameterError(f"batch_size must be >= 1, got {batch_size}")
        if last_batch not in LAST_BATCH_POLICIES:
            raise ParameterError(f"last_batch must be one of {LAST_BATCH_POLICIES}, not {last_batch!r}")
        check_parts(num_parts, part_index)
        self.num_records = num_records
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.seed = seed
        self.num_parts = num_parts
        self.part_index = part_index
        self.last_batch = last_batch

    def part_order(self, epoch: int) -> np.ndarray:
        """The positions this part reads in ``epoch``, in order."""
        order = epoch_order(self.num_records, shuffle=self.shuffle, seed=self.seed, epoch=epoch)
        return shard(order, self.num_parts, self.part_index, drop_remainder=self.last_batch == "discard")

    def batches_per_epoch(self) -> int:
        """Batches in an epoch (with ``roll_over``: in one that starts with no leftover)."""
        size = part_size(self.num_records, self.num_parts, drop_remainder=self.last_batch == "discard")
        if self.last_batch in ("discard", "roll_over"):
            return size // self.batch_size
        return -(-size // self.batch_size)

    def epoch(self, epoch: int, leftover: Leftover = NO_LEFTOVER) -> tuple[list[BatchPlan], Leftover]:
        """The batches of ``epoch``, and what it leaves over for the next one.

        ``leftover`` (from the previous epoch, ``roll_over`` only) goes first.
        """
        order = self.part_order(epoch)
        epochs = np.full(len(order), epoch, dtype=np.int64)
        if self.last_batch == "roll_over":
            order = np.concatenate([leftover.positions, order])
            epochs = np.concatenate([leftover.epochs, epochs])
        size = self.batch_size
        full = len(order) // size
        plans = [BatchPlan(order[i * size:(i + 1) * size], epochs[i * size:(i + 1) * size], 0) for i in range(full)]
        rest = len(order) - full * size
        if self.last_batch == "roll_over":
            return plans, Leftover(order[full * size:], epochs[full * size:])
        if rest and self.last_batch != "discard":
            missing = size - rest
            if self.last_batch == "wrap":
                filler = np.resize(order, missing)  # from the start of the epoch, repeating if it is short
            else:
                filler = np.full(missing, EMPTY_SLOT, dtype=np.int64)
            plans.append(BatchPlan(np.concatenate([order[full * size:], filler]),
                                   np.concatenate([epochs[full * size:], np.full(missing, epoch, np.int64)]),
                                   missing))
        return plans, NO_LEFTOVER
