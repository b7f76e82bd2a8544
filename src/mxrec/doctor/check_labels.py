"""Label checks of an image dataset: header present, label width, class ids, class balance.

Every record of an image dataset starts with an IRHeader holding one label
(``flag`` 0) or ``flag`` float32 labels. :func:`check_labels` reports records
without a readable header, labels that are NaN or infinite, and records whose
label width differs from the most common one. When the labels are class ids
(``kind="class"``; ``"auto"`` decides so when most first labels are whole
numbers) the *first* label of each record (what ``label_width=1`` training
reads) must be a whole number in ``[0, num_classes)``, and the ids in use must
be contiguous: every id below the largest (or below ``num_classes`` when
given) has at least one record. Without ``num_classes``, ids far above the
rest (above a run of missing ids longer than the ids below it, held by fewer
records than those below) are *outlying*: each record holding one is named
(a mistyped label, 57 among 0..9), and the ids are contiguous if the rest
are. A validation set is often too small to hold
every class; given the class ids of its companion set (``companion_ids``, from
``mxrec verify --against``) the ids need only be contiguous over both. :func:`check_balance` (a warning) reports
class counts, the imbalance ratio and classes with very few records.

The header and identity records of an InsightFace face set (key ranges as
labels, no image; see :mod:`mxrec.format.insightface`) are not samples and
are left out.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Collection
from itertools import pairwise

from mxrec.doctor.contents import RecordContent
from mxrec.doctor.report import Check, Problem
from mxrec.errors import OptionError

LABEL_KINDS = ("auto", "class", "value")


def labelled_records(contents: list[RecordContent]) -> list[RecordContent]:
    """The records that are samples with labels (header present, not an InsightFace header or identity record)."""
    return [c for c in contents if c.labels is not None and not c.layout_record]


def resolve_label_kind(records: list[RecordContent], kind: str = "auto") -> str:
    """``"class"`` or ``"value"``: ``"auto"`` means class ids when most first labels are whole numbers."""
    if kind not in LABEL_KINDS:
        raise OptionError(f"label kind must be one of {LABEL_KINDS}, not {kind!r}")
    if kind != "auto":
        return kind
    firsts = [c.labels[0] for c in records if c.labels and math.isfinite(c.labels[0])]
    whole = sum(1 for v in firsts if v == round(v))
    return "class" if whole * 2 > len(firsts) or not firsts else "value"


def class_id(record: RecordContent, num_classes: int | None = None) -> int | None:
    """The record's class id (its first label), or None if that is not a valid id."""
    if not record.labels:
        return None
    value = record.labels[0]
    if not math.isfinite(value) or value != round(value) or value < 0:
        return None
    if num_classes is not None and value >= num_classes:
        return None
    return int(value)


def class_counts(records: list[RecordContent], num_classes: int | None = None) -> Counter:
    """Records per valid class id."""
    return Counter(i for i in (class_id(r, num_classes) for r in records) if i is not None)


def _ranges(values: list[int]) -> list[tuple[int, int]]:
    """Sorted integers as inclusive runs: [1, 2, 3, 7] -> [(1, 3), (7, 7)]."""
    runs: list[tuple[int, int]] = []
    for v in values:
        if runs and runs[-1][1] == v - 1:
            runs[-1] = (runs[-1][0], v)
        else:
            runs.append((v, v))
    return runs


def _first_label_problem(value: float, num_classes: int | None) -> str | None:
    if not math.isfinite(value):
        return None  # reported as non-finite already
    if value != round(value):
        return f"label {value:g} is not a whole number (the labels are class ids)"
    if value < 0:
        return f"label {value:g} is negative (class ids are in [0, num_classes))"
    if num_classes is not None and value >= num_classes:
        return f"label {value:g} is not below num_classes={num_classes}"
    return None


def outlying_ids(counts: Counter) -> set[int]:
    """Class ids far above the rest: above the widest run of missing ids, when that run is longer than the ids
    below it and the ids above it have fewer records than those below (see the module doc)."""
    ids = sorted(counts)
    if len(ids) < 2:
        return set()
    gaps = [(high - low - 1, i) for i, (low, high) in enumerate(pairwise(ids))]
    missing, at = max(gaps)
    below, above = ids[:at + 1], ids[at + 1:]
    if missing > len(below) and sum(counts[i] for i in above) < sum(counts[i] for i in below):
        return set(above)
    return set()


