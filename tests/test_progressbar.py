"""The progress bar: its line, and drawing only where asked."""

from __future__ import annotations

import io

from mxrec.progressbar import ProgressBar, format_progress


def test_format_progress():
    assert format_progress(250, 1000, 2.0, "decoding", width=10) == \
        "decoding [##--------] 250/1000  25% 125/s ETA 6s"
    assert format_progress(0, 0, 0.0, width=4) == "[####] 0/0 100% 0/s ETA 0s"


def test_bar_draws_in_place_and_ends_the_line():
    stream = io.StringIO()
    with ProgressBar("reading", stream=stream, enabled=True, interval=0) as bar:
        bar(1, 3)
        bar(3, 3)
    drawn = stream.getvalue().split("\r")
    assert drawn[0] == "" and len(drawn) == 3
    assert drawn[1].startswith("reading [" + "#" * 10 + "-" * 20 + "] 1/3  33% ")
    assert drawn[2].startswith("reading [" + "#" * 30 + "] 3/3 100% ") and drawn[2].endswith("\n")


def test_a_shorter_line_covers_the_longer_one():
    stream = io.StringIO()
    bar = ProgressBar(stream=stream, enabled=True, interval=0)
    bar(5 * 10**11, 10**12)
    bar(1, 1)
    first, second = stream.getvalue().split("\r")[1:]
    assert len(first) > len(second.rstrip()) and len(second) == len(first)


def test_bar_off_a_terminal_draws_nothing():
    stream = io.StringIO()  # not a tty
    with ProgressBar(stream=stream) as bar:
        bar(5, 10)
    assert stream.getvalue() == ""
