"""The iterators take your own augmentation steps (aug_list): deterministic per (seed, epoch, record) under threads
and resume, fast_decode asking the first step, and messages that say what to do."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mxrec.errors import ParameterError
from mxrec.train import ImageIter, ImageRecordIter, default_steps
from mxrec.train.augment import (
    AffineWarp,
    ColourJitter,
    CropToSize,
    HLSJitter,
    Pad,
    PCALighting,
    RandomAreaCrop,
    RandomSquareCrop,
    ResizeShorter,
)
from mxrec.transforms import HorizontalFlipAug, StepList, create_augmenter
from testkit.iterdata import IM2REC, pack_photos
from testkit.steps import Cutout, Shrink, Sneaky

SHAPE = (3, 32, 32)
RRC = dict(random_resized_crop=True, min_random_area=0.2, min_aspect_ratio=0.75, max_aspect_ratio=4 / 3)


@pytest.fixture(scope="module")
def rec(tmp_path_factory):
    """MXNet's default/sub.rec: 50 photos of about 450 pixels."""
    return str(pack_photos(tmp_path_factory.mktemp("steps") / "sub.rec", IM2REC / "lists" / "sub.lst"))


def record_iter(rec, **params):
    return ImageRecordIter(path_imgrec=rec, data_shape=SHAPE, batch_size=8, shuffle=True, seed=4, **params)


def epochs(it, count=2):
    with it:
        return [[(b.data[0].copy(), b.label[0].copy(), b.index.copy()) for b in it] for _ in range(count)]


def assert_same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert len(x) == len(y)
        for p, q in zip(x, y, strict=True):
            for u, v in zip(p, q, strict=True):
                np.testing.assert_array_equal(u, v)


def test_default_steps_are_mxnets_in_its_order_and_say_whether_they_are_random():
    steps = default_steps(SHAPE, resize=40, max_rotate_angle=10, pad=2, rand_crop=True, brightness=0.1,
                          random_h=5, pca_noise=0.1)
    assert [type(s) for s in steps] == [ResizeShorter, AffineWarp, Pad, CropToSize, ColourJitter, HLSJitter,
                                        PCALighting]
    assert [type(s) for s in default_steps(SHAPE, **RRC)] == [RandomAreaCrop]
    assert [type(s) for s in default_steps(SHAPE, min_crop_size=20, max_crop_size=30)] == [RandomSquareCrop]
    assert [type(s) for s in default_steps(SHAPE, random_resized_crop=True)] == [CropToSize]  # trivial ranges
    assert StepList(default_steps(SHAPE, resize=40)).random is False
    assert StepList(default_steps(SHAPE, resize=40, inter_method=10)).random is True  # a random interpolation
    assert StepList(default_steps(SHAPE, rand_crop=True)).random is True
    assert default_steps(SHAPE, rotate_list="0, 90")[0].rotate_list == (0, 90)
    with pytest.raises(ParameterError, match="did you mean 'rand_crop'"):
        default_steps(SHAPE, rand_corp=True)


@pytest.mark.parametrize("fast_decode", [False, True])
def test_default_steps_as_aug_list_are_the_parameters_themselves(rec, fast_decode):
    params = dict(**RRC, max_rotate_angle=0, brightness=0.3, pca_noise=0.1)
    given = epochs(record_iter(rec, rand_mirror=True, fast_decode=fast_decode, **params))
    listed = epochs(record_iter(rec, rand_mirror=True, fast_decode=fast_decode,
                                aug_list=default_steps(SHAPE, **params)))
    assert_same(given, listed)


def cutout_iter(rec, **options):
    return record_iter(rec, dtype="uint8", aug_list=[*default_steps(SHAPE, resize=40, rand_crop=True), Cutout(8, 7)],
                       **options)


def test_a_custom_step_in_image_record_iter_draws_from_the_samples_stream(rec):
    plain = epochs(record_iter(rec, dtype="uint8", resize=40, rand_crop=True))
    cut = epochs(cutout_iter(rec, preprocess_threads=1))
    corners = set()
    for plain_epoch, cut_epoch in zip(plain, cut, strict=True):
        for (x, _, ids), (y, _, cut_ids) in zip(plain_epoch, cut_epoch, strict=True):
            np.testing.assert_array_equal(ids, cut_ids)
            for before, after in zip(x, y, strict=True):  # the same crop (drawn first), then one square of 7
                changed = np.argwhere((before != after).any(axis=0))
                top, left = changed.min(axis=0) if len(changed) else (0, 0)
                square = after[:, top:top + 8, left:left + 8]
                assert square.shape == (3, 8, 8) and (square == 7).all()
                outside = np.ones((32, 32), bool)
                outside[top:top + 8, left:left + 8] = False
                np.testing.assert_array_equal(before[:, outside], after[:, outside])
                corners.add((int(top), int(left)))
    assert len(corners) > 20  # a square of its own for each record and epoch
    assert_same(cut, epochs(cutout_iter(rec, preprocess_threads=2)))  # whatever the thread count
    assert_same(cut, epochs(cutout_iter(rec, preprocess_threads=3, prefetch_buffer=1)))
    assert not np.array_equal(epochs(cutout_iter(rec, seed_aug=99), 1)[0][0][0], cut[0][0][0])


