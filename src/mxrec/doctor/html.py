"""Reports as self-contained HTML: the one kit mxrec draws pages and notebook cells with.

A page needs nothing but itself: styles inline, charts as inline SVG, images as ``data:`` URIs (JPEG
thumbnails), no script and no network. The kit -- :func:`page` (a whole document), :func:`fragment` (the
same as one block, what a ``_repr_html_`` returns in Jupyter), :func:`checks_table`, :func:`table`,
:func:`key_values`, :func:`bar_chart`, :func:`line_chart`, :func:`scatter_chart`, :func:`histogram2d_chart`,
:func:`image_uri`, :func:`figure` -- is the one way mxrec draws a report. It knows no result type: it takes
what they hold (a report's ``path``, ``ok`` and ``checks``; rows; values), so every subpackage's results can use it.

The pages themselves are :mod:`mxrec.doctor.verify_page` (``verify --html``) and
:mod:`mxrec.probing.html` (``probe --html``).
"""

from __future__ import annotations

import base64
import html
import math
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from mxrec.image.codec import encode_image, opencv
from mxrec.storage.atomic import atomic_open

THUMBNAIL = 96
THUMBNAIL_QUALITY = 80  # JPEG quality of thumbnails: a few kB each
COLOURS = ("#3b6ea8", "#d9822b", "#4f9a5a", "#b04a4a", "#7a5ea8", "#3c9a9a", "#8c8c3c", "#a85e8c")
# A sequential scale for counts (light to dark, viridis-like), interpolated
_SCALE = ((253, 231, 37), (94, 201, 98), (33, 145, 140), (59, 82, 139), (68, 1, 84))
NAME_CHARS = 20  # characters of a bar's label shown; the whole label is its tooltip

_RULES = (
    ("", "font:14px/1.45 system-ui,sans-serif;color:#222"),
    ("h1", "font-size:1.4em"),
    ("h2", "font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ddd"),
    ("h3", "font-size:1em;margin:1em 0 .3em"),
    ("table", "border-collapse:collapse;margin:.5em 0"),
    ("td,th", "padding:.25em .6em;border-bottom:1px solid #eee;text-align:left;vertical-align:top"),
    (".ok", "color:#2e7d32"), (".warn", "color:#b26a00"), (".fail", "color:#c62828;font-weight:bold"),
    ("figure", "display:inline-block;margin:.3em;text-align:center;font-size:12px;vertical-align:top;"
               "max-width:160px"),
    ("figure img", "display:block;margin:auto"),
    (".best", "font-weight:bold;background:#eef6ee"), ("svg text", "font-size:11px"),
    (".missing", "background:#eee;display:flex;align-items:center;justify-content:center;color:#777"),
    (".row", "white-space:nowrap;overflow-x:auto"), (".note", "color:#666"),
)


def _css(scope: str) -> str:
    """The style rules, each under ``scope`` (a selector; empty: the whole document's ``body``)."""
    rules = []
    for selector, declarations in _RULES:
        if scope:
            parts = [f"{scope} {s}".strip() for s in (selector or "").split(",")]
            rules.append(f"{','.join(parts)}{{{declarations}}}")
        else:
            rules.append(f"{selector or 'body'}{{{declarations}}}")
    if not scope:
        rules.append("body{margin:2em auto;max-width:1100px;padding:0 1em}")
    return "".join(rules)


def escape(value: Any) -> str:
    """``value`` as HTML text (quotes escaped too: safe in attributes)."""
    return html.escape(str(value), quote=True)


def page(title: str, sections: Sequence[str]) -> str:
    """A complete HTML document: ``title`` and the ``sections`` (HTML fragments) in order.

    Parameters
    ----------
    title
        The document's title and heading.
    sections
        HTML fragments, in order.

    Returns
    -------
    str
        The document.
    """
    body = "\n".join(sections)
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width\"><title>{escape(title)}</title>"
            f"<style>{_css('')}</style></head>\n<body><h1>{escape(title)}</h1>\n{body}\n</body></html>\n")


def fragment(title: str, sections: Sequence[str]) -> str:
    """``title`` and ``sections`` as one self-contained block (its style scoped to it): a ``_repr_html_``.

    Jupyter shows what an object's ``_repr_html_`` returns in place of its text; a result type gets one by
    returning ``fragment(its title, its sections)`` drawn with this kit.

    Parameters
    ----------
    title
        The block's heading.
    sections
        HTML fragments, in order.

    Returns
    -------
    str
        One ``<div class="mxrec">`` holding its ``<style>``, the heading and the sections.
    """
    return (f"<div class=\"mxrec\"><style>{_css('.mxrec')}</style><h3>{escape(title)}</h3>"
            + "".join(sections) + "</div>")


