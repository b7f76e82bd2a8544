"""Weighted mixtures of datasets: :func:`mix`, one dataset that every consumer takes like any other.

``mix(["ms1m.rec", "s3://b/glint/train.manifest.json"], weights=[0.7, 0.3], label_offsets="auto")`` is a
:class:`Mixture`: a :class:`~mxrec.io.records.Records` whose positions run over its sources laid end to end, and
whose epochs visit them in the chosen proportions (:class:`MixtureOrder`):

* **Shares.** Each epoch, source ``i`` contributes ``round(w_i * samples_per_epoch)`` samples (largest remainder,
  so the shares sum exactly); ``samples_per_epoch`` defaults to the sources' records, ``weights`` to their sizes
  (plain concatenation).
* **Every record before any repeats.** A source's samples are taken, epoch after epoch, from one endless stream of
  whole passes over it (pass ``p`` shuffled as that source alone would be: globally when it is local, in blocks
  when it is remote); epoch ``e`` takes the next share of that stream. A source whose share exceeds its size
  repeats whole passes, then part of one; a source whose share is smaller walks through all its records over
  consecutive epochs before it repeats any.
* **Proportions that hold at every step.** The sources are interleaved, not drawn by chance: the ``j``-th of a
  source's ``k`` samples goes to the fraction ``(j + u) / k`` of the epoch (``u`` a random offset per source and
  epoch), and the samples of all sources are merged in that order. Every run of ``L`` consecutive samples of the
  epoch then holds each source's share of ``L`` to within one or two samples (MosaicML, LitData and Hugging Face
  draw each sample's source by chance: a 5 % source gets 2 to 9 samples of a batch of 128).
* Deterministic in ``(seed, epoch)``; the sampler (:mod:`mxrec.train.sampler`) cuts the order into equal
  lock-step batches per rank as for one dataset, so ``state_dict()`` resumes on the same layout or on another number
  of ranks or batch size, in ``DataLoader`` workers under fork and spawn.
* **Labels.** Face sets and many class sets each number their classes from 0: ``label_offsets="auto"`` moves
  each source's class labels past the previous sources' largest (a list sets them); the class label is the scalar
  label, or the first of a label array. Face sets mix as face sets: their samples are their face records.

A mixture file, ``NAME.mix.json`` (:func:`read_mixture_file`), says the same in JSON and is accepted wherever a
dataset is (:func:`~mxrec.datasets.shard_set.open_dataset`)::

    {"sources": [{"path": "ms1m/train.rec", "weight": 0.7}, {"path": "s3://b/glint.rec", "weight": 0.3}],
     "samples_per_epoch": 1000000, "label_offsets": "auto", "seed": 0}

Paths are relative to the file; URLs are allowed. A mixture inside a mixture is not supported (one clear error).
"""

from __future__ import annotations

import itertools
import json
import math
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mxrec.datasets.face_set import FaceSet, Samples, samples_of
from mxrec.datasets.shard_set import open_files
from mxrec.errors import HeaderError, MxrecError, OptionError, RecordKeyError
from mxrec.format.header import IRHeader, shift_class_label, unpack_header
from mxrec.format.seeds import stream_key
from mxrec.io.order import DEFAULT_SHUFFLE_WINDOW, EpochOrder, ReadPlan, ShuffledOrder
from mxrec.io.records import IOStats, Records, gather
from mxrec.storage.files import read_bytes
from mxrec.storage.filesystem import StorageOptions, is_url, join, parent, storage_of

MIX_SUFFIX = ".mix.json"
MIX_STREAM = 0x6D6978  # separates a mixture's draws from every other stream of the same seed
LabelOffsets = str | Sequence[int] | None


class MixtureError(MxrecError, ValueError):
    """A mixture that cannot be made: weights, label offsets, a source, or a mixture file that is wrong; the message
    names the source or the file."""


def shares_of(weights: Sequence[float], total: int) -> list[int]:
    """Samples per epoch of each source: ``weights`` (summing to anything positive) times ``total``, rounded by the
    largest remainder so that they sum to ``total`` exactly.

    Parameters
    ----------
    weights
        Non-negative weights, not all zero.
    total
        Samples per epoch.

    Returns
    -------
    list of int
        One share per weight.
    """
    w = np.asarray(weights, dtype=np.float64)
    exact = w / w.sum() * total
    shares = np.floor(exact).astype(np.int64)
    short = total - int(shares.sum())
    for i in np.argsort(-(exact - shares), kind="stable")[:short]:  # the largest remainders get one more
        shares[i] += 1
    return shares.tolist()


