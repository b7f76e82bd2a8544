"""Summaries and checks of shard sets and mixtures: ``mxrec info`` and ``mxrec verify`` per file and in total.

:func:`info` and :func:`verify` take anything :func:`mxrec.datasets.shard_set.resolve_dataset`
names, a mixture (``NAME.mix.json`` or :func:`~mxrec.datasets.mixture.mix`'s) or a dataset already
opened (the files it reads, with its storage settings: :func:`~mxrec.datasets.opening.dataset_files`).
One file (local or a URL) gets the usual
:class:`~mxrec.doctor.dataset_info.DatasetInfo` / :class:`~mxrec.doctor.report.Report`;
a shard set gets a :class:`ShardSetInfo` / :class:`ShardSetReport`: one per
shard, the totals, the duplicates and leakage checks over the whole set, and,
with a manifest, a ``manifest`` check that every shard exists and holds the
records and bytes the manifest says; a mixture a :class:`MixtureInfo` / :class:`MixtureReport`: what each
source gives an epoch (records, weight, share, passes, label offset) and each source's own.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mxrec.datasets.mixture import Mixture, MixtureError, parse_mixture_file, passes_text
from mxrec.datasets.opening import as_mixture, dataset_files, dataset_name, is_mixture
from mxrec.datasets.shard_set import Shard
from mxrec.doctor.check_leakage import check_set_duplicates, check_set_leakage
from mxrec.doctor.contents import read_contents
from mxrec.doctor.dataset_info import DatasetInfo, dataset_info
from mxrec.doctor.html import checks_table, escape, fragment, table
from mxrec.doctor.report import Check, Problem, Report
from mxrec.doctor.verify_dataset import verify_dataset
from mxrec.errors import ManifestError, MxrecError
from mxrec.format.idx import KeyType
from mxrec.storage.files import exists
from mxrec.storage.filesystem import StorageOptions


def _name(spec: Any, manifest: str | None) -> str:
    return manifest if manifest is not None else dataset_name(spec)


def manifest_check(shards: list[Shard], found: list[tuple[int, int] | None], manifest: str) -> Check:
    """Whether every shard exists and holds what ``manifest`` says; ``found`` is ``(records, bytes)`` or None."""
    problems = []
    for number, (shard, facts) in enumerate(zip(shards, found, strict=True)):
        if facts is None:
            problems.append(Problem(f"shard {number}", f"{shard.rec} is missing"))
            continue
        records, size = facts
        if shard.records is not None and records != shard.records:
            problems.append(Problem(f"shard {number}", f"{shard.rec}: {records} records, the manifest says "
                                                       f"{shard.records}"))
        if shard.rec_bytes is not None and size != shard.rec_bytes:
            problems.append(Problem(f"shard {number}", f"{shard.rec}: {size} bytes, the manifest says "
                                                       f"{shard.rec_bytes}"))
    summary = (f"{len(problems)} shard(s) differ from {manifest}" if problems
               else f"{len(shards)} shard(s) as {manifest} lists them")
    return Check("manifest", not problems, summary, problems)


@dataclass
class ShardSetInfo:
    """:class:`~mxrec.doctor.dataset_info.DatasetInfo` of every shard, the totals, and the manifest check."""

    path: str
    shards: list[DatasetInfo]
    missing: list[str] = field(default_factory=list)
    manifest: Check | None = None

    @property
    def records(self) -> int:
        return sum(s.records for s in self.shards)

    @property
    def bytes(self) -> int:
        return sum(s.bytes for s in self.shards)

    @property
    def damaged(self) -> bool:
        """Whether a shard is damaged or missing, or the shards differ from the manifest."""
        return (any(s.damaged for s in self.shards) or bool(self.missing)
                or (self.manifest is not None and not self.manifest.ok))

    def _repr_html_(self) -> str:
        """A row per shard, the totals and the manifest, in Jupyter."""
        rows = [[s.path, s.records, s.bytes, f"{s.index_status}", "damaged" if s.damaged else "sound"]
                for s in self.shards] + [[m, "-", "-", "-", "missing"] for m in self.missing]
        rows.append([f"total: {len(self.shards) + len(self.missing)} shards", self.records, self.bytes, "", ""])
        manifest = "" if self.manifest is None else f"<p>manifest: {escape(self.manifest.summary)}</p>"
        verdict = f"<p><b class=\"{'fail' if self.damaged else 'ok'}\">{'damaged' if self.damaged else 'sound'}</b></p>"
        return fragment(f"mxrec info: {self.path}", [verdict, table(["shard", "records", "bytes", "index", ""], rows,
                                                                  element_id="shards"), manifest])

    def to_dict(self) -> dict:
        return {"path": self.path, "shards": [s.to_dict() for s in self.shards], "missing": self.missing,
                "records": self.records, "bytes": self.bytes,
                "manifest": None if self.manifest is None else self.manifest.to_dict()}

    def format_text(self) -> str:
        lines = []
        for number, shard in enumerate(self.shards):
            lines.append(f"--- shard {number}")
            lines.append(shard.format_text())
        lines.append(f"--- total: {len(self.shards) + len(self.missing)} shards, {self.records} records, "
                     f"{self.bytes} bytes")
        lines += [f"missing:           {m}" for m in self.missing]
        if self.manifest is not None:
            lines.append(f"manifest:          {self.manifest.summary}")
            lines += [f"                   {p.where}: {p.what}" for p in self.manifest.problems]
        return "\n".join(lines)


@dataclass
class ShardSetReport:
    """A :class:`~mxrec.doctor.report.Report` per shard, and the manifest check; ``ok`` when all are."""

    path: str
    reports: list[Report]
    manifest: Check | None = None
    checks: list[Check] = field(default_factory=list)  # over the whole set: duplicates, leakage

    @property
    def ok(self) -> bool:
        return (all(r.ok for r in self.reports) and (self.manifest is None or self.manifest.ok)
                and all(c.ok for c in self.checks))

    @property
    def clean(self) -> bool:
        return self.ok and all(r.clean for r in self.reports)

    def _repr_html_(self) -> str:
        """The verdict, the manifest, the checks over the whole set and every shard's, in Jupyter."""
        return fragment(f"mxrec verify: {self.path}", [checks_table(self)])

    def to_dict(self) -> dict:
        return {"path": self.path, "ok": self.ok, "shards": [r.to_dict() for r in self.reports],
                "manifest": None if self.manifest is None else self.manifest.to_dict(),
                "checks": [c.to_dict() for c in self.checks]}

    def format_text(self, max_problems: int = 10) -> str:
        lines = [r.format_text(max_problems) for r in self.reports]
        records = sum(r.check("framing").details.get("records", 0) for r in self.reports
                      if any(c.name == "framing" for c in r.checks))
        failed = sum(not r.ok for r in self.reports)
        for check in ([self.manifest] if self.manifest is not None else []) + self.checks:
            name = check.name if check is self.manifest else f"{check.name} (whole set)"
            lines.append(f"  [{'ok' if check.ok else 'FAIL':>4}] {name}: {check.summary}")
            lines += [f"         {p.where}: {p.what}" for p in check.problems[:max_problems]]
        lines.append(f"total: {len(self.reports)} shard(s), {records} records, {failed} shard(s) failed: "
                     f"{'OK' if self.ok else 'FAILED'}")
        return "\n".join(lines)


