"""MXNet's default augmenter (``aug_default``): a list of steps, built from its parameters.

Each step is a :class:`~mxrec.transforms.steps.Step` (its random choices drawn apart from their use, see
:mod:`mxrec.transforms.steps`) made of the kernels of :mod:`mxrec.transforms.functional`.
:meth:`AugmentParams.steps` (or :func:`default_steps`) turns MXNet's parameters into the list, and
:class:`DefaultAugmenter` runs it. Images are ``uint8`` arrays, HWC (or HW for grey), in OpenCV's BGR channel
order as decoded; the iterators swap to RGB when they write the output batch. Random choices come from the
sample's :class:`~mxrec.transforms.rng.SampleRandom`.

The steps reproduce ``aug_default``, the augmenter behind ``mx.io.ImageRecordIter``
(``src/io/image_aug_default.cc``), in its order (only those the parameters ask for are in the list):

1. :class:`ResizeShorter` (``resize``): scale the shorter side to ``resize`` (the longer one with
   integer arithmetic: ``resize * long // short``).
2. :class:`AffineWarp`, when any of ``max_rotate_angle``, ``rotate``, ``rotate_list``,
   ``max_shear_ratio``, ``min/max_random_scale``, the aspect-ratio range
   (unless ``random_resized_crop``), ``min/max_img_size`` is set: rotation,
   shear, scale and aspect change about the centre, border ``fill_value``.
3. :class:`Pad`: ``pad`` pixels of ``fill_value`` on every side.
4. crop to ``data_shape``: :class:`RandomAreaCrop` (``random_resized_crop``: area and aspect ranges,
   10 attempts, then a centre crop), or :class:`RandomSquareCrop` (a square of random side in
   ``[min_crop_size, max_crop_size]`` resized to the output), or else :class:`CropToSize` (a centre crop,
   ``rand_crop``: at random, after scaling up an image smaller than the output).
5. colour: :class:`ColourJitter` (``brightness``/``contrast``/``saturation`` in random order), then
   :class:`HLSJitter` (a shift in HLS space, ``random_h/s/l``), then :class:`PCALighting` (AlexNet PCA
   lighting noise, ``pca_noise``).

With ``fast_decode``, the first step says how small a JPEG may be decoded for the same draws and sizes
(:meth:`~mxrec.transforms.steps.Step.reduced_decode`): :class:`ResizeShorter` any size down to its target,
:class:`RandomAreaCrop` as small as keeps its box at least the output size.

``inter_method`` picks OpenCV's interpolation for every resize and warp (the
codes of :func:`~mxrec.transforms.functional.resolve_interpolation`).

Where MXNet has a bug, this does the right thing instead:

* contrast and saturation take the grey level of the BGR image with BGR
  weights (MXNet converts BGR data with the RGB formula, swapping the red and
  blue weights);
* the hue shift wraps around the colour circle (MXNet clamps hue at 180, which
  OpenCV's 8-bit HLS does not even use: hue runs 0-179);
* a crop size parameter given alone, ranges given upside down, or an image
  smaller than ``max_crop_size`` raise :class:`~mxrec.errors.ParameterError`
  or :class:`~mxrec.errors.ImageDecodeError` instead of undefined behaviour
  or an abort;
* nearest-neighbour interpolation (``inter_method=0``) is allowed with the
  affine warp (MXNet refuses it there but not elsewhere).

Random draws follow MXNet's recipe (which ranges, in which order) but cannot
reproduce its exact numbers: it uses C++ ``std::mt19937`` per thread.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any, NamedTuple

import numpy as np

from mxrec.errors import ImageDecodeError, ParameterError
from mxrec.train.dataiter import check_names, data_shape_of
from mxrec.transforms.functional import (
    INTER_LINEAR,
    INTER_METHODS,
    INTER_RANDOM,
    add_lighting,
    adjust_brightness,
    adjust_contrast,
    adjust_saturation,
    affine_matrix,
    centre_offsets,
    crop,
    pad,
    pca_rgb_offset,
    random_resized_box,
    resize,
    resize_scaled_box,
    resolve_interpolation,
    shift_hls,
    shorter_side_size,
    warp_affine,
)
from mxrec.transforms.rng import SampleRandom
from mxrec.transforms.steps import Shape, Step, StepList

# -- MXNet's default augmenter -----------------------------------------------------------

@dataclass(frozen=True)
class AugmentParams:
    """The parameters of MXNet's ``aug_default`` (defaults as MXNet's; ``-1`` means "off" where MXNet uses it).

    ``data_shape`` is the output ``(channels, height, width)``. Validated on creation; :meth:`steps` is the
    augmenter they make.
    """

    data_shape: tuple[int, int, int]
    resize: int = -1
    rand_crop: bool = False
    random_resized_crop: bool = False
    max_rotate_angle: int = 0
    rotate: int = -1
    rotate_list: tuple[int, ...] = ()
    max_aspect_ratio: float = 0.0
    min_aspect_ratio: float | None = None
    max_shear_ratio: float = 0.0
    max_crop_size: int = -1
    min_crop_size: int = -1
    max_random_scale: float = 1.0
    min_random_scale: float = 1.0
    max_random_area: float = 1.0
    min_random_area: float = 1.0
    max_img_size: float = 1e10
    min_img_size: float = 0.0
    brightness: float = 0.0
    contrast: float = 0.0
    saturation: float = 0.0
    pca_noise: float = 0.0
    random_h: int = 0
    random_s: int = 0
    random_l: int = 0
    fill_value: int = 255
    inter_method: int = INTER_LINEAR
    pad: int = 0
    aspect_range: tuple[float, float] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "rotate_list", _rotate_list(self.rotate_list))
        channels, height, width = self.data_shape
        if self.min_aspect_ratio is None:  # MXNet: [1 - max, 1 + max]
            aspect = (1.0 - self.max_aspect_ratio, 1.0 + self.max_aspect_ratio)
        else:
            aspect = (float(self.min_aspect_ratio), float(self.max_aspect_ratio))
        object.__setattr__(self, "aspect_range", aspect)
        if self.inter_method not in INTER_METHODS:
            raise ParameterError(f"inter_method must be one of {INTER_METHODS}, not {self.inter_method!r}")
        if aspect[0] <= 0 or aspect[0] > aspect[1]:
            raise ParameterError(f"aspect ratio range {aspect} must be positive and not reversed "
                                 "(min_aspect_ratio <= max_aspect_ratio, or max_aspect_ratio < 1 alone)")
        if not 0 < self.min_random_area <= self.max_random_area:
            raise ParameterError(f"need 0 < min_random_area <= max_random_area, got "
                                 f"{self.min_random_area}, {self.max_random_area}")
        if not 0 < self.min_random_scale <= self.max_random_scale:
            raise ParameterError(f"need 0 < min_random_scale <= max_random_scale, got "
                                 f"{self.min_random_scale}, {self.max_random_scale}")
        if (self.min_crop_size == -1) != (self.max_crop_size == -1):
            raise ParameterError("min_crop_size and max_crop_size must be given together")
        if self.max_crop_size != -1 and not 0 < self.min_crop_size <= self.max_crop_size:
            raise ParameterError(f"need 0 < min_crop_size <= max_crop_size, got "
                                 f"{self.min_crop_size}, {self.max_crop_size}")
        if self.random_resized_crop and (self.rand_crop or self.max_crop_size != -1
                                         or (self.min_random_scale, self.max_random_scale) != (1.0, 1.0)):
            raise ParameterError("random_resized_crop conflicts with rand_crop, min/max_crop_size and "
                                 "min/max_random_scale (as in MXNet)")
        for name in ("max_rotate_angle", "max_shear_ratio", "brightness", "contrast", "saturation", "pca_noise",
                     "random_h", "random_s", "random_l", "pad"):
            if getattr(self, name) < 0:
                raise ParameterError(f"{name} must be >= 0, got {getattr(self, name)}")
        if not 0 <= self.fill_value <= 255:
            raise ParameterError(f"fill_value must be in 0..255, got {self.fill_value}")
        if height <= 0 or width <= 0:
            raise ParameterError(f"data_shape {self.data_shape} must have a positive height and width")
        colour_ops = self.saturation > 0 or self.pca_noise > 0 or self.random_h or self.random_s or self.random_l
        if colour_ops and channels not in (3, 4):
            raise ParameterError(f"saturation, pca_noise and random_h/s/l need colour images; data_shape has "
                                 f"{channels} channel(s)")

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The parameter names accepted by the constructor."""
        return tuple(f.name for f in fields(cls) if f.init)

    def steps(self) -> list[Step]:
        """``aug_default`` for these parameters: the steps MXNet runs, in its order.

        Returns
        -------
        list
            :class:`~mxrec.transforms.steps.Step` objects (see the module's documentation), ending with the
            crop to ``data_shape``.
        """
        _, height, width = self.data_shape
        inter = self.inter_method
        steps: list[Step] = []
        if self.resize > 0:
            steps.append(ResizeShorter(self.resize, inter))
        if self._warps():
            scale = None if self.random_resized_crop else (self.min_random_scale, self.max_random_scale)
            steps.append(AffineWarp(max_rotate_angle=self.max_rotate_angle, rotate=self.rotate,
                                    rotate_list=self.rotate_list, max_shear_ratio=self.max_shear_ratio,
                                    random_scale=scale, aspect_range=None if scale is None else self.aspect_range,
                                    min_img_size=self.min_img_size, max_img_size=self.max_img_size,
                                    inter_method=inter, fill_value=self.fill_value))
        if self.pad > 0:
            steps.append(Pad(self.pad, self.fill_value))
        area = (self.min_random_area, self.max_random_area)
        if self.random_resized_crop and (area != (1.0, 1.0) or self.aspect_range != (1.0, 1.0)):
            steps.append(RandomAreaCrop(height, width, area, self.aspect_range, inter_method=inter))
        elif self.max_crop_size != -1:
            steps.append(RandomSquareCrop(height, width, self.min_crop_size, self.max_crop_size,
                                          rand_crop=self.rand_crop, inter_method=inter))
        else:  # also random_resized_crop with trivial ranges: MXNet centre-crops
            steps.append(CropToSize(height, width, rand_crop=self.rand_crop, inter_method=inter))
        if self.brightness > 0 or self.contrast > 0 or self.saturation > 0:
            steps.append(ColourJitter(self.brightness, self.contrast, self.saturation))
        if self.random_h or self.random_s or self.random_l:
            steps.append(HLSJitter(self.random_h, self.random_s, self.random_l))
        if self.pca_noise > 0:
            steps.append(PCALighting(self.pca_noise))
        return steps

    def _warps(self) -> bool:
        """Whether the affine warp runs, by MXNet's rule."""
        return (self.max_rotate_angle > 0 or self.max_shear_ratio > 0 or self.rotate > 0 or bool(self.rotate_list)
                or self.max_random_scale != 1.0 or self.min_random_scale != 1.0
                or (not self.random_resized_crop and self.aspect_range != (1.0, 1.0))
                or self.max_img_size != 1e10 or self.min_img_size != 0.0)


