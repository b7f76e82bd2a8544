"""Checksums, the format: CRC-32C per record cell (or, in older files, per block of bytes), computed whole or as
bytes arrive, in a sidecar."""

from __future__ import annotations

import base64
import json
import os

import crc32c
import numpy as np
import pytest

from mxrec.errors import ChecksumError, MxrecError
from mxrec.format.checksums import (
    BlockChecksums,
    Summer,
    checksums_path,
    compute,
    format_sidecar,
    parse_sidecar,
)
from mxrec.format.framing import MAGIC_BYTES, encode_record


def framed(payloads: list[bytes]) -> tuple[bytes, list[int]]:
    """The file of ``payloads`` and where each record starts."""
    parts = [encode_record(p) for p in payloads]
    return b"".join(parts), np.cumsum([0] + [len(p) for p in parts[:-1]]).tolist()


def payloads(count: int, seed: int = 0) -> list[bytes]:
    rng = np.random.default_rng(seed)
    out = [rng.bytes(int(n)) for n in rng.integers(0, 3000, count)]
    out[3] = b"ab" + MAGIC_BYTES * 3 + b"xy" + MAGIC_BYTES  # a record of several parts (cflag 1, 2, 3)
    out[5] = b""  # a header alone
    return out


def test_each_cell_is_the_crc32c_of_one_record_padding_included():
    data, starts = framed(payloads(40))
    sums = compute(data)
    assert sums.starts.tolist() == starts and sums.block_bytes is None and sums.unit == "record cell"
    ends = [*starts[1:], len(data)]
    assert sums.crcs.tolist() == [crc32c.crc32c(data[a:b]) for a, b in zip(starts, ends, strict=True)]
    assert [sums.span(n) for n in range(3)] == list(zip(starts[:3], ends[:3], strict=True))
    # a read of whole records is whole cells: nothing around them
    assert list(sums.covering(starts[4], starts[9])) == [4, 5, 6, 7, 8]
    assert list(sums.covering(starts[4] + 1, starts[9] + 1)) == [4, 5, 6, 7, 8, 9]
    assert len(compute(b"")) == 0


def test_bytes_that_do_not_frame_end_the_cells():
    data, starts = framed(payloads(10))
    damaged = data[:starts[6]] + b"\xff" * 8 + data[starts[6] + 8:]
    sums = compute(damaged)
    assert sums.starts.tolist() == starts[:6]  # record 5's cell runs on to the end: still covered
    assert sums.span(5) == (starts[5], len(data))
    assert compute(b"junk" * 5).starts.tolist() == [0]


@pytest.mark.parametrize("cut", [[10**9], [1, 3, 4, 8, 100], [7], [8], [4096], [13, 5000, 1]])
def test_summing_as_bytes_arrive_gives_the_same_checksums(cut):
    data, _ = framed(payloads(60, seed=1))
    summer = Summer()
    at, k = 0, 0
    while at < len(data):
        size = cut[k % len(cut)]
        summer.feed(data[at:at + size], at)
        at, k = at + size, k + 1
    assert summer.result(len(data)) == compute(data)


def test_summing_skips_bytes_fed_twice_and_refuses_a_gap():
    data, _ = framed(payloads(20))
    summer = Summer()
    summer.feed(data[:3000], 0)
    summer.feed(data[2000:], 2000)  # 2000..3000 again: skipped
    assert summer.result(len(data)) == compute(data)
    with pytest.raises(MxrecError, match="never summed"):
        Summer().feed(data[100:200], 100)
    with pytest.raises(MxrecError, match="of 9 bytes summed"):
        Summer().result(9)


@pytest.mark.parametrize("fed_past", [0, 5, 10_000])
def test_a_rollback_resumes_at_a_record_start_before_the_cut(fed_past):
    first, starts = framed(payloads(30))
    cut = starts[20]
    summer = Summer()
    summer.feed(first[:cut + fed_past], 0)
    summer.rollback(cut)  # the file is cut back there and written again
    assert summer.done in starts and summer.done <= cut
    again, _ = framed(payloads(30)[:20] + payloads(15, seed=9))
    summer.feed(again[summer.done:], summer.done)
    assert summer.result(len(again)) == compute(again)


