"""Remote readers used in a parent process go on working in its forked children (fork is Linux's default start
method for ``DataLoader`` workers): nothing made before the fork (file system object, session, event loop) is
used after it, because the process id is checked on every use, not only at open."""

from __future__ import annotations

import os
import select
import signal
from pathlib import Path

import numpy as np
import pytest

from mxrec.io.opener import RecordReader
from testkit.datasets import make_clean_dataset

COUNT = 24
WAIT_SECONDS = 120


@pytest.fixture
def s3_dataset(s3_server, s3_bucket, tmp_path: Path) -> tuple[str, dict, list[bytes]]:
    """``(url, storage options, payloads)`` of a clean image dataset on the S3 test server."""
    rec = tmp_path / "faces.rec"
    payloads = make_clean_dataset(rec, COUNT)
    s3_server.put_object(s3_bucket, "faces.rec", rec.read_bytes())
    s3_server.put_object(s3_bucket, "faces.idx", rec.with_suffix(".idx").read_bytes())
    return f"s3://{s3_bucket}/faces.rec", s3_server.storage_options(), payloads


def in_forked_child(work) -> str:
    """Run ``work()`` (returning a short string) in a forked child; its answer, or the exception it raised."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: answer through the pipe, never return into pytest
        try:
            answer = work()
        except BaseException as exc:
            answer = f"{type(exc).__name__}: {exc}"
        os.write(write_end, answer.encode()[:60000])
        os._exit(0)
    os.close(write_end)
    try:
        ready, _, _ = select.select([read_end], [], [], WAIT_SECONDS)
        if not ready:
            os.kill(pid, signal.SIGKILL)
            pytest.fail(f"the forked child gave no answer in {WAIT_SECONDS} s")
        chunks = []
        while chunk := os.read(read_end, 65536):
            chunks.append(chunk)
        return b"".join(chunks).decode()
    finally:
        os.close(read_end)
        os.waitpid(pid, 0)


def test_reader_used_in_the_parent_reads_in_a_forked_child(s3_dataset):
    url, options, payloads = s3_dataset
    reader = RecordReader(url, storage_options=options)
    assert reader.read_batch(range(COUNT)) == payloads  # the parent has a file system, a session, a loop

    def child() -> str:
        return "same" if reader.read_batch(range(COUNT)) == payloads and reader[3] == payloads[3] else "different"

    assert in_forked_child(child) == "same"
    assert reader.read_batch([5, 1]) == [payloads[5], payloads[1]]  # and the parent still reads


def test_fork_dataloader_over_s3_with_the_dataset_used_in_the_parent(s3_dataset):
    pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    from mxrec.torch import ImageRecordDataset, ImageRecordIterable, RecordDataset

    url, options, payloads = s3_dataset
    records = RecordDataset(url, storage_options=options)
    assert records[0] == payloads[0]  # used in the parent first
    loader = DataLoader(records, batch_size=5, num_workers=2, multiprocessing_context="fork", collate_fn=list,
                        timeout=WAIT_SECONDS)
    assert [p for batch in loader for p in batch] == payloads

    images = ImageRecordDataset(url, storage_options=options)
    first_image, first_label = images[0]
    loader = DataLoader(images, batch_size=6, num_workers=2, multiprocessing_context="fork", collate_fn=list,
                        timeout=WAIT_SECONDS)
    samples = [sample for batch in loader for sample in batch]
    assert len(samples) == COUNT and [int(label) for _, label in samples] == [k % 4 for k in range(COUNT)]
    assert np.array_equal(samples[0][0], first_image) and samples[0][1] == first_label

    iterable = ImageRecordIterable(url, batch_size=6, shuffle=False, storage_options=options)
    assert next(iter(iterable))[1] == 0  # used in the parent first
    loader = DataLoader(iterable, batch_size=6, num_workers=2, multiprocessing_context="fork", collate_fn=list,
                        timeout=WAIT_SECONDS)
    assert sorted(int(label) for batch in loader for _, label in batch) == sorted(k % 4 for k in range(COUNT))
