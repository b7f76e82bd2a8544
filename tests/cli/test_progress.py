"""Progress display: a bar on a terminal, plain periodic lines elsewhere, silence when disabled."""

from __future__ import annotations

import io

from mxrec.cli.progress import Progress


def test_callback_form_draws_a_bar_on_a_terminal():
    stream = io.StringIO()
    with Progress(label="reading: ", unit="rec", stream=stream, live=True) as bar:
        bar._last_report = -1.0  # force a redraw now
        bar(1, 4)
    text = stream.getvalue()
    assert "\r[" + "#" * 7 + "." * 23 + "] reading: 1/4 25%" in text
    assert text.endswith(" rec/s)\n") and "reading: 1/4 in " in text


def test_plain_lines_off_a_terminal():
    stream = io.StringIO()  # not a tty
    with Progress(10, "job: ", stream=stream, interval=0) as bar:
        bar.update(5)
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("job: 5/10 50% ") and lines[-1].startswith("job: 5/10 in ")
    assert "\r" not in stream.getvalue()


def test_disabled_prints_nothing():
    stream = io.StringIO()
    with Progress(10, stream=stream, live=True, enabled=False) as bar:
        bar(10, 10)
        bar.message("skipped x")
    assert stream.getvalue() == "skipped x\n"


def test_progress_draws_a_bar_on_a_terminal():
    stream = io.StringIO()
    progress = Progress(4, "x: ", stream=stream, live=True)
    progress._last_report = -1.0  # force a redraw now
    progress.update(2)
    progress.close()
    assert "\r[" + "#" * 15 + "." * 15 + "] x: 2/4 50%" in stream.getvalue()
    assert stream.getvalue().endswith(" img/s)\n") and "\r\033[Kx: 2/4 in " in stream.getvalue()


def test_a_failed_job_prints_no_final_count():
    stream = io.StringIO()
    try:
        with Progress(label="reading: ", stream=stream):
            raise OSError("no such file")
    except OSError:
        pass
    assert stream.getvalue() == ""
