"""Training-pipeline throughput: mxrec.ImageRecordIter against its own limit and against real MXNet.

    python benchmarks/bench_iter.py --photos bench-data/photos5000
    MXREC_BENCH_MXNET_PYTHON=/work/mxnet-venv/bin/python python benchmarks/bench_iter.py --photos ...

The record file (shorter side 256, JPEG quality 95, one class per folder) is
built once from the photo folder (``benchmarks/photoset.py`` makes one) into
``bench-data/``. Two workloads, batch 128, 224x224, ImageNet mean/std:

* train: ``random_resized_crop`` (area 0.08-1, aspect 3/4-4/3), ``rand_mirror``, shuffled;
* val:   ``resize=256`` and the centre 224x224 crop.

Each runs with float32 and uint8 output on 2 threads. Columns:

* limit: bare threads (the same count) doing only what the pipeline must, with
  none of its machinery: decode (simplejpeg into a reused buffer, the
  pipeline's decoder), the same crop/resize (train: a random box resized to
  224x224 bilinear; val: the centre crop), then one mirror+normalize into a
  preallocated batch (``cv2.split`` into planes, flipped in place, and for
  float32 ``(pixel - mean) * (1 / std)`` in float32, the pipeline's kernels)
  -- random boxes and coins drawn beforehand;
* mxrec: ``mxrec.ImageRecordIter``;
* MXNet: when ``MXREC_BENCH_MXNET_PYTHON`` names an interpreter with MXNet,
  the same iterator settings in MXNet with its default ``ctx`` and with
  ``ctx='cpu'`` and ``OMP_NUM_THREADS=2``.

``--tiny`` measures instead what the per-sample overhead costs (issue 26 section 4): ImageRecordIter on 5000
generated tiny JPEGs (``--tiny-size`` 32, or 16 as in the issue: ``bench-data/tiny<size>.rec``, built on first
use), batch 128, on 1 and 2 threads and on 1 and 2 worker processes (``preprocess_processes``, one thread
each), float32 and uint8, three workloads: ``tiny-val`` (the image as it is),
``tiny-crop`` (a random crop 4 pixels smaller, and mirror) and ``tiny-cifar`` (4 pixels of padding, a random crop
back to the size, mirror, brightness). Decoding a tiny JPEG costs about as much as the Python around it, so this
is where a per-sample cost shows first. With ``MXREC_BENCH_MXNET_PYTHON`` the same settings run in MXNet
(``ctx='cpu'``, ``OMP_NUM_THREADS`` = the thread count) in the same round, and the table gives mxrec/MXNet.
Columns: images/s of wall time, microseconds of this process's CPU time per image (every thread), and for
mxrec the serial fraction ``f`` that Amdahl's law gives for the measured 1-to-2-thread speed-up ``S``
(``f = 2 / S - 1``) and the rate it projects for 64 threads (``rate_1 / (f + (1 - f) / 64)``), the same for
1 -> 2 processes, and each row's ratio to mxrec's 2 threads (the CPU column counts the workers' CPU time, from
``/proc``). Bar: mxrec >= 1.0x MXNet on 2 threads (float32); shown, not required, for 2 processes.

Throughput is measured in steady state: the first 8 batches (thread start,
buffer allocation and first page faults) are not timed, for MXNet as for
mxrec. Each round measures every row and column one after another (the machine
may be shared), the limit and mxrec alternating ``--repeat`` times (best kept);
every round is printed. Bars, in every round: mxrec >= 90% of
the limit (all rows); float32 >= 1.5x MXNet's best.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import cv2
import numpy as np
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


def tiny_workloads(size: int) -> dict[str, dict]:
    """The ``--tiny`` workloads for ``size`` x ``size`` images (see the module doc)."""
    return {
        "tiny-val": dict(data_shape=(3, size, size)),
        "tiny-crop": dict(data_shape=(3, size - 4, size - 4), rand_crop=True, rand_mirror=True, shuffle=True),
        "tiny-cifar": dict(data_shape=(3, size, size), pad=4, rand_crop=True, rand_mirror=True, brightness=0.2,
                           shuffle=True),
    }


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


def build_tiny_rec(rec: str, count: int = 5000, size: int = 32) -> None:
    """``count`` generated ``size`` x ``size`` JPEGs (smooth colour blobs and noise, quality 90), 10 classes."""
    rng = np.random.default_rng(0)
    os.makedirs(os.path.dirname(rec) or ".", exist_ok=True)
    with RecordWriter(rec, index=True, atomic=True) as writer:
        for record_id in range(count):
            small = rng.integers(0, 256, (4, 4, 3)).astype(np.uint8)
            img = cv2.resize(small, (size, size), interpolation=cv2.INTER_CUBIC).astype(np.int16)
            img = np.clip(img + rng.integers(-12, 13, img.shape), 0, 255).astype(np.uint8)
            writer.write(pack(IRHeader(0, float(record_id % 10), record_id, 0), encode_image(img, ".jpg", 90)),
                         key=record_id)


def tiny_rates(params: dict, images: int) -> tuple[float, float]:
    """ImageRecordIter's images per second of wall time and per second of this process's CPU time (all its
    threads), in steady state: the CPU rate is what the per-sample work costs, whatever else the machine runs."""
    with ImageRecordIter(**params) as it:
        for _ in range(WARMUP):
            it.next()
        workers = getattr(it._pipeline, "pids", [])  # worker processes' CPU time counts too
        done = 0
        wall, cpu = time.perf_counter(), time.process_time() + workers_cpu(workers)
        while done < images:
            try:
                done += len(it.next().data[0])
            except StopIteration:
                it.reset()
        return done / (time.perf_counter() - wall), done / (time.process_time() + workers_cpu(workers) - cpu)


def workers_cpu(pids: list[int]) -> float:
    """Seconds of CPU time (user + system) the processes ``pids`` have used (Linux ``/proc``; 0 elsewhere)."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime: fields 14 and 15 of stat(5)
    return total / os.sysconf("SC_CLK_TCK") if pids else 0.0


