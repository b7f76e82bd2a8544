"""``read_recordio`` over a dataset already opened and over a mixture (issue 23 §1): the readers' own ``.idx``
tables are used (nothing read again), their storage settings go to the read tasks, a mixture's rows are its
sources' records once each with their label offsets, and a face set's faces only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import mxrec
from mxrec.errors import ParameterError
from mxrec.ray.datasource import RecordSource
from testkit.datasets import make_clean_dataset, make_photo_set, upload_indexed
from testkit.insightface import make_face_set


def rows(source: RecordSource, parallelism: int = 3) -> list[dict]:
    """Every row the source's read tasks give, run here, in order (the tasks as Ray runs them, without a cluster)."""
    out = []
    for task in source.get_read_tasks(parallelism):
        for table in task():
            out += table.to_pylist()
    return out


@pytest.fixture
def sets(tmp_path: Path) -> tuple[Path, Path]:
    make_clean_dataset(tmp_path / "a.rec", 30)  # labels key % 4
    make_photo_set(tmp_path / "b.rec", 10, 40, 30)  # labels key % 5
    return tmp_path / "a.rec", tmp_path / "b.rec"


def test_an_opened_dataset_reads_as_its_spec_does(sets):
    a, b = sets
    for dataset, spec in ((mxrec.open_dataset(a), a), (mxrec.open_dataset([a, b]), [a, b])):
        assert rows(RecordSource(dataset)) == rows(RecordSource(spec))
    with pytest.raises(ParameterError, match="an opened dataset is read with the storage settings it was opened"):
        RecordSource(mxrec.open_dataset(a), storage_options={"anon": True})


def test_a_mixture_reads_its_sources_once_with_their_label_offsets(sets, tmp_path):
    a, b = sets
    mixture = mxrec.mix([a, b], [0.2, 0.8], samples_per_epoch=100, label_offsets="auto")
    read = rows(RecordSource(mixture))
    assert len(read) == 40 and [r["key"] for r in read] == list(range(30)) + list(range(10))
    assert [r["label"][0] for r in read] == [k % 4 for k in range(30)] + [4 + k % 5 for k in range(10)]
    spec = tmp_path / "train.mix.json"
    spec.write_text(json.dumps({"sources": ["a.rec", "b.rec"], "label_offsets": "auto"}))
    assert rows(RecordSource(spec)) == read


def test_a_face_set_in_a_mixture_gives_its_faces_only(tmp_path):
    one = make_face_set(tmp_path / "one", [3, 2])
    two = make_face_set(tmp_path / "two", [1, 4])
    mixture = mxrec.mix([one.rec, two.rec], label_offsets="auto")
    read = rows(RecordSource(mixture), parallelism=2)
    assert [int(r["label"][0]) for r in read] == [0, 0, 0, 1, 1, 2, 3, 3, 3, 3]


def test_the_tasks_read_an_opened_s3_dataset_with_its_storage_and_its_idx(s3_server, s3_bucket, tmp_path):
    rec = tmp_path / "photos.rec"
    make_photo_set(rec, 40, 32, 24)
    url = upload_indexed(s3_server, s3_bucket, rec, "photos.rec")
    dataset = mxrec.open_dataset(url, storage_options=s3_server.storage_options())
    mark = s3_server.log.mark()
    source = RecordSource(dataset)  # no storage_options here: the dataset's travel in each task
    read = rows(source, parallelism=2)
    assert [r["key"] for r in read] == list(range(40))
    assert not s3_server.log.since(mark, key="photos.idx")  # the .idx was read once, when it was opened
    assert 1 <= len(s3_server.log.since(mark, method="GET", key="photos.rec")) <= 2  # one ranged GET per task


@pytest.mark.slow
def test_read_recordio_of_a_mixture_on_a_cluster(mray, sets):
    a, b = sets
    mixture = mxrec.mix([a, b], label_offsets="auto")
    labels = sorted(float(r["label"][0]) for r in mray.read_recordio(mixture, override_num_blocks=2).take_all())
    assert labels == sorted([float(k % 4) for k in range(30)] + [4.0 + k % 5 for k in range(10)])
