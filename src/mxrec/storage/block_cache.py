"""The local block cache: fixed-size blocks of remote files kept on local disk, bounded, shared between processes.

A :class:`BlockCache` stores block ``n`` of a remote file (bytes ``[n * B,
(n + 1) * B)``, ``B`` = :attr:`BlockCache.block_size`) as one file under
``cache_dir/<file id>/<n>``. The file id is a hash of the URL, the file's size
and its version tag (ETag, modification time) when the store gives one, so a
changed remote file never meets the blocks of its previous version.

Safe with several processes (``DataLoader`` workers, ranks on one node):

* a block is written to a private temporary name in the same folder and
  renamed into place (atomic on POSIX), so a reader sees a whole block or none;
* every block read is checked for its exact expected length (a block that
  is not whole is ignored, removed and fetched again), so nothing partial or
  foreign is ever served;
* a block one process is downloading is not downloaded again by another at the same time: the downloader holds
  a lock on the block's lock file (``.<n>.lock``, :meth:`BlockCache.claim`: ``flock``, released by the kernel if
  the process dies) and the others wait for it (:meth:`BlockCache.wait`), then map the block;
* eviction removes the least recently used blocks (their modification time is
  refreshed on every hit) once the folder exceeds ``max_bytes``; a block
  evicted under a reader's feet is simply a miss.

``cache_dir`` comes from the API (``cache_dir=``) or the environment
(``MXREC_CACHE_DIR``); the bound from ``max_bytes`` or ``MXREC_CACHE_SIZE``
(bytes, or with a unit: ``20GB``, default 10 GiB); the block size from
``block_size`` or ``MXREC_CACHE_BLOCK`` (default 4 MiB).
"""

from __future__ import annotations

import contextlib
import hashlib
import mmap
import os
import secrets
import threading

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: no lock across processes (each may download a block)
    fcntl = None  # type: ignore[assignment]

from mxrec.errors import OptionError
from mxrec.storage.settings import ENV_CACHE_SIZE, Storage, parse_bytes

ENV_BLOCK = "MXREC_CACHE_BLOCK"
DEFAULT_MAX_BYTES = 10 << 30
DEFAULT_BLOCK_SIZE = 4 << 20
_EVICT_CHECK_EVERY = 16  # blocks written by this process between checks of the folder's size


