"""mxrec: MXNet RecordIO (``.rec`` / ``.idx``) without MXNet.

Where things live:

* :mod:`mxrec.framing`  the byte layout of ``.rec`` files (pure functions)
* :mod:`mxrec.index`    the ``.idx`` text format; rebuilding an index by scanning
* :mod:`mxrec.header`   ``IRHeader`` packing (label, ids) at the front of a payload
* :mod:`mxrec.codec`    image bytes <-> pixels (OpenCV)
* :mod:`mxrec.reader`   :class:`RecordReader`, the fast random-access reader
* :mod:`mxrec.writer`   :class:`RecordWriter`
* :mod:`mxrec.recordio` drop-in replacement for ``mxnet.recordio``
* :mod:`mxrec.info`     dataset summary (``mxrec info``)
* :mod:`mxrec.verify`   framing and index checks (``mxrec verify``)
* :mod:`mxrec.cli`      the ``mxrec`` command line, a thin layer over the above
* :mod:`mxrec.iterators` ``ImageRecordIter`` / ``ImageIter``: the training pipeline, built from
  :mod:`mxrec.sampler` (epoch order), :mod:`mxrec.decode`, :mod:`mxrec.augment`, :mod:`mxrec.normalize`,
  :mod:`mxrec.pipeline` (threads) and :mod:`mxrec.rng`; :mod:`mxrec.transforms` (Gluon-style transforms,
  collate) and :mod:`mxrec.torch` (PyTorch datasets, optional)
"""

from mxrec.errors import (
    DuplicateKeyError,
    HeaderError,
    ImageDecodeError,
    IndexFileError,
    MxrecError,
    ParameterError,
    RecordFormatError,
    RecordKeyError,
    TruncatedRecordError,
)
from mxrec.header import IRHeader, pack, unpack
from mxrec.index import build_index, read_index, write_index
from mxrec.iterators import DataBatch, ImageIter, ImageRecordIter
from mxrec.reader import RecordReader
from mxrec.writer import RecordWriter

__version__ = "0.1.0"

__all__ = [
    "DataBatch",
    "DuplicateKeyError",
    "HeaderError",
    "IRHeader",
    "ImageDecodeError",
    "ImageIter",
    "ImageRecordIter",
    "IndexFileError",
    "MxrecError",
    "ParameterError",
    "RecordFormatError",
    "RecordKeyError",
    "RecordReader",
    "RecordWriter",
    "TruncatedRecordError",
    "build_index",
    "pack",
    "read_index",
    "unpack",
    "write_index",
]
