"""Epoch order, sharding and last-batch policies (mxrec.train.sampler)."""

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


# -- lock-step ranks, block shuffle, resuming ---------------------------------------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


def rank_batches(n, batch, world, **options):
    """Every rank's plans of epoch 0, as lists of positions."""
    return [[p.positions.tolist() for p in BatchSampler(n, batch, num_parts=world, part_index=r, **options).epoch(0)[0]]
            for r in range(world)]


def test_ranks_consume_a_prefix_of_the_global_order_after_every_step():
    order = epoch_order(103, shuffle=True, seed=5, epoch=0).tolist()
    ranks = rank_batches(103, 4, 3, shuffle=True, seed=5, last_batch="discard")
    assert len({len(r) for r in ranks}) == 1  # equal batch counts
    consumed = []
    for step in range(len(ranks[0])):
        for rank in ranks:
            consumed += rank[step]
        assert consumed == order[:len(consumed)]  # the union after every step is a prefix
    assert len(consumed) == 96  # 103 // 12 steps of 12


def test_block_shuffle_is_a_permutation_made_of_few_runs():
    order = epoch_order(10_000, shuffle=True, seed=1, epoch=0, shuffle_block=100, shuffle_window=4)
    assert sorted(order.tolist()) == list(range(10_000))
    assert not np.array_equal(order, epoch_order(10_000, shuffle=True, seed=1, epoch=1, shuffle_block=100,
                                                 shuffle_window=4))
    rank = np.empty(10_000, np.int64)
    rank[order] = np.arange(10_000)
    first, last = (f.reduceat(rank, np.arange(0, 10_000, 100)) for f in (np.minimum, np.maximum))
    opened = np.zeros(10_001, np.int64)
    np.add.at(opened, first, 1)
    np.add.at(opened, last + 1, -1)
    assert np.cumsum(opened).max() == 4  # a sliding window: never more than 4 blocks of the file open at once
    assert max(len(set((order[i:i + 64] // 100).tolist())) for i in range(0, 10_000, 64)) <= 5


def test_stick_to_shard_reads_a_fixed_contiguous_part():
    parts = [BatchSampler(10, 2, num_parts=3, part_index=k, stick_to_shard=True, shuffle=True, seed=2)
             for k in range(3)]
    owned = [sorted({p for plan in s.epoch(e)[0] for p in plan.positions.tolist()}) for s in parts for e in (0, 1)]
    assert owned[0] == owned[1] == [0, 1, 2] and owned[2] == owned[3] == [3, 4, 5] and owned[4] == [6, 7, 8, 9]
    assert {s.batches_per_epoch() for s in parts} == {2}  # padded to 4 records each by repeating the last
    plans, _ = parts[0].epoch(0)
    assert plans[-1].pad == 1
    cut = BatchSampler(10, 2, num_parts=3, part_index=2, stick_to_shard=True, pad_last_batch=False)
    assert [p.positions.tolist() for p in cut.epoch(0)[0]] == [[6, 7], [8, 6]]  # cut to 3 records: 9 is left out


def consumed_after(n, batch, world, steps, **options):
    """Positions every rank took in ``steps`` steps, and the state saved after them."""
    samplers = [BatchSampler(n, batch, num_parts=world, part_index=r, **options) for r in range(world)]
    plans = [s.epoch(0)[0] for s in samplers]
    taken = [p for step in range(steps) for rank in plans for p in rank[step].positions.tolist()]
    return taken, samplers[0].state(0, steps * batch * world)


def resume(state, n, batch, world, **options):
    samplers = [BatchSampler(n, batch, num_parts=world, part_index=r, **options) for r in range(world)]
    epoch, start, _ = samplers[0].restore(state)
    plans = [s.epoch(epoch, start=start)[0] for s in samplers]
    assert len({len(p) for p in plans}) == 1
    return [(p, slot >= len(plan.positions) - plan.pad) for step in range(len(plans[0])) for rank in plans
            for plan in [rank[step]] for slot, p in enumerate(plan.positions.tolist())]


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 300), batch=st.integers(1, 9), new_world=st.sampled_from([1, 4]),
       new_batch=st.integers(1, 9), fraction=st.floats(0, 1), shuffle_block=st.sampled_from([0, 7]))
def test_resume_on_another_number_of_ranks_repeats_and_skips_nothing(n, batch, new_world, new_batch, fraction,
                                                                      shuffle_block):
    options = dict(shuffle=True, seed=11, shuffle_block=shuffle_block, shuffle_window=3, last_batch="wrap")
    steps = int(fraction * (n // (2 * batch)))  # stop anywhere inside the complete steps of 2 ranks
    before, state = consumed_after(n, batch, 2, steps, **options)
    after = resume(state, n, new_batch, new_world, **options)
    real = [p for p, is_pad in after if not is_pad]
    order = epoch_order(n, shuffle=True, seed=11, epoch=0, shuffle_block=shuffle_block, shuffle_window=3).tolist()
    assert before + real == order  # exactly the epoch, in the global order: nothing repeated, nothing skipped
    assert all(p in order for p, _ in after)


def test_restore_refuses_another_order():
    state = BatchSampler(100, 4, shuffle=True, seed=1).state(2, 40)
    with pytest.raises(ParameterError, match="seed"):
        BatchSampler(100, 4, shuffle=True, seed=2).restore(state)
    with pytest.raises(ParameterError, match="num_records"):
        BatchSampler(99, 4, shuffle=True, seed=1).restore(state)
    assert BatchSampler(100, 8, shuffle=True, seed=1, num_parts=3).restore(state)[:2] == (2, 40)
    with pytest.raises(ParameterError, match="stick_to_shard"):
        BatchSampler(100, 4, stick_to_shard=True, num_parts=2).restore(
            BatchSampler(100, 4, stick_to_shard=True, num_parts=1).state(0, 4))
