"""mxrec info / verify on shard sets: per shard, in total, and against the manifest."""

from __future__ import annotations

import json

from mxrec.doctor.sets import ShardSetInfo, ShardSetReport, info, verify
from mxrec.io.shards import ShardedWriter, ShardLimit


def make_set(folder):
    with ShardedWriter(folder / "train.rec", ShardLimit(records=4)) as writer:
        for i in range(10):
            writer.write(b"payload %d" % i, key=i)
    return folder / "train.manifest.json"


def test_info_and_verify_per_shard_and_in_total(tmp_path, mxrec_cli):
    manifest = make_set(tmp_path)
    summary = info(manifest)
    assert isinstance(summary, ShardSetInfo) and len(summary.shards) == 3
    assert summary.records == 10 and summary.manifest.ok
    report = verify(tmp_path / "train")
    assert isinstance(report, ShardSetReport) and report.ok and len(report.reports) == 3
    assert "total: 3 shard(s), 10 records, 0 shard(s) failed: OK" in report.format_text()
    out = mxrec_cli("info", tmp_path, "--json")
    assert out.returncode == 0 and json.loads(out.stdout)["records"] == 10


def test_a_damaged_or_missing_shard_fails_the_set(tmp_path, mxrec_cli):
    manifest = make_set(tmp_path)
    shard = tmp_path / "train_00001.rec"
    data = bytearray(shard.read_bytes())
    data[0:4] = b"XXXX"
    shard.write_bytes(bytes(data))
    report = verify(manifest)
    assert not report.ok and not report.reports[1].ok and report.reports[0].ok
    (tmp_path / "train_00002.rec").unlink()
    summary = info(manifest)
    assert summary.missing == [str(tmp_path / "train_00002.rec")] and not summary.manifest.ok
    result = mxrec_cli("verify", manifest, "--no-progress")
    assert result.returncode == 1 and "train_00002.rec is missing" in result.stdout
