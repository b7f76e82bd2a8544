"""The samples of a dataset: what the iterators and the PyTorch datasets read, opened one way.

A dataset's samples are all of its records, or, for an InsightFace face set,
its face records only (:func:`~mxrec.datasets.face_set.read_face_set`), read
through a :class:`~mxrec.datasets.subset.RecordSubset` whose positions are the
samples. :func:`open_samples` does both steps, so every consumer gets the same
samples from the same specification.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from mxrec.datasets.face_set import FaceSet, check_layout_name, read_face_set
from mxrec.datasets.shard_set import open_dataset
from mxrec.datasets.subset import RecordSubset
from mxrec.io.records import Records
from mxrec.storage.block_cache import BlockCache
from mxrec.storage.filesystem import StorageOptions


@dataclass(frozen=True)
class Samples:
    """``records``: one record per sample; ``faces``: the face set they are the faces of, or ``None``."""

    records: Records
    faces: FaceSet | None


def open_samples(spec: str | os.PathLike | Sequence[str | os.PathLike], *,
                 index: str | os.PathLike | bool | None = None, layout: str = "auto",
                 storage_options: StorageOptions = None,
                 cache_dir: str | os.PathLike | BlockCache | None = None) -> Samples:
    """Open ``spec`` (anything :func:`~mxrec.datasets.shard_set.open_dataset` takes) and find its samples.

    ``layout``: ``"auto"`` (a face set's faces, else every record), ``"insightface"`` (it must be a face set)
    or ``"plain"`` (every record); a wrong name is a :class:`~mxrec.errors.ParameterError`.
    """
    check_layout_name(layout)
    reader = open_dataset(spec, index, storage_options=storage_options, cache_dir=cache_dir)
    try:
        faces = read_face_set(reader, layout)
    except BaseException:
        reader.close()
        raise
    return Samples(reader if faces is None else RecordSubset(reader, faces.positions), faces)
