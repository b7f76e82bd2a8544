"""Opening "a dataset": :func:`open_dataset`, the one entry point every consumer goes through.

A dataset is named by anything :func:`~mxrec.datasets.shard_set.open_files` takes (a ``.rec``, a URL, a list, a
glob, a brace range, a manifest, a folder), by a mixture file ``NAME.mix.json``
(:func:`~mxrec.datasets.mixture.read_mixture_file`), or it is one already opened (any
:class:`~mxrec.io.records.Records`: what :func:`open_dataset` or :func:`~mxrec.datasets.mixture.mix` returned),
which is used as it is: not opened again, its ``.idx`` not read again, its storage settings kept.

The storage settings are one value, :class:`~mxrec.storage.settings.Storage` (``storage=``); the keywords users
already pass are shorthands for it: ``storage_options`` (fsspec options), ``cache_dir``, ``cache_size`` and
``requests`` (the request policy, :class:`~mxrec.storage.settings.RequestPolicy` or its text).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Literal

from mxrec.datasets.mixture import MIX_SUFFIX, read_mixture_file
from mxrec.datasets.shard_set import open_files
from mxrec.errors import ParameterError
from mxrec.format.idx import KeyType
from mxrec.io.records import Records
from mxrec.storage.block_cache import BlockCache
from mxrec.storage.filesystem import StorageOptions
from mxrec.storage.settings import RequestPolicy, Storage

DatasetSpec = str | os.PathLike | Sequence[str | os.PathLike] | Records


def storage_from(storage: StorageOptions = None, *, storage_options: StorageOptions = None,
                 cache_dir: str | os.PathLike | None = None, cache_size: int | str | None = None,
                 requests: RequestPolicy | str | None = None) -> Storage:
    """The one storage value from what a caller gave: ``storage``, or the older ``storage_options``, with the
    shorthands laid over it.

    Parameters
    ----------
    storage
        A :class:`~mxrec.storage.settings.Storage` (or fsspec options).
    storage_options
        fsspec options, the older keyword (or a :class:`~mxrec.storage.settings.Storage`).
    cache_dir, cache_size
        The block cache's folder and bound.
    requests
        The request policy (or its text, ``"attempts=4,read_timeout=20"``).

    Returns
    -------
    Storage
        The settings.

    Raises
    ------
    ParameterError
        Both ``storage`` and ``storage_options`` were given.
    """
    if storage is not None and storage_options is not None:
        raise ParameterError("give storage= (a mxrec.Storage) or storage_options= (fsspec options), not both")
    return Storage.of(storage if storage is not None else storage_options, cache_dir=cache_dir,
                      cache_size=cache_size, policy=requests)


def open_dataset(spec: DatasetSpec, index: str | os.PathLike | bool | None = None, key_type: KeyType = int, *,
                 duplicates: Literal["error", "last"] = "error", strict: bool = True, storage: StorageOptions = None,
                 storage_options: StorageOptions = None, cache_dir: str | os.PathLike | BlockCache | None = None,
                 cache_size: int | str | None = None, requests: RequestPolicy | str | None = None) -> Records:
    """Open a dataset however it is named (see the module docstring).

    Parameters
    ----------
    spec
        A dataset spec (:func:`~mxrec.datasets.shard_set.open_files`), a mixture file ``NAME.mix.json``, or a
        dataset already opened (returned as it is).
    index, key_type, duplicates, strict
        As :func:`~mxrec.datasets.shard_set.open_files` takes them (not for an opened dataset or a mixture).
    storage
        The storage settings (:class:`~mxrec.storage.settings.Storage`).
    storage_options, cache_dir, cache_size, requests
        Shorthands for parts of ``storage`` (``cache_dir`` may be a
        :class:`~mxrec.storage.block_cache.BlockCache`).

    Returns
    -------
    Records
        One file's reader, a :class:`~mxrec.datasets.shard_set.ShardSetReader`, a
        :class:`~mxrec.datasets.mixture.Mixture`, or ``spec`` itself.

    Raises
    ------
    ParameterError
        Settings given with a dataset already opened (it keeps those it was opened with).
    ManifestError
        A shard is missing or differs from the manifest.
    MixtureError
        A mixture file that cannot be used.
    """
    cache = cache_dir if isinstance(cache_dir, BlockCache) else None
    settings = storage_from(storage, storage_options=storage_options,
                            cache_dir=None if cache is not None else cache_dir, cache_size=cache_size,
                            requests=requests)
    if isinstance(spec, Records):
        given = [name for name, value in (("index", index), ("storage", storage), ("storage_options",
                 storage_options), ("cache_dir", cache_dir), ("cache_size", cache_size), ("requests", requests))
                 if value is not None]
        if given or key_type is not int or duplicates != "error" or not strict:
            raise ParameterError(f"{spec.path}: an opened dataset is read as it was opened; give "
                                 f"{', '.join(given) or 'these settings'} to open_dataset instead")
        return spec
    if isinstance(spec, (str, os.PathLike)) and os.fspath(spec).endswith(MIX_SUFFIX):
        if index is not None:
            raise ParameterError(f"{os.fspath(spec)}: a mixture's sources each use their own .idx (index=None)")
        return read_mixture_file(spec, settings)
    return open_files(spec, index, key_type, duplicates=duplicates, strict=strict, storage_options=settings,
                      cache_dir=cache)
