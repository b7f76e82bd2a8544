"""Reading Examples: the image is taken out of the serialized Example without a copy, and what is read is what
protobuf itself reads, whatever the layout (duplicate entries, several values, merged fields, damage)."""

from __future__ import annotations

import io

import pytest

import mxrec
from testkit.datasets import clean_jpeg

tfrecord = pytest.importorskip("mxrec.interop.tfrecord")
pytest.importorskip("google.protobuf")
pytest.importorskip("crc32c")


def frame(data: bytes) -> bytes:
    """``data`` as one TFRecord frame."""
    _, crc32c = tfrecord.require_tfrecord()
    length = len(data).to_bytes(8, "little")
    return (length + tfrecord.masked_crc(crc32c, length).to_bytes(4, "little") + data
            + tfrecord.masked_crc(crc32c, data).to_bytes(4, "little"))


def example(**features: tuple[str, list]) -> bytes:
    example_type, _ = tfrecord.require_tfrecord()
    out = example_type()
    for name, (kind, values) in features.items():
        getattr(out.features.feature[name.replace("__", "/")], kind).value.extend(values)
    return out.SerializeToString(deterministic=True)


def body(data: bytes) -> bytes:
    """The map entries of a serialized Example (its features field without tag and length)."""
    _, start = tfrecord._read_varint(data, 1)
    return data[start:]


def read(data: bytes) -> list[mxrec.interop.record.Record]:
    return list(tfrecord.read_records(io.BytesIO(frame(data)), "t.tfrecord"))


def protobufs_image(data: bytes) -> bytes:
    example_type, _ = tfrecord.require_tfrecord()
    values = example_type.FromString(data).features.feature["image/encoded"].bytes_list.value
    return values[0] if values else b""


def test_the_image_is_a_slice_of_the_record_and_the_rest_is_protobufs() -> None:
    image = clean_jpeg(3)
    data = example(image__encoded=("bytes_list", [image]), image__class__label=("int64_list", [7]),
                   image__format=("bytes_list", [b"jpeg"]))
    split = tfrecord.split_image(memoryview(data))
    assert isinstance(split[0], memoryview) and bytes(split[0]) == image
    example_type, _ = tfrecord.require_tfrecord()
    rest = example_type.FromString(split[1]).features.feature
    assert sorted(rest) == ["image/class/label", "image/format"]
    [record] = read(data)
    assert (bytes(record.data), record.label) == (image, 7.0)


@pytest.mark.parametrize("layout", ["two values", "entry twice", "features twice", "no image", "int64 image",
                                    "empty list"])
def test_other_layouts_read_as_protobuf_reads_them(layout: str) -> None:
    first, second = clean_jpeg(1), clean_jpeg(2)
    label = example(image__class__label=("int64_list", [4]))
    if layout == "two values":
        data = example(image__encoded=("bytes_list", [first, second]), image__class__label=("int64_list", [4]))
    elif layout == "entry twice":  # a map key written twice in one features field: protobuf keeps the last
        entries = b"".join(body(e) for e in (example(image__encoded=("bytes_list", [first])), label,
                                             example(image__encoded=("bytes_list", [second]))))
        data = b"\x0a" + tfrecord._varint(len(entries)) + entries
    elif layout == "features twice":  # the features field twice: protobuf merges them
        data = example(image__class__label=("int64_list", [4])) + example(image__encoded=("bytes_list", [second]))
    elif layout == "no image":
        data = label
    elif layout == "int64 image":
        data = example(image__encoded=("int64_list", [5]), image__class__label=("int64_list", [4]))
    else:
        data = example(image__encoded=("bytes_list", []), image__class__label=("int64_list", [4]))
    [record] = read(data)
    assert bytes(record.data) == (b"" if layout == "int64 image" else protobufs_image(data))
    assert record.label == 4.0


def test_a_record_that_is_no_example_names_the_file_and_offset() -> None:
    good = example(image__encoded=("bytes_list", [b"x"]))
    stream = io.BytesIO(frame(good) + frame(b"\x0a\xff\xff\xff\xff\x0f"))  # a length far past the end
    at = len(frame(good))
    with pytest.raises(mxrec.RecordFormatError, match=rf"t\.tfrecord: at byte {at}: .*not a tf\.train\.Example"):
        list(tfrecord.read_records(stream, "t.tfrecord"))


def test_count_records_walks_the_frame_headers_and_names_a_bad_one() -> None:
    from mxrec.interop.formats import BufferStream

    frames = b"".join(frame(example(image__encoded=("bytes_list", [bytes(n)]))) for n in range(3))
    for stream in (io.BytesIO(frames), BufferStream(frames)):
        assert tfrecord.count_records(stream, "t.tfrecord") == 3
    assert tfrecord.count_records(BufferStream(frames + frames), "t.tfrecord") == 6
    bad = bytearray(frames)
    second = len(frame(example(image__encoded=("bytes_list", [b""]))))
    bad[second] ^= 0xFF  # the second frame's length byte
    with pytest.raises(mxrec.RecordFormatError, match=rf"t\.tfrecord: at byte {second}: bad TFRecord length"):
        tfrecord.count_records(BufferStream(bytes(bad)), "t.tfrecord")


def test_examples_without_the_stored_header_are_read_from_the_fields() -> None:
    """Files written before mxrec stored every IRHeader whole: the fields give the same record."""
    from mxrec.format.header import IRHeader, pack

    data = example(image__encoded=("bytes_list", [b"\xff\xd8payload"]), mxrec__key=("bytes_list", [b"k7"]),
                   mxrec__raw=("int64_list", [0]), mxrec__flag=("int64_list", [2]), mxrec__id=("int64_list", [-5]),
                   mxrec__id2=("int64_list", [9]), mxrec__label=("float_list", [0.0, 1.5, 2.5]))
    [record] = read(data)
    assert record.key == "k7" and bytes(record.data) == b"\xff\xd8payload"
    assert record.header_bytes() == pack(IRHeader(2, [1.5, 2.5], (1 << 64) - 5, 9), b"")


def test_a_stored_header_that_is_not_one_irheader_is_read_with_the_payload() -> None:
    """``mxrec/irheader`` longer than its header (or cut short) is read as the start of the record, as a .rec would
    read those bytes followed by the payload: nothing is dropped."""
    from mxrec.format.header import IRHeader, pack

    head = pack(IRHeader(0, 3.0, 1, 0), b"")
    for stored in (head + b"xyz", head[:10]):
        data = example(image__encoded=("bytes_list", [b"PAYLOAD"]), mxrec__key=("bytes_list", [b"k"]),
                       mxrec__irheader=("bytes_list", [stored]))
        [record] = read(data)
        assert record.to_bytes() == stored + b"PAYLOAD"