def mxnet_tiny_rates(python: str, params: dict, threads: int, images: int) -> tuple[float, float] | None:
    """MXNet's ``(wall, cpu)`` images per second for the same parameters (``ctx='cpu'``), or None if it failed."""
    params = dict(params, images=images, warmup=WARMUP, ctx="cpu", data_shape=list(params["data_shape"]))
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    result = subprocess.run([python, os.path.join(HERE, "mxnet_iter_rate.py"), json.dumps(params)],
                            capture_output=True, text=True, env=env, timeout=600)
    if result.returncode != 0:
        print(f"  MXNet failed ({params}): {result.stderr.strip()[-300:]}", file=sys.stderr)
        return None
    measured = json.loads(result.stdout.strip().splitlines()[-1])
    return measured["rate"], measured["cpu_rate"]


def bare_decode_us(rec: str) -> float:
    """Microseconds of CPU time per image that decoding alone costs (one ``simplejpeg.decode_jpeg`` call, one
    thread, as the pipeline decodes a small image): the part of a sample that runs without the GIL."""
    reader = RecordReader(rec)
    payloads = [bytes(view[unpack_header(view)[1]:]) for view in map(reader.view, range(len(reader)))]
    best = math.inf
    for _ in range(3):
        start = time.process_time()
        for payload in payloads:
            simplejpeg.decode_jpeg(payload, colorspace="BGR")
        best = min(best, time.process_time() - start)
    return best / len(payloads) * 1e6


def amdahl(one: float, two: float) -> tuple[float, float]:
    """The serial fraction Amdahl's law gives for the 1- and 2-thread rates, and the rate it projects on 64."""
    serial = min(1.0, max(0.0, 2 * one / two - 1))
    return serial, one / (serial + (1 - serial) / 64)


def run_name(threads: int, processes: int) -> str:
    """``t2``: 2 threads, ``p2``: 2 worker processes."""
    return f"p{processes}" if processes else f"t{threads}"


