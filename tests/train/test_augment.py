"""Image operations and MXNet's default augmenter (mxrec.train.augment)."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from mxrec.errors import ImageDecodeError, ParameterError
from mxrec.train import augment as A
from mxrec.transforms import functional as F
from mxrec.transforms.rng import SampleRandom
from testkit.iterdata import gradient_image


def test_shorter_side_size_uses_integer_division():
    assert F.shorter_side_size(371, 364, 72) == (73, 72)  # 72 * 371 // 364
    assert F.shorter_side_size(200, 300, 100) == (100, 150)
    assert F.shorter_side_size(256, 256, 224) == (224, 224)


def test_resolve_interpolation():
    assert F.resolve_interpolation(9, (100, 100), (200, 150)) == F.INTER_CUBIC
    assert F.resolve_interpolation(9, (100, 100), (50, 60)) == F.INTER_AREA
    assert F.resolve_interpolation(9, (100, 100), (150, 60)) == F.INTER_LINEAR
    assert F.resolve_interpolation(3, (1, 1), (2, 2)) == 3
    picks = {F.resolve_interpolation(10, (1, 1), (2, 2), SampleRandom(i)) for i in range(200)}
    assert picks == {0, 1, 2, 3, 4}
    with pytest.raises(ParameterError):
        F.resolve_interpolation(5, (1, 1), (2, 2))
    with pytest.raises(ParameterError, match="random stream"):
        F.resolve_interpolation(10, (1, 1), (2, 2))


def augmenter(shape=(3, 32, 32), **params):
    return A.DefaultAugmenter(A.AugmentParams(data_shape=shape, **params))


def test_centre_crop_scales_up_a_small_image_first():
    img = gradient_image(20, 50, seed=0)
    out = augmenter((3, 32, 32))(img, None)
    # height 20 < 32: width becomes int(32 / 20 * 50) = 80, then the centre 32x32
    expected = cv2.resize(img, (80, 32), interpolation=cv2.INTER_LINEAR)[:, 24:56]
    np.testing.assert_array_equal(out, expected)


def test_resize_then_centre_crop_matches_manual():
    img = gradient_image(90, 70, seed=1)
    out = augmenter((3, 40, 40), resize=48, inter_method=2)(img, None)
    big = cv2.resize(img, (48, 48 * 90 // 70), interpolation=cv2.INTER_CUBIC)
    y, x = (big.shape[0] - 40) // 2, (big.shape[1] - 40) // 2
    np.testing.assert_array_equal(out, big[y:y + 40, x:x + 40])


def test_rand_crop_stays_inside_and_depends_on_the_stream():
    img = gradient_image(60, 80, seed=2)
    aug = augmenter((3, 32, 32), rand_crop=True)
    outs = [aug(img, SampleRandom(0, i)) for i in range(20)]
    windows = np.lib.stride_tricks.sliding_window_view(img, (32, 32, 3))[..., 0, :, :, :]
    for out in outs:
        assert out.shape == (32, 32, 3)
        assert (windows == out).all(axis=(2, 3, 4)).any()  # every crop is a window of the source
    assert len({out.tobytes() for out in outs}) > 10
    np.testing.assert_array_equal(aug(img, SampleRandom(0, 3)), outs[3])


def test_random_resized_crop_area_and_fallback():
    img = gradient_image(100, 100, seed=3)
    aug = augmenter((3, 24, 24), random_resized_crop=True, min_random_area=0.2, max_random_area=0.5,
                    min_aspect_ratio=0.75, max_aspect_ratio=1.33)
    outs = {aug(img, SampleRandom(i)).tobytes() for i in range(20)}
    assert len(outs) == 20 and all(len(o) == 24 * 24 * 3 for o in outs)
    # trivial ranges: MXNet skips the random crop and centre-crops
    plain = augmenter((3, 24, 24), random_resized_crop=True)
    np.testing.assert_array_equal(plain(img, SampleRandom(0)), img[38:62, 38:62])


def test_random_size_square_crop():
    img = gradient_image(64, 64, seed=4)
    out = augmenter((3, 16, 16), min_crop_size=32, max_crop_size=32)(img, SampleRandom(1))
    np.testing.assert_array_equal(out, cv2.resize(img[16:48, 16:48], (16, 16), interpolation=cv2.INTER_LINEAR))
    with pytest.raises(ImageDecodeError, match="max_crop_size"):
        augmenter((3, 16, 16), min_crop_size=80, max_crop_size=80)(img, SampleRandom(1))


def test_rotate_90_turns_a_square_image():
    img = gradient_image(40, 40, seed=5)
    out = augmenter((3, 40, 40), rotate=90, inter_method=0, fill_value=3)(img, SampleRandom(0))
    # MXNet's convention turns about (w/2, h/2) in corner coordinates: one pixel off the pixel-centre turn
    np.testing.assert_array_equal(out[1:], cv2.rotate(img, cv2.ROTATE_90_COUNTERCLOCKWISE)[:-1])
    assert (out[0] == 3).all()


def test_random_scale_resizes_and_fill_value_pads():
    img = gradient_image(40, 60, seed=6)
    out = augmenter((3, 30, 30), min_random_scale=0.5, max_random_scale=0.5, fill_value=7)(img, SampleRandom(0))
    assert out.shape == (30, 30, 3)  # 20x30 after scaling, then scaled up for the 30x30 crop
    padded = augmenter((3, 50, 70), pad=5, fill_value=9)(img, None)
    assert (padded[:5] == 9).all() and (padded[:, :5] == 9).all() and (padded[-5:] == 9).all()
    np.testing.assert_array_equal(padded[5:45, 5:65], img)


def test_colour_operations():
    img = gradient_image(8, 8, seed=7)
    np.testing.assert_array_equal(F.adjust_brightness(img, 0.5), np.clip(np.rint(img * np.float32(0.5)), 0, 255))
    grey = F.adjust_saturation(img, 0.0)
    assert (grey[..., 0] == grey[..., 1]).all() and (grey[..., 1] == grey[..., 2]).all()
    expected_grey = cv2.cvtColor(img, cv2.COLOR_BGR2GRAY).astype(int)
    assert np.abs(grey[..., 0].astype(int) - expected_grey).max() <= 1  # BGR weights (MXNet swaps R and B)
    flat = F.adjust_contrast(img, 0.0)
    assert flat.min() == flat.max()
    np.testing.assert_array_equal(F.adjust_brightness(img[..., 0], 2.0), np.clip(img[..., 0] * 2, 0, 255))


def test_hls_shift_wraps_hue():
    red = np.zeros((2, 2, 3), np.uint8)
    red[..., 2] = 255
    hls = cv2.cvtColor(F.shift_hls(red, -10, 0, 0), cv2.COLOR_BGR2HLS)
    assert hls[0, 0, 0] == 170  # 0 - 10 wraps to 170 (MXNet would clamp at 0)
    round_trip = F.shift_hls(red, 0, 0, 0)  # 8-bit HLS loses a little, as in MXNet
    assert np.abs(round_trip.astype(int) - red).max() <= 2


def test_pca_lighting():
    alpha = (0.1, -0.2, 0.3)
    expected = sum(np.array(F.PCA_EIGVEC)[:, j] * alpha[j] * F.PCA_EIGVAL[j] for j in range(3))
    np.testing.assert_allclose(F.pca_rgb_offset(alpha), expected, rtol=1e-6)
    img = np.full((2, 2, 3), 100, np.uint8)
    out = F.add_lighting(img, np.array([1.7, -2.7, 300.0], np.float32))
    assert out[0, 0].tolist() == [101, 97, 255]  # truncation toward zero, saturation


def test_colour_augmenter_is_deterministic_per_stream():
    img = gradient_image(32, 32, seed=8)
    aug = augmenter((3, 32, 32), brightness=0.4, contrast=0.4, saturation=0.4, random_h=20, random_s=20,
                    random_l=20, pca_noise=0.1)
    a, b, c = aug(img, SampleRandom(5)), aug(img, SampleRandom(5)), aug(img, SampleRandom(6))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c) and not np.array_equal(a, img)


def test_alpha_channel_is_kept_by_colour_operations():
    img = np.dstack([gradient_image(8, 8, seed=9), np.full((8, 8), 77, np.uint8)])
    out = F.adjust_brightness(img, 1.5)
    assert (out[..., 3] == 77).all()
    np.testing.assert_array_equal(out[..., :3], F.adjust_brightness(img[..., :3], 1.5))


@pytest.mark.parametrize("params, match", [
    (dict(random_resized_crop=True, rand_crop=True), "conflicts"),
    (dict(min_crop_size=10), "together"),
    (dict(min_crop_size=20, max_crop_size=10), "min_crop_size"),
    (dict(inter_method=5), "inter_method"),
    (dict(min_random_area=0.9, max_random_area=0.5), "min_random_area"),
    (dict(min_aspect_ratio=2.0, max_aspect_ratio=1.0), "aspect"),
    (dict(max_aspect_ratio=1.5), "aspect"),
    (dict(fill_value=300), "fill_value"),
    (dict(brightness=-1), "brightness"),
])
def test_parameter_errors(params, match):
    with pytest.raises(ParameterError, match=match):
        A.AugmentParams(data_shape=(3, 8, 8), **params)


def test_colour_only_operations_need_colour():
    with pytest.raises(ParameterError, match="colour"):
        A.AugmentParams(data_shape=(1, 8, 8), saturation=0.2)
    A.AugmentParams(data_shape=(1, 8, 8), brightness=0.2, contrast=0.2)  # fine on grey


def test_random_affine_parameters():
    img = gradient_image(48, 64, seed=10)
    aug = augmenter((3, 32, 32), max_rotate_angle=30, max_shear_ratio=0.2, min_random_scale=0.8,
                    max_random_scale=1.2, max_aspect_ratio=0.25, fill_value=0)
    outs = [aug(img, SampleRandom(i)) for i in range(10)]
    assert all(o.shape == (32, 32, 3) for o in outs)
    assert len({o.tobytes() for o in outs}) == 10
    np.testing.assert_array_equal(aug(img, SampleRandom(3)), outs[3])
    # max_img_size caps the warped canvas (and so triggers the warp on its own)
    capped = A.DefaultAugmenter(A.AugmentParams(data_shape=(3, 20, 20), max_img_size=40))
    assert [type(step) for step in capped.steps] == [A.AffineWarp, A.CropToSize]
    # the 40x40 canvas holds the centre of the 64x48 image (img[4:44, 12:52]); the crop is its centre
    np.testing.assert_array_equal(capped(img, SampleRandom(0)), img[14:34, 22:42])
    rotated = augmenter((3, 48, 64), rotate_list=(180,), inter_method=0)(img, SampleRandom(0))
    np.testing.assert_array_equal(rotated[1:, 1:], img[::-1, ::-1][:-1, :-1])  # MXNet's one-pixel convention
