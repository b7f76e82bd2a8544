"""Quick start: build a .rec dataset from the bundled photos, check it, and read it back.

    python examples/quickstart.py [OUT_DIR]

Without OUT_DIR it works in a temporary folder and removes it at the end;
with OUT_DIR the files stay there for you to look at.

The same steps on the command line::

    mxrec list --recursive OUT/photos tests/data/golden/im2rec/photos200
    mxrec pack --resize 128 OUT/photos tests/data/golden/im2rec/photos200
    mxrec info OUT/photos.rec && mxrec verify --decode OUT/photos.rec

Everything here runs without MXNet; the files are what MXNet's im2rec.py writes.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np

import mxrec
import mxrec.recordio as recordio
from mxrec.doctor.dataset_info import dataset_info

PHOTOS = Path(__file__).resolve().parent.parent / "tests" / "data" / "golden" / "im2rec" / "photos200"


def main(out_dir: str) -> int:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    prefix = out / "photos"

    # 1. List the photos (one class per folder) and pack them, resized to a shorter side of 128.
    lists = mxrec.make_lists(prefix, PHOTOS, recursive=True)
    results = mxrec.pack_prefix(prefix, PHOTOS, mxrec.ImageTransform(resize=128), workers=2)
    print(f"listed {lists}, packed {results[0].records} records into {results[0].outputs[0][0]}")
    rec = Path(results[0].outputs[0][0])

    # 2. Summarise and verify (also: `mxrec info`, `mxrec verify --decode`).
    print(dataset_info(rec).format_text())
    report = mxrec.verify_dataset(rec, decode=True)
    print(report.format_text())

    # 3. Read back with old MXNet code (only the import changed) ...
    reader = recordio.MXIndexedRecordIO(str(rec.with_suffix(".idx")), str(rec), "r")
    header, img = recordio.unpack_img(reader.read_idx(reader.keys[0]))
    print(f"record {reader.keys[0]}: label {header.label}, image {img.shape} (BGR)")
    # ... and with the fast reader.
    with mxrec.RecordReader(rec) as fast:
        labels = np.array([fast.header(i).label for i in range(len(fast))], dtype=int)
        print(f"fast reader: {len(fast)} records, per-class counts {np.bincount(labels).tolist()}")
    return 0 if report.ok else 1


def run(argv: list[str]) -> int:
    """``main`` in OUT_DIR (``argv[0]``), or in a temporary folder that is removed afterwards."""
    if argv:
        return main(argv[0])
    with tempfile.TemporaryDirectory(prefix="mxrec-demo-") as out:
        return main(out)


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
