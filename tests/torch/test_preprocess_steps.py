"""ImageRecordDataset(preprocess=...) with your own augmentation steps (aug_list): the iterator's batches, the same
in DataLoader workers (fork and spawn) and after a resume; and the messages of the preprocess path."""

from __future__ import annotations

import numpy as np
import pytest

from testkit.iterdata import IM2REC, pack_photos
from testkit.steps import Cutout, RandomGrey

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader  # noqa: E402

from mxrec.errors import ParameterError  # noqa: E402
from mxrec.torch import DistributedBatchSampler, ImageRecordDataset, batch_collate  # noqa: E402
from mxrec.train import ImageRecordIter, default_steps  # noqa: E402
from mxrec.transforms import ToTensor  # noqa: E402

SHAPE = (3, 24, 24)


@pytest.fixture(scope="module")
def rec(tmp_path_factory):
    return str(pack_photos(tmp_path_factory.mktemp("steps") / "sub.rec", IM2REC / "lists" / "sub.lst"))


def steps():
    return [*default_steps(SHAPE, random_resized_crop=True, min_random_area=0.2), RandomGrey(0.5), Cutout(6)]


def dataset(rec, **options):
    preprocess = dict(data_shape=SHAPE, aug_list=steps(), rand_mirror=True, **options)
    return ImageRecordDataset(rec, preprocess=preprocess, seed=3, dtype="uint8")


def batches(ds, epoch=0, **loader):
    ds.set_epoch(epoch)
    sampler = DistributedBatchSampler(ds, 10, shuffle=False, world_size=1, rank=0)
    return [(x.clone(), y.clone()) for x, y in DataLoader(ds, batch_sampler=sampler, collate_fn=batch_collate,
                                                          **loader)]


def test_preprocess_steps_are_the_iterators_per_record(rec):
    with ImageRecordIter(path_imgrec=rec, data_shape=SHAPE, batch_size=10, seed=3, dtype="uint8", aug_list=steps(),
                         rand_mirror=True) as it:
        expected = [(b.data[0].copy(), b.label[0].copy()) for b in it]
    got = batches(dataset(rec))
    assert len(got) == len(expected) == 5
    for (x, y), (ex, ey) in zip(got, expected, strict=True):
        np.testing.assert_array_equal(x.numpy(), ex)
        np.testing.assert_array_equal(y.numpy(), ey)
    grey = [bool((img[0] == img[1]).all() and (img[1] == img[2]).all()) for x, _ in got for img in x.numpy()]
    assert 10 < sum(grey) < 40  # RandomGrey(0.5) did act, on its own records


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_two_workers_make_the_same_batches(rec, context):
    reference = batches(dataset(rec), epoch=1)
    workers = batches(dataset(rec), epoch=1, num_workers=2, multiprocessing_context=context)
    assert len(workers) == 5
    for (x0, y0), (x1, y1) in zip(reference, workers, strict=True):
        assert torch.equal(x0, x1) and torch.equal(y0, y1)
    assert not torch.equal(batches(dataset(rec), epoch=0)[0][0], reference[0][0])  # new draws each epoch


def test_resume_mid_epoch_gives_the_rest(rec):
    ds = dataset(rec, fast_decode=True)
    ds.set_epoch(2)
    sampler = DistributedBatchSampler(ds, 10, shuffle=True, seed=5, world_size=1, rank=0)
    sampler.set_epoch(2)
    whole = [(x.clone(), y.clone()) for x, y in DataLoader(ds, batch_sampler=sampler, collate_fn=batch_collate)]
    loader = iter(DataLoader(ds, batch_sampler=sampler, collate_fn=batch_collate))
    for _ in range(2):
        next(loader)
    state = sampler.state_dict()  # the position after the batches handed to the loader
    del loader
    resumed = dataset(rec, fast_decode=True)
    resumed.set_epoch(2)
    again = DistributedBatchSampler(resumed, 10, shuffle=True, seed=5, world_size=1, rank=0)
    again.load_state_dict(state)
    rest = [(x.clone(), y.clone()) for x, y in DataLoader(resumed, batch_sampler=again, collate_fn=batch_collate,
                                                          num_workers=2, multiprocessing_context="fork")]
    assert len(whole) == 5 and len(rest) == 3  # the rest, loaded by two workers
    for (x0, y0), (x1, y1) in zip(whole[2:], rest, strict=True):
        assert torch.equal(x0, x1) and torch.equal(y0, y1)


def test_preprocess_with_a_transform_is_refused(rec):
    with pytest.raises(ParameterError, match="preprocess= makes the whole sample.*would ignore transform=.*aug_list"):
        ImageRecordDataset(rec, preprocess=dict(data_shape=SHAPE), transform=ToTensor())
    with pytest.raises(ParameterError, match="would ignore target_transform="):
        ImageRecordDataset(rec, preprocess=dict(data_shape=SHAPE), target_transform=int)
    with pytest.raises(ParameterError, match="aug_list replaces MXNet's default augmenter, so resize"):
        ImageRecordDataset(rec, preprocess=dict(data_shape=SHAPE, aug_list=steps(), resize=30))


@pytest.mark.parametrize("workers", [0, 2])
def test_the_default_collate_is_refused_with_what_to_do(rec, workers):
    ds = ImageRecordDataset(rec, preprocess=dict(data_shape=SHAPE))
    loader = DataLoader(ds, batch_size=4, num_workers=workers, multiprocessing_context="fork" if workers else None)
    with pytest.raises(ParameterError, match="pass collate_fn=mxrec.torch.batch_collate"):
        next(iter(loader))
    data, label = next(iter(DataLoader(ds, batch_size=4, collate_fn=batch_collate)))
    assert data.shape == (4, *SHAPE) and label.shape == (4,)
    data, label = ds.__getitems__([0, 1, 2])  # called directly: the whole batch
    assert data.shape == (3, *SHAPE)
