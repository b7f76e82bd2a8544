"""Interrupted and repeated writes never leave a set that looks whole (issue 18 §5).

Remote sharded packs are interrupted with a real SIGTERM against the loopback S3 server, while staging and while
publishing; every wait is bounded.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mxrec.datasets.opening import open_dataset
from mxrec.datasets.shard_set import ShardSetReader
from mxrec.errors import ManifestError, RemoteAccessError
from mxrec.format.header import IRHeader, pack
from mxrec.io.opener import RecordReader
from mxrec.io.shards import ShardedWriter, ShardLimit, read_manifest
from mxrec.io.writer import RecordWriter
from testkit.cli import mxrec_env
from testkit.iterdata import IM2REC
from testkit.waiting import wait_for

PHOTOS = IM2REC / "photos200"


def record(i: int) -> bytes:
    return pack(IRHeader(0, float(i % 3), i, 0), b"record %d" % i)


def write_set(path: Path | str, count: int, limit: int, **options) -> None:
    with ShardedWriter(path, ShardLimit(records=limit), **options) as writer:
        for i in range(count):
            writer.write(record(i), key=i)


# -- a lost interrupt


def test_an_interrupt_raised_inside_a_finalizer_is_raised_again(tmp_path):
    """Regression: SIGTERM arriving while the garbage collector ran a finalizer in the main thread was printed as
    'Exception ignored in ... Terminated: 15' and the job went on to finish with exit 0 (1 run in 15)."""
    script = tmp_path / "lost.py"
    script.write_text(
        "import os, signal, time\n"
        "from mxrec.cli import Terminated, sigterm_as_interrupt\n"
        "class Finalized:\n"
        "    def __del__(self):\n"
        "        os.kill(os.getpid(), signal.SIGTERM)\n"
        "        end = time.monotonic() + 0.2\n"
        "        while time.monotonic() < end:\n"
        "            pass\n"
        "try:\n"
        "    with sigterm_as_interrupt():\n"
        "        Finalized()\n"
        "        end = time.monotonic() + 10\n"
        "        while time.monotonic() < end:\n"
        "            pass\n"
        "    print('finished')\n"
        "except Terminated:\n"
        "    print('terminated')\n")
    start = time.monotonic()
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=mxrec_env(), timeout=60)
    assert done.stdout.strip() == "terminated" and "Exception ignored" not in done.stderr, done.stderr
    assert time.monotonic() - start < 8


# -- remote sharded packs interrupted by SIGTERM


@pytest.fixture
def remote_pack(s3_server, s3_bucket, tmp_path):
    """Start ``mxrec pack --shard-size 5 s3://BUCKET/int/train photos/`` (50 photos: 10 shards); yields
    ``(process, spool folder)``. Staged uploads and publishing copies are slowed down so there is time to
    interrupt each phase."""
    s3_server.put_object(s3_bucket, "int/train.lst", (IM2REC / "lists" / "sub.lst").read_bytes())
    spool = tmp_path / "spool"
    spool.mkdir()
    env = dict(mxrec_env(), **s3_server.env(), MXREC_SPOOL_DIR=str(spool))
    s3_server.faults.delay_next(1000, 0.15, method="PUT")
    job = subprocess.Popen([sys.executable, "-m", "mxrec", "pack", "--pass-through", "--shard-size", "5",
                            "--no-progress", f"s3://{s3_bucket}/int/train", str(PHOTOS)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        yield job, spool
    finally:
        if job.poll() is None:
            job.kill()
        job.communicate(timeout=30)


def is_staged(key: str | None) -> bool:
    """Whether ``key`` lies in a job's hidden staging folder (``.train.staging-JOB/``)."""
    return bool(key) and ".staging-" in key


def staged_puts(server) -> int:
    return len(server.log.filter(method="PUT", key=is_staged))


def copies(server) -> int:
    return len(server.log.filter(method="PUT", headers=lambda h: any(k.lower() == "x-amz-copy-source" for k in h)))


