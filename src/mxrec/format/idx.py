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

import operator
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from mxrec.errors import DuplicateKeyError, IndexFileError, OptionError

KeyType = Callable[[str], object]
_ITER_BLOCK = 1 << 16  # keys converted to Python ints at a time when iterating


def sidecar_path(rec_path: str | os.PathLike, suffix: str) -> str:
    """The file beside a ``.rec`` named after it: ``data/train.rec`` and ``".idx"`` -> ``data/train.idx``.

    A path that does not end in ``.rec`` gets ``suffix`` added. Only the name changes, so a local path and a URL are
    treated alike.

    Parameters
    ----------
    rec_path
        The ``.rec`` path or URL.
    suffix
        The companion's suffix (``".idx"``, ``".checksums"``, ``".manifest.json"``).

    Returns
    -------
    str
        The companion's path.
    """
    rec_path = os.fspath(rec_path)
    return (rec_path[:-len(".rec")] if rec_path.endswith(".rec") else rec_path) + suffix


def index_path_for(rec_path: str | os.PathLike) -> str:
    """The conventional ``.idx`` path beside a ``.rec`` (``data.rec`` -> ``data.idx``)."""
    return sidecar_path(rec_path, ".idx")


class IntKeys(Sequence):
    """Integer ``.idx`` keys in file order, held compactly; reads like a list of Python ``int``.

    Stored as an int64 array, or as nothing but a first key and a count when
    the keys count up by one (``0, 1, 2, ...``: im2rec's and InsightFace's
    files), so ten million keys cost 80 MB or nothing instead of the ~400 MB of
    a list. Indexing gives an ``int`` (a slice gives a ``list``), iteration
    yields ``int`` s, ``==`` compares element-wise with lists and ``IntKeys``,
    and ``numpy.asarray(keys)`` is the int64 array without a Python object per key.
    """

    __slots__ = ("_start", "_values")

    def __init__(self, values: np.ndarray | range) -> None:
        if isinstance(values, range):
            if values.step != 1:
                raise OptionError("IntKeys takes a range with step 1")
            self._values: np.ndarray | range = values
        else:
            self._values = np.asarray(values, np.int64)

    @classmethod
    def from_array(cls, values: np.ndarray) -> IntKeys:
        """Keys ``values``, stored as a range when they count up by one."""
        values = np.asarray(values, np.int64)
        if len(values) and values[-1] - values[0] == len(values) - 1 and (np.diff(values) == 1).all():
            return cls(range(int(values[0]), int(values[0]) + len(values)))
        return cls(values)

    @property
    def consecutive_from(self) -> int | None:
        """The first key when the keys count up by one from it (stored as a range), else None."""
        return self._values.start if isinstance(self._values, range) else None

    @property
    def array(self) -> np.ndarray:
        """The keys as an int64 array (made, not stored, for consecutive keys)."""
        values = self._values
        if isinstance(values, range):
            return np.arange(values.start, values.stop, dtype=np.int64)
        return values

    def __array__(self, dtype: object = None, copy: object = None) -> np.ndarray:
        return self.array if dtype is None else self.array.astype(dtype)

    def __len__(self) -> int:
        return len(self._values)

    def __getitem__(self, i):  # type: ignore[override]
        values = self._values
        if isinstance(i, slice):
            return list(values[i]) if isinstance(values, range) else values[i].tolist()
        return values[operator.index(i)] if isinstance(values, range) else int(values[operator.index(i)])

    def __iter__(self) -> Iterator[int]:
        values = self._values
        if isinstance(values, range):
            yield from values
            return
        for first in range(0, len(values), _ITER_BLOCK):
            yield from values[first:first + _ITER_BLOCK].tolist()

    def __contains__(self, key: object) -> bool:
        try:
            key = operator.index(key)  # type: ignore[arg-type]
        except TypeError:
            return any(k == key for k in self)
        values = self._values
        return key in values if isinstance(values, range) else bool((values == key).any())

    def tolist(self) -> list[int]:
        """The keys as a list."""
        values = self._values
        return list(values) if isinstance(values, range) else values.tolist()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, IntKeys):
            return len(self) == len(other) and np.array_equal(self.array, other.array)
        if isinstance(other, list):
            return self.tolist() == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # as a list's

    def __repr__(self) -> str:
        return repr(self.tolist())

    def __reduce__(self) -> tuple:
        return type(self), (self._values,)


