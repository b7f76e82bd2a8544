"""The exceptions mxrec raises.

Every error mxrec raises on bad input derives from :class:`MxrecError`, so
``except mxrec.MxrecError`` catches them all. Each also derives from the
built-in exception that MXNet-era code would have caught for the same fault
(``ValueError``, ``KeyError``, ...), and each message names the file, the byte
offset or key, and what was wrong. A missing optional dependency is a
:class:`MissingExtraError`, made by :func:`missing_extra` (or
:func:`import_extra`) only, so every such message names the extra to install.

Every class is made in one of two shapes: a message alone, or ``(path, reason, *, keywords)`` -- the file or URL
first, then what was wrong, anything else (a byte ``offset``, a ``line``, a ``key``) by keyword
(``tests/test_errors.py`` holds every class and every raise to it). A bad option or parameter value is a
:class:`ParameterError` (``OptionError`` is the same class, by its older name).
"""

from __future__ import annotations

import importlib
import inspect
import os
import re
from collections.abc import Callable, Mapping
from types import ModuleType


def document_parameters(obj: type | Callable, descriptions: Mapping[str, str]) -> None:
    """Complete the numpy ``Parameters`` section of a class's or function's docstring from its signature.

    A family of classes or functions that shares parameters (a subclass that keeps its parent's constructor, the
    ``seed`` of every transform, the ``src`` of every crop) describes each shared parameter once, in
    ``descriptions``; each docstring gets the ones it does not describe itself, in the signature's order, at the end
    of its ``Parameters`` section (a section is made, before ``Returns`` and the rest, where there is none). It lives
    here because every subpackage may import :mod:`mxrec.errors`. The docs site reads these composed docstrings
    through ``docs/griffe_runtime_docs.py``.

    Parameters
    ----------
    obj
        The class (a class's constructor parameters, from ``__init_subclass__``) or the function, just made; one
        without a docstring, or a class with the constructor of ``object`` or ``Exception``, is left alone.
    descriptions
        The meaning of each shared parameter name; a parameter not in it is left to the docstring itself
        (a user's subclass of a transform may have parameters of its own, undocumented).
    """
    doc, function = obj.__doc__, obj.__init__ if isinstance(obj, type) else obj
    if not doc or not inspect.isfunction(function):
        return
    names = list(inspect.signature(function).parameters)[1 if isinstance(obj, type) else 0:]
    missing = [name for name in names
               if name in descriptions and not re.search(rf"^ *(\w+, )*{name}(, \w+)*( : .*)?$", doc, re.M)]
    if not missing:
        return
    entries = "".join(f"    {name}\n        {descriptions[name]}\n" for name in missing)
    sections = list(re.finditer(r"^ *(\w+)\n *-+\n", doc, re.M))
    params = next((m for m in sections if m.group(1) == "Parameters"), None)
    after = [m for m in sections if params is None or m.start() > params.start()]
    if params is None:
        entries = "    Parameters\n    ----------\n" + entries
    if after:  # before the next section: after the blank line that ends the summary, or the last entry
        cut = after[0].start() - (1 if params else 0)
        obj.__doc__ = doc[:cut] + entries + ("" if params else "\n") + doc[cut:]
    else:
        obj.__doc__ = doc.rstrip() + ("\n" if params else "\n\n") + entries


#: What each constructor parameter of the classes below means, written once (:func:`document_parameters`).
_PARAMETERS = {
    "path": "The file or URL (``None`` when the input is not a file: bytes in memory, a manifest built in memory).",
    "reason": "What was wrong.",
    "offset": "The byte offset in the file where the fault is.",
    "line": "The line number, if known.",
    "key": "The record key concerned (the one asked for, or the one repeated).",
    "start": "The first byte of the range whose checksum failed, if the fault is in one.",
    "end": "The end of that byte range.",
}


class MxrecError(Exception):
    """Base class of every error mxrec raises on bad input or misuse."""

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        document_parameters(cls, _PARAMETERS)


class RecordFormatError(MxrecError, ValueError):
    """A ``.rec`` file breaks the RecordIO framing at a given byte offset."""

    def __init__(self, path: str | os.PathLike | None, reason: str, *, offset: int) -> None:
        self.path = None if path is None else os.fspath(path)
        self.offset = offset
        self.reason = reason
        where = self.path if self.path is not None else "<buffer>"
        super().__init__(f"{where}: at byte {offset}: {reason}")


