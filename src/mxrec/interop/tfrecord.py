"""TFRecord: ``tf.train.Example`` records in the ImageNet convention, read by TFRecord readers without TensorFlow.

Each record is one ``Example``, encoded by protobuf (the ``protobuf``
package, from the message definitions of TensorFlow's ``example.proto`` and
``feature.proto``, declared in :func:`example_class`: importing the
``tfrecord`` package would import PyTorch, seconds per process), with the features TensorFlow's ImageNet pipelines
and DALI's TFRecord reader look for:

* ``image/encoded`` (the payload, untouched), ``image/format`` (``jpeg``,
  ``png``, ... or ``other``), ``image/class/label`` (the whole non-negative
  scalar label, else -1), ``image/height``, ``image/width`` (from the image
  headers; 0 when unknown), ``image/class/text`` (the class name from the
  ``.labels`` file, when there is one);
* the exact IRHeader under ``mxrec/``: ``key`` (bytes), ``irheader`` (the
  header bytes as the ``.rec`` stores them, labels included: what mxrec reads
  back), and for other readers its fields ``flag``, ``id``, ``id2`` (int64; a
  u64 id above 2**63 wraps), ``label`` (float32: the header label then the
  ``flag`` labels); ``raw`` (1 for a record without IRHeader, which has no
  ``irheader``). Files written before ``irheader`` was always there are read
  from the fields.

The file framing is TFRecord's: a u64 length, its masked CRC-32C, the data,
the data's masked CRC-32C (the ``crc32c`` package). Beside each file goes
``NAME.tfrecord.idx``, one ``offset size`` line per record: the index DALI's
``fn.readers.tfrecord`` and the ``tfrecord`` package's loaders take (what
their ``tfrecord2idx`` tools would write). Reading checks both
checksums and names the file and byte offset of a bad one.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Iterator
from typing import IO, Any

from mxrec.errors import RecordFormatError, TruncatedRecordError, import_extra
from mxrec.interop.formats import BufferStream, Format
from mxrec.interop.record import Payload, Record, foreign_record
from mxrec.io.writer import write_all
from mxrec.storage.write_behind import WriteBehind

# the index beside each file: "offset size" per record, as DALI's and tfrecord's tfrecord2idx write it
FORMAT = Format(name="tfrecord", title="TFRecord (tf.train.Example)", module=__name__,
                suffixes=(".tfrecord", ".tfrecords"), extra="tfrecord", index_suffix=".idx",
                loading='`tf.data.TFRecordDataset(glob("DIR/*.tfrecord"))`')
_LENGTH = struct.Struct("<Q")
_CRC = struct.Struct("<I")
_HEAD = struct.Struct("<QI")  # a frame's length and the length's masked CRC-32C
_MASK_DELTA = 0xA282EAD8
_U64 = 1 << 64
WRITE_BLOCK = 8 << 20  # bytes of frames per writev
_ENCODED_KEY = b"\x0a\x0dimage/encoded"  # a map entry's key field: "image/encoded"


_EXAMPLE: list[Any] = []  # the Example class, made once


def example_class() -> Any:
    """``tf.train.Example`` as a protobuf message class, declared here in a private descriptor pool."""
    if _EXAMPLE:
        return _EXAMPLE[0]
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    proto = descriptor_pb2.FileDescriptorProto(name="mxrec_tf_example.proto", package="tensorflow", syntax="proto3")
    field = descriptor_pb2.FieldDescriptorProto
    repeated, optional = field.LABEL_REPEATED, field.LABEL_OPTIONAL

    def message(name: str, *fields: tuple[str, int, int, int, str | None]) -> descriptor_pb2.DescriptorProto:
        out = proto.message_type.add(name=name)
        for field_name, number, label, kind, type_name in fields:
            out.field.add(name=field_name, number=number, label=label, type=kind, type_name=type_name)
        return out

    message("BytesList", ("value", 1, repeated, field.TYPE_BYTES, None))
    message("FloatList", ("value", 1, repeated, field.TYPE_FLOAT, None)).field[0].options.packed = True
    message("Int64List", ("value", 1, repeated, field.TYPE_INT64, None)).field[0].options.packed = True
    feature = message("Feature", ("bytes_list", 1, optional, field.TYPE_MESSAGE, ".tensorflow.BytesList"),
                      ("float_list", 2, optional, field.TYPE_MESSAGE, ".tensorflow.FloatList"),
                      ("int64_list", 3, optional, field.TYPE_MESSAGE, ".tensorflow.Int64List"))
    feature.oneof_decl.add(name="kind")
    for entry in feature.field:
        entry.oneof_index = 0
    features = message("Features", ("feature", 1, repeated, field.TYPE_MESSAGE, ".tensorflow.Features.FeatureEntry"))
    entry = features.nested_type.add(name="FeatureEntry")
    entry.field.add(name="key", number=1, label=optional, type=field.TYPE_STRING)
    entry.field.add(name="value", number=2, label=optional, type=field.TYPE_MESSAGE, type_name=".tensorflow.Feature")
    entry.options.map_entry = True
    message("Example", ("features", 1, optional, field.TYPE_MESSAGE, ".tensorflow.Features"))
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    _EXAMPLE.append(message_factory.GetMessageClass(pool.FindMessageTypeByName("tensorflow.Example")))
    return _EXAMPLE[0]


def require_tfrecord() -> tuple[Any, Any]:
    """``(Example class, crc32c)``, or :class:`MissingExtraError` naming ``mxrec[tfrecord]``."""
    what = "TFRecord needs the protobuf and crc32c packages, which are not installed"
    crc32c = import_extra("crc32c", what, FORMAT.extra)
    import_extra("google.protobuf", what, FORMAT.extra)
    return example_class(), crc32c


# The checksums keep the GIL (crc32c gives it up for 32 KB and more by default): the write-behind thread holds it
# only briefly, but taking it back after each of thousands of releases waits behind that thread each time.
_KEEP_GIL = 0


def masked_crc(crc32c: Any, data: bytes) -> int:
    """TFRecord's masked CRC-32C of ``data``."""
    return _mask(crc32c.crc32c(data, 0, _KEEP_GIL))


