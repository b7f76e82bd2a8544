"""Resuming through torchdata's ``StatefulDataLoader``: the one function that reads its private state keys,
checked against the pinned torchdata (0.11), with and without workers; and a read-ahead for the map-style
dataset's sampler."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
stateful = pytest.importorskip("torchdata.stateful_dataloader")

from mxrec.torch.resume import delivered_batches  # noqa: E402


@pytest.mark.parametrize("num_workers", [0, 2])
@pytest.mark.parametrize("taken", [0, 1, 4])
def test_delivered_batches_reads_the_pinned_torchdatas_state(num_workers, taken):
    kwargs = {"num_workers": num_workers}
    if num_workers:
        kwargs.update(multiprocessing_context="fork", snapshot_every_n_steps=2)
    loader = stateful.StatefulDataLoader(list(range(40)), batch_size=4, **kwargs)
    batches = iter(loader)
    for _ in range(taken):
        next(batches)
    assert delivered_batches(loader.state_dict()) == taken
    del batches
