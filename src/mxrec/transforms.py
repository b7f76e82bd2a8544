"""Python image transforms in the styles of ``mx.image`` and Gluon, and a collate that pads to the batch maximum.

Images are numpy arrays, HWC, RGB (as ``mx.image.imdecode`` gives), ``uint8``
or float. Every transform is a callable object, ``t(img, rng=None)``: random
ones draw from ``rng`` (a :class:`~mxrec.rng.SampleRandom`; the iterators
pass each sample's own stream, which makes results independent of threads)
or, when called without one, from the transform's own stream, seeded by its
``seed`` argument (fresh entropy when ``None``).

* ``mx.image`` augmenters, the ``aug_list`` of
  :class:`~mxrec.iterators.ImageIter`: :class:`ResizeAug`,
  :class:`ForceResizeAug`, :class:`RandomCropAug`,
  :class:`RandomSizedCropAug`, :class:`CenterCropAug`,
  :class:`HorizontalFlipAug`, :class:`CastAug`, :class:`BrightnessJitterAug`,
  :class:`ContrastJitterAug`, :class:`SaturationJitterAug`,
  :class:`HueJitterAug`, :class:`ColorJitterAug`, :class:`LightingAug`,
  :class:`RandomGrayAug`, :class:`ColorNormalizeAug`, :class:`RandomOrderAug`,
  :class:`SequentialAug`, and :func:`create_augmenter` (``CreateAugmenter``).
  The colour ones work on float images, after :class:`CastAug`, as in MXNet.
* Gluon's ``vision.transforms``: :class:`RandomResizedCrop`,
  :class:`RandomFlipLeftRight`, :class:`ToTensor` (HWC ``uint8`` -> CHW
  float32 in ``[0, 1]``), :class:`Normalize` (per-channel ``(x - mean) /
  std`` on CHW), :class:`Resize`, :class:`CenterCrop`, :class:`Compose`.
* :func:`pad_collate`: stack images of different sizes into one batch, padded
  to the largest.

Sizes are ``(width, height)`` as in MXNet; interpolation codes as in
:mod:`mxrec.augment` (``mx.image`` defaults to 2, bicubic; Gluon to 1,
bilinear). ``random_size_crop`` draws the aspect ratio log-uniformly, as
``mx.image`` does (MXNet's C++ augmenter draws it uniformly).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from mxrec.augment import INTER_CUBIC, INTER_LINEAR, pca_rgb_offset, resize, resize_shorter, resolve_interpolation
from mxrec.errors import ParameterError
from mxrec.rng import SampleRandom

Size = tuple[int, int]

# mx.image's colour constants: luma weights for R, G, B; YIQ transforms; the grey mix of RandomGrayAug.
_LUMA_RGB = np.array([0.299, 0.587, 0.114], np.float32)
_RGB_TO_YIQ = np.array([[0.299, 0.587, 0.114], [0.596, -0.274, -0.321], [0.211, -0.523, 0.311]])
_YIQ_TO_RGB = np.array([[1.0, 0.956, 0.621], [1.0, -0.272, -0.647], [1.0, -1.107, 1.705]])
_GREY_MIX = np.array([[0.21, 0.21, 0.21], [0.72, 0.72, 0.72], [0.07, 0.07, 0.07]], np.float32)
IMAGENET_MEAN_RGB = (123.68, 116.28, 103.53)
IMAGENET_STD_RGB = (58.395, 57.12, 57.375)


def _size(size: int | Sequence[int]) -> Size:
    """``(width, height)`` from an int (square) or a pair."""
    if isinstance(size, (int, np.integer)):
        return int(size), int(size)
    width, height = size
    return int(width), int(height)


# -- functional ops (mx.image semantics) -------------------------------------------------

def scale_down(src_size: Size, size: Size) -> Size:
    """Shrink a crop ``size`` (w, h) to fit in ``src_size`` (w, h), keeping its aspect ratio."""
    width, height = size
    src_w, src_h = src_size
    if src_h < height:
        width, height = float(width * src_h) / height, src_h
    if src_w < width:
        width, height = src_w, float(height * src_w) / width
    return int(width), int(height)


def fixed_crop(src: np.ndarray, x0: int, y0: int, width: int, height: int, size: Size | None = None,
               interp: int = INTER_CUBIC, rng: SampleRandom | None = None) -> np.ndarray:
    """The region at ``(x0, y0)`` of ``width`` x ``height``, resized to ``size`` (w, h) when given and different."""
    out = src[y0:y0 + height, x0:x0 + width]
    if size is not None and (width, height) != tuple(size):
        inter = resolve_interpolation(interp, (width, height), tuple(size), rng)
        out = resize(np.ascontiguousarray(out), size[0], size[1], inter)
    return out


def center_crop(src: np.ndarray, size: Size, interp: int = INTER_CUBIC,
                rng: SampleRandom | None = None) -> tuple[np.ndarray, tuple[int, int, int, int]]:
    """The centred crop of ``size`` (w, h) (scaled down to fit, then resized back up); and ``(x, y, w, h)``."""
    height, width = src.shape[:2]
    new_w, new_h = scale_down((width, height), size)
    x0, y0 = int((width - new_w) / 2), int((height - new_h) / 2)
    return fixed_crop(src, x0, y0, new_w, new_h, size, interp, rng), (x0, y0, new_w, new_h)


def random_crop(src: np.ndarray, size: Size, interp: int = INTER_CUBIC,
                rng: SampleRandom | None = None) -> tuple[np.ndarray, tuple[int, int, int, int]]:
    """A crop of ``size`` (w, h) at a random place (scaled down to fit, then resized back up); and ``(x, y, w, h)``."""
    rng = rng if rng is not None else SampleRandom(_entropy())
    height, width = src.shape[:2]
    new_w, new_h = scale_down((width, height), size)
    x0, y0 = rng.integers(0, width - new_w), rng.integers(0, height - new_h)
    return fixed_crop(src, x0, y0, new_w, new_h, size, interp, rng), (x0, y0, new_w, new_h)


def random_size_crop(src: np.ndarray, size: Size, area: float | tuple[float, float], ratio: tuple[float, float],
                     interp: int = INTER_CUBIC,
                     rng: SampleRandom | None = None) -> tuple[np.ndarray, tuple[int, int, int, int]]:
    """A crop of random area (fraction ``area``) and aspect ratio (log-uniform in ``ratio``), resized to ``size``.

    Ten tries, then a centre crop. Returns the image and ``(x, y, w, h)``.
    """
    rng = rng if rng is not None else SampleRandom(_entropy())
    height, width = src.shape[:2]
    if isinstance(area, (int, float)):
        area = (area, 1.0)
    log_ratio = (math.log(ratio[0]), math.log(ratio[1]))
    for _ in range(10):
        target = rng.uniform(area[0], area[1]) * height * width
        new_ratio = math.exp(rng.uniform(*log_ratio))
        new_w = round(math.sqrt(target * new_ratio))
        new_h = round(math.sqrt(target / new_ratio))
        if new_w <= width and new_h <= height:
            x0, y0 = rng.integers(0, width - new_w), rng.integers(0, height - new_h)
            return fixed_crop(src, x0, y0, new_w, new_h, size, interp, rng), (x0, y0, new_w, new_h)
    return center_crop(src, size, interp, rng)


def _entropy() -> int:
    return int.from_bytes(os.urandom(8), "little")


# -- transform objects ---------------------------------------------------------------------

class Transform:
    """Base class: ``t(img, rng=None)``; random subclasses draw from ``rng`` or from their own stream."""

    def __init__(self, seed: int | None = None) -> None:
        self._stream = SampleRandom(_entropy() if seed is None else seed)

    def _random(self, rng: SampleRandom | None) -> SampleRandom:
        return rng if rng is not None else self._stream

    def __call__(self, img: np.ndarray, rng: SampleRandom | None = None) -> np.ndarray:
        raise NotImplementedError

    def __repr__(self) -> str:
        shown = {k: v for k, v in vars(self).items() if not k.startswith("_")}
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in shown.items())})"


class SequentialAug(Transform):
    """Apply ``transforms`` one after the other."""

    def __init__(self, transforms: Sequence[Callable], seed: int | None = None) -> None:
        super().__init__(seed)
        self.transforms = list(transforms)

    def __call__(self, img: np.ndarray, rng: SampleRandom | None = None) -> np.ndarray:
        rng = self._random(rng)
        for t in self.transforms:
            img = t(img, rng) if isinstance(t, Transform) else t(img)
        return img


class Compose(SequentialAug):
    """Gluon's ``Compose``: apply ``transforms`` in order."""


