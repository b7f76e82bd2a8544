"""Image augmentation: small pure image operations, and MXNet's default augmenter built from them.

Images are ``uint8`` arrays, HWC (or HW for grey), in OpenCV's BGR channel
order as decoded; the iterators swap to RGB when they write the output batch.
Every operation takes the image and returns a new one (or the same object when
there is nothing to do); random choices come from a
:class:`~mxrec.rng.SampleRandom` passed in, never from global state.

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

``inter_method`` picks OpenCV's interpolation for every resize and warp:
0 nearest, 1 bilinear, 2 bicubic, 3 area, 4 Lanczos, 9 auto (bicubic when both
sides grow, area when both shrink, else bilinear), 10 random among 0-4.

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

from mxrec.codec import opencv
from mxrec.errors import ImageDecodeError, ParameterError
from mxrec.rng import SampleRandom

INTER_NEAREST, INTER_LINEAR, INTER_CUBIC, INTER_AREA, INTER_LANCZOS4 = 0, 1, 2, 3, 4
INTER_AUTO = 9
INTER_RANDOM = 10
INTER_METHODS = (INTER_NEAREST, INTER_LINEAR, INTER_CUBIC, INTER_AREA, INTER_LANCZOS4, INTER_AUTO, INTER_RANDOM)

# AlexNet's PCA of ImageNet RGB pixels: eigenvalues, and eigenvectors as columns (rows are R, G, B).
PCA_EIGVAL = np.array([55.46, 4.794, 1.148])
PCA_EIGVEC = np.array([[-0.5675, 0.7192, 0.4009],
                       [-0.5808, -0.0045, -0.8140],
                       [-0.5836, -0.6948, 0.4203]])

# Luma weights for B, G, R (ITU-R BT.601, as OpenCV's BGR2GRAY).
_GREY_WEIGHTS_BGR = (0.114, 0.587, 0.299)


# -- interpolation and sizes ---------------------------------------------------

def resolve_interpolation(inter_method: int, old_size: tuple[int, int], new_size: tuple[int, int],
                          rng: SampleRandom | None = None) -> int:
    """The OpenCV interpolation flag (0-4) for ``inter_method`` when resizing ``old_size`` to ``new_size`` (w, h).

    9 (auto) gives bicubic when both sides grow, area when both shrink, else
    bilinear; 10 (random) draws one of 0-4 from ``rng``.
    """
    if inter_method == INTER_AUTO:
        (old_w, old_h), (new_w, new_h) = old_size, new_size
        if new_w > old_w and new_h > old_h:
            return INTER_CUBIC
        if new_w < old_w and new_h < old_h:
            return INTER_AREA
        return INTER_LINEAR
    if inter_method == INTER_RANDOM:
        if rng is None:
            raise ParameterError("inter_method=10 (random) needs a random stream")
        return rng.integers(0, 4)
    if inter_method not in INTER_METHODS:
        raise ParameterError(f"inter_method must be one of {INTER_METHODS}, not {inter_method!r}")
    return inter_method


def shorter_side_size(height: int, width: int, size: int) -> tuple[int, int]:
    """``(new_height, new_width)`` with the shorter side ``size``; the longer one scaled by integer division (MXNet)."""
    if height > width:
        return size * height // width, size
    return size, size * width // height


def resize(img: np.ndarray, width: int, height: int, interpolation: int) -> np.ndarray:
    """``img`` resized to ``width`` x ``height`` with an OpenCV interpolation flag (0-4)."""
    if img.shape[1] == width and img.shape[0] == height:
        return img
    return opencv().resize(img, (int(width), int(height)), interpolation=interpolation)


def resize_shorter(img: np.ndarray, size: int, inter_method: int = INTER_LINEAR,
                   rng: SampleRandom | None = None) -> np.ndarray:
    """``img`` with its shorter side scaled to ``size`` (the aspect ratio kept, rounded down)."""
    height, width = img.shape[:2]
    new_h, new_w = shorter_side_size(height, width, size)
    return resize(img, new_w, new_h, resolve_interpolation(inter_method, (width, height), (new_w, new_h), rng))


def crop(img: np.ndarray, x: int, y: int, width: int, height: int) -> np.ndarray:
    """The ``width`` x ``height`` region of ``img`` whose top-left corner is ``(x, y)`` (a view)."""
    if x < 0 or y < 0 or x + width > img.shape[1] or y + height > img.shape[0]:
        raise ParameterError(f"crop ({x}, {y}, {width}x{height}) is outside the {img.shape[1]}x{img.shape[0]} image")
    return img[y:y + height, x:x + width]


def pad(img: np.ndarray, border: int, fill_value: int) -> np.ndarray:
    """``img`` with ``border`` pixels of ``fill_value`` added on every side."""
    cv2 = opencv()
    return cv2.copyMakeBorder(img, border, border, border, border, cv2.BORDER_CONSTANT,
                              value=(fill_value,) * 4)


def mirror(img: np.ndarray) -> np.ndarray:
    """``img`` flipped left-right."""
    return opencv().flip(img, 1)


# -- affine warp -----------------------------------------------------------------

def affine_matrix(width: int, height: int, angle: float, shear: float, scale: float, ratio: float,
                  out_width: float, out_height: float) -> np.ndarray:
    """MXNet's 2x3 warp matrix: rotate by ``angle`` degrees, shear ``x += shear * y``, scale, change aspect.

    ``ratio`` is the new width/height ratio; the transformed image is centred in
    the ``out_width`` x ``out_height`` output. Computed in float32, as MXNet does.
    """
    f32 = np.float32
    a, b = f32(math.cos(angle / 180.0 * math.pi)), f32(math.sin(angle / 180.0 * math.pi))
    hs = f32(2) * f32(scale) / (f32(1) + f32(ratio))
    ws = f32(ratio) * hs
    s = f32(shear)
    m = np.empty((2, 3), np.float32)
    m[0, 0] = hs * a - s * b * ws
    m[1, 0] = -b * ws
    m[0, 1] = hs * b + s * a * ws
    m[1, 1] = a * ws
    m[0, 2] = (f32(out_width) - (m[0, 0] * f32(width) + m[0, 1] * f32(height))) / f32(2)
    m[1, 2] = (f32(out_height) - (m[1, 0] * f32(width) + m[1, 1] * f32(height))) / f32(2)
    return m


def warp_affine(img: np.ndarray, matrix: np.ndarray, width: int, height: int, interpolation: int,
                fill_value: int) -> np.ndarray:
    """``img`` warped by a 2x3 ``matrix`` into a ``width`` x ``height`` image, the border filled with ``fill_value``."""
    cv2 = opencv()
    return cv2.warpAffine(img, matrix, (int(width), int(height)), flags=interpolation,
                          borderMode=cv2.BORDER_CONSTANT, borderValue=(fill_value,) * 4)


# -- colour ---------------------------------------------------------------------------

def grey_level(img: np.ndarray) -> np.ndarray:
    """The luma of a BGR(A) image as float32 HW (the image itself when it is already grey)."""
    if img.ndim == 2:
        return img.astype(np.float32)
    b, g, r = _GREY_WEIGHTS_BGR
    return (img[..., 0] * np.float32(b) + img[..., 1] * np.float32(g) + img[..., 2] * np.float32(r)).astype(np.float32)


def _to_uint8(values: np.ndarray) -> np.ndarray:
    """Round half to even and saturate to 0-255, as OpenCV's ``saturate_cast<uchar>``."""
    return np.clip(np.rint(values), 0, 255).astype(np.uint8)


