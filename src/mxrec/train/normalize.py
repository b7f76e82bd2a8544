"""The last step of a sample: its augmented image written into its slot of the output batch.

MXNet's ``ImageNormalizeParam`` semantics (``iter_image_recordio_2.cc``,
``ProcessImage``): the HWC BGR(A) image becomes CHW RGB(A), mirrored when
``mirror`` (or, with probability 1/2, ``rand_mirror``), and, for float output,
each value is ``(pixel - mean_c) * contrast * scale / std_c + illumination *
scale / std_c``, computed in float32 like MXNet, where ``contrast`` is ``1 +
U(-max_random_contrast, max_random_contrast)`` and ``illumination`` is
``U(-max_random_illumination, max_random_illumination)`` (both 1 and 0 by
default). With a mean image (``mean_img``), its value at each output pixel
replaces ``mean_c``. ``uint8`` output is the raw pixels (mean, std and scale do
not apply, as in MXNet); ``int8`` is ``pixel - round(mean_c)``, saturated.
``float16`` and ``float64`` are the float32 values converted.

The writes go straight into the batch buffer: ``cv2.split`` scatters the
interleaved pixels into the channel planes (of the slot for ``uint8``, of a
per-thread scratch buffer otherwise), flipped in place for a mirror (the
planes as one stacked image: one call); float32 values are then computed into
the slot by two whole-sample numpy calls (subtract with the cast, multiply in
place) that release the GIL, in MXNet's float32 order. (``float16`` and
``float64`` go through a float32 scratch array.) Few calls a sample matter:
each is a point where the pipeline's threads hand the GIL over.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, fields

import numpy as np

from mxrec.errors import ParameterError
from mxrec.image.codec import opencv
from mxrec.transforms.rng import SampleRandom

OUTPUT_DTYPES = ("float32", "uint8", "int8", "float16", "float64")


@dataclass(frozen=True)
class NormalizeParams:
    """MXNet's normalisation parameters (``mean_*``/``std_*`` per R, G, B, alpha channel)."""

    mirror: bool = False
    rand_mirror: bool = False
    mean_r: float = 0.0
    mean_g: float = 0.0
    mean_b: float = 0.0
    mean_a: float = 0.0
    std_r: float = 1.0
    std_g: float = 1.0
    std_b: float = 1.0
    std_a: float = 1.0
    scale: float = 1.0
    max_random_contrast: float = 0.0
    max_random_illumination: float = 0.0

    def __post_init__(self) -> None:
        for name in ("std_r", "std_g", "std_b", "std_a"):
            if getattr(self, name) == 0:
                raise ParameterError(f"{name} must not be 0")
        if self.max_random_contrast < 0 or self.max_random_illumination < 0:
            raise ParameterError("max_random_contrast and max_random_illumination must be >= 0")

    @property
    def is_random(self) -> bool:
        """Whether writing a sample draws random numbers."""
        return self.rand_mirror or self.max_random_contrast > 0 or self.max_random_illumination > 0

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The parameter names accepted by the constructor."""
        return tuple(f.name for f in fields(cls))


class SlotWriter:
    """Writes augmented images (HWC BGR(A) or HW grey ``uint8``) into ``(C, H, W)`` slots of ``dtype``."""

    def __init__(self, params: NormalizeParams, channels: int, dtype: str | np.dtype,
                 mean_image: np.ndarray | None = None) -> None:
        self.params = params
        if (dtype if isinstance(dtype, str) else np.dtype(dtype).name) not in OUTPUT_DTYPES:
            raise ParameterError(f"dtype must be one of {OUTPUT_DTYPES}, not {dtype!r}")
        self.dtype = np.dtype(dtype)
        if channels not in (1, 3, 4):
            raise ParameterError(f"data_shape must have 1, 3 or 4 channels, not {channels}")
        self.channels = channels
        p = params
        # Output channel order is R, G, B, A; the image's channel for each output plane.
        rgba_mean = (p.mean_r, p.mean_g, p.mean_b, p.mean_a)
        rgba_std = (p.std_r, p.std_g, p.std_b, p.std_a)
        self.source_channel = {1: (0,), 3: (2, 1, 0), 4: (2, 1, 0, 3)}[channels]
        picked = (0,) if channels == 1 else range(channels)
        if mean_image is None:
            self._mean = np.array([rgba_mean[c] for c in picked], np.float32).reshape(-1, 1, 1)
        else:
            self._mean = np.asarray(mean_image, np.float32)
        self._std = np.array([rgba_std[c] for c in picked], np.float32).reshape(-1, 1, 1)
        self._multiplier = np.float32(1.0) * np.float32(params.scale) / self._std  # without random contrast
        # C++ std::round: halves away from zero (Python's round() would go to even)
        self._int_mean = (np.sign(self._mean) * np.floor(np.abs(self._mean) + 0.5)).astype(np.int16)
        self._local = threading.local()

    def mirrored(self, rng: SampleRandom | None) -> bool:
        """Whether this sample is mirrored (draws the coin for ``rand_mirror``)."""
        p = self.params
        coin = p.rand_mirror and rng is not None and rng.coin()
        return bool(coin or p.mirror)

    def write(self, img: np.ndarray, out: np.ndarray, rng: SampleRandom | None = None) -> None:
        """Write ``img`` into ``out`` (``(C, H, W)`` of this writer's dtype), mirrored and normalised as configured."""
        if img.shape[:2] != out.shape[1:]:
            raise ParameterError(f"image of {img.shape[1]}x{img.shape[0]} does not fit a {out.shape[2]}x"
                                 f"{out.shape[1]} slot")
        mirror = self.mirrored(rng)
        if self.dtype == np.uint8:
            self._split(img, out, mirror)
            return
        planes = self._scratch("planes", out.shape, np.uint8)
        self._split(img, planes, mirror)
        if self.dtype == np.int8:
            np.copyto(out, np.clip(planes - self._int_mean, -128, 127), casting="unsafe")
            return
        p = self.params
        illumination = np.float32(0.0)
        multiplier = bias = self._multiplier
        if p.max_random_contrast > 0 or p.max_random_illumination > 0:
            contrast = np.float32(1.0 + rng.uniform(-p.max_random_contrast, p.max_random_contrast))
            illumination = np.float32(rng.uniform(-p.max_random_illumination, p.max_random_illumination))
            multiplier = contrast * np.float32(p.scale) / self._std
            bias = illumination * np.float32(p.scale) / self._std
        # float32 straight into the slot (others through a float32 scratch): pixel - mean (cast to float32 on
        # the way), then scaled in place -- whole-sample numpy calls, each releasing the GIL.
        work = out if self.dtype == np.float32 else self._scratch("work", out.shape, np.float32)
        np.subtract(planes, self._mean, out=work, dtype=np.float32)
        np.multiply(work, multiplier, out=work)
        if illumination:
            np.add(work, bias, out=work)
        if work is not out:
            np.copyto(out, work, casting="unsafe")

    def _scratch(self, name: str, shape: tuple[int, ...], dtype: type) -> np.ndarray:
        """This thread's reusable scratch array ``name`` (kept hot in cache between samples)."""
        arrays = self._local.__dict__
        array = arrays.get(name)
        if array is None or array.shape != shape:
            array = arrays[name] = np.empty(shape, dtype)
        return array

    def _split(self, img: np.ndarray, planes: np.ndarray, mirror: bool) -> None:
        """Scatter the interleaved channels of ``img`` into the ``uint8`` planes, in output (RGB) order.

        ``mirror`` flips each plane in place afterwards: flipping the planes the
        batch already holds is cheaper than flipping into a fresh image first.
        """
        cv2 = opencv()
        if img.ndim == 2:
            planes[0] = img
        else:
            targets = [None] * img.shape[2]
            for plane, source in enumerate(self.source_channel):
                targets[source] = planes[plane]
            cv2.split(img, targets)
        if mirror:  # the planes stacked as one (C*H, W) image: one call flips them all
            stacked = planes.reshape(-1, planes.shape[-1])
            cv2.flip(stacked, 1, dst=stacked)
