"""im2rec's list mode and CSV lists, against the .lst files real im2rec wrote (golden/im2rec/lists)."""

from __future__ import annotations

import os

import pytest

from mxrec.errors import ListFileError, MxrecError, OptionError
from mxrec.format.lst import ListEntry
from mxrec.io.lists import read_label_names, read_list
from mxrec.packing.make_lists import (
    ImageList,
    make_lists,
    read_labelled_csv,
    shuffled,
    split_list,
    walk_images,
    write_lists,
)

CLASSES = ["astronaut", "camera", "chelsea", "coffee", "colorwheel", "hubble_deep_field",
           "immunohistochemistry", "retina", "rocket", "stereo_motorcycle"]


def test_label_file_names_each_folder(photos, tmp_path):
    make_lists(tmp_path / "sub", photos, recursive=True)
    assert read_label_names(tmp_path / "sub.labels") == dict(enumerate(CLASSES))
    assert (tmp_path / "sub.labels").read_text().splitlines()[:2] == ["0\tastronaut", "1\tcamera"]


def test_shuffle_matches_pythons_seeded_shuffle_without_touching_global_random():
    import random

    entries = [ListEntry(i, (0.0,), f"{i}.jpg") for i in range(100)]
    state = random.getstate()
    assert shuffled(entries, 7) == shuffled(entries, 7)
    assert random.getstate() == state
    random.seed(7)
    expected = list(entries)
    random.shuffle(expected)
    assert shuffled(entries, 7) == expected


def test_seed_changes_the_order(photos):
    entries = walk_images(photos, recursive=True).entries
    assert shuffled(entries, 1) != shuffled(entries, 100)
    assert sorted(shuffled(entries, 1), key=lambda e: e.index) == entries


def test_extensions_match_case_insensitively(tmp_path):
    for name in ("a.JPG", "b.png", "c.txt", "d.Jpeg"):
        (tmp_path / name).write_bytes(b"x")
    (tmp_path / "e.jpg").mkdir()  # a directory is not an image
    assert [e.path for e in walk_images(tmp_path).entries] == ["a.JPG", "b.png", "d.Jpeg"]
    assert [e.path for e in walk_images(tmp_path, exts=[".PNG"]).entries] == ["b.png"]


