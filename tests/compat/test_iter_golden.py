"""ImageRecordIter against the batches real MXNet 1.9.1 produced (tests/data/golden/iter/README.txt)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mxrec.train import ImageRecordIter
from testkit.iterdata import ITER, build_golden_records

DETERMINISTIC = dict(shuffle=False, rand_crop=False, rand_mirror=False, preprocess_threads=1, round_batch=True)
MEAN_STD = dict(mean_r=123.68, mean_g=116.779, mean_b=103.939, std_r=58.393, std_g=57.12, std_b=57.375)

# name -> (record file, parameters), exactly as in iter/README.txt
CONFIGS = {
    "default_resize_center_64": ("default", dict(data_shape=(3, 64, 64), resize=72, batch_size=16)),
    "default_noresize_center_96": ("default", dict(data_shape=(3, 96, 96), batch_size=16)),
    "cc64_exact": ("centercrop_resize64", dict(data_shape=(3, 64, 64), batch_size=16)),
    "packlabel3_w3": ("packlabel3", dict(data_shape=(3, 32, 32), resize=32, batch_size=12, label_width=3)),
    "default_mean_std_64": ("default", dict(data_shape=(3, 64, 64), resize=64, batch_size=16, **MEAN_STD)),
    "png_resize_center_48": ("png", dict(data_shape=(3, 48, 48), resize=48, batch_size=16)),
}


@pytest.fixture(scope="module")
def recs(tmp_path_factory):
    return build_golden_records(tmp_path_factory.mktemp("golden_recs"))


def one_epoch(it):
    batches = list(it)
    data = np.concatenate([b.data[0] for b in batches])
    label = np.concatenate([b.label[0] for b in batches])
    return batches, data, label


@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.parametrize("threads", [1, 3])
def test_batches_match_mxnet(recs, name, threads):
    rec, params = CONFIGS[name]
    params = {**DETERMINISTIC, **params, "preprocess_threads": threads}
    with ImageRecordIter(path_imgrec=str(recs[rec]), **params) as it:
        batches, data, label = one_epoch(it)
    expected_label = np.load(ITER / f"{name}.label.npy")
    np.testing.assert_array_equal(label, expected_label)
    assert data.dtype == np.float32
    if name == "default_mean_std_64":
        expected = np.load(ITER / f"{name}.data_float32.npy")
        # float32 arithmetic in MXNet's order: equal to the last bit here; allow one rounding step.
        np.testing.assert_allclose(data, expected, rtol=0, atol=1e-6)
    else:
        expected = np.load(ITER / f"{name}.data_uint8.npy")
        np.testing.assert_array_equal(data, expected.astype(np.float32))
    n_records = 50
    assert [b.pad for b in batches][-1] == len(data) - n_records
    assert all(b.pad == 0 for b in batches[:-1])


def test_uint8_output_is_the_same_pixels(recs):
    params = {**DETERMINISTIC, **CONFIGS["default_resize_center_64"][1]}
    with ImageRecordIter(path_imgrec=str(recs["default"]), dtype="uint8", **params) as it:
        _, data, _ = one_epoch(it)
    assert data.dtype == np.uint8
    np.testing.assert_array_equal(data, np.load(ITER / "default_resize_center_64.data_uint8.npy"))


def test_round_batch_pads_from_the_start_of_the_epoch(recs):
    """iter/README.txt: the 14 padded slots equal the first 14 records (data and label), as in MXNet."""
    params = {**DETERMINISTIC, **CONFIGS["default_resize_center_64"][1]}
    with ImageRecordIter(path_imgrec=str(recs["default"]), **params) as it:
        batches, data, label = one_epoch(it)
    assert batches[-1].pad == 14
    np.testing.assert_array_equal(data[50:], data[:14])
    np.testing.assert_array_equal(label[50:], label[:14])
    np.testing.assert_array_equal(batches[-1].index[2:], batches[0].index[:14])


def test_index_holds_record_ids(recs):
    """batch.index is the header id of each record (im2rec: the .lst index), in .idx order."""
    with ImageRecordIter(path_imgrec=str(recs["default"]), data_shape=(3, 32, 32), batch_size=50,
                         resize=32) as it:
        batch = it.next()
    ids = [int(line.split("\t")[0]) for line in (ITER.parent / "im2rec" / "lists" / "sub.lst").read_text().splitlines()]
    assert batch.index.tolist() == ids


def test_epoch_semantics_differ_from_mxnet_where_mxnet_is_wrong(recs):
    """MXNet drifts epochs under round_batch and reports pad=0 over stale data; mxrec does neither."""
    semantics = json.loads((ITER / "epoch_semantics.json").read_text())
    drift = next(s for s in semantics if s["config"].endswith("{'round_batch': True, 'shuffle': False}"))
    assert [len(e["batches"]) for e in drift["epochs"]] == [4, 3, 3]  # MXNet: epochs get shorter
    assert drift["epochs"][1]["batches"][0]["pos"][0] == 14  # ... and start where the filler stopped
    stale = next(s for s in semantics if s["config"].endswith("{'round_batch': False, 'shuffle': False}"))
    assert stale["epochs"][0]["batches"][-1]["pad"] == 0  # MXNet: short batch reported as full
    assert stale["epochs"][0]["batches"][-1]["garbage"] == 2

    base = dict(path_imgrec=str(recs["default"]), data_shape=(3, 32, 32), resize=32, batch_size=16)
    with ImageRecordIter(**base, round_batch=True) as it:
        epochs = [[b.index.copy() for b in it] for _ in range(3)]
    first = epochs[0]
    for epoch in epochs:
        assert len(epoch) == 4
        assert all(np.array_equal(a, b) for a, b in zip(epoch, first, strict=True))  # every epoch starts at 0
    with ImageRecordIter(**base, round_batch=False) as it:
        batches = list(it)
    last = batches[-1]
    assert last.pad == 14
    assert (last.index[2:] == -1).all()
    assert (last.data[0][2:] == 0).all()
    assert (last.label[0][2:] == 0).all()


EXTRA = ITER.parent.parent / "mxnet_iter_extra"


@pytest.mark.parametrize("name", sorted(json.loads((EXTRA / "configs.json").read_text())["configs"]))
def test_more_augmenter_settings_match_mxnet(name):
    """Affine rotate/scale, pad/fill_value, mirror, area/auto interpolation, grey, int8, scale (mxnet_iter_extra/)."""
    meta = json.loads((EXTRA / "configs.json").read_text())
    config = dict(meta["configs"][name]["config"])
    config["data_shape"] = tuple(config["data_shape"])
    rec = ITER.parent / "im2rec" / "centercrop_resize64" / "sub.rec"
    with ImageRecordIter(path_imgrec=str(rec), **meta["base"], **config) as it:
        batch = it.next()
    expected = np.load(EXTRA / f"{name}.data.npy")
    np.testing.assert_array_equal(batch.label[0], np.load(EXTRA / f"{name}.label.npy"))
    assert batch.data[0].dtype == expected.dtype and batch.data[0].shape == expected.shape
    if name == "resize_up_auto":
        # bicubic upscaling: MXNet's own OpenCV build rounds differently by at most 1 (see README.txt)
        diff = np.abs(batch.data[0].astype(int) - expected.astype(int))
        assert diff.max() <= 1 and (diff > 0).mean() < 0.1
    else:
        np.testing.assert_array_equal(batch.data[0], expected)


def test_opencv_decoding_gives_the_same_pixels(recs, without_simplejpeg):
    """Without simplejpeg every image goes through OpenCV: the golden batches still match exactly."""
    assert without_simplejpeg
    params = {**DETERMINISTIC, **CONFIGS["default_noresize_center_96"][1]}
    with ImageRecordIter(path_imgrec=str(recs["default"]), dtype="uint8", **params) as it:
        _, data, _ = one_epoch(it)
    np.testing.assert_array_equal(data, np.load(ITER / "default_noresize_center_96.data_uint8.npy"))
