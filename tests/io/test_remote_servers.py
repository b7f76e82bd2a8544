"""Remote datasets against real servers on 127.0.0.1 (S3 via moto, HTTP with Range, WebHDFS), judged by their logs."""

from __future__ import annotations

import functools
import json
import pickle
import subprocess
import sys
import time
from typing import Any

import numpy as np
import pytest

from mxrec.datasets.opening import open_dataset
from mxrec.datasets.shard_set import ShardSetReader
from mxrec.errors import ManifestError, RemoteAccessError, RemoteError, RemoteNotFoundError
from mxrec.io.opener import RecordReader
from mxrec.io.shards import ShardedWriter, ShardLimit
from mxrec.io.writer import RecordWriter
from mxrec.train.sampler import BatchSampler
from testkit.cli import mxrec_env
from testkit.datasets import random_payloads, upload_indexed, write_indexed
from testkit.iterdata import IM2REC, pack_photos

N = 2000


@functools.cache
def records() -> list[bytes]:
    return random_payloads(N, 1000, seed=0)


@pytest.fixture(scope="module")
def local(tmp_path_factory) -> Any:
    path = tmp_path_factory.mktemp("remote") / "train.rec"
    write_indexed(path, range(N), records())
    return path


@pytest.fixture
def s3_data(s3_server: Any, s3_bucket: str, local: Any) -> tuple[str, dict]:
    return upload_indexed(s3_server, s3_bucket, local), s3_server.storage_options()


def gets(server: Any, mark: int = 0, key: str = "train.rec") -> int:
    return len(server.log.since(mark, method="GET", key=key))


# -- S3: request counts


def test_s3_open_scan_and_shuffled_epochs_make_few_requests(s3_server, s3_data, local):
    url, options = s3_data
    reader = RecordReader(url, storage_options=options)
    opened = [(r.method, r.key) for r in s3_server.log]  # the .idx's GET states its length: no HEAD for it; the
    assert sorted(opened) == [("GET", "train.checksums"), ("GET", "train.idx"), ("HEAD", "train.rec")]  # sums: 404
    mark = s3_server.log.mark()
    assert list(reader) == list(RecordReader(local))
    assert gets(s3_server, mark) == 1  # 2 MB scanned in one ranged GET

    mark = s3_server.log.mark()
    sampler = BatchSampler(N, 64, shuffle=True, seed=1, shuffle_block=100, shuffle_window=4, last_batch="partial")
    seen = []
    for plan in sampler.epoch(0)[0]:
        seen += reader.read_batch(plan.positions[plan.positions >= 0])
    assert sorted(seen) == sorted(records())
    assert gets(s3_server, mark) <= 4 * len(sampler.epoch(0)[0]) < N / 10  # a batch touches <= 4 blocks

    windowed = RecordReader(url, storage_options=options)
    windowed.follow(sampler.read_plan(0))  # as the iterators do for a block-shuffled remote dataset
    mark = s3_server.log.mark()
    seen = []
    for plan in sampler.epoch(0)[0]:
        seen += windowed.read_batch(plan.positions[plan.positions >= 0])
    assert sorted(seen) == sorted(records())
    fetched = s3_server.log.since(mark, method="GET", key="train.rec")
    assert len(fetched) <= 25  # 20 blocks of 100 records, each fetched about once
    assert sum(r.length for r in fetched) < 1.5 * local.stat().st_size


def test_s3_cached_second_epoch_makes_no_request(s3_server, s3_data, tmp_path):
    url, options = s3_data
    reader = RecordReader(url, storage_options=options, cache_dir=tmp_path / "cache")
    order = np.random.default_rng(3).permutation(N)
    first = [reader.read_batch(order[i:i + 50]) for i in range(0, N, 50)]
    assert gets(s3_server) >= 1
    mark = s3_server.log.mark()
    assert [reader.read_batch(order[i:i + 50]) for i in range(0, N, 50)] == first
    worker = pickle.loads(pickle.dumps(reader))  # as a DataLoader worker gets it
    assert worker.read_batch(order[:100]) == [r for batch in first[:2] for r in batch]
    assert len(s3_server.log.since(mark)) == 0, s3_server.log.summary()


# -- S3: faults