@dataclass
class MixtureInfo:
    """``mxrec info`` of a mixture: what each source gives an epoch, and each source's own summary."""

    path: str
    mixture: Mixture
    sources: list[DatasetInfo | ShardSetInfo]

    @property
    def records(self) -> int:
        return sum(s.records for s in self.sources)

    @property
    def damaged(self) -> bool:
        """Whether a source is damaged."""
        return any(s.damaged for s in self.sources)

    def rows(self) -> list[list[Any]]:
        """Per source: path, records, weight, share per epoch, passes, label offset."""
        return [[row["path"], row["records"], f"{row['weight']:g}", row["share"], passes_text(row["passes"]),
                 row["label_offset"]] for row in self.mixture.describe_sources()]

    def _repr_html_(self) -> str:
        verdict = f"<p><b class=\"{'fail' if self.damaged else 'ok'}\">{'damaged' if self.damaged else 'sound'}</b></p>"
        head = (f"<p>{len(self.sources)} sources, {self.mixture.samples_per_epoch} samples per epoch</p>")
        return fragment(f"mxrec info: {self.path}", [verdict, head, table(
            ["source", "records", "weight", "per epoch", "passes", "label offset"], self.rows(),
            element_id="sources")])

    def to_dict(self) -> dict:
        return {"path": self.path, "samples_per_epoch": self.mixture.samples_per_epoch,
                "seed": self.mixture.seed, "sources": [{**row, "info": source.to_dict()} for row, source in
                                                       zip(self.mixture.describe_sources(), self.sources, strict=True)]}

    def format_text(self) -> str:
        lines = [f"mixture {self.path}: {len(self.sources)} sources, {self.mixture.samples_per_epoch} samples per "
                 f"epoch, seed {self.mixture.seed}"]
        header = ["source", "records", "weight", "per epoch", "passes", "label offset"]
        rows = [header, *[[str(c) for c in row] for row in self.rows()]]
        widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
        lines += ["  " + "  ".join(c.ljust(w) if i in (0, 4) else c.rjust(w)
                                   for i, (c, w) in enumerate(zip(r, widths, strict=True))).rstrip() for r in rows]
        for number, (name, source) in enumerate(zip(self.mixture.names, self.sources, strict=True)):
            lines.append(f"--- source {number}: {name}")
            lines.append(source.format_text())
        return "\n".join(lines)