class TruncatedRecordError(RecordFormatError):
    """The data ends inside a record (header, payload, padding or a multi-part record)."""


class TextFileError(MxrecError, ValueError):
    """A text file mxrec reads (``.idx``, ``.lst``, CSV) has a bad line: the message names file and line."""

    placeholder = "<text>"  # names the file when no path is known

    def __init__(self, path: str | os.PathLike | None, reason: str, *, line: int | None = None) -> None:
        self.path = None if path is None else os.fspath(path)
        self.line = line
        self.reason = reason
        where = self.path if self.path is not None else self.placeholder
        if line is not None:
            where += f": line {line}"
        super().__init__(f"{where}: {reason}")


class IndexFileError(TextFileError):
    """An ``.idx`` file is malformed or disagrees with its ``.rec`` file."""

    placeholder = "<index>"

    def __init__(self, path: str | os.PathLike | None, reason: str, *, line: int | None = None,
                 key: object = None) -> None:
        self.key = key
        super().__init__(path, reason, line=line)


class DuplicateKeyError(IndexFileError):
    """The same key appears on more than one line of an ``.idx`` file."""


class RecordKeyError(MxrecError, KeyError):
    """A key asked for is not in the index."""

    def __init__(self, path: str | os.PathLike | None, *, key: object) -> None:
        self.path = None if path is None else os.fspath(path)
        self.key = key
        super().__init__(f"{self.path}: no record with key {key!r} in the index")

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0])


class RecordPositionError(MxrecError, IndexError):
    """A record position outside ``0 .. len - 1`` (negative positions count from the end)."""


class HeaderError(MxrecError, ValueError):
    """A record's payload is too short for the IRHeader (and label array) it declares."""


class RecordTooLargeError(MxrecError, ValueError):
    """A payload is too large for the RecordIO length field (2**29 - 1 bytes at most)."""


class ImageDecodeError(MxrecError, ValueError):
    """Bytes that should hold an image could not be decoded."""


class TruncatedImageError(ImageDecodeError):
    """Encoded image bytes end before the image does (a cut-off file)."""


class ClosedFileError(MxrecError, ValueError):
    """An operation on a reader or writer that has been closed."""


class ModeError(MxrecError, ValueError):
    """A read on a writer, a write on a reader, or an unknown open flag."""


class ForkedWriterError(MxrecError, RuntimeError):
    """A writer was used in a process other than the one that opened it."""


class ListFileError(TextFileError):
    """A ``.lst`` (or CSV) image list has a malformed line."""

    placeholder = "<list>"


class ManifestError(MxrecError, ValueError):
    """A shard-set manifest is malformed, or disagrees with the shards it lists: the message names the file."""

    def __init__(self, path: str | os.PathLike | None, reason: str) -> None:
        self.path = None if path is None else os.fspath(path)
        self.reason = reason
        super().__init__(f"{self.path if self.path is not None else '<manifest>'}: {reason}")


class IncompleteSetError(ManifestError):
    """A set's manifest is the marker of a write in progress or failed: its files are no whole set."""


class ChecksumError(MxrecError, ValueError):
    """Bytes of a ``.rec`` fail their checksum (the file is damaged), or a checksum table is malformed or
    belongs to another version of the file: the message names the file, the byte range and its records.
    """

    def __init__(self, path: str | os.PathLike | None, reason: str, *, start: int | None = None,
                 end: int | None = None) -> None:
        self.path = None if path is None else os.fspath(path)
        self.reason = reason
        self.start, self.end = start, end
        where = self.path if self.path is not None else "<checksums>"
        if start is not None:
            where += f": bytes {start}..{end}"
        super().__init__(f"{where}: {reason}")


class LayoutError(MxrecError, ValueError):
    """An InsightFace face set whose header record or identity records are inconsistent: the message names the key."""


class VerificationSetError(MxrecError, ValueError):
    """An InsightFace verification set (``lfw.bin``, ...) is malformed or holds objects that are not allowed."""


