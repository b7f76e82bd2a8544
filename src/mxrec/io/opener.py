"""Opening one ``.rec`` file: :func:`RecordReader` picks the reader for where the file lives, and
:func:`open_sequential` the bytes a reader from start to end walks."""

from __future__ import annotations

import mmap
import os
from typing import Literal

from mxrec.format.checksums import BlockChecksums
from mxrec.format.idx import KeyType
from mxrec.io.local_reader import LocalRecordReader
from mxrec.io.records import Records
from mxrec.io.remote_reader import RemoteRecordReader
from mxrec.io.stream import RecordStream
from mxrec.storage.block_cache import BlockCache
from mxrec.storage.filesystem import StorageOptions, is_url, local_path
from mxrec.storage.memory_map import map_file


def RecordReader(path: str | os.PathLike, index: str | os.PathLike | bool | None = None,
                 key_type: KeyType = int, *, duplicates: Literal["error", "last"] = "error", strict: bool = True,
                 storage_options: StorageOptions = None, cache_dir: str | os.PathLike | BlockCache | None = None,
                 size: int | None = None, version: str | None = None,
                 checksums: BlockChecksums | bool | None = None) -> Records:
    """Open one ``.rec`` file, by position or by key, wherever it lives.

    A :class:`~mxrec.io.local_reader.LocalRecordReader` for a local path (or
    ``file://``), a :class:`~mxrec.io.remote_reader.RemoteRecordReader` for any
    other URL (``s3://...``), which reads the same way with coalesced ranged
    requests. Named like a class because it stands for one (the reader of a
    file); both readers implement :class:`~mxrec.io.records.Records`.

    Parameters
    ----------
    path
        The ``.rec`` file: a local path or an fsspec URL.
    index
        ``None``: the ``.idx`` beside the file if it exists, else a scan of the
        file. ``True``: the ``.idx`` beside the file is required (as
        :class:`~mxrec.io.writer.RecordWriter`'s ``index=True`` names it). A
        path (or URL): that ``.idx``. ``False``: always scan.
    key_type
        Converts ``.idx`` keys: ``int`` (default), or ``str`` for string keys.
    duplicates
        ``"error"`` (default) rejects an ``.idx`` with a repeated key;
        ``"last"`` keeps MXNet's rule (the last line wins for key look-ups).
    strict
        When ``False``, a scan that meets damaged framing skips over the damage
        (the resync rule), keeps every intact record, and stores the first fault
        in ``damage`` instead of raising.
    storage_options
        For a URL: fsspec options (credentials, endpoint), which win over the
        environment.
    cache_dir
        For a URL: a local folder (or :class:`~mxrec.storage.block_cache.BlockCache`)
        that keeps fetched blocks (default ``$MXREC_CACHE_DIR``; none when unset).
    size, version
        For a URL: the file's size and version when the caller knows them,
        which saves the request that asks for them.
    checksums
        The file's checksums (:mod:`mxrec.format.checksums`), checked as
        records are read; ``None`` (default): its sidecar ``NAME.checksums`` if
        there is one; ``True``: the sidecar is required; ``False``: none.

    Returns
    -------
    Records
        The file's reader.

    Raises
    ------
    RecordFormatError
        The framing is damaged (with ``strict=True``).
    IndexFileError
        The ``.idx`` is malformed, disagrees with the ``.rec``, or is missing
        with ``index=True``.
    OptionError
        ``duplicates`` is neither ``"error"`` nor ``"last"``.
    ChecksumError
        The checksums are malformed or belong to another version of the file.
    """
    if isinstance(path, str) and is_url(path):
        return RemoteRecordReader(path, index, key_type, duplicates=duplicates, strict=strict,
                                  storage_options=storage_options, cache_dir=cache_dir, size=size, version=version,
                                  checksums=checksums)
    return LocalRecordReader(path, index, key_type, duplicates=duplicates, strict=strict, checksums=checksums,
                             storage=storage_options)


def open_sequential(path: str | os.PathLike) -> RecordStream | mmap.mmap | bytes:
    """What a reader that walks ``path`` from its first record to its last reads: a local file's bytes, memory-mapped,
    or a :class:`~mxrec.io.stream.RecordStream` over a URL (read ahead in large ranges).

    Parameters
    ----------
    path
        The ``.rec`` file or URL.

    Returns
    -------
    RecordStream | mmap.mmap | bytes
        The stream, or the mapped bytes (release them with :func:`mxrec.storage.memory_map.release`).

    Raises
    ------
    FileNotFoundError
        There is no such file (a missing remote file fails here too, not at its first read).
    """
    path = os.fspath(path)
    if is_url(path):
        stream = RecordStream(path)
        stream.file.stat()
        return stream
    return map_file(local_path(path))
