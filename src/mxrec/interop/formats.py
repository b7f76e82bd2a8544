"""The formats ``convert``, ``info`` and ``verify`` know: one table, one protocol, one line to add a format.

A format is one module that declares what it is, ``FORMAT = Format(name=..., suffixes=..., ...)``, and implements
the protocol :class:`FormatModule`:

* ``count_records(source, where) -> int``: records of one file (a footer read, or headers walked);
* ``read_records(source, where) -> Iterator[Record]``: the records of one file, in order (``key`` ``None`` for
  a sample another tool wrote: it is then keyed by its position in the set);
* ``Writer(path, class_names)``: a :class:`ShardWriter` of one local file at ``path``, ``write(record, payload)``
  then ``close()``, or ``abort()``. The path is under the shared staging of the output
  (:class:`~mxrec.storage.commit.Commit`): a writer never publishes, names or removes anything else.

``source`` is what :attr:`Format.opens` says: a :class:`BufferStream` of the mapped file (``"mapped"``: reads are
views, no copy; a remote file through a local copy), a binary file opened for reading (``"file"``: a remote one
read by ranges, for a footer), or a local path (``"path"``, for a library that opens files itself; a remote file is
copied first). Registering the module is one line in :data:`known_formats` (or :func:`register_format` from
outside mxrec), as fsspec's ``known_implementations``: the module is imported when the format is first used, and
its library only when a file is read or written, where a missing one is a
:class:`~mxrec.errors.MissingExtraError` naming :attr:`Format.extra`.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from mxrec.errors import ParameterError
from mxrec.interop.record import Payload, Record
from mxrec.storage.files import local_file, open_input
from mxrec.storage.filesystem import StorageOptions
from mxrec.storage.memory_map import mapped, prefault

PREFAULT = 8 << 20  # bytes of a mapped source file whose pages are mapped at once (see BufferStream)
RECORDIO, FOLDER = "recordio", "folder"  # the two formats convert handles itself (mxrec.io; mxrec.packing)

known_formats: dict[str, str] = {
    "webdataset": "mxrec.interop.webdataset",
    "parquet": "mxrec.interop.parquet",
    "tfrecord": "mxrec.interop.tfrecord",
    "arrayrecord": "mxrec.interop.arrayrecord",
}
"""Format name -> the module that declares it (``FORMAT``) and implements :class:`FormatModule`."""


class ShardWriter(Protocol):
    """Writes the records of one shard into one local file (see the module docstring)."""

    def write(self, record: Record, payload: Payload) -> None: ...

    def close(self) -> None: ...

    def abort(self) -> None: ...


class FormatModule(Protocol):
    """What a format's module implements (see the module docstring)."""

    FORMAT: Format

    def count_records(self, source: Any, where: str) -> int: ...

    def read_records(self, source: Any, where: str) -> Iterator[Record]: ...

    def Writer(self, path: str, class_names: dict[int, str] | None = None) -> ShardWriter: ...


@dataclass(frozen=True, kw_only=True)
class Format:
    """What a format is: its name, file names, extra and how its readers open files.

    Parameters
    ----------
    name
        The name ``--from``/``--to`` and ``target_format`` take.
    title
        The name its users know it by (the docs table).
    module
        The module implementing :class:`FormatModule` (its ``__name__``).
    suffixes
        File name endings, the first the one written.
    extra
        mxrec's extra that installs its library (``pip install 'mxrec[EXTRA]'``).
    index_suffix
        The ending of the index file written beside each shard (``""``: none).
    opens
        What the module's readers take: ``"mapped"``, ``"file"`` or ``"path"`` (see the module docstring).
    counts_from_footer
        ``count_records`` reads a footer only (a binary file, ranges of a remote one): always counted up front.
    loading
        How its own library loads an output of ``mxrec convert`` (one line, for the docs table).
    """

    name: str
    title: str
    module: str
    suffixes: tuple[str, ...]
    extra: str
    index_suffix: str = ""
    opens: str = "mapped"
    counts_from_footer: bool = False
    loading: str = ""

    @property
    def implementation(self) -> FormatModule:
        """The module implementing the protocol."""
        return importlib.import_module(self.module)  # type: ignore[return-value]

    @property
    def suffix(self) -> str:
        """The ending of the files it writes."""
        return self.suffixes[0]

    def shard_name(self, stem: str, number: int | None) -> str:
        """The file name of shard ``number`` of the output ``stem``.

        Parameters
        ----------
        stem
            The output's name, without the suffix.
        number
            The shard's number, or ``None`` for a one-file output.

        Returns
        -------
        str
            ``STEM_00000.SUFFIX`` for shard ``number``, ``STEM.SUFFIX`` for a one-file output.
        """
        return stem + ("" if number is None else f"_{number:05d}") + self.suffix

    def count(self, path: str, storage_options: StorageOptions = None) -> int:
        """Count the records of the file at ``path``.

        Parameters
        ----------
        path
            The file, local or a URL.
        storage_options
            For a URL: its storage settings.

        Returns
        -------
        int
            Its records.
        """
        with self._opened(path, storage_options, "file" if self.counts_from_footer else self.opens) as source:
            return self.implementation.count_records(source, path)

    def records(self, path: str, storage_options: StorageOptions = None) -> Iterator[Record]:
        """The records of the file at ``path``, in order (the file is open while they are taken).

        Parameters
        ----------
        path, storage_options
            The file and, for a URL, its storage settings, as for :meth:`count`.

        Yields
        ------
        Record
            Each record of the file.
        """
        with self._opened(path, storage_options, self.opens) as source:
            yield from self.implementation.read_records(source, path)

    def writer(self, path: str, class_names: dict[int, str] | None = None) -> ShardWriter:
        """A writer of one shard at the local ``path``.

        Parameters
        ----------
        path
            The shard's local file.
        class_names
            The class names to keep with it (where the format has a place for them).

        Returns
        -------
        ShardWriter
            The format module's writer.
        """
        return self.implementation.Writer(path, class_names)

    @contextlib.contextmanager
    def _opened(self, path: str, storage_options: StorageOptions, how: str) -> Iterator[Any]:
        if how == "file":
            with open_input(path, "rb", storage_options) as f:
                yield f
        elif how == "path":
            with local_file(path, storage_options) as local:
                yield local
        else:
            with open_mapped(path, storage_options) as stream:
                yield stream


