"""``mxrec pack --engine ray`` on a real local Ray cluster: record for record what a local ``mxrec pack`` writes.

Every option of the local pack is compared (the local pack is itself checked byte for byte against
real im2rec in ``tests/compat``), broken images are reported and counted alike, ``strict`` stops with no
output, a killed worker is retried without duplicates, and an interrupted command leaves nothing that
looks complete.
"""

from __future__ import annotations

import _thread
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from mxrec.errors import PackError
from mxrec.format.lst import ListEntry
from mxrec.io.lists import read_list, write_list
from mxrec.io.opener import RecordReader
from mxrec.io.shards import ShardLimit, read_manifest
from mxrec.packing.job import pack_list
from mxrec.packing.prepare import ImageTransform
from mxrec.ray.session import ProgressTally, run_reporting
from testkit import SRC
from testkit.cli import interruptible, sigint_handled
from testkit.datasets import make_broken_image_set
from testkit.ray_cluster import LocalRayCluster, crash_worker_once
from testkit.waiting import wait_for

pytestmark = pytest.mark.slow

# option set -> (.lst in golden/im2rec, transform, pack_label)
OPTIONS = {
    "default": ("default/sub.lst", ImageTransform(), False),
    "resize-center-crop": ("default/sub.lst", ImageTransform(resize=64, center_crop=True, quality=90), False),
    "pass-through": ("default/sub.lst", ImageTransform(pass_through=True), False),
    "pack-label": ("packlabel3/sub.lst", ImageTransform(), True),
    "grey-png": ("default/sub.lst", ImageTransform(color=0, encoding=".png", quality=3), False),
}


def records(path: str | Path) -> list[tuple[object, bytes]]:
    """``(key, payload)`` of a ``.rec`` or, for a manifest, of its whole shard set in order."""
    path = Path(path)
    if path.name.endswith(".manifest.json"):
        return [r for shard in read_manifest(path).shards for r in records(path.parent / shard.rec)]
    with RecordReader(path) as reader:
        return list(zip(reader.keys, reader, strict=True))


@pytest.mark.parametrize("option", OPTIONS)
def test_records_equal_a_local_pack(mray, im2rec, tmp_path, option):
    lst, transform, pack_label = OPTIONS[option]
    local = pack_list(im2rec / lst, im2rec / "photos200", tmp_path / "local.rec", transform, pack_label=pack_label)
    shutil.copy(im2rec / lst, tmp_path / "ray.lst")
    done = []
    result = mray.pack_list_ray(tmp_path / "ray.lst", im2rec / "photos200", None, transform, pack_label=pack_label,
                                blocks=3, progress=lambda n, total: done.append((n, total)))
    assert result.manifest == str(tmp_path / "ray.manifest.json")
    assert [Path(rec).name for rec, _ in result.outputs] == ["ray_00000.rec", "ray_00001.rec", "ray_00002.rec"]
    assert records(result.manifest) == records(tmp_path / "local.rec")
    assert result.records == local.records == 50 and result.skipped == []
    assert done[-1] == (50, 50) and all(n <= total for n, total in done)
    assert sorted(p.name for p in tmp_path.iterdir() if "partial" in p.name) == []


@dataclass
class BrokenSet:
    lst: Path
    root: Path


@pytest.fixture
def broken(im2rec, tmp_path) -> BrokenSet:
    """Good photos and every kind of bad image file, in one .lst (as tests/pack/test_job.py packs them)."""
    return BrokenSet(*make_broken_image_set(tmp_path, im2rec / "photos200"))


@pytest.mark.parametrize("transform", [ImageTransform(resize=32), ImageTransform(pass_through=True)])
def test_broken_images_are_reported_and_counted_as_locally(mray, broken, tmp_path, transform):
    local = pack_list(broken.lst, broken.root, tmp_path / "local.rec", transform)
    seen, warned = [], []
    result = mray.pack_list_ray(broken.lst, broken.root, tmp_path / "ray.rec", transform, blocks=3,
                                on_skip=seen.append, on_warning=warned.append)
    assert result.skipped == local.skipped == seen  # index, path and reason, in .lst order
    assert result.not_images == local.not_images == warned  # pass-through: the text file, stored and reported
    assert len(result.skipped) == (3 if transform.pass_through else 4)
    assert len(result.not_images) == (1 if transform.pass_through else 0)
    assert result.records == local.records
    assert records(result.manifest) == records(tmp_path / "local.rec")


