"""Converting datasets between RecordIO and the formats training uses today, both ways, exactly.

* :mod:`~mxrec.interop.record`: the one record model (key, exact IRHeader, payload) and the
  :class:`~mxrec.interop.record.Report` of payload kinds and of what is not a sound image.
* :mod:`~mxrec.interop.webdataset`: WebDataset ``.tar`` shards.
* :mod:`~mxrec.interop.parquet`: Parquet as a Hugging Face dataset (``Image``, ``ClassLabel``).
* :mod:`~mxrec.interop.tfrecord`: TFRecord files of ``tf.train.Example`` in the ImageNet convention.
* :mod:`~mxrec.interop.sets`: which format a path holds, a foreign set's files and its ``NAME.convert.json``.
* :mod:`~mxrec.interop.job`: :func:`convert`, streamed, split into tasks (worker processes or Ray), staged and
  published complete or not at all.
* :mod:`~mxrec.interop.huggingface`: to and from a ``datasets.Dataset`` in Python.
* :mod:`~mxrec.interop.describe`: what a WebDataset, Parquet or TFRecord set holds (``mxrec info``).

Each format's library is an extra of its own (``mxrec[webdataset]``, ``mxrec[parquet]``, ``mxrec[tfrecord]``);
a missing one is a :class:`~mxrec.errors.MissingExtraError` naming it. Image folders are ``mxrec list`` +
``pack`` and ``mxrec extract`` (:mod:`mxrec.packing`). Library code reports through callbacks, never prints.
Records are read through the :class:`~mxrec.io.records.Records` contract (``open_dataset``, ``fetch``);
foreign files, which are not records, are mapped whole through :mod:`mxrec.storage` (a remote one through a
local copy), and outputs are published through its atomic helper. May import: :mod:`mxrec.errors`,
:mod:`mxrec.format`, :mod:`mxrec.storage`, :mod:`mxrec.io`, :mod:`mxrec.datasets`, :mod:`mxrec.image`,
:mod:`mxrec.packing`, :mod:`mxrec.ray` (lazily, for ``engine="ray"``).
"""

from mxrec.interop.describe import describe_set
from mxrec.interop.huggingface import from_hf_dataset, to_hf_dataset
from mxrec.interop.job import ConvertResult, convert
from mxrec.interop.record import Record, Report

__all__ = ["ConvertResult", "Record", "Report", "convert", "describe_set", "from_hf_dataset", "to_hf_dataset"]
