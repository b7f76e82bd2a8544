"""The default remote shuffle mixes sorted data nearly as well as a global one, and a remote reader reads it ahead
along the epoch's order, within its memory budget, each block once (judged by a real S3 server's log)."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest

from mxrec.errors import OptionError, ParameterError
from mxrec.format.header import IRHeader, pack
from mxrec.io.opener import RecordReader
from mxrec.io.order import ShuffledOrder, epoch_order, expected_distinct, mixing, window_of
from mxrec.io.records import MIN_BLOCK_RECORDS, blocks_of
from mxrec.storage.settings import RequestPolicy, Storage
from mxrec.train.sampler import BatchSampler
from testkit.datasets import upload_indexed, write_indexed

N = 3000
RUN = 25  # records per label, consecutive: a class-sorted set


@functools.cache
def payloads() -> list[bytes]:
    rng = np.random.default_rng(5)
    return [pack(IRHeader(0, float(i // RUN), i, 0), rng.bytes(int(rng.integers(600, 1400)))) for i in range(N)]


@pytest.fixture(scope="module")
def local(tmp_path_factory) -> Any:
    path = tmp_path_factory.mktemp("plan") / "sorted.rec"
    write_indexed(path, range(N), payloads())
    return path


# -- the order and its mixing (pure)


def test_expected_distinct_is_the_exact_hypergeometric_figure():
    assert expected_distinct(np.array([1, 1]), 1) == pytest.approx(1.0)
    assert expected_distinct(np.array([2, 2]), 2) == pytest.approx(2 - 1 / 3)  # both alike: 2 * (2/4 * 1/3)
    assert expected_distinct(np.array([5]), 3) == pytest.approx(1.0)
    assert expected_distinct(np.array([3, 1]), 4) == pytest.approx(2.0)


def test_mixing_tells_a_sorted_read_from_a_global_shuffle():
    labels = np.arange(N) // RUN
    in_order = mixing(labels, np.arange(N))
    shuffled = mixing(labels, epoch_order(N, shuffle=True, seed=3, epoch=0))
    assert in_order.per_batch == pytest.approx(np.mean([len(set(labels[i:i + 64])) for i in range(0, N - 63, 64)]))
    assert in_order.ratio < 0.1 and 0.95 < shuffled.ratio < 1.05
    with pytest.raises(ParameterError, match="at least one full batch"):
        mixing(labels[:10], np.arange(10))


@pytest.mark.parametrize(("count", "record_bytes"), [(20_000, 25_000), (200_000, 25_000), (200_000, 7_000)])
def test_the_default_block_shuffle_mixes_a_class_sorted_set_nearly_as_well_as_a_global_one(count, record_bytes):
    labels = np.arange(count) // RUN
    block = blocks_of(count, count * record_bytes)
    window = window_of(block, record_bytes)
    order = epoch_order(count, shuffle=True, seed=1, epoch=0, shuffle_block=block, shuffle_window=window)
    assert sorted(order.tolist()) == list(range(count))
    assert mixing(labels, order).ratio >= 0.9
    assert block >= MIN_BLOCK_RECORDS and count / block <= count / 8  # a request a block: <= records / 8


def test_a_window_of_zero_asks_for_the_default_width():
    order = ShuffledOrder(10_000, True, 1, 20, 0)
    assert order.shuffle_window == window_of(20) and order.settings()["shuffle_window"] == window_of(20)
    with pytest.raises(ParameterError):
        ShuffledOrder(10, True, 1, 2, -1)


def test_the_memory_budget_is_a_request_policy_field():
    assert RequestPolicy.parse("memory=64MiB").memory == 64 << 20
    assert RequestPolicy().memory == 256 << 20
    with pytest.raises(OptionError, match="memory"):
        RequestPolicy(memory=-1)
    with pytest.raises(OptionError, match="not a size"):
        RequestPolicy.parse("memory=lots")


# -- read-ahead on a real server


def epoch_records(reader, sampler, epoch: int = 0) -> list[bytes]:
    seen = []
    for plan in sampler.epoch(epoch)[0]:
        seen += reader.read_batch(plan.positions[plan.positions >= 0])
    return seen


@pytest.mark.parametrize(("memory", "sidecar"), [(256 << 20, False), (200 << 10, False), (256 << 20, True)])
def test_a_block_shuffled_epoch_is_read_ahead_each_block_once_within_the_budget(s3_server, s3_bucket, local, memory,
                                                                                 sidecar):
    url = upload_indexed(s3_server, s3_bucket, local, name="sorted.rec")
    if sidecar:  # its checksums, a cell a record: checked as the blocks arrive, no byte read around them
        s3_server.put_object(s3_bucket, "sorted.checksums", local.with_suffix(".checksums").read_bytes())
    storage = Storage(options=s3_server.storage_options(), policy=RequestPolicy(memory=memory, in_flight=8))
    reader = RecordReader(url, storage_options=storage)
    assert (reader._verifier is not None) == sidecar
    order = reader.epoch_order(shuffle=True, seed=4, shuffle_block=40, shuffle_window=5)
    sampler = BatchSampler(N, 64, order=order, last_batch="partial")
    reader.follow(sampler.read_plan(128))
    mark = s3_server.log.mark()
    seen = epoch_records(reader, sampler)
    assert sorted(seen) == sorted(payloads())
    fetched = s3_server.log.since(mark, method="GET", key="sorted.rec")
    blocks = -(-N // 40)
    assert blocks <= len(fetched) <= blocks + 2 and len(fetched) <= N / 8, s3_server.log.summary()
    assert 1.0 * local.stat().st_size <= sum(r.length for r in fetched) <= 1.05 * local.stat().st_size
    window = reader._window
    if memory > 1 << 20:
        assert window.stats["ahead"] >= blocks // 2  # most blocks arrived before a batch asked for them
        assert window.stats["peak_bytes"] <= memory
    else:  # the budget is below the window: no read-ahead past it, and blocks in use are still read once
        assert window.stats["peak_bytes"] <= memory + 5 * 40 * 1500
    mark = s3_server.log.mark()
    assert sorted(epoch_records(reader, sampler, epoch=1)) == sorted(payloads())  # the next epoch: its own order
    assert len(s3_server.log.since(mark, method="GET", key="sorted.rec")) <= blocks + 2


def test_read_ahead_finds_the_epoch_of_a_resumed_run(s3_server, s3_bucket, local):
    url = upload_indexed(s3_server, s3_bucket, local, name="sorted.rec")
    reader = RecordReader(url, storage_options=s3_server.storage_options())
    sampler = BatchSampler(N, 64, order=reader.epoch_order(shuffle=True, seed=2, shuffle_block=40, shuffle_window=5),
                           last_batch="partial")
    reader.follow(sampler.read_plan(128))
    mark = s3_server.log.mark()
    seen = epoch_records(reader, sampler, epoch=5)  # no batch of epochs 0..4 was read
    assert sorted(seen) == sorted(payloads())
    assert reader._window.stats["ahead"] > 0 and reader._window._current.epoch == 5
    fetched = s3_server.log.since(mark, method="GET", key="sorted.rec")
    assert -(-N // 40) <= len(fetched) <= -(-N // 40) + 2


# -- sharing downloads between processes


def _read_after(reader, positions: list[int], barrier, results) -> None:
    barrier.wait(30)
    results.put(reader.read_batch(positions))


def test_processes_sharing_a_cache_download_each_block_once(s3_server, s3_bucket, s3_proxy, local, tmp_path):
    import multiprocessing

    upload_indexed(s3_server, s3_bucket, local, name="sorted.rec")
    url = f"s3://{s3_bucket}/sorted.rec"
    storage = Storage(options=s3_proxy.storage_options(), cache_dir=str(tmp_path / "cache"))
    reader = RecordReader(url, storage_options=storage)
    positions = list(range(0, N, 7))  # every block of the cache
    s3_proxy.latency = 0.3  # (both processes ask before either answer arrives)
    mark = s3_proxy.log.mark()
    context = multiprocessing.get_context("fork")
    barrier, results = context.Barrier(2), context.Queue()
    workers = [context.Process(target=_read_after, args=(reader, positions, barrier, results)) for _ in range(2)]
    for worker in workers:
        worker.start()
    got = [results.get(timeout=60) for _ in workers]
    for worker in workers:
        worker.join(30)
    assert got[0] == got[1] == [payloads()[p] for p in positions]
    fetched = s3_proxy.log.since(mark, method="GET", key="sorted.rec")
    cache_blocks = -(-local.stat().st_size // reader.file.cache.block_size)
    assert sum(r.sent for r in fetched) == local.stat().st_size and len(fetched) <= cache_blocks, \
        s3_proxy.log.summary()


def test_a_pickled_reader_reads_ahead_where_it_arrives(s3_server, s3_bucket, local):
    import pickle

    url = upload_indexed(s3_server, s3_bucket, local, name="sorted.rec")
    reader = RecordReader(url, storage_options=s3_server.storage_options())
    sampler = BatchSampler(N, 64, order=reader.epoch_order(shuffle=True, seed=6, shuffle_block=40, shuffle_window=5),
                           last_batch="partial")
    reader.follow(sampler.read_plan(128))
    worker = pickle.loads(pickle.dumps(reader))  # as a spawned DataLoader worker gets it
    worker.follow(sampler.read_plan(128))  # (the plan each batch carries: already followed)
    assert sorted(epoch_records(worker, sampler)) == sorted(payloads())
    assert worker._window.stats["ahead"] > 0
