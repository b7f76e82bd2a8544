"""The map-style dataset over S3 behind a :class:`~mxrec.torch.DistributedBatchSampler` reads ahead as the
iterators do: a block-shuffled epoch transfers the file about once (counted by the S3 test server)."""

from __future__ import annotations

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
