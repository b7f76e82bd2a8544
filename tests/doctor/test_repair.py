"""``repair_dataset`` / ``mxrec verify --repair``: every intact record kept, exactly the damage dropped."""

from __future__ import annotations

import hashlib
import json

import pytest

from mxrec.doctor.repair import repair_dataset
from mxrec.doctor.verify_dataset import verify_recordio
from mxrec.errors import MxrecError
from mxrec.format import framing
from mxrec.io.index import read_index
from mxrec.io.opener import RecordReader
from testkit.datasets import make_clean_dataset, make_faulty_dataset


@pytest.fixture(scope="module")
def faulty(tmp_path_factory):
    return make_faulty_dataset(tmp_path_factory.mktemp("faulty"))


def digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_repair_keeps_every_intact_record_and_reports_what_it_dropped(faulty, tmp_path):
    before = (digest(faulty.rec), digest(faulty.idx))
    out = tmp_path / "clean.rec"
    result = repair_dataset(faulty.rec, out)
    assert (digest(faulty.rec), digest(faulty.idx)) == before  # the input is untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["clean.checksums", "clean.idx", "clean.rec"]  # no .partial
    o = faulty.offsets
    size = faulty.rec.stat().st_size

    with RecordReader(out) as reader:
        assert list(reader) == faulty.intact_payloads  # every intact record, in file order, byte-exact
    assert result.records == 56
    assert verify_recordio(out).ok and all(c.ok for c in verify_recordio(out).checks)

    assert [(r.start, r.end) for r in result.dropped_ranges] == [(o[52], o[54]), (faulty.garbage_at, size)]
    assert "bad magic" in result.dropped_ranges[0].reason and "has no end part" in result.dropped_ranges[0].reason
    assert "bad magic" in result.dropped_ranges[1].reason
    assert result.dropped_bytes == o[54] - o[52] + size - faulty.garbage_at
    dropped = {(k.key, k.offset): k.reason for k in result.dropped_keys}
    assert set(dropped) == {(2, o[2]), (7, o[7] + 4), (52, o[52]), (53, o[53]), (500, size + 100)}
    assert "listed again" in dropped[(2, o[2])] and "not the start of an intact record" in dropped[(7, o[7] + 4)]
    assert result.new_keys == [(501, o[7]), (502, o[8])]  # unkeyed records get the next free keys

    # every kept key still reads the record it named in the input
    index = read_index(out.with_suffix(".idx"))
    expected_keys = [k for k in range(58) if k not in (7, 8, 52, 53)] + [501, 502]
    assert sorted(index.keys) == sorted(expected_keys)
    with RecordReader(faulty.rec, index=False, strict=False) as damaged, RecordReader(out) as clean:
        by_offset = {int(off): damaged[i] for i, off in enumerate(damaged.offsets)}
        for key in expected_keys:
            source = o[{501: 7, 502: 8}.get(key, key)]
            assert clean.read_key(key) == by_offset[source], key


def test_repair_without_index_keys_records_by_id(tmp_path):
    rec = tmp_path / "d.rec"
    payloads = make_clean_dataset(rec, count=8)
    (tmp_path / "d.idx").unlink()
    cut = len(b"".join(framing.encode_record(p) for p in payloads[:7])) + 100
    rec.write_bytes(rec.read_bytes()[:cut])  # the last record is cut short
    result = repair_dataset(rec, tmp_path / "fixed.rec")
    assert result.records == 7 and result.key_source == "id"
    assert [(r.start, r.end) for r in result.dropped_ranges] == [(cut - 100, cut)]
    assert result.dropped_ranges[0].reason.endswith("but only 92 bytes remain: data ends inside the data")
    with RecordReader(tmp_path / "fixed.rec") as reader:
        assert list(reader) == payloads[:7]
        assert reader.keys == list(range(7))


@pytest.mark.parametrize("name", ["bad_magic_record2", "lone_start_part", "end_part_first", "truncated_in_data",
                                  "truncated_in_header", "length_beyond_eof", "nonzero_padding"])
def test_repair_golden_damaged_files(golden, tmp_path, name):
    damaged = golden / "seq" / "damaged" / f"{name}.rec"
    data = damaged.read_bytes()
    spans, _ = framing.salvage_spans(data)
    result = repair_dataset(damaged, tmp_path / "out.rec")
    with RecordReader(tmp_path / "out.rec") as reader:
        assert list(reader) == [framing.decode_record(data, s.offset)[0] for s in spans]
    covered = sum(s.end - s.offset for s in spans) + result.dropped_bytes
    assert covered == len(data)  # every byte is either kept or reported dropped
    assert verify_recordio(tmp_path / "out.rec").clean  # padding rewritten as zeros too


def test_repair_refuses_to_write_over_its_input(faulty):
    with pytest.raises(MxrecError, match="never changes its input"):
        repair_dataset(faulty.rec, faulty.rec)


def test_cli_repair(faulty, tmp_path, mxrec_cli):
    out = tmp_path / "fixed.rec"
    result = mxrec_cli("verify", faulty.rec, "--repair", out, "--json")
    assert result.returncode == 1  # the input still has faults
    repair = json.loads(result.stdout)["repair"]
    assert repair["records"] == 56 and repair["rec_path"] == str(out)
    assert len(repair["dropped_ranges"]) == 2 and len(repair["dropped_keys"]) == 5
    text = mxrec_cli("verify", faulty.rec, "--repair", tmp_path / "again.rec").stdout
    assert "repaired copy:" in text and "dropped bytes" in text and "new key 501" in text
    assert mxrec_cli("verify", out).returncode == 1  # framing and index now clean, the image faults remain
    assert mxrec_cli("verify", out, "--kind", "raw").returncode == 0
