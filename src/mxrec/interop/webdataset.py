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

The tar framing is the standard library's :mod:`tarfile`, but for the two
per-member steps it is too slow for: the fixed fields of every member header
(mtime 0, owner root, mode 0444, so the same records give the same bytes) come
from one :meth:`tarfile.TarInfo.tobuf`, and :func:`member_header` fills in
the name, the size and the checksum (the bytes ``tobuf`` gives, tested); a
name past ustar's 100 bytes is ``tobuf``'s own GNU header. Samples' headers
and data go out in one ``writev`` per :data:`WRITE_BLOCK` bytes, the payloads not copied. Reading,
:func:`iter_members` parses a plain regular-file header itself (ustar or GNU
magic, octal size, checksum checked) and hands every other one to
:class:`tarfile.TarFile` (GNU long names, pax, sparse files, folders, links,
damage); data are views of the mapped file. Measured with
``benchmarks/bench_convert.py`` (1500 photos, 100 MB, best of 5, the same
run): ``tobuf`` for every header and ``TarFile`` for every member took
``.rec -> webdataset`` from 973-1004 to 512-584 MB/s (-45%) and
``webdataset -> .rec`` from 655-696 to 449-498 MB/s (-30%); this split runs
at 913-998 and 671-708 MB/s (``TarInfo.tobuf`` and ``frombuf`` cost about
35 us a header here, three headers a sample of 66 KB).

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
from mxrec.interop.formats import BufferStream, Format
from mxrec.interop.record import Payload, Record, foreign_record
from mxrec.io.writer import write_all
from mxrec.storage.write_behind import WriteBehind

# reading and writing need only the standard library; the extra brings the library the tars are made for
FORMAT = Format(name="webdataset", title="WebDataset", module=__name__, suffixes=(".tar",), extra="webdataset",
                loading='`wds.WebDataset(sorted(glob("DIR/*.tar")), shardshuffle=100)`')
_to_json = json.JSONEncoder(separators=(",", ":")).encode  # made once: json.dumps makes one a call
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_-]{1,80}")
_BLOCK = tarfile.BLOCKSIZE
WRITE_BLOCK = 8 << 20  # payload bytes per writev (views of the source held until then): 64 KB writes are slow


_MTIME, _MODE, _OWNER = 0, 0o444, "root"  # fixed, so the same records give the same bytes


