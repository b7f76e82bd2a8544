"""Files: reading and writing RecordIO datasets and their companion files, on local disk or at any fsspec URL.

* :mod:`~mxrec.io.filesystem`: local paths and URLs, the file system behind each, credentials, remote errors.
* :mod:`~mxrec.io.source`: :class:`~mxrec.io.source.RemoteFile`, a remote file's bytes in few coalesced,
  retried, length-checked ranged reads.
* :mod:`~mxrec.io.cache`: :class:`~mxrec.io.cache.BlockCache`, remote blocks on local disk, bounded,
  shared between processes.
* :mod:`~mxrec.io.mapping`: files as read-only memory maps (a remote one through a local copy).
* :mod:`~mxrec.io.atomic`: the one complete-or-absent output helper (remote outputs uploaded when complete).
* :mod:`~mxrec.io.reader`: :class:`~mxrec.io.reader.RecordReader`, random access by position or key.
* :mod:`~mxrec.io.remote_reader`: :class:`~mxrec.io.remote_reader.RemoteRecordReader`, the same for a URL.
* :mod:`~mxrec.io.stream`: a remote ``.rec`` read record after record (``mxrec.recordio`` on URLs).
* :mod:`~mxrec.io.shardset`: :func:`~mxrec.io.shardset.open_dataset`, the one way to open a dataset (a file, a
  URL, a list, a glob, a brace range, a manifest, a folder), and :class:`~mxrec.io.shardset.ShardSetReader`.
* :mod:`~mxrec.io.writer`: :class:`~mxrec.io.writer.RecordWriter`.
* :mod:`~mxrec.io.shards`: one dataset written as several shards, and its manifest.
* :mod:`~mxrec.io.index`: finding, reading, writing and rebuilding ``.idx`` files.
* :mod:`~mxrec.io.lists`: ``.lst`` and ``.labels`` files.
* :mod:`~mxrec.io.insightface`: which records of an InsightFace face set are its faces, and whose.
* :mod:`~mxrec.io.subset`: :class:`~mxrec.io.subset.RecordSubset`, some of a reader's records as a dataset
  (the samples of a face set).

May import: :mod:`mxrec.errors`, :mod:`mxrec.format`.
"""
