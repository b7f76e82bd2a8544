"""mxrec.recordio as a drop-in for mxnet.recordio: MXNet's own test scenarios, golden files, and the fixes."""

from __future__ import annotations

import multiprocessing
import os
import pickle
import random
import shutil
import threading
import warnings

import numpy as np
import pytest

import mxrec.recordio as recordio
from mxrec.errors import ForkedWriterError, IndexFileError, ModeError, MxrecError, RecordKeyError


def test_mxnet_unittest_sequential_255_records(tmp_path):
    # MXNet's tests/python/unittest/test_recordio.py::test_recordio
    path = str(tmp_path / "test.rec")
    writer = recordio.MXRecordIO(path, "w")
    for i in range(255):
        writer.write(bytes([i]))
    del writer
    reader = recordio.MXRecordIO(path, "r")
    for i in range(255):
        assert reader.read() == bytes([i])
    assert reader.read() is None


def test_mxnet_unittest_indexed_random_access(tmp_path):
    # ... ::test_indexed_recordio
    idx, rec = str(tmp_path / "t.idx"), str(tmp_path / "t.rec")
    writer = recordio.MXIndexedRecordIO(idx, rec, "w")
    for i in range(255):
        writer.write_idx(i, bytes([i]))
    writer.close()
    reader = recordio.MXIndexedRecordIO(idx, rec, "r")
    keys = reader.keys
    assert sorted(keys) == list(range(255))
    random.Random(0).shuffle(keys)
    for k in keys:
        assert reader.read_idx(k) == bytes([k])


def test_golden_idx_read_and_written_identically(golden, tmp_path):
    expected = pickle.loads((golden / "idx" / "idx_expected.pkl").read_bytes())
    reader = recordio.MXIndexedRecordIO(str(golden / "idx" / "idx.idx"), str(golden / "idx" / "idx.rec"), "r")
    assert reader.keys == list(range(255))
    order = list(range(255))
    random.Random(1).shuffle(order)
    assert {k: reader.read_idx(k) for k in order} == expected
    writer = recordio.MXIndexedRecordIO(str(tmp_path / "i.idx"), str(tmp_path / "i.rec"), "w")
    tells = []
    for i in range(255):
        writer.write_idx(i, str(i).encode())
        tells.append(writer.tell())
    writer.close()
    assert tells[:6] == [12, 24, 36, 48, 60, 72]
    assert (tmp_path / "i.rec").read_bytes() == (golden / "idx" / "idx.rec").read_bytes()
    assert (tmp_path / "i.idx").read_bytes() == (golden / "idx" / "idx.idx").read_bytes()


def test_golden_out_of_order_keys(golden, tmp_path):
    expected = pickle.loads((golden / "idx" / "ooo_expected.pkl").read_bytes())
    reader = recordio.MXIndexedRecordIO(str(golden / "idx" / "ooo.idx"), str(golden / "idx" / "ooo.rec"), "r")
    assert reader.keys == [10, 3, 7, 1000000, 0]
    assert [reader.read_idx(k) for k, _ in expected] == [v for _, v in expected]
    reader.read_idx(3)
    assert reader.read() == b""  # the next record in file order, as MXNet
    writer = recordio.MXIndexedRecordIO(str(tmp_path / "o.idx"), str(tmp_path / "o.rec"), "w")
    for k, v in expected:
        writer.write_idx(k, v)
    writer.close()
    assert (tmp_path / "o.rec").read_bytes() == (golden / "idx" / "ooo.rec").read_bytes()
    assert (tmp_path / "o.idx").read_text() == "10\t0\n3\t12\n7\t28\n1000000\t36\n0\t116\n"