def test_resuming_mid_epoch_gives_the_rest_of_the_same_augmentations(rec):
    whole = epochs(cutout_iter(rec, preprocess_threads=2), 1)[0]
    with cutout_iter(rec, preprocess_threads=2) as it:
        first = [it.next() for _ in range(3)]
        state = json.loads(json.dumps(it.state_dict()))
    assert_same([[(b.data[0], b.label[0], b.index) for b in first]], [whole[:3]])
    with cutout_iter(rec, preprocess_threads=1) as it:
        it.load_state_dict(state)
        rest = [(b.data[0].copy(), b.label[0].copy(), b.index.copy()) for b in it]
    assert_same([rest], [whole[3:]])


def test_image_iter_takes_steps_with_the_same_determinism(rec):
    def run(threads, state=None, take=None):
        augs = [*create_augmenter(SHAPE, resize=40, rand_crop=True, rand_mirror=True), Cutout(8, 0.0)]
        with ImageIter(8, SHAPE, path_imgrec=rec, shuffle=True, seed=2, aug_list=augs,
                       preprocess_threads=threads) as it:
            if state is not None:
                it.load_state_dict(state)
            batches = [it.next() for _ in range(take)] if take else list(it)
            return [(b.data[0].copy(), b.label[0].copy(), b.index.copy()) for b in batches], it.state_dict()

    one, _ = run(1)
    assert_same([one], [run(2)[0]])
    squares = [(img == 0).all(axis=0).sum() for batch in one for img in batch[0]]
    assert min(squares) >= 64  # every image has its 8x8 square (RGB float images in ImageIter)
    first, state = run(2, take=2)
    rest, _ = run(1, state=json.loads(json.dumps(state)))
    assert_same([first + rest], [one])


def test_fast_decode_asks_the_first_step_how_small_to_decode(rec):
    shrink = Shrink(32, 32)
    with record_iter(rec, aug_list=[shrink, Cutout(4)], preprocess_threads=1) as it:  # one thread: in order
        full = np.concatenate([b.data[0] for b in it])
    full_shapes = list(shrink.seen)
    shrink.seen.clear()
    with record_iter(rec, aug_list=[shrink, Cutout(4)], preprocess_threads=1, fast_decode=True) as it:
        fast = np.concatenate([b.data[0] for b in it])
    assert len(shrink.seen) == len(full_shapes) == 56  # an epoch: 50 records and 6 to fill the last batch
    for small, big in zip(shrink.seen, full_shapes, strict=True):
        assert small[:2] == (-(-big[0] // 8), -(-big[1] // 8))  # libjpeg's 1/8 scale: still at least 32x32
        assert min(small[:2]) >= 32
    # the same draws (Cutout's squares included), pixels close to the full decode's
    assert ((full == 0).all(axis=1) == (fast == 0).all(axis=1)).mean() > 0.99
    assert 0 < np.abs(full - fast).mean() < 6


def test_aug_list_messages_say_what_to_do(rec):
    with pytest.raises(ParameterError, match=r"aug_list replaces MXNet's default augmenter, so resize, rand_crop "
                                             r"would do nothing.*default_steps\(data_shape, resize=40, rand_crop"):
        record_iter(rec, aug_list=[Cutout(4)], resize=40, rand_crop=True)
    with pytest.raises(ParameterError, match="must be mxrec.transforms.Step objects.*ImageIter"):
        record_iter(rec, aug_list=[HorizontalFlipAug()])
    with pytest.raises(ParameterError, match="aug_list must be a list of augmentation steps"):
        record_iter(rec, aug_list=Cutout(4))
    with pytest.raises(ParameterError, match="own augmentation steps go in aug_list"):
        record_iter(rec, aug_seq="aug_mine")
    with record_iter(rec, aug_list=[Cutout(4)]) as it, pytest.raises(
            ParameterError, match=r"record \d+: the augmentation steps made a uint8 image of shape \(\d+, \d+, 3\); "
                                  r"data_shape \(3, 32, 32\) needs uint8 of shape \(32, 32, 3\).*crop or resize"):
        it.next()
    with record_iter(rec, aug_list=[Shrink(33, 33), Sneaky()]) as it, pytest.raises(
            ParameterError, match="Sneaky.*32x32 image of a 33x33 one"):
        it.next()


def test_pytorch_names_get_the_iterators_own(rec):
    with pytest.raises(ParameterError, match=r"'num_workers'; ImageRecordIter decodes and augments on threads: their "
                                             r"number is preprocess_threads \(ImageRecordIter's worker processes, "
                                             r"for where the GIL binds: preprocess_processes\)") as caught:
        record_iter(rec, num_workers=2)
    assert "num_parts" not in str(caught.value)
    with pytest.raises(ParameterError, match="prefetch_buffer"):
        record_iter(rec, prefetch_factor=2)
    with pytest.raises(ParameterError, match="aug_list"):
        record_iter(rec, transform=None)
    with pytest.raises(ParameterError, match="ImageIter decodes and augments on threads.*preprocess_threads"):
        ImageIter(8, SHAPE, path_imgrec=rec, num_workers=2)
    with pytest.raises(ParameterError, match="did you mean 'rand_mirror'"):  # the guess still works elsewhere
        record_iter(rec, rand_miror=True)
