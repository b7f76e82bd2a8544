"""Files: reading and writing RecordIO datasets and their companion files.

* :mod:`~mxrec.io.mapping`: local files as read-only memory maps.
* :mod:`~mxrec.io.atomic`: the one complete-or-absent output helper.
* :mod:`~mxrec.io.reader`: :class:`~mxrec.io.reader.RecordReader`, random access by position or key.
* :mod:`~mxrec.io.writer`: :class:`~mxrec.io.writer.RecordWriter`.
* :mod:`~mxrec.io.shards`: one dataset written as several shards.
* :mod:`~mxrec.io.index`: finding, reading, writing and rebuilding ``.idx`` files.
* :mod:`~mxrec.io.lists`: ``.lst`` and ``.labels`` files.
* :mod:`~mxrec.io.insightface`: which records of an InsightFace face set are its faces, and whose.

May import: :mod:`mxrec.errors`, :mod:`mxrec.format`.
"""
