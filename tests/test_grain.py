"""``mxrec.grain`` with the real Grain (no JAX): a data source over any dataset mxrec opens, and a map that decodes
and augments as ``ImageRecordIter`` does; every record once an epoch, under worker processes, and a checkpoint
restored in the middle of an epoch goes on with the same elements."""

from __future__ import annotations

import numpy as np
import pytest

import mxrec
from mxrec.errors import ParameterError
from testkit import GOLDEN
from testkit.datasets import write_indexed

grain = pytest.importorskip("grain")
mg = pytest.importorskip("mxrec.grain")

SUB = GOLDEN / "im2rec" / "default" / "sub.rec"  # 50 JPEG photos, 10 classes
PARAMS = {"data_shape": (3, 32, 32), "resize": 40, "rand_crop": True, "rand_mirror": True}


def pipeline(source, seed: int = 0, epochs: int = 1):
    decode = mg.Decode(source, **PARAMS)
    return grain.MapDataset.source(source).shuffle(seed=seed).repeat(epochs).map_with_index(decode)


def test_decode_gives_image_record_iters_batches():
    source = mg.RecordSource(SUB)
    decode = mg.Decode(source, layout="CHW", **PARAMS)
    with mxrec.ImageRecordIter(path_imgrec=str(SUB), batch_size=10, shuffle=False, **PARAMS) as it:
        batch = next(iter(it))
    mine = [decode.map_with_index(n, source[n]) for n in range(10)]
    np.testing.assert_array_equal(np.stack([m["image"] for m in mine]), np.asarray(batch.data[0]))
    np.testing.assert_array_equal(np.stack([m["label"] for m in mine]), np.asarray(batch.label[0]).reshape(10, 1))
    hwc = mg.Decode(source, **PARAMS).map_with_index(3, source[3])["image"]
    np.testing.assert_array_equal(hwc, mine[3]["image"].transpose(1, 2, 0))  # JAX's layout, the default


def test_every_record_once_an_epoch_and_new_draws_each_epoch():
    ds = pipeline(mg.RecordSource(SUB), epochs=2)
    assert len(ds) == 100
    elements = [ds[n] for n in range(100)]
    for epoch in (elements[:50], elements[50:]):
        assert sorted(e["position"] for e in epoch) == list(range(50))
    first = {e["position"]: e["image"] for e in elements[:50]}
    second = {e["position"]: e["image"] for e in elements[50:]}
    assert sum(not np.array_equal(first[p], second[p]) for p in range(50)) > 25  # the epoch keys the draws
    again = pipeline(mg.RecordSource(SUB), epochs=2)
    assert all(np.array_equal(again[n]["image"], elements[n]["image"]) for n in (0, 49, 50, 99))


def test_reading_threads_give_the_same_elements():
    """Grain maps on several threads at once: each thread decodes with a loader of its own."""
    ds = pipeline(mg.RecordSource(SUB), seed=1)
    threaded = list(ds.to_iter_dataset(grain.ReadOptions(num_threads=4, prefetch_buffer_size=16)))
    assert [e["position"] for e in threaded] == [ds[n]["position"] for n in range(50)]
    assert all(np.array_equal(e["image"], ds[n]["image"]) for n, e in enumerate(threaded))


def test_any_dataset_mxrec_opens(tmp_path, http_server):
    url = http_server.put("d/sub.rec", SUB.read_bytes())
    http_server.put("d/sub.idx", SUB.with_suffix(".idx").read_bytes())
    local, remote = mg.RecordSource(SUB), mg.RecordSource(url)
    assert len(remote) == 50 and remote[7] == local[7]
    assert repr(remote) == f"mxrec.grain.RecordSource({url!r}, records=50)"
    one, two = tmp_path / "one.rec", tmp_path / "two.rec"
    write_indexed(one, range(4), [mxrec.pack(mxrec.IRHeader(0, 0, n, 0), b"one%d" % n) for n in range(4)])
    write_indexed(two, range(2), [mxrec.pack(mxrec.IRHeader(0, 1, n, 0), b"two%d" % n) for n in range(2)])
    shards = mg.RecordSource([str(one), str(two)])  # a shard set
    assert [mxrec.unpack(shards[n]["record"])[1] for n in range(6)] == [b"one0", b"one1", b"one2", b"one3",
                                                                          b"two0", b"two1"]
    mixed = mxrec.mix([mxrec.open_dataset(one), mxrec.open_dataset(two)], weights=[1, 1])
    mixture = mg.RecordSource(mixed)
    assert len(mixture) == len(mixed) and [mixture[n]["record"] for n in range(len(mixed))] == [
        bytes(mixed[n]) for n in range(len(mixed))]


