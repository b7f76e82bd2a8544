"""RecordWriter(write_behind=True): blocks written by a thread and read back to check that no payload held the
magic at an aligned offset; a block that did is written again the careful way. The bytes are always those
RecordWriter.write gives, whichever block holds the magic and whenever the check's failure is found."""

from __future__ import annotations

import random
import struct
from pathlib import Path

import pytest

from mxrec import RecordWriter
from mxrec.format.header import IRHeader, pack

MAGIC = struct.pack("<I", 0xCED7230A)


def payloads(seed: int, count: int, magic_at: set[int]) -> list[bytes]:
    rng = random.Random(seed)
    out = []
    for n in range(count):
        data = bytearray(rng.randbytes(rng.randrange(1, 40_000) * 4))
        if n in magic_at:  # at an aligned offset of the payload (it follows a 24-byte header: aligned in the record)
            at = rng.randrange(0, len(data) // 4) * 4
            data[at:at + 4] = MAGIC
        out.append(bytes(data))
    return out


@pytest.mark.parametrize("magic_at", [set(), {0}, {13}, {13, 14, 40}, {63}], ids=str)
@pytest.mark.parametrize("keys", ["given", "positions"])
def test_blocks_in_flight_give_the_bytes_write_gives(tmp_path: Path, magic_at: set[int], keys: str) -> None:
    data = payloads(len(magic_at), 64, magic_at)
    head = pack(IRHeader(0, 2.0, 5, 0), b"")
    records = [(f"k{n}" if keys == "given" else None, (head, memoryview(p))) for n, p in enumerate(data)]
    with RecordWriter(tmp_path / "a.rec", tmp_path / "a.idx", key_type=str, write_behind=True) as behind:
        for first in range(0, 64, 4):  # 16 blocks: several in flight when the check of one fails
            behind.write_pieces(records[first:first + 4])
    with RecordWriter(tmp_path / "b.rec", tmp_path / "b.idx", key_type=str) as plain:
        for key, pieces in records:
            plain.write(b"".join(pieces), key)
    assert (tmp_path / "a.rec").read_bytes() == (tmp_path / "b.rec").read_bytes()
    assert (tmp_path / "a.idx").read_bytes() == (tmp_path / "b.idx").read_bytes()


def test_an_output_that_cannot_be_read_back_is_scanned_before_writing(tmp_path: Path) -> None:
    data = payloads(1, 12, {5})
    head = pack(IRHeader(0, 1.0, 1, 0), b"")
    with RecordWriter("/dev/null", tmp_path / "null.idx", key_type=str, write_behind=True) as behind:
        assert not behind._behind.can_check
        behind.write_pieces([(str(n), (head, p)) for n, p in enumerate(data)])
    with RecordWriter(tmp_path / "b.rec", tmp_path / "b.idx", key_type=str) as plain:
        for n, p in enumerate(data):
            plain.write(head + p, str(n))
    assert (tmp_path / "null.idx").read_bytes() == (tmp_path / "b.idx").read_bytes()


def test_a_file_system_that_cannot_map_files_is_read_back_instead(tmp_path: Path, monkeypatch) -> None:
    import mxrec.io.writer as writer_module

    def no_mapping(*args, **kwargs):
        raise OSError(19, "No such device")

    monkeypatch.setattr(writer_module.mmap, "mmap", no_mapping)
    data = payloads(3, 16, {9})
    head = pack(IRHeader(0, 1.0, 1, 0), b"")
    with RecordWriter(tmp_path / "a.rec", tmp_path / "a.idx", key_type=str, write_behind=True) as behind:
        for first in range(0, 16, 4):
            behind.write_pieces([(str(n), (head, data[n])) for n in range(first, first + 4)])
    with RecordWriter(tmp_path / "b.rec", tmp_path / "b.idx", key_type=str) as plain:
        for n, p in enumerate(data):
            plain.write(head + p, str(n))
    assert (tmp_path / "a.rec").read_bytes() == (tmp_path / "b.rec").read_bytes()
    assert (tmp_path / "a.idx").read_bytes() == (tmp_path / "b.idx").read_bytes()