class RandomOrderAug(SequentialAug):
    """Apply ``transforms`` in a random order."""

    def __call__(self, img: np.ndarray, rng: SampleRandom | None = None) -> np.ndarray:
        rng = self._random(rng)
        for t in rng.shuffled(self.transforms):
            img = t(img, rng) if isinstance(t, Transform) else t(img)
        return img


class ResizeAug(Transform):
    """Scale the shorter side to ``size``."""

    def __init__(self, size: int, interp: int = INTER_CUBIC, seed: int | None = None) -> None:
        super().__init__(seed)
        self.size, self.interp = size, interp

    def __call__(self, img: np.ndarray, rng: SampleRandom | None = None) -> np.ndarray:
        return resize_shorter(img, self.size, self.interp, self._random(rng))


class ForceResizeAug(Transform):
    """Resize to ``size`` (w, h) whatever the aspect ratio."""

    def __init__(self, size: Size, interp: int = INTER_CUBIC, seed: int | None = None) -> None:
        super().__init__(seed)
        self.size, self.interp = _size(size), interp

    def __call__(self, img: np.ndarray, rng: SampleRandom | None = None) -> np.ndarray:
        width, height = self.size
        inter = resolve_interpolation(self.interp, (img.shape[1], img.shape[0]), self.size, self._random(rng))
        return resize(img, width, height, inter)


