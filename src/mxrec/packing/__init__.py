"""Building datasets: image lists, what happens to each image, the pack job, and getting images back out.

* :mod:`~mxrec.packing.make_lists`: ``.lst`` files from an image folder or a CSV (im2rec's list mode).
* :mod:`~mxrec.packing.prepare`: :class:`~mxrec.packing.prepare.ImageTransform`, one image file's bytes -> record bytes.
* :mod:`~mxrec.packing.job`: ``.lst`` + image root -> ``.rec``/``.idx`` (im2rec's pack mode), on worker threads.
* :mod:`~mxrec.packing.extract`: a ``.rec`` -> image files and a ``.lst`` that packs them again.

Library code reports progress through callbacks and never prints. May import:
:mod:`mxrec.errors`, :mod:`mxrec.format`, :mod:`mxrec.storage`, :mod:`mxrec.io`, :mod:`mxrec.datasets`,
:mod:`mxrec.image`, :mod:`mxrec.transforms` (its geometry kernels).
"""
