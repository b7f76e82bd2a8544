"""Record files for the iterator tests, rebuilt from the golden photos instead of being stored.

MXNet's ``im2rec`` made ``default/sub.rec`` and ``packlabel3/sub.rec`` from
``photos200`` with ``cv2.imread`` + ``pack_img`` (JPEG quality 95); doing the
same with mxrec and the pinned OpenCV gives the very same bytes, checked here
against the SHA-256 sums in ``im2rec/README.txt``. The PNG file is rebuilt
with fast compression: PNG is lossless, so its pixels are those of MXNet's
``png/sub.rec`` (not stored: 10 MB) whatever the compression level.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import cv2
import numpy as np

from mxrec import RecordWriter
from mxrec.format.header import IRHeader, pack
from mxrec.io.lists import read_list
from mxrec.recordio import pack_img
from testkit import GOLDEN

IM2REC = GOLDEN / "im2rec"
ITER = GOLDEN / "iter"

SHA256 = {
    "default": "a38dc4a7840cacf61a12bad494a54713473643a2fc61d6af3cfd09ca02f390f7",
    "packlabel3": "4654235306dd8a4aa3a79c323ac19e1adf276434267ac1ef1c29a8092ff4e9d1",
}


def pack_photos(out: Path, lst: Path, *, img_fmt: str = ".jpg", quality: int = 95, vector_label: bool = False) -> Path:
    """Pack the photos of ``lst`` (im2rec's way) into ``out`` (+ ``.idx``); return ``out``."""
    with RecordWriter(out, index=True) as writer:
        for entry in read_list(lst):
            img = cv2.imread(str(IM2REC / "photos200" / entry.path), cv2.IMREAD_COLOR)
            label = np.array(entry.labels, np.float32) if vector_label else entry.labels[0]
            writer.write(pack_img(IRHeader(0, label, entry.index, 0), img, quality=quality, img_fmt=img_fmt),
                         key=entry.index)
    return out


def build_golden_records(folder: Path) -> dict[str, Path]:
    """``{"default", "packlabel3", "png", "centercrop_resize64"}`` -> ``.rec`` path, the first two byte-checked."""
    folder.mkdir(parents=True, exist_ok=True)
    recs = {
        "default": pack_photos(folder / "default.rec", IM2REC / "lists" / "sub.lst"),
        "packlabel3": pack_photos(folder / "packlabel3.rec", IM2REC / "multilabel3.lst", vector_label=True),
        "png": pack_photos(folder / "png.rec", IM2REC / "lists" / "sub.lst", img_fmt=".png", quality=1),
        "centercrop_resize64": IM2REC / "centercrop_resize64" / "sub.rec",
    }
    for name, digest in SHA256.items():
        actual = hashlib.sha256(recs[name].read_bytes()).hexdigest()
        if actual != digest:
            raise AssertionError(f"rebuilt {name}.rec differs from MXNet's (sha256 {actual}); is OpenCV 4.10 pinned?")
    return recs


def write_records(path: Path, payloads: list[bytes]) -> Path:
    """A ``.rec`` + ``.idx`` holding ``payloads`` as records 0, 1, ..."""
    with RecordWriter(path, index=True) as writer:
        for payload in payloads:
            writer.write(payload)
    return path


def image_record(img: np.ndarray, label: float | list[float], record_id: int, img_fmt: str = ".png") -> bytes:
    """A packed image record (lossless PNG by default, so tests can compare pixels exactly)."""
    ok, buf = cv2.imencode(img_fmt, img)
    assert ok
    return pack(IRHeader(0, label, record_id, 0), buf.tobytes())


def gradient_image(height: int, width: int, seed: int) -> np.ndarray:
    """A deterministic BGR test image with structure in both directions (so crops and flips are visible)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    img = np.stack([(x * 7 + y * 3) % 256, (x * 2 + y * 11) % 256, rng.integers(0, 256, (height, width))], axis=-1)
    return img.astype(np.uint8)
