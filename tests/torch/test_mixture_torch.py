"""Mixtures and opened datasets in the PyTorch datasets (issue 23): read as they are, pickled into ``DataLoader``
workers under fork and spawn, resumed mid-epoch on another number of ranks and batch size, through
``StatefulDataLoader``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader

import mxrec
from mxrec.torch import (
    DistributedBatchSampler,
    ImageRecordDataset,
    ImageRecordIterable,
    RecordDataset,
    batch_collate,
    loader_position,
)
from mxrec.transforms import Compose, Resize, ToTensor
from testkit.datasets import make_clean_dataset, make_photo_set

SAMPLES = 96
SMALL = Compose([Resize(16), ToTensor()])  # (the two sets' images differ in size)


@pytest.fixture(scope="module")
def mixture_file(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("mixture")
    make_clean_dataset(folder / "a.rec", 50)  # labels key % 4
    make_photo_set(folder / "b.rec", 30, 40, 30)  # labels key % 5
    spec = folder / "train.mix.json"
    spec.write_text(json.dumps({"sources": [{"path": "a.rec", "weight": 0.7}, {"path": "b.rec", "weight": 0.3}],
                                "samples_per_epoch": SAMPLES, "label_offsets": "auto", "seed": 4}))
    return spec


def labels(loader) -> list[int]:
    return [int(v) for _, y in loader for v in y]


def test_every_torch_dataset_reads_an_opened_dataset_as_it_is(mixture_file):
    mixture = mxrec.open_dataset(mixture_file)
    one = mxrec.open_dataset(mixture_file.parent / "a.rec")
    for dataset in (mixture, one):
        assert RecordDataset(dataset).reader is dataset
        assert ImageRecordDataset(dataset).reader is dataset
        iterable = ImageRecordIterable(dataset, batch_size=8)
        assert iterable.reader is dataset
    assert len(ImageRecordIterable(mixture, batch_size=8)) == SAMPLES  # an epoch: the mixture's samples
    assert len(ImageRecordIterable(mixture_file, batch_size=8)) == SAMPLES
    assert sorted({int(y) for _, y in ImageRecordIterable(mixture, batch_size=8)}) == list(range(9))  # offsets


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_a_mixture_in_dataloader_workers_gives_the_same_epoch(mixture_file, context):
    mixture = mxrec.open_dataset(mixture_file)
    def iterable() -> ImageRecordIterable:
        return ImageRecordIterable(mixture, batch_size=8, seed=2, transform=SMALL)

    reference = labels(DataLoader(iterable(), batch_size=8))
    workers = labels(DataLoader(iterable(), batch_size=8, num_workers=2, multiprocessing_context=context))
    assert len(reference) == SAMPLES and workers == reference
    share = sum(v >= 4 for v in reference)  # b's samples: 0.3 of 96, rounded
    assert share == 29

    preprocess = {"data_shape": (3, 16, 16), "resize": 16}

    def batches(num_workers: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        ds = ImageRecordDataset(mixture, preprocess=preprocess, dtype="uint8")
        loader = DataLoader(ds, batch_sampler=DistributedBatchSampler(ds, 8, seed=2), collate_fn=batch_collate,
                            num_workers=num_workers, multiprocessing_context=context if num_workers else None)
        return [(x.clone(), y.clone()) for x, y in loader]

    for (x0, y0), (x1, y1) in zip(batches(0), batches(2), strict=True):  # the batch path, pickled into workers
        assert torch.equal(x0, x1) and torch.equal(y0, y1)


def test_resuming_a_mixture_on_three_ranks_of_24_after_two_of_16_delivers_the_rest_exactly(mixture_file):
    mixture = mxrec.open_dataset(mixture_file)
    ds = RecordDataset(mixture)

    def run(world: int, batch: int, state: dict | None = None, steps: int | None = None) -> tuple[list, dict]:
        samplers = [DistributedBatchSampler(ds, batch, seed=7, rank=r, world_size=world) for r in range(world)]
        for sampler in samplers:
            if state is not None:
                sampler.load_state_dict(state)
        per_rank = []
        for sampler in samplers:
            batches = list(DataLoader(ds, batch_sampler=sampler, collate_fn=list))
            per_rank.append(batches if steps is None else batches[:steps])
        delivered = [p for step in zip(*per_rank, strict=True) for batch in step for p in batch]
        return delivered, samplers[0].sampler.state(0, (steps or 0) * world * batch)  # the global position

    whole, _ = run(1, 16)
    head, state = run(2, 16, steps=2)  # 64 samples of 96
    rest, _ = run(3, 24, state=json.loads(json.dumps(state)))
    assert state["consumed"] == 64
    assert head + rest[:SAMPLES - 64] == whole[:SAMPLES]  # nothing lost or repeated


def test_a_mixture_resumes_through_stateful_dataloader(mixture_file):
    from torchdata.stateful_dataloader import StatefulDataLoader

    def make():
        dataset = ImageRecordIterable(mixture_file, batch_size=8, seed=3, transform=SMALL)
        return StatefulDataLoader(dataset, batch_size=8, num_workers=2, multiprocessing_context="fork")

    whole = labels(make())
    first = make()
    it = iter(first)
    head = [int(v) for _ in range(5) for v in next(it)[1]]
    state = json.loads(json.dumps(first.state_dict()))
    again = make()
    again.load_state_dict(state)
    assert head + labels(again) == whole
    assert loader_position(state)["consumed"] == 40
