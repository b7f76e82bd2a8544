"""``convert`` to S3 through the fault proxy (issue 22): the output whole or absent, the cause reported.

Was: the publish cleanup stopped at its first failed HEAD or DELETE, leaving shards under final names (2 of 8 runs
at a 35 % 5xx rate), staged objects could leak, and the cleanup's error replaced the real cause (a failed move)
and named no URL.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import mxrec
from mxrec.datasets.opening import open_dataset
from mxrec.errors import MxrecError, RemoteError
from mxrec.storage.settings import RequestPolicy, Storage
from testkit.datasets import write_indexed

N = 30
PAYLOADS = [b"%04d" % i * (20 + i) for i in range(N)]
FAST = RequestPolicy(attempts=3, backoff=0.01, max_backoff=0.05, connect_timeout=2, read_timeout=2, deadline=30)


@pytest.fixture
def source(tmp_path: Path) -> Path:
    rec = tmp_path / "src.rec"
    write_indexed(rec, range(N), PAYLOADS)
    return rec


def objects(proxy: Any, bucket: str) -> list[str]:
    return sorted(proxy.server.list_keys(bucket))


def test_a_failed_convert_reports_the_cause_and_names_what_remains(s3_proxy, s3_bucket, source):
    storage = Storage(options=s3_proxy.storage_options(), policy=FAST)
    s3_proxy.faults.fail_always(503, method="PUT", key="out_00001.rec")  # the move of the second shard
    # the cleanup cannot remove what was published (a move's own removal of its staged source still works)
    s3_proxy.faults.fail_always(503, method="DELETE", match=lambda r: "staging" not in r.path)
    with pytest.raises(RemoteError) as caught:
        mxrec.convert(source, f"s3://{s3_bucket}/out.rec", shard_size=10, storage_options=storage)
    error = caught.value
    assert "out_00001.rec" in str(error) and "503" in str(error)  # the cause: the failed move, naming its URL
    notes = getattr(error, "__notes__", [])
    assert len(notes) == 1 and notes[0].startswith("cleanup: could not remove")
    left = objects(s3_proxy, s3_bucket)
    assert "out_00000.rec" in left and all(key.rsplit("/", 1)[-1] in notes[0] for key in left)
    s3_proxy.faults.clear()
    for spec in (f"s3://{s3_bucket}/out_*.rec", f"s3://{s3_bucket}/out.manifest.json"):
        with pytest.raises(MxrecError, match="being written|marker"):
            open_dataset(spec, storage=storage)


def test_the_cleanup_goes_on_past_a_failed_removal(s3_proxy, s3_bucket, source):
    storage = Storage(options=s3_proxy.storage_options(), policy=FAST)
    s3_proxy.faults.fail_always(503, method="PUT", key="out_00002.rec")
    s3_proxy.faults.fail_next(3, 503, method="DELETE", key="out_00001.rec")  # this removal gives up...
    with pytest.raises(RemoteError) as caught:
        mxrec.convert(source, f"s3://{s3_bucket}/out.rec", shard_size=10, storage_options=storage)
    notes = getattr(caught.value, "__notes__", [])
    assert len(notes) == 1 and "out_00001.rec" in notes[0]
    # ...the others go on, and what cannot go yet stays behind the marker
    assert objects(s3_proxy, s3_bucket) == ["out.manifest.json", "out_00001.rec"]


@pytest.mark.parametrize("seed", range(3))
def test_convert_under_a_5xx_storm_is_exact_and_leaves_nothing_staged(s3_proxy, s3_bucket, source, seed):
    storage = Storage(options=s3_proxy.storage_options(), policy=RequestPolicy.parse("attempts=20", FAST))
    s3_proxy.use_profile("storm_5xx", seed=seed, p_5xx=0.35)
    result = mxrec.convert(source, f"s3://{s3_bucket}/out.rec", shard_size=10, storage_options=storage)
    s3_proxy.clear_profile()
    assert s3_proxy.log.count(status=503) > 0
    assert objects(s3_proxy, s3_bucket) == ["out.manifest.json", *[f"out_{n:05d}.{ext}" for n in range(3)
                                                                   for ext in ("checksums", "idx", "rec")]]
    assert result.manifest is not None
    assert list(open_dataset(f"s3://{s3_bucket}/out.manifest.json", storage=storage)) == PAYLOADS


def test_convert_to_one_s3_rec_under_faults(s3_proxy, s3_bucket, source):
    storage = Storage(options=s3_proxy.storage_options(), policy=FAST)
    s3_proxy.faults.fail_next(1, 503, method="PUT", key="one.idx")
    s3_proxy.faults.reset_next(1, after=None, method="PUT", key="one.rec")
    mxrec.convert(source, f"s3://{s3_bucket}/one.rec", storage_options=storage)
    assert objects(s3_proxy, s3_bucket) == ["one.checksums", "one.idx", "one.rec"]
    assert list(open_dataset(f"s3://{s3_bucket}/one.rec", storage=storage)) == PAYLOADS
