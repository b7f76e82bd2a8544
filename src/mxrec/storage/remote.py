"""The request layer: every operation on a remote file, made under one :class:`~mxrec.storage.settings.RequestPolicy`.

Nothing in mxrec talks to a remote store but through here: ranged and whole reads, sizes, existence, listings and
globs, uploads, server-side moves and deletes. Each operation is

* **attempted** up to ``policy.attempts`` times (each attempt one request: the back-ends' own retries are off,
  :mod:`mxrec.storage.backends`), waiting a jittered, growing back-off between attempts, starting no new attempt
  after ``policy.deadline`` seconds; only transient failures are retried (:func:`~mxrec.storage.faults.is_transient`);
* **bounded in time**: the back-ends connect within ``connect_timeout`` and give up on an answer silent for
  ``read_timeout`` seconds, so a stalled server costs one attempt, never a hang;
* **checked** before its answer is used: a read's status, length and range (:mod:`mxrec.storage.backends`), a
  whole-file read's length against the size the answer or a ``stat`` states (a read whose size nobody states is
  refused), a move's result;
* **reported** in one line naming the URL, what was being done, the attempts made, and the real cause
  (:func:`~mxrec.storage.faults.remote_error`).

Retrying must not change what an operation means: a move whose first attempt landed but whose answer was lost finds
the source gone and the target there, and counts as done; a delete of what is already gone is done.

:class:`Counter` counts the requests (attempts) and bytes an owner's reads made (a reader's
:meth:`~mxrec.io.records.Records.io_stats`).
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from mxrec.errors import RemoteError, RemoteNotFoundError
from mxrec.storage.backends import HTTPReader, RangeReader, check_length, range_reader
from mxrec.storage.faults import ShortReadError, is_transient, remote_error
from mxrec.storage.filesystem import StorageOptions, filesystem, protocol, storage_of
from mxrec.storage.settings import RequestPolicy

T = TypeVar("T")

#: Protocols whose uploads appear only once complete (so they may go straight to the final name) and whose moves
#: replace an existing target.
OBJECT_STORES = ("s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl", "memory")


class Counter:
    """Requests made and bytes brought by one owner's reads (thread-safe; a pickled copy starts from zero)."""

    def __init__(self) -> None:
        self.requests = 0
        self.bytes = 0
        self._lock = threading.Lock()

    def add(self, requests: int = 0, nbytes: int = 0) -> None:
        with self._lock:
            self.requests += requests
            self.bytes += nbytes

    def __getstate__(self) -> dict:
        return {}

    def __setstate__(self, state: dict) -> None:
        self.__init__()


def _pause(policy: RequestPolicy, attempt: int) -> float:
    """The wait before attempt ``attempt + 1``: full jitter over an exponential bound."""
    return random.uniform(0, min(policy.max_backoff, policy.backoff * 2 ** attempt))


def attempt(url: str, what: str, call: Callable[[], T], policy: RequestPolicy, *,
            counter: Counter | None = None, done: Callable[[BaseException], bool] | None = None) -> T:
    """``call()`` under ``policy``: retried while it fails transiently, within the attempts and the deadline.

    Parameters
    ----------
    url
        What messages name.
    what
        What is being done, for messages (``"stat"``, ``"upload"``).
    call
        One attempt: one request.
    policy
        Attempts, back-off and deadline.
    counter
        Counts each attempt as a request.
    done
        Says whether a failure means the operation is in fact complete (a retried delete finding nothing): then
        ``None`` is returned.

    Returns
    -------
    object
        What ``call`` returned.

    Raises
    ------
    RemoteError
        A permanent failure, or a transient one that outlasted the attempts or the deadline (the message says how
        many attempts were made).
    """
    began = time.monotonic()
    for number in range(policy.attempts):
        if counter is not None:
            counter.add(1)
        try:
            return call()
        except Exception as exc:
            failure = exc
        # (outside the handler: an error the check raises must not carry this failure as its context, where
        # is_transient would find this failure's status: a stat's "not found" after a 503 taken for a 503)
        if number and done is not None and done(failure):
            return None  # type: ignore[return-value]
        wait = _pause(policy, number)
        spent = time.monotonic() - began
        if number + 1 >= policy.attempts or not is_transient(failure) or spent + wait > policy.deadline:
            raise remote_error(url, failure, what, attempts=number + 1, seconds=spent) from None
        time.sleep(wait)
    raise AssertionError("unreachable")


@dataclass(frozen=True)
class RemoteInfo:
    """What a ``stat`` says of a remote file: its ``size``, a ``version`` tag (ETag, generation, modification time:
    it changes when the file does) and whether it is a folder."""

    size: int | None
    version: str | None
    is_dir: bool


_VERSION_KEYS = ("ETag", "etag", "generation", "mtime", "modificationTime", "LastModified", "last_modified")


def _fs(url: str, storage: StorageOptions) -> tuple[Any, str, RequestPolicy]:
    fs, path = filesystem(url, storage)
    return fs, path, storage_of(storage).policy


