"""``mxrec convert`` at scale: worker processes, shard sets and URLs on both sides, output complete or absent
(a real ``mxrec convert`` process stopped by SIGTERM), and the command line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import mxrec
from mxrec.errors import OptionError
from mxrec.io.opener import RecordReader
from mxrec.io.shards import ShardedWriter, ShardLimit
from mxrec.io.writer import RecordWriter
from testkit import GOLDEN
from testkit.cli import mxrec_env
from testkit.waiting import wait_for

SUB = GOLDEN / "im2rec" / "default" / "sub.rec"


def files_of(folder: Path) -> dict[str, bytes]:
    """Every file of a converted set, its .mxrec/ (manifest, index files) included."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("fmt", ["webdataset", "tfrecord"])
def test_workers_write_the_same_shards_as_one_process(fmt, tmp_path):
    one = mxrec.convert(SUB, tmp_path / "one", target_format=fmt, shard_size=8)
    two = mxrec.convert(SUB, tmp_path / "two", target_format=fmt, shard_size=8, workers=2)
    assert len(one.files) == 7
    assert files_of(tmp_path / "one") == files_of(tmp_path / "two")
    assert two.report.kinds == {"jpeg": 50}


def test_foreign_set_with_workers_to_rec_shards(tmp_path):
    wds = mxrec.convert(SUB, tmp_path / "wds", target_format="webdataset", shard_size=16)
    out = mxrec.convert(wds.manifest, tmp_path / "rec" / "train.rec", shard_size=16, workers=2)
    assert [Path(f).name for f in out.files] == [f"train_{n:05d}.rec" for n in range(4)]
    with mxrec.open_dataset(out.manifest) as back, RecordReader(SUB) as original:
        assert len(back) == 50
        assert [back[n] for n in range(50)] == [original[n] for n in range(50)]
        assert back.keys == list(original.keys)  # the keys travel with the records


def test_shard_set_source(tmp_path):
    with RecordReader(SUB) as reader, ShardedWriter(tmp_path / "set.rec", ShardLimit(records=20)) as writer:
        for position, key in enumerate(reader.keys):
            writer.write(reader[position], key)
    out = mxrec.convert(tmp_path / "set.manifest.json", tmp_path / "pq", target_format="parquet")
    assert out.records == 50 and len(out.files) == 17 and not out.notes  # 3 records a shard: 16 and more
    back = tmp_path / "back.rec"
    mxrec.convert(tmp_path / "pq", back)
    assert back.read_bytes() == SUB.read_bytes()
    assert back.with_suffix(".idx").read_bytes() == SUB.with_suffix(".idx").read_bytes()


def test_urls_on_both_sides(s3_server, s3_bucket, tmp_path):
    options = s3_server.storage_options()
    import fsspec

    fs = fsspec.filesystem("s3", **options)
    fs.put_file(str(SUB), f"{s3_bucket}/in/sub.rec")
    fs.put_file(str(SUB.with_suffix(".idx")), f"{s3_bucket}/in/sub.idx")
    out = mxrec.convert(f"s3://{s3_bucket}/in/sub.rec", f"s3://{s3_bucket}/out", target_format="webdataset",
                        shard_size=25, storage_options=options)
    assert out.manifest == f"s3://{s3_bucket}/out/.mxrec/sub.convert.json"
    assert sorted(p.split("/out/", 1)[1] for p in fs.find(f"{s3_bucket}/out")) == [
        ".mxrec/sub.convert.json", "sub_00000.tar", "sub_00001.tar"]
    back = tmp_path / "back.rec"
    mxrec.convert(out.manifest, back, storage_options=options)
    assert back.read_bytes() == SUB.read_bytes()
    assert back.with_suffix(".idx").read_bytes() == SUB.with_suffix(".idx").read_bytes()


def test_formats_come_from_names_or_flags(tmp_path):
    with pytest.raises(OptionError, match="--from/--to"):
        mxrec.convert(SUB, tmp_path / "somewhere")
    out = mxrec.convert(SUB, tmp_path / "x" / "train.tfrecord")  # one file, under the name asked for
    assert out.target_format == "tfrecord" and [Path(f).name for f in out.files] == ["train.tfrecord"]
    sharded = mxrec.convert(SUB, tmp_path / "y" / "train.tfrecord", shard_size=25)  # shards named after it
    assert [Path(f).name for f in sharded.files] == ["train_00000.tfrecord", "train_00001.tfrecord"]
    for given in (out.files[0], tmp_path / "y" / "train.tfrecord", out.manifest):  # each finds its set's manifest
        back = mxrec.convert(given, tmp_path / "back.rec")
        assert back.records == 50 and (tmp_path / "back.rec").read_bytes() == SUB.read_bytes()
    with pytest.raises(OptionError, match="folder converts to and from RecordIO only"):
        mxrec.convert(tmp_path / "x", tmp_path / "y", source_format="folder", target_format="parquet")


