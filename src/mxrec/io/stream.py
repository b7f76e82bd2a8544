"""Records of a remote ``.rec`` read one after another, as ``mxnet.recordio``'s ``read()`` does, in a moving window.

:class:`RecordStream` serves :mod:`mxrec.recordio`'s ``MXRecordIO.read()`` and
``MXIndexedRecordIO.read_idx()`` on URLs. It keeps one window of the file in
memory: a read inside the window costs nothing, a read past it fetches the next
window with one ranged read. Windows start small after a jump (a ``seek``:
random access by key fetches little more than the record) and double, up to
16 MiB, while reading goes on sequentially, so a sequential pass costs one
request per 16 MiB. Framing errors name the URL and the absolute byte offset.
"""

from __future__ import annotations

from mxrec.errors import RecordFormatError, TruncatedRecordError
from mxrec.format import framing
from mxrec.storage.block_cache import BlockCache
from mxrec.storage.filesystem import StorageOptions
from mxrec.storage.remote_file import RemoteFile

FIRST_WINDOW = 64 << 10
MAX_WINDOW = 16 << 20


class RecordStream:
    """A remote ``.rec`` read record by record (see the module docstring)."""

    def __init__(self, url: str, storage_options: StorageOptions = None) -> None:
        self.url = url
        self.file = RemoteFile(url, storage_options, cache=BlockCache.from_setting(None))
        self._data = b""
        self._start = 0
        self._window = FIRST_WINDOW

    @property
    def size(self) -> int:
        return self.file.size

    def seek(self, offset: int) -> None:
        """Reading jumps to ``offset``: the next fetch is small."""
        if not self._start <= offset < self._start + len(self._data):
            self._window = FIRST_WINDOW

    def record_at(self, offset: int) -> tuple[bytes, int]:
        """``(payload, next offset)`` of the record starting at byte ``offset``."""
        size = self.size
        while True:
            relative = offset - self._start
            if 0 <= relative < len(self._data):
                try:
                    payload, after = framing.decode_record(self._data, relative, self.url)
                    return payload, self._start + after
                except TruncatedRecordError as exc:
                    if self._start + len(self._data) >= size:
                        raise type(exc)(self.url, exc.reason, offset=self._start + exc.offset) from None
                except RecordFormatError as exc:
                    raise type(exc)(self.url, exc.reason, offset=self._start + exc.offset) from None
                # the record runs past the window: fetch from its start, at least twice as much
                self._window = max(min(MAX_WINDOW, self._window * 2), 2 * (len(self._data) - relative))
            self._load(offset)

    def _load(self, offset: int) -> None:
        end = min(self.size, offset + self._window)
        if offset >= end:
            raise TruncatedRecordError(self.url, "data ends before the record", offset=offset)
        self._data = self.file.read(offset, end)
        self._start = offset
        self._window = min(MAX_WINDOW, self._window * 2)
