"""``mxrec convert --engine ray`` on the real local Ray cluster: each Ray task converts a range of the ``.idx``;
the shards are the ones a local conversion writes, and the set converts back byte for byte."""

from __future__ import annotations

from pathlib import Path

import pytest

import mxrec
from testkit import GOLDEN

pytestmark = pytest.mark.slow

SUB = GOLDEN / "im2rec" / "default" / "sub.rec"


def test_ray_tasks_write_the_local_shards(mray, tmp_path):
    local = mxrec.convert(SUB, tmp_path / "local", target_format="webdataset", shard_size=10)
    seen = []
    on_ray = mxrec.convert(SUB, tmp_path / "ray", target_format="webdataset", shard_size=10, engine="ray",
                           progress=lambda done, total: seen.append((done, total)))
    assert [Path(f).name for f in on_ray.files] == [Path(f).name for f in local.files]
    for mine, theirs in zip(on_ray.files, local.files, strict=True):
        assert Path(mine).read_bytes() == Path(theirs).read_bytes()
    assert seen[-1] == (50, 50)
    assert not list((tmp_path / "ray").glob(".*"))  # the staging folder is gone
    back = tmp_path / "back.rec"
    mxrec.convert(on_ray.manifest, back)
    assert back.read_bytes() == SUB.read_bytes()
