"""The ``verify`` report as one self-contained page (``mxrec verify --html``), drawn with :mod:`mxrec.doctor.html`.

What the page shows, top to bottom:

* every check, failed ones first (a shard set's: the manifest, the checks over the whole set, each shard's);
* **offending records**: thumbnails of the records each failed check names (up to
  :data:`THUMBNAILS_PER_CHECK` a check, :data:`OFFENDING_MAX` in all), captioned with the name the report
  gives them, the label and what is wrong;
* **samples per class**: :data:`SAMPLES_PER_CLASS` thumbnails of each class, the class by id and name (a
  ``.labels`` file); with more than :data:`CLASS_ROWS` classes the most and the least frequent and a seeded
  sample of the rest (an InsightFace face set's identities alike); records without class ids: a sample;
* the **class histogram** with the names (beyond :data:`BARS` classes: the classes shown, and how many
  classes hold how many records -- for a face set, images per identity);
* the **image sizes**, every image: a dot per distinct width x height (its size growing with its count) or,
  beyond :data:`SCATTER_SIZES` distinct sizes, a 2-D histogram; both with labelled, ticked axes.

Records are read by position through the :class:`~mxrec.io.records.Records` contract, one
:meth:`~mxrec.io.records.Records.fetch` for every thumbnail (coalesced reads when remote):
:attr:`Problem.position <mxrec.doctor.report.Problem.position>` of each offending record and the
:class:`~mxrec.doctor.contents.Overview`'s positions of the samples, in the numbering of the dataset the
report is of (a shard's positions shifted to the set's), so the page works alike for a file, a URL, a shard
set or any other :class:`~mxrec.io.records.Records` a caller hands in. Thumbnails are JPEGs of at most
:data:`~mxrec.doctor.html.THUMBNAIL` pixels a side, a few kB each: a page stays a few MB at most.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np

from mxrec.datasets.opening import open_dataset
from mxrec.doctor.contents import Overview
from mxrec.doctor.html import (
    THUMBNAIL,
    bar_chart,
    check_rows,
    checks_table,
    escape,
    figure,
    histogram2d_chart,
    image_uri,
    page,
    scatter_chart,
    status_of,
)
from mxrec.doctor.preview import label_text
from mxrec.errors import HeaderError, ImageDecodeError, MxrecError
from mxrec.format.header import label_array, unpack_header
from mxrec.image.codec import decode_pixels_scaled
from mxrec.io.records import Records

THUMBNAILS_PER_CHECK = 12
OFFENDING_MAX = 120  # offending records shown in all (a shard set's shards may each fail)
SAMPLES_PER_CLASS = 6
CLASS_ROWS = 24  # classes shown one row each; beyond, the most and least frequent and a sample of the rest
BARS = 40  # classes drawn one bar each; beyond, how many classes hold how many records
SCATTER_SIZES = 300  # distinct image sizes drawn as dots; beyond, a 2-D histogram
UNLABELLED_SAMPLES = 24  # thumbnails of a dataset whose labels are not class ids
VALUE_BINS = 20


@dataclass
class Thumbnail:
    """One record as the page shows it: its image as a ``data:`` URI (or why there is none) and its label."""

    uri: str = ""
    missing: str = ""
    label: str = ""
    where: str = ""  # the dataset's description of the record (file and key)


def verify_page(report: Any, rec_path: str | os.PathLike | Sequence, idx_path: str | os.PathLike | None = None,
                *, label_names: dict[int, str] | None = None, records: Records | None = None,
                seed: int = 0) -> str:
    """The page of a ``verify`` report (see the module docstring).

    Parameters
    ----------
    report
        A :class:`~mxrec.doctor.report.Report`, or a :class:`~mxrec.doctor.sets.ShardSetReport`.
    rec_path
        The dataset it is of, as it was given to ``verify`` (a dataset given opened is also what the thumbnails are
        read from).
    idx_path
        Its ``.idx`` (one file), if given to ``verify``.
    label_names
        ``{class id: name}`` (a ``.labels`` file).
    records
        The dataset to read the thumbnails from, numbered as the report's positions are; default: it is
        opened with :func:`~mxrec.datasets.shard_set.open_dataset` (``duplicates="last"``, not strict; without
        the ``.idx`` when the report numbers the records as a scan finds them).
    seed
        Which samples are shown.

    Returns
    -------
    str
        The HTML document.
    """
    firsts = _firsts(report)
    data = _overview(report, firsts)
    classes = _class_ids(report, data)
    rng = np.random.default_rng(seed)
    offending = _offending(report, firsts)
    grid = _grid(data, classes, rng)
    wanted = sorted({p for _, _, items in offending for p, _ in items}
                    | {p for _, positions in grid for p in positions})
    index = False if not hasattr(report, "reports") and report.numbering == "scan" else idx_path
    if records is None and isinstance(rec_path, Records):  # a dataset handed in opened: read as it is, left open
        records = rec_path
    thumbnails, note = _read(records, rec_path, index, wanted, label_names)
    sections = [checks_table(report)]
    if note:
        sections.append(f"<p class=\"note\" id=\"unreadable\">{escape(note)}</p>")
    sections.append(_offending_section(offending, thumbnails))
    if data is not None and len(data):
        sections.append(_samples_section(data, classes, grid, thumbnails, label_names))
        sections.append(_histogram_section(data, classes, grid, label_names))
        sections.append(_sizes_section(data))
    name = os.path.basename(os.fspath(rec_path)) if isinstance(rec_path, (str, os.PathLike)) else report.path
    return page(f"mxrec verify: {name}", [s for s in sections if s])


# -- what the page shows, in the dataset's numbering ------------------------------------------------------------


def _reports(report: Any) -> list[Any]:
    return list(report.reports) if hasattr(report, "reports") else [report]


def _firsts(report: Any) -> dict[int, int]:
    """``{id(report): the position of its first record in the dataset}``: a shard's within the set."""
    firsts, first = {}, 0
    for r in _reports(report):
        firsts[id(r)] = first
        first += r.numbered
    return firsts


