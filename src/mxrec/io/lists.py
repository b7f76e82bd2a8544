"""``.lst`` image lists and ``.labels`` label files, local or at a URL (their text formats: :mod:`mxrec.format.lst`)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator

from mxrec.format.lst import (
    ListEntry,
    format_label_names,
    format_list_line,
    parse_label_names,
    parse_list_line,
    resolve_list_path,
)
from mxrec.storage.atomic import atomic_open
from mxrec.storage.files import glob, open_input
from mxrec.storage.filesystem import absolute, is_url, join

LABELS_SUFFIX = ".labels"


def iter_numbered_list(path: str | os.PathLike) -> Iterator[tuple[int, ListEntry]]:
    """``(line number, entry)`` for each entry of a ``.lst`` file, in file order (blank lines skipped)."""
    with open_input(os.fspath(path), "r", encoding="utf-8") as f:
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
    """Write a ``.lst`` file atomically (see :mod:`mxrec.storage.atomic`).

    ``exact``: as in :func:`format_list_line`.
    """
    with atomic_open(path, "w", encoding="utf-8", newline="\n") as f:
        for entry in entries:
            f.write(format_list_line(entry, exact))


def label_names_path(prefix: str | os.PathLike) -> str:
    """Where the label file of the lists with ``prefix`` goes: ``PREFIX.labels``."""
    return os.fspath(prefix) + LABELS_SUFFIX


def read_label_names(path: str | os.PathLike) -> dict[int, str]:
    """Read a label file (``label<TAB>name`` lines, as ``mxrec list`` writes)."""
    with open_input(os.fspath(path), "r", encoding="utf-8") as f:
        return parse_label_names(f.read(), path)


def write_label_names(path: str | os.PathLike, label_names: dict[int, str]) -> None:
    """Write a label file atomically."""
    text = format_label_names(label_names)
    with atomic_open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)


def image_path(root: str | os.PathLike, path: str) -> str:
    """The image file that a ``.lst`` path field names under the image root ``root`` (a folder or a URL).

    Parameters
    ----------
    root
        The image root.
    path
        The ``.lst`` entry's path field.

    Returns
    -------
    str
        The image's path or URL.

    Raises
    ------
    UnsafePathError
        ``path`` is absolute or leads outside ``root`` (:func:`~mxrec.format.lst.resolve_list_path`).
    """
    resolved = resolve_list_path(root, path)
    return join(os.fspath(root), path) if is_url(os.fspath(root)) else resolved


def lists_with_prefix(prefix: str | os.PathLike) -> list[str]:
    """Every ``.lst`` file whose absolute path (or URL) starts with ``prefix``, sorted: im2rec's rule, in the folder
    ``prefix`` when it is one, else in its parent.

    Parameters
    ----------
    prefix
        A path prefix, local or a URL.

    Returns
    -------
    list[str]
        The lists' absolute paths or URLs (none found: empty).
    """
    prefix = absolute(prefix)
    if is_url(prefix):
        return sorted({p for p in glob(prefix + "*.lst") + glob(prefix.rstrip("/") + "/*.lst") if p.startswith(prefix)})
    folder = prefix if os.path.isdir(prefix) else os.path.dirname(prefix)
    return sorted(path for path in (os.path.join(folder, name) for name in os.listdir(folder))
                  if path.startswith(prefix) and path.endswith(".lst") and os.path.isfile(path))
