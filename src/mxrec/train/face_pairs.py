"""InsightFace verification sets (``lfw.bin``, ``cfp_fp.bin``, ``agedb_30.bin``, ...) as numpy arrays.

InsightFace evaluates a face model on pairs of images: ``load_bin`` in its
``verification.py`` unpickles ``(images, issame)``, decodes every image with
``mx.image.imdecode`` (RGB), resizes it to the model's input size if needed
(``mx.image.resize_short``, bicubic),
and compares the embeddings of images ``2k`` and ``2k + 1`` against
``issame[k]``. :func:`load_verification_set` does the same without MXNet and
without trusting the pickle: the file is read by
:func:`~mxrec.format.insightface.parse_verification_pickle`, which admits
only bytes, lists, bools and numpy uint8/bool arrays, so a hostile file
cannot run code.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from mxrec.errors import VerificationSetError
from mxrec.format.insightface import parse_verification_pickle
from mxrec.image.codec import decode_pixels, to_rgb
from mxrec.transforms.functional import INTER_CUBIC, resize_shorter


@dataclass(frozen=True)
class VerificationSet:
    """An InsightFace verification set, decoded (made by :func:`load_verification_set`).

    Parameters
    ----------
    path
        The ``.bin`` file it was read from.
    images
        ``(2 * pairs, H, W, 3)`` uint8 RGB, in file order.
    issame
        ``issame[k]``: whether images ``2k`` and ``2k+1`` show the same person.
    """

    path: str
    images: np.ndarray
    issame: np.ndarray

    def __len__(self) -> int:
        """The number of pairs."""
        return len(self.issame)

    def pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """The two sides of every pair.

        Returns
        -------
        tuple of (numpy.ndarray, numpy.ndarray)
            ``(first images, second images)``: ``images[0::2]``, ``images[1::2]`` (views).
        """
        return self.images[0::2], self.images[1::2]


def load_verification_set(path: str | os.PathLike, image_size: tuple[int, int] | None = None) -> VerificationSet:
    """Read and decode an InsightFace verification set (``lfw.bin``, ...; see the module doc).

    Parameters
    ----------
    path
        The ``.bin`` file.
    image_size
        ``(height, width)``: as ``load_bin`` does, an image whose width is not
        ``image_size[0]`` gets its shorter side resized to ``image_size[0]``
        with ``mx.image.resize_short``'s default interpolation, bicubic (MXNet
        1.9.1's ``interp=2``, OpenCV's ``INTER_CUBIC``; the longer side
        ``long * size // short``); the result must then be ``image_size``
        (InsightFace's targets are square). By default the images are kept as
        they are and must all have one size (112x112 in InsightFace's sets).

    Returns
    -------
    VerificationSet
        ``images`` (N, H, W, 3) ``uint8`` RGB and ``issame`` (N // 2,): pairs
        are images ``2k`` and ``2k + 1``.

    Raises
    ------
    VerificationSetError
        Anything malformed or not allowed, naming the file (and the image).
    """
    path = os.fspath(path)
    with open(path, "rb") as f:
        encoded, issame = parse_verification_pickle(f.read(), path)
    images = []
    for i, data in enumerate(encoded):
        img = to_rgb(decode_pixels(data, 3, what=f"{path}: image {i}"))
        if image_size is not None and img.shape[1] != image_size[0]:
            img = resize_shorter(img, image_size[0], INTER_CUBIC)
        if image_size is not None and img.shape[:2] != tuple(image_size):
            raise VerificationSetError(f"{path}: image {i} is {img.shape[1]}x{img.shape[0]} after resize_short to "
                                       f"{image_size[0]}, not the {image_size[1]}x{image_size[0]} asked for")
        if images and img.shape != images[0].shape:
            raise VerificationSetError(f"{path}: image {i} is {img.shape[1]}x{img.shape[0]}, image 0 is "
                                       f"{images[0].shape[1]}x{images[0].shape[0]}: give image_size to resize them")
        images.append(img)
    stacked = np.stack(images) if images else np.empty((0, 0, 0, 3), np.uint8)
    return VerificationSet(path, stacked, issame)
