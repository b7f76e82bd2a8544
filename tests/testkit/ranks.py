"""Launch real ``torch.distributed`` ranks as separate processes, bound to loopback, with a hard overall timeout.

Why not torchrun: its rendezvous (a c10d ``TCPStore``) listens on every interface. So does any ``TCPStore``,
whatever host it is given: measured with torch 2.13 (libuv and legacy backends alike), ``tcp://127.0.0.1:P`` and
``env://`` init both leave a listener on ``*:P``. The ranks here therefore rendezvous through a file
(``init_method="file://..."`` in a fresh temporary folder), which opens no socket, and gloo is pinned to the loopback
interface (``GLOO_SOCKET_IFNAME=lo``), so its pair listeners bind 127.0.0.1 only. :func:`listening_sockets` lets a
test check that.

A target is ``"package.module:function"``, ``"path/to/file.py:function"``, or ``"path/to/script.py"``. A function is
called as ``function(rank=r, world_size=n, **kwargs)`` after ``init_process_group`` and must return something JSON
can encode; a script is run as ``__main__`` and its result is its global ``RESULT`` (None if unset). Each rank writes
its result to a JSON file; :func:`run_ranks` returns them in rank order or raises :class:`RanksFailed` with every
rank's exit status and stderr.

Environment of each rank: ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``,
``MASTER_ADDR=127.0.0.1``, ``MASTER_PORT`` (a free port, for code that insists on ``env://``, which brings back the
all-interfaces listener), ``TESTKIT_INIT_METHOD`` (the ``file://`` URL, for code that initialises the group itself
when ``init=False``), ``GLOO_SOCKET_IFNAME``/``TP_SOCKET_IFNAME`` (loopback), ``OMP_NUM_THREADS=1``, and a
``PYTHONPATH`` with ``tests/`` and ``src/`` of this checkout first.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LOOPBACK = "127.0.0.1"
TESTS_DIR = Path(__file__).resolve().parents[1]
SRC_DIR = TESTS_DIR.parent / "src"
STDERR_TAIL = 4000


@dataclass
class RankOutcome:
    """How one rank ended. ``killed`` says why the launcher killed it (``"timeout"``, ``"peer failed"``), if it did;
    ``returncode`` is then negative."""

    rank: int
    returncode: int
    result: Any
    has_result: bool
    stdout: str
    stderr: str
    seconds: float
    killed: str | None

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and self.has_result


class RanksFailed(AssertionError):
    """Some rank failed or the run timed out; ``outcomes`` has every rank's exit status, stdout and stderr."""

    def __init__(self, message: str, outcomes: list[RankOutcome]) -> None:
        super().__init__(message)
        self.outcomes = outcomes


def loopback_interface() -> str:
    """Name of the loopback interface (``lo`` on Linux), for ``GLOO_SOCKET_IFNAME``."""
    names = [name for _, name in socket.if_nameindex()]
    for name in names:
        if name == "lo" or name.startswith("lo"):
            return name
    raise RuntimeError(f"no loopback interface among {names}")


def free_port() -> int:
    """A port that was free on 127.0.0.1 a moment ago (only for ``MASTER_PORT``; racy by nature)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


def launch_ranks(
    target: str,
    world_size: int = 2,
    *,
    kwargs: Mapping[str, Any] | None = None,
    timeout: float = 60.0,
    init: bool = True,
    backend: str = "gloo",
    env: Mapping[str, str] | None = None,
    pythonpath: Sequence[str | os.PathLike[str]] = (),
    workdir: str | os.PathLike[str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    grace: float = 5.0,
) -> list[RankOutcome]:
    """Run ``target`` in ``world_size`` fresh interpreters and wait for all of them, at most ``timeout`` seconds.

    When a rank fails, its peers get ``grace`` seconds to finish (they are usually stuck in a collective) and are
    then killed, so a failure costs seconds, not the whole timeout. Every rank runs in its own session and is
    killed with its process group, so nothing it started survives. ``workdir`` (default: a temporary folder removed
    afterwards) holds the rendezvous file, the spec, each rank's result and its stdout/stderr logs.
    """
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    if timeout <= 0:
        raise ValueError(f"timeout must be positive, got {timeout}")
    with contextlib.ExitStack() as stack:
        if workdir is None:
            work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="testkit-ranks-")))
        else:
            work = Path(workdir)
            work.mkdir(parents=True, exist_ok=True)
        outcomes = _launch(target, world_size, dict(kwargs or {}), timeout, init, backend, dict(env or {}),
                           [str(p) for p in pythonpath], work, cwd, grace)
    return outcomes


def run_ranks(target: str, world_size: int = 2, **options: Any) -> list[Any]:
    """:func:`launch_ranks`, returning each rank's result in rank order, or raising :class:`RanksFailed`."""
    outcomes = launch_ranks(target, world_size, **options)
    failed = [o for o in outcomes if not o.ok]
    if failed:
        lines = [f"{len(failed)} of {world_size} ranks of {target} failed:"]
        for o in outcomes:
            if o.ok:
                lines.append(f"--- rank {o.rank}: ok in {o.seconds:.1f} s")
                continue
            why = (f"killed ({o.killed})" if o.killed
                   else f"exit code {o.returncode}" if o.returncode else "exited 0 without writing a result")
            lines.append(f"--- rank {o.rank}: {why} ({o.seconds:.1f} s); stderr:")
            lines.append(o.stderr[-STDERR_TAIL:].rstrip() or "(empty)")
        raise RanksFailed("\n".join(lines), outcomes)
    return [o.result for o in outcomes]


