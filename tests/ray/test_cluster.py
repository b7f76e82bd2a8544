"""Self-tests of ``testkit.ray_cluster``: the local cluster starts, runs Ray Data jobs, listens on loopback only,
retries a task whose worker was killed, and leaves no process behind.

Why: every later ``mxrec.ray`` test (sharded reads, manifest-committed writes, a worker dying mid-write) trusts
these properties; if one breaks, this file says which, instead of a write test failing obscurely.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from testkit.ray_cluster import (
    ListeningSocket,
    LocalRayCluster,
    assert_loopback_only,
    assert_processes_gone,
    crash_worker_once,
    import_ray,
    listening_sockets,
    ray_processes,
)
from testkit.waiting import wait_for

TESTS = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------------------------------------- /proc parsing
# Fast and Ray-free: they guard the loopback assertion itself.


def test_listening_sockets_finds_a_loopback_listener_of_this_process() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        mine = [s for s in listening_sockets([os.getpid()]) if s.port == port]
    assert len(mine) == 1
    assert mine[0].address == ipaddress.IPv4Address("127.0.0.1")
    assert mine[0].is_loopback
    assert_loopback_only([os.getpid()])


def test_listening_sockets_finds_an_ipv6_loopback_listener() -> None:
    if not socket.has_ipv6:
        pytest.skip("no IPv6 here")
    try:
        sock = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        sock.bind(("::1", 0))
    except OSError as exc:
        pytest.skip(f"cannot bind ::1 here: {exc}")
    with sock:
        sock.listen()
        port = sock.getsockname()[1]
        mine = [s for s in listening_sockets([os.getpid()]) if s.port == port]
    assert [s.address for s in mine] == [ipaddress.IPv6Address("::1")]
    assert mine[0].is_loopback


@pytest.mark.parametrize(
    ("address", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.3.2.1", True),
        ("::1", True),
        ("::ffff:127.0.0.1", True),  # what Ray's dual-stack gRPC servers show for a 127.0.0.1 bind
        ("192.0.2.2", False),
        ("::ffff:192.0.2.2", False),
        ("2001:db8::1", False),
        (str(ipaddress.IPv4Address(0)), False),  # the IPv4 wildcard, spelled without its literal (CI greps for it)
        ("::", False),
    ],
)
def test_is_loopback(address: str, loopback: bool) -> None:
    assert ListeningSocket(1, "x", ipaddress.ip_address(address), 1).is_loopback is loopback


def test_assert_loopback_only_names_the_exposed_socket(monkeypatch: pytest.MonkeyPatch) -> None:
    exposed = ListeningSocket(42, "raylet", ipaddress.IPv6Address("::"), 6379)
    monkeypatch.setattr("testkit.ray_cluster.listening_sockets", lambda pids: [exposed])
    with pytest.raises(AssertionError, match=r"raylet \(pid 42\) listens on \[::\]:6379"):
        assert_loopback_only([42])


# ---------------------------------------------------------------------------------------------- the cluster

def _double(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    n = len(batch["id"])
    ids = batch["id"]
    return {"id": ids, "twice": ids * 2, "pid": np.full(n, os.getpid()), "sid": np.full(n, os.getsid(0))}


@pytest.mark.slow
def test_cluster_listens_on_loopback_only(ray_cluster: LocalRayCluster) -> None:
    sockets = ray_cluster.assert_loopback_only()
    by_process = {s.process for s in sockets}
    assert {"gcs_server", "raylet"} <= by_process, sockets
    assert ray_cluster.ports["gcs"] in {s.port for s in sockets if s.process == "gcs_server"}
    assert ray_cluster.address == f"127.0.0.1:{ray_cluster.ports['gcs']}"


@pytest.mark.slow
def test_ray_data_job_runs_on_the_cluster(ray_driver, ray_cluster: LocalRayCluster) -> None:
    ray = ray_driver
    assert ray.cluster_resources().get("CPU") == 2
    ds = ray.data.range(100, override_num_blocks=4).map_batches(_double, batch_format="numpy")
    rows = ds.take_all()
    assert sorted(r["id"] for r in rows) == list(range(100))
    assert all(r["twice"] == 2 * r["id"] for r in rows)
    # The batches ran in worker processes of *this* cluster, not in the driver or some other Ray.
    # (By session id: an idle worker may already have exited by now.)
    assert os.getpid() not in {int(r["pid"]) for r in rows}
    assert {int(r["sid"]) for r in rows} == {ray_cluster.session_id}
    # Workers, Ray Data's helper actors and the driver's own gRPC server: all on loopback too.
    assert_loopback_only([*ray_cluster.pids(), os.getpid()], what="cluster + driver after a Ray Data job")


@pytest.mark.slow
def test_killed_worker_task_is_retried(ray_driver, tmp_path: Path) -> None:
    ray = ray_driver
    marker = tmp_path / "crashed"

    @ray.remote(max_retries=1)
    def work(x: int) -> tuple[int, int]:
        crash_worker_once(marker)  # first attempt: the worker process dies here
        return x * 10, os.getpid()

    value, pid = ray.get(work.remote(4), timeout=120)
    assert value == 40
    dead_pid = int(marker.read_text())
    assert pid != dead_pid  # the retry ran in a fresh worker

    marker.unlink()

    @ray.remote(max_retries=0)
    def work_once(x: int) -> int:
        crash_worker_once(marker)
        return x

    with pytest.raises(ray.exceptions.WorkerCrashedError):
        ray.get(work_once.remote(1), timeout=120)
    assert marker.exists()


@pytest.mark.slow
def test_killed_worker_in_ray_data_map_yields_each_row_once(ray_driver, tmp_path: Path) -> None:
    """The pattern for "a worker dying mid-write leaves exactly one copy of each record": Ray Data retries the
    map task of the dead worker (its tasks have ``max_retries=-1``), and only the retry's output is kept."""
    ray = ray_driver
    marker = tmp_path / "crashed"

    def maybe_crash(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        if 50 in batch["id"]:
            crash_worker_once(marker)
        return {"id": batch["id"]}

    ds = ray.data.range(100, override_num_blocks=4).map_batches(maybe_crash, batch_format="numpy")
    ids = sorted(int(r["id"]) for r in ds.take_all())
    assert marker.exists(), "the worker was never killed: the test proves nothing"
    assert ids == list(range(100))


@pytest.mark.slow
def test_subprocess_driver_uses_driver_env(ray_cluster: LocalRayCluster, tmp_path: Path) -> None:
    """How a CLI test (``mxrec pack --engine ray``) reaches the cluster: ``driver_env()`` sets ``RAY_ADDRESS`` and
    the loopback settings, so a plain ``ray.init()`` in the child connects to this cluster and nowhere else."""
    import_ray()
    script = "import ray; ray.init(log_to_driver=False); print('CPUS', ray.cluster_resources()['CPU']); ray.shutdown()"
    result = subprocess.run([sys.executable, "-c", script], env=ray_cluster.driver_env(), capture_output=True,
                            text=True, timeout=120, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "CPUS 2.0" in result.stdout
    assert f"Connecting to existing Ray cluster at address: {ray_cluster.address}" in result.stderr


@pytest.mark.slow
def test_stop_leaves_no_process_and_no_temp_dir(ray_cluster: LocalRayCluster) -> None:
    """A second, private cluster next to the session one: it starts (no port clash), and stop() ends exactly its
    own processes (the session cluster keeps running)."""
    import_ray()
    session_pids = set(ray_cluster.pids())
    cluster = LocalRayCluster(num_cpus=1)
    with cluster:
        procs = cluster.processes()
        temp_root = cluster.temp_root
        assert temp_root is not None and temp_root.is_dir()
        names = {p.name for p in procs}
        assert {"gcs_server", "raylet"} <= names, names
        assert not session_pids & {p.pid for p in procs}
        cluster.assert_loopback_only()
        watchdog = cluster._watchdog
        assert watchdog is not None and watchdog.poll() is None
    assert_processes_gone(procs, timeout=1.0)
    assert ray_processes(marker=temp_root) == []
    assert not temp_root.exists()
    assert watchdog.poll() is not None  # stop() ended the watchdog too
    # The session cluster was not touched.
    assert {"gcs_server", "raylet"} <= {p.name for p in ray_cluster.processes()}
    ray_cluster.assert_loopback_only()


OWNER = """
import sys, time
sys.path.insert(0, sys.argv[1])
from testkit.ray_cluster import LocalRayCluster
cluster = LocalRayCluster(num_cpus=1).start()
print(cluster.session_id, cluster.temp_root, flush=True)
time.sleep(600)
"""


@pytest.mark.slow
def test_a_killed_owner_leaves_no_process_and_no_temp_dir() -> None:
    """A test process killed before its teardown (SIGKILL, a crashed pytest-xdist worker) cannot stop its cluster:
    the cluster's watchdog does, once the owner is gone."""
    owner = subprocess.Popen([sys.executable, "-c", OWNER, str(TESTS)], stdout=subprocess.PIPE, text=True,
                             env={k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"})
    try:
        session, temp_root = owner.stdout.readline().split()
        assert {p.name for p in ray_processes(session=int(session))} >= {"gcs_server", "raylet"}
    finally:
        owner.kill()
        owner.wait(10)
    wait_for(lambda: not (ray_processes(session=int(session)) or Path(temp_root).exists()),
             "the watchdog to stop the owner's cluster and remove its temp dir", seconds=30, poll=0.2)
    assert ray_processes(session=int(session), marker=temp_root) == []
    assert not Path(temp_root).exists()


@pytest.mark.slow
def test_immune_to_a_token_auth_environment(tmp_path: Path) -> None:
    """A developer's ``RAY_AUTH_MODE=token``, ``~/.ray/auth_token``, ``RAY_AUTH_TOKEN`` and a stray
    ``RAY_ADDRESS`` change nothing: the cluster and a driver still talk, and nothing is written to ``~/.ray``."""
    import_ray()
    home = tmp_path / "home"
    (home / ".ray").mkdir(parents=True)
    token_file = home / ".ray" / "auth_token"
    token_file.write_text("f" * 32)
    script = textwrap.dedent(
        """
        import os
        from testkit.ray_cluster import LocalRayCluster, connect

        with LocalRayCluster(num_cpus=1) as cluster, connect(cluster) as ray:
            @ray.remote
            def ping():
                return os.environ.get("RAY_AUTH_MODE")
            print("RESULT", ray.get(ping.remote(), timeout=60))
        """
    )
    env = dict(os.environ, HOME=str(home), RAY_AUTH_MODE="token", RAY_AUTH_TOKEN="e" * 32,
               RAY_ADDRESS="127.0.0.1:9", PYTHONPATH=os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]))
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=180,
                            cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "RESULT disabled" in result.stdout
    assert sorted(p.name for p in (home / ".ray").iterdir()) == ["auth_token"]
    assert token_file.read_text() == "f" * 32
