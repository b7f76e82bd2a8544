"""Whole-dataset remote work in coalesced batch reads, not one request per record (issue 18 §4), counted by a real
S3 server on loopback."""

from __future__ import annotations

import subprocess
import sys

import pytest

from mxrec.datasets.face_set import read_face_set
from mxrec.io.opener import RecordReader
from testkit.cli import mxrec_env
from testkit.insightface import make_face_set
from testkit.iterdata import IM2REC, pack_photos


def run(server, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mxrec", *args], capture_output=True, text=True,
                          env=dict(mxrec_env(), **server.env()), timeout=300)


@pytest.fixture
def photos_on_s3(s3_server, s3_bucket, tmp_path):
    rec = pack_photos(tmp_path / "sub.rec", IM2REC / "lists" / "sub.lst")  # 50 photos
    s3_server.put_object(s3_bucket, "d/sub.rec", rec.read_bytes())
    s3_server.put_object(s3_bucket, "d/sub.idx", rec.with_suffix(".idx").read_bytes())
    s3_server.log.clear()
    return f"s3://{s3_bucket}/d/sub.rec", rec


def test_extract_from_s3_reads_in_few_requests(s3_server, photos_on_s3, tmp_path):
    """Regression: extract made one GET per record (50 here; 1501 for a 1501-record file)."""
    url, _ = photos_on_s3
    done = run(s3_server, "extract", url, str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    assert len(list((tmp_path / "out").rglob("*.jpg"))) == 50
    assert len(s3_server.log.filter(method="GET", key="d/sub.rec")) <= 2, s3_server.log.summary()


def test_preview_of_s3_reads_in_few_requests(s3_server, photos_on_s3, tmp_path):
    """Regression: preview -n 64 made 65 GETs (one per record, and the header record)."""
    url, _ = photos_on_s3
    done = run(s3_server, "preview", url, "-o", str(tmp_path / "sheet.png"), "-n", "40")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "sheet.png").stat().st_size > 0
    assert len(s3_server.log.filter(method="GET", key="d/sub.rec")) <= 3, s3_server.log.summary()


def test_read_face_set_on_s3_reads_identities_in_one_batch(s3_server, s3_bucket, tmp_path):
    """Regression: read_face_set made one GET per identity record (85 742 on MS1M before the first batch)."""
    files = make_face_set(tmp_path / "faces", identities=[2] * 60)
    s3_server.put_object(s3_bucket, "f/train.rec", files.rec.read_bytes())
    s3_server.put_object(s3_bucket, "f/train.idx", files.idx.read_bytes())
    reader = RecordReader(f"s3://{s3_bucket}/f/train.rec", storage_options=s3_server.storage_options())
    s3_server.log.clear()
    faces = read_face_set(reader)
    expected = read_face_set(RecordReader(files.rec))
    assert faces is not None and faces.labels.tolist() == expected.labels.tolist()
    assert faces.positions.tolist() == expected.positions.tolist()
    assert len(s3_server.log.filter(method="GET", key="f/train.rec")) <= 2, s3_server.log.summary()
