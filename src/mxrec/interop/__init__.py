"""Converting datasets between RecordIO and the formats training uses today, both ways, exactly.

* :mod:`~mxrec.interop.record`: the one record model (key, exact IRHeader, payload) and the
  :class:`~mxrec.interop.record.Report` of payload kinds and of what is not a sound image.
* :mod:`~mxrec.interop.formats`: the registry of formats (:data:`~mxrec.interop.formats.known_formats`,
  :func:`~mxrec.interop.formats.register_format`) and the protocol a format implements; ``convert``, ``info``,
  ``verify``, the CLI help and the docs table come from it.
* :mod:`~mxrec.interop.webdataset`: WebDataset ``.tar`` shards.
* :mod:`~mxrec.interop.parquet`: Parquet as a Hugging Face dataset (``Image``, ``ClassLabel``).
* :mod:`~mxrec.interop.tfrecord`: TFRecord files of ``tf.train.Example`` in the ImageNet convention.
* :mod:`~mxrec.interop.arrayrecord`: ArrayRecord files (Grain's) of the same ``tf.train.Example`` records.
* :mod:`~mxrec.interop.sets`: which format a path holds, a foreign set's files and its manifest
  (``.mxrec/NAME.convert.json``).
* :mod:`~mxrec.interop.job`: :func:`convert` in three steps: plan, run, publish (complete or not at all).
* :mod:`~mxrec.interop.tasks`: the tasks it runs (here, in worker processes or on Ray), each streaming its part
  of the source into staged shards.
* :mod:`~mxrec.interop.huggingface`: to and from a ``datasets.Dataset`` in Python.
* :mod:`~mxrec.interop.describe`: what a set of a registered format holds (``mxrec info``, ``mxrec verify``).

Each format's library is an extra of its own (``mxrec[webdataset]``, ``mxrec[parquet]``, ``mxrec[tfrecord]``,
``mxrec[arrayrecord]``); a missing one is a :class:`~mxrec.errors.MissingExtraError` naming it. Image folders
are ``mxrec list`` + ``pack`` and ``mxrec extract`` (:mod:`mxrec.packing`). Library code reports through
callbacks, never prints.
Records are read through the :class:`~mxrec.io.records.Records` contract (``open_dataset``, ``fetch``);
foreign files, which are not records, are mapped whole through :mod:`mxrec.storage` (a remote one through a
local copy), and outputs are published through its atomic helper. May import: :mod:`mxrec.errors`,
:mod:`mxrec.format`, :mod:`mxrec.storage`, :mod:`mxrec.io`, :mod:`mxrec.datasets`, :mod:`mxrec.image`,
:mod:`mxrec.packing`, :mod:`mxrec.ray` (lazily, for ``engine="ray"``).
"""

from mxrec.interop.describe import describe_set
from mxrec.interop.formats import Format, get_format, known_formats, register_format
from mxrec.interop.huggingface import from_hf_dataset, to_hf_dataset
from mxrec.interop.job import ConvertResult, convert
from mxrec.interop.record import Record, Report

__all__ = ["ConvertResult", "Format", "Record", "Report", "convert", "describe_set", "from_hf_dataset", "get_format",
           "known_formats", "register_format", "to_hf_dataset"]
