"""The Ray that mxrec starts for itself (no ``--address``, no ``RAY_ADDRESS``), issue 18 §6.

Each test runs a driver in a fresh interpreter, as a user's ``mxrec ... --engine ray`` runs: with
``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER`` *not* set (mxrec must set it itself) and a private ``RAY_TMPDIR``.

* It listens on 127.0.0.1 only: the listening sockets of gcs_server, raylet, the agents and the workers,
  read from ``/proc`` while the driver holds the cluster.
* ``read_recordio`` reads a multi-label set inside Ray by default (every label).
* A worker that dies during ``verify --engine ray --json`` leaves stdout parseable JSON, without ANSI codes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import numpy as np
import pytest

from mxrec.format.header import IRHeader, pack
from testkit import SRC, TESTS
from testkit.datasets import clean_jpeg, make_clean_dataset
from testkit.iterdata import write_records

pytestmark = pytest.mark.slow


def own_ray_driver(script: str, tmp_path: Path) -> subprocess.CompletedProcess:
    """Run ``script`` as a Ray driver that starts its own Ray (RAY_ADDRESS and the loopback switch unset)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("RAY_ADDRESS", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")}
    ray_tmp = tempfile.mkdtemp(prefix="mxo-", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
    env.update(RAY_TMPDIR=ray_tmp, RAY_AUTH_MODE="disabled", RAY_USAGE_STATS_ENABLED="0",
               PYTHONPATH=os.pathsep.join([str(SRC), str(TESTS), env.get("PYTHONPATH", "")]),
               MXREC_TEST_RAY_TMP=ray_tmp)
    try:
        return subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True,
                              env=env, cwd=tmp_path, timeout=300)
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)


def test_own_cluster_listens_on_loopback_only_and_reads_every_label(tmp_path):
    labels = [np.array([k, k / 2, 7], np.float32) for k in range(6)]
    write_records(tmp_path / "multi.rec", [pack(IRHeader(0, label, k, 0), clean_jpeg(k))
                                           for k, label in enumerate(labels)])
    done = own_ray_driver("""
        import json, os
        from mxrec.ray import read_recordio, ray_session
        from testkit.ray_cluster import listening_sockets, ray_processes

        def pid():
            return os.getpid()

        with ray_session() as ray:
            rows = read_recordio("multi.rec", override_num_blocks=2).take_all()
            workers = ray.get([ray.remote(pid).remote() for _ in range(2)])
            procs = ray_processes(session=os.getsid(0), marker=os.environ["MXREC_TEST_RAY_TMP"])
            sockets = listening_sockets([os.getpid(), *(p.pid for p in procs)])
            print(json.dumps({
                "labels": [[float(v) for v in row["label"]] for row in rows],
                "names": sorted({p.name for p in procs}), "workers": workers,
                "sockets": [[s.process, str(s.address), s.port, s.is_loopback, s.pid] for s in sockets]}))
        """, tmp_path)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["labels"] == [label.tolist() for label in labels]
    assert {"gcs_server", "raylet"} <= set(found["names"])
    listeners = {name for name, *_ in found["sockets"]}
    assert {"gcs_server", "raylet"} <= listeners and len(found["sockets"]) >= 4, found["sockets"]
    assert set(found["workers"]) & {pid for *_, pid in found["sockets"]}, "no worker's sockets were checked"
    exposed = [s for s in found["sockets"] if not s[3]]
    assert exposed == [], f"mxrec's own Ray listens beyond loopback: {exposed}"


def test_a_dying_worker_leaves_json_stdout_clean(tmp_path):
    make_clean_dataset(tmp_path / "clean.rec", count=24)
    done = own_ray_driver("""
        import sys
        import mxrec.ray.verify_tasks
        from mxrec.cli import main
        from testkit.ray_cluster import crashing_contents_task

        mxrec.ray.verify_tasks._contents_task = crashing_contents_task  # the first task's worker dies
        sys.exit(main(["verify", "--engine", "ray", "--json", "--no-progress", "clean.rec"]))
        """, tmp_path)
    assert (tmp_path / "clean.rec.crashed").exists(), "no worker died: the test proves nothing"
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["ok"] and "\x1b[" not in done.stdout
