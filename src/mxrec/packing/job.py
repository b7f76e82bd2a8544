"""The pack job: a ``.lst`` and its image folder turned into a ``.rec``/``.idx`` (im2rec's pack mode).

For each ``.lst`` entry, in ``.lst`` order, the image file ``ROOT/path`` goes
through an :class:`~mxrec.packing.prepare.ImageTransform` and is stored as one
record: ``IRHeader(flag, label, id=.lst index, id2=0)`` followed by the image
bytes; the ``.idx`` key is the ``.lst`` index. The label is the entry's first
label, or, with ``pack_label`` and more than one label, all of them as a
float32 array (im2rec's ``--pack-label``; a single label stays a scalar).

Compared with im2rec:

* Records are always in ``.lst`` order, with any number of workers.
* An image that cannot be read, decoded or encoded is skipped, reported
  (path and reason, see :class:`ImageNote`) and counted; im2rec printed a
  traceback, and in single-process mode wrote the *previous* image again under
  the failed image's key. With ``strict`` the first skip stops the job.
* With ``pass_through`` a file whose bytes are no known image format (a text
  file named ``.jpg``) is stored unchanged, as im2rec did, but reported and
  counted in :attr:`PackResult.not_images`; with ``strict`` it stops the job.
* Nothing packed is an error, not an empty ``.rec``: a ``.lst`` without
  entries, or one whose every image was skipped (the message names the first
  missing file, resolved, when the image root looks wrong), raises
  :class:`~mxrec.errors.PackError` and leaves no output.
* The ``.lst`` is checked before any image is read: a malformed line, an
  index outside ``0 .. 2**64-1``, an index used twice (im2rec wrote both, so
  the ``.idx`` had a duplicate key) or a path that leads outside the image root
  (absolute, or climbing out with ``..``) is an error naming the line.
* Output goes to ``<name>.partial`` files renamed into place at the end, so an
  interrupted or failed job leaves nothing that looks finished. Ctrl-C stops
  the worker threads (each finishes the image in hand) and removes the
  partial files.
* Optional sharding (:mod:`mxrec.io.shards`); progress and skipped images
  are reported through callbacks (the command line draws the bar).

Workers (``workers > 1``, im2rec's ``--num-thread``) are threads of this
process, each reading, decoding and encoding whole images, a few at a time,
while the calling thread writes the records in ``.lst`` order. OpenCV and
simplejpeg release the GIL for all their work, so threads use every core the
way im2rec's worker processes do, without starting processes or copying each
image through a pipe; OpenCV's own thread pool is held to one thread meanwhile
so that it does not compete with the workers. Pass-through is I/O-bound and
is always done in the calling thread.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from mxrec.errors import ListFileError, MxrecError, PackError, UnsafePathError
from mxrec.format.header import IRHeader, pack, unpack_header
from mxrec.format.lst import ListEntry, resolve_list_path
from mxrec.image.codec import opencv
from mxrec.image.signatures import image_format
from mxrec.io.lists import image_path, iter_numbered_list, lists_with_prefix
from mxrec.io.shards import ShardedWriter, ShardLimit
from mxrec.io.writer import RecordWriter
from mxrec.packing.prepare import ImageTransform
from mxrec.storage.files import read_bytes
from mxrec.storage.filesystem import absolute, join

_MAX_ID = 2**64 - 1
Outcome = tuple[bytes | None, str | None]  # an image's record payload, or None and why it was skipped
_IMAGES_PER_TASK = 8  # per hand-off to a thread: a hand-off costs about as much as 1/20 of an image
_TASKS_PER_WORKER = 3  # queued or running per thread: none waits for work while the writer catches up


@dataclass(frozen=True)
class ImageNote:
    """An image of the ``.lst`` that was skipped or stored with a warning: its index and path, and why.

    ``reason`` is a message naming the file.
    """

    index: int
    path: str
    reason: str


@dataclass
class PackResult:
    """What one pack job wrote."""

    lst_path: str
    outputs: list[tuple[str, str]]  # (rec, idx) of each file (one, or one per shard)
    manifest: str | None = None  # the shard set's manifest, when sharded
    records: int = 0
    skipped: list[ImageNote] = field(default_factory=list)  # left out of the output
    not_images: list[ImageNote] = field(default_factory=list)  # stored (pass-through), but no known image format
    root: str = ""  # the image folder the .lst paths are relative to

    def root_hint(self) -> str | None:
        """When most images were skipped because their files are missing: the suspicion and the first missing file."""
        missing = [s for s in self.skipped if not os.path.lexists(os.path.join(self.root, s.path))]
        if not missing or 2 * len(missing) < len(self.skipped) + self.records:
            return None
        first = os.path.abspath(os.path.join(self.root, missing[0].path))
        return (f"{len(missing)} of {len(self.skipped) + self.records} images of {self.lst_path} are missing under "
                f"{os.path.abspath(self.root)}: is that the right image root? (first missing: {first})")


def record_label(labels: Sequence[float], pack_label: bool) -> float | tuple[float, ...]:
    """The ``IRHeader`` label im2rec stores: all labels with ``pack_label`` when there are several, else the first."""
    if pack_label and len(labels) > 1:
        return tuple(labels)
    return labels[0]


def read_pack_list(lst_path: str | os.PathLike, root: str | os.PathLike = ".") -> list[ListEntry]:
    """The entries of ``lst_path``, checked for what would break a pack (indices, paths leaving ``root``)."""
    lst_path = os.fspath(lst_path)
    entries = []
    first_line: dict[int, int] = {}
    for number, entry in iter_numbered_list(lst_path):
        if not 0 <= entry.index <= _MAX_ID:
            raise ListFileError(lst_path, f"index {entry.index} is not a record id (0 .. 2**64-1)", line=number)
        if entry.index in first_line:
            raise ListFileError(lst_path, f"index {entry.index} is already used on line {first_line[entry.index]}",
                                line=number)
        first_line[entry.index] = number
        try:
            resolve_list_path(root, entry.path)
        except UnsafePathError as exc:
            raise UnsafePathError(f"{lst_path}: line {number}: {exc}") from None
        entries.append(entry)
    return entries


def image_record(entry: ListEntry, root: str | os.PathLike, transform: ImageTransform,
                 pack_label: bool = False) -> bytes:
    """The record payload for one ``.lst`` entry: ``IRHeader`` + the transformed image file."""
    path = image_path(root, entry.path)
    data = read_bytes(path)
    body = transform.apply(data, what=path)
    return pack(IRHeader(0, record_label(entry.labels, pack_label), entry.index, 0), body)


def not_an_image(payload: bytes) -> str | None:
    """Why the bytes after a record's ``IRHeader`` are no image (no known signature), or ``None`` when they are one."""
    body = memoryview(payload)[unpack_header(payload)[1]:]
    if image_format(body) != "other":
        return None
    return f"not an image: {len(body)} bytes in no known image format (they start {bytes(body[:8])!r})"


