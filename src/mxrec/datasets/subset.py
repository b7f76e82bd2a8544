"""Some of a reader's records, read as a dataset of their own: positions ``0..n-1`` are ``positions[0..n-1]``.

The samples of a dataset are not always all of its records: an InsightFace
face set's samples are its face records (:func:`mxrec.datasets.face_set.read_face_set`),
not the header and identity records around them. :class:`RecordSubset` gives
the iterators, the PyTorch datasets and the samplers one reader whose
positions are the samples, so none of them needs to know why.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from mxrec.errors import RecordFormatError, RecordKeyError, RecordPositionError
from mxrec.format.header import IRHeader
from mxrec.io.order import ReadPlan
from mxrec.io.records import IOStats, Records, blocks_of
from mxrec.storage.settings import Storage


class RecordSubset(Records):
    """The records of ``reader`` at ``positions``, in that order: a :class:`~mxrec.io.records.Records` of its own.

    ``path``, ``index_path``, ``damage`` and ``nbytes`` are the reader's.
    Pickles as the reader does, with the positions.
    """

    def __init__(self, reader: Records, positions: Sequence[int] | np.ndarray) -> None:
        self.reader = reader
        self.positions = np.asarray(positions, dtype=np.int64)
        self._keys: list | None = None
        self._by_key: dict | None = None

    @property
    def path(self) -> str:  # type: ignore[override]
        return self.reader.path

    @property
    def index_path(self) -> str | None:  # type: ignore[override]
        return self.reader.index_path

    @property
    def damage(self) -> RecordFormatError | None:  # type: ignore[override]
        return self.reader.damage

    @property
    def nbytes(self) -> int:
        """The reader's bytes (the records around the subset's are in the same files)."""
        return self.reader.nbytes

    def __len__(self) -> int:
        return len(self.positions)

    def _out_of_range(self, what: str) -> RecordPositionError:
        return RecordPositionError(f"{self.path}: {what} out of range for the {len(self)} records of the subset")

    def _at(self, position: int) -> int:
        """The reader's position of subset position ``position`` (negative ones count from the end)."""
        if not -len(self) <= position < len(self):
            raise self._out_of_range(f"record {position}")
        return int(self.positions[position])

    def _all_at(self, positions: Sequence[int] | np.ndarray) -> np.ndarray:
        at = np.asarray(positions, dtype=np.int64)
        if at.size and (at.min() < -len(self) or at.max() >= len(self)):
            raise self._out_of_range("record position")
        return self.positions[at]

    def __getitem__(self, position: int) -> bytes:
        return self.reader[self._at(position)]

    read = __getitem__

    def view(self, position: int) -> memoryview:
        return self.reader.view(self._at(position))

    def header(self, position: int) -> IRHeader:
        return self.reader.header(self._at(position))

    def fetch(self, positions: Sequence[int] | np.ndarray) -> list[bytes | memoryview]:
        return self.reader.fetch(self._all_at(positions))

    def read_batch(self, positions: Sequence[int] | np.ndarray) -> list[bytes]:
        return self.reader.read_batch(self._all_at(positions))

    def io_stats(self) -> IOStats:
        """The underlying reader's (a subset reads through it)."""
        return self.reader.io_stats()

    def default_shuffle_block(self) -> int:
        """The reader's choice, in records of the subset."""
        return blocks_of(len(self), self.nbytes) if self.reader.default_shuffle_block() else 0

    def follow(self, plan: ReadPlan, *, origin: int = 0) -> None:
        """The reader reads ahead in the subset's blocks when the subset is a run of consecutive records (a face
        set's faces), else in blocks of its own positions."""
        run = len(self) > 0 and int(self.positions[-1] - self.positions[0]) == len(self) - 1 and bool(
            np.all(np.diff(self.positions) == 1))
        first = int(self.positions[0]) if run else 0
        self.reader.follow(plan, origin=origin - first)

    @property
    def storage(self) -> Storage:
        """The storage settings of the reader the subset reads."""
        return self.reader.storage

    def describe(self, position: int) -> str:
        return self.reader.describe(int(self.positions[position]))

    def __iter__(self) -> Iterator[bytes]:
        for position in range(len(self)):
            yield self[position]

    @property
    def keys(self) -> list:
        """The ``.idx`` keys of the records in the subset, in subset order."""
        if self._keys is None:
            keys = self.reader.keys
            self._keys = [keys[p] for p in self.positions.tolist()]
        return self._keys

    def position(self, key: object) -> int:
        """The subset position of the record stored under ``key``."""
        if self._by_key is None:
            self._by_key = {k: i for i, k in enumerate(self.keys)}
        try:
            return self._by_key[key]
        except (KeyError, TypeError):
            raise RecordKeyError(self.reader.path, key=key) from None

    def close(self) -> None:
        self.reader.close()

    def __getstate__(self) -> dict:
        return {"reader": self.reader, "positions": self.positions}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["reader"], state["positions"])

    def __repr__(self) -> str:
        return f"RecordSubset({self.reader!r}, {len(self)} of its records)"
