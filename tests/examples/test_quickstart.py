"""The quick start runs as written, and cleans up the temporary folder it made."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from testkit import TESTS
from testkit.cli import mxrec_env

QUICKSTART = TESTS.parent / "examples" / "quickstart.py"


def test_quickstart_runs_and_removes_its_temporary_folder(tmp_path):
    env = dict(mxrec_env(), TMPDIR=str(tmp_path))  # its temporary folder goes here, where we can look
    result = subprocess.run([sys.executable, str(QUICKSTART)], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "fast reader: 50 records" in result.stdout
    assert list(tmp_path.iterdir()) == []  # nothing left behind


def test_quickstart_keeps_a_folder_it_was_given(tmp_path):
    out = tmp_path / "demo"
    result = subprocess.run([sys.executable, str(QUICKSTART), str(out)], capture_output=True, text=True,
                            env=mxrec_env(), timeout=300)
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in Path(out).iterdir()) == [
        "photos.checksums", "photos.idx", "photos.labels", "photos.lst", "photos.rec"]
