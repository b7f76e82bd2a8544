"""pytest plugin: testkit's servers, fault proxies and rank launcher as fixtures.

Register with ``pytest_plugins = ["testkit.fixtures"]`` in the top-level conftest.

Fixtures (each skips, naming the missing package, when an optional dependency is not installed):

===================  ========  ===========================================================================
fixture              scope     what
===================  ========  ===========================================================================
s3_server_session    session   the one :class:`~testkit.servers.S3Server` (moto) for the run; starting moto
                               costs about a second, so it is shared
s3_server            function  the same server, its log cleared and faults disarmed before the test, faults
                               disarmed after it; buckets persist, so use ``s3_bucket``
s3_bucket            function  a fresh, empty bucket's name; emptied and deleted after the test
s3_fs                function  a fresh ``s3fs.S3FileSystem`` on the server (``storage_options()``: no instance
                               or listings cache)
http_server          function  :class:`~testkit.servers.HTTPServer` serving ``tmp_path / "www"``
http_fs              function  a fresh fsspec ``HTTPFileSystem`` (aiohttp), ``skip_instance_cache=True``
webhdfs_server       function  :class:`~testkit.servers.WebHDFSServer` over ``tmp_path / "hdfs"``
webhdfs_fs           function  a fresh fsspec ``WebHDFS`` filesystem on it
s3_proxy             function  :class:`~testkit.proxy.S3Proxy`, a fault-injecting proxy before ``s3_server``;
                               ``storage_options()`` / ``filesystem()`` for s3fs through it
http_proxy           function  :class:`~testkit.proxy.HTTPProxy` before ``http_server``; ``url_for(name)``
webhdfs_proxy        function  :class:`~testkit.proxy.WebHDFSProxy`, proxies before the name node and the
                               data node of ``webhdfs_server`` (redirects rewritten to the latter);
                               ``filesystem_kwargs()`` / ``filesystem()`` for fsspec through them
dist_ranks           function  ``run_ranks`` from :mod:`testkit.ranks` with its files in ``tmp_path``
browser              module    a headless chromium (:func:`testkit.browser.launch`): skips without one
===================  ========  ===========================================================================

Every server and proxy is stopped at teardown, also when the test fails; a proxy whose connection threads met an
unexpected exception (a proxy bug, not an injected fault) fails the test at teardown. Also registers the ``slow``
marker.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import os
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from testkit.proxy import HTTPProxy, S3Proxy, WebHDFSProxy
from testkit.servers import LOOPBACK, HTTPServer, S3Server, WebHDFSServer

_PIP_NAMES = {"flask": "moto[server]", "flask_cors": "moto[server]", "werkzeug": "moto[server]", "moto": "moto[server]"}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: takes more than about 5 s; deselect with -m 'not slow'")


def require(*modules: str, purpose: str) -> None:
    """Skip the requesting test, naming what to install, unless every module in ``modules`` imports."""
    missing = []
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(_PIP_NAMES.get(name, name))
    if missing:
        pytest.skip(f"{purpose} needs {', '.join(dict.fromkeys(missing))} (not installed)")


@contextlib.contextmanager
def _loopback_skips_proxies() -> Iterator[None]:
    """requests and botocore honour ``*_proxy`` variables; make sure none of them intercepts 127.0.0.1."""
    if not any(os.environ.get(v) for v in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY",
                                           "all_proxy", "ALL_PROXY")):
        yield
        return
    with pytest.MonkeyPatch.context() as mp:
        for name in ("NO_PROXY", "no_proxy"):
            mp.setenv(name, ",".join(filter(None, [os.environ.get(name, ""), LOOPBACK, "localhost"])))
        yield


# -- S3


@pytest.fixture(scope="session")
def s3_server_session() -> Iterator[S3Server]:
    require("moto", "flask", "flask_cors", "werkzeug", "boto3", purpose="the S3 test server")
    with _loopback_skips_proxies(), S3Server() as server:
        yield server


@pytest.fixture
def s3_server(s3_server_session: S3Server) -> Iterator[S3Server]:
    s3_server_session.reset()
    try:
        yield s3_server_session
    finally:
        s3_server_session.faults.clear()


@pytest.fixture
def s3_bucket(s3_server: S3Server) -> Iterator[str]:
    bucket = s3_server.create_bucket()
    try:
        yield bucket
    finally:
        try:
            s3_server.delete_bucket(bucket)
        except Exception as exc:  # cleanup only frees memory; it must not turn a test's result into an error
            warnings.warn(f"could not delete test bucket {bucket}: {exc}", stacklevel=1)


@pytest.fixture
def s3_fs(s3_server: S3Server) -> Any:
    require("s3fs", purpose="s3fs access to the S3 test server")
    import s3fs

    return s3fs.S3FileSystem(**s3_server.storage_options())


# -- HTTP


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[HTTPServer]:
    with _loopback_skips_proxies(), HTTPServer(tmp_path / "www") as server:
        yield server


@pytest.fixture
def http_fs() -> Any:
    require("fsspec", "aiohttp", purpose="fsspec's HTTP file system")
    import fsspec

    return fsspec.filesystem("http", skip_instance_cache=True)


# -- WebHDFS


@pytest.fixture
def webhdfs_server(tmp_path: Path) -> Iterator[WebHDFSServer]:
    with _loopback_skips_proxies(), WebHDFSServer(tmp_path / "hdfs") as server:
        yield server


@pytest.fixture
def webhdfs_fs(webhdfs_server: WebHDFSServer) -> Any:
    require("fsspec", "requests", purpose="fsspec's WebHDFS file system")
    return webhdfs_server.filesystem()


# -- fault-injecting proxies (testkit.proxy)


def _proxy_errors(errors: list[str]) -> None:
    if errors:
        pytest.fail("the fault proxy met unexpected exceptions:\n" + "\n".join(errors), pytrace=False)


@pytest.fixture
def s3_proxy(s3_server: S3Server) -> Iterator[S3Proxy]:
    with S3Proxy(s3_server) as proxy:
        yield proxy
    _proxy_errors(proxy.errors)


@pytest.fixture
def http_proxy(http_server: HTTPServer) -> Iterator[HTTPProxy]:
    with HTTPProxy(http_server) as proxy:
        yield proxy
    _proxy_errors(proxy.errors)


@pytest.fixture
def webhdfs_proxy(webhdfs_server: WebHDFSServer) -> Iterator[WebHDFSProxy]:
    with WebHDFSProxy(webhdfs_server) as proxy:
        yield proxy
    _proxy_errors(proxy.errors)


# -- distributed ranks


@pytest.fixture
def dist_ranks(tmp_path: Path) -> Callable[..., list[Any]]:
    # find_spec, not import: the ranks import torch themselves, the test process need not pay for it
    if importlib.util.find_spec("torch") is None:
        pytest.skip("launching torch.distributed ranks needs torch (not installed)")
    from testkit.ranks import run_ranks

    return functools.partial(run_ranks, workdir=tmp_path / "ranks")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from testkit.browser import launch

    with launch() as launched:
        yield launched