def tiny_main(args: argparse.Namespace) -> int:
    """``--tiny``: ImageRecordIter (and MXNet) on tiny images, 1 and 2 threads, every round printed, then the
    best of the rounds with the serial fraction and the 64-thread projection."""
    rec = args.tiny_rec or f"bench-data/tiny{args.tiny_size}.rec"
    if not os.path.exists(rec):
        build_tiny_rec(rec, size=args.tiny_size)
    workloads = {name: params for name, params in tiny_workloads(args.tiny_size).items()
                 if not args.tiny_workloads or name in args.tiny_workloads.split(",")}
    mxnet_python = os.environ.get("MXREC_BENCH_MXNET_PYTHON")
    # (workload, dtype, threads, processes): 1 and 2 threads, then 1 and 2 worker processes of 1 thread each
    rows = [(workload, dtype, threads, processes) for workload in workloads for dtype in ("float32", "uint8")
            for threads, processes in ((1, 0), (2, 0), (1, 1), (1, 2))]
    best: dict[tuple, list[float]] = {}  # row -> [wall, cpu, MXNet wall, MXNet cpu]
    print(f"{rec}; batch 128, {args.images} images a measurement, {os.cpu_count()} CPUs; MXNet: "
          f"{mxnet_python or 'not run (set MXREC_BENCH_MXNET_PYTHON)'}")
    header = (f"{'round':5} {'workload':10} {'dtype':7} {'run':>3} {'mxrec/s':>8} {'us/img':>6} {'MXNet/s':>8} "
              f"{'us/img':>6} {'ratio':>6}")
    print(header + "   (images/s of wall time; us of CPU time per image, every thread)")
    show = lambda rate, width: f"{rate:{width}.0f}" if rate else " " * (width - 1) + "-"  # noqa: E731
    for number in range(1, args.rounds + 1):
        for row in rows:
            workload, dtype, threads, processes = row
            params = dict(path_imgrec=rec, batch_size=128, preprocess_threads=threads, dtype=dtype,
                          preprocess_processes=processes, **MEAN_STD, **workloads[workload])
            wall, cpu = (max(rates) for rates in zip(*(tiny_rates(params, args.images) for _ in range(args.repeat)),
                                                     strict=True))
            mx_wall = mx_cpu = 0.0
            if mxnet_python and not processes:  # (processes are compared with MXNet's threads, same count)
                measured = mxnet_tiny_rates(mxnet_python, params, threads, args.images)
                mx_wall, mx_cpu = measured or (0.0, 0.0)
            old = best.setdefault(row, [0.0, 0.0, 0.0, 0.0])
            best[row] = [max(a, b) for a, b in zip(old, (wall, cpu, mx_wall, mx_cpu), strict=True)]
            ratio = f"{wall / mx_wall:5.2f}x" if mx_wall else "     -"
            print(f"{number:5} {workload:10} {dtype:7} {run_name(threads, processes):>3} {wall:8.0f} {1e6 / cpu:6.1f} "
                  f"{show(mx_wall, 8)} "
                  f"{show(mx_cpu and 1e6 / mx_cpu, 6)} {ratio}", flush=True)
    decode = bare_decode_us(rec)
    print(f"\nbest of {args.rounds} rounds; run: t1/t2 threads, p1/p2 worker processes (1 thread each); ratio: "
          f"to MXNet's threads of the same count; vs t2: to mxrec's 2 threads; f: serial fraction (Amdahl, from "
          f"1 -> 2 threads or processes), 64: projected images/s on 64 of them; on t1, f: the share of a sample's "
          f"CPU time outside the decoder (bare decoding: {decode:.1f} us/img), an upper bound on the GIL's")
    print(f"{'workload':10} {'dtype':7} {'run':>3} {'mxrec/s':>8} {'us/img':>6} {'MXNet/s':>8} {'us/img':>6} "
          f"{'ratio':>6} {'vs t2':>6} {'f':>5} {'64':>8}  bar")
    failed = False
    for row in rows:
        workload, dtype, threads, processes = row
        wall, cpu, mx_wall, mx_cpu = best[row]
        count = max(threads, processes)
        if processes:  # compared with MXNet on as many threads as there are processes
            mx_wall, mx_cpu = best[workload, dtype, count, 0][2:]
        ratio = f"{wall / mx_wall:5.2f}x" if mx_wall else "     -"
        versus = f"{wall / best[workload, dtype, 2, 0][0]:5.2f}x"
        extra, bar = "", ""
        if count == 1 and not processes:
            serial = max(0.0, 1 - decode * cpu / 1e6)
            extra = f"{serial:5.2f} {wall / (serial + (1 - serial) / 64):8.0f}"
        if count == 2:
            serial, projected = amdahl(best[workload, dtype, 1, processes and 1][0], wall)
            extra = f"{serial:5.2f} {projected:8.0f}"
            if mx_wall and dtype == "float32":
                bar = f">= 1.0x MXNet: {'PASS' if wall >= mx_wall else 'FAIL'}"
                failed |= wall < mx_wall and not processes
        print(f"{workload:10} {dtype:7} {run_name(threads, processes):>3} {wall:8.0f} {1e6 / cpu:6.1f} "
              f"{show(mx_wall, 8)} "
              f"{show(mx_cpu and 1e6 / mx_cpu, 6)} {ratio} {versus} {extra:14}  {bar}")
    return 1 if failed else 0


