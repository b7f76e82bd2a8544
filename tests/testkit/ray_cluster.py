"""A real Ray cluster for tests: local, loopback-only, private, and stopped by its own pids.

Why this exists: mxrec's Ray integration (read tasks split by ``.idx`` ranges, sharded writes committed by a
manifest) must be tested on a real cluster, with real worker processes that can die and be retried. A plain
``ray start`` / ``ray.init()`` is not safe for that on a shared machine:

* On Linux Ray rewrites ``--node-ip-address=127.0.0.1`` (and ``ray.init()``'s node address) to the address it
  sees "from the outside", and gcs_server, raylet and every worker then listen on all interfaces. With
  ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` Ray resolves the node address to 127.0.0.1 and every server binds
  there (as ``::ffff:127.0.0.1`` on dual-stack sockets). The driver must see the same setting, or it looks for
  its raylet at the outside address and hangs; :func:`loopback_environ` sets it (and patches the already
  imported constant) in this process.
* Token authentication depends on ``RAY_AUTH_MODE`` and on token files under ``$HOME/.ray``; a developer's own
  Ray use (or a newer Ray that writes ``~/.ray/auth_token`` on ``ray.init()``) must not change how the test
  cluster behaves. The cluster runs with a private ``HOME`` inside its temp dir, and cluster and driver both run
  with ``RAY_AUTH_MODE=disabled`` and without ``RAY_AUTH_TOKEN``/``RAY_AUTH_TOKEN_PATH``.
* ``ray stop`` kills every Ray process on the machine, other people's included. :class:`LocalRayCluster`
  starts ``ray start`` in a new session and stops exactly the processes of that session (and of its temp dir):
  SIGTERM raylet first, then the helpers, then gcs_server (the order ``ray stop`` uses; gcs_server hangs if it
  goes first), SIGKILL whatever outlives a bounded wait, and checks that nothing is left.

Use from a conftest (``tests/ray/conftest.py`` does this)::

    from testkit.ray_cluster import pytest_configure, ray_cluster, ray_driver, ray_local  # noqa: F401

Fixtures: ``ray_cluster`` (session: a started :class:`LocalRayCluster`), ``ray_driver`` (function: this process
connected to it; yields the ``ray`` module), ``ray_local`` (module: in-process ``ray.init(num_cpus=2)`` for
tests where a cluster is not the point). All skip when Ray is not installed. A process holds one Ray
connection at a time, so one test module uses either ``ray_driver`` or ``ray_local``, not both.
Set ``MXREC_RAY_KEEP_TMP=1`` to keep a cluster's temp dir (and its logs) after the run.
"""

from __future__ import annotations

import contextlib
import importlib.util
import ipaddress
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

__all__ = [
    "RAY_DROPPED_ENV",
    "RAY_LOOPBACK_ENV",
    "ClusterProcess",
    "ListeningSocket",
    "LocalRayCluster",
    "assert_loopback_only",
    "assert_processes_gone",
    "connect",
    "crash_worker_once",
    "driver_runtime_env",
    "import_ray",
    "listening_sockets",
    "local_ray",
    "local_ray_processes",
    "loopback_environ",
    "pytest_configure",
    "ray_cluster",
    "ray_driver",
    "ray_local",
    "ray_processes",
]

#: Environment that keeps a Ray cluster (and its driver) on 127.0.0.1 and out of token auth and usage stats.
RAY_LOOPBACK_ENV: dict[str, str] = {
    # Linux default is 1: the node address becomes the outside-facing IP and servers bind every interface.
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    # Explicit, so that a developer's RAY_AUTH_MODE=token (or a Ray that defaults to it) changes nothing.
    "RAY_AUTH_MODE": "disabled",
    "RAY_USAGE_STATS_ENABLED": "0",
}

#: Variables removed from the cluster's and the driver's environment: token sources, and RAY_ADDRESS (which
#: would send a plain ``ray.init()`` to someone else's cluster).
RAY_DROPPED_ENV: tuple[str, ...] = ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_ADDRESS")

