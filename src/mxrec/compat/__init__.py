"""Compatibility with MXNet-era code: ``import mxrec.compat.mx as mx`` runs data-loading code unchanged.

* :mod:`~mxrec.compat.ndarray`: :class:`~mxrec.compat.ndarray.NDArray`, the few members of MXNet's
  ``NDArray`` that data code uses (``asnumpy``, ``shape``, ``dtype``, ``transpose``, ``flip``, indexing)
  over a numpy array, and ``mx.nd``'s functions of the same names.
* :mod:`~mxrec.compat.mx`: the ``mx`` module itself: ``mx.recordio``, ``mx.io`` (``ImageRecordIter``,
  ``DataBatch``, ``DataDesc``), ``mx.image`` (``imdecode``, ``imread``, ``resize_short``, ``imresize``, the
  crops, ``ImageIter``, ``CreateAugmenter`` and the augmenters), ``mx.nd``/``mx.ndarray``.

It covers data loading only: any other name (``mx.nd.zeros``, ``mx.gluon``, ``NDArray.as_in_context``)
raises :class:`~mxrec.errors.UnsupportedError` naming it. Where mxrec differs from MXNet (EXIF
orientation, float32 labels) the documentation page ``docs/mxnet-differences.md`` says so.
May import: :mod:`mxrec.errors`, :mod:`mxrec.recordio`, :mod:`mxrec.image`, :mod:`mxrec.transforms`,
:mod:`mxrec.train`.
"""
