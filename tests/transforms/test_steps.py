"""The augmentation step protocol (mxrec.transforms.steps): draws apart from applies, shapes walked, flags derived."""

from __future__ import annotations

import numpy as np
import pytest

from mxrec.errors import ParameterError
from mxrec.transforms import HorizontalFlipAug, Step, StepList
from mxrec.transforms.rng import SampleRandom
from testkit.iterdata import gradient_image
from testkit.steps import Cutout, Shrink, Sneaky


class Recorder(Step):
    """Logs its draws and applies (with the shapes) into a shared list."""

    def __init__(self, name, log, geometric=False, grow=0):
        self.name, self.log, self.geometric, self.grow = name, log, geometric, grow

    def draw(self, rng, shape):
        self.log.append(("draw", self.name, shape))
        return rng.integers(0, 1000)

    def output_shape(self, params, shape):
        return (shape[0] + self.grow, shape[1] + self.grow, *shape[2:])

    def apply(self, img, params):
        self.log.append(("apply", self.name, img.shape))
        if self.grow:
            return np.pad(img, ((0, self.grow), (0, self.grow), (0, 0)))
        return img


def test_every_draw_comes_before_any_apply_each_for_the_shape_it_will_get():
    log = []
    steps = StepList([Recorder("a", log), Recorder("b", log, geometric=True, grow=3), Recorder("c", log)])
    img = gradient_image(20, 30, seed=0)
    out = steps(img, SampleRandom(1))
    assert out.shape == (23, 33, 3)
    assert log == [("draw", "a", (20, 30, 3)), ("draw", "b", (20, 30, 3)), ("draw", "c", (23, 33, 3)),
                   ("apply", "a", (20, 30, 3)), ("apply", "b", (20, 30, 3)), ("apply", "c", (23, 33, 3))]
    # the draws need only the shape: drawn without the image, applied later, the same result
    params = steps.draw(SampleRandom(1), img.shape)
    np.testing.assert_array_equal(steps.apply(img, params), steps(img, SampleRandom(1)))


def test_random_comes_from_the_steps():
    assert StepList([Shrink(8, 8)]).random is False
    assert StepList([Shrink(8, 8), Cutout(2)]).random is True
    assert StepList([]).random is False

    class Silent(Step):  # says nothing: taken as random, so it always gets a stream, never None
        def draw(self, rng, shape):
            return rng.coin()

        def apply(self, img, params):
            return img

    assert StepList([Shrink(8, 8), Silent()]).random is True


def test_a_step_is_a_transform_drawing_from_the_stream_it_is_given():
    img = gradient_image(24, 24, seed=1)
    cut = Cutout(6)
    np.testing.assert_array_equal(cut(img, SampleRandom(5)), cut.apply(img, cut.draw(SampleRandom(5), img.shape)))
    assert not np.array_equal(cut(img, SampleRandom(5)), cut(img, SampleRandom(6)))
    before = img.copy()
    alone = cut(img)  # no stream given: its own (the subclass never called Step.__init__)
    assert alone.shape == img.shape and (alone == 0).all(axis=2).sum() >= 36
    np.testing.assert_array_equal(img, before)  # the input is left as it was


def test_steps_that_misdeclare_their_size_are_named():
    img = gradient_image(16, 16, seed=2)
    with pytest.raises(ParameterError, match=r"Sneaky.*15x15 image of a 16x16 one.*geometric = True"):
        StepList([Sneaky()])(img)
    assert StepList([Sneaky()], check=False)(img).shape == (15, 15, 3)  # built-in lists are not checked


@pytest.mark.parametrize("wrong", [HorizontalFlipAug(), lambda img: img, "resize"])
def test_only_steps_go_in_a_step_list(wrong):
    with pytest.raises(ParameterError, match="must be mxrec.transforms.Step objects"):
        StepList([Cutout(2), wrong])


def test_the_first_step_says_how_small_the_image_may_be_decoded():
    shape = (400, 600, 3)
    first = StepList([Shrink(50, 60), Cutout(4)])
    params = first.draw(SampleRandom(0), shape)
    size, reduced = first.reduced_decode(params, shape)
    assert size == (50, 60) and reduced[1] == params[1]  # the later draws are kept
    assert StepList([Cutout(4), Shrink(50, 60)]).reduced_decode([(0, 0), None], shape) is None  # only the first
    assert StepList([]).reduced_decode([], shape) is None
