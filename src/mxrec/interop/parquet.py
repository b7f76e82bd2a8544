"""Parquet as a Hugging Face dataset: ``datasets.load_dataset("parquet", data_files=...)`` gives images and labels.

Columns, with their ``datasets`` features in the schema's ``huggingface``
metadata (as ``datasets`` itself writes them):

* ``image``: the ``Image`` feature, a struct ``{bytes, path}``; ``bytes`` is
  the payload untouched, ``path`` the name ``KEY.EXT`` (extension from the
  signature table, ``bin`` for a payload that is no image);
* ``label``: ``ClassLabel`` with the names of the ``.labels`` file when there
  is one (an ``int64`` ``Value`` otherwise): the whole non-negative scalar
  label, -1 (``datasets``' "no label") for array, fractional or raw records;
* ``key`` (the ``.idx`` key as text), ``kind`` (the payload kind), and the
  exact IRHeader: ``flag``, ``header_label``, ``id``, ``id2`` (``uint64``),
  ``labels`` (the ``flag`` float32 labels), ``raw`` (no IRHeader), and only in a
  file that needs it ``irheader`` (the header bytes where a label is not a
  finite number, else null): a column of nulls would stop PyTorch's default
  collate (``set_transform`` then a ``DataLoader``, the ``datasets`` tutorial's
  pattern). The first record that needs it adds it to the file written so far
  (:meth:`Writer.add_header_column`: read back and written again, once).

Rows go out in row groups of at most :data:`ROW_GROUP_BYTES` of payload (or
:data:`ROW_GROUP_ROWS` rows), so neither the writer nor a reader holds more
than one row group. 8 MB (about a hundred photos: ``datasets`` itself writes
image datasets in row groups of 100 rows) rather than 64 MB: a 64 MB buffer is
fresh memory every time, and its page faults made ``.rec -> parquet`` 30% slower
(``benchmarks/bench_convert.py``). Parquet files written by others convert too: the
``image`` column (a struct with ``bytes`` or plain binary) and ``label``;
keys and ids are then positions.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import IO, Any

import numpy as np

from mxrec.errors import MxrecError, import_extra
from mxrec.interop.formats import BufferStream, Format
from mxrec.interop.record import Payload, Record, foreign_record
from mxrec.storage.write_behind import WriteBehind

FORMAT = Format(name="parquet", title="Parquet (Hugging Face)", module=__name__, suffixes=(".parquet",),
                extra="parquet", counts_from_footer=True,
                loading='`datasets.load_dataset("parquet", data_dir=DIR)`')
ROW_GROUP_BYTES = 8 << 20  # see the module docstring
ROW_GROUP_ROWS = 10_000
_COLUMNS = ("key", "image", "label", "kind", "flag", "header_label", "id", "id2", "labels", "raw", "irheader")


def require_pyarrow() -> Any:
    """``pyarrow`` (with ``pyarrow.parquet``), or :class:`MissingExtraError` naming ``mxrec[parquet]``."""
    import_extra("pyarrow.parquet", "Parquet needs pyarrow, which is not installed", FORMAT.extra)
    return import_extra("pyarrow", "Parquet needs pyarrow, which is not installed", FORMAT.extra)


def features(class_names: dict[int, str] | None, header_column: bool = False) -> dict[str, Any]:
    """The ``datasets`` features of the columns (the ``huggingface`` schema metadata)."""
    def value(dtype: str) -> dict[str, str]:
        return {"dtype": dtype, "_type": "Value"}

    label = value("int64")
    if class_names:
        label = {"names": [class_names.get(i, str(i)) for i in range(max(class_names) + 1)], "_type": "ClassLabel"}
    out = {"key": value("string"), "image": {"_type": "Image"}, "label": label, "kind": value("string"),
           "flag": value("uint32"), "header_label": value("float32"), "id": value("uint64"), "id2": value("uint64"),
           "labels": {"feature": value("float32"), "_type": "List"}, "raw": value("bool")}
    return {**out, "irheader": value("binary")} if header_column else out


def schema(class_names: dict[int, str] | None, header_column: bool = False) -> Any:
    pa = require_pyarrow()
    fields = [("key", pa.string()), ("image", pa.struct([("bytes", pa.binary()), ("path", pa.string())])),
              ("label", pa.int64()), ("kind", pa.string()), ("flag", pa.uint32()), ("header_label", pa.float32()),
              ("id", pa.uint64()), ("id2", pa.uint64()), ("labels", pa.list_(pa.float32())), ("raw", pa.bool_())]
    if header_column:
        fields.append(("irheader", pa.binary()))
    meta = {"huggingface": json.dumps({"info": {"features": features(class_names, header_column)}})}
    return pa.schema(fields, metadata=meta)


class Writer:
    """Write records as rows of one Parquet file at ``path`` (a local file; staging is the caller's)."""

    def __init__(self, path: str, class_names: dict[int, str] | None = None) -> None:
        pa = require_pyarrow()

        self.pa, self.path, self.class_names = pa, path, class_names
        self.schema = schema(class_names)
        self.writer = self._open(path)
        self.columns: dict[str, list] = {name: [] for name in (*_COLUMNS, "path") if name != "irheader"}
        self.pending_bytes = 0
        self.behind = WriteBehind()  # a row group is built and written while the next one's rows are gathered

    def _open(self, path: str) -> Any:
        import pyarrow.parquet as pq

        return pq.ParquetWriter(path, self.schema, compression="none", use_dictionary=["kind"],
                                write_statistics=False)

    def add_header_column(self) -> None:
        """Add the ``irheader`` column (nulls for the rows written so far): the file is read back and written
        again under the new schema, row group by row group (once a file, for the first record that needs it)."""
        import pyarrow.parquet as pq

        self.behind.finish(self.writer)
        self.schema = schema(self.class_names, header_column=True)
        rewritten = self.path + ".rewrite"
        writer = self._open(rewritten)
        try:
            old = pq.ParquetFile(self.path)
            for group in range(old.num_row_groups):
                table = old.read_row_group(group, use_threads=False)
                nulls = self.pa.nulls(table.num_rows, self.pa.binary())
                writer.write_table(self.pa.Table.from_arrays([*table.columns, nulls], schema=self.schema))
        except BaseException:
            writer.close()
            os.unlink(rewritten)
            raise
        os.replace(rewritten, self.path)
        self.writer = writer
        self.behind = WriteBehind()
        self.columns["irheader"] = [None] * len(self.columns["key"])

    def write(self, record: Record, payload: Payload) -> None:
        head = record.verbatim_head()
        if head is not None and "irheader" not in self.columns:
            self.add_header_column()
        c = self.columns
        c["key"].append(record.key)
        c["image"].append(record.data)  # copied into the Arrow buffer by the writing thread: one copy
        c["path"].append(f"{record.key}.{payload.extension}")
        c["label"].append(record.class_label)
        c["kind"].append(payload.kind)
        c["flag"].append(record.flag)
        c["header_label"].append(record.label)
        c["id"].append(record.id)
        c["id2"].append(record.id2)
        c["labels"].append(record.labels if record.labels is not None else ())
        c["raw"].append(record.raw)
        if "irheader" in c:
            c["irheader"].append(head)
        self.pending_bytes += len(record.data)
        if self.pending_bytes >= ROW_GROUP_BYTES or len(c["key"]) >= ROW_GROUP_ROWS:
            self.flush()

    def flush(self) -> None:
        """Make the rows gathered so far one Arrow table (here: converting Python objects holds the GIL) and hand it
        to the writing thread, whose Parquet encoding and writing release it: a thread that needs the GIL again and
        again waits each time for this one to yield it (5 ms), and fell behind."""
        c = self.columns
        if not c["key"]:
            return
        pa = self.pa
        # Arrow copies the payloads into memory of its own allocator, which it reuses from row group to row group
        # (joining them into fresh bytes first cost four times as much: a new 8 MB, page fault by page fault)
        images = pa.array(c["image"], pa.binary())
        image = pa.StructArray.from_arrays([images, pa.array(c["path"], pa.string())], names=["bytes", "path"])
        arrays = [image if name == "image" else pa.array(c[name], self.schema.field(name).type)
                  for name in _COLUMNS if name in c]
        table = pa.Table.from_arrays(arrays, schema=self.schema)
        self.behind.submit(self.writer.write_table, table, len(table))
        self.columns = {name: [] for name in c}
        self.pending_bytes = 0

    def close(self) -> None:
        self.flush()
        self.behind.finish(self.writer)

    def abort(self) -> None:
        self.behind.abandon(self.writer)


def _image_bytes(value: Any, where: str, row: int) -> bytes:
    if isinstance(value, dict):
        data = value.get("bytes")
        if data is None:
            raise MxrecError(f"{where}: row {row}: the image has no bytes (path {value.get('path')!r} only); "
                             "convert a dataset whose images are embedded")
        return data
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    raise MxrecError(f"{where}: row {row}: the image column holds {type(value).__name__}, not bytes")


def _image_views(column: Any) -> list[memoryview] | None:
    """The payloads of an ``image`` column (a struct with ``bytes``, or binary) as views of its Arrow buffer, or
    ``None`` when a row has no bytes or the column is of another type (then the rows are read one by one)."""
    pa = require_pyarrow()
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if pa.types.is_struct(array.type):
        if array.null_count or array.type.get_field_index("bytes") < 0:
            return None
        array = array.field("bytes")  # the child, with the struct's offset applied
    if array.null_count or not (pa.types.is_binary(array.type) or pa.types.is_large_binary(array.type)):
        return None
    _, offsets, data = array.buffers()
    if data is None:  # no bytes at all: every payload is empty
        return [memoryview(b"")] * len(array)
    bounds = np.frombuffer(offsets, np.int64 if pa.types.is_large_binary(array.type) else np.int32,
                           len(array) + 1, array.offset * (8 if pa.types.is_large_binary(array.type) else 4))
    view = memoryview(data).cast("B")  # Arrow exports signed chars
    return [view[start:stop] for start, stop in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True)]


