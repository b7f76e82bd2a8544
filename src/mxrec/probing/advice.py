"""What bounds the pipeline, and what to change: derived from a :class:`~mxrec.probing.run.ProbeRun`'s numbers.

:func:`find_bound` names one bound (``details["code"]`` of the ``bound`` check, which never fails):

* ``consumer``: the training step (``step_time``) is the slower side; the loader waits on it;
* ``storage``: fetching records is 40 % or more of the loading threads' time;
* ``python``: the threads are busy but the process uses far less CPU than it has threads for (the GIL);
* ``decode``: decode, augment and write use the CPU.

:func:`recommend` lists :class:`Advice` (a ``code``, the change, its expected effect): ``pack_resize``,
``fast_decode``, ``cache_dir``, ``prefetch``, ``fewer_threads``, ``more_threads``, ``uint8_output``,
``shuffle``, ``shuffle_window``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mxrec.doctor.report import Check
from mxrec.probing.run import ProbeRun, stage_samples, stage_seconds
from mxrec.train.dataiter import data_shape_of
from mxrec.train.timing import STAGES, WAIT

STORAGE_SHARE = 0.4
CONSUMER_WAIT = 0.1  # the consumer waited less than this share of the run: it is the bottleneck
GIL_CPU_SHARE = 0.6  # the process used less than this share of min(threads, cores) cores
MACHINE_BUSY = 85.0  # % of all cores busy: the machine is saturated (maybe by others)
OVERSIZE = 2.0  # stored shorter side at least this many times what is needed


@dataclass
class Advice:
    """One recommendation: ``code``, ``change`` (what to do), ``effect`` (what to expect, with numbers)."""

    code: str
    change: str
    effect: str

    def to_dict(self) -> dict:
        return {"code": self.code, "change": self.change, "effect": self.effect}


def breakdown(run: ProbeRun) -> dict[str, Any]:
    """Milliseconds per sample per stage (thread time), shares of the loading time, the consumer's wait share."""
    totals = stage_seconds(run)
    samples = max(stage_samples(run), 1)
    busy = sum(totals[s] for s in STAGES)
    return {"ms_per_sample": {s: round(1000 * totals[s] / samples, 3) for s in STAGES},
            "share": {s: round(totals[s] / busy, 3) if busy else 0.0 for s in STAGES},
            "wait_share": round(totals[WAIT] / run.seconds, 3) if run.seconds else 0.0,
            "fetched_bytes": int(totals["bytes"]), "measured": run.stages_where}


def find_bound(run: ProbeRun) -> Check:
    """The ``bound`` check: one sentence with the numbers behind it; ``details["code"]`` names the bound."""
    parts = breakdown(run)
    share, wait = parts["share"], parts["wait_share"]
    machine = run.machine
    cores = machine.cores if machine and machine.cores else 1
    used = machine.process_cpu if machine else 0.0
    busy_all = (sum(machine.cpu_per_core) / len(machine.cpu_per_core)) if machine and machine.cpu_per_core else 0.0
    rate = f"{run.images_per_second:.0f} img/s"
    numbers = {"images_per_second": round(run.images_per_second, 1), "wait_share": wait, "share": share,
               "process_cpu": round(used, 2), "cores": cores, "threads": run.threads, "machine_busy": round(busy_all)}
    if run.mode == "records":
        mb_s = sum(b for _, _, b in run.batch_times) / max(run.seconds, 1e-9) / 1e6
        return Check("bound", True, f"storage: a bare record read gives {run.samples / max(run.seconds, 1e-9):.0f} "
                                    f"records/s, {mb_s:.1f} MB/s", details={"code": "storage", **numbers})
    if run.step_time and wait < CONSUMER_WAIT:
        code = "consumer"
        sentence = (f"the consumer: a {1000 * run.step_time:.0f} ms step waits for data {100 * wait:.0f}% of the "
                    f"time ({rate}); the input pipeline keeps up")
    elif share["fetch"] >= STORAGE_SHARE:
        code = "storage"
        sentence = (f"storage: fetching records takes {100 * share['fetch']:.0f}% of the loading time "
                    f"({parts['ms_per_sample']['fetch']:.1f} ms a sample); {rate}")
    elif run.threads > 1 and cores > 1 and used < GIL_CPU_SHARE * min(run.threads, cores) and busy_all < MACHINE_BUSY:
        code = "python"
        sentence = (f"Python (the GIL): {run.threads} threads busy but the process used {used:.1f} of {cores} "
                    f"cores; {rate}")
    else:
        code = "decode"
        cpu = share["decode"] + share["augment"] + share["write"]
        sentence = (f"decode/augment CPU: decode {100 * share['decode']:.0f}%, augment {100 * share['augment']:.0f}%, "
                    f"write {100 * share['write']:.0f}% of the loading time ({100 * cpu:.0f}% CPU work), "
                    f"{used:.1f} of {cores} cores used; {rate}")
    if code != "consumer" and run.step_time:
        sentence += f"; input-bound: the {1000 * run.step_time:.0f} ms step waits {100 * wait:.0f}% of the time"
    return Check("bound", True, sentence, details={"code": code, **numbers})


