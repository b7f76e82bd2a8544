"""The pack job against real im2rec output (golden/im2rec), broken images, unsafe lists, sharding, interrupts."""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

import pytest

from mxrec.errors import ListFileError, PackError, UnsafePathError
from mxrec.format.header import unpack
from mxrec.format.lst import ListEntry
from mxrec.io.lists import read_list, write_list
from mxrec.io.opener import RecordReader
from mxrec.io.shards import ShardLimit, parse_shard_size, shard_paths
from mxrec.packing.job import pack_list, pack_prefix, record_label
from mxrec.packing.prepare import ImageTransform
from testkit.datasets import make_broken_image_set

cv2 = pytest.importorskip("cv2")


def test_no_matching_list_is_an_error(tmp_path):
    with pytest.raises(PackError, match=r"no \.lst"):
        pack_prefix(tmp_path / "nothing", tmp_path)


def test_record_label_rule():
    assert record_label((3.0,), False) == 3.0
    assert record_label((3.0,), True) == 3.0  # one label stays a scalar, as im2rec
    assert record_label((3.0, 1.0), False) == 3.0
    assert record_label((3.0, 1.0), True) == (3.0, 1.0)


# -- broken images ---------------------------------------------------------------

@pytest.fixture
def broken_set(im2rec, tmp_path):
    """A folder with good images and every kind of bad one, and its .lst."""
    return make_broken_image_set(tmp_path, im2rec / "photos200")


@pytest.mark.parametrize("workers", [1, 2])
def test_bad_images_are_skipped_and_reported(broken_set, tmp_path, workers):
    lst, root = broken_set
    result = pack_list(lst, root, workers=workers)
    assert result.records == 3
    reasons = {s.path: s.reason for s in result.skipped}
    assert list(reasons) == ["empty.jpg", "cut.jpg", "missing.jpg", "text.jpg"]
    assert "empty" in reasons["empty.jpg"]
    assert "truncated JPEG" in reasons["cut.jpg"]
    assert "No such file" in reasons["missing.jpg"]
    assert "not a decodable image" in reasons["text.jpg"]
    assert all(str(root / path) in reason for path, reason in reasons.items())  # each reason names its file
    with RecordReader(tmp_path / "set.rec") as reader:
        assert reader.keys == [10, 12, 16]
        assert [unpack(r)[0].label for r in reader] == [0.0, 2.0, 6.0]


def test_pass_through_skips_empty_and_cut_files_and_reports_what_is_no_image(broken_set, tmp_path):
    lst, root = broken_set
    warned = []
    result = pack_list(lst, root, transform=ImageTransform(pass_through=True), on_warning=warned.append)
    assert [s.path for s in result.skipped] == ["empty.jpg", "cut.jpg", "missing.jpg"]
    assert result.records == 4  # the text file is stored unchanged, as im2rec did ...
    assert [n.path for n in result.not_images] == ["text.jpg"] and warned == result.not_images  # ... and reported
    assert result.not_images[0].reason == (f"{root / 'text.jpg'}: not an image: 20 bytes in no known image format "
                                           "(they start b'this is ')")
    write_list(tmp_path / "two.lst", [ListEntry(1, (0.0,), "camera_00000.jpg"), ListEntry(2, (0.0,), "text.jpg")])
    with pytest.raises(PackError, match=r"index 2: .*text\.jpg: not an image.*stopping \(strict\)"):
        pack_list(tmp_path / "two.lst", root, transform=ImageTransform(pass_through=True), strict=True)
    assert not (tmp_path / "two.rec").exists()


def test_headers_only_verify_reports_a_payload_that_is_no_image(broken_set, tmp_path):
    from mxrec.doctor.verify_dataset import verify_dataset

    lst, root = broken_set
    pack_list(lst, root, transform=ImageTransform(pass_through=True))
    images = verify_dataset(tmp_path / "set.rec").check("images")
    assert not images.ok and images.details["faults"] == {"unrecognised": 1}
    assert [(p.where, p.what.split(":")[0]) for p in images.problems] == [(15, "unrecognised")]
    assert "--decode tries OpenCV" in images.problems[0].what