class RandomCropAug(Transform):
    """A random crop of ``size`` (w, h)."""

    def __init__(self, size: Size, interp: int = INTER_CUBIC, seed: int | None = None) -> None:
        super().__init__(seed)
        self.size, self.interp = _size(size), interp

    def __call__(self, img: np.ndarray, rng: SampleRandom | None = None) -> np.ndarray:
        return random_crop(img, self.size, self.interp, self._random(rng))[0]


class RandomSizedCropAug(Transform):
    """A crop of random area and aspect ratio, resized to ``size`` (w, h)."""

    def __init__(self, size: Size, area: float | tuple[float, float], ratio: tuple[float, float],
                 interp: int = INTER_CUBIC, seed: int | None = None) -> None:
        super().__init__(seed)
        self.size, self.area, self.ratio, self.interp = _size(size), area, tuple(ratio), interp

    def __call__(self, img: np.ndarray, rng: SampleRandom | None = None) -> np.ndarray:
        return random_size_crop(img, self.size, self.area, self.ratio, self.interp, self._random(rng))[0]


class CenterCropAug(Transform):
    """The centred crop of ``size`` (w, h)."""

    def __init__(self, size: Size, interp: int = INTER_CUBIC, seed: int | None = None) -> None:
        super().__init__(seed)
        self.size, self.interp = _size(size), interp

    def __call__(self, img: np.ndarray, rng: SampleRandom | None = None) -> np.ndarray:
        return center_crop(img, self.size, self.interp, self._random(rng))[0]


class HorizontalFlipAug(Transform):
    """Flip left-right with probability ``p``."""

    def __init__(self, p: float = 0.5, seed: int | None = None) -> None:
        super().__init__(seed)
        self.p = p

    def __call__(self, img: np.ndarray, rng: SampleRandom | None = None) -> np.ndarray:
        return np.ascontiguousarray(img[:, ::-1]) if self._random(rng).random() < self.p else img


class RandomFlipLeftRight(HorizontalFlipAug):
    """Gluon's ``RandomFlipLeftRight``: flip left-right with probability 1/2."""

    def __init__(self, seed: int | None = None) -> None:
        super().__init__(0.5, seed)


class CastAug(Transform):
    """Convert to ``typ`` (float32 by default)."""

    def __init__(self, typ: str = "float32") -> None:
        super().__init__(0)
        self.typ = typ

    def __call__(self, img: np.ndarray, rng: SampleRandom | None = None) -> np.ndarray:
        return img.astype(self.typ)


