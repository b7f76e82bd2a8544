"""What a WebDataset, Parquet or TFRecord set holds: records, classes, payload kinds (``mxrec info`` on them).

A set with a manifest (``NAME.convert.json``) is described from it; any other
set is read once, in a stream.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from mxrec.interop.job import MODULES
from mxrec.interop.record import Report
from mxrec.interop.sets import infer_format, resolve_set
from mxrec.io.filesystem import StorageOptions, open_input


def describe_set(spec: str | os.PathLike | Sequence[str | os.PathLike], fmt: str | None = None, *,
                 storage_options: StorageOptions = None) -> dict[str, Any]:
    """``{"format", "files", "records", "classes", "class_names", "kinds", "manifest", "problems"}`` of a set."""
    fmt = fmt or infer_format(spec, storage_options)
    found = resolve_set(spec, fmt, storage_options)
    report = Report()
    if found.manifest is not None:
        manifest = found.manifest
        return {"format": fmt, "files": len(found.files), "records": manifest.records, "classes": manifest.classes,
                "class_names": manifest.class_names, "kinds": manifest.kinds, "manifest": found.manifest_path,
                "problems": None}
    module = MODULES[fmt]
    for path in found.files:
        with open_input(path, "rb", storage_options) as stream:
            for record in module.read_records(stream, path):
                record.key = record.key if record.key is not None else str(report.records)
                report.add(record)
    return {"format": fmt, "files": len(found.files), "records": report.records, "classes": len(report.classes),
            "class_names": None, "kinds": dict(report.kinds), "manifest": None, "problems": report.problem_count,
            "payload_bytes": report.payload_bytes}


