"""To and from a ``datasets.Dataset`` in Python (the Parquet mapping of :mod:`mxrec.interop.parquet`).

:func:`to_hf_dataset` converts a RecordIO dataset to Parquet shards in a
temporary folder and loads them with ``datasets.load_dataset("parquet")``
(which copies them into its Arrow cache): an ``image`` column of ``Image``
features, ``label`` as ``ClassLabel``. :func:`from_hf_dataset` writes a
``Dataset`` (or any iterable of rows) as a ``.rec``, records streamed one by
one; rows that carry mxrec's columns (``key``, ``flag``, ``id``, ...) come
back as the exact records they were, others get their position as key and
id and their ``label`` column as the label.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Iterator
from typing import Any

from mxrec.errors import MxrecError, import_extra
from mxrec.interop.formats import RECORDIO
from mxrec.interop.job import ConvertResult, OutputSet, Plan, Progress, convert, publish, write_class_names
from mxrec.interop.record import Record, foreign_record
from mxrec.interop.tasks import Task, run_task
from mxrec.io.shards import ShardLimit, parse_shard_size
from mxrec.packing.extract import dataset_stem
from mxrec.storage.commit import Commit
from mxrec.storage.files import open_input
from mxrec.storage.filesystem import StorageOptions

_OURS = ("key", "flag", "header_label", "id", "id2", "labels", "raw")


def require_datasets() -> Any:
    """The ``datasets`` module, or :class:`MissingExtraError` naming ``mxrec[huggingface]``."""
    return import_extra("datasets", "Hugging Face datasets are not installed", "huggingface")


def to_hf_dataset(source: Any, *, cache_dir: str | None = None, progress: Progress | None = None,
                  **options: Any) -> Any:
    """A ``datasets.Dataset`` of ``source``, converted to Parquet in a temporary folder and loaded.

    Parameters
    ----------
    source
        What :func:`~mxrec.interop.job.convert` takes as its source.
    cache_dir
        The ``datasets`` cache folder (default: its own).
    progress
        Called as ``progress(done, total)`` as records are converted.
    **options
        :func:`~mxrec.interop.job.convert`'s other options.

    Returns
    -------
    datasets.Dataset
        The dataset (its ``train`` split).

    Raises
    ------
    MissingExtraError
        ``datasets`` is not installed (``mxrec[huggingface]``).
    """
    datasets = require_datasets()
    with tempfile.TemporaryDirectory(prefix="mxrec-hf-", dir=os.environ.get("MXREC_SPOOL_DIR") or None) as folder:
        result = convert(source, folder, target_format="parquet", progress=progress, **options)
        return datasets.load_dataset("parquet", data_files=result.files, split="train", cache_dir=cache_dir)


def _image_bytes(value: Any, row: int) -> bytes:
    if isinstance(value, dict):
        if value.get("bytes") is not None:
            return value["bytes"]
        if value.get("path"):
            with open_input(value["path"], "rb") as f:
                return f.read()
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    raise MxrecError(f"row {row}: the image is {type(value).__name__}, not encoded bytes (or a path to them)")


def hf_records(rows: Iterable[dict[str, Any]], image_column: str = "image",
               label_column: str = "label") -> Iterator[Record]:
    """The records of ``rows`` (dicts as a ``Dataset`` with an undecoded image column yields them)."""
    for row_number, row in enumerate(rows):
        data = _image_bytes(row[image_column], row_number)
        if all(name in row for name in _OURS):
            record = Record.from_fields(row["key"], data, raw=bool(row["raw"]), flag=row["flag"],
                                        label=row["header_label"], id=row["id"], id2=row["id2"],
                                        labels=row["labels"] or None, head=row.get("irheader"))
        else:
            record = foreign_record(data, row.get(label_column))
            record.key, record.id = str(row_number), row_number
        yield record


def from_hf_dataset(dataset: Any, target: str | os.PathLike, *, image_column: str = "image",
                    label_column: str = "label", shard_size: ShardLimit | int | str | None = None,
                    storage_options: StorageOptions = None, progress: Progress | None = None) -> ConvertResult:
    """Write a ``datasets.Dataset`` (images as ``Image`` features or bytes) as ``target`` (a ``.rec``).

    Parameters
    ----------
    dataset
        The dataset, or any iterable of rows as it yields them.
    target
        The ``.rec`` to write (one file, or shards with ``shard_size``), local or a URL.
    image_column, label_column
        The columns holding the encoded image and the label.
    shard_size
        Records (``10000``) or bytes (``"1GB"``) per output shard (default: one file).
    storage_options
        For a URL: its storage settings.
    progress
        Called as ``progress(done, total)`` as records are written.

    Returns
    -------
    ConvertResult
        The files, the manifest and the report.

    Raises
    ------
    MxrecError
        ``target`` is not a ``.rec``, or a row's image is not encoded bytes (or a path to them).
    """
    target = os.fspath(target)
    if not target.endswith(".rec"):
        raise MxrecError(f"{target}: from_hf_dataset writes a .rec")
    rows: Iterable[dict[str, Any]] = dataset
    if hasattr(dataset, "cast_column") and hasattr(dataset, "features"):
        datasets = require_datasets()
        if isinstance(dataset.features.get(image_column), datasets.Image):
            rows = dataset.cast_column(image_column, datasets.Image(decode=False))
    total = len(dataset) if hasattr(dataset, "__len__") else 0
    limit = parse_shard_size(str(shard_size)) if isinstance(shard_size, (int, str)) else shard_size
    out = OutputSet(format=RECORDIO, path=target, stem=dataset_stem(target), storage_options=storage_options)
    sharded = limit is not None
    commit = Commit(out.manifest() if sharded else target, storage_options)
    try:  # (a URL output: the shards are written here, then uploaded into the staging folder there)
        staging = commit.staging_folder()
        task = Task(number=0, source_format="huggingface", spec=None, start=0, stop=total, target_format=RECORDIO,
                    staging=staging, limit=limit, storage_options=storage_options,
                    upload=commit.upload_folder())
        done = [0]

        def advance(count: int) -> None:
            done[0] += count
            if progress is not None:
                progress(done[0], total)

        result = run_task(task, advance, hf_records(rows, image_column, label_column))
        names = None
        feature = getattr(dataset, "features", {}).get(label_column) if hasattr(dataset, "features") else None
        if feature is not None and hasattr(feature, "names"):
            names = dict(enumerate(feature.names))
        job = Plan(source_format="huggingface", target_format=RECORDIO, spec=None, total=total, indexed=True,
                   class_names=names, out=out, sharded=sharded, limit=limit, ranges=[(0, total)], bases=[0],
                   storage_options=storage_options)
        files, manifest = publish(job, [result], commit, result.report)
    except BaseException as exc:
        commit.abort(exc)  # (nothing after a publish: it cleans up after itself)
        raise
    write_class_names(target, names)
    return ConvertResult("huggingface", "recordio", files, manifest, result.report)