class BrightnessJitterAug(Transform):
    """Multiply by ``1 + U(-brightness, brightness)``."""

    def __init__(self, brightness: float, seed: int | None = None) -> None:
        super().__init__(seed)
        self.brightness = brightness

    def __call__(self, img: np.ndarray, rng: SampleRandom | None = None) -> np.ndarray:
        alpha = 1.0 + self._random(rng).uniform(-self.brightness, self.brightness)
        return img * np.float32(alpha)


class ContrastJitterAug(Transform):
    """Blend with the image's mean luma: ``alpha * img + (1 - alpha) * mean_grey``, ``alpha = 1 + U(-c, c)``."""

    def __init__(self, contrast: float, seed: int | None = None) -> None:
        super().__init__(seed)
        self.contrast = contrast

    def __call__(self, img: np.ndarray, rng: SampleRandom | None = None) -> np.ndarray:
        alpha = 1.0 + self._random(rng).uniform(-self.contrast, self.contrast)
        mean_grey = float((img * _LUMA_RGB).sum(axis=2).mean())
        return img * np.float32(alpha) + np.float32((1.0 - alpha) * mean_grey)


class SaturationJitterAug(Transform):
    """Blend each pixel with its luma: ``alpha * img + (1 - alpha) * grey``, ``alpha = 1 + U(-s, s)``."""

    def __init__(self, saturation: float, seed: int | None = None) -> None:
        super().__init__(seed)
        self.saturation = saturation

    def __call__(self, img: np.ndarray, rng: SampleRandom | None = None) -> np.ndarray:
        alpha = 1.0 + self._random(rng).uniform(-self.saturation, self.saturation)
        grey = (img * _LUMA_RGB).sum(axis=2, keepdims=True)
        return img * np.float32(alpha) + grey * np.float32(1.0 - alpha)


class HueJitterAug(Transform):
    """Rotate the hue by ``U(-hue, hue)`` half-turns in YIQ space (a linear approximation, as MXNet)."""

    def __init__(self, hue: float, seed: int | None = None) -> None:
        super().__init__(seed)
        self.hue = hue

    def __call__(self, img: np.ndarray, rng: SampleRandom | None = None) -> np.ndarray:
        alpha = self._random(rng).uniform(-self.hue, self.hue)
        u, w = math.cos(alpha * math.pi), math.sin(alpha * math.pi)
        rotation = np.array([[1.0, 0.0, 0.0], [0.0, u, -w], [0.0, w, u]])
        matrix = (_YIQ_TO_RGB @ rotation @ _RGB_TO_YIQ).T.astype(np.float32)
        return img @ matrix


class ColorJitterAug(RandomOrderAug):
    """Brightness, contrast and saturation jitter (those not 0), in random order."""

    def __init__(self, brightness: float, contrast: float, saturation: float, seed: int | None = None) -> None:
        jitters = [cls(v) for cls, v in ((BrightnessJitterAug, brightness), (ContrastJitterAug, contrast),
                                         (SaturationJitterAug, saturation)) if v > 0]
        super().__init__(jitters, seed)


class LightingAug(Transform):
    """AlexNet PCA lighting noise: add ``eigvec @ (alpha * eigval)``, ``alpha ~ N(0, alphastd)`` per component."""

    def __init__(self, alphastd: float, seed: int | None = None) -> None:
        super().__init__(seed)
        self.alphastd = alphastd

    def __call__(self, img: np.ndarray, rng: SampleRandom | None = None) -> np.ndarray:
        rng = self._random(rng)
        return img + pca_rgb_offset([rng.normal(self.alphastd) for _ in range(3)])


class RandomGrayAug(Transform):
    """With probability ``p``, replace every channel by the grey mix ``0.21 R + 0.72 G + 0.07 B``."""

    def __init__(self, p: float, seed: int | None = None) -> None:
        super().__init__(seed)
        self.p = p

    def __call__(self, img: np.ndarray, rng: SampleRandom | None = None) -> np.ndarray:
        return img @ _GREY_MIX if self._random(rng).random() < self.p else img


