"""Benchmark ``mxrec list`` / ``mxrec pack`` against MXNet's ``tools/im2rec.py``, in the same run.

Both tools run as command lines in fresh processes (start-up included, as a
user sees it) on the same ``.lst`` of a photo folder; each workload is run
``--repeat`` times, alternating the two tools, and the best time is kept (the
machine may be shared). Every workload also checks that both tools wrote the
same bytes; the ``--fast`` rows instead report how far their pixels are from
im2rec's (mean absolute difference over all pixels, the worst image's mean,
and the largest single difference, in grey levels).

    python benchmarks/photoset.py bench-data/photos5000 --count 5000   # once
    MXREC_BENCH_MXNET_PYTHON=/path/to/mxnet-venv/bin/python \\
        python benchmarks/bench_pack.py --photos bench-data/photos5000

Without ``MXREC_BENCH_MXNET_PYTHON`` only mxrec is timed. ``im2rec.py`` is
taken from that interpreter's ``mxnet`` package (``mxnet/tools/im2rec.py``),
or from ``MXREC_BENCH_IM2REC``.

The exact resize rows with 2 workers also get a **limit** column: this file run
as a bare script in a fresh process (start-up and imports included, as for the
tools) that reads every listed file and decodes it (simplejpeg, as pack does
for plain JPEGs; OpenCV for the rest), resizes it (``cv2.resize``, the same
size rule) and encodes it (``cv2.imencode``, same quality) on the same number
of threads -- no .lst checks, no records, no output files. Bar: ``mxrec pack
--resize 256 -j 2`` >= 90% of that limit (limit seconds / mxrec seconds).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# name, mxrec arguments, im2rec.py arguments (None: an opt-in mode with no im2rec equivalent, compared with
# the row above it, whose output is im2rec's)
WORKLOADS = [
    ("list --recursive", ["list", "--recursive"], ["--list", "--recursive"]),
    ("pass-through", ["pack", "--pass-through", "-j", "1"], ["--pass-through"]),
    ("resize 256 q95, 1 worker", ["pack", "--resize", "256", "--quality", "95", "-j", "1"],
     ["--resize", "256", "--quality", "95"]),
    ("resize 256 q95, 2 workers", ["pack", "--resize", "256", "--quality", "95", "-j", "2"],
     ["--resize", "256", "--quality", "95", "--num-thread", "2"]),
    ("  same + --fast (opt-in)", ["pack", "--resize", "256", "--quality", "95", "-j", "2", "--fast"], None),
    # photos with a shorter side of 256-500 px decode at 1/2 scale only for targets up to half that
    ("resize 128 q95, 2 workers", ["pack", "--resize", "128", "--quality", "95", "-j", "2"],
     ["--resize", "128", "--quality", "95", "--num-thread", "2"]),
    ("  same + --fast (opt-in)", ["pack", "--resize", "128", "--quality", "95", "-j", "2", "--fast"], None),
]


def find_im2rec(mxnet_python: str) -> str:
    explicit = os.environ.get("MXREC_BENCH_IM2REC")
    if explicit:
        return explicit
    code = "import mxnet, os; print(os.path.join(os.path.dirname(mxnet.__file__), 'tools', 'im2rec.py'))"
    return subprocess.run([mxnet_python, "-c", code], check=True, capture_output=True, text=True).stdout.strip()


def digest(folder: Path) -> str:
    """sha256 over the .lst/.rec/.idx files of a run (names and bytes), to compare two tools' output."""
    h = hashlib.sha256()
    for path in sorted(folder.iterdir()):
        if path.suffix in (".lst", ".rec", ".idx"):
            h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def pixel_difference(rec: Path, reference: Path) -> str:
    """How far the images in ``rec`` are from those in ``reference`` (same records, same order)."""
    from mxrec import RecordReader, unpack
    from mxrec.image.codec import decode_image

    image_means, largest, total, pixels = [], 0, 0, 0
    with RecordReader(rec) as ours, RecordReader(reference) as theirs:
        for a, b in zip(ours, theirs, strict=True):
            difference = abs(decode_image(unpack(a)[1], 1).astype(int) - decode_image(unpack(b)[1], 1).astype(int))
            image_means.append(difference.mean())
            largest = max(largest, int(difference.max()))
            total += int(difference.sum())
            pixels += difference.size
    return f"pixels off by {total / pixels:.2f} (worst image {max(image_means):.2f}, max {largest})"


def run_once(command: list[str], workdir: Path, lst: Path | None, env: dict) -> tuple[float, str]:
    """Time one command in a fresh ``workdir`` (holding a copy of ``lst``); return seconds and output digest."""
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir()
    if lst is not None:
        shutil.copy(lst, workdir / "data.lst")
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"failed ({done.returncode}): {' '.join(command)}\n{done.stderr[-2000:]}")
    return seconds, digest(workdir)


