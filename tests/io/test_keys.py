"""KeyStore look-ups and chunked .idx reading."""

from __future__ import annotations

import numpy as np
import pytest

import mxrec.io.index as index_module
from mxrec.errors import IndexFileError
from mxrec.format.idx import IntKeys, format_index, parse_index
from mxrec.io.index import read_index
from mxrec.io.keys import KeyStore


@pytest.mark.parametrize("keys", [range(5, 25), [5, 9, 11, 40, 41], [40, 5, 11, 9, 41]])
def test_positions_match_a_dict(keys):
    store = KeyStore(IntKeys(np.array(list(keys))))
    expected = {k: i for i, k in enumerate(keys)}
    for key, position in expected.items():
        assert store.position(key) == position
        assert store.position(np.int64(key)) == position and store.position(float(key)) == position
    for missing in (4, 100, -1, "5", 5.5, None, [5]):
        with pytest.raises(KeyError):
            store.position(missing)
    assert store.unique()


def test_duplicates_resolve_to_the_last_line_and_strings_use_a_dict():
    store = KeyStore(IntKeys(np.array([7, 3, 7, 1, 3])))
    assert store.position(7) == 2 and store.position(3) == 4 and store.position(1) == 3 and not store.unique()
    strings = KeyStore(["b", "a", "b"])
    assert strings.position("b") == 2 and strings.position("a") == 1 and not strings.unique()
    with pytest.raises(KeyError):
        strings.position(0)


@pytest.mark.parametrize("keys", [list(range(3000)), [k * 3 for k in range(3000)], list(range(3000, 0, -1))])
def test_chunked_threaded_read_equals_the_whole_text_parse(tmp_path, monkeypatch, keys):
    monkeypatch.setattr(index_module, "_CHUNK", 1000)  # ~60 chunks, parsed on threads
    offsets = [k * 8 for k in range(len(keys))]
    path = tmp_path / "x.idx"
    path.write_text(format_index(keys, offsets))
    index = read_index(path)
    assert index.keys == keys and index.offsets.tolist() == offsets
    assert index.increasing == (keys == sorted(keys))
    path.write_text(format_index(keys, offsets).rstrip("\n"))  # no newline at the end
    assert read_index(path).keys == keys


def test_chunked_read_names_a_bad_line_in_a_late_chunk(tmp_path, monkeypatch):
    monkeypatch.setattr(index_module, "_CHUNK", 100)
    lines = [f"{k}\t{k * 8}" for k in range(500)]
    lines[420] = "420\tnot-a-number"
    (tmp_path / "x.idx").write_text("\n".join(lines) + "\n")
    with pytest.raises(IndexFileError, match="line 421: offset 'not-a-number' of key '420'"):
        read_index(tmp_path / "x.idx")
    assert parse_index(b"").keys == [] and read_index(_empty(tmp_path)).keys == []


def _empty(folder):
    path = folder / "empty.idx"
    path.write_bytes(b"")
    return path


def test_rebuilt_index_reads_ids_of_single_and_multi_part_records(tmp_path, monkeypatch):
    from mxrec import RecordWriter
    from mxrec.format.header import IRHeader, pack
    from mxrec.io.index import scan_index

    monkeypatch.setattr(index_module, "_ID_BLOCK", 3)  # several blocks
    magic = (0xCED7230A).to_bytes(4, "little")
    ids = [7, 2**64 - 5, 3, 11, 5, 2**40]
    bodies = [b"a", magic * 3, b"", b"xyz" + magic, magic, b"q" * 50]  # headers are 24 bytes: aligned magics split
    with RecordWriter(tmp_path / "r.rec") as writer:
        for record_id, body in zip(ids, bodies, strict=True):
            writer.write(pack(IRHeader(0, 1.0, record_id, 0), body))
    index, source = scan_index(tmp_path / "r.rec")
    assert source == "id" and list(index.keys) == ids and isinstance(index.keys, list)  # beyond int64: a list
    with RecordWriter(tmp_path / "s.rec") as writer:
        for record_id in (5, 3, 5):
            writer.write(pack(IRHeader(0, 1.0, record_id, 0), b""))
    assert scan_index(tmp_path / "s.rec")[1] == "position"  # repeated ids
