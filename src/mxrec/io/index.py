"""``.idx`` files on disk: finding, reading, writing, and rebuilding one by scanning its ``.rec``.

The text format itself (parsing, formatting, the ``data.rec`` -> ``data.idx``
naming rule) is :mod:`mxrec.format.idx`; this module does the file I/O.

* :func:`resolve_index` is the one place that decides which ``.idx`` goes with
  a ``.rec``: the one given, else the one beside it if it exists, else none.
* :func:`read_index` raises on a malformed file; :func:`try_read_index` is for
  callers that carry on without one (the doctor, repair) and want the error.
* :func:`scan_index` / :func:`build_index` rebuild a lost or broken ``.idx``.

Every path may be a URL (:mod:`mxrec.storage.filesystem`); an ``.idx`` written to
one is uploaded whole when complete.
"""

from __future__ import annotations

import itertools
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import BinaryIO, TypeVar

import numpy as np

from mxrec.errors import IndexFileError, OptionError
from mxrec.format import framing
from mxrec.format.checksums import checksums_path, compute
from mxrec.format.header import ID_OFFSET, IRHEADER_SIZE
from mxrec.format.idx import (
    Index,
    IntIndexBuilder,
    IntKeys,
    KeyType,
    check_unique,
    format_index,
    index_path_for,
    parse_index,
    parse_int_lines,
)
from mxrec.io.checksummed import write_sidecar
from mxrec.storage.atomic import atomic_open
from mxrec.storage.files import exists, read_bytes
from mxrec.storage.filesystem import StorageOptions, check_writable, is_url, local_path
from mxrec.storage.memory_map import mapped

KEY_SOURCES = ("auto", "position", "id")
T = TypeVar("T")


def resolve_index(rec_path: str | os.PathLike, idx_path: str | os.PathLike | None = None,
                  storage_options: StorageOptions = None) -> str | None:
    """The ``.idx`` of ``rec_path``: ``idx_path`` if given, else the one beside the ``.rec`` if it exists, else None."""
    if idx_path is not None:
        return os.fspath(idx_path)
    candidate = index_path_for(rec_path)
    return candidate if exists(candidate, storage_options) else None


def read_index(path: str | os.PathLike, key_type: KeyType = int, allow_duplicates: bool = True,
               storage_options: StorageOptions = None) -> Index:
    """Read and parse an ``.idx`` file.

    Local integer-keyed files are parsed a chunk at a time on a few threads,
    into compact arrays (:class:`~mxrec.format.idx.IntKeys`): the text is never
    held whole, and no Python object is made per key. A remote ``.idx`` is read
    whole, in one request.

    Parameters
    ----------
    path
        The ``.idx``: a local path or a URL.
    key_type
        Converts each key's text (MXNet's ``key_type``).
    allow_duplicates
        Accept a key listed twice (else :class:`~mxrec.errors.DuplicateKeyError`).
    storage_options
        For a URL: fsspec options (credentials, endpoint).

    Returns
    -------
    Index
        The keys and offsets, in file order.

    Raises
    ------
    IndexFileError
        A line does not parse (the message names it).
    """
    path = os.fspath(path)
    index = _read_int_index(local_path(path)) if key_type is int and not is_url(path) else None
    if index is None:
        return parse_index(read_bytes(path, storage_options), key_type, path, allow_duplicates)
    if not allow_duplicates:
        check_unique(index, path)
    return index


_CHUNK = 2 << 20  # bytes of .idx text parsed at once


def _read_int_index(path: str | os.PathLike) -> Index | None:
    """The index of a file of plain ``digits<TAB>digits`` lines, or None for any other file (and an empty one).

    Plain reads (not a memory map, whose pages would count as the process's
    memory) of chunks that end at a line end, parsed on a few threads, added in
    order; the arrays are sized from the first chunk's line density.
    """
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        builder = None
        for lines in _in_order(parse_int_lines, _line_chunks(f)):
            if lines is None:
                return None
            if builder is None:
                density = len(lines.pairs) / min(_CHUNK, size)  # lines a byte, from the first chunk
                builder = IntIndexBuilder(int(size * density * 1.05) + 16)
            builder.add(lines)
        return None if builder is None else builder.build()


def _line_chunks(f: BinaryIO) -> Iterator[bytes]:
    """The text of ``f`` in chunks of whole lines, each ending with a newline (one added at the end if missing)."""
    while block := f.read(_CHUNK):
        if not block.endswith(b"\n"):
            block += f.readline()
            if not block.endswith(b"\n"):
                block += b"\n"
        yield block


