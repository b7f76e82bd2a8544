"""Which format a path holds, the files of a foreign shard set, and the set's manifest (``NAME.convert.json``).

A WebDataset, Parquet or TFRecord set written by ``mxrec convert`` is
``NAME_00000.tar`` (``.parquet``, ``.tfrecord``), ``NAME_00001.tar`` ... beside
``NAME.convert.json``, written last::

    {"format": "webdataset", "version": 1, "records": 1200, "indexed": true, "classes": 10,
     "class_names": {"0": "cat", ...} or null, "kinds": {"jpeg": 1199, "other": 1},
     "shards": [{"path": "NAME_00000.tar", "records": 1200, "bytes": 123456789}]}

``indexed`` says whether the ``.rec`` it came from had an ``.idx`` (converting
back writes one only then). A set without a manifest is unfinished, or was
made by another tool; such sets are read too (a file, a folder, a glob, a
brace range or a list, local or at a URL).
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
from mxrec.storage.files import exists, glob, isdir, listdir, read_bytes
from mxrec.storage.filesystem import StorageOptions, basename, is_url, join, local_path, parent
from mxrec.storage.memory_map import prefault

MANIFEST = ".convert.json"
PREFAULT = 8 << 20  # bytes of a mapped source file whose pages are mapped at once (see BufferStream)
VERSION = 1
SUFFIXES = {"webdataset": (".tar",), "parquet": (".parquet",), "tfrecord": (".tfrecord", ".tfrecords")}
FORMATS = ("recordio", "webdataset", "parquet", "tfrecord", "folder")


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
    if manifest.format not in SUFFIXES:
        raise ManifestError(where, f"unknown format {manifest.format!r}")
    return manifest


def manifest_name(stem: str) -> str:
    return stem + MANIFEST


def _format_of_name(name: str) -> str | None:
    if name.endswith(MANIFEST):
        return "manifest"
    if name.endswith((".rec", MANIFEST_SUFFIX)):
        return "recordio"
    for fmt, suffixes in SUFFIXES.items():
        if name.endswith(suffixes):
            return fmt
    return None


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
        manifests = [p for p in listdir(spec, storage_options) if p.endswith(MANIFEST)]
        if len(manifests) == 1:
            return parse_set_manifest(read_bytes(manifests[0], storage_options), manifests[0]).format
        kinds.discard("manifest")
        if len(kinds) == 1:
            return kinds.pop()
        if not kinds:
            return "folder"
    raise OptionError(f"{spec}: cannot tell the format from the name; give --from/--to "
                      f"({', '.join(FORMATS)})")


class BufferStream:
    """A read-only buffer (a mapped file) read like a file, each ``read`` a view of it: no copy.

    The pages ahead of the position are mapped :data:`PREFAULT` bytes at a time
    (:func:`~mxrec.storage.memory_map.prefault`), so copying the views later costs no page faults.
    """

    def __init__(self, buffer: Any) -> None:
        self.buffer = buffer
        self.view = memoryview(buffer)
        self.at = 0
        self.mapped_to = 0  # the pages before this offset are prefaulted

    def read(self, size: int = -1) -> memoryview:
        end = len(self.view) if size < 0 else min(self.at + size, len(self.view))
        self.map_ahead(end)
        out = self.view[self.at:end]
        self.at = end
        return out

    def map_ahead(self, end: int) -> None:
        """Make sure the pages up to ``end`` are mapped: if not, map from the position to ``end`` and
        :data:`PREFAULT` bytes more (for a reader that takes views at offsets of its own, a tar reader's)."""
        if end <= self.mapped_to:
            return
        start = max(self.at, self.mapped_to)
        self.mapped_to = min(len(self.view), max(end, start + PREFAULT))
        prefault(self.buffer, start, self.mapped_to)


def foreign_format(spec: Any, storage_options: StorageOptions = None) -> str | None:
    """The format of a WebDataset, Parquet or TFRecord set, or ``None`` (RecordIO, an image folder, or unclear)."""
    try:
        fmt = infer_format(spec, storage_options)
    except (OptionError, ManifestError, OSError):
        return None
    return fmt if fmt in SUFFIXES else None


@dataclass
class ForeignSet:
    """The files of a WebDataset, Parquet or TFRecord set, in order, and its manifest if it has one."""

    format: str
    files: list[str]
    manifest: SetManifest | None = None
    manifest_path: str | None = None

    def counts(self) -> list[int] | None:
        """Records per file, when the manifest says."""
        return None if self.manifest is None else [int(s["records"]) for s in self.manifest.shards]


def _from_manifest(path: str, storage_options: StorageOptions) -> ForeignSet:
    manifest = parse_set_manifest(read_bytes(path, storage_options), path)
    folder = parent(path)
    files = [join(folder, s["path"]) for s in manifest.shards]
    for shard, file in zip(manifest.shards, files, strict=True):
        if not is_url(file):
            try:
                size = os.path.getsize(file)
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
    suffixes = SUFFIXES[fmt]
    if not isinstance(spec, (str, os.PathLike)):
        files = [p if is_url(p) else local_path(p) for p in map(os.fspath, spec)]
        return ForeignSet(fmt, files)
    spec = os.fspath(spec)
    if spec.endswith(MANIFEST):
        return _from_manifest(spec, storage_options)
    if "{" in spec and ".." in spec:
        return ForeignSet(fmt, expand_braces(spec))
    if any(c in (spec.partition("://")[2] if is_url(spec) else spec) for c in "*?["):
        files = [p for p in glob(spec, storage_options) if p.endswith(suffixes)]
        if not files:
            raise ManifestError(spec, f"the pattern matches no {'/'.join(suffixes)} file")
        for folder in sorted({parent(p) for p in files}):  # a set being written there is no set to take part of
            for manifest in glob(join(folder, "*" + MANIFEST), storage_options):
                with contextlib.suppress(ValueError, UnicodeDecodeError):  # (only a marker speaks against them)
                    refuse_marker(json.loads(read_bytes(manifest, storage_options)), manifest)
        return ForeignSet(fmt, files)
    if spec.endswith(suffixes):
        stem = spec[:-len(next(s for s in suffixes if spec.endswith(s)))]
        if not exists(spec, storage_options) and exists(manifest_name(stem), storage_options):
            return _from_manifest(manifest_name(stem), storage_options)
        return ForeignSet(fmt, [spec if is_url(spec) else local_path(spec)])
    if isdir(spec, storage_options):
        found = listdir(spec, storage_options)
        manifests = [p for p in found if p.endswith(MANIFEST)]
        if len(manifests) == 1:
            return _from_manifest(manifests[0], storage_options)
        files = [p for p in found if p.endswith(suffixes) and not basename(p).startswith(".")]
        if not files:
            raise ManifestError(spec, f"the folder holds no {'/'.join(suffixes)} file and no {MANIFEST}")
        return ForeignSet(fmt, files)
    raise ManifestError(spec, f"no such {fmt} file or folder")