def bare_codec(lst: str, root: str, resize: int, quality: int, threads: int) -> None:
    """The limit: read, decode, resize, encode every listed image on ``threads`` threads, nothing else."""
    from concurrent.futures import ThreadPoolExecutor

    import cv2
    import numpy as np
    import simplejpeg

    cv2.setNumThreads(1)
    paths = [os.path.join(root, line.rstrip("\n").split("\t")[-1]) for line in open(lst)]

    def work(first: int) -> None:
        for path in paths[first::threads]:
            with open(path, "rb") as f:
                data = f.read()
            try:
                img = simplejpeg.decode_jpeg(data, "BGR")
            except ValueError:
                img = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
            height, width = img.shape[:2]
            size = (resize, resize * height // width) if height > width else (resize * width // height, resize)
            cv2.imencode(".jpg", cv2.resize(img, size), [cv2.IMWRITE_JPEG_QUALITY, quality])

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(work, range(threads)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--photos", default=str(REPO / "bench-data" / "photos5000"), help="image folder")
    parser.add_argument("--repeat", type=int, default=3, help="runs per tool and workload (best kept)")
    parser.add_argument("--bare", nargs=5, help=argparse.SUPPRESS)  # lst root resize quality threads
    args = parser.parse_args()
    if args.bare:
        lst, root, resize, quality, threads = args.bare
        bare_codec(lst, root, int(resize), int(quality), int(threads))
        return
    photos = Path(args.photos).resolve()
    if not photos.is_dir():
        raise SystemExit(f"{photos}: no such folder; make it with benchmarks/photoset.py")
    mxnet_python = os.environ.get("MXREC_BENCH_MXNET_PYTHON")
    im2rec = find_im2rec(mxnet_python) if mxnet_python else None
    env = dict(os.environ, PYTHONPATH=str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    sys.path.insert(0, str(REPO / "src"))  # this checkout's mxrec, to compare pixels
    mxrec = [sys.executable, "-m", "mxrec"]

    with tempfile.TemporaryDirectory(prefix="bench_pack_") as tmp:
        tmp_path = Path(tmp)
        subprocess.run([*mxrec, "list", "--recursive", str(tmp_path / "data"), str(photos)], check=True,
                       capture_output=True, env=env)
        lst = tmp_path / "data.lst"
        count = sum(1 for _ in lst.open())
        print(f"{count} images in {photos}; best of {args.repeat} runs each; {os.cpu_count()} CPUs")
        print(f"{'workload':36s} {'mxrec s':>9s} {'im2rec.py s':>12s} {'speed-up':>9s}  same output; "
              "limit (bare decode+resize+encode) s, mxrec's share of it")
        anchor_seconds = None
        for name, ours, theirs in WORKLOADS:
            is_list = ours[0] == "list"
            ours_cmd = [*mxrec, *ours, str(tmp_path / "ours" / "data"), str(photos)]
            if not is_list:
                ours_cmd.insert(len(mxrec) + len(ours), "--no-progress")
            ours_times, theirs_times, limit_times = [], [], []
            ours_digest = theirs_digest = None
            limit_cmd = None
            if theirs is not None and "--resize" in ours and ours[ours.index("-j") + 1] == "2":
                limit_cmd = [sys.executable, __file__, "--bare", str(lst), str(photos),
                             ours[ours.index("--resize") + 1], ours[ours.index("--quality") + 1], "2"]
            for _ in range(args.repeat):
                seconds, ours_digest = run_once(ours_cmd, tmp_path / "ours", None if is_list else lst, env)
                ours_times.append(seconds)
                if limit_cmd:
                    start = time.perf_counter()
                    subprocess.run(limit_cmd, check=True, env=env)
                    limit_times.append(time.perf_counter() - start)
                if im2rec and theirs is not None:
                    theirs_cmd = [mxnet_python, im2rec, *theirs, str(tmp_path / "theirs" / "data"), str(photos)]
                    seconds, theirs_digest = run_once(theirs_cmd, tmp_path / "theirs", None if is_list else lst,
                                                      env)
                    theirs_times.append(seconds)
            best = min(ours_times)
            if theirs is None:  # an opt-in mode: pixels compared with the exact output of the row above
                off = pixel_difference(tmp_path / "ours" / "data.rec", tmp_path / "exact.rec")
            else:
                off = ""
                if not is_list:
                    shutil.copy(tmp_path / "ours" / "data.rec", tmp_path / "exact.rec")
            if theirs_times:
                anchor_seconds = min(theirs_times)
                same = "yes" if ours_digest == theirs_digest else "NO"
                if is_list:  # mxrec also writes data.labels, which the digest ignores
                    same += " (.lst)"
                limit = ""
                if limit_times:
                    share = min(limit_times) / best
                    limit = f"; limit {min(limit_times):.2f} s, {share:.0%}"
                    if "256" in ours:  # the bar: mxrec pack --resize 256 -j 2
                        limit += f" (bar >= 90%: {'PASS' if share >= 0.9 else 'FAIL'})"
                print(f"{name:36s} {best:9.2f} {anchor_seconds:12.2f} {anchor_seconds / best:8.2f}x  {same}{limit}")
            elif im2rec and anchor_seconds is not None:
                print(f"{name:36s} {best:9.2f} {anchor_seconds:12.2f} {anchor_seconds / best:8.2f}x  no: {off}")
            else:
                print(f"{name:36s} {best:9.2f} {'-':>12s} {'-':>9s}  {off}")


if __name__ == "__main__":
    main()
