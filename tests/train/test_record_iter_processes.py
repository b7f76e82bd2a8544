"""``ImageRecordIter(preprocess_processes=N)``: worker processes give the threads' very bytes, resume, report errors
and leave no process or shared memory behind (:mod:`mxrec.train.processes`)."""

from __future__ import annotations

import gc
import json
import multiprocessing
import os
import select
import signal
import subprocess
import sys
import warnings

import pytest

import mxrec
from mxrec.errors import ImageDecodeError, ParameterError
from mxrec.format.header import IRHeader, pack
from mxrec.train import ImageRecordIter
from mxrec.train.pipeline import BrokenRecordWarning
from mxrec.train.processes import PARENT_CHECK_S, STOP_WAIT_S, WorkerError
from testkit import TESTS
from testkit.cli import sigint_handled
from testkit.iterdata import IM2REC, gradient_image, image_record, write_records

SMALL = str(IM2REC / "centercrop_resize64" / "sub.rec")  # 50 MXNet-made 64x64 JPEGs
AUGMENTED = dict(data_shape=(3, 48, 48), batch_size=8, shuffle=True, seed=5, rand_crop=True, rand_mirror=True,
                 brightness=0.3, contrast=0.3, saturation=0.3, pca_noise=0.1, mean_r=123.7, std_r=58.4)
METHODS = [m for m in ("fork", "spawn") if m in multiprocessing.get_all_start_methods()]


def epochs(it: ImageRecordIter, count: int) -> list[tuple]:
    """Every batch of ``count`` epochs, as bytes (data, labels, record ids, pad)."""
    return [batch_bytes(batch) for _ in range(count) for batch in it]


def batch_bytes(batch) -> tuple:
    return batch.data[0].tobytes(), batch.label[0].tobytes(), batch.index.tobytes(), batch.pad


def threaded(**params) -> list[tuple]:
    with ImageRecordIter(**params, preprocess_threads=2) as it:
        return epochs(it, 2)


@pytest.mark.parametrize("method", METHODS)
def test_processes_give_the_threads_bytes_over_two_augmented_epochs(method):
    expected = threaded(path_imgrec=SMALL, **AUGMENTED)
    with ImageRecordIter(path_imgrec=SMALL, **AUGMENTED, preprocess_threads=1, preprocess_processes=2,
                         preprocess_start_method=method) as it:
        got = epochs(it, 2)
        assert len(it._pipeline.pids) == 2
    assert len(got) == 14 and got == expected  # 7 batches an epoch (the last wrapped), new draws in epoch 1
    assert got[:7] != got[7:]
    assert multiprocessing.active_children() == []


def test_more_processes_than_slots_and_threads_in_each():
    expected = threaded(path_imgrec=SMALL, **AUGMENTED, dtype="uint8")
    with ImageRecordIter(path_imgrec=SMALL, **AUGMENTED, dtype="uint8", preprocess_threads=2,
                         preprocess_processes=3, prefetch_buffer=1) as it:
        assert epochs(it, 2) == expected


def test_resume_mid_epoch_with_processes():
    params = dict(path_imgrec=SMALL, **AUGMENTED)
    expected = threaded(**params)[:7]
    with ImageRecordIter(**params, preprocess_processes=2) as it:
        first = [batch_bytes(it.next()) for _ in range(3)]
        state = json.loads(json.dumps(it.state_dict()))
    assert state["consumed"] == 24
    with ImageRecordIter(**params, preprocess_processes=2) as it:
        it.load_state_dict(state)
        rest = [batch_bytes(b) for b in it]
        assert first + rest == expected
        # a reset mid-epoch drops the batches built ahead: the next epoch is the threads' epoch 1
        it.reset()
        it.load_state_dict(state)
        assert [batch_bytes(b) for b in it] == rest


def test_a_mixture_dataset():
    mixture = mxrec.mix([SMALL, SMALL], [0.7, 0.3], samples_per_epoch=40, seed=2)
    params = dict(path_imgrec=mixture, **AUGMENTED)
    expected = threaded(**params)
    with ImageRecordIter(**params, preprocess_processes=2, preprocess_start_method=METHODS[-1]) as it:
        assert epochs(it, 2) == expected
    mixture.close()


@pytest.fixture
def broken(tmp_path):
    """Records 0..7: ids 100, 101, a record that is no image (id 900), 102, ..., 106."""
    payloads = [image_record(gradient_image(16, 16, seed=i), float(100 + i), 100 + i) for i in range(7)]
    payloads.insert(2, pack(IRHeader(0, 9.0, 900, 0), b"not an image"))
    return str(write_records(tmp_path / "broken.rec", payloads))


