"""Training from RecordIO: the MXNet iterators (``ImageRecordIter``, ``ImageIter``) and the parts they are built from.

* :mod:`~mxrec.train.sampler`: which records go into which batch, every epoch, on every rank.
* :mod:`~mxrec.train.pipeline`: threads that decode samples straight into preallocated batch buffers.
* :mod:`~mxrec.train.processes`: worker processes that build whole batches into shared memory, for machines where
  the GIL binds (``ImageRecordIter(preprocess_processes=N)``).
* :mod:`~mxrec.train.prefetch`: remote records fetched a batch at a time, ahead of decoding.
* :mod:`~mxrec.train.augment`: MXNet's default augmenter (``aug_default``) as a list of steps
  (:func:`~mxrec.train.augment.default_steps`, to extend with your own for ``aug_list=``).
* :mod:`~mxrec.train.normalize`: an augmented image into its batch slot (mirror, mean, std, dtype).
* :mod:`~mxrec.train.sample_loader`: one record into its batch slot (decode, augment, normalise, label), alone or
  a whole batch in the calling thread (for ``DataLoader`` workers).
* :mod:`~mxrec.train.timing`: per-stage timers inside the loader and pipeline (off unless given a clock).
* :mod:`~mxrec.train.dataiter`: the ``DataIter`` protocol (``DataBatch``, ``next``, ``reset``).
* :mod:`~mxrec.train.record_iter`: ``ImageRecordIter``; :mod:`~mxrec.train.image_iter`: ``ImageIter``.
* :mod:`~mxrec.train.face_pairs`: InsightFace verification sets (``lfw.bin``, ...) as numpy arrays.
* :mod:`~mxrec.train.params`: keyword parameters split between the parameter groups (one place).

Records are opened with :func:`~mxrec.datasets.samples.open_samples` and read through the
:class:`~mxrec.io.records.Records` contract only; :mod:`mxrec.storage` serves files that are not records
(image files named by a list, a mean image written atomically). May import: :mod:`mxrec.errors`,
:mod:`mxrec.format`, :mod:`mxrec.storage`, :mod:`mxrec.io`,
:mod:`mxrec.datasets`, :mod:`mxrec.image`, :mod:`mxrec.transforms`.
"""

from mxrec.train.augment import default_steps
from mxrec.train.dataiter import DataBatch, DataDesc
from mxrec.train.image_iter import ImageIter
from mxrec.train.record_iter import ImageRecordIter

__all__ = ["DataBatch", "DataDesc", "ImageIter", "ImageRecordIter", "default_steps"]