@dataclass
class MixtureReport:
    """``mxrec verify`` of a mixture: each source's report; ``ok`` when all are."""

    path: str
    names: list[str]  # the sources'
    reports: list[Report | ShardSetReport]
    mixing: Check  # whether the sources mix as the mixture says (weights, label offsets)

    @property
    def ok(self) -> bool:
        return self.mixing.ok and all(r.ok for r in self.reports)

    @property
    def clean(self) -> bool:
        return self.ok and all(r.clean for r in self.reports)

    @property
    def checks(self) -> list[Check]:
        """The checks over the whole mixture (each source's are in its report)."""
        return [self.mixing]

    def _repr_html_(self) -> str:
        return fragment(f"mxrec verify: {self.path}", [checks_table(r) for r in self.reports])

    def to_dict(self) -> dict:
        return {"path": self.path, "ok": self.ok, "mixture": self.mixing.to_dict(),
                "sources": [r.to_dict() for r in self.reports]}

    def format_text(self, max_problems: int = 10) -> str:
        lines = []
        for number, (name, report) in enumerate(zip(self.names, self.reports, strict=True)):
            lines.append(f"--- source {number}: {name}")
            lines.append(report.format_text(max_problems))
        failed = sum(not r.ok for r in self.reports)
        lines.append(f"  [{'ok' if self.mixing.ok else 'FAIL':>4}] mixture: {self.mixing.summary}")
        lines.append(f"total: {len(self.reports)} source(s), {failed} failed: {'OK' if self.ok else 'FAILED'}")
        return "\n".join(lines)


def _mixed(mixture: Mixture) -> str:
    return (f"{len(mixture.sources)} sources, {mixture.samples_per_epoch} samples per epoch (shares "
            f"{', '.join(map(str, mixture.shares))}), label offsets {mixture.label_offsets}")


def _mixture_name(mixture: Mixture, spec: Any) -> str:
    return os.fspath(spec) if isinstance(spec, (str, os.PathLike)) else mixture.path


def info(spec: Any, idx_path: str | os.PathLike | None = None, key_type: KeyType = int,
         storage_options: StorageOptions = None) -> DatasetInfo | ShardSetInfo | MixtureInfo:
    """``mxrec info``: one file's :class:`DatasetInfo`, every shard's and the totals, or a mixture's sources and
    each source's own (see the module docstring).

    Parameters
    ----------
    spec
        The dataset: a ``.rec`` (a path or URL), a shard set, a mixture or a dataset already opened.
    idx_path
        The ``.idx`` of a single file (a shard set's shards and a mixture's sources have their own); default: the
        one beside it, if present.
    key_type
        Converts the ``.idx`` keys of every file (``int`` or ``str``).
    storage_options
        fsspec options for URLs.

    Returns
    -------
    DatasetInfo or ShardSetInfo or MixtureInfo
        The summary of one file, of a shard set or of a mixture.

    Raises
    ------
    MixtureError
        ``idx_path`` given for a mixture.
    ManifestError
        ``idx_path`` given for a shard set.
    """
    if is_mixture(spec):
        if idx_path is not None:
            raise MixtureError(f"{_name(spec, None)}: --idx names the .idx of one file; a mixture's sources each "
                               "use their own")
        mixture = as_mixture(spec, storage_options)
        return MixtureInfo(_mixture_name(mixture, spec), mixture,
                           [info(source, None, key_type) for source in mixture.sources])
    shards, manifest, storage_options = dataset_files(spec, storage_options)
    if len(shards) == 1 and manifest is None:
        return dataset_info(shards[0].rec, idx_path, key_type, storage_options)
    if idx_path is not None:
        raise ManifestError(manifest, "--idx names the .idx of one file, not of a shard set")
    infos, missing, found = [], [], []
    for shard in shards:
        if not exists(shard.rec, storage_options):
            missing.append(shard.rec)
            found.append(None)
            continue
        infos.append(dataset_info(shard.rec, shard.idx, key_type, storage_options))
        found.append((infos[-1].records, infos[-1].bytes))
    check = manifest_check(shards, found, manifest) if manifest is not None else None
    return ShardSetInfo(_name(spec, manifest), infos, missing, check)


