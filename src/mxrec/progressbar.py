"""A one-line progress bar for long passes over a dataset, drawn on a terminal (stderr by default).

:func:`format_progress` is the pure part (counts and times in, one line out).
A :class:`ProgressBar` is the ``progress`` callback of the long-running
functions (``bar(done, total)``) and redraws that line in place at most every
``interval`` seconds. Off a terminal (a log file, a pipe, a test) it draws
nothing unless told to, so logs do not fill with carriage returns.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


def format_progress(done: int, total: int, elapsed: float, label: str = "", width: int = 30) -> str:
    """``label [#####-----] done/total pct rate ETA``."""
    fraction = done / total if total else 1.0
    filled = int(width * fraction)
    rate = done / elapsed if elapsed > 0 else 0.0
    eta = (total - done) / rate if rate > 0 else 0.0
    head = f"{label} " if label else ""
    return (f"{head}[{'#' * filled}{'-' * (width - filled)}] {done}/{total} {100 * fraction:3.0f}% "
            f"{rate:.0f}/s ETA {eta:.0f}s")


class ProgressBar:
    """Call it with ``(done, total)`` as work proceeds; :meth:`close` (or leaving ``with``) ends the line."""

    def __init__(self, label: str = "", stream: TextIO | None = None, enabled: bool | None = None,
                 interval: float = 0.2) -> None:
        self.label = label
        self.stream = sys.stderr if stream is None else stream
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.interval = interval
        self.done = 0
        self.total = 0
        self._start = time.perf_counter()
        self._drawn = -interval
        self._width = 0  # length of the line last drawn: a shorter one must cover it

    def __call__(self, done: int, total: int) -> None:
        self.done, self.total = done, total
        now = time.perf_counter()
        if self.enabled and (now - self._drawn >= self.interval or done == total):
            self._draw(now)

    def _draw(self, now: float) -> None:
        self._drawn = now
        line = format_progress(self.done, self.total, now - self._start, self.label)
        self.stream.write("\r" + line.ljust(self._width))
        self._width = len(line)
        self.stream.flush()

    def close(self) -> None:
        """End the line (once); nothing was drawn if the bar is disabled or was never called."""
        if self.enabled and self.total:
            self.stream.write("\n")
            self.stream.flush()
        self.enabled = False

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
