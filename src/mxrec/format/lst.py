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

The label file that goes with a ``.lst`` (``PREFIX.labels``, written by
``mxrec list``) names each label: one ``label<TAB>name`` line per label, in
label order; the name is the image folder relative to the root (``.`` for the
root itself), or the class name of a CSV.

This module parses and formats the text; :mod:`mxrec.io.lists` reads and
writes the files.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from mxrec.errors import ListFileError, OptionError, UnsafePathError


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
        raise ListFileError(path, f"expected 'index<TAB>label(s)<TAB>path' (at least 3 tab-separated fields), "
                                  f"got {len(fields)}: {line.rstrip()!r}", line=line_number)
    try:
        index = int(fields[0])
    except ValueError:
        raise ListFileError(path, f"index {fields[0]!r} is not an integer", line=line_number) from None
    labels = []
    for field in fields[1:-1]:
        try:
            labels.append(float(field))
        except ValueError:
            raise ListFileError(path, f"label {field!r} is not a number", line=line_number) from None
    if not fields[-1]:
        raise ListFileError(path, "empty image path", line=line_number)
    return ListEntry(index, tuple(labels), fields[-1])


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


def format_label_names(label_names: dict[int, str]) -> str:
    """The text of a label file: ``label<TAB>name`` lines in label order."""
    for label, name in label_names.items():
        if "\n" in name or "\r" in name:
            raise OptionError(f"label {label}: name {name!r} holds a line break")
    return "".join(f"{label}\t{name}\n" for label, name in sorted(label_names.items()))


def parse_label_names(text: str, path: str | os.PathLike | None = None) -> dict[int, str]:
    """Parse the text of a label file (``label<TAB>name`` lines); errors name ``path`` and the line."""
    names: dict[int, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        label, sep, name = line.partition("\t")
        try:
            key = int(label)
        except ValueError:
            key = None
        if not sep or key is None or not name:
            raise ListFileError(path, f"expected 'label<TAB>name', got {line.rstrip()!r}", line=number)
        if key in names:
            raise ListFileError(path, f"label {key} is named twice", line=number)
        names[key] = name
    return names