def record_or_reason(entry: ListEntry, root: str, transform: ImageTransform, pack_label: bool) -> Outcome:
    """:func:`image_record`, or ``(None, why)`` for an image that must be skipped (``why`` names the file)."""
    try:
        return image_record(entry, root, transform, pack_label), None
    except (OSError, MxrecError) as exc:
        return None, str(exc)
    except Exception as exc:  # OpenCV's own errors: one bad image must not stop the job
        return None, f"{join(root, entry.path)}: {type(exc).__name__}: {exc}"


@contextlib.contextmanager
def _opencv_single_threaded() -> Iterator[None]:
    """Run OpenCV single-threaded inside the block, then restore its thread count.

    The workers already keep the cores busy; OpenCV splitting a resize over
    its own pool of one thread per core as well would run more threads than
    cores. (Safe here, in the process that owns the pool; changing it in
    forked children hung.)
    """
    cv2 = opencv()
    threads = cv2.getNumThreads()
    cv2.setNumThreads(1)
    try:
        yield
    finally:
        cv2.setNumThreads(threads)


def _outcomes(job: Callable[[ListEntry], Outcome], entries: Sequence[ListEntry]) -> list[Outcome]:
    return [job(entry) for entry in entries]


def _results(entries: list[ListEntry], root: str, transform: ImageTransform, pack_label: bool,
             workers: int) -> Iterator[Outcome]:
    """``(payload, reason)`` for each entry, in order, from ``workers`` threads (or this one).

    Each thread task handles ``_IMAGES_PER_TASK`` consecutive entries, and at
    most ``workers * _TASKS_PER_WORKER`` tasks are queued or running, so the
    images held in memory stay few however long the list. Closing the
    generator (Ctrl-C, an error, ``strict``) cancels the tasks not started and
    waits for those running, a few images each.
    """
    job = functools.partial(record_or_reason, root=root, transform=transform, pack_label=pack_label)
    if workers <= 1 or transform.pass_through or len(entries) < 2:
        yield from map(job, entries)
        return
    tasks = (entries[start:start + _IMAGES_PER_TASK] for start in range(0, len(entries), _IMAGES_PER_TASK))
    with _opencv_single_threaded(), ThreadPoolExecutor(workers, thread_name_prefix="mxrec-pack") as pool:
        pending: deque[Future[list[Outcome]]] = deque()
        try:
            for task in tasks:
                pending.append(pool.submit(_outcomes, job, task))
                if len(pending) >= workers * _TASKS_PER_WORKER:
                    yield from pending.popleft().result()
            while pending:
                yield from pending.popleft().result()
        finally:
            pool.shutdown(wait=True, cancel_futures=True)