def _rotate_list(value: Any) -> tuple[int, ...]:
    """MXNet takes ``rotate_list`` as a comma-separated string; a sequence of ints is accepted too."""
    if isinstance(value, str):
        value = [v for v in value.split(",") if v.strip()]
    try:
        return tuple(int(v) for v in value)
    except (TypeError, ValueError):
        raise ParameterError(f"rotate_list must be integers (or a comma-separated string), got {value!r}") from None


def default_steps(data_shape: Sequence[int], **params: Any) -> list[Step]:
    """MXNet's default augmenter as a list of steps, to extend with your own for ``aug_list=``.

    Parameters
    ----------
    data_shape
        The output ``(channels, height, width)``.
    **params
        :class:`AugmentParams`' parameters (``resize``, ``rand_crop``, ``random_resized_crop``, ...).

    Returns
    -------
    list
        The steps, as :meth:`AugmentParams.steps`.

    Raises
    ------
    ParameterError
        A parameter is unknown, out of range, or conflicts with another.
    """
    check_names(params, [name for name in AugmentParams.names() if name != "data_shape"], "default_steps")
    return AugmentParams(data_shape=data_shape_of(data_shape), **params).steps()


class DefaultAugmenter(StepList):
    """MXNet's ``aug_default`` for ``params``: ``augmenter(img, rng)`` is the augmented ``data_shape``-sized image.

    A :class:`~mxrec.transforms.steps.StepList` of :meth:`AugmentParams.steps` (its draws and applies apart
    as well, for ``fast_decode``).

    Parameters
    ----------
    params
        The augmenter's parameters.
    """

    def __init__(self, params: AugmentParams) -> None:
        super().__init__(params.steps(), check=False)
        self.params = params