def passes_text(passes: float) -> str:
    """What a source's share means over epochs: ``"2.4× repeated"``, ``"0.3× — full cycle every 4 epochs"``.

    Parameters
    ----------
    passes
        The share per epoch over the source's records.

    Returns
    -------
    str
        The text.
    """
    if passes > 1:
        return f"{passes:.1f}× repeated"
    if passes == 1:
        return "1× (each record once)"
    if passes > 0:
        return f"{passes:.2g}× — full cycle every {math.ceil(1 / passes - 1e-9)} epochs"
    return "not read"


@dataclass(frozen=True)
class SourceOrder:
    """How one source is visited: its ``size``, ``share`` per epoch, and the order of each pass over it."""

    size: int
    share: int
    passes: ShuffledOrder  # its seed keys the passes, its "epoch" numbers them

    def samples(self, epoch: int) -> np.ndarray:
        """The source's positions of ``epoch``: the next ``share`` of its endless stream of whole passes."""
        if self.share == 0 or self.size == 0:
            return np.empty(0, np.int64)
        start = epoch * self.share
        first, last = start // self.size, (start + self.share - 1) // self.size
        stream = np.concatenate([self.passes(p) for p in range(first, last + 1)])
        skip = start - first * self.size
        return stream[skip:skip + self.share]


@dataclass(frozen=True)
class MixtureOrder(EpochOrder):
    """A mixture's epochs: each source's share, interleaved evenly (see the module docstring).

    Parameters
    ----------
    sources
        Each source's :class:`SourceOrder`.
    bases
        Where each source's positions start in the mixture.
    seed
        What the interleaving is drawn from, with the epoch.
    shuffle
        Shuffle the interleaving's offsets (else each source's samples start at the middle of its slots).
    """

    sources: tuple[SourceOrder, ...]
    bases: tuple[int, ...]
    seed: int
    shuffle: bool

    @property
    def length(self) -> int:  # type: ignore[override]
        return sum(s.share for s in self.sources)

    def __call__(self, epoch: int) -> np.ndarray:
        rng = np.random.default_rng(stream_key(MIX_STREAM, self.seed, epoch))
        fractions, positions = [], []
        for source, base in zip(self.sources, self.bases, strict=True):
            k = source.share
            if not k:
                continue
            offset = rng.random() if self.shuffle else 0.5
            fractions.append((np.arange(k) + offset) / k)
            positions.append(source.samples(epoch) + base)
        if not positions:
            return np.empty(0, np.int64)
        where = np.concatenate(fractions)
        ties = rng.random(len(where))  # (equal fractions: in a random order)
        return np.concatenate(positions)[np.lexsort((ties, where))].astype(np.int64)

    def settings(self) -> dict:
        return {"mixture": [{"records": s.size, "share": s.share, **s.passes.settings()} for s in self.sources],
                "seed": self.seed, "shuffle": self.shuffle}

    def read_plan(self, lookahead: int) -> ReadPlan:
        total = max(self.length, 1)
        parts = tuple(s.passes.read_plan(math.ceil(lookahead * s.share / total)) for s in self.sources)
        return ReadPlan(0, 1, lookahead, parts=parts)


def _label_extent(source: Records, faces: FaceSet | None) -> int:
    """One more than the largest class label of ``source`` (0 when it has none): the identities of ``faces``, the
    face set it is the faces of, else the headers' class labels (every record read once)."""
    if faces is not None:
        return len(faces.ranges)
    largest = -1.0
    for first in range(0, len(source), 4096):
        for payload in source.fetch(range(first, min(len(source), first + 4096))):
            try:
                header, _ = unpack_header(payload)
            except HeaderError:
                continue
            value = float(header.label if header.flag == 0 else header.label[0])
            if math.isfinite(value):
                largest = max(largest, value)
    return math.floor(largest) + 1