def _take_note(note: ImageNote, notes: list[ImageNote], callback: Callable[[ImageNote], None] | None,
               strict: bool, lst_path: str) -> None:
    """Keep ``note`` and pass it to ``callback``; with ``strict`` stop the job instead."""
    if strict:
        raise PackError(f"{lst_path}: index {note.index}: {note.reason}; stopping (strict), no output written")
    notes.append(note)
    if callback is not None:
        callback(note)


def take_outcome(entry: ListEntry, outcome: Outcome, transform: ImageTransform, result: PackResult, *,
                 strict: bool = False, on_skip: Callable[[ImageNote], None] | None = None,
                 on_warning: Callable[[ImageNote], None] | None = None) -> bytes | None:
    """The payload to store for ``entry`` (None: the image is skipped), its notes kept in ``result``.

    ``outcome`` is :func:`record_or_reason`'s. A skipped image goes to ``result.skipped`` (and ``on_skip``), a
    pass-through file that is no image to ``result.not_images`` (and ``on_warning``); with ``strict`` either
    stops the job with :class:`~mxrec.errors.PackError`. The one rule of a pack job, on any engine.
    """
    payload, reason = outcome
    if payload is None:
        note = ImageNote(entry.index, entry.path, reason or "unknown error")
        _take_note(note, result.skipped, on_skip, strict, result.lst_path)
        return None
    problem = not_an_image(payload) if transform.pass_through else None
    if problem is not None:
        note = ImageNote(entry.index, entry.path, f"{resolve_list_path(result.root, entry.path)}: {problem}")
        _take_note(note, result.not_images, on_warning, strict, result.lst_path)
    return payload


def nothing_packed(result: PackResult, images: int) -> PackError:
    """The error of a pack job none of whose ``images`` could be packed (naming the likely wrong root)."""
    hint = result.root_hint()
    return PackError(f"{result.lst_path}: none of its {images} images could be packed, no output written"
                     + (f"; {hint}" if hint else f"; the first: {result.skipped[0].reason}"))


