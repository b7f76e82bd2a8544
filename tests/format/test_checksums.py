"""Block checksums, the format: CRC-32C per fixed-size block, computed whole or as bytes arrive, in a sidecar."""

from __future__ import annotations

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


def test_each_block_is_the_crc32c_of_its_bytes():
    data = os.urandom(10_000)
    sums = compute(data, block_bytes=4096)
    assert len(sums) == 3 and sums.span(2) == (8192, 10_000)
    assert sums.crcs.tolist() == [crc32c.crc32c(data[a:a + 4096]) for a in range(0, 10_000, 4096)]
    assert compute(b"", 4096).crcs.tolist() == [] and len(compute(data[:4096], 4096)) == 1


@pytest.mark.parametrize("pieces", [[10_000], [1, 4095, 1, 8191 - 4096, 5904], [4096, 4096, 1808], [7] * 1428 + [4]])
def test_summing_as_bytes_arrive_gives_the_same_checksums(pieces):
    data = os.urandom(10_000)
    summer = Summer(4096)
    at = 0
    for size in pieces:
        summer.feed(data[at:at + size], at)
        at += size
    assert summer.result(10_000) == compute(data, 4096)


def test_summing_skips_bytes_fed_twice_and_refuses_a_gap():
    data = os.urandom(5000)
    summer = Summer(1024)
    summer.feed(data[:3000], 0)
    summer.feed(data[2000:5000], 2000)  # 2000..3000 again: skipped
    assert summer.result(5000) == compute(data, 1024)
    gap = Summer(1024)
    with pytest.raises(MxrecError, match="never summed"):
        gap.feed(data[100:200], 100)


def test_a_rollback_resumes_at_the_block_holding_the_cut():
    data = bytearray(os.urandom(5000))
    summer = Summer(1024)
    summer.feed(bytes(data), 0)
    summer.rollback(2500)  # the file is cut back there and written again
    assert summer.done == 2048
    data[2500:] = os.urandom(2500)
    summer.feed(bytes(data[2048:]), 2048)
    assert summer.result(5000) == compute(bytes(data), 1024)


def test_the_sidecar_round_trips_and_names_what_is_wrong(tmp_path):
    data = os.urandom(3 << 20)
    sums = compute(data)
    text = format_sidecar(sums)
    fields = json.loads(text)
    assert fields["format"] == "mxrec-checksums" and fields["rec_bytes"] == len(data)
    assert fields["block_bytes"] == 1 << 20 and fields["algorithm"] == "crc32c"
    assert parse_sidecar(text, "x.checksums", len(data)) == sums
    with pytest.raises(ChecksumError, match=r"x.checksums: describes a 3145728-byte .rec, but the .rec holds 7 bytes"):
        parse_sidecar(text, "x.checksums", 7)
    with pytest.raises(ChecksumError, match="x.checksums: not JSON"):
        parse_sidecar("{", "x.checksums")
    with pytest.raises(ChecksumError, match="not an mxrec checksum file"):
        parse_sidecar('{"format": "other"}', "x.checksums")
    short = dict(fields, crc32c=compute(data[:2 << 20]).to_dict()["crc32c"])
    with pytest.raises(ChecksumError, match="2 blocks of 1048576 bytes, but the .rec holds 3145728"):
        parse_sidecar(json.dumps(short), "x.checksums")
    with pytest.raises(ChecksumError, match="algorithm 'md5' is not supported"):
        parse_sidecar(json.dumps(dict(fields, algorithm="md5")), "x.checksums")


def test_the_sidecar_sits_beside_the_rec_as_the_idx_does():
    assert checksums_path("data/train.rec") == "data/train.checksums"
    assert checksums_path("s3://b/x/train.rec") == "s3://b/x/train.checksums"


def test_a_mismatch_says_what_was_read():
    data = bytearray(os.urandom(3000))
    sums = compute(bytes(data), 1024)
    assert sums.mismatch(1, data[1024:2048]) is None
    data[1500] ^= 0x10
    assert sums.mismatch(1, data[1024:2048]) == crc32c.crc32c(bytes(data[1024:2048]))
    with pytest.raises(MxrecError, match="2 CRCs for 3000 bytes"):
        BlockChecksums(3000, 1024, np.zeros(2, np.uint32))
