"""PyTorch input pipelines on the same photos: mxrec's dataset, a PIL image folder, ImageRecordIter.

    python benchmarks/bench_torch.py            # after benchmarks/bench_iter.py has built its .rec

The records are ``bench-data/photos5000_256.rec`` (built by ``bench_iter.py``:
shorter side 256, JPEG quality 95); the image folder holds the very same JPEG
bytes, extracted once into ``bench-data/photos5000_256/<class>/``. Every
row makes batches of 128 float32 CHW 224x224 tensors with the same work:
random-resized crop (area 0.08-1, aspect 3/4-4/3, bilinear), random
left-right flip, to-tensor, ImageNet mean/std normalisation; 2 workers
(processes) or 2 threads. Rows:

* ``ImageRecordDataset`` + ``DataLoader(num_workers=2)``: mxrec.torch's map-style
  dataset with mxrec's Gluon-style transforms (``RandomResizedCrop``,
  ``RandomFlipLeftRight``, ``ToTensor``, ``Normalize``), default collate; fork,
  and spawn (whose start-up -- new interpreters importing torch and mxrec -- is
  reported separately, as seconds to the first batch);
* PIL image folder + ``DataLoader(num_workers=2)``: what PyTorch users run
  today: ``PIL.Image.open(...).convert("RGB")``, crop + resize (bilinear),
  flip, ``to_tensor`` and ``normalize`` written with torch ops as
  torchvision does them (torchvision is not a dependency);
* ``ImageRecordDataset(preprocess=...)`` + ``DataLoader(num_workers=2,
  collate_fn=batch_collate)``: each worker fills a whole batch tensor, in
  shared memory, with ``ImageRecordIter``'s per-sample loader (decode into a
  reused buffer, MXNet's augmenter, normalise straight into the tensor): no
  per-sample arrays, no collate copy, no copy into shared memory; float32 and
  uint8 batches;
* ``ImageRecordIter`` + ``torch_batches``: 2 threads, the tensors share the
  iterator's batch buffers (zero copy); ``.pin_memory()`` per batch is timed
  too when CUDA is present.

Steady state: the first 4 batches of each run are not timed. Rounds
interleave the rows; every round is printed. Bars: ``ImageRecordDataset``
(its batch path, float32) >= 2x the PIL folder and >= 80% of
``ImageRecordIter`` at the same settings.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import sys
import time

import numpy as np
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

from bench_iter import MEAN_STD, build_rec
from mxrec import RecordReader
from mxrec.format.header import unpack_header
from mxrec.torch import ImageRecordDataset, batch_collate, torch_batches
from mxrec.train import ImageRecordIter
from mxrec.transforms import Compose, Normalize, RandomFlipLeftRight, RandomResizedCrop, ToTensor

BATCH = 128
SIZE = 224
WORKERS = 2
WARMUP = 4
MEAN_RGB = (MEAN_STD["mean_r"] / 255, MEAN_STD["mean_g"] / 255, MEAN_STD["mean_b"] / 255)
STD_RGB = (MEAN_STD["std_r"] / 255, MEAN_STD["std_g"] / 255, MEAN_STD["std_b"] / 255)
TRAIN_AUGMENT = dict(random_resized_crop=True, min_random_area=0.08, max_random_area=1.0, min_aspect_ratio=0.75,
                     max_aspect_ratio=4 / 3)


# -- the PIL image folder, as PyTorch users write it (torchvision's ImageFolder + transforms, spelled out) ------------

class PILFolder(Dataset):
    def __init__(self, root: str) -> None:
        classes = sorted(os.listdir(root))
        self.items = [(os.path.join(root, c, f), label) for label, c in enumerate(classes)
                      for f in sorted(os.listdir(os.path.join(root, c)))]
        self.mean = torch.tensor(MEAN_RGB).view(3, 1, 1)
        self.std = torch.tensor(STD_RGB).view(3, 1, 1)

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int):
        path, label = self.items[i]
        with open(path, "rb") as f:
            img = Image.open(f).convert("RGB")
        width, height = img.size
        for _ in range(10):  # torchvision's RandomResizedCrop.get_params
            area = width * height * random.uniform(0.08, 1.0)
            aspect = math.exp(random.uniform(math.log(3 / 4), math.log(4 / 3)))
            w, h = round(math.sqrt(area * aspect)), round(math.sqrt(area / aspect))
            if 0 < w <= width and 0 < h <= height:
                x, y = random.randint(0, width - w), random.randint(0, height - h)
                break
        else:
            w, h, x, y = width, height, 0, 0
        img = img.resize((SIZE, SIZE), Image.BILINEAR, box=(x, y, x + w, y + h))
        if random.random() < 0.5:
            img = img.transpose(Image.FLIP_LEFT_RIGHT)
        tensor = torch.from_numpy(np.asarray(img).copy()).permute(2, 0, 1).float().div_(255)  # to_tensor
        return tensor.sub_(self.mean).div_(self.std), label  # normalize


def one_opencv_thread(worker: int) -> None:
    """DataLoader workers: OpenCV single-threaded (the workers are the parallelism; its own pool in a forked
    child also aborted at shutdown)."""
    import cv2

    cv2.setNumThreads(1)


# -- measurements ------------------------------------------------------------------------------------------------------

def loader_rate(dataset: Dataset, images: int, context: str, collate=None) -> tuple[float, float]:
    """(images/s in steady state, seconds from creating the DataLoader iterator to its first batch)."""
    loader = DataLoader(dataset, batch_size=BATCH, shuffle=True, num_workers=WORKERS, drop_last=True,
                        multiprocessing_context=context, persistent_workers=False, worker_init_fn=one_opencv_thread,
                        **({"collate_fn": collate} if collate else {}))
    start = time.perf_counter()
    it = iter(loader)
    next(it)
    first_batch = time.perf_counter() - start
    for _ in range(WARMUP - 1):
        next(it)
    done = 0
    start = time.perf_counter()
    while done < images:
        try:
            data, _ = next(it)
        except StopIteration:
            it = iter(loader)
            continue
        done += len(data)
    rate = done / (time.perf_counter() - start)
    del it
    return rate, first_batch


def batched(rec: str, dtype: str = "float32") -> ImageRecordDataset:
    """mxrec.torch's batch path: ImageRecordIter's parameters, whole batches made by each worker."""
    return ImageRecordDataset(rec, preprocess=dict(data_shape=(3, SIZE, SIZE), rand_mirror=True, **TRAIN_AUGMENT,
                                                   **MEAN_STD), dtype=dtype)


def iter_rate(rec: str, images: int, pin: bool, dtype: str = "float32") -> float:
    with ImageRecordIter(path_imgrec=rec, data_shape=(3, SIZE, SIZE), batch_size=BATCH, preprocess_threads=WORKERS,
                         shuffle=True, rand_mirror=True, dtype=dtype, **TRAIN_AUGMENT, **MEAN_STD) as it:
        batches = torch_batches(it)
        for _ in range(WARMUP):
            next(batches)
        done = 0
        start = time.perf_counter()
        while done < images:
            try:
                data, _, _ = next(batches)
            except StopIteration:
                it.reset()
                batches = torch_batches(it)
                continue
            if pin:
                data = data.pin_memory()
            done += len(data)
        return done / (time.perf_counter() - start)


def extract_folder(rec: str, folder: str) -> None:
    """The JPEG bytes of every record as ``folder/<label>/<id>.jpg`` (the same images the records hold)."""
    with RecordReader(rec) as reader:
        for position in range(len(reader)):
            view = reader.view(position)
            header, start = unpack_header(view)
            target = os.path.join(folder, f"{int(header.label):03d}")
            os.makedirs(target, exist_ok=True)
            with open(os.path.join(target, f"{header.id}.jpg"), "wb") as f:
                f.write(view[start:])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--photos", default="bench-data/photos5000")
    parser.add_argument("--rec", default="bench-data/photos5000_256.rec")
    parser.add_argument("--folder", default="bench-data/photos5000_256")
    parser.add_argument("--images", type=int, default=3840, help="images timed per measurement")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    if not os.path.exists(args.rec):
        build_rec(args.photos, args.rec)
    if not os.path.isdir(args.folder):
        extract_folder(args.rec, args.folder)
    cuda = torch.cuda.is_available()
    transform = Compose([RandomResizedCrop(SIZE), RandomFlipLeftRight(), ToTensor(),
                         Normalize([m * 255 for m in MEAN_RGB], [s * 255 for s in STD_RGB])])
    rows = {
        "ImageRecordDataset, fork": lambda: loader_rate(ImageRecordDataset(args.rec, transform=transform),
                                                        args.images, "fork"),
        "ImageRecordDataset, spawn": lambda: loader_rate(ImageRecordDataset(args.rec, transform=transform),
                                                         args.images, "spawn"),
        "PIL image folder, fork": lambda: loader_rate(PILFolder(args.folder), args.images, "fork"),
        "ImageRecordDataset(preprocess), fork": lambda: loader_rate(batched(args.rec), args.images, "fork",
                                                                    batch_collate),
        "  same, spawn": lambda: loader_rate(batched(args.rec), args.images, "spawn", batch_collate),
        "  same, uint8 batches": lambda: loader_rate(batched(args.rec, "uint8"), args.images, "fork", batch_collate),
        "ImageRecordIter + torch_batches": lambda: (iter_rate(args.rec, args.images, False), None),
        "  same, uint8 batches ": lambda: (iter_rate(args.rec, args.images, False, "uint8"), None),
    }
    if cuda:
        rows["  same, .pin_memory() each batch"] = lambda: (iter_rate(args.rec, args.images, True), None)
    cuda_note = "yes" if cuda else "no (pinned memory not timed)"
    print(f"torch {torch.__version__}, {os.cpu_count()} CPUs, CUDA: {cuda_note};"
          f" batches of {BATCH}, {args.images} images a measurement, {WORKERS} workers/threads", flush=True)
    rounds = []
    for number in range(args.rounds):
        print(f"round {number + 1}/{args.rounds} ...", file=sys.stderr, flush=True)
        rounds.append({name: run() for name, run in rows.items()})

    dataset, folder, it = ("ImageRecordDataset(preprocess), fork", "PIL image folder, fork",
                           "ImageRecordIter + torch_batches")
    print(f"\n{'round':5} {'pipeline':38} {'img/s':>7} {'first batch':>12} {'/ PIL':>7} {'/ Iter':>7}")
    fails = 0
    for number, measured in enumerate(rounds, 1):
        for name, (rate, first_batch) in measured.items():
            started = f"{first_batch:11.1f}s" if first_batch is not None else f"{'-':>12}"
            print(f"{number:5} {name:38} {rate:7.0f} {started} {rate / measured[folder][0]:6.2f}x "
                  f"{rate / measured[it][0]:7.0%}")
        ours = measured[dataset][0]
        ok = ours >= 2 * measured[folder][0] and ours >= 0.8 * measured[it][0]
        fails += not ok
        print(f"{'':5} bar: ImageRecordDataset(preprocess) >= 2x PIL folder and >= 80% of ImageRecordIter: "
              f"{'PASS' if ok else 'FAIL'}")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
