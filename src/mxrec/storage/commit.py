"""The one commit protocol: an output made of several files appears whole, or not at all, even when cleanup fails.

A ``.rec`` with its ``.idx`` (and checksums), a shard set with its manifest, a converted set: every output of more
than one file is made by a :class:`Commit`, in three steps.

1. **Staged.** Each file is written under a name no reader takes: a local one as ``NAME.partial`` beside its final
   name (:class:`~mxrec.storage.atomic.PartialFile`: symbolic links keep pointing at their targets), or in the
   hidden staging folder ``.STEM.staging-JOB/`` beside the output; a remote one is spooled locally and uploaded
   into the hidden staging folder as soon as it is finished (:meth:`Commit.finish`), so local disk holds one file
   at a time. Workers that write elsewhere (Ray tasks, pool processes) write into :attr:`Commit.staging` and hand
   their files over with :meth:`Commit.adopt`.
2. **Published, in order** (:meth:`Commit.publish`). For a set, its manifest's place first receives a *marker*
   that says the set is being written: every mxrec reader refuses a set whose manifest is a marker (a glob or a
   folder that finds it too), so a set half moved is never taken for a whole one. Then each file is moved to its
   name in the order given (a local rename; a copy made by the store, then the staged object removed), and the
   manifest replaces the marker, last. A pair without a manifest is ordered so that the file readers open (the
   ``.rec``) comes last, and an older version of it is removed first: no reader ever pairs a new ``.idx`` with an
   old ``.rec``.
3. **Cleaned.** The staging folder is removed, then the files of an older output that the new one does not
   overwrite (``stale``: its later shards), once the new one is whole.

On any failure or interrupt before the output is whole, everything staged, spooled and published is removed, and
the older output's stale files too (its manifest is gone: they are no set any more); every removal is retried under
the request policy and the cleanup goes on past one that fails. The marker is removed last, and only when nothing
else is left: what cannot be removed stays behind a marker that says so, never under names that look like a set.
The error raised is the cause; a note on it (:func:`mxrec.errors.add_note`) names each object that remains. A
cleanup after success that cannot remove a stale file raises :class:`~mxrec.errors.CleanupError` naming them.

A request in flight is let finish before the cleanup (:func:`~mxrec.storage.filesystem.uninterrupted`), so that no
upload or move lands after the cleanup has passed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from mxrec.errors import CleanupError, add_note
from mxrec.storage import remote
from mxrec.storage.atomic import SPOOL_ENV, PartialFile, atomic_open, discard, output_target
from mxrec.storage.filesystem import (
    StorageOptions,
    basename,
    check_writable,
    is_url,
    join,
    local_path,
    parent,
    uninterrupted,
)


@dataclass
class _Entry:
    """One file of the output: where its bytes are now, where they go, and (local) its partial file."""

    final: str
    staged: str
    partial: PartialFile | None = None


def numbered_files(paths_of: Callable[[int], Sequence[str]], start: int, storage: StorageOptions = None) -> list[str]:
    """The files numbered ``start``, ``start + 1``, ... that exist, up to the first number with none: the shards an
    earlier, larger set of the same name left after the new set's last one.

    Parameters
    ----------
    paths_of
        The files of shard ``n`` (``(rec, idx)``, say).
    start
        The first number to look at (the new set's shard count).
    storage
        For URLs: the storage settings.

    Returns
    -------
    list of str
        The files found.
    """
    found: list[str] = []
    number = start
    while True:
        there = [p for p in paths_of(number) if (remote.exists(p, storage) if is_url(p) else os.path.lexists(p))]
        if not there:
            return found
        found += there
        number += 1


class Commit:
    """The files of one output, staged, then published together (see the module docstring).

    Parameters
    ----------
    anchor
        The output's main path (the ``.rec``, or the manifest of a set): the staging folder goes beside it.
    storage
        For a URL: the storage settings (or fsspec options).

    Raises
    ------
    RemoteError
        ``anchor`` is an ``http(s)://`` URL (read only).
    """

    def __init__(self, anchor: str | os.PathLike, storage: StorageOptions = None) -> None:
        self.anchor = local_path(os.fspath(anchor))
        check_writable(self.anchor)
        self.storage = storage
        self.remote = is_url(self.anchor)
        self.job = uuid.uuid4().hex[:8]
        self.staging = join(parent(self.anchor) or os.curdir, f".{_stem(basename(self.anchor))}.staging-{self.job}")
        self._entries: list[_Entry] = []
        self._spools: dict[str, str] = {}  # remote: final name -> local spool file not uploaded yet
        self._uploading: str | None = None
        self._published: list[str] = []
        self._marker: str | None = None
        self._staging_made = False
        self.done = False

    # -- staging ---------------------------------------------------------------------------------------------

    def path_for(self, final: str) -> str:
        """Where to write the bytes of ``final`` now: a local file under a name no reader takes."""
        final = local_path(final)
        if not self.remote:
            partial = PartialFile(final)
            self._entries.append(_Entry(final, partial.path, partial))
            return partial.path
        fd, spool = tempfile.mkstemp(prefix="mxrec-upload-", suffix="-" + basename(final),
                                     dir=os.environ.get(SPOOL_ENV) or None)
        os.close(fd)
        self._spools[final] = spool
        return spool

    def staging_folder(self) -> str:
        """The hidden staging folder, made (locally) if need be, for workers that write their files there."""
        if not self.remote and not self._staging_made:
            os.makedirs(self.staging, exist_ok=True)
        self._staging_made = True
        return self.staging

    def upload_folder(self) -> str | None:
        """Where writers upload the files they write on their own disk: the staging folder of a URL output;
        ``None`` for a local output, whose :meth:`staging_folder` they write into directly."""
        return self.staging_folder() if self.remote else None

    def finish(self, final: str) -> None:
        """``final``'s bytes are all written: a remote one is uploaded into the staging folder now (its spool file
        dropped, uploaded or not); a local one waits where it is."""
        final = local_path(final)
        spool = self._spools.pop(final, None)
        if spool is None:
            return
        staged = join(self.staging_folder(), f"{len(self._entries):05d}-{basename(final)}")
        self._uploading = staged
        try:
            uninterrupted(lambda: remote.upload(spool, staged, self.storage))
        finally:
            discard(spool)
        self._entries.append(_Entry(final, staged))
        self._uploading = None

    def adopt(self, staged: str, final: str) -> None:
        """Take over ``staged``, a finished file a worker wrote (into :attr:`staging`, or any local file on the
        output's file system), to be published as ``final``."""
        self._entries.append(_Entry(local_path(final), local_path(staged)))

    def forget(self, final: str) -> None:
        """Drop ``final`` from the output: its staged or spooled bytes are removed, it will not be published."""
        final = local_path(final)
        spool = self._spools.pop(final, None)
        if spool is not None:
            discard(spool)
        for entry in [e for e in self._entries if e.final == final]:
            self._entries.remove(entry)
            if entry.partial is not None:
                entry.partial.discard()

    @property
    def finals(self) -> list[str]:
        """The final names of the files staged so far, in publishing order."""
        return [e.final for e in self._entries] + list(self._spools)

    # -- publishing --------------------------------------------------------------------------------------------

    def publish(self, *, manifest: tuple[str, str, str] | None = None, stale: Iterable[str] = ()) -> None:
        """Move every staged file to its name in the order staged (without a manifest the last staged is the file
        readers open: its older version is removed first), the manifest last; then clean (see the module docstring).

        Parameters
        ----------
        manifest
            For a set: ``(path, marker text, manifest text)``; the marker is written first, the manifest last.
        stale
            Files of an older output under this name that the new one does not overwrite: removed once the new
            one is whole (and, should publishing fail, removed with the rest).

        Raises
        ------
        CleanupError
            The output is whole, but a stale file or the staging folder could not be removed.
        """
        stale = [s for s in stale if s not in set(self.finals)]
        try:
            for final in list(self._spools):
                self.finish(final)
            entries = self._entries
            if manifest is not None:
                self._marker = manifest[0]
                self._write_text(manifest[0], manifest[1])
            elif entries:
                self._remove_now(entries[-1].final)  # no reader pairs the new files with an older main file
            for entry in entries:
                self._move(entry)
            if manifest is not None:
                self._write_text(manifest[0], manifest[2])
        except BaseException as exc:  # the older output's stale files go too once its manifest is gone
            self._clean_up(exc, stale if self._marker is not None else ())
            raise
        self.done = True
        self._marker = None
        self._entries, self._published = [], []
        remaining = self._remove_all([*stale, *self._staging()])
        if remaining:
            raise CleanupError(self.anchor, "the output is whole, but these files of an earlier one (or of its "
                                            f"staging) could not be removed: {_listed(remaining)}")

    def abort(self, cause: BaseException | None = None) -> None:
        """Remove everything this commit staged, spooled or published (nothing after a successful publish).
        What cannot be removed is named in a note on ``cause``."""
        if not self.done:
            self._clean_up(cause, ())

    # -- the moves and the cleanup -------------------------------------------------------------------------------

    def _move(self, entry: _Entry) -> None:
        if not self.remote:  # a local rename is done or not; until done the name may still hold the user's file
            if entry.partial is not None:
                entry.partial.commit()
            else:
                os.replace(entry.staged, output_target(entry.final))
            self._published.append(entry.final)
            return
        self._published.append(entry.final)  # (an interrupt is raised once the move is done: it is ours then)
        uninterrupted(lambda: remote.move(entry.staged, entry.final, self.storage))

    def _write_text(self, path: str, text: str) -> None:
        def write() -> None:
            with atomic_open(path, "w", encoding="utf-8", newline="\n", storage_options=self.storage) as f:
                f.write(text)

        if self.remote:
            uninterrupted(write)
        else:
            write()

    def _remove_now(self, path: str) -> None:
        if is_url(path):
            uninterrupted(lambda: remote.remove(path, self.storage))
        elif os.path.lexists(path) and not os.path.isdir(path):
            os.unlink(output_target(path) if os.path.islink(path) else path)

    def _staging(self) -> list[str]:
        return [self.staging] if self._staging_made else []

    def _remove_all(self, paths: Iterable[str]) -> list[str]:
        """Remove each of ``paths`` (files, or the staging folder), going on past failures; return those that remain.

        A second interrupt during the cleanup is held until it is over, then raised.
        """
        remaining: list[str] = []
        interrupted: BaseException | None = None
        for path in dict.fromkeys(paths):
            while True:
                try:
                    if not _remove(path, self.storage, folder=path == self.staging):
                        remaining.append(path)
                    break
                except KeyboardInterrupt as exc:  # finish the cleanup first
                    interrupted = exc
        if interrupted is not None:
            raise interrupted
        return remaining

    def _clean_up(self, cause: BaseException | None, stale: Sequence[str]) -> None:
        """Remove what this commit made (and the older output's stale files); the marker last, if all else went."""
        for entry in self._entries:
            if entry.partial is not None:
                entry.partial.discard()
        for spool in self._spools.values():
            discard(spool)
        self._spools.clear()
        targets = [*reversed(self._published), *stale,
                   *(e.staged for e in self._entries if e.partial is None and not self.remote),
                   *([self._uploading] if self._uploading else []), *self._staging()]
        remaining = self._remove_all(targets)
        if self._marker is not None:
            remaining += self._remove_all([self._marker]) if not remaining else [self._marker]
        self._entries, self._published, self._marker = [], [], None
        self.done = True
        if remaining and cause is not None:
            add_note(cause, f"cleanup: could not remove {_listed(remaining)}; remove them by hand (no mxrec reader "
                            "takes them for a whole output)")


def _remove(path: str, storage: StorageOptions, *, folder: bool) -> bool:
    """Remove the file (or ``folder``) ``path``, retried under the policy; whether it is gone now."""
    try:
        if is_url(path):
            uninterrupted(lambda: (remote.remove_tree if folder else remote.remove)(path, storage))
        elif folder:
            with contextlib.suppress(FileNotFoundError):
                shutil.rmtree(path)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
    except Exception:  # cleanup: a removal that keeps failing is reported by name, never raised over the cause
        return False
    return True


def _stem(name: str) -> str:
    """``train`` for ``train.rec``, ``train.manifest.json`` or ``train.convert.json``."""
    for suffix in (".manifest.json", ".convert.json"):
        name = name.removesuffix(suffix)
    return os.path.splitext(name)[0] or name


def _listed(paths: Sequence[str]) -> str:
    shown = ", ".join(paths[:10])
    return shown + (f" and {len(paths) - 10} more" if len(paths) > 10 else "")
