"""``examples/ray_train.py`` runs end to end on the test cluster: pack on Ray, read, prepare, train two DDP ranks."""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys

import pytest

from testkit import SRC, TESTS

pytestmark = pytest.mark.slow


def test_ray_training_example(ray_cluster, tmp_path):
    pytest.importorskip("torch")
    env = ray_cluster.driver_env()
    env["PYTHONPATH"] = str(SRC) + os.pathsep + env.get("PYTHONPATH", "")
    done = subprocess.run([sys.executable, str(TESTS.parent / "examples" / "ray_train.py"), "--epochs", "2",
                           "--workdir", str(tmp_path)], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "packed 50 photos into 8 shards" in done.stdout
    epochs = re.findall(r"epoch (\d): loss ([\d.]+), accuracy ([\d.]+) over (\d+) samples on 2 ranks", done.stdout)
    assert [(e, n) for e, _, _, n in epochs] == [("0", "50"), ("1", "50")], done.stdout
    assert all(math.isfinite(float(loss)) for _, loss, _, _ in epochs)
    assert (tmp_path / "photos.manifest.json").exists()