def write_page(path: str | os.PathLike, document: str) -> None:
    """Write ``document`` to ``path`` atomically.

    Parameters
    ----------
    path
        The file to write.
    document
        The page's text.
    """
    with atomic_open(path, "wb") as f:
        f.write(document.encode("utf-8"))


def status_of(check: Any) -> str:
    """``"ok"``, ``"warn"`` or ``"fail"``: how a :class:`~mxrec.doctor.report.Check` came out."""
    return "ok" if check.ok else ("warn" if check.warning else "fail")


def check_rows(report: Any) -> list[tuple[str, Any]]:
    """``(scope, check)`` of every check of a report: ``""`` for a report's own; a shard set's
    (:class:`~mxrec.doctor.sets.ShardSetReport`: it has ``reports``) also its manifest check, the checks over
    the whole set and every shard's, scoped by the shard's file."""
    if not hasattr(report, "reports"):
        return [("", c) for c in report.checks]
    rows = [("manifest", report.manifest)] if report.manifest is not None else []
    rows += [("whole set", c) for c in report.checks]
    return rows + [(shard.path, c) for shard in report.reports for c in shard.checks]


def checks_table(report: Any, max_problems: int = 20) -> str:
    """The verdict and the checks of ``report``, failed ones first, each with its first problems.

    Parameters
    ----------
    report
        A :class:`~mxrec.doctor.report.Report` or :class:`~mxrec.doctor.sets.ShardSetReport` (anything with
        ``path``, ``ok`` and ``checks``; ``reports`` and ``manifest`` for a shard set).
    max_problems
        Problems listed per check.

    Returns
    -------
    str
        The verdict paragraph (``#verdict``) and the table (``#checks``, a row ``tr.check`` per check with its
        ``data-status``).
    """
    order = {"fail": 0, "warn": 1, "ok": 2}
    checks = sorted(check_rows(report), key=lambda row: order[status_of(row[1])])
    scoped = any(scope for scope, _ in checks)
    rows = []
    for scope, check in checks:
        status = status_of(check)
        problems = "".join(f"<li>{escape(p.where)}: {escape(p.what)}</li>" for p in check.problems[:max_problems])
        more = len(check.problems) - max_problems
        if more > 0:
            problems += f"<li>... and {more} more</li>"
        code = check.details.get("code")
        where = f"<td>{escape(scope)}</td>" if scoped else ""
        rows.append(f"<tr class=\"check\" data-status=\"{status}\"><td class=\"{status}\">{status.upper()}</td>"
                    f"{where}<td>{escape(check.name)}{f' <code>{escape(code)}</code>' if code else ''}</td>"
                    f"<td>{escape(check.summary)}{f'<ul>{problems}</ul>' if problems else ''}</td></tr>")
    verdict = "OK" if report.ok else "FAILED"
    head = "<th>status</th>" + ("<th>where</th>" if scoped else "") + "<th>check</th><th>finding</th>"
    return (f"<p>{escape(report.path)}: <b class=\"{'ok' if report.ok else 'fail'}\" id=\"verdict\">{verdict}</b></p>"
            f"<table id=\"checks\"><tr>{head}</tr>{''.join(rows)}</table>")


def table(header: Sequence[str], rows: Sequence[Sequence[Any]], *, marked: Sequence[bool] = (),
          element_id: str = "") -> str:
    """A plain table; rows whose ``marked`` flag is set are highlighted.

    Parameters
    ----------
    header
        The column names.
    rows
        The cells, row by row (shown as text).
    marked
        Per row, whether to highlight it.
    element_id
        The table's ``id``, if any.

    Returns
    -------
    str
        The ``<table>``.
    """
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    best = ' class="best"'
    body = "".join(f"<tr{best if i < len(marked) and marked[i] else ''}>"
                   + "".join(f"<td>{escape(v)}</td>" for v in row) + "</tr>" for i, row in enumerate(rows))
    ident = f" id=\"{escape(element_id)}\"" if element_id else ""
    return f"<table{ident}><tr>{head}</tr>{body}</table>"