# -- the steps ------------------------------------------------------------------------------


def _shaped(shape: Shape, height: int, width: int) -> Shape:
    """``shape`` with another height and width (the channels kept)."""
    return (height, width, *shape[2:])


class ResizeShorter(Step):
    """Scale the shorter side to ``size``, the longer one ``long * size // short`` (MXNet's ``resize``).

    A reduced decode may be as small as the target: the target size and the interpolation are those of the
    full-size image.

    Parameters
    ----------
    size
        The new length of the shorter side.
    inter_method
        The interpolation (:func:`~mxrec.transforms.functional.resolve_interpolation`'s codes).
    """

    geometric = True

    def __init__(self, size: int, inter_method: int = INTER_LINEAR) -> None:
        super().__init__()
        self.size, self.inter_method = size, inter_method
        self.random = inter_method == INTER_RANDOM

    def draw(self, rng: SampleRandom | None, shape: Shape) -> tuple[int, int, int]:
        height, width = shape[:2]
        new_h, new_w = shorter_side_size(height, width, self.size)
        return new_w, new_h, resolve_interpolation(self.inter_method, (width, height), (new_w, new_h), rng)

    def output_shape(self, params: tuple[int, int, int], shape: Shape) -> Shape:
        return _shaped(shape, params[1], params[0])

    def reduced_decode(self, params: tuple[int, int, int], shape: Shape) -> tuple[tuple[int, int], Any]:
        return (params[1], params[0]), params

    def apply(self, img: np.ndarray, params: tuple[int, int, int]) -> np.ndarray:
        width, height, inter = params
        return resize(img, width, height, inter)


