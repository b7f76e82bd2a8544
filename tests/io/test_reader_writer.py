"""RecordReader and RecordWriter: random access, scanning, threads, fork, spawn, pickling, and their guarantees."""

from __future__ import annotations

import multiprocessing
import os
import pickle
import shutil
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mxrec import RecordReader, RecordWriter
from mxrec.errors import (
    ClosedFileError,
    DuplicateKeyError,
    ForkedWriterError,
    IndexFileError,
    RecordFormatError,
    RecordKeyError,
    RecordTooLargeError,
    TruncatedRecordError,
)
from mxrec.format import framing
from mxrec.format.header import IRHeader, pack
from mxrec.storage.atomic import PARTIAL_SUFFIX

MAGIC = framing.MAGIC_BYTES


def make_payloads(n: int = 300) -> list[bytes]:
    rng = np.random.default_rng(7)
    out = []
    for i in range(n):
        body = rng.integers(0, 256, int(rng.integers(0, 3000)), dtype=np.uint8).tobytes()
        if i % 7 == 0:
            body = MAGIC + body[:8] + MAGIC + body[8:]  # multi-part
        if i % 11 == 0:
            body = rng.integers(0, 256, 20000, dtype=np.uint8).tobytes()[:-3] + MAGIC  # large, unaligned magic
        out.append(body)
    return out


@pytest.fixture
def dataset(tmp_path):
    payloads = make_payloads()
    path = tmp_path / "data.rec"
    with RecordWriter(path, index=True) as writer:
        for p in payloads:
            writer.write(p)
    return path, payloads


def test_reader_with_and_without_index_agree(dataset):
    path, payloads = dataset
    with RecordReader(path) as indexed, RecordReader(path, index=False) as scanned:
        assert indexed.index_path == str(path.with_suffix(".idx")) and scanned.index_path is None
        assert len(indexed) == len(scanned) == len(payloads)
        assert list(indexed) == list(scanned) == payloads
        assert [indexed[i] for i in range(len(payloads))] == payloads
        assert indexed[-1] == payloads[-1]
        assert indexed.read_key(123) == payloads[123] and 123 in indexed and 10_000 not in indexed
        order = np.random.default_rng(0).permutation(len(payloads))
        assert indexed.read_batch(order) == [payloads[i] for i in order]
        assert bytes(indexed.view(5)) == payloads[5] and bytes(indexed.view(7)) == payloads[7]
        assert indexed.offsets.tolist() == framing.record_offsets(path.read_bytes())


def test_writer_output_is_what_the_framing_spec_says(dataset):
    path, payloads = dataset
    assert path.read_bytes() == b"".join(framing.encode_record(p) for p in payloads)
    offsets = framing.record_offsets(path.read_bytes())
    assert path.with_suffix(".idx").read_text() == "".join(f"{i}\t{o}\n" for i, o in enumerate(offsets))


large_with_magic = st.tuples(st.integers(8192, 8300), st.integers(0, 8192)).map(
    lambda t: b"\x01" * t[1] + MAGIC + b"\x02" * (t[0] - t[1]))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(max_size=64) | st.just(MAGIC) | large_with_magic, max_size=10))
def test_writer_reader_round_trip(tmp_path_factory, payloads):
    path = tmp_path_factory.mktemp("rt") / "x.rec"
    with RecordWriter(path, index=True) as writer:
        offsets = [writer.write(p) for p in payloads]
        assert writer.tell() == (sum(len(framing.encode_record(p)) for p in payloads))
    with RecordReader(path) as reader:
        assert list(reader) == payloads and reader.offsets.tolist() == offsets


def test_keys_and_headers(tmp_path):
    path = tmp_path / "k.rec"
    with RecordWriter(path, index=True, key_type=str) as writer:
        for i, name in enumerate(["cat", "dog", "emu"]):
            writer.write(pack(IRHeader(0, [float(i), 2.0], i + 10, 0), b"img"), key=name)
    with RecordReader(path, key_type=str) as reader:
        assert reader.keys == ["cat", "dog", "emu"]
        assert reader.header(reader.position("dog")).id == 11
        assert reader.header(2).label.tolist() == [2.0, 2.0]
        assert reader.unpack(0)[1] == b"img"
        with pytest.raises(RecordKeyError, match="no record with key 'yak'"):
            reader.read_key("yak")


def test_pickled_reader_reopens_lazily(dataset):
    path, payloads = dataset
    reader = RecordReader(path)
    clone = pickle.loads(pickle.dumps(reader))
    assert clone._buf is None
    assert clone[42] == payloads[42] and reader[42] == payloads[42]
    reader.close()
    reader.close()
    with pytest.raises(ClosedFileError):
        reader[0]


