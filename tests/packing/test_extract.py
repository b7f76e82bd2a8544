"""Extracting images from a .rec: layout, round trips (pack -> extract -> pack), and never writing outside OUT_DIR."""

from __future__ import annotations

import os

import numpy as np
import pytest

from mxrec.errors import UnsafePathError
from mxrec.format.header import IRHeader, pack
from mxrec.io.lists import read_list
from mxrec.io.opener import RecordReader
from mxrec.io.writer import RecordWriter
from mxrec.packing.extract import extract_records, image_extension, label_folder
from mxrec.packing.job import pack_list
from mxrec.packing.prepare import ImageTransform

cv2 = pytest.importorskip("cv2")
JPEG = cv2.imencode(".jpg", np.full((8, 8, 3), 200, np.uint8))[1].tobytes()
PNG = cv2.imencode(".png", np.full((8, 8, 3), 100, np.uint8))[1].tobytes()


def write_records(path, records, keys=None):
    with RecordWriter(path, index=True) as writer:
        for i, (header, body) in enumerate(records):
            writer.write(pack(header, body), key=keys[i] if keys else header.id)


def files_under(folder):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def test_golden_pass_through_round_trip_is_byte_identical(im2rec, tmp_path):
    result = extract_records(im2rec / "passthrough" / "sub.rec", tmp_path / "out")
    assert result.files == 50 and not result.skipped
    entries = read_list(tmp_path / "out" / "sub.lst")
    assert [e.path for e in entries][:3] == ["7/39.jpg", "6/30.jpg", "7/35.jpg"]
    # the files are the original image files, byte for byte
    original = {e.index: e.path for e in read_list(im2rec / "passthrough" / "sub.lst")}
    for entry in entries:
        source = im2rec / "photos200" / original[entry.index]
        assert (tmp_path / "out" / entry.path).read_bytes() == source.read_bytes()
    pack_list(tmp_path / "out" / "sub.lst", tmp_path / "out", tmp_path / "again.rec", ImageTransform(pass_through=True))
    assert (tmp_path / "again.rec").read_bytes() == (im2rec / "passthrough" / "sub.rec").read_bytes()
    assert (tmp_path / "again.idx").read_bytes() == (im2rec / "passthrough" / "sub.idx").read_bytes()


def test_multi_label_records_round_trip_with_pack_label(im2rec, tmp_path):
    pack_list(im2rec / "packlabel3" / "sub.lst", im2rec / "photos200", tmp_path / "ml.rec",
              ImageTransform(resize=32), pack_label=True)
    extract_records(tmp_path / "ml.rec", tmp_path / "out")
    entries = read_list(tmp_path / "out" / "ml.lst")
    assert entries[0].labels == (7.0, 4.0, -9.75) and entries[0].path == "39.jpg"  # label arrays stay flat
    pack_list(tmp_path / "out" / "ml.lst", tmp_path / "out", tmp_path / "again.rec",
              ImageTransform(pass_through=True), pack_label=True)
    assert (tmp_path / "again.rec").read_bytes() == (tmp_path / "ml.rec").read_bytes()


def test_flat_layout_and_exact_labels(tmp_path):
    records = [(IRHeader(0, 1e-7, 5, 0), JPEG), (IRHeader(0, 0.1, 6, 0), PNG),
               (IRHeader(0, 2.0, 7, 0), b"raw tensor bytes")]
    write_records(tmp_path / "d.rec", records)
    extract_records(tmp_path / "d.rec", tmp_path / "flat", flat=True)
    assert files_under(tmp_path / "flat") == ["5.jpg", "6.png", "7.bin", "d.lst"]
    pack_list(tmp_path / "flat" / "d.lst", tmp_path / "flat", tmp_path / "again.rec",
              ImageTransform(pass_through=True))
    assert (tmp_path / "again.rec").read_bytes() == (tmp_path / "d.rec").read_bytes()


def test_label_folders_use_numbers_or_names(tmp_path):
    records = [(IRHeader(0, 0.0, 1, 0), JPEG), (IRHeader(0, 1.0, 2, 0), JPEG), (IRHeader(0, 0.5, 3, 0), JPEG),
               (IRHeader(0, -1.0, 4, 0), JPEG)]
    write_records(tmp_path / "d.rec", records)
    extract_records(tmp_path / "d.rec", tmp_path / "num")
    assert files_under(tmp_path / "num") == ["-1/4.jpg", "0.5/3.jpg", "0/1.jpg", "1/2.jpg", "d.lst"]
    extract_records(tmp_path / "d.rec", tmp_path / "named", label_names={0: "cat", 1: "pets/dog"})
    assert files_under(tmp_path / "named") == ["-1/4.jpg", "0.5/3.jpg", "cat/1.jpg", "d.lst", "pets/dog/2.jpg"]


