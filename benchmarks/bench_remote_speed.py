"""Remote data at local speed, and local shuffle quality (issue 26 §1, §2): ``ImageRecordIter`` and the torch batch
path over a loopback S3 server behind an added latency and a bandwidth cap, against the same file read locally.

One run builds a class-sorted photo set (JPEGs, 256 px, consecutive runs of 25 records per label), puts it on the
tests' S3 server (moto on 127.0.0.1) behind the tests' fault proxy (:class:`testkit.proxy.S3Proxy`: ``latency``
seconds before every answer, one shared link of ``--bandwidth`` bytes/s), and times one epoch of each row, in
the same run (the server and the proxy share the machine's cores with the reader: compare like with like):

* ``local file``: ``ImageRecordIter`` over the local ``.rec`` (memory-mapped, globally shuffled);
* ``S3, N ms``: the first epoch over S3 with the default block shuffle, at 0, 50 and 150 ms per request;
* ``S3, 2 processes, N ms``: the same with ``preprocess_processes=2`` (one thread each), at 0 and 150 ms: the
  workers read ahead along the order and share the blocks they download (:mod:`mxrec.io.shared_downloads`);
* ``S3, 50 ms, with .checksums``: the same set uploaded with its checksums sidecar (as mxrec writes it: a CRC-32C
  per record), each shuffle block checked as it arrives;
* ``S3 + cache, 2nd epoch``: the epoch after one that filled a local block cache (no request);
* ``torch, 2 workers``: ``ImageRecordDataset(preprocess=...)`` + ``DistributedBatchSampler`` +
  ``DataLoader(num_workers=2, collate_fn=batch_collate)``, at 0 and 150 ms, the workers sharing a fresh block
  cache (each block downloaded once for both); without one, sharing the shuffle blocks they download through the
  dataset's temporary folder (:mod:`mxrec.io.shared_downloads`); and at 150 ms with that sharing
  switched off (each worker reads ahead on its own, so each downloads the blocks it reads).

The local file is read first and last (the busier of the two runs is not the anchor).

Columns: images/s, the ratio to the anchor of the row's bar (the 0-ms first epoch, or the local file), GETs of the
``.rec`` per epoch and per record, bytes fetched over the file's size, and the most bytes the reader held at once
over the memory budget (``RequestPolicy.memory``). A second table gives the shuffle quality of the orders
(:func:`mxrec.io.order.mixing`: distinct labels per batch of 64 against a global shuffle's), with the requests and
bytes an epoch of each costs. Bars (issue 26): first epoch at 50 and 150 ms >= 0.9x the 0-ms one, bytes <= 1.05x,
memory within the budget; cached epoch >= 0.95x the local file; mixing >= 0.9x global with <= records/8 requests.

    python benchmarks/bench_remote_speed.py [--images 2000] [--bandwidth 200e6]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from mxrec import ImageRecordIter, RecordWriter
from mxrec.format.header import IRHeader, pack
from mxrec.io.order import epoch_order, mixing, window_of
from mxrec.io.records import blocks_of
from mxrec.storage.settings import RequestPolicy
from testkit.proxy import S3Proxy
from testkit.servers import S3Server

RUN = 25  # records per label, consecutive
BATCH = 64
SHAPE = (3, 224, 224)


def build(path: Path, count: int) -> np.ndarray:
    """A class-sorted set of ``count`` 256-px JPEGs (smooth random scenes); returns the labels."""
    import cv2

    rng = np.random.default_rng(0)
    labels = np.arange(count) // RUN
    with RecordWriter(path, index=True) as writer:
        for i in range(count):
            small = rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)
            image = cv2.resize(small, (256, 256), interpolation=cv2.INTER_CUBIC)
            image = cv2.add(image, rng.integers(0, 24, image.shape, dtype=np.uint8))
            jpeg = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, 90])[1].tobytes()
            writer.write(pack(IRHeader(0, float(labels[i]), i, 0), jpeg), key=i)
    return labels


def iterate(path: str, options: dict | None, cache: str | None = None, epochs: int = 1,
            processes: int = 0) -> tuple[list[float], object]:
    """Seconds of each epoch of ``ImageRecordIter`` over ``path`` (2 decode threads, or ``processes`` worker
    processes of one thread each), and its reader."""
    threads = 1 if processes else 2
    it = ImageRecordIter(path_imgrec=path, data_shape=SHAPE, batch_size=BATCH, shuffle=True, rand_crop=True,
                         preprocess_threads=threads, preprocess_processes=processes, storage_options=options,
                         cache_dir=cache, seed=1)
    times = []
    for _ in range(epochs):
        start = time.perf_counter()
        for _ in it:
            pass
        times.append(time.perf_counter() - start)
        it.reset()
    if processes:
        it.close()  # (its workers stopped now, not when it is collected)
    return times, it.reader


def torch_epoch(path: str, options: dict, cache: str | None = None, share: bool = True) -> float:
    """Seconds of one epoch through the torch batch path with 2 workers (sharing ``cache`` when given; without
    one, ``share``: the workers share their downloads through the dataset's temporary folder)."""
    from torch.utils.data import DataLoader

    from mxrec.torch import DistributedBatchSampler, ImageRecordDataset, batch_collate

    dataset = ImageRecordDataset(path, storage_options=options, cache_dir=cache,
                                 preprocess=dict(data_shape=SHAPE, rand_crop=True))
    if not share:
        dataset.downloads = None
    sampler = DistributedBatchSampler(dataset, BATCH, shuffle=True, seed=1, rank=0, world_size=1)
    loader = DataLoader(dataset, batch_sampler=sampler, num_workers=2, collate_fn=batch_collate,
                        multiprocessing_context="fork")
    start = time.perf_counter()
    for _ in loader:
        pass
    return time.perf_counter() - start


def quality(count: int, record_bytes: float) -> None:
    """The shuffle quality table: orders of a class-sorted set of ``count`` records of ``record_bytes`` bytes."""
    labels = np.arange(count) // RUN
    nbytes = int(count * record_bytes)
    settings = [("global shuffle", 0, 1)]
    for block_bytes, window_bytes in ((256 << 10, 128 << 20), (256 << 10, 32 << 20), (256 << 10, 64 << 20),
                                      (1 << 20, 128 << 20), (4 << 20, 32 << 20)):
        block = blocks_of(count, nbytes, block_bytes)
        window = window_of(block, record_bytes, window_bytes)
        default = {(256 << 10, 128 << 20): " (default)", (4 << 20, 32 << 20): " (the old sizes)"}.get(
            (block_bytes, window_bytes), "")
        settings.append((f"{block_bytes >> 10} KiB blocks, {window_bytes >> 20} MiB open{default}", block, window))
    print(f"\nshuffle quality: {count:,} class-sorted records ({len(set(labels.tolist())):,} labels, runs of {RUN}) "
          f"of {record_bytes / 1000:.0f} KB; distinct labels per batch of {BATCH} against a global shuffle's "
          "(bar >= 0.9x with <= records/8 requests); each block is one request, read once")
    header = f"{'order':36} {'records/block':>13} {'open':>5} {'labels/batch':>12} {'ratio':>7} {'requests/record':>16}"
    print(header)
    print("-" * len(header))
    for name, block, window in settings:
        figures = [mixing(labels, epoch_order(count, shuffle=True, seed=s, epoch=0, shuffle_block=block,
                                              shuffle_window=window), BATCH) for s in range(3)]
        per_batch = float(np.mean([m.per_batch for m in figures]))
        requests = 1.0 if block == 0 else 1 / block
        print(f"{name:36} {block or 1:13} {window if block else '-':>5} {per_batch:12.1f} "
              f"{per_batch / figures[0].global_per_batch:6.2f}x {requests:16.3f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=2000, help="records (default %(default)s)")
    parser.add_argument("--bandwidth", type=float, default=200e6, help="bytes/s of the proxy's link")
    parser.add_argument("--no-torch", action="store_true", help="leave out the torch rows")
    parser.add_argument("--quality-records", type=int, default=200_000, help="records of the shuffle-quality table")
    args = parser.parse_args(argv)
    budget = RequestPolicy().memory
    rows: list[tuple] = []
    with tempfile.TemporaryDirectory(prefix="mxrec-bench-") as folder, S3Server() as server:
        local = Path(folder) / "sorted.rec"
        build(local, args.images)
        size = local.stat().st_size
        bucket = server.create_bucket()
        server.put_object(bucket, "sorted.rec", local.read_bytes())
        server.put_object(bucket, "sorted.idx", local.with_suffix(".idx").read_bytes())
        url = f"s3://{bucket}/sorted.rec"
        # The same set with the checksums sidecar mxrec writes beside it, as a user's upload would have it: every
        # record its own CRC-32C cell, so a shuffle block's fetch is checked whole, with no byte around it.
        summed = f"s3://{bucket}/summed.rec"
        for suffix in (".rec", ".idx", ".checksums"):
            server.put_object(bucket, "summed" + suffix, local.with_suffix(suffix).read_bytes())
        local_seconds = iterate(str(local), None)[0][0]
        rows.append(("local file (mmap, global shuffle)", local_seconds, None, None, None, "-"))
        with S3Proxy(server, bandwidth=int(args.bandwidth)) as proxy:
            options = proxy.storage_options()

            def measured(name: str, work, anchor: str, key: str = "sorted.rec") -> float:
                mark = proxy.log.mark()
                seconds, peak = work()
                got = proxy.log.since(mark, method="GET", key=key)
                rows.append((name, seconds, len(got), sum(r.sent for r in got) / size, peak, anchor))
                return seconds

            def first_epoch(url: str = url):
                (seconds,), reader = iterate(url, options)
                window = getattr(reader, "_window", None)
                return seconds, window.stats["peak_bytes"] / budget if window is not None else None

            for latency in (0.0, 0.05, 0.15):
                proxy.latency = latency
                measured(f"S3, {latency * 1000:.0f} ms, first epoch", first_epoch, "S3, 0 ms")
            for latency in (0.0, 0.15):  # (the workers share their downloads: a GET a block for both)
                proxy.latency = latency
                measured(f"S3, 2 processes, {latency * 1000:.0f} ms", lambda: (iterate(url, options, processes=2)[0][0],
                                                                               None), "S3, 0 ms")
            proxy.latency = 0.05
            measured("S3, 50 ms, with .checksums", lambda: first_epoch(summed), "S3, 0 ms", key="summed.rec")
            with tempfile.TemporaryDirectory(prefix="mxrec-cache-") as cache:
                times, _ = iterate(url, options, cache=cache, epochs=2)
                rows.append(("S3 + cache, 50 ms, 1st epoch", times[0], None, None, None, "S3, 0 ms"))
                mark = proxy.log.mark()
                rows.append(("S3 + cache, 2nd epoch", times[1], len(proxy.log.since(mark, key="sorted.rec")),
                             None, None, "local"))
            if not args.no_torch:
                kinds = {"shared cache": (True, True), "no cache": (False, True),
                         "no cache, downloads not shared": (False, False)}
                for latency, kind in ((0.0, "shared cache"), (0.15, "shared cache"), (0.0, "no cache"),
                                      (0.15, "no cache"), (0.15, "no cache, downloads not shared")):
                    proxy.latency = latency
                    cached, share = kinds[kind]
                    with tempfile.TemporaryDirectory(prefix="mxrec-cache-") as cache:
                        measured(f"torch, 2 workers, {latency * 1000:.0f} ms, {kind}",
                                 lambda cache=cache, cached=cached, share=share: (
                                     torch_epoch(url, options, cache if cached else None, share), None),
                                 "torch, 0 ms, shared cache" if cached else "torch, 0 ms, no cache")
        rows.append(("local file, again", iterate(str(local), None)[0][0], None, None, None, "-"))
        server.delete_bucket(bucket)

    rates = {row[0]: args.images / row[1] for row in rows}
    anchors = {"S3, 0 ms": rates["S3, 0 ms, first epoch"],
               "local": max(rates["local file (mmap, global shuffle)"], rates["local file, again"]),
               **{f"torch, 0 ms, {kind}": rates.get(f"torch, 2 workers, 0 ms, {kind}", float("nan"))
                  for kind in ("shared cache", "no cache")}}
    print(f"{args.images} class-sorted 256-px JPEGs ({size / 1e6:.1f} MB), batches of {BATCH} at {SHAPE}, 2 decode "
          f"threads; loopback S3 (moto) behind a proxy capped at {args.bandwidth / 1e6:.0f} MB/s; memory budget "
          f"{budget >> 20} MiB")
    header = (f"{'row':36} {'img/s':>8} {'ratio':>7} {'vs':>12} {'GETs':>6} {'GETs/rec':>9} {'bytes/file':>10} "
              f"{'peak/budget':>11}")
    print(header)
    print("-" * len(header))
    for name, _, gets, fetched, peak, anchor in rows:
        ratio = f"{rates[name] / anchors[anchor]:6.2f}x" if anchor in anchors else f"{'-':>7}"
        print(f"{name:36} {rates[name]:8.0f} {ratio} {anchor:>12} "
              f"{gets if gets is not None else '-':>6} "
              f"{f'{gets / args.images:.3f}' if gets is not None else '-':>9} "
              f"{f'{fetched:.3f}x' if fetched is not None else '-':>10} "
              f"{f'{peak:.2f}' if peak is not None else '-':>11}")

    quality(args.quality_records, size / args.images)
    return 0


if __name__ == "__main__":
    sys.exit(main())
