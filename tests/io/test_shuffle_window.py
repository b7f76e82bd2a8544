"""The in-memory window of a block-shuffled epoch: each block fetched once for every thread, bounded."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from mxrec.io.shuffle_window import ShuffleWindow
from mxrec.storage.block_cache import BlockCache


def test_a_shuffle_window_fetches_a_block_once_for_every_thread_and_stays_bounded():
    window = ShuffleWindow(shuffle_block=10, capacity=2)
    calls: list[list[int]] = []
    release = threading.Event()

    def fetch(numbers: list[int]) -> list[bytes]:
        calls.append(list(numbers))
        release.wait(10)
        return [bytes([n]) * 4 for n in numbers]

    with ThreadPoolExecutor(3) as pool:
        futures = [pool.submit(window.blocks, "f", [1, 2], fetch) for _ in range(3)]
        release.set()
        results = [f.result(timeout=10) for f in futures]
    assert calls == [[1, 2]] and all(r == {1: b"\1" * 4, 2: b"\2" * 4} for r in results)
    window.blocks("f", [3], fetch)  # a third block: the least recently used one leaves
    assert window.blocks("f", [2, 3], fetch) == {2: b"\2" * 4, 3: b"\3" * 4} and calls[-1] == [3]
    assert window.blocks("f", [1], fetch) == {1: b"\1" * 4} and calls[-1] == [1]


def test_windows_sharing_a_store_fetch_each_block_once_between_them(tmp_path):
    """Two windows (two DataLoader workers' readers) with one shared store: a block one of them fetched the other
    maps from the store; a stored block of another length is never taken; a store that cannot be used only means
    nothing is shared."""
    calls: list[int] = []

    def fetch(numbers: list[int]) -> list[bytes]:
        calls.extend(numbers)
        return [bytes([n]) * (n + 1) for n in numbers]

    def size(n: int) -> int:
        return n + 1

    store = BlockCache(tmp_path / "shared", 64 << 20)
    first, second = ShuffleWindow(1, 8), ShuffleWindow(1, 8)
    first.shared = second.shared = store
    assert first.blocks("f", [0, 1, 2], fetch, size=size) == {n: bytes([n]) * (n + 1) for n in (0, 1, 2)}
    got = second.blocks("f", [1, 2, 3], fetch, size=size)
    assert calls == [0, 1, 2, 3] and {n: bytes(v) for n, v in got.items()} == {n: bytes([n]) * (n + 1)
                                                                             for n in (1, 2, 3)}
    other = ShuffleWindow(1, 8)
    other.shared = store
    assert other.blocks("f", [0], fetch, size=lambda n: 5) == {0: b"\0"} and calls[-1] == 0  # not whole: fetched
    (tmp_path / "a-file").write_bytes(b"")
    unusable = ShuffleWindow(1, 8)
    unusable.shared = BlockCache(tmp_path / "a-file" / "shared", 64 << 20)
    assert unusable.blocks("f", [4], fetch, size=size) == {4: b"\4" * 5} and calls[-1] == 4