@pytest.mark.slow
def test_s3_transient_errors_are_retried_and_persistent_ones_named(s3_server, s3_data, local):
    url, options = s3_data
    reader = RecordReader(url, storage_options=options)
    reference = RecordReader(local)
    s3_server.faults.fail_next(2, status=503, method="GET", key="train.rec")
    assert reader.read_batch([5, 1500]) == reference.read_batch([5, 1500])
    assert [r.status for r in s3_server.log.filter(method="GET", key="train.rec")][:2] == [503, 503]

    s3_server.faults.fail_always(503, method="GET", key="train.rec")
    mark = s3_server.log.mark()
    start = time.monotonic()
    with pytest.raises(RemoteError, match=rf"{url}: read bytes \d+\.\.\d+ failed"):
        reader[7]
    assert time.monotonic() - start < 20  # bounded retries, no hang
    assert 2 <= len(s3_server.log.since(mark, method="GET", key="train.rec")) <= 12
    s3_server.faults.clear()

    s3_server.faults.truncate_next(1, method="GET", key="train.rec")
    assert reader.read_batch(range(N)) == list(reference)  # a cut body is fetched again, never served short


def test_s3_missing_and_forbidden_name_the_url(s3_server, s3_data):
    url, options = s3_data
    with pytest.raises(RemoteNotFoundError, match="s3://no-such-bucket-xyz/train.rec"):
        RecordReader("s3://no-such-bucket-xyz/train.rec", storage_options=options)
    s3_server.faults.fail_always(403, key="train.idx")
    with pytest.raises(RemoteAccessError, match="access denied: check the credentials"):
        RecordReader(url, storage_options=options)


# -- S3: shard sets and writes


def test_s3_sharded_write_then_read_by_manifest(s3_server, s3_bucket, local, tmp_path):
    options = s3_server.storage_options()
    prefix = f"s3://{s3_bucket}/sets/train"
    with ShardedWriter(prefix + ".rec", ShardLimit(records=700), storage_options=options) as writer:
        for i, payload in enumerate(records()):
            writer.write(payload, key=i)
    puts = [r.key for r in s3_server.log.filter(method="PUT")]
    staged = [k for k in puts if "/.train.staging-" in k]  # each shard uploaded when finished, into the staging
    assert len(staged) == 9 and staged[0].endswith("-train_00000.idx")  # folder, its .idx first, then its checksums
    assert [k.rsplit("-", 1)[1] for k in staged[:3]] == ["train_00000.idx", "train_00000.checksums", "train_00000.rec"]
    published = [k for k in puts if k not in staged]  # then the marker, each copied to its name, the manifest last
    assert published[0] == published[-1] == "sets/train.manifest.json" and len(published) == 11
    assert puts.index(published[0]) > puts.index(staged[-1])  # nothing final before every shard is staged
    assert published.index("sets/train_00000.idx") < published.index("sets/train_00000.rec")
    assert published.index("sets/train_00000.checksums") < published.index("sets/train_00000.rec")
    assert sorted(s3_server.list_keys(s3_bucket)) == sorted(set(published))  # the staged objects are gone
    with ShardedWriter(tmp_path / "train.rec", ShardLimit(records=700)) as same:
        for i, payload in enumerate(records()):
            same.write(payload, key=i)
    for n in range(3):
        local_shard = (tmp_path / f"train_{n:05d}.rec").read_bytes()
        assert s3_server.get_object(s3_bucket, f"sets/train_{n:05d}.rec") == local_shard

    mark = s3_server.log.mark()
    dataset = open_dataset(prefix, storage_options=options)
    assert isinstance(dataset, ShardSetReader) and len(dataset) == N
    assert {(r.method, r.key) for r in s3_server.log.since(mark)} == {
        ("HEAD", "sets/train.manifest.json"), ("GET", "sets/train.manifest.json")}  # no listing
    assert dataset.read_batch([0, 699, 700, 1999]) == [records()[i] for i in (0, 699, 700, 1999)]
    assert len(s3_server.log.since(mark, method="HEAD", key="sets/train_00001.rec")) == 0  # sizes from the manifest
    # a shard's checksums are read when the shard is first read: one GET of its sidecar, checked against it
    assert len(s3_server.log.since(mark, method="GET", key="sets/train_00001.checksums")) == 1
    assert not s3_server.log.since(mark, key="sets/train_00001.checksums", method="HEAD")

    s3_server.client().delete_object(Bucket=s3_bucket, Key="sets/train_00002.rec")
    s3_server.client().delete_object(Bucket=s3_bucket, Key="sets/train_00002.idx")
    again = open_dataset(prefix + ".manifest.json", storage_options=options)
    with pytest.raises(ManifestError, match=r"shard 2 \(s3://.*/sets/train_00002.rec\) listed in .* is missing"):
        again[1999]


