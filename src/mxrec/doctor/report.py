"""The outcome of checking a dataset: :class:`Report`, made of :class:`Check` results, each listing :class:`Problem` s.

A check has a name, pass/fail, a one-line summary, counts (``details``) and the
offending places (byte offsets, keys, ``.lst`` lines or labels) with what is
wrong at each. A check marked ``warning`` reports findings that are properties
of the data rather than defects (non-zero padding, class imbalance): it is
shown, but does not fail the report. The checks themselves live in
:mod:`mxrec.doctor.verify_dataset` and the ``check_*`` modules; this module only holds and
formats their results.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mxrec.doctor.html import checks_table, fragment


@dataclass
class Problem:
    """One offending place: ``where`` (a byte offset or a key) and ``what`` is wrong there.

    ``position``: when the place is a record, its position in the dataset the report is of, as
    :func:`~mxrec.datasets.shard_set.open_dataset` numbers them (``duplicates="last"``, not strict): the ``.idx``
    entry, or among the intact records when the report's :attr:`Report.numbering` is ``"scan"``; in a shard
    set's checks over the whole set, across the shards.
    Pages read the record by it (:meth:`~mxrec.io.records.Records.fetch`), whatever the dataset.
    """

    where: Any
    what: str
    position: int | None = None

    def to_dict(self) -> dict:
        return {"where": self.where, "what": self.what, "position": self.position}


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
    #: The facts of the records the content checks ran on (``mxrec.doctor.contents.RecordContent``), for the
    #: checks over a whole shard set (:mod:`mxrec.doctor.sets`); not part of the printed report.
    samples: list[Any] = field(default_factory=list, repr=False, compare=False)
    #: The positions a reader of the dataset numbers (its ``.idx`` entries, else its intact records): the range
    #: of :attr:`Problem.position`.
    numbered: int = field(default=0, compare=False)
    #: How the positions are numbered: ``"index"`` (the ``.idx`` entries: a reader opened on the ``.idx``) or
    #: ``"scan"`` (the intact records in file order: a reader opened with ``index=False``; also when the
    #: ``.idx`` is missing, unreadable or lists offsets a reader refuses).
    numbering: str = field(default="scan", compare=False)
    #: What the pages show of the samples (``mxrec.doctor.contents.Overview``: positions, labels, image sizes),
    #: when the content checks ran; not part of the printed report.
    overview: Any = field(default=None, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        return all(c.ok or c.warning for c in self.checks)

    @property
    def clean(self) -> bool:
        """Whether every check passed, warnings included."""
        return all(c.ok for c in self.checks)

    def check(self, name: str) -> Check:
        return next(c for c in self.checks if c.name == name)

    def to_dict(self) -> dict:
        return {"path": self.path, "ok": self.ok, "checks": [c.to_dict() for c in self.checks]}

    def _repr_html_(self) -> str:
        """The verdict and every check, failed ones first, in Jupyter (``verify --html`` draws the records too)."""
        return fragment(f"mxrec verify: {self.path}", [checks_table(self)])

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