_KEEP_TMP_ENV = "MXREC_RAY_KEEP_TMP"
# Unix socket paths (temp dir + ~40 chars of session name + /sockets/plasma_store) must stay under 107 bytes.
_MAX_TEMP_ROOT_LEN = 40


# --------------------------------------------------------------------------------------------------------------
# Importing Ray


def import_ray() -> ModuleType:
    """Import the real ``ray`` package, or skip the calling test with a clear reason.

    Why not ``pytest.importorskip("ray")``: ``tests/`` is on ``sys.path`` (rootdir conftest) and holds the folder
    ``tests/ray``, so without Ray installed ``import ray`` succeeds as an empty namespace package.
    """
    try:
        import ray
    except ImportError as exc:  # pragma: no cover - depends on the environment
        pytest.skip(f"ray is not installed ({exc}); pip install 'ray[data]' to run the Ray tests")
    if getattr(ray, "__file__", None) is None or not hasattr(ray, "init"):
        pytest.skip("ray is not installed (`import ray` found only the tests/ray folder); pip install 'ray[data]'")
    return ray


def _patch_ray_constants() -> None:
    """Make an already imported Ray resolve its node address to loopback (it reads the env var at import)."""
    constants = sys.modules.get("ray._private.ray_constants")
    if constants is not None:
        constants.ENABLE_RAY_CLUSTER = False


