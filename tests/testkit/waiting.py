"""Waiting for something to happen, bounded: tests synchronise on conditions, never on fixed sleeps."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_for(condition: Callable[[], object], what: str, seconds: float = 60, poll: float = 0.01) -> None:
    """Return once ``condition()`` is true; fail naming ``what`` after ``seconds`` (``poll``: the check interval)."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {seconds} s waiting for {what}")
        time.sleep(poll)
