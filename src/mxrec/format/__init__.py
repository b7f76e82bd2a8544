"""The formats, as pure functions on bytes and text: no files are opened here.

* :mod:`~mxrec.format.framing`: the ``.rec`` byte layout (parts, magic, padding, the resync rule).
* :mod:`~mxrec.format.header`: the ``IRHeader`` at the front of an image record.
* :mod:`~mxrec.format.idx`: the ``.idx`` text (``key<TAB>offset`` lines).
* :mod:`~mxrec.format.lst`: the ``.lst`` image list text, and the ``.labels`` file beside it.
* :mod:`~mxrec.format.insightface`: the record layout of InsightFace face sets, and their verification-set
  pickles (read safely).
* :mod:`~mxrec.format.manifest`: the shard-set manifest (which ``.rec``/``.idx`` pairs make one dataset).
* :mod:`~mxrec.format.checksums`: checksums of a ``.rec`` (CRC-32C per record, kept beside it).
* :mod:`~mxrec.format.seeds`: the keys of random streams (``(seed, epoch, record, ...)`` to 64 bits).

May import: :mod:`mxrec.errors` (and numpy). File I/O built on these lives in
:mod:`mxrec.io`.
"""