class Mixture(Records):
    """Datasets mixed in chosen proportions, read as one (see the module docstring); made by :func:`mix`.

    Each method of the :class:`~mxrec.io.records.Records` contract takes and returns what the contract's does;
    their docstrings say what the mixture adds.

    Parameters
    ----------
    sources
        The datasets mixed; positions run across them in this order.
    names
        What messages call each source.
    weights
        Each source's share of an epoch, relative to the others'.
    samples_per_epoch
        Records an epoch reads, over all sources.
    label_offsets
        Added to the class label of each source's records.
    seed
        What the mixture's draws are made from, with each epoch's seed.
    """

    def __init__(self, sources: Sequence[Records], names: Sequence[str], weights: Sequence[float],
                 samples_per_epoch: int, label_offsets: Sequence[int], seed: int) -> None:
        self.sources = list(sources)
        self.names = list(names)
        self.weights = [float(w) for w in weights]
        self.samples_per_epoch = int(samples_per_epoch)
        self.label_offsets = [int(o) for o in label_offsets]
        self.seed = int(seed)
        self.shares = shares_of(self.weights, self.samples_per_epoch)
        self.starts = np.concatenate([[0], np.cumsum([len(s) for s in self.sources])]).astype(np.int64)
        self.path = "mix(" + ", ".join(self.names) + ")"
        self.index_path = None
        self.damage = None
        self.storage = self.sources[0].storage if self.sources else storage_of(None)
        self._keys: list | None = None

    # -- positions ----------------------------------------------------------------

    def __len__(self) -> int:
        return int(self.starts[-1])

    def _locate(self, position: int) -> tuple[int, int]:
        number = int(np.searchsorted(self.starts, position, side="right")) - 1
        return number, position - int(self.starts[number])

    def fetch(self, positions: Sequence[int] | np.ndarray) -> list[bytes | memoryview]:
        """The records at ``positions``, from their sources (one fetch per source).

        Parameters
        ----------
        positions
            Positions in the mixture.

        Returns
        -------
        list of bytes or memoryview
            The payloads, class labels moved by their source's label offset.

        Raises
        ------
        HeaderError
            A class label cannot be moved (the message names the record).
        """
        return gather(self.starts, positions, self._fetch_source, self.path)

    def _fetch_source(self, number: int, local: np.ndarray) -> list[bytes | memoryview]:
        records = self.sources[number].fetch(local)
        offset = self.label_offsets[number]
        if not offset:
            return records
        try:
            return [shift_class_label(r, offset) for r in records]
        except HeaderError:  # say which record
            for position, payload in zip(local.tolist(), records, strict=True):
                try:
                    shift_class_label(payload, offset)
                except HeaderError as exc:
                    raise HeaderError(f"{self.sources[number].describe(position)}: its class label cannot be moved "
                                      f"by the mixture's label offset {offset}: {exc}") from None
            raise

    def view(self, position: int) -> memoryview:
        """The record at ``position``, its label moved (a copy: see :meth:`fetch`).

        Parameters
        ----------
        position
            Which record of the mixture.

        Returns
        -------
        memoryview
            Its payload.
        """
        return memoryview(self.fetch([position])[0])

    def header(self, position: int) -> IRHeader:
        """The header of the record at ``position``, from its source, the class label moved by the offset.

        Parameters
        ----------
        position
            A position in the mixture (negative: from the end).

        Returns
        -------
        IRHeader
            Its header.
        """
        number, local = self._locate(position if position >= 0 else position + len(self))
        header = self.sources[number].header(local)
        offset = self.label_offsets[number]
        if not offset:
            return header
        if header.flag == 0:
            return header._replace(label=header.label + offset)
        labels = np.array(header.label, np.float32)
        labels[0] += offset
        return header._replace(label=labels)

    @property
    def keys(self) -> list:
        """``(source number, key)`` of every record, in position order."""
        if self._keys is None:
            self._keys = [(n, k) for n, source in enumerate(self.sources) for k in source.keys]
        return self._keys

    def position(self, key: object) -> int:
        """The position of a source's record.

        Parameters
        ----------
        key
            ``(source number, key in that source)``.

        Returns
        -------
        int
            Its position in the mixture.

        Raises
        ------
        RecordKeyError
            ``key`` is not such a pair, or the source has no such key.
        """
        try:
            number, inner = key  # type: ignore[misc]
            return int(self.starts[number]) + self.sources[number].position(inner)
        except (TypeError, ValueError, IndexError):
            raise RecordKeyError(self.path, key=key) from None

    def describe(self, position: int) -> str:
        """Where a record is, for messages: as its source describes it.

        Parameters
        ----------
        position
            A position in the mixture.

        Returns
        -------
        str
            ``file: record key`` of the source's record.
        """
        number, local = self._locate(position)
        return self.sources[number].describe(local)

    @property
    def nbytes(self) -> int:
        """Bytes of every source's ``.rec`` file(s)."""
        return sum(source.nbytes for source in self.sources)

    def __iter__(self) -> Iterator[bytes]:
        for first in range(0, len(self), 4096):
            yield from self.read_batch(range(first, min(len(self), first + 4096)))

    # -- order and reads ---------------------------------------------------------

    def epoch_order(self, *, shuffle: bool, seed: int = 0, shuffle_block: int | None = None,
                    shuffle_window: int = DEFAULT_SHUFFLE_WINDOW, chunk_megabytes: float = 0) -> MixtureOrder:
        """The mixture's epochs: each source's passes ordered as that source alone orders them, interleaved by share.

        Parameters
        ----------
        shuffle
            Shuffle each source and the interleaving's offsets (else file order, evenly interleaved).
        seed
            Drawn from with the mixture's own seed and each source's number.
        shuffle_block
            Records per block of every source's block shuffle (as in
            :meth:`Records.epoch_order <mxrec.io.records.Records.epoch_order>`).
        shuffle_window
            Blocks of a source mixed at a time.
        chunk_megabytes
            MXNet's ``shuffle_chunk_size``, for every source.

        Returns
        -------
        MixtureOrder
            The order.

        Raises
        ------
        MixtureError
            A source is itself a mixture.
        """
        orders = []
        for number, (source, share) in enumerate(zip(self.sources, self.shares, strict=True)):
            own = source.epoch_order(shuffle=shuffle, seed=stream_key(MIX_STREAM, self.seed, seed, number),
                                     shuffle_block=shuffle_block, shuffle_window=shuffle_window,
                                     chunk_megabytes=chunk_megabytes)
            if not isinstance(own, ShuffledOrder):
                raise MixtureError(f"{self.names[number]}: a mixture inside a mixture is not supported: list its "
                                   "sources in one mixture")
            orders.append(SourceOrder(len(source), share, own))
        return MixtureOrder(tuple(orders), tuple(int(b) for b in self.starts[:-1]),
                            stream_key(MIX_STREAM, self.seed, seed), shuffle)

    def follow(self, plan: ReadPlan, *, origin: int = 0) -> None:
        """Get every source ready for its part of an epoch's reads.

        Parameters
        ----------
        plan
            The reads; each source follows its own part (a plan without parts: the same for every source).
        origin
            Unused: each source's part is in that source's numbering.
        """
        for number, source in enumerate(self.sources):
            source.follow(plan.parts[number] if plan.parts else plan)

    def io_stats(self) -> IOStats:
        """Requests, bytes and block-cache lookups made so far by the sources.

        Returns
        -------
        IOStats
            Their sum.
        """
        return sum((source.io_stats() for source in self.sources), IOStats())

    def close(self) -> None:
        """Close every source."""
        for source in self.sources:
            source.close()

    # -- what it is ----------------------------------------------------------------

    def describe_sources(self) -> list[dict[str, Any]]:
        """What each source contributes.

        Returns
        -------
        list of dict
            Per source: ``path`` (its name), ``records``, ``weight``, ``share`` (records per epoch), ``passes``
            (per epoch) and ``label_offset``.
        """
        out = []
        for name, source, weight, share, offset in zip(self.names, self.sources, self.weights, self.shares,
                                                       self.label_offsets, strict=True):
            out.append({"path": name, "records": len(source), "weight": weight, "share": share,
                        "passes": share / len(source) if len(source) else 0.0, "label_offset": offset})
        return out

    def format_text(self) -> str:
        """The mixture in a few lines, for people.

        Returns
        -------
        str
            Each source's records, weight, share and what that means over epochs.
        """
        lines = [f"mixture of {len(self.sources)} sources, {self.samples_per_epoch} samples per epoch"]
        for row in self.describe_sources():
            lines.append(f"  {row['path']}: {row['records']} records, weight {row['weight']:g}, {row['share']} "
                         f"per epoch ({passes_text(row['passes'])}), label offset {row['label_offset']}")
        return "\n".join(lines)

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_keys"] = None
        return state

    def __repr__(self) -> str:
        return f"Mixture({self.names}, shares={self.shares})"


