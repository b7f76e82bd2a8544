"""Image operations as plain functions: the kernels every augmenter and transform in mxrec is built from.

Images are ``uint8`` (or float) numpy arrays, HWC (or HW for grey). Every
function takes the image and returns a new one (or the same object when there
is nothing to do); random choices come from a
:class:`~mxrec.transforms.rng.SampleRandom` passed in, never from global
state. Sizes passed as pairs are ``(width, height)`` as in OpenCV and MXNet;
functions that return a size say which order.

* geometry: :func:`shorter_side_size` (im2rec's and MXNet's integer rule),
  :func:`resize`, :func:`resize_shorter`, :func:`resize_scaled_box` (a crop of a reduced decode),
  :func:`crop`, :func:`pad`,
  :func:`mirror`, :func:`centre_offsets` (the one centre crop rule),
  :func:`random_resized_box` (the one random-resized-crop draw), the affine
  warp; ``mx.image``'s :func:`scale_down`, :func:`fixed_crop`,
  :func:`center_crop`, :func:`random_crop`, :func:`random_size_crop`.
* colour: :func:`grey_level` (the one grey conversion), brightness, contrast,
  saturation, HLS shift, PCA lighting noise.

``inter_method`` codes pick OpenCV's interpolation: 0 nearest, 1 bilinear,
2 bicubic, 3 area, 4 Lanczos, 9 auto (bicubic when both sides grow, area when
both shrink, else bilinear), 10 random among 0-4.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable

import numpy as np

from mxrec.errors import ParameterError, document_parameters
from mxrec.image.codec import opencv
from mxrec.transforms.rng import SampleRandom

Size = tuple[int, int]


def size_pair(size: int | tuple[int, int] | list[int]) -> Size:
    """``(width, height)`` from an int (a square) or a pair."""
    if isinstance(size, (int, np.integer)):
        return int(size), int(size)
    width, height = size
    return int(width), int(height)

INTER_NEAREST, INTER_LINEAR, INTER_CUBIC, INTER_AREA, INTER_LANCZOS4 = 0, 1, 2, 3, 4
INTER_AUTO = 9
INTER_RANDOM = 10
INTER_METHODS = (INTER_NEAREST, INTER_LINEAR, INTER_CUBIC, INTER_AREA, INTER_LANCZOS4, INTER_AUTO, INTER_RANDOM)

# AlexNet's PCA of ImageNet RGB pixels: eigenvalues, and eigenvectors as columns (rows are R, G, B).
PCA_EIGVAL = np.array([55.46, 4.794, 1.148])
PCA_EIGVEC = np.array([[-0.5675, 0.7192, 0.4009],
                       [-0.5808, -0.0045, -0.8140],
                       [-0.5836, -0.6948, 0.4203]])

# Luma weights (ITU-R BT.601, as OpenCV's BGR2GRAY), in either channel order.
LUMA_BGR = (0.114, 0.587, 0.299)
LUMA_RGB = (0.299, 0.587, 0.114)


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
    """``(new_height, new_width)`` with the shorter side ``size``; the longer one ``long * size // short``.

    The integer rule of both MXNet's augmenter and im2rec's ``--resize``.
    """
    if height > width:
        return size * height // width, size
    return size, size * width // height


def resize(img: np.ndarray, width: int, height: int, interpolation: int) -> np.ndarray:
    """``img`` resized to ``width`` x ``height`` with an OpenCV interpolation flag (0-4)."""
    if img.shape[1] == width and img.shape[0] == height:
        return img
    return opencv().resize(img, (int(width), int(height)), interpolation=interpolation)


def resize_scaled_box(img: np.ndarray, box: tuple[int, int, int, int], scale: tuple[float, float], width: int,
                      height: int, interpolation: int) -> np.ndarray:
    """The crop ``box`` ``(x, y, w, h)`` of an image, resized to ``width`` x ``height``, taken from ``img``: that
    image scaled by ``scale`` ``(sx, sy)`` (a reduced decode). Sampled at the exact, fractional positions a
    resize of the full-size crop samples (pixel centres aligned), so the result matches it but for the detail
    the reduction removed. (OpenCV's warp has no area interpolation: 3 samples bilinearly.)
    """
    x, y, w, h = box
    sx, sy = scale
    step_x, step_y = w * sx / width, h * sy / height
    # output pixel u samples the full image at x + (u + 0.5) w / width - 0.5, i.e. the reduced image at
    # (that + 0.5) sx - 0.5
    matrix = np.array([[step_x, 0.0, x * sx + 0.5 * step_x - 0.5],
                       [0.0, step_y, y * sy + 0.5 * step_y - 0.5]], np.float64)
    cv2 = opencv()
    flags = (interpolation if interpolation != INTER_AREA else INTER_LINEAR) | cv2.WARP_INVERSE_MAP
    return cv2.warpAffine(img, matrix, (int(width), int(height)), flags=flags, borderMode=cv2.BORDER_REPLICATE)


def resize_shorter(img: np.ndarray, size: int, inter_method: int = INTER_LINEAR,
                   rng: SampleRandom | None = None, source: tuple[int, int] | None = None) -> np.ndarray:
    """``img`` with its shorter side scaled to ``size`` (the aspect ratio kept, rounded down).

    ``source``: the ``(height, width)`` the image had before a reduced decode; the new size and the
    interpolation are then those of resizing the full-size image, so the result has the same size.
    """
    height, width = img.shape[:2] if source is None else source
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


def centre_offsets(height: int, width: int, crop_height: int, crop_width: int) -> tuple[int, int]:
    """``(x, y)`` of a ``crop_width`` x ``crop_height`` crop centred in a ``width`` x ``height`` image.

    Odd margins round down: the extra pixel stays at the right and bottom (MXNet, ``mx.image`` and im2rec alike).
    """
    return (width - crop_width) // 2, (height - crop_height) // 2


def random_resized_box(height: int, width: int, area: tuple[float, float], ratio: tuple[float, float],
                       rng: SampleRandom, *, log_ratio: bool = False, swap: bool = False,
                       attempts: int = 10) -> tuple[int, int, int, int] | None:
    """``(x, y, w, h)`` of a crop covering a random fraction ``area`` of the image at a random aspect ``ratio``.

    Up to ``attempts`` draws, ``None`` when none fits. Per draw: the area
    fraction uniform in ``area``; the aspect ratio (w/h) uniform in ``ratio``,
    or log-uniform with ``log_ratio`` (``mx.image``); with ``swap`` the sides
    are exchanged with probability 1/2 (MXNet's C++ augmenter); then the
    place, uniformly.
    """
    low, high = (math.log(ratio[0]), math.log(ratio[1])) if log_ratio else ratio
    for _ in range(attempts):
        target = height * width * rng.uniform(area[0], area[1])
        aspect = rng.uniform(low, high)
        if log_ratio:
            aspect = math.exp(aspect)
        crop_w = round(math.sqrt(target * aspect))
        crop_h = round(math.sqrt(target / aspect))
        if swap and rng.random() > 0.5:
            crop_h, crop_w = crop_w, crop_h
        if crop_h <= height and crop_w <= width:
            y = rng.integers(0, height - crop_h)
            x = rng.integers(0, width - crop_w)
            return x, y, crop_w, crop_h
    return None


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

def grey_level(img: np.ndarray, weights: tuple[float, float, float] = LUMA_BGR) -> np.ndarray:
    """The grey level of a colour image, HW: ``weights`` (one per channel, in the image's order) summed.

    Float32 arithmetic for ``uint8`` and float32 images (float64 stays float64);
    a grey image comes back as float32 itself.
    """
    if img.ndim == 2:
        return img.astype(np.float32)
    w0, w1, w2 = (np.float32(w) for w in weights)
    return img[..., 0] * w0 + img[..., 1] * w1 + img[..., 2] * w2


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


# -- mx.image's functional ops ----------------------------------------------------------

def scale_down(src_size: Size, size: Size) -> Size:
    """Shrink a crop ``size`` (w, h) to fit in ``src_size`` (w, h), keeping its aspect ratio.

    Parameters
    ----------
    src_size
        ``(width, height)`` of the image.
    size
        ``(width, height)`` of the crop.

    Returns
    -------
    Size
        ``(width, height)``, ``size`` itself when it fits.
    """
    width, height = size
    src_w, src_h = src_size
    if src_h < height:
        width, height = float(width * src_h) / height, src_h
    if src_w < width:
        width, height = src_w, float(height * src_w) / width
    return int(width), int(height)


def fixed_crop(src: np.ndarray, x0: int, y0: int, width: int, height: int, size: Size | None = None,
               interp: int = INTER_CUBIC, rng: SampleRandom | None = None) -> np.ndarray:
    """The region at ``(x0, y0)`` of ``width`` x ``height``, resized to ``size`` (w, h) when given and different.

    Parameters
    ----------
    x0, y0
        The region's top-left corner.
    width, height
        The region's size.
    size
        ``(width, height)`` to resize it to (``None``: as it is).

    Returns
    -------
    numpy.ndarray
        The region (a view of ``src`` when not resized).
    """
    out = src[y0:y0 + height, x0:x0 + width]
    if size is not None and (width, height) != tuple(size):
        inter = resolve_interpolation(interp, (width, height), tuple(size), rng)
        out = resize(np.ascontiguousarray(out), size[0], size[1], inter)
    return out


def center_crop(src: np.ndarray, size: Size, interp: int = INTER_CUBIC,
                rng: SampleRandom | None = None) -> tuple[np.ndarray, tuple[int, int, int, int]]:
    """The centred crop of ``size`` (w, h) (scaled down to fit, then resized back up).

    Returns
    -------
    tuple of (numpy.ndarray, tuple of int)
        ``(crop, (x, y, w, h))``: the centred crop, and the region of ``src`` it was cut from.
    """
    return _scaled_crop(src, size, interp, rng, centre_offsets)


def random_crop(src: np.ndarray, size: Size, interp: int = INTER_CUBIC,
                rng: SampleRandom | None = None) -> tuple[np.ndarray, tuple[int, int, int, int]]:
    """A crop of ``size`` (w, h) at a random place (scaled down to fit, then resized back up).

    The place is drawn from ``rng``, x before y (MXNet's order, which seeded results depend on).

    Returns
    -------
    tuple of (numpy.ndarray, tuple of int)
        ``(crop, (x, y, w, h))``: the random crop, and the region of ``src`` it was cut from.
    """
    rng = rng if rng is not None else SampleRandom(entropy())
    return _scaled_crop(src, size, interp, rng, lambda height, width, new_h, new_w: (
        rng.integers(0, width - new_w), rng.integers(0, height - new_h)))  # x first, as MXNet draws them


def _scaled_crop(src: np.ndarray, size: Size, interp: int, rng: SampleRandom | None,
                 place: Callable[[int, int, int, int], tuple[int, int]],
                 ) -> tuple[np.ndarray, tuple[int, int, int, int]]:
    """The crop of ``size`` scaled down to fit ``src``, at ``place(height, width, crop_h, crop_w)``, resized back."""
    height, width = src.shape[:2]
    new_w, new_h = scale_down((width, height), size)
    x0, y0 = place(height, width, new_h, new_w)
    return fixed_crop(src, x0, y0, new_w, new_h, size, interp, rng), (x0, y0, new_w, new_h)


def random_size_crop(src: np.ndarray, size: Size, area: float | tuple[float, float], ratio: tuple[float, float],
                     interp: int = INTER_CUBIC,
                     rng: SampleRandom | None = None) -> tuple[np.ndarray, tuple[int, int, int, int]]:
    """A crop of random area (fraction ``area``) and aspect ratio (log-uniform in ``ratio``), resized to ``size``.

    Ten tries, then a centre crop.

    Parameters
    ----------
    size
        ``(width, height)`` of the output.
    area
        Range of the crop's area as a fraction of the image's (a number: from it to 1).
    ratio
        Range of the crop's aspect ratio (width / height).

    Returns
    -------
    tuple of (numpy.ndarray, tuple of int)
        ``(crop, (x, y, w, h))``: the crop, and the region of ``src`` it was cut from.
    """
    rng = rng if rng is not None else SampleRandom(entropy())
    height, width = src.shape[:2]
    if isinstance(area, (int, float)):
        area = (area, 1.0)
    box = random_resized_box(height, width, area, ratio, rng, log_ratio=True)
    if box is not None:
        return fixed_crop(src, *box, size, interp, rng), box
    return center_crop(src, size, interp, rng)


def entropy() -> int:
    """64 fresh random bits: the seed of a random stream nobody asked to be reproducible."""
    return int.from_bytes(os.urandom(8), "little")


#: The crops' shared parameters, described once (:func:`~mxrec.errors.document_parameters` writes them in).
_CROP_PARAMETERS = {
    "src": "The HWC image.",
    "size": "``(width, height)`` of the crop.",
    "interp": "OpenCV's interpolation code (0-4), or 9/10 for MXNet's automatic or random choice.",
    "rng": "The random stream: for a random ``interp`` and, in the random crops, the crop's place (these draw fresh "
           "entropy when it is ``None``).",
}
for _crop in (fixed_crop, center_crop, random_crop, random_size_crop):
    document_parameters(_crop, _CROP_PARAMETERS)
