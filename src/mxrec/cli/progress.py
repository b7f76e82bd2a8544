"""Progress of a long job: a live bar on a terminal, plain periodic lines in logs.

:class:`Progress` counts finished items. On a terminal it redraws one line
(``[#####.....] 1200/5000 24% 850 img/s ETA 4s``) at most ten times a second;
on anything else (a log file, a pipe, CI) it prints a plain line every
``interval`` seconds, so logs stay readable. Either way :meth:`Progress.close`
prints the final count and rate. ``enabled=False`` silences it.

Jobs report to it either by :meth:`Progress.update` (``count`` more items
done) or by calling it as the ``progress(done, total)`` callback that the
long-running library functions (pack, verify, stats) accept: library code
reports, only the command line draws.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

_BAR_WIDTH = 30
_REDRAW_SECONDS = 0.1


class Progress:
    """Report progress of ``total`` items of ``unit`` to ``stream`` (stderr by default)."""

    def __init__(self, total: int = 0, label: str = "", unit: str = "img", *, stream: TextIO | None = None,
                 interval: float = 10.0, live: bool | None = None, enabled: bool = True) -> None:
        self.total = total
        self.enabled = enabled
        self.label = label
        self.unit = unit
        self.stream = stream if stream is not None else sys.stderr
        self.interval = interval
        self.live = self.stream.isatty() if live is None else live
        self.done = 0
        self._start = time.perf_counter()
        self._last_report = self._start
        self._closed = False

    def rate(self) -> float:
        """Items per second so far."""
        elapsed = time.perf_counter() - self._start
        return self.done / elapsed if elapsed > 0 else 0.0

    def line(self) -> str:
        """The current status text."""
        rate = self.rate()
        text = f"{self.label}{self.done}/{self.total}"
        if self.total:
            text += f" {100 * self.done // self.total}%"
        text += f" {rate:.0f} {self.unit}/s"
        if rate > 0 and self.done < self.total:
            text += f" ETA {(self.total - self.done) / rate:.0f}s"
        return text

    def update(self, count: int = 1) -> None:
        """``count`` more items finished."""
        self.done += count
        self._report()

    def __call__(self, done: int, total: int) -> None:
        """``done`` of ``total`` items finished (the ``progress`` callback form)."""
        self.done, self.total = done, total
        self._report()

    def _report(self) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        if self.live and now - self._last_report >= _REDRAW_SECONDS:
            filled = _BAR_WIDTH * self.done // self.total if self.total else _BAR_WIDTH
            self.stream.write(f"\r[{'#' * filled}{'.' * (_BAR_WIDTH - filled)}] {self.line()}\033[K")
            self.stream.flush()
            self._last_report = now
        elif not self.live and now - self._last_report >= self.interval:
            print(self.line(), file=self.stream, flush=True)
            self._last_report = now

    def message(self, text: str) -> None:
        """Print ``text`` on a line of its own without breaking the bar."""
        if self.live and self.enabled:
            self.stream.write("\r\033[K")
        print(text, file=self.stream, flush=True)

    def close(self, failed: bool = False) -> None:
        """Print the final line (``failed``: only clear the bar, the error says what happened). Idempotent."""
        if self._closed:
            return
        self._closed = True
        if not self.enabled:
            return
        elapsed = time.perf_counter() - self._start
        if self.live:
            self.stream.write("\r\033[K")
            self.stream.flush()
        if failed:
            return
        print(f"{self.label}{self.done}/{self.total} in {elapsed:.1f}s ({self.rate():.0f} {self.unit}/s)",
              file=self.stream, flush=True)

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        self.close(failed=exc_type is not None)
