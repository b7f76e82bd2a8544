"""Getting the images back out of a ``.rec``: one file per record, and a ``.lst`` that can pack them again.

For each record (in ``.idx`` order, or file order without one), the bytes
after its ``IRHeader`` are written unchanged to a file named after the
record id, with the extension of the image format they hold (``.jpg``,
``.png``, ``.gif``, ``.bmp``, ``.tif``, ``.webp``; ``.bin`` when they are not a
known image). Layout in ``OUT_DIR``:

* by default, ``<label>/<id>.<ext>`` for records with one (scalar) label; the
  folder is the label as a number (``3``, ``0.5``) or, given label names (a
  ``.labels`` file from :mod:`mxrec.packing.make_lists`), the label's name;
* records with a label array (``flag > 0``) and, with ``flat``, all records go
  straight into ``OUT_DIR`` as ``<id>.<ext>``.

An InsightFace face set (:func:`~mxrec.datasets.face_set.read_face_set`;
``layout`` as there) gives its faces only, each in the folder of its class
(its label, or its first label): the header and identity records hold no
image. The ``.lst`` then packs a plain dataset of the faces.

Either way ``OUT_DIR/<name>.lst`` lists every file written, in record order,
with the record id as index and the record's label(s) (in full where six
decimals would lose float32 precision): packing it again with
``mxrec pack --pass-through`` (and ``--pack-label`` for label arrays) gives
the same records. When two records share an id, the later file is named
``<id>_<position>.<ext>`` (the ``.lst`` then repeats the index, which
``mxrec pack`` refuses: such a dataset has no unique keys to rebuild).

Nothing is ever written outside ``OUT_DIR``: file names are made from numbers
only, label names are checked part by part (no ``..``, no absolute paths),
every folder is checked after it is made (a symbolic link in ``OUT_DIR``
pointing elsewhere is refused), and files are opened without following
symbolic links.

The input may be anything :func:`mxrec.datasets.shard_set.open_dataset` opens (a URL,
a shard set; read front to back in large reads). ``OUT_DIR`` may be a URL:
the files are written to a local temporary folder and uploaded, the ``.lst``
last, so a listed set is a complete one.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from mxrec.datasets.face_set import read_face_set
from mxrec.datasets.mixture import MIX_SUFFIX, Mixture
from mxrec.datasets.opening import DatasetSpec, hold_dataset
from mxrec.datasets.shard_set import ShardSetReader
from mxrec.errors import HeaderError, IndexFileError, RecordFormatError, UnsafePathError
from mxrec.format.header import IRHeader, label_array, unpack_header
from mxrec.format.idx import KeyType
from mxrec.format.lst import ListEntry, check_list_path
from mxrec.format.manifest import MANIFEST_SUFFIX
from mxrec.image.signatures import image_extension
from mxrec.io.lists import write_list
from mxrec.io.records import Records
from mxrec.storage.files import spooled_folder
from mxrec.storage.filesystem import basename, check_writable, join

UNKNOWN_EXTENSION = ".bin"


def label_folder(label: float, label_names: dict[int, str] | None = None) -> str:
    """The folder (relative to ``OUT_DIR``) for records with scalar ``label``."""
    value = float(np.float32(label))
    if label_names and value.is_integer() and int(value) in label_names:
        name = label_names[int(value)]
        parts = name.replace("\\", "/").split("/")
        if os.path.isabs(name) or any(part in ("", ".", "..") or "\0" in part for part in parts) \
                or check_list_path(name) is not None:
            raise UnsafePathError(f"label {int(value)}: name {name!r} cannot be a folder inside the output")
        return os.path.join(*parts)
    if value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    return str(np.float32(label))  # shortest text of the float32 value: 0.1, -1e+30, nan, inf


@dataclass
class ExtractResult:
    """What :func:`extract_records` wrote, and what it could not."""

    out_dir: str
    lst_path: str
    files: int = 0
    skipped: list[tuple[int, object, str]] = field(default_factory=list)  # (position, key, reason)
    damage: str | None = None  # damaged framing stepped over while scanning a file without .idx

    @property
    def complete(self) -> bool:
        """Whether every record came out (nothing skipped, no damage stepped over)."""
        return not self.skipped and self.damage is None


def _inside(real_root: str, path: str) -> bool:
    real = os.path.realpath(path)
    return real == real_root or real.startswith(real_root.rstrip(os.sep) + os.sep)


def _write_file(real_root: str, relpath: str, data: bytes | memoryview) -> None:
    """Write ``data`` to ``real_root/relpath``, refusing any route that leaves ``real_root``."""
    target = os.path.join(real_root, relpath)
    folder = os.path.dirname(target)
    if not _inside(real_root, target) or not _inside(real_root, folder):
        raise UnsafePathError(f"{relpath!r} leads outside the output folder {real_root!r}")
    os.makedirs(folder, exist_ok=True)
    if not _inside(real_root, folder):
        raise UnsafePathError(f"folder {folder!r} leads outside the output folder {real_root!r}")
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    fd = os.open(target, flags, 0o644)
    with open(fd, "wb") as f:
        f.write(data)


def _labels(header: IRHeader) -> tuple[float, ...]:
    return tuple(float(v) for v in label_array(header))


def extract_records(rec_path: DatasetSpec, out_dir: str | os.PathLike, *,
                    idx_path: str | os.PathLike | None = None, key_type: KeyType = int, flat: bool = False,
                    label_names: dict[int, str] | None = None, layout: str = "auto",
                    progress: Callable[[int, int], None] | None = None) -> ExtractResult:
    """Write every record of ``rec_path`` as a file under ``out_dir``, plus ``out_dir/<name>.lst``.

    The layout of ``out_dir`` and the ``.lst`` are in the module doc. A record
    that cannot be read (damaged framing under its ``.idx`` offset) or is too
    short for its ``IRHeader`` is skipped and listed in
    :attr:`ExtractResult.skipped`; without an ``.idx``, damaged framing is
    stepped over and named in :attr:`ExtractResult.damage`. The ``.lst`` is
    written last, so an interrupted extraction leaves image files but no
    ``.lst``.

    Parameters
    ----------
    rec_path
        The dataset (a path, URL, shard set or mixture file), or a dataset already opened (read as it is, left
        open; a mixture's records once each, labels moved by its label offsets).
    out_dir
        The folder to write into (a path or URL; a URL is filled from a local
        spool folder, the ``.lst`` uploaded last).
    idx_path
        The ``.idx``; default: the one beside the ``.rec``.
    key_type
        Converts ``.idx`` keys (``int`` or ``str``).
    flat
        Write every file straight into ``out_dir``, without label folders.
    label_names
        ``{class id: name}`` (a ``.labels`` file): label folders are named, not
        numbered.
    layout
        ``"auto"``, ``"insightface"`` or ``"plain"``, as
        :func:`~mxrec.datasets.face_set.read_face_set`'s.
    progress
        Called as ``progress(done, total)`` after each record.

    Returns
    -------
    ExtractResult
        How many files were written, the ``.lst``, the records skipped and any damage.

    Raises
    ------
    UnsafePathError
        A file would land outside ``out_dir`` (through a symbolic link).
    """
    out_dir = os.fspath(out_dir)
    check_writable(out_dir)
    with spooled_folder(out_dir) as folder:  # a URL is written locally, then uploaded, the .lst last
        result = _extract(rec_path, folder.path, idx_path, key_type, flat, label_names, layout, progress)
        folder.last = result.lst_path
    result.out_dir = out_dir
    result.lst_path = join(out_dir, os.path.basename(result.lst_path))
    return result


def _extract(rec_path: str | os.PathLike, out_dir: str, idx_path: str | os.PathLike | None, key_type: KeyType,
             flat: bool, label_names: dict[int, str] | None, layout: str,
             progress: Callable[[int, int], None] | None) -> ExtractResult:
    """:func:`extract_records` into the local folder ``out_dir``."""
    stem = dataset_stem(rec_path)
    entries: list[ListEntry] = []
    used: set[str] = set()
    with hold_dataset(rec_path, idx_path, key_type, strict=False) as reader:
        if isinstance(reader, ShardSetReader) and reader.manifest is not None:
            reader.check()  # a missing or cut shard fails now, before any file is written
        os.makedirs(out_dir, exist_ok=True)
        real_root = os.path.realpath(out_dir)
        result = ExtractResult(out_dir, os.path.join(out_dir, f"{stem}.lst"))
        if not _inside(real_root, result.lst_path):  # output goes through symbolic links: this one must stay inside
            raise UnsafePathError(f"{result.lst_path!r} leads outside the output folder {real_root!r}")
        result.damage = None if reader.damage is None else str(reader.damage)
        faces = read_face_set(reader, layout)
        positions = range(len(reader)) if faces is None else faces.positions.tolist()
        for done, (position, read) in enumerate(_batched(reader, positions), 1):
            try:
                record = reader[position] if read is None else read
                header, start = unpack_header(record)
            except (HeaderError, RecordFormatError, IndexFileError) as exc:
                result.skipped.append((position, reader.keys[position], str(exc)))
            else:
                body = memoryview(record)[start:]
                name = str(header.id)
                if name in used:
                    name = f"{header.id}_{position}"
                used.add(name)
                name += image_extension(body) or UNKNOWN_EXTENSION
                label = header.label if faces is None or header.flag == 0 else float(header.label[0])
                folder = "" if flat or (header.flag > 0 and faces is None) else label_folder(label, label_names)
                relpath = os.path.join(folder, name)
                _write_file(real_root, relpath, body)
                entries.append(ListEntry(header.id, _labels(header), relpath.replace(os.sep, "/")))
                result.files = len(entries)
            if progress is not None:
                progress(done, len(positions))
    write_list(result.lst_path, entries, exact=True)
    return result


BATCH_BYTES = 16 << 20  # about this many record bytes read at once (a remote file: in a few coalesced requests)


def _batched(reader: Records, positions: Sequence[int]) -> Iterator[tuple[int, bytes | None]]:
    """``(position, record)`` for each position, read in batches of about :data:`BATCH_BYTES` (a shard set's
    batches stop at each shard's end); the record is ``None`` when its batch held a record that cannot be read
    (it is then read on its own, to say which)."""
    per_record = max(1, reader.nbytes // max(1, len(reader)))
    size = min(4096, max(16, BATCH_BYTES // per_record))
    shard_starts = {int(s) for s in reader.starts} if isinstance(reader, ShardSetReader) else set()
    chunks: list[list[int]] = [[]]
    for position in positions:
        if len(chunks[-1]) == size or (position in shard_starts and chunks[-1]):
            chunks.append([])
        chunks[-1].append(position)
    for chunk in chunks:
        try:
            records: list = reader.read_batch(chunk)
        except (RecordFormatError, IndexFileError):
            records = [None] * len(chunk)
        yield from zip(chunk, records, strict=True)


def dataset_stem(spec: object) -> str:
    """A name for a dataset: ``train`` for ``train.rec``, for ``train.manifest.json``, ``train.mix.json``, for
    ``[train_0.rec, ...]`` and for a reader of one of those (``mixture`` for :func:`~mxrec.datasets.mixture.mix`'s)."""
    if isinstance(spec, Mixture):
        return "mixture"
    if isinstance(spec, ShardSetReader):
        spec = spec.manifest or spec.shards[0].rec
    elif isinstance(spec, Records):
        spec = spec.path
    first = os.fspath(spec if isinstance(spec, (str, os.PathLike)) else next(iter(spec)))  # type: ignore[call-overload]
    name = basename(first.rstrip("/"))
    for suffix in (MANIFEST_SUFFIX, MIX_SUFFIX):
        if name.endswith(suffix):
            return name[:-len(suffix)]
    return os.path.splitext(name)[0] or "dataset"
