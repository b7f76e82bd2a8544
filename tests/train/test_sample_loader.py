"""RecordSampleLoader: ImageRecordIter's per-sample work, a whole batch at a time in the calling thread."""

from __future__ import annotations

import numpy as np
import pytest

from mxrec.errors import ParameterError
from mxrec.io.opener import RecordReader
from mxrec.train import ImageRecordIter
from mxrec.train.augment import AugmentParams
from mxrec.train.normalize import NormalizeParams
from mxrec.train.sample_loader import RecordSampleLoader
from testkit.iterdata import IM2REC, pack_photos

SHAPE = (3, 40, 40)
AUGMENT = dict(random_resized_crop=True, min_random_area=0.3, min_aspect_ratio=0.75, max_aspect_ratio=1.33)
NORMALIZE = dict(rand_mirror=True, mean_r=123.0, mean_g=117.0, mean_b=104.0, std_r=58.0, std_g=57.0, std_b=57.5)


@pytest.fixture(scope="module")
def rec(tmp_path_factory):
    return str(pack_photos(tmp_path_factory.mktemp("recs") / "sub.rec", IM2REC / "lists" / "sub.lst"))


@pytest.mark.parametrize("dtype", ["float32", "uint8"])
def test_load_batch_gives_the_iterators_batch(rec, dtype):
    with ImageRecordIter(path_imgrec=rec, data_shape=SHAPE, batch_size=12, shuffle=True, seed=4, dtype=dtype,
                         **AUGMENT, **NORMALIZE) as it:
        it.next()
        batch = it.next()  # epoch 0, the second batch
        positions = [it._reader.position(int(i)) for i in batch.index]
        expected = batch.data[0].copy(), batch.label[0].copy(), batch.index.copy()
    with RecordReader(rec) as reader:
        loader = RecordSampleLoader(reader, AugmentParams(data_shape=SHAPE, **AUGMENT), NormalizeParams(**NORMALIZE),
                                    dtype=dtype, seed=4)
        data = np.empty((12, *SHAPE), dtype)
        label = np.empty((12, 1), np.float32)
        ids = loader.load_batch(positions, 0, data, label)
        np.testing.assert_array_equal(data, expected[0])
        np.testing.assert_array_equal(label[:, 0], expected[1])
        np.testing.assert_array_equal(ids, expected[2])
        again = np.empty_like(data)
        loader.load_batch(positions, 1, again, label)
        assert not np.array_equal(again, data)  # another epoch, other augmentations


def test_load_batch_names_the_record_on_a_label_mismatch(rec):
    with RecordReader(rec) as reader:
        loader = RecordSampleLoader(reader, AugmentParams(data_shape=SHAPE), NormalizeParams(), label_width=2)
        with pytest.raises(ParameterError, match=r"sub.rec: record \d+: the record has one label but label_width"):
            loader.load_batch([0], 0, np.empty((1, *SHAPE), np.float32), np.empty((1, 2), np.float32))