class BlockCache:
    """Blocks of remote files under ``directory``, at most ``max_bytes`` in all (see the module docstring)."""

    def __init__(self, directory: str | os.PathLike, max_bytes: int | str | None = None,
                 block_size: int | str | None = None) -> None:
        self.directory = os.path.abspath(os.fspath(directory))
        self.max_bytes = parse_bytes(max_bytes if max_bytes is not None else
                                     os.environ.get(ENV_CACHE_SIZE, DEFAULT_MAX_BYTES))
        self.block_size = parse_bytes(block_size if block_size is not None else
                                      os.environ.get(ENV_BLOCK, DEFAULT_BLOCK_SIZE))
        if self.block_size < 1 or self.max_bytes < self.block_size:
            raise OptionError(f"cache: need 1 <= block_size <= max_bytes, got {self.block_size} and {self.max_bytes}")
        self.hits = 0
        self.misses = 0
        self._written = 0
        self._locks: dict[tuple[str, int], int] = {}  # the lock files of the blocks this process downloads
        self._locks_guard = threading.Lock()

    @classmethod
    def from_setting(cls, cache_dir: str | os.PathLike | BlockCache | None,
                     storage: Storage | None = None) -> BlockCache | None:
        """The cache ``cache_dir`` asks for: an existing cache, a folder, or (None) the cache of ``storage``
        (its ``cache_dir``, else ``$MXREC_CACHE_DIR`` if set), bounded by the storage's ``cache_size``."""
        if isinstance(cache_dir, BlockCache):
            return cache_dir
        storage = storage or Storage()
        folder = os.fspath(cache_dir) if cache_dir is not None else storage.cache_folder()
        return None if folder is None else cls(folder, storage.cache_size)

    def __getstate__(self) -> dict:
        return {"directory": self.directory, "max_bytes": self.max_bytes, "block_size": self.block_size}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["directory"], state["max_bytes"], state["block_size"])


    @staticmethod
    def file_id(url: str, size: int, version: str | None) -> str:
        """The folder name of one version of one remote file."""
        return hashlib.sha256(f"{url}\0{size}\0{version or ''}".encode()).hexdigest()[:32]

    def block_length(self, size: int, number: int) -> int:
        """Bytes in block ``number`` of a ``size``-byte file."""
        return max(0, min(self.block_size, size - number * self.block_size))

    def _path(self, file_id: str, number: int) -> str:
        return os.path.join(self.directory, file_id, str(number))

    def get(self, file_id: str, number: int, length: int) -> memoryview | None:
        """Block ``number`` if it is cached whole (exactly ``length`` bytes), else None: the block file mapped
        (read as cheaply as a local file: no copy, its pages shared by every process that maps it)."""
        path = self._path(file_id, number)
        try:
            f = open(path, "rb")
        except (FileNotFoundError, NotADirectoryError):
            self.misses += 1
            return None
        with f:
            size = os.fstat(f.fileno()).st_size
            if size != length:  # cannot come from this cache's own writes; never serve it
                with contextlib.suppress(OSError):
                    os.unlink(path)
                self.misses += 1
                return None
            data = memoryview(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if length else b"")
        with contextlib.suppress(OSError):
            os.utime(path)  # most recently used
        self.hits += 1
        return data

    def _lock_path(self, file_id: str, number: int) -> str:
        folder = os.path.join(self.directory, file_id)
        os.makedirs(folder, exist_ok=True)
        return os.path.join(folder, f".{number}.lock")

    def claim(self, file_id: str, number: int) -> bool:
        """Take the right to download block ``number`` (``False``: another process is downloading it now; wait
        for it with :meth:`wait`). Give it back with :meth:`release`."""
        if fcntl is None:
            return True
        fd = os.open(self._lock_path(file_id, number), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        with self._locks_guard:
            self._locks[(file_id, number)] = fd
        return True

    def release(self, file_id: str, number: int) -> None:
        """Give back the right :meth:`claim` took."""
        with self._locks_guard:
            fd = self._locks.pop((file_id, number), None)
        if fd is not None:
            os.close(fd)  # (drops the lock)

    def wait(self, file_id: str, number: int) -> None:
        """Wait until no process is downloading block ``number`` (the kernel drops a dead process's lock)."""
        if fcntl is not None:
            fd = os.open(self._lock_path(file_id, number), os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_SH)
            finally:
                os.close(fd)

    def drop(self, file_id: str, number: int) -> None:
        """Forget block ``number`` (its bytes failed a check): the next read fetches it again."""
        with contextlib.suppress(OSError):
            os.unlink(self._path(file_id, number))

    def put(self, file_id: str, number: int, data: bytes) -> None:
        """Store block ``number`` atomically (a private temporary name, then a rename)."""
        folder = os.path.join(self.directory, file_id)
        os.makedirs(folder, exist_ok=True)
        tmp = os.path.join(folder, f".{number}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
        try:
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, self._path(file_id, number))
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        self._written += 1
        if self._written % _EVICT_CHECK_EVERY == 0 or len(data) * self._written >= self.max_bytes:
            self.evict()

    def usage(self) -> list[tuple[float, int, str]]:
        """``(last use, bytes, path)`` of every cached block."""
        found = []
        with contextlib.suppress(FileNotFoundError):
            for folder in os.scandir(self.directory):
                if not folder.is_dir():
                    continue
                for entry in os.scandir(folder.path):
                    if entry.name.startswith("."):
                        continue
                    with contextlib.suppress(FileNotFoundError):
                        st = entry.stat()
                        found.append((st.st_mtime, st.st_size, entry.path))
        return found

    def evict(self) -> int:
        """Remove least recently used blocks until the cache holds at most ``max_bytes``; return bytes freed."""
        blocks = self.usage()
        total = sum(size for _, size, _ in blocks)
        freed = 0
        if total <= self.max_bytes:
            return 0
        for _, size, path in sorted(blocks):
            if total - freed <= self.max_bytes * 0.9:
                break
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
                freed += size
        return freed

    def __repr__(self) -> str:
        return f"BlockCache({self.directory!r}, max_bytes={self.max_bytes}, block_size={self.block_size})"

