"""Image bytes, in one place: what format they are, what their headers say, and turning them into pixels and back.

* :mod:`~mxrec.image.signatures`: the one table of file signatures (format, extension).
* :mod:`~mxrec.image.headers`: the one JPEG marker walker, PNG's ``IHDR``, the one truncation rule.
* :mod:`~mxrec.image.codec`: OpenCV and simplejpeg, loaded one way each; decode, encode, BGR -> RGB.
* :mod:`~mxrec.image.inspect`: sound, empty, zero-size, truncated or corrupt.

May import: :mod:`mxrec.errors` (and numpy, OpenCV, simplejpeg). Nothing here
knows about records, files or datasets.
"""