def limit_rate(payloads: list[bytes], workload: str, dtype: str, images: int) -> float:
    """Images per second of bare threads doing only the pipeline's work (see the module doc)."""
    _, height, width = COMMON["data_shape"]
    rng = np.random.default_rng(0)
    count = len(payloads)
    # The random draws of the train workload, made beforehand: area and aspect, then the place (as fractions).
    area = rng.uniform(0.08, 1.0, count)
    aspect = rng.uniform(0.75, 4 / 3, count)
    place = rng.random((count, 2))
    mirror = rng.random(count) < 0.5
    mean = np.array([MEAN_STD["mean_r"], MEAN_STD["mean_g"], MEAN_STD["mean_b"]], np.float32).reshape(3, 1, 1)
    scale = np.float32(1) / np.array([MEAN_STD["std_r"], MEAN_STD["std_g"], MEAN_STD["std_b"]],
                                     np.float32).reshape(3, 1, 1)
    batch_size = COMMON["batch_size"]

    # Each thread's memory, allocated and touched before the clock starts (the pipeline's buffers are warm too).
    memory = [(np.full(1 << 21, 0, np.uint8), np.full((3, height, width), 0, np.uint8),
               np.full((batch_size, 3, height, width), 0, dtype)) for _ in range(THREADS)]  # full: pages touched

    def work(first: int, stop: int = images) -> None:
        decoded, planes, batch = memory[first]
        for n in range(first, stop, THREADS):
            i = n % count
            p = payloads[i]
            h, w = simplejpeg.decode_jpeg_header(p)[:2]
            img = simplejpeg.decode_jpeg(p, colorspace="BGR", buffer=decoded[:h * w * 3])
            if workload == "train":
                crop_w = min(w, round(math.sqrt(h * w * area[i] * aspect[i])))
                crop_h = min(h, round(math.sqrt(h * w * area[i] / aspect[i])))
                y, x = int(place[i, 0] * (h - crop_h)), int(place[i, 1] * (w - crop_w))
                img = cv2.resize(img[y:y + crop_h, x:x + crop_w], (width, height), interpolation=cv2.INTER_LINEAR)
            else:
                y, x = (h - height) // 2, (w - width) // 2
                img = img[y:y + height, x:x + width]
            slot = batch[n // THREADS % batch_size]
            target = slot if dtype == "uint8" else planes
            cv2.split(img, [target[2], target[1], target[0]])
            if workload == "train" and mirror[i]:
                stacked = target.reshape(-1, width)
                cv2.flip(stacked, 1, dst=stacked)
            if dtype != "uint8":
                np.subtract(planes, mean, out=slot, dtype=np.float32)
                np.multiply(slot, scale, out=slot)

    for first in range(THREADS):  # warm-up: code paths, the caches of OpenCV and numpy
        work(first, 2 * batch_size)
    start = time.perf_counter()
    with ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(work, range(THREADS)))
    return images / (time.perf_counter() - start)


