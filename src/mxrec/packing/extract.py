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
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from mxrec.datasets.face_set import read_face_set
from mxrec.datasets.shard_set import open_dataset
from mxrec.errors import HeaderError, IndexFileError, RecordFormatError, UnsafePathError
from mxrec.format.header import IRHeader, label_array, unpack_header
from mxrec.format.idx import KeyType
from mxrec.format.lst import ListEntry, check_list_path
from mxrec.format.manifest import MANIFEST_SUFFIX
from mxrec.image.signatures import image_extension
from mxrec.io.lists import write_list
from mxrec.storage.filesystem import basename, filesystem, is_url, join, remote_error

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


def extract_records(rec_path: str | os.PathLike, out_dir: str | os.PathLike, *,
                    idx_path: str | os.PathLike | None = None, key_type: KeyType = int, flat: bool = False,
                    label_names: dict[int, str] | None = None, layout: str = "auto",
                    progress: Callable[[int, int], None] | None = None) -> ExtractResult:
    """Write every record of ``rec_path`` as a file under ``out_dir``, plus ``out_dir/<name>.lst``.

    A record that cannot be read (damaged framing under its ``.idx`` offset)
    or is too short for its ``IRHeader`` is skipped and listed in
    :attr:`ExtractResult.skipped`; without an ``.idx``, damaged framing is
    stepped over and named in :attr:`ExtractResult.damage`. ``progress(done,
    total)`` is called after each record; the ``.lst`` is written last, so an
    interrupted extraction leaves image files but no ``.lst``.
    """
    out_dir = os.fspath(out_dir)
    if is_url(out_dir):
        with tempfile.TemporaryDirectory(prefix="mxrec-extract-", dir=os.environ.get("MXREC_SPOOL_DIR")) as local:
            result = extract_records(rec_path, local, idx_path=idx_path, key_type=key_type, flat=flat,
                                     label_names=label_names, layout=layout, progress=progress)
            upload_folder(local, out_dir, last=result.lst_path)
        result.out_dir = out_dir
        result.lst_path = join(out_dir, os.path.basename(result.lst_path))
        return result
    os.makedirs(out_dir, exist_ok=True)
    real_root = os.path.realpath(out_dir)
    stem = dataset_stem(rec_path)
    result = ExtractResult(out_dir, os.path.join(out_dir, f"{stem}.lst"))
    if not _inside(real_root, result.lst_path):  # output goes through symbolic links: this one must stay inside
        raise UnsafePathError(f"{result.lst_path!r} leads outside the output folder {real_root!r}")
    entries: list[ListEntry] = []
    used: set[str] = set()
    with open_dataset(rec_path, index=idx_path, key_type=key_type, strict=False) as reader:
        result.damage = None if reader.damage is None else str(reader.damage)
        faces = read_face_set(reader, layout)
        positions = range(len(reader)) if faces is None else faces.positions.tolist()
        for done, position in enumerate(positions, 1):
            try:
                record = reader[position]
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


def dataset_stem(spec: object) -> str:
    """A name for a dataset: ``train`` for ``train.rec``, for ``train.manifest.json``, for ``[train_0.rec, ...]``."""
    first = os.fspath(spec if isinstance(spec, (str, os.PathLike)) else next(iter(spec)))  # type: ignore[call-overload]
    name = basename(first.rstrip("/"))
    if name.endswith(MANIFEST_SUFFIX):
        return name[:-len(MANIFEST_SUFFIX)]
    return os.path.splitext(name)[0] or "dataset"


def upload_folder(local: str, url: str, last: str | None = None) -> None:
    """Upload every file under ``local`` to the folder ``url``, ``last`` (a file among them) after all the others."""
    fs, base = filesystem(url)
    files = sorted(os.path.join(d, n) for d, _, names in os.walk(local) for n in names)
    if last is not None:
        files = [f for f in files if f != last] + [last]
    for path in files:
        target = base.rstrip("/") + "/" + os.path.relpath(path, local).replace(os.sep, "/")
        try:
            fs.put_file(path, target)
        except Exception as exc:
            raise remote_error(join(url, os.path.relpath(path, local)), exc, "upload") from None
