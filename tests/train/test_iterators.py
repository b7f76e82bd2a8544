"""ImageRecordIter and ImageIter behaviour: epochs, determinism, sharding, labels, errors, broken records."""

from __future__ import annotations

import shutil

import cv2
import numpy as np
import pytest

from mxrec.errors import ImageDecodeError, ListFileError, ParameterError
from mxrec.format.header import IRHeader, pack
from mxrec.io.lists import read_list
from mxrec.train import DataBatch, ImageIter, ImageRecordIter
from mxrec.train.pipeline import BrokenRecordWarning
from mxrec.transforms import CastAug, RandomResizedCrop
from testkit.iterdata import IM2REC, gradient_image, image_record, pack_photos, write_records

TRAIN = dict(random_resized_crop=True, min_random_area=0.1, max_random_area=1.0, min_aspect_ratio=0.75,
             max_aspect_ratio=1.33, rand_mirror=True, brightness=0.2, saturation=0.2, pca_noise=0.05, shuffle=True,
             inter_method=10)


@pytest.fixture(scope="module")
def rec(tmp_path_factory):
    """MXNet's default/sub.rec (50 photos) rebuilt byte for byte."""
    return str(pack_photos(tmp_path_factory.mktemp("recs") / "sub.rec", IM2REC / "lists" / "sub.lst"))


def epoch_arrays(it):
    batches = list(it)
    return [(b.data[0].copy(), b.label[0].copy(), b.index.copy(), b.pad) for b in batches]


def same_batches(a, b):
    return len(a) == len(b) and all(all(np.array_equal(x, y) for x, y in zip(p, q, strict=True))
                                    for p, q in zip(a, b, strict=True))


def test_random_augmentation_does_not_depend_on_thread_count(rec):
    runs = []
    for threads in (1, 3):
        with ImageRecordIter(path_imgrec=rec, data_shape=(3, 40, 40), batch_size=12, preprocess_threads=threads,
                             prefetch_buffer=2, seed=5, **TRAIN) as it:
            runs.append([epoch_arrays(it) for _ in range(2)])
    assert same_batches(runs[0][0], runs[1][0]) and same_batches(runs[0][1], runs[1][1])
    assert not same_batches(runs[0][0], runs[0][1])  # a new order and new augmentations every epoch


def test_seed_and_seed_aug(rec):
    def first_epoch(**kw):
        with ImageRecordIter(path_imgrec=rec, data_shape=(3, 32, 32), batch_size=10, **{**TRAIN, **kw}) as it:
            return epoch_arrays(it)
    base = first_epoch(seed=1)
    assert same_batches(base, first_epoch(seed=1))
    other_aug = first_epoch(seed=1, seed_aug=9)
    assert [b[2].tolist() for b in other_aug] == [b[2].tolist() for b in base]  # same order
    assert not np.array_equal(other_aug[0][0], base[0][0])  # other augmentations
    other_seed = first_epoch(seed=2)
    assert [b[2].tolist() for b in other_seed] != [b[2].tolist() for b in base]


def test_python_and_mxnet_style_epochs(rec):
    it = ImageRecordIter(path_imgrec=rec, data_shape=(3, 16, 16), batch_size=16, resize=16, shuffle=True)
    assert it.num_batches == 4
    first = [b.index.copy() for b in it]
    second = [b.index.copy() for b in it]  # a finished epoch: the next `for` starts a new one
    assert len(first) == len(second) == 4 and it.epoch == 1
    assert not all(np.array_equal(a, b) for a, b in zip(first, second, strict=True))
    it.reset()
    assert it.epoch == 2
    it.reset()  # nothing taken since the last reset: stays in epoch 2
    assert it.epoch == 2
    batch = it.next()
    assert isinstance(batch, DataBatch) and batch.data[0].shape == (16, 3, 16, 16) and batch.label[0].shape == (16,)
    for _ in it:  # an unfinished epoch continues: this takes the second batch
        break
    assert it.iter_next() and it.getpad() == 0
    assert it.iter_next() and it.getdata()[0].shape == (16, 3, 16, 16) and it.getpad() == 14
    assert it.getindex().shape == (16,) and it.getlabel()[0].shape == (16,)
    assert not it.iter_next()
    with pytest.raises(StopIteration):
        it.next()
    it.reset()
    assert it.epoch == 3 and len(list(it)) == 4
    assert it.provide_data[0] == ("data", (16, 3, 16, 16)) and it.provide_label[0] == ("softmax_label", (16,))
    it.close()


