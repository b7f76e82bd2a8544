"""``DataBatch`` as MXNet's (issue 18 §7): ``label`` may be left out, ``str`` reads as MXNet's."""

from __future__ import annotations

import numpy as np

import mxrec
from mxrec.train import DataBatch


def test_databatch_without_label_prints_as_mxnet():
    batch = mxrec.DataBatch([np.zeros((2, 3))])
    assert batch.label is None and batch.pad == 0
    assert str(batch) == "DataBatch: data shapes: [(2, 3)] label shapes: None"


def test_databatch_with_labels_prints_their_shapes():
    batch = DataBatch(data=[np.zeros((4, 3, 8, 8), np.float32)], label=[np.zeros(4, np.float32)])
    assert str(batch) == "DataBatch: data shapes: [(4, 3, 8, 8)] label shapes: [(4,)]"
