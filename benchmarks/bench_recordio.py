"""RecordIO core benchmark: mxrec (drop-in API and fast reader/writer) against real MXNet, same run.

    MXREC_BENCH_MXNET_PYTHON=/path/to/mxnet-venv/bin/python python benchmarks/bench_recordio.py

Part 1, for 100 000 records of 1 KB and 2 000 records of 100 KB (random bytes):
``write`` (``MXRecordIO.write`` loop), ``write_idx``, sequential ``read`` and
shuffled ``read_idx`` through the drop-in API -- literally the same code with
``mxnet.recordio`` in place of ``mxrec.recordio``, the MXNet column run by this
file under that interpreter -- and mxrec's own ``RecordWriter``/``RecordReader``.
Each write goes to a file that does not exist yet (the previous run's output is
deleted before the clock starts: truncating 100-200 MB of page cache would
otherwise be timed too). Rounds alternate MXNet and mxrec (the machine may be
shared); every round's ratio is printed, and the bar is checked on the worst.

Part 2: opening a 10 000 000-key ``.idx`` (consecutive keys, as InsightFace's
Glint360K/WebFace files): seconds and peak memory (the growth of the peak
resident set over what the process held after its imports), each in a fresh
process, for MXNet's ``MXIndexedRecordIO``, the drop-in and ``RecordReader``.
``--idx-keys`` changes the count.

Bars: drop-in read/read_idx and write/write_idx >= 3x MXNet, fast write_batch
>= 3x MXNet's write_idx, on 1 KB; every write mode >= 1x on 100 KB; opening
the 10M-key ``.idx`` >= 10x faster with <= 1/5 of MXNet's peak memory.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

SIZES = {"1KB": (100_000, 1024), "100KB": (2_000, 100 * 1024)}
HERE = os.path.dirname(os.path.abspath(__file__))


def payloads(count: int, size: int) -> list[bytes]:
    rng = np.random.default_rng(size)
    blob = rng.integers(0, 256, count * size, dtype=np.uint8).tobytes()
    return [blob[i * size:(i + 1) * size] for i in range(count)]


def timed(fn, *outputs: str) -> float:
    """Seconds one call of ``fn`` takes, after deleting ``outputs`` (each write starts on a new file)."""
    for path in outputs:
        if os.path.exists(path):
            os.unlink(path)
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def dropin_workloads(recordio, data: dict, folder: str, tag: str) -> dict:
    """The drop-in API, identical for mxnet.recordio and mxrec.recordio: ``{name: zero-argument timer}``."""
    workloads = {}
    for name, items in data.items():
        rec, idx = os.path.join(folder, f"{name}.rec"), os.path.join(folder, f"{name}.idx")
        out_rec, out_idx = os.path.join(folder, f"{tag}.{name}.w.rec"), os.path.join(folder, f"{tag}.{name}.w.idx")

        def write(items=items, out_rec=out_rec):
            w = recordio.MXRecordIO(out_rec, "w")
            for p in items:
                w.write(p)
            w.close()

        def write_idx(items=items, out_rec=out_rec, out_idx=out_idx):
            w = recordio.MXIndexedRecordIO(out_idx, out_rec, "w")
            for i, p in enumerate(items):
                w.write_idx(i, p)
            w.close()

        def read_seq(rec=rec):
            r = recordio.MXRecordIO(rec, "r")
            while r.read() is not None:
                pass
            r.close()

        order = np.random.default_rng(1).permutation(len(items)).tolist()

        def read_shuffled(rec=rec, idx=idx, order=order):
            r = recordio.MXIndexedRecordIO(idx, rec, "r")
            for k in order:
                r.read_idx(k)
            r.close()

        workloads[f"write {name}"] = lambda fn=write, out=out_rec: timed(fn, out)
        workloads[f"write_idx {name}"] = lambda fn=write_idx, out=(out_rec, out_idx): timed(fn, *out)
        workloads[f"sequential read {name}"] = lambda fn=read_seq: timed(fn)
        workloads[f"shuffled read_idx {name}"] = lambda fn=read_shuffled: timed(fn)
    return workloads


def fast_workloads(data: dict, folder: str) -> dict:
    """mxrec's own RecordReader / RecordWriter: ``{name: zero-argument timer}``."""
    from mxrec import RecordReader, RecordWriter

    workloads = {}
    for name, items in data.items():
        rec, idx = os.path.join(folder, f"{name}.rec"), os.path.join(folder, f"{name}.idx")
        out_rec, out_idx = os.path.join(folder, f"fast.{name}.rec"), os.path.join(folder, f"fast.{name}.idx")

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

        def read_shuffled(rec=rec, idx=idx, order=order):
            with RecordReader(rec, idx) as reader:
                read_key = reader.read_key
                for k in order:
                    read_key(k)

        per_batch = max(1, (256 << 10) // len(items[0]))  # ~256 KB a batch, as a data loader would take

        def read_batch(rec=rec, idx=idx, order=order, per_batch=per_batch):
            with RecordReader(rec, idx) as reader:
                for i in range(0, len(order), per_batch):
                    reader.read_batch(order[i:i + per_batch])

        workloads[f"write {name}"] = lambda fn=write, out=(out_rec, out_idx): timed(fn, *out)
        workloads[f"write_batch {name}"] = lambda fn=write_batch, out=(out_rec, out_idx): timed(fn, *out)
        workloads[f"sequential read {name}"] = lambda fn=read_seq: timed(fn)
        workloads[f"shuffled read_idx {name}"] = lambda fn=read_shuffled: timed(fn)
        workloads[f"shuffled read_batch {name}"] = lambda fn=read_batch: timed(fn)
    return workloads


def prepare(folder: str) -> dict:
    """Payloads in memory, and the .rec/.idx files every backend reads (written once, by mxrec)."""
    from mxrec import RecordWriter

    data = {name: payloads(count, size) for name, (count, size) in SIZES.items()}
    for name, items in data.items():
        with RecordWriter(os.path.join(folder, f"{name}.rec"), index=True) as w:
            for p in items:
                w.write(p)
    return data


# -- opening a large .idx, each in a fresh process -----------------------------------------------

def _rss_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def open_idx_child(backend: str, idx: str, rec: str) -> dict:
    """Time and peak-memory growth of opening ``idx`` (run in a fresh process)."""
    if backend == "fast":
        from mxrec import RecordReader

        def opener():
            return RecordReader(rec, idx)
    else:
        recordio = importlib.import_module("mxnet.recordio" if backend == "mxnet" else "mxrec.recordio")

        def opener():
            return recordio.MXIndexedRecordIO(idx, rec, "r")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset the peak RSS (VmHWM) to the current RSS: imports do not count
    before = _rss_kb("VmRSS")
    start = time.perf_counter()
    handle = opener()
    seconds = time.perf_counter() - start
    peak = _rss_kb("VmHWM")
    count = len(handle.keys)
    return {"seconds": seconds, "peak_mb": (peak - before) / 1024, "keys": count}


def make_large_idx(folder: str, count: int) -> tuple[str, str]:
    """A ``count``-key .idx (keys 0..count-1, 1 KB records) and a sparse .rec of the size it describes."""
    from mxrec.io.index import write_index

    idx, rec = os.path.join(folder, "large.idx"), os.path.join(folder, "large.rec")
    offsets = np.arange(count, dtype=np.int64) * 1032
    write_index(idx, range(count), offsets)
    with open(rec, "wb") as f:
        f.truncate(int(offsets[-1]) + 1032 if count else 0)  # sparse: no disk used, only the size is read
    return idx, rec


def run_child(python: str, *args: str) -> dict:
    out = subprocess.run([python, __file__, *args], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"child failed: {' '.join(args)}\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


class MXNetServer:
    """This file under MXNet's interpreter, timing its drop-in workloads on request (one line in, one out)."""

    def __init__(self, python: str, folder: str) -> None:
        self.process = subprocess.Popen([python, __file__, "--backend", "mxnet", "--folder", folder],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def time(self, workload: str) -> float:
        self.process.stdin.write(workload + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise SystemExit(f"the MXNet child stopped (exit status {self.process.wait()})")
        return json.loads(line)["seconds"]

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(60)


def serve(folder: str) -> None:
    """Child side of :class:`MXNetServer`."""
    data = {name: payloads(count, size) for name, (count, size) in SIZES.items()}
    workloads = dropin_workloads(importlib.import_module("mxnet.recordio"), data, folder, "mxnet")
    for line in sys.stdin:
        print(json.dumps({"seconds": workloads[line.strip()]()}), flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=["mxnet", "mxrec", "fast"], help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    parser.add_argument("--open-idx", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=2, help="alternating runs per round (best kept)")
    parser.add_argument("--idx-keys", type=int, default=10_000_000)
    parser.add_argument("--idx-rounds", type=int, default=2)
    args = parser.parse_args(argv)
    if args.open_idx:  # child: open one .idx, print time and memory as JSON
        print(json.dumps(open_idx_child(args.backend, *args.open_idx)))
        return 0
    if args.backend:
        serve(args.folder)
        return 0

    mxnet_python = os.environ.get("MXREC_BENCH_MXNET_PYTHON")
    # rounds[i][side][workload] = seconds; side 0 MXNet, 1 drop-in, 2 fast
    rounds: list[tuple[dict, dict, dict]] = []
    with tempfile.TemporaryDirectory(prefix="mxrec-bench-") as folder:
        data = prepare(folder)
        dropin = dropin_workloads(importlib.import_module("mxrec.recordio"), data, folder, "mxrec")
        fast = fast_workloads(data, folder)
        server = MXNetServer(mxnet_python, folder) if mxnet_python else None
        names = list(dropin) + [w for w in fast if w not in dropin]
        for number in range(args.rounds):
            print(f"round {number + 1}/{args.rounds} ...", file=sys.stderr, flush=True)
            times: tuple[dict, dict, dict] = ({}, {}, {})
            for workload in names:
                # MXNet, drop-in and fast one after another, --repeat times: close in time, same conditions
                for _ in range(args.repeat):
                    for side, timer in enumerate((server.time if server and workload in dropin else None,
                                                  dropin.get(workload), fast.get(workload))):
                        if side == 0 and timer is not None:
                            t = timer(workload)
                        elif side > 0 and timer is not None:
                            t = timer()
                        else:
                            continue
                        times[side][workload] = min(times[side].get(workload, t), t)
            rounds.append(times)
        if server:
            server.close()
        del data, dropin, fast
        opens: list[dict] = []
        if args.idx_keys:
            idx, rec = make_large_idx(folder, args.idx_keys)
            backends = (["mxnet"] if mxnet_python else []) + ["mxrec", "fast"]
            for _ in range(args.idx_rounds):
                opens.append({b: run_child(mxnet_python if b == "mxnet" else sys.executable, "--backend", b,
                                           "--open-idx", idx, rec) for b in backends})
    fails = report(rounds, names, args)
    if opens:
        fails += report_opens(opens, args.idx_keys)
    if not mxnet_python:
        print("(set MXREC_BENCH_MXNET_PYTHON to an interpreter that imports mxnet for the MXNet column and bars)")
    return 1 if fails else 0


def report(rounds: list, names: list[str], args: argparse.Namespace) -> int:
    """Print the table of part 1; return the number of failed bars."""
    print(f"\nmxrec RecordIO benchmark: {len(rounds)} rounds, each the best of {args.repeat} alternating runs; "
          "seconds (lower is better); ratio = MXNet time / mxrec time, per round")
    header = f"{'workload':26} {'MXNet 1.9.1':>12} {'drop-in':>8} {'ratios':>15} {'fast':>7} {'ratios':>15}  bar"
    print(header)
    print("-" * len(header))
    fails = 0
    for workload in sorted(names, key=lambda w: (not w.endswith("1KB"), names.index(w))):
        # the fast writer writes an index: its anchor is write_idx; batch reads compare with read_idx
        anchor_fast = workload.replace("write_batch", "write_idx").replace("write ", "write_idx ").replace(
            "read_batch", "read_idx")
        m = [r[0].get(workload) for r in rounds]
        m_fast = [r[0].get(anchor_fast) for r in rounds]
        d = [r[1].get(workload) for r in rounds]
        f = [r[2].get(workload) for r in rounds]

        def ratios(ours: list, anchors: list) -> tuple[list[float], str]:
            if not all(anchors) or not all(ours):
                return [], f"{'-':>15}"
            values = [a / o for a, o in zip(anchors, ours, strict=True)]
            return values, f"{' '.join(f'{v:.2f}' for v in values):>15}"

        d_ratios, d_text = ratios(d, m)
        f_ratios, f_text = ratios(f, m_fast)
        small = workload.endswith("1KB")
        is_write = workload.startswith("write")
        checked = d_ratios if (small or is_write) else []
        if workload.startswith("write_batch") or (is_write and not small):
            checked = checked + f_ratios
        need = 3.0 if small else 1.0
        bar = ""
        if checked:
            ok = min(checked) >= need
            fails += not ok
            bar = f">= {need:.0f}x: {'PASS' if ok else 'FAIL'} (worst {min(checked):.2f}x)"
        show = lambda values: f"{min(values):.3f}" if all(values) else "-"  # noqa: E731
        print(f"{workload:26} {show(m):>12} {show(d):>8} {d_text} {show(f):>7} {f_text}  {bar}")
    print("(times: the best round; the fast writer's rows and the batch reads compare with MXNet's write_idx / "
          "read_idx loop)")
    return fails


def report_opens(opens: list[dict], keys: int) -> int:
    """Print the table of part 2; return the number of failed bars."""
    print(f"\nopening a {keys:,}-key .idx (consecutive keys), a fresh process each, {len(opens)} rounds: "
          "seconds / peak MB (growth over the imports)")
    print(f"{'reader':34} " + " ".join(f"{'round ' + str(i + 1):>16}" for i in range(len(opens)))
          + "  speed-up / memory share vs MXNet, per round")
    names = {"mxnet": "MXNet MXIndexedRecordIO", "mxrec": "mxrec drop-in MXIndexedRecordIO",
             "fast": "mxrec RecordReader"}
    fails = 0
    for backend in opens[0]:
        cells = " ".join(f"{o[backend]['seconds']:7.2f}s {o[backend]['peak_mb']:6.0f}MB" for o in opens)
        note = ""
        if backend != "mxnet" and "mxnet" in opens[0]:
            speed = [o["mxnet"]["seconds"] / o[backend]["seconds"] for o in opens]
            share = [o[backend]["peak_mb"] / o["mxnet"]["peak_mb"] for o in opens]
            ok = min(speed) >= 10 and max(share) <= 0.2
            fails += not ok
            note = (f"  {' '.join(f'{s:.1f}x' for s in speed)} / {' '.join(f'{s:.0%}' for s in share)}"
                    f"  >= 10x, <= 20%: {'PASS' if ok else 'FAIL'}")
        print(f"{names[backend]:34} {cells}{note}")
    return fails


if __name__ == "__main__":
    sys.exit(main())
