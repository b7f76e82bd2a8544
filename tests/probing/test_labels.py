"""The probe's labels check against the dataset's labels: sorted reads, narrow block shuffles and shares that are
off fail whatever the number of batches; shuffled reads never do."""

from __future__ import annotations

import json

import numpy as np
import pytest

import mxrec
from mxrec.datasets.opening import open_dataset
from mxrec.probing.labels import MAX_SAMPLE, DatasetLabels, compare, dataset_labels, spread_positions
from testkit.datasets import make_photo_set, on_memory_fs
from testkit.insightface import make_face_set
from testkit.iterdata import image_record, write_records

SHAPE = (3, 16, 16)


def tiny(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, (16, 16, 3)).astype(np.uint8)


@pytest.fixture(scope="module")
def class_sorted(tmp_path_factory):
    """1200 records in class order: 10 classes of 120."""
    path = tmp_path_factory.mktemp("sorted") / "photos.rec"
    return str(write_records(path, [image_record(tiny(i), i // 120, i, ".jpg") for i in range(1200)]))


def run(rec, **params):
    return mxrec.probe(rec, **{**dict(data_shape=SHAPE, batch_size=8, preprocess_threads=1), **params})


def test_a_short_probe_of_a_sorted_set_fails_though_its_batches_hold_one_class(class_sorted, mxrec_cli):
    result = run(class_sorted, shuffle=False, batches=12)  # 14 batches of 8: all class 0
    labels = result.report.check("labels")
    assert labels.details["code"] == "single_class_batches" and not result.ok
    assert labels.summary.startswith("batches: 1 distinct label(s) over 14 batches (112 samples, 1.0 per batch); "
                                     "the dataset holds 10 classes (all 1200 headers): the batches cover 1 of them")
    assert "the data is read in label order (shuffle=0 on a class-sorted set)" in labels.summary
    assert labels.details["comparison"]["stored_in_order"] and "shuffle" in [a.code for a in result.advice]
    out = mxrec_cli("probe", class_sorted, "shuffle=0", "data_shape=3,16,16", "batch_size=8", "--batches", "12",
                    "--json")
    assert out.returncode == 1 and json.loads(out.stdout)["verdict"]["codes"]["labels"] == "single_class_batches"


def test_a_shuffled_read_passes_and_says_what_it_compared(class_sorted):
    for batches in (2, 12, 60):
        labels = run(class_sorted, shuffle=True, batches=batches, seed=batches).report.check("labels")
        assert labels.details["code"] == "ok", labels.summary
        assert labels.details["dataset"] == {"classes": 10, "source": "headers", "sampled": 1200, "records": 1200,
                                             "every_record": True}
        assert "a shuffled read of" in labels.summary


def test_a_block_shuffle_too_narrow_for_the_label_order_fails(class_sorted):
    result = run(class_sorted, shuffle=True, shuffle_block=32, shuffle_window=1, batches=12)
    assert result.codes()["labels"] == "narrow_shuffle" and not result.ok
    assert "shuffle_window" in [a.code for a in result.advice]
    assert result.codes()["labels"] == "narrow_shuffle"
    wide = run(class_sorted, shuffle=True, shuffle_block=4, batches=12, seed=3)  # the default window
    assert wide.codes()["labels"] == "ok", wide.report.check("labels").summary


def test_the_probe_reports_mixing_against_a_global_shuffle_and_warns_below_nine_tenths(class_sorted):
    options = dict(shuffle=True, shuffle_block=4, data_shape=SHAPE, batch_size=32, batches=30, seed=1)
    poor = mxrec.probe(class_sorted, shuffle_window=16, **options).report.check("labels")
    ratio = poor.details["comparison"]["mixing_ratio"]
    assert poor.details["code"] == "narrow_shuffle" and poor.warning and 0.75 < ratio < 0.9, poor.summary
    assert f"mixing {ratio:.2f}x a global shuffle's" in poor.summary and "mixes poorly for the label order" in \
        poor.summary
    good = mxrec.probe(class_sorted, **options).report.check("labels")  # the default window
    assert good.details["code"] == "ok" and good.details["comparison"]["mixing_ratio"] >= 0.9, good.summary


def test_a_mixture_whose_shares_are_off_fails(class_sorted):
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader, WeightedRandomSampler

    from mxrec.torch import ImageRecordDataset, batch_collate

    dataset = ImageRecordDataset(class_sorted, preprocess=dict(data_shape=SHAPE))
    # meant as equal shares of the 10 classes; the weights give the first two classes 80 % of the samples
    weights = torch.tensor([8.0 if i < 240 else 0.5 for i in range(1200)])
    for seed, (sampler, code) in enumerate([(WeightedRandomSampler(weights, 400), "label_shares"),
                                            (WeightedRandomSampler(torch.ones(1200), 400), "ok")]):
        torch.manual_seed(seed)
        loader = DataLoader(dataset, batch_size=16, sampler=sampler, collate_fn=batch_collate)
        labels = mxrec.probe(loader, batches=10).report.check("labels")
        assert labels.details["code"] == code, labels.summary
        if code != "ok":
            assert "a mixture's shares, a weighted sampler or a subset off" in labels.summary
    unshuffled = mxrec.probe(DataLoader(dataset, batch_size=16, collate_fn=batch_collate), batches=10)
    assert unshuffled.codes()["labels"] == "single_class_batches"  # a sequential sampler on a sorted set


def test_shuffled_batches_raise_no_alarm_and_sorted_or_weighted_ones_do():
    classes = np.repeat(np.arange(20), 50).astype(np.float64)  # 1000 records, class-sorted
    data = DatasetLabels(classes, len(classes), True, "headers")
    rng = np.random.default_rng(7)
    for _ in range(40):  # a false alarm would fail one of many shuffled reads of every length
        order = rng.permutation(classes)
        batches = rng.integers(1, 30)
        found = compare(np.split(order[:batches * 16], batches), data, seed=int(rng.integers(1 << 30)))
        assert not (found.mixing_off or found.shares_off), found
    sorted_found = compare(np.split(classes[:64], 8), data)  # batches of classes 0 and 1
    assert sorted_found.shares_off and sorted_found.covered == 2 and sorted_found.stored_in_order
    assert compare(np.split(classes[::25], 5), data).mixing_off  # 8 classes, each batch a run of one or two
    weighted = rng.choice(20, size=640, p=np.r_[np.full(2, 0.3), np.full(18, 0.4 / 18)]).astype(np.float64)
    found = compare(np.split(weighted, 40), data)
    assert found.shares_off and not found.mixing_off and found.distance > 0.3


def test_a_sampled_distribution_allows_for_its_own_noise():
    rng = np.random.default_rng(3)
    shares = np.r_[np.full(5, 0.15), np.full(50, 0.25 / 50)]
    sample = DatasetLabels(rng.choice(55, size=256, p=shares).astype(np.float64), 100_000, False, "headers")
    for seed in range(20):
        read = np.random.default_rng(100 + seed).choice(55, size=50 * 64, p=shares).astype(np.float64)
        found = compare(np.split(read, 50), sample, seed=seed)
        assert not (found.mixing_off or found.shares_off), found


def test_remote_headers_are_a_bounded_spread_sample(tmp_path):
    rec = tmp_path / "photos.rec"
    make_photo_set(rec, 600)  # labels key % 5
    with on_memory_fs(rec) as url, open_dataset(url) as reader:
        assert reader.default_shuffle_block() > 0  # every jump costs a request
        found = dataset_labels(reader)
        assert len(found.labels) == MAX_SAMPLE and not found.exact and found.total == 600
        expected = (spread_positions(600, MAX_SAMPLE) % 5).astype(np.float64)
        assert np.array_equal(found.labels, expected)  # the headers of records spread over the whole set
        assert found.describe() == "sampled 256 headers of 600 records"
    with open_dataset(rec) as local:
        assert dataset_labels(local).exact  # local: every header, cheaply


def test_a_face_sets_identities_are_its_labels(tmp_path):
    files = make_face_set(tmp_path, [3, 1, 4, 2])
    result = mxrec.probe(str(files.rec), data_shape=SHAPE, batch_size=4, shuffle=False, batches=2,
                         preprocess_threads=1)
    data = result.run.dataset_labels
    assert data.source == "identities" and data.exact and data.labels.tolist() == [0, 0, 0, 1, 2, 2, 2, 2, 3, 3]
    assert result.report.check("labels").details["dataset"]["classes"] == 4


def test_labels_from_a_list_are_not_compared_with_the_headers(class_sorted, tmp_path):
    lst = tmp_path / "labels.lst"
    lst.write_text("".join(f"{i}\t{i % 10}\tx.jpg\n" for i in range(1200)))
    labels = run(class_sorted, shuffle=False, batches=3, path_imglist=str(lst)).report.check("labels")
    assert labels.details["code"] == "ok" and f"the labels come from {lst}, not the headers" in labels.summary
