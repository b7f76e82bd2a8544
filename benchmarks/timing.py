"""Timing helpers shared by the benchmark scripts (importable under any interpreter, MXNet's included)."""

from __future__ import annotations

import time
from collections.abc import Callable


def best_of(repeat: int, fn: Callable[[], object]) -> float:
    """The shortest wall-clock time of ``repeat`` calls of ``fn``, in seconds (the machine may be shared)."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)
