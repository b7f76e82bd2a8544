""":func:`probe`: run a loader configuration briefly, check its batches, say what bounds it and what to change.

The result, :class:`ProbeResult`, holds the checks as a :class:`~mxrec.doctor.report.Report` (the same
pass/warn/fail rules as ``verify``: a bound or a recommendation never fails), the measurements, the
recommendations and, with ``sweep``, one row per variant with the fastest marked.
"""

from __future__ import annotations

import itertools
import sys
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mxrec.doctor.html import fragment
from mxrec.doctor.report import Report
from mxrec.errors import ParameterError
from mxrec.probing.advice import Advice, breakdown, find_bound, recommend
from mxrec.probing.checks import run_checks
from mxrec.probing.html import probe_sections, probe_title
from mxrec.probing.run import ProbeRun, run_probe


@dataclass
class ProbeResult:
    """Checks (:attr:`report`), measurements (:attr:`run`), :attr:`advice` and the :attr:`sweep` table.

    Parameters
    ----------
    report
        The checks, with the bound among them.
    run
        The measurements of the run.
    advice
        The recommendations, what to change and what it should give.
    sweep
        With :func:`probe`'s ``sweep``: a row per variant (its parameters, img/s, bound), the fastest marked
        ``best``.
    """

    report: Report
    run: ProbeRun
    advice: list[Advice]
    sweep: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether no check failed (a bound or a recommendation never fails)."""
        return self.report.ok

    @property
    def bound(self) -> str:
        """The bound's code (``storage``, ``decode``, ``python``, ``consumer``)."""
        return self.report.check("bound").details["code"]

    def _repr_html_(self) -> str:
        """The checks, bound, recommendations, timings and a sample batch, in Jupyter (as ``probe --html``)."""
        return fragment(probe_title(self), probe_sections(self))

    def codes(self) -> dict[str, str]:
        """Each check's verdict.

        Returns
        -------
        dict of str to str
            ``{check name: verdict code}``.
        """
        return {c.name: c.details.get("code", "ok") for c in self.report.checks}

    def throughput(self) -> dict[str, Any]:
        """How fast the run went.

        Returns
        -------
        dict
            img/s overall (``images_per_second``), per round (``rounds``: about a second or 5 batches), their
            ``spread`` and ``std``, and ``mb_per_second``; the batches, samples, seconds and warm-up batches.
        """
        run = self.run
        rounds, last_t, count = [], 0.0, 0
        for i, (t, samples, _) in enumerate(run.batch_times):
            count += samples
            if t - last_t >= 1.0 or (i + 1) % 5 == 0 or i == len(run.batch_times) - 1:
                if t > last_t:
                    rounds.append(round(count / (t - last_t), 1))
                last_t, count = t, 0
        nbytes = sum(b for _, _, b in run.batch_times)
        return {"images_per_second": round(run.images_per_second, 1), "rounds": rounds,
                "spread": [min(rounds), max(rounds)] if rounds else [],
                "std": round(float(np.std(rounds)), 1) if rounds else 0.0,
                "mb_per_second": round(nbytes / max(run.seconds, 1e-9) / 1e6, 2),
                "batches": len(run.batch_times), "samples": run.samples, "seconds": round(run.seconds, 2),
                "warmup_batches": run.warmup}

    def to_dict(self) -> dict:
        """The result for JSON (``probe --json``).

        Returns
        -------
        dict
            The report's checks, the parameters, the verdict, the throughput, the stages, the machine, the stored
            images, the remote requests, the recommendations and the sweep.
        """
        run = self.run
        machine = run.machine.to_dict() if run.machine else None
        images = {k: v for k, v in run.images.items() if k != "sizes"}
        return {**self.report.to_dict(), "mode": run.mode,
                "params": {k: [repr(step) for step in v] if k == "aug_list" else v  # steps are objects: named
                           for k, v in run.params.items() if k != "storage_options"},
                "verdict": {"bound": self.bound, "codes": self.codes(),
                            "recommendations": [a.code for a in self.advice]},
                "throughput": self.throughput(), "stages": breakdown(run), "stages_by_thread": run.stages,
                "machine": machine, "images": images, "remote": run.remote,
                "recommendations": [a.to_dict() for a in self.advice], "sweep": self.sweep}

    def format_text(self, max_problems: int = 10) -> str:
        """The result for people, as ``mxrec probe`` prints it.

        Parameters
        ----------
        max_problems
            The problems listed per check, at most.

        Returns
        -------
        str
            The checks, then the throughput, the stages, the machine, the recommendations and the sweep.
        """
        run = self.run
        th = self.throughput()
        parts = breakdown(run)
        lines = [self.report.format_text(max_problems)]
        low, high = th["spread"] or [0, 0]
        unit = "records/s" if run.mode == "records" else "img/s"
        lines.append(f"  throughput: {th['images_per_second']:.0f} {unit} ({th['mb_per_second']:.1f} MB/s of batches) "
                     f"over {th['batches']} batches in {th['seconds']:.1f} s after {run.warmup} warm-up batch(es); "
                     f"rounds {low:.0f}..{high:.0f} {unit}")
        where = "" if parts["measured"] == "run" else " (measured in this process beside the workers)"
        stages = ", ".join(f"{s} {ms:.2f}" for s, ms in parts["ms_per_sample"].items())
        if run.mode != "records":
            lines.append(f"  per sample (ms of thread time){where}: {stages}; consumer waited "
                         f"{100 * parts['wait_share']:.0f}% of the run")
        machine = run.machine
        if machine is not None:
            cpu = machine.cpu_per_core or []
            disk = (f"disk {machine.device}: {(machine.disk_read_bytes or 0) / 1e6:.1f} MB read, "
                    f"{machine.disk_util or 0:.0f}% busy" if machine.device else "no local block device")
            fetched = parts["fetched_bytes"]
            if machine.device and fetched:
                cached = max(0.0, 1 - (machine.disk_read_bytes or 0) / fetched)
                disk += f"; page cache served ~{100 * cached:.0f}% of {fetched / 1e6:.1f} MB of records"
            lines.append(f"  machine: CPU per core {cpu}% (process {machine.process_cpu:.1f} cores); {disk}")
            if machine.gpu_memory is not None:
                lines.append(f"  GPU memory allocated: {machine.gpu_memory / 1e6:.0f} MB")
        if run.remote is not None:
            rate = run.remote["requests"] / max(run.seconds, 1e-9)
            lookups = run.remote["cache_hits"] + run.remote["cache_misses"]
            hit = f", cache hits {100 * run.remote['cache_hits'] / lookups:.0f}%" if lookups else ""
            mb_s = parts["fetched_bytes"] / max(run.seconds, 1e-9) / 1e6
            lines.append(f"  remote: {run.remote['requests']} requests ({rate:.1f}/s), {mb_s:.1f} MB/s of records{hit}")
        images = run.images
        if images.get("median_height"):
            lines.append(f"  stored images: median {images['median_width']}x{images['median_height']} px, "
                         f"{images['median_bytes'] / 1e3:.0f} kB ({', '.join(images['formats'])})")
        for advice in self.advice:
            lines.append(f"  recommend [{advice.code}]: {advice.change} -- {advice.effect}")
        if self.sweep:
            lines.append(format_sweep(self.sweep))
        return "\n".join(lines)


