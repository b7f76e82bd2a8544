"""The writer: appends records to a ``.rec`` file and, optionally, lines to its ``.idx``.

Guarantees:

* The ``.idx`` never points past the data. Index lines are held back until the
  ``.rec`` bytes they point at have been flushed to the operating system, so a
  crash leaves at worst records that the ``.idx`` does not list yet.
* With ``atomic=True`` both files are written under ``<name>.partial`` and
  published only by a successful :meth:`RecordWriter.close`, with the one commit
  protocol (:class:`~mxrec.storage.commit.Commit`): the ``.idx`` first, the ``.rec``
  last (an older ``.rec`` of that name removed first), so the pair appears
  together or not at all; an exception inside ``with`` (or Ctrl-C) removes the
  partial files, so nothing that looks finished is ever left half-written.
* A URL (``s3://...``) is written locally and uploaded by :meth:`RecordWriter.close`
  (always atomic), byte-identical to a local write; an exception inside ``with``
  uploads nothing, and a failed upload of either file leaves neither.
* A writer belongs to the process that opened it; using it in a forked child
  raises :class:`~mxrec.errors.ForkedWriterError` instead of interleaving bytes.
* Block checksums (:mod:`mxrec.format.checksums`) are computed from the bytes as
  they reach the file (read back from the page cache: by the writing thread with
  ``write_behind``, else when the file is flushed), and written to the sidecar
  ``NAME.checksums``, published with the pair; :attr:`RecordWriter.checksums`
  holds them after :meth:`RecordWriter.close` (a sharded writer keeps them in its
  manifest instead). An output that cannot be read back (a pipe, a device) gets none.
"""

from __future__ import annotations

import itertools
import mmap
import os
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO, TextIO

import numpy as np

