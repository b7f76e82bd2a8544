"""Per-sample random streams: deterministic augmentation whatever the thread count.

Every random choice an augmentation makes for one sample (crop position, flip,
jitter amounts, ...) is drawn from a :class:`SampleRandom` keyed by
``(seed, epoch, record)``. The stream is a pure function of that key, so a
sample gets the same augmentation no matter which thread processes it, in what
order, or how the batch is split among threads -- and a new one each epoch.

MXNet instead keeps one generator per decoding thread (seeded ``(i + 1) * 111``),
so its augmentations depend on the thread count and on scheduling; with
``seed_aug`` it re-seeds by the slot's position in the batch, which repeats the
same augmentation for the same slot every epoch. Neither is reproduced.

The stream is counter based (SplitMix64's output function applied to
``key + counter * golden_gamma``, the key itself mixed from the key parts):
creating one costs about 2 us and a draw under 1 us, where seeding a
:class:`numpy.random.Generator` per sample costs 12-18 us -- it matters at
thousands of images a second. SplitMix64 passes the usual statistical test
batteries (BigCrush); this is meant for augmentation, not cryptography.
:meth:`SampleRandom.generator` hands out a seeded numpy ``Generator`` for code
that needs one.
"""

from __future__ import annotations

import math

import numpy as np

from mxrec.errors import ParameterError
from mxrec.format.seeds import GAMMA, MASK, mix64, stream_key

_TO_UNIT = 1.0 / (1 << 53)


class SampleRandom:
    """A small deterministic random stream for one sample.

    ``SampleRandom(seed, epoch, record)``: the same arguments give the same
    sequence of draws. The methods follow the conventions of the C++ standard
    distributions MXNet uses: :meth:`uniform` is half-open ``[low, high)``,
    :meth:`integers` is inclusive ``[low, high]``.
    """

    __slots__ = ("_counter", "_key")

    def __init__(self, *key_parts: int) -> None:
        self._key = stream_key(*key_parts)
        self._counter = 0

    @classmethod
    def from_key(cls, key: int) -> SampleRandom:
        """The stream of a key made already: ``SampleRandom.from_key(stream_key(*parts))`` is
        ``SampleRandom(*parts)`` (a loader keys each sample's stream by extending its epoch's key,
        :func:`~mxrec.format.seeds.extend_key`).

        Parameters
        ----------
        key
            A 64-bit key (:func:`~mxrec.format.seeds.stream_key`).

        Returns
        -------
        SampleRandom
            The stream.
        """
        stream = cls.__new__(cls)
        stream._key = key
        stream._counter = 0
        return stream

    def _next64(self) -> int:
        self._counter += 1
        return mix64((self._key + self._counter * GAMMA) & MASK)

    def random(self) -> float:
        """A float in ``[0, 1)`` with 53 random bits."""
        return (self._next64() >> 11) * _TO_UNIT

    def uniform(self, low: float, high: float) -> float:
        """A float in ``[low, high)`` (``low`` when the range is empty)."""
        return low + (high - low) * self.random()

    def integers(self, low: int, high: int) -> int:
        """An integer in ``[low, high]``, both ends included."""
        span = high - low + 1
        if span <= 0:
            raise ParameterError(f"empty integer range [{low}, {high}]")
        return low + (self._next64() * span >> 64)

    def coin(self, p: float = 0.5) -> bool:
        """True with probability ``p``."""
        return self.random() < p

    def normal(self, std: float = 1.0) -> float:
        """A normal draw with mean 0 and standard deviation ``std`` (Box-Muller)."""
        u = 1.0 - self.random()  # (0, 1]: log is finite
        return std * math.sqrt(-2.0 * math.log(u)) * math.cos(2.0 * math.pi * self.random())

    def shuffled(self, items: list) -> list:
        """A new list with ``items`` in random order (Fisher-Yates)."""
        out = list(items)
        for i in range(len(out) - 1, 0, -1):
            j = self.integers(0, i)
            out[i], out[j] = out[j], out[i]
        return out

    def choice(self, items: list | tuple):
        """One of ``items``, uniformly."""
        return items[self.integers(0, len(items) - 1)]

    def generator(self) -> np.random.Generator:
        """A numpy ``Generator`` seeded from this stream (for code written against numpy)."""
        return np.random.default_rng(self._next64())