@contextlib.contextmanager
def loopback_environ() -> Iterator[None]:
    """Within the block, this process's environment is :data:`RAY_LOOPBACK_ENV` without :data:`RAY_DROPPED_ENV`.

    Needed by any driver of a loopback cluster (connecting or in-process), since the driver computes its own
    node address and starts its own gRPC server. Restores the environment afterwards; the patched Ray constant
    stays (a later driver in this process needs it too, and no test wants the outside address).
    """
    saved = {name: os.environ.get(name) for name in (*RAY_LOOPBACK_ENV, *RAY_DROPPED_ENV)}
    os.environ.update(RAY_LOOPBACK_ENV)
    for name in RAY_DROPPED_ENV:
        os.environ.pop(name, None)
    _patch_ray_constants()
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def driver_runtime_env(extra_env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A ``runtime_env`` whose workers import what this driver imports (``src``, ``tests``, the test folder).

    Why: cloudpickle sends functions of importable modules by reference (``test_cluster.fn``,
    ``testkit.ray_cluster.crash_worker_once``, ``mxrec...``), and Ray only gives workers the driver's working
    directory, not pytest's ``sys.path`` additions. Entries inside this Python's prefix are left out: workers run
    the same interpreter and have them already.
    """
    prefixes = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    paths: list[str] = []
    for entry in sys.path:
        real = os.path.realpath(entry or os.getcwd())
        if not os.path.isdir(real) or any(real == p or real.startswith(p + os.sep) for p in prefixes):
            continue
        if real not in paths:
            paths.append(real)
    inherited = os.environ.get("PYTHONPATH")
    if inherited:
        paths.extend(p for p in inherited.split(os.pathsep) if p and p not in paths)
    env_vars = {"PYTHONPATH": os.pathsep.join(paths)}
    env_vars.update(extra_env or {})
    return {"env_vars": env_vars}


def _quiet_ray_data(ray: ModuleType) -> None:
    """Turn off Ray Data's progress bars for this driver: they flood captured test output on every job."""
    with contextlib.suppress(ImportError, AttributeError):
        ctx = ray.data.DataContext.get_current()
        ctx.enable_progress_bars = False
        with contextlib.suppress(AttributeError):
            ctx.enable_operator_progress_bars = False


# --------------------------------------------------------------------------------------------------------------
# Processes and sockets, from /proc


@dataclass(frozen=True)
class ClusterProcess:
    """A process identified by pid *and* start time, so that a reused pid is not taken for a survivor."""

    pid: int
    start_ticks: int
    name: str

    def alive(self) -> bool:
        """True while the process exists and is not a zombie (a zombie holds no sockets, files or memory)."""
        stat = _read_stat(self.pid)
        return stat is not None and stat[4] == self.start_ticks and stat[0] != "Z"


def _read_stat(pid: int) -> tuple[str, int, int, int, int] | None:
    """``(state, ppid, pgrp, session, start_ticks)`` of ``pid`` from ``/proc/<pid>/stat``, or None if gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2 :].split()  # the command name in parentheses may contain spaces
    return fields[0], int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19])


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def _all_pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def ray_processes(*, session: int | None = None, marker: str | os.PathLike[str] | None = None) -> list[ClusterProcess]:
    """Live processes of one Ray instance: those in ``session``, those whose command line contains ``marker``
    (a cluster's private temp dir: gcs_server, raylet and the agents name it), and all their descendants
    (workers, whose command line Ray rewrites to ``ray::IDLE``/``ray::task``).
    """
    marker_text = os.fspath(marker) if marker is not None else None
    stats: dict[int, tuple[str, int, int, int, int]] = {}
    for pid in _all_pids():
        stat = _read_stat(pid)
        if stat is not None and stat[0] != "Z":
            stats[pid] = stat
    roots = {
        pid
        for pid, stat in stats.items()
        if (session is not None and stat[3] == session) or (marker_text and marker_text in _cmdline(pid))
    }
    roots.discard(os.getpid())  # the driver names the temp dir only through its own ray.init arguments
    children: dict[int, list[int]] = {}
    for pid, stat in stats.items():
        children.setdefault(stat[1], []).append(pid)
    found: set[int] = set()
    todo = list(roots)
    while todo:
        pid = todo.pop()
        if pid in found:
            continue
        found.add(pid)
        todo.extend(children.get(pid, ()))
    return [ClusterProcess(pid, stats[pid][4], _process_name(pid)) for pid in sorted(found)]


def _process_name(pid: int) -> str:
    """``raylet``, ``gcs_server``, ``ray::IDLE``, or the script of a Python helper (``log_monitor.py``)."""
    argv = _cmdline(pid).split()
    if not argv:
        return f"pid {pid}"
    name = os.path.basename(argv[0])
    if name.startswith("python"):
        script = next((a for a in argv[1:] if a.endswith(".py")), None)
        if script:
            return os.path.basename(script)
        if "-m" in argv[1:-1]:
            return "-m " + argv[argv.index("-m") + 1]  # e.g. the Ray client server
    return name


@dataclass(frozen=True)
class ListeningSocket:
    """One listening TCP socket of a process."""

    pid: int
    process: str
    address: ipaddress.IPv4Address | ipaddress.IPv6Address
    port: int

    @property
    def is_loopback(self) -> bool:
        """127.0.0.0/8, ::1, or ::ffff:127.x (how Ray's dual-stack gRPC sockets show a 127.0.0.1 bind)."""
        addr = self.address
        if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
            addr = addr.ipv4_mapped
        return addr.is_loopback

    def __str__(self) -> str:
        addr = self.address
        if isinstance(addr, ipaddress.IPv6Address):
            host = f"[::ffff:{addr.ipv4_mapped}]" if addr.ipv4_mapped is not None else f"[{addr}]"
        else:
            host = str(addr)
        return f"{self.process} (pid {self.pid}) listens on {host}:{self.port}"


_TCP_LISTEN = "0A"


def _parse_proc_addr(hex_addr: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """Addresses in /proc/net/tcp{,6} are 32-bit words in host (little-endian) byte order."""
    raw = bytes.fromhex(hex_addr)
    if len(raw) == 4:
        return ipaddress.IPv4Address(raw[::-1])
    return ipaddress.IPv6Address(b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4)))


def _listening_inodes(pid: int) -> dict[int, tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]]:
    table: dict[int, tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]] = {}
    for proto in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/{pid}/net/{proto}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10 or fields[3] != _TCP_LISTEN:
                continue
            host, port = fields[1].split(":")
            table[int(fields[9])] = (_parse_proc_addr(host), int(port, 16))
    return table


