"""Remote reading through fsspec's memory:// file system: the same records as the local reader, few requests."""

from __future__ import annotations

import pickle
import uuid
import warnings

import fsspec
import numpy as np
import pytest

from mxrec.errors import IndexFileError, RecordFormatError, RemoteNotFoundError
from mxrec.io.local_reader import LocalRecordReader
from mxrec.io.opener import RecordReader
from mxrec.io.records import IOStats, Records
from mxrec.io.remote_reader import NoIndexWarning, RemoteRecordReader, record_ends
from mxrec.io.writer import RecordWriter
from mxrec.storage.block_cache import BlockCache, parse_bytes
from mxrec.storage.remote_file import coalesce
from testkit.datasets import on_memory_fs

MAGIC = b"\x0a\x23\xd7\xce"


def payloads(n: int = 400) -> list[bytes]:
    rng = np.random.default_rng(n)
    out = []
    for i in range(n):
        body = rng.integers(0, 256, int(rng.integers(0, 300)), dtype=np.uint8).tobytes()
        out.append(body + (MAGIC * (i % 3)))  # some records are stored in several parts
    return out


@pytest.fixture
def local(tmp_path):
    path = tmp_path / "data.rec"
    with RecordWriter(path, index=True) as writer:
        for i, p in enumerate(payloads()):
            writer.write(p, key=i)
    return path


@pytest.fixture
def memory(local):
    """The same .rec/.idx on memory://, in a folder of its own; yields its URL."""
    with on_memory_fs(local) as url:
        yield url


def test_remote_reader_matches_local(local, memory):
    remote, reference = RecordReader(memory), RecordReader(local)
    assert isinstance(remote, RemoteRecordReader) and isinstance(reference, LocalRecordReader)
    assert isinstance(remote, Records) and isinstance(reference, Records)
    assert len(remote) == len(reference) == 400
    assert remote.keys == reference.keys and remote.index_path.endswith("data.idx")
    assert list(remote) == list(reference)
    order = np.random.default_rng(0).permutation(400)
    assert remote.read_batch(order) == reference.read_batch(order)
    assert remote[7] == reference[7] and remote[-1] == reference[-1] and remote.read_key(9) == reference[9]
    assert remote.nbytes == reference.nbytes
    with pytest.raises(IndexError):
        remote.read_batch([400])


def test_batches_are_coalesced(memory):
    reader = RecordReader(memory)
    before = reader.file.requests
    reader.read_batch(range(100, 200))  # contiguous records: one read
    assert reader.file.requests - before == 1
    list(reader)  # a whole pass: one read per 16 MiB
    assert reader.file.requests - before == 2


def test_coalesce_merges_close_ranges_and_respects_the_cap():
    merged, where = coalesce([(100, 110), (0, 10), (12, 20), (5000, 5010)], max_gap=10, max_request=1000)
    assert merged == [(0, 20), (100, 110), (5000, 5010)]
    assert where == [(1, 0), (0, 0), (0, 12), (2, 0)]
    merged, _ = coalesce([(0, 600), (600, 1200)], max_gap=0, max_request=1000)
    assert merged == [(0, 600), (600, 1200)]  # together they would pass max_request


def test_record_ends_follow_sorted_offsets():
    ends = record_ends(np.array([40, 0, 16, 16]), 64)
    assert ends.tolist() == [64, 16, 40, 40]


def test_pickled_reader_carries_no_connection(memory):
    reader = RecordReader(memory)
    reader[0]
    state = pickle.dumps(reader)
    assert b"fsspec" not in state and b"MemoryFileSystem" not in state  # a file system is made in each process
    copy = pickle.loads(state)
    assert copy.file.size == reader.file.size  # no new size request needed
    assert copy[5] == reader[5]


def test_without_idx_scans_once_and_says_so(local, memory):
    fsspec.filesystem("memory").rm_file(memory[len("memory://"):].replace(".rec", ".idx"))
    with pytest.warns(NoIndexWarning, match="no .idx: scanned the whole file once"):
        reader = RecordReader(memory)
    assert reader.scanned and list(reader) == list(RecordReader(local))
    with pytest.raises(IndexFileError, match="index=True"):
        RecordReader(memory, index=True)


def test_index_true_means_the_idx_beside_the_file(tmp_path):
    """Regression: index=True used to scan silently and key records by position."""
    path = tmp_path / "k.rec"
    with RecordWriter(path, index=True) as writer:
        writer.write(b"a", key=10)
        writer.write(b"b", key=20)
    reader = RecordReader(path, index=True)
    assert reader.keys == [10, 20] and reader.read_key(20) == b"b"
    (tmp_path / "k.idx").unlink()
    with pytest.raises(IndexFileError, match="no .idx beside"):
        RecordReader(path, index=True)


