"""``mxrec info``, ``mxrec index`` and ``mxrec verify`` on golden and damaged files."""

from __future__ import annotations

import json
import shutil

from mxrec import read_index
from mxrec.doctor.dataset_info import dataset_info
from mxrec.doctor.verify_dataset import verify_recordio


def test_index_refuses_ids_that_cannot_key(golden, tmp_path, mxrec_cli):
    result = mxrec_cli("index", golden / "idx" / "idx.rec", "--keys", "id", "-o", tmp_path / "x.idx")
    assert result.returncode == 2 and "cannot key the index by record id" in result.stderr
    assert not (tmp_path / "x.idx").exists()


def test_index_of_damaged_file_fails_cleanly(golden, tmp_path, mxrec_cli):
    result = mxrec_cli("index", golden / "seq" / "damaged" / "truncated_in_data.rec", "-o", tmp_path / "t.idx")
    assert result.returncode == 2 and "at byte 1216" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_info_on_im2rec_output(golden, mxrec_cli):
    info = dataset_info(golden / "im2rec" / "default" / "sub.rec")
    assert (info.records, info.multipart_records, info.bytes) == (50, 0, 2352552)
    assert info.payload_kinds == {"jpeg": 50}
    assert info.labels.widths == {1: 50} and (info.labels.min, info.labels.max) == (0.0, 9.0)
    assert info.labels.distinct_first_labels == 10 and info.labels.integer_valued
    assert info.index_status == "ok" and info.index_entries == 50
    text = mxrec_cli("info", golden / "im2rec" / "default" / "sub.rec", check=True).stdout
    assert "records:           50 (0 multi-part)" in text and "jpeg 50" in text
    data = json.loads(mxrec_cli("info", "--json", golden / "seq" / "seq.rec", check=True).stdout)
    assert data["records"] == 14 and data["multipart_records"] == 3 and data["index_status"] == "missing"


def test_verify_clean_golden_files_pass(golden, mxrec_cli):
    for rec in ("im2rec/default/sub.rec", "seq/seq.rec", "idx/idx.rec", "idx/ooo.rec", "headers/headers.rec"):
        report = verify_recordio(golden / rec)
        assert report.ok, report.format_text()
        assert mxrec_cli("verify", golden / rec).returncode == 0
    strkeys = verify_recordio(golden / "idx" / "strkeys.rec", key_type=str)
    assert strkeys.ok


def test_verify_reports_each_damage(golden, mxrec_cli):
    damaged = golden / "seq" / "damaged"
    expected = {
        "bad_magic_record2.rec": 20, "end_part_first.rec": 0, "length_beyond_eof.rec": 0,
        "lone_start_part.rec": 12, "truncated_in_data.rec": 1216, "truncated_in_header.rec": 1216,
        "truncated_in_padding.rec": 20,
    }
    for name, offset in expected.items():
        report = verify_recordio(damaged / name)
        assert not report.ok
        assert report.check("framing").problems[0].where == offset, name
        result = mxrec_cli("verify", "--json", damaged / name)
        assert result.returncode == 1
        assert json.loads(result.stdout)["checks"][0]["problems"][0]["where"] == offset
    padding = verify_recordio(damaged / "nonzero_padding.rec")
    assert padding.ok and not padding.check("padding").ok  # a warning, not a failure


def test_verify_index_problems(golden, tmp_path):
    shutil.copy(golden / "idx" / "idx.rec", tmp_path / "x.rec")
    (tmp_path / "x.idx").write_text("0\t0\n1\t13\n1\t24\n3\t999999\n")
    report = verify_recordio(tmp_path / "x.rec")
    problems = [(p.where, p.what) for p in report.check("index").problems]
    assert (1, "offset 13 is not the start of an intact record") in problems
    assert (1, "duplicate key: listed more than once") in problems
    assert any(w == 3 and "past the end" in what for w, what in problems)
    unlisted = [w for w, what in problems if what == "record is not listed in the index"]
    assert len(unlisted) == 255 - 2
    dup = verify_recordio(golden / "idx" / "dupkey.rec")
    assert not dup.ok and dup.check("index").problems[0].what.startswith("duplicate key")


def test_read_index_round_trip(golden):
    index = read_index(golden / "idx" / "ooo.idx")
    assert index.keys == [10, 3, 7, 1000000, 0] and index.offsets.tolist() == [0, 12, 28, 36, 116]


def test_python_m_mxrec_answers_as_the_in_process_runner(golden, tmp_path, mxrec_cli, mxrec_process):
    """The tests run the command line in-process; ``python -m mxrec`` (a fresh interpreter, as users run it) gives
    the same exit code, output and one-line errors, argparse's own exits included."""
    # one call per way out (a fresh interpreter costs seconds on a busy machine): success, a damaged file, a
    # one-line error, argparse's own exit
    calls = [["info", golden / "seq" / "seq.rec"],
             ["verify", golden / "seq" / "damaged" / "truncated_in_data.rec", "--no-progress"],
             ["info", tmp_path / "missing.rec"], ["nonsense"]]
    for args in calls:
        here, there = mxrec_cli(*args), mxrec_process(*args)
        assert (here.returncode, here.stdout, here.stderr) == (there.returncode, there.stdout, there.stderr), args
    assert [mxrec_cli(*args).returncode for args in calls] == [0, 1, 2, 2]