def listening_sockets(pids: Iterable[int]) -> list[ListeningSocket]:
    """All listening TCP sockets held by ``pids``, found through their ``/proc/<pid>/fd`` socket inodes."""
    result: list[ListeningSocket] = []
    tables: dict[str, dict[int, tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]]] = {}
    for pid in pids:
        try:
            netns = os.readlink(f"/proc/{pid}/ns/net")
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue  # gone, or not ours to read
        if netns not in tables:
            tables[netns] = _listening_inodes(pid)
        name = _process_name(pid)
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                entry = tables[netns].get(int(target[8:-1]))
                if entry is not None:
                    result.append(ListeningSocket(pid, name, entry[0], entry[1]))
    return sorted(set(result), key=lambda s: (s.pid, s.port))


def assert_loopback_only(pids: Iterable[int], *, what: str = "Ray") -> list[ListeningSocket]:
    """Fail loudly if any of ``pids`` listens on a non-loopback address; return the sockets checked."""
    sockets = listening_sockets(pids)
    exposed = [s for s in sockets if not s.is_loopback]
    if exposed:
        raise AssertionError(f"{what} listens beyond loopback:\n  " + "\n  ".join(map(str, exposed)))
    return sockets


def assert_processes_gone(processes: Iterable[ClusterProcess], *, what: str = "Ray", timeout: float = 5.0) -> None:
    """Fail if any of ``processes`` is still alive after ``timeout`` seconds."""
    survivors = _wait_gone(list(processes), timeout)
    if survivors:
        raise AssertionError(
            f"{what} processes survived: " + ", ".join(f"{p.name} (pid {p.pid})" for p in survivors)
        )


def _wait_gone(processes: list[ClusterProcess], timeout: float) -> list[ClusterProcess]:
    deadline = time.monotonic() + timeout
    alive = [p for p in processes if p.alive()]
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = [p for p in alive if p.alive()]
    return alive


def _signal(processes: Iterable[ClusterProcess], sig: signal.Signals) -> None:
    for proc in processes:
        if proc.alive():  # re-checks the start time right before signalling a pid that may have been reused
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(proc.pid, sig)


def _free_ports(count: int) -> list[int]:
    """Distinct ports free on 127.0.0.1 right now (held together so that they differ)."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _private_temp_root(prefix: str) -> Path:
    """A fresh, short, private directory (short: Ray puts unix sockets below it)."""
    base = tempfile.gettempdir()
    if len(base) > _MAX_TEMP_ROOT_LEN - 16:
        base = "/tmp"
    return Path(tempfile.mkdtemp(prefix=prefix, dir=base))


# --------------------------------------------------------------------------------------------------------------
# The cluster


def reap_when_gone(owner: int, session: int, marker: str, root: str, *, poll: float = 0.5) -> None:
    """Wait until process ``owner`` is gone, then stop the Ray processes of ``session``/``marker`` (as
    :meth:`LocalRayCluster.stop` finds them) and remove ``root``: what a cluster's watchdog runs, so that a test
    process killed before its fixtures' teardown (SIGKILL, a crashed pytest-xdist worker) leaves no gcs_server or
    raylet behind. Bounded by the owner's life, then by a few seconds."""
    while True:
        try:
            os.kill(owner, 0)
        except ProcessLookupError:
            break
        except PermissionError:
            pass
        time.sleep(poll)
    for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        procs = ray_processes(session=session, marker=marker)
        _signal(procs, sig)
        _wait_gone(procs, wait)
    shutil.rmtree(root, ignore_errors=True)


# The watchdog's arguments travel in its environment: its command line must not name the cluster's temp dir, or
# ray_processes would count it among the cluster's processes.
_WATCHDOG = ("import os; from testkit.ray_cluster import reap_when_gone; "
             "owner, session, marker, root = os.environ['TESTKIT_RAY_REAP'].split(os.pathsep); "
             "reap_when_gone(int(owner), int(session), marker, root)")


