"""Sharded output: shards capped by records or bytes, published together, the manifest written last."""

from __future__ import annotations

import os

import pytest

from mxrec.format.checksums import compute, parse_sidecar
from mxrec.format.manifest import ShardEntry
from mxrec.io.opener import RecordReader
from mxrec.io.shards import ShardedWriter, ShardLimit, read_manifest


def write_set(path, count: int, limit: ShardLimit) -> ShardedWriter:
    with ShardedWriter(path, limit) as writer:
        for i in range(count):
            writer.write(b"%d" % i * (i + 1), key=100 + i)
    return writer


def test_manifest_lists_every_shard_with_its_records_and_sizes(tmp_path):
    writer = write_set(tmp_path / "t.rec", 7, ShardLimit(records=3))
    manifest = read_manifest(tmp_path / "t.manifest.json")
    assert manifest.records == 7 and [s.records for s in manifest.shards] == [3, 3, 1]
    assert manifest.shards[0] == ShardEntry("t_00000.rec", "t_00000.idx", 3, os.path.getsize(tmp_path / "t_00000.rec"),
                                            os.path.getsize(tmp_path / "t_00000.idx"), True)  # checksums: its sidecar
    assert parse_sidecar((tmp_path / "t_00000.checksums").read_text(), "t_00000.checksums") == compute(
        (tmp_path / "t_00000.rec").read_bytes())
    keys = [k for rec, idx in writer.paths for k in RecordReader(rec, idx).keys]
    assert keys == list(range(100, 107))


def test_an_aborted_set_leaves_no_shard_and_no_manifest(tmp_path):
    with pytest.raises(RuntimeError), ShardedWriter(tmp_path / "t.rec", ShardLimit(records=2)) as writer:
        for i in range(5):
            writer.write(b"x", key=i)
        raise RuntimeError("stop")
    assert list(tmp_path.iterdir()) == []


def test_a_new_set_replaces_an_older_manifest(tmp_path):
    write_set(tmp_path / "t.rec", 7, ShardLimit(records=3))
    write_set(tmp_path / "t.rec", 2, ShardLimit(records=3))
    assert [s.records for s in read_manifest(tmp_path / "t.manifest.json").shards] == [2]