@pytest.mark.parametrize("phase", ["staging", "publishing"])
def test_sigterm_during_a_remote_sharded_pack_leaves_nothing(s3_server, s3_bucket, remote_pack, phase):
    """Regression: SIGTERM left shards on S3 (all of them without a manifest, or a .rec without its .idx) and
    ~30 mxrec-upload-* spool files."""
    job, spool = remote_pack
    if phase == "staging":
        wait_for(lambda: staged_puts(s3_server) >= 3 or job.poll() is not None, "the second shard's upload")
    else:
        wait_for(lambda: copies(s3_server) >= 1 or job.poll() is not None, "the first shard's publishing")
    assert job.poll() is None, job.communicate()
    job.send_signal(signal.SIGTERM)
    _, err = job.communicate(timeout=60)
    assert job.returncode == 143 and "terminated (SIGTERM)" in err and "Exception ignored" not in err, err
    assert s3_server.list_keys(s3_bucket) == ["int/train.lst"]  # no shard, staged or final, and no manifest
    assert list(spool.iterdir()) == []


def test_a_remote_sharded_pack_publishes_only_after_the_last_shard(s3_server, s3_bucket, remote_pack):
    job, spool = remote_pack
    _, err = job.communicate(timeout=120)
    assert job.returncode == 0, err
    keys = [r.key for r in s3_server.log.filter(method="PUT")]
    first_final = next(i for i, k in enumerate(keys) if not is_staged(k))
    assert sum(map(is_staged, keys[first_final:])) == 0  # every shard staged before any is final
    assert keys[first_final] == keys[-1] == "int/train.manifest.json"  # the marker first, the manifest last
    assert sorted(s3_server.list_keys(s3_bucket)) == sorted(
        ["int/train.lst", "int/train.manifest.json"] + [f"int/train_{n:05d}.{e}" for n in range(10)
                                                        for e in ("rec", "idx", "checksums")])
    assert list(spool.iterdir()) == []


def test_a_failed_upload_removes_its_spool_files(s3_server, s3_bucket, tmp_path, monkeypatch):
    """Regression: a failed upload left the spool files of every other shard behind."""
    monkeypatch.setenv("MXREC_SPOOL_DIR", str(tmp_path))
    s3_server.faults.fail_always(403, method="PUT")
    with pytest.raises(RemoteAccessError, match="upload"):
        write_set(f"s3://{s3_bucket}/x/train.rec", 35, 10, storage_options=s3_server.storage_options())
    assert list(tmp_path.iterdir()) == [] and s3_server.list_keys(s3_bucket) == []
    with pytest.raises(RemoteAccessError, match="upload"), RecordWriter(
            f"s3://{s3_bucket}/x/one.rec", index=True, storage_options=s3_server.storage_options()) as writer:
        writer.write(b"one")
    assert list(tmp_path.iterdir()) == []


# -- repeated local packs, and readers of a folder holding more than the set


def test_a_smaller_set_written_over_a_larger_one_removes_its_stale_shards(tmp_path):
    """Regression: re-packing 20 records over 40 left train_00002/3.rec/.idx, and a glob read 40 records."""
    write_set(tmp_path / "train.rec", 40, 10)
    write_set(tmp_path / "train.rec", 20, 10)
    assert sorted(p.name for p in tmp_path.iterdir()) == [  # (with each shard's checksums)
        "train.manifest.json", *(f"train_0000{n}.{ext}" for n in range(2) for ext in ("checksums", "idx", "rec"))]
    assert len(open_dataset(str(tmp_path / "train_*.rec"))) == 20
    assert read_manifest(tmp_path / "train.manifest.json").records == 20
    # an earlier set whose manifest is gone: the shards numbered after the new set's go too
    write_set(tmp_path / "train.rec", 40, 10)
    (tmp_path / "train.manifest.json").unlink()
    write_set(tmp_path / "train.rec", 10, 10)
    assert sorted(p.name for p in tmp_path.glob("train_*.rec")) == ["train_00000.rec"]


def test_a_glob_or_folder_that_finds_a_manifest_refuses_shards_it_does_not_list(tmp_path):
    write_set(tmp_path / "train.rec", 20, 10)
    for suffix in ("rec", "idx"):  # a stray shard, as an older tool's re-run would leave it
        shutil.copy(tmp_path / f"train_00001.{suffix}", tmp_path / f"train_00002.{suffix}")
    with pytest.raises(ManifestError, match=r"train\.manifest\.json: .*takes train_00002\.rec, which the manifest "
                                            "does not list"):
        open_dataset(str(tmp_path / "train_*.rec"))
    assert len(open_dataset(str(tmp_path))) == 20  # the folder's one manifest says what the set is
    write_set(tmp_path / "val.rec", 5, 10)  # two sets: the folder spec takes every .rec, each listed somewhere
    with pytest.raises(ManifestError, match="train_00002.rec, which the manifest does not list"):
        open_dataset(str(tmp_path))
    for suffix in ("rec", "idx"):
        os.unlink(tmp_path / f"train_00002.{suffix}")
    assert len(open_dataset(str(tmp_path / "train_*.rec"))) == 20
    assert len(open_dataset(str(tmp_path))) == 25


