"""``import mxrec.compat.mx as mx`` (issue 18 §9): InsightFace's own data code runs on it, unmodified.

``testkit.arcface_torch`` is arcface_torch's ``MXFaceDataset`` and ``load_bin`` with only the import lines
changed; here they read generated face sets (``testkit.insightface``) in this process and in forked and
spawned ``DataLoader`` workers. The rest checks the module's own promises: NDArray members, ``mx.io`` /
``mx.image`` calls, and a clear :class:`~mxrec.errors.UnsupportedError` for what it does not cover.
"""

from __future__ import annotations

import importlib.util
import pickle
import sys

import cv2
import numpy as np
import pytest

import mxrec.compat.mx as mx
from mxrec import load_verification_set
from mxrec.errors import MxrecError, UnsupportedError
from testkit import TESTS
from testkit.insightface import FACE_SIZE, key_of_face, make_face_set, make_verification_bin
from testkit.iterdata import gradient_image

torch = pytest.importorskip("torch")
if importlib.util.find_spec("torchvision") is None:  # the stand-in has torchvision's semantics for what is used
    sys.path.insert(0, str(TESTS / "testkit" / "stand_ins"))
arcface_torch = pytest.importorskip("testkit.arcface_torch")


@pytest.fixture
def faces(tmp_path):
    """A face set as InsightFace's dataset_merge.py writes it (scalar labels). (face2rec2's array labels reach
    ``torch.tensor(label[0], dtype=torch.long)`` as numpy float32, which PyTorch 2.13 refuses, with MXNet too.)"""
    return make_face_set(tmp_path / "faces", [3, 1, 4, 2])


def _expected(faces):
    keys = [k for keys in faces.face_keys for k in keys]
    return [(k % 60, faces.label_of(k)) for k in keys]


def _read(items):
    """``(key % 60, label)`` of MXFaceDataset items, from the normalised pixels ((x/255 - 0.5) / 0.5)."""
    out = []
    for sample, label in items:
        assert sample.dtype == torch.float32 and tuple(sample.shape) == (3, FACE_SIZE, FACE_SIZE)
        assert label.dtype == torch.int64
        out.append((key_of_face((sample.numpy() * 0.5 + 0.5) * 255), int(label)))
    return out


def test_mxface_dataset_reads_every_face_with_its_identity(faces):
    dataset = arcface_torch.MXFaceDataset(str(faces.rec.parent), local_rank=0)
    assert len(dataset) == faces.faces == 10
    assert _read(dataset[i] for i in range(len(dataset))) == _expected(faces)


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_mxface_dataset_in_dataloader_workers(faces, context):
    dataset = arcface_torch.MXFaceDataset(str(faces.rec.parent), local_rank=0)
    dataset[0]  # the reader was used in the parent before the workers start
    loader = torch.utils.data.DataLoader(dataset, batch_size=4, num_workers=2, multiprocessing_context=context)
    items = [(sample, label) for samples, labels in loader for sample, label in zip(samples, labels, strict=True)]
    assert _read(items) == _expected(faces)


@pytest.mark.parametrize("form", ["bytes", "arrays", "py2"])
def test_load_bin_reads_the_verification_set(tmp_path, form):
    _, issame = make_verification_bin(tmp_path / "lfw.bin", pairs=3, form=form)
    data_list, issame_list = arcface_torch.load_bin(str(tmp_path / "lfw.bin"), (FACE_SIZE, FACE_SIZE))
    assert list(issame_list) == issame
    ours = load_verification_set(tmp_path / "lfw.bin").images.transpose(0, 3, 1, 2)
    assert data_list[0].dtype == torch.uint8 and np.array_equal(data_list[0].numpy(), ours)
    assert np.array_equal(data_list[1].numpy(), ours[..., ::-1])


def test_load_bin_and_load_verification_set_resize_bicubic_as_mxnet(tmp_path):
    """MXNet 1.9.1's resize_short(img, size) has interp=2: bicubic (OpenCV INTER_CUBIC), shorter side first."""
    bgr = [gradient_image(24, 24, seed) for seed in range(4)]
    encoded = [cv2.imencode(".png", img)[1].tobytes() for img in bgr]
    (tmp_path / "v.bin").write_bytes(pickle.dumps((encoded, [True, False])))
    cubic = np.stack([cv2.resize(img[..., ::-1], (12, 12), interpolation=cv2.INTER_CUBIC) for img in bgr])
    linear = np.stack([cv2.resize(img[..., ::-1], (12, 12), interpolation=cv2.INTER_LINEAR) for img in bgr])
    assert not np.array_equal(cubic, linear)  # the test tells them apart
    ours = load_verification_set(tmp_path / "v.bin", image_size=(12, 12)).images
    assert np.array_equal(ours, cubic)
    data_list, _ = arcface_torch.load_bin(str(tmp_path / "v.bin"), (12, 12))
    assert np.array_equal(data_list[0].numpy(), cubic.transpose(0, 3, 1, 2))


