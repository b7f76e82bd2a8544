"""Opening one ``.rec`` file: :func:`RecordReader` picks the reader for where the file lives."""

from __future__ import annotations

import os
from typing import Literal

from mxrec.format.idx import KeyType
from mxrec.io.local_reader import LocalRecordReader
from mxrec.io.records import Records
from mxrec.io.remote_reader import RemoteRecordReader
from mxrec.storage.block_cache import BlockCache
from mxrec.storage.filesystem import StorageOptions, is_url


def RecordReader(path: str | os.PathLike, index: str | os.PathLike | bool | None = None,
                 key_type: KeyType = int, *, duplicates: Literal["error", "last"] = "error", strict: bool = True,
                 storage_options: StorageOptions = None, cache_dir: str | os.PathLike | BlockCache | None = None,
                 size: int | None = None, version: str | None = None) -> Records:
    """Open one ``.rec`` file: a :class:`~mxrec.io.local_reader.LocalRecordReader` for a local path (or
    ``file://``), a :class:`~mxrec.io.remote_reader.RemoteRecordReader` for any other URL.

    Named like a class because it stands for one (the reader of a file); both
    readers implement :class:`~mxrec.io.records.Records`.

    ``index``: ``None`` uses the ``.idx`` beside the file if it exists and
    scans otherwise; ``True`` requires it; a path (or URL) names it; ``False``
    always scans. ``key_type`` converts ``.idx`` keys (``int``, or ``str``).
    ``duplicates``: ``"error"`` rejects an ``.idx`` with a repeated key,
    ``"last"`` keeps MXNet's rule. ``strict=False``: a scan steps over damaged
    framing (see ``damage``). Remote files only: ``storage_options`` (fsspec),
    ``cache_dir`` (or ``$MXREC_CACHE_DIR``: a local block cache), ``size`` and
    ``version`` (save the request that asks for them).
    """
    if isinstance(path, str) and is_url(path):
        return RemoteRecordReader(path, index, key_type, duplicates=duplicates, strict=strict,
                                  storage_options=storage_options, cache_dir=cache_dir, size=size, version=version)
    return LocalRecordReader(path, index, key_type, duplicates=duplicates, strict=strict)
