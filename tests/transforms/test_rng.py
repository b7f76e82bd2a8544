"""Per-sample random streams (mxrec.rng)."""

from __future__ import annotations

import numpy as np
import pytest

from mxrec.transforms.rng import SampleRandom, stream_key


def test_same_key_same_stream_different_key_different_stream():
    a = [SampleRandom(1, 2, 3).random() for _ in range(3)]
    assert a[0] == a[1] == a[2]
    draws = [SampleRandom(1, 2, 3).random(), SampleRandom(1, 2, 4).random(), SampleRandom(1, 3, 3).random(),
             SampleRandom(2, 2, 3).random()]
    assert len(set(draws)) == 4
    assert stream_key(1, 2) != stream_key(2, 1)


def test_draws_are_uniform_and_independent():
    rng = SampleRandom(42)
    x = np.array([rng.random() for _ in range(20000)])
    assert x.min() >= 0 and x.max() < 1
    assert abs(x.mean() - 0.5) < 0.01
    assert abs(np.corrcoef(x[:-1], x[1:])[0, 1]) < 0.03
    # first draws across consecutive keys (the way the pipeline uses it) are uniform too
    y = np.array([SampleRandom(0, 5, i).random() for i in range(20000)])
    assert abs(y.mean() - 0.5) < 0.01
    assert np.histogram(y, bins=10, range=(0, 1))[0].min() > 1800


def test_integers_are_inclusive_and_cover_the_range():
    rng = SampleRandom(7)
    values = [rng.integers(-2, 2) for _ in range(2000)]
    assert set(values) == {-2, -1, 0, 1, 2}
    assert rng.integers(5, 5) == 5
    with pytest.raises(ValueError, match="empty"):
        rng.integers(3, 2)


def test_normal_shuffle_choice_generator():
    rng = SampleRandom(9)
    z = np.array([rng.normal(2.0) for _ in range(20000)])
    assert abs(z.mean()) < 0.06 and abs(z.std() - 2.0) < 0.06
    items = list(range(10))
    shuffled = rng.shuffled(items)
    assert sorted(shuffled) == items and shuffled != items and items == list(range(10))
    assert rng.choice((4, 5, 6)) in (4, 5, 6)
    assert isinstance(rng.generator(), np.random.Generator)
    assert SampleRandom(3).generator().integers(1 << 30) == SampleRandom(3).generator().integers(1 << 30)
