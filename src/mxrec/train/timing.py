"""Where a pipeline's time goes: cheap per-stage, per-thread timers inside the real loader, off unless asked for.

A :class:`StageClock` is given to a :class:`~mxrec.train.sample_loader.RecordSampleLoader` (``loader.clock``) and a
:class:`~mxrec.train.pipeline.BatchPipeline` (``pipeline.clock``); without one they time nothing (one ``is
None`` test per stage). With one, each sample's work is split into :data:`STAGES` -- ``fetch`` (the record's
bytes: a memory-mapped view, or a remote batch waited for), ``decode``, ``augment`` (resize, crop, colour) and
``write`` (mirror, normalise, into the batch slot) -- and the consumer's ``wait`` for the next batch is added.
Each thread adds to its own counters (no lock on the hot path); :meth:`StageClock.snapshot` sums them.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict

STAGES = ("fetch", "decode", "augment", "write")
WAIT = "wait"  # the consumer waiting for the next batch


class StageClock:
    """Nanoseconds and counts per ``(thread name, stage)``, plus record bytes fetched and samples done."""

    def __init__(self) -> None:
        self._local = threading.local()
        self._lock = threading.Lock()
        self._threads: list[tuple[str, dict]] = []

    @staticmethod
    def now() -> int:
        return time.perf_counter_ns()

    def _counters(self) -> dict:
        counters = getattr(self._local, "counters", None)
        if counters is None:
            counters = self._local.counters = defaultdict(lambda: [0, 0])
            with self._lock:
                self._threads.append((threading.current_thread().name, counters))
        return counters

    def lap(self, stage: str, start: int, nbytes: int = 0, count: int = 1) -> int:
        """Add the time since ``start`` (from :meth:`now`) to ``stage``, and ``count`` to its count (work done for
        samples counted already: 0); return now (the next stage's start)."""
        now = time.perf_counter_ns()
        entry = self._counters()[stage]
        entry[0] += now - start
        entry[1] += count
        if nbytes:
            self._counters()["bytes"][0] += nbytes
        return now

    def reset(self) -> None:
        """Forget everything counted so far (after a warm-up)."""
        with self._lock:
            for _, counters in self._threads:
                counters.clear()

    def snapshot(self) -> dict[str, dict[str, tuple[float, int]]]:
        """``{thread: {stage: (seconds, count)}}``; the fetched bytes under stage ``"bytes"`` as ``(0, bytes)``."""
        out: dict[str, dict[str, tuple[float, int]]] = {}
        with self._lock:
            threads = list(self._threads)
        for name, counters in threads:
            stages = out.setdefault(name, {})
            for stage, (ns, count) in list(counters.items()):
                if stage == "bytes":
                    seconds, count = 0.0, ns
                else:
                    seconds = ns / 1e9
                old = stages.get(stage, (0.0, 0))
                stages[stage] = (old[0] + seconds, old[1] + count)
        return out
