"""``mxrec.convert`` is exact: ``.rec -> X -> .rec`` gives the same ``.rec`` and ``.idx`` bytes for every format X.

Checked on every golden file MXNet 1.9.1 wrote (``tests/data/golden``): the magic-laden and multi-part
records, empty and 3 MiB payloads, string / out-of-order / duplicate keys, scalar and array labels, PNG and
JPEG, files without an ``.idx``; and on InsightFace sets (header and identity records kept by default).
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

import mxrec
from mxrec.errors import OptionError
from mxrec.format.header import IRHeader, pack
from mxrec.interop.record import Record
from mxrec.io.opener import RecordReader
from mxrec.io.writer import RecordWriter as RecordWriter
from testkit import GOLDEN
from testkit.datasets import clean_jpeg, write_indexed
from testkit.insightface import make_face_set

FORMATS = ["webdataset", "parquet", "tfrecord", "arrayrecord"]
SUB = GOLDEN / "im2rec" / "default" / "sub.rec"
GOLDEN_RECS = sorted(p for p in GOLDEN.rglob("*.rec") if "damaged" not in p.parts)


def round_trip(src: Path, tmp: Path, fmt: str, **options: object) -> Path:
    out = mxrec.convert(src, tmp / fmt, target_format=fmt, **options)
    assert out.manifest is not None and Path(out.manifest).name.endswith(".convert.json")
    back = tmp / "back.rec"
    mxrec.convert(out.manifest, back)
    return back


def assert_same_files(src: Path, back: Path) -> None:
    assert back.read_bytes() == src.read_bytes()
    idx, back_idx = src.with_suffix(".idx"), back.with_suffix(".idx")
    if idx.exists():
        assert back_idx.read_bytes() == idx.read_bytes()
    else:
        assert not back_idx.exists()  # a .rec without .idx comes back without one


def test_the_golden_files_cover_the_hard_cases():
    names = {p.relative_to(GOLDEN).as_posix() for p in GOLDEN_RECS}
    assert {"seq/seq.rec", "seq/single_08_magic_x3.rec", "idx/strkeys.rec", "idx/dupkey.rec", "idx/ooo.rec",
            "headers/headers.rec", "im2rec/default/sub.rec"} <= names


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("src", GOLDEN_RECS, ids=lambda p: p.relative_to(GOLDEN).as_posix())
def test_golden_round_trip_is_byte_identical(src, fmt, tmp_path):
    assert_same_files(src, round_trip(src, tmp_path, fmt))


@pytest.mark.parametrize("fmt", FORMATS)
def test_multi_part_records_survive_several_shards(fmt, tmp_path):
    """A magic-laden 3 MiB record and many small ones, split over shards by a record limit, come back whole."""
    src = GOLDEN / "seq" / "seq.rec"
    out = mxrec.convert(src, tmp_path / fmt, target_format=fmt, shard_size=3)
    assert len(out.files) == 5 and out.records == 14
    back = tmp_path / "back.rec"
    mxrec.convert(out.manifest, back)
    assert_same_files(src, back)


@pytest.mark.parametrize("fmt", FORMATS)
def test_insightface_set_keeps_header_and_identity_records_by_default(fmt, tmp_path):
    face_set = make_face_set(tmp_path / "faces")
    assert_same_files(face_set.rec, round_trip(face_set.rec, tmp_path, fmt))


def test_insightface_faces_only(tmp_path):
    face_set = make_face_set(tmp_path / "faces", identities=[3, 1, 4, 2])
    out = mxrec.convert(face_set.rec, tmp_path / "wds", target_format="webdataset", insightface="faces")
    assert out.records == face_set.faces == 10
    back = tmp_path / "faces.rec"
    mxrec.convert(out.manifest, back)
    with RecordReader(back) as reader, RecordReader(face_set.rec) as original:
        assert list(reader.keys) == [k for keys in face_set.face_keys for k in keys]
        for key in reader.keys:  # each face record untouched, its identity as label
            assert reader.read_key(key) == original.read_key(key)
            assert reader.header(reader.position(key)).label == face_set.label_of(key)


def test_insightface_faces_needs_a_face_set(tmp_path):
    with pytest.raises(OptionError, match="InsightFace"):
        mxrec.convert(GOLDEN / "im2rec" / "default" / "sub.rec", tmp_path / "out", target_format="parquet",
                      insightface="faces")


@pytest.mark.parametrize("fmt", FORMATS)
def test_odd_headers_survive(fmt, tmp_path):
    """u64 ids above 2**63, -0.0 and NaN labels (with a payload), a header label beside a label array, raw records."""
    nan = struct.unpack("<f", struct.pack("<I", 0x7FC01234))[0]
    payloads = [
        pack(IRHeader(0, 5.0, 2**64 - 1, 2**63 + 7), clean_jpeg(1)),
        pack(IRHeader(0, -0.0, 1, 2), b"not an image"),
        struct.pack("<IfQQ", 0, nan, 3, 0) + clean_jpeg(2),
        struct.pack("<IfQQ", 2, 1.5, 4, 0) + struct.pack("<2f", 0.25, float("inf")) + clean_jpeg(3),
        b"short",
        struct.pack("<IfQQ", 9, 0.0, 5, 0) + b"flag says 9 labels, too few bytes follow",
        pack(IRHeader(0, 0.1, 6, 0), b""),
    ]
    src = tmp_path / "odd.rec"
    write_indexed(src, range(len(payloads)), payloads)
    assert_same_files(src, round_trip(src, tmp_path, fmt))


def test_record_model_rebuilds_exact_bytes():
    record = Record.from_bytes(7, pack(IRHeader(0, [1.0, 2.0, 3.0], 9, 10), b"xyz"))
    assert (record.key, record.flag, record.id, record.id2, record.data) == ("7", 3, 9, 10, b"xyz")
    np.testing.assert_array_equal(record.labels, [1.0, 2.0, 3.0])
    assert record.to_bytes() == pack(IRHeader(0, [1.0, 2.0, 3.0], 9, 10), b"xyz")
    assert Record.from_bytes(1, b"abc").raw


def test_tar_shards_are_deterministic_with_fixed_owner_time_and_mode(tmp_path):
    import tarfile

    first = mxrec.convert(SUB, tmp_path / "a", target_format="webdataset", shard_size=20)
    again = mxrec.convert(SUB, tmp_path / "b", target_format="webdataset", shard_size=20)
    for mine, other in zip(first.files, again.files, strict=True):
        assert Path(mine).read_bytes() == Path(other).read_bytes()
    with tarfile.open(first.files[0]) as tar:
        members = tar.getmembers()
    assert members and {(m.mtime, m.mode, m.uid, m.gid, m.uname, m.gname, m.type) for m in members} == {
        (0, 0o444, 0, 0, "root", "root", tarfile.REGTYPE)}
    long_name = "k" * 120 + ".jpg"  # past ustar's 100 bytes: a GNU long-name header
    from mxrec.interop.webdataset import member_header

    assert tarfile.open(fileobj=__import__("io").BytesIO(member_header(long_name, 0) + bytes(1024))).getnames() == [
        long_name]


def test_tar_member_headers_are_the_standard_librarys_headers():
    import tarfile

    from mxrec.interop.webdataset import member_header

    for name, size in [("0.jpg", 26850), ("x" * 95 + ".json", 0), ("ü.cls", 7), ("big.bin", 2**29 - 1),
                       ("k" * 120 + ".jpg", 5)]:  # the last past ustar's 100 bytes: GNU
        info = tarfile.TarInfo(name)
        info.size, info.mtime, info.mode, info.uname, info.gname = size, 0, 0o444, "root", "root"
        fmt = tarfile.USTAR_FORMAT if len(name.encode()) <= 100 else tarfile.GNU_FORMAT
        assert member_header(name, size) == info.tobuf(fmt, "utf-8", "surrogateescape")


@pytest.mark.parametrize(("at", "value", "reason"), [(5, None, "bad checksum"), (130, ord("8"), "bad checksum"),
                                                     (150, ord("9"), "invalid header")])
def test_tar_damage_after_the_first_member_is_an_error_not_an_early_end(at, value, reason, tmp_path):
    made = mxrec.convert(SUB, tmp_path / "wds", target_format="webdataset")
    tar = bytearray(Path(made.files[0]).read_bytes())
    import tarfile

    with tarfile.open(made.files[0]) as t:
        third = t.getmembers()[2].offset  # tarfile alone would stop here quietly and lose the rest
    # a name byte (the checksum no longer matches), or a digit that is not octal in the size or checksum field
    tar[third + at] = tar[third + at] ^ 0x01 if value is None else value
    bad = tmp_path / "bad.tar"
    bad.write_bytes(bytes(tar))
    with pytest.raises(mxrec.RecordFormatError, match=rf"bad\.tar: at byte {third}: bad tar header \({reason}\)"):
        mxrec.convert(bad, tmp_path / "bad.rec")
    assert not (tmp_path / "bad.rec").exists()


@pytest.mark.parametrize("tar_format", ["USTAR_FORMAT", "GNU_FORMAT", "PAX_FORMAT"])
def test_tar_reader_takes_long_names_folders_and_pax(tar_format, tmp_path):
    import io
    import tarfile

    from mxrec.interop.webdataset import iter_members

    deep = "d/" * 40 + "ü" * 30 + ".jpg"  # past ustar's 100 + 155 bytes where the format allows
    names = ["a/0001.jpg", "a/0001.cls", deep] if tar_format != "USTAR_FORMAT" else ["a/0001.jpg", "a/0001.cls"]
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=getattr(tarfile, tar_format)) as tar:
        folder = tarfile.TarInfo("a")
        folder.type = tarfile.DIRTYPE
        tar.addfile(folder)  # a folder entry is no sample
        for n, name in enumerate(names):
            info = tarfile.TarInfo(name)
            info.size = n * 700
            tar.addfile(info, io.BytesIO(bytes([n]) * info.size))
    from mxrec.interop.formats import BufferStream

    for stream in (io.BytesIO(buffer.getvalue()), BufferStream(buffer.getvalue())):  # a file; a mapped file (views)
        got = list(iter_members(stream, "t.tar"))
        assert [name for name, _ in got] == names
        assert [bytes(data) for _, data in got] == [bytes([n]) * (n * 700) for n in range(len(names))]
    with pytest.raises(mxrec.RecordFormatError, match=r"t\.tar: at byte 0: not a tar file, or damaged"):
        list(iter_members(io.BytesIO(b"x" * 1024), "t.tar"))


@pytest.mark.parametrize("write_behind", [False, True])
def test_write_pieces_gives_the_bytes_write_gives(tmp_path: Path, write_behind: bool) -> None:
    """The converter's .rec path (RecordWriter.write_pieces: header and payload view, one writev) writes what
    write(head + payload) writes: aligned magics in the header or payload, unaligned pieces, large and empty ones;
    with the writev done behind (the converter's way) mixed with write() and write_batch() too."""
    magic = struct.pack("<I", 0xCED7230A)
    head = pack(IRHeader(0, 1.0, 7, 0), b"")
    payloads = [b"", b"abc", magic * 3, b"x" * 5 + magic + b"y" * 3, bytes(200_000) + magic + b"z",
                bytes(70_000), b"q" * 65_537]
    records = [(str(n), (head, memoryview(p))) for n, p in enumerate(payloads)]
    records += [("h", (magic * 6, b"tail")), ("u", (b"odd", magic + b"end")), ("v", (b"", b"whole"))]
    with RecordWriter(tmp_path / "a.rec", tmp_path / "a.idx", key_type=str, write_behind=write_behind) as pieces:
        pieces.write_pieces(records[:4])
        pieces.write(b"between", "b")
        pieces.write_pieces(records[4:7])
        pieces.write_batch([b"batch", magic * 2], ["c", "d"])
        pieces.write_pieces(records[7:])
    with RecordWriter(tmp_path / "b.rec", tmp_path / "b.idx", key_type=str) as whole:
        for key, parts in records[:4]:
            whole.write(b"".join(parts), key)
        whole.write(b"between", "b")
        for key, parts in records[4:7]:
            whole.write(b"".join(parts), key)
        whole.write(b"batch", "c")
        whole.write(magic * 2, "d")
        for key, parts in records[7:]:
            whole.write(b"".join(parts), key)
    assert (tmp_path / "a.rec").read_bytes() == (tmp_path / "b.rec").read_bytes()
    assert (tmp_path / "a.idx").read_bytes() == (tmp_path / "b.idx").read_bytes()


def test_tfrecord_example_pieces_are_protobufs_own_bytes(tmp_path: Path) -> None:
    """The Example is written in pieces around the payload (no copy): the bytes protobuf itself serializes
    (deterministic) for the same features, whatever the record: class text, raw, verbatim header, labels, sizes."""
    from mxrec.interop import tfrecord
    from mxrec.interop.record import inspect_payload

    writer = tfrecord.Writer(str(tmp_path / "x.tfrecord"), {3: "cat"})
    nan_head = struct.pack("<If", 0, float("nan")) + struct.pack("<QQ", 5, 6)
    records = [Record.from_fields("a", clean_jpeg(1), label=3.0, id=1 << 63 | 5),
               Record.from_fields("b", b"", label=2.5),
               Record.from_fields("c", b"x" * 200_000, flag=2, labels=[1.0, 2.0], label=7.0, id=9, id2=4),
               Record("d", b"raw bytes", raw=True),
               Record.from_fields("e", b"\xff\xd8" + bytes(127), head=nan_head)]
    for record in records:
        payload = inspect_payload(record.data)
        example = writer.example_type()
        feature = example.features.feature
        feature["image/encoded"].bytes_list.value.append(bytes(record.data))
        feature["image/format"].bytes_list.value.append(payload.kind.encode())
        feature["image/class/label"].int64_list.value.append(record.class_label)
        feature["image/height"].int64_list.value.append(payload.height)
        feature["image/width"].int64_list.value.append(payload.width)
        if record.class_label == 3:
            feature["image/class/text"].bytes_list.value.append(b"cat")
        feature["mxrec/key"].bytes_list.value.append(record.key.encode())
        feature["mxrec/raw"].int64_list.value.append(int(record.raw))
        if not record.raw:
            feature["mxrec/flag"].int64_list.value.append(record.flag)
            feature["mxrec/id"].int64_list.value.append(record.id - (record.id >> 63 << 64))
            feature["mxrec/id2"].int64_list.value.append(record.id2 - (record.id2 >> 63 << 64))
            labels = [] if record.labels is None else record.labels.tolist()
            feature["mxrec/label"].float_list.value.extend([record.label, *labels])
            feature["mxrec/irheader"].bytes_list.value.append(record.header_bytes())
        pieces = writer.example(record, payload)
        assert isinstance(pieces[1], memoryview) or pieces[1] is record.data
        assert b"".join(pieces) == example.SerializeToString(deterministic=True), record.key
        writer.write(record, payload)
    writer.close()
    with open(tmp_path / "x.tfrecord", "rb") as f:
        back = list(tfrecord.read_records(f, "x.tfrecord"))
    assert [(r.key, bytes(r.data), r.header_bytes()) for r in back] == \
        [(r.key, bytes(r.data), r.header_bytes()) for r in records]