def _info(url: str, fs: Any, path: str) -> dict:
    """The file system's ``info``; for HTTP a ``HEAD`` of mxrec's, whose failure keeps its status."""
    reader = range_reader(fs, protocol(url))
    return reader.info(path) if isinstance(reader, HTTPReader) else fs.info(path)


def stat(url: str, storage: StorageOptions = None, *, counter: Counter | None = None) -> RemoteInfo:
    """Size, version and kind of the remote file ``url`` (one request an attempt; s3fs may add a listing to tell a
    missing object from a folder).

    Raises
    ------
    RemoteNotFoundError
        Nothing is there.
    RemoteError
        The store could not be asked.
    """
    fs, path, policy = _fs(url, storage)
    info = attempt(url, "stat", lambda: _info(url, fs, path), policy, counter=counter)
    size = info.get("size")
    version = next((info[k] for k in _VERSION_KEYS if info.get(k) is not None), None)
    return RemoteInfo(None if size is None else int(size), None if version is None else str(version),
                      info.get("type") == "directory")


def exists(url: str, storage: StorageOptions = None) -> bool:
    """Whether something (a file or a folder) is at ``url``; any failure but "not found" raises.

    (fsspec's own ``exists`` answers ``False`` for every failure: an unreachable server would read as a missing
    file.)
    """
    return kind(url, storage) is not None


def kind(url: str, storage: StorageOptions = None) -> str | None:
    """``"file"``, ``"directory"`` or ``None`` (nothing there) for ``url``."""
    try:
        info = stat(url, storage)
    except RemoteNotFoundError:
        return None
    return "directory" if info.is_dir else "file"


def _reader(url: str, storage: StorageOptions) -> tuple[RangeReader, str, RequestPolicy]:
    fs, path, policy = _fs(url, storage)
    return range_reader(fs, protocol(url)), path, policy


def read_ranges(url: str, ranges: Sequence[tuple[int, int]], storage: StorageOptions = None, *,
                size: int | None = None, counter: Counter | None = None) -> list[bytes]:
    """Exactly the bytes of each ``(start, end)`` of ``url``, each range one request, ``policy.in_flight`` at once.

    A range that fails transiently is asked for again (with the others that failed, after a back-off); the first
    permanent failure, or one that outlasts the attempts or the deadline, raises naming the URL and the range.
    ``size``, the file's size when known, lets a server that ignores ``Range`` be named as one.
    """
    reader, path, policy = _reader(url, storage)
    results: list[bytes | None] = [b"" if start == end else None for start, end in ranges]
    pending = [i for i, (start, end) in enumerate(ranges) if start < end]
    began = time.monotonic()
    for number in range(policy.attempts):
        if not pending:
            break
        if counter is not None:
            counter.add(len(pending))
        answers = reader.read_many(url, path, [ranges[i] for i in pending], policy.in_flight, size)
        failed = []
        wait = _pause(policy, number)
        spent = time.monotonic() - began
        for i, answer in zip(pending, answers, strict=True):
            if not isinstance(answer, BaseException):
                results[i] = answer
                if counter is not None:
                    counter.add(nbytes=len(answer))
                continue
            start, end = ranges[i]
            if number + 1 >= policy.attempts or not is_transient(answer) or spent + wait > policy.deadline:
                raise remote_error(url, answer, f"read bytes {start}..{end}", attempts=number + 1,
                                   seconds=spent) from None
            failed.append(i)
        pending = failed
        if pending:
            time.sleep(wait)
    return results  # type: ignore[return-value]


def read_whole(url: str, storage: StorageOptions = None, *, size: int | None = None,
               counter: Counter | None = None) -> bytes:
    """The whole file ``url``, checked against its size: ``size`` when the caller knows it, else the size the
    answer states, else one ``stat``; a file whose size nobody states is refused.

    Raises
    ------
    RemoteError
        The file cannot be read whole and exact (the message says why).
    """
    reader, path, policy = _reader(url, storage)
    if not reader.states_size:  # the size first, under its own attempts, then the bytes as one checked range
        # (one attempt of stat and read together would be several requests that must all succeed at once)
        if size is None:
            size = stat(url, storage, counter=counter).size
            if size is None:
                raise RemoteError(url, "the store does not say how large the file is, so a whole read of it cannot "
                                       "be checked; refusing to use it")
        return read_ranges(url, [(0, size)], storage, size=size, counter=counter)[0]

    def once() -> bytes:
        data, stated = reader.read_whole(url, path)
        expected = size if size is not None else stated
        if expected is None:
            if counter is not None:
                counter.add(1)
            expected = _info_size(url, reader.fs, path)
        if stated is not None and stated != expected:
            raise ShortReadError(url, f"the answer says the file holds {stated} bytes, expected {expected} (the file "
                                      "changed, or the answer is cut short)")
        return check_length(url, data, 0, expected)

    data = attempt(url, "read", once, policy, counter=counter)
    if counter is not None:
        counter.add(nbytes=len(data))
    return data


