"""Collating samples into batches: images of different sizes padded to the batch maximum."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mxrec.errors import ParameterError


def pad_to_max(arrays: Sequence[np.ndarray], pad_value: float = 0) -> tuple[np.ndarray, np.ndarray]:
    """Stack arrays of equal rank into one, each padded at the end of every axis to the largest size.

    Parameters
    ----------
    arrays
        The arrays (of one rank).
    pad_value
        What the padding holds.

    Returns
    -------
    batch : numpy.ndarray
        The stacked, padded arrays.
    shapes : numpy.ndarray
        The original shapes (``(N, ndim)`` int64).

    Raises
    ------
    ParameterError
        ``arrays`` is empty, or its arrays differ in rank.
    """
    arrays = [np.asarray(a) for a in arrays]
    if not arrays:
        raise ParameterError("nothing to collate")
    ranks = {a.ndim for a in arrays}
    if len(ranks) != 1:
        raise ParameterError(f"cannot collate arrays of different ranks {sorted(ranks)}")
    shapes = np.array([a.shape for a in arrays], np.int64).reshape(len(arrays), -1)
    dtype = np.result_type(*arrays)
    batch = np.full((len(arrays), *shapes.max(axis=0)), pad_value, dtype=dtype)
    for out, a in zip(batch, arrays, strict=True):
        out[tuple(slice(0, n) for n in a.shape)] = a
    return batch, shapes


def pad_collate(samples: Sequence[Any], pad_value: float = 0, *, return_shapes: bool = False) -> Any:
    """Collate a batch whose images differ in size: pad each to the batch maximum, stack.

    Parameters
    ----------
    samples
        Arrays, or tuples whose first item is the image (the other items are
        stacked as they are, e.g. labels).
    pad_value
        The value of the padding.
    return_shapes
        Also return the original image shapes.

    Returns
    -------
    numpy.ndarray or tuple
        The batch (or a tuple of batches), followed by the original image
        shapes when ``return_shapes``.
    """
    if samples and isinstance(samples[0], (tuple, list)):
        images, *others = zip(*samples, strict=True)
        batch, shapes = pad_to_max(images, pad_value)
        result = (batch, *(np.stack([np.asarray(v) for v in field]) for field in others))
        return (*result, shapes) if return_shapes else result
    batch, shapes = pad_to_max(samples, pad_value)
    return (batch, shapes) if return_shapes else batch
