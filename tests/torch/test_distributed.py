"""mxrec.torch for distributed training: lock-step ranks, workers, epochs, resuming, broken records, labels."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader  # noqa: E402

from mxrec.errors import ImageDecodeError, ParameterError  # noqa: E402
from mxrec.format.header import IRHeader, pack  # noqa: E402
from mxrec.io.writer import RecordWriter  # noqa: E402
from mxrec.recordio import pack_img  # noqa: E402
from mxrec.torch import (  # noqa: E402
    DistributedBatchSampler,
    ImageRecordDataset,
    ImageRecordIterable,
    loader_position,
)
from mxrec.train.pipeline import BrokenRecordWarning  # noqa: E402
from mxrec.train.sampler import epoch_order  # noqa: E402

N = 60


def write_ids(path: Path, broken: tuple[int, ...] = ()) -> str:
    """``N`` tiny PNG records whose label is their position (so a sample names its record)."""
    img = np.zeros((4, 4, 3), np.uint8)
    with RecordWriter(path, index=True) as writer:
        for i in range(N):
            if i in broken:
                writer.write(pack(IRHeader(0, float(i), i, 0), b"\x89PNG not really"), key=i)
            else:
                writer.write(pack_img(IRHeader(0, float(i), i, 0), img, img_fmt=".png", quality=1), key=i)
    return str(path)


@pytest.fixture(scope="module")
def rec(tmp_path_factory):
    return write_ids(tmp_path_factory.mktemp("ids") / "ids.rec")


def labels(loader) -> list[list[int]]:
    return [[int(v) for v in y] for _, y in loader]


def flat(batches: list[list[int]]) -> list[int]:
    return [v for batch in batches for v in batch]


def test_set_epoch_reaches_persistent_workers(rec):
    """Regression: with persistent_workers the workers' copies never saw set_epoch (same order every epoch)."""
    ds = ImageRecordIterable(rec, batch_size=6, seed=1)
    loader = DataLoader(ds, batch_size=6, num_workers=2, persistent_workers=True, multiprocessing_context="fork")
    seen = []
    for epoch in range(2):
        ds.set_epoch(epoch)
        seen.append(flat(labels(loader)))
    for epoch in range(2):
        assert seen[epoch] == epoch_order(N, shuffle=True, seed=1, epoch=epoch).tolist()
    assert seen[0] != seen[1]


def test_workers_split_a_rank_into_whole_lock_step_batches(rec):
    ranks = []
    for rank in range(2):
        ds = ImageRecordIterable(rec, batch_size=4, rank=rank, world_size=2, seed=3)
        for workers in (0, 3):
            got = labels(DataLoader(ds, batch_size=4, num_workers=workers,
                                    multiprocessing_context="fork" if workers else None))
            if workers:
                assert got == ranks[-1]  # the same batches, in the same order, with 3 workers
            else:
                ranks.append(got)
    assert len(ranks[0]) == len(ranks[1]) == 8  # ceil(60 / 8) steps on both ranks
    order = epoch_order(N, shuffle=True, seed=3, epoch=0).tolist()
    consumed = []
    for step in range(8):
        consumed += ranks[0][step] + ranks[1][step]
        assert consumed[:min(len(consumed), N)] == order[:min(len(consumed), N)]


def test_broken_records_are_replaced_without_changing_counts(tmp_path):
    path = write_ids(tmp_path / "broken.rec", broken=(5, 6))
    counts = []
    with pytest.warns(BrokenRecordWarning, match="broken.rec: record 5: broken record skipped"):
        for rank in range(2):
            ds = ImageRecordIterable(path, batch_size=5, rank=rank, world_size=2, shuffle=False)
            batches = labels(DataLoader(ds, batch_size=5))
            counts.append(len(batches))
            assert all(len(b) == 5 for b in batches)
    assert counts[0] == counts[1] == 6
    ds = ImageRecordDataset(path)
    with pytest.warns(BrokenRecordWarning):
        assert int(ds[5][1]) == 7  # the next decodable record takes its place
    strict = ImageRecordDataset(path, on_broken="error")
    with pytest.raises(ImageDecodeError, match="broken.rec: record 5"):
        strict[5]


def test_class_ids_as_int64(rec, tmp_path):
    _, label = ImageRecordDataset(rec, label_dtype="int64")[7]
    assert label.dtype == np.int64 and label == 7
    _, label = ImageRecordDataset(rec)[7]
    assert label.dtype == np.float32  # the documented default
    with RecordWriter(tmp_path / "real.rec", index=True) as writer:
        writer.write(pack_img(IRHeader(0, 0.5, 0, 0), np.zeros((4, 4, 3), np.uint8), img_fmt=".png"))
    with pytest.raises(ParameterError, match="not a class id"):
        ImageRecordDataset(tmp_path / "real.rec", label_dtype="int64")[0]


