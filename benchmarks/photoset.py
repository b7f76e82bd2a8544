"""Generate a realistic photo folder for the benchmarks (not committed: made on demand).

Photographs shipped inside scikit-image (astronaut, chelsea, coffee, rocket,
hubble_deep_field, retina, ...) are cut into random crops (scaled so the
shorter side is 256-500 px, flipped at random) and saved as JPEG (quality
85-95) into one folder per source image, i.e. one class per photograph:
``OUT/<class>/<class>_NNNNN.jpg``. Deterministic for a given ``--seed``.

    python benchmarks/photoset.py bench-data/photos5000 --count 5000

Needs ``scikit-image`` (``pip install scikit-image``) and OpenCV.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

SOURCES = ["astronaut", "chelsea", "coffee", "rocket", "hubble_deep_field", "retina",
           "immunohistochemistry", "motorcycle_left", "colorwheel", "camera"]


def load_sources() -> dict[str, np.ndarray]:
    """The source photographs as BGR uint8 arrays, keyed by class name."""
    import skimage.data as data
    import skimage.io

    images = {}
    for name in SOURCES:
        if name == "motorcycle_left":
            img = skimage.io.imread(os.path.join(os.path.dirname(data.__file__), "motorcycle_left.png"))
        elif name == "colorwheel":
            img = data.colorwheel()
        else:
            img = getattr(data, name)()
        if img.ndim == 2:
            img = np.stack([img] * 3, axis=-1)
        images[name] = np.ascontiguousarray(img[..., :3][..., ::-1])  # RGB(A) -> BGR
    return images


def make_photoset(out_dir: str, count: int, seed: int = 0) -> list[str]:
    """Write ``count`` JPEGs under ``out_dir``; return their paths."""
    import cv2

    rng = np.random.default_rng(seed)
    sources = load_sources()
    names = sorted(sources)
    paths = []
    for i in range(count):
        name = names[i % len(names)]
        src = sources[name]
        h, w = src.shape[:2]
        side = int(rng.integers(min(h, w) // 2, min(h, w) + 1))
        aspect = rng.uniform(0.75, 1.33)
        ch, cw = min(h, side), min(w, int(side * aspect))
        y, x = int(rng.integers(0, h - ch + 1)), int(rng.integers(0, w - cw + 1))
        crop = src[y:y + ch, x:x + cw]
        short = int(rng.integers(256, 501))
        scale = short / min(ch, cw)
        crop = cv2.resize(crop, (max(1, round(cw * scale)), max(1, round(ch * scale))),
                          interpolation=cv2.INTER_AREA if scale < 1 else cv2.INTER_CUBIC)
        if rng.random() < 0.5:
            crop = crop[:, ::-1]
        folder = os.path.join(out_dir, name)
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, f"{name}_{i // len(names):05d}.jpg")
        ok = cv2.imwrite(path, np.ascontiguousarray(crop), [cv2.IMWRITE_JPEG_QUALITY, int(rng.integers(85, 96))])
        if not ok:
            raise OSError(f"could not write {path}")
        paths.append(path)
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir")
    parser.add_argument("--count", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    paths = make_photoset(args.out_dir, args.count, args.seed)
    print(f"wrote {len(paths)} photos to {args.out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
