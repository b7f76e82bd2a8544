"""Atomic output never clobbers what is not ours: symbolic links, FIFOs, devices, directories, missing folders."""

from __future__ import annotations

import errno
import os
import stat
import threading

import pytest

from mxrec import RecordWriter
from mxrec.errors import OutputPathError
from mxrec.io.index import write_index
from mxrec.io.lists import write_label_names
from mxrec.storage.atomic import PARTIAL_SUFFIX, atomic_open, atomic_path


def partials(*folders) -> list:
    return [p for folder in folders for p in folder.iterdir() if p.name.endswith(PARTIAL_SUFFIX)]


def test_writing_through_a_symlink_replaces_its_target_atomically_and_keeps_the_link(tmp_path):
    real, links = tmp_path / "real", tmp_path / "links"
    real.mkdir(), links.mkdir()
    (real / "data.idx").write_text("old\n")
    link = links / "data.idx"
    link.symlink_to(os.path.join("..", "real", "data.idx"))
    with atomic_path(link) as tmp:
        assert os.path.dirname(tmp) == str(real)  # the partial file sits beside the target: rename stays atomic
        with open(tmp, "w") as f:
            f.write("new\n")
    assert (real / "data.idx").read_text() == "new\n"
    write_index(link, [0, 1], [0, 16])
    assert link.is_symlink() and os.readlink(link) == os.path.join("..", "real", "data.idx")
    assert (real / "data.idx").read_text() == "0\t0\n1\t16\n"
    assert not partials(real, links)


def test_a_dangling_symlink_creates_its_target(tmp_path):
    link = tmp_path / "names.labels"
    link.symlink_to(tmp_path / "target.labels")
    write_label_names(link, {0: "cat"})
    assert link.is_symlink() and (tmp_path / "target.labels").read_text() == "0\tcat\n"


def test_a_failed_write_through_a_symlink_leaves_the_target_untouched(tmp_path):
    (tmp_path / "t.txt").write_text("precious")
    (tmp_path / "l.txt").symlink_to("t.txt")
    with pytest.raises(RuntimeError), atomic_open(tmp_path / "l.txt") as f:
        f.write("half")
        raise RuntimeError("stop")
    assert (tmp_path / "t.txt").read_text() == "precious" and (tmp_path / "l.txt").is_symlink()
    assert not partials(tmp_path)


def read_fifo_while(fifo, write) -> bytes:
    """Make ``fifo``, read it on a thread while ``write()`` writes into it, and return what came through."""
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    write()
    reader.join(timeout=10)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and not partials(fifo.parent)
    return received[0] if received else b"(nothing: the FIFO was never opened)"


def test_writing_to_a_fifo_goes_straight_into_it(tmp_path):
    fifo = tmp_path / "pipe.idx"
    assert read_fifo_while(fifo, lambda: write_index(fifo, [3, 4], [0, 32])) == b"3\t0\n4\t32\n"


def test_record_writer_streams_into_a_fifo(tmp_path):
    fifo = tmp_path / "stream.rec"

    def write() -> None:
        with RecordWriter(fifo, atomic=True) as writer:
            writer.write(b"abc")

    assert len(read_fifo_while(fifo, write)) == 12


def test_a_directory_is_refused_with_a_clear_message(tmp_path):
    with pytest.raises(OutputPathError, match="is a directory"):
        write_index(tmp_path, [0], [0])
    (tmp_path / "dirlink").symlink_to(tmp_path)
    with pytest.raises(OutputPathError, match="a link to"):
        RecordWriter(tmp_path / "dirlink", atomic=True)
    assert not partials(tmp_path)


def test_a_missing_folder_is_named_not_the_partial_file(tmp_path):
    with pytest.raises(OutputPathError) as caught:
        write_index(tmp_path / "nowhere" / "x.idx", [0], [0])
    assert str(caught.value).startswith(f"{tmp_path / 'nowhere'}: no such folder") and PARTIAL_SUFFIX not in str(
        caught.value)


def _private_dev_full(tmp_path):
    """A character device node like /dev/full (1, 7) in ``tmp_path``: only root may make one."""
    node = tmp_path / "full"
    try:
        os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 7))
    except (PermissionError, AttributeError, OSError) as exc:
        pytest.skip(f"cannot make a device node here (needs root): {exc}")
    return node


def test_a_full_device_reports_enospc_and_stays_a_device(tmp_path, golden, mxrec_cli):
    node = _private_dev_full(tmp_path)
    with pytest.raises(OSError) as caught:
        write_index(node, [0], [0])
    assert caught.value.errno == errno.ENOSPC and caught.value.filename == str(node)
    result = mxrec_cli("index", golden / "idx" / "idx.rec", "-o", node)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip() == f"mxrec index: error: [Errno 28] No space left on device: '{node}'"
    assert stat.S_ISCHR(os.lstat(node).st_mode) and not partials(tmp_path)
