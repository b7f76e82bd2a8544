"""Gluon's ``vision.transforms``: the same names and defaults (bilinear interpolation), numpy in and out.

:class:`RandomResizedCrop`, :class:`RandomFlipLeftRight`, :class:`ToTensor`
(HWC ``uint8`` -> CHW float32 in ``[0, 1]``), :class:`Normalize`
(per-channel ``(x - mean) / std`` on CHW), :class:`Resize`,
:class:`CenterCrop`, :class:`Compose`. They are :class:`~mxrec.transforms.augmenters.Transform` s:
random ones draw from the stream they are given.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mxrec.errors import ParameterError
from mxrec.transforms.augmenters import CenterCropAug, HorizontalFlipAug, RandomSizedCropAug, SequentialAug, Transform
from mxrec.transforms.functional import INTER_LINEAR, Size, resize, resize_shorter, resolve_interpolation, size_pair
from mxrec.transforms.rng import SampleRandom


class Compose(SequentialAug):
    """Gluon's ``Compose``: apply ``transforms`` in order."""


class RandomResizedCrop(RandomSizedCropAug):
    """Gluon's ``RandomResizedCrop``: a random crop, resized to ``size``.

    Parameters
    ----------
    scale
        Range of the crop's area, as a fraction of the image's.
    """

    def __init__(self, size: int | Size, scale: tuple[float, float] = (0.08, 1.0),
                 ratio: tuple[float, float] = (3.0 / 4.0, 4.0 / 3.0), interpolation: int = INTER_LINEAR,
                 seed: int | None = None) -> None:
        super().__init__(size_pair(size), tuple(scale), ratio, interpolation, seed)


class RandomFlipLeftRight(HorizontalFlipAug):
    """Gluon's ``RandomFlipLeftRight``: flip left-right with probability 1/2."""

    def __init__(self, seed: int | None = None) -> None:
        super().__init__(0.5, seed)


class CenterCrop(CenterCropAug):
    """Gluon's ``CenterCrop``: the centre ``size`` of the image (scaled down to fit a smaller image, then resized)."""

    def __init__(self, size: int | Size, interpolation: int = INTER_LINEAR) -> None:
        super().__init__(size_pair(size), interpolation)


class Resize(Transform):
    """Gluon's ``Resize``.

    Parameters
    ----------
    keep_ratio
        With an int ``size``: resize the shorter side to ``size``, keeping the
        aspect ratio.
    """

    def __init__(self, size: int | Size, keep_ratio: bool = False, interpolation: int = INTER_LINEAR) -> None:
        super().__init__(0)
        self.size, self.keep_ratio, self.interpolation = size, keep_ratio, interpolation

    def __call__(self, img: np.ndarray, rng: SampleRandom | None = None) -> np.ndarray:
        if self.keep_ratio and isinstance(self.size, (int, np.integer)):
            return resize_shorter(img, int(self.size), self.interpolation, self._random(rng))
        width, height = size_pair(self.size)
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
    """Gluon's ``Normalize``: ``(x - mean[c]) / std[c]`` for each channel ``c`` of a CHW (or NCHW) float image.

    Parameters
    ----------
    mean
        One value per channel, or one for all.
    std
        One value per channel, or one for all.
    """

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
