"""Augmentation steps of the kind users write (:class:`mxrec.transforms.Step`), importable by ``DataLoader``
workers started with spawn (a class defined in a test module is not).

* :class:`Cutout`: blanks a random square (random, keeps the size).
* :class:`RandomGrey`: a BGR image made grey with probability ``p`` (random, keeps the size).
* :class:`Shrink`: resizes to a fixed size and lets ``fast_decode`` decode down to it (geometric, not random);
  it records the sizes it was given, to show what was decoded.
* :class:`Sneaky`: crops without declaring it (a step that breaks the protocol).
"""

from __future__ import annotations

import cv2
import numpy as np

from mxrec.transforms import Step


class Cutout(Step):
    """Blank a random ``size`` x ``size`` square (to ``fill``)."""

    def __init__(self, size: int, fill: int = 0) -> None:
        self.size, self.fill = size, fill

    def draw(self, rng, shape):
        return rng.integers(0, shape[0] - self.size), rng.integers(0, shape[1] - self.size)

    def apply(self, img, params):
        y, x = params
        out = img.copy()
        out[y:y + self.size, x:x + self.size] = self.fill
        return out


class RandomGrey(Step):
    """With probability ``p``, the BGR image's grey level in every channel."""

    def __init__(self, p: float) -> None:
        self.p = p

    def draw(self, rng, shape):
        return rng.random() < self.p

    def apply(self, img, grey):
        return cv2.cvtColor(cv2.cvtColor(img, cv2.COLOR_BGR2GRAY), cv2.COLOR_GRAY2BGR) if grey else img


class Shrink(Step):
    """Resize to ``height`` x ``width`` (area interpolation); the image may be decoded as small as that."""

    random = False
    geometric = True

    def __init__(self, height: int, width: int) -> None:
        self.height, self.width = height, width
        self.seen: list[tuple[int, ...]] = []  # the shapes apply got (this process only)

    def output_shape(self, params, shape):
        return (self.height, self.width, *shape[2:])

    def reduced_decode(self, params, shape):
        return (self.height, self.width), params

    def apply(self, img, params):
        self.seen.append(img.shape)
        return cv2.resize(img, (self.width, self.height), interpolation=cv2.INTER_AREA)


class Sneaky(Step):
    """Crops off the last row and column without declaring it (``geometric`` left False)."""

    random = False

    def apply(self, img, params):
        return np.ascontiguousarray(img[:-1, :-1])
