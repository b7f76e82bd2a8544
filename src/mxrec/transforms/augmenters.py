"""``mx.image``'s augmenters: the ``aug_list`` of :class:`~mxrec.train.image_iter.ImageIter`, and ``CreateAugmenter``.

Every transform is a callable object, ``t(img, rng=None)`` (:class:`Transform`):
random ones draw from ``rng`` (a :class:`~mxrec.transforms.rng.SampleRandom`;
the iterators pass each sample's own stream, which makes results independent
of threads) or, when called without one, from the transform's own stream,
seeded by its ``seed`` argument (fresh entropy when ``None``). Images are
numpy arrays, HWC, RGB (as ``mx.image.imdecode`` gives), ``uint8`` or float;
the colour ones work on float images, after :class:`CastAug`, as in MXNet.
Sizes are ``(width, height)``; ``mx.image`` defaults to bicubic interpolation
(code 2). :func:`create_augmenter` is ``mx.image.CreateAugmenter``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from mxrec.errors import ParameterError, document_parameters
from mxrec.transforms.functional import (
    INTER_CUBIC,
    LUMA_RGB,
    Size,
    center_crop,
    entropy,
    grey_level,
    mirror,
    pca_rgb_offset,
    random_crop,
    random_size_crop,
    resize,
    resize_shorter,
    resolve_interpolation,
    size_pair,
)
from mxrec.transforms.rng import SampleRandom

# mx.image's colour constants: YIQ transforms; the grey mix of RandomGrayAug (R, G, B weights).
_RGB_TO_YIQ = np.array([[0.299, 0.587, 0.114], [0.596, -0.274, -0.321], [0.211, -0.523, 0.311]])
_YIQ_TO_RGB = np.array([[1.0, 0.956, 0.621], [1.0, -0.272, -0.647], [1.0, -1.107, 1.705]])
_GREY_MIX = (0.21, 0.72, 0.07)
IMAGENET_MEAN_RGB = (123.68, 116.28, 103.53)
IMAGENET_STD_RGB = (58.395, 57.12, 57.375)


# -- transform objects ---------------------------------------------------------------------

#: What the constructor parameters the transforms share mean, written once: a transform's docstring describes its
#: own parameters, and :func:`~mxrec.errors.document_parameters` appends these for the rest.
_PARAMETERS = {
    "seed": "Seed of the transform's own random stream, used when it is called without one (``rng``); default: "
            "fresh entropy.",
    "interp": "OpenCV's interpolation code (0-4), or 9/10 for MXNet's automatic or random choice.",
    "interpolation": "OpenCV's interpolation code (``0``-``4``), or ``9``/``10`` for MXNet's automatic or random "
                     "choice.",
    "size": "``(width, height)`` of the output (Gluon's classes take an int too: a square).",
    "ratio": "Range of the crop's aspect ratio (width / height).",
    "transforms": "The transforms (callables; :class:`Transform` s get the random stream).",
    "amount": "The jitter strength: ``alpha`` is drawn from ``1 + U(-amount, amount)`` (kept under MXNet's name for "
              "it, the class's ``amount_name``).",
}


class Transform:
    """Base class: ``t(img, rng=None)``; random subclasses draw from ``rng`` or from their own stream."""

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        document_parameters(cls, _PARAMETERS)

    def __init__(self, seed: int | None = None) -> None:
        self._stream = SampleRandom(entropy() if seed is None else seed)

    def _random(self, rng: SampleRandom | None) -> SampleRandom:
        return rng if rng is not None else self._stream

    def __call__(self, img: np.ndarray, rng: SampleRandom | None = None) -> np.ndarray:
        raise NotImplementedError

    def __repr__(self) -> str:
        shown = {k: v for k, v in vars(self).items() if not k.startswith("_")}
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in shown.items())})"


document_parameters(Transform, _PARAMETERS)  # __init_subclass__ runs for the subclasses only


class SequentialAug(Transform):
    """Apply ``transforms`` one after the other."""

    def __init__(self, transforms: Sequence[Callable], seed: int | None = None) -> None:
        super().__init__(seed)
        self.transforms = list(transforms)

    def __call__(self, img: np.ndarray, rng: SampleRandom | None = None) -> np.ndarray:
        rng = self._random(rng)
        for t in self._order(rng):
            img = t(img, rng) if isinstance(t, Transform) else t(img)
        return img

    def _order(self, rng: SampleRandom) -> list[Callable]:
        return self.transforms


class RandomOrderAug(SequentialAug):
    """Apply ``transforms`` in a random order."""

    def _order(self, rng: SampleRandom) -> list[Callable]:
        # drawn from the same stream the transforms then draw from, as MXNet does
        return rng.shuffled(self.transforms)


class ResizeAug(Transform):
    """Scale the shorter side to ``size``.

    Parameters
    ----------
    size
        The shorter side's new length.
    """

    def __init__(self, size: int, interp: int = INTER_CUBIC, seed: int | None = None) -> None:
        super().__init__(seed)
        self.size, self.interp = size, interp

    def __call__(self, img: np.ndarray, rng: SampleRandom | None = None) -> np.ndarray:
        return resize_shorter(img, self.size, self.interp, self._random(rng))


class ForceResizeAug(Transform):
    """Resize to ``size`` (w, h) whatever the aspect ratio."""

    def __init__(self, size: Size, interp: int = INTER_CUBIC, seed: int | None = None) -> None:
        super().__init__(seed)
        self.size, self.interp = size_pair(size), interp

    def __call__(self, img: np.ndarray, rng: SampleRandom | None = None) -> np.ndarray:
        width, height = self.size
        inter = resolve_interpolation(self.interp, (img.shape[1], img.shape[0]), self.size, self._random(rng))
        return resize(img, width, height, inter)


class _CropAug(Transform):
    """A crop of ``size`` (w, h) by ``crop_op`` (an ``mx.image`` functional crop returning ``(image, box)``)."""

    crop_op: Callable

    def __init__(self, size: Size, interp: int = INTER_CUBIC, seed: int | None = None) -> None:
        super().__init__(seed)
        self.size, self.interp = size_pair(size), interp

    def __call__(self, img: np.ndarray, rng: SampleRandom | None = None) -> np.ndarray:
        return type(self).crop_op(img, self.size, self.interp, self._random(rng))[0]


class RandomCropAug(_CropAug):
    """A random crop of ``size`` (w, h), scaled down to fit a smaller image, then resized back up."""

    crop_op = staticmethod(random_crop)


class RandomSizedCropAug(Transform):
    """A crop of random area and aspect ratio, resized to ``size`` (w, h).

    Parameters
    ----------
    area
        Range of the crop's area as a fraction of the image's (a number: from it to 1).
    """

    def __init__(self, size: Size, area: float | tuple[float, float], ratio: tuple[float, float],
                 interp: int = INTER_CUBIC, seed: int | None = None) -> None:
        super().__init__(seed)
        self.size, self.area, self.ratio, self.interp = size_pair(size), area, tuple(ratio), interp

    def __call__(self, img: np.ndarray, rng: SampleRandom | None = None) -> np.ndarray:
        return random_size_crop(img, self.size, self.area, self.ratio, self.interp, self._random(rng))[0]


class CenterCropAug(_CropAug):
    """The centred crop of ``size`` (w, h), scaled down to fit a smaller image, then resized back up."""

    crop_op = staticmethod(center_crop)


class HorizontalFlipAug(Transform):
    """Flip left-right with probability ``p``.

    Parameters
    ----------
    p
        The probability of a flip.
    """

    def __init__(self, p: float = 0.5, seed: int | None = None) -> None:
        super().__init__(seed)
        self.p = p

    def __call__(self, img: np.ndarray, rng: SampleRandom | None = None) -> np.ndarray:
        return mirror(img) if self._random(rng).random() < self.p else img


class CastAug(Transform):
    """Convert to ``typ`` (float32 by default).

    Parameters
    ----------
    typ
        The numpy type name.
    """

    def __init__(self, typ: str = "float32") -> None:
        super().__init__(0)
        self.typ = typ

    def __call__(self, img: np.ndarray, rng: SampleRandom | None = None) -> np.ndarray:
        return img.astype(self.typ)


class _JitterAug(Transform):
    """A jitter of strength ``amount`` (kept as the attribute MXNet names, :attr:`amount_name`).

    Each call draws ``alpha = 1 + U(-amount, amount)`` and returns :meth:`_blend` of the image with it.
    """

    amount_name: str

    def __init__(self, amount: float, seed: int | None = None) -> None:
        super().__init__(seed)
        setattr(self, self.amount_name, amount)

    def __call__(self, img: np.ndarray, rng: SampleRandom | None = None) -> np.ndarray:
        amount = getattr(self, self.amount_name)
        return self._blend(img, 1.0 + self._random(rng).uniform(-amount, amount))

    def _blend(self, img: np.ndarray, alpha: float) -> np.ndarray:
        raise NotImplementedError


class BrightnessJitterAug(_JitterAug):
    """Multiply by ``1 + U(-brightness, brightness)``."""

    amount_name = "brightness"

    def _blend(self, img: np.ndarray, alpha: float) -> np.ndarray:
        return img * np.float32(alpha)


class ContrastJitterAug(_JitterAug):
    """Blend with the image's mean luma: ``alpha * img + (1 - alpha) * mean_grey``, ``alpha = 1 + U(-c, c)``."""

    amount_name = "contrast"

    def _blend(self, img: np.ndarray, alpha: float) -> np.ndarray:
        mean_grey = float(grey_level(img, LUMA_RGB).mean())
        return img * np.float32(alpha) + np.float32((1.0 - alpha) * mean_grey)