def test_parts_have_equal_batches_and_cover_the_data(rec):
    indices, counts = [], set()
    for part in range(3):
        with ImageRecordIter(path_imgrec=rec, data_shape=(3, 8, 8), batch_size=8, resize=8, shuffle=True, seed=4,
                             num_parts=3, part_index=part) as it:
            batches = list(it)
        counts.add(len(batches))
        indices.extend(np.concatenate([b.index[:len(b.index) - b.pad] for b in batches]).tolist())
    assert counts == {3}  # lock-step steps of 3 x 8 records: ceil(50 / 24) = 3 batches on every rank
    assert set(indices) == {e.index for e in read_list(IM2REC / "lists" / "sub.lst")}
    assert len(indices) == 50  # every record once; the last step's filler is all padding


def test_drop_last(rec):
    with ImageRecordIter(path_imgrec=rec, data_shape=(3, 8, 8), batch_size=16, resize=8, drop_last=True) as it:
        batches = list(it)
    assert len(batches) == 3 and all(b.pad == 0 for b in batches)


def test_held_batches_are_never_overwritten(rec):
    params = dict(path_imgrec=rec, data_shape=(3, 24, 24), batch_size=8, resize=24, preprocess_threads=2,
                  prefetch_buffer=1, dtype="uint8")
    with ImageRecordIter(**params) as it:
        copies = [b.data[0].copy() for b in it]
    with ImageRecordIter(**params) as it:
        held = list(it)  # all kept at once
        views = [b.data[0][:2] for b in it]  # next epoch: only views kept
    assert all(np.array_equal(h.data[0], c) for h, c in zip(held, copies, strict=True))
    assert all(np.array_equal(v, c[:2]) for v, c in zip(views, copies, strict=True))


@pytest.mark.parametrize("dtype", ["float16", "float64"])
def test_other_float_dtypes(rec, dtype):
    params = dict(path_imgrec=rec, data_shape=(3, 16, 16), batch_size=16, resize=16, mean_r=100.0, std_b=3.0)
    with ImageRecordIter(**params) as it:
        ref = it.next().data[0].copy()
    with ImageRecordIter(dtype=dtype, **params) as it:
        out = it.next().data[0]
    assert out.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(out, ref.astype(dtype))


def test_labels_from_path_imglist(rec):
    lst = IM2REC / "multilabel3.lst"
    with ImageRecordIter(path_imgrec=rec, path_imglist=str(lst), label_width=3, data_shape=(3, 8, 8),
                         batch_size=50, resize=8) as it:
        batch = it.next()
    expected = {e.index: e.labels for e in read_list(lst)}
    for record_id, label in zip(batch.index, batch.label[0], strict=True):
        np.testing.assert_allclose(label, expected[int(record_id)], rtol=1e-6)
    assert batch.label[0].shape == (50, 3)


def test_label_errors(rec, tmp_path):
    with (ImageRecordIter(path_imgrec=rec, data_shape=(3, 8, 8), batch_size=4, resize=8, label_width=2) as it,
          pytest.raises(ParameterError, match="label_width is 2")):
        it.next()
    short = tmp_path / "short.lst"
    short.write_text("39\t1.0\tx.jpg\n")
    with pytest.raises(ListFileError, match="label_width is 2"):
        ImageRecordIter(path_imgrec=rec, path_imglist=str(short), label_width=2, data_shape=(3, 8, 8), batch_size=4)
    with ImageRecordIter(path_imgrec=rec, path_imglist=str(short), data_shape=(3, 8, 8), batch_size=4,
                         resize=8) as it, pytest.raises(ListFileError, match="no line for record id 30"):
        it.next()