def _in_order(fn: Callable[[bytes], T], items: Iterator[bytes]) -> Iterator[T]:
    """``map(fn, items)`` on a few threads (``fn`` must release the GIL to gain), a few items in flight."""
    threads = min(4, os.cpu_count() or 1)
    head = list(itertools.islice(items, 2))
    if len(head) < 2 or threads == 1:  # one chunk (most files): no threads
        yield from map(fn, itertools.chain(head, items))
        return
    with ThreadPoolExecutor(threads, thread_name_prefix="mxrec-idx") as pool:
        pending: deque[Future[T]] = deque(pool.submit(fn, item) for item in head)
        try:
            for item in items:
                pending.append(pool.submit(fn, item))
                if len(pending) > threads:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for future in pending:
                future.cancel()


def try_read_index(path: str | os.PathLike, key_type: KeyType = int,
                   storage_options: StorageOptions = None) -> tuple[Index | None, IndexFileError | None]:
    """``(index, None)``, or ``(None, error)`` when the file does not parse (callers that can do without one)."""
    try:
        return read_index(path, key_type, storage_options=storage_options), None
    except IndexFileError as exc:
        return None, exc


def write_index(path: str | os.PathLike, keys: Iterable[object], offsets: Iterable[int],
                storage_options: StorageOptions = None) -> None:
    """Write an ``.idx`` file atomically (see :mod:`mxrec.storage.atomic`), a block of lines at a time.

    Parameters
    ----------
    path
        The ``.idx`` to write: a local path or a URL.
    keys
        One key per record, in position order.
    offsets
        The byte offset in the ``.rec`` of each record, paired with ``keys``.
    storage_options
        For a URL: fsspec options (credentials, endpoint).
    """
    key_blocks = (keys[i:i + _FORMAT_BLOCK] for i in range(0, len(keys), _FORMAT_BLOCK)) if isinstance(
        keys, (IntKeys, list, range)) else _blocks(iter(keys))
    offset_blocks = (offsets[i:i + _FORMAT_BLOCK] for i in range(0, len(offsets), _FORMAT_BLOCK)) if isinstance(
        offsets, (np.ndarray, list, range)) else _blocks(iter(offsets))
    with atomic_open(path, "w", encoding="utf-8", newline="", storage_options=storage_options) as f:
        for key_block, offset_block in zip(key_blocks, offset_blocks, strict=False):
            f.write(format_index(key_block, offset_block))


_FORMAT_BLOCK = 1 << 16  # .idx lines formatted and written at once


def _blocks(items: Iterator) -> Iterator[list]:
    while block := list(itertools.islice(items, _FORMAT_BLOCK)):
        yield block


def scan_index(rec_path: str | os.PathLike, keys: str = "auto",
               storage_options: StorageOptions = None) -> tuple[Index, str]:
    """Build an index by scanning a ``.rec``; return it and the key source used.

    ``keys``: ``"position"`` numbers records 0, 1, ... in file order; ``"id"``
    uses each record's ``IRHeader.id`` (im2rec and InsightFace write the key
    there); ``"auto"`` uses the ids when every record has a header and the ids
    are unique, else positions. Raises :class:`RecordFormatError` at damaged
    framing (``mxrec verify --repair`` salvages such files).
    """
    rec_path = os.fspath(rec_path)
    with mapped(rec_path, storage_options) as buf:
        return _scan_buffer(buf, rec_path, keys)


def _scan_buffer(buf: framing.Buffer, rec_path: str, keys: str) -> tuple[Index, str]:
    """:func:`scan_index` of the mapped file ``buf``."""
    if keys not in KEY_SOURCES:
        raise OptionError(f"keys must be one of {KEY_SOURCES}, not {keys!r}")
    offsets = framing.record_offset_array(buf, path=rec_path)
    if keys == "position":
        return Index(IntKeys(range(len(offsets))), offsets, True), "position"
    ids = _header_ids(buf, offsets)
    if ids is not None and not _repeats(ids):
        return Index(_compact_keys(ids), offsets), "id"
    if keys == "id":
        why = "a record is too short for an IRHeader" if ids is None else "record ids are not unique"
        raise IndexFileError(rec_path, f"cannot key the index by record id: {why}")
    return Index(IntKeys(range(len(offsets))), offsets, True), "position"


def _repeats(ids: np.ndarray) -> bool:
    """Whether some id appears twice."""
    ordered = np.sort(ids)
    return bool((ordered[1:] == ordered[:-1]).any())


