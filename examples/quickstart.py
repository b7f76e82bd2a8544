"""Quick start: write a small image dataset, summarise and verify it, and read it back three ways.

    python examples/quickstart.py [OUT_DIR]

Everything here runs without MXNet. The dataset is generated (coloured
gradients), so no download is needed.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np

import mxrec
import mxrec.recordio as recordio
from mxrec.info import dataset_info
from mxrec.verify import verify_recordio


def make_images(count: int) -> list[tuple[np.ndarray, int]]:
    """Small BGR images with a class label each."""
    rng = np.random.default_rng(0)
    ramp = np.linspace(0, 255, 64, dtype=np.float32)
    images = []
    for i in range(count):
        label = i % 4
        img = np.empty((48, 64, 3), np.uint8)
        img[..., label % 3] = ramp[None, :]
        img[..., (label + 1) % 3] = ramp[:48, None]
        img[..., (label + 2) % 3] = rng.integers(0, 256)
        images.append((img, label))
    return images


def main(out_dir: str) -> int:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rec, idx = out / "demo.rec", out / "demo.idx"

    # 1. Write with the MXNet-compatible API (the same code runs with mxnet.recordio).
    writer = recordio.MXIndexedRecordIO(str(idx), str(rec), "w")
    for i, (img, label) in enumerate(make_images(40)):
        writer.write_idx(i, recordio.pack_img(recordio.IRHeader(0, label, i, 0), img, quality=90))
    writer.close()

    # 2. Summarise and verify (also: `mxrec info demo.rec`, `mxrec verify demo.rec`).
    print(dataset_info(rec).format_text())
    report = verify_recordio(rec)
    print(report.format_text())

    # 3. Read back: drop-in API, then the fast reader.
    reader = recordio.MXIndexedRecordIO(str(idx), str(rec), "r")
    header, img = recordio.unpack_img(reader.read_idx(7))
    print(f"record 7: label {header.label}, image {img.shape}")
    with mxrec.RecordReader(rec) as fast:
        labels = [fast.header(i).label for i in range(len(fast))]
        print(f"fast reader: {len(fast)} records, label counts {np.bincount(np.array(labels, int)).tolist()}")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="mxrec-demo-")))
