"""Training from InsightFace sets: the iterators read the faces only, labelled by identity; verification sets load."""

from __future__ import annotations

import numpy as np
import pytest

from mxrec import RecordReader, load_verification_set, read_face_set
from mxrec.errors import ImageDecodeError, LayoutError, ParameterError, VerificationSetError
from mxrec.train import ImageIter, ImageRecordIter
from testkit.datasets import make_clean_dataset
from testkit.insightface import (
    FACE_SIZE,
    face_image,
    key_of_face,
    make_face_set,
    make_verification_bin,
    rewrite_records,
)

IDENTITIES = [3, 1, 4, 2, 5]  # 15 faces under keys 1..15, identities under keys 16..20


@pytest.fixture(params=["dataset_merge", "face2rec2"])
def faces(request, tmp_path):
    return make_face_set(tmp_path / request.param, IDENTITIES, writer=request.param)


def test_read_face_set_gives_the_face_positions_and_identities(faces):
    with RecordReader(faces.rec) as reader:
        found = read_face_set(reader)
        assert found.layout.identity_start == 16 and found.layout.end == 21 and len(found) == 15
        assert [reader.keys[p] for p in found.positions.tolist()] == list(range(1, 16))
        assert found.labels.tolist() == [faces.label_of(k) for k in range(1, 16)]
        assert found.ranges.tolist() == [[1, 4], [4, 5], [5, 9], [9, 11], [11, 16]]
        assert read_face_set(reader, "plain") is None
    with RecordReader(faces.rec, index=False) as scanned:  # the layout is found through the .idx keys
        assert read_face_set(scanned) is None
        with pytest.raises(LayoutError, match="not an InsightFace face set"):
            read_face_set(scanned, "insightface")


def epoch(it) -> tuple[list[int], list[float], list[int]]:
    """Face keys (from the pixels), labels and record ids of one epoch, padding left out."""
    keys, labels, ids = [], [], []
    for batch in it:
        real = len(batch.data[0]) - batch.pad
        keys += [key_of_face(img) for img in batch.data[0][:real]]
        labels += batch.label[0][:real].tolist()
        ids += batch.index[:real].tolist()
    return keys, labels, ids


def test_image_record_iter_reads_the_faces_with_their_identity(faces):
    with ImageRecordIter(path_imgrec=str(faces.rec), data_shape=(3, FACE_SIZE, FACE_SIZE), batch_size=4,
                         dtype="uint8", round_batch=False) as it:
        assert it.num_batches == 4 and len(it.faces) == 15
        keys, labels, ids = epoch(it)
    assert ids == keys == list(range(1, 16))  # every face once, no header or identity record
    assert labels == [faces.label_of(k) for k in ids]


def test_image_record_iter_shuffles_and_shards_faces_only(faces):
    seen = []
    for part in range(2):
        with ImageRecordIter(path_imgrec=str(faces.rec), data_shape=(3, FACE_SIZE, FACE_SIZE), batch_size=4,
                             shuffle=True, seed=3, num_parts=2, part_index=part, round_batch=False,
                             drop_last=False) as it:
            seen += epoch(it)[2]
    assert sorted(set(seen)) == list(range(1, 16))


def test_image_iter_reads_the_faces_with_their_identity(faces):
    it = ImageIter(batch_size=5, data_shape=(3, FACE_SIZE, FACE_SIZE), path_imgrec=str(faces.rec))
    keys, labels, ids = epoch(it)
    it.close()
    assert keys == ids == list(range(1, 16)) and labels == [faces.label_of(k) for k in ids]


def test_the_layout_switch(faces, tmp_path):
    params = dict(path_imgrec=str(faces.rec), data_shape=(3, FACE_SIZE, FACE_SIZE), batch_size=4)
    with ImageRecordIter(layout="plain", on_broken="error", **params) as plain:  # every record, as MXNet did
        assert plain.faces is None and plain.num_batches == 6
        with pytest.raises((ParameterError, ImageDecodeError)):
            list(plain)  # the header record (no image, two labels) is no sample
    with pytest.raises(ParameterError, match="label_width must be 1"):
        ImageRecordIter(label_width=2, **params)
    with pytest.raises(ParameterError, match="layout must be one of"):
        ImageRecordIter(layout="faces", **params)
    make_clean_dataset(tmp_path / "plain.rec", count=8)
    with pytest.raises(LayoutError, match="not an InsightFace face set: key 0 is no header record"):
        ImageIter(batch_size=4, data_shape=(3, 8, 8), path_imgrec=str(tmp_path / "plain.rec"), layout="insightface")


