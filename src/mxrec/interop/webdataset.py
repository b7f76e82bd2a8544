"""WebDataset: ``.tar`` shards, one sample per record, as the ``webdataset`` library reads them.

A sample is ``KEY.EXT`` (the payload under its real extension from the
signature table: ``jpg``, ``png``, ... or ``bin``), ``KEY.cls`` (the class,
when the label is a whole non-negative number) and ``KEY.json`` with the
record's ``key`` (the ``.idx`` key), ``id``, ``id2``, ``flag`` and ``label``
(a number, or the list of ``flag`` labels; ``header_label`` when the header's
own label is not 0 beside them; ``irheader`` the header bytes in hex where a
label is not a finite number; ``raw: true`` for a record without IRHeader).
``KEY`` is the record's key where it is a plain name (letters, digits, ``_``,
``-``) not used before in the shard, else ``rNNNNNNNNN`` by position: the
``webdataset`` library splits names at the first dot and joins neighbouring
files with one key into one sample.

The tar framing is the standard library's :mod:`tarfile`: each member header is
a :meth:`tarfile.TarInfo.tobuf` (ustar; a GNU long-name header past 100 bytes)
with mtime 0, owner root (0) and mode 0444, so the same records give the same
bytes; a sample's headers and data then go out in one ``writev``, without
copying the payload into a buffer. Reading, :class:`tarfile.TarFile` parses
every header (checksums, GNU long names, pax paths) over the mapped file, and
each member's data is a view of the mapping (no copy).

Tars written by other tools convert too: the first non-``json``/``cls``
member is the payload, the label comes from ``cls`` or the JSON's ``label``
(or ``cls``); the key and id are then the sample's position.
"""

from __future__ import annotations

import json
import os
import re
import tarfile
from collections.abc import Iterator
from typing import IO, Any

from mxrec.errors import RecordFormatError, TruncatedRecordError
from mxrec.interop.record import Payload, Record, foreign_record
from mxrec.interop.sets import BufferStream
from mxrec.io.writer import write_all

FORMAT = "webdataset"
SUFFIX = ".tar"
EXTRA = "webdataset"  # reading and writing need only the standard library; the extra brings the reader to test with
INDEX_SUFFIX = ""  # no index file beside a shard
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_-]{1,80}")
_BLOCK = tarfile.BLOCKSIZE


_MTIME, _MODE, _OWNER = 0, 0o444, "root"  # fixed, so the same records give the same bytes


def member_header(name: str, size: int) -> bytes:
    """The tar header of a regular file ``name`` of ``size`` bytes, from :meth:`tarfile.TarInfo.tobuf`: ustar, or
    GNU (a long-name header first) past ustar's 100-byte name field."""
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode, info.uname, info.gname = size, _MTIME, _MODE, _OWNER, _OWNER
    fmt = tarfile.USTAR_FORMAT if len(name.encode("utf-8", "surrogateescape")) <= 100 else tarfile.GNU_FORMAT
    return info.tobuf(fmt, "utf-8", "surrogateescape")


def _padding(size: int) -> bytes:
    return bytes(-size % _BLOCK)


def sample_json(record: Record) -> dict[str, Any]:
    """The ``KEY.json`` of a record (see the module docstring)."""
    if record.raw:
        return {"key": record.key, "raw": True}
    out: dict[str, Any] = {"key": record.key, "id": record.id, "id2": record.id2, "flag": record.flag}
    if record.flag:
        out["label"] = record.label_values()
        if record.label != 0.0 or str(record.label) == "-0.0":
            out["header_label"] = record.label
    else:
        out["label"] = record.label
    head = record.verbatim_head()
    if head is not None:
        out["irheader"] = head.hex()
    return out


class Writer:
    """Write records as samples of one ``.tar`` file at ``path`` (a local file; staging is the caller's)."""

    def __init__(self, path: str, class_names: dict[int, str] | None = None) -> None:
        self.file = open(path, "wb", buffering=0)  # a sample is one writev: headers, payload, the rest
        self.used: set[str] = set()
        self.count = 0

    def write(self, record: Record, payload: Payload) -> None:
        name = record.key if record.key not in self.used and _PLAIN_NAME.fullmatch(record.key) else \
            f"r{self.count:09d}"
        self.used.add(name)
        self.count += 1
        data = record.data
        tail = [_padding(len(data))]
        label = record.class_label
        if label >= 0:
            text = str(label).encode()
            tail += (member_header(f"{name}.cls", len(text)), text, _padding(len(text)))
        meta = json.dumps(sample_json(record), separators=(",", ":")).encode()
        tail += (member_header(f"{name}.json", len(meta)), meta, _padding(len(meta)))
        write_all(self.file, [member_header(f"{name}.{payload.extension}", len(data)), data, b"".join(tail)])

    def close(self) -> None:
        write_all(self.file, [bytes(2 * _BLOCK)])  # the end-of-archive marker
        self.file.close()

    def abort(self) -> None:
        self.file.close()


def _split(name: str) -> tuple[str, str]:
    """``(key, extension)`` as the ``webdataset`` library splits a member name (at the basename's first dot)."""
    folder, _, base = name.rpartition("/")
    stem, dot, ext = base.partition(".")
    return (f"{folder}/{stem}" if folder else stem), (ext if dot else "")


