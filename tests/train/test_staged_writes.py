"""A chunk of samples written at once (StagedImages) is what writing them one at a time gives, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from mxrec.errors import ParameterError
from mxrec.format.seeds import extend_key, stream_key
from mxrec.train import ImageRecordIter
from mxrec.train.normalize import NormalizeParams, SlotWriter
from mxrec.transforms.rng import SampleRandom
from testkit.iterdata import IM2REC

MEAN_STD = dict(mean_r=123.68, mean_g=116.779, mean_b=103.939, mean_a=20.0, std_r=58.393, std_g=57.12,
                std_b=57.375, std_a=3.0)
PARAMS = {
    "plain": dict(),
    "mirror": dict(mirror=True, **MEAN_STD),
    "rand_mirror": dict(rand_mirror=True, scale=1 / 255, **MEAN_STD),
    "random_colour": dict(rand_mirror=True, max_random_contrast=0.4, max_random_illumination=20, **MEAN_STD),
    "contrast_only": dict(max_random_contrast=0.5, **MEAN_STD),
}


def images(channels: int, count: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    shape = (9, 7) if channels == 1 else (9, 7, channels)
    return [rng.integers(0, 256, shape, dtype=np.uint8) for _ in range(count)]


@pytest.mark.parametrize("dtype", ["float32", "uint8", "int8", "float16", "float64"])
@pytest.mark.parametrize("channels", [1, 3, 4])
@pytest.mark.parametrize("name", sorted(PARAMS))
def test_a_chunk_is_its_samples_one_by_one(name, channels, dtype):
    params = NormalizeParams(**PARAMS[name])
    writer = SlotWriter(params, channels, dtype)
    sources = images(channels, 6)
    crop = np.random.default_rng(1).integers(0, 256, (12, 10, channels) if channels > 1 else (12, 10), np.uint8)
    sources[2] = crop[2:11, 1:8]  # a crop: a view with row strides, as the augmenter's crops are
    one_by_one = np.empty((6, channels, 9, 7), dtype)
    for k, img in enumerate(sources):
        writer.write(img, one_by_one[k], SampleRandom(5, k))
    staged = writer.staged(8, (9, 7))
    chunk = np.empty_like(one_by_one)
    for k, img in enumerate(sources):
        staged.put(k, img, SampleRandom(5, k))
    staged.write(chunk, 6)
    assert chunk.tobytes() == one_by_one.tobytes()
    if name == "plain" and dtype == "uint8":  # the layout itself: CHW, RGB(A)
        order = {1: [0], 3: [2, 1, 0], 4: [2, 1, 0, 3]}[channels]
        for k, img in enumerate(sources):
            hwc = img[..., None] if channels == 1 else img
            np.testing.assert_array_equal(chunk[k], hwc[..., order].transpose(2, 0, 1))


def test_negative_zero_is_kept_where_there_is_no_illumination():
    # pixel == mean gives 0.0, times a negative contrast -0.0; adding a zero bias would make it +0.0
    params = NormalizeParams(max_random_contrast=3.0, mean_r=100.0, mean_g=100.0, mean_b=100.0)
    writer = SlotWriter(params, 3, "float32")
    staged = writer.staged(16, (4, 4))
    for k in range(16):
        staged.put(k, np.full((4, 4, 3), 100, np.uint8), SampleRandom(9, k))
    out = np.empty((16, 3, 4, 4), np.float32)
    staged.write(out, 16)
    negative = staged._contrast[:16, 0, 0, 0] < 0
    assert negative.any() and not negative.all()
    for k in range(16):
        assert (out[k] == 0).all() and np.signbit(out[k]).all() == negative[k]


def test_an_image_of_another_size_is_refused():
    staged = SlotWriter(NormalizeParams(), 3, "float32").staged(2, (9, 7))
    with pytest.raises(ParameterError, match="image of 8x9 does not fit a 7x9 slot"):
        staged.put(0, np.zeros((9, 8, 3), np.uint8), None)


def test_a_stream_from_its_epochs_key_is_the_same_stream():
    key = stream_key(17, 3)
    assert extend_key(key, 123) == stream_key(17, 3, 123)
    a, b = SampleRandom(17, 3, 123), SampleRandom.from_key(extend_key(key, 123))
    assert [a.random() for _ in range(5)] == [b.random() for _ in range(5)]
    assert SampleRandom.from_key(extend_key(key, 124)).random() != SampleRandom(17, 3, 123).random()


@pytest.mark.parametrize("threads", [1, 3])
def test_partial_last_batch_has_zero_slots_after_chunked_loading(threads):
    rec = str(IM2REC / "centercrop_resize64" / "sub.rec")
    with ImageRecordIter(path_imgrec=rec, data_shape=(3, 32, 32), batch_size=16, round_batch=False,
                         preprocess_threads=threads, rand_crop=True, rand_mirror=True, **MEAN_STD) as it:
        batches = [(b.data[0].copy(), b.index.copy(), b.pad) for b in it]
        again = [(b.data[0].copy(), b.index.copy(), b.pad) for b in it]  # the next epoch reuses the buffers
    data, index, pad = batches[-1]
    assert pad > 0 and (data[-pad:] == 0).all() and (index[-pad:] == -1).all()
    assert (data[:-pad] != 0).any(axis=(1, 2, 3)).all()
    data, index, pad = again[-1]
    assert pad > 0 and (data[-pad:] == 0).all() and (index[-pad:] == -1).all()
