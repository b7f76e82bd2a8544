"""``mxrec verify`` / ``mxrec info`` on InsightFace face sets: a correct set passes, each violation is named by key."""

from __future__ import annotations

import json

import pytest

import mxrec.recordio as recordio
from mxrec.doctor.dataset_info import dataset_info
from mxrec.doctor.verify_dataset import verify_dataset
from testkit.insightface import face_jpeg, identity_record, make_face_set, rewrite_records

WRITERS = ["dataset_merge", "face2rec2"]


def failing(report) -> dict:
    return {c.name: c for c in report.checks if not c.ok and not c.warning}


@pytest.mark.parametrize("writer", WRITERS)
def test_a_correct_face_set_passes_and_its_layout_is_checked(tmp_path, writer, mxrec_cli):
    files = make_face_set(tmp_path, [3, 1, 4, 2], writer=writer)
    report = verify_dataset(files.rec, decode=True)
    assert report.ok and not failing(report), report.format_text()
    layout = report.check("layout")
    assert layout.details["identities"] == 4 and layout.details["faces"] == 10
    assert layout.summary.startswith("InsightFace face set: 4 identities (keys 11..14), 10 faces (keys 1..10)")
    labels = report.check("labels")
    assert labels.details["labelled_records"] == 10 and labels.details["classes_present"] == 4
    assert report.check("images").details["images"] == 10  # the header and identity records are no empty images
    result = mxrec_cli("verify", files.rec, "--no-progress")
    assert result.returncode == 0 and "[  ok] layout: InsightFace face set" in result.stdout


def test_plain_layout_reads_every_record_as_a_sample(tmp_path):
    files = make_face_set(tmp_path, [2, 2])
    report = verify_dataset(files.rec, layout="plain")
    assert "layout" not in [c.name for c in report.checks] and not report.ok
    assert report.check("images").details["faults"] == {"empty": 3}  # header + 2 identity records


def test_layout_insightface_on_a_plain_set_fails_the_layout_check(tmp_path):
    from testkit.datasets import make_clean_dataset

    make_clean_dataset(tmp_path / "plain.rec", count=6)
    report = verify_dataset(tmp_path / "plain.rec", layout="insightface")
    assert not report.check("layout").ok and "no InsightFace header record under key 0" in \
        report.check("layout").summary


def test_each_layout_violation_is_reported_by_key(tmp_path, mxrec_cli):
    files = make_face_set(tmp_path, [3, 1, 4, 2])  # faces 1..10; identities 11 [1,4), 12 [4,5), 13 [5,9), 14 [9,11)
    wrong_label = recordio.pack(recordio.IRHeader(0, 3.0, 6, 0), face_jpeg(6))  # face 6 is identity 2's
    rewrite_records(files, {6: wrong_label, 13: identity_record(13, 6, 9)}, drop=(14,))
    (tmp_path / "property").write_text("5,24,24")
    report = verify_dataset(files.rec)
    found = {p.where: p.what for p in report.check("layout").problems}
    assert set(found) == {0, 14, 13, "property", 6}, found
    assert "says 15 records" in found[0] and "the .idx lists 14" in found[0]
    assert found[14].startswith("no identity record under this key") and "faces 9..10 belong to no identity" in \
        found[14]
    assert "faces 5..5 belong to no identity" in found[13]
    assert "says 5 identities" in found["property"]
    assert found[6].startswith("label 3, but the face lies in the range of identity record 13")
    result = mxrec_cli("verify", "--json", files.rec, "--no-progress")
    assert result.returncode == 1
    layout = next(c for c in json.loads(result.stdout)["checks"] if c["name"] == "layout")
    assert {p["where"] for p in layout["problems"]} == {0, 14, 13, "property", 6}


@pytest.mark.parametrize("writer", WRITERS)
def test_info_names_the_layout(tmp_path, writer, mxrec_cli):
    files = make_face_set(tmp_path, [3, 1, 4, 2], writer=writer)
    info = dataset_info(files.rec)
    assert info.layout.kind == "insightface" and not info.damaged
    assert (info.layout.identities, info.layout.faces, info.layout.image_shape) == (4, 10, (24, 24, 3))
    assert info.layout.property == (4, 24, 24)
    assert info.labels.records_with_header == 10 and info.labels.layout_records == 5
    assert (info.labels.min, info.labels.max) == (0.0, 3.0 if writer == "dataset_merge" else 1.0 * 3)
    result = mxrec_cli("info", files.rec)
    assert result.returncode == 0
    assert ("layout:            InsightFace face set: 4 identities, 10 faces, images 24x24x3 (first face); "
            "property file: 4 identities, 24x24") in result.stdout


def test_info_of_an_inconsistent_face_set_says_so_and_exits_1(tmp_path, mxrec_cli):
    files = make_face_set(tmp_path, [2, 2])
    rewrite_records(files, {}, drop=(3,))
    info = dataset_info(files.rec)
    assert info.layout.kind == "insightface" and info.damaged
    assert "train.idx: 3: no face record under this key" in info.layout.problem
    assert info.layout.problem.endswith("(and 1 more problems: mxrec verify lists them)")
    result = mxrec_cli("info", files.rec)
    assert result.returncode == 1 and "InsightFace face set, inconsistent" in result.stdout


@pytest.mark.parametrize("writer", WRITERS)
def test_stats_preview_and_extract_see_the_faces_only(tmp_path, writer, mxrec_cli):
    from mxrec.doctor.preview import contact_sheet
    from mxrec.doctor.stats import dataset_stats
    from mxrec.io.lists import read_list

    files = make_face_set(tmp_path / "set", [3, 1, 4, 2], writer=writer)
    stats = dataset_stats(files.rec)
    assert stats.labelled == 10 and stats.class_counts == {0: 3, 1: 1, 2: 4, 3: 2}
    assert stats.formats == {"jpeg": 10}
    _, shown = contact_sheet(files.rec, count=50)
    assert shown == list(range(1, 11))  # every face, no header or identity record
    result = mxrec_cli("preview", files.rec, "-o", tmp_path / "faces.png")
    assert result.returncode == 0 and result.stderr == ""
    done = mxrec_cli("extract", files.rec, tmp_path / "out")
    assert done.returncode == 0 and "wrote 10 files" in done.stdout
    entries = read_list(tmp_path / "out" / "train.lst")
    assert [(e.index, e.path.split("/")[0]) for e in entries] == [(k, str(files.label_of(k))) for k in range(1, 11)]
