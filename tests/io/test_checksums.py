"""Checksums end to end (issue 22 §4): the writers record them (a cell per record), the readers check each cell the
first time they read it (local, remote, and what the block cache returns), ``verify`` checks them all, ``index``
adds them to MXNet's files.

A flipped byte must never come back as a wrong record: it is one ChecksumError naming the file, the byte range and
its records.
"""

from __future__ import annotations

import functools
import json
import pickle
import shutil
from pathlib import Path

import numpy as np
import pytest

from mxrec.datasets.opening import open_dataset
from mxrec.doctor.sets import verify as verify_set
from mxrec.doctor.verify_dataset import verify_dataset
from mxrec.errors import ChecksumError, ManifestError
from mxrec.format.checksums import BlockChecksums, checksums_path, compute, format_sidecar, parse_sidecar
from mxrec.format.framing import MAGIC_BYTES
from mxrec.io.index import build_index
from mxrec.io.opener import RecordReader
from mxrec.io.shards import ShardedWriter, ShardLimit, add_manifest_checksums, read_manifest
from mxrec.io.writer import RecordWriter
from mxrec.storage.block_cache import BlockCache
from testkit import GOLDEN
from testkit.cli import run_cli
from testkit.datasets import random_payloads

N = 3000


@functools.cache
def payloads() -> list[bytes]:
    return random_payloads(N, 1100, seed=22)


def sums_of(path: Path):
    return parse_sidecar(Path(checksums_path(path)).read_text(), checksums_path(path), path.stat().st_size)


