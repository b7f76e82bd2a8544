"""Reads through the fault proxy (:mod:`testkit.proxy`) between mxrec and the real loopback servers (issue 22 §5).

Each test is a case of the issue that went wrong before the request layer (silently wrong data, or a misleading
error): it now either reads exactly the right records or names the URL and the real cause, and the requests the
proxy counted show why (the answer refused, the request made again).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest

from mxrec.datasets.opening import open_dataset
from mxrec.errors import RecordFormatError, RemoteError
from mxrec.io.opener import RecordReader
from mxrec.io.shards import ShardedWriter, ShardLimit
from mxrec.storage.settings import RequestPolicy, Storage
from testkit.datasets import write_indexed

N = 40
#: quick retries, short time-outs: a fault costs milliseconds, a stall at most a second
FAST = RequestPolicy(attempts=4, backoff=0.01, max_backoff=0.05, connect_timeout=2, read_timeout=1, deadline=20)


@functools.cache
def payloads() -> list[bytes]:
    """Records of different lengths, so that bytes from the wrong offset cannot pass for a record by their size."""
    import numpy as np

    rng = np.random.default_rng(22)
    return [rng.integers(0, 256, 300 + 37 * i, dtype=np.uint8).tobytes() for i in range(N)]


@pytest.fixture(scope="module")
def local(tmp_path_factory: Any) -> Path:
    path = tmp_path_factory.mktemp("proxy-reads") / "train.rec"
    write_indexed(path, range(N), payloads())
    return path


@pytest.fixture
def hdfs(webhdfs_server: Any, webhdfs_proxy: Any, local: Path) -> tuple[str, Storage]:
    """``train.rec`` and its ``.idx`` on WebHDFS (no checksums sidecar: an MXNet file), its URL through the proxy."""
    folder = webhdfs_server.local_path("/d")
    folder.mkdir(parents=True)
    for suffix in (".rec", ".idx"):
        (folder / f"train{suffix}").write_bytes(local.with_suffix(suffix).read_bytes())
    return (f"webhdfs://127.0.0.1:{webhdfs_proxy.port}/d/train.rec",
            Storage(options={"user": webhdfs_server.user}, policy=FAST))


# -- WebHDFS: redirects and data node answers


def test_webhdfs_redirect_cut_inside_location_is_asked_again(hdfs, webhdfs_proxy):
    """Was: a 307 cut before ``&offset=`` was followed; the data node served from byte 0 with the right length,
    and ``read_batch`` returned record 0's bytes as record 1."""
    url, storage = hdfs
    reader = RecordReader(url, storage_options=storage)
    log = webhdfs_proxy.log
    mark = log.mark()
    webhdfs_proxy.faults.cut_head_next(1, header="Location", value_before="&offset=", role="namenode", op="OPEN")
    assert reader.read_batch([1]) == [payloads()[1]]
    opens = log.since(mark, role="namenode", op="OPEN")
    assert [r.fault for r in opens] == ["cut_head", None]  # the cut redirect refused, the read asked for again
    served = log.since(mark, role="datanode", op="OPEN")
    assert len(served) == 1 and served[0].query["offset"] == str(int(reader.offsets[1]))  # never from byte 0


def test_webhdfs_redirect_without_location_is_no_empty_index(hdfs, webhdfs_proxy):
    """Was: a 307 with no ``Location`` made fsspec return the redirect's empty body as the ``.idx``: the dataset
    opened with 0 records."""
    url, storage = hdfs
    webhdfs_proxy.faults.cut_head_next(1, header="Location", role="namenode", op="OPEN", path_contains="train.idx")
    reader = RecordReader(url, storage_options=storage)
    assert len(reader) == N and reader.read_batch([0, N - 1]) == [payloads()[0], payloads()[-1]]
    idx_opens = webhdfs_proxy.log.filter(role="namenode", op="OPEN", path_contains="train.idx")
    assert [r.fault for r in idx_opens] == ["cut_head", None]

    webhdfs_proxy.faults.cut_head_next(None, header="Location", role="namenode", op="OPEN", path_contains="train.idx")
    with pytest.raises(RemoteError, match=r"train\.idx.*redirect has no Location.*4 attempts"):
        RecordReader(url, storage_options=storage)


