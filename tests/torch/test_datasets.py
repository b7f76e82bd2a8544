"""PyTorch adapters with real PyTorch (CPU): DataLoader workers under fork and spawn, sharding by rank and worker."""

from __future__ import annotations

import numpy as np
import pytest

from testkit.iterdata import IM2REC, pack_photos

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader  # noqa: E402

import mxrec.torch as mxrec_torch  # noqa: E402
from mxrec import RecordReader  # noqa: E402
from mxrec.errors import ImageDecodeError, ParameterError  # noqa: E402
from mxrec.torch import ImageRecordDataset, ImageRecordIterable, RecordDataset, torch_batches  # noqa: E402
from mxrec.train import ImageRecordIter  # noqa: E402
from mxrec.train.pipeline import BrokenRecordWarning  # noqa: E402
from mxrec.transforms import Compose, Normalize, RandomFlipLeftRight, RandomResizedCrop, ToTensor  # noqa: E402


@pytest.fixture(scope="module")
def rec(tmp_path_factory):
    return str(pack_photos(tmp_path_factory.mktemp("torch") / "sub.rec", IM2REC / "lists" / "sub.lst"))


def augmented(rec, seed=0):
    transform = Compose([RandomResizedCrop(32), RandomFlipLeftRight(), ToTensor(), Normalize(0.5, 0.25)])
    return ImageRecordDataset(rec, transform=transform, seed=seed)


def loader_batches(dataset, **kwargs):
    return [(x.clone(), y.clone()) for x, y in DataLoader(dataset, batch_size=8, **kwargs)]


def test_record_dataset(rec):
    ds = RecordDataset(rec)
    reader = RecordReader(rec)
    assert len(ds) == 50 and ds[3] == reader[3]
    payloads = [p for batch in DataLoader(ds, batch_size=10, num_workers=2, collate_fn=list,
                                          multiprocessing_context="fork") for p in batch]
    assert payloads == list(reader)
    assert RecordDataset(rec, transform=len)[0] == len(reader[0])


@pytest.mark.parametrize("make", [lambda rec: RecordDataset(rec, None, len),
                                  lambda rec: ImageRecordDataset(rec, None, 1),
                                  lambda rec: ImageRecordIterable(rec, None, 8)])
def test_constructor_options_are_keywords(rec, make):
    with pytest.raises(TypeError, match="positional"):
        make(rec)


def test_image_record_dataset_item(rec):
    img, label = ImageRecordDataset(rec)[0]
    assert img.dtype == np.uint8 and img.ndim == 3 and img.shape[2] == 3
    assert label == 7.0 and label.dtype == np.float32
    grey, _ = ImageRecordDataset(rec, flag=0)[0]
    assert grey.shape == img.shape[:2]
    with pytest.raises(IndexError):
        ImageRecordDataset(rec)[50]


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_workers_give_the_same_augmented_batches(rec, context):
    """Per-sample streams: the same batches with 0 or 2 worker processes, under fork and spawn."""
    reference = loader_batches(augmented(rec))
    workers = loader_batches(augmented(rec), num_workers=2, multiprocessing_context=context)
    assert len(reference) == len(workers) == 7
    for (x0, y0), (x1, y1) in zip(reference, workers, strict=True):
        assert x0.shape == (8, 3, 32, 32) or x0.shape == (2, 3, 32, 32)
        assert torch.equal(x0, x1) and torch.equal(y0, y1)
    other_epoch = augmented(rec)
    other_epoch.set_epoch(1)
    assert not torch.equal(loader_batches(other_epoch)[0][0], reference[0][0])


def test_iterable_shards_by_rank_and_worker(rec):
    seen = {}
    for rank in range(2):
        ds = ImageRecordIterable(rec, rank=rank, world_size=2, seed=3)
        assert len(ds) == 25
        positions = ds.positions()
        by_worker = [ds.positions(w, 2) for w in range(2)]
        assert sorted(np.concatenate(by_worker).tolist()) == sorted(positions.tolist())
        labels = [y for _, y in DataLoader(ds, batch_size=None, num_workers=2, multiprocessing_context="fork")]
        assert len(labels) == 25
        seen[rank] = positions.tolist()
    assert sorted(seen[0] + seen[1]) == list(range(50))  # the ranks split the data
    again = ImageRecordIterable(rec, rank=0, world_size=2, seed=3)
    assert again.positions().tolist() == seen[0]
    again.set_epoch(1)
    assert again.positions().tolist() != seen[0]
    assert len(ImageRecordIterable(rec, rank=2, world_size=3, drop_last=True)) == 16
    with pytest.raises(ValueError, match="part_index"):
        ImageRecordIterable(rec, rank=2, world_size=2)


