"""WriteBehind: calls run in order on one thread, bounded, errors raised to the caller, cancel drops the rest."""

from __future__ import annotations

import threading

import pytest

from mxrec.storage.write_behind import WriteBehind
from testkit.waiting import wait_for


def test_calls_run_in_order_on_another_thread() -> None:
    done: list[tuple[int, str]] = []
    behind = WriteBehind()
    for n in range(50):
        behind.submit(lambda n=n: done.append((n, threading.current_thread().name)))
    behind.close()
    assert [n for n, _ in done] == list(range(50))
    assert {name for _, name in done} != {threading.current_thread().name}
    assert all(name.startswith("mxrec-write-behind") for _, name in done)


def test_at_most_depth_calls_wait() -> None:
    """submit blocks while ``depth`` calls are queued or running: memory stays bounded."""
    gate = threading.Event()
    started: list[int] = []
    behind = WriteBehind(depth=2)

    def slow(n: int) -> None:
        started.append(n)
        gate.wait(10)

    behind.submit(slow, 0)
    behind.submit(slow, 1)
    blocked = threading.Thread(target=behind.submit, args=(slow, 2))
    blocked.start()
    blocked.join(0.3)
    assert blocked.is_alive()  # the third waits for the first to finish
    gate.set()
    blocked.join(10)
    assert not blocked.is_alive()
    behind.close()
    assert started == [0, 1, 2]


def test_an_error_reaches_the_caller_and_later_calls_do_not_run() -> None:
    ran: list[int] = []
    behind = WriteBehind(depth=8)

    def fail() -> None:
        raise OSError(28, "No space left on device")

    behind.submit(ran.append, 1)
    behind.submit(fail)
    behind.submit(ran.append, 2)
    with pytest.raises(OSError, match="No space left"):
        behind.close()
    assert ran == [1]


def test_cancel_drops_the_queued_calls_and_waits_for_the_running_one() -> None:
    ran: list[int] = []
    running, gate = threading.Event(), threading.Event()
    behind = WriteBehind(depth=8)

    def slow(n: int) -> None:
        running.set()
        gate.wait(10)
        ran.append(n)

    for n in range(5):
        behind.submit(slow, n)
    assert running.wait(10)
    canceller = threading.Thread(target=behind.cancel)
    canceller.start()
    wait_for(lambda: behind.waiting == 0, "cancel to drop the queued calls")
    assert canceller.is_alive() and ran == []  # cancel waits for the running call
    gate.set()
    canceller.join(10)
    assert not canceller.is_alive()
    # the running one finished before cancel returned, the rest were dropped, and the thread is gone
    assert ran == [0] and not any(t.name.startswith("mxrec-write-behind") for t in threading.enumerate())


def test_finish_closes_the_files_also_after_a_failed_call(tmp_path) -> None:
    behind = WriteBehind()
    with open(tmp_path / "out", "wb") as first, open(tmp_path / "index", "w") as second:
        behind.submit(first.write, b"data")
        behind.submit(lambda: (_ for _ in ()).throw(OSError(28, "No space left on device")))
        with pytest.raises(OSError, match="No space left"):
            behind.finish(first, second)
        assert first.closed and second.closed
    assert (tmp_path / "out").read_bytes() == b"data"