def _launch(target: str, world_size: int, kwargs: dict[str, Any], timeout: float, init: bool, backend: str,
            extra_env: dict[str, str], pythonpath: list[str], work: Path, cwd: Any, grace: float) -> list[RankOutcome]:
    rendezvous = work / "rendezvous"
    with contextlib.suppress(FileNotFoundError):
        rendezvous.unlink()  # a FileStore file must start absent or empty
    init_url = rendezvous.resolve().as_uri()
    spec = {"target": target, "world_size": world_size, "kwargs": kwargs, "init": init, "backend": backend,
            "init_method": init_url, "timeout": timeout, "results": str(work.resolve())}
    spec_path = work / "spec.json"
    spec_path.write_text(json.dumps(spec))  # TypeError here, early, if kwargs are not JSON

    path_parts = [*pythonpath, str(TESTS_DIR), str(SRC_DIR)]
    if os.environ.get("PYTHONPATH"):
        path_parts.append(os.environ["PYTHONPATH"])
    iface = loopback_interface()
    base_env = dict(os.environ)
    base_env.update({
        "PYTHONPATH": os.pathsep.join(path_parts),
        "PYTHONUNBUFFERED": "1",
        "WORLD_SIZE": str(world_size),
        "LOCAL_WORLD_SIZE": str(world_size),
        "MASTER_ADDR": LOOPBACK,
        "MASTER_PORT": str(free_port()),
        "TESTKIT_INIT_METHOD": init_url,
        "GLOO_SOCKET_IFNAME": iface,
        "TP_SOCKET_IFNAME": iface,
        "OMP_NUM_THREADS": "1",
    })
    base_env.update(extra_env)

    procs: list[subprocess.Popen[bytes]] = []
    started = time.monotonic()
    ended: dict[int, float] = {}
    killed: dict[int, str] = {}
    try:
        for rank in range(world_size):
            rank_env = dict(base_env, RANK=str(rank), LOCAL_RANK=str(rank))
            with open(work / f"rank{rank}.out", "wb") as out, open(work / f"rank{rank}.err", "wb") as err:
                procs.append(subprocess.Popen(
                    [sys.executable, "-m", "testkit._rank_worker", str(spec_path), str(rank)],
                    stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=rank_env, cwd=cwd,
                    start_new_session=True))
        deadline = started + timeout
        first_failure: float | None = None
        while len(ended) < world_size:
            now = time.monotonic()
            for rank, proc in enumerate(procs):
                if rank not in ended and proc.poll() is not None:
                    ended[rank] = now
                    if proc.returncode != 0 and first_failure is None:
                        first_failure = now
            if len(ended) == world_size:
                break
            reason = ("timeout" if now >= deadline
                      else "peer failed" if first_failure is not None and now - first_failure >= grace else None)
            if reason is not None:
                for rank, proc in enumerate(procs):
                    if rank not in ended:
                        _kill_group(proc)
                        killed[rank] = reason
                break
            time.sleep(0.05)
    finally:
        for rank, proc in enumerate(procs):
            if rank not in killed and proc.poll() is None:  # only when the loop above was interrupted
                _kill_group(proc)
                killed[rank] = "launcher interrupted"
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)
            ended.setdefault(rank, time.monotonic())

    outcomes = []
    for rank, proc in enumerate(procs):
        result_path = work / f"rank{rank}.json"
        has_result = result_path.exists()
        result = json.loads(result_path.read_text())["result"] if has_result else None
        outcomes.append(RankOutcome(
            rank=rank, returncode=proc.returncode if proc.returncode is not None else -signal.SIGKILL,
            result=result, has_result=has_result,
            stdout=(work / f"rank{rank}.out").read_text(errors="replace"),
            stderr=(work / f"rank{rank}.err").read_text(errors="replace"),
            seconds=ended[rank] - started, killed=killed.get(rank)))
    return outcomes


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the rank and whatever it started: it leads its own process group (``start_new_session``)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        proc.kill()


# ----------------------------------------------------------------------------------------------------------------
# checking what a process listens on


def _decode_address(hex_address: str) -> str:
    raw = bytes.fromhex(hex_address)
    if len(raw) == 4:
        return socket.inet_ntop(socket.AF_INET, raw[::-1])
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
    return socket.inet_ntop(socket.AF_INET6, words)


def listening_sockets(pid: int | None = None) -> list[tuple[str, int]]:
    """The TCP ``(address, port)`` pairs that process ``pid`` (default: this one) listens on, from ``/proc``.

    Linux only. An address of ``::`` or the IPv4 any-address means every interface.
    """
    pid = os.getpid() if pid is None else pid
    inodes = set()
    fd_dir = Path(f"/proc/{pid}/fd")
    for fd in fd_dir.iterdir():
        with contextlib.suppress(OSError):
            link = os.readlink(fd)
            if link.startswith("socket:["):
                inodes.add(link[len("socket:["):-1])
    found = []
    for table in ("tcp", "tcp6"):
        path = Path(f"/proc/{pid}/net/{table}")
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            fields = line.split()
            if len(fields) < 10 or fields[3] != "0A" or fields[9] not in inodes:  # 0A: LISTEN
                continue
            address, port = fields[1].split(":")
            found.append((_decode_address(address), int(port, 16)))
    return sorted(set(found))


def is_loopback(address: str) -> bool:
    """True for 127.0.0.0/8, ::1 and IPv4-mapped loopback (``::ffff:127.0.0.1``)."""
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback
