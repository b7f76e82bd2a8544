"""Reports as one self-contained HTML page: ``mxrec verify --html`` here, and the page kit ``probe`` shares.

A page needs nothing but itself: styles inline, charts as inline SVG, images as ``data:`` URIs, no script and
no network. The kit -- :func:`page`, :func:`checks_table`, :func:`bar_chart`, :func:`line_chart`,
:func:`scatter_chart`, :func:`image_uri`, :func:`table` -- is the one way mxrec draws a report page.

:func:`verify_page` shows a ``verify`` report: every check (failed ones first), thumbnails of the offending
records of failed checks (key, label), the class histogram (the ``balance`` check's counts) and the image
sizes (the ``shapes`` check's) as a scatter.
"""

from __future__ import annotations

import base64
import html
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from mxrec.datasets.opening import open_dataset
from mxrec.doctor.report import Check, Report
from mxrec.errors import MxrecError
from mxrec.format.header import unpack_header
from mxrec.image.codec import decode_pixels, encode_image, opencv
from mxrec.storage.atomic import atomic_open

THUMBNAILS_PER_CHECK = 12
THUMBNAIL = 96
COLOURS = ("#3b6ea8", "#d9822b", "#4f9a5a", "#b04a4a", "#7a5ea8", "#3c9a9a", "#8c8c3c", "#a85e8c")

