"""MXNet's default augmenter (``aug_default``), composed from the kernels of :mod:`mxrec.transforms.functional`.

Images are ``uint8`` arrays, HWC (or HW for grey), in OpenCV's BGR channel
order as decoded; the iterators swap to RGB when they write the output batch.
Random choices come from the sample's :class:`~mxrec.transforms.rng.SampleRandom`.

:class:`DefaultAugmenter` reproduces ``aug_default``, the augmenter behind
``mx.io.ImageRecordIter`` (``src/io/image_aug_default.cc``), step by step and in
its order:

1. ``resize``: scale the shorter side to ``resize`` (the longer one with
   integer arithmetic: ``resize * long // short``).
2. affine warp, when any of ``max_rotate_angle``, ``rotate``, ``rotate_list``,
   ``max_shear_ratio``, ``min/max_random_scale``, the aspect-ratio range
   (unless ``random_resized_crop``), ``min/max_img_size`` is set: rotation,
   shear, scale and aspect change about the centre, border ``fill_value``.
3. ``pad`` pixels of ``fill_value`` on every side.
4. crop to ``data_shape``: ``random_resized_crop`` (area and aspect ranges,
   10 attempts), or a square of random side in ``[min_crop_size,
   max_crop_size]`` resized to the output, or else a centre (``rand_crop``:
   random) crop, after scaling up an image smaller than the output.
5. colour: ``brightness``/``contrast``/``saturation`` in random order, then a
   shift in HLS space (``random_h/s/l``), then AlexNet PCA lighting noise
   (``pca_noise``).

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
from dataclasses import dataclass, field, fields

import numpy as np

from mxrec.errors import ImageDecodeError, ParameterError
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
    resize_shorter,
    resolve_interpolation,
    shift_hls,
    shorter_side_size,
    warp_affine,
)
from mxrec.transforms.rng import SampleRandom

# -- MXNet's default augmenter -----------------------------------------------------------

@dataclass(frozen=True)
class AugmentParams:
    """The parameters of MXNet's ``aug_default`` (defaults as MXNet's; ``-1`` means "off" where MXNet uses it).

    ``data_shape`` is the output ``(channels, height, width)``. Validated on creation.
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

    @property
    def uses_affine(self) -> bool:
        """Whether step 2 (the affine warp) runs, by MXNet's rule."""
        return (self.max_rotate_angle > 0 or self.max_shear_ratio > 0 or self.rotate > 0 or bool(self.rotate_list)
                or self.max_random_scale != 1.0 or self.min_random_scale != 1.0
                or (not self.random_resized_crop and self.aspect_range != (1.0, 1.0))
                or self.max_img_size != 1e10 or self.min_img_size != 0.0)

    @property
    def is_random(self) -> bool:
        """Whether any step draws random numbers (so that a sample's result depends on its random stream)."""
        return (self.rand_crop or self.random_resized_crop or self.uses_affine or self.max_crop_size != -1
                or self.inter_method == INTER_RANDOM or self.brightness > 0 or self.contrast > 0
                or self.saturation > 0 or self.pca_noise > 0 or bool(self.random_h or self.random_s or self.random_l))

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The parameter names accepted by the constructor."""
        return tuple(f.name for f in fields(cls) if f.init)


class DefaultAugmenter:
    """MXNet's ``aug_default``: ``augmenter(img, rng)`` returns the augmented ``data_shape``-sized image."""

    def __init__(self, params: AugmentParams) -> None:
        self.params = params
        self.height, self.width = params.data_shape[1], params.data_shape[2]
        self._warps = params.uses_affine  # evaluated once: it is asked for every image

    def reduced_decode_size(self, height: int, width: int, rng: SampleRandom | None = None) -> tuple[int, int] | None:
        """The smallest ``(height, width)`` a ``height`` x ``width`` image may be decoded at for the same
        augmentation (same random draws, same sizes), or ``None`` when it must be decoded at full size.

        ``resize``: the image is first scaled to that size anyway, so it may arrive at any size at least as
        large. Else ``random_resized_crop`` (no warp, no pad): the crop box is drawn on the full size, from
        ``rng`` -- a fresh copy of the sample's stream, whose first draws are the box's -- and the image may
        be as small as keeps that box at least the output size.
        """
        p = self.params
        if p.resize > 0:
            return shorter_side_size(height, width, p.resize)
        if not p.random_resized_crop or self._warps or p.pad > 0 or rng is None:
            return None
        if (p.min_random_area, p.max_random_area) == (1.0, 1.0) and p.aspect_range == (1.0, 1.0):
            return None
        box = random_resized_box(height, width, (p.min_random_area, p.max_random_area), p.aspect_range, rng,
                                 swap=True)
        if box is None:
            return None
        factor = max(self.height / box[3], self.width / box[2])
        if factor >= 1:
            return None
        return math.ceil(height * factor), math.ceil(width * factor)

    def __call__(self, img: np.ndarray, rng: SampleRandom, source: tuple[int, int] | None = None) -> np.ndarray:
        """The augmented image; ``source``: the full ``(height, width)`` of an image decoded reduced."""
        p = self.params
        if p.resize > 0:
            img = resize_shorter(img, p.resize, p.inter_method, rng, source)
            source = None
        if self._warps:
            img = self._warp(img, rng)
        if p.pad > 0:
            img = pad(img, p.pad, p.fill_value)
        cropped = None
        if p.random_resized_crop:
            cropped = self._random_resized_crop(img, rng, source)
        elif p.max_crop_size != -1:
            cropped = self._random_size_crop(img, rng)
        img = cropped if cropped is not None else self._centre_crop(img, rng)
        if p.brightness > 0 or p.contrast > 0 or p.saturation > 0:
            img = self._colour_jitter(img, rng)
        if p.random_h or p.random_s or p.random_l:
            img = self._hls_jitter(img, rng)
        if p.pca_noise > 0:
            alpha = (rng.normal(p.pca_noise), rng.normal(p.pca_noise), rng.normal(p.pca_noise))
            img = add_lighting(img, pca_rgb_offset(alpha)[::-1])
        return img

    def _warp(self, img: np.ndarray, rng: SampleRandom) -> np.ndarray:
        p = self.params
        height, width = img.shape[:2]
        shear = rng.uniform(-p.max_shear_ratio, p.max_shear_ratio)
        angle = rng.integers(-p.max_rotate_angle, p.max_rotate_angle)
        if p.rotate > 0:
            angle = p.rotate
        if p.rotate_list:
            angle = rng.choice(p.rotate_list)
        scale, ratio = 1.0, 1.0
        if not p.random_resized_crop:
            scale = rng.uniform(p.min_random_scale, p.max_random_scale)
            ratio = rng.uniform(*p.aspect_range)
        f32 = np.float32
        out_w = max(f32(p.min_img_size), min(f32(p.max_img_size), f32(scale) * f32(width)))
        out_h = max(f32(p.min_img_size), min(f32(p.max_img_size), f32(scale) * f32(height)))
        size = (int(out_w), int(out_h))
        if size[0] <= 0 or size[1] <= 0:
            raise ParameterError(f"the affine warp makes a {width}x{height} image {size[0]}x{size[1]}")
        matrix = affine_matrix(width, height, angle, shear, scale, ratio, out_w, out_h)
        inter = resolve_interpolation(p.inter_method, (width, height), size, rng)
        return warp_affine(img, matrix, size[0], size[1], inter, p.fill_value)

    def _random_resized_crop(self, img: np.ndarray, rng: SampleRandom,
                             source: tuple[int, int] | None = None) -> np.ndarray | None:
        """A random area/aspect crop resized to the output; ``None`` when the ranges are trivial or 10 tries fail.

        ``source``: the full ``(height, width)`` of an image decoded reduced: the box is drawn on it and
        scaled to the reduced image.
        """
        p = self.params
        if (p.min_random_area, p.max_random_area) == (1.0, 1.0) and p.aspect_range == (1.0, 1.0):
            return None
        height, width = img.shape[:2] if source is None else source
        box = random_resized_box(height, width, (p.min_random_area, p.max_random_area), p.aspect_range, rng,
                                 swap=True)
        if box is None:
            return None
        x, y, crop_w, crop_h = box
        inter = resolve_interpolation(p.inter_method, (crop_w, crop_h), (self.width, self.height), rng)
        if source is not None:  # the same box, sampled from the reduced image
            scale = (img.shape[1] / width, img.shape[0] / height)
            return resize_scaled_box(img, box, scale, self.width, self.height, inter)
        return resize(crop(img, x, y, crop_w, crop_h), self.width, self.height, inter)

    def _random_size_crop(self, img: np.ndarray, rng: SampleRandom) -> np.ndarray:
        """A square of random side in ``[min_crop_size, max_crop_size]`` resized to the output."""
        p = self.params
        height, width = img.shape[:2]
        if width < p.max_crop_size or height < p.max_crop_size:
            raise ImageDecodeError(f"a {width}x{height} image is smaller than max_crop_size={p.max_crop_size}")
        side = rng.integers(p.min_crop_size, p.max_crop_size)
        if p.rand_crop:
            y, x = rng.integers(0, height - side), rng.integers(0, width - side)
        else:
            x, y = centre_offsets(height, width, side, side)
        inter = resolve_interpolation(p.inter_method, (side, side), (self.width, self.height), rng)
        return resize(crop(img, x, y, side, side), self.width, self.height, inter)

    def _centre_crop(self, img: np.ndarray, rng: SampleRandom) -> np.ndarray:
        """Scale up a side shorter than the output (keeping the aspect), then crop the centre (or at random)."""
        p = self.params
        out_h, out_w = self.height, self.width
        height, width = img.shape[:2]
        inter = resolve_interpolation(p.inter_method, (width, height), (out_w, out_h), rng)
        f32 = np.float32
        if height < out_h:
            # MXNet's float32 arithmetic, truncated; max() guards a rounding shortfall MXNet would abort on.
            width = max(int(f32(out_h) / f32(height) * f32(width)), 1)
            height = out_h
            img = resize(img, width, height, inter)
        if width < out_w:
            height = max(int(f32(out_w) / f32(width) * f32(height)), out_h)
            width = out_w
            img = resize(img, width, height, inter)
        if p.rand_crop:
            y, x = rng.integers(0, height - out_h), rng.integers(0, width - out_w)
        else:
            x, y = centre_offsets(height, width, out_h, out_w)
        return crop(img, x, y, out_w, out_h)

    def _colour_jitter(self, img: np.ndarray, rng: SampleRandom) -> np.ndarray:
        p = self.params
        alpha_b = 1.0 + rng.uniform(-p.brightness, p.brightness)
        alpha_c = 1.0 + rng.uniform(-p.contrast, p.contrast)
        alpha_s = 1.0 + rng.uniform(-p.saturation, p.saturation)
        for step in rng.shuffled([0, 1, 2]):
            if step == 0 and p.brightness > 0:
                img = adjust_brightness(img, alpha_b)
            elif step == 1 and p.contrast > 0:
                img = adjust_contrast(img, alpha_c)
            elif step == 2 and p.saturation > 0:
                img = adjust_saturation(img, alpha_s)
        return img

    def _hls_jitter(self, img: np.ndarray, rng: SampleRandom) -> np.ndarray:
        p = self.params
        # MXNet's recipe: (u1 + 4 u2) / 5 for each of H, S, L, then a symmetric range, truncated to int.
        draws = [(rng.random() + 4 * rng.random()) / 5 for _ in range(3)]
        hue, sat, light = (int(d * limit * 2 - limit) for d, limit in zip(draws, (p.random_h, p.random_s, p.random_l),
                                                                          strict=True))
        return shift_hls(img, hue, light, sat)