def test_nothing_packed_is_an_error_naming_the_first_missing_file(broken_set, tmp_path):
    lst, root = broken_set
    with pytest.raises(PackError) as caught:
        pack_list(lst, tmp_path / "wrong-root")
    message = str(caught.value)
    assert "none of its 7 images could be packed, no output written" in message
    assert f"7 of 7 images of {lst} are missing under {tmp_path / 'wrong-root'}: is that the right image root?" \
        in message and f"(first missing: {tmp_path / 'wrong-root' / 'camera_00000.jpg'})" in message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["root", "set.lst"]
    (tmp_path / "empty.lst").write_text("")
    with pytest.raises(PackError, match="empty.lst: no entries, nothing to pack"):
        pack_list(tmp_path / "empty.lst", root)
    assert not (tmp_path / "empty.rec").exists()


def test_most_images_missing_gives_the_root_hint(broken_set, tmp_path, mxrec_cli):
    lst, root = broken_set
    names = ["camera_00000.jpg", "a/1.jpg", "a/2.jpg", "b/3.jpg", "empty.jpg"]
    write_list(tmp_path / "most.lst", [ListEntry(i, (0.0,), name) for i, name in enumerate(names)])
    result = pack_list(tmp_path / "most.lst", root)
    assert result.records == 1 and len(result.skipped) == 4
    assert result.root_hint() == (f"3 of 5 images of {tmp_path / 'most.lst'} are missing under {root}: is that the "
                                  f"right image root? (first missing: {root / 'a' / '1.jpg'})")
    assert pack_list(lst, root).root_hint() is None  # 1 missing of 7: bad files, not a wrong root
    cli = mxrec_cli("pack", "--no-progress", tmp_path / "most", root)
    assert cli.returncode == 1 and result.root_hint() in cli.stderr and "1 records, 4 skipped" in cli.stdout


