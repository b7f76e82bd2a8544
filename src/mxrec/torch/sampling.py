"""Which records each rank reads: one global order per epoch, consumed by all ranks in lock-step.

:class:`DistributedBatchSampler` hands a map-style dataset's ``DataLoader``
this rank's batches; :func:`rank_sampler` is the order behind it and behind
:class:`~mxrec.torch.datasets.ImageRecordIterable` (:mod:`mxrec.train.sampler`
documents the order, shuffles, last batches and resuming).
"""

from __future__ import annotations

from collections.abc import Iterator, Sized

from torch.utils.data import Sampler

from mxrec.io.records import Records
from mxrec.train.sampler import DEFAULT_SHUFFLE_WINDOW, BatchSampler, resolve_parts, shuffle_block_for


def rank_sampler(num_records: int, *, reader: Records | None, batch_size: int, shuffle: bool, seed: int,
                 rank: int | None, world_size: int | None, drop_last: bool, shuffle_block: int | None,
                 shuffle_window: int, stick_to_shard: bool, pad_last_batch: bool) -> BatchSampler:
    """The lock-step batches of rank ``rank`` of ``world_size`` (by default those of an initialised
    ``torch.distributed``): :class:`~mxrec.train.sampler.BatchSampler` with the datasets' defaults (the last
    incomplete step is filled from the start of the order, or dropped with ``drop_last``)."""
    world, part = resolve_parts(world_size, rank)
    block = shuffle_block_for(reader, shuffle_block) if reader is not None else (shuffle_block or 0)
    return BatchSampler(num_records, batch_size, shuffle=shuffle, seed=seed, num_parts=world, part_index=part,
                        last_batch="discard" if drop_last else "wrap", shuffle_block=block,
                        shuffle_window=shuffle_window, stick_to_shard=stick_to_shard, pad_last_batch=pad_last_batch)


class DistributedBatchSampler(Sampler):
    """This rank's batches (lists of positions) of a map-style dataset: ``DataLoader(ds, batch_sampler=this)``.

    ``dataset`` is the dataset (or its length). See docs/torch.md for
    the order, ``set_epoch``, and resuming (``state_dict`` is the global
    position after the batches this sampler has handed to the loader).
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
        if reader is not None and shuffle:  # the dataset's reader (pickled into each worker) reads ahead
            reader.read_ahead(self.sampler.shuffle_block, self.sampler.shuffle_window, batch_size)
        self.epoch = 0
        self._start = 0  # records of the epoch's order consumed before this run (a resumed position)
        self._taken = 0  # batches handed out in this run

    def set_epoch(self, epoch: int) -> None:
        """Use ``epoch``'s order; a position loaded for this very epoch is kept."""
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
            yield plan.positions.tolist()

    def state_dict(self) -> dict:
        """The global position after the batches handed out (JSON-serialisable)."""
        return self.sampler.state(self.epoch, self._start + self._taken * self.sampler.step)

    def load_state_dict(self, state: dict) -> None:
        """Continue from a position saved with this or another number of ranks / batch size."""
        self.epoch, self._start, _ = self.sampler.restore(state)
        self._taken = 0
