"""The ``.idx`` file: which key's record starts at which byte of the ``.rec`` file.

Format (as written by ``mxnet.recordio.MXIndexedRecordIO``): UTF-8 text, one
line per record, ``f"{key}\\t{offset}\\n"``, where ``offset`` is the byte offset
in the ``.rec`` of the record's first part. Lines appear in write order. Keys
are integers by default (``key_type=int``); string keys may hold spaces but not
tabs or newlines. MXNet strips each line and ignores fields after the second;
blank lines are skipped here (MXNet would crash on them).

This module parses and formats that text, and names the ``.idx`` that belongs
beside a ``.rec``; reading, writing and rebuilding files is :mod:`mxrec.io.index`.
Whether each offset of a given ``.idx`` really is a record start is checked by
the readers and by :mod:`mxrec.doctor`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from mxrec.errors import DuplicateKeyError, IndexFileError

KeyType = Callable[[str], object]


def index_path_for(rec_path: str | os.PathLike) -> str:
    """The conventional ``.idx`` path beside a ``.rec`` (``data.rec`` -> ``data.idx``)."""
    rec_path = os.fspath(rec_path)
    stem, ext = os.path.splitext(rec_path)
    return (stem if ext == ".rec" else rec_path) + ".idx"


@dataclass
class Index:
    """A parsed ``.idx``: ``keys`` and ``offsets`` in file order (duplicates kept as written)."""

    keys: list
    offsets: np.ndarray  # int64, same length as keys
    increasing: bool = False  # keys known to be strictly increasing (hence unique)

    def __len__(self) -> int:
        return len(self.keys)

    def mapping(self) -> dict:
        """``{key: offset}``; for a duplicated key the last line wins (MXNet's rule)."""
        return dict(zip(self.keys, self.offsets.tolist(), strict=False))

    def duplicates(self) -> list:
        """Keys that appear more than once, each listed once, in order of first repeat."""
        seen: set = set()
        dups: dict = {}
        for key in self.keys:
            if key in seen:
                dups[key] = None
            seen.add(key)
        return list(dups)


def format_index_line(key: object, offset: int) -> str:
    """One ``.idx`` line for ``key`` at byte ``offset``."""
    text = str(key)
    if "\t" in text or "\n" in text or "\r" in text:
        raise IndexFileError(None, f"key {key!r} contains a tab or newline and cannot be stored in an .idx")
    return f"{text}\t{offset}\n"


def format_index(keys: Iterable[object], offsets: Iterable[int]) -> str:
    """The text of an ``.idx`` holding ``keys`` at ``offsets``."""
    return "".join(format_index_line(k, int(o)) for k, o in zip(keys, offsets, strict=False))


def parse_index(text: str | bytes, key_type: KeyType = int, path: str | os.PathLike | None = None,
                allow_duplicates: bool = True) -> Index:
    """Parse ``.idx`` text. Raises :class:`IndexFileError` naming the line of any malformed entry."""
    index = _parse_int_index(text) if key_type is int else None
    if index is None:
        if isinstance(text, bytes):
            try:
                text = text.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise IndexFileError(path, f"not UTF-8 text (byte {exc.start})") from None
        index = _parse_index_lines(text, key_type, path)
    if not allow_duplicates and not index.increasing and len(set(index.keys)) != len(index.keys):
        seen: set = set()
        for entry, key in enumerate(index.keys, 1):
            if key in seen:
                raise DuplicateKeyError(
                    path, f"key {key!r} appears again at entry {entry} (keys must be unique)",
                    key=key, line=entry)
            seen.add(key)
    return index


_INT_INDEX_BYTES = b"0123456789\t\n"


def _parse_int_index(text: str | bytes) -> Index | None:
    """Vectorised parse of the common case (non-negative integer keys, one tab a line); None if it does not apply."""
    data = text if isinstance(text, bytes) else text.encode("utf-8", "replace")
    if data.translate(None, _INT_INDEX_BYTES):
        return None  # other characters: signs, spaces, blank-line CRs, text keys -> careful parser
    lines = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
    if data.count(b"\t") != lines:
        return None
    # Only digits, tabs and newlines are left, so this parse cannot stop early;
    # counting the values still catches an empty field or a blank line.
    values = np.fromstring(data, dtype=np.int64, sep=" ") if data else np.empty(0, np.int64)
    if values.size != 2 * lines or (values.size and values.max() >= 1 << 62):
        return None
    pairs = values.reshape(-1, 2)
    keys = pairs[:, 0]
    return Index(keys.tolist(), pairs[:, 1].copy(), increasing=bool((keys[1:] > keys[:-1]).all()))


def _parse_index_lines(text: str, key_type: KeyType, path: str | os.PathLike | None) -> Index:
    keys = []
    offsets = []
    for number, raw in enumerate(text.split("\n"), 1):
        line = raw.strip()
        if not line:
            continue
        fields = line.split("\t")
        if len(fields) < 2:
            raise IndexFileError(path, f"expected 'key<TAB>offset', got {raw!r}", line=number)
        try:
            key = key_type(fields[0])
        except (ValueError, TypeError) as exc:
            hint = " (string keys: key_type=str, or --str-keys on the command line)" if key_type is int else ""
            raise IndexFileError(
                path, f"key {fields[0]!r} is not a valid {getattr(key_type, '__name__', key_type)}: {exc}{hint}",
                line=number) from None
        try:
            offset = int(fields[1])
        except ValueError:
            raise IndexFileError(path, f"offset {fields[1]!r} of key {fields[0]!r} is not an integer",
                                 line=number) from None
        if offset < 0:
            raise IndexFileError(path, f"offset {offset} of key {fields[0]!r} is negative", line=number)
        keys.append(key)
        offsets.append(offset)
    return Index(keys, np.array(offsets, dtype=np.int64))