def _checked_weights(weights: Sequence[float] | None, sizes: list[int], names: list[str]) -> list[float]:
    if weights is None:
        if not sum(sizes):
            raise MixtureError(f"mixture of {', '.join(names)}: every source is empty")
        return [float(n) for n in sizes]
    values = list(weights)
    if len(values) != len(sizes):
        raise MixtureError(f"mixture of {len(sizes)} sources got {len(values)} weights")
    for name, w in zip(names, values, strict=True):
        if not isinstance(w, (int, float)) or isinstance(w, bool) or math.isnan(w) or w < 0 or math.isinf(w):
            raise MixtureError(f"{name}: weight {w!r} is not a non-negative number")
    if not sum(values):
        raise MixtureError(f"mixture of {', '.join(names)}: the weights are all zero")
    for name, w, n in zip(names, values, sizes, strict=True):
        if w > 0 and n == 0:
            raise MixtureError(f"{name}: an empty source cannot have weight {w}")
    return [float(w) for w in values]


def _checked_offsets(label_offsets: LabelOffsets, sources: list[Samples], names: list[str]) -> list[int]:
    if label_offsets is None:
        return [0] * len(sources)
    if isinstance(label_offsets, str):
        if label_offsets != "auto":
            raise MixtureError(f"label_offsets must be 'auto', a list of offsets or None, not {label_offsets!r}")
        offsets, next_free = [], 0
        for source in sources:
            offsets.append(next_free)
            next_free += _label_extent(source.records, source.faces)
        return offsets
    offsets = list(label_offsets)
    if len(offsets) != len(sources):
        raise MixtureError(f"mixture of {len(sources)} sources got {len(offsets)} label offsets")
    for name, o in zip(names, offsets, strict=True):
        if not isinstance(o, (int, np.integer)) or isinstance(o, bool) or o < 0:
            raise MixtureError(f"{name}: label offset {o!r} is not a whole number of 0 or more")
    spans = sorted((int(o), int(o) + _label_extent(s.records, s.faces), n)
                   for o, s, n in zip(offsets, sources, names, strict=True))
    for (_, end, name), (start, _, other) in itertools.pairwise(spans):
        if start < end:
            raise MixtureError(f"label offsets make classes overlap: {name}'s labels run to {end - 1}, {other}'s "
                               f"start at {start} (label_offsets='auto' places them one after another)")
    return [int(o) for o in offsets]