def _mask(crc: int) -> int:
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


class ExampleEncoder:
    """Records as serialized ``tf.train.Example`` messages in the ImageNet convention (see the module docstring)."""

    def __init__(self, class_names: dict[int, str] | None = None) -> None:
        self.class_names = class_names or {}

    def example(self, record: Record, payload: Payload) -> tuple[bytes, bytes | memoryview, bytes]:
        """The serialized ``Example`` of ``record`` in three pieces, ``(before, payload, after)``, the payload not
        copied: the bytes ``SerializeToString(deterministic=True)`` gives (map entries in its order; checked
        against protobuf by the tests), encoded here because building the message cost more than the rest of the
        conversion (13 us a record, against 6 us here)."""
        label = record.class_label
        before = _repeated_int64_entry(b"image/class/label", label)
        if label in self.class_names:
            before += _repeated_bytes_entry(b"image/class/text", self.class_names[label].encode())
        after = [_repeated_bytes_entry(b"image/format", payload.kind.encode()),
                 _repeated_int64_entry(b"image/height", payload.height),
                 _repeated_int64_entry(b"image/width", payload.width)]
        if not record.raw:
            # protobuf's (upb's) deterministic order puts a key after the longer keys it begins: id2 before id
            after += (_repeated_int64_entry(b"mxrec/flag", record.flag),
                      _repeated_int64_entry(b"mxrec/id2", record.id2), _int64_entry(b"mxrec/id", record.id))
            after.append(_bytes_entry(b"mxrec/irheader", record.header_bytes()))
        after.append(_bytes_entry(b"mxrec/key", record.key.encode()))
        if not record.raw:
            if record.labels is not None:
                after.append(_label_entry(record.label, *record.labels.tolist()))
            else:  # a cache would look -0.0 up as 0.0: zeros are made each time
                after.append(_repeated_label_entry(record.label) if record.label else _label_entry(record.label))
        after.append(_repeated_int64_entry(b"mxrec/raw", int(record.raw)))
        rest = b"".join(after)
        data = record.data
        # the map entry: key "image/encoded", value Feature{bytes_list: BytesList{value: [data]}}
        values = b"\x0a" + _varint(len(data))  # BytesList.value
        size = len(values) + len(data)
        bytes_list = b"\x0a" + _varint(size)  # Feature.bytes_list
        size += len(bytes_list)
        key_value = _ENCODED_KEY + b"\x12" + _varint(size)  # the entry's key and value fields
        size += len(key_value)
        entry = before + b"\x0a" + _varint(size) + key_value + bytes_list + values
        return b"\x0a" + _varint(len(entry) + len(data) + len(rest)) + entry, data, rest