def test_an_error_in_a_worker_reaches_the_caller_as_the_same_error(broken):
    params = dict(path_imgrec=broken, data_shape=(3, 16, 16), batch_size=2, on_broken="error")
    with ImageRecordIter(**params) as it, pytest.raises(ImageDecodeError) as by_thread:
        list(it)
    with ImageRecordIter(**params, preprocess_processes=2) as it:
        assert it.next().index.tolist() == [100, 101]  # the batch before the broken one arrives
        with pytest.raises(ImageDecodeError) as by_worker:
            it.next()
        assert "broken.rec" in str(by_worker.value) and "record 2: image" in str(by_worker.value)
        assert str(by_worker.value) == str(by_thread.value)
        assert any("worker process 1" in note for note in by_worker.value.__notes__)
        it.reset()  # the iterator goes on after an error
        assert it.next().index.tolist() == [100, 101]


def test_broken_records_skipped_in_a_worker_are_reported_in_the_parent(broken):
    params = dict(path_imgrec=broken, data_shape=(3, 16, 16), batch_size=4)
    with pytest.warns(BrokenRecordWarning, match="record 2"), ImageRecordIter(**params, preprocess_processes=2) as it:
        got = [batch_bytes(b) for b in it]
        assert it.skipped == [it.describe(2)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BrokenRecordWarning)
        with ImageRecordIter(**params) as it:
            assert got == [batch_bytes(b) for b in it]


@pytest.mark.parametrize("how", ["close", "with", "gc"])
def test_workers_stop_and_free_their_memory(how):
    it = ImageRecordIter(path_imgrec=SMALL, **AUGMENTED, preprocess_processes=2)
    it.next()
    slots = [slot.name for slot in it._pipeline._slots]
    assert len(multiprocessing.active_children()) == 2 and all(os.path.exists(f"/dev/shm/{s}") for s in slots)
    if how == "close":
        it.close()
        it.close()  # idempotent
    elif how == "with":
        with it:
            it.next()
    else:
        del it
        gc.collect()
    assert multiprocessing.active_children() == []
    assert not any(os.path.exists(f"/dev/shm/{s}") for s in slots)


def test_ctrl_c_is_the_parents_to_handle():
    with ImageRecordIter(path_imgrec=SMALL, **AUGMENTED, preprocess_processes=2) as it:
        first = batch_bytes(it.next())
        for pid in it._pipeline.pids:  # as a terminal's Ctrl-C reaches the whole process group
            os.kill(pid, signal.SIGINT)
        rest = [batch_bytes(b) for b in it]
    assert [first, *rest] == threaded(path_imgrec=SMALL, **AUGMENTED)[:7]
    # and the parent's KeyboardInterrupt, wherever it lands, leaves no worker behind once the block is left
    with sigint_handled(), pytest.raises(KeyboardInterrupt), ImageRecordIter(path_imgrec=SMALL, **AUGMENTED,
                                                                             preprocess_processes=2) as it:
        it.next()
        os.kill(os.getpid(), signal.SIGINT)
        list(it)
    assert multiprocessing.active_children() == []


def test_a_worker_that_dies_is_a_worker_error():
    with ImageRecordIter(path_imgrec=SMALL, **AUGMENTED, preprocess_processes=2) as it:
        it.next()
        worker = multiprocessing.active_children()[0]
        os.kill(worker.pid, signal.SIGKILL)
        worker.join(STOP_WAIT_S)
        with pytest.raises(WorkerError, match=r"exited with code -9"):
            list(it)
    assert multiprocessing.active_children() == []