class SaturationJitterAug(_JitterAug):
    """Blend each pixel with its luma: ``alpha * img + (1 - alpha) * grey``, ``alpha = 1 + U(-s, s)``."""

    amount_name = "saturation"

    def _blend(self, img: np.ndarray, alpha: float) -> np.ndarray:
        grey = grey_level(img, LUMA_RGB)[..., None]
        return img * np.float32(alpha) + grey * np.float32(1.0 - alpha)


class HueJitterAug(Transform):
    """Rotate the hue by ``U(-hue, hue)`` half-turns in YIQ space (a linear approximation, as MXNet).

    Parameters
    ----------
    hue
        The largest rotation.
    """

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
    """Brightness, contrast and saturation jitter (those not 0), in random order.

    Parameters
    ----------
    brightness
        Brightness jitter strength (0: off).
    contrast
        Contrast jitter strength (0: off).
    saturation
        Saturation jitter strength (0: off).
    """

    def __init__(self, brightness: float, contrast: float, saturation: float, seed: int | None = None) -> None:
        jitters = [cls(v) for cls, v in ((BrightnessJitterAug, brightness), (ContrastJitterAug, contrast),
                                         (SaturationJitterAug, saturation)) if v > 0]
        super().__init__(jitters, seed)


class LightingAug(Transform):
    """AlexNet PCA lighting noise: add ``eigvec @ (alpha * eigval)``, ``alpha ~ N(0, alphastd)`` per component.

    Parameters
    ----------
    alphastd
        Standard deviation of the noise per principal component.
    """

    def __init__(self, alphastd: float, seed: int | None = None) -> None:
        super().__init__(seed)
        self.alphastd = alphastd

    def __call__(self, img: np.ndarray, rng: SampleRandom | None = None) -> np.ndarray:
        rng = self._random(rng)
        return img + pca_rgb_offset([rng.normal(self.alphastd) for _ in range(3)])


