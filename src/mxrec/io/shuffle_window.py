"""The blocks a block-shuffled epoch is reading now, kept in memory: each block's bytes fetched once an epoch.

A block shuffle (:mod:`mxrec.train.sampler`) reads the records in blocks of
``shuffle_block`` consecutive positions, mixing ``shuffle_window`` blocks at a
time, so every block is read within one window and never again that epoch. A
:class:`ShuffleWindow` keeps the bytes of the blocks being read -- one block is
the byte range its records span in their file, fetched with one ranged request
the first time any of its records is needed -- and drops the least recently
used block once it holds more than ``capacity``. A thread that needs a block
another thread is fetching waits for that download instead of starting its own,
so the two fetch threads of an iterator never download a block twice.

One window is shared by the shards of a set (blocks are named by file) and
belongs to one process: pickled, it arrives empty.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future

from mxrec.errors import RemoteError


class ShuffleWindow:
    """Blocks of ``shuffle_block`` records, at most ``capacity`` of them in memory (see the module docstring)."""

    def __init__(self, shuffle_block: int, capacity: int) -> None:
        if shuffle_block < 1 or capacity < 1:
            raise ValueError(f"a shuffle window needs shuffle_block >= 1 and capacity >= 1, got {shuffle_block} "
                             f"and {capacity}")
        self.shuffle_block = shuffle_block
        self.capacity = capacity
        self._reset()

    @classmethod
    def sized(cls, shuffle_block: int, shuffle_window: int, lookahead: int) -> ShuffleWindow:
        """Room for every window a reader works on at once: the current one, those the next ``lookahead``
        records of the order reach into, and one block for the records around a window's edge."""
        windows = -(-max(lookahead, 1) // (shuffle_block * shuffle_window)) + 1
        return cls(shuffle_block, windows * shuffle_window + 1)

    def _reset(self) -> None:
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._blocks: OrderedDict[tuple[str, int], bytes] = OrderedDict()
        self._inflight: dict[tuple[str, int], Future] = {}

    def __getstate__(self) -> dict:
        return {"shuffle_block": self.shuffle_block, "capacity": self.capacity}

    def __setstate__(self, state: dict) -> None:
        self.shuffle_block, self.capacity = state["shuffle_block"], state["capacity"]
        self._reset()

    def blocks(self, owner: str, numbers: Sequence[int],
               fetch: Callable[[list[int]], list[bytes]]) -> dict[int, bytes]:
        """The bytes of blocks ``numbers`` of file ``owner``; the missing ones (that no other thread is
        fetching) are fetched with one call of ``fetch(missing numbers)``."""
        if self._pid != os.getpid():  # a forked child: the parent's threads, lock and downloads are not here
            self._reset()
        found: dict[int, bytes] = {}
        mine: list[int] = []
        theirs: dict[int, Future] = {}
        with self._lock:
            for n in numbers:
                key = (owner, n)
                data = self._blocks.get(key)
                if data is not None:
                    self._blocks.move_to_end(key)
                    found[n] = data
                elif key in self._inflight:
                    theirs[n] = self._inflight[key]
                else:
                    self._inflight[key] = Future()
                    mine.append(n)
        fetched: dict[int, bytes] = {}
        try:
            if mine:
                fetched = dict(zip(mine, fetch(mine), strict=True))
        finally:
            with self._lock:
                for n in mine:
                    future = self._inflight.pop((owner, n))
                    if n in fetched:
                        self._blocks[(owner, n)] = fetched[n]
                        future.set_result(fetched[n])
                    else:
                        future.set_exception(RemoteError(owner, f"shuffle block {n}: its fetch failed in "
                                                                f"another thread"))
                while len(self._blocks) > self.capacity:
                    self._blocks.popitem(last=False)
        found.update(fetched)
        for n, future in theirs.items():
            found[n] = future.result()
        return found

    def __repr__(self) -> str:
        return f"ShuffleWindow(shuffle_block={self.shuffle_block}, capacity={self.capacity})"