ORPHAN = f"""
import os, signal, sys
sys.path.insert(0, {str(TESTS)!r})
from mxrec.train import ImageRecordIter
it = ImageRecordIter(path_imgrec={SMALL!r}, data_shape=(3, 48, 48), batch_size=8, preprocess_processes=2,
                     preprocess_start_method=sys.argv[1])
it.next()
print(*it._pipeline.pids, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="waits on pidfds (Linux)")
@pytest.mark.parametrize("method", METHODS)
def test_workers_exit_when_the_parent_is_killed(method):
    parent = subprocess.run([sys.executable, "-c", ORPHAN, method], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert parent.returncode == -signal.SIGKILL, parent.stderr
    pids = [int(p) for p in parent.stdout.split()]
    assert len(pids) == 2
    for pid in pids:
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:  # already gone
            continue
        try:
            readable, _, _ = select.select([fd], [], [], PARENT_CHECK_S + STOP_WAIT_S + 10)
            assert readable, f"worker {pid} outlived its parent"
        finally:
            os.close(fd)


def test_bad_process_parameters():
    with pytest.raises(ParameterError, match="preprocess_processes must be >= 0"):
        ImageRecordIter(path_imgrec=SMALL, **AUGMENTED, preprocess_processes=-1)
    with pytest.raises(ParameterError, match="preprocess_start_method"):
        ImageRecordIter(path_imgrec=SMALL, **AUGMENTED, preprocess_processes=1, preprocess_start_method="clone")
    with pytest.raises(ParameterError, match="preprocess_threads"):
        ImageRecordIter(path_imgrec=SMALL, **AUGMENTED, preprocess_processes=1, preprocess_threads=0)


@pytest.mark.filterwarnings("ignore:.*a global shuffle")
def test_remote_records_are_fetched_by_the_workers_a_batch_at_a_time(s3_server, s3_bucket):
    for ext in (".rec", ".idx"):
        with open(SMALL[:-4] + ext, "rb") as f:
            s3_server.put_object(s3_bucket, "small" + ext, f.read())
    params = dict(path_imgrec=f"s3://{s3_bucket}/small.rec", storage_options=s3_server.storage_options(),
                  **AUGMENTED)
    expected = threaded(path_imgrec=SMALL, **AUGMENTED)[:7]
    s3_server.log.clear()
    with ImageRecordIter(**params, preprocess_processes=2, preprocess_start_method=METHODS[-1]) as it:
        assert [batch_bytes(b) for b in it] == expected  # the same bytes as from the local file
    assert 0 < s3_server.log.count(method="GET", key="small.rec") < 50  # fewer GETs than records


def test_worker_processes_read_a_remote_set_ahead_and_download_each_block_once(s3_server, s3_bucket, tmp_path):
    """Two worker processes over S3 with a block shuffle: the batches the threads make of the local file, each
    shuffle block downloaded once for both (a GET a block, not one per record), the shared folder gone with the
    iterator."""
    from testkit.datasets import make_photo_set

    rec = tmp_path / "photos.rec"
    make_photo_set(rec, 480)
    for ext in (".rec", ".idx"):
        s3_server.put_object(s3_bucket, "photos" + ext, rec.with_suffix(ext).read_bytes())
    order = dict(data_shape=(3, 16, 16), resize=16, batch_size=16, shuffle=True, seed=2, shuffle_block=12,
                 shuffle_window=4)
    with ImageRecordIter(path_imgrec=str(rec), **order, preprocess_threads=2) as it:
        expected = [batch_bytes(b) for b in it]
    mark = s3_server.log.mark()
    with ImageRecordIter(path_imgrec=f"s3://{s3_bucket}/photos.rec", storage_options=s3_server.storage_options(),
                         **order, preprocess_threads=1, preprocess_processes=2,
                         preprocess_start_method=METHODS[-1]) as it:
        folder = it._downloads.folder
        assert [batch_bytes(b) for b in it] == expected
    gets = s3_server.log.since(mark, method="GET", key="photos.rec")
    size = rec.stat().st_size
    assert sum(r.length or 0 for r in gets) <= 1.15 * size and len(gets) <= 480 // 12 + 8, (len(gets), size)
    assert not os.path.exists(folder)


@pytest.mark.skipif("fork" not in METHODS, reason="needs fork")
def test_a_forked_child_that_collects_an_unclosed_iterator_leaves_its_workers_be(tmp_path):
    """A child forked while an iterator's worker processes run (another loader's fork workers, say) holds a copy
    of it; collected there, the copy stops nothing and prints nothing (it printed 'can only test a child process'
    tracebacks), and the parent's workers go on serving."""
    it = ImageRecordIter(path_imgrec=SMALL, **AUGMENTED, preprocess_threads=1, preprocess_processes=1,
                         preprocess_start_method="fork")
    next(it)
    generation = it._pipeline._generation.value  # (a copy's shutdown bumped it: the parent then waited forever)
    errors = tmp_path / "child.err"
    pid = os.fork()
    if pid == 0:  # the child: its copy of the iterator collected, then out without the parent's exit handlers
        try:
            os.dup2(os.open(errors, os.O_WRONLY | os.O_CREAT), 2)
            del it
            gc.collect()
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    assert errors.read_text() == "" and it._pipeline._generation.value == generation
    assert sum(1 for _ in it) > 0  # the rest of the epoch, from the parent's workers
    it.close()
