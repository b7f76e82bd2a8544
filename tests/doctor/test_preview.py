"""``contact_sheet`` / ``mxrec preview``: the right records, their pixels, captions, and damaged records shown."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from mxrec.doctor.preview import (
    BACKGROUND,
    CAPTION_HEIGHT,
    GAP,
    contact_sheet,
    fit_tile,
    label_text,
    sample_positions,
    write_image,
)
from mxrec.errors import IndexFileError, RecordKeyError
from mxrec.format.header import unpack
from mxrec.image.codec import decode_image
from mxrec.io.opener import RecordReader
from testkit.datasets import make_faulty_dataset


@pytest.fixture
def train(golden):
    return golden / "im2rec" / "trainval" / "subtv_train.rec"


def tile_at(sheet: np.ndarray, i: int, columns: int, tile: int) -> np.ndarray:
    top, left = (i // columns) * (tile + CAPTION_HEIGHT + GAP), (i % columns) * (tile + GAP)
    return sheet[top:top + tile + CAPTION_HEIGHT, left:left + tile]


def test_sample_is_reproducible_and_distinct():
    assert sample_positions(45, 9, seed=3) == sample_positions(45, 9, seed=3)
    assert len(set(sample_positions(45, 9, seed=3))) == 9
    assert sample_positions(45, 9, seed=3) != sample_positions(45, 9, seed=4)
    assert sample_positions(5, 16) == [0, 1, 2, 3, 4]


def test_label_text():
    assert label_text(np.array([7.0])) == "7"
    assert label_text(np.array([7, 4, -9.75], np.float32)) == "[7, 4, -9.75]"
    assert label_text(np.arange(6.0)) == "[0, 1, 2, 3, ...]"


def test_sheet_shows_the_given_records(train):
    sheet, shown = contact_sheet(train, keys=[39, 30, 35, 36], tile=96)
    assert shown == [39, 30, 35, 36]
    assert sheet.shape == (2 * (96 + CAPTION_HEIGHT) + GAP, 2 * 96 + GAP, 3)
    with RecordReader(train) as reader:
        for i, key in enumerate(shown):
            _, image = unpack(reader.read_key(key))
            expected = fit_tile(decode_image(image, 1), 96)
            got = tile_at(sheet, i, 2, 96)
            assert np.array_equal(got[:96], expected)  # the record's own pixels
            assert (got[96:] == 255).any()  # a caption is drawn under it


def test_sampled_sheet_and_cli(train, tmp_path, mxrec_cli):
    _, shown = contact_sheet(train, count=9, seed=1)
    with RecordReader(train) as reader:
        assert shown == [reader.keys[p] for p in sample_positions(len(reader), 9, 1)]
    out = tmp_path / "sheet.png"
    result = mxrec_cli("preview", train, "-o", out, "-n", 9, "--seed", 1)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith(", ".join(map(str, shown)))
    written = cv2.imread(str(out))
    assert written.shape == (3 * (160 + CAPTION_HEIGHT) + 2 * GAP, 3 * 160 + 2 * GAP, 3)
    assert np.array_equal(written, contact_sheet(train, count=9, seed=1)[0])  # PNG is lossless
    assert not (tmp_path / "sheet.png.partial").exists()


def test_undecodable_records_get_a_tile_saying_so(tmp_path):
    faulty = make_faulty_dataset(tmp_path / "faulty")
    with pytest.raises(IndexFileError, match="key 500: offset 133754 "):
        contact_sheet(faulty.rec)  # a broken .idx is an error (mxrec verify --repair fixes it) ...
    faulty.idx.unlink()  # ... without one, records are found by scanning past the damage, keyed by position
    sheet, shown = contact_sheet(faulty.rec, keys=[0, 36, 38], tile=128, columns=3)
    assert shown == [0, 36, 38]  # a clean image, an empty image, a record without a header
    for i, written in enumerate((False, True, True)):
        area = tile_at(sheet, i, 3, 128)[:128].astype(int)
        ink = area[(area != BACKGROUND).any(axis=-1)]
        reason_in_red = len(ink) > 100 and (ink[:, 2] >= ink[:, :2].max(axis=1)).all()
        assert reason_in_red == written, i


def test_errors(train, tmp_path, mxrec_cli):
    with pytest.raises(RecordKeyError):
        contact_sheet(train, keys=[12345])
    result = mxrec_cli("preview", train, "-o", tmp_path / "x.png", "--keys", "1,x")
    assert result.returncode == 2 and "keys are integers" in result.stderr
    assert mxrec_cli("preview", train, "-o", tmp_path / "x.png", "--keys", "12345").returncode == 2
    assert not (tmp_path / "x.png").exists()


def test_write_image_by_extension(tmp_path):
    image = np.zeros((10, 20, 3), np.uint8)
    write_image(tmp_path / "a.jpg", image)
    assert (tmp_path / "a.jpg").read_bytes()[:3] == b"\xff\xd8\xff"
