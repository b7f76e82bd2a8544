"""Each format against its own ecosystem's library: mxrec writes, the library reads; the library writes, mxrec
converts to ``.rec``; and a ``datasets.Dataset`` to and from RecordIO in Python.

The libraries are test extras (``webdataset``, ``datasets`` with ``pyarrow``, ``tfrecord`` with ``crc32c``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

import mxrec
from mxrec.errors import MissingExtraError
from mxrec.io.lists import write_label_names
from mxrec.io.opener import RecordReader
from testkit import GOLDEN
from testkit.datasets import clean_jpeg, write_indexed

SUB = GOLDEN / "im2rec" / "default" / "sub.rec"  # 50 JPEG photos, 10 classes, written by MXNet's im2rec
NAMES = {0: "astronaut", 1: "camera", 2: "chelsea", 3: "coffee", 4: "colorwheel", 5: "hubble_deep_field",
         6: "immunohistochemistry", 7: "retina", 8: "rocket", 9: "stereo_motorcycle"}


def golden_records() -> list[tuple[int, float, int, bytes]]:
    """``(key, label, id, image bytes)`` of every record of the golden im2rec file."""
    with RecordReader(SUB) as reader:
        out = []
        for position, key in enumerate(reader.keys):
            header, image = mxrec.unpack(reader[position])
            out.append((key, header.label, header.id, image))
        return out


@pytest.fixture
def sub_with_names(tmp_path: Path) -> Path:
    """The golden photos as a .rec with a .labels file beside it."""
    rec = tmp_path / "sub.rec"
    rec.write_bytes(SUB.read_bytes())
    rec.with_suffix(".idx").write_bytes(SUB.with_suffix(".idx").read_bytes())
    write_label_names(tmp_path / "sub.labels", NAMES)
    return rec


# -- WebDataset ---------------------------------------------------------------------------------------


def test_webdataset_library_reads_what_mxrec_writes(tmp_path):
    wds = pytest.importorskip("webdataset")
    out = mxrec.convert(SUB, tmp_path / "wds", target_format="webdataset", shard_size=20)
    assert [Path(f).name for f in out.files] == ["sub_00000.tar", "sub_00001.tar", "sub_00002.tar"]
    samples = list(wds.WebDataset([str(f) for f in out.files], shardshuffle=False))
    expected = golden_records()
    assert len(samples) == len(expected)
    for sample, (key, label, id_, image) in zip(samples, expected, strict=True):
        assert sample["__key__"] == str(key)
        assert sample["jpg"] == image  # the bytes untouched, under their real extension
        assert int(sample["cls"]) == label
        meta = json.loads(sample["json"])
        assert (meta["key"], meta["id"], meta["id2"], meta["flag"], meta["label"]) == (str(key), id_, 0, 0, label)


def test_webdataset_library_writes_mxrec_converts(tmp_path):
    wds = pytest.importorskip("webdataset")
    images = [clean_jpeg(k) for k in range(7)]
    shard = tmp_path / "theirs.tar"
    with wds.TarWriter(str(shard)) as sink:
        for n, image in enumerate(images):
            sample = {"__key__": f"img{n:03d}", "jpg": image, "cls": n % 3}
            if n == 6:
                sample = {"__key__": "img006", "png": image, "json": {"label": [1.5, 2.5]}}
            sink.write(sample)
    out = mxrec.convert(shard, tmp_path / "mine.rec")
    assert out.source_format == "webdataset" and out.records == 7
    with RecordReader(tmp_path / "mine.rec") as reader:
        assert list(reader.keys) == list(range(7))  # keys and ids: positions
        for n, image in enumerate(images[:6]):
            header, data = reader.unpack(n)
            assert (data, header.label, header.id, header.flag) == (image, n % 3, n, 0)
        header, data = reader.unpack(6)
        assert header.flag == 2 and header.label.tolist() == [1.5, 2.5] and data == images[6]


# -- Parquet / Hugging Face datasets --------------------------------------------------------------------


def test_datasets_load_dataset_reads_what_mxrec_writes(sub_with_names, tmp_path):
    datasets = pytest.importorskip("datasets")
    out = mxrec.convert(sub_with_names, tmp_path / "pq", target_format="parquet", shard_size=30)
    assert len(out.files) == 2
    ds = datasets.load_dataset("parquet", data_files=out.files, split="train", cache_dir=str(tmp_path / "cache"))
    assert isinstance(ds.features["image"], datasets.Image)
    assert isinstance(ds.features["label"], datasets.ClassLabel)
    assert ds.features["label"].names == [NAMES[i] for i in range(10)]
    expected = golden_records()
    assert len(ds) == len(expected)
    first = ds[0]
    assert first["image"].size[0] > 0  # decoded by datasets as a PIL image
    raw = ds.cast_column("image", datasets.Image(decode=False))
    for row, (key, label, id_, image) in zip(raw, expected, strict=True):
        assert (row["key"], row["label"], row["id"], row["image"]["bytes"]) == (str(key), label, id_, image)


def test_parquet_row_groups_are_bounded(tmp_path, monkeypatch):
    pq = pytest.importorskip("pyarrow.parquet")
    from mxrec.interop import parquet

    monkeypatch.setattr(parquet, "ROW_GROUP_ROWS", 8)
    out = mxrec.convert(SUB, tmp_path / "pq" / "sub.parquet")
    meta = pq.ParquetFile(out.files[0]).metadata
    assert meta.num_rows == 50 and meta.num_row_groups == 7
    assert max(meta.row_group(g).num_rows for g in range(meta.num_row_groups)) == 8


def test_parquet_written_by_datasets_converts(tmp_path):
    datasets = pytest.importorskip("datasets")
    images = [clean_jpeg(k) for k in range(5)]
    features = datasets.Features({"image": datasets.Image(), "label": datasets.ClassLabel(names=["a", "b"])})
    ds = datasets.Dataset.from_dict({"image": [{"bytes": b, "path": None} for b in images],
                                     "label": [0, 1, 0, 1, 1]}, features=features)
    ds.to_parquet(str(tmp_path / "theirs.parquet"))
    mxrec.convert(tmp_path / "theirs.parquet", tmp_path / "mine.rec")
    with RecordReader(tmp_path / "mine.rec") as reader:
        got = [reader.unpack(n) for n in range(len(reader))]
    assert [data for _, data in got] == images
    assert [h.label for h, _ in got] == [0, 1, 0, 1, 1]


def test_datasets_dataset_round_trip_in_python(sub_with_names, tmp_path):
    pytest.importorskip("datasets")
    ds = mxrec.to_hf_dataset(sub_with_names, cache_dir=str(tmp_path / "cache"))
    assert len(ds) == 50 and ds.features["label"].names[7] == "retina"
    back = tmp_path / "back.rec"
    result = mxrec.from_hf_dataset(ds, back)
    assert result.records == 50
    assert back.read_bytes() == SUB.read_bytes()  # the mxrec columns bring the exact records back
    assert back.with_suffix(".idx").read_bytes() == SUB.with_suffix(".idx").read_bytes()
    assert (tmp_path / "back.labels").read_text() == (tmp_path / "sub.labels").read_text()


# -- TFRecord -----------------------------------------------------------------------------------------


def test_tfrecord_package_reads_what_mxrec_writes(sub_with_names, tmp_path):
    reader_module = pytest.importorskip("tfrecord.reader")
    out = mxrec.convert(sub_with_names, tmp_path / "tf" / "sub.tfrecord")
    examples = list(reader_module.tfrecord_loader(out.files[0], None))
    expected = golden_records()
    assert len(examples) == len(expected)
    # the index beside each file (DALI's index_path): the package's loader reads record ranges through it
    manifest = json.loads((tmp_path / "tf" / ".mxrec" / "sub.convert.json").read_text())
    assert manifest["shards"][0]["index"] == ".mxrec/sub.tfrecord.idx"
    index = str(tmp_path / "tf" / manifest["shards"][0]["index"])
    split = list(reader_module.tfrecord_loader(out.files[0], index, shard=(1, 2)))
    assert [bytes(e["image/encoded"]) for e in split] == [image for *_, image in expected[25:]]
    for example, (key, label, id_, image) in zip(examples, expected, strict=True):
        assert bytes(example["image/encoded"]) == image
        assert bytes(example["image/format"]) == b"jpeg"
        assert int(example["image/class/label"][0]) == label
        assert bytes(example["image/class/text"]).decode() == NAMES[int(label)]
        assert int(example["mxrec/id"][0]) == id_ and bytes(example["mxrec/key"]) == str(key).encode()
        height, width = int(example["image/height"][0]), int(example["image/width"][0])
        import cv2

        assert cv2.imdecode(np.frombuffer(image, np.uint8), 1).shape[:2] == (height, width)


def test_tfrecord_package_writes_mxrec_converts(tmp_path):
    writer_module = pytest.importorskip("tfrecord.writer")
    images = [clean_jpeg(k) for k in range(4)]
    path = tmp_path / "theirs.tfrecord"
    writer = writer_module.TFRecordWriter(str(path))
    for n, image in enumerate(images):
        writer.write({"image/encoded": (image, "byte"), "image/class/label": (n + 10, "int")})
    writer.close()
    mxrec.convert(path, tmp_path / "mine.rec")
    with RecordReader(tmp_path / "mine.rec") as reader:
        for n, image in enumerate(images):
            header, data = reader.unpack(n)
            assert (data, header.label, header.id) == (image, n + 10, n)


def test_tfrecord_bad_checksum_names_file_and_offset(tmp_path):
    out = mxrec.convert(SUB, tmp_path / "tf" / "sub.tfrecord")
    data = bytearray(Path(out.files[0]).read_bytes())
    data[40] ^= 0xFF
    bad = tmp_path / "bad.tfrecord"
    bad.write_bytes(bytes(data))
    with pytest.raises(mxrec.RecordFormatError, match=r"bad\.tfrecord: at byte 0: bad TFRecord data checksum"):
        mxrec.convert(bad, tmp_path / "x.rec")
    assert not (tmp_path / "x.rec").exists()


# -- extras -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("fmt", "module", "extra"), [("parquet", "pyarrow", "mxrec[parquet]"),
                                                       ("tfrecord", "crc32c", "mxrec[tfrecord]"),
                                                       ("tfrecord", "google.protobuf", "mxrec[tfrecord]"),
                                                       ("arrayrecord", "array_record", "mxrec[arrayrecord]")])
def test_missing_library_names_its_extra(fmt, module, extra, tmp_path, monkeypatch):
    for name in list(sys.modules):
        if name == module or name.startswith(module + "."):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, module, None)  # import fails as if not installed
    with pytest.raises(MissingExtraError, match=extra.replace("[", r"\[").replace("]", r"\]")):
        mxrec.convert(SUB, tmp_path / "out", target_format=fmt)
    assert not any(p.name.endswith((".parquet", ".tfrecord", ".array_record", ".json")) for p in tmp_path.rglob("*"))


def test_non_images_and_broken_images_are_carried_and_reported(tmp_path):
    good = clean_jpeg(1)
    payloads = [mxrec.pack(mxrec.IRHeader(0, 1.0, 0, 0), good),
                mxrec.pack(mxrec.IRHeader(0, 2.0, 1, 0), good[: len(good) // 2]),  # cut off
                mxrec.pack(mxrec.IRHeader(0, 3.0, 2, 0), b"a feature vector, not an image")]
    src = tmp_path / "mixed.rec"
    write_indexed(src, range(3), payloads)
    out = mxrec.convert(src, tmp_path / "wds", target_format="webdataset")
    report = out.report
    assert report.records == 3 and report.kinds == {"jpeg": 2, "other": 1}
    assert report.problem_count == 2 and report.broken == 1
    assert [key for key, _ in report.problems] == ["1", "2"]
    assert "truncated JPEG" in report.problems[0][1]
    mxrec.convert(out.manifest, tmp_path / "back.rec")
    assert (tmp_path / "back.rec").read_bytes() == src.read_bytes()


def test_info_on_foreign_sets(mxrec_cli, tmp_path):
    mxrec.convert(SUB, tmp_path / "wds" / "sub.tar")
    shown = mxrec_cli("info", tmp_path / "wds", "--json", check=True)
    info = json.loads(shown.stdout)
    assert (info["format"], info["records"], info["classes"], info["kinds"]) == ("webdataset", 50, 10, {"jpeg": 50})
    (tmp_path / "wds" / ".mxrec" / "sub.convert.json").unlink()  # no manifest: read the samples
    info = json.loads(mxrec_cli("info", tmp_path / "wds" / "sub.tar", "--json", check=True).stdout)
    assert (info["records"], info["classes"], info["kinds"], info["manifest"]) == (50, 10, {"jpeg": 50}, None)
    mxrec.convert(SUB, tmp_path / "pq" / "x.parquet")
    text = mxrec_cli("info", tmp_path / "pq", check=True).stdout
    assert "parquet set: 1 file(s), 50 records" in text and "jpeg 50" in text




def test_resize_and_quality_go_through_packs_image_transform(tmp_path):
    import cv2

    good = clean_jpeg(3)
    payloads = [mxrec.pack(mxrec.IRHeader(0, 1.0, 0, 0), good),
                mxrec.pack(mxrec.IRHeader(0, 2.0, 1, 0), good[: len(good) // 2])]
    src = tmp_path / "two.rec"
    write_indexed(src, range(2), payloads)
    transform = mxrec.ImageTransform(resize=16, quality=80)
    out = mxrec.convert(src, tmp_path / "wds", target_format="webdataset", transform=transform)
    mxrec.convert(out.manifest, tmp_path / "back.rec")
    with RecordReader(tmp_path / "back.rec") as reader:
        resized, kept = reader.unpack(0)[1], reader.unpack(1)[1]
    assert resized == transform.apply(good)  # the same bytes pack --resize 16 --quality 80 stores
    assert min(cv2.imdecode(np.frombuffer(resized, np.uint8), 1).shape[:2]) == 16
    assert kept == good[: len(good) // 2]  # a broken image is carried as it was, and reported
    assert out.report.problems == [("1", out.report.problems[0][1])] and "truncated JPEG" in out.report.problems[0][1]


def test_verify_on_foreign_sets(mxrec_cli, tmp_path):
    good = clean_jpeg(1)
    payloads = [mxrec.pack(mxrec.IRHeader(0, 1.0, 0, 0), good),
                mxrec.pack(mxrec.IRHeader(0, 2.0, 1, 0), good[: len(good) // 2])]
    write_indexed(tmp_path / "two.rec", range(2), payloads)
    clean = mxrec.convert(SUB, tmp_path / "clean", target_format="tfrecord")
    assert mxrec_cli("verify", clean.manifest).returncode == 0
    broken = mxrec.convert(tmp_path / "two.rec", tmp_path / "broken" / "two.parquet")
    done = mxrec_cli("verify", broken.manifest, "--json")
    assert done.returncode == 1
    found = json.loads(done.stdout)
    assert found["broken"] == 1 and found["problem_list"][0][0] == "1" and found["manifest_records"] == 2
    manifest = json.loads(Path(broken.manifest).read_text())
    manifest["shards"][0]["records"] = 3  # a manifest that promises more than the files hold
    Path(broken.manifest).write_text(json.dumps(manifest))
    assert "the manifest says 3 records, the files hold 2" in mxrec_cli("verify", broken.manifest).stdout
