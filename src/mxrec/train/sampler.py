"""Epoch order: which records go into which batch, for every epoch, on every rank -- and where to resume.

Pure functions of the record count and the settings, plus one class that
plans each epoch's batches for one rank:

* :func:`epoch_order`: all record positions, in file order, in a global
  permutation drawn from ``(seed, epoch)``, or *block-shuffled* (below). The
  same settings give the same order in every process; each epoch gets a new one.
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

Block shuffle (``shuffle_block`` records per block, ``shuffle_window``
blocks per window): the file is cut into blocks of contiguous records, the
blocks are put in a random order, and the records of each run of
``shuffle_window`` consecutive blocks (in that order) are shuffled among
themselves. A batch then draws from at most about ``shuffle_window`` places of
the file, which a remote reader fetches with that many ranged reads instead
of one per record (MXNet's ``shuffle_chunk_*`` idea). Every record appears
exactly once per epoch. ``shuffle_block=0`` is the full global shuffle.

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
* ``num_parts``: MXNet gives each part a contiguous slice of the file, and
  parts can differ in size by a record (and so in batch count, which stalls
  distributed training); here parts take turns in one global order and always
  have equal batch counts (``stick_to_shard`` gives contiguous, equal parts).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Literal

import numpy as np

from mxrec.errors import ParameterError
from mxrec.io.records import Records
from mxrec.transforms.rng import stream_key

LastBatch = Literal["wrap", "partial", "discard", "roll_over"]
LAST_BATCH_POLICIES = ("wrap", "partial", "discard", "roll_over")
EMPTY_SLOT = -1


BLOCK_STREAM = 0x626C6B  # separates block-shuffle draws from the global permutation of the same seed


def epoch_order(num_records: int, *, shuffle: bool, seed: int, epoch: int, shuffle_block: int = 0,
                shuffle_window: int = 1) -> np.ndarray:
    """Record positions ``0..num_records-1`` for ``epoch``: in order, or shuffled from ``(seed, epoch)``.

    ``shuffle_block > 1`` block-shuffles (see the module docstring); otherwise the shuffle is global.
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


DEFAULT_SHUFFLE_WINDOW = 8


def shuffle_block_for(reader: Records, shuffle_block: int | None, chunk_megabytes: float = 0) -> int:
    """Records per shuffle block: as given, else from MXNet's ``shuffle_chunk_size`` (MB), else the reader's
    default (:meth:`~mxrec.io.records.Records.default_shuffle_block`: global for local data, about 4 MiB blocks
    for remote data)."""
    if shuffle_block is not None:
        return shuffle_block
    if chunk_megabytes > 0 and len(reader):
        return max(1, round(chunk_megabytes * (1 << 20) * len(reader) / max(reader.nbytes, 1)))
    return reader.default_shuffle_block()


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
    """

    def __init__(self, num_records: int, batch_size: int, *, shuffle: bool = False, seed: int = 0,
                 num_parts: int = 1, part_index: int = 0, last_batch: LastBatch = "wrap", shuffle_block: int = 0,
                 shuffle_window: int = 1, stick_to_shard: bool = False, pad_last_batch: bool = True) -> None:
        if batch_size < 1:
            raise ParameterError(f"batch_size must be >= 1, got {batch_size}")
        if last_batch not in LAST_BATCH_POLICIES:
            raise ParameterError(f"last_batch must be one of {LAST_BATCH_POLICIES}, not {last_batch!r}")
        if shuffle_block < 0 or shuffle_window < 1:
            raise ParameterError(f"need shuffle_block >= 0 and shuffle_window >= 1, got {shuffle_block}, "
                                 f"{shuffle_window}")
        check_parts(num_parts, part_index)
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
        return epoch_order(self.num_records, shuffle=self.shuffle, seed=self.seed, epoch=epoch,
                           shuffle_block=self.shuffle_block, shuffle_window=self.shuffle_window)

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
        return {"num_records": self.num_records, "shuffle": self.shuffle, "seed": self.seed,
                "shuffle_block": self.shuffle_block, "shuffle_window": self.shuffle_window,
                "last_batch": self.last_batch, "stick_to_shard": self.stick_to_shard}

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