class LocalRayCluster:
    """A single-node Ray cluster started with ``ray start --head``, bound to 127.0.0.1, private to its owner.

    ``address`` is what a driver passes to ``ray.init(address=...)`` (inside :func:`loopback_environ`). The
    cluster's temp dir (sessions, logs, sockets, spilled objects, and the private ``HOME``) is removed by
    :meth:`stop` unless ``keep_temp`` (or ``MXREC_RAY_KEEP_TMP=1``).

    Every port is named explicitly (GCS, object manager, node manager, metrics export, runtime env agent,
    dashboard agent HTTP and gRPC, client server) and picked free on 127.0.0.1, so that two clusters on one
    machine do not collide on Ray's fixed defaults (6379, 8265, 52365, ...) and nothing depends on them.
    """

    def __init__(
        self,
        num_cpus: int = 2,
        *,
        object_store_memory: int = 256 * 1024 * 1024,
        start_timeout: float = 90.0,
        stop_timeout: float = 15.0,
        extra_args: Iterable[str] = (),
        env: Mapping[str, str] | None = None,
        keep_temp: bool | None = None,
    ) -> None:
        self.num_cpus = num_cpus
        self.object_store_memory = object_store_memory
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self.extra_args = list(extra_args)
        self.extra_env = dict(env or {})
        self.keep_temp = os.environ.get(_KEEP_TMP_ENV) == "1" if keep_temp is None else keep_temp
        self.temp_root: Path | None = None
        self.address: str = ""
        self.ports: dict[str, int] = {}
        self.session_id: int | None = None
        self.startup_seconds: float | None = None
        self._known: dict[tuple[int, int], ClusterProcess] = {}
        self._watchdog: subprocess.Popen | None = None  # reaps the cluster if this process dies first

    # -- paths and environment ---------------------------------------------------------------------------------

    @property
    def temp_dir(self) -> Path:
        """Ray's ``--temp-dir`` (sessions, logs, sockets)."""
        return self._root() / "ray"

    @property
    def home(self) -> Path:
        """The private ``HOME`` of the cluster processes: whatever Ray writes to ``~/.ray`` stays in here."""
        return self._root() / "home"

    @property
    def logs_dir(self) -> Path:
        """``session_latest/logs`` of this cluster (gone after :meth:`stop` unless ``keep_temp``)."""
        return self.temp_dir / "session_latest" / "logs"

    def _root(self) -> Path:
        if self.temp_root is None:
            raise RuntimeError("the cluster is not started")
        return self.temp_root

    def cluster_env(self) -> dict[str, str]:
        """The environment of ``ray start`` (inherited by gcs_server, raylet and every worker)."""
        env = dict(os.environ)
        for name in RAY_DROPPED_ENV:
            env.pop(name, None)
        env.update(RAY_LOOPBACK_ENV)
        env["HOME"] = str(self.home)
        env.update(self.extra_env)
        return env

    def driver_env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """Environment for a *subprocess* driver (e.g. ``mxrec pack --engine ray``): loopback settings, no
        token sources, and ``RAY_ADDRESS`` pointing at this cluster."""
        env = dict(os.environ if base is None else base)
        for name in RAY_DROPPED_ENV:
            env.pop(name, None)
        env.update(RAY_LOOPBACK_ENV)
        env["RAY_ADDRESS"] = self.address
        return env

    # -- lifecycle -----------------------------------------------------------------------------------------------

    def start(self) -> LocalRayCluster:
        """Start the head node; on any failure stop what did start and raise with the tail of the logs."""
        if self.temp_root is not None:
            raise RuntimeError("the cluster was already started")
        self.temp_root = _private_temp_root("mxray-")
        self.home.mkdir()
        names = ("gcs", "object_manager", "node_manager", "metrics_export", "runtime_env_agent",
                 "dashboard_agent_http", "dashboard_agent_grpc", "client_server", "dashboard")
        self.ports = dict(zip(names, _free_ports(len(names)), strict=True))
        self.address = f"127.0.0.1:{self.ports['gcs']}"
        args = [
            sys.executable, "-m", "ray.scripts.scripts", "start", "--head",
            "--node-ip-address=127.0.0.1",
            f"--port={self.ports['gcs']}",
            f"--num-cpus={self.num_cpus}",
            "--num-gpus=0",
            f"--object-store-memory={self.object_store_memory}",
            "--include-dashboard=false",
            "--dashboard-host=127.0.0.1",
            f"--dashboard-port={self.ports['dashboard']}",
            f"--object-manager-port={self.ports['object_manager']}",
            f"--node-manager-port={self.ports['node_manager']}",
            f"--metrics-export-port={self.ports['metrics_export']}",
            f"--runtime-env-agent-port={self.ports['runtime_env_agent']}",
            f"--dashboard-agent-listen-port={self.ports['dashboard_agent_http']}",
            f"--dashboard-agent-grpc-port={self.ports['dashboard_agent_grpc']}",
            "--disable-usage-stats",
            f"--temp-dir={self.temp_dir}",
        ]
        if importlib.util.find_spec("grpc") is not None:
            # Only with ray[client] (grpcio) installed: without it Ray refuses the flag and starts no client server.
            args.append(f"--ray-client-server-port={self.ports['client_server']}")
        args += self.extra_args
        log_path = self._root() / "ray-start.log"
        started = time.monotonic()
        try:
            with open(log_path, "wb") as log:
                # A new session: every process ray start leaves behind keeps this session id, which is how
                # stop() finds them without touching anyone else's Ray.
                proc = subprocess.Popen(args, env=self.cluster_env(), stdin=subprocess.DEVNULL, stdout=log,
                                        stderr=subprocess.STDOUT, start_new_session=True, cwd=self._root())
                self.session_id = proc.pid
                try:
                    rc = proc.wait(timeout=self.start_timeout)
                except subprocess.TimeoutExpired:
                    rc = None
            if rc != 0:
                why = "timed out" if rc is None else f"exited {rc}"
                raise RuntimeError(f"ray start {why} after {time.monotonic() - started:.1f}s:\n{self._log_tail()}")
            self.startup_seconds = time.monotonic() - started
            self.processes()  # remember what runs now, for stop()
            # A session of its own (a Ctrl-C to the test's group does not reach it); stopped first by stop().
            self._watchdog = subprocess.Popen(
                [sys.executable, "-c", _WATCHDOG],
                env={**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parent.parent),
                                                                  *sys.path]),
                     "TESTKIT_RAY_REAP": os.pathsep.join([str(os.getpid()), str(self.session_id),
                                                          str(self.temp_dir), str(self.temp_root)])},
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True)
        except BaseException:
            self.stop()
            raise
        return self

    def processes(self) -> list[ClusterProcess]:
        """The live processes of this cluster (gcs_server, raylet, agents, monitors, workers)."""
        if self.temp_root is None:
            return []
        procs = ray_processes(session=self.session_id, marker=self.temp_dir)
        for proc in procs:
            self._known[(proc.pid, proc.start_ticks)] = proc
        return procs

    def pids(self) -> list[int]:
        """Pids of :meth:`processes`."""
        return [p.pid for p in self.processes()]

    def listening_sockets(self) -> list[ListeningSocket]:
        """The TCP sockets the cluster's processes listen on."""
        return listening_sockets(self.pids())

    def assert_loopback_only(self) -> list[ListeningSocket]:
        """Fail if any process of the cluster listens beyond loopback; return the sockets checked."""
        return assert_loopback_only(self.pids(), what=f"the Ray cluster at {self.address}")

    def stop(self) -> None:
        """Stop this cluster's processes, in ``ray stop``'s order, with bounded waits; then remove its temp dir.

        Raises AssertionError if a process survives SIGKILL (which would leave a stray raylet/gcs_server).
        """
        if self.temp_root is None:
            return
        if self._watchdog is not None:
            self._watchdog.kill()
            self._watchdog.wait(5)
            self._watchdog = None
        procs = list({**self._known, **{(p.pid, p.start_ticks): p for p in self.processes()}}.values())
        is_raylet = [p for p in procs if p.name == "raylet"]
        is_gcs = [p for p in procs if p.name == "gcs_server"]
        others = [p for p in procs if p not in is_raylet and p not in is_gcs]
        step = self.stop_timeout / 3
        # raylet first (its workers and agents fate-share with it), gcs_server last (it hangs on a live raylet).
        for bucket in (is_raylet, others, is_gcs):
            _signal(bucket, signal.SIGTERM)
            _wait_gone(bucket, step)
        for _ in range(3):  # re-scan: a process forked during shutdown must not escape
            leftovers = {p for p in procs if p.alive()} | set(self.processes())
            if not leftovers:
                break
            _signal(leftovers, signal.SIGKILL)
            _wait_gone(list(leftovers), 5.0)
        survivors = sorted({p for p in procs if p.alive()} | set(self.processes()), key=lambda p: p.pid)
        root, self.temp_root = self.temp_root, None
        self._known.clear()
        if not self.keep_temp:
            shutil.rmtree(root, ignore_errors=True)
        if survivors:
            names = ", ".join(f"{p.name} (pid {p.pid})" for p in survivors)
            raise AssertionError(f"Ray processes survived SIGKILL: {names}")

    def _log_tail(self, lines: int = 40) -> str:
        chunks = []
        candidates = [self._root() / "ray-start.log"]
        if self.logs_dir.is_dir():
            candidates += sorted(self.logs_dir.glob("*.err")) + sorted(self.logs_dir.glob("*.out"))
        for path in candidates:
            with contextlib.suppress(OSError):
                text = path.read_text(errors="replace").splitlines()[-lines:]
                if text:
                    chunks.append(f"--- {path.name}\n" + "\n".join(text))
        return "\n".join(chunks)

    def __enter__(self) -> LocalRayCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"LocalRayCluster(address={self.address!r}, num_cpus={self.num_cpus}, temp_root={self.temp_root})"


