"""Keyword parameters split between the parameter groups that take them: the one place that does it.

``ImageRecordIter(**params)`` takes its own parameters, the augmenter's
(:class:`~mxrec.train.augment.AugmentParams`) and the normaliser's
(:class:`~mxrec.train.normalize.NormalizeParams`) in one flat namespace, as
MXNet does; the PyTorch datasets' ``preprocess=`` and Ray's ``TrainImages``
take the last two. :func:`split_params` checks every name (an unknown one is a
:class:`~mxrec.errors.ParameterError` with a did-you-mean hint) and hands each
group its own. :data:`LOADER_OPTIONS` are the sample loader's own
(:class:`~mxrec.train.sample_loader.RecordSampleLoader`): ``ImageRecordIter``
and the PyTorch datasets' ``preprocess=`` take them, Ray's ``TrainImages``
(which decodes by itself) refuses them by name. One of them, ``aug_list``
(the caller's own augmentation steps), replaces the default augmenter, so
:func:`check_aug_list` refuses the default augmenter's parameters beside it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from mxrec.errors import ParameterError
from mxrec.train.augment import AugmentParams
from mxrec.train.dataiter import check_names, data_shape_of
from mxrec.train.normalize import NormalizeParams
from mxrec.transforms.steps import Step, StepList


class ParamGroup(Protocol):
    @classmethod
    def names(cls) -> tuple[str, ...]: ...


def split_params(params: Mapping[str, Any], groups: Sequence[type[ParamGroup]], where: str, *,
                 extra: Sequence[str] = (), hints: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """``params`` split into one dict per group (by the group's ``names()``); names in ``extra`` are allowed
    and left to the caller; any other name raises :class:`~mxrec.errors.ParameterError` naming ``where``
    (with the hint ``hints`` has for it, else a close match)."""
    names = [group.names() for group in groups]
    check_names(dict(params), [*(n for group in names for n in group), *extra], where, hints=hints)
    return [{k: v for k, v in params.items() if k in group} for group in names]


#: The sample loader's options, beside the augmenter's and the normaliser's parameters: ``fast_decode``, and
#: ``aug_list``, the caller's own augmentation steps.
LOADER_OPTIONS = ("fast_decode", "aug_list")


def check_aug_list(aug_list: Any, augment: Mapping[str, Any], where: str) -> tuple[Step, ...] | None:
    """``aug_list`` as a tuple of steps (``None`` stays ``None``: the default augmenter).

    Parameters
    ----------
    aug_list
        The caller's augmentation steps, or ``None``.
    augment
        The default augmenter's parameters given beside it (``data_shape`` is allowed: it is the output's).
    where
        Names the caller in messages.

    Returns
    -------
    tuple or None
        The steps.

    Raises
    ------
    ParameterError
        ``aug_list`` is not a list of :class:`~mxrec.transforms.steps.Step` objects, or comes with default
        augmenter parameters, which it replaces (they would do nothing).
    """
    if aug_list is None:
        return None
    if isinstance(aug_list, (Step, StepList)) or not isinstance(aug_list, (list, tuple)):
        raise ParameterError(f"{where}: aug_list must be a list of augmentation steps, not {aug_list!r}")
    given = [name for name in augment if name != "data_shape"]
    if given:
        shown = ", ".join(f"{name}={augment[name]!r}" for name in given)
        raise ParameterError(f"{where}: aug_list replaces MXNet's default augmenter, so {', '.join(given)} would "
                             f"do nothing; put those steps in the list: [*mxrec.train.default_steps(data_shape, "
                             f"{shown}), ...your steps]")
    return StepList(aug_list).steps


def preprocess_params(params: Mapping[str, Any], where: str, *, extra: Sequence[str] = (),
                      decode: bool = False) -> tuple[AugmentParams, NormalizeParams]:
    """The augmenter's and the normaliser's parameters (``data_shape`` required) from ``ImageRecordIter``-style
    keyword parameters. ``decode``: the caller decodes with the sample loader and reads :data:`LOADER_OPTIONS`
    from ``params`` itself (``aug_list`` checked here, by :func:`check_aug_list`); else they are refused
    (:class:`~mxrec.errors.ParameterError`)."""
    if "data_shape" not in params:
        raise ParameterError(f"{where}: data_shape (channels, height, width) is required")
    refused = [] if decode else [name for name in LOADER_OPTIONS if name in params]
    if refused:
        raise ParameterError(f"{where}: {', '.join(refused)} is not supported here: it needs mxrec's sample loader "
                             "(ImageRecordIter, or mxrec.torch.ImageRecordDataset with preprocess=)")
    augment, normalize = split_params(params, (AugmentParams, NormalizeParams), where,
                                      extra=[*extra, *(LOADER_OPTIONS if decode else ())])
    check_aug_list(params.get("aug_list"), augment, where)
    augment["data_shape"] = data_shape_of(params["data_shape"])
    return AugmentParams(**augment), NormalizeParams(**normalize)
