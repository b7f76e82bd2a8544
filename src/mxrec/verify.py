"""Checking a dataset: framing of every record and agreement of the ``.idx`` with the ``.rec``.

:func:`verify_recordio` runs the checks and returns a :class:`Report`; it never
raises on a damaged file (damage is what it reports) and never changes a file.
Each :class:`Check` has a name, pass/fail, a one-line summary, and the
offending places (byte offsets or keys) with what is wrong at each. A check
marked ``warning`` is reported but does not fail the report.

Checks
    ``framing``   every record from the first byte to the last: magic, cflag
                  order, lengths, truncation, trailing bytes. After a fault the
                  walk resumes at the next record boundary (resync rule), so
                  every fault is listed, not only the first.
    ``padding``   (warning) padding bytes that are not zero. Readers ignore
                  them; dmlc-core always writes zeros.
    ``index``     (when an ``.idx`` exists) parses; keys unique; every offset
                  is the start of an intact record inside the file; every
                  record is listed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from mxrec import framing
from mxrec.errors import IndexFileError
from mxrec.index import index_path_for, read_index
from mxrec.mapping import map_file, release


@dataclass
class Problem:
    """One offending place: ``where`` (a byte offset or a key) and ``what`` is wrong there."""

    where: Any
    what: str

    def to_dict(self) -> dict:
        return {"where": self.where, "what": self.what}


@dataclass
class Check:
    """The outcome of one check."""

    name: str
    ok: bool
    summary: str
    problems: list[Problem] = field(default_factory=list)
    warning: bool = False
    details: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"name": self.name, "ok": self.ok, "warning": self.warning, "summary": self.summary,
                "problems": [p.to_dict() for p in self.problems], "details": self.details}


@dataclass
class Report:
    """Every check run on one dataset. ``ok`` when no failing (non-warning) check failed."""

    path: str
    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.ok or c.warning for c in self.checks)

    def check(self, name: str) -> Check:
        return next(c for c in self.checks if c.name == name)

    def to_dict(self) -> dict:
        return {"path": self.path, "ok": self.ok, "checks": [c.to_dict() for c in self.checks]}

    def format_text(self, max_problems: int = 10) -> str:
        lines = [f"{self.path}: {'OK' if self.ok else 'FAILED'}"]
        for c in self.checks:
            status = "ok" if c.ok else ("warn" if c.warning else "FAIL")
            lines.append(f"  [{status:>4}] {c.name}: {c.summary}")
            for p in c.problems[:max_problems]:
                lines.append(f"         {p.where}: {p.what}")
            if len(c.problems) > max_problems:
                lines.append(f"         ... and {len(c.problems) - max_problems} more (--json lists all)")
        return "\n".join(lines)


def check_framing(buf: framing.Buffer, path: str) -> tuple[Check, list[framing.RecordSpan]]:
    """The ``framing`` check; also returns the intact records it found."""
    spans, faults = framing.salvage_spans(buf, path)
    problems = [Problem(f.offset, f.reason) for f in faults]
    multipart = sum(1 for s in spans if s.parts > 1)
    details = {"records": len(spans), "multipart_records": multipart, "bytes": len(buf),
               "faults": len(faults)}
    if faults:
        summary = f"{len(faults)} fault(s); {len(spans)} intact record(s) outside the damage"
    else:
        summary = f"{len(spans)} record(s), {multipart} multi-part, {len(buf)} bytes"
    return Check("framing", not faults, summary, problems, details=details), spans


def check_padding(buf: framing.Buffer, spans: list[framing.RecordSpan]) -> Check:
    """The ``padding`` check (a warning)."""
    problems = [Problem(at, "padding bytes are not zero")
                for span in spans for at in framing.nonzero_padding(buf, span)]
    summary = f"{len(problems)} part(s) with non-zero padding" if problems else "all padding bytes are zero"
    return Check("padding", not problems, summary, problems, warning=True)


def check_index(idx_path: str, spans: list[framing.RecordSpan], file_size: int,
                key_type: type = int) -> Check:
    """The ``index`` check: the ``.idx`` against the intact records found by the framing walk."""
    try:
        index = read_index(idx_path, key_type)
    except IndexFileError as exc:
        return Check("index", False, f"{idx_path} cannot be parsed", [Problem(exc.line, exc.reason)])
    except UnicodeDecodeError as exc:
        return Check("index", False, f"{idx_path} is not UTF-8 text", [Problem(exc.start, str(exc))])
    starts = {s.offset for s in spans}
    problems = []
    seen: set = set()
    for key, offset in zip(index.keys, index.offsets.tolist(), strict=False):
        if key in seen:
            problems.append(Problem(key, "duplicate key: listed more than once"))
        seen.add(key)
        if offset >= file_size:
            problems.append(Problem(key, f"offset {offset} is past the end of the file ({file_size} bytes)"))
        elif offset not in starts:
            problems.append(Problem(key, f"offset {offset} is not the start of an intact record"))
    listed = set(index.offsets.tolist())
    unlisted = [s.offset for s in spans if s.offset not in listed]
    problems.extend(Problem(off, "record is not listed in the index") for off in unlisted)
    details = {"entries": len(index), "unique_keys": len(seen), "unlisted_records": len(unlisted)}
    summary = (f"{len(index)} entries, {len(problems)} problem(s)" if problems
               else f"{len(index)} entries, every one a record start; every record listed")
    return Check("index", not problems, summary, problems, details=details)


def verify_recordio(rec_path: str | os.PathLike, idx_path: str | os.PathLike | None = None,
                    key_type: type = int) -> Report:
    """Check the framing of ``rec_path`` and, if there is one, its ``.idx`` (default: beside it)."""
    rec_path = os.fspath(rec_path)
    report = Report(rec_path)
    buf = map_file(rec_path)
    try:
        framing_check, spans = check_framing(buf, rec_path)
        report.checks.append(framing_check)
        report.checks.append(check_padding(buf, spans))
        size = len(buf)
    finally:
        release(buf)
    if idx_path is None:
        candidate = index_path_for(rec_path)
        idx_path = candidate if os.path.exists(candidate) else None
    if idx_path is not None:
        report.checks.append(check_index(os.fspath(idx_path), spans, size, key_type))
    return report
