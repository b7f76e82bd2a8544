"""The commit protocol (:mod:`mxrec.storage.commit`) on S3 through the fault proxy: outputs whole or absent, also
when the cleanup fails.

A pair (``.rec`` + ``.idx``) appears together or not at all; a shard set is published behind a marker, its manifest
last; a failed publish retries its cleanup under the request policy, and what it still cannot remove is named in a
note on the cause, behind a marker that every reader (glob, folder, manifest) refuses.
"""

from __future__ import annotations

from typing import Any

import pytest

from mxrec.datasets.opening import open_dataset
from mxrec.errors import MxrecError, RemoteError
from mxrec.io.shards import ShardedWriter, ShardLimit
from mxrec.io.writer import RecordWriter
from mxrec.storage.settings import RequestPolicy, Storage

FAST = RequestPolicy(attempts=3, backoff=0.01, max_backoff=0.05, connect_timeout=2, read_timeout=2, deadline=20)
PAYLOADS = [bytes([i]) * (100 + i) for i in range(30)]


@pytest.fixture
def storage(s3_proxy: Any) -> Storage:
    return Storage(options=s3_proxy.storage_options(), policy=FAST)


def write_pair(url: str, storage: Storage) -> None:
    with RecordWriter(url, index=True, storage_options=storage) as writer:
        writer.write_batch(PAYLOADS, list(range(len(PAYLOADS))))


def write_set(url: str, storage: Storage) -> None:
    with ShardedWriter(url, ShardLimit(records=10), storage_options=storage) as writer:
        for i, payload in enumerate(PAYLOADS):
            writer.write(payload, key=i)


def test_a_pair_whose_idx_upload_fails_leaves_neither(s3_proxy, s3_bucket, storage):
    """Was: when the ``.idx`` upload failed, ``one.rec`` stayed under its final name without its ``.idx``."""
    s3_proxy.faults.fail_always(503, method="PUT", path_contains="one.idx")
    with pytest.raises(RemoteError, match=r"one\.idx.*upload failed after 3 attempts"):
        write_pair(f"s3://{s3_bucket}/one.rec", storage)
    assert s3_proxy.server.list_keys(s3_bucket) == []  # nothing published, nothing staged left
    assert s3_proxy.log.count(method="PUT", path_contains="one.idx") == FAST.attempts


def test_a_pair_whose_idx_move_fails_publishes_no_rec(s3_proxy, s3_bucket, storage):
    s3_proxy.faults.fail_always(503, method="PUT", key="one.idx")  # the server-side copy to the final name
    with pytest.raises(RemoteError, match=r"one\.idx"):
        write_pair(f"s3://{s3_bucket}/one.rec", storage)
    assert s3_proxy.server.list_keys(s3_bucket) == []
    assert s3_proxy.log.count(method="PUT", key="one.rec") == 0  # the .rec is moved last: never reached


def test_a_pair_is_published_under_faults(s3_proxy, s3_bucket, storage):
    s3_proxy.faults.fail_next(1, 503, method="PUT", key="one.rec")
    s3_proxy.faults.fail_next(1, 500, method="DELETE")
    write_pair(f"s3://{s3_bucket}/one.rec", storage)
    keys = s3_proxy.server.list_keys(s3_bucket)
    assert keys == ["one.checksums", "one.idx", "one.rec"]
    assert open_dataset(f"s3://{s3_bucket}/one.rec", storage=storage).read_batch([0, 29]) == [PAYLOADS[0],
                                                                                             PAYLOADS[29]]


def test_a_failed_publish_whose_cleanup_fails_names_what_remains(s3_proxy, s3_bucket, storage):
    """Was: the cleanup's failed DELETE was suppressed and a shard stayed with no manifest: a glob opened 10 of 30
    records as the whole set."""
    s3_proxy.faults.fail_always(503, method="PUT", key="t_00001.rec")  # publishing stops at the second shard
    # and the cleanup can remove nothing that was published (a move's removal of its staged source still works)
    s3_proxy.faults.fail_always(503, method="DELETE", match=lambda r: "staging" not in r.path)
    with pytest.raises(RemoteError) as caught:
        write_set(f"s3://{s3_bucket}/t.rec", storage)
    error = caught.value
    assert "t_00001.rec" in str(error) and "503" in str(error)  # the cause, not the cleanup's trouble
    notes = getattr(error, "__notes__", [])
    assert len(notes) == 1 and notes[0].startswith("cleanup: could not remove")
    remaining = set(s3_proxy.server.list_keys(s3_bucket))
    assert {"t_00000.rec", "t_00000.idx", "t.manifest.json"} <= remaining
    for key in remaining:  # every object left is named
        assert key.rsplit("/", 1)[-1] in notes[0], key
    # retried under the policy: each removal made its attempts
    assert s3_proxy.log.count(method="DELETE", key="t_00000.rec") == FAST.attempts

    s3_proxy.faults.clear()
    for spec in (f"s3://{s3_bucket}/t_*.rec", f"s3://{s3_bucket}/", f"s3://{s3_bucket}/t.manifest.json"):
        with pytest.raises(MxrecError, match="being written|marker|incomplete"):
            open_dataset(spec, storage=storage)


def test_a_failed_publish_retries_its_cleanup(s3_proxy, s3_bucket, storage):
    """Regression: a delete retried after a 503 asks whether the object is gone; that stat's "not found" carried
    the 503 as its context, was taken for a 503 and retried until it failed: the object was called "remaining"."""
    s3_proxy.faults.fail_always(503, method="PUT", key="t_00002.rec")
    # the cleanup's first two removals of published objects fail once each
    s3_proxy.faults.fail_next(2, 503, method="DELETE", match=lambda r: "staging" not in r.path)
    with pytest.raises(RemoteError) as caught:
        write_set(f"s3://{s3_bucket}/t.rec", storage)
    assert not getattr(caught.value, "__notes__", [])
    assert s3_proxy.server.list_keys(s3_bucket) == []  # nothing staged outlives the job


def test_a_set_is_published_under_a_transient_storm(s3_proxy, s3_bucket, storage):
    s3_proxy.use_profile("storm_5xx", seed=3, p_5xx=0.3)
    write_set(f"s3://{s3_bucket}/t.rec", Storage(options=storage.options, policy=RequestPolicy.parse(
        "attempts=12", FAST)))
    s3_proxy.clear_profile()
    assert s3_proxy.log.count(status=503) > 0
    assert sorted(s3_proxy.server.list_keys(s3_bucket)) == ["t.manifest.json", *[
        f"t_{n:05d}.{ext}" for n in range(3) for ext in ("checksums", "idx", "rec")]]
    dataset = open_dataset(f"s3://{s3_bucket}/t.manifest.json", storage=storage)
    assert list(dataset) == PAYLOADS