def verify(spec: Any, idx_path: str | os.PathLike | None = None, key_type: KeyType = int, *,
           storage_options: StorageOptions = None, **options: Any) -> Report | ShardSetReport | MixtureReport:
    """``mxrec verify``: one file's :class:`Report`, or a report per shard, the checks over the set and the manifest.

    In a shard set the ``duplicates`` check (and with ``against`` the ``leakage`` check) also runs over the whole
    set, so a record repeated in another shard is found. A mixture's sources are verified one by one.

    Parameters
    ----------
    spec
        The dataset, as :func:`info` takes it.
    idx_path
        The ``.idx`` of a single file.
    key_type
        Converts ``.idx`` keys.
    storage_options
        fsspec options for URLs.
    **options
        :func:`~mxrec.doctor.verify_dataset.verify_dataset`'s; ``lst`` applies to one file only.

    Returns
    -------
    Report or ShardSetReport or MixtureReport
        The report of one file, of a shard set or of a mixture.

    Raises
    ------
    MixtureError
        ``idx_path`` or ``lst`` given for a mixture, or a source of a mixture file that cannot be verified.
    ManifestError
        ``idx_path`` or ``lst`` given for a shard set.
    """
    if is_mixture(spec):
        if idx_path is not None or options.get("lst") is not None:
            raise MixtureError(f"{_name(spec, None)}: --idx and --lst apply to one file: verify a mixture's sources "
                               "one by one for them")
        if isinstance(spec, Mixture):
            reports = [verify(source, None, key_type, **options) for source in spec.sources]
            return MixtureReport(spec.path, spec.names, reports, Check("mixture", True, _mixed(spec)))
        # A mixture file's sources are checked as the file names them, before they are mixed: mixing reads their
        # records (label offsets), which a damaged source would stop before its report.
        found = parse_mixture_file(spec, storage_options)
        reports = []
        for source in found.sources:
            try:
                reports.append(verify(source, None, key_type, storage_options=storage_options, **options))
            except (MxrecError, OSError) as exc:
                raise MixtureError(f"{found.path}: {source}: cannot be verified as a source of the mixture: "
                                   f"{exc}") from None
        try:
            mixing = Check("mixture", True, _mixed(as_mixture(spec, storage_options)))
        except MxrecError as exc:
            mixing = Check("mixture", False, f"cannot be mixed: {exc}")
        return MixtureReport(found.path, list(found.sources), reports, mixing)
    shards, manifest, storage_options = dataset_files(spec, storage_options)
    if len(shards) == 1 and manifest is None:
        return verify_dataset(shards[0].rec, idx_path, key_type, storage_options=storage_options, **options)
    if idx_path is not None or options.get("lst") is not None:
        raise ManifestError(manifest, "--idx and --lst apply to one file: verify a shard set's shards "
                                      "one by one for them")
    against = options.pop("against", None)
    reports, found = [], []
    for shard in shards:
        if not exists(shard.rec, storage_options):
            found.append(None)
            continue
        report = verify_dataset(shard.rec, shard.idx, key_type, storage_options=storage_options,
                                checksums=shard.checksums, **options)
        reports.append(report)
        details = report.check("framing").details
        found.append((details["records"], details["bytes"]))
    check = manifest_check(shards, found, manifest) if manifest is not None else None
    if manifest is None and None in found:
        missing = [s.rec for s, f in zip(shards, found, strict=True) if f is None]
        check = Check("shards", False, f"{len(missing)} shard(s) missing",
                      [Problem(m, "missing") for m in missing])
    return ShardSetReport(_name(spec, manifest), reports, check,
                          _set_checks(reports, against, key_type, options.get("workers"), storage_options))


def _set_checks(reports: list[Report], against: str | os.PathLike | None, key_type: KeyType, workers: int | None,
                storage_options: StorageOptions) -> list[Check]:
    """The checks over the records of every shard: duplicates (where the shards got content checks), leakage."""
    checks = []
    firsts = np.cumsum([0] + [r.numbered for r in reports]).tolist()  # each shard's first position in the set
    samples = [(r.path, first, r.samples) for r, first in zip(reports, firsts, strict=False) if r.samples]
    if samples:
        checks.append(check_set_duplicates(samples))
    if against is not None:
        other = read_contents(against, key_type=key_type, workers=workers, storage_options=storage_options).records
        checks.append(check_set_leakage(samples, other, against))
    for report in reports:
        report.samples = []  # the set's checks are made: let the facts go
    return checks
