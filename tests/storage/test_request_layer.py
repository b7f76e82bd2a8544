"""The request layer (:mod:`mxrec.storage.remote`) through the fault proxy, against the real loopback servers.

Every remote operation is attempted under one policy, each attempt one request (counted here by the proxy), only
transient failures retried, stalls bounded by the policy's time-outs, and a failure is one error naming the URL
and the real cause. The classification (:func:`~mxrec.storage.faults.is_transient`) is held to what each back-end
really raises for each fault the proxy injects.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from mxrec.errors import RemoteError, RemoteNotFoundError
from mxrec.io.lists import read_list
from mxrec.storage import remote
from mxrec.storage.faults import is_transient
from mxrec.storage.filesystem import filesystem
from mxrec.storage.settings import RequestPolicy, Storage
from testkit.proxy import ProxyFault

DATA = bytes(range(256)) * 400  # 100 KiB
FAST = RequestPolicy(attempts=4, backoff=0.01, max_backoff=0.05, connect_timeout=2, read_timeout=0.5, deadline=20)
STALL = 8.0  # seconds a stalled answer is held: sixteen read time-outs


@pytest.fixture
def s3(s3_server: Any, s3_bucket: str, s3_proxy: Any) -> tuple[str, Storage]:
    s3_server.put_object(s3_bucket, "x.rec", DATA)
    return f"s3://{s3_bucket}/x.rec", Storage(options=s3_proxy.storage_options(), policy=FAST)


@pytest.fixture
def http(http_server: Any, http_proxy: Any) -> tuple[str, Storage]:
    http_server.put("x.rec", DATA)
    return http_proxy.url_for("x.rec"), Storage(policy=FAST)


@pytest.fixture
def hdfs(webhdfs_server: Any, webhdfs_proxy: Any) -> tuple[str, Storage]:
    webhdfs_server.local_path("/x.rec").write_bytes(DATA)
    return f"webhdfs://127.0.0.1:{webhdfs_proxy.port}/x.rec", Storage(options={"user": webhdfs_server.user},
                                                                     policy=FAST)


# -- attempts are requests


def test_http_503_on_the_size_request_is_retried_and_never_not_found(http, http_proxy):
    """Was: fsspec's ``info`` turned a 503 into ``FileNotFoundError``: "no such file", never retried."""
    url, storage = http
    http_proxy.faults.fail_next(2, 503, method="HEAD")
    assert remote.stat(url, storage).size == len(DATA)
    assert [r.status for r in http_proxy.log.filter(method="HEAD")] == [503, 503, 200]

    http_proxy.log.clear()
    http_proxy.faults.fail_always(503, method="HEAD")
    with pytest.raises(RemoteError) as caught:
        remote.stat(url, storage)
    assert not isinstance(caught.value, RemoteNotFoundError)
    assert url in str(caught.value) and "503" in str(caught.value) and "after 4 attempts" in str(caught.value)
    assert http_proxy.log.count(method="HEAD") == FAST.attempts  # an attempt is one request


@pytest.mark.parametrize("store", ["s3", "http", "hdfs"])
def test_attempts_counted_as_requests(store, request):
    """Was: "retried up to 5 times" meant 12 requests on S3 (botocore's and s3fs's retries multiplied)."""
    url, storage = request.getfixturevalue(store)
    proxy = request.getfixturevalue({"s3": "s3_proxy", "http": "http_proxy", "hdfs": "webhdfs_proxy"}[store])
    where = {"role": "namenode", "op": "OPEN"} if store == "hdfs" else {"method": "GET"}
    proxy.faults.fail_always(503, **where)
    with pytest.raises(RemoteError, match=r"read bytes 10\.\.20 failed after 4 attempts"):
        remote.read_ranges(url, [(10, 20)], storage)
    assert proxy.log.count(**where) == FAST.attempts


def test_a_permanent_failure_is_not_retried(s3, s3_proxy):
    url, storage = s3
    s3_proxy.faults.fail_always(403, method="GET")
    with pytest.raises(RemoteError, match="access denied"):
        remote.read_ranges(url, [(0, 10)], storage)
    assert s3_proxy.log.count(method="GET") == 1


# -- every operation retried, also when the body fails after the head


def test_every_s3_operation_is_retried(s3, s3_proxy, s3_bucket, tmp_path):
    """Was: existence checks, listings, uploads, moves and deletes got at most botocore's one extra attempt, and
    none when a body failed after the headers."""
    url, storage = s3
    faults, log = s3_proxy.faults, s3_proxy.log
    faults.fail_next(1, 503, method="HEAD", key="x.rec")
    assert remote.exists(url, storage)
    faults.reset_next(1, after=20, method="GET", key=None)  # a listing's body cut after its head
    assert remote.glob(f"s3://{s3_bucket}/*.rec", storage) == [url]
    local = tmp_path / "up.bin"
    local.write_bytes(DATA[:5000])
    faults.fail_next(1, 500, method="PUT", key="up.bin")
    remote.upload(local, f"s3://{s3_bucket}/up.bin", storage)
    faults.fail_next(1, 503, method="PUT", key="moved.bin")  # the server-side copy
    remote.move(f"s3://{s3_bucket}/up.bin", f"s3://{s3_bucket}/moved.bin", storage)
    faults.fail_next(1, 503, method="DELETE", key="moved.bin")
    remote.remove(f"s3://{s3_bucket}/moved.bin", storage)
    faults.truncate_next(1, method="GET", key="x.rec", has_range=False)
    assert remote.read_whole(url, storage) == DATA
    assert faults.pending == []  # every fault met a request
    assert [r.status for r in log.filter(key="moved.bin", method="PUT")] == [503, 200]
    assert s3_proxy.server.list_keys(s3_bucket) == ["x.rec"]


