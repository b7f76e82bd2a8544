"""The InsightFace migration steps of the user guide run as written (issue 18 §9), on a generated ``faces_emore/``.

The steps live in ``docs/guide/insightface.md`` where that page exists, else in ``README.md``; in either,
between the ``<!-- insightface-steps ... -->`` and ``<!-- /insightface-steps -->`` markers (without them:
the section headed "InsightFace face sets"). Their ```python blocks are executed in order, in a folder
holding ``faces_emore/train.rec``/``.idx`` and ``faces_emore/lfw.bin``; then what each step promises is
checked on the names it defined (contiguous RGB for ``torch.from_numpy``, float32 data normalised as
arcface_torch does).
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import numpy as np
import pytest

from testkit import TESTS
from testkit.insightface import key_of_face, make_face_set, make_verification_bin

torch = pytest.importorskip("torch")
ROOT = TESTS.parent
START, END = "<!-- insightface-steps", "<!-- /insightface-steps -->"


def steps_page() -> Path:
    """Where the guide keeps the steps: its InsightFace page, or the README before the guide had pages."""
    page = ROOT / "docs" / "guide" / "insightface.md"
    return page if page.exists() else ROOT / "README.md"


def steps_text(text: str) -> str:
    """The marked steps, or else the "InsightFace face sets" section (to the next heading of its level or above)."""
    if START in text:
        return text[text.index(START):text.index(END)]
    heading = re.search(r"^(#+) InsightFace face sets$", text, re.M)
    assert heading, "no InsightFace steps found: neither the markers nor the heading"
    level = len(heading.group(1))
    after = re.search(rf"^#{{1,{level}}} ", text[heading.end():], re.M)
    return text[heading.start():heading.end() + after.start() if after else len(text)]


def insightface_blocks() -> list[str]:
    page = steps_page()
    section = steps_text(page.read_text())
    blocks = [textwrap.dedent(block) for block in re.findall(r"```python\n(.*?)```", section, re.S)]
    assert len(blocks) == 4, f"the InsightFace steps in {page} changed: update this test"
    return blocks


def test_the_steps_are_found_in_readme_or_guide_page():
    """Marked steps are found in whichever page holds them, and, unmarked, under their heading."""
    block = "   ```python\n   x = 1\n   ```\n"
    marked = f"# Title\n\n{START} -->\n1. step\n{block}{END}\n\n```python\nnot_a_step = 1\n```\n"
    assert steps_text(marked).count("```python") == 1
    headed = f"## InsightFace face sets\n\n{block}\n### Sub\n{block}\n## Next\n\n{block}"
    assert steps_text(headed).count("```python") == 2
    assert steps_text(headed.replace("## ", "# ", 1)).count("```python") == 3
    assert [textwrap.dedent(b) for b in re.findall(r"```python\n(.*?)```", steps_text(marked), re.S)] == ["x = 1\n"]


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