def test_ndarray_members_that_data_code_uses():
    data = gradient_image(4, 6, seed=1)
    img = mx.image.imdecode(cv2.imencode(".png", data)[1].tobytes())
    assert isinstance(img, mx.nd.NDArray) and img.shape == (4, 6, 3) and img.dtype == np.uint8
    rgb = img.asnumpy()
    assert rgb.flags.c_contiguous and np.array_equal(rgb, data[..., ::-1])
    chw = mx.nd.transpose(img, axes=(2, 0, 1))
    flipped = mx.ndarray.flip(data=chw, axis=2).asnumpy()
    assert flipped.flags.c_contiguous and np.array_equal(flipped, rgb.transpose(2, 0, 1)[..., ::-1])
    assert torch.from_numpy(flipped).shape == (3, 4, 6)  # what load_bin does with it
    assert np.array_equal(img[1].asnumpy(), rgb[1]) and img[0, 0, 0].asscalar() == rgb[0, 0, 0]
    assert np.array_equal(np.asarray(img), rgb) and len(img) == 4
    grey = mx.image.imdecode(cv2.imencode(".png", data)[1].tobytes(), flag=0)
    assert grey.shape == (4, 6, 1)
    assert mx.image.resize_short(img, 8).shape == (8, 12, 3)


@pytest.mark.parametrize("name", ["mx.nd.zeros", "mx.gluon", "mx.io.NDArrayIter", "mx.image.random_size_crop",
                                  "NDArray.as_in_context", "NDArray arithmetic"])
def test_anything_else_is_a_clear_error(name):
    img = mx.nd.array(np.zeros((2, 2, 3), np.uint8))
    calls = {"mx.nd.zeros": lambda: mx.nd.zeros((2,)), "mx.gluon": lambda: mx.gluon,
             "mx.io.NDArrayIter": lambda: mx.io.NDArrayIter,
             "mx.image.random_size_crop": lambda: mx.image.random_size_crop,
             "NDArray.as_in_context": lambda: img.as_in_context, "NDArray arithmetic": lambda: img / 255}
    with pytest.raises(UnsupportedError, match=f"{name} is not supported: mxrec.compat.mx covers MXNet's data") as err:
        calls[name]()
    assert isinstance(err.value, MxrecError)


def test_iterators_and_augmenters_give_ndarrays(faces):
    train = mx.io.ImageRecordIter(path_imgrec=str(faces.rec), data_shape=(3, FACE_SIZE, FACE_SIZE), batch_size=5)
    batch = next(iter(train))
    assert isinstance(batch.data[0], mx.nd.NDArray) and batch.data[0].shape == (5, 3, FACE_SIZE, FACE_SIZE)
    assert batch.label[0].dtype == np.float32  # MXFaceDataset gives int64: the iterators give float32 labels
    assert batch.label[0].asnumpy().tolist() == [float(label) for _, label in _expected(faces)[:5]]
    assert str(mx.io.DataBatch([np.zeros((2, 3))])) == "DataBatch: data shapes: [(2, 3)] label shapes: None"
    train.close()
    augs = mx.image.CreateAugmenter((3, 12, 12), resize=12, rand_mirror=True)
    img = mx.image.imdecode(cv2.imencode(".png", gradient_image(24, 24, 0))[1].tobytes())
    for aug in augs:
        img = aug(img)
    assert isinstance(img, mx.nd.NDArray) and img.shape == (12, 12, 3)
    assert isinstance(mx.image.HorizontalFlipAug(1.0)(img), mx.nd.NDArray)
    it = mx.image.ImageIter(2, (3, FACE_SIZE, FACE_SIZE), path_imgrec=str(faces.rec),
                            aug_list=mx.image.CreateAugmenter((3, FACE_SIZE, FACE_SIZE)))
    assert it.next().data[0].shape == (2, 3, FACE_SIZE, FACE_SIZE)
    it.close()
