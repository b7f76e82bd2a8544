"""What checksums cost (issue 22 §4: "readers check each block the first time they read it, at <= 3 % of read
throughput"), measured against the same reads without checksums, in the same run. mxrec's checksums are a CRC-32C
per record (:mod:`mxrec.format.checksums`).

Rows (each the best of ``--repeat``; a fresh reader every time, so that every record is checked again):

* **ImageRecordIter epoch**: one epoch of ``ImageRecordIter`` (decode, random crop, mirror, 2 threads) over the
  photo records: the read throughput that training sees;
* **read_batch, shuffled**: every record fetched in shuffled batches of 256 and copied (``read_batch``): the
  bare read path, no decoding: the worst case, every byte hashed once for every byte copied;
* **fetch views, in order**: views of every record in order, each touched (its first byte): the mapping only;
* **write (RecordWriter)**: writing the records with and without computing the checksums.

``benchmarks/bench_convert.py`` measures ``convert`` (whose writing thread sums what it reads back) against ``cp``.

    python benchmarks/bench_checksums.py --records 3000
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

import mxrec
from bench_convert import make_records
from mxrec.format.checksums import checksums_path


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=3000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        rec = folder / "photos.rec"
        make_records(rec, args.records)
        from mxrec.io.checksummed import write_checksums

        write_checksums(str(rec))
        size = rec.stat().st_size
        payloads = mxrec.RecordReader(rec, checksums=False).read_batch(range(args.records))
        order = np.random.default_rng(0).permutation(args.records)
        rows = []

        def iter_epoch(checked: bool) -> None:
            it = mxrec.ImageRecordIter(path_imgrec=str(rec), data_shape=(3, 224, 224), batch_size=64,
                                       shuffle=True, rand_crop=True, rand_mirror=True, preprocess_threads=2,
                                       seed=1)
            for _ in it:
                pass

        def reader(checked: bool) -> mxrec.Records:
            return mxrec.RecordReader(rec, checksums=None if checked else False)

        def shuffled(checked: bool) -> None:
            r = reader(checked)
            for first in range(0, args.records, 256):
                r.read_batch(order[first:first + 256])

        def views(checked: bool) -> None:
            r = reader(checked)
            for first in range(0, args.records, 256):
                for view in r.fetch(range(first, min(args.records, first + 256))):
                    view[0] if len(view) else None

        def write(checked: bool) -> None:
            out = folder / "w.rec"
            with mxrec.RecordWriter(out, index=True, checksums=checked) as writer:
                writer.write_batch(payloads)

        # the iterator opens its dataset itself: with checksums, the sidecar beside; without, it is moved away
        sidecar = Path(checksums_path(rec))
        for name, fn in [("ImageRecordIter epoch", iter_epoch), ("read_batch, shuffled", shuffled),
                         ("fetch views, in order", views), ("write (RecordWriter)", write)]:
            times = {}
            for checked in (False, True):
                if name == "ImageRecordIter epoch" and not checked:
                    sidecar.rename(folder / "aside")
                try:
                    times[checked] = best(lambda fn=fn, checked=checked: fn(checked), args.repeat)
                finally:
                    if (folder / "aside").exists():
                        (folder / "aside").rename(sidecar)
            rows.append((name, size / times[False] / 1e6, size / times[True] / 1e6, times[True] / times[False] - 1))
    print(f"{args.records} photo records, {size / 1e6:.0f} MB, best of {args.repeat}; checksums: CRC-32C per record")
    print(f"{'':26} {'without MB/s':>13} {'with MB/s':>10} {'cost':>7}")
    for name, without, with_, cost in rows:
        print(f"{name:26} {without:13.0f} {with_:10.0f} {cost:+7.1%}")


if __name__ == "__main__":
    main()