def _overview(report: Any, firsts: dict[int, int]) -> Overview | None:
    """The samples of the report (of every shard), their positions in the dataset's numbering."""
    parts = [(r.overview, firsts[id(r)]) for r in _reports(report) if r.overview is not None]
    if not parts:
        return None
    return Overview(np.concatenate([np.where(o.at >= 0, o.at + first, -1) for o, first in parts]),
                    np.concatenate([o.labels for o, _ in parts]), np.concatenate([o.widths for o, _ in parts]),
                    np.concatenate([o.heights for o, _ in parts]), any(o.faces for o, _ in parts))


def _class_ids(report: Any, data: Overview | None) -> np.ndarray | None:
    """Each sample's class id (-1 for none), or ``None`` when the labels are not class ids."""
    if data is None:
        return None
    kinds = {c.details.get("kind") for r in _reports(report) for c in r.checks if c.name == "labels"}
    if "value" in kinds:
        return None
    labels = data.labels
    whole = np.isfinite(labels) & (labels == np.round(labels)) & (labels >= 0)
    return np.where(whole, np.nan_to_num(labels, nan=-1), -1).astype(np.int64)


def _offending(report: Any, firsts: dict[int, int]) -> list[tuple[str, Any, list[tuple[int, Any]]]]:
    """``(scope, check, [(position, problem), ...])`` of each failed check naming records."""
    found = []
    shards = {r.path: firsts[id(r)] for r in _reports(report)} if hasattr(report, "reports") else {}
    for scope, check in check_rows(report):
        if status_of(check) != "fail":
            continue
        first = shards.get(scope, 0)  # a shard's own checks number its records from its first
        room = min(THUMBNAILS_PER_CHECK, OFFENDING_MAX - sum(len(items) for _, _, items in found))
        items = [(first + p.position, p) for p in check.problems if p.position is not None][:max(room, 0)]
        if items:
            found.append((scope, check, items))
    return found


def _grid(data: Overview | None, classes: np.ndarray | None, rng: np.random.Generator
          ) -> list[tuple[str, list[int]]]:
    """``(group, positions)`` rows of samples: a class id per row (groups name the most/least frequent), or one
    row of a sample when the labels are not class ids."""
    if data is None or not len(data):
        return []
    readable = data.at >= 0
    if classes is None:
        pool = np.flatnonzero(readable)
        chosen = rng.choice(pool, size=min(UNLABELLED_SAMPLES, len(pool)), replace=False) if len(pool) else []
        return [("sample", sorted(int(data.at[i]) for i in chosen))]
    rows = []
    for group, label in _shown_classes(Counter(classes[classes >= 0].tolist()), rng):
        pool = np.flatnonzero(readable & (classes == label))
        chosen = rng.choice(pool, size=min(SAMPLES_PER_CLASS, len(pool)), replace=False) if len(pool) else []
        rows.append((f"{group}:{label}", sorted(int(data.at[i]) for i in chosen)))
    return rows