def _needed_side(params: dict[str, Any]) -> int | None:
    """The shorter side the augmentation needs from a stored image."""
    if int(params.get("resize", -1)) > 0:
        return int(params["resize"])
    shape = params.get("data_shape")
    if shape is None:
        return None
    _, height, width = data_shape_of(shape)
    return max(height, width)


def recommend(run: ProbeRun, bound: Check, checks: list[Check]) -> list[Advice]:
    """The changes worth making, from the numbers (see the module docstring)."""
    advice: list[Advice] = []
    code = bound.details["code"]
    p = run.params
    loader = run.mode == "loader"
    images = run.images
    needed = None if loader else _needed_side(p)
    stored = min(images.get("median_height", 0), images.get("median_width", 0)) if images else 0
    if needed and stored >= OVERSIZE * needed:
        work = (stored / needed) ** 2
        advice.append(Advice("pack_resize", f"repack with `mxrec pack --resize {needed}` (add --fast for reduced "
                                            "decoding while packing)",
                             f"stored images are {images['median_width']}x{images['median_height']} (median) for a "
                             f"{needed} px need: decoding does ~{work:.0f}x the pixel work needed"))
        reducible = int(p.get("resize", -1)) > 0 or bool(p.get("random_resized_crop"))
        if "jpeg" in images.get("formats", []) and reducible and not p.get("fast_decode"):
            advice.append(Advice("fast_decode", "fast_decode=1 (decode at 1/2, 1/4 or 1/8 scale, no repacking)",
                                 f"JPEGs {stored / needed:.1f}x larger than the {needed} px needed: less decoding "
                                 "work (about 1.4x on 2 MP camera JPEGs, up to 1.6x on smoother ones: the entropy "
                                 "decoding stays), about a grey level from an antialiased full decode "
                                 "(benchmarks/bench_probe.py)"))
    if code == "storage":
        if run.remote is not None and not run.remote.get("cached"):
            advice.append(Advice("cache_dir", "cache_dir=/local/disk (or $MXREC_CACHE_DIR)",
                                 f"{run.remote['requests']} remote requests in {run.seconds:.1f} s; later epochs "
                                 "read from local disk instead"))
        key = "prefetch_factor" if loader else "prefetch_buffer"
        if run.mode != "records":  # a bare record read has nothing to prefetch for
            advice.append(Advice("prefetch", f"{key}={max(2 * run.prefetch, 8)}",
                                 "more batches fetched ahead hide storage latency (memory: see the memory check)"))
    cores = run.machine.physical_cores if run.machine else 0
    key = "num_workers" if loader else "preprocess_threads"
    if cores and run.threads > cores:
        advice.append(Advice("fewer_threads", f"{key}={cores}",
                             f"{run.threads} threads on {cores} physical cores only add switching; expect the same "
                             "or better"))
    elif cores and code in ("decode", "python") and run.threads < cores:
        advice.append(Advice("more_threads", f"{key}={cores}",
                             f"{run.threads} of {cores} cores loading: up to {cores / run.threads:.1f}x"))
    parts = breakdown(run)
    dtype = run.batches[0].dtype if run.batches else ""
    if code != "consumer" and dtype in ("float32", "float16", "float64") and parts["share"]["write"] >= 0.15:
        advice.append(Advice("uint8_output", 'dtype="uint8" and normalise on the GPU',
                             f"normalising takes {100 * parts['share']['write']:.0f}% of the loading time and "
                             "uint8 batches are 4x smaller to move"))
    codes = {c.details.get("code") for c in checks}
    if codes & {"single_class_batches", "unmixed_batches"}:
        change = "a shuffling sampler (shuffle=True)" if loader else "shuffle=1"
        advice.append(Advice("shuffle", change, "batches mix the classes (needed for SGD to converge)"))
    if "narrow_shuffle" in codes:
        window = run.shuffle_window or int(p.get("shuffle_window", 1))
        advice.append(Advice("shuffle_window", f"shuffle_window={max(4 * window, 8)} (or a smaller shuffle_block)",
                             "each batch draws from more blocks, so from more of the label order (memory: "
                             "that many blocks are kept)"))
    return advice