def test_golden_string_keys(golden, tmp_path):
    expected = pickle.loads((golden / "idx" / "strkeys_expected.pkl").read_bytes())
    reader = recordio.MXIndexedRecordIO(str(golden / "idx" / "strkeys.idx"), str(golden / "idx" / "strkeys.rec"),
                                        "r", key_type=str)
    assert reader.keys == ["img_b", "img_a", "x y"]
    assert [reader.read_idx(k) for k, _ in expected] == [v for _, v in expected]
    writer = recordio.MXIndexedRecordIO(str(tmp_path / "s.idx"), str(tmp_path / "s.rec"), "w", key_type=str)
    for k, v in expected:
        writer.write_idx(k, v)
    writer.close()
    assert (tmp_path / "s.idx").read_bytes() == (golden / "idx" / "strkeys.idx").read_bytes()
    assert (tmp_path / "s.rec").read_bytes() == (golden / "idx" / "strkeys.rec").read_bytes()


def test_golden_duplicate_keys_follow_mxnet_with_a_warning(golden):
    with pytest.warns(UserWarning, match="duplicated key"):
        reader = recordio.MXIndexedRecordIO(str(golden / "idx" / "dupkey.idx"), str(golden / "idx" / "dupkey.rec"),
                                            "r")
    assert reader.keys == [5, 5] and reader.idx == {5: 16}
    assert reader.read_idx(5) == b"second"


def test_flags_close_and_reset(tmp_path):
    path = str(tmp_path / "r.rec")
    with pytest.raises(ValueError, match="Invalid flag"):
        recordio.MXRecordIO(path, "a")
    writer = recordio.MXRecordIO(path, "w")
    writer.write(b"one")
    writer.close()
    writer.close()  # idempotent
    reader = recordio.MXRecordIO(path, "r")
    with pytest.raises(ModeError):
        reader.write(b"x")
    assert reader.read() == b"one" and reader.read() is None
    reader.reset()
    assert reader.read() == b"one"
    reader.close()
    with pytest.raises(MxrecError, match="closed"):
        reader.read()


def test_reset_in_write_mode_truncates_rec_and_idx(tmp_path):
    idx, rec = str(tmp_path / "w.idx"), str(tmp_path / "w.rec")
    writer = recordio.MXIndexedRecordIO(idx, rec, "w")
    writer.write_idx(1, b"before")
    writer.reset()
    writer.write_idx(2, b"after")
    writer.close()
    reader = recordio.MXIndexedRecordIO(idx, rec, "r")
    assert reader.keys == [2] and reader.read_idx(2) == b"after"


def test_sticky_eof_is_not_copied(golden):
    reader = recordio.MXIndexedRecordIO(str(golden / "idx" / "idx.idx"), str(golden / "idx" / "idx.rec"), "r")
    while reader.read() is not None:
        pass
    assert reader.read_idx(7) == b"7"
    assert reader.read() == b"8"


def test_pickle_does_not_close_original_and_copy_reads(golden, tmp_path):
    reader = recordio.MXIndexedRecordIO(str(golden / "idx" / "idx.idx"), str(golden / "idx" / "idx.rec"), "r")
    reader.read_idx(3)
    clone = pickle.loads(pickle.dumps(reader))
    assert reader.is_open and reader.read() == b"4"
    assert clone.read_idx(200) == b"200" and clone.keys == list(range(255))
    writer = recordio.MXRecordIO(str(tmp_path / "w.rec"), "w")
    with pytest.raises(TypeError, match="would truncate"):
        pickle.dumps(writer)
    writer.close()
    assert pickle.loads(pickle.dumps(writer)).is_open is False


def _child_reads(reader, queue):
    try:
        queue.put([reader.read_idx(k) for k in (5, 250, 0)] + [reader.read()])
    except Exception as exc:  # report, don't hang the parent
        queue.put(repr(exc))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_reading_works_in_a_forked_child(golden):
    reader = recordio.MXIndexedRecordIO(str(golden / "idx" / "idx.idx"), str(golden / "idx" / "idx.rec"), "r")
    reader.read()
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_child_reads, args=(reader, queue))
    child.start()
    got = queue.get(timeout=60)
    child.join(60)
    assert got == [b"5", b"250", b"0", b"1"]
    assert reader.read() == b"1"  # the parent's position is its own


