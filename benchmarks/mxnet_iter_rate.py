"""Images per second of real MXNet's ImageRecordIter, run by bench_iter.py under the MXNet interpreter.

    $MXREC_BENCH_MXNET_PYTHON benchmarks/mxnet_iter_rate.py '<json: {"path_imgrec": ..., "images": N, ...}>'

Prints one JSON object: {"rate": images per second of wall time, "cpu_rate": images per second of this process's
CPU time (every thread: MXNet's decoders, its prefetcher, the caller), "images": images timed}. Only needs mxnet and
numpy.
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
    start, cpu = time.perf_counter(), time.process_time()
    while done < images:
        try:
            batch = it.next()
        except StopIteration:
            it.reset()
            continue
        batch.data[0].wait_to_read()
        done += batch.data[0].shape[0]
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    print(json.dumps({"rate": done / elapsed, "cpu_rate": done / cpu, "images": done}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
