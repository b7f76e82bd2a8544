"""Training-pipeline throughput: mxrec.ImageRecordIter against real MXNet and against bare JPEG decoding.

    python benchmarks/bench_iter.py --photos bench-data/photos5000
    MXREC_BENCH_MXNET_PYTHON=/work/mxnet-venv/bin/python python benchmarks/bench_iter.py --photos ...

The record file (shorter side 256, JPEG quality 95, one class per folder) is
built once from the photo folder (``benchmarks/photoset.py`` makes one) into
``bench-data/``. Two workloads, batch 128, 224x224, ImageNet mean/std:

* train: ``random_resized_crop`` (area 0.08-1, aspect 3/4-4/3), ``rand_mirror``, shuffled;
* val:   ``resize=256`` and the centre 224x224 crop.

Each runs with float32 and uint8 output on 2 threads. In the same run, when
``MXREC_BENCH_MXNET_PYTHON`` names an interpreter with MXNet, the same
iterator settings run in MXNet with its default ``ctx`` and with ``ctx='cpu'``
and ``OMP_NUM_THREADS=2``; and bare JPEG decoding (simplejpeg, nothing else)
runs on 1 and 2 threads. Throughput is measured in steady state: the first 8
batches (thread start, buffer allocation and first page faults) are not timed,
for MXNet as for mxrec. Measurements are interleaved over ``--rounds`` rounds
and the best of each is kept (the machine may be shared). Bars: float32 >=
1.5x MXNet's best; uint8 >= 85% of bare decoding on 2 threads.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import cv2
import simplejpeg

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

from mxrec import RecordReader, RecordWriter
from mxrec.format.header import IRHeader, pack, unpack_header
from mxrec.image.codec import encode_image
from mxrec.train import ImageRecordIter

HERE = os.path.dirname(os.path.abspath(__file__))
MEAN_STD = dict(mean_r=123.68, mean_g=116.779, mean_b=103.939, std_r=58.393, std_g=57.12, std_b=57.375)
WORKLOADS = {
    "train": dict(random_resized_crop=True, min_random_area=0.08, max_random_area=1.0, min_aspect_ratio=0.75,
                  max_aspect_ratio=4 / 3, rand_mirror=True, shuffle=True),
    "val": dict(resize=256),
}
COMMON = dict(data_shape=(3, 224, 224), batch_size=128, **MEAN_STD)
THREADS = 2
WARMUP = 8  # batches before timing starts: threads started, buffers allocated and first touched


def build_rec(photos: str, rec: str, short_side: int = 256) -> None:
    """Pack every JPEG under ``photos/<class>/`` with its shorter side scaled to ``short_side``."""
    classes = sorted(d for d in os.listdir(photos) if os.path.isdir(os.path.join(photos, d)))
    files = [(label, os.path.join(photos, c, f)) for label, c in enumerate(classes)
             for f in sorted(os.listdir(os.path.join(photos, c)))]
    os.makedirs(os.path.dirname(rec) or ".", exist_ok=True)
    with RecordWriter(rec, index=True, atomic=True) as writer:
        for record_id, (label, path) in enumerate(files):
            img = cv2.imread(path, cv2.IMREAD_COLOR)
            height, width = img.shape[:2]
            scale = short_side / min(height, width)
            size = (max(short_side, round(width * scale)), max(short_side, round(height * scale)))
            img = cv2.resize(img, size, interpolation=cv2.INTER_AREA)
            writer.write(pack(IRHeader(0, float(label), record_id, 0), encode_image(img, ".jpg", 95)), key=record_id)


def bare_decode_rate(payloads: list[bytes], threads: int) -> float:
    """Images per second decoding ``payloads`` with simplejpeg and nothing else."""
    def decode(chunk: list[bytes]) -> None:
        for p in chunk:
            simplejpeg.decode_jpeg(p, colorspace="BGR")
    chunks = [payloads[i::threads] for i in range(threads)]
    start = time.perf_counter()
    if threads == 1:
        decode(payloads)
    else:
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(decode, chunks))
    return len(payloads) / (time.perf_counter() - start)


def mxrec_rate(rec: str, workload: str, dtype: str, images: int) -> float:
    """Images per second of mxrec.ImageRecordIter in steady state (the first WARMUP batches not timed)."""
    with ImageRecordIter(path_imgrec=rec, preprocess_threads=THREADS, dtype=dtype, **COMMON,
                         **WORKLOADS[workload]) as it:
        for _ in range(WARMUP):
            it.next()
        done = 0
        start = time.perf_counter()
        while done < images:
            try:
                done += len(it.next().data[0])
            except StopIteration:
                it.reset()
        return done / (time.perf_counter() - start)


def mxnet_rate(python: str, rec: str, workload: str, dtype: str, ctx: str, images: int) -> float | None:
    """Images per second of MXNet's ImageRecordIter in a subprocess, or None if it failed."""
    params = dict(path_imgrec=rec, images=images, warmup=WARMUP, preprocess_threads=THREADS, ctx=ctx, dtype=dtype,
                  **{**COMMON, "data_shape": list(COMMON["data_shape"])}, **WORKLOADS[workload])
    env = dict(os.environ)
    if ctx == "cpu":
        env["OMP_NUM_THREADS"] = str(THREADS)
    result = subprocess.run([python, os.path.join(HERE, "mxnet_iter_rate.py"), json.dumps(params)],
                            capture_output=True, text=True, env=env, timeout=600)
    if result.returncode != 0:
        print(f"  MXNet failed ({workload} {dtype} ctx={ctx}): {result.stderr.strip()[-300:]}", file=sys.stderr)
        return None
    return json.loads(result.stdout.strip().splitlines()[-1])["rate"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--photos", default="bench-data/photos5000", help="photo folder (one subfolder per class)")
    parser.add_argument("--rec", default="bench-data/photos5000_256.rec")
    parser.add_argument("--images", type=int, default=5120, help="images timed per measurement")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)

    if not os.path.exists(args.rec):
        if not os.path.isdir(args.photos):
            parser.error(f"no {args.rec} and no photo folder {args.photos} (make one with benchmarks/photoset.py)")
        start = time.perf_counter()
        build_rec(args.photos, args.rec)
        print(f"built {args.rec} in {time.perf_counter() - start:.1f} s")
    reader = RecordReader(args.rec)
    payloads = [bytes(view[unpack_header(view)[1]:]) for view in map(reader.view, range(len(reader)))]
    mxnet_python = os.environ.get("MXREC_BENCH_MXNET_PYTHON")
    print(f"{args.rec}: {len(reader)} records, {os.path.getsize(args.rec) / 1e6:.0f} MB; "
          f"{os.cpu_count()} CPUs; MXNet: {mxnet_python or 'not run (set MXREC_BENCH_MXNET_PYTHON)'}")

    best: dict[tuple, float] = {}

    def keep(key: tuple, rate: float | None) -> None:
        if rate is not None:
            best[key] = max(best.get(key, 0.0), rate)

    for round_number in range(args.rounds):
        print(f"round {round_number + 1}/{args.rounds} ...", flush=True)
        for threads in (1, THREADS):
            keep(("decode", threads), bare_decode_rate(payloads, threads))
        for workload in WORKLOADS:
            for dtype in ("float32", "uint8"):
                keep(("mxrec", workload, dtype), mxrec_rate(args.rec, workload, dtype, args.images))
                if mxnet_python:
                    for ctx in ("gpu", "cpu"):
                        keep(("mxnet", workload, dtype, ctx),
                             mxnet_rate(mxnet_python, args.rec, workload, dtype, ctx, args.images))

    decode1, decode2 = best[("decode", 1)], best[("decode", THREADS)]
    print(f"\nbare JPEG decode (simplejpeg): {decode1:7.0f} img/s on 1 thread, {decode2:7.0f} img/s on {THREADS}")
    header = (f"{'workload':8} {'dtype':8} {'mxrec':>7} {'MXNet':>7} {'MXNet':>7} {'mxrec/':>7} "
              f"{'mxrec/':>8} {'mxrec/':>8}  bar")
    print(header)
    print(f"{'':8} {'':8} {'2 thr':>7} {'default':>7} {'cpu,2':>7} {'MXNet':>7} {'decode1':>8} {'decode2':>8}")
    failed = False
    for workload in WORKLOADS:
        for dtype in ("float32", "uint8"):
            ours = best[("mxrec", workload, dtype)]
            default = best.get(("mxnet", workload, dtype, "gpu"))
            cpu = best.get(("mxnet", workload, dtype, "cpu"))
            mx_best = max([r for r in (default, cpu) if r is not None], default=None)
            vs_mx = f"{ours / mx_best:6.2f}x" if mx_best else "      -"
            if dtype == "float32":
                ok = mx_best is None or ours >= 1.5 * mx_best
                bar = "float32 >= 1.5x MXNet best: " + ("PASS" if ok else "FAIL") + ("" if mx_best else " (no MXNet)")
            else:
                ok = ours >= 0.85 * decode2
                bar = f"uint8 >= 85% of decode on {THREADS} threads: " + ("PASS" if ok else "FAIL")
            failed |= not ok
            show = lambda r: f"{r:7.0f}" if r else "      -"  # noqa: E731
            print(f"{workload:8} {dtype:8} {ours:7.0f} {show(default)} {show(cpu)} {vs_mx} "
                  f"{ours / decode1:7.0%} {ours / decode2:8.0%}  {bar}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
