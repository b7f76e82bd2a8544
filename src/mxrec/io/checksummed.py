"""Checking a ``.rec``'s checksums as its records are read: each cell (a record, or a block of bytes in older
files) the first time it is read.

A :class:`BlockVerifier` holds a file's :class:`~mxrec.format.checksums.BlockChecksums` and which cells this process
has checked. The local reader checks the cells under a record in its mapping before it hands the record out
(:meth:`BlockVerifier.check_mapped`), once per cell and process; once every cell is checked, reading costs one
test more. The remote reader reads the runs of whole cells that hold what it wants (:meth:`BlockVerifier.runs`:
with record cells, exactly the records) and checks every cell it fetched (:meth:`BlockVerifier.bad_blocks`): bytes
that come from the block cache are checked too, and a bad cached cell is dropped and fetched again before anything
is said to be damaged.

A mismatch is one :class:`~mxrec.errors.ChecksumError` naming the file, the byte range and the records in it
(:func:`find_checksums` finds the checksums of a file: its sidecar, or what a manifest lists).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from mxrec.errors import ChecksumError
from mxrec.format.checksums import BlockChecksums, checksums_path, compute, format_sidecar, parse_sidecar
from mxrec.storage.atomic import atomic_open
from mxrec.storage.commit import Commit
from mxrec.storage.files import read_bytes
from mxrec.storage.filesystem import StorageOptions
from mxrec.storage.memory_map import mapped

#: Names the records in a byte range, for messages: ``describe(start, end) -> "records 12..40 (keys 12..40)"``.
Describe = Callable[[int, int], str]


def find_checksums(rec_path: str, size: int, storage: StorageOptions = None) -> BlockChecksums | None:
    """The checksums of ``rec_path`` (``size`` bytes) from its sidecar ``NAME.checksums``, or ``None`` without one.

    Raises
    ------
    ChecksumError
        The sidecar is malformed or belongs to another version of the file.
    """
    sidecar = checksums_path(rec_path)
    try:  # (one request for a remote file: a missing sidecar is a 404)
        text = read_bytes(sidecar, storage)
    except FileNotFoundError:  # RemoteNotFoundError too
        return None
    return parse_sidecar(text, sidecar, size)


def records_between(offsets: np.ndarray, keys: Sequence, start: int, end: int) -> str:
    """The records with bytes in ``[start, end)`` (those that begin there, and the one before, which may reach into
    it), for messages: ``"record 7 (key 7)"`` or ``"records at positions 906..1810 (keys 906..1810)"``."""
    if not len(offsets):
        return "no record"
    order = np.argsort(offsets, kind="stable")
    starts = offsets[order]
    first = max(0, int(np.searchsorted(starts, start, side="right")) - 1)  # the record holding byte ``start``
    last = max(first, int(np.searchsorted(starts, end, side="left")) - 1)
    lo, hi = int(order[first]), int(order[last])
    if first == last:
        return f"record {lo} (key {keys[lo]!r})"
    return f"records at positions {lo}..{hi} (keys {keys[lo]!r}..{keys[hi]!r})"


class BlockVerifier:
    """The checksums of one file and the blocks already checked in this process (see the module docstring).

    Parameters
    ----------
    checksums
        The file's checksums.
    path
        What messages name.
    describe
        Names the records in a byte range.
    """

    def __init__(self, checksums: BlockChecksums, path: str, describe: Describe) -> None:
        self.checksums = checksums
        self.path = path
        self.describe = describe
        self.checked = bytearray(len(checksums))
        self.unchecked = len(checksums)
        self._bounds = self._bounds_of(checksums)

    @staticmethod
    def _bounds_of(checksums: BlockChecksums) -> memoryview:
        """Where each cell starts, and the file's end: item access gives ints, faster than numpy's."""
        return memoryview(np.append(checksums.starts, checksums.size).astype(np.int64))

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()  # a new process checks again what it reads (it maps the file anew)
        state["checked"] = bytearray(len(self.checksums))
        state["unchecked"] = len(self.checksums)
        del state["_bounds"]
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._bounds = self._bounds_of(self.checksums)

    def error(self, number: int, got: int, note: str = "") -> ChecksumError:
        start, end = self.checksums.span(number)
        return ChecksumError(self.path, f"fail their CRC-32C checksum ({self.checksums.unit} {number}: expected "
                                        f"{int(self.checksums.crcs[number]):#010x}, read {got:#010x}{note}): damaged "
                                        f"data in {self.describe(start, end)}; copy the file again from its source",
                             start=start, end=end)

    def check_mapped(self, buf: bytes | memoryview, start: int, end: int, cell: int = -1) -> None:
        """Check the cells under bytes ``[start, end)`` of the whole file ``buf`` that are not checked yet.

        ``cell``: the cell that likely holds exactly those bytes (a record's position, where the ``.idx`` lists the
        file's records in order), taken without a search when it does.
        """
        sums = self.checksums
        checked = self.checked
        bounds = self._bounds
        if 0 <= cell < len(checked) and bounds[cell] == start and bounds[cell + 1] >= end:
            numbers: Sequence[int] = (cell,)
        else:
            numbers = sums.covering(start, end)
        for number in numbers:
            if not checked[number]:
                lo, hi = bounds[number], bounds[number + 1]
                got = sums.mismatch(number, memoryview(buf)[lo:hi])
                if got is not None:
                    raise self.error(number, got)
                checked[number] = 1
                self.unchecked -= 1

    def runs(self, ranges: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
        """The byte ranges of the runs of consecutive whole blocks that hold ``ranges`` (each block once): what a
        remote read fetches so that it can check every block it uses, once."""
        numbers = sorted({n for start, end in ranges for n in self.checksums.covering(start, end)})
        runs: list[list[int]] = []
        for n in numbers:
            if runs and n == runs[-1][1] + 1:
                runs[-1][1] = n
            else:
                runs.append([n, n])
        return [(self.checksums.span(a)[0], self.checksums.span(b)[1]) for a, b in runs]

    def bad_blocks(self, data: bytes | memoryview, start: int) -> list[tuple[int, int]]:
        """``(block, CRC read)`` of each block in ``data`` (the file's bytes from ``start``, whole blocks) that
        fails."""
        sums = self.checksums
        view = memoryview(data)
        bad = []
        for number in sums.covering(start, start + len(view)):
            lo, hi = sums.span(number)
            got = sums.mismatch(number, view[lo - start:hi - start])
            if got is not None:
                bad.append((number, got))
        return bad


def local_verifier(path: str, size: int, checksums: BlockChecksums | bool | None, describe: Describe,
                   storage: StorageOptions = None) -> BlockVerifier | None:
    """The verifier of a file from what its reader was given: checksums, ``None`` (its sidecar, if any) or
    ``False`` (none: not checked)."""
    if checksums is False:
        return None
    if checksums is None or checksums is True:
        found = find_checksums(path, size, storage)
        if found is None:
            if checksums is True:
                raise ChecksumError(checksums_path(path), f"missing: no checksums beside {path}, where they were "
                                                          "asked for (checksums=True, or a shard set's manifest that "
                                                          "says the shard has them)")
            return None
        checksums = found
    if checksums.size != size:
        raise ChecksumError(path, f"its checksums describe {checksums.size} bytes, but it holds {size}: they belong "
                                  "to another version of the file")
    return BlockVerifier(checksums, path, describe)




def write_checksums(rec_path: str, storage: StorageOptions = None) -> BlockChecksums:
    """Compute the record-cell checksums of ``rec_path`` (an existing ``.rec``: MXNet's, say) and write its sidecar
    ``NAME.checksums`` atomically beside it; the ``.rec`` and its ``.idx`` are not touched.

    Parameters
    ----------
    rec_path
        The ``.rec`` (a path or URL: a remote one is read once, whole).
    storage
        For URLs: the storage settings.

    Returns
    -------
    BlockChecksums
        What was written.
    """
    with mapped(rec_path, storage) as buf:
        checksums = compute(buf)
    write_sidecar(checksums_path(rec_path), checksums, storage)
    return checksums


def stage_sidecar(commit: Commit, rec_path: str, checksums: BlockChecksums) -> str:
    """Write the sidecar of ``rec_path`` (an output's final name) into ``commit``, finished, to be published with
    it (before the ``.rec``, when staged before it); its final name."""
    sidecar = checksums_path(rec_path)
    with open(commit.path_for(sidecar), "w", encoding="utf-8", newline="\n") as f:
        f.write(format_sidecar(checksums))
    commit.finish(sidecar)
    return sidecar


def write_sidecar(path: str, checksums: BlockChecksums, storage: StorageOptions = None) -> None:
    """Write a checksum sidecar atomically (uploaded whole for a URL)."""
    with atomic_open(path, "w", encoding="utf-8", newline="\n", storage_options=storage) as f:
        f.write(format_sidecar(checksums))