def register_format(name: str, module: str, *, clobber: bool = False) -> None:
    """Make the format declared by ``module`` (a module path) known as ``name``.

    Parameters
    ----------
    name
        The format's name (its ``FORMAT.name``).
    module
        The module that declares ``FORMAT`` and implements :class:`FormatModule`.
    clobber
        Replace a format of that name.

    Raises
    ------
    ParameterError
        ``name`` is taken (and not ``clobber``), or is one of convert's own (``recordio``, ``folder``).
    """
    if name in (RECORDIO, FOLDER) or (name in known_formats and not clobber):
        raise ParameterError(f"format {name!r} is already known (pass clobber=True to replace it)")
    known_formats[name] = module


def get_format(name: str) -> Format:
    """The :class:`Format` registered as ``name``.

    Parameters
    ----------
    name
        A name of :data:`known_formats`.

    Returns
    -------
    Format
        Its declaration.

    Raises
    ------
    ParameterError
        No such format (the message lists the known ones).
    """
    if name not in known_formats:
        raise ParameterError(f"unknown format {name!r}: one of {', '.join(format_names())}")
    try:
        declared = importlib.import_module(known_formats[name]).FORMAT
    except (ImportError, AttributeError) as exc:  # (a format's library is imported when used, not here)
        raise ParameterError(f"format {name!r}: its module {known_formats[name]} cannot be loaded ({exc})") from None
    if declared.name != name:
        raise ParameterError(f"{known_formats[name]} declares format {declared.name!r}, registered as {name!r}")
    return declared


def formats() -> list[Format]:
    """Every registered format, in registration order."""
    return [get_format(name) for name in known_formats]


def format_names() -> tuple[str, ...]:
    """The names ``convert`` takes: ``recordio``, the registered formats, ``folder``."""
    return (RECORDIO, *known_formats, FOLDER)


def format_of_name(name: str) -> Format | None:
    """The registered format whose files end as ``name`` does, or ``None``."""
    return next((f for f in formats() if name.endswith(f.suffixes)), None)


def formats_table() -> str:
    """The Markdown table of the registered formats (``docs/convert.md`` shows it; a test keeps the two equal)."""
    rows = ["| `--to` | format | files | index beside each | extra | its library loads it |",
            "|---|---|---|---|---|---|"]
    for f in formats():
        files = ", ".join(f"`{s}`" for s in f.suffixes)
        index = f"`{f.index_suffix}`" if f.index_suffix else "—"
        rows.append(f"| `{f.name}` | {f.title} | {files} | {index} | `mxrec[{f.extra}]` | {f.loading} |")
    return "\n".join(rows) + "\n"


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


@contextlib.contextmanager
def open_mapped(path: str, storage_options: StorageOptions = None) -> Iterator[BufferStream]:
    """A file of a foreign set, mapped (a remote one through a local copy), to read as views: no copy."""
    with mapped(path, storage_options) as buffer:
        yield BufferStream(buffer)