def read_records(stream: IO[bytes] | BufferStream, where: str, image_column: str = "image",
                 label_column: str = "label") -> Iterator[Record]:
    """The records of one Parquet file, a row group at a time (``key`` is ``None`` for files of other tools)."""
    pa = require_pyarrow()
    import pyarrow.parquet as pq

    parquet = pq.ParquetFile(pa.BufferReader(pa.py_buffer(stream.view)) if isinstance(stream, BufferStream)
                             else stream)
    names = set(parquet.schema_arrow.names)
    ours = {"key", "flag", "header_label", "id", "id2", "labels", "raw"} <= names
    if image_column not in names:
        raise MxrecError(f"{where}: no {image_column!r} column (columns: {sorted(names)})")
    wanted = [n for n in _COLUMNS if n in names] if ours else [
        n for n in (image_column, label_column) if n in names]
    row = 0
    for group in range(parquet.num_row_groups):
        # decoded on this thread: Arrow's own pool would take the core the write-behind thread copies on
        table = parquet.read_row_group(group, columns=wanted, use_threads=False)
        views = _image_views(table.column(image_column))  # no copy of the payloads
        columns = {name: table.column(name).to_pylist() for name in wanted
                   if name != image_column or views is None}
        for i in range(table.num_rows):
            data = views[i] if views is not None else _image_bytes(columns[image_column][i], where, row)
            row += 1
            if ours:
                labels = columns["labels"][i]
                head = columns["irheader"][i] if "irheader" in columns else None
                yield Record.from_fields(columns["key"][i], data, raw=bool(columns["raw"][i]),
                                         flag=columns["flag"][i], label=columns["header_label"][i],
                                         id=columns["id"][i], id2=columns["id2"][i],
                                         labels=np.asarray(labels, np.float32) if labels else None, head=head)
            else:
                label = columns[label_column][i] if label_column in columns else None
                yield foreign_record(data, label)


def count_records(stream: IO[bytes], where: str) -> int:
    """Rows of a Parquet file, from its footer."""
    require_pyarrow()
    import pyarrow.parquet as pq

    return pq.ParquetFile(stream).metadata.num_rows
