"""Grain (the JAX data loader) over any dataset mxrec opens: a random-access data source and a decoding map.

* :class:`RecordSource`: Grain's ``RandomAccessDataSource`` over a ``.rec``, a remote one, a shard set, a
  mixture (``mxrec.mix``, ``NAME.mix.json``): anything :func:`~mxrec.datasets.opening.open_dataset` opens, or a
  dataset already opened. Element ``i`` is ``{"position": i, "record": bytes}``. It pickles to what reopens it
  (Grain's worker processes) and has a stable ``repr`` (Grain's checkpoints).
* :class:`Decode`: a Grain map running mxrec's decoding and augmentation steps (``ImageRecordIter``'s
  parameters, or your own steps in ``aug_list``: :func:`mxrec.train.default_steps`,
  :mod:`mxrec.transforms.steps`) and normalisation: ``{"image", "label", "position"}``. Its random draws come
  from the sample's stream keyed by ``(seed, epoch, record)`` as everywhere in mxrec. As a
  ``MapWithIndex`` (``MapDataset.map_with_index``) the epoch is Grain's element index over the source's length,
  so epoch 0 gives ``ImageRecordIter``'s very images; ``grain.DataLoader`` hands its maps no index, and there it
  is a ``RandomMap``: the epoch slot is a draw from the generator Grain gives each record (seeded by the
  sampler's seed and the record's place). Either way the same under shuffling, workers and a restored
  checkpoint.

::

    import grain, mxrec.grain
    source = mxrec.grain.RecordSource("s3://bucket/train-{00000..00015}.rec")
    decode = mxrec.grain.Decode(source, data_shape=(3, 224, 224), random_resized_crop=True, rand_mirror=True)
    ds = grain.MapDataset.source(source).shuffle(seed=0).map_with_index(decode).batch(256)

Needs ``grain`` (``pip install 'mxrec[grain]'``; no JAX). May import :mod:`mxrec.errors`, :mod:`mxrec.datasets`,
:mod:`mxrec.io`, :mod:`mxrec.train`.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from mxrec.datasets.opening import open_dataset
from mxrec.errors import ParameterError, import_extra
from mxrec.io.records import Records
from mxrec.train.params import preprocess_params
from mxrec.train.sample_loader import RecordSampleLoader

grain = import_extra("grain", "mxrec.grain needs Grain, which is not installed", "grain")

LAYOUTS = ("HWC", "CHW")


class RecordSource:
    """Grain's random-access data source over a dataset mxrec opens (see the module docstring).

    Parameters
    ----------
    dataset
        A dataset spec, a mixture file, or an opened dataset.
    **open_options
        As :func:`~mxrec.datasets.opening.open_dataset` takes them (``storage_options``, ``cache_dir``, ...).

    Raises
    ------
    ParameterError
        Options given with an opened dataset.
    """

    def __init__(self, dataset: Any, **open_options: Any) -> None:
        self.dataset: Records = open_dataset(dataset, **open_options)

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> dict[str, Any]:
        position = int(index)
        return {"position": position, "record": bytes(self.dataset[position])}

    def __repr__(self) -> str:  # what Grain's checkpoints compare: the same dataset gives the same text
        return f"mxrec.grain.RecordSource({self.dataset.path!r}, records={len(self.dataset)})"


class Decode(grain.transforms.MapWithIndex, grain.transforms.RandomMap):
    """Decode, augment and normalise a :class:`RecordSource` element as ``ImageRecordIter`` does.

    Parameters
    ----------
    source
        The source whose elements it decodes (its length turns Grain's element index into the epoch; its
        dataset names records in errors).
    layout
        ``"HWC"`` (JAX's usual, the default) or ``"CHW"`` (``ImageRecordIter``'s) for ``"image"``.
    dtype
        The image's dtype (``"float32"``, ``"uint8"``, ...).
    **params
        ``ImageRecordIter``'s augmentation and normalisation parameters (``data_shape`` required), and
        ``label_width``, ``fast_decode``, ``aug_list``, ``seed``.

    Raises
    ------
    ParameterError
        A parameter is unknown or out of range.
    """

    def __init__(self, source: RecordSource, *, layout: str = "HWC", dtype: str = "float32", **params: Any) -> None:
        if layout not in LAYOUTS:
            raise ParameterError(f"Decode: layout must be one of {LAYOUTS}, not {layout!r}")
        self.augment, self.normalize = preprocess_params(params, "Decode", extra=("label_width", "seed"), decode=True)
        self.source, self.layout, self.dtype = source, layout, dtype
        self.label_width = int(params.get("label_width", 1))
        self.fast_decode = bool(params.get("fast_decode", False))
        self.steps = None if params.get("aug_list") is None else tuple(params["aug_list"])
        self.seed = int(params.get("seed", 0))
        self._local = threading.local()  # Grain maps on threads: each its loader (it holds decode buffers)
        self._loader()  # the parameters checked now, not in a worker

    def _loader(self) -> RecordSampleLoader:
        loader = getattr(self._local, "loader", None)
        if loader is None:
            loader = RecordSampleLoader(self.source.dataset, self.augment, self.normalize, dtype=self.dtype,
                                        label_width=self.label_width, seed=self.seed, view=self._view,
                                        fast_decode=self.fast_decode, steps=self.steps)
            self._local.loader = loader
        return loader

    def _view(self, position: int) -> memoryview:
        return self._local.record  # the element being decoded on this thread

    def map_with_index(self, index: int, element: dict[str, Any]) -> dict[str, Any]:
        """Decode ``element`` with the random draws of epoch ``index // len(source)``.

        Parameters
        ----------
        index
            Grain's element index (over all epochs).
        element
            A :class:`RecordSource` element.

        Returns
        -------
        dict
            ``{"image", "label", "position"}`` of ``element``.
        """
        return self._decode(element, int(index) // max(1, len(self.source)))

    def random_map(self, element: dict[str, Any], rng: np.random.Generator) -> dict[str, Any]:
        """Decode ``element``, the epoch slot of its random stream drawn from ``rng``.

        Parameters
        ----------
        element
            A :class:`RecordSource` element.
        rng
            Grain's generator for this element.

        Returns
        -------
        dict
            ``{"image", "label", "position"}`` of ``element``.
        """
        return self._decode(element, int(rng.integers(1 << 62)))

    def _decode(self, element: dict[str, Any], epoch: int) -> dict[str, Any]:
        loader = self._loader()
        position = int(element["position"])
        data = np.empty(loader.shape, loader.dtype)
        label = np.empty(self.label_width, np.float32)
        self._local.record = memoryview(element["record"])
        try:
            loader.load(position, epoch, data, label)
        finally:
            self._local.record = None
        image = np.ascontiguousarray(data.transpose(1, 2, 0)) if self.layout == "HWC" else data
        return {"image": image, "label": label, "position": position}

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_local"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._local = threading.local()


__all__ = ["Decode", "RecordSource"]
