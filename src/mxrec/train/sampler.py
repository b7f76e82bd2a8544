"""Epoch order cut into batches: which records go into which batch, for every epoch, on every rank, and where
to resume.

The order of an epoch is the dataset's to say (:class:`~mxrec.io.order.EpochOrder`, from
:meth:`~mxrec.io.records.Records.epoch_order`: every record once, in file order, shuffled globally or in blocks;
or a weighted mixture's interleaving, :mod:`mxrec.datasets.mixture`). This module cuts it into one rank's batches:

* :class:`BatchSampler`: one rank's batches. By default ranks consume the one
  global order **in lock-step**: step ``s`` takes the next ``batch_size *
  num_parts`` records of the order and rank ``r`` gets the ``r``-th
  ``batch_size`` of them. After every step the records all ranks have consumed
  are exactly a prefix of the global order, every rank has the same number of
  batches, and a run can resume from ``(epoch, records consumed)`` with any
  number of ranks (:meth:`BatchSampler.state` / :meth:`BatchSampler.restore`).
  ``stick_to_shard=True`` gives each rank a fixed contiguous part of the file
  instead (DALI's mode), see :class:`BatchSampler`.
* :func:`shard`: contiguous equal parts of an order.

A sampler never changes the dataset it samples: it gives the reads it plans as a
:class:`~mxrec.io.order.ReadPlan` (:meth:`BatchSampler.read_plan`), which whoever reads
the dataset hands to it (:meth:`~mxrec.io.records.Records.follow`).

Last batches (``last_batch``), with ``G = batch_size * num_parts`` records per
step: ``"wrap"`` fills the last, incomplete step from the start of the epoch's
order (the filled slots count in ``pad``); ``"partial"`` leaves them empty
(``-1``, counted in ``pad``; a rank may get a batch of padding only);
``"discard"`` drops the incomplete step; ``"roll_over"`` carries its records
into the next epoch's first step.

Resuming with a different number of ranks or batch size: the records already
consumed stay consumed and the rest of the epoch's order is cut into steps of
the new ``G``. When the new ``G`` divides what is left, the epoch ends exactly
as it would have; when it does not, the last step of that epoch is incomplete
and handled by ``last_batch`` as at the end of any epoch (filled and counted in
``pad``, left empty, dropped, or rolled over): nothing is repeated or skipped
anywhere else.

How this differs from MXNet's ``ImageRecordIter`` (epoch drift, stale padding,
chunk-only shuffles, unequal parts): the compatibility guide,
``docs/guide/compatibility.md``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Literal

import numpy as np

from mxrec.errors import ParameterError
from mxrec.format.seeds import stream_key
from mxrec.io.order import DEFAULT_SHUFFLE_WINDOW, EpochOrder, ReadPlan, ShuffledOrder, epoch_order

__all__ = ["DEFAULT_SHUFFLE_WINDOW", "EMPTY_SLOT", "BatchPlan", "BatchSampler", "Leftover", "epoch_order", "shard"]

LastBatch = Literal["wrap", "partial", "discard", "roll_over"]
LAST_BATCH_POLICIES = ("wrap", "partial", "discard", "roll_over")
EMPTY_SLOT = -1


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


def resolve_parts(num_parts: int | None, part_index: int | None) -> tuple[int, int]:
    """``(num_parts, part_index)`` as given, else from an initialised ``torch.distributed``, else ``(1, 0)``."""
    if num_parts is None and part_index is None:
        dist = sys.modules.get("torch.distributed")  # only if the program uses torch: never imported here
        if dist is not None and dist.is_available() and dist.is_initialized():
            return dist.get_world_size(), dist.get_rank()
        return 1, 0
    num_parts = 1 if num_parts is None else num_parts
    part_index = 0 if part_index is None else part_index
    check_parts(num_parts, part_index)
    return num_parts, part_index


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


STATE_FORMAT = "mxrec-epoch-position"
STATE_VERSION = 1


class BatchSampler:
    """The batches of one rank (part ``part_index`` of ``num_parts``), epoch after epoch.

    ``last_batch`` says what happens to the last, incomplete step (see the
    module docstring): ``"wrap"`` (MXNet's ``round_batch=True``,
    ``ImageIter``'s ``"pad"``), ``"partial"``, ``"discard"``, ``"roll_over"``
    (see :meth:`epoch`). ``shuffle_block``/``shuffle_window`` block-shuffle.

    ``stick_to_shard=True`` (DALI's mode): rank ``r`` always reads the
    ``r``-th contiguous part of the file, shuffled within the part when
    ``shuffle``; parts are equal, padded up by repeating the part's last
    record (``pad_last_batch=True``, repeats counted in ``pad``) or cut down
    to the shortest (``False``). Resuming then needs the same number of ranks.

    ``order``: the dataset's epoch order (:meth:`~mxrec.io.records.Records.epoch_order`, a mixture's
    interleaving, say); by default every one of ``num_records`` records once an epoch, ordered by ``shuffle``,
    ``seed``, ``shuffle_block`` and ``shuffle_window`` (:class:`~mxrec.io.order.ShuffledOrder`).
    """

    def __init__(self, num_records: int, batch_size: int, *, shuffle: bool = False, seed: int = 0,
                 num_parts: int = 1, part_index: int = 0, last_batch: LastBatch = "wrap", shuffle_block: int = 0,
                 shuffle_window: int = 1, stick_to_shard: bool = False, pad_last_batch: bool = True,
                 order: EpochOrder | None = None) -> None:
        if batch_size < 1:
            raise ParameterError(f"batch_size must be >= 1, got {batch_size}")
        if last_batch not in LAST_BATCH_POLICIES:
            raise ParameterError(f"last_batch must be one of {LAST_BATCH_POLICIES}, not {last_batch!r}")
        check_parts(num_parts, part_index)
        if order is None:
            order = ShuffledOrder(num_records, shuffle, seed, shuffle_block, shuffle_window)
        elif stick_to_shard and not isinstance(order, ShuffledOrder):
            raise ParameterError("stick_to_shard reads a fixed part of one dataset's records; a mixture's order "
                                 "is consumed in lock-step (stick_to_shard=False)")
        self.epoch_orders = order
        num_records = order.length
        self.num_records = num_records
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.seed = seed
        self.num_parts = num_parts
        self.part_index = part_index
        self.last_batch = last_batch
        self.shuffle_block = shuffle_block
        self.shuffle_window = shuffle_window
        self.stick_to_shard = stick_to_shard
        self.pad_last_batch = pad_last_batch

    @property
    def step(self) -> int:
        """Records of the epoch's sequence one step consumes: every rank's batch (lock-step), or this rank's."""
        return self.batch_size if self.stick_to_shard else self.batch_size * self.num_parts

    def order(self, epoch: int) -> np.ndarray:
        """The global order of ``epoch``."""
        return self.epoch_orders(epoch)

    def read_plan(self, lookahead: int) -> ReadPlan:
        """The reads this sampler's batches will make, for a reader working ``lookahead`` records ahead."""
        if self.stick_to_shard:
            return ReadPlan(0, 1, lookahead)  # (each rank's own part, shuffled within: no blocks)
        return self.epoch_orders.read_plan(lookahead)

    def part_order(self, epoch: int) -> tuple[np.ndarray, np.ndarray]:
        """``(positions, fresh)`` this rank's sequence draws from in ``epoch`` (``fresh``: False for padding)."""
        if not self.stick_to_shard:
            order = self.order(epoch)
            return order, np.ones(len(order), bool)
        n, parts, k = self.num_records, self.num_parts, self.part_index
        first, stop = k * n // parts, (k + 1) * n // parts  # contiguous, sizes differ by at most one
        size = -(-n // parts) if self.pad_last_batch else n // parts
        mine = np.arange(first, stop, dtype=np.int64)
        if self.shuffle:
            rng = np.random.default_rng(stream_key(self.seed, epoch, k, parts))
            mine = rng.permutation(mine)
        fresh = np.ones(size, bool)
        if len(mine) < size:
            fresh[len(mine):] = False
            mine = np.concatenate([mine, np.full(size - len(mine), mine[-1] if len(mine) else EMPTY_SLOT)])
        return mine[:size], fresh

    def batches_per_epoch(self, leftover: int = 0, start: int = 0) -> int:
        """Batches in an epoch that opens with ``leftover`` rolled-over records and ``start`` already consumed."""
        length = len(self.part_order(0)[0]) if self.stick_to_shard else self.num_records
        if self.last_batch == "roll_over":
            length += leftover
        remaining = max(0, length - start)
        if self.last_batch in ("discard", "roll_over"):
            return remaining // self.step
        return -(-remaining // self.step)

    def epoch(self, epoch: int, leftover: Leftover = NO_LEFTOVER, start: int = 0) -> tuple[list[BatchPlan], Leftover]:
        """This rank's batches of ``epoch`` from record ``start`` of its sequence, and what it leaves over.

        ``leftover`` (from the previous epoch, ``roll_over`` only) opens the sequence.
        """
        order, fresh = self.part_order(epoch)
        epochs = np.full(len(order), epoch, dtype=np.int64)
        if self.last_batch == "roll_over":
            sequence = np.concatenate([leftover.positions, order])
            epochs = np.concatenate([leftover.epochs, epochs])
            fresh = np.concatenate([np.ones(len(leftover.positions), bool), fresh])
        else:
            sequence = order
        step = self.step
        lo, hi = (0, step) if self.stick_to_shard else (self.part_index * self.batch_size,
                                                        (self.part_index + 1) * self.batch_size)
        rest, rest_epochs, rest_fresh = sequence[start:], epochs[start:], fresh[start:]
        full = len(rest) // step
        plans = []
        for i in range(full):
            mine = slice(i * step + lo, i * step + hi)
            plans.append(BatchPlan(rest[mine], rest_epochs[mine], int(np.count_nonzero(~rest_fresh[mine]))))
        tail = len(rest) - full * step
        if not tail:
            return plans, NO_LEFTOVER
        if self.last_batch == "roll_over":
            return plans, Leftover(rest[full * step:], rest_epochs[full * step:])
        if self.last_batch == "discard":
            return plans, NO_LEFTOVER
        missing = step - tail
        if self.last_batch == "wrap":
            filler = np.resize(order, missing)  # from the start of the epoch, repeating if it is short
        else:
            filler = np.full(missing, EMPTY_SLOT, dtype=np.int64)
        positions = np.concatenate([rest[full * step:], filler])[lo:hi]
        slot_epochs = np.concatenate([rest_epochs[full * step:], np.full(missing, epoch, np.int64)])[lo:hi]
        real = np.concatenate([rest_fresh[full * step:], np.zeros(missing, bool)])[lo:hi]
        plans.append(BatchPlan(positions, slot_epochs, int(np.count_nonzero(~real))))
        return plans, NO_LEFTOVER

    # -- where to resume -------------------------------------------------------------------

    def _settings(self) -> dict:
        return {**self.epoch_orders.settings(), "last_batch": self.last_batch, "stick_to_shard": self.stick_to_shard}

    def state(self, epoch: int, consumed: int, leftover: Leftover = NO_LEFTOVER) -> dict:
        """A JSON-serialisable position: ``epoch``, ``consumed`` records of its sequence, and its opening leftover."""
        state = {"format": STATE_FORMAT, "version": STATE_VERSION, **self._settings(),
                 "num_parts": self.num_parts, "batch_size": self.batch_size, "epoch": int(epoch),
                 "consumed": int(consumed),
                 "leftover": [[int(p), int(e)] for p, e in zip(leftover.positions.tolist(), leftover.epochs.tolist(),
                                                               strict=True)]}
        if self.stick_to_shard:
            state["pad_last_batch"] = self.pad_last_batch
        return state

    def restore(self, state: dict) -> tuple[int, int, Leftover]:
        """``(epoch, consumed, leftover)`` from :meth:`state`, after checking it describes the same epoch orders.

        The number of ranks and the batch size may differ (not with ``stick_to_shard``).
        """
        if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
            raise ParameterError(f"not an mxrec epoch position (no \"format\": \"{STATE_FORMAT}\"): {state!r:.200}")
        if state.get("version") != STATE_VERSION:
            raise ParameterError(f"epoch position version {state.get('version')!r} is not supported")
        for name, value in self._settings().items():
            if state.get(name) != value:
                raise ParameterError(f"cannot resume: the saved position has {name}={state.get(name)!r}, this "
                                     f"iterator has {name}={value!r} (the epoch order would differ)")
        if self.stick_to_shard and (state.get("num_parts"), state.get("pad_last_batch")) != (
                self.num_parts, self.pad_last_batch):
            raise ParameterError(f"cannot resume stick_to_shard with num_parts={self.num_parts} from a position "
                                 f"saved with num_parts={state.get('num_parts')}: each rank's part would differ")
        leftover = state.get("leftover") or []
        pairs = np.array(leftover, dtype=np.int64).reshape(-1, 2)
        consumed = int(state["consumed"])
        if consumed < 0:
            raise ParameterError(f"cannot resume: consumed={consumed} is negative")
        return int(state["epoch"]), consumed, Leftover(pairs[:, 0].copy(), pairs[:, 1].copy())
