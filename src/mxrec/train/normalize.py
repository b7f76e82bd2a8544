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

The writes are made a chunk of samples at a time (:class:`StagedImages`): each augmented image is copied
into a per-thread staging array as it is made (mirrored on the way: one copy either way), and the
chunk is then written into its batch slots with whole-chunk numpy calls -- the BGR(A) to RGB(A) swap and the
HWC to CHW layout change are one strided view, the normalisation one subtract (with the cast to float32) and
one multiply in place, in MXNet's float32 order. (``float16`` and ``float64`` go through a float32 scratch
array.) Few calls a sample matter: each is a point where the pipeline's threads hand the GIL over, and the
chunk calls release it. :meth:`SlotWriter.write` is the same for one sample.
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
        staged = self.staged(1, out.shape[1:])
        staged.put(0, img, rng)
        staged.write(out[None], 1)

    def staged(self, capacity: int, size: tuple[int, int]) -> StagedImages:
        """This thread's :class:`StagedImages` for ``capacity`` images of ``size`` ``(height, width)`` (made on
        first use, then reused: its memory stays hot in cache from one chunk of samples to the next)."""
        arrays = self._local.__dict__
        key = (capacity, *size)
        staged = arrays.get(key)
        if staged is None:
            staged = arrays[key] = StagedImages(self, capacity, size)
        return staged


class StagedImages:
    """Augmented images of a chunk of samples, gathered, then written into their batch slots at once.

    :meth:`put` copies each image (HWC BGR(A), or HW grey, ``uint8``) into a per-thread staging array -- mirrored
    on the way when its coin says so (one OpenCV call either way) -- and draws the sample's random contrast and
    illumination; :meth:`write` then makes the ``(n, C, H, W)`` RGB(A) output of the whole chunk: the channel
    swap and the layout change are one strided view, and the normalisation is one subtract and one multiply (an
    add with random illumination) over the chunk, in MXNet's float32 order -- the per-sample calls were what
    bound the pipeline's threads to the GIL. The values are those of one sample at a time, bit for bit (the same
    float32 operations on each element). Made by :meth:`SlotWriter.staged`.
    """

    def __init__(self, writer: SlotWriter, capacity: int, size: tuple[int, int]) -> None:
        self.writer = writer
        channels = writer.channels
        self.size = tuple(size)
        self.images = np.empty((capacity, *size) if channels == 1 else (capacity, *size, channels), np.uint8)
        p = writer.params
        self._colour = p.max_random_contrast > 0 or p.max_random_illumination > 0
        self._flip = opencv().flip
        self._contrast = np.ones((capacity, 1, 1, 1), np.float32)
        self._illumination = np.zeros((capacity, 1, 1, 1), np.float32)
        self._work: np.ndarray | None = None  # float32 scratch for float16/float64 output

    def put(self, k: int, img: np.ndarray, rng: SampleRandom | None) -> None:
        """Stage ``img`` as image ``k`` of the chunk, making the sample's mirror, contrast and illumination draws
        (in that order, after the augmentation's)."""
        if img.shape[:2] != self.size:
            raise ParameterError(f"image of {img.shape[1]}x{img.shape[0]} does not fit a {self.size[1]}x"
                                 f"{self.size[0]} slot")
        writer = self.writer
        if writer.mirrored(rng):
            self._flip(img, 1, dst=self.images[k])  # OpenCV's SIMD flip: numpy's reversed copy is slower
        else:
            self.images[k] = img
        if self._colour:
            p = writer.params
            self._contrast[k] = 1.0 + rng.uniform(-p.max_random_contrast, p.max_random_contrast)
            self._illumination[k] = rng.uniform(-p.max_random_illumination, p.max_random_illumination)

    def write(self, out: np.ndarray, n: int) -> None:
        """Write the first ``n`` staged images into ``out`` (``(n, C, H, W)`` of the writer's dtype)."""
        writer = self.writer
        images = self.images[:n]
        if writer.channels == 1:
            planes = images[:, None]
        elif writer.channels == 3:
            planes = images[..., ::-1].transpose(0, 3, 1, 2)  # BGR -> RGB planes: a view
        else:
            planes = images.transpose(0, 3, 1, 2)[:, list(writer.source_channel)]
        dtype = writer.dtype
        if dtype == np.uint8:
            np.copyto(out, planes)
            return
        if dtype == np.int8:
            np.copyto(out, np.clip(planes - writer._int_mean, -128, 127), casting="unsafe")
            return
        if dtype == np.float32:
            work = out
        else:
            work = self._work
            if work is None or work.shape[0] < n or work.shape[1:] != out.shape[1:]:
                work = self._work = np.empty((self.images.shape[0], *out.shape[1:]), np.float32)
            work = work[:n]
        # pixel - mean (cast to float32 on the way), then scaled in place: whole-chunk numpy calls, each
        # releasing the GIL
        np.subtract(planes, writer._mean, out=work, dtype=np.float32)
        if self._colour:
            scale = np.float32(writer.params.scale)
            illumination = self._illumination[:n]
            np.multiply(work, self._contrast[:n] * scale / writer._std, out=work)
            # only where there is an illumination: adding a zero bias would turn -0.0 into 0.0
            np.add(work, illumination * scale / writer._std, out=work, where=illumination != 0)
        else:
            np.multiply(work, writer._multiplier, out=work)
        if work is not out:
            np.copyto(out, work, casting="unsafe")
