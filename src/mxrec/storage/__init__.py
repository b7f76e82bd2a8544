"""Storage: bytes of files, local or remote, and nothing about records.

* :mod:`~mxrec.storage.filesystem`: local paths and fsspec URLs, the file system behind each, credentials, and
  what remote errors mean (which are worth a retry).
* :mod:`~mxrec.storage.remote_file`: :class:`~mxrec.storage.remote_file.RemoteFile`, a remote file's bytes in few
  coalesced, retried, length-checked ranged reads.
* :mod:`~mxrec.storage.block_cache`: :class:`~mxrec.storage.block_cache.BlockCache`, fixed-size blocks of remote
  files kept on local disk, bounded, shared between processes.
* :mod:`~mxrec.storage.memory_map`: files as read-only memory maps (a remote one through a local copy).
* :mod:`~mxrec.storage.atomic`: the one complete-or-absent output helper (remote outputs uploaded when complete).
* :mod:`~mxrec.storage.write_behind`: :class:`~mxrec.storage.write_behind.WriteBehind`, writes run in order by one
  background thread while the caller prepares the next.

May import: :mod:`mxrec.errors`.
"""
