"""``import mxrec.compat.mx as mx``: the part of MXNet that data-loading code calls, on mxrec.

Write ``import mxrec.compat.mx as mx`` (and ``from mxrec.compat.mx import ndarray as nd``) where the code
said ``import mxnet as mx`` and the data code runs unchanged:

* ``mx.recordio``: :mod:`mxrec.recordio` (``MXRecordIO``, ``MXIndexedRecordIO``, ``IRHeader``, ``pack``,
  ``unpack``, ``pack_img``, ``unpack_img``).
* ``mx.io``: ``ImageRecordIter``, ``DataBatch``, ``DataDesc``; the iterator's batches hold
  :class:`~mxrec.compat.ndarray.NDArray` s, as MXNet's.
* ``mx.image``: ``imdecode``, ``imread``, ``resize_short``, ``imresize``, ``fixed_crop``, ``center_crop``,
  ``random_crop``, ``scale_down``, ``color_normalize``, ``ImageIter``, ``CreateAugmenter`` and the
  augmenter classes; they take and give NDArrays.
* ``mx.nd`` / ``mx.ndarray``: ``NDArray``, ``array``, ``transpose``, ``flip``.

Anything else raises :class:`~mxrec.errors.UnsupportedError` naming it. The pixels follow mxrec:
``imdecode`` applies a JPEG's EXIF orientation (MXNet's does not; ``exif_orientation=False`` keeps the
stored pixels), and the iterators' labels are float32 (``dtype``/``label_dtype`` where they exist).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np

from mxrec import recordio
from mxrec.compat.ndarray import FUNCTIONS, NDArray, unsupported
from mxrec.image import codec
from mxrec.train import dataiter, image_iter, record_iter
from mxrec.transforms import augmenters, functional


class _Namespace(ModuleType):
    """One of ``mx``'s sub-modules: the names given, and :class:`UnsupportedError` for any other."""

    def __init__(self, name: str, members: dict[str, Any]) -> None:
        super().__init__(name)
        self.__dict__.update(members)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise unsupported(f"{self.__name__}.{name}")


def _pixels(value: Any) -> Any:
    return np.asarray(value) if isinstance(value, NDArray) else value


