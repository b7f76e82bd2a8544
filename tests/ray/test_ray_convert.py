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
    assert not list((tmp_path / "ray" / ".mxrec").glob(".*"))  # the staging folder (in .mxrec/) is gone
    back = tmp_path / "back.rec"
    mxrec.convert(on_ray.manifest, back)
    assert back.read_bytes() == SUB.read_bytes()


def test_ray_tasks_upload_their_shards_to_a_url_output(mray, s3_server, s3_bucket, tmp_path, monkeypatch):
    """A URL output with Ray: each task uploads its shards into a hidden staging folder of the bucket (its node may
    not see the driver's disk); they are moved to their names by the store, the manifest last; a failure before
    that leaves nothing, staging included."""
    import fsspec

    from mxrec.interop import job

    options = s3_server.storage_options()
    fs = fsspec.filesystem("s3", **options)
    local = mxrec.convert(SUB, tmp_path / "local", target_format="webdataset", shard_size=10)
    out = mxrec.convert(SUB, f"s3://{s3_bucket}/out", target_format="webdataset", shard_size=10, engine="ray",
                        storage_options=options)
    names = sorted(path.rsplit("/", 1)[1] for path in fs.find(f"{s3_bucket}/out"))
    assert names == sorted([Path(f).name for f in local.files] + ["sub.convert.json"])  # no staging left (.mxrec/)
    for mine in local.files:
        assert fs.cat_file(f"{s3_bucket}/out/{Path(mine).name}") == Path(mine).read_bytes()
    back = tmp_path / "back.rec"
    mxrec.convert(out.manifest, back, storage_options=options)
    assert back.read_bytes() == SUB.read_bytes()

    def fail(*args, **kwargs):
        raise OSError("the publishing step failed")

    monkeypatch.setattr(job, "publish", fail)
    with pytest.raises(OSError, match="publishing step failed"):
        mxrec.convert(SUB, f"s3://{s3_bucket}/again", target_format="webdataset", shard_size=10, engine="ray",
                      storage_options=options)
    assert not fs.exists(f"{s3_bucket}/again") or fs.find(f"{s3_bucket}/again") == []