def test_batch_sampler_resumes_through_stateful_dataloader_and_elastically(rec):
    from torchdata.stateful_dataloader import StatefulDataLoader

    ds = ImageRecordDataset(rec)

    def loader(sampler):
        return StatefulDataLoader(ds, batch_sampler=sampler, num_workers=2, multiprocessing_context="fork")

    whole = labels(loader(DistributedBatchSampler(ds, 4, seed=5)))
    first = loader(DistributedBatchSampler(ds, 4, seed=5))
    it = iter(first)
    head = [[int(v) for v in next(it)[1]] for _ in range(5)]
    state = json.loads(json.dumps(first.state_dict()))
    again = loader(DistributedBatchSampler(ds, 4, seed=5))
    again.load_state_dict(state)
    assert head + labels(again) == whole

    # elastic: the sampler's own position, resumed by 3 ranks of 2
    position = loader_position(state)
    assert position["consumed"] == 20
    rest = [labels(DataLoader(ds, batch_sampler=_resumed(ds, position, rank))) for rank in range(3)]
    merged = [sample for step in zip(*rest, strict=True) for batch in step for sample in batch]
    assert flat(head) + merged[:N - 20] == flat(whole)[:N]


def _resumed(ds, state, rank):
    sampler = DistributedBatchSampler(ds, 2, seed=5, rank=rank, world_size=3)
    sampler.load_state_dict(state)
    return sampler


def test_iterable_resumes_through_stateful_dataloader_and_elastically(rec):
    from torchdata.stateful_dataloader import StatefulDataLoader

    def make(**options):
        ds = ImageRecordIterable(rec, batch_size=4, seed=8, **options)
        return ds, StatefulDataLoader(ds, batch_size=4, num_workers=2, multiprocessing_context="fork")

    _, reference = make()
    whole = labels(reference)
    _, first = make()
    it = iter(first)
    head = [[int(v) for v in next(it)[1]] for _ in range(5)]
    state = json.loads(json.dumps(first.state_dict()))
    _, again = make()
    again.load_state_dict(state)
    assert head + labels(again) == whole  # the same layout: every worker continues where it stopped

    position = loader_position(state)
    assert position["consumed"] == 20
    rest = []
    for rank in range(2):  # another layout: 2 ranks of 3 samples, 1 worker each
        ds = ImageRecordIterable(rec, batch_size=3, seed=8, rank=rank, world_size=2)
        ds.load_state_dict(position)
        rest.append(labels(DataLoader(ds, batch_size=3, num_workers=1, multiprocessing_context="fork")))
    merged = [sample for step in zip(*rest, strict=True) for batch in step for sample in batch]
    assert flat(head) + merged[:N - 20] == flat(whole)[:N]


def rank_epoch(rank: int, world_size: int, rec: str, steps: int | None = None) -> dict:
    """One real torch.distributed rank: its batches (labels), rank and world taken from the process group."""
    ds = ImageRecordIterable(rec, batch_size=4, seed=21)
    batches = []
    for _, y in DataLoader(ds, batch_size=4, num_workers=1, multiprocessing_context="fork"):
        batches.append([int(v) for v in y])
        if steps is not None and len(batches) == steps:
            break
    return {"rank": ds.rank, "world": ds.world_size, "batches": batches,
            "position": ds.position_after(0, len(batches)) if steps is not None else None}


@pytest.mark.slow
def test_real_gloo_ranks_share_one_epoch_and_resume_on_one(dist_ranks, rec):
    results = dist_ranks(f"{__file__}:rank_epoch", 2, kwargs={"rec": rec}, timeout=120)
    assert [(r["rank"], r["world"]) for r in results] == [(0, 2), (1, 2)]
    assert len(results[0]["batches"]) == len(results[1]["batches"]) == 8
    seen = sorted(v for r in results for b in r["batches"] for v in b)
    assert set(seen) == set(range(N)) and len(seen) == 64  # the epoch, and 4 filler samples in the last step

    stopped = dist_ranks(f"{__file__}:rank_epoch", 2, kwargs={"rec": rec, "steps": 3}, timeout=120)
    position = stopped[0]["position"]
    resumed = ImageRecordIterable(rec, batch_size=8, seed=21, rank=0, world_size=1)
    resumed.load_state_dict(position)
    rest = flat(labels(DataLoader(resumed, batch_size=8)))
    before = [v for step in range(3) for r in stopped for v in r["batches"][step]]
    assert before + rest[:N - 24] == epoch_order(N, shuffle=True, seed=21, epoch=0).tolist()
