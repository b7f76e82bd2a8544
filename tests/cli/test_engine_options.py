"""``--engine ray`` options that would be ignored are refused before any work (issue 18 §6)."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("command", ["pack", "verify"])
def test_workers_with_engine_ray_is_refused(mxrec_cli, tmp_path, command):
    target = [tmp_path / "set", tmp_path] if command == "pack" else [tmp_path / "set.rec"]
    result = mxrec_cli(command, "--engine", "ray", "-j", "4", *target)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"mxrec {command}: error: -j/--workers 4 sets this machine's threads; with --engine ray the cluster's "
        "CPUs do the work (Ray tasks: 4 per cluster CPU)"]


def test_workers_still_work_locally(mxrec_cli, tmp_path):
    (tmp_path / "photos").mkdir()
    result = mxrec_cli("pack", "-j", "2", "--no-progress", tmp_path / "set", tmp_path / "photos")
    assert "-j/--workers" not in result.stderr
