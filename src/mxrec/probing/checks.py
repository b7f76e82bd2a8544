"""The running pipeline's half of the pre-flight checklist, as :class:`~mxrec.doctor.report.Check` s.

Each check's ``details["code"]`` is its machine-readable verdict (``"ok"`` or one of the codes below); the
summary is for people. A check fails on a wrong property of the batches or the run:

* ``dtype``: ``not_contiguous`` (fail), ``float64`` (warn: twice the memory and bandwidth of float32),
  ``not_pinned`` (warn: torch tensors not in pinned memory while CUDA is there);
* ``value_range`` (float output): ``mean_std_0_1_scale`` (fail: a mean/std on the 0-1 scale applied to
  0-255 pixels, or ``ToTensor`` not applied), ``mean_std_255_scale`` (fail: a 0-255 mean/std applied to
  0-1 values), ``scaled_twice`` (fail: values within 0..1/255, ``ToTensor`` twice), ``not_normalized``
  (warn: raw 0-255 floats), ``bgr_mean_order`` (warn: the red and blue means look swapped);
* ``shapes``: ``shape_changes``, ``pad_not_last`` (fail);
* ``labels``: ``label_out_of_range``, ``label_not_finite``; against the dataset's labels
  (:mod:`~mxrec.probing.labels`): ``single_class_batches`` (fail: a dataset packed in class order read without
  shuffling: most batches hold one class), ``unmixed_batches`` (fail: unshuffled, batches mix far fewer
  classes than a shuffled read would), ``narrow_shuffle`` (fail: a block shuffle too narrow for the label
  order), ``label_shares`` (fail: the batches' label shares far from the dataset's). Without the dataset's
  labels (a foreign ``DataLoader``, labels from a ``.lst``, one part of several), most batches holding one
  class only is ``single_class_batches``;
* ``memory``: ``memory_growth`` (fail: resident memory still climbing after the warm-up).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from mxrec.doctor.report import Check, Problem
from mxrec.probing.labels import POOR_MIXING, DatasetLabels, LabelComparison, compare
from mxrec.probing.run import ProbeRun

MIB = 1 << 20
MEMORY_GROWTH = 256 * MIB  # growth after warm-up that fails the memory check ...
MEMORY_STILL_GROWING = 128 * MIB  # ... when the second half of the run still grew this much
SINGLE_CLASS_SHARE = 0.5  # of the batches with MIN_BATCH_FOR_MIX real samples or more
MIN_BATCH_FOR_MIX = 4


def _check(name: str, code: str, summary: str, *, fail: bool = False, warn: bool = False,
           problems: list[Problem] | None = None, **details: Any) -> Check:
    return Check(name, not (fail or warn), summary, problems or [], warning=warn and not fail,
                 details={"code": code, **details})


def check_dtype(run: ProbeRun, cuda: bool) -> Check:
    first = run.batches[0]
    what = f"{first.container} {first.dtype} data, {first.label_dtype} labels"
    if not all(b.contiguous for b in run.batches):
        return _check("dtype", "not_contiguous", f"{what}: not contiguous (a copy on every transfer)", fail=True)
    if first.dtype == "float64":
        return _check("dtype", "float64", f"{what}: float64 doubles memory and bandwidth; use float32", warn=True)
    if cuda and first.pinned is False:
        return _check("dtype", "not_pinned", f"{what}: CUDA is present but batches are not in pinned memory "
                                              "(DataLoader(pin_memory=True))", warn=True)
    return _check("dtype", "ok", what)


def _channel_stats(run: ProbeRun) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    total = sum(b.values for b in run.batches)
    s = sum(b.channel_sum for b in run.batches)
    sq = sum(b.channel_sumsq for b in run.batches)
    mean = s / total
    std = np.sqrt(np.maximum(sq / total - mean ** 2, 0))
    low = np.min([b.channel_min for b in run.batches], axis=0)
    high = np.max([b.channel_max for b in run.batches], axis=0)
    return mean, std, low, high


def check_value_range(run: ProbeRun) -> Check:
    mean, std, low, high = _channel_stats(run)
    stats = {"mean": np.round(mean, 4).tolist(), "std": np.round(std, 4).tolist(),
             "min": np.round(low, 4).tolist(), "max": np.round(high, 4).tolist()}
    numbers = (f"per channel mean {_fmt(mean)}, std {_fmt(std)}, range {float(low.min()):.4g}.."
               f"{float(high.max()):.4g}")
    dtype = run.batches[0].dtype
    if not (dtype.startswith("float") or dtype.startswith("torch.float")):
        return _check("value_range", "ok", f"{dtype} output (raw pixels; normalise on the GPU): {numbers}", **stats)
    if float(high.max()) > 300 or float(low.min()) < -300:
        return _check("value_range", "mean_std_0_1_scale",
                      f"{numbers}: far outside any normalised range -- a mean/std on the 0-1 scale (e.g. 0.485/"
                      "0.229) applied to 0-255 pixels (or ToTensor missing); use 0-255 values (123.68/58.4) or "
                      "scale=1/255", fail=True, **stats)
    if float(high.max()) <= 1 / 255 + 1e-6 and float(low.min()) >= 0 and float(high.max()) > 0:
        return _check("value_range", "scaled_twice", f"{numbers}: every value within 0..1/255 -- divided by 255 "
                                                     "twice (ToTensor applied twice?)", fail=True, **stats)
    if float(std.max()) < 0.05 and float(np.abs(mean).max()) > 1:
        return _check("value_range", "mean_std_255_scale",
                      f"{numbers}: almost constant far from 0 -- a mean/std on the 0-255 scale applied to 0-1 "
                      "values", fail=True, **stats)
    if float(low.min()) >= 0 and float(high.max()) > 2:
        return _check("value_range", "not_normalized", f"{numbers}: raw 0-255 values, not normalised (give "
                                                       "mean_r/g/b and std_r/g/b, or normalise on the GPU)",
                      warn=True, **stats)
    swapped = _bgr_means(run, mean, std)
    if swapped:
        return _check("value_range", "bgr_mean_order", f"{numbers}: {swapped}", warn=True, **stats)
    return _check("value_range", "ok", numbers, **stats)


def _bgr_means(run: ProbeRun, mean: np.ndarray, std: np.ndarray) -> str | None:
    """Why the iterator's red and blue means look given in BGR order (Caffe's), or ``None``."""
    p = run.params
    if run.mode != "iterator" or len(mean) < 3:
        return None
    mean_r, mean_b = float(p.get("mean_r", 0)), float(p.get("mean_b", 0))
    std_r, std_b = float(p.get("std_r", 1)), float(p.get("std_b", 1))
    scale = float(p.get("scale", 1))
    if mean_r <= 0 or mean_b <= 0:
        return None
    raw_r, raw_b = mean[0] * std_r / scale + mean_r, mean[2] * std_b / scale + mean_b
    given = abs(raw_r - mean_r) + abs(raw_b - mean_b)
    swapped = abs(raw_r - mean_b) + abs(raw_b - mean_r)
    if swapped + 10 < given:
        return (f"mean_r={mean_r:g}, mean_b={mean_b:g} but the pixels' red mean is {raw_r:.1f} and blue "
                f"{raw_b:.1f}: the means look given in BGR order; ImageRecordIter's output is RGB")
    return None


def _fmt(values: np.ndarray) -> str:
    return "[" + ", ".join(f"{v:.3g}" for v in values) + "]"


def check_shapes(run: ProbeRun) -> Check:
    shapes = {(b.shape[1:], b.label_shape[1:]) for b in run.batches}
    sizes = {b.shape[0] for b in run.batches}
    problems = []
    if len(shapes) > 1:
        problems.append(Problem("shapes", f"sample/label shapes vary: {sorted(shapes)}"))
    if len(sizes) > 1 and run.mode != "loader":
        problems.append(Problem("batch size", f"batch sizes vary: {sorted(sizes)}"))
    if problems:
        return _check("shapes", "shape_changes", f"shapes change over {len(run.batches)} batches", fail=True,
                      problems=problems)
    if run.epoch_batches and run.batch_indices:
        bad = [i for i, (b, n) in enumerate(zip(run.batches, run.batch_indices, strict=False))
               if b.pad and n != run.epoch_batches - 1]
        if bad:
            return _check("shapes", "pad_not_last", f"pad > 0 on {len(bad)} batch(es) that are not the last of "
                                                    "their epoch", fail=True,
                          problems=[Problem(f"batch {i}", f"pad {run.batches[i].pad}") for i in bad[:10]])
    b = run.batches[0]
    return _check("shapes", "ok", f"data {b.shape}, labels {b.label_shape} in all {len(run.batches)} batches")


def check_labels(run: ProbeRun, num_classes: int | None) -> Check:
    """The ``labels`` check: finite, in range, and mixed as a shuffled read of the dataset would mix them."""
    labels = [b.labels for b in run.batches if b.labels.size]
    if not labels:
        return _check("labels", "ok", "no labels")
    flat = np.concatenate([np.asarray(x, np.float64).reshape(-1) for x in labels])
    if not np.all(np.isfinite(flat)):
        return _check("labels", "label_not_finite", f"{int((~np.isfinite(flat)).sum())} label(s) are NaN or "
                                                     "infinite", fail=True)
    classes = bool(np.all(flat == np.round(flat)))
    if classes and num_classes is not None:
        out = flat[(flat < 0) | (flat >= num_classes)]
        if out.size:
            return _check("labels", "label_out_of_range", f"{out.size} label(s) outside [0, {num_classes}): "
                                                           f"{sorted(set(out.tolist()))[:5]}", fail=True)
    distinct = np.unique(flat)
    if not classes or (labels[0].ndim > 1 and labels[0].shape[1] > 1):
        return _check("labels", "ok", f"{distinct.size} distinct label value(s) over {len(labels)} batches",
                      classes=int(distinct.size))
    data = run.dataset_labels
    if data is not None and np.all(data.labels == np.round(data.labels)):
        found = compare(labels, data)
        if found.unknown * 2 <= found.samples:  # the batches' labels are the dataset's
            return _compared(run, labels, distinct.size, data, found)
    return _batches_alone(labels, distinct.size, run.labels_note)


def _mix_text(labels: list[np.ndarray], classes: int, per_batch: float | None) -> str:
    mixed = f", {per_batch:.1f} per batch" if per_batch is not None else ""
    return f"batches: {classes} distinct label(s) over {len(labels)} batches ({sum(map(len, labels))} samples{mixed})"


def _compared(run: ProbeRun, labels: list[np.ndarray], classes: int, data: DatasetLabels,
              found: LabelComparison) -> Check:
    """The verdict of :func:`~mxrec.probing.labels.compare` (see the module docstring)."""
    details = {"classes": classes, "dataset": {"classes": found.classes, "source": data.source,
                                               "sampled": len(data.labels), "records": data.total,
                                               "every_record": data.exact},
               "comparison": found.to_dict(), "single_class_batches": found.single_class,
               "classes_per_batch": None if found.per_batch is None else round(found.per_batch, 2)}
    text = (f"{_mix_text(labels, classes, found.per_batch)}; the dataset holds {found.classes} classes "
            f"({data.describe()}): the batches cover {found.covered} of them")
    shuffled = f"a shuffled read of {found.samples} samples would cover {found.expected_covered:.1f}"
    if found.expected_per_batch is not None:
        shuffled += f", {found.expected_per_batch:.1f} per batch"
    if found.mixing_ratio is not None:
        shuffled += f": mixing {found.mixing_ratio:.2f}x a global shuffle's"
    order = "the records are stored in label order" if found.stored_in_order else "labels come in runs"
    shares = (f"the batches' label shares are {found.distance:.2f} (total variation) from the dataset's, where a "
              f"shuffled read gives {found.chance_distance:.2f} (at most {found.highest_distance:.2f})")
    narrow = (f"a block shuffle too narrow for the label order -- {order}, and the batches draw from "
              f"{run.shuffle_window or run.params.get('shuffle_window', 1)} block(s) of {run.shuffle_block} records "
              "at a time: widen "
              "shuffle_window, shorten shuffle_block, or repack in random order")
    off = found.mixing_off or found.shares_off
    # read in label order: the records lie in runs of a label, and the batches hold few of them or runs too
    in_order = found.stored_in_order and (found.mixing_off or found.covered <= found.expected_covered / 2)
    if off and run.shuffle_block and found.stored_in_order:
        return _check("labels", "narrow_shuffle", f"{text} ({shuffled}); {shares}: {narrow}", fail=True, **details)
    if off and (in_order or found.mixing_off):
        cause = (f"the batches are read in label order ({order})" if in_order
                 else "the batches hold runs of labels: they are not shuffled")
        if in_order and run.shuffle_block is None and run.mode == "iterator":
            cause = "the data is read in label order (shuffle=0 on a class-sorted set)"
        fix = "a shuffling sampler" if run.mode == "loader" else "set shuffle=1"
        code = "single_class_batches" if found.single_class * 2 >= len(labels) else "unmixed_batches"
        return _check("labels", code, f"{text} ({shuffled}): {cause} -- {fix} (or repack in random order)",
                      fail=True, **details)
    if found.shares_off:
        return _check("labels", "label_shares", f"{text}; {shares}: a mixture's shares, a weighted sampler or a "
                                                "subset off", fail=True, **details)
    if run.shuffle_block and found.stored_in_order and (found.mixing_ratio or 1.0) < POOR_MIXING:
        return _check("labels", "narrow_shuffle", f"{text} ({shuffled}): the shuffle mixes poorly for the label "
                                                  f"order (below {POOR_MIXING}x): {narrow}", warn=True, **details)
    return _check("labels", "ok", f"{text} ({shuffled}); shares {found.distance:.2f} from the dataset's "
                                  f"(a shuffled read: {found.chance_distance:.2f})", **details)


def _batches_alone(labels: list[np.ndarray], classes: int, note: str) -> Check:
    """Without the dataset's labels: most batches holding one class only fails."""
    why = f" (not compared with the dataset: {note})" if note else ""
    if classes < 2:
        return _check("labels", "ok", f"{classes} distinct label value(s) over {len(labels)} batches{why}",
                      classes=classes)
    mixable = [x for x in labels if len(x) >= MIN_BATCH_FOR_MIX]
    single = [i for i, x in enumerate(mixable) if np.unique(x).size == 1]
    per_batch = float(np.mean([np.unique(x).size for x in mixable])) if mixable else 0.0
    details = {"classes": classes, "single_class_batches": len(single), "batches": len(mixable),
               "classes_per_batch": round(per_batch, 2)}
    if mixable and len(single) >= SINGLE_CLASS_SHARE * len(mixable):
        return _check("labels", "single_class_batches",
                      f"{len(single)} of {len(mixable)} batches hold one class only (of {classes} seen): the "
                      f"records are in class order and are not shuffled -- set shuffle=1 (or repack in random "
                      f"order){why}", fail=True, **details)
    return _check("labels", "ok", f"{classes} classes; {per_batch:.1f} classes per batch on average{why}",
                  **details)


