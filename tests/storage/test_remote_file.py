"""Concurrent reads of one remote file through its block cache: a block is downloaded once, however many threads
need it at the same time."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from mxrec.storage.block_cache import BlockCache
from mxrec.storage.remote_file import RemoteFile


def test_threads_share_a_block_download_in_flight(s3_server, s3_bucket, tmp_path: Path):
    data = np.random.default_rng(0).integers(0, 256, 1 << 20, dtype=np.uint8).tobytes()
    s3_server.put_object(s3_bucket, "blob.bin", data)
    file = RemoteFile(f"s3://{s3_bucket}/blob.bin", s3_server.storage_options(), size=len(data),
                      cache=BlockCache(tmp_path, block_size=1 << 20))
    s3_server.faults.delay_next(1, seconds=0.5, method="GET", key="blob.bin")  # the first download is slow
    mark = s3_server.log.mark()
    wanted = [(0, 1000), (5000, 9000), (700_000, 700_100)]
    with ThreadPoolExecutor(3) as pool:
        got = list(pool.map(lambda r: file.read_ranges([r])[0], wanted))
    assert got == [data[start:end] for start, end in wanted]
    assert len(s3_server.log.since(mark, method="GET", key="blob.bin")) == 1
