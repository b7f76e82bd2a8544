"""The in-memory window of a block-shuffled epoch: each block fetched once for every thread, bounded."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from mxrec.io.shuffle_window import ShuffleWindow


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
