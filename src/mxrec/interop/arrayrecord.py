"""ArrayRecord: Google's random-access record format behind Grain (the JAX data loader), read and written by the
``array_record`` package.

Each record is one serialized ``tf.train.Example``, the very message a TFRecord
shard of :mod:`mxrec.interop.tfrecord` holds (the ImageNet feature names, and
the exact IRHeader under ``mxrec/``), as TFDS writes its ArrayRecord datasets:
a Grain or TFDS pipeline parses it with the parser it already has, and
converting back gives the same ``.rec`` and ``.idx`` bytes. Records are
written one per chunk (``group_size:1``: reading one record decodes only it,
what Grain's random access wants) and uncompressed (encoded images do not
compress; ``zstd`` would cost time for nothing).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from mxrec.errors import RecordFormatError, import_extra
from mxrec.interop.formats import Format
from mxrec.interop.record import Payload, Record
from mxrec.interop.tfrecord import ExampleEncoder, example_class, example_record

FORMAT = Format(name="arrayrecord", title="ArrayRecord (Grain)", module=__name__, suffixes=(".array_record",),
                extra="arrayrecord", opens="path",
                loading='`grain.sources.ArrayRecordDataSource(glob("DIR/*.array_record"))`')
WRITER_OPTIONS = "group_size:1,uncompressed"  # see the module docstring
_BLOCK = 256  # records read at once


def require_array_record() -> Any:
    """``array_record``'s reader and writer module, or :class:`MissingExtraError` naming ``mxrec[arrayrecord]``."""
    what = "ArrayRecord needs the array-record and protobuf packages, which are not installed"
    import_extra("google.protobuf", what, FORMAT.extra)
    return import_extra("array_record.python.array_record_module", what, FORMAT.extra)


def _reader(path: str) -> Any:
    """An open reader of ``path``; :class:`RecordFormatError` for a file it cannot read (the C++ reader says why
    only when closed)."""
    module = require_array_record()
    try:
        reader = module.ArrayRecordReader(path)
        if reader.ok():
            return reader
        reader.close()
        reason = "the reader cannot open it"
    except (RuntimeError, ValueError, OSError) as exc:
        reason = str(exc)
    raise RecordFormatError(path, f"not an ArrayRecord file, or damaged ({reason})", offset=0)


def count_records(path: str, where: str) -> int:
    """Records of one ArrayRecord file (from its footer)."""
    reader = _reader(path)
    try:
        return reader.num_records()
    finally:
        reader.close()


def read_records(path: str, where: str) -> Iterator[Record]:
    """The records of one ArrayRecord file, in order (``key`` is ``None`` for an ``Example`` of another tool)."""
    example_type = example_class()
    reader = _reader(path)
    try:
        total = reader.num_records()
        for start in range(0, total, _BLOCK):
            try:
                block = reader.read(start, min(total, start + _BLOCK))
            except (RuntimeError, ValueError) as exc:
                raise RecordFormatError(where, f"not an ArrayRecord file, or damaged (reading records from {start}: "
                                               f"{exc})", offset=0) from None
            for number, data in enumerate(block, start):
                yield example_record(example_type, data, f"{where} (record {number})", 0)
    finally:
        reader.close()


class Writer(ExampleEncoder):
    """Write records as ``Example`` records of one ArrayRecord file at ``path`` (a local file)."""

    def __init__(self, path: str, class_names: dict[int, str] | None = None) -> None:
        super().__init__(class_names)
        self.path = path
        self.writer = require_array_record().ArrayRecordWriter(path, WRITER_OPTIONS)

    def write(self, record: Record, payload: Payload) -> None:
        self.writer.write(b"".join(self.example(record, payload)))

    def close(self) -> None:
        self.writer.close()

    def abort(self) -> None:
        self.writer.close()  # (the staged file is the commit's to remove)
