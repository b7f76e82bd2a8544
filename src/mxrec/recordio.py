"""Drop-in replacement for ``mxnet.recordio`` (MXNet 1.9.1).

Change ``import mxnet.recordio as recordio`` (or ``from mxnet import recordio``)
to ``import mxrec.recordio as recordio`` and existing code keeps working: the
same classes, functions, signatures, return types and file bytes.

Same as MXNet
    ``MXRecordIO(uri, flag)``, ``MXIndexedRecordIO(idx_path, uri, flag, key_type=int)``,
    ``IRHeader``, ``pack``, ``unpack``, ``pack_img``, ``unpack_img``; ``read()``
    returns ``bytes`` or ``None`` at the end; ``reset()`` reopens (in ``'w'``
    mode that truncates the ``.rec`` and ``.idx``); ``close()`` is idempotent;
    an unknown flag raises ``ValueError``; ``keys`` lists the ``.idx`` keys in
    file order, duplicates included, and ``idx`` maps each key to its offset
    (for a duplicated key the last line wins, with a warning); after
    ``read_idx(k)`` a plain ``read()`` returns the next record in file order;
    ``unpack_img`` returns OpenCV's BGR (or grey) array.

Better than MXNet (MXNet's behaviour in brackets)
    * Reading works in a forked child, also plain ``read()``: the file is
      memory-mapped and the position is per process [``RuntimeError``:
      "Forbidden operation in multiple processes"]. Writing from a child
      still raises, since two processes appending to one file corrupt it.
    * Pickling a reader does not close it; the copy reopens the file and
      starts at the beginning [the original was closed]. An open writer
      cannot be pickled [the copy reopened the file with ``'w'``, truncating it].
    * ``read_idx`` after reaching the end still reads [once a read returned
      ``None``, the reader could stay at end-of-file].
    * One lock per object: ``read_idx`` from several threads is safe.
    * Damaged files raise :class:`mxrec.errors.RecordFormatError` naming the
      file and byte offset; a trailing lone start part or a leading end part
      is an error [silently dropped / misread]. An ``.idx`` offset that is not
      a record start raises :class:`mxrec.errors.IndexFileError` naming the key.
    * ``unpack_img`` raises :class:`mxrec.errors.ImageDecodeError` for bytes
      that are not an image [returned ``None``].
    * ``tell()`` works on readers too; both classes are context managers.
    * ``uri`` and ``idx_path`` may be URLs (``s3://``, ``gs://``, ``http(s)://``,
      ``webhdfs://``...; credentials from the environment or fsspec's
      configuration): reading goes through large ranged reads
      (:mod:`mxrec.io.stream`), writing is uploaded, ``.rec`` then ``.idx``, by
      ``close()``; leaving a ``with`` block by an exception uploads nothing.
"""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Iterator, MutableMapping, MutableSequence

import numpy as np

from mxrec.errors import ClosedFileError, IndexFileError, ModeError, RecordKeyError
from mxrec.format import framing
from mxrec.format.header import IRHEADER_FORMAT, IRHEADER_SIZE, IRHeader, pack, unpack
from mxrec.format.idx import IntKeys, KeyType
from mxrec.image.codec import decode_image, encode_image
from mxrec.io.index import read_index
from mxrec.io.keys import KeyStore
from mxrec.io.opener import open_sequential
from mxrec.io.stream import RecordStream
from mxrec.io.writer import FORK_GENERATION, RecordWriter
from mxrec.storage.memory_map import release

__all__ = ["IRHeader", "MXIndexedRecordIO", "MXRecordIO", "pack", "pack_img", "unpack", "unpack_img"]

_QUEUE_RECORDS = 256  # records a writer queues before framing and writing them together
_MAX_LENGTH = framing.MAX_LENGTH
_unpack_part_header = framing.PART_HEADER.unpack_from
_MAGIC = framing.MAGIC
_FULL_LIMIT = framing.FULL_LIMIT

# Module constants of mxnet.recordio that some code reads.
_IR_FORMAT = IRHEADER_FORMAT.lstrip("<")
_IR_SIZE = IRHEADER_SIZE


