"""Epoch order, sharding and last-batch policies (mxrec.sampler)."""

from __future__ import annotations

import numpy as np
import pytest

from mxrec.errors import ParameterError
from mxrec.train.sampler import EMPTY_SLOT, BatchSampler, epoch_order, part_size, shard


def test_epoch_order_is_a_seeded_global_permutation():
    a = epoch_order(1000, shuffle=True, seed=7, epoch=0)
    assert sorted(a.tolist()) == list(range(1000))
    np.testing.assert_array_equal(a, epoch_order(1000, shuffle=True, seed=7, epoch=0))
    assert not np.array_equal(a, epoch_order(1000, shuffle=True, seed=7, epoch=1))
    assert not np.array_equal(a, epoch_order(1000, shuffle=True, seed=8, epoch=0))
    # global, not within chunks: records from the end of the file appear early
    assert a[:50].max() > 900
    np.testing.assert_array_equal(epoch_order(5, shuffle=False, seed=7, epoch=3), np.arange(5))


@pytest.mark.parametrize("n, parts", [(50, 1), (50, 3), (50, 7), (7, 7), (5, 8), (1000, 4)])
@pytest.mark.parametrize("drop", [False, True])
def test_shards_are_equal_and_cover_everything(n, parts, drop):
    order = epoch_order(n, shuffle=True, seed=1, epoch=0)
    shards = [shard(order, parts, k, drop_remainder=drop) for k in range(parts)]
    size = part_size(n, parts, drop_remainder=drop)
    assert all(len(s) == size for s in shards)
    seen = np.concatenate(shards)
    if drop:
        assert len(set(seen.tolist())) == len(seen) == size * parts  # no record twice
    else:
        assert set(seen.tolist()) == set(range(n))  # every record at least once
        assert len(seen) - n < parts  # padding only to round up


def test_shard_rejects_bad_parts():
    with pytest.raises(ParameterError, match="part_index"):
        shard(np.arange(10), 2, 2)
    with pytest.raises(ParameterError):
        BatchSampler(10, 4, num_parts=0)


def test_wrap_fills_from_the_start_of_the_epoch_every_epoch():
    sampler = BatchSampler(50, 16, last_batch="wrap")
    for epoch in range(3):
        plans, _ = sampler.epoch(epoch)
        assert [p.pad for p in plans] == [0, 0, 0, 14]
        np.testing.assert_array_equal(plans[0].positions, np.arange(16))  # no drift
        np.testing.assert_array_equal(plans[-1].positions, np.r_[48, 49, np.arange(14)])


def test_wrap_smaller_than_a_batch_repeats():
    plans, _ = BatchSampler(3, 8, last_batch="wrap").epoch(0)
    assert len(plans) == 1 and plans[0].pad == 5
    assert plans[0].positions.tolist() == [0, 1, 2, 0, 1, 2, 0, 1]


def test_partial_marks_empty_slots_and_discard_drops():
    plans, _ = BatchSampler(50, 16, last_batch="partial").epoch(0)
    assert plans[-1].pad == 14
    assert plans[-1].positions.tolist() == [48, 49] + [EMPTY_SLOT] * 14
    plans, _ = BatchSampler(50, 16, last_batch="discard").epoch(0)
    assert len(plans) == 3 and all(p.pad == 0 for p in plans)


def test_roll_over_carries_the_tail_into_the_next_epoch():
    sampler = BatchSampler(50, 16, shuffle=True, seed=3, last_batch="roll_over")
    plans0, left0 = sampler.epoch(0)
    assert len(plans0) == 3 and len(left0.positions) == 2
    plans1, left1 = sampler.epoch(1, left0)
    np.testing.assert_array_equal(plans1[0].positions[:2], left0.positions)
    assert plans1[0].epochs[:2].tolist() == [0, 0] and plans1[0].epochs[2] == 1
    assert len(plans1) == 3 and len(left1.positions) == 4  # 52 records: 3 batches + 4 left
    every = np.concatenate([p.positions for p in plans0] + [left0.positions])
    assert sorted(every.tolist()) == list(range(50))


def test_batches_per_epoch_equal_across_parts():
    counts = {BatchSampler(103, 8, num_parts=4, part_index=k, last_batch="wrap").batches_per_epoch()
              for k in range(4)}
    assert counts == {4}  # ceil(103 / 4) = 26 records -> 4 batches on every rank
    for k in range(4):
        plans, _ = BatchSampler(103, 8, num_parts=4, part_index=k, shuffle=True, last_batch="wrap").epoch(0)
        assert len(plans) == 4


def test_bad_policy_and_batch_size():
    with pytest.raises(ParameterError, match="last_batch"):
        BatchSampler(10, 4, last_batch="keep")
    with pytest.raises(ParameterError, match="batch_size"):
        BatchSampler(10, 0)