class Writer(ExampleEncoder):
    """Write records as ``Example`` records of one TFRecord file at ``path`` (a local file)."""

    def __init__(self, path: str, class_names: dict[int, str] | None = None) -> None:
        super().__init__(class_names)
        self.example_type, self.crc32c = require_tfrecord()
        self.file = open(path, "wb", buffering=0)  # frames go out in blocks: one writev
        self.behind = WriteBehind()  # a block's writev while the next block's Examples are made
        self.index = open(path + FORMAT.index_suffix, "w", encoding="ascii", newline="\n")
        self.offset = 0
        self.frames: list[bytes] = []
        self.pending = 0

    def write(self, record: Record, payload: Payload) -> None:
        pieces = self.example(record, payload)
        self.frames.append(pieces)
        size = 16 + sum(map(len, pieces))
        self.index.write(f"{self.offset} {size}\n")
        self.offset += size
        self.pending += size
        if self.pending >= WRITE_BLOCK:
            self._write_pending()

    def _write_pending(self) -> None:
        if self.frames:
            self.behind.submit(write_all, self.file, self._framed(self.frames))
            self.frames, self.pending = [], 0

    def _framed(self, frames: list[tuple[bytes, bytes | memoryview, bytes]]) -> list[bytes | memoryview]:
        """``frames`` (each an ``Example`` in pieces) framed, for one ``writev``: the checksums are taken here,
        not by the writing thread (a call that gives up the GIL 1500 times waits for it as often)."""
        crc32c, chunks = self.crc32c.crc32c, []
        for pieces in frames:
            length = _LENGTH.pack(sum(map(len, pieces)))
            crc = 0
            for piece in pieces:
                crc = crc32c(piece, crc, _KEEP_GIL)
            chunks += (length + _CRC.pack(masked_crc(self.crc32c, length)), *pieces, _CRC.pack(_mask(crc)))
        return chunks

    def close(self) -> None:
        self._write_pending()
        self.behind.finish(self.file, self.index)

    def abort(self) -> None:
        self.behind.abandon(self.file, self.index)


def _varint(value: int) -> bytes:
    """``value`` (not negative) as a protobuf varint."""
    if value < 0x80:
        return _SMALL_VARINTS[value]
    if value < 0x200000:  # lengths of images: two or three bytes, made without a loop
        if value < 0x4000:
            return bytes((value & 0x7F | 0x80, value >> 7))
        return bytes((value & 0x7F | 0x80, value >> 7 & 0x7F | 0x80, value >> 14))
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_SMALL_VARINTS = [bytes((n,)) for n in range(0x80)]
_U64_MASK = _U64 - 1

# The few message shapes an ImageNet-style Example has, in protobuf's wire format: a map entry of Features is
# {1: key, 2: Feature}; Feature is {1: BytesList | 2: FloatList | 3: Int64List}, each list {1: values}, numbers
# packed (proto3). Every length-delimited field is its tag byte, the length as a varint, the bytes.


def _field(tag: bytes, body: bytes) -> bytes:
    return tag + _varint(len(body)) + body


