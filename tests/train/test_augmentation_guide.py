"""The augmentation guide (docs/augmentation.md) runs as written: its ```python blocks, executed in order in a
folder holding ``train.rec`` (MXNet's 50 golden photos), do what the page says they do."""

from __future__ import annotations

import re

import numpy as np
import pytest

from testkit import TESTS
from testkit.iterdata import IM2REC, pack_photos

GUIDE = TESTS.parent / "docs" / "augmentation.md"


def blocks() -> list[str]:
    found = re.findall(r"```python\n(.*?)```", GUIDE.read_text(), re.S)
    assert len(found) == 5, "the guide's examples changed: update this test"
    return found


def test_the_custom_step_takes_ten_lines():
    assert len([line for line in blocks()[0].splitlines() if line.strip()]) <= 10  # imports included


@pytest.fixture(scope="module")
def guide(tmp_path_factory):
    """The names the guide's blocks define, run in a folder with its ``train.rec``."""
    pytest.importorskip("torch")
    folder = tmp_path_factory.mktemp("guide")
    pack_photos(folder / "train.rec", IM2REC / "lists" / "sub.lst")
    names: dict = {"__name__": "augmentation_guide"}
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        for block in blocks():
            exec(compile(block, str(GUIDE), "exec"), names)
    yield {**names, "rec": str(folder / "train.rec")}
    for name in ("train", "thumbs"):
        names[name].close()


def test_the_iterator_runs_the_custom_steps(guide):
    batch = guide["batch"]
    assert batch.data[0].shape == (16, 3, 224, 224) and batch.data[0].dtype == np.float32
    assert [type(s).__name__ for s in guide["steps"]] == ["RandomAreaCrop", "RandomGrey", "Cutout"]


def test_the_dataset_runs_them_in_workers(guide):
    images, labels = guide["images"], guide["labels"]
    assert images.shape == (16, 3, 224, 224) and labels.shape == (16,)
    blank = (images.numpy() == 0).all(axis=1).sum(axis=(1, 2))
    assert (blank >= 56 * 56).all()  # every image has its square (mirrored or not)
    ds = guide["ds"]
    greys = [bool((img[0] == img[1]).all() and (img[1] == img[2]).all())
             for img in ds.__getitems__(list(range(len(ds))))[0].numpy()]
    assert 2 <= sum(greys) <= 25  # RandomGrey(0.2) of 50 records


def test_the_geometric_step_lets_fast_decode_decode_small(guide):
    from mxrec import ImageRecordIter

    small = guide["small"]
    assert small.shape == (16, 3, 32, 32)
    with ImageRecordIter(path_imgrec=guide["rec"], data_shape=(3, 32, 32), batch_size=16,
                         aug_list=[guide["Squash"](32), guide["Cutout"](8)]) as full:
        whole = full.next().data[0]
    # the same squares (drawn first, for the full size) on the reduced decode; pixels close, not equal
    assert ((small == 0).all(axis=1) == (whole == 0).all(axis=1)).mean() > 0.99
    assert 0 < np.abs(small - whole).mean() < 8
