"""Packing and listing against real ``tools/im2rec.py`` output (golden/im2rec): byte-identical .lst, .rec, .idx."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from mxrec import build_index
from mxrec.errors import MxrecError
from mxrec.format.header import unpack
from mxrec.io.lists import read_label_names, read_list, write_list
from mxrec.io.opener import RecordReader
from mxrec.packing.job import find_prefix_lists, pack_list, pack_prefix
from mxrec.packing.make_lists import (
    make_lists,
)
from mxrec.packing.prepare import ImageTransform

# golden folder -> (.lst used there, transform, pack_label); commands in golden/im2rec/README.txt
VARIANTS = {
    "default": ("sub.lst", ImageTransform(), False),
    "numthread2": ("sub.lst", ImageTransform(), False),
    "resize128_q90": ("sub.lst", ImageTransform(resize=128, quality=90), False),
    "passthrough": ("sub.lst", ImageTransform(pass_through=True), False),
    "centercrop_resize64": ("sub.lst", ImageTransform(center_crop=True, resize=64), False),
    "color0": ("sub.lst", ImageTransform(color=0), False),
    "packlabel3": ("sub.lst", ImageTransform(), True),
    "multilabel3_nopack": ("sub.lst", ImageTransform(), False),
}


def assert_matches_records_json(rec_path, records_json, idx_path=None):
    """Every record equals im2rec's: key, offset, header, and the sha256 of the image bytes."""
    expected = json.loads(records_json.read_text())
    with RecordReader(rec_path) as reader:
        assert reader.keys == [r["key"] for r in expected]
        assert reader.offsets.tolist() == [r["offset"] for r in expected]
        for position, record in enumerate(expected):
            header, body = unpack(reader[position])
            kind, _, value = record["header"]["label"]
            label = float(header.label) if kind == "scalar" else np.asarray(header.label).tolist()
            assert (header.flag, label, header.id, header.id2) == (
                record["header"]["flag"], value, record["header"]["id"], record["header"]["id2"])
            assert hashlib.sha256(body).hexdigest() == record["payload_sha256"]


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("variant", VARIANTS)
def test_pack_is_byte_identical_to_im2rec(im2rec, tmp_path, variant, workers):
    lst, transform, pack_label = VARIANTS[variant]
    result = pack_list(im2rec / variant / lst, im2rec / "photos200", tmp_path / "sub.rec", transform,
                       workers=workers, pack_label=pack_label)
    assert result.records == 50 and not result.skipped
    assert (tmp_path / "sub.idx").read_bytes() == (im2rec / variant / "sub.idx").read_bytes()
    golden_rec = im2rec / variant / "sub.rec"
    if golden_rec.exists():  # the smaller golden .rec files are kept whole
        assert (tmp_path / "sub.rec").read_bytes() == golden_rec.read_bytes()
    assert_matches_records_json(tmp_path / "sub.rec", im2rec / variant / "records.json")
    assert not list(tmp_path.glob("*.partial"))


def test_png_encoding_is_byte_identical_to_im2rec(im2rec, tmp_path):
    # PNG at im2rec's default "quality" 95 (OpenCV clamps to level 9) is slow: three images are enough.
    expected = {r["key"]: r for r in json.loads((im2rec / "png" / "records.json").read_text())}
    entries = sorted(read_list(im2rec / "png" / "sub.lst"), key=lambda e: expected[e.index]["payload_len"])[:3]
    write_list(tmp_path / "few.lst", entries)
    pack_list(tmp_path / "few.lst", im2rec / "photos200", transform=ImageTransform(encoding=".png"))
    with RecordReader(tmp_path / "few.rec") as reader:
        for position, entry in enumerate(entries):
            header, body = unpack(reader[position])
            assert header.id == entry.index and body[:4] == b"\x89PNG"
            assert hashlib.sha256(body).hexdigest() == expected[entry.index]["payload_sha256"]


def test_prefix_rule_packs_every_matching_list(im2rec, tmp_path):
    expected = {r["key"]: r["payload_sha256"] for r in json.loads((im2rec / "default" / "records.json").read_text())}
    for name in ("subtv_train.lst", "subtv_val.lst"):
        shutil.copy(im2rec / "trainval" / name, tmp_path / name)
    (tmp_path / "other.lst").write_text("")  # does not start with the prefix
    assert find_prefix_lists(tmp_path / "subtv") == [str(tmp_path / "subtv_train.lst"),
                                                     str(tmp_path / "subtv_val.lst")]
    results = pack_prefix(tmp_path / "subtv", im2rec / "photos200", workers=2)
    assert [r.records for r in results] == [45, 5]
    for stem in ("subtv_train", "subtv_val"):
        assert (tmp_path / f"{stem}.idx").read_bytes() == (im2rec / "trainval" / f"{stem}.idx").read_bytes()
        with RecordReader(tmp_path / f"{stem}.rec") as reader:
            for position, key in enumerate(reader.keys):
                assert hashlib.sha256(unpack(reader[position])[1]).hexdigest() == expected[key]
    assert not (tmp_path / "other.rec").exists()