def test_damaged_remote_record_names_url_offset_and_key(local, memory):
    data = bytearray(local.read_bytes())
    reader = RecordReader(local)
    offset = int(reader.offsets[11])
    data[offset:offset + 4] = b"JUNK"
    fsspec.filesystem("memory").pipe_file(memory[len("memory://"):], bytes(data))
    remote = RecordReader(memory)
    with pytest.raises(IndexFileError, match=rf"key 11: offset {offset} is not the start of a record"):
        remote.read_batch([10, 11])
    fsspec.filesystem("memory").pipe_file(memory[len("memory://"):], bytes(data[:-10]))
    with pytest.raises(RecordFormatError):  # the last record is cut short: the read gets fewer bytes
        list(RecordReader(memory, index=False))


def test_missing_file_names_the_url():
    with pytest.raises(RemoteNotFoundError, match=r"memory://nowhere/x.rec"):
        RecordReader("memory://nowhere/x.rec")


def test_block_cache_serves_a_second_pass_without_requests(memory, tmp_path):
    cache = BlockCache(tmp_path / "cache", max_bytes="1MiB", block_size=4096)
    reader = RecordReader(memory, cache_dir=cache)
    first = list(reader)
    assert reader.file.requests >= 1
    again = RecordReader(memory, cache_dir=cache)
    assert list(again) == first and again.read_batch([3, 300]) == [first[3], first[300]]
    assert again.file.requests == 0  # the .idx and the size request happened in the opening, not here
    blocks = [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]
    assert blocks and not any(p.name.endswith(".tmp") for p in blocks)


def test_block_cache_never_serves_a_partial_block_and_stays_bounded(tmp_path):
    cache = BlockCache(tmp_path, max_bytes=10_000, block_size=1000)
    cache.put("f", 0, b"x" * 1000)
    assert cache.get("f", 0, 1000) == b"x" * 1000
    (tmp_path / "f" / "1").write_bytes(b"y" * 10)  # a foreign, short file
    assert cache.get("f", 1, 1000) is None and not (tmp_path / "f" / "1").exists()
    for n in range(40):
        cache.put("f", n, b"z" * 1000)
    assert sum(size for _, size, _ in cache.usage()) <= 10_000
    assert parse_bytes("4MiB") == 4 << 20 and parse_bytes("2GB") == 2 * 10**9
    with pytest.raises(ValueError, match="not a size"):
        parse_bytes("lots")


def test_cache_from_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("MXREC_CACHE_DIR", str(tmp_path / "env-cache"))
    assert BlockCache.from_setting(None).directory == str(tmp_path / "env-cache")
    monkeypatch.delenv("MXREC_CACHE_DIR")
    assert BlockCache.from_setting(None) is None


def test_remote_writer_is_byte_identical_and_atomic(local):
    folder = f"memory://w-{uuid.uuid4().hex}"
    with RecordWriter(f"{folder}/out.rec", index=True) as writer:
        for i, p in enumerate(payloads()):
            writer.write(p, key=i)
    fs = fsspec.filesystem("memory")
    assert fs.cat_file(f"{folder}/out.rec"[len("memory://"):]) == local.read_bytes()
    assert fs.cat_file(f"{folder}/out.idx"[len("memory://"):]) == local.with_suffix(".idx").read_bytes()
    with pytest.raises(RuntimeError), RecordWriter(f"{folder}/broken.rec", index=True) as writer:
        writer.write(b"half")
        raise RuntimeError("interrupted")
    assert not fs.exists(f"{folder}/broken.rec"[len("memory://"):])
    assert not fs.exists(f"{folder}/broken.idx"[len("memory://"):])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert RecordReader(f"{folder}/out.rec").read_batch([0, 399]) == [payloads()[0], payloads()[399]]


def test_io_stats_count_requests_bytes_and_cache_lookups(local, memory, tmp_path):
    reference = RecordReader(local)
    list(reference)
    assert reference.io_stats() == IOStats()  # memory-mapped: no requests
    reader = RecordReader(memory)
    before = reader.io_stats()
    reader.read_batch(range(100, 200))  # contiguous: one request, the span of those records
    spent = reader.io_stats() - before
    assert spent.requests == 1 == reader.file.requests - before.requests
    assert spent.bytes == int(reader.ends[199] - reader.offsets[100])
    assert (spent.cache_hits, spent.cache_misses) == (0, 0)
    assert pickle.loads(pickle.dumps(reader)).io_stats() == IOStats()  # counted per process

    cache = BlockCache(tmp_path / "cache", max_bytes="1MiB", block_size=4096)
    first = RecordReader(memory, cache_dir=cache)
    list(first)
    filled = first.io_stats()
    assert filled.requests >= 1 and filled.bytes >= local.stat().st_size and filled.cache_misses >= 1
    again = RecordReader(memory, cache_dir=cache)
    before = again.io_stats()
    list(again)
    spent = again.io_stats() - before
    assert (spent.requests, spent.bytes, spent.cache_misses) == (0, 0, 0) and spent.cache_hits >= 1
    assert IOStats(1, 2, 3, 4) + IOStats(1, 1, 1, 1) == IOStats(2, 3, 4, 5)