class MXRecordIO:
    """Sequential reading (``flag='r'``) or writing (``flag='w'``) of a ``.rec`` file.

    A writer frames and writes records in groups (:meth:`RecordWriter.write_batch
    <mxrec.io.writer.RecordWriter.write_batch>`: one magic check for a whole
    group): ``write`` queues a record, and every way to observe the output --
    ``tell``, ``close``, ``idx``, ``keys`` -- writes the queue first, so what
    is seen is always what MXNet would show.

    Parameters
    ----------
    uri
        The ``.rec`` file: a path or a URL.
    flag
        ``"r"`` to read, ``"w"`` to write (truncating the file).

    Raises
    ------
    ModeError
        ``flag`` is neither ``"r"`` nor ``"w"`` (a ``ValueError``, as MXNet's).
    """

    _pending: list | None = None  # records queued by write() / write_idx(); None unless open for writing

    def __init__(self, uri: str | os.PathLike, flag: str) -> None:
        self.uri = os.fspath(uri)
        self.flag = flag
        self.pid: int | None = None
        self.is_open = False
        self.writable = False
        self._lock = threading.RLock()
        self._buf = None
        self._stream: RecordStream | None = None
        self._writer: RecordWriter | None = None
        self._cursor = 0
        self.open()

    def open(self) -> None:
        """Open the file; ``'w'`` truncates it."""
        if self.flag == "w":
            self._writer = RecordWriter(self.uri, checksums=False)  # (MXNet's files, and no others)
            self._pending = []
            self.writable = True
        elif self.flag == "r":
            source = open_sequential(self.uri)  # a missing file fails here, local or remote
            if isinstance(source, RecordStream):
                self._stream = source
            else:
                self._buf = source
            self._cursor = 0
            self.writable = False
        else:
            raise ModeError(f"Invalid flag {self.flag!r}: use 'r' or 'w'")
        self.pid = os.getpid()
        self._forks = FORK_GENERATION[0]
        self.is_open = True

    def close(self) -> None:
        """Close the file. Idempotent."""
        if not self.is_open:
            return
        if self._writer is not None:
            try:
                self._flush_pending()
            finally:
                self._pending = None
                self._writer.close()
                self._writer = None
        release(self._buf)
        self._buf = None
        self._stream = None
        self.is_open = False
        self.pid = None

    def reset(self) -> None:
        """Reopen: a reader starts again at the first record, a writer truncates the file."""
        self.close()
        self.open()

    def __del__(self) -> None:
        if self.__dict__.get("is_open") and self.__dict__.get("pid") == os.getpid():
            self.close()

    def __enter__(self):
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is not None and self._writer is not None and self._writer.atomic:
            self._writer.abort()  # a remote output (uploaded whole): nothing that looks finished is uploaded
            self._writer = None
        self.close()

    def __getstate__(self) -> dict:
        if self.is_open and self.writable:
            raise TypeError(f"cannot pickle {type(self).__name__}({self.uri!r}) open for writing: "
                            "the copy would truncate the file; close it first")
        state = {k: v for k, v in self.__dict__.items() if k not in ("_lock", "_buf", "_writer", "_stream", "_pending")}
        state["_cursor"] = 0
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.RLock()
        self._buf = None
        self._stream = None
        self._writer = None
        if self.is_open:
            self.is_open = False
            self.open()

    def _require(self, writable: bool) -> None:
        if not self.is_open:
            raise ClosedFileError(f"{self.uri}: {type(self).__name__} is closed")
        if self.writable != writable:
            raise ModeError(f"{self.uri}: opened with flag {self.flag!r}, cannot "
                            f"{'write' if writable else 'read'}")

    def write(self, buf: bytes) -> None:
        """Append one record.

        Parameters
        ----------
        buf
            The record's bytes (as :func:`pack` makes them).

        Raises
        ------
        ClosedFileError, ModeError
            The file is closed, or was opened for reading.
        RecordTooLargeError
            ``buf`` is too large for the RecordIO length field.
        ForkedWriterError
            The writer is used in another process than the one that opened it.
        """
        if not self._queued(buf):
            self._writer.write(buf, indexed=False)
        elif len(self._pending) >= _QUEUE_RECORDS:
            self._flush_pending()

    def _queued(self, buf: bytes) -> bool:
        """Queue ``buf`` for the next batched write, where that is safe: an open writer in the process that opened
        it, given plain bytes. Otherwise write out the queue (raising what a write here would raise) and return
        ``False``: the caller then writes ``buf`` itself."""
        pending = self._pending
        if pending is None or self._forks != FORK_GENERATION[0] or type(buf) is not bytes:
            self._require(writable=True)
            self._flush_pending()  # in a forked child: raises ForkedWriterError
            return False
        if len(buf) > _MAX_LENGTH:
            framing.check_payload_length(len(buf))
        pending.append(buf)
        return True

    def _flush_pending(self) -> None:
        """Write the queued records."""
        pending = self._pending
        if pending:
            self._pending = []
            self._writer.write_batch(pending, indexed=False)

    def read(self) -> bytes | None:
        """Read the next record.

        Returns
        -------
        bytes or None
            The record, or ``None`` at the end of the file.

        Raises
        ------
        ClosedFileError, ModeError
            The file is closed, or was opened for writing.
        RecordFormatError
            The file breaks the RecordIO framing there.
        """
        with self._lock:
            if self._stream is not None:
                if self._cursor >= self._stream.size:
                    return None
                payload, self._cursor = self._stream.record_at(self._cursor)
                return payload
            buf = self._buf
            if buf is None:  # closed, or a writer
                self._require(writable=False)
            cursor = self._cursor
            size = len(buf)
            if cursor + 8 <= size:
                payload = self._read_one_part(buf, cursor)
                if payload is not None:
                    return payload
            elif cursor >= size:
                return None
            payload, self._cursor = framing.decode_record(buf, cursor, self.uri)
            return payload

    def _read_one_part(self, buf: bytes, pos: int) -> bytes | None:
        """The record at ``pos`` when it is whole in one part (the common case, read without framing's checks),
        the cursor moved past it; ``None`` for anything else, which :mod:`mxrec.format.framing` reads or rejects."""
        magic, lrec = _unpack_part_header(buf, pos)
        if magic == _MAGIC and lrec < _FULL_LIMIT:
            after = pos + 8 + lrec + (-lrec & 3)
            if after <= len(buf):
                self._cursor = after
                return buf[pos + 8:pos + 8 + lrec]
        return None

    def tell(self) -> int:
        """The position in the file.

        Returns
        -------
        int
            Byte offset of the next record to be read or written.

        Raises
        ------
        ClosedFileError
            The file is closed.
        """
        if not self.is_open:
            raise ClosedFileError(f"{self.uri}: {type(self).__name__} is closed")
        if self.writable:
            self._flush_pending()
            return self._writer.tell()
        return self._cursor


