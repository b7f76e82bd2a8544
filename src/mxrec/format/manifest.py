"""The shard-set manifest: which ``.rec``/``.idx`` pairs make up one dataset, how many records and bytes each holds.

A dataset written as shards (``mxrec pack --shard-size``, a sharded writer, a
cluster job) is ``NAME_00000.rec`` + ``NAME_00000.idx``, ``NAME_00001.rec`` ...
beside ``NAME.manifest.json``::

    {
      "format": "mxrec-shards",
      "version": 1,
      "records": 25000,
      "shards": [
        {"rec": "train_00000.rec", "idx": "train_00000.idx", "records": 10000, "rec_bytes": 1048576,
         "idx_bytes": 118890},
        ...
      ]
    }

A shard written by mxrec also has checksums, which readers check as they read (:mod:`mxrec.format.checksums`):
``"checksums": "sidecar"`` says they are in the shard's own sidecar, ``NAME_00000.checksums`` beside its ``.rec``
(a cell per record: a table inline would make the manifest grow with the records, 11 bytes each, and the manifest
is read whole when the set is opened); an entry may also hold a table inline (``"checksums": {"algorithm":
"crc32c", "block_bytes": ..., "crc32c": ...}``, as earlier mxrec versions wrote). A manifest without them (an older
one, another tool's) is read as before.

Shard names are relative to the manifest's folder (a set can be moved or
uploaded as it is); shards are listed in dataset order, so record positions
run 0..N-1 across them in that order. ``idx``/``idx_bytes`` are ``null`` for
a shard written without an index. The manifest is written last, after every
shard is complete: a set without one is unfinished (or was made by a tool
that writes none), and a reader can open a remote set from the manifest alone,
without listing the folder, and check each shard's size against it.

While a set is being published its manifest's place holds a *marker* instead (:func:`marker_text`)::

    {"format": "mxrec-incomplete", "job": "3f2a9c1e", "files": ["train_00000.rec", ...]}

Every parser of a manifest (this one, and :mod:`mxrec.interop`'s for converted sets) refuses a marker
(:func:`refuse_marker`): the set is being written, or its writing failed and left the files it names, which must
never be taken for a whole set (:mod:`mxrec.storage.commit`).

This module is the format (parse, format, naming); files are :mod:`mxrec.io.shards`.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass

from mxrec.errors import ChecksumError, IncompleteSetError, ManifestError
from mxrec.format.checksums import BlockChecksums, checksums_path
from mxrec.format.idx import sidecar_path

FORMAT = "mxrec-shards"
#: A shard entry's ``checksums`` when they are in the shard's sidecar.
SIDECAR = "sidecar"
VERSION = 1
MANIFEST_SUFFIX = ".manifest.json"
MARKER_FORMAT = "mxrec-incomplete"


def marker_text(job: str, files: list[str]) -> str:
    """The marker that stands at a set's manifest while the set is published: the job and the files it writes.

    Parameters
    ----------
    job
        The writing job's id.
    files
        The names the job publishes (relative to the manifest's folder).

    Returns
    -------
    str
        The marker's JSON text.
    """
    return json.dumps({"format": MARKER_FORMAT, "job": job, "files": files}) + "\n"


def refuse_marker(data: object, where: str | os.PathLike | None) -> None:
    """Raise :class:`~mxrec.errors.ManifestError` when a parsed manifest is a marker (:func:`marker_text`).

    Parameters
    ----------
    data
        The manifest's parsed JSON.
    where
        The manifest's path, for the message.

    Raises
    ------
    IncompleteSetError
        ``data`` is a marker: the set is being written, or its writing failed.
    """
    if isinstance(data, dict) and data.get("format") == MARKER_FORMAT:
        files = data.get("files") if isinstance(data.get("files"), list) else []
        shown = ", ".join(map(str, files[:5])) + (f" and {len(files) - 5} more" if len(files) > 5 else "")
        raise IncompleteSetError(where, f"this set is being written, or its writing failed (job {data.get('job')}): "
                                        f"not a whole set; its files ({shown or 'none yet'}) must not be read as one. "
                                        "Write it again, or remove them and this file")


@dataclass(frozen=True)
class ShardEntry:
    """One shard of a set: its ``.rec`` and ``.idx`` names (relative to the manifest), records and sizes, and the
    ``.rec``'s checksums when the writer recorded them: ``True`` for those in its sidecar, a table for those the
    manifest holds, ``None`` for none."""

    rec: str
    idx: str | None
    records: int
    rec_bytes: int
    idx_bytes: int | None = None
    checksums: BlockChecksums | bool | None = None

    @property
    def sidecar(self) -> str | None:
        """The name of the shard's checksums sidecar when its checksums are there."""
        return checksums_path(self.rec) if self.checksums is True else None

    def files(self) -> list[str]:
        """The shard's files, as named here: its ``.rec``, ``.idx`` and checksums sidecar (those it has)."""
        return [name for name in (self.rec, self.idx, self.sidecar) if name]

    def to_dict(self) -> dict:
        fields = {"rec": self.rec, "idx": self.idx, "records": self.records, "rec_bytes": self.rec_bytes,
                  "idx_bytes": self.idx_bytes}
        if self.checksums is None or self.checksums is False:
            return fields
        return {**fields, "checksums": SIDECAR if self.checksums is True else self.checksums.to_dict()}


@dataclass(frozen=True)
class Manifest:
    """The shards of one dataset, in dataset order."""

    shards: tuple[ShardEntry, ...]

    @property
    def records(self) -> int:
        return sum(shard.records for shard in self.shards)

    def to_json(self) -> str:
        """The manifest's text (keys in a fixed order, one shard a line, so that diffs stay readable)."""
        shards = ",\n".join("    " + json.dumps(shard.to_dict()) for shard in self.shards)
        listed = f"\n{shards}\n  " if self.shards else ""
        return (f'{{\n  "format": "{FORMAT}",\n  "version": {VERSION},\n  "records": {self.records},\n'
                f'  "shards": [{listed}]\n}}\n')


def manifest_path(rec_path: str | os.PathLike) -> str:
    """The manifest of the shards written for ``rec_path``: ``data/train.rec`` -> ``data/train.manifest.json``."""
    return sidecar_path(rec_path, MANIFEST_SUFFIX)


def parse_manifest(text: str | bytes, where: str | os.PathLike | None = None) -> Manifest:
    """Parse a manifest's text; :class:`~mxrec.errors.ManifestError` names ``where`` and what is wrong."""
    try:
        data = json.loads(text)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ManifestError(where, f"not JSON: {exc}") from None
    refuse_marker(data, where)
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ManifestError(where, f"not an mxrec shard manifest (no \"format\": \"{FORMAT}\")")
    if data.get("version") != VERSION:
        raise ManifestError(where, f"manifest version {data.get('version')!r} is not supported (this is {VERSION})")
    shards = data.get("shards")
    if not isinstance(shards, list):
        raise ManifestError(where, "\"shards\" is not a list")
    entries = []
    for number, shard in enumerate(shards):
        try:
            entry = ShardEntry(rec=shard["rec"], idx=shard.get("idx"), records=shard["records"],
                               rec_bytes=shard["rec_bytes"], idx_bytes=shard.get("idx_bytes"))
        except (KeyError, TypeError) as exc:
            raise ManifestError(where, f"shard {number}: missing field {exc}") from None
        _check_entry(entry, number, where)
        if shard.get("checksums") == SIDECAR:
            entry = dataclasses.replace(entry, checksums=True)
        elif shard.get("checksums") is not None:
            try:
                sums = BlockChecksums.from_dict(shard["checksums"], entry.rec_bytes, where)
            except ChecksumError as exc:
                raise ManifestError(where, f"shard {number}: {exc.reason}") from None
            entry = dataclasses.replace(entry, checksums=sums)
        entries.append(entry)
    manifest = Manifest(tuple(entries))
    if data.get("records") != manifest.records:
        raise ManifestError(where, f"\"records\" is {data.get('records')!r} but the shards hold {manifest.records}")
    return manifest


def _check_entry(entry: ShardEntry, number: int, where: str | os.PathLike | None) -> None:
    for name in (entry.rec, entry.idx):
        if name is None:
            continue
        if not isinstance(name, str) or not name or name.startswith("/") or "://" in name \
                or ".." in name.replace("\\", "/").split("/"):
            raise ManifestError(where, f"shard {number}: {name!r} is not a file name inside the manifest's folder")
    for field in ("records", "rec_bytes"):
        value = getattr(entry, field)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ManifestError(where, f"shard {number}: {field} must be a non-negative integer, not {value!r}")
    if (entry.idx is None) != (entry.idx_bytes is None):
        raise ManifestError(where, f"shard {number}: idx and idx_bytes must both be given or both be null")
