"""The ``layout`` check of an InsightFace face set: its header record, identity ranges and face labels.

The layout and what makes it consistent are described in
:mod:`mxrec.format.insightface`; this check applies
:func:`~mxrec.format.insightface.layout_problems` to the facts of every
record (:mod:`mxrec.doctor.contents`), so each violation is reported under
the key where it is: the header record's record count, a face or identity
key with no record, a key outside the layout, an identity range that does
not start where the previous one ends (faces of no identity, or of two), an
empty range, and each face whose label is not the class of the identity
holding it. A ``property`` file beside the ``.rec`` (InsightFace's
``identities,height,width``) must agree on the number of identities.
"""

from __future__ import annotations

import os

import numpy as np

from mxrec.datasets.face_set import read_property
from mxrec.doctor.contents import RecordContent
from mxrec.doctor.report import Check, Problem
from mxrec.format.insightface import HEADER_KEY, FaceLayout, key_range, layout_problems


def check_face_layout(contents: list[RecordContent], layout: FaceLayout | None,
                      rec_path: str | os.PathLike | None = None) -> Check:
    """The ``layout`` check; ``layout`` is what the record under key 0 declares (``None``: there is no header)."""
    if layout is None:
        return Check("layout", False, f"no InsightFace header record under key {HEADER_KEY} (flag 2, labels "
                                      "[first identity key, end], no image); the layout is found through the .idx")
    keyed = [c for c in contents if type(c.key) is int]
    ranges = {c.key: None if c.labels is None else key_range(c.flag, c.labels, c.image_bytes)
              for c in keyed if layout.identity_start <= c.key < layout.end}
    faces = [c for c in keyed if 1 <= c.key < layout.identity_start and c.labels]
    face_labels = (np.array([c.key for c in faces], np.int64), np.array([c.labels[0] for c in faces], np.float64))
    positions = {c.key: c.at for c in keyed}
    problems = [Problem(where, what, positions.get(where) if type(where) is int else None) for where, what in
                layout_problems(layout, [c.key for c in keyed], ranges, face_labels)]
    details = {"identities": layout.identities, "faces": layout.faces, "identity_start": layout.identity_start,
               "records": layout.end}
    prop = None if rec_path is None else read_property(os.path.dirname(os.path.abspath(rec_path)))
    if prop is not None:
        details["property"] = {"identities": prop[0], "height": prop[1], "width": prop[2]}
        if prop[0] != layout.identities:
            problems.append(Problem("property", f"says {prop[0]} identities (what training takes as the number of "
                                                f"classes); the identity records are {layout.identities}"))
    summary = (f"InsightFace face set: {layout.identities} identities (keys {layout.identity_start}.."
               f"{layout.end - 1}), {layout.faces} faces (keys 1..{layout.identity_start - 1})"
               + (f"; {len(problems)} problem(s)" if problems else ""))
    return Check("layout", not problems, summary, problems, details=details)
