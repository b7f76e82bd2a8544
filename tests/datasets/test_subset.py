"""RecordSubset: some of a reader's records read as a dataset of their own."""

from __future__ import annotations

import pickle

import pytest

from mxrec import RecordReader, RecordWriter
from mxrec.datasets.subset import RecordSubset
from mxrec.errors import RecordKeyError


@pytest.fixture
def reader(tmp_path):
    with RecordWriter(tmp_path / "d.rec", index=True) as writer:
        for key in range(10):
            writer.write(b"record %d" % key, key=100 + key)
    with RecordReader(tmp_path / "d.rec") as opened:
        yield opened


def test_positions_keys_and_batches_are_the_subsets(reader):
    subset = RecordSubset(reader, [7, 2, 5])
    assert len(subset) == 3 and list(subset) == [b"record 7", b"record 2", b"record 5"]
    assert subset[1] == bytes(subset.view(1)) == b"record 2" and subset.read_batch([2, 0]) == [b"record 5", b"record 7"]
    assert subset.keys == [107, 102, 105] and subset.position(105) == 2 and subset.read_key(102) == b"record 2"
    assert subset.path == reader.path and "102" in subset.describe(1)  # the rest is the reader's
    with pytest.raises(RecordKeyError):
        subset.position(101)  # in the file, not in the subset


def test_pickles_with_its_positions(reader):
    copy = pickle.loads(pickle.dumps(RecordSubset(reader, [3, 4])))
    assert list(copy) == [b"record 3", b"record 4"] and copy.keys == [103, 104]
