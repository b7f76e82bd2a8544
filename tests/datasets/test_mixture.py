"""Weighted mixtures (issue 23 §2): exact shares, proportions in every window, every record before any repeats,
determinism, resume on other layouts, label offsets, the mixture file, and every bad input named."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import mxrec
from mxrec.datasets.mixture import Mixture, MixtureError, mix, shares_of
from mxrec.datasets.opening import open_dataset
from mxrec.format.header import IRHeader, pack, unpack
from mxrec.io.writer import RecordWriter
from mxrec.train.sampler import BatchSampler
from testkit.insightface import make_face_set


def class_set(path: Path, count: int, classes: int, tag: int) -> Path:
    """``count`` records, labels ``i % classes``, payload ``tag:i`` after the header (tells source and record)."""
    with RecordWriter(path, index=True) as writer:
        for i in range(count):
            writer.write(pack(IRHeader(0, float(i % classes), i, 0), f"{tag}:{i}".encode()))
    return path


def who(payload: bytes) -> tuple[int, int]:
    tag, number = unpack(payload)[1].decode().split(":")
    return int(tag), int(number)


@pytest.fixture
def sets(tmp_path):
    return [class_set(tmp_path / "a.rec", 600, 5, 0), class_set(tmp_path / "b.rec", 90, 3, 1),
            class_set(tmp_path / "c.rec", 30, 2, 2)]


def test_shares_sum_exactly_by_the_largest_remainder():
    assert shares_of([0.5, 0.3, 0.2], 7) == [4, 2, 1]
    assert shares_of([1, 1, 1], 100) == [34, 33, 33]
    for weights in ([0.7, 0.25, 0.05], [3, 1e-9, 5], [1]):
        assert sum(shares_of(weights, 1001)) == 1001


def test_each_epoch_holds_each_sources_share_and_proportions_hold_in_every_window(sets):
    mixture = mix(sets, [0.7, 0.25, 0.05], samples_per_epoch=1000)
    assert mixture.shares == [700, 250, 50]
    order = mixture.epoch_order(shuffle=True, seed=3)
    assert order.length == 1000
    for epoch in range(3):
        positions = order(epoch)
        source = np.searchsorted(mixture.starts, positions, side="right") - 1
        assert Counter(source.tolist()) == {0: 700, 1: 250, 2: 50}
        for window in (64, 128, 333):
            for start in range(0, 1000 - window, 7):
                counts = np.bincount(source[start:start + window], minlength=3)
                expected = np.array([0.7, 0.25, 0.05]) * window
                assert np.all(np.abs(counts - expected) <= 2), (epoch, start, window, counts)


def test_a_small_share_walks_through_every_record_before_any_repeats(sets):
    mixture = mix(sets, [0.9, 0.09, 0.01], samples_per_epoch=1000)  # c: 10 a epoch of 30 records
    order = mixture.epoch_order(shuffle=True, seed=1)
    seen: list[int] = []
    for epoch in range(6):
        positions = order(epoch)
        seen += [int(p) - int(mixture.starts[2]) for p in positions if p >= mixture.starts[2]]
    assert sorted(seen[:30]) == list(range(30)) and sorted(seen[30:60]) == list(range(30))  # cycles of 3 epochs
    large = [int(p) for p in order(0) if p < mixture.starts[1]]  # a: 900 of 600 records: one pass and a half
    counts = Counter(large)
    assert len(large) == 900 and set(counts.values()) <= {1, 2} and len(counts) == 600


def test_the_order_is_a_function_of_seed_and_epoch(sets):
    mixture = mix(sets, [1, 1, 1], samples_per_epoch=300, seed=5)
    order = mixture.epoch_order(shuffle=True, seed=0)
    again = mix(sets, [1, 1, 1], samples_per_epoch=300, seed=5).epoch_order(shuffle=True, seed=0)
    assert np.array_equal(order(2), again(2)) and not np.array_equal(order(2), order(3))
    other = mix(sets, [1, 1, 1], samples_per_epoch=300, seed=6).epoch_order(shuffle=True, seed=0)
    assert not np.array_equal(order(2), other(2))


def test_weights_default_to_sizes_and_samples_to_the_total(sets):
    mixture = mix(sets)
    assert mixture.shares == [600, 90, 30] and mixture.samples_per_epoch == 720
    assert sorted(mixture.epoch_order(shuffle=True, seed=0)(0).tolist()) == list(range(720))  # a concatenation


def test_records_read_through_the_mixture_are_the_sources_records(sets):
    mixture = mix(sets, [0.5, 0.3, 0.2], samples_per_epoch=200)
    assert len(mixture) == 720
    assert [who(p) for p in mixture.read_batch([0, 600, 689, 690, 719])] == [(0, 0), (1, 0), (1, 89), (2, 0),
                                                                              (2, 29)]
    assert mixture.keys[600] == (1, 0) and mixture.position((2, 5)) == 695
    assert "b.rec" in mixture.describe(650)


def test_resuming_on_another_number_of_ranks_and_batch_size_delivers_the_rest_exactly(sets):
    mixture = mix(sets, [0.6, 0.3, 0.1], samples_per_epoch=480, seed=2)
    order = mixture.epoch_order(shuffle=True, seed=9)
    whole = BatchSampler(0, 16, order=order).order(0)

    def run(num_parts: int, batch: int, epoch: int, start: int, steps: int | None) -> list[list[int]]:
        ranks = [BatchSampler(0, batch, num_parts=num_parts, part_index=r, order=order, last_batch="partial")
                 for r in range(num_parts)]
        plans = [r.epoch(epoch, start=start)[0] for r in ranks]
        taken = len(plans[0]) if steps is None else steps
        return [[p for r in range(num_parts) for p in plans[r][s].positions.tolist()] for s in range(taken)]

    first = run(2, 16, 0, 0, 5)  # 5 steps of 2 x 16
    state = BatchSampler(0, 16, num_parts=2, order=order).state(0, 5 * 32)
    resumed = BatchSampler(0, 24, num_parts=3, order=order)
    epoch, consumed, _ = resumed.restore(state)
    rest = run(3, 24, epoch, consumed, None)
    delivered = [p for step in first + rest for p in step if p >= 0]  # (the last step's empty slots: -1)
    assert delivered == whole.tolist()  # nothing lost or repeated: the rest of the same global order
    with pytest.raises(mxrec.ParameterError, match="cannot resume"):
        BatchSampler(0, 16, order=mix(sets, [0.5, 0.4, 0.1], samples_per_epoch=480, seed=2).epoch_order(
            shuffle=True, seed=9)).restore(state)


def test_auto_label_offsets_put_each_sources_classes_after_the_previous(sets):
    mixture = mix(sets, label_offsets="auto")
    assert mixture.label_offsets == [0, 5, 8]
    assert unpack(mixture[600])[0].label == 5.0 and unpack(mixture[692])[0].label == 8.0 + 0
    assert mixture.header(601).label == 6.0 and mixture.header(3).label == 3.0
    labels = {unpack(p)[0].label for p in mixture.read_batch(range(len(mixture)))}
    assert labels == set(map(float, range(10)))


def test_face_sets_mix_as_face_sets(tmp_path):
    one = make_face_set(tmp_path / "one", [3, 2])
    two = make_face_set(tmp_path / "two", [1, 4, 2])
    mixture = mix([one.rec, two.rec], label_offsets="auto")
    assert len(mixture) == 5 + 7 and mixture.label_offsets == [0, 2]  # faces only; identities counted
    labels = [unpack(p)[0].label for p in mixture.read_batch(range(len(mixture)))]
    assert [int(v) for v in labels] == [0, 0, 0, 1, 1, 2, 3, 3, 3, 3, 4, 4]


def test_explicit_label_offsets_are_checked(sets):
    assert mix(sets, label_offsets=[0, 100, 200]).label_offsets == [0, 100, 200]
    with pytest.raises(MixtureError, match="overlap: .*a.rec's labels run to 4, .*b.rec's start at 3"):
        mix(sets, label_offsets=[0, 3, 200])
    with pytest.raises(MixtureError, match="3 sources got 2 label offsets"):
        mix(sets, label_offsets=[0, 5])
    with pytest.raises(MixtureError, match="c.rec: label offset -1"):
        mix(sets, label_offsets=[0, 10, -1])


@pytest.mark.parametrize(("weights", "message"), [
    ([1, -1, 1], "b.rec: weight -1 is not a non-negative number"),
    ([1, float("nan"), 1], "b.rec: weight nan"),
    ([0, 0, 0], "the weights are all zero"),
    ([1, 1], "3 sources got 2 weights"),
])
def test_bad_weights_name_the_source(sets, weights, message):
    with pytest.raises(MixtureError, match=message):
        mix(sets, weights)


def test_bad_sources_and_mixtures_of_mixtures_are_refused(sets, tmp_path):
    with pytest.raises(MixtureError, match="missing.rec: cannot be opened as a source"):
        mix([sets[0], tmp_path / "missing.rec"])
    with pytest.raises(MixtureError, match="a mixture inside a mixture is not supported"):
        mix([mix(sets), sets[0]])
    with pytest.raises(MixtureError, match="at least one source"):
        mix([])
    with pytest.raises(MixtureError, match="samples_per_epoch must be"):
        mix(sets, samples_per_epoch=0)


def test_a_mixture_file_is_a_dataset_anywhere(sets, tmp_path):
    spec = tmp_path / "train.mix.json"
    spec.write_text(json.dumps({"sources": [{"path": "a.rec", "weight": 0.7}, {"path": str(sets[1]), "weight": 0.3}],
                                "samples_per_epoch": 100, "label_offsets": "auto"}))
    mixture = open_dataset(spec)
    assert isinstance(mixture, Mixture) and mixture.shares == [70, 30] and mixture.label_offsets == [0, 5]
    for text, message in [("{", "not JSON"), ('{"sources": []}', "needs \"sources\""),
                          ('{"sources": [{"weight": 1}]}', "source 0 needs a \"path\""),
                          ('{"sources": ["a.rec"], "weights": [1]}', "unknown field"),
                          ('{"sources": [{"path": "a.rec", "weight": 1}, {"path": "b.rec"}]}', "every source a "
                                                                                               "weight")]:
        spec.write_text(text)
        with pytest.raises(MixtureError, match=message) as info:
            open_dataset(spec)
        assert str(spec) in str(info.value)


def test_an_opened_dataset_is_used_as_it_is(sets):
    reader = open_dataset(sets[0])
    assert open_dataset(reader) is reader
    with pytest.raises(mxrec.ParameterError, match="an opened dataset is read as it was opened"):
        open_dataset(reader, index=False)
    mixture = mix([reader, sets[1]])
    assert mixture.sources[0] is reader


def test_the_description_says_shares_passes_and_offsets(sets):
    text = mix(sets, [0.5, 0.45, 0.05], samples_per_epoch=400, label_offsets="auto").format_text()
    assert "mixture of 3 sources, 400 samples per epoch" in text
    assert "a.rec: 600 records, weight 0.5, 200 per epoch (0.33× — full cycle every 3 epochs), label offset 0" in text
    assert "b.rec: 90 records, weight 0.45, 180 per epoch (2.0× repeated), label offset 5" in text
    assert math.isclose(mix(sets).describe_sources()[0]["passes"], 1.0)