def _read_some(args):
    reader, positions = args
    return [reader[p] for p in positions]


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_reader_in_worker_processes(dataset, method):
    if method not in multiprocessing.get_all_start_methods():
        pytest.skip(f"no {method}")
    path, payloads = dataset
    reader = RecordReader(path)
    reader[0]  # mapped in the parent before the fork
    jobs = [(reader, list(range(i, len(payloads), 4))) for i in range(4)]
    with multiprocessing.get_context(method).Pool(2) as pool:
        results = pool.map(_read_some, jobs)
    for (_, positions), got in zip(jobs, results, strict=True):
        assert got == [payloads[p] for p in positions]


def test_reader_shared_by_threads(dataset):
    path, payloads = dataset
    reader = RecordReader(path)
    bad = []

    def work(seed):
        for p in np.random.default_rng(seed).integers(0, len(payloads), 3000).tolist():
            if reader[p] != payloads[p]:
                bad.append(p)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert bad == []


def test_index_problems_are_reported(dataset, tmp_path):
    path, payloads = dataset
    idx = tmp_path / "bad.idx"
    second = framing.record_offsets(path.read_bytes())[1]
    idx.write_text(f"0\t0\n1\t{second}\n0\t{second}\n")
    with pytest.raises(DuplicateKeyError, match="bad.idx: line 3: key 0 appears again"):
        RecordReader(path, idx)
    assert RecordReader(path, idx, duplicates="last").read_key(0) == payloads[1]
    idx.write_text(f"0\t0\n1\t{path.stat().st_size + 4}\n")
    with pytest.raises(IndexFileError, match=r"key 1: offset \d+ lies outside"):
        RecordReader(path, idx)
    idx.write_text("0\t0\n1\t6\n")
    with pytest.raises(IndexFileError, match="key 1: offset 6 is not 4-byte aligned"):
        RecordReader(path, idx)
    idx.write_text("0\t0\n7\t16\n")
    reader = RecordReader(path, idx)
    assert reader[0] == payloads[0]
    with pytest.raises(IndexFileError, match="key 7: offset 16 is not the start of a record"):
        reader.read_key(7)


def test_damaged_file_strict_and_salvage(dataset, tmp_path):
    path, payloads = dataset
    data = bytearray(path.read_bytes())
    offsets = framing.record_offsets(bytes(data))
    data[offsets[100]] ^= 0xFF  # break record 100's magic
    broken = tmp_path / "broken.rec"
    broken.write_bytes(bytes(data[:-5]))  # and truncate the last record
    with pytest.raises(RecordFormatError, match=rf"broken.rec: at byte {offsets[100]}: bad magic"):
        RecordReader(broken, index=False)
    salvaged = RecordReader(broken, index=False, strict=False)
    assert list(salvaged) == payloads[:100] + payloads[101:-1]
    assert salvaged.damage.offset == offsets[100]
    shutil.copy(path.with_suffix(".idx"), broken.with_suffix(".idx"))
    indexed = RecordReader(broken)
    assert indexed[99] == payloads[99] and indexed[101] == payloads[101]
    with pytest.raises(IndexFileError, match=rf"key 100: offset {offsets[100]} is not the start of a record"):
        indexed[100]
    iterator = iter(indexed)
    assert [next(iterator) for _ in range(100)] == payloads[:100]
    with pytest.raises(IndexFileError, match="key 100"):
        next(iterator)
    with pytest.raises(TruncatedRecordError, match="data ends inside"):
        indexed[len(payloads) - 1]


def test_writer_atomic_and_abort(tmp_path):
    path = tmp_path / "a.rec"
    with RecordWriter(path, index=True, atomic=True) as writer:
        writer.write(b"x")
        assert (tmp_path / ("a.rec" + PARTIAL_SUFFIX)).exists() and not path.exists()
    assert path.exists() and path.with_suffix(".idx").read_text() == "0\t0\n"
    assert not list(tmp_path.glob("*" + PARTIAL_SUFFIX))
    with pytest.raises(RuntimeError), RecordWriter(tmp_path / "b.rec", index=True, atomic=True) as writer:
        writer.write(b"y")
        raise RuntimeError("interrupted")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.checksums", "a.idx", "a.rec"]


def test_index_never_points_past_flushed_data(tmp_path):
    path = tmp_path / "f.rec"
    writer = RecordWriter(path, index=True, buffer_size=4096)
    for i in range(20000):
        writer.write(bytes([i % 251]) * 37)
        if i % 997 == 0:
            # What another process would see right now: every .idx line points at complete data.
            size = path.stat().st_size
            for line in path.with_suffix(".idx").read_text().splitlines():
                assert int(line.split("\t")[1]) + 8 + 37 + 3 <= size
    writer.close()
    assert len(RecordReader(path)) == 20000