def mix(sources: Sequence[Any], weights: Sequence[float] | None = None, *, samples_per_epoch: int | None = None,
        label_offsets: LabelOffsets = None, seed: int = 0, storage: StorageOptions = None) -> Mixture:
    """Datasets mixed in chosen proportions, read as one dataset (see the module docstring).

    Parameters
    ----------
    sources
        Dataset specs (anything :func:`~mxrec.datasets.shard_set.open_dataset` opens: a ``.rec``, a shard set, a
        URL) or datasets already opened.
    weights
        One non-negative weight per source (default: the sources' sizes: a plain concatenation).
    samples_per_epoch
        Samples per epoch (default: the sources' records together).
    label_offsets
        ``None`` (labels as they are), ``"auto"`` (each source's class labels moved past the previous sources'
        largest) or one offset per source.
    seed
        What the mixture's draws come from (with the sampler's seed and the epoch).
    storage
        Storage settings for the sources given as specs.

    Returns
    -------
    Mixture
        The mixture.

    Raises
    ------
    MixtureError
        Weights negative, NaN, all zero or of the wrong length; label offsets of the wrong length or making classes
        overlap; a mixture among the sources; no source.
    """
    items = list(sources)
    if not items:
        raise MixtureError("a mixture needs at least one source")
    opened: list[Samples] = []
    names: list[str] = []
    try:
        for item in items:
            opened.append(_source(item, storage))
            names.append(item.path if isinstance(item, Records) else str(os.fspath(item)))
        sizes = [len(s.records) for s in opened]
        checked = _checked_weights(weights, sizes, names)
        total = sum(sizes) if samples_per_epoch is None else samples_per_epoch
        if not isinstance(total, (int, np.integer)) or isinstance(total, bool) or total < 1:
            raise MixtureError(f"samples_per_epoch must be a whole number of at least 1, not {total!r}")
        offsets = _checked_offsets(label_offsets, opened, names)
    except BaseException:
        for source, item in zip(opened, items, strict=False):  # (those opened so far)
            if source.records is not item:
                source.records.close()
        raise
    return Mixture([s.records for s in opened], names, checked, int(total), offsets, seed)