def _colour_part(img: np.ndarray) -> np.ndarray:
    """The channels colour operations act on: all of a grey or BGR image, the BGR of a BGRA one."""
    return img[..., :3] if img.ndim == 3 and img.shape[2] == 4 else img


def _with_colour(img: np.ndarray, colour: np.ndarray) -> np.ndarray:
    """``img`` with its colour channels replaced (alpha kept)."""
    if colour.shape == img.shape:
        return colour
    out = img.copy()
    out[..., :3] = colour
    return out


def adjust_brightness(img: np.ndarray, alpha: float) -> np.ndarray:
    """Every pixel multiplied by ``alpha``."""
    part = _colour_part(img)
    return _with_colour(img, _to_uint8(part * np.float32(alpha)))


def adjust_contrast(img: np.ndarray, alpha: float) -> np.ndarray:
    """Pixels pushed away from (``alpha > 1``) or towards the mean grey level."""
    part = _colour_part(img)
    mean = float(grey_level(part).mean())
    return _with_colour(img, _to_uint8(part * np.float32(alpha) + np.float32((1.0 - alpha) * mean)))


def adjust_saturation(img: np.ndarray, alpha: float) -> np.ndarray:
    """Each pixel blended with its own grey level: ``alpha * pixel + (1 - alpha) * grey`` (no-op on grey images)."""
    part = _colour_part(img)
    if part.ndim == 2:
        return img
    grey = grey_level(part)[..., None]
    return _with_colour(img, _to_uint8(part * np.float32(alpha) + grey * np.float32(1.0 - alpha)))


