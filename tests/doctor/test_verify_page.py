"""``mxrec verify --html``: the page shows the data (samples per class by name, the class histogram, every image's
size) and the offending records of each failed check, read by position, in a real headless browser."""

from __future__ import annotations

import base64
import re
from collections import Counter

import cv2
import numpy as np
import pytest

from mxrec.datasets.opening import open_dataset
from mxrec.doctor.sets import verify
from mxrec.doctor.verify_dataset import verify_dataset
from mxrec.doctor.verify_page import CLASS_ROWS, SAMPLES_PER_CLASS, count_distribution, verify_page
from mxrec.format.header import IRHeader, pack
from mxrec.io.index import read_index, write_index
from mxrec.io.records import Records
from mxrec.io.shards import ShardedWriter, ShardLimit
from testkit.browser import open_page
from testkit.datasets import NUM_CLASSES, clean_jpeg, jpeg, make_faulty_dataset, on_memory_fs, photo, write_indexed
from testkit.insightface import make_face_set

NAMES = ["cat", "dog", "owl", "fox", "elk", "bat", "cow", "eel", "yak", "ram"]


def labelled_set(path, counts: list[int], *, size=lambda key: (40 + key % 17, 30 + key % 13)) -> list[int]:
    """Records of class ``c`` (``counts[c]`` of them), keys in class order; returns each key's class."""
    labels = [c for c, n in enumerate(counts) for _ in range(n)]
    payloads = [pack(IRHeader(0, float(c), key, 0), jpeg(photo(key, *size(key)), quality=70))
                for key, c in enumerate(labels)]
    write_indexed(path, range(len(payloads)), payloads)
    return labels


def tooltip_counts(page, selector: str) -> list[float]:
    """The count at the end of each tooltip (``...: 12`` or ``...: 12 images``) under ``selector``."""
    texts = page.locator(f"{selector} title").all_text_contents()
    return [float(re.search(r": (\d+(?:\.\d+)?)(?: images)?$", t).group(1)) for t in texts]


def test_a_sound_set_shows_samples_of_each_class_by_name(browser, tmp_path, mxrec_cli):
    rec = tmp_path / "pets.rec"
    labels = labelled_set(rec, [8] * 10)
    (tmp_path / "pets.labels").write_text("".join(f"{i}\t{n}\n" for i, n in enumerate(NAMES)))
    out = tmp_path / "pets.html"
    assert mxrec_cli("verify", rec, "--html", out, "--no-progress").returncode == 0
    opened = open_page(browser, out)
    page = opened.page
    assert opened.clean, (opened.errors, opened.outside, opened.images)
    assert page.inner_text("#verdict") == "OK" and page.locator("#offending").count() == 0
    rows = page.locator("#samples .class-row")
    assert rows.count() == 10
    for c in range(10):
        row = page.locator(f"#samples .class-row[data-label='{c}']")
        assert row.locator("b").inner_text() == f"{c} {NAMES[c]}"
        shown = row.locator("img").evaluate_all("els => els.map(e => e.title)")
        assert len(shown) == SAMPLES_PER_CLASS
        keys = [int(t.rsplit("record ", 1)[1]) for t in shown]
        assert len(set(keys)) == SAMPLES_PER_CLASS and all(labels[k] == c for k in keys)  # that class's records
    histogram = page.get_by_role("img", name="records per class")
    assert all(f"{c} {name}" in histogram.inner_html() for c, name in enumerate(NAMES))
    sizes = page.get_by_role("img", name="image sizes")
    assert sum(tooltip_counts(page, "svg[aria-label='image sizes']")) == 80  # every image, as dots by size
    axis = sizes.locator("text").all_text_contents()
    assert "width (px)" in axis and "height (px)" in axis and {"0", "20", "40"} <= set(axis)  # ticked axes
    other = tmp_path / "other.labels"
    other.write_text("0\tzero\n")
    assert mxrec_cli("verify", rec, "--html", out, "--labels", other, "--no-progress").returncode == 0
    assert "0 zero" in out.read_text() and "0 cat" not in out.read_text()