def test_an_inconsistent_face_set_is_refused_with_its_first_problem(faces):
    rewrite_records(faces, {}, drop=(7,))
    with pytest.raises(LayoutError, match="train.idx: 7: no face record under this key"):
        ImageRecordIter(path_imgrec=str(faces.rec), data_shape=(3, FACE_SIZE, FACE_SIZE), batch_size=4)


# -- verification sets -------------------------------------------------------------------------------------

@pytest.mark.parametrize("form", ["bytes", "arrays", "py2"])
def test_verification_sets_load_as_rgb_arrays(tmp_path, form):
    path = tmp_path / "lfw.bin"
    _, issame = make_verification_bin(path, pairs=3, form=form)
    loaded = load_verification_set(path)
    assert loaded.images.shape == (6, FACE_SIZE, FACE_SIZE, 3) and loaded.images.dtype == np.uint8
    assert loaded.issame.tolist() == issame and len(loaded) == 3
    assert [key_of_face(img) for img in loaded.images] == list(range(6))
    first, second = loaded.pairs()
    assert np.array_equal(first[1], loaded.images[2]) and np.array_equal(second[1], loaded.images[3])
    resized = load_verification_set(path, image_size=(12, 12))
    assert resized.images.shape == (6, 12, 12, 3)
    # load_bin's resize_short keeps the aspect ratio: a target of another shape cannot be met
    with pytest.raises(VerificationSetError, match=r"image 0 is 12x12 after resize_short to 12, not the 16x12"):
        load_verification_set(path, image_size=(12, 16))


def test_verification_images_are_rgb_like_mx_image_imdecode(tmp_path):
    import cv2

    bgr = face_image(5)
    bgr[..., 0] = 200  # blue
    data = cv2.imencode(".png", bgr)[1].tobytes()
    import pickle

    (tmp_path / "one.bin").write_bytes(pickle.dumps(([data, data], [True])))
    assert np.array_equal(load_verification_set(tmp_path / "one.bin").images[0], bgr[..., ::-1])


def test_a_hostile_verification_file_is_refused(tmp_path):
    import os
    import pickle

    class Hostile:
        def __reduce__(self):
            return os.system, (f"touch {tmp_path / 'ran'}",)

    (tmp_path / "agedb_30.bin").write_bytes(pickle.dumps(([Hostile(), b""], [True])))
    with pytest.raises(VerificationSetError, match="agedb_30.bin: .*posix.system is not allowed"):
        load_verification_set(tmp_path / "agedb_30.bin")
    assert not (tmp_path / "ran").exists()


def test_torch_verification_dataset(tmp_path):
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    from mxrec.torch import VerificationDataset

    path = tmp_path / "cfp_fp.bin"
    make_verification_bin(path, pairs=4)
    ds = VerificationDataset(path, transform=lambda img: torch.from_numpy(img).permute(2, 0, 1).float() / 255)
    assert len(ds) == 8 and ds.issame.tolist() == [True, False, True, False]
    batches = torch.cat(list(DataLoader(ds, batch_size=3, shuffle=False)))
    assert batches.shape == (8, 3, FACE_SIZE, FACE_SIZE)
    assert [key_of_face(255 * img.numpy()) for img in batches] == list(range(8))


def test_torch_datasets_read_the_faces_labelled_by_identity(faces):
    torch = pytest.importorskip("torch")
    from mxrec.torch import ImageRecordDataset, ImageRecordIterable

    dataset = ImageRecordDataset(faces.rec, label_dtype="int64")
    assert len(dataset) == 15 and dataset.faces is not None
    for i in range(15):
        image, label = dataset[i]
        assert key_of_face(image[..., ::-1]) == i + 1 and label == faces.label_of(i + 1)
    assert len(ImageRecordDataset(faces.rec, layout="plain")) == 21  # every record, as MXNet read them
    iterable = ImageRecordIterable(faces.rec, batch_size=5, shuffle=False)
    got = [(key_of_face(image[..., ::-1]), int(label)) for image, label in iterable]
    assert got == [(k, faces.label_of(k)) for k in range(1, 16)]
    loader = torch.utils.data.DataLoader(dataset, batch_size=4, num_workers=2)  # the subset pickles to workers
    labels = torch.cat([label for _, label in loader]).tolist()
    assert labels == [faces.label_of(k) for k in range(1, 16)]
