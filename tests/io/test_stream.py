"""A remote ``.rec`` read record after record (:mod:`mxrec.io.stream`, ``mxrec.recordio`` on URLs): exact
payloads, few requests for a sequential pass, small fetches after a jump, errors naming the URL and offset."""

from __future__ import annotations

from pathlib import Path

import fsspec
import numpy as np
import pytest

from mxrec.errors import RecordFormatError, TruncatedRecordError
from mxrec.format import framing
from mxrec.io.stream import FIRST_WINDOW, RecordStream
from mxrec.io.writer import RecordWriter


@pytest.fixture
def payloads() -> list[bytes]:
    rng = np.random.default_rng(1)
    sizes = [10, 0, 3, 40_000, 70_000, 5, 200_000, 17]  # records smaller and larger than the first window
    return [rng.integers(0, 256, n, dtype=np.uint8).tobytes() for n in sizes] * 10


def upload(tmp_path: Path, payloads: list[bytes], name: str) -> tuple[str, bytes]:
    with RecordWriter(tmp_path / "x.rec") as writer:
        for payload in payloads:
            writer.write(payload)
    data = (tmp_path / "x.rec").read_bytes()
    url = f"memory://mxrec-stream-tests/{name}.rec"
    fsspec.filesystem("memory").pipe(url, data)
    return url, data


def read_all(stream: RecordStream) -> list[bytes]:
    out, offset = [], 0
    while offset < stream.size:
        payload, offset = stream.record_at(offset)
        out.append(payload)
    return out


def test_a_sequential_pass_reads_every_record_in_few_requests(tmp_path, payloads):
    url, data = upload(tmp_path, payloads, "sequential")
    stream = RecordStream(url)
    assert read_all(stream) == payloads
    assert stream.file.requests <= 2 + len(data) // FIRST_WINDOW // 4  # windows double while reading on


def test_a_jump_fetches_little_more_than_the_record(tmp_path, payloads):
    url, data = upload(tmp_path, payloads, "jump")
    offsets = framing.record_offsets(data)
    stream = RecordStream(url)
    target = len(payloads) - 3  # a 5-byte record near the end
    stream.seek(offsets[target])
    before = stream.file.requests
    payload, after = stream.record_at(offsets[target])
    assert payload == payloads[target] and after == offsets[target + 1]
    assert stream.file.requests - before == 1 and len(stream._data) <= FIRST_WINDOW


def test_damage_names_the_url_and_the_absolute_offset(tmp_path, payloads):
    url, data = upload(tmp_path, payloads, "damaged")
    offsets = framing.record_offsets(data)
    broken = bytearray(data)
    broken[offsets[5]:offsets[5] + 4] = b"\0\0\0\0"  # the magic of record 5
    fsspec.filesystem("memory").pipe(url, bytes(broken))
    stream = RecordStream(url)
    with pytest.raises(RecordFormatError) as caught:
        read_all(stream)
    assert caught.value.path == url and caught.value.offset == offsets[5]
    cut = "memory://mxrec-stream-tests/cut.rec"
    fsspec.filesystem("memory").pipe(cut, data[:offsets[3] + 20])
    with pytest.raises(TruncatedRecordError) as caught:
        read_all(RecordStream(cut))
    assert caught.value.path == cut and caught.value.offset == offsets[3]
