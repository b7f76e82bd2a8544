"""Self-tests of testkit's fault proxy, against the real servers and the real clients mxrec uses.

Each fault test pins down what the client *raises* (or silently returns) when the network does that to it: the
exception types here are the ones remote-data code has to classify as transient or permanent.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from testkit.fixtures import require
from testkit.proxy import (
    PROFILES,
    FaultProfile,
    FaultProxy,
    HTTPProxy,
    ProxiedRequest,
    ProxyFault,
    S3Proxy,
    WebHDFSProxy,
)
from testkit.servers import LOOPBACK, HTTPServer, WebHDFSServer
from testkit.waiting import wait_for

DATA = bytes(range(256)) * 4096  # 1 MiB, every offset's byte is predictable


@pytest.fixture
def requests_session() -> Iterator[Any]:
    require("requests", purpose="a plain requests client")
    import requests

    with requests.Session() as session:
        yield session


def _raw(port: int, method: str, path: str, headers: dict[str, str] | None = None,
         body: bytes | None = None) -> tuple[int, dict[str, str], bytes]:
    """One request through http.client (no retries, no pooling)."""
    conn = http.client.HTTPConnection(LOOPBACK, port, timeout=10)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


def _proxy_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("testkit-proxy")]


# ----------------------------------------------------------------------------------------------------------------
# clean pass-through


def test_http_clean_pass_through_is_byte_exact_with_keep_alive(http_server: HTTPServer, http_proxy: HTTPProxy,
                                                                http_fs: Any) -> None:
    http_server.put("data/x.rec", DATA)
    url = http_proxy.url_for("data/x.rec")
    assert http_fs.info(url)["size"] == len(DATA)
    for start, end in ((0, 10), (1000, 1100), (len(DATA) - 7, len(DATA)), (123_456, 654_321)):
        assert http_fs.cat_file(url, start, end) == DATA[start:end]
    assert http_fs.cat_file(url) == DATA
    status, headers, body = _raw(http_proxy.port, "HEAD", "/data/x.rec")  # a HEAD's Content-Length has no body
    assert (status, body, headers["Content-Length"]) == (200, b"", str(len(DATA)))

    log = http_proxy.log
    gets = log.filter(method="GET", path="/data/x.rec", has_range=True)
    assert [r.byte_range for r in gets] == [(0, 9), (1000, 1099), (len(DATA) - 7, len(DATA) - 1), (123_456, 654_320)]
    assert all(r.status == r.upstream_status == 206 and r.sent == r.length and r.fault is None for r in gets)
    # aiohttp kept one connection for all its requests: keep-alive through the proxy
    assert {r.connection for r in log.filter(headers=lambda h: "aiohttp" in h.get("User-Agent", ""))} == {0}
    assert [r.sequence for r in log.filter(connection=0)] == list(range(log.count(connection=0)))
    assert http_server.log.count(method="GET") == log.count(method="GET")  # every one reached the server


def test_s3_clean_pass_through_put_multipart_and_100_continue(s3_proxy: S3Proxy, s3_bucket: str) -> None:
    require("s3fs", purpose="s3fs through the proxy")
    s3_proxy.server.put_object(s3_bucket, "x.rec", DATA)
    fs = s3_proxy.filesystem(retries=False)
    path = f"{s3_bucket}/x.rec"
    assert fs.info(path)["size"] == len(DATA)
    assert fs.cat_file(path, start=1000, end=2000) == DATA[1000:2000]
    assert fs.cat_file(path) == DATA

    blob = DATA * 3
    fs.pipe_file(f"{s3_bucket}/put.bin", blob)  # one PUT with Expect: 100-continue
    assert s3_proxy.server.get_object(s3_bucket, "put.bin") == blob
    put = s3_proxy.log.filter(method="PUT", key="put.bin")
    assert len(put) == 1 and put[0].headers.get("Expect") == "100-continue" and put[0].status == 200

    big = DATA * 11  # over s3fs's 5 MiB block: a multipart upload
    with fs.open(f"{s3_bucket}/multi.bin", "wb", block_size=5 << 20) as f:
        for start in range(0, len(big), 5 << 20):  # s3fs sends a part whenever a block is full
            f.write(big[start:start + (5 << 20)])
    assert s3_proxy.server.get_object(s3_bucket, "multi.bin") == big
    multi = s3_proxy.log.filter(key="multi.bin")
    assert [r.method for r in multi] == ["POST", "PUT", "PUT", "PUT", "POST"]
    assert "uploads" in multi[0].query and "uploadId" in multi[-1].query
    assert all(r.status == 200 for r in multi)

    # synchronous botocore waits up to 1 s for "100 Continue": the proxy answers it at once
    client = s3_proxy.client()
    started = time.monotonic()
    for i in range(3):
        client.put_object(Bucket=s3_bucket, Key=f"sync{i}.bin", Body=blob)
    assert time.monotonic() - started < 2.9  # three 1 s waits would be over 3 s
    assert s3_proxy.server.get_object(s3_bucket, "sync2.bin") == blob
    assert all(r.headers.get("Expect") == "100-continue" for r in s3_proxy.log.filter(method="PUT", key="sync0.bin"))


def test_expect_100_continue_is_answered_before_the_body(webhdfs_server: WebHDFSServer,
                                                         webhdfs_proxy: WebHDFSProxy) -> None:
    """Raw socket: the interim answer comes right after the head; the upstream never sees the Expect header."""
    webhdfs_server.local_path("/f").write_bytes(b"")
    status, headers, _ = _raw(webhdfs_proxy.port, "POST", "/webhdfs/v1/f?op=APPEND&user.name=test")
    location = headers["Location"]
    assert status == 307 and location.startswith(webhdfs_proxy.datanode.url)  # the redirect points at the proxy
    with socket.create_connection((LOOPBACK, webhdfs_proxy.datanode.port), timeout=5) as sock:
        target = location[len(webhdfs_proxy.datanode.url):]
        sock.sendall(f"POST {target} HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
                     "Expect: 100-continue\r\n\r\n".encode())
        assert sock.recv(100) == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(b"hello")
        assert sock.recv(1000).startswith(b"HTTP/1.1 200")
    assert webhdfs_server.local_path("/f").read_bytes() == b"hello"
    appended = webhdfs_server.log.filter(role="datanode", op="APPEND")
    assert appended and "Expect" not in appended[-1].headers


def test_webhdfs_clean_create_open_rename_delete_through_both_proxies(webhdfs_server: WebHDFSServer,
                                                                      webhdfs_proxy: WebHDFSProxy) -> None:
    require("fsspec", "requests", purpose="fsspec's WebHDFS")
    fs = webhdfs_proxy.filesystem()
    with fs.open("/data/x.rec", "wb") as f:
        f.write(DATA)
    assert webhdfs_server.local_path("/data/x.rec").read_bytes() == DATA
    assert fs.cat_file("/data/x.rec", 1000, 2000) == DATA[1000:2000]
    with fs.open("/data/x.rec", "rb", block_size=4096) as f:
        f.seek(500_000)
        assert f.read(10_000) == DATA[500_000:510_000]
    fs.mv("/data/x.rec", "/data/y.rec")
    assert fs.ls("/data") == ["/data/y.rec"]
    fs.rm("/data/y.rec")
    assert not fs.exists("/data/y.rec")

    log = webhdfs_proxy.log
    assert [r.op for r in log.filter(role="datanode")] == ["CREATE", "APPEND", "OPEN", "OPEN"]
    # the rewritten Location took every data request through the data node proxy, none went round it
    assert webhdfs_server.log.count(role="datanode") == log.count(role="datanode")
    assert all(r.fault is None and r.status == r.upstream_status for r in log)


def test_chunked_and_close_delimited_bodies_both_ways(tmp_path: Path, requests_session: Any) -> None:
    """Framings testkit's servers never use: a chunked upload, a chunked answer, an answer ended by close."""

    class Echo(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            assert self.headers["Transfer-Encoding"] == "chunked"
            body = b""
            while size := int(self.rfile.readline().strip(), 16):
                body += self.rfile.read(size)
                self.rfile.readline()
            self.rfile.readline()
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for start in range(0, len(body), 1000):
                piece = body[start:start + 1000]
                self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            self.wfile.write(b"0\r\n\r\n")

        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(DATA[:5000])
            self.close_connection = True

    server = ThreadingHTTPServer((LOOPBACK, 0), Echo)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        with FaultProxy(f"http://{LOOPBACK}:{server.server_address[1]}") as proxy:
            sent = DATA[:12_345]
            answer = requests_session.post(proxy.url + "/echo", data=iter([sent[:5000], sent[5000:]]))
            assert answer.content == sent and answer.headers["Transfer-Encoding"] == "chunked"
            assert requests_session.get(proxy.url + "/close").content == DATA[:5000]

            import requests

            proxy.faults.truncate_next(1, method="POST")  # half the chunked wire bytes, then FIN
            with pytest.raises(requests.exceptions.ChunkedEncodingError):
                requests_session.post(proxy.url + "/echo", data=iter([sent]))
            truncated = proxy.log.records[-1]
            assert truncated.fault == "truncate" and 0 < truncated.sent < len(sent)
            assert not proxy.errors
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


# ----------------------------------------------------------------------------------------------------------------
# faults as fsspec's HTTP file system (aiohttp) sees them


def test_http_faults_as_aiohttp_sees_them(http_server: HTTPServer, http_proxy: HTTPProxy, http_fs: Any) -> None:
    import aiohttp

    http_server.put("x.rec", DATA)
    url = http_proxy.url_for("x.rec")
    faults = http_proxy.faults

    faults.fail_next(1, path="/x.rec")
    with pytest.raises(aiohttp.ClientResponseError) as status:
        http_fs.cat_file(url, 0, 100)
    assert status.value.status == 503

    faults.reset_next(1, after=1000)
    with pytest.raises(aiohttp.ClientPayloadError, match="received 1000 of 100000"):
        http_fs.cat_file(url, 0, 100_000)

    faults.truncate_next(1)
    with pytest.raises(aiohttp.ClientPayloadError, match="received 50000 of 100000"):
        http_fs.cat_file(url, 0, 100_000)

    # before the head, aiohttp re-sends an idempotent request once by itself: one fault goes unseen...
    faults.reset_next(1, after=None)
    assert http_fs.cat_file(url, 0, 100) == DATA[:100]
    # ...two do not
    faults.reset_next(2, after=None)
    with pytest.raises(aiohttp.ClientOSError):
        http_fs.cat_file(url, 0, 100)
    faults.cut_head_next(2, header="Content-Length")  # EOF inside the head: aiohttp rejects it
    with pytest.raises(aiohttp.ServerDisconnectedError):
        http_fs.cat_file(url, 0, 100)

    faults.stall_next(1, 0.3, after=5000)
    started = time.monotonic()
    assert http_fs.cat_file(url, 0, 100_000) == DATA[:100_000]
    assert time.monotonic() - started >= 0.3

    log = http_proxy.log
    assert [r.fault for r in log if r.fault] == ["status", "reset", "truncate", "reset", "reset", "reset",
                                                "cut_head", "cut_head", "stall"]
    assert [r.sent for r in log.filter(fault="reset")] == [1000, 0, 0, 0]
    assert log.filter(fault="truncate")[0].sent == 50_000
    assert log.filter(fault="status")[0].upstream_status is None  # answered by the proxy, not forwarded
    assert http_server.log.count(method="GET") == log.count(method="GET") - 1


def test_http_faults_as_requests_sees_them(http_server: HTTPServer, http_proxy: HTTPProxy,
                                           requests_session: Any) -> None:
    import requests

    http_server.put("x.rec", DATA)
    url = http_proxy.url_for("x.rec")
    faults = http_proxy.faults

    def get() -> Any:
        return requests_session.get(url, headers={"Range": "bytes=0-99999"}, timeout=10)

    faults.fail_next(1)
    answer = get()
    assert answer.status_code == 503 and answer.headers["Server"] == "nginx"
    assert b"<h1>503 Service Unavailable</h1>" in answer.content
    faults.reset_next(1, after=1000)
    with pytest.raises(requests.exceptions.ChunkedEncodingError, match="Connection reset by peer"):
        get()
    faults.truncate_next(1)
    with pytest.raises(requests.exceptions.ChunkedEncodingError, match="IncompleteRead"):
        get()
    faults.reset_next(1, after=None)
    with pytest.raises(requests.exceptions.ConnectionError, match="Connection aborted"):
        get()
    faults.cut_head_next(1, keep=5)  # "HTTP/" and EOF
    with pytest.raises(requests.exceptions.ConnectionError, match="BadStatusLine"):
        get()
    # http.client takes EOF in the head for its end: without Content-Length the body is "up to close", empty
    faults.cut_head_next(1, header="Content-Length")
    answer = get()
    assert (answer.status_code, answer.content) == (206, b"")
    assert get().content == DATA[:100_000]


# ----------------------------------------------------------------------------------------------------------------
# faults as s3fs (aiobotocore on aiohttp) and boto3 (botocore on urllib3) see them


def test_s3_faults_as_s3fs_sees_them(s3_proxy: S3Proxy, s3_bucket: str) -> None:
    require("s3fs", purpose="s3fs through the proxy")
    import aiohttp
    import botocore.exceptions

    path = s3_proxy.server.put_object(s3_bucket, "x.rec", DATA)
    fs = s3_proxy.filesystem(retries=False)
    faults = s3_proxy.faults

    def cat() -> bytes:
        return fs.cat_file(path, start=0, end=100_000)

    faults.fail_next(1)  # s3fs turns botocore's ClientError into OSError(EBUSY) for SlowDown
    with pytest.raises(OSError, match="Please reduce your request rate") as slow_down:
        cat()
    assert isinstance(slow_down.value.__cause__, botocore.exceptions.ClientError)
    faults.fail_next(1, 500)
    with pytest.raises(OSError, match="internal error"):
        cat()
    faults.reset_next(1, after=1000)  # the body is read outside botocore: aiohttp's own error comes through
    with pytest.raises(aiohttp.ClientPayloadError):
        cat()
    faults.truncate_next(1)
    with pytest.raises(aiohttp.ClientPayloadError):
        cat()
    faults.reset_next(2, after=None)  # (aiohttp re-sends once)
    with pytest.raises(botocore.exceptions.EndpointConnectionError):
        cat()
    faults.cut_head_next(2, header="Content-Length")
    with pytest.raises(botocore.exceptions.ConnectionClosedError):
        cat()
    faults.fail_next(1, method="HEAD")
    with pytest.raises(OSError):
        fs.info(path)
    assert cat() == DATA[:100_000]

    # with its default retries s3fs rides out a 503
    faults.fail_next(1)
    assert s3_proxy.filesystem().cat_file(path, start=5, end=10) == DATA[5:10]
    assert [r.status for r in s3_proxy.log.filter(range="bytes=5-9")] == [503, 206]


def test_s3_faults_as_botocore_sees_them(s3_proxy: S3Proxy, s3_bucket: str) -> None:
    require("boto3", purpose="boto3 through the proxy")
    import botocore.exceptions
    import urllib3.exceptions

    s3_proxy.server.put_object(s3_bucket, "x.rec", DATA)
    client = s3_proxy.client()
    faults = s3_proxy.faults

    def get() -> bytes:
        return client.get_object(Bucket=s3_bucket, Key="x.rec", Range="bytes=0-99999")["Body"].read()

    faults.fail_next(1)
    with pytest.raises(botocore.exceptions.ClientError) as error:
        get()
    assert error.value.response["Error"]["Code"] == "SlowDown"
    faults.fail_next(1, 500)
    with pytest.raises(botocore.exceptions.ClientError) as error:
        get()
    assert error.value.response["Error"]["Code"] == "InternalError"
    faults.reset_next(1, after=1000)
    with pytest.raises(botocore.exceptions.ResponseStreamingError) as streaming:
        get()
    assert isinstance(streaming.value.__cause__ or streaming.value.__context__, urllib3.exceptions.ProtocolError)
    faults.truncate_next(1)
    with pytest.raises(botocore.exceptions.ResponseStreamingError, match="IncompleteRead"):
        get()
    faults.reset_next(1, after=None)
    with pytest.raises(botocore.exceptions.ConnectionClosedError):
        get()
    faults.cut_head_next(1, keep=5)
    with pytest.raises(botocore.exceptions.ConnectionClosedError):
        get()
    faults.cut_head_next(1, header="Content-Length")  # http.client: an empty body, and no error at all
    assert get() == b""

    # a PUT answered 503 before its body was sent (Expect: 100-continue): the connection is closed, the next is fine
    faults.fail_next(1, method="PUT", code="SlowDown")
    with pytest.raises(botocore.exceptions.ClientError, match="SlowDown"):
        client.put_object(Bucket=s3_bucket, Key="up.bin", Body=DATA)
    client.put_object(Bucket=s3_bucket, Key="up.bin", Body=DATA)
    assert s3_proxy.server.get_object(s3_bucket, "up.bin") == DATA
    assert get() == DATA[:100_000]


def test_s3_error_documents(s3_proxy: S3Proxy, s3_bucket: str) -> None:
    s3_proxy.faults.fail_next(1, 503)
    s3_proxy.faults.fail_next(1, 500)
    s3_proxy.faults.fail_next(1, 503, method="HEAD")
    status, headers, body = _raw(s3_proxy.port, "GET", f"/{s3_bucket}/k")
    assert status == 503 and headers["Content-Type"] == "application/xml" and "x-amz-request-id" in headers
    assert b"<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message>" in body
    assert f"<Resource>/{s3_bucket}/k</Resource>".encode() in body
    assert b"<Code>InternalError</Code>" in _raw(s3_proxy.port, "GET", f"/{s3_bucket}/k")[2]
    status, headers, body = _raw(s3_proxy.port, "HEAD", f"/{s3_bucket}/k")
    assert (status, body) == (503, b"") and int(headers["Content-Length"]) > 0


# ----------------------------------------------------------------------------------------------------------------
# faults as fsspec's WebHDFS (requests) sees them


def test_webhdfs_faults_as_fsspec_sees_them(webhdfs_server: WebHDFSServer, webhdfs_proxy: WebHDFSProxy) -> None:
    require("fsspec", "requests", purpose="fsspec's WebHDFS")
    import requests

    webhdfs_server.local_path("/x.rec").write_bytes(DATA)
    fs = webhdfs_proxy.filesystem()
    faults = webhdfs_proxy.faults

    def cat() -> bytes:
        return fs.cat_file("/x.rec", 1000, 2000)

    faults.fail_next(1, role="namenode", op="OPEN")  # 503: not a status fsspec maps, so raise_for_status
    with pytest.raises(requests.HTTPError, match="503"):
        cat()
    faults.fail_next(1, 500, role="namenode", op="OPEN")  # 500 + RemoteException: fsspec's RuntimeError
    with pytest.raises(RuntimeError, match="Internal Server Error"):
        cat()
    faults.fail_next(1, role="datanode")  # fsspec does not check the data node's status: the error is the data
    assert json.loads(cat())["RemoteException"]["exception"] == "RetriableException"
    faults.reset_next(1, after=100, role="datanode")
    with pytest.raises(requests.exceptions.ChunkedEncodingError, match="Connection reset by peer"):
        cat()
    faults.truncate_next(1, role="datanode")
    with pytest.raises(requests.exceptions.ChunkedEncodingError, match="IncompleteRead"):
        cat()
    faults.reset_next(1, after=None, role="datanode")
    with pytest.raises(requests.exceptions.ConnectionError, match="Connection aborted"):
        cat()
    faults.reset_next(1, after=None, role="namenode", op="GETFILESTATUS")
    with pytest.raises(requests.exceptions.ConnectionError):
        fs.info("/x.rec")
    assert cat() == DATA[1000:2000]


def test_webhdfs_cut_redirects(webhdfs_server: WebHDFSServer, webhdfs_proxy: WebHDFSProxy,
                               requests_session: Any) -> None:
    """A 307 whose head is cut short: http.client takes the EOF for the end of the head, and nobody complains."""
    require("fsspec", "requests", purpose="fsspec's WebHDFS")
    webhdfs_server.local_path("/x.rec").write_bytes(DATA)
    fs = webhdfs_proxy.filesystem()
    faults = webhdfs_proxy.faults
    log = webhdfs_proxy.log

    # no Location at all: fsspec's _fetch_range returns the redirect's own body, which is empty
    faults.cut_head_next(1, header="Location", role="namenode", op="OPEN")
    assert fs.cat_file("/x.rec", 1000, 2000) == b""
    assert log.filter(op="OPEN")[-1].role == "namenode"  # the data node was never asked

    # Location cut before "&offset=": the data node serves from offset 0, and the bytes are wrong, silently
    faults.cut_head_next(1, header="Location", value_before="&offset=", role="namenode", op="OPEN")
    assert fs.cat_file("/x.rec", 1000, 2000) == DATA[:1000]
    served = log.filter(role="datanode", op="OPEN")[-1]
    # (fsspec asked for the rest of the file from 1000, its read-ahead block being larger than the file)
    assert "offset" not in served.query and served.query["length"] == str(len(DATA) - 1000)

    # inside the path: no query at all, the data node answers 400, and fsspec hands that back as file bytes
    inside_path = len(webhdfs_proxy.datanode.url + "/webhdfs/v1/x")
    faults.cut_head_next(1, header="Location", value_chars=inside_path, role="namenode", op="OPEN")
    assert b"IllegalArgumentException" in fs.cat_file("/x.rec", 1000, 2000)

    # the same cut seen by a plain requests client that follows the redirect
    faults.cut_head_next(1, header="Location", value_before="&offset=", role="namenode", op="OPEN")
    answer = requests_session.get(webhdfs_proxy.url + "/x.rec",
                                  params={"op": "OPEN", "user.name": "test", "offset": 5000, "length": 100})
    assert answer.status_code == 200 and answer.content == DATA[:100]
    cuts = log.filter(fault="cut_head")
    assert len(cuts) == 4 and all(r.status == 307 and r.role == "namenode" for r in cuts)


# ----------------------------------------------------------------------------------------------------------------
# latency, bandwidth, stalls


def test_latency_is_added_to_every_response(http_server: HTTPServer, http_proxy: HTTPProxy, http_fs: Any) -> None:
    http_server.put("x.rec", DATA)
    url = http_proxy.url_for("x.rec")
    http_proxy.latency = 0.05
    started = time.monotonic()
    for i in range(10):
        assert http_fs.cat_file(url, i, i + 10) == DATA[i:i + 10]
    assert time.monotonic() - started >= 0.5
    assert all(r.delay == 0.05 for r in http_proxy.log)

    http_proxy.latency = lambda record: 0.2 if record.byte_range == (0, 0) else 0.0  # per request
    started = time.monotonic()
    assert http_fs.cat_file(url, 0, 1) == DATA[:1]
    assert time.monotonic() - started >= 0.2
    assert http_fs.cat_file(url, 1, 2) == DATA[1:2]
    assert [r.delay for r in http_proxy.log.records[-2:]] == [0.2, 0.0]

    http_proxy.latency = 0.0
    http_proxy.use_profile("latency")  # a profile's latency adds to the proxy's own
    assert http_fs.cat_file(url, 0, 1) == DATA[:1]
    assert http_proxy.log.records[-1].delay == PROFILES["latency"].latency == 0.05


def test_bandwidth_cap_is_shared_by_connections(http_server: HTTPServer, http_proxy: HTTPProxy,
                                                requests_session: Any, http_fs: Any) -> None:
    import requests

    http_server.put("x.rec", DATA * 2)
    url = http_proxy.url_for("x.rec")
    http_proxy.bandwidth = 4 << 20
    started = time.monotonic()
    assert http_fs.cat_file(url) == DATA * 2  # 2 MiB at 4 MiB/s
    assert time.monotonic() - started >= 0.45

    results: list[bytes] = []

    def fetch(start: int) -> None:
        with requests.Session() as own:
            results.append(own.get(url, headers={"Range": f"bytes={start}-{start + len(DATA) - 1}"}).content)

    threads = [threading.Thread(target=fetch, args=(start,)) for start in (0, len(DATA))]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert time.monotonic() - started >= 0.45  # two connections, 1 MiB each, one 4 MiB/s link
    assert sorted(results) == [DATA, DATA]
    assert len({r.connection for r in http_proxy.log.records[-2:]}) == 2

    http_proxy.bandwidth_scope = "connection"  # each connection its own 4 MiB/s
    started = time.monotonic()
    assert http_fs.cat_file(url, 0, len(DATA)) == DATA
    assert time.monotonic() - started >= 0.2


def test_stalls_hold_the_head_or_the_body(http_server: HTTPServer, http_proxy: HTTPProxy,
                                          requests_session: Any) -> None:
    http_server.put("x.rec", DATA)
    url = http_proxy.url_for("x.rec")
    http_proxy.faults.delay_next(1, 0.3)
    http_proxy.faults.stall_next(1, 0.3, after=10_000)
    for _ in range(2):
        started = time.monotonic()
        assert requests_session.get(url).content == DATA
        assert time.monotonic() - started >= 0.3
    assert [r.detail for r in http_proxy.log] == ["stall:0.3s@head", f"stall:0.3s@10000: after 10000 of {len(DATA)} "
                                                                     "body bytes"]


def test_stalls_past_client_timeouts(http_server: HTTPServer, http_proxy: HTTPProxy, requests_session: Any,
                                     s3_proxy: S3Proxy, s3_bucket: str) -> None:
    """What a stall longer than the client's read timeout raises, before the head and in mid-body."""
    require("s3fs", "boto3", purpose="s3fs and boto3 through the proxy")
    import aiohttp
    import botocore.exceptions
    import fsspec
    import requests
    from fsspec.exceptions import FSTimeoutError

    http_server.put("x.rec", DATA)
    url = http_proxy.url_for("x.rec")
    s3_proxy.server.put_object(s3_bucket, "x.rec", DATA)
    fs = fsspec.filesystem("http", skip_instance_cache=True,
                           client_kwargs={"timeout": aiohttp.ClientTimeout(sock_read=0.2)})
    s3 = s3_proxy.filesystem(retries=False, config_kwargs={"s3": {"addressing_style": "path"}, "read_timeout": 0.2,
                                                           "retries": {"total_max_attempts": 1}})
    boto = s3_proxy.client(read_timeout=0.2)
    for after in (None, 1000):
        http_proxy.faults.stall_next(1, 0.6, after=after)
        with pytest.raises(FSTimeoutError):  # aiohttp's SocketTimeoutError, turned into fsspec's
            fs.cat_file(url, 0, 100_000)
        s3_proxy.faults.stall_next(1, 0.6, after=after)
        # before the head botocore's ReadTimeoutError; mid-body aiobotocore's AioReadTimeoutError as FSTimeoutError
        with pytest.raises(botocore.exceptions.ReadTimeoutError if after is None else FSTimeoutError):
            s3.cat_file(f"{s3_bucket}/x.rec", start=0, end=100_000)
        s3_proxy.faults.stall_next(1, 0.6, after=after)
        with pytest.raises(botocore.exceptions.ReadTimeoutError):  # synchronous botocore: the same either way
            boto.get_object(Bucket=s3_bucket, Key="x.rec", Range="bytes=0-99999")["Body"].read()
    http_proxy.faults.stall_next(1, 0.6)
    with pytest.raises(requests.exceptions.ReadTimeout):
        requests_session.get(url, timeout=0.2)
    http_proxy.faults.stall_next(1, 0.6, after=1000)  # mid-body, requests calls the same timeout a ConnectionError
    with pytest.raises(requests.exceptions.ConnectionError, match="Read timed out") as mid_body:
        requests_session.get(url, timeout=0.2).content  # noqa: B018
    assert not isinstance(mid_body.value, requests.exceptions.Timeout)


def test_stop_ends_a_stall_and_joins_every_thread(http_server: HTTPServer, requests_session: Any) -> None:
    import requests

    http_server.put("x.rec", DATA)
    proxy = HTTPProxy(http_server).start()
    url = proxy.url_for("x.rec")
    assert requests_session.get(url).content == DATA  # an idle keep-alive connection stays open
    proxy.faults.stall_next(1, 25.0, after=1000)
    outcome: list[Any] = []

    def stalled() -> None:
        try:
            with requests.Session() as own:
                outcome.append(own.get(url, timeout=30).content)
        except requests.RequestException as exc:
            outcome.append(exc)

    client = threading.Thread(target=stalled)
    client.start()
    # until the head and the first 1000 body bytes are sent (the stall is logged as soon as the request is taken)
    wait_for(lambda: any(r.fault == "stall" and r.sent >= 1000 for r in proxy.log), "the stall mid-body",
             seconds=10)
    assert len(_proxy_threads()) == 3  # accept loop, the idle connection, the stalled one
    started = time.monotonic()
    proxy.stop()
    assert time.monotonic() - started < 5
    client.join(10)
    assert isinstance(outcome[0], requests.exceptions.ChunkedEncodingError)  # cut off mid-body by the stop
    assert _proxy_threads() == []
    proxy.stop()  # twice is harmless


# ----------------------------------------------------------------------------------------------------------------
# deterministic plan and random profiles


def test_fault_plan_counts_criteria_and_always(http_server: HTTPServer, http_proxy: HTTPProxy) -> None:
    http_server.put("a.rec", DATA)
    http_server.put("b.rec", DATA)
    faults = http_proxy.faults
    faults.fail_next(2, path_contains="a.rec", has_range=True)
    faults.fail_always(404, path="/b.rec", access="read", match=lambda r: r.method == "GET")
    assert [remaining for _, remaining in faults.pending] == [2, None]

    def status(path: str, headers: dict[str, str] | None = None) -> int:
        return _raw(http_proxy.port, "GET", path, headers)[0]

    assert status("/a.rec") == 200  # no Range: not matched
    assert [status("/a.rec", {"Range": "bytes=0-9"}) for _ in range(3)] == [503, 503, 206]
    assert [status("/b.rec") for _ in range(3)] == [404, 404, 404]
    assert _raw(http_proxy.port, "HEAD", "/b.rec")[0] == 200
    faults.clear()
    assert status("/b.rec") == 200
    assert http_proxy.log.count(fault="status") == 5

    with pytest.raises(TypeError, match="unknown request field"):
        faults.fail_next(1, methd="GET")
    with pytest.raises(TypeError, match="before the response exists"):
        faults.fail_next(1, status_code=500, upstream_status=200)
    with pytest.raises(ValueError):
        faults.fail_next(0)
    with pytest.raises(ValueError):
        ProxyFault("stall", seconds=1000)


def _drive(proxy: FaultProxy, paths: list[str]) -> list[tuple[str, str | None]]:
    """One GET per path with http.client, errors swallowed; returns (path, fault) per request the proxy logged."""
    mark = proxy.log.mark()
    for path in paths:
        with contextlib.suppress(OSError, http.client.HTTPException):
            _raw(proxy.port, "GET", path)
    return [(r.path, r.fault) for r in proxy.log.since(mark)]


def test_profiles_are_reproducible_for_a_seed(http_server: HTTPServer, http_proxy: HTTPProxy) -> None:
    for i in range(6):
        http_server.put(f"f{i}.rec", DATA[: 10_000 + i])
    paths = [f"/f{i % 6}.rec" for i in range(48)]
    profile = http_proxy.use_profile("transient_mix", seed=7, stall_seconds=0.01, stall_every=10)
    assert profile.p_5xx == 0.2 and profile.stall_seconds == 0.01
    first = _drive(http_proxy, paths)
    kinds = {fault for _, fault in first}
    assert {"status", "reset", "truncate", "stall", None} <= kinds, first

    http_proxy.use_profile(profile, seed=7)  # the same seed, counts started over: the same faults
    assert _drive(http_proxy, paths) == first
    http_proxy.use_profile(profile, seed=8)
    assert _drive(http_proxy, paths) != first

    # the draws follow the requests, not their order: the k-th GET of each file gets the same fault reversed
    http_proxy.use_profile(profile, seed=7)
    reordered = _drive(http_proxy, sorted(paths))

    def per_file(run: list[tuple[str, str | None]]) -> dict[str, list[str | None]]:
        out: dict[str, list[str | None]] = {}
        for path, fault in run:
            out.setdefault(path, []).append(fault)
        return out

    assert per_file(reordered) == per_file(first)


def test_profile_limits_and_presets(webhdfs_server: WebHDFSServer, webhdfs_proxy: WebHDFSProxy) -> None:
    require("fsspec", "requests", purpose="fsspec's WebHDFS")
    import requests

    assert set(PROFILES) == {"clean", "latency", "slow_link", "storm_5xx", "resets", "truncations", "cut_heads",
                             "stalls", "transient_mix"}
    with pytest.raises(ValueError, match="add up"):
        FaultProfile(p_5xx=0.9, p_reset=0.2)
    fs = webhdfs_proxy.filesystem()
    webhdfs_proxy.use_profile(FaultProfile(p_5xx=1.0), only="write")  # every write answered 503, no read
    webhdfs_server.local_path("/r.rec").write_bytes(DATA)
    assert fs.cat_file("/r.rec", 0, 100) == DATA[:100]
    with pytest.raises(requests.HTTPError, match="503"):
        fs.mkdir("/d")
    assert {r.access for r in webhdfs_proxy.log.filter(fault="status")} == {"write"}

    webhdfs_proxy.use_profile("storm_5xx", p_5xx=1.0, where={"role": "datanode"})
    assert b"RetriableException" in fs.cat_file("/r.rec", 0, 100)  # fsspec returns the data node's error as data
    assert webhdfs_proxy.log.filter(fault="status")[-1].role == "datanode"
    webhdfs_proxy.clear_profile()
    assert fs.cat_file("/r.rec", 0, 100) == DATA[:100]


# ----------------------------------------------------------------------------------------------------------------
# odds and ends


def test_upstream_gone_is_a_502(requests_session: Any) -> None:
    with socket.socket() as placeholder:
        placeholder.bind((LOOPBACK, 0))
        port = placeholder.getsockname()[1]  # nothing listens here once it is closed
    with FaultProxy(f"http://{LOOPBACK}:{port}") as proxy:
        answer = requests_session.get(proxy.url + "/x")
        assert answer.status_code == 502
        record = proxy.log.records[0]
        assert record.status == 502 and record.upstream_status is None and "Connection refused" in record.error


def test_log_records_and_summary(s3_proxy: S3Proxy, s3_bucket: str) -> None:
    status, _, _ = _raw(s3_proxy.port, "GET", f"/{s3_bucket}/k?x-id=GetObject", {"Range": "bytes=2-8"})
    record: ProxiedRequest = s3_proxy.log.records[0]  # (no such key: moto's answer does not matter here)
    assert (record.role, record.bucket, record.key, record.query, record.byte_range) == (
        "s3", s3_bucket, "k", {"x-id": "GetObject"}, (2, 8))
    assert (record.fault, record.access, record.status, record.upstream_status) == (None, "read", status, status)
    assert "s3#0.0 GET" in s3_proxy.log.summary()
    options = s3_proxy.storage_options(default_cache_type="none")
    assert options == {**s3_proxy.server.storage_options(default_cache_type="none"), "endpoint_url": s3_proxy.url}