class AffineWarp(Step):
    """MXNet's affine warp: rotation, shear, scale and aspect change about the centre, border ``fill_value``.

    Parameters
    ----------
    max_rotate_angle
        Rotate by a random whole angle in ``[-max, max]`` degrees.
    rotate
        Rotate by this angle instead, when positive.
    rotate_list
        Rotate by one of these angles instead, at random.
    max_shear_ratio
        Shear by a random ratio in ``[-max, max)``.
    random_scale
        ``(min, max)`` of the random scale; ``None``: no scale or aspect draws (with ``random_resized_crop``).
    aspect_range
        ``(min, max)`` of the random aspect ratio (with ``random_scale``).
    min_img_size, max_img_size
        Bounds of the output's sides.
    inter_method
        The interpolation (:func:`~mxrec.transforms.functional.resolve_interpolation`'s codes).
    fill_value
        The grey level of the border.
    """

    geometric = True

    def __init__(self, *, max_rotate_angle: int = 0, rotate: int = -1, rotate_list: tuple[int, ...] = (),
                 max_shear_ratio: float = 0.0, random_scale: tuple[float, float] | None = (1.0, 1.0),
                 aspect_range: tuple[float, float] | None = (1.0, 1.0), min_img_size: float = 0.0,
                 max_img_size: float = 1e10, inter_method: int = INTER_LINEAR, fill_value: int = 255) -> None:
        super().__init__()
        self.max_rotate_angle, self.rotate, self.rotate_list = max_rotate_angle, rotate, tuple(rotate_list)
        self.max_shear_ratio, self.random_scale, self.aspect_range = max_shear_ratio, random_scale, aspect_range
        self.min_img_size, self.max_img_size = min_img_size, max_img_size
        self.inter_method, self.fill_value = inter_method, fill_value

    def draw(self, rng: SampleRandom | None, shape: Shape) -> tuple[np.ndarray, tuple[int, int], int]:
        height, width = shape[:2]
        shear = rng.uniform(-self.max_shear_ratio, self.max_shear_ratio)
        angle = rng.integers(-self.max_rotate_angle, self.max_rotate_angle)
        if self.rotate > 0:
            angle = self.rotate
        if self.rotate_list:
            angle = rng.choice(self.rotate_list)
        scale, ratio = 1.0, 1.0
        if self.random_scale is not None:
            scale = rng.uniform(*self.random_scale)
            ratio = rng.uniform(*self.aspect_range)
        f32 = np.float32
        out_w = max(f32(self.min_img_size), min(f32(self.max_img_size), f32(scale) * f32(width)))
        out_h = max(f32(self.min_img_size), min(f32(self.max_img_size), f32(scale) * f32(height)))
        size = (int(out_w), int(out_h))
        if size[0] <= 0 or size[1] <= 0:
            raise ParameterError(f"the affine warp makes a {width}x{height} image {size[0]}x{size[1]}")
        matrix = affine_matrix(width, height, angle, shear, scale, ratio, out_w, out_h)
        return matrix, size, resolve_interpolation(self.inter_method, (width, height), size, rng)

    def output_shape(self, params: tuple[np.ndarray, tuple[int, int], int], shape: Shape) -> Shape:
        return _shaped(shape, params[1][1], params[1][0])

    def apply(self, img: np.ndarray, params: tuple[np.ndarray, tuple[int, int], int]) -> np.ndarray:
        matrix, (width, height), inter = params
        return warp_affine(img, matrix, width, height, inter, self.fill_value)


