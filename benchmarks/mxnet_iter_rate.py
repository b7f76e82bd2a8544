"""Images per second of real MXNet's ImageRecordIter, run by bench_iter.py under the MXNet interpreter.

    $MXREC_BENCH_MXNET_PYTHON benchmarks/mxnet_iter_rate.py '<json: {"path_imgrec": ..., "images": N, ...}>'

Prints one JSON object: {"rate": images per second, "images": images timed}. Only needs mxnet and numpy.
The first "warmup" batches (start-up: threads, buffers, first page faults) are not timed.
"""

from __future__ import annotations

import json
import sys
import time


def main() -> int:
    import mxnet as mx

    params = json.loads(sys.argv[1])
    images = params.pop("images")
    warmup = params.pop("warmup")
    it = mx.io.ImageRecordIter(**params)
    for _ in range(warmup):
        it.next().data[0].wait_to_read()
    done = 0
    start = time.perf_counter()
    while done < images:
        try:
            batch = it.next()
        except StopIteration:
            it.reset()
            continue
        batch.data[0].wait_to_read()
        done += batch.data[0].shape[0]
    elapsed = time.perf_counter() - start
    print(json.dumps({"rate": done / elapsed, "images": done}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
