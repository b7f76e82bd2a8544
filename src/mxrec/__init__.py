"""mxrec: MXNet RecordIO (``.rec`` / ``.idx``) without MXNet.

Where things live (one module per concept):

* format: :mod:`~mxrec.framing` (``.rec`` bytes), :mod:`~mxrec.index` (``.idx``), :mod:`~mxrec.header`
  (``IRHeader``), :mod:`~mxrec.lst` (``.lst``), :mod:`~mxrec.errors`
* I/O: :mod:`~mxrec.mapping` (mmap), :mod:`~mxrec.reader` (:class:`RecordReader`), :mod:`~mxrec.writer`
  (:class:`RecordWriter`), :mod:`~mxrec.atomic` (complete-or-absent output), :mod:`~mxrec.recordio`
  (drop-in ``mxnet.recordio``), :mod:`~mxrec.codec` (image bytes <-> pixels)
* building datasets: :mod:`~mxrec.listing`, :mod:`~mxrec.imageprep`, :mod:`~mxrec.packing`,
  :mod:`~mxrec.shards`, :mod:`~mxrec.extract`, :mod:`~mxrec.progress`
* checking them: :mod:`~mxrec.info`, :mod:`~mxrec.verify` (with :mod:`~mxrec.checks`,
  :mod:`~mxrec.contents`, :mod:`~mxrec.imagebytes`, ``doctor_*``), :mod:`~mxrec.repair`,
  :mod:`~mxrec.preview`, :mod:`~mxrec.stats`
* training from them: :mod:`~mxrec.iterators` (``ImageRecordIter``, ``ImageIter``), built from
  :mod:`~mxrec.sampler`, :mod:`~mxrec.rng`, :mod:`~mxrec.decode`, :mod:`~mxrec.augment`,
  :mod:`~mxrec.normalize`, :mod:`~mxrec.pipeline`; :mod:`~mxrec.transforms`; :mod:`mxrec.torch`
* :mod:`mxrec.cli`: the ``mxrec`` command line, a thin layer over the above
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