def test_a_whole_read_is_checked_against_the_size(hdfs, webhdfs_proxy):
    url, storage = hdfs
    webhdfs_proxy.faults.truncate_next(1, role="datanode")
    assert remote.read_whole(url, storage) == DATA
    assert [r.fault for r in webhdfs_proxy.log.filter(role="datanode")] == ["truncate", None]


def test_a_lst_read_cut_short_is_retried_and_names_the_url(http_server, http_proxy, monkeypatch):
    """Was: a ``.lst`` read cut short printed a bare ``ClientPayloadError`` naming no URL. (The policy from
    ``$MXREC_REQUESTS``, as a command has it.)"""
    monkeypatch.setenv("MXREC_REQUESTS", FAST.describe())
    text = "".join(f"{i}\t{i % 3}.000000\timg/{i:04d}.jpg\n" for i in range(2000))
    http_server.put("train.lst", text.encode())
    url = http_proxy.url_for("train.lst")
    http_proxy.faults.truncate_next(1, method="GET")
    entries = read_list(url)
    assert [e.index for e in entries] == list(range(2000)) and entries[-1].path == "img/1999.jpg"
    assert [r.fault for r in http_proxy.log.filter(method="GET")][:2] == ["truncate", None]

    http_proxy.faults.truncate_next(None, method="GET")
    with pytest.raises(RemoteError) as caught:
        read_list(url)
    assert str(caught.value).startswith(url) and "after 4 attempts" in str(caught.value)


# -- stalls cost an attempt, never a hang


@pytest.mark.parametrize("store", ["s3", "http", "hdfs"])
@pytest.mark.parametrize("after", [None, 1000], ids=["before-head", "mid-body"])
def test_a_stall_is_bounded_by_the_read_timeout(store, after, request):
    """Was: one 110 s silence: S3 recovered after s3fs's read time-out, HTTP waited up to aiohttp's 300 s, WebHDFS
    forever (requests called without a time-out)."""
    url, storage = request.getfixturevalue(store)
    proxy = request.getfixturevalue({"s3": "s3_proxy", "http": "http_proxy", "hdfs": "webhdfs_proxy"}[store])
    where = {"role": "datanode"} if store == "hdfs" else {"method": "GET"}
    proxy.faults.stall_next(1, STALL, after=after, **where)
    began = time.monotonic()
    assert remote.read_ranges(url, [(0, 50_000)], storage) == [DATA[:50_000]]
    assert time.monotonic() - began < STALL / 2  # the stalled request given up after read_timeout, asked again
    stalled = proxy.log.filter(fault="stall")
    assert len(stalled) == 1 and len(proxy.log.filter(**where)) == 2


# -- what each back-end raises for each fault is classified right


def _raw(store: str, url: str, storage: Storage) -> Any:
    """One request by the back-end itself, without the request layer (its own retries are off)."""
    fs, path = filesystem(url, storage)
    return lambda: fs.cat_file(path, start=0, end=50_000)


FAULTS = [ProxyFault("status", status=503), ProxyFault("status", status=500), ProxyFault("reset", after=1000),
          ProxyFault("reset", after=None), ProxyFault("truncate"), ProxyFault("stall", seconds=2.0)]


@pytest.mark.parametrize("store", ["s3", "http"])
def test_what_the_back_ends_raise_is_classified(store, request):
    url, storage = request.getfixturevalue(store)
    proxy = request.getfixturevalue(f"{store}_proxy")
    call = _raw(store, url, storage)
    for fault in FAULTS:
        proxy.faults.arm(fault, 2, method="GET")  # (aiohttp re-sends once a request whose connection failed)
        with pytest.raises(Exception) as caught:
            call()
        assert is_transient(caught.value), f"{fault.describe()}: {caught.value!r}"
        proxy.faults.clear()
    for status in (404, 403):
        proxy.faults.fail_next(1, status, method="GET")
        with pytest.raises(Exception) as caught:
            call()
        assert not is_transient(caught.value), f"{status}: {caught.value!r}"


def test_what_webhdfs_raises_is_classified(hdfs, webhdfs_proxy):
    """Regression: fsspec raises a bare ``RuntimeError`` for a name node's 500 (a ``RemoteException``): it was
    taken for permanent, and one 500 failed a read."""
    url, storage = hdfs
    fs, path = filesystem(url, storage)
    for fault, role in [(ProxyFault("status", status=503), "namenode"), (ProxyFault("status", status=500), "namenode"),
                        (ProxyFault("status", status=500), "datanode"), (ProxyFault("reset", after=1000), "datanode"),
                        (ProxyFault("truncate"), "datanode"), (ProxyFault("stall", seconds=2.0), "datanode"),
                        (ProxyFault("stall", seconds=2.0), "namenode")]:
        webhdfs_proxy.faults.arm(fault, 1, role=role)
        with pytest.raises(Exception) as caught:
            fs.cat_file(path, start=0, end=50_000)
        assert is_transient(caught.value), f"{fault.describe()} at the {role}: {caught.value!r}"
    with pytest.raises(Exception) as caught:
        fs.cat_file("/missing.rec", start=0, end=10)
    assert not is_transient(caught.value)
