"""Opening "a dataset": :func:`open_dataset`, the one entry point every consumer goes through.

A dataset is named by anything :func:`~mxrec.datasets.shard_set.open_files` takes (a ``.rec``, a URL, a list, a
glob, a brace range, a manifest, a folder), by a mixture file ``NAME.mix.json``
(:func:`~mxrec.datasets.mixture.read_mixture_file`), or it is one already opened (any
:class:`~mxrec.io.records.Records`: what :func:`open_dataset` or :func:`~mxrec.datasets.mixture.mix` returned),
which is used as it is: not opened again, its ``.idx`` not read again, its storage settings kept.

Consumers (the doctor, the probe, extraction, Ray) go through :func:`hold_dataset`: it opens a spec with the
consumer's own reading defaults (a doctor reads damaged files: ``duplicates="last"``, not strict) and takes an
opened dataset as it is; the :class:`HeldDataset` it returns closes only what it opened, so a dataset handed in
stays open for the caller's next use. Those that check files rather than read records (``mxrec info``,
``verify``) find the files behind a dataset with :func:`dataset_files`, and a mixture's sources with
:func:`as_mixture`.

The storage settings are one value, :class:`~mxrec.storage.settings.Storage` (``storage=``); the keywords users
already pass are shorthands for it: ``storage_options`` (fsspec options), ``cache_dir``, ``cache_size`` and
``requests`` (the request policy, :class:`~mxrec.storage.settings.RequestPolicy` or its text).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from mxrec.datasets.mixture import MIX_SUFFIX, Mixture, read_mixture_file
from mxrec.datasets.shard_set import Shard, ShardSetReader, open_files, resolve_dataset
from mxrec.datasets.subset import RecordSubset
from mxrec.errors import ParameterError
from mxrec.format.idx import KeyType
from mxrec.io.local_reader import LocalRecordReader
from mxrec.io.records import Records
from mxrec.io.remote_reader import RemoteRecordReader
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
        What :meth:`~mxrec.storage.settings.Storage.of` makes of the one given and the shorthands.

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
    mxrec.datasets.mixture.MixtureError
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


@dataclass(frozen=True)
class HeldDataset:
    """A dataset a consumer reads (:func:`hold_dataset`): ``records``, and ``owned``: it was opened for the consumer
    (:meth:`close` closes it), not handed in opened (left open for the caller)."""

    records: Records
    owned: bool

    def close(self) -> None:
        """Close the records if they were opened for the consumer."""
        if self.owned:
            self.records.close()

    def __enter__(self) -> Records:
        return self.records

    def __exit__(self, *exc: object) -> None:
        self.close()


def hold_dataset(spec: DatasetSpec, index: str | os.PathLike | bool | None = None, key_type: KeyType = int, *,
                 duplicates: Literal["error", "last"] = "error", strict: bool = True, **storage: Any) -> HeldDataset:
    """What a consumer reads: ``spec`` opened by :func:`open_dataset` with the consumer's reading defaults
    (``key_type``, ``duplicates``, ``strict``), or a dataset handed in opened, used as it is.

    Parameters
    ----------
    spec
        Anything :func:`open_dataset` takes.
    index
        The caller's ``.idx`` (refused with an opened dataset, as by :func:`open_dataset`).
    key_type, duplicates, strict
        How the consumer reads a spec it opens (an opened dataset was read as it was opened).
    **storage
        The caller's storage settings (``storage``, ``storage_options``, ``cache_dir``, ``cache_size``,
        ``requests``); those left ``None`` are not given.

    Returns
    -------
    HeldDataset
        The records, and whether they were opened here.

    Raises
    ------
    ParameterError
        An ``index`` or storage setting given with an opened dataset.
    """
    given = {name: value for name, value in storage.items() if value is not None}
    if isinstance(spec, Records):
        return HeldDataset(open_dataset(spec, index, **given), owned=False)
    return HeldDataset(open_dataset(spec, index, key_type, duplicates=duplicates, strict=strict, **given), owned=True)


def is_mixture(spec: object) -> bool:
    """Whether ``spec`` is a mixture: a :class:`~mxrec.datasets.mixture.Mixture` or a mixture file's name."""
    return isinstance(spec, Mixture) or (isinstance(spec, (str, os.PathLike)) and os.fspath(spec).endswith(MIX_SUFFIX))


def as_mixture(spec: Mixture | str | os.PathLike, storage: StorageOptions = None) -> Mixture:
    """The mixture ``spec`` is, or the one its mixture file describes (:func:`is_mixture` says which specs are)."""
    return spec if isinstance(spec, Mixture) else read_mixture_file(spec, storage_from(storage))


def dataset_files(spec: DatasetSpec, storage: StorageOptions = None) -> tuple[list[Shard], str | None, Storage]:
    """The record files behind a dataset, for the tools that check files rather than read records.

    Parameters
    ----------
    spec
        A spec (:func:`~mxrec.datasets.shard_set.resolve_dataset`) or a dataset opened from one file or a shard set
        (a face set's samples: the file they are read from).
    storage
        The storage settings for a spec (an opened dataset has its own).

    Returns
    -------
    tuple
        The shards (a ``.rec`` each, with its ``.idx`` where the dataset has one), the manifest they came from (or
        ``None``) and the storage settings to reach them.

    Raises
    ------
    ParameterError
        A mixture (its files are its sources': :func:`as_mixture`), or a dataset of no files.
    """
    if isinstance(spec, RecordSubset):
        return dataset_files(spec.reader)
    if isinstance(spec, ShardSetReader):
        return list(spec.shards), spec.manifest, spec.storage
    if isinstance(spec, (LocalRecordReader, RemoteRecordReader)):
        return [Shard(spec.path, spec.index_path)], None, spec.storage
    if isinstance(spec, Mixture):
        raise ParameterError(f"{spec.path}: a mixture's files are its sources' (mixture.sources)")
    if isinstance(spec, Records):
        raise ParameterError(f"{spec.path}: a {type(spec).__name__} is read from no record files of its own")
    shards, manifest = resolve_dataset(spec, storage)
    return shards, manifest, storage_from(storage)


def dataset_name(spec: DatasetSpec) -> str:
    """What messages and summaries call a dataset: its path, its reader's ``path``, or a list's paths joined."""
    if isinstance(spec, Records):
        return spec.path
    return os.fspath(spec) if isinstance(spec, (str, os.PathLike)) else ", ".join(map(str, spec))
