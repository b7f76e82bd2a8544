"""A folder where the processes reading one epoch plan at once share the shuffle blocks they download.

``DataLoader`` workers, or ``ImageRecordIter``'s worker processes, each follow the same block-shuffled order and
read ahead along it, and their batches draw records from the same blocks: each on its own would download nearly
every block of a remote dataset. :class:`SharedDownloads` names a folder under the temporary directory
(``$TMPDIR``) in the process that makes it; the readers that follow :meth:`SharedDownloads.plan` create it
(readable by the user alone) and keep their shuffle blocks there (:attr:`~mxrec.io.shuffle_window.ShuffleWindow.
shared`): a block is downloaded by the process that claims it, and the others map it from disk. It holds at most
four times the request policy's ``memory`` (least recently used blocks removed first), and the process that named
it removes it when the object is garbage-collected, on :meth:`SharedDownloads.remove`, or at exit (never a
worker's copy). A dataset with a block cache of its own needs none: its readers share that cache
(:func:`shared_downloads` then gives ``None``).
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
import weakref

from mxrec.io.order import ReadPlan
from mxrec.storage.block_cache import BlockCache
from mxrec.storage.filesystem import StorageOptions, storage_of


class SharedDownloads:
    """A folder for the shuffle blocks of the processes reading one plan at once (see the module docstring).

    Parameters
    ----------
    memory
        The request policy's ``memory`` (bytes of blocks a reader holds): the folder holds four times as much.
    """

    def __init__(self, memory: int) -> None:
        self.folder = os.path.join(tempfile.gettempdir(), f"mxrec-shared-blocks-{os.getpid()}-{secrets.token_hex(6)}")
        self.max_bytes = 4 * max(memory, 64 << 20)
        self._owner = os.getpid()
        weakref.finalize(self, _remove_folder, self.folder, self._owner)
        self._last: tuple[int, ReadPlan, ReadPlan] | None = None  # (process, plan, shared): asked once a batch

    def plan(self, plan: ReadPlan) -> ReadPlan:
        """``plan`` with its shuffle blocks shared through the folder (made here when missing).

        Parameters
        ----------
        plan : ReadPlan
            The plan every process follows.

        Returns
        -------
        ReadPlan
            ``plan`` shared through the folder; ``plan`` itself when it has no shuffle blocks (nothing to share)
            or the folder cannot be made.
        """
        last = self._last
        if last is not None and last[0] == os.getpid() and last[1] == plan:
            return last[2]  # (the same object: a reader given it again sees the plan it follows)
        shared = plan
        if plan.shuffle_block > 0 or any(part.shuffle_block > 0 for part in plan.parts):
            try:
                os.makedirs(self.folder, mode=0o700, exist_ok=True)  # (the blocks are the user's data: theirs alone)
                shared = plan.shared_through(self.folder, self.max_bytes)
            except OSError:  # not writable: the blocks are not shared
                pass
        self._last = (os.getpid(), plan, shared)
        return shared

    def remove(self) -> None:
        """Remove the folder now (in the process that named it; a copy elsewhere does nothing)."""
        _remove_folder(self.folder, self._owner)


def _remove_folder(folder: str, owner: int) -> None:
    if os.getpid() == owner:  # never a worker's copy (a forked child inherits the finalizer)
        shutil.rmtree(folder, ignore_errors=True)


def shared_downloads(cache_dir: str | os.PathLike | BlockCache | None,
                     storage_options: StorageOptions = None) -> SharedDownloads | None:
    """The shared folder for a dataset opened with ``cache_dir`` and ``storage_options``, or ``None`` when it has
    a block cache of its own (``cache_dir``, or the storage's ``cache_dir`` or ``$MXREC_CACHE_DIR``).

    Parameters
    ----------
    cache_dir
        The dataset's block cache, as it was opened with (a folder or a cache; ``None``: none).
    storage_options
        Its storage settings (their cache folder and request policy).

    Returns
    -------
    SharedDownloads or None
        A new folder (named, not made), or ``None``.
    """
    storage = storage_of(storage_options)
    if cache_dir is not None or storage.cache_folder() is not None:
        return None
    return SharedDownloads(storage.policy.memory)
