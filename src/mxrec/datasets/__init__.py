"""Datasets: record files composed into what training reads.

* :mod:`~mxrec.datasets.opening`: :func:`~mxrec.datasets.opening.open_dataset`, the one way to open a dataset (a
  spec, a mixture file, or a dataset already opened, used as it is), with its storage settings as one value;
  :func:`~mxrec.datasets.opening.hold_dataset` (what a consumer reads, closing only what it opened) and
  :func:`~mxrec.datasets.opening.dataset_files` (the files behind a dataset, for the doctor).
* :mod:`~mxrec.datasets.shard_set`: :func:`~mxrec.datasets.shard_set.open_files` (a file, a URL, a list, a glob, a
  brace range, a manifest, a folder) and :class:`~mxrec.datasets.shard_set.ShardSetReader`.
* :mod:`~mxrec.datasets.mixture`: :func:`~mxrec.datasets.mixture.mix`, datasets mixed in chosen proportions.
* :mod:`~mxrec.datasets.subset`: :class:`~mxrec.datasets.subset.RecordSubset`, some of a reader's records as a
  dataset (the samples of a face set).
* :mod:`~mxrec.datasets.face_set`: which records of an InsightFace face set are its faces, and whose
  (:func:`~mxrec.datasets.face_set.samples_of`).
* :mod:`~mxrec.datasets.samples`: :func:`~mxrec.datasets.samples.open_samples`, what training reads.

May import: :mod:`mxrec.errors`, :mod:`mxrec.format`, :mod:`mxrec.storage`, :mod:`mxrec.io`.
"""
