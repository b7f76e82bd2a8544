"""What a set of a registered format (:mod:`mxrec.interop.formats`) holds: records, classes, payload kinds
(``mxrec info`` and ``mxrec verify`` on them).

A set with a manifest (``NAME.convert.json``) is described from it; any other
set, and any set with ``check=True``, is read once, in a stream: every tar
header checksum, TFRecord CRC and Parquet page read, every payload's image
headers looked at, and the record count compared with the manifest's.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from mxrec.interop.formats import get_format
from mxrec.interop.record import Report
from mxrec.interop.sets import infer_format, resolve_set
from mxrec.storage.filesystem import StorageOptions


def describe_set(spec: str | os.PathLike | Sequence[str | os.PathLike], fmt: str | None = None, *,
                 check: bool = False, storage_options: StorageOptions = None) -> dict[str, Any]:
    """Describe a foreign set: its format, files, records, classes and problems.

    Parameters
    ----------
    spec
        The set: a file, folder, glob, brace range or list, local or at a URL.
    fmt
        Its format's name (default: from the names).
    check
        Read every record even when a manifest says what the set holds, and add ``"problem_list"``
        (``[key, reason]`` of records that are no sound image), ``"broken"`` (broken images) and
        ``"manifest_records"`` (what the manifest promised).
    storage_options
        For URLs: the storage settings.

    Returns
    -------
    dict
        ``{"format", "files", "records", "classes", "class_names", "kinds", "manifest", "problems"}`` (and
        ``"payload_bytes"`` when the records were read).
    """
    fmt = fmt or infer_format(spec, storage_options)
    found = resolve_set(spec, fmt, storage_options)
    report = Report()
    if found.manifest is not None and not check:
        manifest = found.manifest
        return {"format": fmt, "files": len(found.files), "records": manifest.records, "classes": manifest.classes,
                "class_names": manifest.class_names, "kinds": manifest.kinds, "manifest": found.manifest_path,
                "problems": None}
    declared = get_format(fmt)
    for path in found.files:
        for record in declared.records(path, storage_options):
            record.key = record.key if record.key is not None else str(report.records)
            report.add(record)
    out = {"format": fmt, "files": len(found.files), "records": report.records, "classes": len(report.classes),
           "class_names": None if found.manifest is None else found.manifest.class_names, "kinds": dict(report.kinds),
           "manifest": found.manifest_path, "problems": report.problem_count, "payload_bytes": report.payload_bytes}
    if check:
        out.update(problem_list=[list(p) for p in report.problems], broken=report.broken,
                   manifest_records=None if found.manifest is None else found.manifest.records)
    return out


