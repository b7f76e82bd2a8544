"""Storage: bytes of files, local or remote, and nothing about records.

* :mod:`~mxrec.storage.settings`: :class:`~mxrec.storage.settings.Storage` (fsspec options, the block cache, the
  request policy, as one value) and :class:`~mxrec.storage.settings.RequestPolicy`.
* :mod:`~mxrec.storage.filesystem`: local paths and fsspec URLs, and the file system behind each.
* :mod:`~mxrec.storage.faults`: what a failed remote request means (transient or permanent), and its one-line error.
* :mod:`~mxrec.storage.backends`: what each back-end needs so that an attempt is one request, bounded in time, with
  its answer checked (S3, HTTP, WebHDFS, any other).
* :mod:`~mxrec.storage.remote`: the request layer every remote operation goes through (reads, sizes, listings,
  uploads, moves, deletes), retried and checked under the policy.
* :mod:`~mxrec.storage.files`: operations on a file wherever it lives (exists, read, open, glob, list).
* :mod:`~mxrec.storage.remote_file`: :class:`~mxrec.storage.remote_file.RemoteFile`, a remote file's bytes in few
  coalesced ranged reads, through the block cache.
* :mod:`~mxrec.storage.block_cache`: :class:`~mxrec.storage.block_cache.BlockCache`, fixed-size blocks of remote
  files kept on local disk, bounded, shared between processes.
* :mod:`~mxrec.storage.memory_map`: files as read-only memory maps (a remote one through a local copy).
* :mod:`~mxrec.storage.atomic`: complete-or-absent output of one file (remote outputs uploaded when complete).
* :mod:`~mxrec.storage.commit`: the one commit protocol for outputs of several files (a pair, a shard set).
* :mod:`~mxrec.storage.write_behind`: :class:`~mxrec.storage.write_behind.WriteBehind`, writes run in order by one
  background thread while the caller prepares the next.

May import: :mod:`mxrec.errors`.
"""
