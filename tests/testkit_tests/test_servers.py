"""Self-tests of testkit's servers and rank launcher; each one doubles as an example of how to use them.

What a remote-dataset test will assert is the request log: how many GETs, with which ranges, on which file.
"""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from testkit.ranks import RanksFailed, is_loopback, listening_sockets, run_ranks
from testkit.servers import HTTPServer, S3Server, WebHDFSServer, parse_range

DATA = bytes(range(256)) * 4096  # 1 MiB, every offset's byte is predictable


def _raw(server: HTTPServer, method: str, path: str, headers: dict[str, str] | None = None) -> tuple[int, dict, bytes]:
    """One request through the standard library, so the server's protocol is checked without fsspec in the way."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        conn.request(method, path, headers=headers or {})
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


# ----------------------------------------------------------------------------------------------------------------
# HTTP: protocol (standard library only, always runs)


def test_parse_range_follows_rfc_9110() -> None:
    assert parse_range("bytes=0-9", 100) == (0, 10)
    assert parse_range("bytes=90-", 100) == (90, 100)
    assert parse_range("bytes=-10", 100) == (90, 100)
    assert parse_range("bytes=-1000", 100) == (0, 100)
    assert parse_range("bytes=50-1000", 100) == (50, 100)
    assert parse_range("bytes=100-", 100) == "unsatisfiable"
    assert parse_range("bytes=-0", 100) == "unsatisfiable"
    assert parse_range("bytes=0-", 0) == "unsatisfiable"
    for ignored in ("bytes=9-0", "bytes=0-1,5-6", "items=0-1", "bytes=-", "garbage"):
        assert parse_range(ignored, 100) is None, ignored


def test_http_ranges_head_and_416(http_server: HTTPServer) -> None:
    http_server.put("data/x.rec", DATA)
    size = len(DATA)

    status, headers, body = _raw(http_server, "HEAD", "/data/x.rec")
    assert (status, body) == (200, b"")
    assert headers["Content-Length"] == str(size) and headers["Accept-Ranges"] == "bytes"

    status, headers, body = _raw(http_server, "GET", "/data/x.rec", {"Range": "bytes=1000-1099"})
    assert status == 206 and body == DATA[1000:1100]
    assert headers["Content-Range"] == f"bytes 1000-1099/{size}"

    assert _raw(http_server, "GET", "/data/x.rec", {"Range": f"bytes={size - 5}-"})[2] == DATA[-5:]
    assert _raw(http_server, "GET", "/data/x.rec", {"Range": "bytes=-7"})[2] == DATA[-7:]

    status, headers, _ = _raw(http_server, "GET", "/data/x.rec", {"Range": f"bytes={size}-"})
    assert status == 416 and headers["Content-Range"] == f"bytes */{size}"

    status, _, body = _raw(http_server, "GET", "/data/x.rec")
    assert status == 200 and body == DATA
    assert _raw(http_server, "GET", "/data/missing.rec")[0] == 404
    assert _raw(http_server, "GET", "/../../etc/passwd")[0] == 404

    log = http_server.log
    assert log.count(method="HEAD") == 1
    assert log.count(method="GET", path="/data/x.rec") == 5
    assert [r.byte_range for r in log.filter(status=206)] == [(1000, 1099), (size - 5, None), (None, 7)]
    assert log.count(status=416) == 1


def test_http_faults_seen_by_a_plain_client(http_server: HTTPServer) -> None:
    http_server.put("x.rec", DATA)

    http_server.faults.fail_next(2, status=503, path="/x.rec")
    assert [_raw(http_server, "GET", "/x.rec")[0] for _ in range(3)] == [503, 503, 200]

    http_server.faults.fail_always(404, path="/x.rec")
    assert [_raw(http_server, "GET", "/x.rec")[0] for _ in range(2)] == [404, 404]
    http_server.faults.clear()

    http_server.faults.truncate_next(keep=100)
    with pytest.raises(http.client.IncompleteRead):
        _raw(http_server, "GET", "/x.rec")

    http_server.faults.delay_next(seconds=0.3)
    start = time.monotonic()
    assert _raw(http_server, "GET", "/x.rec")[0] == 200
    assert time.monotonic() - start >= 0.3

    assert [r.fault for r in http_server.log] == [
        "fail:503", "fail:503", None, "fail:404", "fail:404", "truncate:keep=100", "delay:0.3"]


def test_servers_listen_on_loopback_only(tmp_path: Path) -> None:
    with HTTPServer(tmp_path / "www") as web, WebHDFSServer(tmp_path / "hdfs") as hdfs:
        mine = {web.port, hdfs.port, hdfs.datanode_port}
        listeners = dict((port, address) for address, port in listening_sockets())
        assert mine <= set(listeners)
        assert all(is_loopback(listeners[port]) for port in mine), listeners
    # and everything is closed again
    assert not mine & {port for _, port in listening_sockets()}


# ----------------------------------------------------------------------------------------------------------------
# HTTP through fsspec (aiohttp)


def test_http_fsspec_reads_by_range(http_server: HTTPServer, http_fs: Any) -> None:
    import fsspec

    url = http_server.put("x.rec", DATA)
    log = http_server.log

    # fsspec.open with a small block size: one HEAD for the size, then one ranged GET of the read plus one block
    # (fsspec's "bytes" cache reads ahead block_size bytes past the requested end)
    with fsspec.open(url, "rb", block_size=65536, skip_instance_cache=True) as f:
        f.seek(500_000)
        assert f.read(100) == DATA[500_000:500_100]
        assert f.read(100) == DATA[500_100:500_200]  # inside the read-ahead: no request
    assert log.count(method="HEAD") == 1
    assert [r.byte_range for r in log.filter(method="GET")] == [(500_000, 500_000 + 100 + 65536 - 1)]

    # cache_type="none": every read is exactly one ranged GET
    log.clear()
    with http_fs.open(url, "rb", block_size=4096, cache_type="none", size=len(DATA)) as f:
        for offset in (10, 300_000, 999_000):
            f.seek(offset)
            assert f.read(16) == DATA[offset:offset + 16]
    assert log.count(method="HEAD") == 0  # size= given
    assert [r.byte_range for r in log] == [(10, 25), (300_000, 300_015), (999_000, 999_015)]

    # cat_file: one ranged GET, whatever the block size
    log.clear()
    assert http_fs.cat_file(url, start=7, end=11) == DATA[7:11]
    assert [(r.method, r.range) for r in log] == [("GET", "bytes=7-10")]

    # the directory index is what fsspec's ls parses
    assert http_fs.ls(http_server.url + "/", detail=False) == [url]


def test_http_fsspec_sees_faults(http_server: HTTPServer, http_fs: Any) -> None:
    import aiohttp

    url = http_server.put("x.rec", DATA)
    http_server.faults.fail_next(1, status=503, method="GET")
    with pytest.raises(aiohttp.ClientResponseError) as err:
        http_fs.cat_file(url, start=0, end=1000)
    assert err.value.status == 503

    http_server.faults.truncate_next(1)
    with pytest.raises(aiohttp.ClientPayloadError):
        http_fs.cat_file(url, start=0, end=1000)

    http_server.faults.fail_always(404, path="/x.rec")
    with pytest.raises(FileNotFoundError):
        http_fs.cat_file(url, start=0, end=1000)

    http_server.faults.clear()
    assert http_fs.cat_file(url, start=0, end=1000) == DATA[:1000]  # the server itself is fine


# ----------------------------------------------------------------------------------------------------------------
# S3 (moto) through s3fs


def test_s3_put_get_ranged_and_counted(s3_server: S3Server, s3_bucket: str, s3_fs: Any) -> None:
    log = s3_server.log
    s3_server.put_object(s3_bucket, "setup.bin", b"helpers are not logged")
    assert len(log) == 0

    path = f"{s3_bucket}/train.rec"
    s3_fs.pipe_file(path, DATA)
    assert log.count(method="PUT", key="train.rec") == 1
    assert s3_server.get_object(s3_bucket, "train.rec") == DATA

    mark = log.mark()  # one "epoch": an open, three reads
    with s3_fs.open(path, "rb", cache_type="none") as f:
        for offset in (0, 4096, 900_000):
            f.seek(offset)
            assert f.read(64) == DATA[offset:offset + 64]
    epoch = log.since(mark, key="train.rec")
    assert [r.method for r in epoch] == ["HEAD", "GET", "GET", "GET"]
    assert [r.byte_range for r in epoch[1:]] == [(0, 63), (4096, 4159), (900_000, 900_063)]

    log.clear()
    assert s3_fs.cat_file(path, start=100, end=200) == DATA[100:200]
    assert [(r.method, r.key, r.range, r.status) for r in log] == [("GET", "train.rec", "bytes=100-199", 206)]

    # use_listings_cache=False: each listing asks the server
    log.clear()
    assert sorted(s3_fs.ls(s3_bucket, detail=False)) == [f"{s3_bucket}/setup.bin", path]
    s3_fs.ls(s3_bucket)
    assert log.count(method="GET", bucket=s3_bucket, key=None) == 2


def test_s3_faults(s3_server: S3Server, s3_bucket: str, s3_fs: Any) -> None:
    path = s3_server.put_object(s3_bucket, "train.rec", DATA)

    s3_server.faults.fail_always(404, key="gone.rec")
    with pytest.raises(FileNotFoundError):
        s3_fs.cat_file(f"{s3_bucket}/gone.rec")

    s3_server.faults.fail_always(403, key="secret.rec")
    with pytest.raises(PermissionError):
        s3_fs.cat_file(f"{s3_bucket}/secret.rec")

    # a truncated body is retried by s3fs: the data arrives whole, the log shows the second GET
    s3_server.log.clear()
    s3_server.faults.truncate_next(1, key="train.rec")
    assert s3_fs.cat_file(path, start=0, end=100_000) == DATA[:100_000]
    assert [r.fault for r in s3_server.log.filter(method="GET", key="train.rec")] == ["truncate:keep=half", None]


def test_s3_env_for_subprocesses(s3_server: S3Server, s3_bucket: str) -> None:
    s3_server.put_object(s3_bucket, "a.bin", b"through the environment")
    code = ("import boto3, sys; c = boto3.client('s3'); "
            "body = c.get_object(Bucket=sys.argv[1], Key='a.bin', Range='bytes=0-6')['Body']; "
            "sys.stdout.write(body.read().decode())")
    env = dict(os.environ, **s3_server.env())
    result = subprocess.run([sys.executable, "-c", code, s3_bucket], env=env, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "through"
    assert [(r.method, r.key, r.range) for r in s3_server.log] == [("GET", "a.bin", "bytes=0-6")]


# ----------------------------------------------------------------------------------------------------------------
# WebHDFS through fsspec


def test_webhdfs_read_write_list_rename_delete(webhdfs_server: WebHDFSServer, webhdfs_fs: Any) -> None:
    fs, log = webhdfs_fs, webhdfs_server.log

    fs.mkdir("/data")
    with fs.open("/data/train.rec", "wb") as f:
        f.write(DATA)
    assert webhdfs_server.local_path("/data/train.rec").read_bytes() == DATA
    assert [(r.role, r.method, r.op, r.status) for r in log.filter(path="/data/train.rec")][:3] == [
        ("namenode", "PUT", "CREATE", 307), ("datanode", "PUT", "CREATE", 201), ("namenode", "POST", "APPEND", 307)]

    # WebHDFS's open() drops cache_type: always "readahead", so a read fetches its bytes plus block_size more
    log.clear()
    with fs.open("/data/train.rec", "rb", block_size=4096) as f:
        f.seek(123_456)
        assert f.read(10) == DATA[123_456:123_466]
    assert [(r.role, r.op) for r in log] == [("namenode", "GETFILESTATUS"), ("namenode", "OPEN"), ("datanode", "OPEN")]
    opened = log.filter(role="datanode")[0]
    assert (opened.query["offset"], opened.query["length"]) == ("123456", str(10 + 4096))

    assert fs.info("/data/train.rec")["size"] == len(DATA)
    assert fs.ls("/data", detail=False) == ["/data/train.rec"]
    assert fs.content_summary("/")["length"] == len(DATA)

    fs.mv("/data/train.rec", "/data/val.rec")
    assert fs.ls("/data", detail=False) == ["/data/val.rec"]
    assert fs.cat_file("/data/val.rec", start=5, end=9) == DATA[5:9]

    fs.pipe_file("/deep/er/x.txt", b"parents are created")
    assert fs.cat("/deep/er/x.txt") == b"parents are created"
    fs.rm("/deep", recursive=True)
    fs.rm_file("/data/val.rec")
    assert not fs.exists("/deep") and not fs.exists("/data/val.rec")
    assert fs.ls("/", detail=False) == ["/data"]


def test_webhdfs_faults(webhdfs_server: WebHDFSServer, webhdfs_fs: Any) -> None:
    import requests

    webhdfs_fs.pipe_file("/x.rec", DATA[:1000])

    webhdfs_server.faults.fail_next(1, 503, op="GETFILESTATUS")
    with pytest.raises(requests.HTTPError):
        webhdfs_fs.info("/x.rec")

    webhdfs_server.faults.fail_always(404, path="/x.rec")
    with pytest.raises(FileNotFoundError):
        webhdfs_fs.info("/x.rec")
    webhdfs_server.faults.clear()

    webhdfs_server.faults.truncate_next(1, role="datanode")
    with pytest.raises(requests.exceptions.ChunkedEncodingError):
        webhdfs_fs.cat_file("/x.rec")
    assert webhdfs_fs.cat_file("/x.rec") == DATA[:1000]


def test_webhdfs_data_proxy(tmp_path: Path) -> None:
    """A data node advertised under another name is reached through the client's ``data_proxy`` mapping."""
    pytest.importorskip("fsspec")
    pytest.importorskip("requests")
    with WebHDFSServer(tmp_path / "hdfs", datanode_host="datanode.invalid") as server:
        fs = server.filesystem()
        assert "data_proxy" in server.filesystem_kwargs()
        fs.pipe_file("/p.bin", b"via the proxy map")
        assert fs.cat_file("/p.bin") == b"via the proxy map"
        assert server.log.filter(role="namenode", op="OPEN")[0].status == 307


