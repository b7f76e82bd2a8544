"""The command lines: ``mxrec list``, ``mxrec pack``, ``mxrec im2rec`` (im2rec's exact arguments), ``mxrec extract``."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time

import pytest

from mxrec.format.lst import ListEntry
from mxrec.io.lists import read_list, write_list
from mxrec.io.opener import RecordReader
from testkit.cli import interruptible, mxrec_env
from testkit.waiting import wait_for

pytest.importorskip("cv2")


def test_pack_with_shards_and_pack_label(mxrec_cli, im2rec, tmp_path):
    shutil.copy(im2rec / "packlabel3" / "sub.lst", tmp_path / "ml.lst")
    mxrec_cli("pack", "--pass-through", "--pack-label", "--shard-size", "30", "--no-progress",
              tmp_path / "ml", im2rec / "photos200", check=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ml.lst", "ml.manifest.json", *(
        f"ml_0000{n}.{ext}" for n in range(2) for ext in ("checksums", "idx", "rec"))]
    with RecordReader(tmp_path / "ml_00001.rec") as reader:
        assert len(reader) == 20 and reader.header(0).flag == 3


def test_pack_strict_fails_and_lenient_reports(mxrec_cli, im2rec, tmp_path):
    shutil.copy(im2rec / "photos200" / "camera" / "camera_00000.jpg", tmp_path / "good.jpg")
    (tmp_path / "bad.jpg").write_bytes(b"")
    write_list(tmp_path / "d.lst", [ListEntry(0, (0.0,), "good.jpg"), ListEntry(1, (1.0,), "bad.jpg")])
    strict = mxrec_cli("pack", "--strict", tmp_path / "d", tmp_path)
    assert strict.returncode == 2 and "bad.jpg" in strict.stderr and "empty file" in strict.stderr
    assert not (tmp_path / "d.rec").exists()
    lenient = mxrec_cli("pack", tmp_path / "d", tmp_path)
    assert lenient.returncode == 1  # the output is complete for the rest, but the input was damaged
    assert "1 records, 1 skipped" in lenient.stdout and "skipped index 1: " in lenient.stderr
    assert f"{tmp_path / 'bad.jpg'}: empty file" in lenient.stderr


def test_pack_refuses_a_list_leaving_the_root(mxrec_cli, tmp_path):
    (tmp_path / "root").mkdir()
    (tmp_path / "d.lst").write_text("0\t0.000000\t../../etc/passwd\n")
    done = mxrec_cli("pack", tmp_path / "d", tmp_path / "root")
    assert done.returncode == 2 and "line 1" in done.stderr and "outside" in done.stderr
    assert f"leads outside the image root {str(tmp_path / 'root')!r}" in done.stderr  # the root given, not '.'


def test_pack_without_lists_is_an_error(mxrec_cli, tmp_path):
    done = mxrec_cli("pack", tmp_path / "nothing", tmp_path)
    assert done.returncode == 2 and "no .lst" in done.stderr


def test_list_from_csv(mxrec_cli, im2rec, tmp_path):
    photos = im2rec / "photos200"
    (tmp_path / "l.csv").write_text("path,label\ncamera/camera_00000.jpg,tool\nrocket/rocket_00000.jpg,ship\n"
                                    "coffee/coffee_00000.jpg,drink\n")
    done = mxrec_cli("list", "--csv", tmp_path / "l.csv", "--no-shuffle", tmp_path / "c", photos, check=True)
    assert "c.lst" in done.stdout and "c.labels" in done.stdout
    assert [(e.labels, e.path) for e in read_list(tmp_path / "c.lst")] == [
        ((2.0,), "camera/camera_00000.jpg"), ((1.0,), "rocket/rocket_00000.jpg"), ((0.0,), "coffee/coffee_00000.jpg")]
    assert (tmp_path / "c.labels").read_text() == "0\tdrink\n1\tship\n2\ttool\n"
    (tmp_path / "bad.csv").write_text("camera/camera_00000.jpg,tool\nnope.jpg,x\n")
    bad = mxrec_cli("list", "--csv", tmp_path / "bad.csv", tmp_path / "b", photos)
    assert bad.returncode == 2 and "bad.csv: line 2" in bad.stderr


def test_list_then_pack_then_extract_with_names(mxrec_cli, im2rec, tmp_path):
    mxrec_cli("list", "--recursive", "--seed", "3", tmp_path / "all", im2rec / "photos200", check=True)
    mxrec_cli("pack", "--pass-through", "--no-progress", tmp_path / "all", im2rec / "photos200", check=True)
    done = mxrec_cli("extract", tmp_path / "all.rec", tmp_path / "out", "--labels", tmp_path / "all.labels",
                     check=True)
    assert "wrote 50 files" in done.stdout
    assert len(list((tmp_path / "out" / "rocket").glob("*.jpg"))) == 5
    mxrec_cli("pack", "--pass-through", "--no-progress", tmp_path / "out" / "all", tmp_path / "out", check=True)
    assert (tmp_path / "out" / "all.rec").read_bytes() == (tmp_path / "all.rec").read_bytes()


@pytest.mark.parametrize(("signum", "said"), [(signal.SIGINT, "interrupted"), (signal.SIGTERM, "terminated")])
def test_ctrl_c_or_sigterm_stops_workers_and_leaves_no_output(im2rec, tmp_path, signum, said):
    # Many slow PNG encodings so that the job is surely still running when interrupted.
    entries = [ListEntry(i, (0.0,), e.path) for i, e in enumerate(read_list(im2rec / "default" / "sub.lst") * 20)]
    write_list(tmp_path / "big.lst", entries)
    job = interruptible([sys.executable, "-m", "mxrec", "pack", "--encoding", ".png", "-j", "2",
                        str(tmp_path / "big"), str(im2rec / "photos200")],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=mxrec_env())
    partial = tmp_path / "big.rec.partial"
    # the first records are written: the workers are encoding
    wait_for(lambda: job.poll() is not None or (partial.exists() and partial.stat().st_size > 0), "records written")
    assert job.poll() is None  # still packing
    interrupted = time.monotonic()
    job.send_signal(signum)
    _, err = job.communicate(timeout=60)
    assert time.monotonic() - interrupted < 10  # the running images finish, the queued ones are dropped
    assert job.returncode == 128 + signum and said in err and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.lst"]


def test_pack_with_a_wrong_root_fails_with_a_hint_and_writes_nothing(mxrec_cli, im2rec, tmp_path):
    shutil.copy(im2rec / "default" / "sub.lst", tmp_path / "sub.lst")
    result = mxrec_cli("pack", "--no-progress", tmp_path / "sub", im2rec)  # the photos are in im2rec/photos200
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "none of its 50 images could be packed" in result.stderr and "is that the right image root?" in \
        result.stderr and f"(first missing: {im2rec / read_list(tmp_path / 'sub.lst')[0].path})" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sub.lst"]


def test_list_that_finds_no_image_fails_with_the_reason(mxrec_cli, photos, tmp_path):
    flat = mxrec_cli("list", tmp_path / "x", photos)
    assert flat.returncode == 2 and "but 10 sub-folder(s): list them with --recursive" in flat.stderr
    (tmp_path / "imgs").mkdir()
    for i in range(3):
        (tmp_path / "imgs" / f"{i}.webp").write_bytes(b"RIFF....WEBP")
    other = mxrec_cli("list", tmp_path / "y", tmp_path / "imgs")
    assert other.returncode == 2 and "the files there have the extensions .webp (3): choose them with --exts" \
        in other.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["imgs"]
    assert mxrec_cli("list", tmp_path / "y", tmp_path / "imgs", "--exts", ".webp").returncode == 0


def test_pass_through_of_a_file_that_is_no_image_is_reported(mxrec_cli, im2rec, tmp_path):
    shutil.copy(im2rec / "photos200" / "camera" / "camera_00000.jpg", tmp_path / "good.jpg")
    (tmp_path / "notes.jpg").write_text("meeting notes, not a photo\n")
    write_list(tmp_path / "d.lst", [ListEntry(0, (0.0,), "good.jpg"), ListEntry(1, (1.0,), "notes.jpg")])
    lenient = mxrec_cli("pack", "--pass-through", "--no-progress", tmp_path / "d", tmp_path)
    assert lenient.returncode == 1 and "2 records, 0 skipped, 1 not images" in lenient.stdout
    assert f"stored index 1 unchanged: {tmp_path / 'notes.jpg'}: not an image" in lenient.stderr
    verified = mxrec_cli("verify", tmp_path / "d.rec", "--no-progress")  # headers only: still a finding
    assert verified.returncode == 1 and "1: unrecognised: 27 bytes in no known image format" in verified.stdout
    strict = mxrec_cli("pack", "--pass-through", "--strict", "--no-progress", tmp_path / "d", tmp_path)
    assert strict.returncode == 2 and "not an image" in strict.stderr
