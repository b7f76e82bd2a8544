"""Self-test of the cheap path: in-process ``ray.init(num_cpus=2)`` through the ``ray_local`` fixture.

Why a module of its own: a process holds one Ray connection, and ``ray_local`` keeps one for the whole module,
so it cannot share a module with tests that connect to ``ray_cluster``.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from testkit.ray_cluster import assert_loopback_only, local_ray_processes


def _square(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {"id": batch["id"], "square": batch["id"] ** 2, "pid": np.full(len(batch["id"]), os.getpid())}


@pytest.mark.slow
def test_local_ray_runs_ray_data_on_loopback(ray_local) -> None:
    ray = ray_local
    assert ray.cluster_resources().get("CPU") == 2
    rows = ray.data.range(64, override_num_blocks=4).map_batches(_square, batch_format="numpy").take_all()
    assert sorted((int(r["id"]), int(r["square"])) for r in rows) == [(i, i * i) for i in range(64)]
    assert os.getpid() not in {int(r["pid"]) for r in rows}
    procs = local_ray_processes()
    assert {"gcs_server", "raylet"} <= {p.name for p in procs}
    assert_loopback_only([os.getpid(), *(p.pid for p in procs)], what="in-process Ray after a job")
