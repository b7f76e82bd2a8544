"""Self-tests of testkit's example augmentation steps: each does what the tests using it rely on."""

from __future__ import annotations

import numpy as np

from mxrec.transforms.rng import SampleRandom
from testkit.iterdata import gradient_image
from testkit.steps import Cutout, RandomGrey, Shrink, Sneaky


def test_the_example_steps():
    img = gradient_image(20, 30, seed=0)
    cut = Cutout(5, fill=9)(img, SampleRandom(0))
    assert ((cut != img).any(axis=2)).sum() <= 25 and ((cut == 9).all(axis=2)).sum() >= 25
    greys = [RandomGrey(0.5)(img, SampleRandom(i)) for i in range(40)]
    grey = [bool((g[..., 0] == g[..., 1]).all()) for g in greys]
    assert 5 < sum(grey) < 35 and all(np.array_equal(g, img) for g, is_grey in zip(greys, grey, strict=True)
                                      if not is_grey)
    shrink = Shrink(8, 10)
    assert shrink(img).shape == (8, 10, 3) and shrink.seen == [(20, 30, 3)]
    assert shrink.reduced_decode(None, img.shape) == ((8, 10), None)
    assert Sneaky()(img).shape == (19, 29, 3)