def shard_set_with_a_repeat(folder, repeat_from: int, repeat_at: int):
    """10 image records in shards of 4, labels ``key % 3``; record ``repeat_at`` holds record ``repeat_from``'s
    image."""
    images = [clean_jpeg(key) for key in range(10)]
    images[repeat_at] = images[repeat_from]
    with ShardedWriter(folder / "photos.rec", ShardLimit(records=4)) as writer:
        for key, image in enumerate(images):
            writer.write(pack(IRHeader(0, float(key % 3), key, 0), image), key=key)
    return folder / "photos.manifest.json"


def test_a_shard_sets_duplicates_are_read_from_the_shard_holding_them(browser, tmp_path, mxrec_cli):
    manifest = shard_set_with_a_repeat(tmp_path, repeat_from=1, repeat_at=9)  # shard 0 key 1 == shard 2 key 9
    report = verify(manifest)
    [problem] = next(c for c in report.checks if c.name == "duplicates").problems
    with open_dataset(manifest) as reader:  # the set's own numbering: shard 2's first record is the set's 8th
        assert problem.position == 9 and reader.describe(problem.position).endswith("photos_00002.rec: record 9")
    out = tmp_path / "dup.html"
    for spec in (manifest, str(tmp_path / "photos_*.rec")):
        assert mxrec_cli("verify", spec, "--html", out, "--no-progress").returncode == 1
        opened = open_page(browser, out)
        assert opened.clean, (opened.errors, opened.images)
        section = opened.page.locator("#offending section[data-check=duplicates]")
        assert "whole set" in section.locator("h3").inner_text()
        [caption] = section.locator("figcaption").all_inner_texts()
        # record 9 itself: its own label (9 % 3 = 0), not its original's (1)
        assert caption.startswith(f"{tmp_path / 'photos_00002.rec'}: 9, label 0: same image bytes as")
        assert section.locator("img").count() == 1 and section.locator(".missing").count() == 0
        assert opened.page.locator("#samples .class-row").count() == 3  # samples across the shards


def test_problem_positions_name_the_records_they_describe(tmp_path):
    """An .idx listing the records in another order than the file's: positions are its entries."""
    rec = tmp_path / "shuffled.rec"
    images = [clean_jpeg(k) for k in range(12)]
    images[7] = images[2]  # a duplicate
    images[4] = images[4][:40]  # a damaged image header
    labels = [k % 3 for k in range(12)]
    labels[9] = 5  # out of range
    write_indexed(rec, range(12), [pack(IRHeader(0, float(labels[k]), k, 0), images[k]) for k in range(12)])
    index = read_index(rec.with_suffix(".idx"))
    order = np.random.default_rng(1).permutation(12)
    write_index(rec.with_suffix(".idx"), [index.keys[i] for i in order], index.offsets[order])
    report = verify_dataset(rec, num_classes=3)
    assert report.numbering == "index" and report.numbered == 12
    named = [(p, c.name) for c in report.checks for p in c.problems if p.position is not None]
    assert {name for _, name in named} == {"labels", "images", "duplicates"}
    with open_dataset(rec, duplicates="last", strict=False) as reader:
        assert all(reader.keys[p.position] == p.where for p, _ in named)
    labels = next(c for c in report.to_dict()["checks"] if c["name"] == "labels")
    assert labels["problems"][0]["position"] == int(np.flatnonzero(order == 9)[0])


def test_a_refused_idx_numbers_the_records_as_a_scan_finds_them(tmp_path):
    faulty = make_faulty_dataset(tmp_path)
    report = verify_dataset(faulty.rec, num_classes=NUM_CLASSES)
    assert report.numbering == "scan"  # its .idx lists an offset past the end: a reader refuses it
    named = [(p, c.name) for c in report.checks for p in c.problems if p.position is not None]
    assert {name for _, name in named} == {"labels", "images", "shapes", "duplicates"}
    with open_dataset(faulty.rec, False, duplicates="last", strict=False) as reader:
        for problem, _ in named:
            if problem.where not in (38, 39):  # no IRHeader: the ids are in the others' headers
                assert reader.header(problem.position).id == problem.where
    framing = report.check("framing").problems
    assert framing and all(p.position is None for p in framing)  # byte offsets: no record to show


