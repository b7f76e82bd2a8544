"""How time and memory grow with the record count: .idx open, ``mxrec info``, ``mxrec verify``, ``mxrec index``;
and how long a large shard set on S3 takes to open (issue 26 §3).

    python benchmarks/bench_scale.py                  # 10k, 100k, 1M and 10M records; 1000 and 10 000 shards
    python benchmarks/bench_scale.py --sizes 10000 100000 1000000
    python benchmarks/bench_scale.py --sizes --shards 1000 --manifest-shards 10000   # the shard sets only

Shard sets: ``--shards`` shards (10 records each, with their ``.idx``) on the tests' S3 server (moto, 127.0.0.1),
behind the tests' proxy adding ``--latency`` seconds to every request (20 ms, an object store's first byte), opened
and counted (``len``) by a glob -- one listing, then the ``.idx`` files ``in_flight`` at once -- and the same with
one request in flight (the ``.idx`` files one after another, as before issue 26); and by a manifest,
also of ``--manifest-shards`` shards (only the manifest is uploaded: opening and counting read nothing else, a
shard is opened when one of its records is read). Each row: wall seconds and the server's requests. Bars: 1000
shards by glob < 2 s; 10 000 by manifest < 1 s. Two rows say what the server costs: the same ``.idx`` GETs by boto3,
32 at once, with no mxrec (moto's own CPU per request, on the same cores, is the floor for counting a set without a
manifest), and the set as a brace range on the plain HTTP test server (lighter per request) behind the same latency.

Synthetic small records, as a metadata-heavy dataset would have: an IRHeader
(label ``i % 1000``, id ``i``) and 8 bytes, 40 bytes a record on disk, keys
``0..n-1`` in the ``.idx``. Each operation runs in a fresh process (start-up
and imports included) and reports wall seconds and its peak resident memory
(``ru_maxrss``): ``RecordReader`` opening the ``.idx``, ``mxrec info``,
``mxrec verify`` (no ``--decode``: framing, index and record headers) and
``mxrec index`` (rebuilding the ``.idx`` by scanning the ``.rec``).

The last columns state the constants per record, from the two largest sizes
(so start-up cancels out): microseconds and bytes of peak memory per record,
and ``linear`` = the time per record at the largest size over that at the
next one down (1.0 is linear; it should stay near 1).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

from mxrec import RecordWriter

CHUNK = 100_000
HEADER = np.dtype([("flag", "<u4"), ("label", "<f4"), ("id", "<u8"), ("id2", "<u8"), ("body", "V8")])


def build(folder: str, count: int) -> str:
    """``data.rec`` / ``data.idx`` with ``count`` synthetic records; return the .rec path."""
    rec = os.path.join(folder, "data.rec")
    with RecordWriter(rec, index=True) as writer:
        for first in range(0, count, CHUNK):
            n = min(CHUNK, count - first)
            records = np.zeros(n, HEADER)
            ids = np.arange(first, first + n)
            records["label"] = ids % 1000
            records["id"] = ids
            blob = records.tobytes()
            writer.write_batch([blob[i * 32:(i + 1) * 32] for i in range(n)])
    return rec


def measure(command: list[str]) -> tuple[float, float]:
    """Wall seconds and peak resident MB of ``command`` in a fresh process."""
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) not in (0, 1):  # verify exits 1 on findings
        raise SystemExit(f"failed: {' '.join(command)}\n{process.stderr.read().decode()[-2000:]}")
    process.stderr.close()
    return seconds, usage.ru_maxrss / 1024


def operations(rec: str, folder: str) -> dict[str, list[str]]:
    python = sys.executable
    idx = rec[:-4] + ".idx"
    opener = f"from mxrec import RecordReader; RecordReader({rec!r}, {idx!r})"  # PYTHONPATH: this checkout
    return {
        ".idx open (RecordReader)": [python, "-c", opener],
        "mxrec info": [python, "-m", "mxrec", "info", rec],
        "mxrec verify (no --decode)": [python, "-m", "mxrec", "verify", "--no-progress", rec],
        "mxrec index (rebuild)": [python, "-m", "mxrec", "index", rec, "--output", os.path.join(folder, "re.idx")],
    }


def shard_sets(count: int, manifest_count: int, latency: float) -> None:
    """Open ``count`` shards on a loopback S3 server by glob and by manifest (and ``manifest_count`` by manifest),
    behind ``latency`` seconds a request; print seconds and requests."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
    from mxrec import open_dataset
    from mxrec.format.manifest import Manifest, ShardEntry
    from mxrec.storage.settings import RequestPolicy, Storage
    from testkit.proxy import HTTPProxy, S3Proxy
    from testkit.servers import HTTPServer, S3Server

    rows = []
    with S3Server() as server, S3Proxy(server, latency=latency) as proxy, \
            tempfile.TemporaryDirectory(prefix="mxrec-shards-") as folder:
        bucket = server.create_bucket()
        client = server.client()
        entries = []
        shards = os.path.join(folder, "http", "set")  # the shards as written: uploaded, and served over HTTP below
        os.makedirs(shards)
        for n in range(count):
            rec = os.path.join(shards, f"part-{n:05d}.rec")
            with RecordWriter(rec, index=True, checksums=False) as writer:
                writer.write_batch([bytes([n % 256]) * 100] * 10, list(range(n * 10, n * 10 + 10)))
            for suffix in (".rec", ".idx"):
                with open(rec[:-4] + suffix, "rb") as f:
                    client.put_object(Bucket=bucket, Key=f"set/part-{n:05d}{suffix}", Body=f.read())
            entries.append(ShardEntry(f"part-{n:05d}.rec", f"part-{n:05d}.idx", 10, os.path.getsize(rec),
                                      os.path.getsize(rec[:-4] + ".idx")))
        client.put_object(Bucket=bucket, Key="set/all.manifest.json", Body=Manifest(tuple(entries)).to_json())
        large = tuple(ShardEntry(f"part-{n:05d}.rec", f"part-{n:05d}.idx", 10, 1040, 40) for n in range(manifest_count))
        client.put_object(Bucket=bucket, Key="big/all.manifest.json", Body=Manifest(large).to_json())
        base = f"s3://{bucket}"
        cases = [(f"{count:,} shards, glob", f"{base}/set/part-*.rec", None),
                 (f"{count:,} shards, glob, 1 in flight (before)", f"{base}/set/part-*.rec", "in_flight=1"),
                 (f"{count:,} shards, manifest", f"{base}/set/all.manifest.json", None),
                 (f"{manifest_count:,} shards, manifest", f"{base}/big/all.manifest.json", None)]
        for name, spec, policy in cases:
            storage = Storage(options=proxy.storage_options(),
                              policy=RequestPolicy.parse(policy) if policy else RequestPolicy())
            open_dataset(f"{base}/set/part-00000.rec", storage_options=storage)  # (connections made once)
            mark = server.log.mark()
            start = time.perf_counter()
            reader = open_dataset(spec, storage_options=storage)
            opened = time.perf_counter() - start
            total = len(reader)
            counted = time.perf_counter() - start
            rows.append((name, opened, counted, len(server.log.since(mark)), total))
        # The server's own floor: the same .idx GETs, 32 at once, by boto3 through the proxy (no mxrec): moto spends
        # milliseconds of CPU on each request, on the same 2 cores, so counting 1000 shards cannot beat this here.
        direct = proxy.client(max_pool_connections=32)
        mark = server.log.mark()
        start = time.perf_counter()
        with ThreadPoolExecutor(32) as pool:
            list(pool.map(lambda n: direct.get_object(Bucket=bucket, Key=f"set/part-{n:05d}.idx")["Body"].read(),
                          range(count)))
        floor = time.perf_counter() - start
        rows.append((f"(server alone: {count:,} .idx GETs, 32 at once)", 0.0, floor, len(server.log.since(mark)),
                     count * 10))
        server.delete_bucket(bucket)
        # The same set as a brace range on the plain HTTP server (lighter per request than moto), same latency.
        with HTTPServer(os.path.join(folder, "http")) as web, HTTPProxy(web, latency=latency) as web_proxy:
            spec = web_proxy.url_for("set/part-") + "{00000.." + f"{count - 1:05d}" + "}.rec"
            open_dataset(web_proxy.url_for("set/part-00000.rec"))
            mark = web.log.mark()
            start = time.perf_counter()
            reader = open_dataset(spec)
            opened = time.perf_counter() - start
            total = len(reader)
            rows.append((f"{count:,} shards, brace range, HTTP server", opened, time.perf_counter() - start,
                         len(web.log.since(mark)), total))
    print(f"\nshard sets on a loopback S3 server (moto) behind {latency * 1000:.0f} ms a request; {os.cpu_count()} "
          "CPUs; bars: 1,000 shards by glob < 2 s, 10,000 by manifest < 1 s")
    header = f"{'set':44} {'open s':>8} {'open+len s':>11} {'requests':>9} {'records':>9}"
    print(header)
    print("-" * len(header))
    for name, opened, counted, requests, total in rows:
        print(f"{name:44} {opened:8.2f} {counted:11.2f} {requests:9d} {total:9,}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="*", default=[10_000, 100_000, 1_000_000, 10_000_000])
    parser.add_argument("--folder", help="where to build the datasets (default: a temporary folder)")
    parser.add_argument("--shards", type=int, default=1000, help="shards of the set opened by glob (0: none)")
    parser.add_argument("--manifest-shards", type=int, default=10_000, help="shards of the larger manifest")
    parser.add_argument("--latency", type=float, default=0.02, help="seconds added to every request (a proxy)")
    args = parser.parse_args(argv)
    if args.shards:
        shard_sets(args.shards, args.manifest_shards, args.latency)
    if not args.sizes:
        return 0
    os.environ["PYTHONPATH"] = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src") + (
        os.pathsep + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else "")
    results: dict[str, dict[int, tuple[float, float]]] = {}
    base = args.folder or tempfile.mkdtemp(prefix="mxrec-scale-")
    try:
        for count in args.sizes:
            folder = os.path.join(base, str(count))
            os.makedirs(folder, exist_ok=True)
            start = time.perf_counter()
            rec = build(folder, count)
            print(f"{count:>11,} records: {os.path.getsize(rec) / 1e6:8.1f} MB .rec, built in "
                  f"{time.perf_counter() - start:.1f} s", file=sys.stderr, flush=True)
            for name, command in operations(rec, folder).items():
                results.setdefault(name, {})[count] = measure(command)
            shutil.rmtree(folder)
    finally:
        if not args.folder:
            shutil.rmtree(base, ignore_errors=True)

    sizes = args.sizes
    print(f"\n{os.cpu_count()} CPUs; each cell: wall seconds / peak resident MB of a fresh process")
    header = f"{'operation':28} " + " ".join(f"{f'{n:,}':>17}" for n in sizes) + "   per record (largest two sizes)"
    print(header)
    print("-" * len(header))
    for name, by_size in results.items():
        cells = " ".join(f"{by_size[n][0]:7.2f}s {by_size[n][1]:6.0f}MB" for n in sizes)
        note = ""
        if len(sizes) >= 2:
            big, small = sizes[-1], sizes[-2]
            (t_big, m_big), (t_small, m_small) = by_size[big], by_size[small]
            us = (t_big - t_small) / (big - small) * 1e6
            per_byte = (m_big - m_small) * 2**20 / (big - small)
            linear = (t_big / big) / (t_small / small) if t_small else float("nan")
            note = f"   {us:6.2f} us, {per_byte:5.1f} B; linear {linear:4.2f}"
        print(f"{name:28} {cells}{note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