def test_webhdfs_datanode_error_page_is_no_index(hdfs, webhdfs_proxy):
    """Was: a data node's 503 page was parsed as the ``.idx`` ("line 1: expected key<TAB>offset, got <?xml")."""
    url, storage = hdfs
    webhdfs_proxy.faults.fail_next(2, 503, role="datanode", path_contains="train.idx")
    reader = RecordReader(url, storage_options=storage)
    assert list(reader.keys) == list(range(N)) and reader[7] == payloads()[7]
    statuses = [r.status for r in webhdfs_proxy.log.filter(role="datanode", path_contains="train.idx")]
    assert statuses == [503, 503, 200]

    webhdfs_proxy.faults.fail_always(503, role="datanode", path_contains="train.idx")
    with pytest.raises(RemoteError) as caught:
        RecordReader(url, storage_options=storage)
    message = str(caught.value)
    assert "train.idx" in message and "503" in message and "key<TAB>offset" not in message


def test_webhdfs_ranges_move_the_bytes_asked_for(hdfs, webhdfs_proxy):
    """Was: fsspec's 4 MiB read-ahead on every range and three requests a range (20x the file's bytes moved).
    Now: one name node request and one redirect per range, at most 1.1x the bytes asked for."""
    url, storage = hdfs
    reader = RecordReader(url, storage_options=Storage(options=storage.options, policy=RequestPolicy.parse(
        "max_gap=0", FAST)))
    positions = [3, 11, 25, 38]  # far apart: one range each
    log = webhdfs_proxy.log
    mark = log.mark()
    assert reader.read_batch(positions) == [payloads()[p] for p in positions]
    asked = sum(int(reader.ends[p] - reader.offsets[p]) for p in positions)
    names = log.since(mark, role="namenode", path_contains="train.rec")
    datas = log.since(mark, role="datanode", path_contains="train.rec")
    assert [r.op for r in names] == ["OPEN"] * len(positions) and all(r.status == 307 for r in names)
    assert len(datas) == len(positions) and all(r.status == 200 for r in datas)
    assert sum(r.sent for r in datas) <= 1.1 * asked
    assert reader.io_stats().requests == len(positions)


# -- a record must fill its extent


def test_a_record_must_fill_exactly_its_extent(http_server, http_proxy, tmp_path):
    """A server that answers the right length from the wrong place (here: the file replaced, record boundaries
    moved, same size) must not get a shorter record inside the extent taken for the one asked for."""
    old, new = tmp_path / "old.rec", tmp_path / "new.rec"
    write_indexed(old, range(3), [b"a" * 200] * 3)  # records of 208 bytes
    write_indexed(new, range(4), [b"b" * 92, b"c" * 100, b"d" * 200, b"e" * 200])  # 100 + 108 bytes: the same 208
    assert old.stat().st_size == new.stat().st_size
    http_server.put("d/train.rec", old.read_bytes())
    http_server.put("d/train.idx", old.with_suffix(".idx").read_bytes())
    url = http_proxy.url_for("d/train.rec")
    reader = RecordReader(url, storage_options=Storage(policy=FAST))
    http_server.put("d/train.rec", new.read_bytes())
    mark = http_proxy.log.mark()
    with pytest.raises(RecordFormatError, match=r"train\.rec: at byte 100: the record ends here, 108 bytes short "
                                                r"of its extent.*\(record 0\)"):
        reader.read_batch([0])
    assert len(http_proxy.log.since(mark, method="GET", path_contains="train.rec")) == 2  # fetched once more


# -- manifests and shard sets


@pytest.fixture
def s3_set(s3_server, s3_bucket, s3_proxy, tmp_path) -> tuple[str, Storage]:
    with ShardedWriter(tmp_path / "t.rec", ShardLimit(records=15)) as writer:
        for i, payload in enumerate(payloads()):
            writer.write(payload, key=i)
    for path in sorted(tmp_path.iterdir()):
        s3_server.put_object(s3_bucket, path.name, path.read_bytes())
    return f"s3://{s3_bucket}/t.manifest.json", Storage(options=s3_proxy.storage_options(), policy=FAST)


def test_a_reset_on_the_manifest_is_retried(s3_set, s3_proxy):
    """Was: one reset on a 1 KB manifest failed ``open_dataset`` (only ranged reads were retried)."""
    url, storage = s3_set
    s3_proxy.faults.reset_next(1, after=10, method="GET", key="t.manifest.json")
    s3_proxy.faults.truncate_next(1, method="GET", key="t.manifest.json")
    dataset = open_dataset(url, storage=storage)
    assert len(dataset) == N and dataset.read_batch([0, 20, N - 1]) == [payloads()[i] for i in (0, 20, N - 1)]
    gets = s3_proxy.log.filter(method="GET", key="t.manifest.json")
    assert [r.fault for r in gets] == ["reset", "truncate", None]
