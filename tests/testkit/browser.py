"""A real headless browser for the HTML pages and notebook cells: Debian's chromium, driven by playwright.

:func:`launch` starts chromium (``$MXREC_CHROMIUM``, default ``/usr/bin/chromium``; playwright's own browser
download is never used) or skips the test when chromium or playwright is absent -- except in CI, which installs
both (``apt-get install chromium`` and the ``browser`` extra), where their absence fails. :func:`open_page`
loads a file and reports what a reader would notice: console errors, requests to anything but the file and
inline data, images that did not load. The ``browser`` fixture (:mod:`testkit.fixtures`) is one browser per
test module.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = os.environ.get("MXREC_CHROMIUM", "/usr/bin/chromium")


@contextlib.contextmanager
def launch() -> Iterator[Any]:
    """A headless chromium (playwright ``Browser``), closed afterwards; skips (fails in CI) without one."""
    if not os.path.exists(CHROMIUM):
        if os.environ.get("CI"):
            pytest.fail(f"no chromium at {CHROMIUM} in CI")
        pytest.skip(f"no chromium at {CHROMIUM} (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install 'mxrec[browser]'")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield browser
        finally:
            browser.close()


@dataclass
class Opened:
    """A page loaded by :func:`open_page` and what loading it showed."""

    page: Any  # playwright Page
    errors: list[str]  # console errors and uncaught exceptions
    outside: list[str]  # requests for anything but the file itself and data: URIs
    images: list[bool]  # per <img>: loaded with a natural width above 0

    @property
    def clean(self) -> bool:
        """No console error, no request outside the file, and every image loaded."""
        return not self.errors and not self.outside and all(self.images)


def open_page(browser: Any, path: Path, *, html: str | None = None) -> Opened:
    """Load ``path`` (written from ``html`` first, when given) in a fresh page of ``browser`` and wait for it."""
    if html is not None:
        path.write_text(html, encoding="utf-8")
    page = browser.new_page()
    page.set_default_timeout(5_000)  # a missing element fails the test in seconds
    errors: list[str] = []
    requests: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("request", lambda request: requests.append(request.url))
    page.goto(path.as_uri(), wait_until="load", timeout=30_000)
    outside = [url for url in requests if not url.startswith(("file:", "data:"))]
    images = page.evaluate("Array.from(document.images).map(i => i.complete && i.naturalWidth > 0)")
    return Opened(page, errors, outside, images)
