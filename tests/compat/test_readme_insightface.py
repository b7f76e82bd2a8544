"""The README's InsightFace migration steps run as written (issue 18 §9), on a generated ``faces_emore/``.

The ```python blocks of the README's "InsightFace face sets" section are executed in order, in a folder
holding ``faces_emore/train.rec``/``.idx`` and ``faces_emore/lfw.bin``; then what each step promises is
checked on the names it defined (contiguous RGB for ``torch.from_numpy``, float32 data normalised as
arcface_torch does).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from testkit import TESTS
from testkit.insightface import key_of_face, make_face_set, make_verification_bin

torch = pytest.importorskip("torch")
README = TESTS.parent / "README.md"


def insightface_blocks() -> list[str]:
    text = README.read_text()
    section = text[text.index("## InsightFace face sets"):]
    section = section[:section.index("\n## ", 1)]
    blocks = [re.sub(r"^ {3}", "", block, flags=re.M) for block in re.findall(r"```python\n(.*?)```", section, re.S)]
    assert len(blocks) == 4, "the README's InsightFace steps changed: update this test"
    return blocks


@pytest.fixture
def faces_emore(tmp_path, monkeypatch):
    files = make_face_set(tmp_path / "faces_emore", [3, 1, 4, 2], size=112)
    make_verification_bin(tmp_path / "faces_emore" / "lfw.bin", pairs=3, size=112)
    monkeypatch.chdir(tmp_path)
    return files


def test_readme_insightface_steps_run_as_written(faces_emore):
    step3, step4_iter, step4_dataset, step5 = insightface_blocks()

    names: dict = {}
    exec(step3, names)  # the README's own code
    sample, tensor = names["sample"], names["tensor"]
    assert sample.dtype == np.uint8 and sample.shape == (112, 112, 3) and sample.flags.c_contiguous
    assert tensor.shape == (112, 112, 3) and key_of_face(sample) == faces_emore.face_keys[0][0] % 60

    names = {}
    exec(step4_iter, names)
    batch = names["batch"]
    data = batch.data[0]
    assert data.shape == (512, 3, 112, 112) and batch.label[0].dtype == np.float32
    assert batch.pad == 512 - faces_emore.faces and data[:10].min() >= -1.0 and data[:10].max() <= 1.0
    names["train"].close()

    names = {}
    exec(step4_dataset, names)
    assert len(names["faces"].positions) == faces_emore.faces

    names = {}
    exec(step5, names)
    data, flipped = names["data"], names["flipped"]
    assert data.dtype == np.float32 and data.shape == (6, 3, 112, 112)
    assert data.min() >= -1.0 and data.max() <= 1.0 and flipped.flags.c_contiguous
    assert torch.from_numpy(flipped).shape == (6, 3, 112, 112)
    expected = (names["lfw"].images.astype(np.float32) / 255 - 0.5) / 0.5
    assert np.array_equal(data, expected.transpose(0, 3, 1, 2))
