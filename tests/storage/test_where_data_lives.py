"""The storage functions that answer for a local path and a URL alike, so that no consumer asks ``is_url`` itself
(issue 25 §4): :func:`local_or_none`, :func:`is_pattern`, :func:`files.size`, :func:`mapped_range` and
:meth:`Commit.upload_folder`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mxrec.storage.commit import Commit
from mxrec.storage.files import size
from mxrec.storage.filesystem import is_pattern, local_or_none
from mxrec.storage.memory_map import mapped_range

DATA = bytes(range(256)) * 64


def test_local_or_none_gives_the_path_open_takes_and_none_for_a_url(tmp_path: Path) -> None:
    assert local_or_none(tmp_path / "a.rec") == str(tmp_path / "a.rec")
    assert local_or_none(f"file://{tmp_path}/a.rec") == f"{tmp_path}/a.rec"
    assert local_or_none("rel/a.rec") == "rel/a.rec"
    for url in ("s3://bucket/a.rec", "http://127.0.0.1:9/a.rec", "webhdfs://127.0.0.1:9/a.rec"):
        assert local_or_none(url) is None


@pytest.mark.parametrize(("path", "pattern"), [
    ("/d/shard-*.rec", True), ("/d/x?.rec", True), ("/d/[ab].rec", True), ("/d/x.rec", False),
    ("s3://b/shard-*.rec", True), ("s3://b/x.rec", False), ("gs://b/{0..3}.rec", False),
])
def test_is_pattern_looks_past_a_urls_scheme(path: str, pattern: bool) -> None:
    assert is_pattern(path) is pattern


def test_size_of_a_local_file_and_of_a_url(tmp_path: Path, http_server: Any) -> None:
    (tmp_path / "x.rec").write_bytes(DATA)
    assert size(str(tmp_path / "x.rec")) == len(DATA)
    assert size(http_server.put("x.rec", DATA[:1000])) == 1000
    with pytest.raises(FileNotFoundError):
        size(str(tmp_path / "missing.rec"))


def test_mapped_range_maps_a_local_file_whole_and_fetches_only_the_range_of_a_url(tmp_path: Path,
                                                                                    http_server: Any) -> None:
    (tmp_path / "x.rec").write_bytes(DATA)
    with mapped_range(tmp_path / "x.rec", 100, 300) as (buf, base):
        assert base == 0 and buf[:] == DATA
    url = http_server.put("x.rec", DATA)
    mark = http_server.log.mark()
    with mapped_range(url, 100, 300) as (buf, base):
        assert base == 100 and bytes(buf) == DATA[100:300]
    ranges = [r.range for r in http_server.log.since(mark) if r.range]
    assert ranges == ["bytes=100-299"], http_server.log.summary()


def test_upload_folder_is_the_staging_folder_of_a_url_output_only(tmp_path: Path) -> None:
    assert Commit(tmp_path / "out.rec").upload_folder() is None
    commit = Commit("s3://bucket/out.rec")
    assert commit.upload_folder() == commit.staging_folder()
    assert commit.upload_folder().startswith("s3://bucket/")
