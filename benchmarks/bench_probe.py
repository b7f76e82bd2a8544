"""The seed's path from a slow loader to a fast one, step by step, with ``mxrec probe`` choosing the tuning.

    python benchmarks/bench_probe.py --count 64 --batches 6
    python benchmarks/bench_probe.py --photos real --fast-decode-only     # needs scikit-image

2-megapixel photos (1600x1200 JPEG, made on demand in ``bench-data/probe-photos``) go through the steps users take.
``--photos leaves`` (default): generated, quality 90, the dead-leaves model of natural images (flat regions,
edges, a 1/f spectrum, fine texture). ``--photos real``: scikit-image's photographs (``benchmarks/photoset.py``'s
sources) cut 4:3, upscaled to 1600x1200, with sensor-like grain (``--grain``; without it an upscaled 512 px photo
has no detail at 2 MP and its JPEG is half a camera's size), quality 92. The photos go training at 224x224
after ``resize=256`` with a random crop and mirror, ImageNet mean/std, float32:

1. PIL folder: ``PIL.Image.open`` each file, convert, resize, crop, normalise, one process (a naive loader);
2. ``.rec`` + ``ImageRecordIter``: the photos packed as they are, one decoding thread;
3. packed with ``mxrec pack --resize 256`` (what probe recommends for oversized images), one thread;
4. tuned threads/prefetch: probe's ``--sweep preprocess_threads=... prefetch_buffer=...`` picks the best;
5. ``fast_decode`` on the 2-megapixel ``.rec`` (no repacking), tuned threads, against the same
   configuration decoding in full: the speed-up, and the mean pixel deviation over the same random draws.

Every step is measured with :func:`mxrec.probe` (warm-up excluded), which also prints the bound it found.
Goals: ``fast_decode`` >= 2x the full-decode pipeline with a mean deviation <= 1.5 grey levels. Two more lines give
the ceiling and the references: the decode alone (simplejpeg into a reused buffer, thread CPU time, best of
rounds) at full, 1/4 and 1/8 scale -- 1/8 is close to the entropy decoding, which every scale keeps -- and the
deviation of the fast path from the full one with the same draws, against the default bilinear resize (which
aliases when it shrinks 4.7x) and against an antialiased one (``inter_method=3``, area), the fair reference.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

import numpy as np

SIZE = (1200, 1600)  # height, width: 1.92 megapixels
MEAN = (123.68, 116.28, 103.53)
STD = (58.4, 57.1, 57.4)


def natural_photo(seed: int, texture: float = 4.0, blur: float = 0.8, leaves: int = 3000) -> np.ndarray:
    """A 1600x1200 BGR "photo" of the dead-leaves model (overlapping objects of sizes ~ r^-3: flat regions,
    real edges and a 1/f spectrum, as natural images have), with 1/f fine texture and a lens-like blur."""
    import cv2

    rng = np.random.default_rng(seed)
    height, width = SIZE
    img = np.empty((height, width, 3), np.uint8)
    img[:] = rng.integers(40, 220, 3)
    low, high = 6.0, 500.0
    radii = (low ** -2 - rng.random(leaves) * (low ** -2 - high ** -2)) ** -0.5
    for radius in sorted(radii, reverse=True):
        colour = tuple(int(v) for v in rng.integers(20, 236, 3))
        centre = (int(rng.integers(0, width)), int(rng.integers(0, height)))
        cv2.circle(img, centre, int(radius), colour, -1, cv2.LINE_AA)
    fy = np.fft.fftfreq(height)[:, None]
    fx = np.fft.rfftfreq(width)[None, :]
    falloff = 1.0 / np.maximum(np.hypot(fx, fy), 1.0 / width)
    spectrum = (rng.normal(size=falloff.shape) + 1j * rng.normal(size=falloff.shape)) * falloff
    grain = np.fft.irfft2(spectrum, s=(height, width))
    out = img.astype(np.float32) + (grain / grain.std() * texture).astype(np.float32)[..., None]
    return np.clip(cv2.GaussianBlur(out, (0, 0), blur), 0, 255).astype(np.uint8)


def real_photo(sources: list[np.ndarray], seed: int, grain: float) -> np.ndarray:
    """A 1600x1200 BGR photo from one of scikit-image's photographs: a random 4:3 cut of 60-100% of it, mirrored
    at random, upscaled (bicubic), with Gaussian grain of ``grain`` grey levels (sensor noise)."""
    import cv2

    rng = np.random.default_rng(seed)
    src = sources[seed % len(sources)]
    h, w = src.shape[:2]
    cw = min(w, h * 4 // 3) * rng.uniform(0.6, 1.0)
    cw, ch = int(cw), int(cw * 3 / 4)
    y, x = int(rng.integers(0, h - ch + 1)), int(rng.integers(0, w - cw + 1))
    img = cv2.resize(src[y:y + ch, x:x + cw], (SIZE[1], SIZE[0]), interpolation=cv2.INTER_CUBIC)
    if rng.random() < 0.5:
        img = img[:, ::-1]
    noise = rng.normal(0.0, grain, SIZE).astype(np.float32)[..., None] if grain else np.float32(0)
    return np.clip(img + noise, 0, 255).astype(np.uint8)


def make_photos(folder: str, count: int, leaves: int, photos: str = "leaves", grain: float = 3.0) -> list[str]:
    import cv2

    sources = None
    paths = []
    for i in range(count):
        cls = os.path.join(folder, f"class{i % 4}")
        os.makedirs(cls, exist_ok=True)
        path = os.path.join(cls, f"img{i:05d}.jpg")
        if not os.path.exists(path):
            if photos == "leaves":
                cv2.imwrite(path, natural_photo(i, leaves=leaves), [cv2.IMWRITE_JPEG_QUALITY, 90])
            else:
                if sources is None:
                    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
                    from photoset import load_sources

                    sources = list(load_sources().values())
                cv2.imwrite(path, real_photo(sources, i, grain), [cv2.IMWRITE_JPEG_QUALITY, 92])
        paths.append(path)
    return paths


def pil_folder_rate(paths: list[str], batches: int, batch_size: int) -> float:
    """Step 1: the naive loader, one process: PIL decode, resize, random crop, mirror, normalise."""
    from PIL import Image

    rng = np.random.default_rng(0)
    mean, std = np.array(MEAN, np.float32), np.array(STD, np.float32)

    def sample(path: str) -> np.ndarray:
        with Image.open(path) as img:
            img = img.convert("RGB")
            width, height = img.size
            scale = 256 / min(width, height)
            img = img.resize((round(width * scale), round(height * scale)), Image.BILINEAR)
            x = int(rng.integers(0, img.size[0] - 224 + 1))
            y = int(rng.integers(0, img.size[1] - 224 + 1))
            arr = np.asarray(img.crop((x, y, x + 224, y + 224)), np.float32)
        if rng.random() < 0.5:
            arr = arr[:, ::-1]
        return ((arr - mean) / std).transpose(2, 0, 1)

    order = iter(np.tile(np.arange(len(paths)), 1000).tolist())
    for _ in range(batch_size):  # warm-up
        sample(paths[next(order)])
    started = time.perf_counter()
    for _ in range(batches):
        np.stack([sample(paths[next(order)]) for _ in range(batch_size)])
    return batches * batch_size / (time.perf_counter() - started)


def pack(folder: str, prefix: str, resize: int) -> str:
    """``mxrec pack``: the photos as they are (``resize=0``: their bytes unchanged), or resized (JPEG quality 95)."""
    import mxrec
    from mxrec.packing.prepare import ImageTransform

    rec = prefix + ".rec"
    if not os.path.exists(rec):
        mxrec.make_lists(prefix, folder, recursive=True)
        transform = ImageTransform(resize=resize, quality=95) if resize else ImageTransform(pass_through=True)
        mxrec.pack_list(prefix + ".lst", folder, rec, transform, workers=os.cpu_count() or 1)
    return rec


def cpu_ms(rec: str, config: dict[str, Any], rounds: int = 7) -> dict[str, float]:
    """Milliseconds of thread CPU time per sample: ``full`` and ``fast``, the iterator's per-sample work
    (``RecordSampleLoader.load``: fetch, header, decode, augment, normalise into the batch slot) decoding in full
    and with ``fast_decode``; ``1``, ``4``, ``8``: simplejpeg alone decoding the same JPEG into a reused buffer
    at that fraction of the size (1/8 is about the entropy decoding, which every scale keeps). All interleaved
    sample by sample, the best of ``rounds`` for each, the mean over the samples: the costs without the noise of
    other processes on a shared machine (the iterator's threads run this work, the decode with the GIL released).
    """
    from mxrec.datasets.opening import open_dataset
    from mxrec.format.header import unpack_header
    from mxrec.image.codec import require_simplejpeg
    from mxrec.train.params import preprocess_params
    from mxrec.train.sample_loader import RecordSampleLoader

    jpeg = require_simplejpeg()
    params = {k: v for k, v in config.items() if k not in ("batch_size", "shuffle", "seed")}
    augment, normalize = preprocess_params(params, "bench_probe", decode=True)
    reader = open_dataset(rec)
    loaders = {fast: RecordSampleLoader(reader, augment, normalize, seed=3, fast_decode=fast) for fast in (False, True)}
    data, label = np.empty(augment.data_shape, np.float32), np.empty(1, np.float32)
    out = np.empty(SIZE[0] * SIZE[1] * 3, np.uint8)

    def decoder(divisor: int) -> Any:
        height, width = SIZE[0] // divisor, SIZE[1] // divisor
        return lambda position: jpeg.decode_jpeg(payloads[position], colorspace="BGR", min_height=height,
                                                 min_width=width, buffer=out[:height * width * 3])

    payloads = []
    for position in range(len(reader)):
        view = reader.view(position)
        payloads.append(bytes(view[unpack_header(view)[1]:]))
    work = {"full": lambda position: loaders[False].load(position, 0, data, label),
            "fast": lambda position: loaders[True].load(position, 0, data, label),
            "1": decoder(1), "4": decoder(4), "8": decoder(8)}
    best = {name: [float("inf")] * len(reader) for name in work}
    for _ in range(rounds):
        for position in range(len(reader)):
            for name, run in work.items():
                started = time.thread_time_ns()
                run(position)
                best[name][position] = min(best[name][position], time.thread_time_ns() - started)
    return {name: float(np.mean(times)) / 1e6 for name, times in best.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=64, help="photos to generate")
    parser.add_argument("--batches", type=int, default=6, help="measured batches per step")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--photos", choices=("leaves", "real"), default="leaves",
                        help="generated dead-leaves photos, or scikit-image's photographs upscaled with grain")
    parser.add_argument("--leaves", type=int, default=3000,
                        help="objects per photo: fewer make smoother photos and smaller JPEGs (less entropy decoding)")
    parser.add_argument("--grain", type=float, default=3.0, help="--photos real: sensor grain, grey levels")
    parser.add_argument("--rounds", type=int, default=3, help="full and fast decoding measured alternately, best kept")
    parser.add_argument("--fast-decode-only", action="store_true",
                        help="skip steps 1-4 (step 5 then runs with one thread per core, prefetch 8)")
    parser.add_argument("--data", default="bench-data/probe-photos")
    args = parser.parse_args(argv)
    import mxrec

    kind = f"leaves{args.leaves}" if args.photos == "leaves" else f"real-grain{args.grain:g}"
    args.data = os.path.join(args.data, kind)
    folder = os.path.join(args.data, "photos")
    paths = make_photos(folder, args.count, args.leaves, args.photos, args.grain)
    full_rec = pack(folder, os.path.join(args.data, "full"), 0)
    train = dict(data_shape=(3, 224, 224), batch_size=args.batch_size, resize=256, rand_crop=True, rand_mirror=True,
                 shuffle=True, seed=3, mean_r=MEAN[0], mean_g=MEAN[1], mean_b=MEAN[2], std_r=STD[0], std_g=STD[1],
                 std_b=STD[2])
    measure = dict(batches=args.batches, warmup=1)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1

    rows: list[tuple[str, float, str]] = []
    advice: list[str] = []
    tuned = {"preprocess_threads": cores, "prefetch_buffer": 8}
    if not args.fast_decode_only:
        small_rec = pack(folder, os.path.join(args.data, "r256"), 256)
        rows.append(("1. PIL folder, one process", pil_folder_rate(paths, args.batches, args.batch_size), "-"))
        step2 = mxrec.probe(full_rec, preprocess_threads=1, prefetch_buffer=2, **train, **measure)
        rows.append(("2. .rec + ImageRecordIter, 1 thread", step2.run.images_per_second, step2.bound))
        step3 = mxrec.probe(small_rec, preprocess_threads=1, prefetch_buffer=2, **train, **measure)
        advice = [a.code for a in step2.advice]
        rows.append(("3. pack --resize 256, 1 thread", step3.run.images_per_second, step3.bound))
        threads = sorted({1, 2, cores, 2 * cores})
        swept = mxrec.probe(small_rec, preprocess_threads=1, prefetch_buffer=2, **train, **measure,
                            sweep={"preprocess_threads": threads, "prefetch_buffer": [2, 8]})
        fastest = next(row for row in swept.sweep if row["best"])
        tuned = fastest["variant"]
        rows.append((f"4. tuned: threads={tuned['preprocess_threads']} prefetch={tuned['prefetch_buffer']}",
                     fastest["images_per_second"], fastest["bound"]))
    rrc = {**{k: v for k, v in train.items() if k not in ("resize", "rand_crop")}, "random_resized_crop": True,
           "min_random_area": 0.08, "min_aspect_ratio": 0.75, "max_aspect_ratio": 4 / 3}
    best: dict[tuple[str, bool], Any] = {}
    for _ in range(args.rounds):  # alternately: the machine may be shared
        for name, config in (("resize", train), ("rrc", rrc)):
            for fast_decode in (False, True):
                result = mxrec.probe(full_rec, **tuned, **config, **measure, fast_decode=fast_decode)
                key = (name, fast_decode)
                if key not in best or result.run.images_per_second > best[key].run.images_per_second:
                    best[key] = result
    labels = {("resize", False): "5a. 2 MP .rec, tuned, full decode", ("resize", True): "5b. ... fast_decode",
              ("rrc", False): "5c. random_resized_crop, full decode", ("rrc", True): "5d. ... fast_decode"}
    for key, label in labels.items():
        rows.append((label, best[key].run.images_per_second, best[key].bound))
    cpu = {name: cpu_ms(full_rec, config) for name, config in (("resize", train), ("rrc", rrc))}

    # the same draws (the whole first epoch), the fast path with the default bilinear resize against the full
    # path with it (inter_method=1, aliasing when it shrinks 4.7x) and with an area resize (inter_method=3)
    deviations = {}
    stds = np.array(STD, np.float32).reshape(1, 3, 1, 1)
    for name, config in (("resize", train), ("rrc", rrc)):
        outputs = {}
        for fast_decode, inter_method in ((False, 1), (True, 1), (False, 3)):
            with mxrec.ImageRecordIter(path_imgrec=full_rec, **config, preprocess_threads=cores,
                                       inter_method=inter_method, fast_decode=fast_decode) as it:
                outputs[fast_decode, inter_method] = np.concatenate(
                    [b.data[0][:len(b.data[0]) - b.pad].copy() for b in it])
        for reference in (1, 3):  # grey levels
            deviations[name, reference] = float(np.abs((outputs[True, 1] - outputs[False, reference]) * stds).mean())
        deviations[name, "full"] = float(np.abs((outputs[False, 1] - outputs[False, 3]) * stds).mean())
    samples = len(outputs[True, 1])

    size_kb = np.median([os.path.getsize(p) for p in paths]) / 1e3
    what = (f"{args.leaves} leaves, q90" if args.photos == "leaves"
            else f"scikit-image photos, grain {args.grain:g}, q92")
    print(f"{args.count} photos {SIZE[1]}x{SIZE[0]} ({what}, median {size_kb:.0f} kB), batch {args.batch_size}, "
          f"224x224 after resize=256, {cores} cores" + (f"; probe recommended for step 2: {', '.join(advice)}"
                                                           if advice else ""))
    print(f"{'step':<44} {'img/s':>8}  bound")
    for name, rate, bound in rows:
        print(f"{name:<44} {rate:>8.1f}  {bound}")

    def speedup(name: str) -> float:
        return best[name, True].run.images_per_second / max(best[name, False].run.images_per_second, 1e-9)

    def decode_ms(name: str, fast_decode: bool) -> float:
        return best[name, fast_decode].to_dict()["stages"]["ms_per_sample"]["decode"]

    decode = cpu["resize"]
    print(f"decode alone (simplejpeg, reused buffer, CPU time): full {decode['1']:.2f} ms, 1/4 {decode['4']:.2f} ms "
          f"({decode['1'] / decode['4']:.2f}x: the ceiling of fast_decode at 1/4), 1/8 {decode['8']:.2f} ms (about "
          f"the entropy decoding every scale keeps: {decode['8'] / decode['1']:.0%} of a full decode)")
    for name, title in (("resize", "resize=256"), ("rrc", "random_resized_crop")):
        full_ms, fast_ms = cpu[name]["full"], cpu[name]["fast"]
        print(f"{title}: CPU per sample in the loader (one thread) full {full_ms:.2f} ms, fast_decode {fast_ms:.2f} "
              f"ms: {full_ms / fast_ms:.2f}x; beyond the decode alone (full / 1/4): {full_ms - cpu[name]['1']:.2f} / "
              f"{fast_ms - cpu[name]['4']:.2f} ms")
        print(f"fast_decode, {title}: {speedup(name):.2f}x the full-decode pipeline (goal >= 2x; decode stage "
              f"{decode_ms(name, False):.1f} -> {decode_ms(name, True):.1f} ms a sample); mean deviation over "
              f"{samples} samples, same draws (goal <= 1.5 grey levels): {deviations[name, 1]:.2f} from the full "
              f"path's bilinear resize, {deviations[name, 3]:.2f} from an area resize of the full decode (which "
              f"the bilinear full path itself is {deviations[name, 'full']:.2f} off)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