class ColorNormalizeAug(Transform):
    """``(img - mean) / std`` per channel (either may be ``None``) on HWC images."""

    def __init__(self, mean: Sequence[float] | None, std: Sequence[float] | None) -> None:
        super().__init__(0)
        self.mean = None if mean is None else np.asarray(mean, np.float32)
        self.std = None if std is None else np.asarray(std, np.float32)

    def __call__(self, img: np.ndarray, rng: SampleRandom | None = None) -> np.ndarray:
        out = img.astype(np.float32)
        if self.mean is not None:
            out = out - self.mean
        if self.std is not None:
            out = out / self.std
        return out


CREATE_AUGMENTER_OPTIONS = ("resize", "rand_crop", "rand_resize", "rand_mirror", "mean", "std", "brightness",
                            "contrast", "saturation", "hue", "pca_noise", "rand_gray", "inter_method")


def create_augmenter(data_shape: Sequence[int], resize: int = 0, rand_crop: bool = False, rand_resize: bool = False,
                     rand_mirror: bool = False, mean: Sequence[float] | bool | None = None,
                     std: Sequence[float] | bool | None = None, brightness: float = 0, contrast: float = 0,
                     saturation: float = 0, hue: float = 0, pca_noise: float = 0, rand_gray: float = 0,
                     inter_method: int = INTER_CUBIC) -> list[Transform]:
    """``mx.image.CreateAugmenter``: the standard augmenter list for ``data_shape`` (C, H, W).

    ``mean=True`` / ``std=True`` use the ImageNet RGB statistics.
    """
    crop_size = (int(data_shape[2]), int(data_shape[1]))
    augs: list[Transform] = []
    if resize > 0:
        augs.append(ResizeAug(resize, inter_method))
    if rand_resize:
        if not rand_crop:
            raise ParameterError("rand_resize needs rand_crop")
        augs.append(RandomSizedCropAug(crop_size, 0.08, (3.0 / 4.0, 4.0 / 3.0), inter_method))
    elif rand_crop:
        augs.append(RandomCropAug(crop_size, inter_method))
    else:
        augs.append(CenterCropAug(crop_size, inter_method))
    if rand_mirror:
        augs.append(HorizontalFlipAug(0.5))
    augs.append(CastAug())
    if brightness or contrast or saturation:
        augs.append(ColorJitterAug(brightness, contrast, saturation))
    if hue:
        augs.append(HueJitterAug(hue))
    if pca_noise > 0:
        augs.append(LightingAug(pca_noise))
    if rand_gray > 0:
        augs.append(RandomGrayAug(rand_gray))
    if mean is True:
        mean = IMAGENET_MEAN_RGB
    if std is True:
        std = IMAGENET_STD_RGB
    if mean is not None or std is not None:
        augs.append(ColorNormalizeAug(mean, std))
    return augs


# -- Gluon-style transforms ------------------------------------------------------------------

class RandomResizedCrop(RandomSizedCropAug):
    """Gluon's ``RandomResizedCrop``: area fraction in ``scale``, aspect ratio in ``ratio``, resized to ``size``."""

    def __init__(self, size: int | Size, scale: tuple[float, float] = (0.08, 1.0),
                 ratio: tuple[float, float] = (3.0 / 4.0, 4.0 / 3.0), interpolation: int = INTER_LINEAR,
                 seed: int | None = None) -> None:
        super().__init__(_size(size), tuple(scale), ratio, interpolation, seed)


class CenterCrop(CenterCropAug):
    """Gluon's ``CenterCrop`` (bilinear by default)."""

    def __init__(self, size: int | Size, interpolation: int = INTER_LINEAR) -> None:
        super().__init__(_size(size), interpolation)


