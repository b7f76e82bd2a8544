"""Which records each rank reads: one global order per epoch, consumed by all ranks in lock-step.

:class:`DistributedBatchSampler` hands a map-style dataset's ``DataLoader``
this rank's batches; :func:`rank_sampler` is the order behind it and behind
:class:`~mxrec.torch.datasets.ImageRecordIterable` (:mod:`mxrec.train.sampler`
documents the order, shuffles, last batches and resuming); :func:`worker_plan` lets the
``DataLoader`` workers reading that order share what they download.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence, Sized

from torch.utils.data import Sampler, get_worker_info

from mxrec.io.order import ReadPlan, ShuffledOrder
from mxrec.io.records import Records
from mxrec.io.shared_downloads import SharedDownloads
from mxrec.train.sampler import DEFAULT_SHUFFLE_WINDOW, BatchSampler, resolve_parts


def rank_sampler(num_records: int, *, reader: Records | None, batch_size: int, shuffle: bool, seed: int,
                 rank: int | None, world_size: int | None, drop_last: bool, shuffle_block: int | None,
                 shuffle_window: int, stick_to_shard: bool, pad_last_batch: bool) -> BatchSampler:
    """The lock-step batches of rank ``rank`` of ``world_size`` (by default those of an initialised
    ``torch.distributed``) in the dataset's epoch order (:meth:`~mxrec.io.records.Records.epoch_order`):
    :class:`~mxrec.train.sampler.BatchSampler` with the datasets' defaults (the last incomplete step is filled from
    the start of the order, or dropped with ``drop_last``)."""
    world, part = resolve_parts(world_size, rank)
    order = (reader.epoch_order(shuffle=shuffle, seed=seed, shuffle_block=shuffle_block, shuffle_window=shuffle_window)
             if reader is not None else ShuffledOrder(num_records, shuffle, seed, shuffle_block or 0, shuffle_window))
    return BatchSampler(num_records, batch_size, num_parts=world, part_index=part,
                        last_batch="discard" if drop_last else "wrap", stick_to_shard=stick_to_shard,
                        pad_last_batch=pad_last_batch, order=order)


class PlannedBatch(list):
    """A batch of positions that carries the sampler's :class:`~mxrec.io.order.ReadPlan`: the dataset that loads it
    (in a ``DataLoader`` worker) hands the plan to its reader, so a sampler never changes the dataset itself."""

    def __init__(self, positions: list[int], plan: ReadPlan) -> None:
        super().__init__(positions)
        self.plan = plan


def follow_batch(reader: Records, indices: Sequence[int], downloads: SharedDownloads | None = None) -> None:
    """Hand ``reader`` the plan a :class:`PlannedBatch` carries (a plain list of indices carries none); in a
    ``DataLoader`` worker that has siblings, its shuffle blocks shared with them through ``downloads``."""
    plan = getattr(indices, "plan", None)
    if plan is not None:
        reader.follow(worker_plan(plan, downloads))


def worker_plan(plan: ReadPlan, downloads: SharedDownloads | None) -> ReadPlan:
    """``plan`` as this process should follow it: shared through ``downloads`` in a ``DataLoader`` worker that
    has siblings (they read ahead along the same order), else as it is."""
    info = get_worker_info()
    if downloads is None or info is None or info.num_workers < 2:
        return plan
    return downloads.plan(plan)


class DistributedBatchSampler(Sampler):
    """This rank's batches (lists of positions) of a map-style dataset: ``DataLoader(ds, batch_sampler=this)``.

    See docs/torch.md for the order, ``set_epoch``, and resuming (``state_dict`` is the global position after the
    batches this sampler has handed to the loader).

    Parameters
    ----------
    dataset
        The dataset (or its length); an mxrec dataset's reader gives the epoch order and reads the batches ahead.
    batch_size
        Samples per batch.
    shuffle
        Shuffle the order each epoch.
    seed
        Seeds the shuffle (with the epoch).
    rank, world_size
        This rank of so many; default: those of an initialised ``torch.distributed``, else 0 of 1.
    drop_last
        Drop the last incomplete step of every epoch instead of filling it from the start of the order.
    shuffle_block
        Records per shuffled block (``0``: a global shuffle); default: global for local data, small blocks for
        remote data.
    shuffle_window
        Blocks open at a time in a block shuffle (its sliding window; ``0``: the default width).
    stick_to_shard
        Give each rank a fixed contiguous part of the records instead (DALI's mode).
    pad_last_batch
        With ``stick_to_shard``: make the parts equal by repeating a part's last record (counted in ``pad``);
        ``False``: cut them down to the shortest.

    Raises
    ------
    ParameterError
        ``batch_size`` below 1, ``rank`` not in ``[0, world_size)``, or ``stick_to_shard`` over a mixture.
    """

    def __init__(self, dataset: Sized | int, batch_size: int, *, shuffle: bool = True, seed: int = 0,
                 rank: int | None = None, world_size: int | None = None, drop_last: bool = False,
                 shuffle_block: int | None = None, shuffle_window: int = DEFAULT_SHUFFLE_WINDOW,
                 stick_to_shard: bool = False, pad_last_batch: bool = True) -> None:
        count = dataset if isinstance(dataset, int) else len(dataset)
        reader = getattr(dataset, "reader", None)
        reader = reader if isinstance(reader, Records) else None
        self.sampler = rank_sampler(count, reader=reader, batch_size=batch_size, shuffle=shuffle, seed=seed,
                                    rank=rank, world_size=world_size, drop_last=drop_last,
                                    shuffle_block=shuffle_block, shuffle_window=shuffle_window,
                                    stick_to_shard=stick_to_shard, pad_last_batch=pad_last_batch)
        self.plan = self.sampler.read_plan(batch_size)  # handed to the dataset with each batch
        self.epoch = 0
        self._start = 0  # records of the epoch's order consumed before this run (a resumed position)
        self._taken = 0  # batches handed out in this run

    def set_epoch(self, epoch: int) -> None:
        """Use ``epoch``'s order; a position loaded for this very epoch is kept.

        Parameters
        ----------
        epoch
            The epoch about to start.
        """
        if epoch != self.epoch:
            self.epoch, self._start, self._taken = epoch, 0, 0

    def __len__(self) -> int:
        return self.sampler.batches_per_epoch(start=self._start)

    def __iter__(self) -> Iterator[list[int]]:
        if self._taken:  # a new pass over the same epoch after a finished one starts it again
            self._start, self._taken = 0, 0
        plans, _ = self.sampler.epoch(self.epoch, start=self._start)
        for plan in plans:
            self._taken += 1
            yield PlannedBatch(plan.positions.tolist(), self.plan)

    def state_dict(self) -> dict:
        """The global position after the batches handed out.

        Returns
        -------
        dict
            The position, JSON-serialisable.
        """
        return self.sampler.state(self.epoch, self._start + self._taken * self.sampler.step)

    def load_state_dict(self, state: dict) -> None:
        """Continue from a position saved with this or another number of ranks / batch size.

        Parameters
        ----------
        state
            A :meth:`state_dict`, or a global position (:func:`~mxrec.torch.resume.loader_position`).

        Raises
        ------
        ParameterError
            ``state`` is no mxrec position, of another version, or of another dataset or order.
        """
        self.epoch, self._start, _ = self.sampler.restore(state)
        self._taken = 0
