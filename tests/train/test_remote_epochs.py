"""What an epoch of ``ImageRecordIter`` over S3 costs, counted by the S3 test server: a block-shuffled epoch
transfers each byte of the file about once (the fetch threads share a block download in flight, the shuffle
window keeps its blocks in memory), and a global shuffle makes at most one request per record, with a warning
that says so."""

from __future__ import annotations

from pathlib import Path

import pytest

from mxrec.io.remote_reader import GlobalShuffleWarning
from mxrec.train import ImageRecordIter
from testkit.datasets import make_photo_set

COUNT = 480
OPTIONS = dict(data_shape=(3, 16, 16), resize=16, batch_size=16, shuffle=True, seed=3, preprocess_threads=2)


@pytest.fixture
def s3_images(s3_server, s3_bucket, tmp_path: Path) -> tuple[str, dict, int]:
    """``(url, storage options, .rec size)``: 480 photos of about 13 KB on the S3 test server."""
    rec = tmp_path / "photos.rec"
    make_photo_set(rec, COUNT)
    s3_server.put_object(s3_bucket, "photos.rec", rec.read_bytes())
    s3_server.put_object(s3_bucket, "photos.idx", rec.with_suffix(".idx").read_bytes())
    return f"s3://{s3_bucket}/photos.rec", s3_server.storage_options(), rec.stat().st_size


def epoch(url: str, options: dict, **params) -> int:
    """Samples of one epoch of ``ImageRecordIter(path_imgrec=url, **OPTIONS, **params)``."""
    with ImageRecordIter(path_imgrec=url, storage_options=options, **{**OPTIONS, **params}) as it:
        return sum(len(b.data[0]) - b.pad for b in it)


@pytest.mark.parametrize("shuffle_window", [8, 2])
def test_a_block_shuffled_epoch_transfers_the_file_about_once(s3_server, s3_images, shuffle_window):
    url, options, size = s3_images
    assert size > 4 << 20  # several read-ahead windows: blocks leave memory and are not fetched again
    mark = s3_server.log.mark()
    assert epoch(url, options, shuffle_block=24, shuffle_window=shuffle_window) == COUNT
    gets = s3_server.log.since(mark, method="GET", key="photos.rec")
    transferred = sum(r.length or 0 for r in gets)
    assert transferred <= 1.1 * size, f"{transferred} bytes for a {size}-byte file in {len(gets)} requests"


def test_a_global_shuffle_makes_at_most_one_request_per_record_and_says_so(s3_server, s3_images):
    url, options, _ = s3_images
    mark = s3_server.log.mark()
    with pytest.warns(GlobalShuffleWarning, match=r"one ranged request per record, 480 requests an epoch"):
        assert epoch(url, options, shuffle_block=0) == COUNT
    assert len(s3_server.log.since(mark, method="GET", key="photos.rec")) <= COUNT
