"""Kept import path (``mxrec.info.dataset_info``): the summary lives in :mod:`mxrec.doctor.dataset_info`."""

from mxrec.doctor.dataset_info import DatasetInfo, LabelSummary, dataset_info

__all__ = ["DatasetInfo", "LabelSummary", "dataset_info"]
