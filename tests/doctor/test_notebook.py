"""The results people look at in Jupyter render as HTML there (``_repr_html_``), their text unchanged: the HTML
parsed and checked against the result, one opened in chromium, and a real notebook executed with nbclient."""

from __future__ import annotations

import base64
import os
import re
from html.parser import HTMLParser

import cv2
import numpy as np
import pytest

import mxrec
from mxrec.doctor.dataset_info import dataset_info
from mxrec.doctor.preview import contact_sheet
from mxrec.doctor.sets import ShardSetInfo, ShardSetReport, info, verify
from mxrec.doctor.verify_dataset import verify_dataset
from mxrec.format.header import IRHeader, pack
from mxrec.io.shards import ShardedWriter, ShardLimit
from testkit import SRC
from testkit.browser import open_page
from testkit.datasets import clean_jpeg, make_clean_dataset, make_faulty_dataset
from testkit.iterdata import image_record, write_records


class Tables(HTMLParser):
    """The text of every cell of every table, row by row, by the table's id; and each row's attributes."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.row_attrs: dict[str, list[dict]] = {}
        self._table = self._cell = None
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table":
            self._table = attrs.get("id", "")
            self.tables[self._table], self.row_attrs[self._table] = [], []
        elif tag == "tr" and self._table is not None:
            self.tables[self._table].append([])
            self.row_attrs[self._table].append(attrs)
        elif tag in ("td", "th") and self._table is not None:
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.tables[self._table][-1].append("".join(self._cell))
            self._cell = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def test_dataset_info_is_a_table_of_its_summary(tmp_path):
    make_clean_dataset(tmp_path / "clean.rec")
    found = dataset_info(tmp_path / "clean.rec")
    text = found.format_text()
    html = found._repr_html_()
    assert found.format_text() == text and text.splitlines()[0] == f"file:              {tmp_path / 'clean.rec'}"
    assert Tables(html).tables["info"] == [[name, value] for name, value in found.rows()]
    assert [line.split(":", 1)[0] for line in text.splitlines()] == [name for name, _ in found.rows()]
    assert 'class="ok">sound' in html and 'class="fail"' not in html
    damaged = dataset_info(make_faulty_dataset(tmp_path / "faulty").rec)._repr_html_()
    parsed = Tables(damaged)
    assert 'class="fail">damaged' in damaged
    assert [r[0] for r in parsed.tables["info"]].count("damage") == 3  # every framing fault, marked
    assert re.search(r'<th>index</th><td class="fail">', damaged)


def test_verify_results_render_their_checks(browser, tmp_path):
    faulty = make_faulty_dataset(tmp_path)
    report = verify_dataset(faulty.rec)
    html = report._repr_html_()
    rows = Tables(html).row_attrs["checks"][1:]
    assert [r["data-status"] for r in rows] == sorted(
        ("ok" if c.ok else "warn" if c.warning else "fail" for c in report.checks),
        key=["fail", "warn", "ok"].index)
    assert report.format_text().startswith(f"{faulty.rec}: FAILED")  # the text is as it was
    opened = open_page(browser, tmp_path / "cell.html", html=f"<!DOCTYPE html><html><body>{html}</body></html>")
    assert opened.clean and opened.page.inner_text("#verdict") == "FAILED"
    assert opened.page.locator(".mxrec tr.check[data-status=fail] td.fail").count() == len(
        [c for c in report.checks if not c.ok and not c.warning])
    assert opened.page.evaluate("getComputedStyle(document.querySelector('.mxrec td.fail')).color") == \
        "rgb(198, 40, 40)"  # the style is scoped to the block and applies


def test_a_shard_sets_info_and_report_render_per_shard(tmp_path):
    with ShardedWriter(tmp_path / "photos.rec", ShardLimit(records=4)) as writer:
        for key in range(10):
            writer.write(pack(IRHeader(0, float(key % 3), key, 0), clean_jpeg(key % 9)), key=key)
    manifest = tmp_path / "photos.manifest.json"
    summary, report = info(manifest), verify(manifest)
    assert isinstance(summary, ShardSetInfo) and isinstance(report, ShardSetReport)
    shards = Tables(summary._repr_html_()).tables["shards"]
    assert [row[:3] for row in shards[1:]] == [[s.path, str(s.records), str(s.bytes)] for s in summary.shards] + [
        ["total: 3 shards", "10", str(summary.bytes)]]
    checks = Tables(report._repr_html_()).tables["checks"]
    scopes = [row[1] for row in checks[1:]]
    assert scopes[0] == "whole set" and checks[1][0] == "FAIL"  # the duplicate across shards, first
    assert sorted(set(scopes) - {"whole set", "manifest"}) == sorted(r.path for r in report.reports)


def test_a_contact_sheet_shows_itself(tmp_path):
    make_clean_dataset(tmp_path / "clean.rec")
    sheet = contact_sheet(tmp_path / "clean.rec", keys=[3, 1, 2])
    image, keys = sheet  # still a pair
    assert keys == [3, 1, 2] and image is sheet.image
    html = sheet._repr_html_()
    [uri] = re.findall(r'src="data:image/jpeg;base64,([^"]+)"', html)
    shown = cv2.imdecode(np.frombuffer(base64.b64decode(uri), np.uint8), cv2.IMREAD_COLOR)
    assert shown.shape == image.shape and np.abs(shown.astype(int) - image).mean() < 4
    assert "keys 3, 1, 2" in html


def test_a_probe_result_renders_as_its_page_does(tmp_path):
    rec = write_records(tmp_path / "s.rec", [image_record(np.full((20, 24, 3), i, np.uint8), i % 4, i, ".jpg")
                                             for i in range(32)])
    result = mxrec.probe(str(rec), data_shape=(3, 16, 16), batch_size=8, shuffle=True, batches=2,
                         preprocess_threads=1)
    html = result._repr_html_()
    assert html.startswith('<div class="mxrec">') and "<html" not in html
    assert Tables(html).tables["checks"][1:] and 'id="bound"' in html
    assert html.count("<img") == 8  # the sample batch
    assert result.format_text().startswith(f"{rec}: ")


def test_a_notebook_shows_dataset_info_as_html(tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    make_clean_dataset(tmp_path / "clean.rec", count=12)
    monkeypatch.setenv("PYTHONPATH", str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    notebook = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("import mxrec\nmxrec.__file__"),
        nbformat.v4.new_code_cell(f"mxrec.dataset_info({str(tmp_path / 'clean.rec')!r})")])
    nbclient.NotebookClient(notebook, timeout=120, kernel_name="python3", resources={
        "metadata": {"path": str(tmp_path)}}).execute()
    assert str(SRC) in notebook.cells[0].outputs[0]["data"]["text/plain"]  # this checkout's mxrec
    [output] = notebook.cells[1].outputs
    html = output["data"]["text/html"]
    assert Tables(html).tables["info"][2] == ["records", "12 (0 multi-part)"]
    assert output["data"]["text/plain"].startswith("DatasetInfo(path=")  # the plain repr is still there
