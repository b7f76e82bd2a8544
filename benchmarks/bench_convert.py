"""Benchmark ``mxrec convert`` each way against ``cp`` of the same bytes and against the obvious script.

For each format (WebDataset, Parquet, TFRecord, ArrayRecord) and each direction it times, in
the same run and on the same generated photo records (JPEG, 300-500 px,
quality 90; one ``.rec`` + ``.idx``):

* **cp**: ``cp`` of the source file(s): the physical limit of reading and
  writing those bytes on this machine;
* **mxrec**: ``mxrec.convert`` (pass-through: the bytes are carried, the
  headers checked);
* **script**: what a user would write. Leaving RecordIO: read with
  ``mxrec.recordio.MXIndexedRecordIO`` + ``unpack``, write with the target
  library's own writer (``webdataset.TarWriter``; ``datasets.Dataset.from_dict``
  + ``to_parquet``; ``tfrecord.TFRecordWriter``; ``ArrayRecordWriter`` of
  protobuf ``Example`` messages). Coming to RecordIO: read with the library
  (``webdataset.WebDataset``; ``datasets.load_dataset``;
  ``tfrecord.tfrecord_loader``; ``ArrayRecordReader`` and ``Example.FromString``),
  write with ``MXIndexedRecordIO.write_idx(pack(...))``.

MB/s is the ``.rec`` size over the best of ``--repeat`` times (the machine may
be shared). Goal: mxrec >= 50% of cp, and faster than the script.

Fairness: every side reads its source from the page cache (it was just written or
read) and writes into a fresh, empty folder of the same file system; removing the
previous run's output is done before the clock starts, for all three (deleting
100 MB cost ~10 ms, the same for all, which made the ratios look closer to 1).
``cp`` (coreutils 9) copies with ``copy_file_range``: the kernel copies page
cache to page cache, no pass through user space. A converter that maps its
source and hands views to ``writev`` does the same one copy, so ``cp`` is the
floor for any converter that must frame the bytes, not an unreachable one.

    python benchmarks/bench_convert.py --records 1500
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import mxrec
from mxrec import recordio
from mxrec.interop.formats import get_format


def make_records(path: Path, count: int, seed: int = 0) -> None:
    """``count`` photo-like JPEG records (smooth colour fields with texture and noise), 10 classes."""
    import cv2

    rng = np.random.default_rng(seed)
    out = recordio.MXIndexedRecordIO(str(path.with_suffix(".idx")), str(path), "w")
    for i in range(count):
        h, w = int(rng.integers(300, 501)), int(rng.integers(300, 501))
        y, x = np.mgrid[0:h, 0:w].astype(np.float32)
        phase = rng.uniform(0, 6.28, 3)
        img = np.stack([127 + 90 * np.sin(x / rng.uniform(9, 40) + y / rng.uniform(9, 40) + phase[c])
                        for c in range(3)], -1)
        img += rng.normal(0, 12, img.shape)
        jpeg = cv2.imencode(".jpg", img.clip(0, 255).astype(np.uint8), [cv2.IMWRITE_JPEG_QUALITY, 90])[1].tobytes()
        out.write_idx(i, recordio.pack(recordio.IRHeader(0, float(i % 10), i, 0), jpeg))
    out.close()


def cp(src: list[Path], dst: Path) -> None:
    dst.mkdir(exist_ok=True)
    subprocess.run(["cp", *map(str, src), str(dst)], check=True)


def records_of(rec: Path):
    reader = recordio.MXIndexedRecordIO(str(rec.with_suffix(".idx")), str(rec), "r")
    for key in reader.keys:
        header, image = recordio.unpack(reader.read_idx(key))
        yield key, header, image
    reader.close()


# -- the obvious scripts, leaving RecordIO -----------------------------------------------------------


def script_to_webdataset(rec: Path, out: Path) -> None:
    import webdataset as wds

    out.mkdir(exist_ok=True)
    with wds.TarWriter(str(out / "data.tar")) as sink:
        for key, header, image in records_of(rec):
            sink.write({"__key__": str(key), "jpg": image, "cls": int(header.label)})


def script_to_parquet(rec: Path, out: Path) -> None:
    import datasets

    features = datasets.Features({"image": datasets.Image(), "label": datasets.Value("int64")})
    images, labels = [], []
    for _, header, image in records_of(rec):
        images.append({"bytes": image, "path": None})
        labels.append(int(header.label))
    ds = datasets.Dataset.from_dict({"image": images, "label": labels}, features=features)
    ds.to_parquet(str(out / "data.parquet"))


def script_to_tfrecord(rec: Path, out: Path) -> None:
    from tfrecord.writer import TFRecordWriter

    out.mkdir(exist_ok=True)
    writer = TFRecordWriter(str(out / "data.tfrecord"))
    for _, header, image in records_of(rec):
        writer.write({"image/encoded": (image, "byte"), "image/class/label": (int(header.label), "int")})
    writer.close()


def script_to_arrayrecord(rec: Path, out: Path) -> None:
    from array_record.python.array_record_module import ArrayRecordWriter
    from tfrecord import example_pb2

    out.mkdir(exist_ok=True)
    writer = ArrayRecordWriter(str(out / "data.array_record"), "group_size:1,uncompressed")
    for _, header, image in records_of(rec):
        example = example_pb2.Example()
        example.features.feature["image/encoded"].bytes_list.value.append(image)
        example.features.feature["image/class/label"].int64_list.value.append(int(header.label))
        writer.write(example.SerializeToString())
    writer.close()


# -- the obvious scripts, coming to RecordIO --------------------------------------------------------


def _write_rec(out: Path, samples) -> None:
    writer = recordio.MXIndexedRecordIO(str(out.with_suffix(".idx")), str(out), "w")
    for i, (label, image) in enumerate(samples):
        writer.write_idx(i, recordio.pack(recordio.IRHeader(0, float(label), i, 0), image))
    writer.close()


def script_from_webdataset(files: list[Path], out: Path) -> None:
    import webdataset as wds

    _write_rec(out, ((int(s["cls"]), s["jpg"]) for s in wds.WebDataset([str(f) for f in files], shardshuffle=False)))


def script_from_parquet(files: list[Path], out: Path) -> None:
    import datasets

    ds = datasets.load_dataset("parquet", data_files=[str(f) for f in files], split="train",
                               cache_dir=str(out.parent / "hf-cache"))
    ds = ds.cast_column("image", datasets.Image(decode=False))
    _write_rec(out, ((row["label"], row["image"]["bytes"]) for row in ds))


def script_from_tfrecord(files: list[Path], out: Path) -> None:
    from tfrecord.reader import tfrecord_loader

    def samples():
        for f in files:
            for example in tfrecord_loader(str(f), None):
                yield int(example["image/class/label"][0]), bytes(example["image/encoded"])

    _write_rec(out, samples())


def script_from_arrayrecord(files: list[Path], out: Path) -> None:
    from array_record.python.array_record_module import ArrayRecordReader
    from tfrecord import example_pb2

    def samples():
        for f in files:
            reader = ArrayRecordReader(str(f))
            for data in reader.read_all():
                feature = example_pb2.Example.FromString(data).features.feature
                yield feature["image/class/label"].int64_list.value[0], feature["image/encoded"].bytes_list.value[0]
            reader.close()

    _write_rec(out, samples())


SCRIPTS_TO = {"webdataset": script_to_webdataset, "parquet": script_to_parquet, "tfrecord": script_to_tfrecord,
              "arrayrecord": script_to_arrayrecord}
SCRIPTS_FROM = {"webdataset": script_from_webdataset, "parquet": script_from_parquet,
                "tfrecord": script_from_tfrecord, "arrayrecord": script_from_arrayrecord}


def fresh(folder: Path) -> Path:
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


def timed(repeat: int, folder: Path, fn) -> float:
    """The best of ``repeat`` runs of ``fn(folder)``, ``folder`` emptied before each run, outside the clock."""
    times = []
    for _ in range(repeat):
        fresh(folder)
        start = time.perf_counter()
        fn(folder)
        times.append(time.perf_counter() - start)
    return min(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1500, help="photo records to generate (default 1500)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each, best kept (default 3)")
    parser.add_argument("--formats", default="webdataset,parquet,tfrecord,arrayrecord")
    parser.add_argument("--work", help="folder for the files (default: a temporary folder)")
    args = parser.parse_args(argv)
    work = Path(args.work or tempfile.mkdtemp(prefix="mxrec-bench-convert-"))
    work.mkdir(parents=True, exist_ok=True)
    src = work / "photos.rec"
    if not src.exists():
        make_records(src, args.records)
    size = src.stat().st_size + src.with_suffix(".idx").stat().st_size
    mb = size / 1e6
    print(f"{args.records} photo records, {mb:.1f} MB ({src}); best of {args.repeat}")
    rows = []
    for fmt in args.formats.split(","):
        # leaving RecordIO
        t_cp = timed(args.repeat, work / "cp", lambda out: cp([src, src.with_suffix(".idx")], out))
        # one file each side, as the scripts and cp write (a folder output would be 16 shards)
        name = "photos" + get_format(fmt).suffix
        t_mx = timed(args.repeat, work / "mx", lambda out, name=name: mxrec.convert(src, out / name))
        t_sc = timed(args.repeat, work / "sc", lambda out, fmt=fmt: SCRIPTS_TO[fmt](src, out))
        rows.append((f".rec -> {fmt}", t_cp, t_mx, t_sc))
        # coming to RecordIO (from mxrec's own output, which the libraries read)
        made = mxrec.convert(src, fresh(work / "set") / name)
        files = [Path(f) for f in made.files]
        t_cp = timed(args.repeat, work / "cp", lambda out, files=files: cp(files, out))
        t_mx = timed(args.repeat, work / "mx", lambda out, made=made: mxrec.convert(made.manifest, out / "back.rec"))
        back = work / "mx" / "back.rec"
        exact = back.read_bytes() == src.read_bytes() and \
            back.with_suffix(".idx").read_bytes() == src.with_suffix(".idx").read_bytes()
        t_sc = timed(args.repeat, work / "sc", lambda out, fmt=fmt, files=files: SCRIPTS_FROM[fmt](files,
                                                                                                 out / "out.rec"))
        rows.append((f"{fmt} -> .rec" + ("" if exact else " (NOT EXACT)"), t_cp, t_mx, t_sc))
    header = f"{'direction':<24}{'cp MB/s':>9}{'mxrec MB/s':>12}{'script MB/s':>13}{'mxrec/cp':>10}{'mxrec/script':>14}"
    print(header)
    print("-" * len(header))
    for name, t_cp, t_mx, t_sc in rows:
        print(f"{name:<24}{mb / t_cp:>9.0f}{mb / t_mx:>12.0f}{mb / t_sc:>13.0f}{t_cp / t_mx:>9.0%}"
              f"{t_sc / t_mx:>13.1f}x")
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