@pytest.mark.parametrize("params, match", [
    (dict(rand_mirorr=True), "did you mean 'rand_mirror'"),
    (dict(dtype="bfloat16"), "dtype"),
    (dict(aug_seq="det_aug_default"), "aug_seq"),
    (dict(preprocess_threads=0), "preprocess_threads"),
    (dict(num_parts=2, part_index=2), "part_index"),
    (dict(data_shape=(3, 8)), "data_shape"),
    (dict(data_shape=(2, 8, 8)), "channels"),
    (dict(std_r=0), "std_r"),
    (dict(on_broken="ignore"), "on_broken"),
])
def test_parameter_errors(rec, params, match):
    with pytest.raises(ParameterError, match=match):
        ImageRecordIter(**{"path_imgrec": rec, "data_shape": (3, 8, 8), "batch_size": 4, **params})


def test_missing_parameters_and_compatibility_only_parameters(rec):
    with pytest.raises(ParameterError, match="data_shape"):
        ImageRecordIter(path_imgrec=rec, batch_size=4)
    with pytest.raises(TypeError):  # a ParameterError is also what Python raises for a bad keyword
        ImageRecordIter(path_imgrec=rec, batch_size=4, data_shape=(3, 8, 8), colour=1)
    with ImageRecordIter(path_imgrec=rec, data_shape=(3, 8, 8), batch_size=4, resize=8, verbose=False, ctx="cpu",
                         device_id=-1, shuffle_chunk_size=64, shuffle_chunk_seed=3, rotate_list="0,90") as it:
        assert it.augment_params.rotate_list == (0, 90)
        assert it.next().data[0].shape == (4, 3, 8, 8)


def test_broken_records_are_skipped_warned_and_counted(tmp_path):
    imgs = [gradient_image(20, 20, seed=i) for i in range(6)]
    payloads = [image_record(img, float(i), 100 + i) for i, img in enumerate(imgs)]
    payloads.insert(2, pack(IRHeader(0, 9.0, 900, 0), b"not an image"))
    payloads.insert(5, b"short")  # too short for the IRHeader
    path = write_records(tmp_path / "broken.rec", payloads)
    params = dict(path_imgrec=str(path), data_shape=(3, 20, 20), batch_size=4, preprocess_threads=2, dtype="uint8")
    with ImageRecordIter(**params) as it, pytest.warns(BrokenRecordWarning) as warned:
        batches = list(it)
    assert ["record 2" in str(w.message) for w in warned] == [True, False]
    assert len(it.skipped) == 2 and "record 2" in it.skipped[0] and "record 5" in it.skipped[1]
    # the one rule (as mxrec.torch's): the next record that decodes takes a broken record's place, batches stay full
    assert [b.pad for b in batches] == [0, 0]
    assert [b.index.tolist() for b in batches] == [[100, 101, 102, 102], [103, 104, 104, 105]]
    first = batches[0].data[0]
    np.testing.assert_array_equal(first[0], imgs[0][..., ::-1].transpose(2, 0, 1))
    np.testing.assert_array_equal(first[2], first[3])  # record 3 stands in for broken record 2
    assert "the next record is used in its place" in str(warned[0].message)
    with ImageRecordIter(on_broken="error", **params) as it, pytest.raises(ImageDecodeError, match="record 2"):
        list(it)