def test_a_damaged_files_page_shows_what_each_failed_check_names(browser, tmp_path):
    faulty = make_faulty_dataset(tmp_path)
    report = verify_dataset(faulty.rec, num_classes=NUM_CLASSES)
    opened = open_page(browser, tmp_path / "faulty.html", html=verify_page(report, faulty.rec))
    page = opened.page
    assert opened.clean, (opened.errors, opened.images)
    sections = page.locator("#offending section").evaluate_all("els => els.map(e => e.dataset.check)")
    assert set(sections) == {"labels", "images", "shapes", "duplicates"}  # not framing: no records
    images = page.locator("#offending section[data-check=images] figure")
    by_key = {re.split("[,:]", t)[0]: t for t in images.locator("figcaption").all_inner_texts()}
    assert set(by_key) == {"33", "36", "37"}
    empty = images.filter(has_text="36")
    assert empty.locator(".missing").inner_text() == "no image" and empty.locator("img").count() == 0
    no_header = page.locator("#offending section[data-check=labels] figure").filter(has_text="38: no IRHeader")
    assert no_header.locator(".missing").inner_text() == "no IRHeader"
    shapes = page.locator("#offending section[data-check=shapes] img")
    assert shapes.count() == 3 and all(shapes.evaluate_all("els => els.map(e => e.naturalWidth > 0)"))


def test_many_classes_show_the_most_and_least_frequent_then_a_sample(browser, tmp_path):
    rec = tmp_path / "many.rec"
    counts = [1 + c % 7 + (40 if c == 33 else 0) for c in range(90)]  # class 33 the largest
    labelled_set(rec, counts, size=lambda key: (16, 12))
    html = verify_page(verify_dataset(rec), rec)
    assert len(html) < 1_000_000
    page = open_page(browser, tmp_path / "many.html", html=html).page
    rows = page.locator("#samples .class-row").evaluate_all("els => els.map(e => Number(e.dataset.label))")
    assert len(rows) == CLASS_ROWS and len(set(rows)) == CLASS_ROWS
    groups = page.locator("#samples h3").all_inner_texts()
    assert groups == ["most frequent", "least frequent", "sample"]
    third = CLASS_ROWS // 3
    by_count = sorted(range(90), key=lambda c: (-counts[c], c))
    assert rows[:third] == by_count[:third] and rows[0] == 33
    assert set(rows[third:2 * third]) == set(by_count[-third:])
    assert page.locator("#samples img").count() <= CLASS_ROWS * SAMPLES_PER_CLASS
    spread = page.get_by_role("img", name="classes by records held")
    assert spread.count() == 1
    labels, numbers = count_distribution(counts)
    assert sum(numbers) == 90 and [f"{lab} records" for lab in labels] == [
        t for t in spread.locator("text").all_text_contents() if t.endswith("records")]


def test_many_sizes_make_a_2d_histogram_of_every_image(browser, tmp_path):
    rec = tmp_path / "sizes.rec"
    labelled_set(rec, [200, 200], size=lambda key: (8 + key % 37, 8 + (key * 7) % 41))
    page = open_page(browser, tmp_path / "sizes.html", html=verify_page(verify_dataset(rec), rec)).page
    chart = "svg[aria-label='image sizes']"
    assert page.locator(f"{chart} circle").count() == 0 and page.locator(f"{chart} rect").count() > 20
    assert sum(tooltip_counts(page, chart)) == 400