def test_recursive_labels_only_folders_with_images(tmp_path):
    for rel in ("z/1.jpg", "a/empty/readme.txt", "a/x/2.jpg", "a/x/1.jpg", "top.jpg"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(b"x")
    images = walk_images(tmp_path, recursive=True)
    assert [(e.index, e.labels, e.path) for e in images.entries] == [
        (0, (0.0,), "top.jpg"), (1, (1.0,), "a/x/1.jpg"), (2, (1.0,), "a/x/2.jpg"), (3, (2.0,), "z/1.jpg")]
    assert images.label_names == {0: ".", 1: "a/x", 2: "z"}


def test_symlink_loop_is_not_followed_forever(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "1.jpg").write_bytes(b"x")
    os.symlink("..", tmp_path / "a" / "up")
    os.symlink("a", tmp_path / "b")  # a plain link to a folder is followed, as im2rec does
    paths = [e.path for e in walk_images(tmp_path, recursive=True).entries]
    assert paths == ["a/1.jpg", "b/1.jpg"]


def test_file_name_the_lst_cannot_hold_is_an_error(tmp_path):
    (tmp_path / "bad\tname.jpg").write_bytes(b"x")
    with pytest.raises(ListFileError, match="tab"):
        walk_images(tmp_path)


def test_missing_root_is_an_error(tmp_path):
    with pytest.raises(MxrecError, match="not a directory"):
        make_lists(tmp_path / "out", tmp_path / "nope")


def test_split_sizes_follow_im2rec():
    entries = [ListEntry(i, (0.0,), f"{i}.jpg") for i in range(50)]
    parts = split_list(entries, chunks=3, train_ratio=0.8, test_ratio=0.1)
    assert [(suffix, len(p)) for suffix, p in parts] == [
        ("_0_test", 1), ("_0_val", 3), ("_0_train", 13), ("_1_test", 1), ("_1_val", 3), ("_1_train", 13),
        ("_2_test", 1), ("_2_val", 2), ("_2_train", 13)]
    assert [p for _, p in split_list(entries)] == [entries]
    # train + test covering everything: no _val file at all
    assert [s for s, _ in split_list(entries, train_ratio=0.5, test_ratio=0.5)] == ["_test", "_train"]


@pytest.mark.parametrize("options", [dict(chunks=0), dict(train_ratio=1.5), dict(test_ratio=-0.1)])
def test_bad_split_options_are_rejected_before_walking(tmp_path, options):
    with pytest.raises(OptionError):
        make_lists(tmp_path / "out", tmp_path / "does-not-matter", **options)


# -- CSV ----------------------------------------------------------------------

def _images(root, *names):
    for name in names:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(b"x")


def test_csv_class_names_map_to_sorted_ids(tmp_path):
    _images(tmp_path, "img/a.jpg", "img/b.jpg", "img/c.jpg")
    (tmp_path / "labels.csv").write_text("path,label\nimg/a.jpg,dog\nimg/b.jpg, cat\n\nimg/c.jpg,dog\n")
    images = read_labelled_csv(tmp_path / "labels.csv", tmp_path)
    assert images.entries == [ListEntry(0, (1.0,), "img/a.jpg"), ListEntry(1, (0.0,), "img/b.jpg"),
                              ListEntry(2, (1.0,), "img/c.jpg")]
    assert images.label_names == {0: "cat", 1: "dog"}
    write_lists(tmp_path / "out", images, shuffle=False)
    assert read_list(tmp_path / "out.lst") == images.entries
    assert read_label_names(tmp_path / "out.labels") == {0: "cat", 1: "dog"}


def test_tsv_with_numeric_labels_keeps_the_numbers(tmp_path):
    _images(tmp_path, "a.jpg", "b b.jpg")
    (tmp_path / "list.tsv").write_text("a.jpg\t3\t0.5\nb b.jpg\t7\t-1\n")
    images = read_labelled_csv(tmp_path / "list.tsv", tmp_path)
    assert images == ImageList([ListEntry(0, (3.0, 0.5), "a.jpg"), ListEntry(1, (7.0, -1.0), "b b.jpg")], {})
    assert write_lists(tmp_path / "out", images) == [str(tmp_path / "out.lst")]  # no names: no label file


@pytest.mark.parametrize("body, line, message", [
    ("a.jpg,cat\nb.jpg,\n", 2, "empty label"),
    ("a.jpg,cat\nb.jpg\n", 2, "expected"),
    ("a.jpg,cat\nmissing.jpg,dog\n", 2, "does not exist"),
    ("a.jpg,cat\n../outside.jpg,dog\n", 2, "outside"),
    ("/etc/passwd,cat\n", 1, "absolute"),
])
def test_bad_csv_rows_name_the_line(tmp_path, body, line, message):
    _images(tmp_path, "a.jpg", "b.jpg")
    (tmp_path / "root" / "x").mkdir(parents=True)
    (tmp_path / "outside.jpg").write_bytes(b"x")
    (tmp_path / "l.csv").write_text(body)
    root = tmp_path / "root" if "outside" in body else tmp_path
    if root != tmp_path:
        _images(root, "a.jpg")
    with pytest.raises(ListFileError, match=message) as info:
        read_labelled_csv(tmp_path / "l.csv", root)
    assert info.value.line == line
    assert str(tmp_path / "l.csv") in str(info.value)


def test_label_file_errors_name_the_line(tmp_path):
    (tmp_path / "x.labels").write_text("0\tcat\nnot-a-number\tdog\n")
    with pytest.raises(ListFileError, match="line 2"):
        read_label_names(tmp_path / "x.labels")
