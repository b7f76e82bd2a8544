"""Extra ground truth for mxrec's ImageRecordIter, written by real MXNet 1.9.1 (run once by hand, never by tests).

    MXREC_GOLDEN=/work/shared/golden /work/mxnet-venv/bin/python make_extra.py

Reads im2rec/centercrop_resize64/sub.rec (64x64 JPEGs, 50 records) of the shared golden set and writes, for each
configuration below, the first batch of 8 (data as given by MXNet, label) as <name>.data.npy / <name>.label.npy.
All configurations are deterministic: no random draw changes the output.
"""

import json
import os
import sys

import mxnet as mx
import numpy as np

GOLDEN = os.environ.get("MXREC_GOLDEN", "/work/shared/golden")
REC = os.path.join(GOLDEN, "im2rec", "centercrop_resize64", "sub.rec")
BASE = dict(shuffle=False, rand_crop=False, rand_mirror=False, preprocess_threads=1, batch_size=8)

CONFIGS = {
    "rotate90": dict(data_shape=(3, 64, 64), rotate=90, fill_value=3, dtype="uint8"),
    "rotate30_cubic": dict(data_shape=(3, 64, 64), rotate=30, inter_method=2, fill_value=0, dtype="uint8"),
    "scale_half": dict(data_shape=(3, 48, 48), min_random_scale=0.5, max_random_scale=0.5, dtype="uint8"),
    "pad_fill": dict(data_shape=(3, 70, 70), pad=4, fill_value=10, dtype="uint8"),
    "mirror_resize_area": dict(data_shape=(3, 40, 40), resize=40, inter_method=3, mirror=True, dtype="uint8"),
    "resize_up_auto": dict(data_shape=(3, 80, 80), resize=90, inter_method=9, dtype="uint8"),
    "grey": dict(data_shape=(1, 48, 48), dtype="uint8"),
    "int8_mean": dict(data_shape=(3, 32, 32), resize=32, dtype="int8", mean_r=123.68, mean_g=116.779, mean_b=103.939),
    "float_scale": dict(data_shape=(3, 32, 32), resize=32, scale=1.0 / 255, mean_r=10.0, std_g=2.0),
}


def main(out_dir):
    summary = {}
    for name, cfg in CONFIGS.items():
        it = mx.io.ImageRecordIter(path_imgrec=REC, **BASE, **cfg)
        batch = it.next()
        data = batch.data[0].asnumpy()
        label = batch.label[0].asnumpy()
        np.save(os.path.join(out_dir, f"{name}.data.npy"), data)
        np.save(os.path.join(out_dir, f"{name}.label.npy"), label)
        summary[name] = dict(config=cfg, data_dtype=str(data.dtype), data_shape=list(data.shape))
        print(name, data.shape, data.dtype, float(data.min()), float(data.max()))
    with open(os.path.join(out_dir, "configs.json"), "w") as f:
        json.dump(dict(base=BASE, mxnet=mx.__version__, configs=summary), f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__)))
