"""The augmentation's output, pinned: SHA-256 of whole epochs for many parameter combinations on fixed seeds.

``tests/data/augment_pins.json`` was written at commit 52bbaf2 (``aug_default`` hard-coded in
``DefaultAugmenter.__call__``, before it became a list of steps), by running this file as a script::

    PYTHONPATH=src:tests python tests/train/test_augment_pins.py

Every later version must give the very same bytes (batches of ``ImageRecordIter``, ``ImageIter`` and
``ImageRecordDataset(preprocess=...)``: data, labels, record ids, padding) for the same parameters and seeds.
Regenerate the file only for a deliberate change of output, and say so in the commit. The hashes hold for the
pinned test dependencies (OpenCV 4.10.0.84, simplejpeg 1.9.0: ``pyproject.toml``'s ``test`` extra), computed with
OpenCV's optimisations off and its bicubic resize replaced by a bit-exact stand-in (:func:`cpu_independent_opencv`).
That resize rounds differently from one CPU to the next even with the optimisations off: an AMD EPYC with AVX2 gave
other bytes than the machine that wrote the pins, and that machine other bytes again with its AVX-512 code on.
Everything else mxrec does (draws, crops, sizes, flags, order, colour) is pinned as it runs. The file was last
written at commit 196776b, whose output the earlier pins (real bicubic, on the machine that wrote them and in CI)
had proven equal to 52bbaf2's; the cases that use no bicubic resize kept their hashes.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mxrec.train import ImageIter, ImageRecordIter
from testkit import TESTS
from testkit.iterdata import IM2REC, gradient_image, image_record, pack_photos, write_records

PINS = TESTS / "data" / "augment_pins.json"
SMALL = IM2REC / "centercrop_resize64" / "sub.rec"  # 50 MXNet-made 64x64 JPEGs, stored
MEAN_STD = dict(mean_r=123.68, mean_g=116.779, mean_b=103.939, std_r=58.393, std_g=57.12, std_b=57.375)
RRC = dict(random_resized_crop=True, min_random_area=0.08, max_random_area=1.0, min_aspect_ratio=0.75,
           max_aspect_ratio=4 / 3)

# name -> (records, ImageRecordIter parameters); records: "small" (64x64 JPEGs), "photos" (the 50 golden photos,
# ~450 px, JPEG 95) or "rgba" (12 PNGs with an alpha channel, 40 to 62 px)
RECORD_ITER: dict[str, tuple[str, dict[str, Any]]] = {
    "plain_centre": ("small", dict(data_shape=(3, 48, 48))),
    "rand_crop_mirror": ("small", dict(rand_crop=True, rand_mirror=True)),
    "centre_upscale": ("small", dict(data_shape=(3, 80, 72), rand_crop=True)),
    "mirror": ("small", dict(mirror=True)),
    "seed_aug": ("small", dict(rand_crop=True, rand_mirror=True, seed_aug=11)),
    "resize_rand_crop": ("photos", dict(resize=40, rand_crop=True)),
    "resize_inter_random": ("photos", dict(resize=40, rand_crop=True, inter_method=10)),
    "resize_inter_auto": ("photos", dict(resize=36, inter_method=9)),
    "resize_cubic_fast": ("photos", dict(resize=40, inter_method=2, rand_crop=True, rand_mirror=True,
                                         fast_decode=True)),
    "resize_inter_random_fast": ("photos", dict(resize=48, inter_method=10, rand_crop=True, fast_decode=True)),
    "rrc": ("photos", dict(**RRC, rand_mirror=True)),
    "rrc_fast": ("photos", dict(**RRC, rand_mirror=True, fast_decode=True)),
    "rrc_inter_random_fast": ("photos", dict(**RRC, inter_method=10, fast_decode=True)),
    "rrc_area_only_fast": ("photos", dict(random_resized_crop=True, min_random_area=0.3, fast_decode=True)),
    "rrc_trivial": ("photos", dict(random_resized_crop=True, fast_decode=True)),
    "rrc_small_fallback": ("small", dict(random_resized_crop=True, min_random_area=0.9, max_random_area=1.0,
                                         min_aspect_ratio=0.3, max_aspect_ratio=0.35, data_shape=(3, 40, 40))),
    "rrc_warp_fast": ("photos", dict(**RRC, max_rotate_angle=15, fast_decode=True)),
    "rrc_pad_fast": ("photos", dict(**RRC, pad=4, fast_decode=True)),
    "rrc_resize_fast": ("photos", dict(**RRC, resize=64, fast_decode=True)),
    "rotate_shear": ("small", dict(max_rotate_angle=20, max_shear_ratio=0.1, fill_value=0, rand_crop=True)),
    "rotate_fixed": ("small", dict(rotate=30)),
    "rotate_list": ("small", dict(rotate_list="0,90,180", rand_mirror=True)),
    "scale_aspect": ("small", dict(min_random_scale=0.8, max_random_scale=1.2, max_aspect_ratio=0.2,
                                   rand_crop=True)),
    "aspect_min_max": ("small", dict(min_aspect_ratio=0.8, max_aspect_ratio=1.25, inter_method=10)),
    "img_size": ("small", dict(max_img_size=56, min_img_size=40, max_random_scale=1.5, min_random_scale=0.5)),
    "warp_nearest": ("small", dict(max_rotate_angle=45, inter_method=0, fill_value=31)),
    "crop_size_rand": ("photos", dict(resize=64, min_crop_size=40, max_crop_size=56, rand_crop=True)),
    "crop_size_centre": ("small", dict(min_crop_size=32, max_crop_size=48)),
    "crop_size_inter_random": ("small", dict(min_crop_size=36, max_crop_size=60, rand_crop=True, inter_method=10)),
    "pad": ("small", dict(pad=6, fill_value=127, rand_crop=True)),
    "colour": ("small", dict(brightness=0.3, contrast=0.3, saturation=0.3)),
    "brightness": ("small", dict(brightness=0.4, rand_mirror=True)),
    "contrast_saturation": ("small", dict(contrast=0.5, saturation=0.5)),
    "hls": ("small", dict(random_h=20, random_s=30, random_l=25)),
    "pca": ("small", dict(pca_noise=0.1, rand_crop=True)),
    "normalise_random": ("small", dict(brightness=0.2, max_random_contrast=0.3, max_random_illumination=20,
                                       rand_mirror=True, scale=1 / 255, **MEAN_STD)),
    "everything": ("photos", dict(resize=56, max_rotate_angle=10, max_shear_ratio=0.05, min_random_scale=0.9,
                                  max_random_scale=1.1, max_aspect_ratio=0.1, pad=2, rand_crop=True, brightness=0.2,
                                  contrast=0.2, saturation=0.2, random_h=10, random_s=10, random_l=10,
                                  pca_noise=0.05, rand_mirror=True, inter_method=10, fast_decode=True, **MEAN_STD)),
    "grey": ("photos", dict(data_shape=(1, 32, 32), resize=40, rand_crop=True, brightness=0.3, contrast=0.3)),
    "grey_rrc_fast": ("photos", dict(data_shape=(1, 32, 32), **RRC, fast_decode=True)),
    "rgba": ("rgba", dict(data_shape=(4, 32, 32), saturation=0.3, random_h=15, pca_noise=0.1, rand_crop=True,
                          brightness=0.2, max_rotate_angle=10)),
    "uint8_rrc": ("photos", dict(**RRC, rand_mirror=True, dtype="uint8")),
    "int8_mean": ("small", dict(rand_crop=True, dtype="int8", **MEAN_STD)),
    "float16_mean": ("small", dict(rand_crop=True, brightness=0.2, dtype="float16", **MEAN_STD)),
}
ITER_DEFAULTS = dict(data_shape=(3, 32, 32), batch_size=8, shuffle=True, seed=3, preprocess_threads=2)

# ImageIter: create_augmenter options (the records are "photos"); seed 3, shuffled
IMAGE_ITER: dict[str, dict[str, Any]] = {
    "resize_centre": dict(resize=48),
    "resize_rand_crop_mirror": dict(resize=40, rand_crop=True, rand_mirror=True),
    "rand_resize": dict(rand_crop=True, rand_resize=True, inter_method=10),
    "colour": dict(resize=36, brightness=0.3, contrast=0.3, saturation=0.3, hue=0.1, pca_noise=0.1, rand_gray=0.3,
                   mean=True, std=True),
}

# ImageRecordDataset(preprocess=...): ImageRecordIter's parameters ("photos"); seed 3
DATASET: dict[str, dict[str, Any]] = {
    "rrc_mirror": dict(data_shape=(3, 32, 32), **RRC, rand_mirror=True, **MEAN_STD),
    "rrc_fast_uint8": dict(data_shape=(3, 32, 32), **RRC, fast_decode=True, dtype="uint8"),
    "resize_fast_colour": dict(data_shape=(3, 32, 32), resize=40, rand_crop=True, fast_decode=True, brightness=0.2,
                               pca_noise=0.1),
    "warp": dict(data_shape=(3, 32, 32), resize=48, max_rotate_angle=20, rand_crop=True, inter_method=10),
}


def rgba_image(seed: int) -> np.ndarray:
    img = gradient_image(40 + 2 * seed, 62 - seed, seed)
    alpha = (np.arange(img.shape[0] * img.shape[1]).reshape(img.shape[:2]) * (seed + 3)) % 256
    return np.dstack([img, alpha.astype(np.uint8)])


def records(root: Path) -> dict[str, str]:
    rgba = write_records(root / "rgba.rec", [image_record(rgba_image(i), i % 3, i) for i in range(12)])
    return {"small": str(SMALL), "photos": str(pack_photos(root / "photos.rec", IM2REC / "lists" / "sub.lst")),
            "rgba": str(rgba)}


def digest(parts: list[np.ndarray | int]) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(np.ascontiguousarray(part).tobytes() if isinstance(part, np.ndarray) else str(part).encode())
    return h.hexdigest()


def iterator_digest(iterator: Any, epochs: int = 2) -> str:
    parts: list[np.ndarray | int] = []
    with iterator as it:
        for _ in range(epochs):
            for batch in it:
                parts += [batch.data[0], batch.label[0], batch.index, batch.pad]
    return digest(parts)


def record_iter_digest(recs: dict[str, str], name: str) -> str:
    source, params = RECORD_ITER[name]
    return iterator_digest(ImageRecordIter(path_imgrec=recs[source], **{**ITER_DEFAULTS, **params}))


def image_iter_digest(recs: dict[str, str], name: str) -> str:
    return iterator_digest(ImageIter(8, (3, 32, 32), path_imgrec=recs["photos"], shuffle=True, seed=3,
                                     preprocess_threads=2, **IMAGE_ITER[name]))


def dataset_digest(recs: dict[str, str], name: str) -> str:
    from mxrec.torch import ImageRecordDataset

    preprocess = dict(DATASET[name])
    dtype = preprocess.pop("dtype", "float32")
    dataset = ImageRecordDataset(recs["photos"], preprocess=preprocess, dtype=dtype, seed=3)
    order = np.random.default_rng(0).permutation(len(dataset)).tolist()
    parts: list[np.ndarray | int] = []
    for epoch in range(2):
        dataset.set_epoch(epoch)
        for start in range(0, len(order), 8):
            data, label = dataset.__getitems__(order[start:start + 8])
            parts += [data.numpy(), label.numpy()]
    return digest(parts)


class _ExactCubic:
    """OpenCV, but for a bicubic resize: OpenCV's bit-exact bilinear one (``INTER_LINEAR_EXACT``, the same bytes on
    every CPU), XOR 0x55 so that it cannot pass for a bilinear resize if a step passed the wrong flag."""

    def __init__(self, cv2: Any) -> None:
        self._cv2 = cv2

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cv2, name)

    def resize(self, img: np.ndarray, dsize: tuple[int, int], interpolation: int = 1) -> np.ndarray:
        if interpolation != self._cv2.INTER_CUBIC:
            return self._cv2.resize(img, dsize, interpolation=interpolation)
        return self._cv2.resize(img, dsize, interpolation=self._cv2.INTER_LINEAR_EXACT) ^ np.uint8(0x55)


@contextlib.contextmanager
def cpu_independent_opencv() -> Iterator[None]:
    """For the duration, OpenCV's plain code (its vectorised colour conversions, too, give other bytes on other
    CPUs) and the augmentation's resizes through :class:`_ExactCubic`; both put back afterwards."""
    import mxrec.transforms.functional as functional

    real = functional.opencv
    cv2 = real()
    exact = _ExactCubic(cv2)
    was = cv2.useOptimized()
    cv2.setUseOptimized(False)
    functional.opencv = lambda: exact
    try:
        yield
    finally:
        functional.opencv = real
        cv2.setUseOptimized(was)