def shift_hls(img: np.ndarray, hue: int, lightness: int, saturation: int) -> np.ndarray:
    """Add offsets in OpenCV's 8-bit HLS space (hue 0-179 wraps around; L and S saturate at 0 and 255)."""
    cv2 = opencv()
    part = _colour_part(img)
    hls = cv2.cvtColor(np.ascontiguousarray(part), cv2.COLOR_BGR2HLS).astype(np.int16)
    hls[..., 0] = (hls[..., 0] + hue) % 180
    hls[..., 1] = np.clip(hls[..., 1] + lightness, 0, 255)
    hls[..., 2] = np.clip(hls[..., 2] + saturation, 0, 255)
    return _with_colour(img, cv2.cvtColor(hls.astype(np.uint8), cv2.COLOR_HLS2BGR))


def pca_rgb_offset(alpha_rgb: tuple[float, float, float] | np.ndarray) -> np.ndarray:
    """AlexNet lighting noise: the R, G, B offset ``eigvec @ (alpha * eigval)`` for the three draws ``alpha``."""
    return (PCA_EIGVEC @ (np.asarray(alpha_rgb, dtype=np.float64) * PCA_EIGVAL)).astype(np.float32)


def add_lighting(img: np.ndarray, offsets_bgr: np.ndarray) -> np.ndarray:
    """Add a per-channel offset to a BGR(A) image, truncating toward zero and saturating (MXNet's integer rule)."""
    part = _colour_part(img)
    return _with_colour(img, np.clip(np.trunc(part + offsets_bgr), 0, 255).astype(np.uint8))


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

    def __call__(self, img: np.ndarray, rng: SampleRandom) -> np.ndarray:
        p = self.params
        if p.resize > 0:
            img = resize_shorter(img, p.resize, p.inter_method, rng)
        if self._warps:
            img = self._warp(img, rng)
        if p.pad > 0:
            img = pad(img, p.pad, p.fill_value)
        cropped = None
        if p.random_resized_crop:
            cropped = self._random_resized_crop(img, rng)
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

    def _random_resized_crop(self, img: np.ndarray, rng: SampleRandom) -> np.ndarray | None:
        """A random area/aspect crop resized to the output; ``None`` when the ranges are trivial or 10 tries fail."""
        p = self.params
        if (p.min_random_area, p.max_random_area) == (1.0, 1.0) and p.aspect_range == (1.0, 1.0):
            return None
        height, width = img.shape[:2]
        area = float(height * width)
        for _ in range(10):
            target = area * rng.uniform(p.min_random_area, p.max_random_area)
            ratio = rng.uniform(*p.aspect_range)
            crop_h = round(math.sqrt(target / ratio))
            crop_w = round(math.sqrt(target * ratio))
            if rng.random() > 0.5:
                crop_h, crop_w = crop_w, crop_h
            if crop_h <= height and crop_w <= width:
                y = rng.integers(0, height - crop_h)
                x = rng.integers(0, width - crop_w)
                inter = resolve_interpolation(p.inter_method, (crop_w, crop_h), (self.width, self.height), rng)
                return resize(crop(img, x, y, crop_w, crop_h), self.width, self.height, inter)
        return None

    def _random_size_crop(self, img: np.ndarray, rng: SampleRandom) -> np.ndarray:
        """A square of random side in ``[min_crop_size, max_crop_size]`` resized to the output."""
        p = self.params
        height, width = img.shape[:2]
        if width < p.max_crop_size or height < p.max_crop_size:
            raise ImageDecodeError(f"a {width}x{height} image is smaller than max_crop_size={p.max_crop_size}")
        side = rng.integers(p.min_crop_size, p.max_crop_size)
        y, x = height - side, width - side
        if p.rand_crop:
            y, x = rng.integers(0, y), rng.integers(0, x)
        else:
            y, x = y // 2, x // 2
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
        y, x = height - out_h, width - out_w
        if p.rand_crop:
            y, x = rng.integers(0, y), rng.integers(0, x)
        else:
            y, x = y // 2, x // 2
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
