"""The --html pages of probe and verify, opened in a real headless browser (``testkit.browser``)."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from testkit.browser import open_page
from testkit.iterdata import image_record, write_records


@pytest.fixture(scope="module")
def sorted_rec(tmp_path_factory):
    rng = np.random.default_rng(0)
    images = [cv2.resize(rng.integers(0, 256, (4, 5, 3)).astype(np.uint8), (60, 48)) for _ in range(32)]
    path = tmp_path_factory.mktemp("html") / "sorted.rec"
    return str(write_records(path, [image_record(img, i // 8, i, ".jpg") for i, img in enumerate(images)]))


def test_probe_page_renders_the_findings(browser, sorted_rec, mxrec_cli, tmp_path):
    out = tmp_path / "probe.html"
    run = mxrec_cli("probe", sorted_rec, "data_shape=3,32,32", "batch_size=8", "shuffle=0", "mean_r=123.68",
                    "std_r=58.4", "mean_g=116.28", "std_g=57.1", "mean_b=103.53", "std_b=57.4", "--batches", "4",
                    "--sweep", "preprocess_threads=1,2", "--html", out)
    assert run.returncode == 1, run.stderr
    opened = open_page(browser, out)
    page = opened.page
    assert opened.errors == [] and opened.outside == []
    assert page.inner_text("#verdict") == "FAILED"
    failed = page.locator("tr.check[data-status=fail]")
    assert failed.count() == 1 and "single_class_batches" in failed.inner_text()
    assert "shuffle" in page.locator("#recommendations li").evaluate_all("els => els.map(e => e.dataset.code)")
    assert page.locator("#bound b").inner_text() in ("decode", "python", "storage")
    assert len(opened.images) == 8 and all(opened.images)  # the sample batch, un-normalised
    assert page.locator("svg").count() >= 3  # stages, throughput, CPU
    assert page.locator("#sweep tr.best").count() == 1


def test_verify_page_shows_offending_records_and_the_histogram(browser, sorted_rec, mxrec_cli, tmp_path):
    out = tmp_path / "verify.html"
    run = mxrec_cli("verify", sorted_rec, "--num-classes", "3", "--html", out)
    assert run.returncode == 1
    opened = open_page(browser, out)
    page = opened.page
    assert opened.clean, (opened.errors, opened.outside)
    assert page.inner_text("#verdict") == "FAILED"
    assert page.locator("tr.check[data-status=fail]").count() == 1
    captions = page.locator("#offending figcaption").all_inner_texts()
    assert len(captions) == 8 and all("label 3" in c for c in captions)  # the records of class 3, thumbnailed
    assert page.locator("#offending img").count() == 8
    assert page.get_by_role("img", name="records per class").count() == 1
    assert page.get_by_role("img", name="image sizes").count() == 1
