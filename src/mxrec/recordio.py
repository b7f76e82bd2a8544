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

import numpy as np

from mxrec.errors import ClosedFileError, IndexFileError, ModeError, RecordKeyError
from mxrec.format import framing
from mxrec.format.header import IRHEADER_FORMAT, IRHEADER_SIZE, IRHeader, pack, unpack
from mxrec.format.idx import KeyType
from mxrec.image.codec import decode_image, encode_image
from mxrec.io.filesystem import is_url, local_path
from mxrec.io.index import read_index
from mxrec.io.mapping import map_file, release
from mxrec.io.stream import RecordStream
from mxrec.io.writer import RecordWriter

__all__ = ["IRHeader", "MXIndexedRecordIO", "MXRecordIO", "pack", "pack_img", "unpack", "unpack_img"]

# Module constants of mxnet.recordio that some code reads.
_IR_FORMAT = IRHEADER_FORMAT.lstrip("<")
_IR_SIZE = IRHEADER_SIZE


class MXRecordIO:
    """Sequential reading (``flag='r'``) or writing (``flag='w'``) of a ``.rec`` file."""

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
            self._writer = RecordWriter(self.uri)
            self.writable = True
        elif self.flag == "r":
            if is_url(self.uri):
                self._stream = RecordStream(self.uri)
                self._stream.file.stat()  # a missing file fails here, as a local one does
            else:
                self._buf = map_file(local_path(self.uri))
            self._cursor = 0
            self.writable = False
        else:
            raise ModeError(f"Invalid flag {self.flag!r}: use 'r' or 'w'")
        self.pid = os.getpid()
        self.is_open = True

    def close(self) -> None:
        """Close the file. Idempotent."""
        if not self.is_open:
            return
        if self._writer is not None:
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
        if exc_type is not None and self._writer is not None and is_url(self.uri):
            self._writer.abort()  # nothing that looks finished is uploaded
            self._writer = None
        self.close()

    def __getstate__(self) -> dict:
        if self.is_open and self.writable:
            raise TypeError(f"cannot pickle {type(self).__name__}({self.uri!r}) open for writing: "
                            "the copy would truncate the file; close it first")
        state = {k: v for k, v in self.__dict__.items() if k not in ("_lock", "_buf", "_writer", "_stream")}
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
        """Append one record."""
        self._require(writable=True)
        self._writer.write(buf, indexed=False)

    def read(self) -> bytes | None:
        """The next record, or ``None`` at the end of the file."""
        self._require(writable=False)
        with self._lock:
            if self._stream is not None:
                if self._cursor >= self._stream.size:
                    return None
                payload, self._cursor = self._stream.record_at(self._cursor)
                return payload
            buf = self._buf
            if self._cursor >= len(buf):
                return None
            payload, self._cursor = framing.decode_record(buf, self._cursor, self.uri)
            return payload

    def tell(self) -> int:
        """Byte offset of the next record to be read or written."""
        if not self.is_open:
            raise ClosedFileError(f"{self.uri}: {type(self).__name__} is closed")
        return self._writer.tell() if self.writable else self._cursor


class MXIndexedRecordIO(MXRecordIO):
    """Random access by key, through an ``.idx`` file of ``key\\toffset`` lines."""

    def __init__(self, idx_path: str | os.PathLike, uri: str | os.PathLike, flag: str,
                 key_type: KeyType = int) -> None:
        self.idx_path = os.fspath(idx_path)
        self.idx: dict = {}
        self.keys: list = []
        self.key_type = key_type
        super().__init__(uri, flag)

    def open(self) -> None:
        if self.flag == "w":
            self._writer = RecordWriter(self.uri, index=self.idx_path, key_type=self.key_type)
            self.writable = True
            self.idx, self.keys = {}, []
            self.pid = os.getpid()
            self.is_open = True
            return
        super().open()
        try:
            index = read_index(self.idx_path, self.key_type)
        except BaseException:
            self.close()
            raise
        self.keys = index.keys
        self.idx = index.mapping()
        if len(self.idx) != len(self.keys):
            warnings.warn(f"{self.idx_path}: {len(self.keys) - len(self.idx)} duplicated key(s), e.g. "
                          f"{index.duplicates()[0]!r}; the last line of each wins", stacklevel=3)

    def seek(self, idx: object) -> None:
        """Move the read position to the record stored under key ``idx``."""
        self._require(writable=False)
        try:
            pos = self.idx[idx]
        except KeyError:
            raise RecordKeyError(self.idx_path, idx) from None
        if self._stream is not None:
            self._stream.seek(pos)  # the record's framing is checked when it is read
        elif not framing.is_record_start(self._buf, pos):
            raise IndexFileError(self.idx_path, f"key {idx!r}: offset {pos} is not the start of a record "
                                 f"in {self.uri} ({len(self._buf)} bytes)", key=idx)
        with self._lock:
            self._cursor = pos

    def read_idx(self, idx: object) -> bytes:
        """The record stored under key ``idx``."""
        with self._lock:
            self.seek(idx)
            return self.read()

    def write_idx(self, idx: object, buf: bytes) -> None:
        """Append a record and list it in the ``.idx`` under key ``idx``."""
        self._require(writable=True)
        key = self.key_type(idx)
        self.idx[key] = self._writer.write(buf, key=key)
        self.keys.append(key)


def unpack_img(s: bytes, iscolor: int = -1) -> tuple[IRHeader, np.ndarray]:
    """Unpack a record into its header and decoded image (BGR or grey, as OpenCV's ``imdecode``)."""
    header, payload = unpack(s)
    return header, decode_image(payload, iscolor, what=f"record id {header.id}")


def pack_img(header: IRHeader | tuple, img: np.ndarray, quality: int = 95, img_fmt: str = ".jpg") -> bytes:
    """Encode ``img`` (BGR, as OpenCV) and pack it with ``header``; ``quality`` is the PNG level for ``.png``."""
    return pack(header, encode_image(img, img_fmt, quality))
