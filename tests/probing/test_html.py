"""The --html pages of probe and verify, opened in a real headless browser (Debian's chromium, driven by playwright).

Skipped when chromium or playwright is absent (.ci/run installs both: ``apt-get install chromium`` and the
``browser`` extra); playwright's own browser download is never used.
"""

from __future__ import annotations

import os

import cv2
import numpy as np
import pytest

from testkit.iterdata import image_record, write_records

CHROMIUM = os.environ.get("MXREC_CHROMIUM", "/usr/bin/chromium")


@pytest.fixture(scope="module")
def browser():
    if not os.path.exists(CHROMIUM):
        if os.environ.get("CI"):  # CI installs chromium (.ci/run): its absence there is a failure, not a skip
            pytest.fail(f"no chromium at {CHROMIUM} in CI")
        pytest.skip(f"no chromium at {CHROMIUM} (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install 'mxrec[browser]'")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield browser
        finally:
            browser.close()


def open_page(browser, path):
    """The page loaded from ``path``, with its console errors and any request that is not the file or inline."""
    page = browser.new_page()
    errors, requests = [], []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("request", lambda request: requests.append(request.url))
    page.goto(path.as_uri(), wait_until="load", timeout=30_000)
    outside = [url for url in requests if not url.startswith(("file:", "data:"))]
    images = page.evaluate("Array.from(document.images).map(i => i.complete && i.naturalWidth > 0)")
    return page, errors, outside, images


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
    page, errors, outside, images = open_page(browser, out)
    assert errors == [] and outside == []
    assert page.inner_text("#verdict") == "FAILED"
    failed = page.locator("tr.check[data-status=fail]")
    assert failed.count() == 1 and "single_class_batches" in failed.inner_text()
    assert "shuffle" in page.locator("#recommendations li").evaluate_all("els => els.map(e => e.dataset.code)")
    assert page.locator("#bound b").inner_text() in ("decode", "python", "storage")
    assert len(images) == 8 and all(images)  # the sample batch, un-normalised
    assert page.locator("svg").count() >= 3  # stages, throughput, CPU
    assert page.locator("#sweep tr.best").count() == 1


def test_verify_page_shows_offending_records_and_the_histogram(browser, sorted_rec, mxrec_cli, tmp_path):
    out = tmp_path / "verify.html"
    run = mxrec_cli("verify", sorted_rec, "--num-classes", "3", "--html", out)
    assert run.returncode == 1
    page, errors, outside, images = open_page(browser, out)
    assert errors == [] and outside == []
    assert page.inner_text("#verdict") == "FAILED"
    assert page.locator("tr.check[data-status=fail]").count() == 1
    captions = page.locator("figcaption").all_inner_texts()
    assert len(captions) == 8 and all("label 3.0" in c for c in captions)  # the records of class 3, thumbnailed
    assert images and all(images)
    assert page.get_by_role("img", name="records per class").count() == 1
    assert page.get_by_role("img", name="image sizes").count() == 1
