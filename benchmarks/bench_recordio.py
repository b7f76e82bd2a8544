"""RecordIO core benchmark: mxrec (drop-in API and fast reader/writer) against real MXNet, same run.

Workloads, for 100 000 records of 1 KB and 2 000 records of 100 KB (random bytes):
write, sequential read, shuffled read by key (``read_idx``), and opening an
``.idx`` of 100 000 keys. Each is timed best-of-``--repeat``; records/s and
MB/s are printed with the ratio to MXNet when an interpreter that imports
``mxnet`` is given::

    MXREC_BENCH_MXNET_PYTHON=/path/to/mxnet-venv/bin/python python benchmarks/bench_recordio.py

The MXNet column runs this same file under that interpreter (``--backend
mxnet``): the drop-in workload is literally the same code with
``mxnet.recordio`` in place of ``mxrec.recordio``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

from timing import best_of

SIZES = {"1KB": (100_000, 1024), "100KB": (2_000, 100 * 1024)}


def payloads(count: int, size: int) -> list[bytes]:
    rng = np.random.default_rng(size)
    blob = rng.integers(0, 256, count * size, dtype=np.uint8).tobytes()
    return [blob[i * size:(i + 1) * size] for i in range(count)]


def dropin_workloads(recordio, data: dict, folder: str, repeat: int) -> dict:
    """The drop-in API: MXRecordIO / MXIndexedRecordIO, identical for mxnet.recordio and mxrec.recordio."""
    results = {}
    for name, items in data.items():
        rec, idx = os.path.join(folder, f"{name}.rec"), os.path.join(folder, f"{name}.idx")
        out_rec, out_idx = os.path.join(folder, f"{name}.w.rec"), os.path.join(folder, f"{name}.w.idx")

        def write(out_rec=out_rec, out_idx=out_idx, items=items):
            w = recordio.MXIndexedRecordIO(out_idx, out_rec, "w")
            for i, p in enumerate(items):
                w.write_idx(i, p)
            w.close()

        def read_seq(rec=rec):
            r = recordio.MXRecordIO(rec, "r")
            n = 0
            while r.read() is not None:
                n += 1
            r.close()

        order = np.random.default_rng(1).permutation(len(items)).tolist()
        reader = recordio.MXIndexedRecordIO(idx, rec, "r")

        def read_shuffled(reader=reader, order=order):
            for k in order:
                reader.read_idx(k)

        results[f"write {name}"] = best_of(repeat, write)
        results[f"sequential read {name}"] = best_of(repeat, read_seq)
        results[f"shuffled read_idx {name}"] = best_of(repeat, read_shuffled)
        reader.close()
        if name == "1KB":
            results["open .idx (100k keys)"] = best_of(
                repeat, lambda idx=idx, rec=rec: recordio.MXIndexedRecordIO(idx, rec, "r").close())
    return results


def fast_workloads(data: dict, folder: str, repeat: int) -> dict:
    """mxrec's own RecordReader / RecordWriter."""
    from mxrec import RecordReader, RecordWriter

    results = {}
    for name, items in data.items():
        rec, idx = os.path.join(folder, f"{name}.rec"), os.path.join(folder, f"{name}.idx")
        out_rec = os.path.join(folder, f"{name}.f.rec")

        def write(out_rec=out_rec, items=items):
            with RecordWriter(out_rec, index=True) as w:
                for p in items:
                    w.write(p)

        def write_batch(out_rec=out_rec, items=items):
            with RecordWriter(out_rec, index=True) as w:
                for i in range(0, len(items), 1024):
                    w.write_batch(items[i:i + 1024])

        def read_seq(rec=rec):
            with RecordReader(rec) as r:
                for _ in r:
                    pass

        order = np.random.default_rng(1).permutation(len(items)).tolist()
        reader = RecordReader(rec, idx)

        def read_shuffled(reader=reader, order=order):
            read_key = reader.read_key
            for k in order:
                read_key(k)

        per_batch = max(1, (256 << 10) // len(items[0]))  # ~256 KB a batch, as a data loader would take

        def read_batch(reader=reader, order=order, per_batch=per_batch):
            for i in range(0, len(order), per_batch):
                reader.read_batch(order[i:i + per_batch])

        results[f"write {name}"] = best_of(repeat, write)
        results[f"write_batch {name}"] = best_of(repeat, write_batch)
        results[f"sequential read {name}"] = best_of(repeat, read_seq)
        results[f"shuffled read_idx {name}"] = best_of(repeat, read_shuffled)
        results[f"shuffled read_batch {name}"] = best_of(repeat, read_batch)
        reader.close()
        if name == "1KB":
            results["open .idx (100k keys)"] = best_of(repeat, lambda idx=idx, rec=rec: RecordReader(rec, idx).close())
    return results


def prepare(folder: str) -> dict:
    """Payloads in memory, and the .rec/.idx files every backend reads (written once, by mxrec)."""
    from mxrec import RecordWriter

    data = {name: payloads(count, size) for name, (count, size) in SIZES.items()}
    for name, items in data.items():
        with RecordWriter(os.path.join(folder, f"{name}.rec"), index=True) as w:
            for p in items:
                w.write(p)
    return data


def run_backend(backend: str, folder: str, repeat: int) -> dict:
    data = {name: payloads(count, size) for name, (count, size) in SIZES.items()}
    module = importlib.import_module("mxnet.recordio" if backend == "mxnet" else "mxrec.recordio")
    return dropin_workloads(module, data, folder, repeat)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=["mxnet", "mxrec"], help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    if args.backend:  # child run: print timings as JSON
        print(json.dumps(run_backend(args.backend, args.folder, args.repeat)))
        return 0

    mxnet_python = os.environ.get("MXREC_BENCH_MXNET_PYTHON")
    with tempfile.TemporaryDirectory(prefix="mxrec-bench-") as folder:
        data = prepare(folder)
        dropin = dropin_workloads(importlib.import_module("mxrec.recordio"), data, folder, args.repeat)
        fast = fast_workloads(data, folder, args.repeat)
        del data
        mxnet = {}
        if mxnet_python:
            out = subprocess.run([mxnet_python, __file__, "--backend", "mxnet", "--folder", folder,
                                  "--repeat", str(args.repeat)], capture_output=True, text=True, check=True)
            mxnet = json.loads(out.stdout.strip().splitlines()[-1])

    print(f"mxrec RecordIO benchmark: best of {args.repeat}, seconds (lower is better); "
          "ratio = MXNet time / mxrec time")
    header = f"{'workload':32} {'MXNet 1.9.1':>12} {'mxrec drop-in':>14} {'ratio':>7} {'mxrec fast':>11} {'ratio':>7}"
    print(header)
    print("-" * len(header))
    for workload in fast:
        anchor = workload.replace("write_batch", "write").replace("read_batch", "read_idx")
        m, d, f = mxnet.get(anchor), dropin.get(workload), fast[workload]
        cells = [f"{workload:32}", f"{m:12.3f}" if m else f"{'-':>12}"]
        cells.append(f"{d:14.3f}" if d else f"{'-':>14}")
        cells.append(f"{m / d:6.1f}x" if m and d else f"{'-':>7}")
        cells.append(f"{f:11.3f}")
        cells.append(f"{m / f:6.1f}x" if m else f"{'-':>7}")
        print(" ".join(cells))
    print("write_batch / read_batch rows compare with MXNet's write_idx / read_idx loop (it has no batch call)")
    if not mxnet:
        print("(set MXREC_BENCH_MXNET_PYTHON to an interpreter that imports mxnet for the MXNet column)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
