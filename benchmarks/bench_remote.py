"""Remote reading benchmark: mxrec's remote reader on a loopback S3 server against local disk and one GET per record.

One run starts the tests' S3 server (moto, on 127.0.0.1, :class:`testkit.servers.S3Server`) and uploads the same
``.rec``/``.idx`` it keeps on local disk, for records of 1 KB and of 100 KB (random bytes). For each workload it
prints records/s, GETs per 1000 records (counted by the server) and bytes fetched per byte of records:

* sequential scan: every record in file order;
* block-shuffled epoch: the order mxrec uses for remote data by default (blocks of about 4 MiB, 8 a window),
  read a batch of 256 records at a time (``read_batch``) through the in-memory read-ahead window the
  iterators give a block-shuffled remote reader (:meth:`mxrec.io.records.Records.follow`);
* fully random epoch: a global permutation, read a batch at a time;
* cached second epoch: the block-shuffled epoch again, through a local block cache filled by the first.

Anchors in the same run: the same reads from the local file (memory-mapped ``RecordReader``), and a reader that
makes one ranged GET per record (s3fs ``cat_file``), timed on a sample of records since it is slow::

    python benchmarks/bench_remote.py [--small N] [--large N] [--naive-sample N]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from mxrec.io.opener import RecordReader
from mxrec.io.order import DEFAULT_SHUFFLE_WINDOW, ReadPlan, epoch_order
from mxrec.io.writer import RecordWriter
from testkit.servers import S3Server

BATCH = 256  # records per read_batch call, as one batch of a data loader


def write(path: Path, count: int, size: int) -> None:
    rng = np.random.default_rng(size)
    with RecordWriter(path, index=True) as writer:
        for _ in range(count):
            writer.write(rng.integers(0, 256, size, dtype=np.uint8).tobytes())


def epoch(reader: RecordReader, order: np.ndarray, batch: int) -> None:
    for first in range(0, len(order), batch):
        reader.read_batch(order[first:first + batch])


def measure(server: S3Server, key: str, records: int, work) -> tuple[float, float, float]:
    """``(records/s, GETs per 1000 records, bytes fetched)`` of ``work()`` reading ``records`` records."""
    mark = server.log.mark()
    start = time.perf_counter()
    work()
    seconds = time.perf_counter() - start
    got = server.log.since(mark, method="GET", key=key)
    return records / seconds, 1000 * len(got) / records, sum(r.length or 0 for r in got)


def run(server: S3Server, bucket: str, folder: Path, name: str, count: int, size: int, naive_sample: int) -> list:
    path = folder / f"{name}.rec"
    write(path, count, size)
    server.put_object(bucket, f"{name}.rec", path.read_bytes())
    server.put_object(bucket, f"{name}.idx", path.with_suffix(".idx").read_bytes())
    url = f"s3://{bucket}/{name}.rec"
    options = server.storage_options()
    local = RecordReader(path)
    remote = RecordReader(url, storage_options=options)
    payload_bytes = int((remote.ends - remote.offsets).sum())
    batch = BATCH
    block = remote.default_shuffle_block()
    orders = {
        "sequential scan": None,
        "block-shuffled epoch": epoch_order(count, shuffle=True, seed=1, epoch=0, shuffle_block=block,
                                            shuffle_window=DEFAULT_SHUFFLE_WINDOW),
        "fully random epoch": epoch_order(count, shuffle=True, seed=1, epoch=0),
    }
    rows = []
    windowed = RecordReader(url, storage_options=options)
    windowed.follow(ReadPlan(block, DEFAULT_SHUFFLE_WINDOW))
    for workload, order in orders.items():
        if order is None:
            def local_work():
                for _ in local:
                    pass

            def remote_work():
                for _ in remote:
                    pass
        else:
            def local_work(order=order):
                epoch(local, order, batch)

            reader = windowed if workload.startswith("block") else remote

            def remote_work(order=order, reader=reader):
                epoch(reader, order, batch)
        start = time.perf_counter()
        local_work()
        local_rate = count / (time.perf_counter() - start)
        rate, gets, fetched = measure(server, f"{name}.rec", count, remote_work)
        rows.append((name, workload, "local disk (mmap)", local_rate, None, None))
        rows.append((name, workload, "mxrec remote", rate, gets, fetched / payload_bytes))

    fs = remote.file._filesystem()[0]
    s3_path = f"{bucket}/{name}.rec"
    sample = np.random.default_rng(2).permutation(count)[:naive_sample]

    def naive():
        for position in sample.tolist():
            fs.cat_file(s3_path, start=int(remote.offsets[position]), end=int(remote.ends[position]))

    rate, gets, fetched = measure(server, f"{name}.rec", len(sample), naive)
    rows.append((name, "fully random epoch", f"one GET per record ({len(sample)} sampled)", rate, gets,
                 fetched / int((remote.ends[sample] - remote.offsets[sample]).sum())))

    with tempfile.TemporaryDirectory(prefix="mxrec-cache-") as cache:
        cached = RecordReader(url, storage_options=options, cache_dir=cache)
        order = orders["block-shuffled epoch"]
        first = measure(server, f"{name}.rec", count, lambda: epoch(cached, order, batch))
        second = measure(server, f"{name}.rec", count, lambda: epoch(cached, order, batch))
        rows.append((name, "block-shuffled, cache filling", "mxrec remote + cache", first[0], first[1],
                     first[2] / payload_bytes))
        rows.append((name, "cached second epoch", "mxrec remote + cache", second[0], second[1],
                     second[2] / payload_bytes))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", type=int, default=40_000, help="records of 1 KB (default %(default)s)")
    parser.add_argument("--large", type=int, default=1_000, help="records of 100 KB (default %(default)s)")
    parser.add_argument("--naive-sample", type=int, default=500, help="records read one GET each")
    args = parser.parse_args(argv)
    rows = []
    with S3Server() as server, tempfile.TemporaryDirectory(prefix="mxrec-bench-") as folder:
        bucket = server.create_bucket()
        rows += run(server, bucket, Path(folder), "1KB", args.small, 1024, args.naive_sample)
        rows += run(server, bucket, Path(folder), "100KB", args.large, 100 * 1024, args.naive_sample)
        server.delete_bucket(bucket)

    print("mxrec remote reading over a loopback S3 server (moto); GETs counted by the server; "
          "fetched = bytes fetched / bytes of the records read; ratio = records/s / one-GET-per-record's")
    header = (f"{'records':8} {'workload':30} {'reader':36} {'records/s':>10} {'GETs/1000':>10} {'fetched':>8} "
              f"{'ratio':>7}")
    print(header)
    print("-" * len(header))
    naive = {name: rate for name, _, reader, rate, _, _ in rows if reader.startswith("one GET")}
    for name, workload, reader, rate, gets, fetched in rows:
        cells = [f"{name:8}", f"{workload:30}", f"{reader:36}", f"{rate:10.0f}",
                 f"{gets:10.1f}" if gets is not None else f"{'-':>10}",
                 f"{fetched:7.2f}x" if fetched is not None else f"{'-':>8}",
                 f"{rate / naive[name]:6.1f}x"]
        print(" ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
