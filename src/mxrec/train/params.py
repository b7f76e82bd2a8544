"""Keyword parameters split between the parameter groups that take them: the one place that does it.

``ImageRecordIter(**params)`` takes its own parameters, the augmenter's
(:class:`~mxrec.train.augment.AugmentParams`) and the normaliser's
(:class:`~mxrec.train.normalize.NormalizeParams`) in one flat namespace, as
MXNet does; the PyTorch datasets' ``preprocess=`` and Ray's ``TrainImages``
take the last two. :func:`split_params` checks every name (an unknown one is a
:class:`~mxrec.errors.ParameterError` with a did-you-mean hint) and hands each
group its own. :data:`DECODE_OPTIONS` are the sample loader's own
(:class:`~mxrec.train.sample_loader.RecordSampleLoader`): ``ImageRecordIter``
and the PyTorch datasets' ``preprocess=`` take them, Ray's ``TrainImages``
(which decodes by itself) refuses them by name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from mxrec.errors import ParameterError
from mxrec.train.augment import AugmentParams
from mxrec.train.dataiter import check_names, data_shape_of
from mxrec.train.normalize import NormalizeParams


class ParamGroup(Protocol):
    @classmethod
    def names(cls) -> tuple[str, ...]: ...


def split_params(params: Mapping[str, Any], groups: Sequence[type[ParamGroup]], where: str, *,
                 extra: Sequence[str] = ()) -> list[dict[str, Any]]:
    """``params`` split into one dict per group (by the group's ``names()``); names in ``extra`` are allowed
    and left to the caller; any other name raises :class:`~mxrec.errors.ParameterError` naming ``where``."""
    names = [group.names() for group in groups]
    check_names(dict(params), [*(n for group in names for n in group), *extra], where)
    return [{k: v for k, v in params.items() if k in group} for group in names]


#: The sample loader's decoding options, beside the augmenter's and the normaliser's parameters.
DECODE_OPTIONS = ("fast_decode",)


def preprocess_params(params: Mapping[str, Any], where: str, *, extra: Sequence[str] = (),
                      decode: bool = False) -> tuple[AugmentParams, NormalizeParams]:
    """The augmenter's and the normaliser's parameters (``data_shape`` required) from ``ImageRecordIter``-style
    keyword parameters. ``decode``: the caller decodes with the sample loader and reads :data:`DECODE_OPTIONS`
    from ``params`` itself; else they are refused (:class:`~mxrec.errors.ParameterError`)."""
    if "data_shape" not in params:
        raise ParameterError(f"{where}: data_shape (channels, height, width) is required")
    refused = [] if decode else [name for name in DECODE_OPTIONS if name in params]
    if refused:
        raise ParameterError(f"{where}: {', '.join(refused)} is not supported here: it needs mxrec's sample loader "
                             "(ImageRecordIter, or mxrec.torch.ImageRecordDataset with preprocess=)")
    augment, normalize = split_params(params, (AugmentParams, NormalizeParams), where,
                                      extra=[*extra, *(DECODE_OPTIONS if decode else ())])
    augment["data_shape"] = data_shape_of(params["data_shape"])
    return AugmentParams(**augment), NormalizeParams(**normalize)
