"""Large shard sets open in few requests: a manifest in two; a glob or a brace range with one listing of the folder
and the shards' ``.idx`` files read in parallel, only once the records are counted (judged by a real S3 server's
log)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mxrec.datasets.opening import open_dataset
from mxrec.datasets.shard_set import ShardSetReader
from mxrec.errors import ManifestError
from mxrec.format.manifest import Manifest, ShardEntry
from testkit.datasets import random_payloads, write_indexed

SHARDS = 24
PER_SHARD = 7


@functools.cache
def payloads() -> list[bytes]:
    return random_payloads(SHARDS * PER_SHARD, 300, seed=9)


@pytest.fixture
def s3_shards(s3_server: Any, s3_bucket: str, tmp_path: Path) -> str:
    """``SHARDS`` shards ``part-00000.rec`` ... with their ``.idx`` in ``sets/`` (and a manifest of them at the
    bucket's top); the folder's URL."""
    entries = []
    for n in range(SHARDS):
        rec = tmp_path / f"part-{n:05d}.rec"
        write_indexed(rec, range(n * PER_SHARD, (n + 1) * PER_SHARD), payloads()[n * PER_SHARD:(n + 1) * PER_SHARD])
        s3_server.put_object(s3_bucket, f"sets/{rec.name}", rec.read_bytes())
        s3_server.put_object(s3_bucket, f"sets/{rec.stem}.idx", rec.with_suffix(".idx").read_bytes())
        entries.append(ShardEntry(rec.name, f"{rec.stem}.idx", PER_SHARD, rec.stat().st_size,
                                  rec.with_suffix(".idx").stat().st_size))
    s3_server.put_object(s3_bucket, "all.manifest.json", Manifest(tuple(
        ShardEntry(f"sets/{e.rec}", f"sets/{e.idx}", e.records, e.rec_bytes, e.idx_bytes)
        for e in entries)).to_json().encode())
    s3_server.log.clear()
    return f"s3://{s3_bucket}/sets"


def requests(server: Any) -> list[tuple[str, str | None]]:
    return [(r.method, r.key) for r in server.log]


@pytest.mark.parametrize("spec", ["part-*.rec", "part-{00000..00023}.rec"])
def test_a_set_without_manifest_is_listed_once_and_its_idx_files_read_only_when_counted(s3_server, s3_shards, spec):
    reader = open_dataset(f"{s3_shards}/{spec}", storage_options=s3_server.storage_options())
    assert isinstance(reader, ShardSetReader)
    opened = requests(s3_server)
    assert [m for m, k in opened] == ["GET"] and opened[0][1] is None  # one listing of sets/, no object read
    assert len(reader) == SHARDS * PER_SHARD
    counted = requests(s3_server)[1:]
    assert sorted(counted) == sorted(("GET", f"sets/part-{n:05d}.idx") for n in range(SHARDS))  # no HEAD, no sidecar
    assert reader.read_batch(np.arange(len(reader))) == payloads()
    assert reader.counts == [PER_SHARD] * SHARDS


def test_a_manifest_opens_a_set_in_two_requests_and_counts_without_more(s3_server, s3_shards):
    manifest = s3_shards.replace("/sets", "/all.manifest.json")
    reader = open_dataset(manifest, storage_options=s3_server.storage_options())
    assert len(reader) == SHARDS * PER_SHARD and reader.nbytes > 0
    assert len(s3_server.log) <= 2 and {k for _, k in requests(s3_server)} == {"all.manifest.json"}
    assert reader.read_batch([0, len(reader) - 1]) == [payloads()[0], payloads()[-1]]


def test_a_shard_named_by_a_brace_range_but_missing_is_named(s3_server, s3_shards):
    reader = open_dataset(f"{s3_shards}/part-{{00000..00024}}.rec", storage_options=s3_server.storage_options())
    with pytest.raises(ManifestError, match=r"part-00024\.rec.*missing"):
        len(reader)
