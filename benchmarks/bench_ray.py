"""Benchmark ``mxrec.ray`` on a local Ray cluster: Ray's fixed costs, packing, reading, and what to expect on more CPUs.

    python benchmarks/photoset.py bench-data/photos2000 --count 2000     # once (needs scikit-image)
    MXREC_BENCH_MXNET_PYTHON=/path/to/mxnet-venv/bin/python \\
        python benchmarks/bench_ray.py --photos bench-data/photos2000

Everything runs on this machine. Two private loopback clusters are started (1 CPU and 2 CPUs, with the
tests' :class:`testkit.ray_cluster.LocalRayCluster`) and kept for the whole run. Sections:

1. Ray's fixed costs: starting a cluster, a driver's first connection, its first Ray Data job (the
   workers start), and then, warm, the cost of one more job and of one more task.
2. ``--resize 256 --quality 95`` packs of the photos as command lines in fresh processes, as a user runs
   them: ``tools/im2rec.py`` with 2 threads (the anchor), ``mxrec pack`` (local, 2 threads), ``mxrec pack
   --engine ray`` on the 1-CPU and the 2-CPU cluster; rounds interleaved, every round shown. The outputs
   are compared: im2rec's ``.rec``/``.idx`` bytes against the local pack's, the Ray shard set's records
   against the local ``.rec``'s. Then the same Ray pack through the library on a warm connection, which
   is the per-image cost without start-up.
3. Reading the packed ``.rec``: ``RecordReader`` (one thread) against ``read_recordio`` with the records
   brought to the driver, and decoding every image: ``decode_pixels`` in one local thread against
   ``read_recordio(decode=True)`` counted on the cluster.
4. A model from those figures: expected pack time on 16 and 64 CPUs (assuming the file system keeps up),
   and from what dataset size a cluster pays off against this machine's local pack.

The machine may be shared and noisy: each row lists every round, and ratios use the best.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "src"), str(REPO / "tests")]  # this checkout's mxrec, and the tests' cluster launcher

from bench_pack import find_im2rec  # noqa: E402  (benchmarks/ is this script's folder)
from testkit.ray_cluster import LocalRayCluster, connect  # noqa: E402

PACK_OPTIONS = ["--resize", "256", "--quality", "95"]


def quiet(ray: ModuleType) -> None:
    """No Ray Data progress bars or info lines in the table."""
    ray.data.DataContext.get_current().enable_progress_bars = False
    logging.getLogger("ray.data").setLevel(logging.WARNING)


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def shown(times: list[float]) -> str:
    return " ".join(f"{t:6.2f}" for t in times)


def run(command: list[str], env: dict | None = None) -> None:
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise SystemExit(f"failed ({done.returncode}): {' '.join(command)}\n{done.stderr[-3000:]}")


def fresh(folder: Path, lst: Path) -> Path:
    """An empty ``folder`` holding a copy of ``lst`` as ``data.lst``; returns the prefix ``folder/data``."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    shutil.copy(lst, folder / "data.lst")
    return folder / "data"


def records(path: Path) -> list[tuple[object, bytes]]:
    from mxrec.io.opener import RecordReader
    from mxrec.io.shards import read_manifest

    if path.name.endswith(".manifest.json"):
        return [r for shard in read_manifest(path).shards for r in records(path.parent / shard.rec)]
    with RecordReader(path) as reader:
        return list(zip(reader.keys, reader, strict=True))


# -------------------------------------------------------------------------------------------------- sections

def fixed_costs(cluster: LocalRayCluster, repeat: int) -> dict[str, list[float]]:
    """First connection, first job, and warm per-job and per-task costs on ``cluster`` (seconds)."""
    import numpy as np

    out: dict[str, list[float]] = {"connect": [], "first job": [], "job": [], "task": []}
    # A job of 2 tasks, and of 66: the difference is 64 tasks' worth; the rest is the job's own cost.
    started = time.perf_counter()
    with connect(cluster, logging_level=logging.WARNING) as ray:
        out["connect"].append(time.perf_counter() - started)
        quiet(ray)

        def job(blocks: int) -> float:
            ds = ray.data.range(blocks, override_num_blocks=blocks).map_batches(lambda b: {"id": np.asarray(b["id"])})
            return timed(ds.take_all)

        out["first job"].append(job(2))
        for _ in range(repeat):
            few, many = job(2), job(66)
            per_task = (many - few) / 64
            out["task"].append(per_task)
            out["job"].append(few - 2 * per_task)
    return out