class _ShownAfterWriting:
    """An attribute whose reading first writes the queued records, so that it shows what MXNet's would."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.slot = "_" + name

    def __get__(self, obj: MXRecordIO | None, owner: type | None = None):
        if obj is None:
            return self
        if obj._pending:
            obj._flush_pending()
        return obj.__dict__[self.slot]

    def __set__(self, obj: MXRecordIO, value: object) -> None:
        obj.__dict__[self.slot] = value


class MXIndexedRecordIO(MXRecordIO):
    """Random access by key, through an ``.idx`` file of ``key\\toffset`` lines.

    Parameters
    ----------
    idx_path
        The ``.idx`` file: read with ``"r"``, written with ``"w"``.
    uri
        The ``.rec`` file: a path or a URL.
    flag
        ``"r"`` to read, ``"w"`` to write.
    key_type
        Converts ``.idx`` keys when reading (``int``, or ``str``).
    """

    def __init__(self, idx_path: str | os.PathLike, uri: str | os.PathLike, flag: str,
                 key_type: KeyType = int) -> None:
        self.idx_path = os.fspath(idx_path)
        self.idx = {}
        self.keys = []
        self.key_type = key_type
        super().__init__(uri, flag)

    def open(self) -> None:
        """Open the file and its ``.idx``; ``'w'`` truncates both.

        Raises
        ------
        IndexFileError
            The ``.idx`` is malformed.
        """
        if self.flag == "w":
            self._writer = RecordWriter(self.uri, index=self.idx_path, key_type=self.key_type, checksums=False)
            self._pending, self._pending_keys = [], []
            self.writable = True
            self.idx, self.keys = {}, []
            self.pid = os.getpid()
            self._forks = FORK_GENERATION[0]
            self.is_open = True
            return
        super().open()
        try:
            index = read_index(self.idx_path, self.key_type)
        except BaseException:
            self.close()
            raise
        store = KeyStore(index.keys)
        if isinstance(index.keys, IntKeys):
            self.keys, self.idx = KeyList(index.keys), OffsetMap(store, index.offsets)
        else:  # string keys: the list and dict MXNet builds
            self.keys, self.idx = index.keys, index.mapping()
        if not store.unique():
            duplicated = index.duplicates()
            warnings.warn(f"{self.idx_path}: {len(self.keys) - len(self.idx)} duplicated key(s), e.g. "
                          f"{duplicated[0]!r}; the last line of each wins", stacklevel=3)

    def _offset(self, idx: object) -> int:
        index = self.idx
        try:
            return index.offset(idx) if type(index) is OffsetMap else index[idx]
        except KeyError:
            raise RecordKeyError(self.idx_path, key=idx) from None

    def seek(self, idx: object) -> None:
        """Move the read position to the record stored under key ``idx``.

        Parameters
        ----------
        idx
            The key of the record that :meth:`read` reads next.

        Raises
        ------
        ClosedFileError, ModeError
            The file is closed, or was opened for writing.
        RecordKeyError
            The ``.idx`` has no key ``idx``.
        IndexFileError
            The ``.idx`` gives an offset that is not the start of a record.
        """
        self._require(writable=False)
        pos = self._offset(idx)
        if self._stream is not None:
            self._stream.seek(pos)  # the record's framing is checked when it is read
        elif not framing.is_record_start(self._buf, pos):
            raise IndexFileError(self.idx_path, f"key {idx!r}: offset {pos} is not the start of a record "
                                 f"in {self.uri} ({len(self._buf)} bytes)", key=idx)
        with self._lock:
            self._cursor = pos

    def read_idx(self, idx: object) -> bytes:
        """The record stored under key ``idx``.

        Parameters
        ----------
        idx
            The record's key.

        Returns
        -------
        bytes
            The record.

        Raises
        ------
        ClosedFileError, ModeError, RecordKeyError, IndexFileError
            As :meth:`seek`, which finds the record.
        RecordFormatError
            The file breaks the RecordIO framing at the record.
        """
        with self._lock:
            buf = self._buf
            if buf is None:  # closed, a writer, or a remote file (read through its stream)
                self._require(writable=False)
                self.seek(idx)
                return self.read()
            pos = self._offset(idx)
            # The common case inline: an aligned single-part record (what seek() + read() would check and read).
            if pos & 3 == 0 and 0 <= pos <= len(buf) - 8:
                payload = self._read_one_part(buf, pos)
                if payload is not None:
                    return payload
            self.seek(idx)
            return self.read()

    #: ``{key: offset}`` (for a duplicated key, the last line's offset).
    idx = _ShownAfterWriting()
    #: The keys in ``.idx`` order, duplicates included.
    keys = _ShownAfterWriting()

    def write(self, buf: bytes) -> None:
        """Append a record that the ``.idx`` does not list.

        Parameters
        ----------
        buf
            The record's bytes (written at once, after the records queued before it).

        Raises
        ------
        ClosedFileError, ModeError
            The file is closed, or was opened for reading.
        """
        self._flush_pending()
        self._require(writable=True)
        self._writer.write(buf, indexed=False)

    def write_idx(self, idx: object, buf: bytes) -> None:
        """Append a record and list it in the ``.idx`` under key ``idx``.

        Parameters
        ----------
        idx
            The record's key (made ``key_type``).
        buf
            The record's bytes.

        Raises
        ------
        ClosedFileError, ModeError
            The file is closed, or was opened for reading.
        """
        if not self._queued(buf):
            key = self.key_type(idx)
            self._idx[key] = self._writer.write(buf, key=key)
            self._keys.append(key)
            return
        self._pending_keys.append(self.key_type(idx))
        if len(self._pending) >= _QUEUE_RECORDS:
            self._flush_pending()

    def _flush_pending(self) -> None:
        pending = self._pending
        if pending:
            keys = self._pending_keys
            self._pending, self._pending_keys = [], []
            offsets = self._writer.write_batch(pending, keys)
            self._idx.update(zip(keys, offsets, strict=True))
            self._keys.extend(keys)


class KeyList(MutableSequence):
    """The drop-in's ``keys`` for integer keys: reads as MXNet's list, stored as :class:`IntKeys`.

    Indexing, slicing, iteration, ``len``, ``in``, ``==`` (with lists) and
    ``repr`` are a list's; ``numpy.asarray(keys)`` gives the int64 keys
    directly. The first change (``append``, item assignment, ``sort``,
    ``random.shuffle`` ...) turns it into a real list, which it then is in all
    but type.
    """

    def __init__(self, keys: IntKeys) -> None:
        self._keys: IntKeys | list = keys

    def _list(self) -> list:
        if not isinstance(self._keys, list):
            self._keys = self._keys.tolist()
        return self._keys

    def __len__(self) -> int:
        return len(self._keys)

    def __getitem__(self, i):  # type: ignore[override]
        return self._keys[i]

    def __setitem__(self, i, value) -> None:  # type: ignore[override]
        self._list()[i] = value

    def __delitem__(self, i) -> None:  # type: ignore[override]
        del self._list()[i]

    def insert(self, i: int, value: object) -> None:
        self._list().insert(i, value)

    def append(self, value: object) -> None:
        self._list().append(value)

    def sort(self, *, key=None, reverse: bool = False) -> None:
        self._list().sort(key=key, reverse=reverse)

    def copy(self) -> list:
        return list(self._keys)

    def __iter__(self) -> Iterator:
        return iter(self._keys)

    def __contains__(self, value: object) -> bool:
        return value in self._keys

    def __eq__(self, other: object) -> bool:
        if isinstance(other, KeyList):
            other = other._keys
        return self._keys == other if isinstance(other, (list, IntKeys)) else NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __array__(self, dtype: object = None, copy: object = None) -> np.ndarray:
        return np.asarray(self._keys, dtype=dtype)

    def __repr__(self) -> str:
        return repr(self._keys)


class OffsetMap(MutableMapping):
    """The drop-in's ``idx`` for integer keys: MXNet's ``{key: offset}`` dict, answered from the compact index.

    Look-ups go through :class:`~mxrec.io.keys.KeyStore` (no dict entry per
    key); iteration, ``len``, ``==`` and views are a dict's, in its order (first
    occurrence of each key). The first change turns it into a real dict.
    """

    def __init__(self, store: KeyStore, offsets: np.ndarray) -> None:
        self._store = store
        self._offsets = offsets
        self._table = memoryview(offsets)
        self._dict: dict | None = None

    def offset(self, key: object) -> int:
        """``self[key]`` (raises ``KeyError``)."""
        if self._dict is not None:
            return self._dict[key]
        return self._table[self._store.position(key)]

    __getitem__ = offset

    def _materialise(self) -> dict:
        if self._dict is None:
            self._dict = dict(zip(self._store.keys, self._offsets.tolist(), strict=True))
        return self._dict

    def __setitem__(self, key: object, value: int) -> None:
        self._materialise()[key] = value

    def __delitem__(self, key: object) -> None:
        del self._materialise()[key]

    def __contains__(self, key: object) -> bool:
        if self._dict is not None:
            return key in self._dict
        try:
            self._store.position(key)
        except KeyError:
            return False
        return True

    def __len__(self) -> int:
        if self._dict is None and self._store.unique():
            return len(self._store.keys)
        return len(self._materialise())

    def __iter__(self) -> Iterator:
        if self._dict is None and self._store.unique():
            return iter(self._store.keys)
        return iter(self._materialise())

    def __repr__(self) -> str:
        return repr(dict(self.items()))

    def __getstate__(self) -> dict:
        return {"store": self._store, "offsets": self._offsets, "dict": self._dict}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["store"], state["offsets"])
        self._dict = state["dict"]


def unpack_img(s: bytes, iscolor: int = -1) -> tuple[IRHeader, np.ndarray]:
    """Unpack a record into its header and decoded image (BGR or grey, as OpenCV's ``imdecode``).

    Parameters
    ----------
    s
        A record payload: an ``IRHeader`` and encoded image bytes.
    iscolor
        OpenCV's ``imdecode`` flag: ``-1`` as stored, ``0`` grey, ``1`` BGR.

    Returns
    -------
    tuple
        The :class:`IRHeader` and the image, ``uint8`` HxWx3 (BGR) or HxW.

    Raises
    ------
    ImageDecodeError
        The bytes are not an image (MXNet returned ``None``).
    """
    header, payload = unpack(s)
    return header, decode_image(payload, iscolor, what=f"record id {header.id}")


def pack_img(header: IRHeader | tuple, img: np.ndarray, quality: int = 95, img_fmt: str = ".jpg") -> bytes:
    """Encode an image and pack it with ``header`` into one record payload (byte-identical to MXNet's).

    Parameters
    ----------
    header
        The :class:`IRHeader` (or a 4-tuple ``flag, label, id, id2``).
    img
        The image, ``uint8`` HxWx3 in BGR order (as OpenCV) or HxW grey.
    quality
        JPEG quality 1-100, or the PNG compression level 0-9 for ``.png``.
    img_fmt
        The encoding: ``".jpg"``, ``".png"``, ... (what OpenCV writes).

    Returns
    -------
    bytes
        The record payload.
    """
    return pack(header, encode_image(img, img_fmt, quality))