def test_image_folder_both_ways_is_extract_and_pack(tmp_path):
    out = mxrec.convert(SUB, tmp_path / "images", target_format="folder")
    assert out.records == 50 and Path(out.files[0]).suffix == ".lst"
    back = mxrec.convert(tmp_path / "images", tmp_path / "packed.rec", source_format="folder")
    assert back.records == 50
    with RecordReader(tmp_path / "packed.rec") as packed, RecordReader(SUB) as original:
        assert sorted(packed.unpack(n)[1] for n in range(50)) == sorted(original.unpack(n)[1] for n in range(50))


def test_cli_convert_and_back(mxrec_cli, tmp_path):
    done = mxrec_cli("convert", SUB, tmp_path / "wds", "--to", "webdataset", "--shard-size", "20")
    assert done.returncode == 0, done.stderr
    assert "converted 50 records recordio -> webdataset into 3 file(s)" in done.stdout
    assert "convert 50/50" in done.stderr  # the progress line
    back = mxrec_cli("convert", tmp_path / "wds", tmp_path / "back.rec", "--no-progress")
    assert back.returncode == 0 and back.stderr == ""
    assert (tmp_path / "back.rec").read_bytes() == SUB.read_bytes()
    bad = mxrec_cli("convert", SUB, tmp_path / "nowhere")
    assert bad.returncode == 2 and "--from/--to" in bad.stderr and "Traceback" not in bad.stderr


def _big_rec(path: Path, count: int = 200_000) -> None:
    payload = mxrec.pack(mxrec.IRHeader(0, 1.0, 0, 0), b"\xff\xd8\xff\xe0" + bytes(1000))
    with RecordWriter(path, True) as writer:
        for _ in range(0, count, 10_000):
            writer.write_batch([payload] * 10_000)


