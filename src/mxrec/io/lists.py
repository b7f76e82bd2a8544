"""``.lst`` image lists and ``.labels`` label files, local or at a URL (their text formats: :mod:`mxrec.format.lst`)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator

from mxrec.format.lst import ListEntry, format_label_names, format_list_line, parse_label_names, parse_list_line
from mxrec.storage.atomic import atomic_open
from mxrec.storage.files import open_input

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