def format_sweep(rows: list[dict[str, Any]]) -> str:
    """The sweep as a table, the fastest marked ``*``."""
    names = list(rows[0]["variant"])
    header = "  " + "  ".join(f"{n:>20}" for n in names) + f"  {'img/s':>8}  bound"
    lines = ["  sweep:", header]
    for row in rows:
        mark = "*" if row["best"] else " "
        cells = "  ".join(f"{row['variant'][n]!s:>20}" for n in names)
        lines.append(f"{mark} {cells}  {row['images_per_second']:>8.1f}  {row['bound']}")
    return "\n".join(lines)


def _cuda() -> bool:
    torch = sys.modules.get("torch")
    try:
        return bool(torch is not None and torch.cuda.is_available())
    except Exception:  # a broken CUDA setup: as if absent
        return False


def analyse(run: ProbeRun, *, num_classes: int | None = None) -> ProbeResult:
    """Checks, bound and advice for a measured run."""
    checks = run_checks(run, num_classes=num_classes, cuda=_cuda())
    bound = find_bound(run)
    report = Report(run.dataset, [*checks, bound])
    return ProbeResult(report, run, recommend(run, bound, checks))


def probe(dataset: Any, *, batches: int | None = None, seconds: float | None = None, warmup: int = 2,
          step_time: float = 0.0, records: bool = False, num_classes: int | None = None,
          sweep: dict[str, list[Any]] | None = None, **params: Any) -> ProbeResult:
    """Run ``dataset`` (a path, URL or shard set with ``ImageRecordIter`` parameters, or a torch ``DataLoader``)
    briefly and diagnose it (:mod:`mxrec.probing`).

    Parameters
    ----------
    dataset
        A path, URL or shard set (read with ``ImageRecordIter`` and ``params``), or a torch ``DataLoader``.
    batches
        Stop after this many measured batches, or at ``seconds``, whichever first.
    seconds
        Stop after this many seconds. Neither given: 50 batches or 20 s, whichever first.
    warmup
        Unmeasured batches before the measurement.
    step_time
        Seconds a simulated training step takes per batch.
    records
        A bare record read instead of batches.
    num_classes
        Labels must be below it.
    sweep
        ``{parameter: [values]}``: every combination run the same way and tabulated (:attr:`ProbeResult.sweep`).
    **params
        ``ImageRecordIter`` parameters.

    Returns
    -------
    ProbeResult
        The checks, measurements, recommendations and the sweep table.

    Raises
    ------
    ParameterError
        ``batches`` below 1, ``seconds`` not above 0, ``warmup`` or ``step_time`` negative, ``params`` or
        ``sweep`` given with a ``DataLoader``, or no records to read.
    """
    run = run_probe(dataset, batches=batches, seconds=seconds, warmup=warmup, step_time=step_time,
                    records=records, **params)
    result = analyse(run, num_classes=num_classes)
    if sweep:
        if run.mode == "loader":
            raise ParameterError("sweep varies ImageRecordIter parameters; build one DataLoader per variant")
        names = list(sweep)
        for values in itertools.product(*(sweep[n] for n in names)):
            variant = dict(zip(names, values, strict=True))
            other = run_probe(dataset, batches=batches, seconds=seconds, warmup=warmup, step_time=step_time,
                              records=records, **{**params, **variant})
            bound = find_bound(other).details["code"]
            result.sweep.append({"variant": variant, "images_per_second": round(other.images_per_second, 1),
                                 "bound": bound, "best": False})
        best = max(result.sweep, key=lambda row: row["images_per_second"])
        best["best"] = True
    return result
