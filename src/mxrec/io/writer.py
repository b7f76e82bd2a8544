"""The writer: appends records to a ``.rec`` file and, optionally, lines to its ``.idx``.

Guarantees:

* The ``.idx`` never points past the data. Index lines are held back until the
  ``.rec`` bytes they point at have been flushed to the operating system, so a
  crash leaves at worst records that the ``.idx`` does not list yet.
* With ``atomic=True`` both files are written under ``<name>.partial`` and
  renamed into place only by a successful :meth:`RecordWriter.close`; an
  exception inside ``with`` (or Ctrl-C) removes the partial files, so nothing
  that looks finished is ever left half-written.
* A URL (``s3://...``) is written locally and uploaded by :meth:`RecordWriter.close`
  (always atomic: :class:`~mxrec.storage.atomic.RemoteOutput`), the ``.rec``
  before its ``.idx``, byte-identical to a local write; an exception inside
  ``with`` uploads nothing.
* A writer belongs to the process that opened it; using it in a forked child
  raises :class:`~mxrec.errors.ForkedWriterError` instead of interleaving bytes.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable, Sequence
from typing import BinaryIO, TextIO

import numpy as np

from mxrec.errors import ClosedFileError, ForkedWriterError, OptionError
from mxrec.format import framing
from mxrec.format.idx import KeyType, format_index, index_path_for
from mxrec.storage.atomic import output_for
from mxrec.storage.filesystem import StorageOptions, is_url, local_path
from mxrec.storage.write_behind import WriteBehind

_FLUSH_INDEX_EVERY = 8192  # pending .idx lines before the .rec is flushed and they are written
_SMALL_RECORD = framing.VECTOR_SCAN_FROM  # below: one search and a concatenation; above: numpy scan, piecewise
_search_magic = framing.search_magic
_MAGIC_WORD = framing.MAGIC
_pack_header = framing.PART_HEADER.pack

#: How many forks lie between the first process and this one (a one-item list). A writer
#: records it when opened; a mismatch on write means it was inherited through fork.
#: (Cheaper than asking for the process id on every write.)
FORK_GENERATION = [0]
os.register_at_fork(after_in_child=lambda: FORK_GENERATION.__setitem__(0, FORK_GENERATION[0] + 1))
_PADDING = framing.PADDING
_join = b"".join
_GROUP = 256  # small records framed and checked together by write_batch
_WRITE_THROUGH = 64 << 10  # records from this size on bypass the file buffer
_IOV_MAX = 1024  # buffers one writev call may take (POSIX's minimum for IOV_MAX)


class RecordWriter:
    """Write records to ``path``; with ``index`` also write ``key\\toffset`` lines to an ``.idx``.

    Use it as a context manager (``with RecordWriter(...) as w: w.write(payload)``);
    the ``.idx`` never points past flushed data. Keys default to the record's
    position (0, 1, ...).

    Parameters
    ----------
    path
        The ``.rec`` to write: a local path or an fsspec URL (uploaded whole by
        :meth:`close`).
    index
        ``True`` writes the conventional ``.idx`` beside the ``.rec``; a path
        writes that file; ``False`` or ``None`` writes none.
    key_type
        Converts keys before they are written (MXNet's ``key_type``).
    atomic
        Write ``NAME.partial`` files and rename them into place only when
        :meth:`close` succeeds, so the output is complete or absent (always on
        for URLs). :meth:`abort` or an exception inside ``with`` discards them.
    buffer_size
        Bytes buffered before the ``.rec`` is written to.
    write_behind
        Let :meth:`write_pieces` hand its ``writev`` to a background thread
        (:class:`~mxrec.storage.write_behind.WriteBehind`) and return at once:
        the pieces (views of a mapped file, say) must then stay unchanged
        until :meth:`flush` or :meth:`close`.
    storage_options
        For a URL: fsspec options (credentials, endpoint).

    Raises
    ------
    OutputPathError
        The output is a directory, or its folder does not exist.
    """

    def __init__(self, path: str | os.PathLike, index: str | os.PathLike | bool | None = None,
                 key_type: KeyType = int, *, atomic: bool = False, buffer_size: int = 1 << 20,
                 write_behind: bool = False, storage_options: StorageOptions = None) -> None:
        self.path = local_path(path)
        if index is True:
            index = index_path_for(self.path)
        self.index_path: str | None = local_path(index) if index else None
        self.key_type = key_type
        if is_url(self.path) or (self.index_path is not None and is_url(self.index_path)):
            atomic = True  # a remote file is uploaded whole by close()
        self.atomic = atomic
        self._pid = os.getpid()
        # write_pieces' writev calls, run behind the caller; every other write waits for them first (one order)
        self._behind: WriteBehind | None = WriteBehind() if write_behind else None
        self._forks = FORK_GENERATION[0]
        self._position = 0
        self._count = 0
        # Index entries not yet written: keys and offsets, formatted in bulk by flush().
        self._pending_keys: list = []
        self._pending_offsets: list[int] = []
        # With ``atomic``, each output is written under its partial name and committed by close().
        outputs = [self.path] if self.index_path is None else [self.path, self.index_path]
        self._partials = [output_for(target, storage_options) for target in outputs] if atomic else []
        rec_target = self._partials[0].path if atomic else self.path
        self._rec: BinaryIO | None = open(rec_target, "wb", buffering=buffer_size)
        self._idx: TextIO | None = None
        if self.index_path is not None:
            try:
                self._idx = open(self._partials[1].path if atomic else self.index_path, "w", encoding="utf-8",
                                 newline="")
            except BaseException:
                self._rec.close()
                raise

    @property
    def closed(self) -> bool:
        return self._rec is None

    def tell(self) -> int:
        """Byte offset at which the next record will start."""
        return self._position

    def __len__(self) -> int:
        """Records written so far."""
        return self._count

    def _writable(self) -> BinaryIO:
        """The open ``.rec`` file; raises if the writer is closed or was inherited through ``fork``."""
        rec = self._rec
        if rec is None:
            raise ClosedFileError(f"{self.path}: writer is closed")
        if self._forks != FORK_GENERATION[0]:
            raise ForkedWriterError(
                f"{self.path}: writer opened in process {self._pid} used in process {os.getpid()}; "
                "open a new writer in each process")
        return rec

    def write(self, payload: bytes | bytearray | memoryview, key: object = None, *,
              indexed: bool = True) -> int:
        """Append one record; return the offset of its first part.

        With an index, the record is listed under ``key`` (default: its position),
        unless ``indexed`` is false.
        """
        rec = self._rec
        if rec is None or self._forks != FORK_GENERATION[0]:
            rec = self._writable()  # raises
        behind = self._behind
        if behind is not None:  # after the writes behind; the buffer is left empty for the next ones (below)
            behind.wait()
        if type(payload) is not bytes and not isinstance(payload, bytearray):
            payload = bytes(payload)
        offset = self._position
        length = len(payload)
        if length < _SMALL_RECORD:
            single_part = _search_magic(payload) is None
        else:  # one numpy comparison over the aligned words (mid-size records, e.g. packed images)
            single_part = length < _WRITE_THROUGH and not (
                np.frombuffer(payload, "<u4", length >> 2) == _MAGIC_WORD).any()
        if single_part:
            rec.write(_pack_header(_MAGIC_WORD, length) + payload + _PADDING[-length & 3])
            self._position = offset + 8 + length + (-length & 3)
        else:
            self._position = offset + _write_parts(rec, payload)
        if behind is not None:
            rec.flush()
        if indexed and self._idx is not None:
            self._pending_keys.append(self._count if key is None else self.key_type(key))
            self._pending_offsets.append(offset)
            if len(self._pending_offsets) >= _FLUSH_INDEX_EVERY:
                self.flush()
        self._count += 1
        return offset

    def write_pieces(self, records: Iterable[tuple[object, Sequence[bytes | memoryview]]]) -> None:
        """Append records given as ``(key, pieces)``, the record being ``b"".join(pieces)`` (an IRHeader and a view
        of its payload, say): the same bytes as :meth:`write`, in one ``writev`` for them all, the pieces not
        copied. A record whose pieces but the last are not 4-byte aligned, or hold an aligned magic, is joined
        and written by :meth:`write`."""
        rec = self._writable()
        chunks: list = []
        listed: list[tuple[object, int]] = []
        for key, pieces in records:
            if any(len(p) & 3 for p in pieces[:-1]) or any(map(_holds_aligned_magic, pieces)):
                self._write_listed(rec, chunks, listed)  # what came before, then this one the usual way
                chunks, listed = [], []
                self.write(_join(pieces), key)
                continue
            length = sum(map(len, pieces))
            framing.check_payload_length(length)
            chunks += (_pack_header(_MAGIC_WORD, length), *pieces, _PADDING[-length & 3])
            listed.append((key, self._position))
            self._position += 8 + length + (-length & 3)
        self._write_listed(rec, chunks, listed)

    def _write_listed(self, rec: BinaryIO, chunks: list, listed: list[tuple[object, int]]) -> None:
        """Write framed ``chunks`` straight to the file, then list their records in the index (held back)."""
        if not listed:
            return
        if self._behind is not None:
            self._behind.submit(write_all, rec, chunks)  # rec's buffer is empty: write() and flush() wait for these
        else:
            rec.flush()
            write_all(rec, chunks)
        if self._idx is not None:
            self._pending_keys.extend(self._count + n if key is None else self.key_type(key)
                                      for n, (key, _) in enumerate(listed))
            self._pending_offsets.extend(offset for _, offset in listed)
        self._count += len(listed)
        if len(self._pending_offsets) >= _FLUSH_INDEX_EVERY:
            self.flush()

    def write_batch(self, payloads: Iterable[bytes | bytearray | memoryview], keys: Iterable[object] | None = None,
                    *, indexed: bool = True) -> list[int]:
        """Append several records; return their offsets. Faster than :meth:`write` in a loop.

        ``keys`` (default: the records' positions) list them in the index, one
        key per payload: a different number of keys raises ``ValueError``
        before anything is written. If a payload is rejected, the records
        before it stay written and listed.
        """
        rec = self._writable()
        if self._behind is not None:  # after the writes behind, and leaving the buffer empty for the next ones
            self._behind.wait()
            try:
                return self._write_many(rec, payloads, keys, indexed)
            finally:
                rec.flush()
        return self._write_many(rec, payloads, keys, indexed)

    def _write_many(self, rec: BinaryIO, payloads: Iterable[bytes | bytearray | memoryview],
                    keys: Iterable[object] | None, indexed: bool) -> list[int]:
        if keys is not None:
            payloads, keys = list(payloads), list(keys)
            if len(keys) != len(payloads):
                raise OptionError(f"{self.path}: write_batch got {len(payloads)} payloads but {len(keys)} keys; "
                                 "nothing was written")
        offsets: list[int] = []
        try:
            items = [p if type(p) is bytes or isinstance(p, bytearray) else bytes(p) for p in payloads]
            lengths = list(map(len, items))
            all_small = max(lengths, default=0) < _SMALL_RECORD
            start = 0
            while start < len(items):
                # The run of small payloads from ``start`` (at most _GROUP) is framed and written at once.
                if all_small:
                    stop = min(start + _GROUP, len(items))
                else:
                    stop = start
                    while stop < len(items) and stop - start < _GROUP and lengths[stop] < _SMALL_RECORD:
                        stop += 1
                if stop > start:
                    self._write_group(rec, items[start:stop], lengths[start:stop], offsets)
                    start = stop
                else:
                    written = _write_parts(rec, items[start])  # may reject the payload: list it only once written
                    offsets.append(self._position)
                    self._position += written
                    start += 1
        finally:
            if indexed and self._idx is not None and offsets:
                if keys is None:
                    self._pending_keys.extend(range(self._count, self._count + len(offsets)))
                else:
                    self._pending_keys.extend(itertools.islice(map(self.key_type, keys), len(offsets)))
                self._pending_offsets.extend(offsets)
            self._count += len(offsets)
            if len(self._pending_offsets) >= _FLUSH_INDEX_EVERY:
                self.flush()
        return offsets

    def _write_group(self, rec: BinaryIO, group: list, lengths: list[int], offsets: list[int]) -> None:
        """Write small payloads with one call, framed as single parts unless one holds an aligned magic."""
        count = len(group)
        sizes = np.array(lengths, np.int64)
        padding = -sizes & 3
        padded = bool(padding.any())
        sizes += 8 + padding
        ends = np.cumsum(sizes)
        ends += self._position
        # Interleave headers, payloads (and padding) by slice assignment: no Python loop per record.
        parts: list = [None] * (count * (3 if padded else 2))
        step = 3 if padded else 2
        parts[0::step] = map(_pack_header, itertools.repeat(_MAGIC_WORD, count), lengths)
        parts[1::step] = group
        if padded:
            parts[2::step] = [_PADDING[n] for n in padding.tolist()]
        data = _join(parts)
        # Every part starts 4-aligned, so a payload's aligned offsets are aligned in ``data`` too:
        # if the only aligned magics are the part headers', no payload needs splitting.
        if np.count_nonzero(np.frombuffer(data, dtype="<u4") == _MAGIC_WORD) == count:
            _write_buffer(rec, data)
            offsets.extend((ends - sizes).tolist())
            self._position = int(ends[-1])
            return
        for payload in group:
            offsets.append(self._position)
            self._position += _write_parts(rec, payload)

    def flush(self) -> None:
        """Push written records, then the index lines that point at them, to the operating system."""
        if self._rec is None:
            return
        if self._behind is not None:
            self._behind.wait()
        self._rec.flush()
        if self._idx is not None and self._pending_offsets:
            self._idx.write(format_index(self._pending_keys, self._pending_offsets))
            self._pending_keys.clear()
            self._pending_offsets.clear()
            self._idx.flush()

    def close(self) -> None:
        """Flush and close; with ``atomic=True`` move the finished files into place. Idempotent."""
        if self._rec is None:
            return
        try:
            self.flush()
        finally:
            self._close_files()
        for number, output in enumerate(self._partials):  # the .rec first: an .idx never appears before its data
            try:
                output.commit()
            except BaseException:  # a failed upload: the files not committed yet are dropped too
                for rest in self._partials[number + 1:]:
                    rest.discard()
                raise

    def abort(self) -> None:
        """Close without finishing: with ``atomic=True`` the partial files are removed."""
        if self._rec is None:
            return
        self._close_files()
        for output in self._partials:
            output.discard()

    def _close_files(self) -> None:
        rec, idx = self._rec, self._idx
        self._rec = self._idx = None
        try:
            if self._behind is not None:
                self._behind.cancel()  # close() waited for the writes already; abort() drops them
            rec.close()
        finally:
            if idx is not None:
                idx.close()

    def __enter__(self) -> RecordWriter:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is not None and self.atomic:
            self.abort()
        else:
            self.close()

    def __del__(self) -> None:
        # An atomic writer that was never closed did not finish: leave no partial files behind.
        if self.__dict__.get("_rec") is not None and self._forks == FORK_GENERATION[0]:
            if self.atomic:
                self.abort()
            else:
                self.close()

    def __repr__(self) -> str:
        return f"RecordWriter({self.path!r}, {self._count} records, index={self.index_path!r})"


def _write_parts(rec: BinaryIO, payload: bytes | bytearray) -> int:
    """Write a large or magic-holding payload part by part; return the bytes written.

    From ``_WRITE_THROUGH`` bytes on, the parts go to the file in one ``writev``
    call (the buffer flushed first): no copy into the buffer, one system call.
    """
    chunks = framing.record_chunks(payload)
    size = sum(map(len, chunks))
    if size < _WRITE_THROUGH:
        for chunk in chunks:
            rec.write(chunk)
        return size
    rec.flush()
    write_all(rec, chunks)
    return size


def _holds_aligned_magic(piece: bytes | memoryview) -> bool:
    """Whether the magic is at a 4-byte aligned offset of ``piece`` (numpy's any: no list of where)."""
    length = len(piece)
    if length < _SMALL_RECORD:
        return bool(framing.aligned_magic_offsets(piece))
    return bool((np.frombuffer(piece, "<u4", length >> 2) == _MAGIC_WORD).any())


def _write_buffer(rec: BinaryIO, data: bytes) -> None:
    """Write ``data``; from ``_WRITE_THROUGH`` bytes on straight to the file (after the buffer): one copy less."""
    if len(data) < _WRITE_THROUGH:
        rec.write(data)
        return
    rec.flush()
    write_all(rec, [data])


def write_all(rec: BinaryIO, chunks: list) -> None:
    """``writev`` the chunks to ``rec``'s file descriptor, continuing after partial writes (no copy into a buffer;
    flush a buffered file first)."""
    fd = rec.fileno()
    views = [memoryview(c) for c in chunks if len(c)]
    first = 0
    while first < len(views):
        written = os.writev(fd, views[first:first + _IOV_MAX])
        while first < len(views) and written >= len(views[first]):
            written -= len(views[first])
            first += 1
        if written:
            views[first] = views[first][written:]