@pytest.mark.parametrize("workers", ["1", "2"])
def test_sigterm_leaves_nothing_that_looks_whole(workers, tmp_path):
    src = tmp_path / "big.rec"
    _big_rec(src)
    out = tmp_path / "out"
    job = subprocess.Popen([sys.executable, "-m", "mxrec", "convert", str(src), str(out), "--to", "parquet",
                            "--shard-size", "20000", "-j", workers], env=mxrec_env(), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    try:
        def staging() -> bool:
            assert job.poll() is None, job.communicate()
            return len(list(out.glob(".mxrec/.big.staging-*/*.parquet"))) >= 2

        wait_for(staging, "two shards being written")
        job.send_signal(signal.SIGTERM)
        _, err = job.communicate(timeout=60)
    finally:
        if job.poll() is None:
            job.kill()
            job.wait(timeout=30)
    assert job.returncode == 128 + signal.SIGTERM, err
    assert "terminated (SIGTERM)" in err and "Traceback" not in err
    assert os.listdir(out) == []  # no shard, no manifest, no staging folder


def test_a_finished_set_replaces_an_old_manifest(tmp_path):
    mxrec.convert(SUB, tmp_path / "wds", target_format="webdataset", shard_size=10)
    mxrec.convert(SUB, tmp_path / "wds", target_format="webdataset", shard_size=25)
    manifest = json.loads((tmp_path / "wds" / ".mxrec" / "sub.convert.json").read_text())
    assert [s["records"] for s in manifest["shards"]] == [25, 25]


@pytest.mark.parametrize("fmt", ["webdataset", "tfrecord", "recordio"])
def test_a_rerun_into_the_same_name_leaves_no_stale_shards(fmt, tmp_path):
    """A smaller set written over a larger one of the same name: the larger one's later shards are removed, so a
    glob or a folder finds the new set only."""
    target = tmp_path / "out" / "sub.rec" if fmt == "recordio" else tmp_path / "out"
    source = tmp_path / "back.rec"
    mxrec.convert(SUB, target, target_format=fmt, shard_size=10)
    assert len(list((tmp_path / "out").rglob("*"))) >= 6  # five shards (and their indexes) and a manifest
    second = mxrec.convert(SUB, target, target_format=fmt, shard_size=25)
    out = tmp_path / "out"
    left = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    meta = "" if fmt == "recordio" else ".mxrec/"
    expected = sorted([*(Path(f).name for f in second.files), meta + Path(second.manifest).name,
                       *(f"{meta}{Path(f).name}.idx" for f in second.files if fmt == "tfrecord"),
                       *(Path(f).with_suffix(s).name for f in second.files if fmt == "recordio"
                         for s in (".idx", ".checksums"))])
    assert left == expected
    if fmt != "recordio":  # the folder, as a reader finds it, is the new set
        mxrec.convert(tmp_path / "out", source, source_format=fmt)
        assert source.read_bytes() == SUB.read_bytes()


def test_damaged_inputs_fail_naming_the_file_and_leave_nothing(tmp_path):
    damaged = sorted((GOLDEN / "seq" / "damaged").glob("*.rec"))[0]
    with pytest.raises(mxrec.RecordFormatError, match=damaged.name):
        mxrec.convert(damaged, tmp_path / "wds", target_format="webdataset")
    assert not (tmp_path / "wds").exists() or os.listdir(tmp_path / "wds") == []
    made = mxrec.convert(SUB, tmp_path / "ok", target_format="webdataset")
    cut = tmp_path / "cut.tar"
    cut.write_bytes(Path(made.files[0]).read_bytes()[:100_000])
    with pytest.raises(mxrec.TruncatedRecordError, match=r"cut\.tar: at byte \d+: the tar file ends inside"):
        mxrec.convert(cut, tmp_path / "cut.rec")
    assert not (tmp_path / "cut.rec").exists() and not list(tmp_path.glob(".cut*"))


@pytest.mark.parametrize("fmt", ["webdataset", "tfrecord"])
def test_workers_split_a_set_without_manifest_by_files_keys_stay_positions(fmt, tmp_path, monkeypatch):
    """A set another tool wrote (no manifest, no keys) is counted first, so its files convert in parallel and each
    sample is still keyed by its position in the whole set."""
    from mxrec.interop import job
    from testkit.datasets import clean_jpeg

    sizes = [5, 7, 4]
    folder = tmp_path / "theirs"
    folder.mkdir()
    number = 0
    for shard, size in enumerate(sizes):
        if fmt == "webdataset":
            wds = pytest.importorskip("webdataset")
            with wds.TarWriter(str(folder / f"part-{shard}.tar")) as sink:
                for _ in range(size):
                    sink.write({"__key__": f"s{number:04d}", "jpg": clean_jpeg(number), "cls": number % 3})
                    number += 1
        else:
            writer_module = pytest.importorskip("tfrecord.writer")
            writer = writer_module.TFRecordWriter(str(folder / f"part-{shard}.tfrecord"))
            for _ in range(size):
                writer.write({"image/encoded": (clean_jpeg(number), "byte"), "image/class/label": (number % 3, "int")})
                number += 1
            writer.close()
    serial = mxrec.convert(folder, tmp_path / "one" / "all.rec", shard_size=4)
    tasks: list[tuple[int, int, int]] = []
    run_task = job.run_task
    monkeypatch.setattr(job, "_run_local", lambda ts, *a: (tasks.extend((t.start, t.stop, t.key_base) for t in ts),
                                                          [run_task(t) for t in ts])[1])
    parallel = mxrec.convert(folder, tmp_path / "two" / "all.rec", shard_size=4, workers=2)
    assert tasks == [(0, 1, 0), (1, 2, 5), (2, 3, 12)]  # a task per file, keyed from the samples before it
    assert serial.records == parallel.records == 16
    with mxrec.open_dataset(serial.manifest) as one, mxrec.open_dataset(parallel.manifest) as two:
        assert list(one.keys) == list(two.keys) == list(range(16))
        assert [one[n] for n in range(16)] == [two[n] for n in range(16)]
        assert [two.unpack(n)[0].id for n in range(16)] == list(range(16))


@pytest.mark.parametrize("phase", ["uploading", "publishing"])
def test_sigterm_during_a_remote_convert_leaves_nothing(s3_server, s3_bucket, tmp_path, phase):
    """A convert into s3:// stopped by SIGTERM while its shards go up (or are moved to their names) leaves no
    object in the bucket, staged or final, and no spool file: shards are uploaded under a hidden staging folder,
    moved to their names only when all are there, and what was moved is removed again."""
    spool = tmp_path / "spool"
    spool.mkdir()
    env = dict(mxrec_env(), **s3_server.env(), MXREC_SPOOL_DIR=str(spool))
    s3_server.faults.delay_next(1000, 0.15, method="PUT")
    job = subprocess.Popen([sys.executable, "-m", "mxrec", "convert", str(SUB), f"s3://{s3_bucket}/out",
                            "--to", "webdataset", "--shard-size", "5", "--no-progress"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        def ready() -> bool:
            puts = s3_server.log.filter(method="PUT")
            if phase == "uploading":
                return len(puts) >= 3
            return any(any(k.lower() == "x-amz-copy-source" for k in r.headers) for r in puts)

        def running_and_ready() -> bool:
            assert job.poll() is None, job.communicate()
            return ready()

        wait_for(running_and_ready, f"the {phase}")
        job.send_signal(signal.SIGTERM)
        _, err = job.communicate(timeout=60)
    finally:
        if job.poll() is None:
            job.kill()
            job.communicate(timeout=30)
    assert job.returncode == 128 + signal.SIGTERM and "terminated (SIGTERM)" in err, err
    assert s3_server.list_keys(s3_bucket) == []
    assert list(spool.iterdir()) == []