def pack_list(lst_path: str | os.PathLike, root: str | os.PathLike, rec_path: str | os.PathLike | None = None,
              transform: ImageTransform | None = None, *, workers: int = 1, pack_label: bool = False,
              strict: bool = False, shard_limit: ShardLimit | None = None,
              progress: Callable[[int, int], None] | None = None,
              on_skip: Callable[[ImageNote], None] | None = None,
              on_warning: Callable[[ImageNote], None] | None = None) -> PackResult:
    """Pack the images listed in ``lst_path`` (relative to ``root``) into ``rec_path`` and its ``.idx``.

    What ``mxrec pack`` does for one ``.lst``: records in ``.lst`` order, keyed
    by the ``.lst`` indices, byte-identical to ``tools/im2rec.py``'s by default.
    The output is written as ``*.partial`` and renamed when the job completes.

    Parameters
    ----------
    lst_path
        The ``.lst`` (``index<TAB>label(s)<TAB>path`` lines); a path or URL.
    root
        The folder the ``.lst`` paths are relative to.
    rec_path
        The output ``.rec`` (its ``.idx`` beside it); default: ``lst_path``
        with ``.rec``.
    transform
        What to do to each image (resize, crop, re-encode, pass-through);
        default: ``ImageTransform()``, im2rec's defaults.
    workers
        Threads that read and encode images.
    pack_label
        Store every label of a multi-label ``.lst`` line as a label array.
    strict
        Stop at the first image that has to be skipped or is no image.
    shard_limit
        Write shards ``NAME_00000.rec``, ... of at most this many records or
        bytes, and a manifest.
    progress
        Called as ``progress(done, total)`` as images are done.
    on_skip
        Called with the note of each image left out (unreadable, empty,
        truncated).
    on_warning
        Called with the note of each file stored that is no image
        (pass-through).

    Returns
    -------
    PackResult
        Records written, images skipped and why, the outputs.

    Raises
    ------
    PackError
        With ``strict``, on the first image skipped or stored that is no image;
        and when nothing at all was packed. The partial output is removed.
    """
    lst_path, root = os.fspath(lst_path), os.fspath(root)
    rec_path = os.fspath(rec_path) if rec_path is not None else os.path.splitext(lst_path)[0] + ".rec"
    # every path may be a URL: lists and images are read through fsspec, outputs uploaded when complete
    transform = transform if transform is not None else ImageTransform()
    entries = read_pack_list(lst_path, root)
    if not entries:
        raise PackError(f"{lst_path}: no entries, nothing to pack")
    result = PackResult(lst_path, [], root=root)
    writer: RecordWriter | ShardedWriter
    if shard_limit is not None:
        writer = ShardedWriter(rec_path, shard_limit)
    else:
        writer = RecordWriter(rec_path, index=True, atomic=True)
    results = _results(entries, root, transform, pack_label, workers)
    with writer, contextlib.closing(results):  # closing stops the workers on any error or Ctrl-C
        for done, (entry, outcome) in enumerate(zip(entries, results, strict=True), 1):
            payload = take_outcome(entry, outcome, transform, result, strict=strict, on_skip=on_skip,
                                   on_warning=on_warning)
            if payload is not None:
                writer.write(payload, key=entry.index)
            if progress is not None:
                progress(done, len(entries))
        result.records = len(writer)
        if not result.records:
            raise nothing_packed(result, len(entries))
    if isinstance(writer, ShardedWriter):
        result.outputs, result.manifest = writer.paths, writer.manifest_path
    else:
        result.outputs = [(writer.path, writer.index_path)]
    return result


def find_prefix_lists(prefix: str | os.PathLike) -> list[str]:
    """Every ``.lst`` im2rec would pack for ``prefix``, sorted; raises :class:`PackError` when there is none.

    im2rec's rule: the folder is ``prefix`` itself when it is a directory,
    else its parent; every file there whose absolute path starts with the
    absolute ``prefix`` and ends with ``.lst`` is packed.
    """
    lists = lists_with_prefix(prefix)
    if not lists:
        raise PackError(f"no .lst file starts with the prefix {absolute(prefix)!r}")
    return lists


def pack_prefix(prefix: str | os.PathLike, root: str | os.PathLike, transform: ImageTransform | None = None,
                **options: object) -> list[PackResult]:
    """Pack every ``.lst`` matching ``prefix`` (see :func:`find_prefix_lists`), each beside its ``.lst``.

    Parameters
    ----------
    prefix
        ``PREFIX.lst``, ``PREFIX_train.lst``, ... are packed (``mxrec pack PREFIX ROOT``).
    root
        The folder the ``.lst`` paths are relative to.
    transform
        What to do to each image, as :func:`pack_list`'s.
    **options
        Those of :func:`pack_list` (``workers``, ``strict``, ``shard_limit``, ...).

    Returns
    -------
    list of PackResult
        One per ``.lst``.
    """
    return [pack_list(lst, root, None, transform, **options) for lst in find_prefix_lists(prefix)]