_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222;padding:0 1em}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5em 0}td,th{padding:.25em .6em;border-bottom:1px solid #eee;
text-align:left;vertical-align:top}.ok{color:#2e7d32}.warn{color:#b26a00}.fail{color:#c62828;font-weight:bold}
figure{display:inline-block;margin:.3em;text-align:center;font-size:12px}figure img{display:block;
image-rendering:pixelated}.best{font-weight:bold;background:#eef6ee}svg text{font-size:11px}
"""


def escape(value: Any) -> str:
    return html.escape(str(value), quote=True)


def page(title: str, sections: Sequence[str]) -> str:
    """A complete HTML document: ``title`` and the ``sections`` (HTML fragments) in order."""
    body = "\n".join(sections)
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width\"><title>{escape(title)}</title>"
            f"<style>{_STYLE}</style></head>\n<body><h1>{escape(title)}</h1>\n{body}\n</body></html>\n")


def write_page(path: str | os.PathLike, document: str) -> None:
    """Write ``document`` to ``path`` atomically."""
    with atomic_open(path, "wb") as f:
        f.write(document.encode("utf-8"))


def status_of(check: Check) -> str:
    return "ok" if check.ok else ("warn" if check.warning else "fail")


def checks_table(report: Report, max_problems: int = 20) -> str:
    """The checks, failed ones first, each with its first problems."""
    order = {"fail": 0, "warn": 1, "ok": 2}
    rows = []
    for check in sorted(report.checks, key=lambda c: order[status_of(c)]):
        status = status_of(check)
        problems = "".join(f"<li>{escape(p.where)}: {escape(p.what)}</li>" for p in check.problems[:max_problems])
        more = len(check.problems) - max_problems
        if more > 0:
            problems += f"<li>... and {more} more</li>"
        code = check.details.get("code")
        rows.append(f"<tr class=\"check\" data-status=\"{status}\"><td class=\"{status}\">{status.upper()}</td>"
                    f"<td>{escape(check.name)}{f' <code>{escape(code)}</code>' if code else ''}</td>"
                    f"<td>{escape(check.summary)}{f'<ul>{problems}</ul>' if problems else ''}</td></tr>")
    verdict = "OK" if report.ok else "FAILED"
    return (f"<p>{escape(report.path)}: <b class=\"{'ok' if report.ok else 'fail'}\" id=\"verdict\">{verdict}</b></p>"
            f"<table id=\"checks\"><tr><th>status</th><th>check</th><th>finding</th></tr>{''.join(rows)}</table>")


def table(header: Sequence[str], rows: Sequence[Sequence[Any]], *, marked: Sequence[bool] = (),
          element_id: str = "") -> str:
    """A plain table; rows whose ``marked`` flag is set are highlighted."""
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    best = ' class="best"'
    body = "".join(f"<tr{best if i < len(marked) and marked[i] else ''}>"
                   + "".join(f"<td>{escape(v)}</td>" for v in row) + "</tr>" for i, row in enumerate(rows))
    ident = f" id=\"{escape(element_id)}\"" if element_id else ""
    return f"<table{ident}><tr>{head}</tr>{body}</table>"


def image_uri(img: np.ndarray, max_side: int = THUMBNAIL) -> str:
    """An RGB (HWC) or grey ``uint8`` image, shrunk to ``max_side``, as a PNG ``data:`` URI."""
    cv2 = opencv()
    height, width = img.shape[:2]
    factor = max_side / max(height, width, 1)
    if factor < 1:
        img = cv2.resize(img, (max(1, round(width * factor)), max(1, round(height * factor))),
                         interpolation=cv2.INTER_AREA)
    if img.ndim == 3:
        img = np.ascontiguousarray(img[..., 2::-1])  # RGB -> BGR for the encoder
    return "data:image/png;base64," + base64.b64encode(encode_image(img, ".png")).decode("ascii")


def figure(uri: str, caption: str) -> str:
    return f"<figure><img src=\"{uri}\" alt=\"{escape(caption)}\"><figcaption>{escape(caption)}</figcaption></figure>"


def _frame(width: int, height: int, content: str, label: str) -> str:
    return (f"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" role=\"img\" "
            f"aria-label=\"{escape(label)}\"><rect width=\"100%\" height=\"100%\" fill=\"#fafafa\"/>{content}</svg>")


def bar_chart(values: Sequence[float], labels: Sequence[str], *, label: str, unit: str = "",
              width: int = 640, bar: int = 18) -> str:
    """Horizontal bars, one per value, with its label and value."""
    top = max(max(values, default=0), 1e-12)
    rows = []
    for i, (value, name) in enumerate(zip(values, labels, strict=True)):
        y = 4 + i * (bar + 4)
        length = (width - 260) * value / top
        rows.append(f"<text x=\"4\" y=\"{y + bar - 5}\">{escape(name)}</text>"
                    f"<rect x=\"130\" y=\"{y}\" width=\"{length:.1f}\" height=\"{bar}\" "
                    f"fill=\"{COLOURS[i % len(COLOURS)]}\"/>"
                    f"<text x=\"{134 + length:.1f}\" y=\"{y + bar - 5}\">{value:.4g}{escape(unit)}</text>")
    return _frame(width, 8 + len(values) * (bar + 4), "".join(rows), label)


def _axes(points: Sequence[tuple[float, float]]) -> tuple[float, float, float, float]:
    xs = [p[0] for p in points] or [0.0]
    ys = [p[1] for p in points] or [0.0]
    return min(xs), max(max(xs), min(xs) + 1e-9), min(0.0, min(ys)), max(max(ys), 1e-9)


def line_chart(series: dict[str, Sequence[tuple[float, float]]], *, label: str, x_unit: str = "s",
               y_unit: str = "", width: int = 640, height: int = 180) -> str:
    """Lines over a shared x axis, one per named series, with a legend."""
    points = [p for values in series.values() for p in values]
    x0, x1, y0, y1 = _axes(points)
    left, bottom = 50, height - 20

    def xy(x: float, y: float) -> str:
        px = left + (width - left - 10) * (x - x0) / (x1 - x0)
        return f"{px:.1f},{10 + (bottom - 10) * (y1 - y) / (y1 - y0):.1f}"

    parts = [f"<text x=\"2\" y=\"14\">{y1:.4g}{escape(y_unit)}</text><text x=\"2\" y=\"{bottom}\">{y0:.4g}</text>",
             f"<text x=\"{width - 60}\" y=\"{height - 4}\">{x1:.3g} {escape(x_unit)}</text>"]
    for i, (name, values) in enumerate(series.items()):
        colour = COLOURS[i % len(COLOURS)]
        if values:
            parts.append(f"<polyline fill=\"none\" stroke=\"{colour}\" stroke-width=\"1.5\" "
                         f"points=\"{' '.join(xy(x, y) for x, y in values)}\"/>")
        parts.append(f"<text x=\"{left + 10 + 110 * i}\" y=\"{height - 4}\" fill=\"{colour}\">{escape(name)}</text>")
    return _frame(width, height, "".join(parts), label)


def scatter_chart(points: Sequence[tuple[float, float, float]], *, label: str, x_name: str, y_name: str,
                  width: int = 420, height: int = 300) -> str:
    """Points ``(x, y, weight)``, the radius growing with the weight."""
    x0, x1, y0, y1 = _axes([(x, y) for x, y, _ in points])
    x0, y0 = 0.0, 0.0
    heaviest = max((w for _, _, w in points), default=1) or 1
    dots = []
    for x, y, weight in points:
        cx = 40 + (width - 60) * (x - x0) / (x1 - x0)
        cy = height - 30 - (height - 50) * (y - y0) / (y1 - y0)
        dots.append(f"<circle cx=\"{cx:.1f}\" cy=\"{cy:.1f}\" r=\"{3 + 9 * (weight / heaviest) ** 0.5:.1f}\" "
                    f"fill=\"#3b6ea8\" fill-opacity=\"0.6\"><title>{x:g}x{y:g}: {weight:g}</title></circle>")
    axes = (f"<text x=\"{width - 120}\" y=\"{height - 8}\">{escape(x_name)} (max {x1:g})</text>"
            f"<text x=\"4\" y=\"14\">{escape(y_name)} (max {y1:g})</text>")
    return _frame(width, height, "".join(dots) + axes, label)


def _key_of(where: Any) -> Any:
    """The record key a problem's ``where`` names, or ``None`` (a byte offset, a line, a label...)."""
    if isinstance(where, (int, np.integer)):
        return int(where)
    if isinstance(where, str) and where and where.split()[0] not in ("byte", "line", "label", "classes"):
        return where
    return None


def _thumbnails(report: Report, rec_path: str, idx_path: str | None) -> str:
    failed = [c for c in report.checks if not c.ok and not c.warning and c.problems]
    if not failed:
        return ""
    sections = []
    try:
        reader = open_dataset(rec_path, idx_path, duplicates="last", strict=False)
    except (MxrecError, OSError) as exc:
        return f"<p>records not readable for thumbnails: {escape(exc)}</p>"
    with reader:
        for check in failed:
            figures = []
            for problem in check.problems:
                key = _key_of(problem.where)
                if key is None or len(figures) >= THUMBNAILS_PER_CHECK:
                    continue
                figures.append(_record_figure(reader, key, problem.what))
            if figures:
                sections.append(f"<h3>{escape(check.name)}</h3>{''.join(figures)}")
    return "<h2>Offending records</h2>" + "".join(sections) if sections else ""


def _record_figure(reader: Any, key: Any, what: str) -> str:
    try:
        position = reader.position(key)
        payload = reader[position]
        header, start = unpack_header(payload)
        label = header.label if header.flag == 0 else list(np.round(header.label, 3))
        img = decode_pixels(memoryview(payload)[start:], 3)[..., ::-1]
    except (MxrecError, ValueError, KeyError, IndexError) as exc:
        return (f"<figure><div style=\"width:{THUMBNAIL}px;height:{THUMBNAIL}px;background:#eee\"></div>"
                f"<figcaption>key {escape(key)}: no image ({escape(type(exc).__name__)})<br>{escape(what)}"
                "</figcaption></figure>")
    return figure(image_uri(img), f"key {key}, label {label}: {what}")


def verify_page(report: Report, rec_path: str | os.PathLike, idx_path: str | None = None) -> str:
    """The ``verify`` report of ``rec_path`` as a page (see the module docstring)."""
    sections = [checks_table(report), _thumbnails(report, os.fspath(rec_path), idx_path)]
    balance = next((c for c in report.checks if c.name == "balance"), None)
    counts = balance.details.get("counts") if balance is not None else None
    if counts:
        sections.append("<h2>Class histogram</h2>" + bar_chart(list(counts.values()),
                                                                [f"class {k}" for k in counts],
                                                                label="records per class"))
    shapes = next((c for c in report.checks if c.name == "shapes"), None)
    sizes = shapes.details.get("shapes") if shapes is not None else None
    if sizes:
        points = []
        for text, count in sizes.items():
            width, height = text.split("x")[:2]
            points.append((float(width), float(height), float(count)))
        sections.append("<h2>Image sizes</h2>" + scatter_chart(points, label="image sizes", x_name="width px",
                                                                y_name="height px"))
    return page(f"mxrec verify: {os.path.basename(os.fspath(rec_path))}", sections)