def key_values(rows: Sequence[tuple[str, Any]], *, element_id: str = "", flagged: Sequence[str] = ()) -> str:
    """A two-column table of ``(name, value)`` rows: a summary such as ``mxrec info`` prints.

    Parameters
    ----------
    rows
        ``(name, value)`` pairs, in order (values shown as text).
    element_id
        The table's ``id``, if any.
    flagged
        Names whose value is shown as a fault.

    Returns
    -------
    str
        The ``<table>``, one ``<tr data-name=...>`` per row.
    """
    fault = ' class="fail"'
    body = "".join(f"<tr data-name=\"{escape(name)}\"><th>{escape(name)}</th>"
                   f"<td{fault if name in flagged else ''}>{escape(value)}</td></tr>" for name, value in rows)
    ident = f" id=\"{escape(element_id)}\"" if element_id else ""
    return f"<table{ident}>{body}</table>"


def image_uri(img: np.ndarray, max_side: int | None = THUMBNAIL, *, bgr: bool = False,
              quality: int = THUMBNAIL_QUALITY) -> str:
    """An image as a JPEG ``data:`` URI, shrunk to fit ``max_side``.

    Parameters
    ----------
    img
        ``uint8`` pixels, HWC RGB (``bgr``: BGR, as OpenCV decodes) or HW grey.
    max_side
        The longest side it is shrunk to (never enlarged); ``None`` keeps its size.
    bgr
        Whether the channels are in OpenCV's BGR order.
    quality
        JPEG quality.

    Returns
    -------
    str
        ``data:image/jpeg;base64,...``.
    """
    cv2 = opencv()
    height, width = img.shape[:2]
    factor = 1.0 if max_side is None else max_side / max(height, width, 1)
    if factor < 1:
        img = cv2.resize(img, (max(1, round(width * factor)), max(1, round(height * factor))),
                         interpolation=cv2.INTER_AREA)
    if img.ndim == 3 and not bgr:
        img = np.ascontiguousarray(img[..., 2::-1])  # RGB -> BGR for the encoder
    elif img.ndim == 3:
        img = np.ascontiguousarray(img[..., :3])
    return "data:image/jpeg;base64," + base64.b64encode(encode_image(img, ".jpg", quality)).decode("ascii")


def figure(uri: str, caption: str, *, title: str = "", missing: str = "") -> str:
    """A captioned image (``uri``); with ``missing``, a grey box saying why there is no image instead.

    Parameters
    ----------
    uri
        The image's ``data:`` URI (ignored with ``missing``).
    caption
        The text under it.
    title
        Its tooltip and alternative text (default: the caption).
    missing
        Why there is no image.

    Returns
    -------
    str
        The ``<figure>``.
    """
    alt = escape(title or caption)
    if missing:
        box = (f"<div class=\"missing\" style=\"width:{THUMBNAIL}px;height:{THUMBNAIL}px\" title=\"{alt}\">"
               f"{escape(missing)}</div>")
    else:
        box = f"<img src=\"{uri}\" alt=\"{alt}\" title=\"{alt}\">"
    return f"<figure>{box}<figcaption>{escape(caption)}</figcaption></figure>"