def test_s3_interrupted_sharded_upload_leaves_nothing(s3_server, s3_bucket):
    options = s3_server.storage_options()
    with pytest.raises(KeyboardInterrupt), ShardedWriter(f"s3://{s3_bucket}/x.rec", ShardLimit(records=10),
                                                         storage_options=options) as writer:
        for i in range(35):
            writer.write(b"%d" % i)
        raise KeyboardInterrupt
    assert s3_server.list_keys(s3_bucket) == []


@pytest.mark.slow
def test_cli_on_s3(s3_server, s3_bucket, tmp_path):
    rec = pack_photos(tmp_path / "sub.rec", IM2REC / "lists" / "sub.lst")
    s3_server.put_object(s3_bucket, "d/sub.rec", rec.read_bytes())
    env = dict(mxrec_env(), **s3_server.env())

    def mxrec(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "mxrec", *args], capture_output=True, text=True, env=env,
                              timeout=300)

    url = f"s3://{s3_bucket}/d/sub.rec"
    done = mxrec("index", url)
    assert done.returncode == 0, done.stderr
    assert s3_server.get_object(s3_bucket, "d/sub.idx") == rec.with_suffix(".idx").read_bytes()
    info = json.loads(mxrec("info", url, "--json").stdout)
    assert info["records"] == 50 and info["index_status"] == "ok"
    verify = mxrec("verify", url, "--no-progress")
    assert verify.returncode == 0 and "OK" in verify.stdout, verify.stdout + verify.stderr
    out = mxrec("extract", url, f"s3://{s3_bucket}/out")
    assert out.returncode == 0, out.stderr
    assert "d/../out/sub.lst" not in out.stdout and "out/sub.lst" in out.stdout
    assert s3_server.list_keys(s3_bucket, "out/")[-1] != ""  # files uploaded
    assert mxrec("preview", url, "-o", str(tmp_path / "sheet.png"), "-n", "4").returncode == 0
    stats = mxrec("stats", url, "--json", "--no-progress")
    assert stats.returncode == 0 and json.loads(stats.stdout)["records"] == 50, stats.stderr
    missing = mxrec("info", f"s3://{s3_bucket}/d/nothing.rec")
    assert missing.returncode == 2 and f"s3://{s3_bucket}/d/nothing.rec" in missing.stderr
    assert "Traceback" not in missing.stderr


# -- HTTP and WebHDFS


def test_http_reads_by_range(http_server, local):
    url = http_server.put("d/train.rec", local.read_bytes())
    http_server.put("d/train.idx", local.with_suffix(".idx").read_bytes())
    reader = RecordReader(url)
    mark = http_server.log.mark()
    assert reader.read_batch(range(100, 200)) == [records()[i] for i in range(100, 200)]
    got = http_server.log.since(mark, method="GET")
    assert len(got) == 1 and got[0].status == 206


def test_webhdfs_read_validates_datanode_answers_and_writes_by_rename(webhdfs_server, local):
    options = {"user": webhdfs_server.user}
    base = f"webhdfs://127.0.0.1:{webhdfs_server.port}"
    webhdfs_server.local_path("/d").mkdir(parents=True)
    webhdfs_server.local_path("/d/train.rec").write_bytes(local.read_bytes())
    webhdfs_server.local_path("/d/train.idx").write_bytes(local.with_suffix(".idx").read_bytes())
    reader = RecordReader(f"{base}/d/train.rec", storage_options=options)
    # fsspec's WebHDFS client returns a data node's error body as file data: the length check catches it
    mark = webhdfs_server.log.mark()
    webhdfs_server.faults.fail_next(1, 503, role="datanode")
    assert reader.read_batch([3, 4, 1999]) == [records()[i] for i in (3, 4, 1999)]
    assert [r.status for r in webhdfs_server.log.since(mark, role="datanode")][:2] == [503, 200]

    with RecordWriter(f"{base}/out/copy.rec", index=True, storage_options=options) as writer:
        for payload in records()[:10]:
            writer.write(payload)
    assert webhdfs_server.local_path("/out/copy.rec").read_bytes() == local.read_bytes()[
        :int(RecordReader(local).offsets[10])]
    assert any(r.op == "RENAME" for r in webhdfs_server.log)  # written as .partial, renamed when complete


