"""mxrec info / verify on shard sets: per shard, in total, and against the manifest."""

from __future__ import annotations

import json

from mxrec.doctor.sets import ShardSetInfo, ShardSetReport, info, verify
from mxrec.format.header import IRHeader, pack
from mxrec.io.shards import ShardedWriter, ShardLimit
from testkit.datasets import clean_jpeg, write_indexed


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


def make_image_set(folder, repeat_from: int, repeat_at: int):
    """10 image records in shards of 4; record ``repeat_at`` holds record ``repeat_from``'s image."""
    images = [clean_jpeg(key) for key in range(10)]
    images[repeat_at] = images[repeat_from]
    with ShardedWriter(folder / "photos.rec", ShardLimit(records=4)) as writer:
        for key, image in enumerate(images):
            writer.write(pack(IRHeader(0, float(key % 3), key, 0), image), key=key)
    return folder / "photos.manifest.json"


def test_verify_finds_a_record_repeated_in_another_shard(tmp_path, mxrec_cli):
    manifest = make_image_set(tmp_path, repeat_from=1, repeat_at=9)  # shard 0 key 1 == shard 2 key 9
    report = verify(manifest)
    assert all(r.check("duplicates").ok for r in report.reports)  # each shard alone is clean
    duplicates = next(c for c in report.checks if c.name == "duplicates")
    assert not duplicates.ok and not report.ok
    [problem] = duplicates.problems
    assert problem.where == f"{tmp_path / 'photos_00002.rec'}: 9"
    assert problem.what.startswith(f"same image bytes as {tmp_path / 'photos_00000.rec'}: 1")
    result = mxrec_cli("verify", manifest, "--json", "--no-progress")
    assert result.returncode == 1
    assert json.loads(result.stdout)["checks"][0]["details"]["extra_copies"] == 1
    assert "[FAIL] duplicates (whole set): 1 extra cop(ies)" in mxrec_cli("verify", manifest).stdout


def test_verify_against_checks_leakage_over_the_whole_set(tmp_path):
    (tmp_path / "train").mkdir()
    manifest = make_image_set(tmp_path / "train", repeat_from=0, repeat_at=0)
    write_indexed(tmp_path / "val.rec", [0], [pack(IRHeader(0, 1.0, 0, 0), clean_jpeg(6))])
    report = verify(manifest, against=tmp_path / "val.rec")
    leakage = next(c for c in report.checks if c.name == "leakage")
    assert not leakage.ok and [p.where for p in leakage.problems] == [f"{tmp_path / 'train' / 'photos_00001.rec'}: 6"]
    assert next(c for c in report.checks if c.name == "duplicates").ok


def test_verify_and_stats_say_only_the_error_on_a_missing_file(tmp_path, mxrec_cli):
    for command in ("verify", "stats"):
        result = mxrec_cli(command, tmp_path / "missing.rec")
        assert result.returncode != 0 and "reading:" not in result.stderr, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1 and "missing.rec" in result.stderr