def test_four_channels_grey_and_no_index(tmp_path):
    bgra = np.dstack([gradient_image(12, 12, seed=1), np.arange(144, dtype=np.uint8).reshape(12, 12)])
    path = write_records(tmp_path / "rgba.rec", [image_record(bgra, 1.0, 7)])
    with ImageRecordIter(path_imgrec=str(path), data_shape=(4, 12, 12), batch_size=1, dtype="uint8") as it:
        out = it.next().data[0][0]
    np.testing.assert_array_equal(out, bgra[..., [2, 1, 0, 3]].transpose(2, 0, 1))
    with ImageRecordIter(path_imgrec=str(path), data_shape=(1, 12, 12), batch_size=1, dtype="uint8") as it:
        grey = it.next().data[0][0, 0]
    np.testing.assert_array_equal(grey, cv2.imdecode(cv2.imencode(".png", bgra)[1], cv2.IMREAD_GRAYSCALE))
    rgb = write_records(tmp_path / "rgb.rec", [image_record(bgra[..., :3], 1.0, 7)])
    with (ImageRecordIter(path_imgrec=str(rgb), data_shape=(4, 12, 12), batch_size=1, on_broken="error") as it,
          pytest.raises(ImageDecodeError, match="4 channels")):
        it.next()
    (tmp_path / "rgb.idx").unlink()  # no index: the file is scanned, the shuffle is still global
    with ImageRecordIter(path_imgrec=str(rgb), data_shape=(3, 12, 12), batch_size=1, shuffle=True) as it:
        assert it.next().index.tolist() == [7]


# -- ImageIter ------------------------------------------------------------------------------------------

def test_image_iter_from_rec_and_from_files(rec):
    common = dict(batch_size=10, data_shape=(3, 32, 32), resize=40)
    with ImageIter(path_imgrec=rec, **common) as from_rec:
        a = from_rec.next()
    files = ImageIter(path_imglist=str(IM2REC / "lists" / "sub.lst"), path_root=str(IM2REC / "photos200"), **common)
    b = files.next()
    assert a.data[0].shape == (10, 3, 32, 32) and a.data[0].dtype == np.float32
    np.testing.assert_array_equal(a.label[0], b.label[0])
    np.testing.assert_array_equal(a.index, b.index)
    # the records are JPEG re-encodings of the files: close, not equal
    assert 0 < np.abs(a.data[0] - b.data[0]).mean() < 4
    files.close()


def test_image_iter_last_batch_handles(rec):
    def epochs(handle, n=3):
        it = ImageIter(batch_size=16, data_shape=(3, 8, 8), path_imgrec=rec, resize=8, last_batch_handle=handle)
        out = [[(b.pad, b.index.copy()) for b in it] for _ in range(n)]
        it.close()
        return out
    pad = epochs("pad")
    assert [[p for p, _ in e] for e in pad] == [[0, 0, 0, 14]] * 3
    assert [len(e) for e in epochs("discard")] == [3, 3, 3]
    roll = epochs("roll_over")
    assert [len(e) for e in roll] == [3, 3, 3]
    ids = [e.index for e in read_list(IM2REC / "lists" / "sub.lst")]
    assert roll[1][0][1][:2].tolist() == ids[48:50]  # the two left over open the next epoch


def test_image_iter_hard_reset_forgets_the_leftover(rec):
    it = ImageIter(batch_size=16, data_shape=(3, 8, 8), path_imgrec=rec, resize=8, last_batch_handle="roll_over")
    list(it)
    it.hard_reset()
    ids = [e.index for e in read_list(IM2REC / "lists" / "sub.lst")]
    assert it.next().index.tolist() == ids[:16]
    it.close()


def test_image_iter_aug_list_imglist_and_label_dtype(tmp_path):
    photos = tmp_path / "photos"
    shutil.copytree(IM2REC / "photos200" / "rocket", photos)
    names = sorted(p.name for p in photos.iterdir())
    # both of MXNet's imglist forms: [label, label, ..., path] and [[labels], path]
    imglist = [[float(i), 2.0 * i, name] if i % 2 else [[i, 2 * i], name] for i, name in enumerate(names)]
    it = ImageIter(batch_size=5, data_shape=(3, 20, 20), imglist=imglist, path_root=str(photos), label_width=2,
                   aug_list=[RandomResizedCrop(20), CastAug(), lambda img: img / 255.0], dtype="int64",
                   shuffle=True, seed=1)
    batch = it.next()
    assert batch.label[0].dtype == np.int64 and batch.label[0].shape == (5, 2)
    assert batch.data[0].min() >= 0 and batch.data[0].max() <= 1
    assert sorted(batch.index.tolist()) == [1, 2, 3, 4, 5]
    it.close()