def pack_rounds(clusters: dict[int, LocalRayCluster], photos: Path, lst: Path, work: Path, im2rec: str | None,
                mxnet_python: str | None, rounds: int) -> dict[str, list[float]]:
    """Command-line packs, interleaved; checks that the outputs agree."""
    env = dict(os.environ, PYTHONPATH=str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    mxrec = [sys.executable, "-m", "mxrec", "pack", *PACK_OPTIONS, "--no-progress"]
    tools: dict[str, Callable[[], None]] = {}
    if im2rec:
        tools["im2rec.py, 2 threads"] = lambda: run(
            [mxnet_python, im2rec, *PACK_OPTIONS, "--num-thread", "2", str(fresh(work / "im2rec", lst)),
             str(photos)])
    tools["mxrec pack, local, 1 thread"] = lambda: run(
        [*mxrec, "-j", "1", str(fresh(work / "local1", lst)), str(photos)], env)
    tools["mxrec pack, local, 2 threads"] = lambda: run(
        [*mxrec, "-j", "2", str(fresh(work / "local", lst)), str(photos)], env)
    for cpus, cluster in clusters.items():
        ray_env = cluster.driver_env(env)
        tools[f"mxrec pack --engine ray, {cpus} CPU"] = lambda ray_env=ray_env, cpus=cpus: run(
            [*mxrec, "--engine", "ray", str(fresh(work / f"ray{cpus}", lst)), str(photos)], ray_env)
    times: dict[str, list[float]] = {name: [] for name in tools}
    for _ in range(rounds):
        for name, tool in tools.items():
            times[name].append(timed(tool))
    local = records(work / "local" / "data.rec")
    if im2rec:
        for suffix in (".rec", ".idx"):
            if (work / "im2rec" / f"data{suffix}").read_bytes() != (work / "local" / f"data{suffix}").read_bytes():
                raise SystemExit(f"im2rec and mxrec pack wrote different data{suffix}")
    for cpus in clusters:
        if records(work / f"ray{cpus}" / "data.manifest.json") != local:
            raise SystemExit(f"mxrec pack --engine ray ({cpus} CPU) wrote other records than the local pack")
    return times


def warm_pack(cluster: LocalRayCluster, photos: Path, lst: Path, work: Path, rounds: int,
              tasks: int | None = None) -> list[float]:
    """``pack_list_ray`` of ``lst`` on a warm connection (workers already started), ``tasks`` tasks."""
    from mxrec.packing.prepare import ImageTransform
    from mxrec.ray import pack_list_ray

    transform = ImageTransform(resize=256, quality=95)

    def pack() -> None:
        pack_list_ray(fresh(work / "warm", lst).with_suffix(".lst"), photos, transform=transform, blocks=tasks)

    with connect(cluster, logging_level=logging.WARNING) as ray:
        quiet(ray)
        pack()  # the workers start here
        return [timed(pack) for _ in range(rounds)]


def read_rounds(clusters: dict[int, LocalRayCluster], rec: Path, rounds: int) -> dict[str, list[float]]:
    """Seconds to read every record / decode every image, locally and through Ray."""
    from mxrec.format.header import unpack
    from mxrec.image.codec import decode_pixels
    from mxrec.io.opener import RecordReader
    from mxrec.ray import read_recordio

    def read_local() -> None:
        with RecordReader(rec) as reader:
            sum(len(r) for r in reader)

    def decode_local() -> None:
        with RecordReader(rec) as reader:
            for r in reader:
                decode_pixels(unpack(r)[1], 3)

    times: dict[str, list[float]] = {"read, RecordReader (1 thread)": [], "decode, decode_pixels (1 thread)": []}
    for _ in range(rounds):
        times["read, RecordReader (1 thread)"].append(timed(read_local))
        times["decode, decode_pixels (1 thread)"].append(timed(decode_local))
    for cpus, cluster in clusters.items():
        with connect(cluster, logging_level=logging.WARNING) as ray:
            quiet(ray)

            def read_ray(blocks: int | None) -> None:
                ds = read_recordio(rec, override_num_blocks=blocks)
                sum(batch["data"].nbytes for batch in ds.iter_batches(batch_size=None, batch_format="pyarrow"))

            def decode_ray(blocks: int | None) -> None:
                # Images decoded and counted on the cluster: only the counts come to the driver. (No
                # Dataset.sum: its aggregator actor wants a CPU that a busy 1-CPU cluster never frees.)
                ds = read_recordio(rec, decode=True, override_num_blocks=blocks).map_batches(
                    lambda t: {"n": [t.num_rows]}, batch_format="pyarrow")
                sum(int(n) for batch in ds.iter_batches(batch_size=None) for n in batch["n"])

            read_ray(None)  # the workers start here
            for blocks, how in ((None, "Ray's blocks"), (4 * cpus, f"{4 * cpus} blocks")):
                for kind, job in (("read", read_ray), ("decode", decode_ray)):
                    name = f"{kind}, read_recordio, {cpus} CPU, {how}"
                    times[name] = [timed(lambda job=job, blocks=blocks: job(blocks)) for _ in range(rounds)]
    return times


# -------------------------------------------------------------------------------------------------- report

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--photos", default=str(REPO / "bench-data" / "photos2000"), help="image folder")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each workload (all shown, best used)")
    args = parser.parse_args()
    photos = Path(args.photos).resolve()
    if not photos.is_dir():
        raise SystemExit(f"{photos}: no such folder; make it with benchmarks/photoset.py")
    mxnet_python = os.environ.get("MXREC_BENCH_MXNET_PYTHON")
    im2rec = find_im2rec(mxnet_python) if mxnet_python else None

    with tempfile.TemporaryDirectory(prefix="bench_ray_") as tmp:
        work = Path(tmp)
        env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
        run([sys.executable, "-m", "mxrec", "list", "--recursive", str(work / "photos"), str(photos)], env)
        lst = work / "photos.lst"
        count = sum(1 for _ in lst.open())
        print(f"{count} photos in {photos}; {os.cpu_count()} CPUs here, load average {os.getloadavg()[0]:.1f}; "
              f"{args.rounds} rounds; seconds")

        clusters: dict[int, LocalRayCluster] = {}
        try:
            for cpus in (1, 2):
                clusters[cpus] = LocalRayCluster(num_cpus=cpus).start()
            starts = [c.startup_seconds for c in clusters.values()]
            costs = fixed_costs(clusters[2], args.rounds)
            print("\n1. Ray's fixed costs (2-CPU cluster)")
            print(f"   {'cluster start (ray start --head)':44s} {shown(starts)}")
            print(f"   {'first driver connection':44s} {shown(costs['connect'])}")
            print(f"   {'first Ray Data job (workers start)':44s} {shown(costs['first job'])}")
            print(f"   {'each further job (its own part), warm':44s} {shown(costs['job'])}")
            print(f"   {'each further task, warm (ms)':44s} {shown([t * 1000 for t in costs['task']])}")

            packs = pack_rounds(clusters, photos, lst, work, im2rec, mxnet_python, args.rounds)
            anchor = min(packs["im2rec.py, 2 threads"]) if im2rec else None
            print(f"\n2. pack {' '.join(PACK_OPTIONS)}, command lines (fresh processes; outputs checked equal)")
            print(f"   {'':44s} {'rounds':>{7 * args.rounds}s}  {'best':>6s} {'img/s':>6s} {'vs im2rec':>9s}")
            for name, times in packs.items():
                ratio = f"{anchor / min(times):8.2f}x" if anchor else "        -"
                print(f"   {name:44s} {shown(times)}  {min(times):6.2f} {count / min(times):6.0f} {ratio}")
            warm = {cpus: warm_pack(cluster, photos, lst, work, args.rounds) for cpus, cluster in clusters.items()}
            for cpus, times in warm.items():
                name = f"pack_list_ray, warm connection, {cpus} CPU"
                ratio = f"{anchor / min(times):8.2f}x" if anchor else "        -"
                print(f"   {name:44s} {shown(times)}  {min(times):6.2f} {count / min(times):6.0f} {ratio}")

            shutil.copy(work / "local" / "data.rec", work / "read.rec")
            shutil.copy(work / "local" / "data.idx", work / "read.idx")
            size = (work / "read.rec").stat().st_size
            reads = read_rounds(clusters, work / "read.rec", args.rounds)
            print(f"\n3. reading the packed .rec ({size / 1e6:.0f} MB, {count} records; read = records to the driver, "
                  "decode = every image decoded and counted where it is read)")
            base = {"read": min(reads["read, RecordReader (1 thread)"]),
                    "decode": min(reads["decode, decode_pixels (1 thread)"])}
            for name, times in reads.items():
                kind = name.split(",")[0]
                rate = f"{size / 1e6 / min(times):7.0f} MB/s" if kind == "read" else f"{count / min(times):5.0f} img/s"
                print(f"   {name:44s} {shown(times)}  {min(times):6.2f} {rate} {base[kind] / min(times):6.2f}x")

            # 4. The model: a pack job costs a fixed part (the .lst, handing out the tasks, the commit), a
            # cost per task, and its images spread over the CPUs. On the 1-CPU cluster, a tenth of the list
            # and the whole list with the same number of tasks give the fixed part and the cost per image.
            small = work / "small.lst"
            small.write_text("".join(lst.read_text().splitlines(keepends=True)[:count // 10]))
            tasks = 8
            whole = min(warm_pack(clusters[1], photos, lst, work, args.rounds, tasks))
            tenth = min(warm_pack(clusters[1], photos, small, work, args.rounds, tasks))
            per_image = (whole - tenth) / (count - count // 10)  # CPU-seconds per image
            fixed = max(tenth - per_image * (count // 10) - tasks * min(costs["task"]), 0.0)
            per_task = min(costs["task"])
            local = min(packs["mxrec pack, local, 2 threads"])
            command_line = min(packs["mxrec pack --engine ray, 2 CPU"]) - min(warm[2])  # start, connect, workers
            cold = min(starts) + command_line
            print("\n4. model: fixed part + 4 tasks per CPU x cost per task / CPUs + images x cost per image / CPUs")
            print(f"   from the 1-CPU cluster: fixed part {fixed:.2f} s, {per_task * 1000:.0f} ms per task, "
                  f"{per_image * 1000:.2f} CPU-ms per image (local pack here: {local * 2 / count * 1000:.2f} "
                  f"CPU-ms per image on 2 threads, start-up included)")
            print(f"   measured 1 -> 2 CPUs (warm): {min(warm[1]):.2f} s -> {min(warm[2]):.2f} s, "
                  f"x{min(warm[1]) / min(warm[2]):.2f}")
            print(f"   the command line adds {command_line:.1f} s (Python, connecting, starting workers); a cluster "
                  f"started for the job {cold:.1f} s")

            def expected(images: int, cpus: int) -> float:
                return fixed + 4 * per_task + per_image * images / cpus

            for cpus in (1, 2, 16, 64):
                print(f"   {cpus:3d} CPUs: these {count} photos ~{expected(count, cpus):6.1f} s "
                      f"({count / expected(count, cpus):6.0f} img/s); 1.28M photos like these "
                      f"~{expected(1_281_167, cpus) / 60:6.1f} min")
            local_per_image = local / count  # wall seconds per image of this machine's local pack
            for cpus in (16, 64):
                gain = local_per_image - per_image / cpus
                if gain <= 0:
                    print(f"   {cpus:3d} CPUs never beat this machine's local pack by this model")
                    continue
                break_even = [math.ceil((fixed + 4 * per_task + extra) / gain) for extra in (0, command_line, cold)]
                print(f"   {cpus:3d} CPUs beat this machine's local pack from ~{break_even[0]} images (a driver "
                      f"already connected), ~{break_even[1]} (the command line, cluster running), "
                      f"~{break_even[2]} (cluster started for the job)")
        finally:
            for cluster in clusters.values():
                cluster.stop()
        print(f"\nload average at the end: {os.getloadavg()[0]:.1f} (other work on this machine shares its cores)")


if __name__ == "__main__":
    main()
