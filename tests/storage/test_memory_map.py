"""prefault: maps a span of a mapped file ahead of reading it, without changing what is read."""

from __future__ import annotations

from pathlib import Path

from mxrec.storage.memory_map import map_file, prefault, release


def test_prefault_leaves_the_bytes_as_they_are(tmp_path: Path) -> None:
    data = bytes(range(256)) * 40_000
    (tmp_path / "f").write_bytes(data)
    buf = map_file(tmp_path / "f")
    try:
        for start, stop in [(0, len(data)), (5000, 9000), (len(data) - 10, len(data) + 4096), (7, 7), (9, 3)]:
            prefault(buf, start, stop)  # unaligned, past the end, empty, backwards: no error
        assert buf[:] == data
    finally:
        release(buf)
    prefault(b"abc", 0, 3)  # a buffer that is no mapping: nothing to do