def test_image_iter_parameter_errors(rec):
    with pytest.raises(ParameterError, match="did you mean 'rand_crop'"):
        ImageIter(batch_size=4, data_shape=(3, 8, 8), path_imgrec=rec, rand_corp=True)
    with pytest.raises(ParameterError, match="last_batch_handle"):
        ImageIter(batch_size=4, data_shape=(3, 8, 8), path_imgrec=rec, last_batch_handle="keep")
    with pytest.raises(ParameterError, match="needs path_imgrec"):
        ImageIter(batch_size=4, data_shape=(3, 8, 8))
    it = ImageIter(batch_size=4, data_shape=(3, 8, 8), path_imgrec=rec, aug_list=[CastAug()])
    with pytest.raises(ParameterError, match="augmenters made"):
        it.next()
    it.close()


def test_mean_img_is_computed_saved_and_used(rec, tmp_path):
    params = dict(path_imgrec=rec, data_shape=(3, 16, 16), batch_size=16, resize=16, std_g=2.0)
    with ImageRecordIter(dtype="uint8", **params) as it:
        pixels = np.concatenate([b.data[0][:16 - b.pad] for b in it]).astype(np.float64)
    path = tmp_path / "mean.npy"
    with ImageRecordIter(mean_img=str(path), **params) as it:
        out = it.next().data[0]
    mean = np.load(path)
    np.testing.assert_allclose(mean, pixels.mean(axis=0), rtol=1e-6)
    multiplier = (np.float32(1) / np.array([1, 2, 1], np.float32))[:, None, None]
    expected = (pixels[:16].astype(np.float32) - mean) * multiplier
    np.testing.assert_allclose(out, expected, rtol=1e-6, atol=1e-5)
    path.write_bytes(b"MXNet NDArray bytes")
    with pytest.raises(ParameterError, match=r"not a \.npy"):
        ImageRecordIter(mean_img=str(path), **params)
    np.save(path, np.zeros((3, 8, 8), np.float32))
    with pytest.raises(ParameterError, match="does not match"):
        ImageRecordIter(mean_img=str(path), **params)


def test_int8_rounds_the_mean_like_cpp(rec):
    params = dict(path_imgrec=rec, data_shape=(3, 8, 8), batch_size=4, resize=8)
    with ImageRecordIter(dtype="uint8", **params) as it:
        pixels = it.next().data[0].astype(np.int16)
    with ImageRecordIter(dtype="int8", mean_r=116.5, mean_g=-0.5, **params) as it:
        out = it.next().data[0]
    np.testing.assert_array_equal(out[:, 0], np.clip(pixels[:, 0] - 117, -128, 127))  # half away from zero
    np.testing.assert_array_equal(out[:, 1], np.clip(pixels[:, 1] + 1, -128, 127))


def test_memory_is_bounded_by_the_prefetch_depth(rec):
    """Batches the caller lets go are recycled: a few buffers serve any number of batches."""
    with ImageRecordIter(path_imgrec=rec, data_shape=(3, 8, 8), batch_size=4, resize=8, prefetch_buffer=2,
                         preprocess_threads=2) as it:
        buffers, batches = set(), 0
        for _ in range(3):
            for batch in it:
                buffers.add(batch.data[0].ctypes.data)
                batches += 1
    assert batches == 39
    assert len(buffers) <= 2 + 2  # the prefetched ones, the caller's current batch, the one it just let go
