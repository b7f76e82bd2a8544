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
files with one key into one sample. Members are written as ustar headers with mtime
0, owner root and mode 0444 (:func:`member_header`), so the same records give
the same bytes.

Tars written by other tools convert too: the first non-``json``/``cls``
member is the payload, the label comes from ``cls`` or the JSON's ``label``
(or ``cls``); the key and id are then the sample's position.
"""

from __future__ import annotations

import json
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


_HEADER = bytearray(_BLOCK)  # a ustar member header: mode 0444, owner root (0), mtime 0; name and size filled in
for _at, _text in ((100, b"0000444\0"), (108, b"0000000\0"), (116, b"0000000\0"), (136, b"00000000000\0"),
                   (156, b"0"), (257, b"ustar\x0000"), (265, b"root"), (297, b"root")):
    _HEADER[_at:_at + len(_text)] = _text
_CHECKSUM_SPACES = 8 * 32  # the checksum field counts as eight spaces
_MODE_TO_SIZE = bytes(_HEADER[100:124])  # the fixed fields between the name and the size
_MTIME = bytes(_HEADER[136:148])
_TYPE_TO_END = bytes(_HEADER[156:])
_FIXED_SUM = sum(_HEADER) + _CHECKSUM_SPACES  # the name and size fields are zeros in the template


def member_header(name: str, size: int) -> bytes:
    """The 512-byte tar header of a regular file ``name`` of ``size`` bytes (ustar; GNU long names past 100 bytes)."""
    encoded = name.encode()
    if len(encoded) > 100:
        info = tarfile.TarInfo(name)
        info.size, info.mtime, info.mode, info.uname, info.gname = size, 0, 0o444, "root", "root"
        return info.tobuf(tarfile.GNU_FORMAT, "utf-8", "surrogateescape")
    size_field = b"%011o\0" % size
    checksum = b"%06o\0 " % (_FIXED_SUM + sum(encoded) + sum(size_field))
    return b"".join((encoded, bytes(100 - len(encoded)), _MODE_TO_SIZE, size_field, _MTIME, checksum, _TYPE_TO_END))


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


def _octal(field: bytes, where: str, offset: int) -> int:
    if field[:1] and field[0] & 0x80:  # GNU base-256 for sizes past 8 GiB
        return int.from_bytes(field[1:], "big")
    text = field.split(b"\0", 1)[0].strip()
    try:
        return int(text, 8) if text else 0
    except ValueError:
        raise RecordFormatError(where, offset, f"tar header with a bad number field {field!r}") from None


def _pax_path(data: bytes) -> str | None:
    """The ``path`` of a pax extended header (``LENGTH path=VALUE\n`` records)."""
    at = 0
    while at < len(data):
        length_text, _, _ = data[at:at + 20].partition(b" ")
        length = int(length_text)
        record = data[at:at + length]
        key, _, value = record[len(length_text) + 1:-1].partition(b"=")
        if key == b"path":
            return value.decode("utf-8", "surrogateescape")
        at += length
    return None


def iter_members(stream: IO[bytes] | BufferStream, where: str) -> Iterator[tuple[str, bytes | memoryview]]:
    """``(name, data)`` of each regular file of a tar stream, in order: ustar, GNU long names and pax paths, read
    block by block (the standard library's stream mode spends more time per member than the copy). From a
    :class:`~mxrec.interop.sets.BufferStream` the data are views of the mapped file."""
    offset = 0
    long_name: str | None = None
    while True:
        header = bytes(stream.read(_BLOCK))
        if len(header) < _BLOCK:
            if header:
                raise TruncatedRecordError(where, offset, "the tar file ends inside a member header")
            return
        if header.count(0) == _BLOCK:  # the end-of-archive marker
            return
        stored = _octal(header[148:156], where, offset)
        if stored != sum(header) - sum(header[148:156]) + _CHECKSUM_SPACES:
            raise RecordFormatError(where, offset, "bad tar header checksum (not a tar file, or damaged)")
        size = _octal(header[124:136], where, offset)
        kind = header[156:157]
        data = stream.read(size)
        if len(data) < size:
            raise TruncatedRecordError(where, offset, f"the tar file ends inside a {size}-byte member")
        stream.read(-size % _BLOCK)
        offset += _BLOCK + size + (-size % _BLOCK)
        if kind == b"L":
            long_name = bytes(data).split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
        elif kind == b"x":
            long_name = _pax_path(bytes(data)) or long_name
        elif kind in (b"0", b"\0", b"7"):
            name = long_name
            if name is None:
                name = header[0:100].split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
                prefix = header[345:500].split(b"\0", 1)[0] if header[257:262] == b"ustar" else b""
                if prefix:
                    name = prefix.decode("utf-8", "surrogateescape") + "/" + name
            long_name = None
            yield name, data
        else:  # folders, links, global pax headers: no sample data
            long_name = None


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
