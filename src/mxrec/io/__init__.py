"""Record files: reading and writing ``.rec`` files and their companions (``.idx``, ``.lst``, manifests).

* :mod:`~mxrec.io.local_reader`: :class:`~mxrec.io.local_reader.RecordReader`, random access by position or key.
* :mod:`~mxrec.io.remote_reader`: :class:`~mxrec.io.remote_reader.RemoteRecordReader`, the same for a URL.
* :mod:`~mxrec.io.stream`: a remote ``.rec`` read record after record (``mxrec.recordio`` on URLs).
* :mod:`~mxrec.io.writer`: :class:`~mxrec.io.writer.RecordWriter`.
* :mod:`~mxrec.io.shards`: one dataset written as several shards, and its manifest.
* :mod:`~mxrec.io.index`: finding, reading, writing and rebuilding ``.idx`` files.
* :mod:`~mxrec.io.keys`: record positions by key.
* :mod:`~mxrec.io.lists`: ``.lst`` and ``.labels`` files.

Where the bytes live (local paths, URLs, caches) is :mod:`mxrec.storage`'s business; several files read as
one dataset is :mod:`mxrec.datasets`'. May import: :mod:`mxrec.errors`, :mod:`mxrec.format`, :mod:`mxrec.storage`.
"""