class Resize(Transform):
    """Gluon's ``Resize``: to ``size`` (w, h); with ``keep_ratio`` and an int size, the shorter side to ``size``."""

    def __init__(self, size: int | Size, keep_ratio: bool = False, interpolation: int = INTER_LINEAR) -> None:
        super().__init__(0)
        self.size, self.keep_ratio, self.interpolation = size, keep_ratio, interpolation

    def __call__(self, img: np.ndarray, rng: SampleRandom | None = None) -> np.ndarray:
        if self.keep_ratio and isinstance(self.size, (int, np.integer)):
            return resize_shorter(img, int(self.size), self.interpolation, self._random(rng))
        width, height = _size(self.size)
        inter = resolve_interpolation(self.interpolation, (img.shape[1], img.shape[0]), (width, height),
                                      self._random(rng))
        return resize(img, width, height, inter)


class ToTensor(Transform):
    """HWC (or NHWC) ``uint8`` in ``[0, 255]`` -> CHW (or NCHW) float32 in ``[0, 1]``."""

    def __init__(self) -> None:
        super().__init__(0)

    def __call__(self, img: np.ndarray, rng: SampleRandom | None = None) -> np.ndarray:
        img = np.asarray(img)
        if img.ndim == 2:
            img = img[:, :, None]
        if img.ndim not in (3, 4):
            raise ParameterError(f"ToTensor needs an HWC or NHWC image, got shape {img.shape}")
        axes = (2, 0, 1) if img.ndim == 3 else (0, 3, 1, 2)
        return np.ascontiguousarray(img.transpose(axes), dtype=np.float32) / np.float32(255.0)


class Normalize(Transform):
    """``(x - mean[c]) / std[c]`` for each channel ``c`` of a CHW (or NCHW) float image; scalars apply to all."""

    def __init__(self, mean: float | Sequence[float] = 0.0, std: float | Sequence[float] = 1.0) -> None:
        super().__init__(0)
        self.mean = np.asarray(mean, np.float32)
        self.std = np.asarray(std, np.float32)

    def __call__(self, img: np.ndarray, rng: SampleRandom | None = None) -> np.ndarray:
        img = np.asarray(img, dtype=np.float32)
        if img.ndim not in (3, 4):
            raise ParameterError(f"Normalize needs a CHW or NCHW tensor, got shape {img.shape}")
        channels = img.shape[-3]
        for name, value in (("mean", self.mean), ("std", self.std)):
            if value.size not in (1, channels):
                raise ParameterError(f"Normalize: {value.size} {name} values for {channels} channels")
        return (img - self.mean.reshape(-1, 1, 1)) / self.std.reshape(-1, 1, 1)


# -- collate ---------------------------------------------------------------------------------------

def pad_to_max(arrays: Sequence[np.ndarray], pad_value: float = 0) -> tuple[np.ndarray, np.ndarray]:
    """Stack arrays of equal rank into one, each padded at the end of every axis to the largest size.

    Returns the batch and the original shapes (``(N, ndim)`` int64).
    """
    arrays = [np.asarray(a) for a in arrays]
    if not arrays:
        raise ParameterError("nothing to collate")
    ranks = {a.ndim for a in arrays}
    if len(ranks) != 1:
        raise ParameterError(f"cannot collate arrays of different ranks {sorted(ranks)}")
    shapes = np.array([a.shape for a in arrays], np.int64).reshape(len(arrays), -1)
    dtype = np.result_type(*arrays)
    batch = np.full((len(arrays), *shapes.max(axis=0)), pad_value, dtype=dtype)
    for out, a in zip(batch, arrays, strict=True):
        out[tuple(slice(0, n) for n in a.shape)] = a
    return batch, shapes


def pad_collate(samples: Sequence[Any], pad_value: float = 0, *, return_shapes: bool = False) -> Any:
    """Collate a batch whose images differ in size: pad each to the batch maximum, stack.

    ``samples`` are arrays, or tuples whose first item is the image (the other
    items are stacked as they are, e.g. labels). Returns the batch (or a tuple
    of batches), followed by the original image shapes when ``return_shapes``.
    """
    if samples and isinstance(samples[0], (tuple, list)):
        images, *others = zip(*samples, strict=True)
        batch, shapes = pad_to_max(images, pad_value)
        result = (batch, *(np.stack([np.asarray(v) for v in field]) for field in others))
        return (*result, shapes) if return_shapes else result
    batch, shapes = pad_to_max(samples, pad_value)
    return (batch, shapes) if return_shapes else batch
