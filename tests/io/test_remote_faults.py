"""The faults real object stores and servers send, against real loopback servers (issue 18 §3).

* S3 throttling and internal errors, as S3 answers them (an XML error document whose message does not name the
  status: s3fs turns 503 SlowDown into ``OSError(EBUSY)``, 500 InternalError into ``OSError(EREMOTEIO)``), are
  retried with back-off;
* an HTTP server that ignores ``Range`` is named at its first answer; ``http(s)://`` outputs are refused before
  any work;
* an unreachable host, or ``hdfs://`` without a JVM, is one line on stderr naming the URL and the real cause.
"""

from __future__ import annotations

import functools
import socket
import subprocess
import sys
import time
from typing import Any

import pytest

from mxrec.errors import RemoteError
from mxrec.io.opener import RecordReader
from mxrec.io.writer import RecordWriter
from mxrec.storage.faults import is_transient
from mxrec.storage.settings import ENV_REQUESTS
from testkit.cli import mxrec_env
from testkit.datasets import random_payloads, upload_indexed, write_indexed
from testkit.servers import HTTPServer

N = 300


@functools.cache
def records() -> list[bytes]:
    return random_payloads(N, 700, seed=5)


@pytest.fixture(scope="module")
def local(tmp_path_factory) -> Any:
    path = tmp_path_factory.mktemp("faults") / "train.rec"
    write_indexed(path, range(N), records())
    return path


@pytest.fixture
def s3_data(s3_server: Any, s3_bucket: str, local: Any) -> tuple[str, dict]:
    return upload_indexed(s3_server, s3_bucket, local), s3_server.storage_options()


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def mxrec(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mxrec", *args], capture_output=True, text=True,
                          env=dict(mxrec_env(), **(env or {})), timeout=120)


# -- S3's own error documents


def test_s3_slowdown_and_internal_error_are_retried(s3_server, s3_data, local):
    """Regression: s3fs raises OSError(EBUSY, 'Please reduce your request rate.') for 503 SlowDown, which was not
    retried (a read failed at the first 503)."""
    url, options = s3_data
    reader = RecordReader(url, storage_options=options)
    s3_server.faults.fail_next(2, status=503, method="GET", key="train.rec")
    s3_server.faults.fail_next(2, status=500, method="GET", key="train.rec")
    assert reader.read_batch([3, 250]) == [records()[3], records()[250]]
    answers = s3_server.log.filter(method="GET", key="train.rec")
    assert [r.status for r in answers] == [503, 503, 500, 500, 206]

    s3_server.faults.fail_next(3, status=503, method="HEAD", key="train.rec")
    again = RecordReader(url, storage_options=options)  # the size request is retried too
    assert again[7] == records()[7]


def test_s3fs_translated_errors_are_classified():
    errno_busy = OSError(16, "Please reduce your request rate.")  # what s3fs raises for 503 SlowDown
    remote_io = OSError(121, "We encountered an internal error. Please try again.")  # 500 InternalError
    assert is_transient(errno_busy) and is_transient(remote_io)
    assert not is_transient(FileNotFoundError(2, "The specified key does not exist."))
    assert not is_transient(PermissionError("Access Denied"))


@pytest.mark.slow
def test_s3_persistent_slowdown_fails_bounded_and_names_the_url(s3_server, s3_data):
    url, options = s3_data
    reader = RecordReader(url, storage_options=options)
    s3_server.faults.fail_always(503, method="GET", key="train.rec")
    start = time.monotonic()
    expected = (rf"{url}: read bytes \d+\.\.\d+ failed after 6 attempts in [\d.]+ s: OSError: .*Please reduce your "
                r"request rate.*HTTP 503")
    with pytest.raises(RemoteError, match=expected) as info:
        reader[7]
    assert "\n" not in str(info.value)
    assert time.monotonic() - start < 20
    assert len(s3_server.log.filter(method="GET", key="train.rec")) == 6  # attempts are requests: 1 try, 5 retries


# -- HTTP


def test_http_server_ignoring_range_is_named_at_the_first_answer(tmp_path, local):
    """Regression: a server answering 200 with the whole body was fetched 6 times, then reported as 'truncated
    answer, or the file changed'."""
    with HTTPServer(tmp_path / "www", honour_range=False) as server:
        url = server.put("d/train.rec", local.read_bytes())
        server.put("d/train.idx", local.with_suffix(".idx").read_bytes())
        reader = RecordReader(url)
        mark = server.log.mark()
        with pytest.raises(RemoteError, match="does not honour Range requests.*the whole file") as info:
            reader.read_batch([10, 11])
        assert url in str(info.value) and "truncated" not in str(info.value)
        got = server.log.since(mark, method="GET")
        assert len(got) == 1 and got[0].status == 200