def test_cli_list_and_pack_with_s3_lists_and_outputs(s3_server, s3_bucket, tmp_path):
    env = dict(mxrec_env(), **s3_server.env())
    photos = IM2REC / "photos200"
    for folder in ("astronaut", "coffee"):
        for image in sorted((photos / folder).iterdir())[:3]:
            s3_server.put_object(s3_bucket, f"photos/{folder}/{image.name}", image.read_bytes())

    def mxrec(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "mxrec", *args], capture_output=True, text=True, env=env,
                              timeout=300)

    listed = mxrec("list", f"s3://{s3_bucket}/lists/set", f"s3://{s3_bucket}/photos", "--recursive",
                   "--no-shuffle")
    assert listed.returncode == 0, listed.stderr
    lst = s3_server.get_object(s3_bucket, "lists/set.lst").decode()
    assert [line.split("\t")[1:] for line in lst.splitlines()][:4] == [
        ["0.000000", f"astronaut/{n}"] for n in sorted(p.name for p in (photos / "astronaut").iterdir())[:3]] + [
        ["1.000000", f"coffee/{sorted(p.name for p in (photos / 'coffee').iterdir())[0]}"]]
    packed = mxrec("pack", f"s3://{s3_bucket}/lists/set", f"s3://{s3_bucket}/photos", "--pass-through",
                   "--shard-size", "4", "--no-progress")
    assert packed.returncode == 0, packed.stderr
    keys = s3_server.list_keys(s3_bucket, "lists/")
    assert {"lists/set_00000.rec", "lists/set_00001.idx", "lists/set.manifest.json"} <= set(keys)
    dataset = open_dataset(f"s3://{s3_bucket}/lists/set", storage_options=s3_server.storage_options())
    assert len(dataset) == 6 and isinstance(dataset, ShardSetReader)
    info = mxrec("info", f"s3://{s3_bucket}/lists/set.manifest.json")
    assert info.returncode == 0 and "total: 2 shards, 6 records" in info.stdout, info.stdout + info.stderr


@pytest.mark.slow
def test_unreachable_endpoint_is_named_and_bounded():
    pytest.importorskip("s3fs")
    options = {"key": "k", "secret": "s", "endpoint_url": "http://127.0.0.1:9", "skip_instance_cache": True}
    start = time.monotonic()
    with pytest.raises(RemoteError, match=r"s3://bucket/x\.(idx|rec): .*cannot connect"):
        RecordReader("s3://bucket/x.rec", storage_options=options)
    assert time.monotonic() - start < 30


def test_opening_fetches_the_idx_and_the_checksums_sidecar_at_once(s3_proxy, s3_bucket, tmp_path):
    """Behind 0.5 s a request, a remote reader (a shard set's, as it first reads a shard) asks for the ``.idx`` and
    the sidecar together: one wait, not two (judged by when they reached the server)."""
    rec = tmp_path / "t.rec"
    with RecordWriter(rec, index=True) as writer:
        writer.write_batch(records()[:50])
    for ext in (".rec", ".idx", ".checksums"):
        s3_proxy.server.put_object(s3_bucket, "t" + ext, rec.with_suffix(ext).read_bytes())
    s3_proxy.latency = 0.5
    mark = s3_proxy.server.log.mark()
    reader = RecordReader(f"s3://{s3_bucket}/t.rec", storage_options=s3_proxy.storage_options(),
                          size=rec.stat().st_size, checksums=True)
    arrived = {r.key: r.time for r in s3_proxy.server.log.since(mark, method="GET")}
    assert set(arrived) == {"t.idx", "t.checksums"} and abs(arrived["t.idx"] - arrived["t.checksums"]) < 0.3
    assert reader.read_batch([7]) == [records()[7]] and reader._verifier is not None
