"""The samples of a dataset: what the iterators and the PyTorch datasets read, opened one way.

A dataset's samples are all of its records, or, for an InsightFace face set,
its face records only (:func:`~mxrec.datasets.face_set.samples_of`), read
through a :class:`~mxrec.datasets.subset.RecordSubset` whose positions are the
samples. :func:`open_samples` does both steps, so every consumer gets the same
samples from the same specification, or from a dataset already opened.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from typing import Any

from mxrec.datasets.face_set import Samples, samples_of
from mxrec.datasets.opening import open_dataset
from mxrec.io.records import Records
from mxrec.storage.block_cache import BlockCache
from mxrec.storage.filesystem import StorageOptions


def open_samples(spec: str | os.PathLike | Sequence[str | os.PathLike] | Records, *,
                 index: str | os.PathLike | bool | None = None, layout: str = "auto",
                 storage_options: StorageOptions = None, cache_dir: str | os.PathLike | BlockCache | None = None,
                 **storage: Any) -> Samples:
    """Open ``spec`` (anything :func:`~mxrec.datasets.opening.open_dataset` takes, an opened dataset included)
    and find its samples.

    ``layout``: ``"auto"`` (a face set's faces, else every record), ``"insightface"`` (it must be a face set)
    or ``"plain"`` (every record); a wrong name is a :class:`~mxrec.errors.ParameterError`. ``storage``: the
    storage shorthands of :func:`~mxrec.datasets.opening.open_dataset`. The samples own (``Samples.close``
    closes) what was opened here, never a dataset given opened.
    """
    reader = open_dataset(spec, index, storage_options=storage_options, cache_dir=cache_dir, **storage)
    try:
        found = samples_of(reader, layout)
    except BaseException:
        if reader is not spec:
            reader.close()
        raise
    return dataclasses.replace(found, owned=reader is not spec)
