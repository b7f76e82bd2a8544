"""``dataset_stats`` / ``mxrec stats``: the numbers match the data; the plot is written."""

from __future__ import annotations

import json
from collections import Counter

import cv2
import numpy as np
import pytest

from mxrec.doctor.stats import dataset_stats, plot_stats
from mxrec.format import framing
from mxrec.format.header import IRHeader, pack, unpack
from mxrec.io.lists import read_list
from mxrec.io.opener import RecordReader


@pytest.fixture
def train(golden):
    return golden / "im2rec" / "trainval" / "subtv_train.rec"


def test_numbers_match_the_records(train, golden):
    stats = dataset_stats(train)
    entries = read_list(golden / "im2rec" / "trainval" / "subtv_train.lst")
    assert stats.records == stats.labelled == len(entries) == 45
    assert stats.label_kind == "class" and stats.label_widths == {1: 45}
    assert stats.class_counts == dict(sorted(Counter(int(e.labels[0]) for e in entries).items()))
    shapes = []
    with RecordReader(train) as reader:
        for payload in reader:
            pixels = cv2.imdecode(np.frombuffer(unpack(payload)[1], np.uint8), -1)
            shapes.append(pixels.shape)
    assert sorted(zip(stats.heights.tolist(), stats.widths.tolist(), strict=True)) == sorted(s[:2] for s in shapes)
    assert stats.channels == {3: 45} and stats.formats == {"jpeg": 45}
    assert sum(stats.shapes.values()) == min(10, len(set(shapes)))  # all distinct: top 10 listed once each
    quantiles = stats.to_dict()["width"]
    assert quantiles["p0"] == min(s[1] for s in shapes) and quantiles["p100"] == max(s[1] for s in shapes)
    text = stats.format_text()
    assert "classes: 10" in text and "formats: jpeg 45" in text and "   width: min" in text


def test_real_valued_labels_get_a_histogram(tmp_path):
    rec = tmp_path / "reg.rec"
    values = np.linspace(-1, 1, 40)
    rec.write_bytes(b"".join(framing.encode_record(pack(IRHeader(0, float(v), i, 0), b"\xff\xd8\xff"))
                             for i, v in enumerate(values)))
    stats = dataset_stats(rec)
    counts, edges = stats.value_histogram
    assert stats.label_kind == "value" and sum(counts) == 40 and edges[0] == -1 and edges[-1] == 1
    assert stats.class_counts == {}


def test_cli_text_json_and_plot(train, tmp_path, mxrec_cli):
    pytest.importorskip("matplotlib")
    out = tmp_path / "stats.png"
    result = mxrec_cli("stats", train, "-o", out)
    assert result.returncode == 0, result.stderr
    assert result.stdout == dataset_stats(train).format_text() + "\n"
    plot = cv2.imread(str(out))
    assert plot.shape == (900, 1200, 3) and plot.std() > 10  # something was drawn
    as_json = json.loads(mxrec_cli("stats", train, "--json").stdout)
    assert as_json["class_counts"] == {str(k): v for k, v in dataset_stats(train).class_counts.items()}


def test_plot_of_an_empty_dataset(tmp_path):
    pytest.importorskip("matplotlib")
    rec = tmp_path / "empty.rec"
    rec.write_bytes(b"")
    plot_stats(dataset_stats(rec), tmp_path / "empty.png")
    assert cv2.imread(str(tmp_path / "empty.png")) is not None