def _shown_classes(counts: Counter, rng: np.random.Generator) -> list[tuple[str, int]]:
    """``(group, class id)`` of the classes shown: all of them up to :data:`CLASS_ROWS`; beyond, the third most
    frequent, the third least frequent, then a seeded sample of the rest."""
    if len(counts) <= CLASS_ROWS:
        return [("class", label) for label in sorted(counts)]
    ordered = sorted(counts, key=lambda label: (-counts[label], label))
    third = CLASS_ROWS // 3
    most, least = ordered[:third], ordered[-third:][::-1]
    rest = ordered[third:-third]
    sample = sorted(rng.choice(rest, size=min(third, len(rest)), replace=False).tolist()) if rest else []
    return ([("most frequent", c) for c in most] + [("least frequent", c) for c in least]
            + [("sample", int(c)) for c in sample])


# -- reading the thumbnails --------------------------------------------------------------------------------------


def _read(records: Records | None, rec_path: Any, index: Any, positions: list[int],
          label_names: dict[int, str] | None) -> tuple[dict[int, Thumbnail], str]:
    """A :class:`Thumbnail` per position, read with one fetch; and why the records could not be read, if so."""
    if not positions:
        return {}, ""
    reader = records
    if reader is None:
        try:
            reader = open_dataset(rec_path, index, duplicates="last", strict=False)
        except (MxrecError, OSError) as exc:
            return {}, f"records not readable for thumbnails: {exc}"
    try:
        try:
            payloads: list = list(reader.fetch(positions))
        except (MxrecError, ValueError, OSError):  # one record is damaged: read them one by one to say which
            payloads = [None] * len(positions)
        out = {}
        for position, payload in zip(positions, payloads, strict=True):
            try:
                where = reader.describe(position)
                if payload is None:
                    payload = reader.fetch([position])[0]
            except (MxrecError, ValueError, OSError, IndexError) as exc:
                out[position] = Thumbnail(missing=f"not readable ({type(exc).__name__})", where=str(exc))
                continue
            out[position] = _thumbnail(payload, where, label_names)
        return out, ""
    finally:
        if records is None:
            reader.close()


def _thumbnail(payload: bytes | memoryview, where: str, label_names: dict[int, str] | None) -> Thumbnail:
    try:
        header, start = unpack_header(payload)
    except HeaderError:
        return Thumbnail(missing="no IRHeader", where=where)
    label = label_text(label_array(header), label_names=label_names)
    try:
        img = decode_pixels_scaled(memoryview(payload)[start:], 3, THUMBNAIL, THUMBNAIL, what=where)
    except ImageDecodeError:
        return Thumbnail(missing="no image", label=label, where=where)
    return Thumbnail(image_uri(img, bgr=True), label=label, where=where)


# -- the sections ---------------------------------------------------------------------------------------------------


def _offending_section(offending: list, thumbnails: dict[int, Thumbnail]) -> str:
    if not offending:
        return ""
    parts = ["<h2>Offending records</h2><div id=\"offending\">"]
    for scope, check, items in offending:
        figures = []
        for position, problem in items:
            thumb = thumbnails.get(position)
            label = f", label {thumb.label}" if thumb is not None and thumb.label else ""
            figures.append(_figure(thumb, f"{problem.where}{label}: {problem.what}", f": {problem.what}"))
        total = sum(p.position is not None for p in check.problems)
        shown = f" ({len(items)} of {total} shown)" if total > len(items) else ""
        heading = f"{check.name}{f' ({scope})' if scope else ''}{shown}"
        parts.append(f"<section class=\"check-records\" data-check=\"{escape(check.name)}\"><h3>{escape(heading)}"
                     f"</h3>{''.join(figures)}</section>")
    return "".join(parts) + "</div>"


def _figure(thumb: Thumbnail | None, caption: str, what: str = "") -> str:
    thumb = thumb or Thumbnail(missing="not read")
    return figure(thumb.uri, caption, title=f"{thumb.where}{what}", missing=thumb.missing)


def _record_name(thumb: Thumbnail | None) -> str:
    """The record as the caption under a sample names it: what follows the file in its description."""
    return "" if thumb is None else thumb.where.rsplit(": ", 1)[-1]


def _class_name(label: int, label_names: dict[int, str] | None) -> str:
    name = (label_names or {}).get(label)
    return f"{label} {name}" if name is not None else f"class {label}"


