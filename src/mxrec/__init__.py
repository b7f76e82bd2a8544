"""mxrec: MXNet RecordIO (``.rec`` / ``.idx``) without MXNet.

The subpackages, in layers from the bottom up (each may import only the layers listed before it):

* :mod:`mxrec.errors`: the ``MxrecError`` hierarchy.
* :mod:`mxrec.format`: the bytes and text formats, as pure functions (``.rec`` framing, ``IRHeader``,
  ``.idx``, ``.lst``).
* :mod:`mxrec.storage`: bytes of files, local or remote (fsspec URLs, ranged reads, the block cache, memory
  maps, atomic output), nothing about records.
* :mod:`mxrec.io`: record files (the ``Records`` contract, ``RecordReader``, ``RecordWriter``, ``.idx`` and
  ``.lst`` files, sharded output). :mod:`mxrec.image`: image bytes (signatures, headers, decode/encode).
* :mod:`mxrec.datasets`: records composed into datasets (shard sets and ``open_dataset``, subsets, face sets).
* :mod:`mxrec.transforms`: image operations and the ``mx.image`` / Gluon transforms.
* :mod:`mxrec.packing` (building datasets), :mod:`mxrec.doctor` (checking them), :mod:`mxrec.train`
  (``ImageRecordIter``, ``ImageIter``), :mod:`mxrec.interop` (``convert``: to and from WebDataset, Parquet,
  TFRecord, ArrayRecord); above them :mod:`mxrec.torch` (PyTorch datasets) and :mod:`mxrec.ray` (Ray Data).
* :mod:`mxrec.probing` (``mxrec.probe``: running a loader configuration briefly and diagnosing it).
* :mod:`mxrec.cli`: the ``mxrec`` command line, a thin layer over the above.

Beside them: :mod:`mxrec.recordio` (drop-in ``mxnet.recordio``) and :mod:`mxrec.grain` (Grain, for JAX: ``import
mxrec.grain``, not imported by ``import mxrec``).
"""

from mxrec import recordio
from mxrec.datasets.face_set import FaceSet, read_face_set
from mxrec.datasets.mixture import Mixture, MixtureError, mix
from mxrec.datasets.opening import open_dataset
from mxrec.datasets.shard_set import ShardSetReader
from mxrec.doctor.dataset_info import DatasetInfo
from mxrec.doctor.preview import contact_sheet
from mxrec.doctor.repair import repair_dataset
from mxrec.doctor.sets import info as dataset_info  # (one file, a shard set, a mixture or an opened dataset)
from mxrec.doctor.sets import verify as verify_dataset
from mxrec.doctor.stats import dataset_stats
from mxrec.doctor.verify_dataset import verify_recordio
from mxrec.errors import (
    CleanupError,
    DuplicateKeyError,
    HeaderError,
    ImageDecodeError,
    IncompleteSetError,
    IndexFileError,
    LayoutError,
    ManifestError,
    MissingExtraError,
    MxrecError,
    OutputPathError,
    ParameterError,
    RecordFormatError,
    RecordKeyError,
    RemoteAccessError,
    RemoteError,
    RemoteNotFoundError,
    TruncatedRecordError,
    VerificationSetError,
)
from mxrec.format.header import IRHeader, pack, unpack
from mxrec.interop import convert, from_hf_dataset, to_hf_dataset
from mxrec.io.index import build_index, read_index, write_index
from mxrec.io.opener import RecordReader
from mxrec.io.records import Records
from mxrec.io.writer import RecordWriter
from mxrec.packing.extract import extract_records
from mxrec.packing.job import pack_list, pack_prefix
from mxrec.packing.make_lists import make_lists, read_labelled_csv
from mxrec.packing.prepare import ImageTransform
from mxrec.probing import ProbeResult, probe
from mxrec.storage.settings import RequestPolicy, Storage
from mxrec.train import DataBatch, ImageIter, ImageRecordIter
from mxrec.train.face_pairs import VerificationSet, load_verification_set

__version__ = "0.1.0"

__all__ = [
    "CleanupError",
    "DataBatch",
    "DatasetInfo",
    "DuplicateKeyError",
    "FaceSet",
    "HeaderError",
    "IRHeader",
    "ImageDecodeError",
    "ImageIter",
    "ImageRecordIter",
    "ImageTransform",
    "IncompleteSetError",
    "IndexFileError",
    "LayoutError",
    "ManifestError",
    "MissingExtraError",
    "Mixture",
    "MixtureError",
    "MxrecError",
    "OutputPathError",
    "ParameterError",
    "ProbeResult",
    "RecordFormatError",
    "RecordKeyError",
    "RecordReader",
    "RecordWriter",
    "Records",
    "RemoteAccessError",
    "RemoteError",
    "RemoteNotFoundError",
    "RequestPolicy",
    "ShardSetReader",
    "Storage",
    "TruncatedRecordError",
    "VerificationSet",
    "VerificationSetError",
    "build_index",
    "contact_sheet",
    "convert",
    "dataset_info",
    "dataset_stats",
    "extract_records",
    "from_hf_dataset",
    "load_verification_set",
    "make_lists",
    "mix",
    "open_dataset",
    "pack",
    "pack_list",
    "pack_prefix",
    "probe",
    "read_face_set",
    "read_index",
    "read_labelled_csv",
    "recordio",
    "repair_dataset",
    "to_hf_dataset",
    "unpack",
    "verify_dataset",
    "verify_recordio",
    "write_index",
]
