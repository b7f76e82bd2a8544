"""Iterators over any dataset: resuming mid-epoch (same or another number of ranks), remote data in few requests."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mxrec.errors import ParameterError
from mxrec.train import ImageIter, ImageRecordIter
from testkit.iterdata import IM2REC, pack_photos

OPTIONS = dict(data_shape=(3, 8, 8), resize=8, shuffle=True, seed=9, preprocess_threads=2)


@pytest.fixture(scope="module")
def rec(tmp_path_factory):
    return str(pack_photos(tmp_path_factory.mktemp("resume") / "sub.rec", IM2REC / "lists" / "sub.lst"))


def ids(batches):
    return [int(i) for b in batches for i in b.index[:len(b.index) - b.pad]]


def test_resume_mid_epoch_continues_the_same_order(rec):
    with ImageRecordIter(path_imgrec=rec, batch_size=8, **OPTIONS) as it:
        everything = ids(list(it))
    with ImageRecordIter(path_imgrec=rec, batch_size=8, **OPTIONS) as it:
        first = ids([it.next() for _ in range(3)])
        state = json.loads(json.dumps(it.state_dict()))
    assert state["epoch"] == 0 and state["consumed"] == 24
    with ImageRecordIter(path_imgrec=rec, batch_size=8, **OPTIONS) as it:
        it.load_state_dict(state)
        rest = ids(list(it))
        assert first + rest == everything
        assert it.state_dict()["epoch"] == 1 and it.state_dict()["consumed"] == 0  # the epoch is finished


def test_resume_from_two_ranks_on_one_and_on_four(rec):
    def run(parts, batch, state=None, steps=None):
        taken = []
        iters = [ImageRecordIter(path_imgrec=rec, batch_size=batch, num_parts=parts, part_index=k, **OPTIONS)
                 for k in range(parts)]
        for it in iters:
            if state is not None:
                it.load_state_dict(state)
        batches = [list(it) if steps is None else [it.next() for _ in range(steps)] for it in iters]
        assert len({len(b) for b in batches}) == 1  # equal batch counts
        for step in range(len(batches[0])):
            for rank in batches:
                taken += ids([rank[step]])
        saved = iters[0].state_dict()
        for it in iters:
            it.close()
        return taken, saved

    whole, _ = run(1, 4)
    before, state = run(2, 4, steps=3)
    for parts, batch in ((1, 8), (4, 3)):
        after, _ = run(parts, batch, state)
        assert before + after == whole  # nothing repeated, nothing skipped, the same global order


def test_resume_refuses_another_order(rec):
    with ImageRecordIter(path_imgrec=rec, batch_size=8, **OPTIONS) as it:
        state = it.state_dict()
    with ImageRecordIter(path_imgrec=rec, batch_size=8, **{**OPTIONS, "seed": 10}) as it, \
            pytest.raises(ParameterError, match="seed"):
        it.load_state_dict(state)


def test_image_iter_resumes_too(rec):
    options = dict(batch_size=8, data_shape=(3, 8, 8), path_imgrec=rec, shuffle=True, seed=2, resize=8)
    with ImageIter(**options) as it:
        everything = ids(list(it))
    with ImageIter(**options) as it:
        first = ids([it.next(), it.next()])
        state = it.state_dict()
    with ImageIter(**options) as it:
        it.load_state_dict(state)
        assert first + ids(list(it)) == everything


def test_record_iter_on_s3_fetches_batches_not_records(s3_server, s3_bucket, rec):
    with open(rec, "rb") as f:
        s3_server.put_object(s3_bucket, "sub.rec", f.read())
    with open(rec[:-4] + ".idx", "rb") as f:
        s3_server.put_object(s3_bucket, "sub.idx", f.read())
    with ImageRecordIter(path_imgrec=rec, batch_size=8, **OPTIONS) as it:
        local = [b.data[0].copy() for b in it]
    s3_server.log.clear()
    with ImageRecordIter(path_imgrec=f"s3://{s3_bucket}/sub.rec", batch_size=8, shuffle_block=0,
                         storage_options=s3_server.storage_options(), **{**OPTIONS, "preprocess_threads": 1}) as it:
        remote = [b.data[0].copy() for b in it]
    assert len(remote) == len(local) == 7
    for a, b in zip(local, remote, strict=True):
        np.testing.assert_array_equal(a, b)  # the same global shuffle, the same pixels
    assert s3_server.log.count(method="GET", key="sub.rec") < 50  # coalesced: fewer GETs than records
    s3_server.log.clear()
    with ImageRecordIter(path_imgrec=f"s3://{s3_bucket}/sub.rec", batch_size=8,
                         storage_options=s3_server.storage_options(), **{**OPTIONS, "shuffle": False}) as it:
        assert len(list(it)) == 7
    # in file order the reads follow the plan: blocks of about 4 MiB, each fetched once (this file is one), and
    # one GET for the record under key 0 (is it an InsightFace header?); it was one GET per batch
    assert s3_server.log.count(method="GET", key="sub.rec") == 2


def test_record_iter_reads_a_shard_set_as_one_dataset(rec, tmp_path):
    from mxrec.io.opener import RecordReader
    from mxrec.io.shards import ShardedWriter, ShardLimit

    with RecordReader(rec) as reader, ShardedWriter(tmp_path / "sub.rec", ShardLimit(records=16)) as writer:
        for key, payload in zip(reader.keys, reader, strict=True):
            writer.write(payload, key=key)
    options = {**OPTIONS, "shuffle": False}
    with ImageRecordIter(path_imgrec=rec, batch_size=8, **options) as one, \
            ImageRecordIter(path_imgrec=str(tmp_path / "sub_{00000..00003}.rec"), batch_size=8, **options) as many:
        for a, b in zip(one, many, strict=True):
            np.testing.assert_array_equal(a.data[0], b.data[0])
            np.testing.assert_array_equal(a.index, b.index)