def flip(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0x01
    path.write_bytes(bytes(data))


def written(tmp_path: Path, name: str = "t.rec", **options) -> Path:
    path = tmp_path / name
    with RecordWriter(path, index=True, **options) as writer:
        writer.write_batch(payloads())
    return path


# -- writing


@pytest.mark.parametrize("mode", ["write", "write_batch", "write_pieces", "write_pieces_magic", "atomic"])
def test_every_write_path_records_the_checksums_of_the_bytes_written(tmp_path, mode):
    path = tmp_path / "t.rec"
    behind = mode.startswith("write_pieces")
    with RecordWriter(path, index=True, write_behind=behind, atomic=mode == "atomic") as writer:
        for i, payload in enumerate(payloads()):
            if mode == "write":
                writer.write(payload)
            elif behind:  # a header and a view, as convert writes them; some payloads hold the magic
                body = payload[:500] + MAGIC_BYTES + payload[504:] if mode.endswith("magic") and i % 700 == 3 \
                    else payload
                writer.write_pieces([(i, [body[:24], memoryview(body)[24:]])])
            else:
                writer.write_batch([payload])
    assert sums_of(path) == compute(path.read_bytes()) == writer.checksums
    assert writer.checksums.starts.tolist() == RecordReader(path, checksums=False).offsets.tolist()  # a cell a record
    assert writer.checksums.block_bytes is None and len(writer.checksums) == N


def test_the_drop_in_mxnet_writer_writes_mxnets_files_only(tmp_path):
    from mxrec import recordio

    writer = recordio.MXIndexedRecordIO(str(tmp_path / "m.idx"), str(tmp_path / "m.rec"), "w")
    writer.write_idx(0, b"x")
    writer.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.idx", "m.rec"]


def test_a_rewrite_replaces_the_older_checksums(tmp_path):
    path = written(tmp_path)
    with RecordWriter(path, index=True, checksums=False) as writer:
        writer.write(b"other")
    assert not Path(checksums_path(path)).exists()  # never an older file's checksums beside new bytes


# -- reading, local


@pytest.mark.parametrize("how", ["getitem", "view", "fetch", "read_batch", "iterate"])
def test_a_flipped_byte_is_a_checksum_error_naming_the_bytes_and_records(tmp_path, how):
    path = written(tmp_path)
    reader = RecordReader(path)
    target = 1500
    flip(path, int(reader.offsets[target]) + 100)  # (the mapping sees the file as it is now)
    reader = RecordReader(path)
    read = {"getitem": lambda: reader[target], "view": lambda: reader.view(target),
            "fetch": lambda: reader.fetch(range(1490, 1510)), "read_batch": lambda: reader.read_batch([target]),
            "iterate": lambda: list(reader)}[how]
    with pytest.raises(ChecksumError) as info:
        read()
    start, end = int(reader.offsets[target]), int(reader.offsets[target + 1])  # the record's cell, nothing around
    message = str(info.value)
    assert message.startswith(f"{path}: bytes {start}..{end}: fail their CRC-32C checksum (record cell {target}:")
    assert f"record {target} (key {target})" in message
    assert reader[5] == payloads()[5]  # the other records read as before


def test_a_block_is_checked_once_then_reading_costs_nothing_more(tmp_path):
    reader = RecordReader(written(tmp_path))
    assert reader._verifier.unchecked == len(reader._verifier.checksums)
    assert reader.read_batch(range(N)) == payloads()
    assert reader._pending_check is None  # every block checked: the fast path checks no more


def test_the_checks_travel_into_spawned_and_forked_workers(tmp_path):
    path = written(tmp_path)
    reader = RecordReader(path)
    reader.read_batch(range(N))  # every block checked here
    flip(path, int(reader.offsets[2000]) + 10)
    copy = pickle.loads(pickle.dumps(reader))  # a spawned worker maps the file anew: it checks again
    with pytest.raises(ChecksumError, match="fail their CRC-32C"):
        copy[2000]


def test_an_older_files_version_1_checksums_a_grid_of_blocks_are_still_checked(tmp_path):
    import crc32c

    path = written(tmp_path, checksums=False)
    data = path.read_bytes()
    grid = 1 << 16
    crcs = np.asarray([crc32c.crc32c(data[a:a + grid]) for a in range(0, len(data), grid)], np.uint32)
    Path(checksums_path(path)).write_text(format_sidecar(BlockChecksums.grid(len(data), grid, crcs)))
    assert json.loads(Path(checksums_path(path)).read_text())["version"] == 1
    assert RecordReader(path).read_batch(range(N)) == payloads()
    flip(path, 5 * grid + 3)
    with pytest.raises(ChecksumError, match=rf"bytes {5 * grid}\.\.{6 * grid}: fail their CRC-32C checksum \(block 5"):
        RecordReader(path).read_batch(range(N))


def test_checksums_of_another_version_of_the_file_are_refused_at_open(tmp_path):
    path = written(tmp_path)
    sidecar = Path(checksums_path(path)).read_text()
    written(tmp_path, "t.rec", checksums=False)
    (tmp_path / "t.checksums").write_text(sidecar.replace(str(path.stat().st_size), "1"))
    with pytest.raises(ChecksumError, match="describes a 1-byte .rec, but the .rec holds"):
        RecordReader(path)
    assert len(RecordReader(path, checksums=False)) == N


def test_golden_mxnet_files_without_checksums_read_as_before_and_index_adds_them(tmp_path):
    rec = tmp_path / "g.rec"
    shutil.copy(GOLDEN / "im2rec" / "default" / "sub.rec", rec)
    shutil.copy(GOLDEN / "im2rec" / "default" / "sub.idx", tmp_path / "g.idx")
    before = [RecordReader(rec)[i] for i in range(5)]
    assert RecordReader(rec)._verifier is None
    done = run_cli("index", rec, "--checksums-only")
    assert done.returncode == 0 and "g.checksums" in done.stdout, done.stderr
    assert (tmp_path / "g.idx").read_bytes() == (GOLDEN / "im2rec" / "default" / "sub.idx").read_bytes()
    assert rec.read_bytes() == (GOLDEN / "im2rec" / "default" / "sub.rec").read_bytes()  # the .rec untouched
    assert [RecordReader(rec)[i] for i in range(5)] == before
    assert RecordReader(rec)._verifier is not None and sums_of(rec) == compute(rec.read_bytes())


def test_index_writes_the_idx_and_the_checksums_in_one_pass(tmp_path):
    path = written(tmp_path, checksums=False)
    (tmp_path / "t.idx").unlink()
    build_index(path)
    assert sums_of(path) == compute(path.read_bytes())
    assert len(RecordReader(path)) == N


# -- verify


def test_verify_checks_every_cell_and_names_the_damaged_ones(tmp_path):
    path = written(tmp_path)
    report = verify_dataset(path, dataset_kind="raw")
    check = next(c for c in report.checks if c.name == "checksums")
    assert check.ok and check.details["blocks"] == len(sums_of(path)) == N and report.ok
    assert check.summary == f"{N} record cell(s), each as recorded"
    offsets = RecordReader(path).offsets
    flip(path, (1 << 20) + 7)
    cell = int(np.searchsorted(offsets, (1 << 20) + 7, side="right")) - 1
    span = f"{offsets[cell]}..{offsets[cell + 1]}"
    report = verify_dataset(path, dataset_kind="raw")
    check = next(c for c in report.checks if c.name == "checksums")
    assert not check.ok and not report.ok and check.details["damaged_blocks"] == 1
    assert f"bytes {span} fail their CRC-32C" in check.problems[0].what
    done = run_cli("verify", path)
    assert done.returncode != 0 and "checksums" in done.stdout and span in done.stdout
    plain = written(tmp_path, "p.rec", checksums=False)
    check = next(c for c in verify_dataset(plain, dataset_kind="raw").checks if c.name == "checksums")
    assert check.ok and "none recorded" in check.summary


# -- shard sets


def test_a_shard_set_keeps_each_shards_checksums_beside_it_and_readers_check_them(tmp_path):
    with ShardedWriter(tmp_path / "s.rec", ShardLimit(records=1000)) as writer:
        for i, payload in enumerate(payloads()):
            writer.write(payload, i)
    assert sorted(p.name for p in tmp_path.glob("*.checksums")) == [f"s_0000{n}.checksums" for n in range(3)]
    manifest = read_manifest(tmp_path / "s.manifest.json")
    listed = json.loads((tmp_path / "s.manifest.json").read_text())["shards"]
    assert [shard["checksums"] for shard in listed] == ["sidecar"] * 3  # (the manifest stays small)
    for entry in manifest.shards:
        assert entry.checksums is True and sums_of(tmp_path / entry.rec) == compute((tmp_path / entry.rec).read_bytes())
    data = open_dataset(tmp_path / "s.manifest.json")
    assert data.read_batch(range(N)) == payloads()
    cells = sums_of(tmp_path / "s_00001.rec")
    flip(tmp_path / "s_00001.rec", 5000)
    lo, hi = cells.span(cells.covering(5000, 5001)[0])
    with pytest.raises(ChecksumError, match=rf"s_00001.rec: bytes {lo}\.\.{hi}: fail"):
        open_dataset(tmp_path / "s.manifest.json").read_batch(range(1000, 1010))
    (tmp_path / "s_00002.checksums").unlink()  # the manifest says it is there: never read unchecked
    with pytest.raises(ChecksumError, match=r"s_00002.checksums: missing: no checksums beside .*s_00002.rec"):
        open_dataset(tmp_path / "s.manifest.json").read_batch([2500])
    shard = verify_set(str(tmp_path / "s.manifest.json")).reports[2]  # and verify says so
    check = next(c for c in shard.checks if c.name == "checksums")
    assert not check.ok and "the set's manifest says the shard's checksums are there" in check.problems[0].what


def test_index_adds_checksums_to_a_manifest_that_lists_none(tmp_path):
    with ShardedWriter(tmp_path / "s.rec", ShardLimit(records=1000)) as writer:
        for i, payload in enumerate(payloads()):
            writer.write(payload, i)
    path = tmp_path / "s.manifest.json"
    text = json.loads(path.read_text())
    for shard in text["shards"]:
        del shard["checksums"]
    path.write_text(json.dumps(text))
    assert all(e.checksums is None for e in read_manifest(path).shards)
    for sidecar in tmp_path.glob("*.checksums"):
        sidecar.unlink()
    add_manifest_checksums(path)
    assert all(e.checksums is True and sums_of(tmp_path / e.rec) == compute((tmp_path / e.rec).read_bytes())
               for e in read_manifest(path).shards)
    text["shards"][0]["rec_bytes"] += 1
    path.write_text(json.dumps(text))
    with pytest.raises(ManifestError, match="shard 0"):
        add_manifest_checksums(path)


# -- remote


@pytest.fixture
def on_s3(s3_server, s3_bucket, tmp_path):
    path = written(tmp_path)
    for name in ("t.rec", "t.idx", "t.checksums"):
        s3_server.put_object(s3_bucket, name, (tmp_path / name).read_bytes())
    s3_server.log.clear()
    return f"s3://{s3_bucket}/t.rec", path


def test_a_remote_read_checks_every_block_it_fetched(s3_server, s3_bucket, on_s3):
    url, local = on_s3
    options = s3_server.storage_options()
    reader = RecordReader(url, storage_options=options)
    assert reader.read_batch(range(1490, 1510)) == payloads()[1490:1510]
    damaged = bytearray(local.read_bytes())
    damaged[int(reader.offsets[1500]) + 50] ^= 1
    s3_server.put_object(s3_bucket, "t.rec", bytes(damaged))
    mark = s3_server.log.mark()
    with pytest.raises(ChecksumError, match="fail their CRC-32C checksum .*twice: the stored file is damaged"):
        reader.read_batch([1500])
    fetched = s3_server.log.since(mark, method="GET", key="t.rec")
    assert len(fetched) == 2  # once, and once more, fresh
    # each time the record's own cell and nothing around it (a 1 MiB block, in version-1 checksums)
    assert [r.length for r in fetched] == [int(reader.offsets[1501] - reader.offsets[1500])] * 2


def test_a_bad_block_in_the_cache_is_dropped_and_fetched_again(s3_server, on_s3, tmp_path):
    url, _ = on_s3
    options = s3_server.storage_options()
    cache = BlockCache(tmp_path / "cache")
    reader = RecordReader(url, storage_options=options, cache_dir=cache)
    assert reader.read_batch(range(N)) == payloads()
    blocks = sorted((tmp_path / "cache").rglob("*"), key=lambda p: p.name)
    cached = next(p for p in blocks if p.is_file() and p.name == "0")
    data = bytearray(cached.read_bytes())
    data[12345] ^= 0x40
    cached.write_bytes(bytes(data))
    mark = s3_server.log.mark()
    again = RecordReader(url, storage_options=options, cache_dir=cache)
    assert again.read_batch(range(N)) == payloads()  # exact: the damaged cache block was fetched again
    assert len(s3_server.log.since(mark, method="GET", key="t.rec")) == 1
    assert cached.read_bytes() != bytes(data)  # and the cache holds the good bytes now


# -- every writer of .rec outputs records them


def test_convert_and_pack_outputs_carry_checksums(tmp_path, photos, im2rec):
    import mxrec

    source = written(tmp_path, "src.rec")
    for folder in ("one", "sets", "packed"):
        (tmp_path / folder).mkdir()
    one = mxrec.convert(source, tmp_path / "one" / "out.rec")  # one .rec: its sidecar published with the pair
    assert one.files == [str(tmp_path / "one" / "out.rec")]
    assert sums_of(tmp_path / "one" / "out.rec") == compute((tmp_path / "one" / "out.rec").read_bytes())
    mxrec.convert(source, tmp_path / "sets" / "out.rec", shard_size=1000, workers=2)  # shards: in the manifest
    for entry in read_manifest(tmp_path / "sets" / "out.manifest.json").shards:  # shards: each sidecar beside it
        assert entry.checksums is True
        assert sums_of(tmp_path / "sets" / entry.rec) == compute((tmp_path / "sets" / entry.rec).read_bytes())
    shutil.copy(im2rec / "default" / "sub.lst", tmp_path / "packed" / "sub.lst")
    done = run_cli("pack", "--pass-through", "--no-progress", tmp_path / "packed" / "sub", photos)
    assert done.returncode == 0, done.stderr
    assert sums_of(tmp_path / "packed" / "sub.rec") == compute((tmp_path / "packed" / "sub.rec").read_bytes())