class Pad(Step):
    """``border`` pixels of ``fill_value`` on every side.

    Parameters
    ----------
    border
        Pixels added on each side.
    fill_value
        Their grey level.
    """

    random = False
    geometric = True

    def __init__(self, border: int, fill_value: int = 255) -> None:
        super().__init__()
        self.border, self.fill_value = border, fill_value

    def output_shape(self, params: None, shape: Shape) -> Shape:
        border = 2 * self.border
        return (shape[0] + border, shape[1] + border, *shape[2:])

    def apply(self, img: np.ndarray, params: None) -> np.ndarray:
        return pad(img, self.border, self.fill_value)


class CropToSize(Step):
    """A ``width`` x ``height`` crop: scale up a side shorter than that (keeping the aspect), then crop the
    centre, or a random place (``rand_crop``). MXNet's crop when no other is asked for.

    Parameters
    ----------
    height, width
        The output size.
    rand_crop
        Crop at a random place instead of the centre.
    inter_method
        The interpolation of the scaling up (:func:`~mxrec.transforms.functional.resolve_interpolation`'s
        codes).
    """

    geometric = True

    def __init__(self, height: int, width: int, *, rand_crop: bool = False,
                 inter_method: int = INTER_LINEAR) -> None:
        super().__init__()
        self.height, self.width, self.rand_crop, self.inter_method = height, width, rand_crop, inter_method
        self.random = rand_crop or inter_method == INTER_RANDOM

    def draw(self, rng: SampleRandom | None, shape: Shape) -> tuple[tuple[tuple[int, int], ...], int, int, int]:
        out_h, out_w = self.height, self.width
        height, width = shape[:2]
        inter = resolve_interpolation(self.inter_method, (width, height), (out_w, out_h), rng)
        sizes: tuple[tuple[int, int], ...] = ()  # the scalings up, (width, height) each
        if height < out_h:
            # MXNet's float32 arithmetic, truncated; max() guards a rounding shortfall MXNet would abort on.
            width = max(int(np.float32(out_h) / np.float32(height) * np.float32(width)), 1)
            height = out_h
            sizes = ((width, height),)
        if width < out_w:
            height = max(int(np.float32(out_w) / np.float32(width) * np.float32(height)), out_h)
            width = out_w
            sizes = (*sizes, (width, height))
        if self.rand_crop:
            y, x = rng.integers(0, height - out_h), rng.integers(0, width - out_w)
        else:
            x, y = centre_offsets(height, width, out_h, out_w)
        return sizes, inter, x, y

    def output_shape(self, params: Any, shape: Shape) -> Shape:
        return _shaped(shape, self.height, self.width)

    def apply(self, img: np.ndarray, params: tuple[tuple[tuple[int, int], ...], int, int, int]) -> np.ndarray:
        sizes, inter, x, y = params
        for width, height in sizes:
            img = resize(img, width, height, inter)
        return crop(img, x, y, self.width, self.height)


