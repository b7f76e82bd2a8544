"""Keys of random streams: how ``(seed, epoch, record, ...)`` become the 64-bit key a stream is drawn from.

Every random choice mxrec makes is a pure function of such a key: an epoch's order
(:mod:`mxrec.io.order`), a mixture's interleaving, a sample's augmentation
(:mod:`mxrec.transforms.rng`). The mixing is SplitMix64's finaliser over the parts
in order, so the same parts give the same key in every process, on every machine,
and a saved position or a pinned augmentation keeps its meaning: this is a format
too, and changing it changes every order.
"""

from __future__ import annotations

MASK = (1 << 64) - 1
GAMMA = 0x9E3779B97F4A7C15  # the golden-ratio increment of SplitMix64


def mix64(z: int) -> int:
    """SplitMix64's finaliser: a bijection on 64-bit integers with full avalanche."""
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def stream_key(*parts: int) -> int:
    """A 64-bit key that depends on every part and their order (each part taken modulo 2**64)."""
    key = 0
    for part in parts:
        key = extend_key(key, part)
    return key


def extend_key(key: int, part: int) -> int:
    """``stream_key(*parts, part)`` from ``key = stream_key(*parts)``: one part more, the others not mixed again.

    Parameters
    ----------
    key
        The key of the parts before.
    part
        The next part (taken modulo 2**64).

    Returns
    -------
    int
        The key of all the parts.
    """
    return mix64((key + GAMMA + (int(part) & MASK)) & MASK)