class _MappedTar:
    """A mapped file as :class:`tarfile.TarFile` reads it (``read`` gives bytes: only headers are read this way)."""

    def __init__(self, view: memoryview) -> None:
        self.view = view
        self.at = 0

    def read(self, size: int = -1) -> bytes:
        end = len(self.view) if size < 0 else min(self.at + size, len(self.view))
        out = bytes(self.view[self.at:end])
        self.at = end
        return out

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        self.at = offset + (0 if whence == os.SEEK_SET else self.at if whence == os.SEEK_CUR else len(self.view))
        return self.at

    def tell(self) -> int:
        return self.at


def _size(fileobj: Any) -> int:
    at = fileobj.tell()
    end = fileobj.seek(0, os.SEEK_END)
    fileobj.seek(at)
    return end


def iter_members(stream: IO[bytes] | BufferStream, where: str) -> Iterator[tuple[str, bytes | memoryview]]:
    """``(name, data)`` of each regular file of a tar file, in order, as :mod:`tarfile` reads it (ustar, GNU and
    pax). From a :class:`~mxrec.interop.sets.BufferStream` the data are views of the mapped file; ``stream`` may
    also be any seekable binary file. Damage is a :class:`~mxrec.errors.RecordFormatError` naming ``where`` and
    the byte offset, not a silent end (:mod:`tarfile` stops quietly at a bad header after the first)."""
    view = stream.view if isinstance(stream, BufferStream) else None
    fileobj: Any = _MappedTar(view) if view is not None else stream
    size = _size(fileobj)
    if size == 0:
        return
    try:
        tar = tarfile.open(fileobj=fileobj, mode="r:", encoding="utf-8", errors="surrogateescape")
    except tarfile.ReadError as exc:
        raise RecordFormatError(where, 0, f"not a tar file, or damaged ({exc})") from None
    while True:
        try:
            info = tar.next()
        except tarfile.ReadError as exc:  # a member's data runs past the end of the file
            raise TruncatedRecordError(where, tar.offset, f"the tar file ends inside a member ({exc})") from None
        tar.members.clear()  # TarFile keeps every member it has read; a shard can hold millions
        if info is None:
            break
        if not info.isfile():  # folders, links: no sample data
            continue
        if view is not None and not info.issparse():
            data: bytes | memoryview = view[info.offset_data:info.offset_data + info.size]
        else:
            try:
                data = tar.extractfile(info).read()  # type: ignore[union-attr]
            except tarfile.ReadError:
                data = b""  # short: reported below
        if len(data) < info.size:
            raise TruncatedRecordError(where, info.offset, f"the tar file ends inside a {info.size}-byte member")
        yield info.name, data
    _check_end(fileobj, tar.offset, size, where)


def _check_end(fileobj: Any, offset: int, size: int, where: str) -> None:
    """:mod:`tarfile` ends quietly at the first header it cannot parse: past the last member there must be
    nothing, or the end-of-archive marker (zero blocks)."""
    fileobj.seek(offset)
    rest = fileobj.read(_BLOCK)
    if not rest or rest.count(0) == len(rest) == _BLOCK:
        return
    if len(rest) < _BLOCK:
        raise TruncatedRecordError(where, offset, "the tar file ends inside a member header")
    try:
        tarfile.TarInfo.frombuf(rest, "utf-8", "surrogateescape")
        reason = "a member header tarfile cannot follow"
    except tarfile.HeaderError as exc:
        reason = str(exc)
    raise RecordFormatError(where, offset, f"bad tar header ({reason}): damaged, or not a tar file")


def _samples(stream: IO[bytes], where: str) -> Iterator[tuple[str, dict[str, bytes]]]:
    current: str | None = None
    files: dict[str, bytes] = {}
    for name, data in iter_members(stream, where):
        key, ext = _split(name)
        if key != current or ext in files:
            if files:
                yield current, files  # type: ignore[misc]
            current, files = key, {}
        files[ext] = data
    if files:
        yield current, files  # type: ignore[misc]


def read_records(stream: IO[bytes] | BufferStream, where: str) -> Iterator[Record]:
    """The records of one ``.tar`` shard read from ``stream`` (``key`` is ``None`` for samples of other tools)."""
    for _name, files in _samples(stream, where):
        meta = json.loads(bytes(files["json"])) if "json" in files else {}
        payload_ext = next((e for e in files if e not in ("json", "cls")), None)
        data = files.get(payload_ext, b"") if payload_ext is not None else b""
        if isinstance(meta, dict) and "key" in meta and ("flag" in meta or meta.get("raw")):
            flag = int(meta.get("flag", 0))
            yield Record.from_fields(
                str(meta["key"]), data, raw=bool(meta.get("raw")), flag=flag,
                label=meta.get("header_label", 0.0) if flag else meta.get("label", 0.0),
                id=meta.get("id", 0), id2=meta.get("id2", 0), labels=meta.get("label") if flag else None,
                head=bytes.fromhex(meta["irheader"]) if "irheader" in meta else None)
            continue
        label: Any = meta.get("label", meta.get("cls")) if isinstance(meta, dict) else None
        if "cls" in files:
            label = int(bytes(files["cls"]).decode().strip())
        yield foreign_record(data, label)