# ----------------------------------------------------------------------------------------------------------------
# distributed ranks


def allreduce_rank(rank: int, world_size: int, scale: int = 1) -> dict[str, Any]:
    """Runs in each rank's own process (loaded from this file): one gloo all_reduce, and what the rank listens on."""
    import torch
    import torch.distributed as dist

    tensor = torch.tensor([float(scale * (rank + 1))])
    dist.all_reduce(tensor)
    listeners = listening_sockets()  # gloo's pair sockets are open while the group lives
    dist.barrier()
    return {"rank": dist.get_rank(), "world": dist.get_world_size(), "sum": tensor.item(), "listeners": listeners}


def failing_rank(rank: int, world_size: int) -> None:
    if rank == 1:
        raise ValueError("rank 1 gives up")
    time.sleep(60)  # a peer stuck waiting, as in a collective; the launcher must kill it


def test_two_gloo_ranks_all_reduce_on_loopback(dist_ranks: Any) -> None:
    results = dist_ranks(f"{__file__}:allreduce_rank", 2, kwargs={"scale": 10}, timeout=120)
    assert [(r["rank"], r["world"], r["sum"]) for r in results] == [(0, 2, 30.0), (1, 2, 30.0)]
    for r in results:
        assert r["listeners"], "gloo should listen for its peer"
        assert all(is_loopback(address) for address, _ in r["listeners"]), r["listeners"]