def test_duplicate_ids_get_distinct_files(tmp_path):
    write_records(tmp_path / "d.rec", [(IRHeader(0, 0.0, 0, 0), JPEG)] * 3, keys=[0, 1, 2])
    result = extract_records(tmp_path / "d.rec", tmp_path / "out", flat=True)
    assert files_under(tmp_path / "out") == ["0.jpg", "0_1.jpg", "0_2.jpg", "d.lst"]
    assert result.files == 3


def test_record_without_header_is_skipped(tmp_path):
    with RecordWriter(tmp_path / "d.rec", index=True) as writer:
        writer.write(pack(IRHeader(0, 0.0, 1, 0), JPEG))
        writer.write(b"short")
    result = extract_records(tmp_path / "d.rec", tmp_path / "out")
    assert result.files == 1
    assert result.skipped[0][:2] == (1, 1) and "shorter than" in result.skipped[0][2]


@pytest.mark.parametrize("name", ["../escape", "/tmp/abs", "a/../../escape", "..", "a\\..\\..\\x"])
def test_label_names_cannot_lead_outside(tmp_path, name):
    write_records(tmp_path / "d.rec", [(IRHeader(0, 0.0, 1, 0), JPEG)])
    with pytest.raises(UnsafePathError):
        extract_records(tmp_path / "d.rec", tmp_path / "out", label_names={0: name})
    assert not (tmp_path / "escape").exists() and files_under(tmp_path / "out") == []


def test_symlinked_folder_in_out_dir_is_refused(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "out").mkdir()
    os.symlink(outside, tmp_path / "out" / "3")
    write_records(tmp_path / "d.rec", [(IRHeader(0, 3.0, 9, 0), JPEG)])
    with pytest.raises(UnsafePathError, match="outside"):
        extract_records(tmp_path / "d.rec", tmp_path / "out")
    assert list(outside.iterdir()) == []


def test_symlinked_file_in_out_dir_is_not_followed(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    (tmp_path / "out").mkdir()
    os.symlink(victim, tmp_path / "out" / "9.jpg")
    write_records(tmp_path / "d.rec", [(IRHeader(0, 3.0, 9, 0), JPEG)])
    with pytest.raises(UnsafePathError):
        extract_records(tmp_path / "d.rec", tmp_path / "out", flat=True)
    assert victim.read_text() == "keep me"


def test_symlinked_lst_in_out_dir_is_refused(tmp_path):
    victim = tmp_path / "victim.lst"
    victim.write_text("keep me")
    (tmp_path / "out").mkdir()
    os.symlink(victim, tmp_path / "out" / "d.lst")
    write_records(tmp_path / "d.rec", [(IRHeader(0, 3.0, 9, 0), JPEG)])
    with pytest.raises(UnsafePathError, match="outside"):
        extract_records(tmp_path / "d.rec", tmp_path / "out")
    assert victim.read_text() == "keep me" and files_under(tmp_path / "out") == ["d.lst"]


def test_hostile_ids_and_labels_stay_inside(tmp_path):
    nasty = [(IRHeader(0, float("nan"), 2**64 - 1, 0), JPEG), (IRHeader(0, float("inf"), 0, 0), JPEG),
             (IRHeader(0, -1e30, 1, 0), JPEG), (IRHeader(3, np.array([1, 2, 3], np.float32), 2, 0), JPEG)]
    write_records(tmp_path / "d.rec", nasty, keys=[0, 1, 2, 3])
    extract_records(tmp_path / "d.rec", tmp_path / "out")
    real_out = os.path.realpath(tmp_path / "out")
    for path in (tmp_path / "out").rglob("*"):
        assert os.path.realpath(path).startswith(real_out + os.sep)
    assert files_under(tmp_path / "out") == ["-1e+30/1.jpg", "2.jpg", "d.lst", "inf/0.jpg",
                                             f"nan/{2**64 - 1}.jpg"]


def test_image_extension_and_label_folder():
    assert image_extension(b"GIF89a...") == ".gif"
    assert image_extension(b"RIFF\0\0\0\0WEBPVP8 ") == ".webp"
    assert image_extension(b"II*\x00") == ".tif"
    assert image_extension(b"hello") is None
    assert label_folder(3.0) == "3" and label_folder(0.1) == "0.1" and label_folder(7.0, {7: "x"}) == "x"


def test_extract_uses_the_given_index(tmp_path):
    write_records(tmp_path / "d.rec", [(IRHeader(0, 0.0, 1, 0), JPEG), (IRHeader(0, 0.0, 2, 0), JPEG)])
    (tmp_path / "one.idx").write_text("2\t" + str(RecordReader(tmp_path / "d.rec").offsets[1]) + "\n")
    result = extract_records(tmp_path / "d.rec", tmp_path / "out", idx_path=tmp_path / "one.idx")
    assert result.files == 1 and [e.index for e in read_list(result.lst_path)] == [2]
    assert (tmp_path / "out" / "0" / "2.jpg").read_bytes() == JPEG