def test_prefix_that_is_a_folder(im2rec, tmp_path):
    shutil.copy(im2rec / "passthrough" / "sub.lst", tmp_path / "a.lst")
    [result] = pack_prefix(tmp_path, im2rec / "photos200", ImageTransform(pass_through=True))
    assert result.outputs == [(str(tmp_path / "a.rec"), str(tmp_path / "a.idx"))]
    assert (tmp_path / "a.rec").read_bytes() == (im2rec / "passthrough" / "sub.rec").read_bytes()


# name of the golden run -> options of make_lists (commands in golden/im2rec/README.txt)
GOLDEN_LISTS = {
    "sub": dict(recursive=True),
    "subtv": dict(recursive=True, train_ratio=0.9),
    "subns": dict(recursive=True, shuffle=False),
    "subch": dict(recursive=True, chunks=3, train_ratio=0.8, test_ratio=0.1),
}


@pytest.mark.parametrize("name", GOLDEN_LISTS)
def test_lists_are_byte_identical_to_im2rec(golden, photos, tmp_path, name):
    written = make_lists(tmp_path / name, photos, **GOLDEN_LISTS[name])
    expected = sorted(p.name for p in (golden / "im2rec" / "lists").glob(f"{name}*.lst")
                      if p.stem == name or p.stem[len(name)] == "_")
    assert sorted(os.path.basename(p) for p in written if p.endswith(".lst")) == expected
    for file_name in expected:
        assert (tmp_path / file_name).read_bytes() == (golden / "im2rec" / "lists" / file_name).read_bytes()


def test_folder_of_folders_without_recursive_is_an_error_not_an_empty_list(golden, photos, tmp_path):
    """im2rec wrote an empty subflat.lst here (photos200 holds only class folders); mxrec says why and writes none."""
    assert (golden / "im2rec" / "lists" / "subflat.lst").read_bytes() == b""
    with pytest.raises(MxrecError, match="but 10 sub-folder.*--recursive"):
        make_lists(tmp_path / "subflat", photos)
    assert list(tmp_path.iterdir()) == []


def test_flat_folder_gives_label_zero(golden, photos, tmp_path):
    make_lists(tmp_path / "astro", photos / "astronaut")
    assert (tmp_path / "astro.lst").read_bytes() == (golden / "im2rec" / "lists" / "astro.lst").read_bytes()
    assert read_label_names(tmp_path / "astro.labels") == {0: "."}


def golden_stdout(log: Path) -> str:
    """The stdout section of one of the golden im2rec.log files."""
    text = log.read_text()
    return text.split("--- stdout\n", 1)[1].split("--- stderr", 1)[0]


def test_im2rec_list_mode_matches_im2rec(mxrec_cli, im2rec, tmp_path):
    done = mxrec_cli("im2rec", "--list", "--recursive", "--chunks", "3", "--train-ratio", "0.8",
                     "--test-ratio", "0.1", tmp_path / "subch", im2rec / "photos200", check=True)
    assert done.stdout == golden_stdout(im2rec / "lists" / "subch.log")  # the label of each folder
    for lst in (im2rec / "lists").glob("subch_*.lst"):
        assert (tmp_path / lst.name).read_bytes() == lst.read_bytes()


@pytest.mark.parametrize("variant, options", [
    ("passthrough", ["--pass-through"]),
    ("centercrop_resize64", ["--center-crop", "--resize", "64", "--num-thread", "2"]),
    ("resize128_q90", ["--resize", "128", "--quality", "90"]),
])
def test_im2rec_pack_mode_matches_im2rec(mxrec_cli, im2rec, tmp_path, variant, options):
    shutil.copy(im2rec / variant / "sub.lst", tmp_path / "sub.lst")
    done = mxrec_cli("im2rec", *options, tmp_path / "sub", im2rec / "photos200", check=True)
    assert "50 records, 0 skipped" in done.stdout
    assert (tmp_path / "sub.rec").read_bytes() == (im2rec / variant / "sub.rec").read_bytes()
    assert (tmp_path / "sub.idx").read_bytes() == (im2rec / variant / "sub.idx").read_bytes()


def test_index_rebuilds_im2rec_idx_byte_for_byte(golden, tmp_path, mxrec_cli):
    shutil.copy(golden / "im2rec" / "default" / "sub.rec", tmp_path / "sub.rec")
    result = mxrec_cli("index", tmp_path / "sub.rec", check=True)
    assert "50 entries, keyed by record id" in result.stdout
    assert (tmp_path / "sub.idx").read_bytes() == (golden / "im2rec" / "default" / "sub.idx").read_bytes()


def test_index_by_position_rebuilds_mxnet_idx(golden, tmp_path):
    index, source = build_index(golden / "idx" / "idx.rec", tmp_path / "p.idx", keys="position")
    assert source == "position" and len(index) == 255
    assert (tmp_path / "p.idx").read_bytes() == (golden / "idx" / "idx.idx").read_bytes()
    # Payloads are not IRHeaders: "auto" falls back to positions.
    assert build_index(golden / "idx" / "idx.rec", tmp_path / "a.idx")[1] == "position"
