"""Per-record cost of what ``mxrec convert`` does in Python for each record: header walk, payload facts, report.

``mxrec convert`` carries image bytes untouched, so besides moving the bytes
its work per record is pure Python: split the record
(:meth:`~mxrec.interop.record.Record.from_bytes`), say what the payload is
(:func:`~mxrec.interop.record.inspect_payload`, which walks a JPEG's headers
with :func:`~mxrec.image.headers.jpeg_header` and checks for truncation) and
count it (:meth:`~mxrec.interop.record.Report.add`). This script times each
on generated records, as the converter sees them: memoryview slices of one
buffer (the mapped ``.rec``). Record kinds:

* **jpeg**: photo-like JPEGs (300-500 px, quality 90) as OpenCV writes them (JFIF APP0);
* **jpeg+exif**: the same through pillow with an EXIF APP1 segment (Orientation 6);
* **png**: smaller PNGs.

It prints microseconds per record, the best of ``--repeat`` passes::

    python benchmarks/bench_inspect.py --records 300
"""

from __future__ import annotations

import argparse
import io
import time

import numpy as np

from mxrec.format.header import IRHeader, pack
from mxrec.image.headers import jpeg_header
from mxrec.interop.record import Record, Report, inspect_payload


def photo(rng: np.random.Generator, low: int, high: int) -> np.ndarray:
    """A photo-like BGR image (smooth colour fields with noise), ``low``..``high`` pixels a side."""
    h, w = int(rng.integers(low, high + 1)), int(rng.integers(low, high + 1))
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    phase = rng.uniform(0, 6.28, 3)
    img = np.stack([127 + 90 * np.sin(x / rng.uniform(9, 40) + y / rng.uniform(9, 40) + phase[c])
                    for c in range(3)], -1)
    return (img + rng.normal(0, 12, img.shape)).clip(0, 255).astype(np.uint8)


def payloads(kind: str, count: int, seed: int = 0) -> list[bytes]:
    """``count`` image files of ``kind`` (``jpeg``, ``jpeg+exif`` or ``png``)."""
    import cv2

    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        if kind == "jpeg":
            out.append(cv2.imencode(".jpg", photo(rng, 300, 500), [cv2.IMWRITE_JPEG_QUALITY, 90])[1].tobytes())
        elif kind == "jpeg+exif":
            from PIL import Image

            exif = Image.Exif()
            exif[0x0112] = 6
            exif[0x010F] = "camera"  # Make, so the orientation is not the only tag
            buf = io.BytesIO()
            Image.fromarray(photo(rng, 300, 500)[..., ::-1].copy()).save(buf, "JPEG", quality=90,
                                                                           exif=exif.tobytes())
            out.append(buf.getvalue())
        else:
            out.append(cv2.imencode(".png", photo(rng, 60, 120))[1].tobytes())
    return out


def views(blobs: list[bytes]) -> list[memoryview]:
    """The blobs as slices of one buffer, as records read from a mapped file are."""
    buffer = memoryview(b"".join(blobs))
    out, at = [], 0
    for blob in blobs:
        out.append(buffer[at:at + len(blob)])
        at += len(blob)
    return out


def per_record(repeat: int, fn, items: list) -> float:
    """Best microseconds per item of ``fn`` over ``items``."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for item in items:
            fn(item)
        best = min(best, time.perf_counter() - start)
    return best / len(items) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=300, help="records of each kind")
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()

    print(f"{'kind':<10} {'jpeg_header':>12} {'inspect_payload':>16} {'Report.add':>11} {'from_bytes':>11}"
          "   (us per record)")
    for kind in ("jpeg", "jpeg+exif", "png"):
        blobs = payloads(kind, args.records)
        data = views(blobs)
        records = views([pack(IRHeader(0, float(i % 10), i, 0), blob) for i, blob in enumerate(blobs)])
        parsed = [Record.from_bytes(i, view) for i, view in enumerate(records)]
        header = per_record(args.repeat, jpeg_header, data) if kind != "png" else float("nan")
        inspect = per_record(args.repeat, inspect_payload, data)
        add = per_record(args.repeat, Report().add, parsed)
        split = per_record(args.repeat, lambda view: Record.from_bytes(7, view), records)
        print(f"{kind:<10} {header:>12.2f} {inspect:>16.2f} {add:>11.2f} {split:>11.2f}")


if __name__ == "__main__":
    main()