def _tar_info(name: str, size: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode, info.uname, info.gname = size, _MTIME, _MODE, _OWNER, _OWNER
    return info


# The ustar header every member shares, made by tarfile with an empty name and size 0; a member fills in those
# two fields and the checksum (the field counts as eight spaces), giving the bytes TarInfo.tobuf gives.
_TEMPLATE = _tar_info("", 0).tobuf(tarfile.USTAR_FORMAT, "utf-8", "surrogateescape")
_NAME, _SIZE, _CHECKSUM = slice(0, 100), slice(124, 136), slice(148, 156)
_MIDDLE, _AFTER_SIZE, _AFTER_CHECKSUM = _TEMPLATE[100:124], _TEMPLATE[136:148], _TEMPLATE[156:]
_FIXED_SUM = sum(_TEMPLATE) - sum(_TEMPLATE[_CHECKSUM]) + 8 * 32 - sum(_TEMPLATE[_SIZE])


def member_header(name: str, size: int) -> bytes:
    """The tar header of a regular file ``name`` of ``size`` bytes, as :meth:`tarfile.TarInfo.tobuf` writes it:
    ustar, or GNU (a long-name header first, made by tarfile) past ustar's 100-byte name field."""
    encoded = name.encode("utf-8", "surrogateescape")
    if len(encoded) > 100:
        return _tar_info(name, size).tobuf(tarfile.GNU_FORMAT, "utf-8", "surrogateescape")
    size_field = b"%011o\0" % size
    checksum = b"%06o\0 " % (_FIXED_SUM + sum(encoded) + sum(size_field))
    return b"".join((encoded, bytes(100 - len(encoded)), _MIDDLE, size_field, _AFTER_SIZE, checksum,
                     _AFTER_CHECKSUM))


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
        self.file = open(path, "wb", buffering=0)  # samples go out in blocks: one writev, payloads not copied
        self.behind = WriteBehind()  # the writev of one block while the next is framed
        self.used: set[str] = set()
        self.count = 0
        self.chunks: list[Any] = []
        self.pending = 0

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
        meta = _to_json(sample_json(record)).encode()
        tail += (member_header(f"{name}.json", len(meta)), meta, _padding(len(meta)))
        self.chunks += (member_header(f"{name}.{payload.extension}", len(data)), data, b"".join(tail))
        self.pending += len(data)
        if self.pending >= WRITE_BLOCK:
            self._write_pending()

    def _write_pending(self) -> None:
        self.behind.submit(write_all, self.file, self.chunks)
        self.chunks, self.pending = [], 0

    def close(self) -> None:
        self.chunks.append(bytes(2 * _BLOCK))  # the end-of-archive marker
        self._write_pending()
        self.behind.finish(self.file)

    def abort(self) -> None:
        self.behind.abandon(self.file)


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


def _plain_member(header: bytes) -> tuple[str, int] | None:
    """``(name, size)`` of a plain regular-file header (ustar or GNU magic, an octal size, a sound checksum),
    else ``None``: :mod:`tarfile` reads that one."""
    if header[100:124] == _MIDDLE and header[136:148] == _AFTER_SIZE and header[156:] == _AFTER_CHECKSUM:
        # as member_header writes them (all but the name, size and checksum are the template's): sum only those,
        # the name field being the name then zeros
        name, size = header[:100].rstrip(b"\0"), header[124:136]
        try:
            if b"\0" not in name and int(header[148:154], 8) == _FIXED_SUM + sum(name) + sum(size):
                return name.decode("utf-8", "surrogateescape"), int(size[:11], 8)
        except ValueError:  # not octal digits: damaged
            return None
    if header[156] not in b"0\0" or header[257:262] != b"ustar" or header[124] & 0x80:
        return None
    try:
        stored, size = int(header[_CHECKSUM].split(b"\0", 1)[0], 8), int(header[_SIZE].split(b"\0", 1)[0], 8)
    except ValueError:
        return None
    if stored != sum(header) - sum(header[_CHECKSUM]) + 8 * 32:
        return None
    name = header[_NAME].split(b"\0", 1)[0]
    prefix = header[345:500].split(b"\0", 1)[0] if header[257:263] == b"ustar\0" else b""
    return (prefix + b"/" + name if prefix else name).decode("utf-8", "surrogateescape"), size


def iter_members(stream: IO[bytes] | BufferStream, where: str) -> Iterator[tuple[str, bytes | memoryview]]:
    """``(name, data)`` of each regular file of a tar file, in order. From a
    :class:`~mxrec.interop.sets.BufferStream` the data are views of the mapped file; ``stream`` may also be any
    seekable binary file. A plain regular-file header (what WebDataset writers write) is read here (see the
    module docstring for why); every other one (GNU long names, pax, sparse files, folders, links, damage)
    by :mod:`tarfile`. Damage is a :class:`~mxrec.errors.RecordFormatError` naming ``where`` and the byte
    offset, not a silent end (:mod:`tarfile` stops quietly at a bad header after the first)."""
    mapped = stream if isinstance(stream, BufferStream) else None
    view = mapped.view if mapped is not None else None
    fileobj: Any = _MappedTar(view) if view is not None else stream
    size = _size(fileobj)
    offset = 0
    while offset < size:
        if view is not None:
            header = bytes(view[offset:offset + _BLOCK])
        else:
            fileobj.seek(offset)
            header = fileobj.read(_BLOCK)
        plain = _plain_member(header) if len(header) == _BLOCK else None
        if plain is None:
            if header.count(0) == _BLOCK:  # the end-of-archive marker
                return
            member, offset = _tarfile_member(fileobj, offset, view is not None, where)
            if member is not None:
                yield member
            continue
        name, length = plain
        start = offset + _BLOCK
        offset = start + length + (-length % _BLOCK)
        if mapped is not None:
            mapped.map_ahead(offset)
            data: bytes | memoryview = mapped.view[start:start + length]
        else:
            fileobj.seek(start)
            data = fileobj.read(length)
        if len(data) < length:
            raise TruncatedRecordError(where, f"the tar file ends inside a {length}-byte member", offset=start - _BLOCK)
        yield name, data


def _tarfile_member(fileobj: Any, offset: int, mapped: bool,
                    where: str) -> tuple[tuple[str, bytes | memoryview] | None, int]:
    """The member whose header(s) start at ``offset``, read by :mod:`tarfile`, and where the next one starts:
    ``(None, next)`` for a member that is no file (a folder, a link, a global pax header)."""
    fileobj.seek(offset)
    try:
        tar = tarfile.TarFile(fileobj=fileobj, encoding="utf-8", errors="surrogateescape")
    except tarfile.ReadError as exc:  # a damaged first header
        raise RecordFormatError(where, f"not a tar file, or damaged ({exc})", offset=offset) from None
    member = tar.firstmember
    if member is None:
        raise _damage(fileobj, offset, where)
    if not member.isfile():
        return None, tar.offset
    if mapped and not member.issparse():
        data: bytes | memoryview = fileobj.view[member.offset_data:member.offset_data + member.size]
    else:
        try:
            data = tar.extractfile(member).read()  # type: ignore[union-attr]
        except tarfile.ReadError:
            data = b""
    if len(data) < member.size:
        raise TruncatedRecordError(where, f"the tar file ends inside a {member.size}-byte member", offset=member.offset)
    return (member.name, data), tar.offset


def _damage(fileobj: Any, offset: int, where: str) -> RecordFormatError:
    """Why :mod:`tarfile` found no member at ``offset`` (past the first header it ends quietly there, and the
    rest of the file would be lost): a cut header, or what :meth:`tarfile.TarInfo.frombuf` finds wrong."""
    fileobj.seek(offset)
    header = fileobj.read(_BLOCK)
    if len(header) < _BLOCK:
        return TruncatedRecordError(where, "the tar file ends inside a member header", offset=offset)
    try:
        tarfile.TarInfo.frombuf(header, "utf-8", "surrogateescape")
        reason = "a member header tarfile cannot follow"
    except tarfile.HeaderError as exc:
        reason = str(exc)
    return RecordFormatError(where, f"bad tar header ({reason}): damaged, or not a tar file", offset=offset)


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


def count_records(stream: IO[bytes] | BufferStream, where: str) -> int:
    """Samples of one ``.tar`` shard (its member headers walked, the payloads not read)."""
    return sum(1 for _ in _samples(stream, where))


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
