"""Which format a path holds, the files of a foreign shard set, and the set's manifest (``NAME.convert.json``).

A set written by ``mxrec convert`` is its data files, ``NAME_00000.tar``
(``.parquet``, ``.tfrecord``, ``.array_record``), ``NAME_00001.tar`` ..., or one
``NAME.tar`` when one file was asked for, and beside them the hidden folder
``.mxrec/`` holding what is not data: ``NAME.convert.json``, written last, and
the index files a format writes beside each shard (TFRecord's DALI indexes).
Each library's usual loading lines (``load_dataset("parquet", data_dir=...)``,
``glob("*.tfrecord*")``, ``glob("NAME_*")``) skip a hidden folder; mxrec's readers
look there::

    {"format": "webdataset", "version": 1, "records": 1200, "indexed": true, "classes": 10,
     "class_names": {"0": "cat", ...} or null, "kinds": {"jpeg": 1199, "other": 1},
     "shards": [{"path": "NAME_00000.tar", "records": 1200, "bytes": 123456789}]}

Paths in it are relative to the folder of the data (a manifest found beside the
data, as older versions wrote it, is read too). ``indexed`` says whether the
``.rec`` it came from had an ``.idx`` (converting back writes one only then). A
set without a manifest is unfinished, or was made by another tool; such sets are
read too (a file, a folder, a glob, a brace range or a list, local or at a URL).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from mxrec.datasets.shard_set import expand_braces
from mxrec.errors import ManifestError, OptionError
from mxrec.format.manifest import MANIFEST_SUFFIX, refuse_marker
from mxrec.interop.formats import RECORDIO, format_names, format_of_name, get_format, known_formats
from mxrec.storage.files import exists, glob, isdir, listdir, read_bytes
from mxrec.storage.filesystem import StorageOptions, basename, is_pattern, join, local_or_none, local_path, parent

MANIFEST = ".convert.json"
META = ".mxrec"  # the folder beside the data that holds what is not data: manifests, DALI's indexes
VERSION = 1


@dataclass
class SetManifest:
    """What ``NAME.convert.json`` says (see the module docstring)."""

    format: str
    shards: list[dict[str, Any]]
    indexed: bool = True
    class_names: dict[int, str] | None = None
    kinds: dict[str, int] = field(default_factory=dict)
    classes: int | None = None  # distinct class labels (whole scalar labels)

    @property
    def records(self) -> int:
        return sum(int(s["records"]) for s in self.shards)

    def to_json(self) -> str:
        names = None if self.class_names is None else {str(k): v for k, v in sorted(self.class_names.items())}
        return json.dumps({"format": self.format, "version": VERSION, "records": self.records,
                           "indexed": self.indexed, "classes": self.classes, "class_names": names,
                           "kinds": dict(sorted(self.kinds.items())),
                           "shards": self.shards}, indent=1) + "\n"


def parse_set_manifest(text: bytes | str, where: str) -> SetManifest:
    try:
        data = json.loads(text)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ManifestError(where, f"not a convert manifest: {exc}") from None
    refuse_marker(data, where)
    try:
        names = data.get("class_names")
        manifest = SetManifest(data["format"], list(data["shards"]), bool(data.get("indexed", True)),
                               None if names is None else {int(k): str(v) for k, v in names.items()},
                               dict(data.get("kinds", {})), data.get("classes"))
        for shard in manifest.shards:
            str(shard["path"]), int(shard["records"]), int(shard["bytes"])
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ManifestError(where, f"not a convert manifest: {exc}") from None
    if manifest.format not in known_formats:
        raise ManifestError(where, f"unknown format {manifest.format!r}")
    return manifest


def manifest_path(folder: str, stem: str) -> str:
    """Where the manifest of the set ``stem`` in ``folder`` goes: ``FOLDER/.mxrec/STEM.convert.json``."""
    return join(join(folder, META), stem + MANIFEST)


def data_folder(manifest: str) -> str:
    """The folder of the data a manifest lists (its paths are relative to it)."""
    folder = parent(manifest)
    return parent(folder) if basename(folder) == META else folder


def _manifests(folder: str, storage_options: StorageOptions) -> list[str]:
    """The manifests of the sets in ``folder`` (in ``.mxrec/``, else beside the data as older versions wrote them)."""
    meta = join(folder, META)
    found = listdir(meta, storage_options) if isdir(meta, storage_options) else []
    return [p for p in found if p.endswith(MANIFEST)] or [p for p in listdir(folder, storage_options)
                                                          if p.endswith(MANIFEST)]


def _format_of_name(name: str) -> str | None:
    if name.endswith(MANIFEST):
        return "manifest"
    if name.endswith((".rec", MANIFEST_SUFFIX)):
        return RECORDIO
    found = format_of_name(name)
    return None if found is None else found.name


def infer_format(spec: str | os.PathLike | Sequence[str | os.PathLike], storage_options: StorageOptions = None,
                 *, output: bool = False) -> str:
    """The format ``spec`` holds (an input) or names (an output); :class:`OptionError` when it is not clear."""
    if not isinstance(spec, (str, os.PathLike)):
        spec = os.fspath(next(iter(spec), ""))
    spec = os.fspath(spec)
    found = _format_of_name(spec.rstrip("/"))
    if found == "manifest":
        return parse_set_manifest(read_bytes(spec, storage_options), spec).format
    if found is not None:
        return found
    if not output and not any(c in spec for c in "*?[{") and isdir(spec, storage_options):
        kinds = {_format_of_name(basename(p)) for p in listdir(spec, storage_options)} - {None}
        manifests = _manifests(spec, storage_options)
        if len(manifests) == 1:
            return parse_set_manifest(read_bytes(manifests[0], storage_options), manifests[0]).format
        kinds.discard("manifest")
        if len(kinds) == 1:
            return kinds.pop()
        if not kinds:
            return "folder"
    raise OptionError(f"{spec}: cannot tell the format from the name; give --from/--to "
                      f"({', '.join(format_names())})")


def foreign_format(spec: Any, storage_options: StorageOptions = None) -> str | None:
    """The format of a set of a registered format, or ``None`` (RecordIO, an image folder, or unclear)."""
    try:
        fmt = infer_format(spec, storage_options)
    except (OptionError, ManifestError, OSError):
        return None
    return fmt if fmt in known_formats else None


@dataclass
class ForeignSet:
    """The files of a set of a registered format, in order, and its manifest if it has one."""

    format: str
    files: list[str]
    manifest: SetManifest | None = None
    manifest_path: str | None = None

    def counts(self) -> list[int] | None:
        """Records per file, when the manifest says."""
        return None if self.manifest is None else [int(s["records"]) for s in self.manifest.shards]


def _from_manifest(path: str, storage_options: StorageOptions) -> ForeignSet:
    manifest = parse_set_manifest(read_bytes(path, storage_options), path)
    folder = data_folder(path)
    files = [join(folder, s["path"]) for s in manifest.shards]
    for shard, file in zip(manifest.shards, files, strict=True):
        if (local := local_or_none(file)) is not None:  # (a URL's sizes would cost a request each)
            try:
                size = os.path.getsize(local)
            except FileNotFoundError:
                raise ManifestError(path, f"shard {file} is missing") from None
            if size != int(shard["bytes"]):
                raise ManifestError(path, f"shard {file} has {size} bytes, the manifest says {shard['bytes']} "
                                          "(an unfinished or replaced shard)")
    return ForeignSet(manifest.format, files, manifest, path)


def resolve_set(spec: str | os.PathLike | Sequence[str | os.PathLike], fmt: str,
                storage_options: StorageOptions = None) -> ForeignSet:
    """The files of a foreign set: a manifest, a folder (its manifest, else its files of the format), a glob, a
    brace range, one file, or a list of files."""
    suffixes = get_format(fmt).suffixes
    if not isinstance(spec, (str, os.PathLike)):
        files = [local_path(p) for p in map(os.fspath, spec)]
        return ForeignSet(fmt, files)
    spec = os.fspath(spec)
    if spec.endswith(MANIFEST):
        return _from_manifest(spec, storage_options)
    if "{" in spec and ".." in spec:
        return ForeignSet(fmt, expand_braces(spec))
    if is_pattern(spec):
        files = [p for p in glob(spec, storage_options) if p.endswith(suffixes)]
        if not files:
            raise ManifestError(spec, f"the pattern matches no {'/'.join(suffixes)} file")
        for folder in sorted({parent(p) for p in files}):  # a set being written there is no set to take part of
            for manifest in _manifests(folder, storage_options):
                with contextlib.suppress(ValueError, UnicodeDecodeError):  # (only a marker speaks against them)
                    refuse_marker(json.loads(read_bytes(manifest, storage_options)), manifest)
        return ForeignSet(fmt, files)
    if spec.endswith(suffixes):
        name = basename(spec)
        manifest = manifest_path(parent(spec), name[:-len(next(s for s in suffixes if name.endswith(s)))])
        if exists(manifest, storage_options):  # the set of that name (sharded), or its one file: its manifest
            found = _from_manifest(manifest, storage_options)
            if not exists(spec, storage_options) or [basename(f) for f in found.files] == [name]:
                return found
        return ForeignSet(fmt, [local_path(spec)])
    if isdir(spec, storage_options):
        found = listdir(spec, storage_options)
        manifests = _manifests(spec, storage_options)
        if len(manifests) == 1:
            return _from_manifest(manifests[0], storage_options)
        files = [p for p in found if p.endswith(suffixes) and not basename(p).startswith(".")]
        if not files:
            raise ManifestError(spec, f"the folder holds no {'/'.join(suffixes)} file and no {MANIFEST}")
        return ForeignSet(fmt, files)
    raise ManifestError(spec, f"no such {fmt} file or folder")