def _source(item: Any, storage: StorageOptions) -> Samples:
    """The samples of one source: a dataset already opened, or a spec opened here (a face set's faces)."""
    if isinstance(item, Mixture) or (isinstance(item, (str, os.PathLike)) and os.fspath(item).endswith(MIX_SUFFIX)):
        name = item.path if isinstance(item, Mixture) else os.fspath(item)
        raise MixtureError(f"{name}: a mixture inside a mixture is not supported: list its sources in one mixture")
    if isinstance(item, Records):
        return samples_of(item)
    try:
        return samples_of(open_files(item, storage_options=storage))
    except (MxrecError, OSError) as exc:
        raise MixtureError(f"{os.fspath(item) if isinstance(item, os.PathLike) else item}: cannot be opened as a "
                           f"source of the mixture: {exc}") from None


@dataclass(frozen=True)
class MixtureFile:
    """What a ``NAME.mix.json`` file says (:func:`parse_mixture_file`): its ``path``, the ``sources`` (paths made
    relative to the file's folder, URLs as they are), their ``weights`` (``None``: by size), and
    ``samples_per_epoch``, ``label_offsets`` and ``seed`` as :func:`mix` takes them."""

    path: str
    sources: tuple[str, ...]
    weights: tuple[Any, ...] | None
    samples_per_epoch: Any
    label_offsets: Any
    seed: Any


def parse_mixture_file(path: str | os.PathLike, storage: StorageOptions = None) -> MixtureFile:
    """What a mixture file says, read without opening its sources (the doctor checks them one by one).

    Parameters
    ----------
    path
        The ``NAME.mix.json`` file (a path or URL).
    storage
        Storage settings to read it with.

    Returns
    -------
    MixtureFile
        Its sources and settings.

    Raises
    ------
    MixtureError
        The file cannot be read, is not valid JSON, names no sources, or has a field it should not.
    """
    path = os.fspath(path)
    try:
        data = json.loads(read_bytes(path, storage))
    except (ValueError, UnicodeDecodeError) as exc:
        raise MixtureError(f"{path}: not a mixture file: not JSON ({exc})") from None
    except OSError as exc:
        raise MixtureError(f"{path}: cannot read the mixture file: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("sources"), list) or not data["sources"]:
        raise MixtureError(f"{path}: a mixture file needs \"sources\": a list of {{\"path\": ..., \"weight\": ...}}")
    folder = parent(path)
    specs, weights = [], []
    for number, entry in enumerate(data["sources"]):
        if isinstance(entry, str):
            entry = {"path": entry}
        if not isinstance(entry, dict) or not isinstance(entry.get("path"), str):
            raise MixtureError(f"{path}: source {number} needs a \"path\"")
        name = entry["path"]
        if name.endswith(MIX_SUFFIX):
            raise MixtureError(f"{path}: {name}: a mixture inside a mixture is not supported: list its sources in "
                               "one mixture")
        specs.append(name if is_url(name) or os.path.isabs(name) else join(folder, name))
        weights.append(entry.get("weight"))
    if any(w is None for w in weights) and not all(w is None for w in weights):
        raise MixtureError(f"{path}: give every source a weight, or none (weights by size)")
    unknown = set(data) - {"sources", "samples_per_epoch", "label_offsets", "seed"}
    if unknown:
        raise MixtureError(f"{path}: unknown field(s) {sorted(unknown)} (known: sources, samples_per_epoch, "
                           "label_offsets, seed)")
    return MixtureFile(path, tuple(specs), None if weights[0] is None else tuple(weights),
                       data.get("samples_per_epoch"), data.get("label_offsets"), data.get("seed", 0))


def read_mixture_file(path: str | os.PathLike, storage: StorageOptions = None) -> Mixture:
    """The mixture a ``NAME.mix.json`` file describes (see the module docstring); paths relative to its folder.

    Parameters
    ----------
    path, storage
        As for :func:`parse_mixture_file`; the sources are opened with the same storage settings.

    Returns
    -------
    Mixture
        The mixture.

    Raises
    ------
    MixtureError
        The file is not valid JSON, names no sources, or describes a mixture :func:`mix` refuses.
    """
    found = parse_mixture_file(path, storage)
    try:
        return mix(found.sources, found.weights, samples_per_epoch=found.samples_per_epoch,
                   label_offsets=found.label_offsets, seed=found.seed, storage=storage)
    except (MixtureError, OptionError) as exc:
        raise MixtureError(f"{found.path}: {exc}") from None