def _frame(width: int, height: int, content: str, label: str) -> str:
    return (f"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" role=\"img\" "
            f"aria-label=\"{escape(label)}\"><rect width=\"100%\" height=\"100%\" fill=\"#fafafa\"/>{content}</svg>")


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round values (1, 2 or 5 times a power of ten apart) from ``low`` to ``high``, about ``count`` of them."""
    if not (math.isfinite(low) and math.isfinite(high)) or high <= low:
        return [low]
    raw = (high - low) / max(count, 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.ceil(low / step - 1e-9) * step
    return [round(first + i * step, 10) for i in range(int((high - first) / step + 1e-9) + 1)]


class _Plot:
    """An x-y plotting area inside a ``width`` x ``height`` frame, with axes, ticks and axis names."""

    left, right, top, bottom = 56, 12, 22, 36

    def __init__(self, width: int, height: int, x: tuple[float, float], y: tuple[float, float]) -> None:
        self.width, self.height = width, height
        self.x0, self.x1 = x[0], x[1] if x[1] > x[0] else x[0] + 1
        self.y0, self.y1 = y[0], y[1] if y[1] > y[0] else y[0] + 1

    def px(self, x: float) -> float:
        return self.left + (self.width - self.left - self.right) * (x - self.x0) / (self.x1 - self.x0)

    def py(self, y: float) -> float:
        return self.height - self.bottom - (self.height - self.top - self.bottom) * (y - self.y0) / (self.y1 - self.y0)

    def axes(self, x_name: str, y_name: str) -> str:
        """Both axes with their ticks, tick values and names."""
        base, left = self.height - self.bottom, self.left
        parts = [f"<path d=\"M{left},{self.top}V{base}H{self.width - self.right}\" stroke=\"#888\" fill=\"none\"/>"]
        for t in nice_ticks(self.x0, self.x1):
            x = self.px(t)
            parts.append(f"<path d=\"M{x:.1f},{base}v4\" stroke=\"#888\"/>"
                         f"<text x=\"{x:.1f}\" y=\"{base + 15}\" text-anchor=\"middle\">{t:g}</text>")
        for t in nice_ticks(self.y0, self.y1):
            y = self.py(t)
            parts.append(f"<path d=\"M{left - 4},{y:.1f}h4\" stroke=\"#888\"/>"
                         f"<text x=\"{left - 6}\" y=\"{y + 4:.1f}\" text-anchor=\"end\">{t:g}</text>")
        parts.append(f"<text class=\"axis\" x=\"{(left + self.width - self.right) / 2:.0f}\" y=\"{self.height - 4}\" "
                     f"text-anchor=\"middle\">{escape(x_name)}</text>"
                     f"<text class=\"axis\" x=\"4\" y=\"{self.top - 8}\">{escape(y_name)}</text>")
        return "".join(parts)


def bar_chart(values: Sequence[float], labels: Sequence[str], *, label: str, unit: str = "",
              width: int = 640, bar: int = 18) -> str:
    """Horizontal bars, one per value, with its label (cut to :data:`NAME_CHARS`; whole in its tooltip) and value.

    Parameters
    ----------
    values
        The bars' lengths.
    labels
        Each bar's label.
    label
        What the chart shows (its accessible name).
    unit
        Written after each value.
    width
        Pixels wide.
    bar
        Pixels per bar.

    Returns
    -------
    str
        The ``<svg>``.
    """
    top = max(max(values, default=0), 1e-12)
    rows = []
    for i, (value, name) in enumerate(zip(values, labels, strict=True)):
        y = 4 + i * (bar + 4)
        length = (width - 260) * value / top
        shown = name if len(name) <= NAME_CHARS else name[:NAME_CHARS - 1] + "…"
        rows.append(f"<g><title>{escape(name)}: {value:.4g}{escape(unit)}</title>"
                    f"<text x=\"4\" y=\"{y + bar - 5}\">{escape(shown)}</text>"
                    f"<rect x=\"140\" y=\"{y}\" width=\"{length:.1f}\" height=\"{bar}\" "
                    f"fill=\"{COLOURS[i % len(COLOURS)]}\"/>"
                    f"<text x=\"{144 + length:.1f}\" y=\"{y + bar - 5}\">{value:.4g}{escape(unit)}</text></g>")
    return _frame(width, 8 + len(values) * (bar + 4), "".join(rows), label)


def line_chart(series: dict[str, Sequence[tuple[float, float]]], *, label: str, x_unit: str = "s",
               y_unit: str = "", width: int = 640, height: int = 200) -> str:
    """Lines over a shared x axis, one per named series, with axes, ticks and a legend.

    Parameters
    ----------
    series
        ``{name: [(x, y), ...]}``.
    label
        What the chart shows (its accessible name).
    x_unit, y_unit
        The axes' units.
    width, height
        Pixels.

    Returns
    -------
    str
        The ``<svg>``: a line per series, with its legend.
    """
    points = [p for values in series.values() for p in values]
    xs = [p[0] for p in points] or [0.0]
    ys = [p[1] for p in points] or [0.0]
    plot = _Plot(width, height, (min(xs), max(xs)), (min(0.0, min(ys)), max(max(ys), 1e-9)))
    parts = [plot.axes(x_unit.strip(), y_unit.strip())]
    for i, (name, values) in enumerate(series.items()):
        colour = COLOURS[i % len(COLOURS)]
        if values:
            line = " ".join(f"{plot.px(x):.1f},{plot.py(y):.1f}" for x, y in values)
            parts.append(f"<polyline fill=\"none\" stroke=\"{colour}\" stroke-width=\"1.5\" points=\"{line}\"/>")
        parts.append(f"<text x=\"{plot.left + 60 + 90 * i}\" y=\"12\" fill=\"{colour}\">{escape(name)}</text>")
    return _frame(width, height, "".join(parts), label)


def scatter_chart(points: Sequence[tuple[float, float, float]], *, label: str, x_name: str, y_name: str,
                  width: int = 460, height: int = 320) -> str:
    """Points ``(x, y, weight)`` from the origin, the radius growing with the weight, each with its tooltip.

    Parameters
    ----------
    points
        ``(x, y, weight)`` triples.
    label
        What the chart shows (its accessible name).
    x_name, y_name
        The axes' names.
    width, height
        Pixels.

    Returns
    -------
    str
        The ``<svg>``: a circle per point, with its tooltip.
    """
    xs = [p[0] for p in points] or [1.0]
    ys = [p[1] for p in points] or [1.0]
    plot = _Plot(width, height, (0.0, max(xs) * 1.05), (0.0, max(ys) * 1.05))
    heaviest = max((w for _, _, w in points), default=1) or 1
    dots = [f"<circle cx=\"{plot.px(x):.1f}\" cy=\"{plot.py(y):.1f}\" r=\"{2 + 8 * (w / heaviest) ** 0.5:.1f}\" "
            f"fill=\"#3b6ea8\" fill-opacity=\"0.6\"><title>{x:g} x {y:g}: {w:g}</title></circle>"
            for x, y, w in points]
    return _frame(width, height, plot.axes(x_name, y_name) + "".join(dots), label)


def _shade(fraction: float) -> str:
    """The colour of ``fraction`` (0..1) on the count scale."""
    position = min(max(fraction, 0.0), 1.0) * (len(_SCALE) - 1)
    low = min(int(position), len(_SCALE) - 2)
    mix = position - low
    rgb = [round(a + (b - a) * mix) for a, b in zip(_SCALE[low], _SCALE[low + 1], strict=True)]
    return "#" + "".join(f"{c:02x}" for c in rgb)


def histogram2d_chart(xs: np.ndarray, ys: np.ndarray, *, label: str, x_name: str, y_name: str, bins: int = 40,
                      unit: str = "images", width: int = 460, height: int = 320) -> str:
    """A 2-D histogram of the points ``(xs[i], ys[i])``: cells shaded by how many fall in each (a log scale),
    each cell's range and count in its tooltip, and the scale beside it.

    Parameters
    ----------
    xs, ys
        The points' coordinates.
    label
        What the chart shows (its accessible name).
    x_name, y_name
        The axes' names.
    bins
        Cells along each axis.
    unit
        What is counted.
    width, height
        Pixels (the scale takes 60 more on the right).

    Returns
    -------
    str
        The ``<svg>``.
    """
    xs, ys = np.asarray(xs, np.float64), np.asarray(ys, np.float64)
    x_edges = np.linspace(0, max(float(xs.max(initial=0)), 1.0) * 1.02, bins + 1)
    y_edges = np.linspace(0, max(float(ys.max(initial=0)), 1.0) * 1.02, bins + 1)
    counts, _, _ = np.histogram2d(xs, ys, bins=(x_edges, y_edges))
    plot = _Plot(width, height, (0.0, float(x_edges[-1])), (0.0, float(y_edges[-1])))
    most = max(float(counts.max(initial=0)), 1.0)
    cells = []
    for i, j in zip(*np.nonzero(counts), strict=True):
        n = float(counts[i, j])
        x, y = plot.px(x_edges[i]), plot.py(y_edges[j + 1])
        w, h = plot.px(x_edges[i + 1]) - x, plot.py(y_edges[j]) - y
        cells.append(f"<rect x=\"{x:.1f}\" y=\"{y:.1f}\" width=\"{w + 0.3:.1f}\" height=\"{h + 0.3:.1f}\" "
                     f"fill=\"{_shade(math.log1p(n) / math.log1p(most))}\"><title>{x_name} {x_edges[i]:.0f}.."
                     f"{x_edges[i + 1]:.0f}, {y_name} {y_edges[j]:.0f}..{y_edges[j + 1]:.0f}: {n:g} {unit}"
                     f"</title></rect>")
    steps = 5
    legend = [f"<text x=\"{width + 4}\" y=\"{plot.top - 8}\">{escape(unit)}</text>"]
    for k in range(steps):
        value = math.expm1(math.log1p(most) * (steps - 1 - k) / (steps - 1))
        y = plot.top + k * 22
        legend.append(f"<rect x=\"{width + 4}\" y=\"{y}\" width=\"14\" height=\"18\" "
                      f"fill=\"{_shade((steps - 1 - k) / (steps - 1))}\"/>"
                      f"<text x=\"{width + 22}\" y=\"{y + 13}\">{max(value, 1):.0f}</text>")
    return _frame(width + 60, height, plot.axes(x_name, y_name) + "".join(cells) + "".join(legend), label)
