"""Kept import path (``mxrec.verify.verify_recordio``): the checks live in :mod:`mxrec.doctor`."""

from mxrec.doctor.report import Check, Problem, Report
from mxrec.doctor.verify_dataset import verify_dataset, verify_recordio

__all__ = ["Check", "Problem", "Report", "verify_dataset", "verify_recordio"]
