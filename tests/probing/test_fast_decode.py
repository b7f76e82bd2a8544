"""fast_decode: JPEGs decoded reduced (libjpeg-turbo's scaled IDCT) where resize allows -- same draws, same sizes."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from mxrec import ImageRecordIter, ParameterError
from mxrec.format.header import IRHeader, pack
from mxrec.image.codec import decode_pixels, decode_pixels_scaled, jpeg_size
from mxrec.train.params import LOADER_OPTIONS, preprocess_params
from mxrec.train.record_iter import RecordIterParams
from testkit.iterdata import image_record, write_records


def smooth_photo(height: int, width: int, seed: int) -> np.ndarray:
    """A photo-like BGR image: smooth shapes and gradients, a little fine texture."""
    rng = np.random.default_rng(seed)
    small = rng.integers(0, 256, (height // 32 + 1, width // 32 + 1, 3)).astype(np.uint8)
    img = cv2.resize(small, (width, height), interpolation=cv2.INTER_CUBIC).astype(np.int16)
    img += rng.integers(-2, 3, (height, width, 3)).astype(np.int16)
    return np.clip(img, 0, 255).astype(np.uint8)


@pytest.fixture(scope="module")
def big_jpegs(tmp_path_factory):
    path = tmp_path_factory.mktemp("fast") / "big.rec"
    return write_records(path, [image_record(smooth_photo(600, 800, i), i % 3, i, ".jpg") for i in range(12)])


def batches(rec, **options):
    params = dict(path_imgrec=str(rec), data_shape=(3, 64, 64), batch_size=4, preprocess_threads=2, seed=7,
                  **options)
    with ImageRecordIter(**params) as it:
        return np.concatenate([b.data[0].copy() for b in it])


def test_decode_pixels_scaled_picks_the_smallest_scale_still_large_enough():
    jpeg = cv2.imencode(".jpg", smooth_photo(600, 800, 0))[1].tobytes()
    assert jpeg_size(jpeg) == (600, 800)
    assert decode_pixels_scaled(jpeg, 3, 150, 200).shape == (150, 200, 3)  # 1/4
    assert decode_pixels_scaled(jpeg, 3, 151, 200).shape == (300, 400, 3)  # 1/4 is too small: 1/2
    assert decode_pixels_scaled(jpeg, 3, 75, 1).shape == (75, 100, 3)  # 1/8
    assert decode_pixels_scaled(jpeg, 3, 700, 900).shape == (600, 800, 3)  # never enlarged
    png = cv2.imencode(".png", smooth_photo(60, 80, 0))[1].tobytes()
    np.testing.assert_array_equal(decode_pixels_scaled(png, 3, 10, 10), decode_pixels(png, 3))  # full size


def test_fast_decode_keeps_sizes_and_draws_and_stays_within_a_grey_level(big_jpegs):
    # 600x800 to a 150 px shorter side: decoded at 1/4 (150x200)
    options = dict(resize=150, rand_crop=True, rand_mirror=True, shuffle=True, max_random_contrast=0.2)
    full = batches(big_jpegs, **options)
    fast = batches(big_jpegs, fast_decode=True, **options)
    assert full.shape == fast.shape
    deviation = np.abs(full - fast).mean()
    assert 0 < deviation <= 1.5  # reduced, yet the same crops, mirrors and contrast draws (else tens of levels)
    # the same run with other draws is far off: the closeness above is not an accident of smooth images
    other = batches(big_jpegs, fast_decode=True, **{**options, "seed_aug": 99})
    assert np.abs(full - other).mean() > 4 * deviation


def test_fast_decode_changes_nothing_where_it_does_not_apply(big_jpegs, tmp_path):
    options = dict(rand_crop=True, shuffle=True)  # no resize: the crop needs the full image
    np.testing.assert_array_equal(batches(big_jpegs, **options), batches(big_jpegs, fast_decode=True, **options))
    pngs = write_records(tmp_path / "png.rec", [image_record(smooth_photo(300, 400, i), 0, i) for i in range(4)])
    np.testing.assert_array_equal(batches(pngs, resize=72), batches(pngs, resize=72, fast_decode=True))


def test_torch_dataset_fast_decode_matches_the_iterator(big_jpegs):
    pytest.importorskip("torch")
    from mxrec.torch import ImageRecordDataset

    preprocess = dict(data_shape=(3, 64, 64), resize=72, fast_decode=True)
    dataset = ImageRecordDataset(str(big_jpegs), preprocess=preprocess)
    assert dataset.fast_decode
    data, _ = dataset.__getitems__(list(range(4)))
    with ImageRecordIter(path_imgrec=str(big_jpegs), batch_size=4, **preprocess) as it:
        np.testing.assert_array_equal(data.numpy(), next(it).data[0])
    full, _ = ImageRecordDataset(str(big_jpegs), preprocess={**preprocess, "fast_decode": False}).__getitems__(
        list(range(4)))
    assert not np.array_equal(data.numpy(), full.numpy())  # it did decode reduced


def test_only_the_sample_loader_paths_take_fast_decode():
    """One split (train/params): the torch preprocess path takes fast_decode, a path that decodes by itself
    (Ray's TrainImages) refuses it by name rather than as an unknown parameter."""
    params = dict(data_shape=(3, 8, 8), resize=16, fast_decode=True)
    augment, _ = preprocess_params(params, "preprocess", decode=True)
    assert augment.resize == 16
    with pytest.raises(ParameterError, match="TrainImages: fast_decode is not supported here"):
        preprocess_params(params, "TrainImages")
    assert set(LOADER_OPTIONS) <= set(RecordIterParams.names())  # the iterator takes them among its own


def test_fast_decode_for_random_resized_crops_keeps_the_boxes(big_jpegs):
    # boxes of 30-100% of 600x800, to 64x64: at least 1/4 of the image always keeps the box >= 64 px
    options = dict(random_resized_crop=True, min_random_area=0.3, max_aspect_ratio=1.25, min_aspect_ratio=0.8,
                   rand_mirror=True, shuffle=True)
    full = batches(big_jpegs, **options)
    fast = batches(big_jpegs, fast_decode=True, **options)
    deviation = np.abs(full - fast).mean()
    assert 0 < deviation <= 1.5
    assert np.abs(full - batches(big_jpegs, fast_decode=True, **{**options, "seed_aug": 99})).mean() > 4 * deviation


def exif_turned_jpeg(img: np.ndarray, orientation: int) -> bytes:
    """``img`` (BGR) as a JPEG whose EXIF block (written by pillow) has Orientation ``orientation``."""
    import io

    from PIL import Image

    exif = Image.Exif()
    exif[0x0112] = orientation
    out = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(img[..., ::-1])).save(out, "JPEG", quality=92, exif=exif.tobytes())
    return out.getvalue()