def check_memory(run: ProbeRun) -> Check:
    machine = run.machine
    first = run.batches[-1]
    try:
        batch_bytes = math.prod(first.shape) * np.dtype(first.dtype.replace("torch.", "")).itemsize
    except TypeError:
        batch_bytes = 0
    prefetch_bytes = batch_bytes * run.prefetch
    details = {"prefetch_batches": run.prefetch, "prefetch_bytes": prefetch_bytes}
    if machine is None or machine.rss_start is None or machine.rss_end is None:
        return _check("memory", "ok", "resident memory not readable here", **details)
    growth = machine.rss_end - machine.rss_start
    series = [s.rss for s in machine.samples if s.rss is not None]
    late = series[-1] - series[len(series) // 2] if len(series) >= 4 else growth
    details.update(rss_start=machine.rss_start, rss_end=machine.rss_end, rss_peak=machine.rss_peak,
                   growth=growth)
    text = (f"resident {machine.rss_start / MIB:.0f} -> {machine.rss_end / MIB:.0f} MiB after warm-up (peak "
            f"{(machine.rss_peak or 0) / MIB:.0f} MiB); prefetch holds {run.prefetch} batch(es) of "
            f"{batch_bytes / MIB:.1f} MiB")
    if growth > MEMORY_GROWTH and late > MEMORY_STILL_GROWING:
        return _check("memory", "memory_growth", f"{text}: still growing ({late / MIB:.0f} MiB in the second half) "
                                                  "-- batches kept alive, or a leak", fail=True, **details)
    return _check("memory", "ok", text, **details)


def run_checks(run: ProbeRun, *, num_classes: int | None = None, cuda: bool = False) -> list[Check]:
    """Every check that applies to ``run`` (a bare record read has no batches to check but memory)."""
    if run.mode == "records" or not run.batches:
        return []
    return [check_dtype(run, cuda), check_value_range(run), check_shapes(run), check_labels(run, num_classes),
            check_memory(run)]
