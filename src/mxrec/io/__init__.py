"""Record files: reading and writing ``.rec`` files and their companions (``.idx``, ``.lst``, manifests).

* :mod:`~mxrec.io.records`: the reader contract, :class:`~mxrec.io.records.Records`, that every reader keeps.
* :mod:`~mxrec.io.opener`: :func:`~mxrec.io.opener.RecordReader`, the reader for where a file lives.
* :mod:`~mxrec.io.local_reader`: :class:`~mxrec.io.local_reader.RecordReader`, random access by position or key.
* :mod:`~mxrec.io.remote_reader`: :class:`~mxrec.io.remote_reader.RemoteRecordReader`, the same for a URL.
* :mod:`~mxrec.io.stream`: a remote ``.rec`` read record after record (``mxrec.recordio`` on URLs).
* :mod:`~mxrec.io.writer`: :class:`~mxrec.io.writer.RecordWriter`.
* :mod:`~mxrec.io.shards`: one dataset written as several shards, and its manifest.
* :mod:`~mxrec.io.index`: finding, reading, writing and rebuilding ``.idx`` files.
* :mod:`~mxrec.io.keys`: record positions by key.
* :mod:`~mxrec.io.lists`: ``.lst`` and ``.labels`` files.
* :mod:`~mxrec.io.order`: the order an epoch reads records in, and the reads it asks of the storage.
* :mod:`~mxrec.io.shuffle_window`: the blocks a block-shuffled epoch is reading now, each fetched once.
* :mod:`~mxrec.io.shared_downloads`: a folder where the processes reading one epoch share the blocks they fetch.
* :mod:`~mxrec.io.checksummed`: checking a ``.rec``'s checksums as its records are read.

Where the bytes live (local paths, URLs, caches) is :mod:`mxrec.storage`'s business; several files read as
one dataset is :mod:`mxrec.datasets`'. May import: :mod:`mxrec.errors`, :mod:`mxrec.format`, :mod:`mxrec.storage`.
"""