# -- extract of a shard set with a missing or cut shard


@pytest.fixture
def set_on_s3(s3_server, s3_bucket, tmp_path):
    (tmp_path / "set").mkdir()
    write_set(tmp_path / "set" / "d.rec", 30, 10)
    for path in (tmp_path / "set").iterdir():
        s3_server.put_object(s3_bucket, f"d/{path.name}", path.read_bytes())
    return f"s3://{s3_bucket}/d/d.manifest.json", tmp_path / "set"


def extract(server, spec: str, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mxrec", "extract", spec, str(out)], capture_output=True,
                          text=True, env=dict(mxrec_env(), **server.env()), timeout=120)


def test_extract_checks_the_manifest_shards_before_writing_anything(s3_server, s3_bucket, set_on_s3, tmp_path):
    """Regression: extract wrote the first shards' files, then stopped at a missing or cut shard with no .lst and
    no word about what it left."""
    spec, local = set_on_s3
    s3_server.client().delete_object(Bucket=s3_bucket, Key="d/d_00002.rec")
    done = extract(s3_server, spec, tmp_path / "out1")
    assert done.returncode == 2 and "shard 2" in done.stderr and "missing" in done.stderr, done.stderr
    assert not (tmp_path / "out1").exists() or list((tmp_path / "out1").rglob("*")) == []

    s3_server.put_object(s3_bucket, "d/d_00002.rec", (local / "d_00002.rec").read_bytes())
    s3_server.put_object(s3_bucket, "d/d_00001.rec", (local / "d_00001.rec").read_bytes()[:-40])
    done = extract(s3_server, spec, tmp_path / "out2")
    assert done.returncode == 2 and "the manifest says" in done.stderr, done.stderr
    assert not (tmp_path / "out2").exists() or list((tmp_path / "out2").rglob("*")) == []

    s3_server.put_object(s3_bucket, "d/d_00001.rec", (local / "d_00001.rec").read_bytes())
    s3_server.faults.fail_always(403, method="GET", key="d/d_00001.rec")  # fails part-way: after the check
    done = extract(s3_server, spec, tmp_path / "out3")
    assert done.returncode == 2, done.stderr
    assert "extracted 10 of 30 records" in done.stderr and "was not written" in done.stderr, done.stderr
    assert len(list((tmp_path / "out3").rglob("*.bin"))) == 10


def test_extract_of_a_sound_remote_set(s3_server, set_on_s3, tmp_path):
    spec, _ = set_on_s3
    done = extract(s3_server, spec, tmp_path / "out")
    assert done.returncode == 0, done.stderr
    assert len(list((tmp_path / "out").rglob("*.bin"))) == 30 and (tmp_path / "out" / "d.lst").exists()
    assert isinstance(open_dataset(str(set_on_s3[1] / "d.manifest.json")), ShardSetReader)
    assert RecordReader(set_on_s3[1] / "d_00000.rec")[0] == record(0)


def test_repacking_a_smaller_list_with_the_cli_leaves_no_stale_shard(tmp_path):
    """The issue's case: `mxrec pack --shard-size` run again into the same folder with fewer images."""
    lines = (IM2REC / "lists" / "sub.lst").read_text().splitlines(keepends=True)

    def pack(entries: list[str]) -> None:
        (tmp_path / "photos.lst").write_text("".join(entries))
        done = subprocess.run([sys.executable, "-m", "mxrec", "pack", "--pass-through", "--shard-size", "20",
                               "--no-progress", str(tmp_path / "photos"), str(PHOTOS)], capture_output=True,
                              text=True, env=mxrec_env(), timeout=300)
        assert done.returncode == 0, done.stderr

    pack(lines)
    assert len(list(tmp_path.glob("photos_*.rec"))) == 3
    pack(lines[:15])
    assert sorted(p.name for p in tmp_path.glob("photos_*")) == ["photos_00000.checksums", "photos_00000.idx",
                                                                 "photos_00000.rec"]
    assert len(open_dataset(str(tmp_path / "photos_*.rec"))) == 15