def _entry(name: bytes, feature: bytes) -> bytes:
    """A ``Features`` map entry: key ``name``, value the serialized ``Feature``."""
    return _field(b"\x0a", _field(b"\x0a", name) + _field(b"\x12", feature))


def _int64_entry(name: bytes, value: int) -> bytes:
    """An entry of one int64 (a negative one as ten varint bytes, as protobuf writes it)."""
    return _entry(name, _field(b"\x1a", _field(b"\x0a", _varint(value & _U64_MASK))))


def _bytes_entry(name: bytes, value: bytes) -> bytes:
    return _entry(name, _field(b"\x0a", _field(b"\x0a", value)))


def _label_entry(*values: float) -> bytes:
    """The ``mxrec/label`` entry: float32 values, packed."""
    return _entry(b"mxrec/label", _field(b"\x12", _field(b"\x0a", struct.pack(f"<{len(values)}f", *values))))


# Class labels, sizes, flags, formats repeat from record to record: their entries are made once.
_repeated_int64_entry = functools.lru_cache(maxsize=4096)(_int64_entry)
_repeated_bytes_entry = functools.lru_cache(maxsize=256)(_bytes_entry)
_repeated_label_entry = functools.lru_cache(maxsize=4096)(_label_entry)


def iter_frames(stream: IO[bytes] | BufferStream, where: str) -> Iterator[tuple[int, bytes | memoryview]]:
    """``(offset, data)`` of each TFRecord frame in ``stream``, both checksums checked."""
    _, crc32c = require_tfrecord()
    crc, read, unpack_head, unpack_crc = crc32c.crc32c, stream.read, _HEAD.unpack_from, _CRC.unpack_from
    offset = 0
    while True:
        head = read(12)
        if len(head) < 12:
            if not head:
                return
            raise TruncatedRecordError(where, f"the file ends inside a TFRecord length ({len(head)} bytes)",
                                       offset=offset)
        length, stored = unpack_head(head)
        if _mask(crc(head[:8], 0, _KEEP_GIL)) != stored:
            raise RecordFormatError(where, "bad TFRecord length checksum (not a TFRecord file, or damaged)",
                                    offset=offset)
        body = read(length + 4)
        if len(body) < length + 4:
            raise TruncatedRecordError(where, f"the file ends inside a {length}-byte TFRecord record", offset=offset)
        data = body[:length]
        if _mask(crc(data, 0, _KEEP_GIL)) != unpack_crc(body, length)[0]:
            raise RecordFormatError(where, "bad TFRecord data checksum (damaged record)", offset=offset)
        yield offset, data
        offset += 16 + length


def count_records(stream: IO[bytes] | BufferStream, where: str) -> int:
    """Records of one TFRecord file: its frame headers walked (length checksums checked), the data skipped."""
    _, crc32c = require_tfrecord()
    count = offset = 0
    while True:
        if isinstance(stream, BufferStream):  # only the headers' pages are read (read() maps the pages ahead)
            head = stream.view[offset:offset + 12]
        else:
            stream.seek(offset)
            head = stream.read(12)
        if not head:
            return count
        if len(head) < 12 or masked_crc(crc32c, head[:8]) != _CRC.unpack_from(head, 8)[0]:
            raise RecordFormatError(where, "bad TFRecord length or checksum (not a TFRecord file, or damaged)",
                                    offset=offset)
        offset += 16 + _LENGTH.unpack_from(head)[0]
        count += 1


def _first(feature: Any, name: str, kind: str) -> Any:
    """The first value of feature ``name`` (of list ``kind``), or ``None``."""
    found = feature.get(name)
    if found is None:
        return None
    values = getattr(found, kind).value
    return values[0] if len(values) else None


def _read_varint(data: bytes | memoryview, at: int) -> tuple[int, int]:
    """The varint at ``at`` and where it ends (``IndexError`` when ``data`` ends inside it)."""
    byte = data[at]
    if byte < 0x80:
        return byte, at + 1
    value, shift = byte & 0x7F, 7
    while True:
        at += 1
        byte = data[at]
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at + 1
        shift += 7