def mxrec_rate(rec: str, workload: str, dtype: str, images: int) -> float:
    """Images per second of mxrec.ImageRecordIter in steady state (the first WARMUP batches not timed)."""
    return iterator_rate(dict(path_imgrec=rec, preprocess_threads=THREADS, dtype=dtype, **COMMON,
                              **WORKLOADS[workload]), images)


def iterator_rate(params: dict, images: int) -> float:
    """Images per second of ``ImageRecordIter(**params)`` in steady state (the first WARMUP batches not timed)."""
    with ImageRecordIter(**params) as it:
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
    parser.add_argument("--repeat", type=int, default=2, help="limit/mxrec alternations per round (best kept)")
    parser.add_argument("--tiny", action="store_true", help="ImageRecordIter alone on tiny 32x32 images")
    parser.add_argument("--tiny-size", type=int, default=32, help="side of the --tiny JPEGs (the issue's: 16)")
    parser.add_argument("--tiny-rec", default="", help="default: bench-data/tiny<size>.rec")
    parser.add_argument("--tiny-workloads", default="", help="comma-separated: tiny-val,tiny-crop,tiny-cifar (all)")
    args = parser.parse_args(argv)
    if args.tiny:
        return tiny_main(args)

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

    rows = [(workload, dtype) for workload in WORKLOADS for dtype in ("float32", "uint8")]
    rounds: list[dict[tuple, float | None]] = []
    for round_number in range(args.rounds):
        print(f"round {round_number + 1}/{args.rounds} ...", file=sys.stderr, flush=True)
        measured: dict[tuple, float | None] = {}
        for workload, dtype in rows:
            # limit and mxrec alternate --repeat times (best kept): close in time, the same conditions
            for _ in range(args.repeat):
                for side in ("limit", "mxrec"):
                    if side == "limit":
                        rate = limit_rate(payloads, workload, dtype, args.images)
                    else:
                        rate = mxrec_rate(args.rec, workload, dtype, args.images)
                    measured[side, workload, dtype] = max(measured.get((side, workload, dtype)) or 0.0, rate)
            if mxnet_python:
                for ctx in ("gpu", "cpu"):
                    measured[("mxnet", workload, dtype, ctx)] = mxnet_rate(mxnet_python, args.rec, workload, dtype,
                                                                           ctx, args.images)
        rounds.append(measured)

    print(f"\nimages/s on {THREADS} threads, {args.images} images a measurement; one block per round")
    header = (f"{'round':5} {'workload':8} {'dtype':8} {'limit':>7} {'mxrec':>7} {'mxrec/':>7} {'MXNet':>7} "
              f"{'MXNet':>7} {'mxrec/':>7}  bars")
    print(header)
    print(f"{'':5} {'':8} {'':8} {'':>7} {'':>7} {'limit':>7} {'default':>7} {'cpu,2':>7} {'MXNet':>7}")
    failed = False
    show = lambda r: f"{r:7.0f}" if r else "      -"  # noqa: E731
    for number, measured in enumerate(rounds, 1):
        for workload, dtype in rows:
            limit, ours = measured[("limit", workload, dtype)], measured[("mxrec", workload, dtype)]
            default = measured.get(("mxnet", workload, dtype, "gpu"))
            cpu = measured.get(("mxnet", workload, dtype, "cpu"))
            mx_best = max([r for r in (default, cpu) if r is not None], default=None)
            bars = [f">= 90% of limit: {'PASS' if ours >= 0.9 * limit else 'FAIL'}"]
            failed |= ours < 0.9 * limit
            if dtype == "float32" and mx_best:
                bars.append(f">= 1.5x MXNet: {'PASS' if ours >= 1.5 * mx_best else 'FAIL'}")
                failed |= ours < 1.5 * mx_best
            vs_mx = f"{ours / mx_best:6.2f}x" if mx_best else "      -"
            print(f"{number:5} {workload:8} {dtype:8} {limit:7.0f} {ours:7.0f} {ours / limit:7.0%} {show(default)} "
                  f"{show(cpu)} {vs_mx}  {'; '.join(bars)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