def _on_ndarrays(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` over numpy arrays made to take NDArrays and give NDArrays (tuples too)."""

    @functools.wraps(function)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        result = function(*map(_pixels, args), **{k: _pixels(v) for k, v in kwargs.items()})
        if isinstance(result, tuple):
            return tuple(NDArray(r) if isinstance(r, np.ndarray) else r for r in result)
        return NDArray(result) if isinstance(result, np.ndarray) else result

    return wrapped


def imdecode(buf: Any, flag: int = 1, to_rgb: bool = True, out: Any = None, *,
             exif_orientation: bool = True) -> NDArray:
    """``mx.image.imdecode``: HWC ``uint8``, RGB unless ``to_rgb`` is false; ``flag=0``: grey, ``(H, W, 1)``."""
    if out is not None:
        raise unsupported("mx.image.imdecode(out=...)")
    data = buf.tobytes() if isinstance(buf, np.ndarray) else bytes(buf)
    img = codec.decode_pixels(data, 3 if flag else 1, what="mx.image.imdecode", exif_orientation=exif_orientation)
    if not flag:
        return NDArray(img[..., None])
    return NDArray(codec.to_rgb(img) if to_rgb else img)


def imread(filename: str | os.PathLike, flag: int = 1, to_rgb: bool = True, **kwargs: Any) -> NDArray:
    """``mx.image.imread``: :func:`imdecode` of the file's bytes."""
    with open(filename, "rb") as f:
        return imdecode(f.read(), flag, to_rgb, **kwargs)


def resize_short(src: Any, size: int, interp: int = functional.INTER_CUBIC) -> NDArray:
    """``mx.image.resize_short``: the shorter side to ``size``, bicubic by default (interp 2), as MXNet 1.9.1."""
    return NDArray(functional.resize_shorter(_pixels(src), size, interp))


def imresize(src: Any, w: int, h: int, interp: int = functional.INTER_LINEAR) -> NDArray:
    """``mx.image.imresize``: to ``w`` x ``h`` (interp 1, bilinear, by default)."""
    img = _pixels(src)
    method = functional.resolve_interpolation(interp, (img.shape[1], img.shape[0]), (w, h))
    return NDArray(functional.resize(img, w, h, method))


def color_normalize(src: Any, mean: Any, std: Any = None) -> NDArray:
    """``mx.image.color_normalize``: ``(src - mean) / std``."""
    img = np.asarray(_pixels(src), np.float32) - np.asarray(_pixels(mean), np.float32)
    return NDArray(img if std is None else img / np.asarray(_pixels(std), np.float32))


class _Augmenter(augmenters.Transform):
    """An mxrec transform as an ``mx.image`` augmenter: ``aug(src)`` takes and gives NDArrays (numpy too)."""

    def __init__(self, transform: augmenters.Transform) -> None:
        self.transform = transform

    def __call__(self, src: Any, rng: Any = None) -> Any:
        out = self.transform(_pixels(src), rng)
        return NDArray(out) if isinstance(src, NDArray) else out


def _augmenter_class(cls: type[augmenters.Transform]) -> Callable[..., _Augmenter]:
    @functools.wraps(cls, updated=())
    def make(*args: Any, **kwargs: Any) -> _Augmenter:
        return _Augmenter(cls(*args, **kwargs))

    return make


def CreateAugmenter(data_shape: Any, **kwargs: Any) -> list[_Augmenter]:
    """``mx.image.CreateAugmenter``: :func:`mxrec.transforms.create_augmenter`'s list, as augmenters."""
    return [_Augmenter(aug) for aug in augmenters.create_augmenter(data_shape, **kwargs)]


class _NDArrayBatches:
    """An iterator whose batches hold NDArrays, as MXNet's do."""

    def next(self) -> dataiter.DataBatch:
        batch = super().next()  # type: ignore[misc]
        return dataiter.DataBatch([NDArray(d) for d in batch.data], [NDArray(lab) for lab in batch.label or ()],
                                  batch.pad, batch.index, batch.provide_data, batch.provide_label)

    __next__ = next

    def getdata(self) -> list[NDArray]:
        return [NDArray(d) for d in super().getdata()]  # type: ignore[misc]

    def getlabel(self) -> list[NDArray]:
        return [NDArray(lab) for lab in super().getlabel()]  # type: ignore[misc]


class ImageRecordIter(_NDArrayBatches, record_iter.ImageRecordIter):
    """``mx.io.ImageRecordIter`` (:class:`mxrec.train.ImageRecordIter`) with NDArray batches."""


class ImageIter(_NDArrayBatches, image_iter.ImageIter):
    """``mx.image.ImageIter`` (:class:`mxrec.train.ImageIter`) with NDArray batches."""


_AUGMENTERS = ("SequentialAug", "RandomOrderAug", "ResizeAug", "ForceResizeAug", "RandomCropAug",
               "RandomSizedCropAug", "CenterCropAug", "HorizontalFlipAug", "CastAug", "BrightnessJitterAug",
               "ContrastJitterAug", "SaturationJitterAug", "HueJitterAug", "ColorJitterAug", "LightingAug",
               "RandomGrayAug", "ColorNormalizeAug")

io = _Namespace("mx.io", {"ImageRecordIter": ImageRecordIter, "DataBatch": dataiter.DataBatch,
                          "DataDesc": dataiter.DataDesc})
image = _Namespace("mx.image", {
    "imdecode": imdecode, "imread": imread, "resize_short": resize_short, "imresize": imresize,
    "color_normalize": color_normalize, "scale_down": functional.scale_down,
    **{name: _on_ndarrays(getattr(functional, name)) for name in ("fixed_crop", "center_crop", "random_crop")},
    "ImageIter": ImageIter, "CreateAugmenter": CreateAugmenter,
    **{name: _augmenter_class(getattr(augmenters, name)) for name in _AUGMENTERS}})
nd = ndarray = _Namespace("mx.nd", dict(FUNCTIONS))

__all__ = ["image", "io", "nd", "ndarray", "recordio"]


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    raise unsupported(f"mx.{name}")