def _info_size(url: str, fs: Any, path: str) -> int:
    size = _info(url, fs, path).get("size")
    if size is None:
        raise RemoteError(url, "the store does not say how large the file is, so a whole read of it cannot be "
                               "checked; refusing to use it")
    return int(size)


def glob(pattern: str, storage: StorageOptions = None) -> list[str]:
    """Files matching ``pattern`` (a URL), sorted, as URLs; a pattern matching nothing on a store that cannot be
    reached raises instead of answering "nothing" (the folder where the pattern starts is asked for)."""
    fs, path, policy = _fs(pattern, storage)
    found = attempt(pattern, "listing", lambda: fs.glob(path), policy)
    if not found:
        fixed = path[:min((path.find(c) for c in "*?[" if c in path), default=len(path))]
        folder = posixpath.dirname(fixed) or path
        with contextlib.suppress(RemoteNotFoundError):  # an unreachable store raises; a missing folder: nothing
            attempt(pattern, "listing", lambda: fs.info(folder), policy)
    return sorted(fs.unstrip_protocol(p) for p in found)


def listdir(folder: str, storage: StorageOptions = None) -> list[str]:
    """The files directly in ``folder`` (a URL), sorted, as URLs."""
    return sorted(listing(folder, storage))


def listing(folder: str, storage: StorageOptions = None) -> dict[str, int | None]:
    """What is directly in ``folder`` (a URL), as URLs, with the sizes the listing states (``None`` for a folder):
    one listing (which the store may answer in pages).

    Parameters
    ----------
    folder
        The folder's URL.
    storage
        The storage settings.

    Returns
    -------
    dict
        URL -> size in bytes (``None``: a folder).

    Raises
    ------
    RemoteError
        The store could not be asked.
    """
    fs, path, policy = _fs(folder, storage)
    found = attempt(folder, "listing", lambda: fs.ls(path, detail=True), policy)
    return {fs.unstrip_protocol(entry["name"]): (None if entry.get("type") == "directory" or entry.get("size") is None
                                                 else int(entry["size"])) for entry in found}


def find(folder: str, storage: StorageOptions = None, *, recursive: bool = True) -> list[str]:
    """The files under ``folder`` (a URL; only those directly in it unless ``recursive``), as the store's paths."""
    fs, path, policy = _fs(folder, storage)
    return attempt(folder, "listing", lambda: fs.find(path.rstrip("/"), maxdepth=None if recursive else 1,
                                                      withdirs=False), policy)


def upload(local: str | os.PathLike, url: str, storage: StorageOptions = None) -> None:
    """Upload the local file ``local`` as ``url`` (whole: a retried upload starts again from its first byte), and
    check the store holds its size afterwards."""
    fs, path, policy = _fs(url, storage)
    size = os.path.getsize(local)

    def once() -> None:
        fs.put_file(os.fspath(local), path)

    attempt(url, "upload", once, policy)
    landed = stat(url, storage)
    if landed.size is not None and landed.size != size:
        raise RemoteError(url, f"upload: the store holds {landed.size} bytes where {size} were sent")


def move(source: str, target: str, storage: StorageOptions = None) -> None:
    """Move ``source`` to ``target`` on the store: on an object store a server-side copy, then the source removed,
    each retried on its own (a copy made again makes the same object; fsspec's ``mv`` would list the source
    first and make the copy and the delete one attempt: three to six requests that must all succeed together);
    elsewhere a rename (HDFS renames onto no file, so an older ``target`` is removed first), and a retry that finds
    ``source`` gone and ``target`` there counts the rename as done."""
    fs, source_path, policy = _fs(source, storage)
    target_path = filesystem(target, storage)[1]
    what = f"moving {posixpath.basename(source_path)} here"
    if protocol(target) in OBJECT_STORES:
        attempt(target, what, lambda: fs.cp_file(source_path, target_path), policy)
        remove(source, storage)
        return

    def once() -> None:
        if fs.exists(target_path):
            fs.rm_file(target_path)
        fs.mv(source_path, target_path)

    def landed(exc: BaseException) -> bool:
        return isinstance(exc, FileNotFoundError) and kind(target, storage) == "file" and kind(source, storage) is None

    attempt(target, what, once, policy, done=landed)


def remove(url: str, storage: StorageOptions = None) -> None:
    """Remove the file ``url``; nothing there is not an error (also when an earlier attempt removed it)."""
    fs, path, policy = _fs(url, storage)

    def gone(exc: BaseException) -> bool:
        return kind(url, storage) is None

    try:
        attempt(url, "delete", lambda: fs.rm_file(path), policy, done=gone)
    except RemoteNotFoundError:
        return


def remove_tree(url: str, storage: StorageOptions = None) -> None:
    """Remove the folder ``url`` and everything under it; nothing there is not an error."""
    fs, path, policy = _fs(url, storage)

    def gone(exc: BaseException) -> bool:
        return kind(url, storage) is None

    try:
        attempt(url, "delete", lambda: fs.rm(path, recursive=True), policy, done=gone)
    except RemoteNotFoundError:
        return
