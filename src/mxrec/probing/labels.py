"""What the batches' labels should look like: the dataset's label distribution, and how far the batches are from it.

:func:`dataset_labels` learns the distribution cheaply: an InsightFace face set's identities are known without
reading a face (:class:`~mxrec.datasets.face_set.FaceSet`); otherwise the IRHeaders of records at positions
spread evenly over the dataset, read with one :meth:`~mxrec.io.records.Records.fetch` -- every record up to
:data:`CHEAP_SAMPLE` where random access is cheap (a local file), else :data:`MIN_SAMPLE` to
:data:`MAX_SAMPLE` records, about :data:`SAMPLE_BYTES` of them (remote data).

:func:`compare` tests the batches against it with two statistics, each against what a shuffled read of as
many samples would give (simulated: labels drawn from the dataset's distribution into batches of the probed
sizes, :data:`SIMULATIONS` times, seeded; when the distribution is itself a sample, a fresh sample of that
size is drawn too):

* **shares**: the total-variation distance between the batches' label histogram and the dataset's (half the
  sum of the absolute differences of the shares: the fraction of samples that would have to change label).
  Off when above every simulated read and at least :data:`MIN_SHIFT` above their median: a short read in
  label order (it sees one class where a shuffled read of as many samples sees most of them), a mixture whose
  shares are off, a weighted sampler, a subset;
* **mixing**: the mean number of distinct labels per batch, against the same labels shuffled between the
  batches (a permutation test: whatever their shares, how mixed the batches could be). Reading in label
  order, or a block shuffle whose blocks are long runs of one class, puts far fewer in each batch: off when
  below every shuffle and at least ``max(0.5, 25 %)`` below their mean. Their ratio to a shuffled read of the
  dataset's (``mixing_ratio``, :func:`mxrec.io.order.mixing`'s figure) below :data:`POOR_MIXING` on data stored
  in label order is a block shuffle that mixes poorly for that order (a warning).

The summary also gives what a shuffled read of the dataset would hold: the classes covered and per batch.
Both statistics hold for any number of batches.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mxrec.datasets.face_set import FaceSet
from mxrec.errors import HeaderError
from mxrec.format.header import label_array, unpack_header
from mxrec.io.records import Records

CHEAP_SAMPLE = 20_000  # headers read where random access is cheap (all of them in smaller datasets)
MIN_SAMPLE, MAX_SAMPLE = 64, 256  # headers read where every record costs a request
SAMPLE_BYTES = 16 << 20  # ... about this many bytes of records
SIMULATIONS = 200
MIN_SHIFT = 0.1  # total-variation distance beyond chance that counts as off
MIN_BATCH = 4  # batches smaller than this say little about mixing
MAX_SIMULATED = 1 << 17  # batch samples simulated (the first batches' when more were probed)
POOR_MIXING = 0.9  # distinct labels per batch below this share of a shuffled read's: the shuffle mixes poorly


@dataclass
class DatasetLabels:
    """The dataset's labels as :func:`dataset_labels` found them: the first label of each record read, in
    position order; how many records the dataset holds; whether every one was read; and from what."""

    labels: np.ndarray  # float64
    total: int
    exact: bool
    source: str  # "headers" or "identities"

    def describe(self) -> str:
        """How they were learnt, for messages: ``sampled 256 headers``, ``all 48 headers``..."""
        if self.source == "identities":
            return f"the face set's identities of all {self.total} faces"
        if self.exact:
            return f"all {len(self.labels)} headers"
        return f"sampled {len(self.labels)} headers of {self.total} records"


def spread_positions(total: int, count: int) -> np.ndarray:
    """``count`` positions spread evenly over ``0 .. total - 1`` (all of them when ``count >= total``)."""
    if count >= total:
        return np.arange(total, dtype=np.int64)
    return np.unique(np.linspace(0, total - 1, count).round().astype(np.int64))


def sample_size(reader: Records) -> int:
    """How many headers :func:`dataset_labels` reads from ``reader`` (see the module docstring)."""
    total = len(reader)
    if reader.default_shuffle_block() == 0:  # random access is cheap
        return min(total, CHEAP_SAMPLE)
    by_bytes = SAMPLE_BYTES * total // max(reader.nbytes, 1)
    return min(total, max(MIN_SAMPLE, min(MAX_SAMPLE, by_bytes)))


def dataset_labels(reader: Records, faces: FaceSet | None = None) -> DatasetLabels | None:
    """The labels of the records ``reader`` holds (its samples), learnt cheaply (see the module docstring).

    Parameters
    ----------
    reader
        The records the pipeline reads (a face set's faces, for one).
    faces
        The face set they are the faces of: their identities are the labels.

    Returns
    -------
    DatasetLabels or None
        ``None`` for an empty dataset or one whose records hold no IRHeader.
    """
    total = len(reader)
    if faces is not None and len(faces):
        return DatasetLabels(np.asarray(faces.labels, np.float64), len(faces), True, "identities")
    if not total:
        return None
    positions = spread_positions(total, sample_size(reader))
    labels = []
    for payload in reader.fetch(positions):
        try:
            header, _ = unpack_header(payload)
        except HeaderError:
            continue
        values = label_array(header)
        if values.size:
            labels.append(float(values[0]))
    if not labels:
        return None
    return DatasetLabels(np.array(labels, np.float64), total, len(positions) == total, "headers")


@dataclass
class LabelComparison:
    """What :func:`compare` found (see the module docstring); ``None`` fields: not measurable."""

    classes: int  # distinct labels in the dataset (its sample)
    batches: int
    samples: int
    covered: int  # of the dataset's labels, how many the batches hold
    expected_covered: float  # ... and a shuffled read of as many samples
    unknown: int  # batch samples whose label the dataset (its sample) does not hold
    per_batch: float | None  # distinct labels per batch (batches of MIN_BATCH samples or more)
    expected_per_batch: float | None  # ... in a shuffled read of the dataset
    mixed_per_batch: float | None  # ... with the batches' own labels shuffled between them
    mixing_ratio: float | None  # per_batch / expected_per_batch: 1.0 mixes as well as a global shuffle
    distance: float  # total-variation distance of the batches' shares from the dataset's
    chance_distance: float  # the median of the simulated reads
    highest_distance: float  # the highest of the simulated reads
    single_class: int  # batches holding one label only
    stored_in_order: bool  # the dataset's records lie in runs of one label
    mixing_off: bool
    shares_off: bool

    def to_dict(self) -> dict:
        return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in self.__dict__.items()}


def _indices(values: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Each label's index among the sorted ``values``; ``len(values)`` for a label not among them."""
    at = np.minimum(np.searchsorted(values, labels), len(values) - 1)
    return np.where(values[at] == labels, at, len(values))


def _distance(a: np.ndarray, b: np.ndarray) -> float:
    """Total-variation distance of two count vectors' shares."""
    return 0.5 * float(np.abs(a / max(a.sum(), 1) - b / max(b.sum(), 1)).sum())


def _distinct_per_batch(draws: np.ndarray, batch_of: np.ndarray, batches: int, classes: int) -> float:
    """The mean number of distinct values per batch of ``draws`` (class indices), ``batch_of`` naming each's."""
    pairs = np.unique(batch_of * (classes + 1) + draws)
    return float(np.bincount(pairs // (classes + 1), minlength=batches).mean())


def _in_order(labels: np.ndarray, shares: np.ndarray) -> bool:
    """Whether the labels, in position order, change far less often than in a random order."""
    if len(labels) < 10:
        return False
    changes = int((labels[1:] != labels[:-1]).sum())
    expected = (len(labels) - 1) * (1 - float((shares ** 2).sum()))
    return expected >= 2 and changes < 0.5 * expected


def compare(batch_labels: Sequence[np.ndarray], data: DatasetLabels, *, seed: int = 0) -> LabelComparison:
    """The batches' labels (each batch's first labels) against the dataset's (see the module docstring).

    Parameters
    ----------
    batch_labels
        One array of labels per batch (the real samples: padding left out).
    data
        The dataset's labels (:func:`dataset_labels`).
    seed
        The simulated reads' seed.

    Returns
    -------
    LabelComparison
        The statistics and whether mixing or shares are off.
    """
    values, counts = np.unique(data.labels, return_counts=True)
    shares = counts / counts.sum()
    k = len(values)
    batches = [np.asarray(b, np.float64).reshape(len(b), -1)[:, 0] for b in batch_labels if len(b)]
    flat = np.concatenate(batches) if batches else np.zeros(0)
    observed = np.bincount(_indices(values, flat), minlength=k + 1)
    rng = np.random.default_rng(seed)
    n, sampled = len(flat), len(data.labels)
    reference = np.append(counts, 0)
    distances = []
    for _ in range(SIMULATIONS):
        drawn = np.append(rng.multinomial(n, shares), 0)
        base = reference if data.exact else np.append(rng.multinomial(sampled, shares), 0)
        distances.append(_distance(drawn, base))
    distance = _distance(observed, reference)
    chance, highest = float(np.median(distances)), float(max(distances))
    mixable = [b for b in batches if len(b) >= MIN_BATCH]
    per_batch = expected = mixed = None
    mixing_off = False
    if mixable and k > 1:
        kept, total = [], 0
        for b in mixable:
            if total + len(b) > MAX_SIMULATED and kept:
                break
            kept.append(b)
            total += len(b)
        batch_of = np.repeat(np.arange(len(kept)), [len(b) for b in kept])
        drawn = _indices(values, np.concatenate(kept))
        per_batch = _distinct_per_batch(drawn, batch_of, len(kept), k)
        expected = float(np.mean([_distinct_per_batch(rng.choice(k, size=total, p=shares), batch_of, len(kept), k)
                                  for _ in range(SIMULATIONS)]))
        shuffled = [_distinct_per_batch(rng.permutation(drawn), batch_of, len(kept), k) for _ in range(SIMULATIONS)]
        mixed = float(np.mean(shuffled))
        mixing_off = mixed >= 1.5 and per_batch < min(shuffled) and per_batch <= mixed - max(0.5, 0.25 * mixed)
    return LabelComparison(
        classes=k, batches=len(batches), samples=n, covered=int((observed[:k] > 0).sum()),
        expected_covered=float((1 - (1 - shares) ** n).sum()), unknown=int(observed[k]),
        per_batch=per_batch, expected_per_batch=expected, mixed_per_batch=mixed,
        mixing_ratio=per_batch / expected if per_batch is not None and expected else None, distance=distance,
        chance_distance=chance, highest_distance=highest,
        single_class=sum(np.unique(b).size == 1 for b in mixable),
        stored_in_order=_in_order(data.labels, shares),
        mixing_off=mixing_off, shares_off=k > 1 and distance > highest and distance - chance >= MIN_SHIFT)
