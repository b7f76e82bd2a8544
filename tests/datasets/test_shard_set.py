"""Shard sets as one dataset: every way to name one, positions across shards, checks against the manifest."""

from __future__ import annotations

import json
import pickle
import uuid

import fsspec
import pytest

from mxrec.datasets.opening import open_dataset
from mxrec.datasets.shard_set import ShardSetReader, expand_braces
from mxrec.datasets.subset import RecordSubset
from mxrec.errors import DuplicateKeyError, ManifestError, RecordKeyError
from mxrec.io.local_reader import LocalRecordReader
from mxrec.io.records import IOStats
from mxrec.io.shards import ShardedWriter, ShardLimit
from mxrec.io.writer import RecordWriter
from mxrec.storage.block_cache import BlockCache


@pytest.fixture
def shard_set(tmp_path):
    with ShardedWriter(tmp_path / "train.rec", ShardLimit(records=30)) as writer:
        for i in range(100):
            writer.write(b"record %d" % i, key=1000 + i)
    return tmp_path


@pytest.mark.parametrize("spec", ["train.rec", "train", ".", "train.manifest.json", "train_*.rec",
                                  "train_{00000..00003}.rec"])
def test_every_way_to_name_a_set(shard_set, spec):
    dataset = open_dataset(str(shard_set / spec).replace("/.", ""))
    assert isinstance(dataset, ShardSetReader) and len(dataset) == 100
    assert dataset[0] == b"record 0" and dataset[99] == b"record 99" and dataset[-1] == b"record 99"
    assert dataset.read_batch([95, 3, 30, 29]) == [b"record 95", b"record 3", b"record 30", b"record 29"]
    assert list(dataset) == [b"record %d" % i for i in range(100)]
    assert dataset.keys[:2] == [1000, 1001] and dataset.position(1031) == 31 and dataset.read_key(1099) == b"record 99"
    assert dataset.describe(31).endswith("train_00001.rec: record 1031")
    copy = pickle.loads(pickle.dumps(dataset))
    assert copy[64] == b"record 64"


def test_a_list_keeps_its_order_and_one_file_stays_a_reader(shard_set):
    dataset = open_dataset([shard_set / "train_00001.rec", shard_set / "train_00000.rec"])
    assert len(dataset) == 60 and dataset[0] == b"record 30" and dataset[30] == b"record 0"
    assert isinstance(open_dataset(shard_set / "train_00000.rec"), LocalRecordReader)


def test_manifest_disagreements_name_the_shard(shard_set):
    (shard_set / "train_00002.rec").write_bytes((shard_set / "train_00002.rec").read_bytes()[:-8])
    with pytest.raises(ManifestError, match=r"shard 2 .*train_00002.rec.* has \d+ bytes, the manifest says"):
        open_dataset(shard_set / "train.manifest.json")
    (shard_set / "train_00002.rec").unlink()
    with pytest.raises(ManifestError, match=r"shard 2 .* is missing"):
        open_dataset(shard_set)
    manifest = json.loads((shard_set / "train.manifest.json").read_text())
    manifest["shards"] = manifest["shards"][:2]
    manifest["records"] = 60
    manifest["shards"][1]["records"] = 31
    manifest["records"] = 61
    (shard_set / "train.manifest.json").write_text(json.dumps(manifest))
    dataset = open_dataset(shard_set)
    with pytest.raises(ManifestError, match="holds 30 records, the manifest says 31"):
        dataset[45]


def test_keys_repeated_across_shards(tmp_path):
    for name in ("a", "b"):
        with RecordWriter(tmp_path / f"{name}.rec", index=True) as writer:
            writer.write(name.encode(), key=7)
    dataset = open_dataset(tmp_path / "*.rec")
    assert dataset.read_batch([0, 1]) == [b"a", b"b"]  # positions always work
    with pytest.raises(DuplicateKeyError, match="key 7 is in shard 0"):
        dataset.position(7)
    assert open_dataset(tmp_path / "*.rec", duplicates="last").read_key(7) == b"b"
    with pytest.raises(RecordKeyError):
        open_dataset(tmp_path / "*.rec", duplicates="last").read_key(8)


def test_expand_braces_keeps_padding():
    assert expand_braces("t-{008..010}.rec") == ["t-008.rec", "t-009.rec", "t-010.rec"]
    assert expand_braces("x") == ["x"]


def test_empty_patterns_say_so(tmp_path):
    with pytest.raises(ManifestError, match="matches no .rec file"):
        open_dataset(tmp_path / "none-*.rec")


def test_io_stats_add_the_shards_and_count_their_shared_cache_once(shard_set, tmp_path):
    fs = fsspec.filesystem("memory")
    folder = f"/shards-{uuid.uuid4().hex}"
    for path in sorted(shard_set.glob("train_0000*")):
        fs.pipe_file(f"{folder}/{path.name}", path.read_bytes())
    cache = BlockCache(tmp_path / "cache", block_size=4096)
    try:
        dataset = open_dataset(f"memory://{folder}/train_*.rec", cache_dir=cache)
        assert dataset.io_stats() == IOStats()  # no shard opened yet
        assert list(dataset) == [b"record %d" % i for i in range(100)]
        stats = dataset.io_stats()
        shards = [dataset.shard(n).io_stats() for n in range(len(dataset.shards))]
        assert stats.requests == sum(s.requests for s in shards) >= len(shards)
        assert stats.bytes == sum(s.bytes for s in shards) > 0
        assert (stats.cache_hits, stats.cache_misses) == (cache.hits, cache.misses) and cache.misses >= len(shards)
        assert RecordSubset(dataset, [3, 50]).io_stats() == stats  # a subset reads through its reader
        local = open_dataset(shard_set / "train_*.rec")
        list(local)
        assert local.io_stats() == IOStats()
    finally:
        fs.rm(folder, recursive=True)