def _child_writes(writer, queue):
    try:
        writer.write(b"from child")
        queue.put("wrote")
    except ForkedWriterError as exc:
        queue.put(str(exc))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_writing_from_a_forked_child_is_refused(tmp_path):
    writer = recordio.MXRecordIO(str(tmp_path / "w.rec"), "w")
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_child_writes, args=(writer, queue))
    child.start()
    message = queue.get(timeout=60)
    child.join(60)
    assert "open a new writer in each process" in message
    writer.write(b"parent")
    writer.close()
    assert recordio.MXRecordIO(str(tmp_path / "w.rec"), "r").read() == b"parent"


def test_read_idx_from_many_threads(golden):
    reader = recordio.MXIndexedRecordIO(str(golden / "idx" / "idx.idx"), str(golden / "idx" / "idx.rec"), "r")
    errors = []

    def work(seed):
        rng = random.Random(seed)
        for _ in range(2000):
            k = rng.randrange(255)
            if reader.read_idx(k) != str(k).encode():
                errors.append(k)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_insightface_style_reader(tmp_path):
    """InsightFace's dataset code: record 0 is a meta header (flag > 0) giving the image key range."""
    idx, rec = str(tmp_path / "train.idx"), str(tmp_path / "train.rec")
    writer = recordio.MXIndexedRecordIO(idx, rec, "w")
    count = 6
    writer.write_idx(0, recordio.pack(recordio.IRHeader(2, [count + 1, count + 1], 0, 0), b""))
    img = np.full((8, 8, 3), 100, np.uint8)
    for i in range(1, count + 1):
        writer.write_idx(i, recordio.pack_img(recordio.IRHeader(0, float(i % 3), i, 0), img, quality=90))
    writer.close()
    # --- the reading code below is InsightFace's, with only the import changed ---
    imgrec = recordio.MXIndexedRecordIO(idx, rec, "r")
    s = imgrec.read_idx(0)
    header, _ = recordio.unpack(s)
    assert header.flag > 0
    imgidx = np.array(range(1, int(header.label[0])))
    labels = []
    for i in imgidx:
        header, _img_bytes = recordio.unpack(imgrec.read_idx(int(i)))
        label = header.label
        labels.append(label if isinstance(label, float) else label[0])
        _, decoded = recordio.unpack_img(imgrec.read_idx(int(i)))
        assert decoded.shape == (8, 8, 3)
    assert labels == [float(i % 3) for i in range(1, count + 1)]


def test_bad_index_entries_name_the_key(golden, tmp_path):
    shutil.copy(golden / "idx" / "idx.rec", tmp_path / "x.rec")
    (tmp_path / "x.idx").write_text("0\t0\n1\t13\n2\t99999\n")
    reader = recordio.MXIndexedRecordIO(str(tmp_path / "x.idx"), str(tmp_path / "x.rec"), "r")
    assert reader.read_idx(0) == b"0"
    with pytest.raises(IndexFileError, match="key 1: offset 13 is not the start of a record"):
        reader.read_idx(1)
    with pytest.raises(IndexFileError, match="key 2: offset 99999"):
        reader.read_idx(2)
    with pytest.raises(RecordKeyError, match="no record with key 3"):
        reader.read_idx(3)
    with pytest.raises(KeyError):  # still a KeyError, as MXNet's dict lookup
        reader.read_idx(3)
    (tmp_path / "y.idx").write_text("0\t0\nnot-a-number\t12\n")
    with pytest.raises(IndexFileError, match=r"y.idx: line 2: key 'not-a-number' is not a valid int"):
        recordio.MXIndexedRecordIO(str(tmp_path / "y.idx"), str(tmp_path / "x.rec"), "r")


def test_no_warning_for_clean_index(golden):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        recordio.MXIndexedRecordIO(str(golden / "idx" / "idx.idx"), str(golden / "idx" / "idx.rec"), "r").close()


