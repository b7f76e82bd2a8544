"""Dataset-doctor benchmark: ``mxrec verify --decode`` against bare decoding, same run.

The issue's target: verifying ~5 000 photos with ``--decode`` should be
limited by decode speed on all cores. The anchor is therefore *bare decoding*:
the same strict libjpeg-turbo decode that verify uses (simplejpeg), in a plain
single-threaded loop over image bytes already in memory, times the number of
cores. ``efficiency`` = verify's images/s divided by that ideal; 100 % means
verify costs nothing beyond the decodes themselves on every core. OpenCV's
``imdecode`` (MXNet's decoder) is shown for reference, and with an MXNet
interpreter the hand-written MXNet check (``read_idx`` + ``unpack_img`` for
every key, the usual way to test a dataset with MXNet) runs on the same file::

    python benchmarks/photoset.py bench-data/photos5000 --count 5000   # once
    MXREC_BENCH_MXNET_PYTHON=/path/to/mxnet-venv/bin/python python benchmarks/bench_verify.py

The ``.rec`` is packed once from the photo folder (``bench-data/photos5000.rec``,
JPEG bytes passed through, label = class folder) and reused.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from timing import best_of


def pack_photos(photos: str, rec: str) -> None:
    """Pack every JPEG under ``photos/<class>/`` into ``rec`` (+ .idx), label = class index, key = id = position."""
    from mxrec import IRHeader, RecordWriter, pack

    classes = sorted(d for d in os.listdir(photos) if os.path.isdir(os.path.join(photos, d)))
    with RecordWriter(rec, index=True, atomic=True) as writer:
        key = 0
        for label, name in enumerate(classes):
            for file in sorted(os.listdir(os.path.join(photos, name))):
                with open(os.path.join(photos, name, file), "rb") as f:
                    writer.write(pack(IRHeader(0, float(label), key, 0), f.read()), key=key)
                key += 1


def image_bytes(rec: str) -> list[bytes]:
    from mxrec import RecordReader, unpack

    with RecordReader(rec) as reader:
        return [unpack(payload)[1] for payload in reader]


def mxnet_check(rec: str, repeat: int) -> float:
    """Run in the MXNet interpreter: read and decode every record the MXNet way; seconds, best of ``repeat``."""
    import mxnet as mx

    def check() -> None:
        reader = mx.recordio.MXIndexedRecordIO(os.path.splitext(rec)[0] + ".idx", rec, "r")
        for key in reader.keys:
            _, img = mx.recordio.unpack_img(reader.read_idx(key), -1)
            if img is None:
                raise ValueError(f"record {key} does not decode")
        reader.close()

    return best_of(repeat, check)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--photos", default="bench-data/photos5000", help="photo folder (benchmarks/photoset.py)")
    parser.add_argument("--rec", help="the packed .rec (default: <photos>.rec, packed if missing)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--mxnet-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    rec = args.rec or args.photos.rstrip("/") + ".rec"
    if args.mxnet_child:
        print(json.dumps({"mxnet": mxnet_check(rec, args.repeat)}))
        return 0

    import cv2
    import numpy as np
    import simplejpeg

    from mxrec.doctor.contents import available_cores
    from mxrec.doctor.verify_dataset import verify_dataset

    if not os.path.exists(rec):
        pack_photos(args.photos, rec)
    images = image_bytes(rec)
    count, cores = len(images), available_cores()
    cv2.setNumThreads(1)

    def simplejpeg_loop() -> None:
        for data in images:
            simplejpeg.decode_jpeg(data, "BGR")

    def opencv_loop() -> None:
        for data in images:
            cv2.imdecode(np.frombuffer(data, np.uint8), -1)

    def verify(decode: bool, workers: int | None = None) -> None:
        report = verify_dataset(rec, decode=decode, workers=workers)
        if not report.ok:
            raise RuntimeError(report.format_text())

    seconds = {
        "bare decode, 1 thread (simplejpeg)": best_of(args.repeat, simplejpeg_loop),
        "bare decode, 1 thread (cv2.imdecode)": best_of(args.repeat, opencv_loop),
        "verify, headers only (all cores)": best_of(args.repeat, lambda: verify(False)),
        "verify --decode, 1 worker": best_of(args.repeat, lambda: verify(True, 1)),
        "verify --decode (all cores)": best_of(args.repeat, lambda: verify(True)),
    }
    mxnet_python = os.environ.get("MXREC_BENCH_MXNET_PYTHON")
    if mxnet_python:
        out = subprocess.run([mxnet_python, __file__, "--mxnet-child", "--rec", rec, "--repeat", str(args.repeat)],
                             capture_output=True, text=True, check=True)
        seconds["MXNet read_idx + unpack_img, 1 thread"] = json.loads(out.stdout.strip().splitlines()[-1])["mxnet"]

    ideal = count / seconds["bare decode, 1 thread (simplejpeg)"] * cores
    print(f"mxrec verify benchmark: {count} photos ({os.path.getsize(rec) / 2**20:.0f} MiB) in {rec}, "
          f"{cores} cores, best of {args.repeat}")
    print(f"anchor: bare single-thread decode x {cores} cores = {ideal:.0f} images/s")
    header = f"{'workload':42} {'seconds':>8} {'images/s':>9} {'vs anchor':>10}"
    print(header)
    print("-" * len(header))
    for name, s in seconds.items():
        print(f"{name:42} {s:8.2f} {count / s:9.0f} {count / s / ideal:9.0%}")
    mx = seconds.get("MXNet read_idx + unpack_img, 1 thread")
    if mx:
        print(f"verify --decode (all cores) is {mx / seconds['verify --decode (all cores)']:.1f}x "
              "the hand-written MXNet check")
    else:
        print("(set MXREC_BENCH_MXNET_PYTHON to an interpreter that imports mxnet for the MXNet row)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