def _compact_keys(ids: np.ndarray) -> IntKeys | list[int]:
    """Record ids (uint64) as :class:`IntKeys` when they fit in int64, else as a list of ints."""
    if len(ids) and ids.max() >= 1 << 63:
        return ids.tolist()
    return IntKeys.from_array(ids.astype(np.int64))


def _header_ids(buf: framing.Buffer, offsets: np.ndarray) -> np.ndarray | None:
    """``IRHeader.id`` of each record, or None if some record cannot hold a header.

    Read with numpy for single-part records (the id is at a fixed place after the part header), a block of
    records at a time (bounded temporaries); records cut into parts are decoded one by one.
    """
    ids = np.empty(len(offsets), np.uint64)
    words = np.frombuffer(buf, dtype="<u4", count=len(buf) // 4)
    try:
        for first in range(0, len(offsets), _ID_BLOCK):
            starts = offsets[first:first + _ID_BLOCK]
            lrec = words[starts // 4 + 1]
            single = lrec < framing.FULL_LIMIT
            if (single & (lrec < IRHEADER_SIZE)).any():
                return None
            id_word = (starts + framing.PART_HEADER_SIZE + ID_OFFSET) // 4  # the id's low word: 4-byte aligned
            low = words[np.minimum(id_word, len(words) - 2)].astype(np.uint64)
            high = words[np.minimum(id_word + 1, len(words) - 1)].astype(np.uint64)
            ids[first:first + len(starts)] = low | (high << np.uint64(32))
            for position in (first + np.flatnonzero(~single)).tolist():
                payload, _ = framing.decode_record(buf, int(offsets[position]))
                if len(payload) < IRHEADER_SIZE:
                    return None
                ids[position] = int.from_bytes(payload[ID_OFFSET:ID_OFFSET + 8], "little")
    finally:
        del words
    return ids


_ID_BLOCK = 1 << 20  # records whose header ids are read at once


def build_index(rec_path: str | os.PathLike, idx_path: str | os.PathLike | None = None,
                keys: str = "auto", storage_options: StorageOptions = None, *,
                checksums: bool = True) -> tuple[Index, str]:
    """Scan a ``.rec`` and write its ``.idx`` atomically (what ``mxrec index`` does), and its checksums.

    Parameters
    ----------
    rec_path
        The ``.rec`` (a path or URL).
    idx_path
        The ``.idx`` to write; default: beside the ``.rec``.
    keys
        ``"position"`` numbers records 0, 1, ... in file order; ``"id"`` uses
        each record's ``IRHeader.id`` (im2rec and InsightFace write the key
        there); ``"auto"`` uses the ids when every record has a header and the
        ids are unique, else positions (:func:`scan_index`).
    storage_options
        fsspec options for URLs.
    checksums
        Also write the sidecar ``NAME.checksums`` (:mod:`mxrec.format.checksums`) beside the ``.rec``, from the
        same pass over it.

    Returns
    -------
    tuple
        The index and the key source used (``"id"`` or ``"position"``).

    Raises
    ------
    RecordFormatError
        The framing is damaged (``mxrec verify --repair`` salvages such files).
    OptionError
        ``keys`` is not one of :data:`KEY_SOURCES`.
    """
    check_writable(idx_path if idx_path is not None else index_path_for(rec_path))  # before the scan
    rec_path = os.fspath(rec_path)
    with mapped(rec_path, storage_options) as buf:
        index, source = _scan_buffer(buf, rec_path, keys)
        sums = compute(buf) if checksums else None
    write_index(idx_path if idx_path is not None else index_path_for(rec_path), index.keys, index.offsets,
                storage_options)
    if sums is not None:
        write_sidecar(checksums_path(rec_path), sums, storage_options)
    return index, source


_CHECK_BLOCK = 1 << 16  # .idx offsets range-checked at once


def check_offset_range(offsets: np.ndarray, keys: Sequence, size: int, path: str,
                       index_path: str | None) -> None:
    """Reject the first ``.idx`` offset that is negative, unaligned, or leaves no room for a part header."""
    for first in range(0, len(offsets), _CHECK_BLOCK):  # in blocks: no full-size temporaries for 10M keys
        block = offsets[first:first + _CHECK_BLOCK]
        bad = (block < 0) | (block > size - framing.PART_HEADER_SIZE) | (block & 3 != 0)
        if bad.any():
            i = first + int(np.flatnonzero(bad)[0])
            off = int(offsets[i])
            why = "is not 4-byte aligned in" if 0 <= off <= size - framing.PART_HEADER_SIZE else "lies outside"
            raise IndexFileError(index_path, f"key {keys[i]!r}: offset {off} {why} {path} ({size} bytes)",
                                 key=keys[i])
