"""Datasets: record files composed into what training reads.

* :mod:`~mxrec.datasets.shard_set`: :func:`~mxrec.datasets.shard_set.open_dataset`, the one way to open a dataset
  (a file, a URL, a list, a glob, a brace range, a manifest, a folder), and
  :class:`~mxrec.datasets.shard_set.ShardSetReader`.
* :mod:`~mxrec.datasets.subset`: :class:`~mxrec.datasets.subset.RecordSubset`, some of a reader's records as a
  dataset (the samples of a face set).
* :mod:`~mxrec.datasets.face_set`: which records of an InsightFace face set are its faces, and whose.

May import: :mod:`mxrec.errors`, :mod:`mxrec.format`, :mod:`mxrec.storage`, :mod:`mxrec.io`.
"""