def _samples_section(data: Overview, classes: np.ndarray | None, grid: list, thumbnails: dict[int, Thumbnail],
                     label_names: dict[int, str] | None) -> str:
    if not grid:
        return ""
    what = "identity" if data.faces else "class"
    parts = ["<h2>Samples</h2><div id=\"samples\">"]
    if classes is None:
        parts.append("<p>The labels are not class ids: a sample of the records.</p>")
    else:
        total = len(set(classes[classes >= 0].tolist()))
        parts.append(f"<p>{SAMPLES_PER_CLASS} samples of each {what} shown ({len(grid)} of {total}"
                     f"{' identities' if data.faces else ' classes'}"
                     + ("; the most and least frequent, then a sample of the rest" if total > len(grid) else "")
                     + ").</p>")
    counts = Counter(classes[classes >= 0].tolist()) if classes is not None else Counter()
    heading = ""
    for group, positions in grid:
        kind, _, label = group.partition(":")
        figures = "".join(_figure(thumbnails.get(p), _record_name(thumbnails.get(p))) for p in positions)
        if classes is None:
            parts.append(f"<div class=\"row\">{figures}</div>")
            continue
        if kind != heading and kind != "class":
            parts.append(f"<h3>{escape(kind)}</h3>")
        heading = kind
        name = _class_name(int(label), label_names)
        parts.append(f"<div class=\"class-row\" data-label=\"{escape(label)}\"><b>{escape(name)}</b> "
                     f"({counts[int(label)]} {'images' if data.faces else 'records'})<div class=\"row\">{figures}"
                     "</div></div>")
    return "".join(parts) + "</div>"


def count_distribution(counts: Sequence[int]) -> tuple[list[str], list[int]]:
    """How many classes hold how many records: ``(labels, classes)`` per bin, one bin per count up to 20
    distinct counts, else doubling bins (``1``, ``2-3``, ``4-7`` ...)."""
    values = Counter(counts)
    if len(values) <= 20:
        return [str(v) for v in sorted(values)], [values[v] for v in sorted(values)]
    labels, found = [], []
    low = 1
    while low <= max(values):
        high = 2 * low - 1
        n = sum(c for v, c in values.items() if low <= v <= high)
        if n:
            labels.append(str(low) if low == high else f"{low}-{high}")
            found.append(n)
        low *= 2
    return labels, found


def _histogram_section(data: Overview, classes: np.ndarray | None, grid: list,
                       label_names: dict[int, str] | None) -> str:
    if classes is None:
        values = data.labels[np.isfinite(data.labels)]
        if not values.size:
            return ""
        counts, edges = np.histogram(values, bins=VALUE_BINS)
        ranges = [f"{low:.4g}..{high:.4g}" for low, high in pairwise(edges.tolist())]
        return "<h2>Label values</h2>" + bar_chart(counts.tolist(), ranges, label="records per label value")
    counts = Counter(classes[classes >= 0].tolist())
    if not counts:
        return ""
    unit = "images" if data.faces else "records"
    parts = ["<h2>Class histogram</h2>" if not data.faces else "<h2>Images per identity</h2>"]
    if len(counts) <= BARS:
        shown = sorted(counts)
        note = ""
    else:
        shown = [int(g.partition(":")[2]) for g, _ in grid]
        note = f"<p>The {len(shown)} classes shown above, of {len(counts)}.</p>"
    parts.append(note + bar_chart([counts[c] for c in shown], [_class_name(c, label_names) for c in shown],
                                  label="records per class"))
    if len(counts) > BARS or data.faces:
        labels, numbers = count_distribution(list(counts.values()))
        what = "identities" if data.faces else "classes"
        parts.append(f"<h3>How many {what} hold how many {unit}</h3>"
                     + bar_chart(numbers, [f"{lab} {unit}" for lab in labels], label=f"{what} by {unit} held",
                                 unit=f" {what}"))
    return "".join(parts)


def _sizes_section(data: Overview) -> str:
    sized = data.widths > 0
    widths, heights = data.widths[sized], data.heights[sized]
    if not widths.size:
        return ""
    pairs = Counter(zip(widths.tolist(), heights.tolist(), strict=True))
    text = (f"<p>{widths.size} images, {len(pairs)} distinct size(s); median {np.median(widths):g} x "
            f"{np.median(heights):g} px.</p>")
    if len(pairs) <= SCATTER_SIZES:
        chart = scatter_chart([(w, h, n) for (w, h), n in pairs.items()], label="image sizes", x_name="width (px)",
                              y_name="height (px)")
    else:
        chart = histogram2d_chart(widths, heights, label="image sizes", x_name="width (px)", y_name="height (px)")
    return "<h2>Image sizes</h2>" + text + chart
