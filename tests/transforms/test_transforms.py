"""mx.image-style augmenters, Gluon-style transforms and the padding collate (mxrec.transforms)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mxrec import transforms as T
from mxrec.errors import ParameterError
from mxrec.transforms.rng import SampleRandom
from testkit.iterdata import gradient_image


def rgb(h=30, w=40, seed=0):
    return gradient_image(h, w, seed)[..., ::-1].copy()


def test_to_tensor_and_normalize():
    img = rgb()
    t = T.ToTensor()(img)
    assert t.dtype == np.float32 and t.shape == (3, 30, 40)
    np.testing.assert_array_equal(t, img.transpose(2, 0, 1).astype(np.float32) / 255)
    assert T.ToTensor()(np.stack([img, img])).shape == (2, 3, 30, 40)
    assert T.ToTensor()(img[..., 0]).shape == (1, 30, 40)
    n = T.Normalize(mean=(0.1, 0.2, 0.3), std=(0.5, 0.25, 2.0))(t)
    np.testing.assert_allclose(n[1], (t[1] - 0.2) / 0.25, rtol=1e-6)
    np.testing.assert_allclose(T.Normalize(0.5, 0.5)(t), (t - 0.5) / 0.5, rtol=1e-6)
    with pytest.raises(ParameterError, match="2 mean values for 3 channels"):
        T.Normalize(mean=(0.1, 0.2))(t)
    with pytest.raises(ParameterError):
        T.ToTensor()(np.zeros(5))


def test_scale_down_and_crops():
    assert T.scale_down((640, 480), (720, 120)) == (640, 106)  # MXNet's documented example
    img = rgb(30, 40)
    out, box = T.center_crop(img, (20, 10))
    assert box == (10, 10, 20, 10) and out.shape == (10, 20, 3)
    np.testing.assert_array_equal(out, img[10:20, 10:30])
    up, box = T.center_crop(img, (60, 60))  # bigger than the image: largest fitting crop, resized up
    assert box == (5, 0, 30, 30) and up.shape == (60, 60, 3)
    out, (x, y, w, h) = T.random_crop(img, (16, 8), rng=SampleRandom(1))
    np.testing.assert_array_equal(out, img[y:y + h, x:x + w])


def test_random_size_crop_respects_area_and_ratio():
    img = rgb(100, 100)
    for i in range(50):
        out, (x, y, w, h) = T.random_size_crop(img, (24, 24), (0.3, 0.6), (0.5, 2.0), rng=SampleRandom(i))
        assert out.shape == (24, 24, 3)
        assert x >= 0 and x + w <= 100 and y >= 0 and y + h <= 100
        assert 0.28 <= w * h / 1e4 <= 0.62 and 0.45 <= w / h <= 2.2
    # impossible area: falls back to a centre crop of the output size
    out, box = T.random_size_crop(img, (24, 24), (5.0, 6.0), (1.0, 1.0), rng=SampleRandom(0))
    assert box == (38, 38, 24, 24)


def test_random_resized_crop_and_flip_are_deterministic_per_stream():
    img = rgb()
    crop = T.RandomResizedCrop(16)
    a, b, c = crop(img, SampleRandom(3)), crop(img, SampleRandom(3)), crop(img, SampleRandom(4))
    assert a.shape == (16, 16, 3)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    flip = T.RandomFlipLeftRight()
    results = [flip(img, SampleRandom(i)) for i in range(40)]
    flipped = [np.array_equal(r, img[:, ::-1]) for r in results]
    assert 5 < sum(flipped) < 35 and all(f or np.array_equal(r, img) for f, r in zip(flipped, results, strict=True))
    # without a stream: the transform's own, seeded one
    first = [T.RandomResizedCrop(16, seed=9)(img) for _ in range(2)]
    np.testing.assert_array_equal(first[0], first[1])


def test_colour_augmenters():
    img = rgb().astype(np.float32)
    rng = SampleRandom(0)
    alpha = 1.0 + SampleRandom(0).uniform(-0.5, 0.5)
    np.testing.assert_allclose(T.BrightnessJitterAug(0.5)(img, rng), img * np.float32(alpha), rtol=1e-6)
    grey = T.SaturationJitterAug(0.0)(img, SampleRandom(0))
    np.testing.assert_allclose(grey, img, rtol=1e-6)
    contrast0 = T.ContrastJitterAug(1.0)
    out = contrast0(img, SampleRandom(1))
    a = 1.0 + SampleRandom(1).uniform(-1.0, 1.0)
    mean_grey = (img * np.array([0.299, 0.587, 0.114], np.float32)).sum(axis=2).mean()
    np.testing.assert_allclose(out, img * a + (1 - a) * mean_grey, rtol=1e-5, atol=1e-3)
    np.testing.assert_allclose(T.HueJitterAug(0.0)(img, rng), img, atol=1.0)  # YIQ round trip (rounded matrices)
    grey = T.RandomGrayAug(1.0)(img, rng)
    np.testing.assert_allclose(grey[..., 0], img @ np.array([0.21, 0.72, 0.07], np.float32), rtol=1e-5)
    assert np.array_equal(grey[..., 0], grey[..., 2])
    lit = T.LightingAug(0.1)(img, SampleRandom(2))
    offset = lit - img
    assert np.ptp(offset.reshape(-1, 3), axis=0).max() < 1e-3 and np.abs(offset).max() > 0
    norm = T.ColorNormalizeAug((1.0, 2.0, 3.0), (2.0, 2.0, 2.0))(img)
    np.testing.assert_allclose(norm, (img - [1, 2, 3]) / 2, rtol=1e-6)
    jitter = T.ColorJitterAug(0.1, 0.0, 0.2)
    assert [type(t).__name__ for t in jitter.transforms] == ["BrightnessJitterAug", "SaturationJitterAug"]


def test_create_augmenter():
    augs = T.create_augmenter((3, 24, 24), resize=32, rand_crop=True, rand_resize=True, rand_mirror=True,
                              mean=True, std=True, brightness=0.1, hue=0.1, pca_noise=0.1, rand_gray=0.1)
    assert [type(a).__name__ for a in augs] == ["ResizeAug", "RandomSizedCropAug", "HorizontalFlipAug", "CastAug",
                                                "ColorJitterAug", "HueJitterAug", "LightingAug", "RandomGrayAug",
                                                "ColorNormalizeAug"]
    np.testing.assert_allclose(augs[-1].mean, T.IMAGENET_MEAN_RGB)
    img = rgb(50, 60)
    out = T.SequentialAug(augs)(img, SampleRandom(0))
    assert out.shape == (24, 24, 3) and out.dtype == np.float32
    plain = T.create_augmenter((3, 24, 24))
    assert [type(a).__name__ for a in plain] == ["CenterCropAug", "CastAug"]
    with pytest.raises(ParameterError, match="rand_crop"):
        T.create_augmenter((3, 8, 8), rand_resize=True)


def test_resize_and_center_crop_gluon_style():
    img = rgb(30, 40)
    assert T.Resize((20, 10))(img).shape == (10, 20, 3)
    assert T.Resize(15, keep_ratio=True)(img).shape == (15, 20, 3)
    assert T.CenterCrop(10)(img).shape == (10, 10, 3)
    out = T.Compose([T.CenterCrop(20), T.ToTensor(), T.Normalize(0.5, 0.5)])(img)
    assert out.shape == (3, 20, 20) and out.min() >= -1 and out.max() <= 1


def test_pad_collate():
    a, b = np.ones((2, 3, 1), np.uint8), np.full((4, 1, 1), 2, np.uint8)
    batch = T.pad_collate([a, b], pad_value=9)
    assert batch.shape == (2, 4, 3, 1) and batch.dtype == np.uint8
    np.testing.assert_array_equal(batch[0, :2], a)
    assert (batch[0, 2:] == 9).all() and (batch[1, :, 1:] == 9).all()
    images, labels, shapes = T.pad_collate([(a, 1.0), (b, 2.0)], return_shapes=True)
    assert images.shape == (2, 4, 3, 1) and labels.tolist() == [1.0, 2.0]
    assert shapes.tolist() == [[2, 3, 1], [4, 1, 1]]
    with pytest.raises(ParameterError, match="ranks"):
        T.pad_collate([a, np.ones((2, 2))])
    with pytest.raises(ParameterError, match="nothing"):
        T.pad_collate([])


def test_resize_aug_uses_mxnet_rule():
    img = rgb(30, 40)
    out = T.ResizeAug(15)(img)
    assert out.shape == (15, 40 * 15 // 30, 3)
    assert T.ForceResizeAug((7, 9))(img).shape == (9, 7, 3)
    assert math.isclose(T.RandomSizedCropAug((8, 8), 0.5, (1.0, 1.0)).area, 0.5)
