"""The command line under remote faults (issue 22): ``--requests``/``$MXREC_REQUESTS`` set the policy, outputs on
S3 appear whole or not at all, and a failure is one line (the cause) with the cleanup's trouble after it, never a
traceback. Each command runs as a user runs it (``python -m mxrec``), its S3 endpoint the fault proxy.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mxrec.format.lst import ListEntry
from mxrec.io.lists import write_list
from testkit.cli import mxrec_env
from testkit.datasets import jpeg, photo, write_indexed

FAST = "attempts=3,backoff=0.01,max_backoff=0.05,connect_timeout=2,read_timeout=2,deadline=20"
IMAGES = 10


def mxrec(proxy: Any, *args: str, requests: str | None = FAST, env: dict | None = None) -> subprocess.CompletedProcess:
    """``mxrec ARGS`` with S3 reached through ``proxy`` (and ``--requests`` unless ``requests`` is None)."""
    environment = {**mxrec_env(), **proxy.server.env(), "AWS_ENDPOINT_URL": proxy.url,
                   "AWS_ENDPOINT_URL_S3": proxy.url, **(env or {})}
    extra = ["--requests", requests] if requests is not None else []
    return subprocess.run([sys.executable, "-m", "mxrec", *args, *extra], capture_output=True, text=True,
                          env=environment, timeout=120)


def error_lines(done: subprocess.CompletedProcess) -> list[str]:
    assert "Traceback" not in done.stderr, done.stderr
    return done.stderr.strip().splitlines()


@pytest.fixture
def images(tmp_path: Path, s3_server: Any, s3_bucket: str) -> Path:
    """``IMAGES`` JPEGs in ``root/`` and their ``one.lst`` on S3."""
    root = tmp_path / "root"
    root.mkdir()
    for i in range(IMAGES):
        (root / f"{i}.jpg").write_bytes(jpeg(photo(i, 32, 24)))
    write_list(tmp_path / "one.lst", [ListEntry(i, (float(i % 3),), f"{i}.jpg") for i in range(IMAGES)])
    s3_server.put_object(s3_bucket, "one.lst", (tmp_path / "one.lst").read_bytes())
    return root


@pytest.fixture
def dataset(tmp_path: Path, s3_server: Any, s3_bucket: str) -> str:
    """``train.rec`` + ``.idx`` (no checksums) on S3; its URL."""
    rec = tmp_path / "train.rec"
    write_indexed(rec, range(30), [b"%05d" % i * 40 for i in range(30)])
    s3_server.put_object(s3_bucket, "train.rec", rec.read_bytes())
    s3_server.put_object(s3_bucket, "train.idx", rec.with_suffix(".idx").read_bytes())
    return f"s3://{s3_bucket}/train.rec"


def test_requests_option_and_variable_set_the_attempts(s3_proxy, dataset):
    s3_proxy.faults.fail_always(503, method="HEAD", key="train.rec")  # the size request
    done = mxrec(s3_proxy, "info", dataset, requests="attempts=2,backoff=0.01")
    lines = error_lines(done)
    assert done.returncode == 2 and len(lines) == 1
    assert lines[0].startswith(f"mxrec info: error: {dataset}: stat failed after 2 attempts") and "503" in lines[0]
    assert s3_proxy.log.count(method="HEAD", key="train.rec") == 2

    s3_proxy.log.clear()
    done = mxrec(s3_proxy, "info", dataset, requests=None, env={"MXREC_REQUESTS": "attempts=3,backoff=0.01"})
    assert done.returncode == 2 and s3_proxy.log.count(method="HEAD", key="train.rec") == 3

    done = mxrec(s3_proxy, "info", dataset, requests=None, env={"MXREC_REQUESTS": "attempts=none"})
    assert done.returncode == 2 and error_lines(done) == [
        "mxrec info: error: $MXREC_REQUESTS: request policy: attempts must be a whole number, not 'none'"]


def test_info_and_verify_ride_out_transient_faults(s3_proxy, dataset):
    """``verify``'s index read and ``info``'s reads are retried, a reset after the head included."""
    s3_proxy.faults.reset_next(1, after=50, method="GET", key="train.idx")
    s3_proxy.faults.fail_next(2, 503, method="GET", key="train.rec")
    done = mxrec(s3_proxy, "info", dataset, "--json")
    assert done.returncode == 0, done.stderr
    assert '"records": 30' in done.stdout
    s3_proxy.faults.truncate_next(1, method="GET", key="train.idx")
    s3_proxy.faults.reset_next(1, after=100, method="GET", key="train.rec")
    done = mxrec(s3_proxy, "verify", dataset, "--kind", "raw")
    assert done.returncode == 0, done.stdout + done.stderr
    assert s3_proxy.faults.pending == []


def test_bad_storage_options_are_one_line(s3_proxy, dataset):
    done = mxrec(s3_proxy, "info", dataset, requests="attempts=0")
    assert done.returncode == 2 and "--requests: request policy: attempts must be" in done.stderr
    done = mxrec(s3_proxy, "info", dataset, "--cache-size", "lots")
    assert done.returncode == 2 and "--cache-size: not a size: 'lots'" in done.stderr


def test_pack_to_one_s3_rec_whose_idx_upload_fails_leaves_neither(s3_proxy, s3_bucket, images):
    """Was: ``one.rec`` stayed under its final name without its ``.idx``."""
    s3_proxy.faults.fail_always(503, method="PUT", path_contains="one.idx")
    done = mxrec(s3_proxy, "pack", f"s3://{s3_bucket}/one", str(images), "--no-progress")
    lines = error_lines(done)
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert "one.idx" in lines[0] and "upload failed after 3 attempts" in lines[0] and "503" in lines[0]
    assert s3_proxy.server.list_keys(s3_bucket) == ["one.lst"]


def test_sharded_pack_whose_cleanup_fails_exits_non_zero_and_names_what_remains(s3_proxy, s3_bucket, images):
    """Was: the cleanup's failed DELETE was suppressed, a shard stayed with no manifest, a glob opened part of
    the set as the whole and ``info`` counted it."""
    s3_proxy.faults.fail_always(503, method="PUT", key="one_00001.rec")  # publishing fails at the second shard
    # and the cleanup can remove nothing that was published (a move's removal of its staged source still works)
    s3_proxy.faults.fail_always(503, method="DELETE", match=lambda r: "staging" not in r.path)
    done = mxrec(s3_proxy, "pack", f"s3://{s3_bucket}/one", str(images), "--shard-size", "4", "--no-progress")
    lines = error_lines(done)
    assert done.returncode == 2 and len(lines) == 2, done.stderr
    cause, cleanup = lines
    assert cause.startswith("mxrec pack: error: s3://") and "one_00001.rec" in cause and "503" in cause
    assert cleanup.startswith("  cleanup: could not remove ")
    remaining = s3_proxy.server.list_keys(s3_bucket)
    assert {"one_00000.rec", "one_00000.idx", "one.manifest.json"} <= set(remaining)
    assert all(key.rsplit("/", 1)[-1] in cleanup for key in remaining if key != "one.lst")

    s3_proxy.faults.clear()
    for spec in (f"s3://{s3_bucket}/one_*.rec", f"s3://{s3_bucket}/one.manifest.json", f"s3://{s3_bucket}/"):
        done = mxrec(s3_proxy, "info", spec)
        lines = error_lines(done)
        assert done.returncode == 2 and len(lines) == 1, (spec, done.stdout, done.stderr)
        assert "being written" in lines[0] or "marker" in lines[0], lines[0]
        assert "records" not in done.stdout


def test_sharded_pack_under_faults_is_exact(s3_proxy, s3_bucket, images, tmp_path):
    s3_proxy.faults.fail_next(1, 503, method="PUT", key="one_00001.rec")
    s3_proxy.faults.fail_next(1, 500, method="DELETE")
    s3_proxy.faults.reset_next(1, after=30, method="GET", key="one.lst")
    done = mxrec(s3_proxy, "pack", f"s3://{s3_bucket}/one", str(images), "--shard-size", "4", "--no-progress")
    assert done.returncode == 0, done.stderr
    assert sorted(s3_proxy.server.list_keys(s3_bucket)) == sorted(
        ["one.lst", "one.manifest.json", *[f"one_{n:05d}.{ext}" for n in range(3)
                                           for ext in ("rec", "idx", "checksums")]])
    assert s3_proxy.faults.pending == []
    done = mxrec(s3_proxy, "info", f"s3://{s3_bucket}/one.manifest.json", "--json")
    assert done.returncode == 0 and '"records": 10' in done.stdout, done.stdout + done.stderr


def test_convert_whose_publish_and_cleanup_fail_prints_the_cause_then_the_leftovers(s3_proxy, s3_bucket, dataset):
    """Was: ``convert``'s cleanup error replaced the real cause (a failed move) and named no URL."""
    s3_proxy.faults.fail_always(503, method="PUT", key="out_00001.rec")
    s3_proxy.faults.fail_always(503, method="DELETE", match=lambda r: "staging" not in r.path)
    done = mxrec(s3_proxy, "convert", dataset, f"s3://{s3_bucket}/out.rec", "--shard-size", "10", "--no-progress")
    lines = error_lines(done)
    assert done.returncode == 2 and len(lines) == 2, done.stderr
    assert lines[0].startswith(f"mxrec convert: error: s3://{s3_bucket}/out_00001.rec: moving ")
    assert lines[1].startswith("  cleanup: could not remove ") and f"s3://{s3_bucket}/out_00000.rec" in lines[1]
    s3_proxy.faults.clear()
    done = mxrec(s3_proxy, "info", f"s3://{s3_bucket}/out_*.rec")
    assert done.returncode == 2 and "being written" in error_lines(done)[0] and "records" not in done.stdout