class AreaCropDraw(NamedTuple):
    """:class:`RandomAreaCrop`'s choices: its box on the ``source`` image, or the centre crop's params."""

    box: tuple[int, int, int, int] | None  #: ``(x, y, width, height)``; ``None``: no box fitted
    inter: int  #: the interpolation
    source: tuple[int, int]  #: ``(height, width)`` the box was drawn on
    reduced: bool = False  #: the image arrives decoded reduced (:meth:`RandomAreaCrop.reduced_decode`)
    fallback: Any = None  #: :class:`CropToSize`'s params when ``box`` is ``None``


class RandomAreaCrop(Step):
    """MXNet's ``random_resized_crop``: a box of random area and aspect resized to the output, up to 10 draws,
    then a centre crop (:class:`CropToSize`).

    The box is drawn on the full-size image; the image may arrive decoded reduced, down to a size that keeps
    the box at least the output size: the same box is then sampled from it.

    Parameters
    ----------
    height, width
        The output size.
    area
        ``(min, max)`` of the box's area, a fraction of the image's.
    aspect
        ``(min, max)`` of the box's aspect ratio; its sides are swapped with probability 1/2.
    inter_method
        The interpolation (:func:`~mxrec.transforms.functional.resolve_interpolation`'s codes).
    """

    geometric = True

    def __init__(self, height: int, width: int, area: tuple[float, float], aspect: tuple[float, float], *,
                 inter_method: int = INTER_LINEAR) -> None:
        super().__init__()
        self.height, self.width, self.area, self.aspect = height, width, tuple(area), tuple(aspect)
        self.inter_method = inter_method
        self._fallback = CropToSize(height, width, inter_method=inter_method)

    def draw(self, rng: SampleRandom | None, shape: Shape) -> AreaCropDraw:
        height, width = shape[:2]
        box = random_resized_box(height, width, self.area, self.aspect, rng, swap=True)
        if box is None:
            return AreaCropDraw(None, 0, (height, width), fallback=self._fallback.draw(rng, shape))
        inter = resolve_interpolation(self.inter_method, (box[2], box[3]), (self.width, self.height), rng)
        return AreaCropDraw(box, inter, (height, width))

    def output_shape(self, params: AreaCropDraw, shape: Shape) -> Shape:
        return _shaped(shape, self.height, self.width)

    def reduced_decode(self, params: AreaCropDraw, shape: Shape) -> tuple[tuple[int, int], AreaCropDraw] | None:
        if params.box is None:
            return None
        factor = max(self.height / params.box[3], self.width / params.box[2])
        if factor >= 1:
            return None
        height, width = params.source
        return (math.ceil(height * factor), math.ceil(width * factor)), params._replace(reduced=True)

    def apply(self, img: np.ndarray, params: AreaCropDraw) -> np.ndarray:
        if params.box is None:
            return self._fallback.apply(img, params.fallback)
        x, y, crop_w, crop_h = params.box
        if params.reduced:  # the same box, sampled from the reduced image
            height, width = params.source
            scale = (img.shape[1] / width, img.shape[0] / height)
            return resize_scaled_box(img, params.box, scale, self.width, self.height, params.inter)
        return resize(crop(img, x, y, crop_w, crop_h), self.width, self.height, params.inter)


class RandomSquareCrop(Step):
    """MXNet's ``min_crop_size``/``max_crop_size``: a square of random side in ``[min, max]`` (at a random place
    with ``rand_crop``, else the centre) resized to the output.

    Parameters
    ----------
    height, width
        The output size.
    min_side, max_side
        The range of the square's side (both included).
    rand_crop
        Crop at a random place instead of the centre.
    inter_method
        The interpolation (:func:`~mxrec.transforms.functional.resolve_interpolation`'s codes).

    Raises
    ------
    ImageDecodeError
        (when drawing) The image is smaller than ``max_side``.
    """

    geometric = True

    def __init__(self, height: int, width: int, min_side: int, max_side: int, *, rand_crop: bool = False,
                 inter_method: int = INTER_LINEAR) -> None:
        super().__init__()
        self.height, self.width, self.min_side, self.max_side = height, width, min_side, max_side
        self.rand_crop, self.inter_method = rand_crop, inter_method

    def draw(self, rng: SampleRandom | None, shape: Shape) -> tuple[int, int, int, int]:
        height, width = shape[:2]
        if width < self.max_side or height < self.max_side:
            raise ImageDecodeError(f"a {width}x{height} image is smaller than max_crop_size={self.max_side}")
        side = rng.integers(self.min_side, self.max_side)
        if self.rand_crop:
            y, x = rng.integers(0, height - side), rng.integers(0, width - side)
        else:
            x, y = centre_offsets(height, width, side, side)
        return x, y, side, resolve_interpolation(self.inter_method, (side, side), (self.width, self.height), rng)

    def output_shape(self, params: Any, shape: Shape) -> Shape:
        return _shaped(shape, self.height, self.width)

    def apply(self, img: np.ndarray, params: tuple[int, int, int, int]) -> np.ndarray:
        x, y, side, inter = params
        return resize(crop(img, x, y, side, side), self.width, self.height, inter)