@pytest.fixture(autouse=True)
def _cpu_independent_opencv() -> Iterator[None]:
    with cpu_independent_opencv():
        yield


def compute_all(recs: dict[str, str]) -> dict[str, dict[str, str]]:
    return {"ImageRecordIter": {name: record_iter_digest(recs, name) for name in RECORD_ITER},
            "ImageIter": {name: image_iter_digest(recs, name) for name in IMAGE_ITER},
            "ImageRecordDataset": {name: dataset_digest(recs, name) for name in DATASET}}


@pytest.fixture(scope="module")
def recs(tmp_path_factory):
    return records(tmp_path_factory.mktemp("pins"))


@pytest.fixture(scope="module")
def pins():
    return json.loads(PINS.read_text())


def test_every_configuration_is_pinned(pins):
    assert set(pins["ImageRecordIter"]) == set(RECORD_ITER)
    assert set(pins["ImageIter"]) == set(IMAGE_ITER)
    assert set(pins["ImageRecordDataset"]) == set(DATASET)
    assert len({h for group in pins.values() for h in group.values()}) == sum(map(len, pins.values()))  # all differ


@pytest.mark.parametrize("name", sorted(RECORD_ITER))
def test_image_record_iter_batches_are_pinned(recs, pins, name):
    assert record_iter_digest(recs, name) == pins["ImageRecordIter"][name]


@pytest.mark.parametrize("name", sorted(IMAGE_ITER))
def test_image_iter_batches_are_pinned(recs, pins, name):
    assert image_iter_digest(recs, name) == pins["ImageIter"][name]


@pytest.mark.parametrize("name", sorted(DATASET))
def test_preprocessed_dataset_batches_are_pinned(recs, pins, name):
    pytest.importorskip("torch")
    assert dataset_digest(recs, name) == pins["ImageRecordDataset"][name]


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as folder, cpu_independent_opencv():
        PINS.write_text(json.dumps(compute_all(records(Path(folder))), indent=1, sort_keys=True) + "\n")
    print(f"wrote {PINS}", file=sys.stderr)
