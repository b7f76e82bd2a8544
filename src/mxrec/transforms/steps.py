"""Augmentation steps: what a step draws from the sample's random stream, apart from what it does with it.

A :class:`Step` is one augmentation operation split in two:

* :meth:`Step.draw` ``(rng, shape) -> params``: every random choice for one sample (a crop box, an angle, a
  coin), made from the sample's :class:`~mxrec.transforms.rng.SampleRandom` and the shape of the image the
  step will get -- never from the pixels;
* :meth:`Step.apply` ``(img, params) -> img``: the operation itself, with those choices.

and two declarations, as class attributes: :attr:`Step.random` (whether :meth:`~Step.draw` uses the stream)
and :attr:`Step.geometric` (whether :meth:`~Step.apply` changes the height or width; such a step says what it
makes in :meth:`~Step.output_shape`). A :class:`StepList` runs steps in order: it makes every draw first,
walking the shapes from the source image's (:meth:`StepList.draw`), then applies them
(:meth:`StepList.apply`). Since the draws need only the shape, they can happen before the image is decoded:
``fast_decode`` asks the first step how small the image may be decoded for the same result
(:meth:`Step.reduced_decode`) instead of replaying its draws, and the step then applies the same choices to
the smaller image. Whether a list of steps is random comes from its steps.

The iterators key the stream by ``(seed, epoch, record)``, so a step's choices for a record do not depend on
the thread or ``DataLoader`` worker that makes them, nor on where a resumed epoch starts. A step is also a
:class:`~mxrec.transforms.augmenters.Transform`: ``step(img, rng)`` draws and applies at once, so it can go
wherever a transform goes (``ImageIter(aug_list=...)``, the PyTorch datasets' ``transform=``).

Images are numpy arrays, HWC (HW for grey); which channel order and type depends on the caller:
``ImageRecordIter`` and ``ImageRecordDataset(preprocess=...)`` hand their steps OpenCV's BGR(A) ``uint8``, as
decoded (the output is turned to RGB when it is written into the batch); ``ImageIter`` and ``transform=``
give RGB. A step returns a new array (or its input unchanged); it never writes into its input.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from mxrec.errors import ParameterError
from mxrec.transforms.augmenters import Transform
from mxrec.transforms.functional import entropy
from mxrec.transforms.rng import SampleRandom

Shape = tuple[int, ...]  # an image's numpy shape: (height, width) or (height, width, channels)


class Step(Transform):
    """One augmentation step: :meth:`draw` makes its random choices, :meth:`apply` uses them.

    Subclass it and define :meth:`apply` (and :meth:`draw` when the step is random). Set the class attribute
    ``random = False`` for a step whose draw never uses the stream (it then gets ``rng=None`` when nothing in
    the list is random), and ``geometric = True`` for one that changes the image's height or width (then
    define :meth:`output_shape` too: the steps after it draw for the shape it says). A subclass need not
    call ``Step.__init__``.

    Parameters
    ----------
    seed
        Seed of the step's own random stream, used when it is called without one (``step(img)``); default:
        fresh entropy.
    """

    #: whether :meth:`draw` uses the random stream (default: it may)
    random: bool = True
    #: whether :meth:`apply` changes the image's height or width
    geometric: bool = False

    def __init__(self, seed: int | None = None) -> None:
        self._seed = seed

    def _random(self, rng: SampleRandom | None) -> SampleRandom:
        if rng is not None:
            return rng
        stream = self.__dict__.get("_stream")
        if stream is None:  # made on first use (a subclass need not call Step.__init__)
            seed = self.__dict__.get("_seed")
            stream = self._stream = SampleRandom(entropy() if seed is None else seed)
        return stream

    def draw(self, rng: SampleRandom | None, shape: Shape) -> Any:
        """This step's random choices for one sample.

        Parameters
        ----------
        rng
            The sample's random stream (``None`` only when no step of the list is random).
        shape
            The shape of the image this step will be applied to.

        Returns
        -------
        Any
            Whatever :meth:`apply` needs (default: ``None``).
        """
        return None

    def apply(self, img: np.ndarray, params: Any) -> np.ndarray:
        """The step done on ``img`` with the choices ``params`` of :meth:`draw`.

        Parameters
        ----------
        img
            The image (HWC, or HW for grey); not to be written into.
        params
            What :meth:`draw` returned for this sample.

        Returns
        -------
        numpy.ndarray
            The new image (or ``img`` itself when there is nothing to do).
        """
        raise NotImplementedError(f"{type(self).__name__} must define apply(img, params)")

    def output_shape(self, params: Any, shape: Shape) -> Shape:
        """The shape :meth:`apply` makes of an image of ``shape`` (a :attr:`geometric` step must say).

        Parameters
        ----------
        params
            What :meth:`draw` returned for this sample.
        shape
            The shape of the image the step gets.

        Returns
        -------
        tuple
            The shape of the image it returns (default: ``shape``).
        """
        return shape

    def reduced_decode(self, params: Any, shape: Shape) -> tuple[tuple[int, int], Any] | None:
        """How small the image may be decoded for this step (the first of its list) to give the same result.

        ``fast_decode`` asks the first step, after the draws and before decoding: a JPEG is then decoded at
        the smallest of 1/2, 1/4, 1/8 scale that is at least the size returned (or in full when none is), and
        :meth:`apply` gets that image with the params returned, which keep every choice drawn.

        Parameters
        ----------
        params
            What :meth:`draw` returned for the full-size image.
        shape
            The full-size image's shape.

        Returns
        -------
        tuple or None
            ``((min_height, min_width), params)``, or ``None`` (default): decode in full.
        """
        return None

    def __call__(self, img: np.ndarray, rng: SampleRandom | None = None) -> np.ndarray:
        """Draw and apply at once: ``step(img, rng)``, the :class:`Transform` call."""
        return self.apply(img, self.draw(self._random(rng), img.shape))


class StepList(Transform):
    """Steps run in order: every draw first (for the shapes the steps will get), then every apply.

    ``random`` is whether any step is. With ``check`` (for steps from users), each step's output is checked
    against the shape it declared, so that a step that changes the size without saying so (``geometric``,
    ``output_shape``) is named instead of making the later draws wrong.

    Parameters
    ----------
    steps
        :class:`Step` objects.
    check
        Check every step's output shape against its declaration.

    Raises
    ------
    ParameterError
        Something in ``steps`` is not a :class:`Step`.
    """

    def __init__(self, steps: Iterable[Step], *, check: bool = True) -> None:
        self.steps = tuple(steps)
        for step in self.steps:
            if not isinstance(step, Step):
                kind = "a Transform" if isinstance(step, Transform) else type(step).__name__
                raise ParameterError(
                    f"augmentation steps must be mxrec.transforms.Step objects (draw(rng, shape) -> params, "
                    f"apply(img, params) -> img); got {step!r} ({kind}). mx.image augmenters and Gluon transforms "
                    "work on RGB images in ImageIter(aug_list=...) and the PyTorch datasets' transform=")
        self.random = any(step.random for step in self.steps)
        self.check = check
        self._geometric = tuple(step.geometric for step in self.steps)
        # bound methods, looked up once (a list runs for every sample): each draw (None for a step that keeps
        # Step.draw, which draws nothing) with the output_shape the next step's draw needs (none after the last)
        last = len(self.steps) - 1
        self._draws = tuple((None if type(step).draw is Step.draw else step.draw,
                             step.output_shape if step.geometric and i < last else None)
                            for i, step in enumerate(self.steps))
        self._applies = tuple(step.apply for step in self.steps)
        self._runs = tuple((draw, apply) for (draw, _), apply in zip(self._draws, self._applies, strict=True))

    def __repr__(self) -> str:
        return f"{type(self).__name__}([{', '.join(map(repr, self.steps))}])"

    def __len__(self) -> int:
        return len(self.steps)

    def draw(self, rng: SampleRandom | None, shape: Shape) -> list[Any]:
        """Every step's params, in order, for a source image of ``shape`` (each step drawing for the shape the
        steps before it make).

        Parameters
        ----------
        rng
            The sample's random stream (may be ``None`` when :attr:`random` is false).
        shape
            The source image's shape.

        Returns
        -------
        list
            One params per step.
        """
        params = []
        for draw, output_shape in self._draws:
            drawn = None if draw is None else draw(rng, shape)
            params.append(drawn)
            if output_shape is not None:
                shape = output_shape(drawn, shape)
        return params

    def reduced_decode(self, params: list[Any], shape: Shape) -> tuple[tuple[int, int], list[Any]] | None:
        """The first step's :meth:`Step.reduced_decode`: ``((min_height, min_width), params)`` or ``None``.

        Parameters
        ----------
        params
            :meth:`draw`'s params for the full-size image.
        shape
            The full-size image's shape.

        Returns
        -------
        tuple or None
            The smallest decode size and the params to apply to that image, or ``None``: decode in full.
        """
        if not self.steps:
            return None
        reduced = self.steps[0].reduced_decode(params[0], shape)
        if reduced is None:
            return None
        size, first = reduced
        return size, [first, *params[1:]]

    def apply(self, img: np.ndarray, params: list[Any]) -> np.ndarray:
        """Every step applied in order, with its params.

        Parameters
        ----------
        img
            The source image.
        params
            :meth:`draw`'s (or :meth:`reduced_decode`'s) params.

        Returns
        -------
        numpy.ndarray
            The augmented image.

        Raises
        ------
        ParameterError
            (with ``check``) a step made an image of another height or width than it declared.
        """
        if not self.check:
            for apply, drawn in zip(self._applies, params):  # noqa: B905 (one params per step, from draw)
                img = apply(img, drawn)
            return img
        for step, drawn, geometric in zip(self.steps, params, self._geometric, strict=True):
            before = img.shape
            img = step.apply(img, drawn)
            expected = step.output_shape(drawn, before) if geometric else before
            if img.shape[:2] != expected[:2]:
                raise ParameterError(
                    f"augmentation step {step!r} made a {img.shape[1]}x{img.shape[0]} image of a "
                    f"{before[1]}x{before[0]} one, but declares {expected[1]}x{expected[0]}: a step that changes "
                    "the size sets geometric = True and says what it makes in output_shape(params, shape)")
        return img

    def __call__(self, img: np.ndarray, rng: SampleRandom | None = None) -> np.ndarray:
        """Draw and apply every step: ``steps(img, rng)``.

        The same result as ``apply(img, draw(rng, img.shape))`` (a draw needs only the shape), made step by
        step: each draws for the image it gets (without ``check``: with it, every draw comes first).

        Parameters
        ----------
        img
            The source image.
        rng
            The sample's random stream; default: a fresh one.

        Returns
        -------
        numpy.ndarray
            The augmented image.
        """
        if rng is None and self.random:
            rng = SampleRandom(entropy())
        if self.check:
            return self.apply(img, self.draw(rng, img.shape))
        for draw, apply in self._runs:
            img = apply(img, None if draw is None else draw(rng, img.shape))
        return img