@contextlib.contextmanager
def connect(cluster: LocalRayCluster, **init_kwargs: Any) -> Iterator[ModuleType]:
    """Connect this process to ``cluster`` as a driver; ``ray.shutdown()`` afterwards. Yields ``ray``.

    ``init_kwargs`` go to ``ray.init``; by default workers get this driver's import path
    (:func:`driver_runtime_env`) and worker output is not streamed to the driver.
    """
    ray = import_ray()
    if ray.is_initialized():
        raise RuntimeError("this process is already a Ray driver (ray_local and ray_driver do not mix in a module)")
    init_kwargs.setdefault("runtime_env", driver_runtime_env())
    init_kwargs.setdefault("log_to_driver", False)
    with loopback_environ():
        ray.init(address=cluster.address, **init_kwargs)
        try:
            _quiet_ray_data(ray)
            yield ray
        finally:
            ray.shutdown()


@contextlib.contextmanager
def local_ray(num_cpus: int = 2, *, object_store_memory: int = 256 * 1024 * 1024, keep_temp: bool | None = None,
              **init_kwargs: Any) -> Iterator[ModuleType]:
    """In-process ``ray.init(num_cpus=...)`` with the cluster's guarantees: loopback only (asserted), no token
    auth, private temp dir, and no process of it left after ``ray.shutdown()`` (asserted). Yields ``ray``.

    Simpler than a cluster fixture, not faster to start (both take ~4 s here); use it where the test is about
    a single driver, not about a driver reconnecting or a cluster outliving it. ``HOME`` stays this process's
    own (changing it under pytest is worse); with ``RAY_AUTH_MODE=disabled`` Ray writes nothing there.
    """
    ray = import_ray()
    if ray.is_initialized():
        raise RuntimeError("this process is already a Ray driver (ray_local and ray_driver do not mix in a module)")
    global _local_root
    keep = os.environ.get(_KEEP_TMP_ENV) == "1" if keep_temp is None else keep_temp
    root = _local_root = _private_temp_root("mxray-local-")
    init_kwargs.setdefault("runtime_env", driver_runtime_env())
    init_kwargs.setdefault("log_to_driver", False)
    procs: list[ClusterProcess] = []
    try:
        with loopback_environ():
            ray.init(num_cpus=num_cpus, num_gpus=0, object_store_memory=object_store_memory, include_dashboard=False,
                     _temp_dir=str(root / "ray"), **init_kwargs)
            try:
                _quiet_ray_data(ray)
                procs = ray_processes(marker=root)
                assert_loopback_only([os.getpid(), *(p.pid for p in procs)], what="in-process Ray")
                yield ray
            finally:
                procs = list({(p.pid, p.start_ticks): p for p in [*procs, *ray_processes(marker=root)]}.values())
                ray.shutdown()
        assert_processes_gone(procs, what="in-process Ray", timeout=10.0)
    finally:
        _local_root = None
        if not keep:
            shutil.rmtree(root, ignore_errors=True)