def test_nothing_packed_is_the_local_error(mray, broken, tmp_path):
    with pytest.raises(PackError) as local:
        pack_list(broken.lst, tmp_path / "wrong-root", tmp_path / "local.rec")
    with pytest.raises(PackError) as remote:
        mray.pack_list_ray(broken.lst, tmp_path / "wrong-root", tmp_path / "ray.rec", blocks=2)
    assert str(remote.value) == str(local.value)
    assert "none of its 7 images could be packed" in str(remote.value) and "right image root" in str(remote.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["root", "set.lst"]


def test_strict_stops_with_the_local_error_and_no_output(mray, broken, tmp_path):
    lines = read_list(broken.lst)
    write_list(broken.lst, [e for e in lines if e.path != "empty.jpg" and e.path != "cut.jpg"
                            and e.path != "text.jpg"])  # one bad image left: missing.jpg
    with pytest.raises(PackError) as local:
        pack_list(broken.lst, broken.root, tmp_path / "local.rec", strict=True)
    with pytest.raises(PackError) as remote:
        mray.pack_list_ray(broken.lst, broken.root, tmp_path / "ray.rec", strict=True, blocks=2)
    assert str(remote.value) == str(local.value)
    assert "missing.jpg" in str(remote.value) and "stopping (strict)" in str(remote.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["root", "set.lst"]


class CrashingTransform(ImageTransform):
    """im2rec's transform, except that the worker packing ``victim`` dies the first time it gets there."""

    def __init__(self, marker: str, victim: str, **options: object) -> None:
        super().__init__(**options)
        object.__setattr__(self, "marker", marker)
        object.__setattr__(self, "victim", victim)

    def apply(self, data: bytes, what: str = "image") -> bytes:
        if what.endswith(self.victim):
            crash_worker_once(self.marker)
        return super().apply(data, what)


def test_a_killed_worker_is_retried_and_each_record_packed_once(mray, im2rec, tmp_path):
    lst = im2rec / "default" / "sub.lst"
    victim = read_list(lst)[30].path  # well inside a task: records before it were written by the dead attempt
    pack_list(lst, im2rec / "photos200", tmp_path / "local.rec", ImageTransform(resize=48))
    shutil.copy(lst, tmp_path / "ray.lst")
    transform = CrashingTransform(str(tmp_path / "crashed"), victim, resize=48)
    result = mray.pack_list_ray(tmp_path / "ray.lst", im2rec / "photos200", None, transform, blocks=2,
                                shard_limit=ShardLimit(records=7))
    assert (tmp_path / "crashed").exists(), "no worker was killed: the test proves nothing"
    assert records(result.manifest) == records(tmp_path / "local.rec")
    assert [s.records for s in read_manifest(result.manifest).shards] == [7] * 7 + [1]  # as a local pack cuts
    assert not [p for p in tmp_path.iterdir() if "partial" in p.name]


# ------------------------------------------------------------------------------------------------ command line

def finished(job: subprocess.Popen, timeout: float) -> tuple[str, str]:
    """``job.communicate(timeout=timeout)``; a driver still running then is made to print every thread's stack
    (SIGABRT to the fault handler) and the test fails with them: a hang says where it hangs."""
    try:
        return job.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        job.send_signal(signal.SIGABRT)
        try:
            out, err = job.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            job.kill()
            out, err = job.communicate()
        pytest.fail(f"the driver had not ended {timeout:g} s later; its threads:\n{err}\n{out}")


def mxrec_command(cluster: LocalRayCluster, *args: object) -> subprocess.Popen:
    """``python -m mxrec ARGS`` as a driver of the test cluster (``RAY_ADDRESS`` and loopback settings), with
    Python's fault handler on, so that :func:`finished` can have a driver that does not end show where it is."""
    env = cluster.driver_env()
    env["PYTHONPATH"] = str(SRC) + os.pathsep + env.get("PYTHONPATH", "")
    env["PYTHONFAULTHANDLER"] = "1"
    return interruptible([sys.executable, "-m", "mxrec", *map(str, args)], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)


# The command line in this process, already a driver of the test cluster (``mray``): the command uses that
# connection. The interrupt tests below run it as a process of its own, connecting through ``RAY_ADDRESS``.
def test_cli_pack_engine_ray_equals_local(mray, mxrec_cli, im2rec, tmp_path):
    for name in ("local", "ray"):
        (tmp_path / name).mkdir()
        shutil.copy(im2rec / "default" / "sub.lst", tmp_path / name / "sub.lst")
    options = ["--resize", "40", "--shard-size", "20", "--no-progress"]
    mxrec_cli("pack", *options, tmp_path / "local" / "sub", im2rec / "photos200", check=True)
    out = mxrec_cli("pack", "--engine", "ray", *options, tmp_path / "ray" / "sub", im2rec / "photos200",
                    check=True).stdout
    assert "50 records, 0 skipped" in out and "sub.manifest.json" in out
    assert records(tmp_path / "ray" / "sub.manifest.json") == records(tmp_path / "local" / "sub.manifest.json")
    ray_set = read_manifest(tmp_path / "ray" / "sub.manifest.json")
    assert ray_set == read_manifest(tmp_path / "local" / "sub.manifest.json")  # the same shards, sizes included
    assert [s.records for s in ray_set.shards] == [20, 20, 10]
    for shard in ray_set.shards:
        assert (tmp_path / "ray" / shard.rec).read_bytes() == (tmp_path / "local" / shard.rec).read_bytes()
    assert json.loads((tmp_path / "ray" / "sub.manifest.json").read_text())["records"] == 50


def test_cli_pack_engine_ray_with_skipped_images_cuts_shards_as_locally(mray, mxrec_cli, im2rec, tmp_path):
    """Issue 18 §6: skipped images used to shorten the shard of their task ([9, 9, ...] instead of [10, 10, ...])."""
    good = read_list(im2rec / "default" / "sub.lst")
    entries = []
    for number, entry in enumerate(good):
        entries.append(entry)
        if number % 9 == 4:  # a missing image in six of the ten-entry runs
            entries.append(ListEntry(1000 + number, (0.0,), f"missing_{number}.jpg"))
    entries = [ListEntry(i, e.labels, e.path) for i, e in enumerate(entries)]
    for name in ("local", "ray"):
        (tmp_path / name).mkdir()
        write_list(tmp_path / name / "set.lst", entries)
    options = ["--resize", "32", "--shard-size", "10", "--no-progress"]
    for name, engine in (("local", []), ("ray", ["--engine", "ray"])):
        done = mxrec_cli("pack", *engine, *options, tmp_path / name / "set", im2rec / "photos200")
        assert done.returncode == 1 and "50 records, 6 skipped" in done.stdout, done  # 1: images were skipped
    local, ray_set = (read_manifest(tmp_path / name / "set.manifest.json") for name in ("local", "ray"))
    assert [s.records for s in ray_set.shards] == [s.records for s in local.shards] == [10, 10, 10, 10, 10]
    assert ray_set == local
    for shard in ray_set.shards:
        assert (tmp_path / "ray" / shard.rec).read_bytes() == (tmp_path / "local" / shard.rec).read_bytes()
        assert (tmp_path / "ray" / shard.idx).read_bytes() == (tmp_path / "local" / shard.idx).read_bytes()
    assert sorted(p.name for p in (tmp_path / "ray").iterdir() if "partial" in p.name) == []


def test_cli_strict_error_is_one_line(mray, mxrec_cli, broken, tmp_path):
    done = mxrec_cli("pack", "--engine", "ray", "--strict", "--no-progress", tmp_path / "set", broken.root)
    err = done.stderr
    assert done.returncode == 2, done
    assert err.count("\n") == 1 and err.startswith("mxrec pack: error: ") and "stopping (strict)" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["root", "set.lst"]


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_pack_leaves_nothing_that_looks_complete(ray_cluster, im2rec, tmp_path, how):
    # Enough slow PNG encodings that the job is surely still running when the signal comes.
    entries = [ListEntry(i, (0.0,), e.path) for i, e in enumerate(read_list(im2rec / "default" / "sub.lst") * 12)]
    write_list(tmp_path / "big.lst", entries)
    job = mxrec_command(ray_cluster, "pack", "--engine", "ray", "--encoding", ".png", "--no-progress",
                        tmp_path / "big", im2rec / "photos200")
    # until both tasks are writing their shards: the job is then surely under way, with more to come
    wait_for(lambda: len(list(tmp_path.glob(".big.staging-*/*.rec.partial"))) >= 2, "two shards being written",
             seconds=120)
    assert job.poll() is None, "the pack finished before it could be interrupted"
    job.send_signal(how)
    _, err = finished(job, 60)
    # The command line turns SIGTERM into KeyboardInterrupt too (Ray's own handler would exit at once).
    assert job.returncode == 128 + how, err
    assert err.splitlines() == ["mxrec pack: " + ("interrupted" if how == signal.SIGINT else "terminated (SIGTERM)")]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.lst"]  # the staging folder is gone too


def test_an_interrupted_job_has_stopped_when_run_reporting_raises(ray_module):
    """Regression: the job ran in a thread of its own and went on after Ctrl-C or SIGTERM had reached the caller;
    its next call into the driver, shut down by then, ended the process with exit code 1 (Ray's "core worker has
    already been shutdown"), before the command line said why: seen when the signal came as a shard finished."""
    tally = ProgressTally.start()
    ray_module.get(tally.count.remote())  # the actor is up
    ran: dict[str, object] = {}

    def job() -> None:
        ran["thread"] = threading.current_thread()
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:  # until interrupted (a Ray Data job polls as this does)
                time.sleep(0.01)
        finally:
            ran["stopped"] = True

    reports: list[tuple[int, int]] = []

    def interrupt_once_reported() -> None:
        wait_for(lambda: reports, "a progress report", seconds=20)
        _thread.interrupt_main()

    with sigint_handled(), pytest.raises(KeyboardInterrupt):
        threading.Thread(target=interrupt_once_reported, daemon=True).start()
        run_reporting(job, tally, 10, lambda done, total: reports.append((done, total)))
    assert ran == {"thread": threading.main_thread(), "stopped": True}
    assert not [t.name for t in threading.enumerate() if t.name == "mxrec-ray-progress"]
    assert set(reports) == {(0, 10)}  # reported while it ran (every 0.5 s), and no final "10 of 10"
    assert run_reporting(lambda: "done", tally, 10, lambda done, total: reports.append((done, total))) == "done"
    assert reports[-1] == (10, 10)