def split_image(data: bytes | memoryview) -> tuple[bytes | memoryview, bytes] | None:
    """``(image, rest)``: the ``image/encoded`` value of a serialized ``Example`` as a slice of ``data`` (no copy)
    and the ``Example`` without that entry; ``None`` unless the layout is the plain one (one ``features`` field,
    an ``image/encoded`` entry holding one value), for protobuf to read whole.

    Protobuf copies every bytes field it parses, and the image is nearly all of a record: reading it whole made
    ``tfrecord -> .rec`` spend 50 us a record in protobuf, against 8 us for the rest of the ``Example``.
    Only the framing of the fields is walked here; protobuf still decodes every feature.
    """
    try:
        if data[0] != 0x0A:
            return None
        length, start = _read_varint(data, 1)
        end = start + length
        if end != len(data):  # something after the features: protobuf merges it
            return None
        at = start
        while at < end:
            if data[at] != 0x0A:
                return None
            length = data[at + 1]  # an entry shorter than 128 bytes (all but the image's): no varint to read
            length, body = (length, at + 2) if length < 0x80 else _read_varint(data, at + 1)
            stop = body + length
            if data[body:body + 15] == _ENCODED_KEY and data[body + 15] == 0x12:
                _, feature = _read_varint(data, body + 16)
                if data[feature] != 0x0A:  # not a bytes_list
                    return None
                length, values = _read_varint(data, feature + 1)
                if data[values] != 0x0A:
                    return None
                size, image = _read_varint(data, values + 1)
                if image + size != values + length or values + length != stop:  # more than one value
                    return None
                rest = bytes(data[start:at]) + bytes(data[stop:end])
                return data[image:image + size], b"\x0a" + _varint(len(rest)) + rest
            at = stop
    except IndexError:  # cut short: protobuf says how
        return None
    return None


def read_records(stream: IO[bytes] | BufferStream, where: str) -> Iterator[Record]:
    """The records of one TFRecord file (``key`` is ``None`` for files of other tools)."""
    example_type, _ = require_tfrecord()
    for offset, data in iter_frames(stream, where):
        yield example_record(example_type, data, where, offset)


def example_record(example_type: Any, data: bytes | memoryview, where: str, offset: int) -> Record:
    """The record a serialized ``Example`` holds (``key`` ``None`` for one another tool wrote); ``offset`` names
    where it is in ``where`` on an error."""
    from google.protobuf.message import DecodeError

    split = split_image(data)
    try:
        feature = example_type.FromString(data if split is None else split[1]).features.feature
    except DecodeError as exc:
        raise RecordFormatError(where, f"the record is not a tf.train.Example ({exc})", offset=offset) from None
    # a second image/encoded entry (protobuf keeps the last of a key) is in what protobuf read
    image = _first(feature, "image/encoded", "bytes_list") if split is None or "image/encoded" in feature \
        else split[0]
    image = image or b""
    key = _first(feature, "mxrec/key", "bytes_list")
    if key is None:
        return foreign_record(image, _first(feature, "image/class/label", "int64_list"))
    head = _first(feature, "mxrec/irheader", "bytes_list")
    if head is not None:  # the header as stored (never written for a raw record): one field to read
        return Record.from_head(key.decode(), head, image)
    # a raw record, or a file written before mxrec stored every header: the fields
    if _first(feature, "mxrec/raw", "int64_list"):
        return Record.from_fields(key.decode(), image, raw=True)
    labels = list(feature["mxrec/label"].float_list.value)  # float32 values (np.asarray of it: 7 us)
    flag = _first(feature, "mxrec/flag", "int64_list")
    return Record.from_fields(key.decode(), image, flag=flag, label=labels[0],
                              id=_first(feature, "mxrec/id", "int64_list") % _U64,
                              id2=_first(feature, "mxrec/id2", "int64_list") % _U64,
                              labels=labels[1:] if flag else None)
