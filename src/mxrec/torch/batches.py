"""Batches as tensors without copies: an iterator's buffers shared, a worker's batch built in shared memory."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from torch.utils.data import get_worker_info


def batch_collate(batch: Any) -> Any:
    """``DataLoader``'s ``collate_fn`` for datasets whose ``__getitems__`` returns a whole batch: it is ready.

    Parameters
    ----------
    batch
        The batch ``__getitems__`` returned.

    Returns
    -------
    Any
        ``batch`` itself.
    """
    return batch


def batch_tensor(shape: tuple[int, ...], dtype: np.dtype) -> torch.Tensor:
    """An uninitialised tensor; in a ``DataLoader`` worker, in shared memory, so that passing it on copies nothing
    (the loader would copy a plain tensor into shared memory)."""
    dtype = getattr(torch, np.dtype(dtype).name)
    if get_worker_info() is None:
        return torch.empty(shape, dtype=dtype)
    storage = torch.UntypedStorage._new_shared(math.prod(shape) * torch.empty((), dtype=dtype).element_size())
    return torch.empty(0, dtype=dtype).set_(storage, 0, shape)


def torch_batches(batches: Any) -> Iterator[tuple[torch.Tensor, torch.Tensor, int]]:
    """``(data, label, pad)`` tensors for each batch of an mxrec iterator, sharing its memory (no copy).

    The iterator never overwrites a batch buffer that a tensor still refers
    to, so the tensors stay valid for as long as they are kept.

    Parameters
    ----------
    batches
        An mxrec iterator (``ImageRecordIter``, say) of ``DataBatch`` es.

    Yields
    ------
    tuple of (torch.Tensor, torch.Tensor, int)
        ``(data, label, pad)`` of each batch.
    """
    for batch in batches:
        yield torch.from_numpy(batch.data[0]), torch.from_numpy(batch.label[0]), batch.pad
