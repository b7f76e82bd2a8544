"""PyTorch datasets and samplers over RecordIO (the optional ``torch`` extra: ``pip install 'mxrec[torch]'``).

* :mod:`~mxrec.torch.datasets`: :class:`RecordDataset` (payloads), :class:`ImageRecordDataset` (map-style
  ``(image, label)``), :class:`ImageRecordIterable` (this rank's lock-step batches, split between
  ``DataLoader`` workers), :class:`VerificationDataset` (InsightFace ``.bin`` pairs).
* :mod:`~mxrec.torch.image_samples`: what the image datasets share (decoding, labels, transforms, broken
  records, the epoch in shared memory).
* :mod:`~mxrec.torch.sampling`: :class:`DistributedBatchSampler`, one global order consumed by all ranks in
  lock-step, and the plan a ``DataLoader`` worker follows (its downloads shared with its siblings).
* :mod:`~mxrec.torch.resume`: :func:`loader_position`, a torchdata ``StatefulDataLoader`` state as a global
  position (to resume on another number of ranks or workers).
* :mod:`~mxrec.torch.batches`: zero-copy batches (:func:`torch_batches`, :func:`batch_collate`).

The user guide (distributed training, epochs, resuming, broken records, face sets, remote data in workers)
is ``docs/torch.md``. Every constructor takes its options as keywords.

May import: :mod:`mxrec.errors`, :mod:`mxrec.format`, :mod:`mxrec.storage`, :mod:`mxrec.io`,
:mod:`mxrec.datasets`, :mod:`mxrec.image`, :mod:`mxrec.transforms`, :mod:`mxrec.train` (and PyTorch).
"""

from mxrec.errors import missing_extra

try:
    import torch  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise missing_extra("mxrec.torch needs PyTorch", "torch", exc) from None

from mxrec.torch.batches import batch_collate, torch_batches
from mxrec.torch.datasets import ImageRecordDataset, ImageRecordIterable, RecordDataset, VerificationDataset
from mxrec.torch.resume import loader_position
from mxrec.torch.sampling import DistributedBatchSampler

__all__ = [
    "DistributedBatchSampler",
    "ImageRecordDataset",
    "ImageRecordIterable",
    "RecordDataset",
    "VerificationDataset",
    "batch_collate",
    "loader_position",
    "torch_batches",
]