def test_recordio_is_reachable_after_import_mxrec_alone():
    """``import mxrec`` then ``mxrec.recordio.unpack`` works without ``import mxrec.recordio`` (fresh interpreter)."""
    import subprocess
    import sys

    from testkit.cli import mxrec_env

    code = ("import mxrec; header, rest = mxrec.recordio.unpack(mxrec.recordio.pack("
            "mxrec.recordio.IRHeader(0, 3.0, 7, 0), b'img')); print(header.label, header.id, rest)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=mxrec_env(), timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "3.0 7 b'img'"


def _indexed(tmp_path, keys, payload=lambda k: str(k).encode()):
    idx, rec = str(tmp_path / "k.idx"), str(tmp_path / "k.rec")
    writer = recordio.MXIndexedRecordIO(idx, rec, "w")
    for k in keys:
        writer.write_idx(k, payload(k))
    writer.close()
    return idx, rec


@pytest.mark.parametrize("keys", [list(range(300)), list(range(1, 301, 2)), [5, 300, 7, 1, 299, 0]])
def test_compact_keys_and_idx_behave_as_mxnets_list_and_dict(tmp_path, keys):
    idx, rec = _indexed(tmp_path, keys)
    reader = recordio.MXIndexedRecordIO(idx, rec, "r")
    offsets = [int(line.split("\t")[1]) for line in open(idx)]
    expected = dict(zip(keys, offsets, strict=True))
    assert reader.keys == keys and list(reader.keys) == keys and len(reader.keys) == len(keys)
    assert reader.keys[2] == keys[2] and reader.keys[-2:] == keys[-2:] and keys[3] in reader.keys
    assert reader.idx == expected and dict(reader.idx) == expected and len(reader.idx) == len(keys)
    assert list(reader.idx) == keys and list(reader.idx.items()) == list(expected.items())
    assert reader.idx[keys[4]] == expected[keys[4]] and reader.idx.get(-5) is None and -5 not in reader.idx
    np.testing.assert_array_equal(np.array(reader.keys), keys)
    assert [reader.read_idx(k) for k in reversed(keys)] == [str(k).encode() for k in reversed(keys)]
    reader.keys.append(1000)  # a change makes them real list / dict, as MXNet's
    reader.idx[1000] = expected[keys[0]]
    assert reader.keys[-1] == 1000 and reader.read_idx(1000) == str(keys[0]).encode()
    del reader.idx[keys[1]]
    with pytest.raises(RecordKeyError):
        reader.read_idx(keys[1])


def test_writes_are_queued_but_everything_observable_is_current(tmp_path):
    idx, rec = str(tmp_path / "q.idx"), str(tmp_path / "q.rec")
    writer = recordio.MXIndexedRecordIO(idx, rec, "w")
    magic = (0xCED7230A).to_bytes(4, "little")
    mutable = bytearray(b"before")
    tells = []
    for i in range(10):
        writer.write_idx(i, magic * i + bytes(i))  # aligned magics: multi-part records inside a queued group
        tells.append(writer.tell())
    writer.write_idx(10, mutable)
    mutable[:] = b"after!"  # changed after the call: the record keeps what was given
    assert writer.idx[10] == tells[-1] and writer.keys == list(range(11))
    writer.write(b"unlisted")
    writer.write_idx(11, b"last")
    writer.close()
    assert tells[0] == 8 and tells[1] == 28  # an empty record; a start part + an end part of 1 byte (padded)
    reader = recordio.MXIndexedRecordIO(idx, rec, "r")
    assert reader.keys == list(range(12))
    assert [reader.read_idx(i) for i in range(10)] == [magic * i + bytes(i) for i in range(10)]
    assert reader.read_idx(10) == b"before" and reader.read() == b"unlisted" and reader.read() == b"last"


def test_queued_plain_writes_match_one_by_one_framing(tmp_path):
    from mxrec.format import framing

    payloads = [bytes(np.random.default_rng(n).integers(0, 256, n, dtype=np.uint8)) for n in range(0, 700, 7)]
    payloads.append((0xCED7230A).to_bytes(4, "little") * 3000)  # large, all magic
    writer = recordio.MXRecordIO(str(tmp_path / "p.rec"), "w")
    for p in payloads:
        writer.write(p)
    writer.close()
    assert (tmp_path / "p.rec").read_bytes() == b"".join(framing.encode_record(p) for p in payloads)