class RandomGrayAug(Transform):
    """With probability ``p``, replace every channel by the grey mix ``0.21 R + 0.72 G + 0.07 B``.

    Parameters
    ----------
    p
        The probability of greying.
    """

    def __init__(self, p: float, seed: int | None = None) -> None:
        super().__init__(seed)
        self.p = p

    def __call__(self, img: np.ndarray, rng: SampleRandom | None = None) -> np.ndarray:
        if self._random(rng).random() >= self.p:
            return img
        return np.repeat(grey_level(img, _GREY_MIX)[..., None], 3, axis=2)


class ColorNormalizeAug(Transform):
    """``(img - mean) / std`` per channel (either may be ``None``) on HWC images.

    Parameters
    ----------
    mean
        Per-channel means, or ``None``.
    std
        Per-channel standard deviations, or ``None``.
    """

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
    """``mx.image.CreateAugmenter``: the standard augmenter list for ``data_shape``.

    Parameters
    ----------
    data_shape
        ``(channels, height, width)`` of the output.
    resize
        Resize the shorter side to this first (0: no resize).
    rand_crop
        A random crop of the output size (else a centre crop).
    rand_resize
        A random-area, random-aspect crop (needs ``rand_crop``).
    rand_mirror
        Flip left-right with probability 1/2.
    mean, std
        Per-channel normalisation; ``True`` uses the ImageNet RGB statistics.
    brightness, contrast, saturation, hue
        Colour-jitter strengths (0: off).
    pca_noise
        AlexNet-style lighting noise strength (0: off).
    rand_gray
        Probability of converting to grey.
    inter_method
        OpenCV's interpolation code, or ``9``/``10`` for MXNet's automatic or
        random choice.

    Returns
    -------
    list
        The augmenters, in the order MXNet applies them.

    Raises
    ------
    ParameterError
        ``rand_resize`` without ``rand_crop``.
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