@dataclass
class Index:
    """A parsed ``.idx``: ``keys`` and ``offsets`` in file order (duplicates kept as written).

    Integer keys are an :class:`IntKeys` (a compact int64 array, or no array at
    all when they count up by one); other key types a ``list``.
    """

    keys: IntKeys | list
    offsets: np.ndarray  # int64, same length as keys
    increasing: bool = False  # keys known to be strictly increasing (hence unique)

    def __len__(self) -> int:
        return len(self.keys)

    def mapping(self) -> dict:
        """``{key: offset}``; for a duplicated key the last line wins (MXNet's rule)."""
        return dict(zip(self.keys, self.offsets.tolist(), strict=False))

    def has_duplicates(self) -> bool:
        """Whether some key appears more than once (a sort for integer keys, a set otherwise)."""
        if self.increasing:
            return False
        if isinstance(self.keys, IntKeys):
            ordered = np.sort(self.keys.array)
            return bool((ordered[1:] == ordered[:-1]).any())
        return len(set(self.keys)) != len(self.keys)

    def duplicates(self) -> list:
        """Keys that appear more than once, each listed once, in order of first repeat."""
        if not self.has_duplicates():
            return []
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
    """The text of an ``.idx`` holding ``keys`` at ``offsets``; integer keys are formatted in bulk (one %-format)."""
    keys = keys.tolist() if isinstance(keys, IntKeys) else list(keys)
    offsets = offsets.tolist() if isinstance(offsets, np.ndarray) else [int(o) for o in offsets]
    count = min(len(keys), len(offsets))
    if all(type(key) is int for key in keys):
        flat: list[int] = [0] * (2 * count)
        flat[0::2] = keys[:count]
        flat[1::2] = offsets[:count]
        return ("%d\t%d\n" * count) % tuple(flat)
    return "".join(map(format_index_line, keys[:count], offsets[:count]))


def parse_index(text: str | bytes, key_type: KeyType = int, path: str | os.PathLike | None = None,
                allow_duplicates: bool = True) -> Index:
    """Parse ``.idx`` text. Raises :class:`IndexFileError` naming the line of any malformed entry."""
    index = None
    if key_type is int:
        data = text if isinstance(text, bytes) else text.encode("utf-8", "replace")
        lines = parse_int_lines(data if data.endswith(b"\n") or not data else data + b"\n")
        if lines is not None:
            builder = IntIndexBuilder(len(lines.pairs))
            builder.add(lines)
            index = builder.build()
    if index is None:
        if isinstance(text, bytes):
            try:
                text = text.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise IndexFileError(path, f"not UTF-8 text (byte {exc.start})") from None
        index = _parse_index_lines(text, key_type, path)
    if not allow_duplicates:
        check_unique(index, path)
    return index


def check_unique(index: Index, path: str | os.PathLike | None) -> None:
    """Raise :class:`DuplicateKeyError` naming the first entry whose key appeared before."""
    if not index.has_duplicates():
        return
    seen: set = set()
    for entry, key in enumerate(index.keys, 1):
        if key in seen:
            raise DuplicateKeyError(path, f"key {key!r} appears again at entry {entry} (keys must be unique)",
                                    key=key, line=entry)
        seen.add(key)


_DIGITS = b"0123456789"


@dataclass(frozen=True)
class IntLines:
    """Parsed plain ``.idx`` lines: ``(n, 2)`` int64 ``pairs``, and what :class:`IntIndexBuilder` asks of their keys."""

    pairs: np.ndarray
    first: int  # the first key (0 when there are no lines)
    last: int
    increasing: bool  # each key above the one before
    consecutive: bool  # each key the one before + 1

    @classmethod
    def of(cls, pairs: np.ndarray) -> IntLines:
        keys = pairs[:, 0]
        if len(keys) < 2:
            first = int(keys[0]) if len(keys) else 0
            return cls(pairs, first, first, True, True)
        steps = np.diff(keys)
        low, high = int(steps.min()), int(steps.max())
        return cls(pairs, int(keys[0]), int(keys[-1]), low > 0, low == high == 1)


