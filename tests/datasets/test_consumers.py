"""The §1 seam of issue 23: every consumer takes a dataset already opened (one file, a shard set, a mixture) and a
mixture file wherever it takes a spec, reads it as it is (not opened again, its ``.idx`` not read again, its storage
settings kept, left open for the caller), and the request policy it was opened with reaches the wire."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import pytest

import mxrec
from mxrec.datasets.mixture import Mixture, MixtureError
from mxrec.datasets.opening import dataset_files, hold_dataset
from mxrec.errors import HeaderError, MxrecError, ParameterError, RemoteError
from mxrec.format.header import IRHeader, pack, unpack
from mxrec.io.writer import RecordWriter
from mxrec.train import ImageIter, ImageRecordIter
from testkit.datasets import make_clean_dataset, make_photo_set, upload_indexed

SHAPE = dict(data_shape=(3, 16, 16), resize=16)


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    """Two image sets (40 records labelled ``key % 4``, 20 other images labelled ``key % 5``) and a mixture file
    over them."""
    a, b = tmp_path / "a.rec", tmp_path / "b.rec"
    make_clean_dataset(a, 40)
    make_photo_set(b, 20, 40, 30)
    spec = tmp_path / "train.mix.json"
    spec.write_text(json.dumps({"sources": [{"path": "a.rec", "weight": 0.5}, {"path": "b.rec", "weight": 0.5}],
                                "samples_per_epoch": 48, "label_offsets": "auto"}))
    return {"a": a, "b": b, "mix": spec}


def opened(kind: str, files: dict[str, Path]) -> mxrec.Records:
    if kind == "file":
        return mxrec.open_dataset(files["a"])
    if kind == "shards":
        return mxrec.open_dataset([files["a"], files["b"]])
    return mxrec.open_dataset(files["mix"])


def labels_of(batches: list) -> list[float]:
    return [float(v) for b in batches for v in b.label[0][:len(b.label[0]) - b.pad]]


@pytest.mark.parametrize("kind", ["file", "shards", "mixture"])
def test_the_iterators_read_an_opened_dataset_as_it_is_and_leave_it_open(files, kind):
    dataset = opened(kind, files)
    with ImageRecordIter(path_imgrec=dataset, batch_size=8, shuffle=True, seed=1, **SHAPE) as it:
        assert it.reader is dataset  # used as it is: not opened again
        batches = list(it)
    assert len(dataset[0]) > 0  # still open for the caller: the iterator closes only what it opened
    with ImageIter(8, (3, 16, 16), path_imgrec=dataset, shuffle=True, seed=1, aug_list=[]) as it:
        assert it._reader is dataset
    samples = sum(len(b.label[0]) - b.pad for b in batches)
    assert samples == (48 if kind == "mixture" else len(dataset))
    if kind == "mixture":  # the same epoch as from the file's name
        with ImageRecordIter(path_imgrec=files["mix"], batch_size=8, shuffle=True, seed=1, **SHAPE) as it:
            assert labels_of(list(it)) == labels_of(batches)
    dataset.close()


def test_a_mixture_epoch_through_image_record_iter_has_exact_shares_even_batches_and_offsets(files):
    mixture = mxrec.open_dataset(files["mix"])
    assert mixture.label_offsets == [0, 4]
    with ImageRecordIter(path_imgrec=mixture, batch_size=8, shuffle=True, seed=3, **SHAPE) as it:
        for epoch in range(3):
            batches = list(it)
            labels = np.array(labels_of(batches))
            assert (labels < 4).sum() == 24 and (labels >= 4).sum() == 24  # 0.5 / 0.5 of 48, every epoch
            for batch in batches:  # stratified: each batch of 8 holds 4 +- 1 of each source
                assert abs(int((batch.label[0] >= 4).sum()) - 4) <= 1, (epoch, batch.label[0])
            it.reset()


def test_the_doctor_probe_and_extraction_take_an_opened_dataset_and_leave_it_open(files, tmp_path):
    for kind in ("file", "shards", "mixture"):
        dataset = opened(kind, files)
        info = mxrec.dataset_info(dataset)
        report = mxrec.verify_dataset(dataset)
        stats = mxrec.dataset_stats(dataset)
        sheet, keys = mxrec.contact_sheet(dataset, count=4)
        extracted = mxrec.extract_records(dataset, tmp_path / f"out-{kind}")
        result = mxrec.probe(dataset, batch_size=4, batches=2, warmup=0, **SHAPE)
        assert not info.damaged and report.ok, kind
        assert stats.records == extracted.files == len(dataset) == info.records, kind
        assert len(keys) == 4 and sheet.ndim == 3 and result.run.samples == 8 and result.run.dataset == dataset.path
        assert len(dataset[len(dataset) - 1]) > 0  # still open
        dataset.close()
    mixture = mxrec.open_dataset(files["mix"])
    assert sorted(mxrec.dataset_stats(mixture).class_counts) == list(range(9))  # the mixture's labels, offset
    assert mxrec.dataset_stats(files["mix"]).class_counts == mxrec.dataset_stats(mixture).class_counts


def test_the_doctor_checks_the_files_behind_an_opened_dataset_with_its_index(files):
    reader = mxrec.open_dataset(files["a"])
    shards, manifest, storage = dataset_files(reader)
    assert [(s.rec, s.idx) for s in shards] == [(str(files["a"]), str(files["a"].with_suffix(".idx")))]
    assert manifest is None and storage is reader.storage
    assert mxrec.dataset_info(reader).to_dict() == mxrec.dataset_info(files["a"]).to_dict()
    with pytest.raises(ParameterError, match="a mixture's files are its sources'"):
        dataset_files(mxrec.open_dataset(files["mix"]))


def test_hold_dataset_closes_only_what_it_opened(files):
    reader = mxrec.open_dataset(files["a"])
    with hold_dataset(reader, duplicates="last", strict=False) as held:  # the consumer's defaults: not applied
        assert held is reader
    assert len(reader[0]) > 0
    with hold_dataset(files["a"]) as own:
        pass
    with pytest.raises(MxrecError, match="closed"):
        own[0]
    with pytest.raises(ParameterError, match="an opened dataset is read as it was opened; give index"):
        hold_dataset(reader, files["a"].with_suffix(".idx"))


@pytest.mark.parametrize("kind", ["file", "shards", "mixture"])
def test_an_opened_dataset_pickles_to_the_same_records(files, kind):
    dataset = opened(kind, files)
    again = pickle.loads(pickle.dumps(dataset))
    assert len(again) == len(dataset) and again.read_batch([0, len(dataset) - 1]) == dataset.read_batch(
        [0, len(dataset) - 1])
    if isinstance(dataset, Mixture):
        assert again.label_offsets == dataset.label_offsets
        assert np.array_equal(again.epoch_order(shuffle=True, seed=2)(1), dataset.epoch_order(shuffle=True, seed=2)(1))


def test_a_mixture_inside_a_mixture_file_says_it_is_not_supported(files, tmp_path):
    outer = tmp_path / "outer.mix.json"
    outer.write_text(json.dumps({"sources": [{"path": "train.mix.json"}, {"path": "a.rec"}]}))
    with pytest.raises(MixtureError, match=r"outer.mix.json: .*train.mix.json: a mixture inside a mixture is not "
                                           "supported"):
        mxrec.open_dataset(outer)


@pytest.mark.parametrize(("text", "message"), [
    ('{"sources": [{"path": "a.rec", "weight": -1}, {"path": "b.rec", "weight": 1}]}', r"a.rec: weight -1"),
    ('{"sources": [{"path": "a.rec", "weight": 1}, {"path": "gone.rec", "weight": 1}]}',
     r"gone.rec: cannot be opened as a source"),
    ('{"sources": ["a.rec", "bad.rec"]}', r"bad.rec: cannot be opened as a source"),
    ('{"sources": ["a.rec", "b.rec"], "label_offsets": [0]}', r"2 sources got 1 label offsets"),
    ('{"sources": ["a.rec", "b.rec"], "label_offsets": [0, 2]}', r"classes overlap: .*a.rec's labels run to 3"),
    ('{"sources": ["a.rec", "b.rec"], "label_offsets": "later"}', r"label_offsets must be 'auto'"),
    ('{"sources": ["a.rec", "b.rec"], "samples_per_epoch": "many"}', r"samples_per_epoch must be"),
    ('[1, 2]', r"needs \"sources\""),
])
def test_each_bad_mixture_file_is_one_error_naming_the_file_and_the_source(files, text, message):
    (files["a"].parent / "bad.rec").write_bytes(b"not a record file at all")
    spec = files["a"].parent / "bad.mix.json"
    spec.write_text(text)
    with pytest.raises(MixtureError, match=message) as info:
        ImageRecordIter(path_imgrec=spec, batch_size=4, **SHAPE)
    assert str(info.value).startswith(str(spec))


# -- remote: the storage settings travel with the dataset ---------------------------------------------------

@pytest.fixture
def s3_photos(s3_server, s3_bucket, tmp_path: Path) -> str:
    rec = tmp_path / "photos.rec"
    make_photo_set(rec, 64, 32, 24)
    return upload_indexed(s3_server, s3_bucket, rec, "photos.rec")


def test_the_request_policy_of_an_opened_dataset_reaches_every_consumer(s3_server, s3_photos, tmp_path):
    dataset = mxrec.open_dataset(s3_photos, storage_options=s3_server.storage_options(),
                                 requests="attempts=2,backoff=0,max_backoff=0")
    assert dataset.storage.policy.attempts == 2
    before = s3_server.log.count(key="photos.idx")
    s3_server.faults.fail_next(2, status=503, method="GET", key="photos.rec")
    mark = s3_server.log.mark()
    with pytest.raises(RemoteError):  # the default policy (6 attempts) would have read past two failures
        list(ImageRecordIter(path_imgrec=dataset, batch_size=16, **SHAPE))
    assert len(s3_server.log.since(mark, method="GET", key="photos.rec")) == 2  # attempts=2: two requests, no more
    s3_server.faults.fail_next(1, status=503, method="GET", key="photos.rec")
    mark = s3_server.log.mark()
    with ImageRecordIter(path_imgrec=dataset, batch_size=16, **SHAPE) as it:  # one failure: the retry reads it
        assert sum(len(b.label[0]) - b.pad for b in it) == 64
    assert len(s3_server.log.since(mark, method="GET", key="photos.rec")) >= 2
    assert mxrec.extract_records(dataset, tmp_path / "out").files == 64
    assert mxrec.contact_sheet(dataset, count=4).keys
    assert mxrec.probe(dataset, batch_size=8, batches=2, warmup=0, **SHAPE).run.samples == 16
    assert s3_server.log.count(key="photos.idx") == before  # no consumer read the .idx again


def test_a_mixture_of_s3_shard_sets_costs_what_reading_its_shares_costs(s3_server, s3_bucket, tmp_path):
    options = s3_server.storage_options()
    sizes = {}
    for name, count in (("big", 240), ("small", 120)):
        for shard in range(2):
            rec = tmp_path / f"{name}-{shard}.rec"
            make_photo_set(rec, count // 2)
            sizes[name] = sizes.get(name, 0) + rec.stat().st_size
            upload_indexed(s3_server, s3_bucket, rec, f"{name}-{shard}.rec")
    mixture = mxrec.mix([f"s3://{s3_bucket}/big-{{0..1}}.rec", f"s3://{s3_bucket}/small-{{0..1}}.rec"],
                        storage=options)
    assert mixture.shares == [240, 120]
    mark = s3_server.log.mark()
    with ImageRecordIter(path_imgrec=mixture, batch_size=16, shuffle=True, seed=5, **SHAPE) as it:
        assert sum(len(b.label[0]) - b.pad for b in it) == 360
    gets = s3_server.log.since(mark, method="GET")
    records = [r for r in gets if r.key.endswith(".rec")]
    transferred = sum(r.length or 0 for r in records)
    assert len(records) <= 360 / 8, f"{len(records)} requests for 360 records"
    assert transferred <= 1.1 * (sizes["big"] + sizes["small"]), transferred
    assert not [r for r in gets if r.key.endswith(".idx")]  # the .idx files were read once, when it was mixed


def test_label_offsets_move_the_first_of_a_label_array_and_name_a_record_without_a_header(tmp_path):
    with RecordWriter(tmp_path / "arrays.rec", index=True) as writer:
        for i in range(4):
            writer.write(pack(IRHeader(2, [float(i), 0.5], i, 0), b"image"))
    with RecordWriter(tmp_path / "plain.rec", index=True) as writer:
        writer.write(pack(IRHeader(0, 1.0, 0, 0), b"image"))
        writer.write(b"short")
    mixture = mxrec.mix([tmp_path / "plain.rec", tmp_path / "arrays.rec"], label_offsets=[0, 10])
    header, rest = unpack(bytes(mixture.fetch([3])[0]))
    assert header.label.tolist() == [11.0, 0.5] and rest == b"image"  # the class label moved, the rest kept
    shifted = mxrec.mix([tmp_path / "arrays.rec", tmp_path / "plain.rec"], label_offsets=[0, 10])
    with pytest.raises(HeaderError, match=r"plain.rec: record 1: its class label cannot be moved by the "
                                                r"mixture's label offset 10"):
        shifted.fetch([0, 5])


def test_the_verify_page_of_an_opened_dataset_reads_its_thumbnails_from_it(tmp_path):
    from mxrec.doctor.verify_page import verify_page

    make_clean_dataset(tmp_path / "a.rec", 12)
    reader = mxrec.open_dataset(tmp_path / "a.rec")
    page = verify_page(mxrec.verify_dataset(reader), reader)
    assert "records not readable" not in page and page.count("data:image/jpeg;base64,") >= 12
    assert len(reader[0]) > 0  # left open