def test_writing_to_http_is_refused_before_any_work(http_server, local, tmp_path, monkeypatch):
    """Regression: an http:// output was spooled whole, then refused by the server at close()."""
    url = http_server.put("d/train.rec", local.read_bytes())
    spool = tmp_path / "spool"
    spool.mkdir()
    monkeypatch.setenv("MXREC_SPOOL_DIR", str(spool))
    with pytest.raises(RemoteError, match=r"cannot write to http:// URLs"):
        RecordWriter(f"{http_server.url}/d/out.rec", index=True)
    assert list(spool.iterdir()) == []
    mark = http_server.log.mark()
    done = mxrec("index", url, env={"MXREC_SPOOL_DIR": str(spool)})
    assert done.returncode == 2 and "cannot write to http:// URLs" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert http_server.log.since(mark) == []  # refused before the scan: not one request
    extract = mxrec("extract", url, f"{http_server.url}/out")
    assert extract.returncode == 2 and "cannot write to http:// URLs" in extract.stderr
    assert http_server.log.since(mark) == []


# -- unreachable hosts, no JVM: one line naming the URL and the cause


def test_unreachable_hosts_are_one_line_naming_url_and_cause(tmp_path, mxrec_cli, monkeypatch):
    """Regression: an unreachable webhdfs:// host was reported as 'no .lst file starts with the prefix',
    'matches no .rec file' or 'missing'. (Two attempts each: what is said after the last is the point.)"""
    monkeypatch.setenv(ENV_REQUESTS, "attempts=2,backoff=0.01")
    base = f"webhdfs://127.0.0.1:{closed_port()}/d"
    cases = [("pack", f"{base}/train", str(tmp_path)), ("verify", f"{base}/*.rec", "--no-progress"),
             ("info", f"{base}/train"), ("info", f"{base}/train.rec"),
             ("info", f"http://127.0.0.1:{closed_port()}/d/train.rec")]
    for args in cases:
        done = mxrec_cli(*args)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1, (args, done.stderr)
        assert args[1].split("*")[0].rsplit("/", 1)[0] in lines[0] and "cannot connect" in lines[0], (args, lines)
        for wrong in ("no .lst file", "matches no .rec", "missing"):
            assert wrong not in lines[0]


def test_hdfs_without_a_jvm_is_one_line(tmp_path):
    """Regression: pyarrow's failure to load libjvm (one line per path tried, ~89) reached stderr whole."""
    pytest.importorskip("pyarrow.fs")
    url = "hdfs://namenode:8020/d/train.rec"
    done = mxrec("info", url, env={"JAVA_HOME": str(tmp_path), "ARROW_LIBHDFS_DIR": str(tmp_path)})
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert url in lines[0] and "no Java VM" in lines[0]


def test_webhdfs_and_http_5xx_are_retried(webhdfs_server, http_server, local):
    """What WebHDFS (requests' HTTPError) and fsspec's HTTP (aiohttp's ClientResponseError) raise for a 503."""
    webhdfs_server.local_path("/d").mkdir(parents=True)
    webhdfs_server.local_path("/d/train.rec").write_bytes(local.read_bytes())
    webhdfs_server.local_path("/d/train.idx").write_bytes(local.with_suffix(".idx").read_bytes())
    webhdfs_server.faults.fail_next(2, 503, role="namenode", op="OPEN")
    reader = RecordReader(f"webhdfs://127.0.0.1:{webhdfs_server.port}/d/train.rec",
                          storage_options={"user": webhdfs_server.user})
    assert reader.read_batch([0, 299]) == [records()[0], records()[299]]
    assert [r.status for r in webhdfs_server.log.filter(role="namenode", op="OPEN")][:2] == [503, 503]

    url = http_server.put("d/train.rec", local.read_bytes())
    http_server.put("d/train.idx", local.with_suffix(".idx").read_bytes())
    reader = RecordReader(url)
    http_server.faults.fail_next(2, 503, method="GET", path="/d/train.rec")
    assert reader.read_batch([5]) == [records()[5]]
    assert [r.status for r in http_server.log.filter(method="GET", path="/d/train.rec")] == [503, 503, 206]


def test_library_log_records_stay_off_stderr(tmp_path):
    """Regression: gs:// without a network printed ~100 lines: gcsfs and google-auth log warnings and tracebacks
    (``logger.exception``) that Python prints when nobody handles them. (Checked by hand with gcsfs: 109 lines
    before, 1 after; gcsfs is not among the test dependencies, its fsspec pin conflicts with s3fs's.)"""
    script = tmp_path / "noisy.py"
    script.write_text(
        "import logging, sys\n"
        "import mxrec.cli.info as info\n"
        "from mxrec.cli import main\n"
        "from mxrec.errors import RemoteError\n"
        "def run(args):\n"
        "    log = logging.getLogger('gcsfs')\n"
        "    log.warning('Could not determine bucket type for bucket name b: no credentials')\n"
        "    try:\n"
        "        raise OSError('Cannot connect to host storage.googleapis.com:443')\n"
        "    except OSError as exc:\n"
        "        log.exception('_request out of retries on exception: %s', exc)\n"
        "    raise RemoteError(args.rec, 'asking for the file failed: cannot connect')\n"
        "info.run = run\n"
        "sys.exit(main(['info', 'gs://b/d/train.rec']))\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=mxrec_env(), timeout=60)
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [
        "mxrec info: error: gs://b/d/train.rec: asking for the file failed: cannot connect"], done.stderr
    shown = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60,
                           env=dict(mxrec_env(), MXREC_TRACEBACK="1"))
    assert "out of retries" in shown.stderr  # asked for: everything
