"""The tar reader's scan for the RecordIO magic (members known free of it skip the .rec writer's own scan): the
same answer as looking at each member, across scan windows and with magics anywhere."""

from __future__ import annotations

import random
import struct

import pytest

from mxrec.format import framing
from mxrec.interop import webdataset

MAGIC = struct.pack("<I", framing.MAGIC)


@pytest.mark.parametrize("window", [64, 100, 4096])
def test_clean_agrees_with_looking_at_the_member(monkeypatch, window: int) -> None:
    monkeypatch.setattr(webdataset, "_SCAN_WINDOW", window)
    rng = random.Random(window)
    data = bytearray(rng.randbytes(3000))
    for at in (0, 4, 6, 512, 513, 1020, 1024, 2047, 2996):
        data[at:at + 4] = MAGIC
    view = memoryview(bytes(data))
    scan = webdataset._MagicScan(view)
    start = 0
    while start < len(data):  # members in file order, as the reader asks, some of them unaligned
        stop = min(len(data), start + rng.randrange(1, 700))
        expected = start % 4 == 0 and not framing.aligned_magic_offsets(view[start:stop]) and stop <= len(data) & ~3
        assert scan.clean(start, stop) == expected, (start, stop)
        start = stop + rng.randrange(0, 9)
