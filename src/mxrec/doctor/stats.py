"""Dataset statistics: label counts and the image-size distribution, as numbers and as plots.

:func:`dataset_stats` reads every intact record's header and image header once
(:func:`mxrec.doctor.contents.read_contents`, no decoding: sizes come from the JPEG /
PNG headers) and returns a :class:`DatasetStats`: records per class (or a
histogram of label values when the labels are not class ids), label widths,
image formats, channels, the most common shapes and quantiles of width,
height and bytes per image. :meth:`DatasetStats.format_text` gives the numbers
as text; :func:`plot_stats` draws them (label counts, width x height, shorter
side, bytes per image) into one PNG with matplotlib, the optional
``plot`` extra (``pip install 'mxrec[plot]'``).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType

import numpy as np

from mxrec.datasets.opening import DatasetSpec, dataset_name
from mxrec.doctor.check_images import image_records
from mxrec.doctor.check_labels import class_counts, labelled_records, resolve_label_kind
from mxrec.doctor.contents import read_contents
from mxrec.errors import MxrecError, import_extra
from mxrec.format.idx import KeyType
from mxrec.storage.atomic import atomic_path
from mxrec.storage.filesystem import check_writable

QUANTILES = (0.0, 0.05, 0.5, 0.95, 1.0)
VALUE_BINS = 20  # histogram bins for labels that are not class ids
CLASSES_SHOWN = 50  # classes listed one per line in the text; the rest are summarised
SHAPES_SHOWN = 10
NAMED_TICKS = 40  # classes whose names fit under the bars of the plot


@dataclass
class DatasetStats:
    """What :func:`dataset_stats` found. Arrays hold one value per image with a known size."""

    path: str
    records: int
    labelled: int
    label_kind: str  # "class" or "value"
    label_widths: dict
    class_counts: dict  # class id -> records (class labels)
    value_histogram: tuple[list, list]  # (counts, bin edges) of first labels (real-valued labels)
    formats: dict
    channels: dict
    shapes: dict  # "WxHxC" -> images, most common first
    heights: np.ndarray = field(repr=False)
    widths: np.ndarray = field(repr=False)
    image_bytes: np.ndarray = field(repr=False)
    damage: list = field(default_factory=list)  # what was stepped over: damaged framing, an unreadable .idx
    label_names: dict | None = None  # class id -> name (from a .labels file), for display

    def class_name(self, label: int) -> str:
        """``label``, with its name when one is known: ``3 (cat)``."""
        name = (self.label_names or {}).get(label)
        return f"{label} ({name})" if name is not None else str(label)

    def quantiles(self, values: np.ndarray) -> dict:
        if values.size == 0:
            return {}
        return {f"p{round(100 * q)}": float(v) for q, v in zip(QUANTILES, np.quantile(values, QUANTILES),
                                                               strict=True)}

    def to_dict(self) -> dict:
        return {"path": self.path, "records": self.records, "labelled": self.labelled,
                "label_kind": self.label_kind, "label_widths": self.label_widths,
                "class_counts": {str(k): v for k, v in self.class_counts.items()},
                "value_histogram": {"counts": self.value_histogram[0], "edges": self.value_histogram[1]},
                "formats": self.formats, "channels": self.channels, "shapes": self.shapes,
                "width": self.quantiles(self.widths), "height": self.quantiles(self.heights),
                "image_bytes": self.quantiles(self.image_bytes), "damage": self.damage,
                "class_names": {str(k): v for k, v in (self.label_names or {}).items()}}

    def format_text(self) -> str:
        lines = [f"{self.path}: {self.records} records, {self.labelled} labelled "
                 f"(label width {', '.join(f'{w}: {n}' for w, n in self.label_widths.items()) or '-'})"]
        if self.label_kind == "class" and self.class_counts:
            counts = list(self.class_counts.values())
            lines.append(f"classes: {len(counts)}, records per class {min(counts)}..{max(counts)} "
                         f"(median {np.median(counts):g}), imbalance ratio {max(counts) / min(counts):.2f}")
            width = max(len(self.class_name(label)) for label in list(self.class_counts)[:CLASSES_SHOWN])
            for label, n in list(self.class_counts.items())[:CLASSES_SHOWN]:
                lines.append(f"  label {self.class_name(label):>{max(6, width)}}: {n:>8}  "
                             f"{'#' * round(40 * n / max(counts))}")
            if len(counts) > CLASSES_SHOWN:
                lines.append(f"  ... {len(counts) - CLASSES_SHOWN} more classes (--json lists all)")
        elif self.label_kind == "value":
            counts, edges = self.value_histogram
            lines.append(f"labels are real values, {edges[0]:g}..{edges[-1]:g}:" if edges else "no labels")
            for n, low, high in zip(counts, edges, edges[1:], strict=False):
                lines.append(f"  [{low:>10.4g}, {high:>10.4g}): {n:>8}")
        lines.append("formats: " + (", ".join(f"{k} {v}" for k, v in self.formats.items()) or "-"))
        lines.append("channels: " + (", ".join(f"{k}: {v}" for k, v in self.channels.items()) or "-"))
        for name, values in (("width", self.widths), ("height", self.heights), ("bytes", self.image_bytes)):
            q = self.quantiles(values)
            if q:
                lines.append(f"{name:>8}: min {q['p0']:g}  p5 {q['p5']:g}  median {q['p50']:g}  "
                             f"p95 {q['p95']:g}  max {q['p100']:g}")
        lines.append("shapes (WxHxC): " + (", ".join(f"{s} {n}" for s, n in self.shapes.items()) or "-"))
        lines += [f"damage: {d}" for d in self.damage]
        return "\n".join(lines)


def dataset_stats(rec_path: DatasetSpec, idx_path: str | os.PathLike | None = None,
                  key_type: KeyType = int, *, label_kind: str = "auto", workers: int | None = None,
                  label_names: dict[int, str] | None = None,
                  progress: Callable[[int, int], None] | None = None) -> DatasetStats:
    """Read a dataset (a file, URL or shard set) once and summarise its labels and images (``mxrec stats``).

    Damaged framing and an unreadable ``.idx`` are stepped over and listed in
    :attr:`DatasetStats.damage`.

    Parameters
    ----------
    rec_path
        The dataset: a file, URL, shard set or mixture file, or a dataset already opened (its files read with its
        storage settings; a mixture's sources with their labels moved by its label offsets).
    idx_path
        Its ``.idx``; default: the one beside it, if present.
    key_type
        Converts ``.idx`` keys (``int`` or ``str``).
    label_kind
        ``"auto"``, ``"class"`` or ``"value"``: whether the first label is a
        class id (counted) or a value (a histogram).
    workers
        Threads that read the image headers; default: all cores.
    label_names
        ``{class id: name}``: only labels the output.
    progress
        Called as ``progress(done, total)``.

    Returns
    -------
    DatasetStats
        Label counts, formats, channels, size quantiles, top shapes;
        ``format_text()`` for people, :func:`plot_stats` for plots.
    """
    contents, damage = read_contents(rec_path, idx_path, key_type, workers=workers, progress=progress)
    records = labelled_records(contents)
    kind = resolve_label_kind(records, label_kind)
    histogram: tuple[list, list] = ([], [])
    firsts = np.array([r.labels[0] for r in records if r.labels], dtype=np.float64)
    firsts = firsts[np.isfinite(firsts)]
    if kind == "value" and firsts.size:
        counts, edges = np.histogram(firsts, bins=VALUE_BINS)
        histogram = (counts.tolist(), edges.tolist())
    images = [c for c in image_records(contents) if c.image.shape is not None and not c.image.fault]
    shapes = Counter(f"{c.image.shape[1]}x{c.image.shape[0]}x{c.image.shape[2]}" for c in images)
    return DatasetStats(
        path=dataset_name(rec_path),
        records=len(contents), labelled=len(records), label_kind=kind,
        label_widths=dict(sorted(Counter(len(r.labels) for r in records).items())),
        class_counts=dict(sorted(class_counts(records).items())) if kind == "class" else {},
        value_histogram=histogram,
        formats=dict(Counter(c.image.format for c in image_records(contents)).most_common()),
        channels=dict(sorted(Counter(c.image.shape[2] for c in images).items())),
        shapes=dict(shapes.most_common(SHAPES_SHOWN)),
        heights=np.array([c.image.shape[0] for c in images], dtype=np.int64),
        widths=np.array([c.image.shape[1] for c in images], dtype=np.int64),
        image_bytes=np.array([c.image_bytes for c in image_records(contents)], dtype=np.int64),
        damage=damage, label_names=label_names)


def pyplot() -> ModuleType:
    """``matplotlib.pyplot`` on the file-only Agg backend, or a clear error if matplotlib is not installed."""
    matplotlib = import_extra("matplotlib", "plots need matplotlib", "plot")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_format(out_path: str | os.PathLike) -> str:
    """The matplotlib format ``out_path``'s extension names (no extension: ``png``); an error naming the file if none.

    Checked before a long read, so that a wrong name fails at once.
    """
    plt = pyplot()
    check_writable(out_path)
    fmt = os.path.splitext(os.fspath(out_path))[1].lstrip(".").lower() or "png"
    supported = plt.figure().canvas.get_supported_filetypes()
    plt.close("all")
    if fmt not in supported:
        raise MxrecError(f"{os.fspath(out_path)}: matplotlib cannot write .{fmt} files; use one of "
                         + ", ".join(f".{ext}" for ext in sorted(supported)))
    return fmt


def plot_stats(stats: DatasetStats, out_path: str | os.PathLike) -> None:
    """Draw label counts, width x height, shorter side and bytes per image into one image file, atomically."""
    plt = pyplot()
    out_path = os.fspath(out_path)
    fmt = plot_format(out_path)
    fig, axes = plt.subplots(2, 2, figsize=(12, 9))
    try:
        fig.suptitle(f"{os.path.basename(stats.path)}: {stats.records} records")
        ax = axes[0][0]
        if stats.label_kind == "class" and stats.class_counts:
            ax.bar([int(k) for k in stats.class_counts], list(stats.class_counts.values()), width=0.8)
            ax.set(title="records per class", xlabel="class id", ylabel="records")
            if stats.label_names and len(stats.class_counts) <= NAMED_TICKS:
                ax.set_xticks(list(stats.class_counts), [stats.class_name(k) for k in stats.class_counts],
                              rotation=60, ha="right", fontsize="small")
        elif stats.value_histogram[1]:
            counts, edges = stats.value_histogram
            ax.stairs(counts, edges, fill=True)
            ax.set(title="first label values", xlabel="label", ylabel="records")
        else:
            ax.set(title="no labels")
        ax = axes[0][1]
        if stats.widths.size:
            ax.hexbin(stats.widths, stats.heights, gridsize=40, mincnt=1, cmap="viridis")
        ax.set(title="image size", xlabel="width (px)", ylabel="height (px)")
        ax = axes[1][0]
        if stats.widths.size:
            ax.hist(np.minimum(stats.widths, stats.heights), bins=40)
        ax.set(title="shorter side", xlabel="pixels", ylabel="images")
        ax = axes[1][1]
        if stats.image_bytes.size:
            ax.hist(stats.image_bytes / 1024, bins=40)
        ax.set(title="encoded image size", xlabel="KiB", ylabel="images")
        fig.tight_layout()
        with atomic_path(out_path) as tmp:
            fig.savefig(tmp, format=fmt, dpi=100)
    finally:
        plt.close(fig)