class ColourJitter(Step):
    """MXNet's brightness, contrast and saturation jitter (those above 0), in random order, on BGR(A) images.

    Each factor is ``1 + U(-amount, amount)``; contrast and saturation blend with the BGR grey level.

    Parameters
    ----------
    brightness, contrast, saturation
        The jitter amounts (0: off).
    """

    def __init__(self, brightness: float = 0.0, contrast: float = 0.0, saturation: float = 0.0) -> None:
        super().__init__()
        self.brightness, self.contrast, self.saturation = brightness, contrast, saturation

    def draw(self, rng: SampleRandom | None, shape: Shape) -> tuple[tuple[float, float, float], list[int]]:
        alpha_b = 1.0 + rng.uniform(-self.brightness, self.brightness)
        alpha_c = 1.0 + rng.uniform(-self.contrast, self.contrast)
        alpha_s = 1.0 + rng.uniform(-self.saturation, self.saturation)
        return (alpha_b, alpha_c, alpha_s), rng.shuffled([0, 1, 2])

    def apply(self, img: np.ndarray, params: tuple[tuple[float, float, float], list[int]]) -> np.ndarray:
        (alpha_b, alpha_c, alpha_s), order = params
        for step in order:
            if step == 0 and self.brightness > 0:
                img = adjust_brightness(img, alpha_b)
            elif step == 1 and self.contrast > 0:
                img = adjust_contrast(img, alpha_c)
            elif step == 2 and self.saturation > 0:
                img = adjust_saturation(img, alpha_s)
        return img


class HLSJitter(Step):
    """MXNet's ``random_h/s/l``: offsets in OpenCV's 8-bit HLS space (the hue wraps around), on BGR(A) images.

    Parameters
    ----------
    random_h, random_s, random_l
        The largest hue, saturation and lightness offsets.
    """

    def __init__(self, random_h: int = 0, random_s: int = 0, random_l: int = 0) -> None:
        super().__init__()
        self.random_h, self.random_s, self.random_l = random_h, random_s, random_l

    def draw(self, rng: SampleRandom | None, shape: Shape) -> tuple[int, int, int]:
        # MXNet's recipe: (u1 + 4 u2) / 5 for each of H, S, L, then a symmetric range, truncated to int.
        draws = [(rng.random() + 4 * rng.random()) / 5 for _ in range(3)]
        hue, sat, light = (int(d * limit * 2 - limit) for d, limit in
                           zip(draws, (self.random_h, self.random_s, self.random_l), strict=True))
        return hue, sat, light

    def apply(self, img: np.ndarray, params: tuple[int, int, int]) -> np.ndarray:
        hue, sat, light = params
        return shift_hls(img, hue, light, sat)


class PCALighting(Step):
    """AlexNet's PCA lighting noise (MXNet's ``pca_noise``) on BGR(A) images, MXNet's integer rounding.

    Parameters
    ----------
    pca_noise
        The standard deviation of each principal component's factor.
    """

    def __init__(self, pca_noise: float) -> None:
        super().__init__()
        self.pca_noise = pca_noise

    def draw(self, rng: SampleRandom | None, shape: Shape) -> np.ndarray:
        std = self.pca_noise
        return pca_rgb_offset((rng.normal(std), rng.normal(std), rng.normal(std)))[::-1]

    def apply(self, img: np.ndarray, params: np.ndarray) -> np.ndarray:
        return add_lighting(img, params)
