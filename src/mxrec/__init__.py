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
* :mod:`mxrec.lst`      the ``.lst`` image list format
* :mod:`mxrec.listing`  making ``.lst`` files from a folder or a CSV (``mxrec list``)
* :mod:`mxrec.imageprep` im2rec's per-image transform (decode, crop, resize, encode)
* :mod:`mxrec.packing`  the pack job, ``.lst`` -> ``.rec``/``.idx`` (``mxrec pack``, ``mxrec im2rec``)
* :mod:`mxrec.shards`   sharded output ``name_00000.rec``, ...
* :mod:`mxrec.progress` progress display for long jobs
* :mod:`mxrec.extract`  images back out of a ``.rec`` (``mxrec extract``)
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
from mxrec.extract import extract_records
from mxrec.header import IRHeader, pack, unpack
from mxrec.imageprep import ImageTransform
from mxrec.index import build_index, read_index, write_index
from mxrec.iterators import DataBatch, ImageIter, ImageRecordIter
from mxrec.listing import make_lists, read_labelled_csv
from mxrec.packing import pack_list, pack_prefix
from mxrec.preview import contact_sheet
from mxrec.reader import RecordReader
from mxrec.repair import repair_dataset
from mxrec.stats import dataset_stats
from mxrec.verify import verify_dataset
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
    "ImageTransform",
    "IndexFileError",
    "MxrecError",
    "ParameterError",
    "RecordFormatError",
    "RecordKeyError",
    "RecordReader",
    "RecordWriter",
    "TruncatedRecordError",
    "build_index",
    "contact_sheet",
    "dataset_stats",
    "extract_records",
    "make_lists",
    "pack",
    "pack_list",
    "pack_prefix",
    "read_index",
    "read_labelled_csv",
    "repair_dataset",
    "unpack",
    "verify_dataset",
    "write_index",
]
