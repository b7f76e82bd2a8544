"""The ``.lst`` image list: which image file goes into which record, with which label(s).

Format (as written and read by MXNet's ``tools/im2rec.py``): text, one image a
line, fields separated by tabs::

    index <TAB> label_1 [<TAB> label_2 ...] <TAB> relative/path.jpg

``index`` is an integer (im2rec stores it as the record's header id and as its
``.idx`` key); labels are floats, written ``"%f"`` (six decimals); the path is
the last field and is relative to the image root. im2rec strips each field and
*skips* malformed lines with a printed message; here they raise
:class:`~mxrec.errors.ListFileError` naming the file and line number, because
a silently shorter dataset is worse than a stopped job.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from mxrec.atomic import atomic_open
from mxrec.errors import ListFileError, UnsafePathError


@dataclass(frozen=True)
class ListEntry:
    """One line of a ``.lst``: record index, labels, and image path relative to the root."""

    index: int
    labels: tuple[float, ...]
    path: str


def _exact_label(label: float) -> str:
    """``"%f"`` when that gives back the same float32 label, else the shortest text that does."""
    text = f"{label:f}"
    value = np.float32(label)
    return text if np.float32(text) == value or np.isnan(value) else str(value)


def format_list_line(entry: ListEntry, exact: bool = False) -> str:
    """The ``.lst`` line for ``entry``, byte-identical to im2rec's ``write_list``.

    im2rec writes labels with six decimals, which loses float32 labels such
    as ``1e-7``; with ``exact`` such labels are written in full (any reader,
    im2rec's included, parses them) so that packing the list gives the same
    float32 labels back.
    """
    labels = (_exact_label(label) if exact else f"{label:f}" for label in entry.labels)
    return f"{entry.index}\t" + "".join(f"{label}\t" for label in labels) + f"{entry.path}\n"


def parse_list_line(line: str, path: str | os.PathLike | None = None, line_number: int | None = None) -> ListEntry:
    """Parse one ``.lst`` line (without or with its newline)."""
    fields = [f.strip() for f in line.strip().split("\t")]
    if len(fields) < 3:
        raise ListFileError(path, line_number,
                            f"expected 'index<TAB>label(s)<TAB>path' (at least 3 tab-separated fields), "
                            f"got {len(fields)}: {line.rstrip()!r}")
    try:
        index = int(fields[0])
    except ValueError:
        raise ListFileError(path, line_number, f"index {fields[0]!r} is not an integer") from None
    labels = []
    for field in fields[1:-1]:
        try:
            labels.append(float(field))
        except ValueError:
            raise ListFileError(path, line_number, f"label {field!r} is not a number") from None
    if not fields[-1]:
        raise ListFileError(path, line_number, "empty image path")
    return ListEntry(index, tuple(labels), fields[-1])


def iter_numbered_list(path: str | os.PathLike) -> Iterator[tuple[int, ListEntry]]:
    """``(line number, entry)`` for each entry of a ``.lst`` file, in file order (blank lines skipped)."""
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if line.strip():
                yield number, parse_list_line(line, path, number)


def iter_list(path: str | os.PathLike) -> Iterator[ListEntry]:
    """The entries of a ``.lst`` file, in file order (blank lines skipped)."""
    for _, entry in iter_numbered_list(path):
        yield entry


def read_list(path: str | os.PathLike) -> list[ListEntry]:
    """All entries of a ``.lst`` file."""
    return list(iter_list(path))


def write_list(path: str | os.PathLike, entries: Iterable[ListEntry], exact: bool = False) -> None:
    """Write a ``.lst`` file atomically (see :mod:`mxrec.atomic`).

    ``exact``: as in :func:`format_list_line`.
    """
    with atomic_open(path, "w", encoding="utf-8", newline="\n") as f:
        for entry in entries:
            f.write(format_list_line(entry, exact))


def check_list_path(path: str) -> str | None:
    """Why ``path`` cannot be written as a ``.lst`` path field (``None`` when it can).

    The format has no quoting: a tab or newline would split the line, and
    readers strip each field, so surrounding spaces would be lost.
    """
    if not path:
        return "the path is empty"
    if any(c in path for c in "\t\n\r"):
        return f"the path {path!r} holds a tab or line break"
    if path != path.strip():
        return f"the path {path!r} starts or ends with white space"
    return None


def resolve_list_path(root: str | os.PathLike, path: str) -> str:
    """The file ``path`` (a ``.lst`` path field) names under ``root``.

    Raises :class:`~mxrec.errors.UnsafePathError` for an absolute path or one
    whose ``..`` parts climb out of ``root``: a list must not reach files
    outside its image root. (im2rec would read any such file; symbolic links
    inside ``root`` are followed, as im2rec's list mode does.)
    """
    if os.path.isabs(path) or os.path.splitdrive(path)[0]:
        raise UnsafePathError(f"image path {path!r} is absolute; .lst paths must be relative to the root")
    normal = os.path.normpath(path)
    if normal == os.pardir or normal.startswith(os.pardir + os.sep) or normal == os.curdir:
        raise UnsafePathError(f"image path {path!r} leads outside the image root {os.fspath(root)!r}")
    return os.path.join(root, normal)
