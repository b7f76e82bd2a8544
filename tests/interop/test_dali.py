"""DALI's TFRecord reader (``fn.readers.tfrecord``, on the CPU: no GPU needed) reads the TFRecord sets mxrec writes,
through the ``.tfrecord.idx`` files in its ``.mxrec/``: every image, label, size and key, in order, two shards at once.

DALI (``nvidia-dali-cuda120``, about 1 GB installed) lives in a virtual environment of its own, which ``.ci/run``
makes and names in ``MXREC_DALI_PYTHON``; the reading script runs there, in a subprocess. Without it the test is
skipped, except in CI, where its absence is a failure."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

import mxrec
from mxrec.io.opener import RecordReader
from testkit import GOLDEN

SUB = GOLDEN / "im2rec" / "default" / "sub.rec"  # 50 JPEG photos written by MXNet's im2rec

READ_WITH_DALI = r"""
import json, os, sys
import numpy as np
import nvidia.dali.fn as fn
import nvidia.dali.tfrecord as tfrec
from nvidia.dali import pipeline_def

files = json.loads(sys.argv[1])
features = {"image/encoded": tfrec.FixedLenFeature((), tfrec.string, ""),
            "image/class/label": tfrec.FixedLenFeature([1], tfrec.int64, -1),
            "image/height": tfrec.FixedLenFeature([1], tfrec.int64, 0),
            "image/width": tfrec.FixedLenFeature([1], tfrec.int64, 0),
            "image/format": tfrec.FixedLenFeature((), tfrec.string, ""),
            "mxrec/key": tfrec.FixedLenFeature((), tfrec.string, "")}

@pipeline_def(batch_size=1, num_threads=1, device_id=None)  # the CPU only
def read():
    indexes = [os.path.join(os.path.dirname(f), ".mxrec", os.path.basename(f) + ".idx") for f in files]
    out = fn.readers.tfrecord(path=files, index_path=indexes, features=features, random_shuffle=False,
                              name="tfrecord")
    return tuple(out[name] for name in features)

pipe = read()
pipe.build()
rows = []
for _ in range(pipe.epoch_size("tfrecord")):
    image, label, height, width, kind, key = (np.array(batch[0]) for batch in pipe.run())
    rows.append([image.tobytes().hex(), int(label[0]), int(height[0]), int(width[0]), kind.tobytes().decode(),
                 key.tobytes().decode()])
print(json.dumps(rows))
"""


def dali_python() -> str:
    python = os.environ.get("MXREC_DALI_PYTHON")
    if python:
        return python
    try:
        import nvidia.dali  # noqa: F401
    except ImportError:
        if os.environ.get("CI"):  # CI makes the DALI environment (.ci/run): its absence there is a failure
            pytest.fail("MXREC_DALI_PYTHON is not set in CI")
        pytest.skip("DALI is not installed (set MXREC_DALI_PYTHON to a Python with nvidia-dali-cuda120)")
    return sys.executable


def test_dali_reads_the_tfrecord_shards_mxrec_writes(tmp_path: Path) -> None:
    python = dali_python()
    out = mxrec.convert(SUB, tmp_path / "tf", target_format="tfrecord", shard_size=20)
    assert len(out.files) == 3
    done = subprocess.run([python, "-c", READ_WITH_DALI, json.dumps(out.files)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(done.stdout.strip().splitlines()[-1])
    with RecordReader(SUB) as reader:
        assert len(rows) == len(reader) == 50
        for position, (image_hex, label, height, width, kind, key) in enumerate(rows):
            header, image = reader.unpack(position)
            assert bytes.fromhex(image_hex) == image
            assert (label, kind, key) == (int(header.label), "jpeg", str(reader.keys[position]))
            assert cv2.imdecode(np.frombuffer(image, np.uint8), cv2.IMREAD_COLOR).shape[:2] == (height, width)
