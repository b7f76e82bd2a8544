"""A :class:`~mxrec.probing.probe.ProbeResult` as one self-contained HTML page (``mxrec probe --html``).

Drawn with :mod:`mxrec.doctor.html`'s kit: the checks, the stage breakdown, throughput over time, CPU and
disk over time, a sample batch as images (un-normalised with the run's mean/std/scale; a ``DataLoader``'s
batch stretched to 0-255 per image), the recommendations and the sweep table.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from mxrec.doctor.html import bar_chart, checks_table, escape, figure, image_uri, line_chart, page, table
from mxrec.probing.advice import breakdown
from mxrec.probing.run import ProbeRun


def unnormalized(run: ProbeRun) -> list[np.ndarray]:
    """The sample batch as HWC RGB ``uint8`` images."""
    sample = run.sample
    if sample is None or sample.ndim != 4:
        return []
    data = np.asarray(sample, np.float64)
    p = run.params
    if run.mode == "iterator" and str(sample.dtype) not in ("uint8",):
        channels = data.shape[1]
        names = ("r", "g", "b", "a")[:channels] if channels > 1 else ("r",)
        mean = np.array([float(p.get(f"mean_{c}", 0)) for c in names]).reshape(1, -1, 1, 1)
        std = np.array([float(p.get(f"std_{c}", 1)) for c in names]).reshape(1, -1, 1, 1)
        scale = float(p.get("scale", 1))
        data = data * std / scale + mean if str(sample.dtype) != "int8" else data + np.round(mean)
    elif run.mode == "loader" and str(sample.dtype) != "uint8":
        low = data.min(axis=(1, 2, 3), keepdims=True)
        high = data.max(axis=(1, 2, 3), keepdims=True)
        data = (data - low) * 255 / np.maximum(high - low, 1e-12)
    images = np.clip(np.round(data), 0, 255).astype(np.uint8).transpose(0, 2, 3, 1)
    return [img[..., 0] if img.shape[2] == 1 else img[..., :3] for img in images]


def probe_page(result: Any) -> str:
    """The page of a :class:`~mxrec.probing.probe.ProbeResult` (see the module docstring).

    Parameters
    ----------
    result
        What :func:`~mxrec.probing.probe.probe` returned.

    Returns
    -------
    str
        The HTML document.
    """
    return page(probe_title(result), probe_sections(result))


def probe_title(result: Any) -> str:
    """``mxrec probe: <dataset>``."""
    return f"mxrec probe: {os.path.basename(result.run.dataset) or result.run.dataset}"


def probe_sections(result: Any) -> list[str]:
    """The page's sections (a notebook shows them as one block: ``ProbeResult._repr_html_``)."""
    run = result.run
    parts = breakdown(run)
    th = result.throughput()
    sections = [checks_table(result.report),
                f"<p id=\"bound\">Bound: <b>{escape(result.bound)}</b> -- "
                f"{escape(result.report.check('bound').summary)}</p>"]
    if result.advice:
        items = "".join(f"<li data-code=\"{escape(a.code)}\"><b>{escape(a.change)}</b>: {escape(a.effect)}</li>"
                        for a in result.advice)
        sections.append(f"<h2>Recommendations</h2><ul id=\"recommendations\">{items}</ul>")
    ms = parts["ms_per_sample"]
    where = "" if parts["measured"] == "run" else " (measured in this process beside the workers)"
    sections.append(f"<h2>Where the time goes{escape(where)}</h2>"
                    + bar_chart(list(ms.values()), list(ms), label="ms per sample by stage", unit=" ms")
                    + f"<p>The consumer waited {100 * parts['wait_share']:.0f}% of the run for its next batch.</p>")
    sections.append(_threads(run))
    rates = _rolling_rate(run)
    sections.append(f"<h2>Throughput: {th['images_per_second']:.0f} img/s</h2>"
                    f"<p>{th['batches']} batches in {th['seconds']:.1f} s after {run.warmup} warm-up batch(es) "
                    f"(not measured); {th['mb_per_second']:.1f} MB/s of batches.</p>"
                    + line_chart({"img/s (5 batches)": rates}, label="throughput over time", y_unit=" img/s"))
    machine = run.machine
    if machine is not None and machine.samples:
        cpu = {f"cpu{i}": [(s.t, s.cpu[i]) for s in machine.samples if s.cpu and i < len(s.cpu)]
               for i in range(machine.cores or 0)}
        sections.append("<h2>Machine</h2>" + line_chart(cpu, label="CPU busy per core", y_unit=" %"))
        disk = [(s.t, s.disk_mb_s) for s in machine.samples if s.disk_mb_s is not None]
        if disk:
            sections.append(line_chart({f"{machine.device} MB/s": disk}, label="disk reads", y_unit=" MB/s"))
        else:
            sections.append("<p>No local block device for the data (remote, tmpfs or overlay).</p>")
    images = unnormalized(run)
    if images:
        sections.append("<h2>A batch, un-normalised</h2><div id=\"sample\">"
                        + "".join(figure(image_uri(img, 128), f"sample {i}") for i, img in enumerate(images))
                        + "</div>")
    if result.sweep:
        names = list(result.sweep[0]["variant"])
        rows = [[*(row["variant"][n] for n in names), row["images_per_second"], row["bound"]] for row in result.sweep]
        sections.append("<h2>Sweep</h2>" + table([*names, "img/s", "bound"], rows,
                                                 marked=[row["best"] for row in result.sweep], element_id="sweep"))
    return sections


def _threads(run: ProbeRun) -> str:
    rows: list[list[Any]] = []
    for thread, stages in sorted(run.stages.items()):
        row = [thread]
        for stage in ("fetch", "decode", "augment", "write", "wait"):
            seconds, _ = stages.get(stage, (0.0, 0))
            row.append(f"{seconds:.3f}")
        rows.append(row)
    if not rows:
        return ""
    return "<h3>Seconds per thread</h3>" + table(["thread", "fetch", "decode", "augment", "write", "wait"], rows)


def _rolling_rate(run: ProbeRun, window: int = 5) -> list[tuple[float, float]]:
    """img/s over the last ``window`` batches, at each batch (batches arrive in bursts: single ones mislead)."""
    points = []
    times = [0.0] + [t for t, _, _ in run.batch_times]
    counts = np.cumsum([0] + [n for _, n, _ in run.batch_times])
    for i in range(1, len(times)):
        j = max(0, i - window)
        points.append((times[i], float(counts[i] - counts[j]) / max(times[i] - times[j], 1e-9)))
    return points