@pytest.mark.parametrize("workers", [1, 2])
def test_strict_stops_and_leaves_no_output(broken_set, tmp_path, workers):
    lst, root = broken_set
    with pytest.raises(PackError, match=r"empty\.jpg"):
        pack_list(lst, root, workers=workers, strict=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["root", "set.lst"]


def test_progress_and_skips_reach_the_callbacks_and_nothing_is_printed(broken_set, capsys):
    lst, root = broken_set
    calls, skips = [], []
    result = pack_list(lst, root, progress=lambda done, total: calls.append((done, total)), on_skip=skips.append)
    assert calls == [(done, 7) for done in range(1, 8)]
    assert skips == result.skipped and any(s.index == 11 and "empty.jpg: empty file" in s.reason for s in skips)
    assert capsys.readouterr() == ("", "")  # library code reports; only the command line prints


# -- unsafe or malformed lists ---------------------------------------------------------

@pytest.mark.parametrize("path", ["../secret.jpg", "a/../../secret.jpg", "/etc/passwd"])
def test_paths_leaving_the_root_are_rejected(im2rec, tmp_path, path):
    root = tmp_path / "root"
    root.mkdir()
    shutil.copy(im2rec / "photos200" / "camera" / "camera_00000.jpg", tmp_path / "secret.jpg")
    shutil.copy(tmp_path / "secret.jpg", root / "ok.jpg")
    (tmp_path / "t.lst").write_text(f"0\t0.000000\tok.jpg\n1\t0.000000\t{path}\n")
    with pytest.raises(UnsafePathError, match="line 2"):
        pack_list(tmp_path / "t.lst", root, transform=ImageTransform(pass_through=True))
    assert not (tmp_path / "t.rec").exists() and not list(tmp_path.glob("*.partial"))


@pytest.mark.parametrize("text, message", [
    ("0\t0\ta.jpg\n0\t1\tb.jpg\n", "already used on line 1"),
    ("-1\t0\ta.jpg\n", "not a record id"),
    ("0\tcat\ta.jpg\n", "not a number"),
    ("0\ta.jpg\n", "at least 3"),
])
def test_malformed_lists_are_rejected_with_the_line(tmp_path, text, message):
    (tmp_path / "t.lst").write_text(text)
    with pytest.raises(ListFileError, match=message):
        pack_list(tmp_path / "t.lst", tmp_path)
    assert not (tmp_path / "t.rec").exists()


@pytest.mark.parametrize("workers", [1, 2])
def test_interrupt_removes_partial_output(im2rec, tmp_path, monkeypatch, workers):
    import mxrec.packing.job

    calls = []

    def interrupted(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return b"record"

    monkeypatch.setattr(mxrec.packing.job, "image_record", interrupted)
    with pytest.raises(KeyboardInterrupt):
        pack_list(im2rec / "default" / "sub.lst", im2rec / "photos200", tmp_path / "out.rec", workers=workers)
    assert list(tmp_path.iterdir()) == []


# -- worker threads ----------------------------------------------------------------

def long_list(im2rec, tmp_path, copies: int) -> Path:
    """The 50-image golden list repeated ``copies`` times under new indices."""
    entries = [ListEntry(n, e.labels, e.path)
               for n, e in enumerate(read_list(im2rec / "default" / "sub.lst") * copies)]
    write_list(tmp_path / "long.lst", entries)
    return tmp_path / "long.lst"


def test_threads_keep_list_order_whatever_order_images_finish(im2rec, tmp_path, monkeypatch):
    import random
    import time

    import mxrec.packing.job

    lst = long_list(im2rec, tmp_path, 3)
    expected = pack_list(lst, im2rec / "photos200", tmp_path / "one.rec", workers=1)
    real_image_record = mxrec.packing.job.image_record
    delays = random.Random(5)

    def slow_at_random(*args, **kwargs):
        time.sleep(delays.random() * 0.004)
        return real_image_record(*args, **kwargs)

    monkeypatch.setattr(mxrec.packing.job, "image_record", slow_at_random)
    result = pack_list(lst, im2rec / "photos200", tmp_path / "four.rec", workers=4)
    assert result.records == expected.records == 150
    assert (tmp_path / "four.rec").read_bytes() == (tmp_path / "one.rec").read_bytes()
    assert (tmp_path / "four.idx").read_bytes() == (tmp_path / "one.idx").read_bytes()


def test_threads_hold_a_bounded_number_of_images(im2rec, tmp_path, monkeypatch):
    import time

    import mxrec.packing.job
    from mxrec.packing.job import _IMAGES_PER_TASK, _TASKS_PER_WORKER, _results, read_pack_list

    started = []
    monkeypatch.setattr(mxrec.packing.job, "image_record", lambda *args: started.append(1) or b"record")
    entries = read_pack_list(long_list(im2rec, tmp_path, 4))
    results = _results(entries, str(im2rec / "photos200"), ImageTransform(), False, workers=2)
    bound = 2 * _TASKS_PER_WORKER * _IMAGES_PER_TASK
    for consumed, _ in enumerate(results, 1):
        time.sleep(0.0002)  # a slow writer: the workers run ahead as far as they may
        assert len(started) - consumed <= bound
        if consumed == 100:
            break
    results.close()  # as on Ctrl-C or a strict stop: queued tasks are dropped, running ones finish
    # close returned once the running tasks had finished: no thread is left to start another image
    assert not any(t.name.startswith("mxrec-pack") for t in threading.enumerate())
    assert len(started) <= 100 + bound


def test_threads_leave_opencv_thread_count_as_it_was(broken_set):
    cv2.setNumThreads(3)
    try:
        lst, root = broken_set
        pack_list(lst, root, workers=2)
        assert cv2.getNumThreads() == 3
        with pytest.raises(PackError):
            pack_list(lst, root, workers=2, strict=True)
        assert cv2.getNumThreads() == 3
    finally:
        cv2.setNumThreads(-1)


# -- shards ----------------------------------------------------------------------

def test_shards_by_records_hold_the_same_records(im2rec, tmp_path):
    lst, root = im2rec / "passthrough" / "sub.lst", im2rec / "photos200"
    result = pack_list(lst, root, tmp_path / "all.rec", ImageTransform(pass_through=True),
                       shard_limit=ShardLimit(records=20))
    assert result.outputs == [shard_paths(tmp_path / "all.rec", n) for n in range(3)]
    assert result.outputs[0] == (str(tmp_path / "all_00000.rec"), str(tmp_path / "all_00000.idx"))
    keys, records = [], []
    for rec, idx in result.outputs:
        with RecordReader(rec, idx) as reader:
            keys += reader.keys
            records += list(reader)
    assert [len(RecordReader(rec)) for rec, _ in result.outputs] == [20, 20, 10]
    with RecordReader(im2rec / "passthrough" / "sub.rec") as reader:
        assert keys == reader.keys and records == list(reader)


def test_shards_by_bytes_stay_under_the_cap(im2rec, tmp_path):
    limit = 200_000
    result = pack_list(im2rec / "passthrough" / "sub.lst", im2rec / "photos200", tmp_path / "s.rec",
                       ImageTransform(pass_through=True), shard_limit=ShardLimit(bytes=limit))
    sizes = [os.path.getsize(rec) for rec, _ in result.outputs]
    assert len(sizes) > 5 and max(sizes) <= limit
    assert sum(sizes) == os.path.getsize(im2rec / "passthrough" / "sub.rec")


def test_failed_sharded_job_leaves_no_shard(broken_set, tmp_path):
    lst, root = broken_set
    with pytest.raises(PackError):
        pack_list(lst, root, tmp_path / "s.rec", shard_limit=ShardLimit(records=1), strict=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["root", "set.lst"]


@pytest.mark.parametrize("text, limit", [
    ("1000", ShardLimit(records=1000)), ("512MB", ShardLimit(bytes=512 * 10**6)),
    ("2GiB", ShardLimit(bytes=2 * 2**30)), ("64m", ShardLimit(bytes=64 * 2**20)), ("10 kb", ShardLimit(bytes=10_000)),
])
def test_parse_shard_size(text, limit):
    assert parse_shard_size(text) == limit


@pytest.mark.parametrize("text", ["0", "-5", "12 parsecs", "MB", ""])
def test_bad_shard_sizes(text):
    from mxrec.errors import OptionError

    with pytest.raises(OptionError):
        parse_shard_size(text)


def test_workers_start_after_the_parent_ran_opencv_threads(im2rec, tmp_path):
    # Workers started after OpenCV's thread pool has run must not hang (forked worker processes that touched
    # that pool's state did; the workers are threads now, and the pool is set to one thread in this process).
    import subprocess
    import sys

    script = (
        "import sys, cv2, numpy as np\n"
        "from mxrec.packing.job import pack_list\n"
        "big = np.zeros((3000, 3000, 3), np.uint8)\n"
        "cv2.resize(big, (999, 999)); cv2.resize(big, (1500, 1501))\n"
        "r = pack_list(sys.argv[1], sys.argv[2], sys.argv[3], workers=2)\n"
        "print(r.records)\n")
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).parent.parent / "src"))
    done = subprocess.run([sys.executable, "-c", script, str(im2rec / "default" / "sub.lst"),
                           str(im2rec / "photos200"), str(tmp_path / "x.rec")],
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.stdout.strip() == "50", done.stderr
    assert (tmp_path / "x.idx").read_bytes() == (im2rec / "default" / "sub.idx").read_bytes()