def parse_int_lines(data: bytes) -> IntLines | None:
    """The ``(key, offset)`` pairs of whole ``.idx`` lines, in the common case; None otherwise.

    The common case: every line is ``digits<TAB>digits<LF>`` (``data`` ends
    with a newline), values below 2**62. Anything else -- signs, spaces, CRs,
    blank lines, text keys, a missing field -- returns None, and the general
    parser decides (and names the line of any error). numpy does the work,
    releasing the GIL, so chunks of one file can be parsed on several threads.
    """
    separators = data.translate(None, _DIGITS)
    lines = len(separators) // 2
    if separators != b"\t\n" * lines:
        return None
    # np.fromstring (text mode): whitespace-separated integers; only digits are left between the separators,
    # so the parse cannot stop early, and an empty field shows as a short count.
    values = np.fromstring(data, dtype=np.int64, sep=" ") if lines else np.empty(0, np.int64)
    if values.size != 2 * lines or (values.size and values.max() >= 1 << 62):
        return None
    return IntLines.of(values.reshape(-1, 2))


class IntIndexBuilder:
    """Assembles an :class:`Index` of integer keys from :class:`IntLines`, in file order.

    ``capacity`` (an estimate of the lines to come) sizes the arrays; they
    grow if it was short and are cut to size by :meth:`build` (in place: the
    unused part was never touched, so it never took memory). Keys are kept as
    a range while they count up by one, and as an int64 array from the first
    one that does not: the memory held is the offsets, plus the keys only when
    they must be stored.
    """

    def __init__(self, capacity: int) -> None:
        self._offsets = np.empty(max(capacity, 1), np.int64)
        self._keys: np.ndarray | None = None
        self._filled = 0
        self._first: int | None = None
        self._last: int | None = None
        self._increasing = True

    def add(self, lines: IntLines) -> None:
        count = len(lines.pairs)
        if not count:
            return
        at = self._filled
        if at + count > len(self._offsets):
            new_size = max(at + count, len(self._offsets) * 5 // 4)
            self._offsets.resize(new_size, refcheck=False)
            if self._keys is not None:
                self._keys.resize(new_size, refcheck=False)
        self._offsets[at:at + count] = lines.pairs[:, 1]
        follows = self._last is None or lines.first > self._last
        self._increasing = self._increasing and follows and lines.increasing
        if self._keys is None and not (lines.consecutive and (self._last is None or lines.first == self._last + 1)):
            self._keys = np.empty(len(self._offsets), np.int64)
            if at:
                self._keys[:at] = np.arange(self._first, self._first + at)
        if self._keys is not None:
            self._keys[at:at + count] = lines.pairs[:, 0]
        if self._first is None:
            self._first = lines.first
        self._last = lines.last
        self._filled = at + count

    def build(self) -> Index:
        filled = self._filled
        self._offsets.resize(filled, refcheck=False)
        if self._keys is None:
            start = self._first or 0
            keys = IntKeys(range(start, start + filled))
        else:
            self._keys.resize(filled, refcheck=False)
            keys = IntKeys(self._keys)
        return Index(keys, self._offsets, increasing=self._increasing)


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
    offset_array = np.array(offsets, dtype=np.int64)
    if key_type is int:
        try:
            key_array = np.array(keys, dtype=np.int64)
        except OverflowError:  # keys beyond int64 stay Python ints
            return Index(keys, offset_array)
        int_keys = IntKeys.from_array(key_array)
        increasing = int_keys.consecutive_from is not None or bool((np.diff(key_array) > 0).all())
        return Index(int_keys, offset_array, increasing=increasing)
    return Index(keys, offset_array)
