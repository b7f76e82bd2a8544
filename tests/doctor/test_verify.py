"""``verify_dataset`` / ``mxrec verify``: every injected fault reported exactly, clean data passing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from mxrec.doctor.contents import read_contents
from mxrec.doctor.verify_dataset import verify_dataset, verify_recordio
from mxrec.format import framing
from mxrec.format.header import IRHeader, pack
from testkit.datasets import NUM_CLASSES, clean_jpeg, make_clean_dataset, make_faulty_dataset


@pytest.fixture(scope="module")
def faulty(tmp_path_factory):
    return make_faulty_dataset(tmp_path_factory.mktemp("faulty"))


def problems_of(report, name: str) -> dict:
    check = report.check(name)
    found = {p.where: p.what for p in check.problems}
    assert len(found) == len(check.problems), f"{name}: a place is reported twice: {check.problems}"
    return found


def assert_problems(report, name: str, expected: dict) -> None:
    """The check reports exactly the places in ``expected``, each with a message containing the fragment."""
    found = problems_of(report, name)
    assert set(found) == set(expected), f"{name}: missed {set(expected) - set(found)}, " \
                                        f"false alarms {set(found) - set(expected)}"
    for where, fragment in expected.items():
        assert fragment in found[where], (name, where, found[where])
    assert report.check(name).ok == (not expected)


def expected_faults(d, decode: bool) -> dict:
    o, lines = d.offsets, d.lst_lines
    images = {33: "corrupt: JPEG marker 0xffe0", 36: "empty", 37: "zero-size: header declares a 64x0 image"}
    if decode:
        images |= {34: "corrupt: libjpeg-turbo: Corrupt JPEG data", 35: "truncated: libjpeg-turbo: Premature end",
                   51: "truncated: PNG ends before its IEND chunk"}
    return {
        "framing": {o[52]: "bad magic", o[54]: f"multi-part record starting at byte {o[53]} has no end part",
                    d.garbage_at: "bad magic"},
        "padding": {o[d.padding_key]: "padding bytes are not zero"},
        "index": {2: "duplicate key", 7: f"offset {o[7] + 4} is not the start", 52: "not the start",
                  53: "not the start", 500: "past the end", o[7]: "not listed", o[8]: "not listed"},
        "checksums": {},  # (the faults are written as raw bytes: no checksums recorded)
        "labels": {38: "no IRHeader: payload of 0 bytes", 39: "no IRHeader: payload of 10 bytes",
                   40: f"label 9 is not below num_classes={NUM_CLASSES}", 41: "label -1 is negative",
                   42: "label 2.5 is not a whole number", 44: "2 label value(s); most records have 1",
                   45: "NaN", "label 5": "no record has this class id"},
        "balance": {"label 6": "only 1 record", "classes": "imbalance ratio 12.0"},
        "images": images,
        "shapes": {46: "1 channel(s); most images have 3", 47: "8x8: shorter side", 48: "320x60: longer side"},
        "duplicates": {49: "same image bytes as 3", 50: "same image bytes as 4 with different labels (1 vs 4)"},
        "leakage": {10: "same image as 0 in", 11: "same image as 1 in"},
        "lst": {f"line {lines['bad_label']}": "label 'abc' is not a number",
                f"line {lines['empty_label']}": "label '' is not a number",
                f"line {lines['no_label']}": "at least 3 tab-separated fields",
                f"line {lines[9]}": "img_9.jpg: no such file",
                f"line {lines[11]}": "labels 3 but record 11 holds 1",
                f"line {lines['dup12']}": f"index 12 is already on line {lines[12]}",
                f"line {lines[52]}": "no record has this id", f"line {lines[53]}": "no record has this id",
                f"line {lines['no_record']}": "index 999: no record has this id",
                6: "record id 6 is not in the .lst"},
    }


@pytest.mark.parametrize("decode", [True, False])
def test_every_injected_fault_is_reported_exactly(faulty, decode):
    report = verify_dataset(faulty.rec, lst=faulty.lst, root=faulty.root, against=faulty.val, decode=decode,
                            num_classes=NUM_CLASSES)
    expected = expected_faults(faulty, decode)
    assert [c.name for c in report.checks] == list(expected)
    for name, places in expected.items():
        assert_problems(report, name, places)
    assert not report.ok
    assert [c.name for c in report.checks if c.warning] == ["padding", "balance"]
    images = report.check("images").details
    assert images["decoded"] is decode
    assert images["images"] == 54  # every record with a header; 38 and 39 have none, 52 and 53 are lost


def test_counts_in_details(faulty):
    report = verify_dataset(faulty.rec, decode=True, num_classes=NUM_CLASSES)
    assert report.check("framing").details["records"] == len(faulty.intact_payloads) == 56
    assert report.check("framing").details["multipart_records"] == 1
    assert report.check("images").details["faults"] == {"corrupt": 2, "truncated": 2, "empty": 1, "zero-size": 1}
    assert report.check("images").details["formats"] == {"jpeg": 50, "png": 3, "empty": 1}
    labels = report.check("labels").details
    assert labels["widths"] == {"1": 53, "2": 1} and labels["num_classes"] == NUM_CLASSES
    assert labels["missing_class_ids"] == 1 and labels["header_faults"] == 2
    balance = report.check("balance").details
    assert balance["counts"] == {"0": 10, "1": 12, "2": 9, "3": 9, "4": 9, "6": 1}  # 40, 41, 42, 45 have no valid id
    assert report.check("duplicates").details["conflicting_labels"] == 1


def test_without_num_classes_range_comes_from_the_labels(faulty):
    report = verify_dataset(faulty.rec)
    labels = problems_of(report, "labels")
    assert 40 not in labels  # label 9 is a valid id when the number of classes is not given ...
    assert labels["labels 7..8"] == "no record has this class id: the ids in use are not contiguous"  # ... with gaps
    assert report.check("labels").details["num_classes"] == 10


def test_parallel_and_serial_scans_agree(faulty):
    serial = verify_dataset(faulty.rec, lst=faulty.lst, root=faulty.root, decode=True, workers=1)
    parallel = verify_dataset(faulty.rec, lst=faulty.lst, root=faulty.root, decode=True, workers=4)
    assert serial.to_dict() == parallel.to_dict()


def test_progress_reaches_the_total(faulty):
    calls = []
    verify_dataset(faulty.rec, decode=True, workers=3, progress=lambda done, total: calls.append((done, total)))
    assert calls[-1] == (56, 56)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)


def test_cli_json_lists_every_problem_and_exits_1(faulty, mxrec_cli):
    result = mxrec_cli("verify", faulty.rec, "--lst", faulty.lst, "--root", faulty.root, "--against", faulty.val,
                       "--decode", "--num-classes", NUM_CLASSES, "--json")
    assert result.returncode == 1, result.stderr
    out = json.loads(result.stdout)
    api = verify_dataset(faulty.rec, lst=faulty.lst, root=faulty.root, against=faulty.val, decode=True,
                         num_classes=NUM_CLASSES)
    assert out == json.loads(json.dumps(api.to_dict()))
    assert not out["ok"]


def test_cli_text_shows_the_first_problems(faulty, mxrec_cli):
    result = mxrec_cli("verify", faulty.rec, "--decode", "--max-problems", "2")
    assert result.returncode == 1
    assert result.stdout.startswith(f"{faulty.rec}: FAILED")
    assert "[FAIL] images: 54 image(s), decoded: 2 corrupt, 1 empty, 2 truncated, 1 zero-size" in result.stdout
    assert "33: corrupt" in result.stdout and "... and 4 more (--json lists all)" in result.stdout
    assert "[warn] padding" in result.stdout
    # Off a terminal only the progress summary line; strict JPEG decoding prints no decoder warnings.
    assert result.stderr.startswith("decoding: 56/56 in ") and result.stderr.count("\n") == 1


GOLDEN_TRAINVAL = Path("im2rec") / "trainval"


def test_golden_im2rec_train_and_val_pass(golden, mxrec_cli):
    folder = golden / GOLDEN_TRAINVAL
    photos = golden / "im2rec" / "photos200"
    train = verify_dataset(folder / "subtv_train.rec", lst=folder / "subtv_train.lst", root=photos,
                           against=folder / "subtv_val.rec", decode=True, num_classes=10)
    assert [c.name for c in train.checks] == ["framing", "padding", "index", "checksums", "labels", "balance",
                                               "images", "shapes", "duplicates", "leakage", "lst"]
    assert train.ok
    assert all(c.ok for c in train.checks if c.name != "balance")
    assert train.check("images").details == {"images": 45, "decoded": True, "formats": {"jpeg": 45}, "faults": {}}
    assert train.check("lst").details["lines"] == 45
    assert train.check("leakage").details["shared_images"] == 0
    # 45 records over 10 classes: a class with fewer than 5 is a warning, not a failure
    assert set(problems_of(train, "balance")) == {f"label {c}" for c, n in
                                                  train.check("balance").details["counts"].items() if n < 5}
    result = mxrec_cli("verify", folder / "subtv_val.rec", "--lst", folder / "subtv_val.lst", "--root", photos,
                       "--against", folder / "subtv_train.rec", "--decode")
    assert result.returncode == 0, result.stdout
    assert "subtv_val.rec: OK" in result.stdout
    alone = verify_dataset(folder / "subtv_val.rec")  # 5 records cannot hold all 10 classes ...
    assert set(problems_of(alone, "labels")) == {"label 0", "labels 3..4", "labels 6..8"}
    strict = mxrec_cli("verify", folder / "subtv_val.rec", "--against", folder / "subtv_train.rec", "--strict")
    assert strict.returncode == 1  # ... and the balance warning (1-2 records a class) fails under --strict


def test_golden_leakage_between_overlapping_sets(golden):
    folder = golden / GOLDEN_TRAINVAL
    report = verify_dataset(folder / "subtv_val.rec", against=folder / "subtv_val.rec")
    leaks = problems_of(report, "leakage")
    assert set(leaks) == {45, 11, 48, 29, 9}  # the .idx keys, each found at itself
    assert all(what.startswith(f"same image as {key} in") for key, what in leaks.items())


def test_verify_recordio_keeps_its_checks(golden):
    damaged = golden / "seq" / "damaged" / "bad_magic_record2.rec"
    report = verify_recordio(damaged)
    assert [c.name for c in report.checks] == ["framing", "padding", "checksums"]
    assert not report.check("framing").ok
    indexed = verify_recordio(golden / GOLDEN_TRAINVAL / "subtv_train.rec")
    assert [c.name for c in indexed.checks] == ["framing", "padding", "index", "checksums"] and indexed.ok


def test_raw_payloads_skip_the_content_checks(golden):
    report = verify_dataset(golden / "seq" / "seq.rec")
    assert [c.name for c in report.checks] == ["framing", "padding", "checksums", "content"]
    assert report.ok and "skipped" in report.check("content").summary
    forced = verify_dataset(golden / "seq" / "seq.rec", dataset_kind="image")
    assert "labels" in [c.name for c in forced.checks] and not forced.ok


def test_real_valued_labels_are_not_class_ids(tmp_path):
    rec = tmp_path / "reg.rec"
    payloads = [pack(IRHeader(0, 0.37 * i - 1, i, 0), clean_jpeg(i)) for i in range(12)]
    rec.write_bytes(b"".join(framing.encode_record(p) for p in payloads))
    report = verify_dataset(rec, dataset_kind="image")
    assert report.check("labels").ok and report.check("labels").details["kind"] == "value"
    assert report.check("balance").summary == "labels are not class ids: no class balance"
    forced = verify_dataset(rec, dataset_kind="image", label_kind="class")
    assert len(forced.check("labels").problems) == 12  # -1 is negative, the rest fractional


def test_unreadable_index_fails_the_index_check_and_names_records_by_position(tmp_path):
    rec = tmp_path / "d.rec"
    make_clean_dataset(rec, count=6)
    (tmp_path / "d.idx").write_text("0\t0\nnot an index line\n")
    report = verify_dataset(rec)
    assert report.check("index").problems[0].where == 2 and not report.ok
    shutil.copy(rec, tmp_path / "copy.rec")
    contents = read_contents(tmp_path / "copy.rec")
    assert [c.key for c in contents.records] == list(range(6)) and contents.damage == []
    scan = read_contents(rec)  # the unreadable .idx is named, and the records by position
    assert [c.key for c in scan.records] == list(range(6)) and "d.idx: line 2" in scan.damage[0]


def test_cli_string_keys_and_bad_input(golden, tmp_path, mxrec_cli):
    strkeys = golden / "idx" / "strkeys.rec"
    assert mxrec_cli("verify", strkeys).returncode == 1  # integer keys expected: the .idx does not parse
    assert mxrec_cli("verify", strkeys, "--str-keys").returncode == 0
    missing = mxrec_cli("verify", strkeys, "--lst", tmp_path / "nope.lst")
    assert missing.returncode == 2 and "nope.lst" in missing.stderr
    in_place = mxrec_cli("verify", strkeys, "--str-keys", "--repair", strkeys)
    assert in_place.returncode == 2 and "never changes its input" in in_place.stderr


def test_an_outlying_class_id_is_named_by_record(tmp_path):
    """57 among 0..9 without --num-classes: the record holding it is named, not only 'ids not contiguous'."""
    rec = tmp_path / "d.rec"
    payloads = [pack(IRHeader(0, key % 10, key, 0), clean_jpeg(key)) for key in range(30)]
    payloads[17] = pack(IRHeader(0, 57, 17, 0), clean_jpeg(17))
    payloads[18] = pack(IRHeader(0, 10, 18, 0), clean_jpeg(18))  # 10 is next to 0..9: not an outlier
    rec.write_bytes(b"".join(framing.encode_record(p) for p in payloads))
    labels = verify_dataset(rec).check("labels")
    assert {p.where: p.what for p in labels.problems} == {
        17: "class id 57 lies far above the others (the next lower id in use is 10): a wrong label? "
            "(--num-classes sets the range of ids)"}
    assert labels.details["num_classes"] == 11 and labels.details["outlying_class_ids"] == [57]
    given = verify_dataset(rec, num_classes=58).check("labels")  # the range is given: 11..56 are missing ids
    assert [p.where for p in given.problems] == ["labels 11..56"]