def check_labels(contents: list[RecordContent], num_classes: int | None = None, kind: str = "auto",
                 companion_ids: Collection[int] = ()) -> Check:
    """The ``labels`` check; ``companion_ids``: class ids in use in a companion dataset (see the module doc)."""
    problems = [Problem(c.name, f"no IRHeader: {c.header_fault}", c.at) for c in contents if c.header_fault]
    records = labelled_records(contents)
    kind = resolve_label_kind(records, kind)
    widths = Counter(len(c.labels) for c in records)
    common_width = widths.most_common(1)[0][0] if widths else 1
    counts = Counter()
    for c in records:
        if not all(math.isfinite(v) for v in c.labels):
            problems.append(Problem(c.name, f"label values include NaN or infinity: {list(c.labels)}", c.at))
            counts["non_finite"] += 1
        if len(c.labels) != common_width:
            problems.append(Problem(c.name, f"{len(c.labels)} label value(s); most records have {common_width}",
                                    c.at))
            counts["odd_width"] += 1
        if kind == "class" and c.labels:
            what = _first_label_problem(c.labels[0], num_classes)
            if what is not None:
                problems.append(Problem(c.name, what, c.at))
                counts["bad_class_id"] += 1
    details: dict = {"labelled_records": len(records), "kind": kind,
                     "widths": {str(w): n for w, n in sorted(widths.items())},
                     "header_faults": sum(1 for c in contents if c.header_fault), **counts}
    summary_tail = ""
    if kind == "class":
        counts_by_id = class_counts(records, num_classes)
        present = sorted(counts_by_id)
        in_use = set(present) | {i for i in companion_ids if num_classes is None or i < num_classes}
        outliers = outlying_ids(Counter({i: counts_by_id.get(i, 0) or 1 for i in in_use})) \
            if num_classes is None else set()
        below = [i for i in in_use if i not in outliers]
        problems += [Problem(c.name, f"class id {class_id(c)} lies far above the others (the next lower id in use "
                                     f"is {max(below)}): a wrong label? (--num-classes sets the range of ids)", c.at)
                     for c in records if class_id(c) in outliers]
        classes = num_classes if num_classes is not None else max(below, default=-1) + 1
        missing = sorted(set(range(classes)) - in_use)
        for low, high in _ranges(missing):
            where = f"label {low}" if low == high else f"labels {low}..{high}"
            problems.append(Problem(where, "no record has this class id: the ids in use are not contiguous"
                                    + (" (in either dataset)" if companion_ids else "")))
        details.update(num_classes=classes, num_classes_given=num_classes is not None,
                       outlying_class_ids=sorted(outliers),
                       classes_present=len(present), missing_class_ids=len(missing))
        summary_tail = (f"; class ids, {len(present)} of {classes} classes present"
                        + (f" ({classes - len(missing)} with the companion set)" if companion_ids else ""))
    else:
        summary_tail = "; real-valued labels (not class ids)"
    width_text = "/".join(str(w) for w in sorted(widths)) or "-"
    summary = (f"{len(records)} labelled record(s), width {width_text}{summary_tail}"
               + (f"; {len(problems)} problem(s)" if problems else ""))
    return Check("labels", not problems, summary, problems, details=details)


def check_balance(contents: list[RecordContent], num_classes: int | None = None, kind: str = "auto",
                  min_samples: int = 5, max_imbalance: float = 10.0) -> Check:
    """The ``balance`` check (a warning): records per class, imbalance ratio, rare classes."""
    records = labelled_records(contents)
    if resolve_label_kind(records, kind) != "class":
        return Check("balance", True, "labels are not class ids: no class balance", warning=True)
    counts = class_counts(records, num_classes)
    if not counts:
        return Check("balance", True, "no valid class ids", warning=True)
    ordered = sorted(counts.items())
    largest = max(ordered, key=lambda item: item[1])
    smallest = min(ordered, key=lambda item: item[1])
    ratio = largest[1] / smallest[1]
    problems = [Problem(f"label {c}", f"only {n} record(s) (fewer than {min_samples})")
                for c, n in ordered if n < min_samples]
    if ratio > max_imbalance:
        problems.append(Problem("classes", f"imbalance ratio {ratio:.1f} above {max_imbalance:g}: label "
                                f"{largest[0]} has {largest[1]} records, label {smallest[0]} has {smallest[1]}"))
    details = {"counts": {str(c): n for c, n in ordered}, "imbalance_ratio": ratio,
               "largest_class": largest[0], "smallest_class": smallest[0],
               "rare_classes": [c for c, n in ordered if n < min_samples]}
    summary = (f"{len(ordered)} classes, {smallest[1]}..{largest[1]} records each, "
               f"imbalance ratio {ratio:.2f}")
    return Check("balance", not problems, summary, problems, warning=True, details=details)
