"""The map-style dataset over S3 behind a :class:`~mxrec.torch.DistributedBatchSampler` reads ahead as the
iterators do: a block-shuffled epoch transfers the file about once (counted by the S3 test server)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
from torch.utils.data import DataLoader

from mxrec.torch import DistributedBatchSampler, ImageRecordDataset
from testkit.datasets import make_photo_set

COUNT = 480


def test_sampler_gives_the_map_style_dataset_a_read_ahead_window_with_its_batches(s3_server, s3_bucket,
                                                                                tmp_path: Path):
    rec = tmp_path / "photos.rec"
    make_photo_set(rec, COUNT)
    s3_server.put_object(s3_bucket, "photos.rec", rec.read_bytes())
    s3_server.put_object(s3_bucket, "photos.idx", rec.with_suffix(".idx").read_bytes())
    size = rec.stat().st_size
    ds = ImageRecordDataset(f"s3://{s3_bucket}/photos.rec", storage_options=s3_server.storage_options(),
                            preprocess={"data_shape": (3, 16, 16), "resize": 16})
    sampler = DistributedBatchSampler(ds, 16, shuffle_block=24, shuffle_window=2, rank=0, world_size=1)
    assert ds.reader._window is None  # making a sampler never changes the dataset: its batches carry the plan
    mark = s3_server.log.mark()
    samples = sum(len(labels) for _, labels in DataLoader(ds, batch_sampler=sampler, collate_fn=lambda b: b))
    assert samples == COUNT
    gets = s3_server.log.since(mark, method="GET", key="photos.rec")
    transferred = sum(r.length or 0 for r in gets)
    assert transferred <= 1.1 * size, f"{transferred} bytes for a {size}-byte file in {len(gets)} requests"


FORKED_WORKERS = """
import json, sys, tempfile
from torch.utils.data import DataLoader
from mxrec import ImageRecordIter
from mxrec.torch import DistributedBatchSampler, ImageRecordDataset, batch_collate
url, options = sys.argv[1], json.loads(sys.argv[2])
for _ in ImageRecordIter(path_imgrec=url, data_shape=(3, 16, 16), batch_size=16, resize=16, shuffle=True,
                         storage_options=options):
    pass
for cache in (tempfile.mkdtemp(), None, None):
    ds = ImageRecordDataset(url, storage_options=options, cache_dir=cache,
                            preprocess={"data_shape": (3, 16, 16), "resize": 16})
    sampler = DistributedBatchSampler(ds, 16, shuffle=True, seed=1, rank=0, world_size=1)
    loader = DataLoader(ds, batch_sampler=sampler, num_workers=2, collate_fn=batch_collate,
                        multiprocessing_context="fork")
    print(sum(len(labels) for _, labels in loader))
"""


def test_forked_workers_after_the_parent_read_print_nothing_of_the_parents_connections(s3_proxy, s3_bucket,
                                                                                      tmp_path: Path):
    """The parent reads S3 (its connections, on fsspec's event loop), then fork DataLoader workers read it too,
    with a block cache and without: the workers' copies of the parent's connections are never closed on a loop the
    worker does not run (aiohttp printed "Task exception was never retrieved ... attached to a different loop")."""
    rec = tmp_path / "photos.rec"
    make_photo_set(rec, 300)
    s3_proxy.server.put_object(s3_bucket, "photos.rec", rec.read_bytes())
    s3_proxy.server.put_object(s3_bucket, "photos.idx", rec.with_suffix(".idx").read_bytes())
    done = subprocess.run([sys.executable, "-c", FORKED_WORKERS, f"s3://{s3_bucket}/photos.rec",
                           json.dumps(s3_proxy.storage_options())],
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["304"] * 3  # 19 batches of 16 (the last filled from the start of the order)
    assert "Task exception was never retrieved" not in done.stderr and "Traceback" not in done.stderr, done.stderr


@pytest.mark.parametrize("loader_kind", ["batches", "iterable"])
def test_dataloader_workers_download_each_shuffle_block_once_between_them(s3_server, s3_bucket, tmp_path: Path,
                                                                          loader_kind):
    """Two fork workers read ahead along the same block-shuffled order: without a cache of the user's, they
    share their downloads through the dataset's temporary folder (the file transferred about once, not once a
    worker), which is gone once the dataset is; with sharing switched off, or a folder that cannot be made, each
    downloads nearly all of it (and nothing fails)."""
    import gc

    from mxrec.torch import ImageRecordIterable, batch_collate

    rec = tmp_path / "photos.rec"
    make_photo_set(rec, COUNT)
    s3_server.put_object(s3_bucket, "photos.rec", rec.read_bytes())
    s3_server.put_object(s3_bucket, "photos.idx", rec.with_suffix(".idx").read_bytes())
    size = rec.stat().st_size
    url, options = f"s3://{s3_bucket}/photos.rec", s3_server.storage_options()
    order = dict(shuffle=True, seed=3, shuffle_block=12, shuffle_window=4)

    def epoch(share: bool | str) -> tuple[int, int, str | None]:
        if loader_kind == "batches":
            ds = ImageRecordDataset(url, storage_options=options, preprocess={"data_shape": (3, 16, 16),
                                                                              "resize": 16})
            loader = DataLoader(ds, batch_sampler=DistributedBatchSampler(ds, 16, rank=0, world_size=1, **order),
                                num_workers=2, collate_fn=batch_collate, multiprocessing_context="fork")
        else:
            ds = ImageRecordIterable(url, batch_size=16, rank=0, world_size=1, storage_options=options, **order)
            loader = DataLoader(ds, batch_size=16, num_workers=2, collate_fn=lambda b: b,
                                multiprocessing_context="fork")
        folder = ds.downloads.folder
        if not share:
            ds.downloads = None
        elif isinstance(share, str):
            ds.downloads.folder = share
        mark = s3_server.log.mark()
        batches = iter(loader)
        first = next(batches)
        if share is True:  # (the blocks are the user's data: a folder of theirs alone)
            assert os.stat(folder).st_mode & 0o777 == 0o700
        samples = sum(len(batch[1]) if loader_kind == "batches" else len(batch) for batch in [first, *batches])
        transferred = sum(r.length or 0 for r in s3_server.log.since(mark, method="GET", key="photos.rec"))
        del ds, loader, batches, first
        gc.collect()
        return samples, transferred, folder

    samples, shared, folder = epoch(share=True)
    assert samples == COUNT
    assert shared <= 1.15 * size, f"{shared} bytes for a {size}-byte file with 2 workers sharing their downloads"
    assert folder is not None and not os.path.exists(folder)  # (the workers had made it)
    samples, alone, _ = epoch(share=False)
    assert samples == COUNT and alone >= 1.5 * size, f"{alone} bytes for {size} without sharing"
    (tmp_path / "a-file").write_bytes(b"")  # a folder that cannot be made: the blocks are just not shared
    samples, unshared, _ = epoch(share=str(tmp_path / "a-file" / "blocks"))
    assert samples == COUNT and unshared >= 1.5 * size