def test_rank_failure_is_reported_and_peers_killed(tmp_path: Path) -> None:
    # init=False: no process group, so this needs no torch and runs in well under a second
    start = time.monotonic()
    with pytest.raises(RanksFailed) as failure:
        run_ranks(f"{__file__}:failing_rank", 2, init=False, grace=0.5, timeout=30, workdir=tmp_path)
    assert time.monotonic() - start < 20
    message = str(failure.value)
    assert "rank 1 gives up" in message and "rank 1: exit code 1" in message
    assert [o.killed for o in failure.value.outcomes] == ["peer failed", None]


def test_rank_timeout_kills_everything(tmp_path: Path) -> None:
    script = tmp_path / "sleepy.py"
    script.write_text("import time\ntime.sleep(60)\nRESULT = 'never'\n")
    with pytest.raises(RanksFailed) as failure:
        run_ranks(str(script), 2, init=False, timeout=1.0, workdir=tmp_path / "work")
    assert [o.killed for o in failure.value.outcomes] == ["timeout", "timeout"]

    script.write_text("import os\nRESULT = {'rank': int(os.environ['RANK'])}\n")
    assert run_ranks(str(script), 2, init=False, timeout=30) == [{"rank": 0}, {"rank": 1}]
    assert json.loads((tmp_path / "work" / "spec.json").read_text())["world_size"] == 2