def test_the_sidecar_round_trips_and_names_what_is_wrong():
    data, _ = framed(payloads(50))
    sums = compute(data)
    text = format_sidecar(sums)
    fields = json.loads(text)
    assert fields["format"] == "mxrec-checksums" and fields["version"] == 2 and fields["rec_bytes"] == len(data)
    assert fields["cells"] == "records" and fields["algorithm"] == "crc32c"
    lengths = np.frombuffer(base64.b64decode(fields["lengths"]), "<u4")
    assert lengths.sum() == len(data) and len(lengths) == 50
    assert parse_sidecar(text, "x.checksums", len(data)) == sums
    with pytest.raises(ChecksumError, match=rf"x.checksums: describes a {len(data)}-byte .rec, but the .rec holds 7"):
        parse_sidecar(text, "x.checksums", 7)
    with pytest.raises(ChecksumError, match="x.checksums: not JSON"):
        parse_sidecar("{", "x.checksums")
    with pytest.raises(ChecksumError, match="not an mxrec checksum file"):
        parse_sidecar('{"format": "other"}', "x.checksums")
    with pytest.raises(ChecksumError, match="version 3 is not supported"):
        parse_sidecar(json.dumps(dict(fields, version=3)), "x.checksums")
    short = dict(fields, rec_bytes=len(data) + 4)
    with pytest.raises(ChecksumError, match=rf"50 records of {len(data)} bytes in all, but the .rec holds"):
        parse_sidecar(json.dumps(short), "x.checksums")
    with pytest.raises(ChecksumError, match="algorithm 'md5' is not supported"):
        parse_sidecar(json.dumps(dict(fields, algorithm="md5")), "x.checksums")
    with pytest.raises(ChecksumError, match="not a checksum table"):
        parse_sidecar(json.dumps({k: v for k, v in fields.items() if k != "lengths"}), "x.checksums")


def test_version_1_sidecars_a_grid_of_blocks_still_read():
    data = os.urandom(10_000)
    crcs = [crc32c.crc32c(data[a:a + 4096]) for a in range(0, 10_000, 4096)]
    text = json.dumps({"format": "mxrec-checksums", "version": 1, "algorithm": "crc32c", "rec_bytes": 10_000,
                       "block_bytes": 4096, "crc32c": base64.b64encode(np.asarray(crcs, "<u4").tobytes()).decode()})
    sums = parse_sidecar(text, "old.checksums", 10_000)
    assert sums == BlockChecksums.grid(10_000, 4096, np.asarray(crcs, np.uint32)) and sums.unit == "block"
    assert len(sums) == 3 and sums.span(2) == (8192, 10_000) and list(sums.covering(4000, 8193)) == [0, 1, 2]
    assert sums.describe() == "3 block(s) of 4096 bytes" and json.loads(format_sidecar(sums))["version"] == 1
    assert sums.mismatch(1, data[4096:8192]) is None
    two = dict(json.loads(text), crc32c=base64.b64encode(np.asarray(crcs[:2], "<u4").tobytes()).decode())
    with pytest.raises(ChecksumError, match="2 blocks of 4096 bytes, but the .rec holds 10000"):
        parse_sidecar(json.dumps(two), "old.checksums")
    with pytest.raises(MxrecError, match="2 CRCs for 3000 bytes"):
        BlockChecksums.grid(3000, 1024, np.zeros(2, np.uint32))


def test_the_sidecar_sits_beside_the_rec_as_the_idx_does():
    assert checksums_path("data/train.rec") == "data/train.checksums"
    assert checksums_path("s3://b/x/train.rec") == "s3://b/x/train.checksums"


def test_a_mismatch_says_what_was_read_and_cells_must_tile_the_file():
    data, starts = framed(payloads(8))
    sums = compute(data)
    cell = bytearray(data[starts[2]:starts[3]])
    assert sums.mismatch(2, cell) is None
    cell[5] ^= 0x10
    assert sums.mismatch(2, cell) == crc32c.crc32c(bytes(cell))
    with pytest.raises(MxrecError, match="do not tile"):
        BlockChecksums(100, np.array([0, 50, 40]), np.zeros(3, np.uint32))
    with pytest.raises(MxrecError, match="2 CRCs for 3 cells"):
        BlockChecksums(100, np.array([0, 40, 50]), np.zeros(2, np.uint32))