class OutputPathError(MxrecError, OSError):
    """An output path that cannot be written: a directory, or a file in a folder that does not exist."""


class MissingFolderError(OutputPathError, FileNotFoundError):
    """The folder an output goes into does not exist (any more)."""


class UnsafePathError(MxrecError, ValueError):
    """A path taken from input data (a ``.lst``, a CSV, a record) would lead outside its root folder."""


class PackError(MxrecError, RuntimeError):
    """A pack job stopped: an image was skipped under ``strict``, or no ``.lst`` matched the prefix."""


class ParameterError(MxrecError, ValueError, TypeError):
    """An option or parameter that cannot work: unknown, misspelled, out of range (a ratio outside 0..1, a shard
    size of 0, ...), or in conflict with another.

    It is a ``ValueError`` and a ``TypeError`` too, as Python raises for a bad value or an unexpected keyword
    argument.
    """


#: The same class as :class:`ParameterError` (its former name for option values, kept so that ``except
#: OptionError`` and the raise sites that use it go on working).
OptionError = ParameterError


class _StorageError(MxrecError, OSError):
    """An ``OSError`` about one file or URL, read as ``path: reason``."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}")

    def __str__(self) -> str:  # OSError would format its args differently
        return f"{self.path}: {self.reason}"


class RemoteError(_StorageError):
    """Reading or writing a remote file failed: the message names the URL (and byte range), and what went wrong."""

    @property
    def url(self) -> str:
        """The URL (the same as :attr:`path`)."""
        return self.path


class CleanupError(_StorageError):
    """An output was made whole, but files it should have removed (an earlier output's, its staging) remain: the
    message names them.
    """


def add_note(exc: BaseException, note: str) -> None:
    """Add ``note`` to ``exc`` (``BaseException.add_note`` where Python has it, the same ``__notes__`` list
    otherwise): what went wrong after the error, said after it (the command line prints the notes).

    Parameters
    ----------
    exc
        The exception being raised.
    note
        One line.
    """
    if hasattr(exc, "add_note"):
        exc.add_note(note)
    else:  # Python 3.10
        exc.__notes__ = [*getattr(exc, "__notes__", []), note]


class RemoteNotFoundError(RemoteError, FileNotFoundError):
    """A remote file, bucket or shard does not exist."""


class RemoteAccessError(RemoteError, PermissionError):
    """The remote store refused access (missing or bad credentials, no permission)."""


class MissingExtraError(MxrecError, ImportError):
    """A feature needs an optional dependency (``pip install 'mxrec[EXTRA]'``) that is not installed.

    Raised through :func:`missing_extra` / :func:`import_extra` only, so every such message reads the same.
    """


def missing_extra(what: str, extra: str, cause: BaseException | None = None) -> MissingExtraError:
    """The :class:`MissingExtraError` for a feature whose optional dependency is not installed.

    Parameters
    ----------
    what
        What needs the dependency, e.g. ``"plots need matplotlib"``.
    extra
        The name of mxrec's extra (``"plot"`` becomes ``pip install 'mxrec[plot]'``), or, for a dependency
        outside mxrec's extras, the words saying what to install.
    cause
        The ``ImportError`` seen, quoted at the end of the message.

    Returns
    -------
    MissingExtraError
        The error, for the caller to raise.
    """
    install = f"pip install 'mxrec[{extra}]'" if extra.isidentifier() else extra
    return MissingExtraError(f"{what}: {install}" + ("" if cause is None else f" ({cause})"))


def import_extra(module: str, what: str, extra: str) -> ModuleType:
    """Import ``module`` (of mxrec's optional ``extra``), or raise :func:`missing_extra`'s error.

    Parameters
    ----------
    module
        The module's dotted name.
    what
        What needs it (the start of the message).
    extra
        mxrec's extra that installs it.

    Returns
    -------
    ModuleType
        The module.

    Raises
    ------
    MissingExtraError
        If it cannot be imported.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise missing_extra(what, extra, exc) from None


class ClusterError(MxrecError, ConnectionError):
    """A compute cluster (Ray) cannot be reached or used: the message names its address."""


class UnsupportedError(MxrecError, AttributeError):
    """A part of MXNet's API that :mod:`mxrec.compat.mx` does not cover (it covers data loading only)."""