_local_root: Path | None = None


def local_ray_processes() -> list[ClusterProcess]:
    """The processes of the in-process Ray started by :func:`local_ray` (empty outside it)."""
    return ray_processes(marker=_local_root) if _local_root is not None else []


def crash_worker_once(marker: str | os.PathLike[str], exit_code: int = 1) -> bool:
    """Kill the calling worker process the first time any task reaches this call; do nothing afterwards.

    Why a marker file: it is shared by all attempts and workers on the node, so exactly one attempt dies
    (``O_EXCL`` makes two concurrent first attempts agree), and the test can read the file to learn that the
    crash really happened. ``os._exit`` skips Python cleanup the way a segfault or the OOM killer would: Ray
    sees a dead worker (a system failure, retried under ``max_retries``), not an exception.
    Returns False when the marker already existed, i.e. on the retry.
    """
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    os.write(fd, f"{os.getpid()}\n".encode())
    os.close(fd)
    os._exit(exit_code)


# --------------------------------------------------------------------------------------------------------------
# pytest glue


def pytest_configure(config: pytest.Config) -> None:
    """Register the ``slow`` marker (the Ray tests are; ``-m 'not slow'`` leaves them out) and ``ray``."""
    config.addinivalue_line("markers", "slow: starts real processes or clusters; deselect with -m 'not slow'")
    config.addinivalue_line("markers", "ray: drives Ray (a test cluster or an in-process Ray); run apart from "
                                       "pytest-xdist workers: -m ray")


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[LocalRayCluster]:
    """A started :class:`LocalRayCluster` (2 CPUs, loopback, private) shared by the session; stopped at exit."""
    import_ray()
    with LocalRayCluster(num_cpus=2) as cluster:
        yield cluster


@pytest.fixture
def ray_driver(ray_cluster: LocalRayCluster) -> Iterator[ModuleType]:
    """This process connected to ``ray_cluster`` for one test (``ray.init(address=...)`` ... ``ray.shutdown()``).

    Yields the ``ray`` module. Fresh per test, so Ray Data context changes and failed jobs do not leak.
    """
    with connect(ray_cluster) as ray:
        yield ray


@pytest.fixture(scope="module")
def ray_local() -> Iterator[ModuleType]:
    """In-process Ray (:func:`local_ray`, 2 CPUs) shared by one test module. Yields the ``ray`` module."""
    with local_ray(num_cpus=2) as ray:
        yield ray


def crashing_contents_task(rec_path: str, *args: Any) -> Any:
    """``mxrec.ray.verify_tasks``'s scan task, whose worker dies the first time any task runs (marker: ``rec_path``
    + ``.crashed``). A driver puts it in place of ``mxrec.ray.verify_tasks._contents_task``; the workers, which import
    the module afresh, then run the real task (on the retry)."""
    from mxrec.ray import verify_tasks

    crash_worker_once(rec_path + ".crashed")
    return verify_tasks._contents_task(rec_path, *args)
