"""Kept import path (``mxrec.info.dataset_info``): the summary lives in :mod:`mxrec.doctor.info`."""

from mxrec.doctor.info import DatasetInfo, LabelSummary, dataset_info

__all__ = ["DatasetInfo", "LabelSummary", "dataset_info"]