def test_a_face_set_shows_images_per_identity(browser, tmp_path):
    files = make_face_set(tmp_path, [3, 1, 4, 2, 2])
    report = verify_dataset(files.rec)
    opened = open_page(browser, tmp_path / "faces.html", html=verify_page(report, files.rec))
    page = opened.page
    assert opened.clean
    assert page.locator("h2", has_text="Images per identity").count() == 1
    rows = page.locator("#samples .class-row")
    assert rows.count() == 5 and "(4 images)" in rows.nth(2).inner_text()
    assert rows.nth(2).locator("img").count() == 4  # every face of identity 2: fewer than SAMPLES_PER_CLASS
    spread = page.get_by_role("img", name="identities by images held")
    assert spread.locator("title").all_text_contents() == ["1 images: 1 identities", "2 images: 2 identities",
                                                           "3 images: 1 identities", "4 images: 1 identities"]


class CountingRecords(Records):
    """Another dataset's records, counting the fetches: any :class:`Records` will do for the page."""

    def __init__(self, inner: Records) -> None:
        self.inner, self.fetches = inner, []
        self.path, self.index_path, self.damage, self.keys = inner.path, inner.index_path, None, inner.keys

    def __len__(self) -> int:
        return len(self.inner)

    def fetch(self, positions):
        self.fetches.append(list(positions))
        return self.inner.fetch(positions)

    def view(self, position):
        return self.inner.view(position)

    def position(self, key):
        return self.inner.position(key)

    @property
    def nbytes(self) -> int:
        return self.inner.nbytes

    def close(self) -> None:
        self.inner.close()


def test_a_url_and_any_records_are_read_by_position_in_one_fetch(browser, tmp_path):
    rec = tmp_path / "remote.rec"
    labelled_set(rec, [3, 3, 3, 3])
    with on_memory_fs(rec) as url:
        report = verify_dataset(url, num_classes=3)  # class 3 is out of range: 3 offending records
        html = verify_page(report, url)
        opened = open_page(browser, tmp_path / "url.html", html=html)
        assert opened.clean and opened.page.locator("#offending img").count() == 3
        with open_dataset(url) as reader:
            counting = CountingRecords(reader)
            assert verify_page(report, url, records=counting).count("<img") == html.count("<img")
            # the offending records (class 3) and 3 samples of each class, each record once
            assert counting.fetches == [list(range(12))]


def test_thumbnails_show_the_records_image(tmp_path):
    rec = tmp_path / "one.rec"
    image = photo(5, 120, 90)
    write_indexed(rec, [0], [pack(IRHeader(0, 0.0, 0, 0), jpeg(image, 95))])
    html = verify_page(verify_dataset(rec), rec)
    [uri] = re.findall(r"data:image/jpeg;base64,([A-Za-z0-9+/=]+)", html)
    shown = cv2.imdecode(np.frombuffer(base64.b64decode(uri), np.uint8), cv2.IMREAD_COLOR)
    def off(img):
        return np.abs(shown.astype(int) - cv2.resize(img, shown.shape[1::-1], interpolation=cv2.INTER_AREA)).mean()

    assert max(shown.shape[:2]) == 96 and off(image) < 10 and off(photo(6, 120, 90)) > 30  # that image, shrunk


@pytest.mark.parametrize(("counts", "labels"), [([1, 1, 3, 3, 3], ["1", "3"]),
                                                 (list(range(1, 100)), ["1", "2-3", "4-7", "8-15", "16-31",
                                                                        "32-63", "64-127"])])
def test_count_distribution(counts, labels):
    found, numbers = count_distribution(counts)
    assert found == labels and sum(numbers) == len(counts)
    assert numbers[0] == Counter(counts)[1]


def test_offending_thumbnails_are_capped_over_many_failed_checks(tmp_path, monkeypatch):
    from mxrec.doctor import verify_page as module

    rec = tmp_path / "bad.rec"
    labelled_set(rec, [30, 30], size=lambda key: (12, 10))
    report = verify_dataset(rec, num_classes=1)  # 30 records of class 1 out of range
    monkeypatch.setattr(module, "OFFENDING_MAX", 5)
    html = verify_page(report, rec)
    assert html.count("<figure") == 5 + 2 * SAMPLES_PER_CLASS  # 5 offending, and the samples of both classes
    assert "(5 of 30 shown)" in html