from mxrec.errors import ClosedFileError, ForkedWriterError, MxrecError, OptionError
from mxrec.format import framing
from mxrec.format.checksums import BlockChecksums, Summer, checksums_path, format_sidecar
from mxrec.format.idx import KeyType, format_index, index_path_for
from mxrec.storage.atomic import PartialFile, RemoteOutput, atomic_open, is_stream_node, output_for
from mxrec.storage.commit import Commit
from mxrec.storage.files import remove_file
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
_READ_BACK = 8 << 20  # bytes read back at once to sum them


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
        (:class:`~mxrec.storage.write_behind.WriteBehind`) and return at once;
        that thread also reads each block back to check that no payload
        held the magic (see :class:`_WrittenBehind`). The pieces (views of a
        mapped file, say) must stay unchanged until :meth:`flush` or
        :meth:`close`.
    storage_options
        For a URL: fsspec options (credentials, endpoint).
    checksums
        Compute checksums of the ``.rec`` (:attr:`checksums` after :meth:`close`).
    sidecar
        Write them to ``NAME.checksums`` beside the ``.rec`` (default: whenever they are computed); a writer that
        keeps them elsewhere (a shard set's manifest) passes ``False``.

    Raises
    ------
    OutputPathError
        The output is a directory, or its folder does not exist.
    """

    def __init__(self, path: str | os.PathLike, index: str | os.PathLike | bool | None = None,
                 key_type: KeyType = int, *, atomic: bool = False, buffer_size: int = 1 << 20,
                 write_behind: bool = False, storage_options: StorageOptions = None, checksums: bool = True,
                 sidecar: bool = True) -> None:
        self.path = local_path(path)
        if index is True:
            index = index_path_for(self.path)
        self.index_path: str | None = local_path(index) if index else None
        self.key_type = key_type
        self._storage = storage_options
        if is_url(self.path) or (self.index_path is not None and is_url(self.index_path)):
            atomic = True  # a remote file is uploaded whole by close()
        self.atomic = atomic
        self._pid = os.getpid()
        self._behind: _WrittenBehind | None = None  # see write_behind; every other write waits for it first
        self._forks = FORK_GENERATION[0]
        self._position = 0
        self._count = 0
        # Index entries not yet written: keys and offsets, formatted in bulk by flush().
        self._pending_keys: list = []
        self._pending_offsets: list[int] = []
        self.checksums: BlockChecksums | None = None
        checksums = checksums and (is_url(self.path) or not is_stream_node(self.path))
        self.sidecar_path = checksums_path(self.path) if checksums and sidecar else None
        # an older file's checksums must never stand beside this one's bytes (unless the caller keeps none there)
        self._stale_sidecar = checksums_path(self.path) if sidecar and self.sidecar_path is None else None
        # With ``atomic`` the output is written under names no reader takes and published by close(): one file
        # through its partial file (or spool file), several (the .rec, its .idx, its checksums) through one commit,
        # the .rec last.
        self._output: PartialFile | RemoteOutput | None = None
        self._commit: Commit | None = None
        files = [p for p in (self.sidecar_path, self.index_path) if p is not None] + [self.path]
        targets = dict(zip(files, files, strict=True))
        if atomic and len(files) > 1:
            self._commit = Commit(self.path, storage_options)
            targets = {name: self._commit.path_for(name) for name in files}
        elif atomic:
            self._output = output_for(self.path, storage_options)
            targets[self.path] = self._output.path
        else:
            stale = self.sidecar_path or self._stale_sidecar
            if stale is not None and not is_url(stale) and os.path.lexists(stale):
                os.unlink(stale)
            self._stale_sidecar = None
        self._sidecar_target = targets.get(self.sidecar_path)
        rec_target = targets[self.path]
        self._rec: BinaryIO | None = open(rec_target, "wb", buffering=buffer_size)
        self._summer = _ReadBack.open(rec_target, self._rec) if checksums else None
        if write_behind:
            self._behind = _WrittenBehind(rec_target, self._rec, self._summer)
        self._idx: TextIO | None = None
        if self.index_path is not None:
            try:
                self._idx = open(targets[self.index_path], "w", encoding="utf-8", newline="")
            except BaseException:
                self._close_files()
                raise

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` or :meth:`abort` has run."""
        return self._rec is None

    def tell(self) -> int:
        """Byte offset at which the next record will start.

        Returns
        -------
        int
            The offset in the ``.rec``.
        """
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
        """Append one record.

        Parameters
        ----------
        payload
            The record's bytes.
        key
            What the index lists it under (default: its position).
        indexed
            List it in the index (when there is one).

        Returns
        -------
        int
            The offset of its first part.

        Raises
        ------
        ClosedFileError
            The writer is closed.
        ForkedWriterError
            The writer was opened in another process (inherited through ``fork``).
        """
        rec = self._rec
        if rec is None or self._forks != FORK_GENERATION[0]:
            rec = self._writable()  # raises
        behind = self._behind
        if behind is not None:  # after the writes behind; the buffer is left empty for the next ones (below)
            self._settle()
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
        and written by :meth:`write`.

        Parameters
        ----------
        records
            ``(key, pieces)`` pairs; ``key`` ``None`` lists a record under its position.
        """
        rec = self._writable()
        checked_behind = self._behind is not None and self._behind.can_check
        chunks: list = []
        listed: list[tuple[object, int]] = []
        items: list[tuple[object, Sequence[bytes | memoryview]]] = []
        for key, pieces in records:
            if any(len(p) & 3 for p in pieces[:-1]) or (
                    not checked_behind and any(map(_holds_aligned_magic, pieces))):
                self._write_listed(rec, chunks, listed, items)  # what came before, then this one the usual way
                chunks, listed, items = [], [], []
                self.write(_join(pieces), key)
                continue
            length = sum(map(len, pieces))
            framing.check_payload_length(length)
            chunks += (_pack_header(_MAGIC_WORD, length), *pieces, _PADDING[-length & 3])
            listed.append((key, self._position))
            items.append((key, pieces))
            self._position += 8 + length + (-length & 3)
        self._write_listed(rec, chunks, listed, items)

    def _write_listed(self, rec: BinaryIO, chunks: list, listed: list[tuple[object, int]],
                      items: list[tuple[object, Sequence[bytes | memoryview]]]) -> None:
        """Write framed ``chunks`` straight to the file, then list their records in the index (held back)."""
        if not listed:
            return
        if self._behind is None:
            rec.flush()
            write_all(rec, chunks)
            self._list(listed)
            return
        block = _Block(listed[0][1], self._position, items)
        if self._summer is not None and self._summer.fed < block.start:  # bytes write() put before this block
            self._settle()  # (the writing thread idle: the sums are this thread's now)
            self._summer.catch_up(block.start)
        try:  # rec's buffer is empty; write() and flush() wait for the block (and its check)
            self._behind.submit(rec, chunks, block)
        except _MagicInBlock as fault:  # an earlier block held a magic: it and every later one, this one included
            self._rewrite_from(fault.block)
            return
        block.listed = True
        self._list(listed)

    def _list(self, listed: list[tuple[object, int]]) -> None:
        """Hold back index entries for records written (or being written behind); count them."""
        if self._idx is not None:
            self._pending_keys.extend(self._count + n if key is None else self.key_type(key)
                                      for n, (key, _) in enumerate(listed))
            self._pending_offsets.extend(offset for _, offset in listed)
        self._count += len(listed)
        if len(self._pending_offsets) >= _FLUSH_INDEX_EVERY:
            self.flush()

    def _settle(self) -> None:
        """Wait for the blocks written behind and their checks; write a block that held a magic again."""
        try:
            self._behind.settle()  # type: ignore[union-attr]
        except _MagicInBlock as fault:
            self._rewrite_from(fault.block)

    def _rewrite_from(self, first: _Block) -> None:
        """Cut the file back to ``first`` (a block with a payload that holds the magic at an aligned offset, framed
        as if it did not) and write it and every later block again, record by record: the careful framing."""
        rec = self._writable()
        blocks = self._behind.restart(first)  # type: ignore[union-attr]
        listed = sum(len(block.items) for block in blocks if block.listed)
        if listed:  # their index entries are still held back (flush waits for the checks)
            if self._idx is not None:
                del self._pending_keys[-listed:]
                del self._pending_offsets[-listed:]
            self._count -= listed
        rec.flush()
        os.ftruncate(rec.fileno(), first.start)
        rec.seek(first.start)
        self._position = first.start
        if self._summer is not None:
            self._summer.rollback(first.start)
        for block in blocks:
            for key, pieces in block.items:
                self.write(_join(pieces), key)

    def write_batch(self, payloads: Iterable[bytes | bytearray | memoryview], keys: Iterable[object] | None = None,
                    *, indexed: bool = True) -> list[int]:
        """Append several records. Faster than :meth:`write` in a loop.

        If a payload is rejected, the records before it stay written and listed.

        Parameters
        ----------
        payloads
            The records' bytes.
        keys
            What the index lists them under, one key per payload (default: the records' positions).
        indexed
            List them in the index (when there is one).

        Returns
        -------
        list of int
            The offset of each record's first part.

        Raises
        ------
        ParameterError
            ``keys`` and ``payloads`` differ in number (raised before anything is written).
        """
        rec = self._writable()
        if self._behind is not None:  # after the writes behind, and leaving the buffer empty for the next ones
            self._settle()
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
            self._settle()
        self._rec.flush()
        if self._summer is not None:
            self._summer.catch_up(self._position)
        if self._idx is not None and self._pending_offsets:
            self._idx.write(format_index(self._pending_keys, self._pending_offsets))
            self._pending_keys.clear()
            self._pending_offsets.clear()
            self._idx.flush()

    def close(self) -> None:
        """Flush and close; with ``atomic=True`` publish the finished files. Idempotent."""
        if self._rec is None:
            return
        try:
            self.flush()
            if self._summer is not None:
                self.checksums = self._summer.result(self._position)
                if self._sidecar_target is not None:
                    self._write_sidecar()
            elif self._commit is not None and self._sidecar_target is not None:
                self._commit.forget(self.sidecar_path)  # (no sums: a file that cannot be read back)
            self._close_files()
            if self._stale_sidecar is not None:  # (before the new bytes appear: no moment pairs them with old sums)
                remove_file(self._stale_sidecar, self._storage)
            if self._commit is not None:  # a remote output: the spool files uploaded into the staging folder
                for name in self._commit.finals:
                    self._commit.finish(name)
        except BaseException as exc:  # nothing is published
            self._close_files()
            self.abort_outputs(exc)
            raise
        if self._output is not None:
            self._output.commit()
        elif self._commit is not None:
            self._commit.publish()  # (which cleans up after itself)

    def _write_sidecar(self) -> None:
        text = format_sidecar(self.checksums)
        if self._commit is not None:  # (published with the pair)
            with open(self._sidecar_target, "w", encoding="utf-8", newline="\n") as f:
                f.write(text)
            return
        with atomic_open(self._sidecar_target, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)

    def abort(self) -> None:
        """Close without finishing: with ``atomic=True`` the partial files are removed."""
        if self._rec is None:
            return
        self._close_files()
        self.abort_outputs()

    def abort_outputs(self, cause: BaseException | None = None) -> None:
        """Remove the partial files of an atomic writer (its files are closed).

        Parameters
        ----------
        cause
            The exception that ended the write: what cannot be removed is named in a note on it.
        """
        if self._output is not None:
            self._output.discard()
        elif self._commit is not None:
            self._commit.abort(cause)

    def _close_files(self) -> None:
        rec, idx = self._rec, self._idx
        self._rec = self._idx = None
        if rec is None:
            return
        try:
            if self._behind is not None:
                self._behind.close()  # close() waited for the writes already; abort() drops them
            if self._summer is not None:
                self._summer.close()
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


@dataclass(eq=False)
class _Block:
    """Records :meth:`RecordWriter.write_pieces` framed as single parts and handed to the writing thread: where they
    start and end in the file, and ``(key, pieces)`` to write them again with (``listed``: in the index)."""

    start: int
    end: int
    items: list[tuple[object, Sequence[bytes | memoryview]]]
    listed: bool = False


class _MagicInBlock(Exception):
    """A block read back holds the magic at an aligned offset that starts no record: a payload holds it."""

    def __init__(self, block: _Block) -> None:
        super().__init__(f"a record at bytes {block.start}-{block.end} holds the RecordIO magic")
        self.block = block


class _WrittenBehind:
    """The blocks of :meth:`RecordWriter.write_pieces`, written by a :class:`~mxrec.storage.write_behind.WriteBehind`
    thread, which then reads each back and counts the magic at its aligned offsets: one per record when no
    payload holds it. Checking there instead of record by record before writing takes the scan (one pass over
    every payload, 6 to 9 us a photo, more for payloads not 4-byte aligned in memory) off the thread that frames
    the records. A payload with an aligned magic (one 4-byte word in 4 billion of random data, more in crafted
    data) must be stored in parts: the writer then cuts the file back to that block and writes it and the later
    ones again, the careful way (:meth:`RecordWriter._rewrite_from`). Without a way to read the file back (a pipe,
    a device), :attr:`can_check` is false and the payloads are scanned before they are framed, as without a
    writing thread."""

    def __init__(self, path: str, rec: BinaryIO, summer: _ReadBack | None = None) -> None:
        self.thread = WriteBehind()
        self.blocks: list[_Block] = []  # handed to the thread and not known to be good yet, in order
        self.summer = summer  # the checksums, fed by the thread from the pages it reads back anyway
        self._fd: int | None = None
        if stat.S_ISREG(os.fstat(rec.fileno()).st_mode):
            try:
                self._fd = os.open(path, os.O_RDONLY)
            except OSError:  # a file we may write but not read: check before writing
                self._fd = None

    @property
    def can_check(self) -> bool:
        return self._fd is not None

    def submit(self, rec: BinaryIO, chunks: list, block: _Block) -> None:
        """Hand ``block`` to the thread (raises :class:`_MagicInBlock` for an earlier one)."""
        if self.summer is not None and self._fd is not None:
            self.summer.fed = block.end  # (from here the thread feeds the sums, in order)
        self.blocks.append(block)
        self.thread.submit(self._write_and_check, rec, chunks, block)
        del self.blocks[:len(self.blocks) - self.thread.waiting]  # the ones before are written and good

    def _write_and_check(self, rec: BinaryIO, chunks: list, block: _Block) -> None:
        write_all(rec, chunks)
        if self._fd is None:
            return
        size = block.end - block.start
        base = block.start - block.start % mmap.ALLOCATIONGRANULARITY
        try:  # the block's pages, just written, mapped from the page cache: read without a copy (pread: +30%)
            written: Any = mmap.mmap(self._fd, block.end - base, access=mmap.ACCESS_READ, offset=base)
            close = written.close
        except (OSError, ValueError):  # a file system that cannot map files
            written, base, close = os.pread(self._fd, size, block.start), block.start, None
        try:
            found = np.count_nonzero(np.frombuffer(written, "<u4", size // 4, block.start - base) == _MAGIC_WORD)
            if found == len(block.items) and self.summer is not None:
                self.summer.feed(memoryview(written)[block.start - base:block.end - base], block.start)
        finally:
            if close is not None:
                close()
        if found != len(block.items):
            raise _MagicInBlock(block)

    def settle(self) -> None:
        """Wait for every block and its check (raises :class:`_MagicInBlock` for the first one that failed)."""
        self.thread.wait()
        self.blocks.clear()

    def restart(self, first: _Block) -> list[_Block]:
        """After ``first`` failed its check: stop the thread (the later blocks are not written, or are cut off by
        the caller) and return ``first`` and every later block, to be written again."""
        self.thread.cancel()
        self.thread = WriteBehind()
        blocks = self.blocks[self.blocks.index(first):]
        self.blocks = []
        return blocks

    def close(self) -> None:
        self.thread.cancel()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class _ReadBack(Summer):
    """The checksums of a file being written, summed from its bytes read back from the page cache: by the
    writing thread as it checks each block (:class:`_WrittenBehind`), and by :meth:`catch_up` for what was written
    otherwise. :attr:`fed` is where the bytes handed on so far end (summed, or being summed by the thread)."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self.fed = 0
        self._fd: int | None = fd

    @classmethod
    def open(cls, path: str, rec: BinaryIO) -> _ReadBack | None:
        """The sums of the file ``rec`` opened at ``path``; ``None`` when it cannot be read back (not a regular
        file, or one this process may write but not read)."""
        if not stat.S_ISREG(os.fstat(rec.fileno()).st_mode):
            return None
        try:
            return cls(os.open(path, os.O_RDONLY))
        except OSError:
            return None

    def catch_up(self, upto: int) -> None:
        """Sum the file's bytes up to ``upto`` (flushed to the operating system) not summed yet."""
        while self.done < upto:
            start = self.done
            stop = min(upto, start + _READ_BACK)
            base = start - start % mmap.ALLOCATIONGRANULARITY
            try:  # the pages just written, mapped from the page cache: summed without a copy
                pages = mmap.mmap(self._fd, stop - base, access=mmap.ACCESS_READ, offset=base)
            except (OSError, ValueError):  # a file system that cannot map files
                data = os.pread(self._fd, stop - start, start)
                if len(data) != stop - start:
                    raise MxrecError(f"checksums: the file ends before byte {stop}") from None
                self.feed(data, start)
                continue
            try:
                view = memoryview(pages)
                try:
                    self.feed(view[start - base:stop - base], start)
                finally:
                    view.release()
            finally:
                pages.close()
        self.fed = max(self.fed, upto)

    def rollback(self, offset: int) -> None:
        super().rollback(offset)
        self.fed = self.done

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