def test_torch_batches_share_memory(rec):
    with ImageRecordIter(path_imgrec=rec, data_shape=(3, 16, 16), batch_size=16, resize=16, dtype="uint8") as it:
        tensors = list(torch_batches(it))
    assert len(tensors) == 4 and tensors[-1][2] == 14
    data, label, _ = tensors[0]
    assert data.dtype == torch.uint8 and data.shape == (16, 3, 16, 16) and label.shape == (16,)
    with ImageRecordIter(path_imgrec=rec, data_shape=(3, 16, 16), batch_size=16, resize=16, dtype="uint8") as it:
        batch = it.next()
        shared = torch.from_numpy(batch.data[0])
        assert shared.data_ptr() == batch.data[0].ctypes.data
    np.testing.assert_array_equal(data.numpy(), batch.data[0])


TRAIN = dict(data_shape=(3, 24, 24), random_resized_crop=True, min_random_area=0.2, min_aspect_ratio=0.75,
             max_aspect_ratio=1.33, rand_mirror=True, mean_r=123.7, mean_g=116.3, mean_b=103.5, std_r=58.4,
             std_g=57.1, std_b=57.4)


@pytest.mark.parametrize("dtype", ["float32", "uint8"])
def test_preprocessed_batches_are_image_record_iters(rec, dtype):
    """preprocess=ImageRecordIter's parameters: the same pixels (random crops and flips included) per position."""
    with ImageRecordIter(path_imgrec=rec, batch_size=10, dtype=dtype, seed=3, **TRAIN) as it:
        expected = [(b.data[0].copy(), b.label[0].copy()) for b in it]
    ds = ImageRecordDataset(rec, preprocess=TRAIN, dtype=dtype, seed=3)
    data, label = ds.__getitems__(list(range(10)))
    assert data.dtype == getattr(torch, dtype) and data.shape == (10, 3, 24, 24)
    np.testing.assert_array_equal(data.numpy(), expected[0][0])
    np.testing.assert_array_equal(label.numpy(), expected[0][1])
    image, one = ds[13]
    np.testing.assert_array_equal(image.numpy(), expected[1][0][3])
    assert one == expected[1][1][3]
    batches = list(DataLoader(ds, batch_size=10, num_workers=2, multiprocessing_context="fork",
                              collate_fn=mxrec_torch.batch_collate))
    for (x, y), (ex, ey) in zip(batches, expected, strict=True):
        np.testing.assert_array_equal(x.numpy(), ex)
        np.testing.assert_array_equal(y.numpy(), ey)


def test_preprocess_options_are_checked(rec):
    with pytest.raises(ParameterError, match="did you mean 'rand_mirror'"):
        ImageRecordDataset(rec, preprocess=dict(data_shape=(3, 8, 8), rand_miror=True))
    with pytest.raises(ParameterError, match="data_shape"):
        ImageRecordDataset(rec, preprocess=dict(rand_mirror=True))
    with pytest.raises(ParameterError, match="dtype"):
        ImageRecordDataset(rec, preprocess=dict(data_shape=(3, 8, 8)), dtype="int7")
    labels = ImageRecordDataset(rec, preprocess=dict(data_shape=(3, 8, 8)), label_dtype="int64")
    assert labels.__getitems__([0, 1])[1].dtype == torch.int64


def test_preprocessed_batches_skip_broken_records(tmp_path):
    from mxrec import IRHeader, RecordWriter, pack
    from testkit.datasets import jpeg, photo

    with RecordWriter(tmp_path / "b.rec", index=True) as writer:
        for key in range(6):
            body = b"not an image" if key == 2 else jpeg(photo(key))
            writer.write(pack(IRHeader(0, float(key), key, 0), body))
    ds = ImageRecordDataset(str(tmp_path / "b.rec"), preprocess=dict(data_shape=(3, 16, 16)))
    with pytest.warns(BrokenRecordWarning, match="record 2"):
        batch, label = ds.__getitems__(list(range(6)))
    assert len(batch) == 6 and label.tolist() == [0, 1, 3, 3, 4, 5] and ds.skipped  # the next record instead
    strict = ImageRecordDataset(str(tmp_path / "b.rec"), preprocess=dict(data_shape=(3, 16, 16)), on_broken="error")
    with pytest.raises(ImageDecodeError, match="record 2"):
        strict.__getitems__([1, 2])