def test_data_loader_with_two_worker_processes_gives_every_record_once_as_in_one_process():
    source = mg.RecordSource(SUB)

    def loader(workers: int):
        sampler = grain.samplers.IndexSampler(num_records=len(source), shard_options=grain.sharding.NoSharding(),
                                              shuffle=True, num_epochs=1, seed=7)
        return grain.DataLoader(data_source=source, sampler=sampler, worker_count=workers,
                                operations=[mg.Decode(source, **PARAMS), grain.transforms.Batch(10)])

    def images(batches) -> dict[int, np.ndarray]:
        return {int(p): image for b in batches for p, image in zip(b["position"], b["image"], strict=True)}

    here, there = images(loader(0)), images(loader(2))  # (each worker makes its own batches)
    assert sorted(there) == sorted(here) == list(range(50))
    for position in range(50):  # each record's draws are its own, whichever process decodes it
        np.testing.assert_array_equal(here[position], there[position])


def test_a_checkpoint_restored_mid_epoch_goes_on_with_the_same_elements():
    source = mg.RecordSource(SUB)
    sampler = grain.samplers.IndexSampler(num_records=len(source), shard_options=grain.sharding.NoSharding(),
                                          shuffle=True, num_epochs=1, seed=3)
    operations = [mg.Decode(source, **PARAMS), grain.transforms.Batch(5)]
    iterator = iter(grain.DataLoader(data_source=source, sampler=sampler, worker_count=2, operations=operations))
    seen = [next(iterator) for _ in range(4)]  # 20 of 50
    state = iterator.get_state()
    rest = list(iterator)
    restored = iter(grain.DataLoader(data_source=mg.RecordSource(SUB), sampler=sampler, worker_count=2,
                                     operations=operations))
    restored.set_state(state)
    again = list(restored)
    assert len(rest) == len(again) == 6
    positions = np.concatenate([b["position"] for b in seen + again]).tolist()
    assert sorted(positions) == list(range(50))
    for mine, theirs in zip(rest, again, strict=True):
        np.testing.assert_array_equal(mine["position"], theirs["position"])
        np.testing.assert_array_equal(mine["image"], theirs["image"])


def test_map_dataset_iterator_state_resumes_mid_epoch():
    ds = pipeline(mg.RecordSource(SUB), seed=5).to_iter_dataset()
    iterator = iter(ds)
    head = [next(iterator)["position"] for _ in range(17)]
    state = iterator.get_state()
    tail = [e["position"] for e in iterator]
    resumed = iter(ds)
    resumed.set_state(state)
    assert [e["position"] for e in resumed] == tail and sorted(head + tail) == list(range(50))


def test_without_grain_the_error_names_the_extra(monkeypatch):
    import importlib
    import sys

    from mxrec.errors import MissingExtraError

    monkeypatch.delitem(sys.modules, "mxrec.grain")
    monkeypatch.setitem(sys.modules, "grain", None)  # import grain fails as if not installed
    with pytest.raises(MissingExtraError, match=r"mxrec\[grain\]"):
        importlib.import_module("mxrec.grain")


def test_bad_parameters_are_named():
    source = mg.RecordSource(SUB)
    with pytest.raises(ParameterError, match="layout must be one of"):
        mg.Decode(source, layout="NCHW", **PARAMS)
    with pytest.raises(ParameterError, match="data_shape"):
        mg.Decode(source)
    with pytest.raises(ParameterError, match="rand_crp"):
        mg.Decode(source, rand_crp=True, data_shape=(3, 8, 8))