@pytest.mark.parametrize("orientation", [3, 6, 8])
def test_fast_decode_applies_the_exif_orientation_like_the_full_decode(tmp_path, orientation):
    # a regression: the reduced decode gave the stored pixels unturned (and sized the reduction on the stored
    # sides), so a turned photo came out sideways -- tens of grey levels off the full decode
    photos = [exif_turned_jpeg(smooth_photo(600, 800, i), orientation) for i in range(4)]
    turned = 800 if orientation in (6, 8) else 600
    assert jpeg_size(photos[0]) == (turned, 1400 - turned)
    assert decode_pixels_scaled(photos[0], 3, 150, 150).shape == (turned // 4, (1400 - turned) // 4, 3)
    np.testing.assert_array_equal(decode_pixels_scaled(photos[0], 3, turned, 1), decode_pixels(photos[0], 3))
    rec = write_records(tmp_path / "turned.rec", [pack(IRHeader(0, 0.0, i, 0), jpeg) for i, jpeg in enumerate(photos)])
    options = dict(resize=150, rand_crop=True, rand_mirror=True, shuffle=True)
    full = batches(rec, **options)
    fast = batches(rec, fast_decode=True, **options)
    assert 0 < np.abs(full - fast).mean() <= 1.5
    options = dict(random_resized_crop=True, min_random_area=0.3, max_aspect_ratio=1.25, min_aspect_ratio=0.8)
    assert 0 < np.abs(batches(rec, **options) - batches(rec, fast_decode=True, **options)).mean() <= 1.5


def test_a_malformed_exif_block_leaves_the_decode_to_the_full_path(tmp_path):
    # only OpenCV knows what it does with a broken EXIF block: fast_decode must not guess an orientation
    jpeg = cv2.imencode(".jpg", smooth_photo(600, 800, 1))[1].tobytes()
    segment = b"Exif\0\0XXXX" + bytes(8)
    broken = jpeg[:2] + b"\xff\xe1" + (len(segment) + 2).to_bytes(2, "big") + segment + jpeg[2:]
    assert jpeg_size(broken) is None
    np.testing.assert_array_equal(decode_pixels_scaled(broken, 3, 150, 200), decode_pixels(broken, 3))
    rec = write_records(tmp_path / "broken.rec", [pack(IRHeader(0, 0.0, i, 0), broken) for i in range(4)])
    options = dict(resize=150, rand_crop=True, shuffle=True)
    np.testing.assert_array_equal(batches(rec, **options), batches(rec, fast_decode=True, **options))