def test_writer_errors(tmp_path):
    writer = RecordWriter(tmp_path / "e.rec")
    with pytest.raises(RecordTooLargeError):
        writer.write(memoryview(np.zeros(framing.MAX_LENGTH + 1, np.uint8)))
    writer.close()
    with pytest.raises(ClosedFileError, match="e.rec: writer is closed"):
        writer.write(b"late")


def _write_in_child(writer, queue):
    try:
        writer.write(b"child")
        queue.put("wrote")
    except ForkedWriterError as exc:
        queue.put(type(exc).__name__)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_writer_refuses_forked_child(tmp_path):
    writer = RecordWriter(tmp_path / "w.rec")
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_write_in_child, args=(writer, queue))
    child.start()
    assert queue.get(timeout=60) == "ForkedWriterError"
    child.join(60)
    writer.write(b"parent")
    writer.close()
    assert list(RecordReader(tmp_path / "w.rec")) == [b"parent"]


def test_write_batch_matches_write_and_keeps_records_before_a_rejected_one(tmp_path):
    payloads = make_payloads(50)
    with RecordWriter(tmp_path / "one.rec", index=True) as one:
        for p in payloads:
            one.write(p)
    with RecordWriter(tmp_path / "batch.rec", index=True) as batch:
        assert batch.write_batch(payloads[:20]) == framing.record_offsets((tmp_path / "one.rec").read_bytes())[:20]
        batch.write_batch(payloads[20:])
    for ext in (".rec", ".idx"):
        assert (tmp_path / f"one{ext}").read_bytes() == (tmp_path / f"batch{ext}").read_bytes()
    too_big = memoryview(np.zeros(framing.MAX_LENGTH + 1, np.uint8))
    with RecordWriter(tmp_path / "k.rec", index=True, key_type=str) as writer:
        with pytest.raises(RecordTooLargeError):
            writer.write_batch([b"a", b"b", too_big, b"d"], keys=["x", "y", "z", "w"])
        writer.write(b"e", key="v")
    with RecordReader(tmp_path / "k.rec", key_type=str) as reader:
        assert reader.keys == ["x", "y", "v"] and list(reader) == [b"a", b"b", b"e"]


@pytest.mark.parametrize(("key_type", "keys"), [(str, ["a", "b"]), (int, [7, 8]), (int, [1, 2, 3, 4, 5])])
def test_write_batch_with_mismatched_keys_writes_nothing(tmp_path, key_type, keys):
    with RecordWriter(tmp_path / "m.rec", index=True, key_type=key_type) as writer:
        with pytest.raises(ValueError, match=f"3 payloads but {len(keys)} keys; nothing was written"):
            writer.write_batch((p for p in [b"one", b"two", b"three"]), keys=iter(keys))
        assert writer.tell() == 0 and len(writer) == 0
        writer.write(b"next", key=key_type("9"))
    with RecordReader(tmp_path / "m.rec", key_type=key_type) as reader:
        assert reader.keys == [key_type("9")] and list(reader) == [b"next"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(max_size=40) | st.just(MAGIC) | st.just(b"ab" + MAGIC) | large_with_magic, max_size=150))
def test_write_batch_frames_exactly_as_the_spec(tmp_path_factory, payloads):
    """Groups with an aligned magic anywhere fall back to per-record framing; the bytes never differ."""
    path = tmp_path_factory.mktemp("wb") / "b.rec"
    with RecordWriter(path, index=True) as writer:
        offsets = writer.write_batch(payloads)
    assert path.read_bytes() == b"".join(framing.encode_record(p) for p in payloads)
    assert offsets == framing.record_offsets(path.read_bytes())


def test_write_batch_groups_mixed_sizes_padding_and_magics_exactly(tmp_path):
    magic = framing.MAGIC_BYTES
    rng = np.random.default_rng(3)
    payloads = [bytes(rng.integers(0, 256, n, dtype=np.uint8)) for n in (1, 2, 3, 4, 5, 1023, 0, 9000, 70_000)]
    # aligned, unaligned, large (a magic scan past VECTOR_SCAN_FROM, 2100 parts), and a write-through size
    payloads += [magic + b"x", b"ab" + magic + b"cd", magic * 2_100, bytes(300_000)]
    payloads = payloads * 40  # several groups
    with RecordWriter(tmp_path / "b.rec", index=True) as writer:
        offsets = writer.write_batch(payloads)
        single = [writer.write(p) for p in payloads[:13]]
    data = (tmp_path / "b.rec").read_bytes()
    expected = b"".join(framing.encode_record(p) for p in payloads + payloads[:13])
    assert data == expected
    assert offsets + single == framing.record_offsets(data)
    with RecordReader(tmp_path / "b.rec") as reader:
        assert list(reader) == payloads + payloads[:13]
